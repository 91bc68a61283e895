"""Writing a sharded TFRecord feature store (its layout: ``grounded_text.data.streaming``):
``TFRecordFeatureSink`` appends rows durably and resumes a killed extraction where it stopped;
``write_feature_store`` and ``write_caption_store`` convert in-memory features (an ``.npz``, a
``CaptionPairs`` split) to a store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import tensorflow as tf

from grounded_text.data.provenance import check_provenance
from grounded_text.data.streaming import DTYPES, FORMAT, IDS_FILE, MANIFEST, VERSION, read_ids, read_manifest
from grounded_text.utils.durable import atomic_write, fsync_file


def _write_json_atomic(path: Path, obj: dict) -> None:
    atomic_write(path, lambda f: f.write(json.dumps(obj, indent=1).encode("utf-8")))


class TFRecordFeatureSink:
    """Writes a sharded TFRecord feature store (Contract 1 of the extractor).

    ``append`` is durable on return (records flushed and fsynced, ids fsynced, the
    manifest replaced atomically), so a killed extraction resumes where it stopped:
    constructing a sink on an existing store re-reads its manifest and ids, and new
    rows go to new shards (committed shards are never rewritten).

    Args:
      directory: the store directory (created).
      dim: d, features per row; must equal the existing store's.
      dtype: ``"float16"`` (default; half the disk, values rounded to the nearest
        float16) or ``"float32"`` (bit-exact); must equal the existing store's.
      rows_per_shard: rows per shard file (default 32768 ≈ 128 MiB at d=2048
        float16).
      captions: a caption store: every ``append`` gives each row's captions, stored in
        its record (``make_caption_store_dataset``); must equal the existing store's.
      provenance: what makes the rows (network, weights, crops, image size, preprocessing:
        ``grounded_text.vision.networks.feature_provenance``), recorded in the manifest; an
        existing store that records another is refused (``None``: not checked; the store's
        record is kept).

    Raises:
      ValueError: bad ``dim``/``dtype``/``rows_per_shard``, or an existing store
        with another dim, dtype, ``captions`` or ``provenance`` (the message names both).
    """

    def __init__(self, directory: str | Path, dim: int, dtype: str = "float16", rows_per_shard: int = 32768,
                 captions: bool = False, provenance: dict | None = None):
        if dtype not in DTYPES:
            raise ValueError(f"TFRecordFeatureSink: dtype must be one of {sorted(DTYPES)}, got {dtype!r}.")
        if int(dim) < 1:
            raise ValueError(f"TFRecordFeatureSink: dim must be >= 1, got {dim}.")
        if int(rows_per_shard) < 1:
            raise ValueError(f"TFRecordFeatureSink: rows_per_shard must be >= 1, got {rows_per_shard}.")
        self.directory = Path(directory)
        self.dim, self.dtype, self.rows_per_shard = int(dim), dtype, int(rows_per_shard)
        self.captions = bool(captions)
        self.provenance = None if provenance is None else dict(provenance)
        self._num_captions = 0
        self._np_dtype = DTYPES[dtype][0]
        self.directory.mkdir(parents=True, exist_ok=True)
        if (self.directory / MANIFEST).is_file():
            m = read_manifest(self.directory)
            if m["dim"] != self.dim or m["dtype"] != self.dtype:
                raise ValueError(
                    f"{self.directory}: existing store has dim={m['dim']} dtype={m['dtype']}; "
                    f"cannot append dim={self.dim} dtype={self.dtype}."
                )
            if bool(m.get("captions")) != self.captions:
                raise ValueError(f"{self.directory}: existing store has captions={bool(m.get('captions'))}; "
                                 f"cannot append with captions={self.captions}.")
            check_provenance(m.get("provenance"), provenance, self.directory)
            provenance = provenance or m.get("provenance")
            self.provenance = None if provenance is None else dict(provenance)
            self._num_captions = int(m.get("num_captions", 0))
            self._shards = m["shards"]
            ids = read_ids(self.directory, m["num_rows"])
            # Drop ids written after the last committed manifest (a crash mid-append); replaced
            # atomically, never written through a link planted at its name.
            kept = "".join(i + "\n" for i in ids).encode("utf-8")
            atomic_write(self.directory / IDS_FILE, lambda f: f.write(kept))
            self._ids = set(ids)
            if len(self._ids) != len(ids):
                raise ValueError(f"{self.directory}: {IDS_FILE} has duplicate ids.")
        else:
            self._shards, self._ids = [], set()
            atomic_write(self.directory / IDS_FILE, lambda f: None)
        self._num_rows = sum(s["rows"] for s in self._shards)
        self._writer = None
        self._current = None  # the shard entry being written (in self._shards once it has rows)
        self._closed = False
        self._commit(closed=False)

    def existing_ids(self) -> set[str]:
        """Ids already stored (committed), for resuming."""
        return set(self._ids)

    @property
    def num_rows(self) -> int:
        return self._num_rows

    def append(self, ids, features, captions=None) -> None:
        """Appends rows; durable on return.

        Args:
          ids: [n] str, new image ids (no newline, not already stored, unique).
          features: [n, dim] float array (any float dtype; stored as the store's dtype).
          captions: a caption store's n lists of str (each row's captions, stored in
            its record; an empty list is allowed: the row then serves no pair);
            ``None`` for a plain store.

        Raises:
          ValueError: shape mismatch (naming the dims), an empty/duplicate/already
            stored id, or a row with NaN/Inf (or a value beyond float16 range in a
            float16 store), naming the first offending id; captions given to a plain
            store, missing for a caption store, or not one list per row. Nothing is
            written then.
          RuntimeError: the sink is closed.
        """
        if self._closed:
            raise RuntimeError(f"{self.directory}: append after close().")
        ids = [str(i) for i in np.asarray(ids).reshape(-1).tolist()]
        if (captions is not None) != self.captions:
            raise ValueError(f"{self.directory}: captions must be given to a caption store and only to one "
                             f"(this store: captions={self.captions}).")
        if captions is not None:
            captions = [[c.encode("utf-8") if isinstance(c, str) else bytes(c) for c in row] for row in captions]
            if len(captions) != len(ids):
                raise ValueError(f"{self.directory}: {len(captions)} caption lists for {len(ids)} rows.")
        feats = np.asarray(features)
        if feats.ndim != 2 or feats.shape[0] != len(ids) or feats.shape[1] != self.dim:
            raise ValueError(
                f"{self.directory}: append expects features [n={len(ids)}, dim={self.dim}], got {feats.shape}."
            )
        if feats.dtype.kind not in "fiu":
            raise ValueError(f"{self.directory}: features must be numeric, got {feats.dtype}.")
        seen = set()
        for i in ids:
            if not i or "\n" in i or "\r" in i:
                raise ValueError(f"{self.directory}: invalid image id {i!r} (empty or contains a newline).")
            if i in self._ids:
                raise ValueError(f"{self.directory}: id {i!r} is already stored.")
            if i in seen:
                raise ValueError(f"{self.directory}: id {i!r} appears twice in one append.")
            seen.add(i)
        bad = ~np.isfinite(feats.astype(np.float64)).all(axis=1)
        if bad.any():
            raise ValueError(
                f"{self.directory}: {int(bad.sum())} row(s) with NaN/Inf refused, e.g. id {ids[int(np.argmax(bad))]!r}."
            )
        with np.errstate(over="ignore"):
            stored = np.ascontiguousarray(feats.astype(np.dtype(self._np_dtype).newbyteorder("<")))
        bad = ~np.isfinite(stored).all(axis=1)
        if bad.any():
            raise ValueError(
                f"{self.directory}: {int(bad.sum())} row(s) overflow {self.dtype} (|x| > 65504), "
                f"e.g. id {ids[int(np.argmax(bad))]!r}; use dtype='float32'."
            )
        start = 0
        while start < len(ids):
            if self._current is None or self._current["rows"] >= self.rows_per_shard:
                self._open_shard()
            take = min(len(ids) - start, self.rows_per_shard - self._current["rows"])
            for j in range(start, start + take):
                feature = {
                    "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[ids[j].encode("utf-8")])),
                    "features": tf.train.Feature(bytes_list=tf.train.BytesList(value=[stored[j].tobytes()])),
                }
                if captions is not None:
                    feature["captions"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=captions[j]))
                ex = tf.train.Example(features=tf.train.Features(feature=feature))
                self._writer.write(ex.SerializeToString())
            self._writer.flush()
            shard_path = self.directory / self._current["file"]
            fsync_file(shard_path)
            # O_NOFOLLOW: the ids file this sink created, never a link planted at its name.
            fd = os.open(self.directory / IDS_FILE, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                f.write("".join(i + "\n" for i in ids[start:start + take]))
                f.flush()
                os.fsync(f.fileno())
            self._current["rows"] += take
            self._current["bytes"] = shard_path.stat().st_size
            if not self._shards or self._shards[-1] is not self._current:
                self._shards.append(self._current)
            self._num_rows += take
            if captions is not None:
                self._num_captions += sum(len(c) for c in captions[start:start + take])
            self._ids.update(ids[start:start + take])
            self._commit(closed=False)
            start += take

    def _open_shard(self) -> None:
        if self._writer is not None:
            self._writer.close()
        name = f"shard-{len(self._shards):05d}.tfrecord"
        self._writer = tf.io.TFRecordWriter(str(self.directory / name))
        self._current = {"file": name, "rows": 0, "bytes": 0}

    def _commit(self, closed: bool) -> None:
        manifest = {
            "format": FORMAT, "version": VERSION, "dim": self.dim, "dtype": self.dtype,
            "num_rows": self._num_rows, "rows_per_shard": self.rows_per_shard,
            "shards": self._shards, "closed": closed,
        }
        if self.captions:
            manifest.update(captions=True, num_captions=self._num_captions)
        if self.provenance is not None:
            manifest["provenance"] = self.provenance
        _write_json_atomic(self.directory / MANIFEST, manifest)

    def close(self) -> Path:
        """Closes the open shard, writes the final manifest atomically; returns the store directory."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._commit(closed=True)
        self._closed = True
        return self.directory

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self._closed:
            self.close()


def write_caption_store(directory: str | Path, pairs, dtype: str = "float16", rows_per_shard: int = 32768,
                        batch: int = 4096) -> Path:
    """Writes the images of ``pairs`` (a ``CaptionPairs`` split, e.g. Flickr8k train joined to
    an ``.npz``) as a caption store: one record per image, in order of first appearance in
    ``pairs``, with its id, features and its captions in ``pairs`` order.

    Args:
      directory: the store directory (new, or a caption store to extend: images already
        stored are skipped).
      pairs: ``CaptionPairs`` with in-memory ``features`` [n, d].
      dtype: ``"float16"`` or ``"float32"`` (bit-exact).
      rows_per_shard, batch: shard size, images per ``append``.

    Returns:
      ``directory`` as a ``Path``.

    Raises:
      ValueError: as ``TFRecordFeatureSink.append``; one image id on several feature rows.
    """
    rows = np.asarray(pairs.feature_rows, dtype=np.int64)
    image_ids = np.asarray(pairs.image_ids).astype(str)
    uniq_rows, first = np.unique(rows, return_index=True)
    order = np.argsort(first, kind="stable")
    uniq_rows, first = uniq_rows[order], first[order]
    by_row: dict[int, list[str]] = {int(r): [] for r in uniq_rows}
    for r, c in zip(rows.tolist(), np.asarray(pairs.captions).tolist()):
        by_row[r].append(c.decode("utf-8") if isinstance(c, bytes) else str(c))
    ids = image_ids[first]
    if len(set(ids.tolist())) != len(ids):
        raise ValueError("write_caption_store: an image id is joined to several feature rows.")
    sink = TFRecordFeatureSink(directory, np.asarray(pairs.features).shape[1], dtype=dtype,
                               rows_per_shard=rows_per_shard, captions=True)
    have = sink.existing_ids()
    todo = [j for j, i in enumerate(ids.tolist()) if i not in have]
    for s in range(0, len(todo), batch):
        part = todo[s:s + batch]
        sink.append(ids[part], np.asarray(pairs.features)[uniq_rows[part]],
                    [by_row[int(uniq_rows[j])] for j in part])
    return sink.close()


def write_feature_store(directory: str | Path, ids, features, dtype: str = "float16",
                        rows_per_shard: int = 32768, batch: int = 4096, provenance: dict | None = None) -> Path:
    """Converts an in-memory ``(ids [n], features [n, d])`` (e.g. an ``.npz``) to a store directory
    (``provenance``: what made the rows, e.g. the ``.npz``'s record; see ``TFRecordFeatureSink``)."""
    features = np.asarray(features)
    sink = TFRecordFeatureSink(directory, features.shape[1], dtype=dtype, rows_per_shard=rows_per_shard,
                               provenance=provenance)
    have = sink.existing_ids()
    ids = np.asarray(ids).astype(str)
    keep = np.array([i not in have for i in ids.tolist()], dtype=bool)
    ids, features = ids[keep], features[keep]
    for s in range(0, len(ids), batch):
        sink.append(ids[s:s + batch], features[s:s + batch])
    return sink.close()
