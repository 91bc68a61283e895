"""Sharded TFRecord feature stores: image features streamed from disk, never loaded whole.

A 3M × 2048 float16 feature matrix is ≈ 12 GB; the ``.npz`` format of
``grounded_text.data.features`` loads it into memory (as float32: 24 GB). A store
*directory* instead holds the rows in TFRecord shards that ``tf.data`` streams, so
peak memory depends on the shuffle buffer, not on the number of rows. The ``.npz``
path stays the right choice for small sets (Flickr8k: 8k rows).

Layout of a store directory::

    STORE/manifest.json          # {"format", "version", "dim", "dtype", "num_rows",
                                 #  "shards": [{"file", "rows", "bytes"}], "closed"}
    STORE/ids.txt                # one image id per line, in row order (row r = line r)
    STORE/shard-00000.tfrecord   # tf.train.Example per row: "id" bytes, "features" bytes
    ...

Each record is a ``tf.train.Example`` with ``id`` (UTF-8 bytes) and ``features``
(the row's ``dim`` values as raw little-endian ``float16``/``float32`` bytes, read
with ``tf.io.decode_raw``; cheaper to parse than a ``float_list``, and float16
halves the disk and I/O). Stores are written by ``grounded_text.data.store_writer``
(``TFRecordFeatureSink``, ``write_feature_store``). A **caption store** (``TFRecordFeatureSink(...,
captions=True)``, ``write_caption_store``; manifest ``"captions": true`` and
``"num_captions"``) also holds the image's captions in each record (``captions``: a
``bytes_list`` of UTF-8 captions), and ``make_caption_store_dataset`` streams its
caption/image pairs with nothing held per row on the host or in the graph. The manifest is authoritative: a shard
holds *at least*
its ``rows`` records (``bytes`` = its committed size); anything after that (a
crash between a write and the manifest update) is ignored.

For a plain store the caption join does not live in the records: captions are
small next to the features (3.3M CC3M captions ≈ 0.2 GB vs 12 GB of features), one
store then serves any caption source, split, ``--one-caption-per-image`` or slice,
and the join is done once by id (``join_captions`` maps id → row through
``ids.txt``); the stream then joins captions to rows by the row number, with two
dense int arrays (start, count) of ``num_rows`` entries (12 B/row) in the graph —
cheaper than a ``tf.lookup.StaticHashTable`` of string ids. That join holds the split's
captions and two arrays per row in memory; a caption store holds nothing per row (for
one fixed caption split). See ``docs/streaming.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import tensorflow as tf

from grounded_text.data.keys import CAPTION_KEY, FEATURES_KEY, IMAGE_ID_KEY

MANIFEST = "manifest.json"
IDS_FILE = "ids.txt"
FORMAT = "grounded_text.feature_store"
VERSION = 1
DTYPES = {"float16": (np.float16, tf.float16), "float32": (np.float32, tf.float32)}
_PARSE_BATCH = 256  # records parsed per parse_example call


def read_manifest(directory: str | Path) -> dict:
    """Reads and validates ``STORE/manifest.json``.

    Raises:
      FileNotFoundError: no manifest in ``directory``.
      ValueError: not a feature-store manifest, unknown dtype, bad dim, or row
        counts that do not add up. Messages name the file.
    """
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{directory}: no {MANIFEST}; not a feature store directory.")
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: unreadable manifest ({e}).") from e
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        found = m.get("format") if isinstance(m, dict) else None
        raise ValueError(f"{path}: not a {FORMAT} manifest (format={found!r}).")
    if m.get("version") != VERSION:
        raise ValueError(f"{path}: unsupported version {m.get('version')!r} (this reader: {VERSION}).")
    if m.get("dtype") not in DTYPES:
        raise ValueError(f"{path}: dtype {m.get('dtype')!r} not in {sorted(DTYPES)}.")
    if not isinstance(m.get("dim"), int) or m["dim"] < 1:
        raise ValueError(f"{path}: dim must be a positive int, got {m.get('dim')!r}.")
    shards = m.get("shards")
    if not isinstance(shards, list) or any(not {"file", "rows", "bytes"} <= set(s) for s in shards):
        raise ValueError(f"{path}: 'shards' must be a list of {{file, rows, bytes}}.")
    total = sum(int(s["rows"]) for s in shards)
    if total != m.get("num_rows"):
        raise ValueError(f"{path}: num_rows {m.get('num_rows')} != sum of shard rows {total}.")
    return m


def read_ids(directory: Path, num_rows: int) -> list[str]:
    """The first ``num_rows`` image ids of ``directory/ids.txt``, in row order.

    Raises:
      FileNotFoundError: no ``ids.txt``.
      ValueError: fewer ids than ``num_rows``.
    """
    path = directory / IDS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{directory}: {IDS_FILE} is missing.")
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < num_rows:
        raise ValueError(f"{path}: {len(lines)} ids for {num_rows} rows in the manifest.")
    return lines[:num_rows]


class StreamingFeatureStore:
    """Read side of a store directory: rows streamed with ``tf.data``.

    Attributes:
      path: the store directory (str).
      dim: d.
      dtype: ``"float16"`` or ``"float32"`` (on disk; the stream yields float32).
      num_rows: n.
      shards: list of (file path, rows, first row).
      has_captions: a caption store (records carry the captions).
      num_captions: captions in a caption store (0 otherwise).
    """

    #: Rows stay on disk (``grounded_text.data.features.ImageFeatureStore.streamed``).
    streamed = True

    def __init__(self, directory: str | Path):
        directory = Path(directory)
        m = read_manifest(directory)
        self.path = str(directory)
        self.dim, self.dtype, self.num_rows = m["dim"], m["dtype"], m["num_rows"]
        self.closed = bool(m.get("closed"))
        self.has_captions = bool(m.get("captions"))
        self.num_captions = int(m.get("num_captions", 0))
        self.shards = []
        offset = 0
        for s in m["shards"]:
            f = directory / s["file"]
            if not f.is_file():
                raise FileNotFoundError(f"{directory}: shard {s['file']!r} listed in {MANIFEST} is missing.")
            if f.stat().st_size < s["bytes"]:
                raise ValueError(
                    f"{directory}: shard {s['file']!r} is truncated ({f.stat().st_size} bytes, "
                    f"manifest says {s['bytes']})."
                )
            self.shards.append((str(f), int(s["rows"]), offset))
            offset += int(s["rows"])
        self._check_row_width(directory)
        self._ids = None

    def _check_row_width(self, directory: Path) -> None:
        """Checks the first record of every shard against the manifest's ``dim`` and ``dtype``
        (one small read per shard), so that a manifest that disagrees with its rows is refused
        here, naming the files, and not by a shape check deep inside a ``tf.data`` stream.

        Raises:
          ValueError: a shard's rows hold another number of bytes than ``dim`` values of
            ``dtype``, or its first record is not a feature row.
        """
        width = self.dim * np.dtype(DTYPES[self.dtype][0]).itemsize
        for file, rows, _ in self.shards:
            if rows < 1:
                continue
            try:
                with open(file, "rb") as f:
                    head = f.read(12)  # TFRecord framing: uint64 length, uint32 its CRC, data, uint32 CRC
                    length = int.from_bytes(head[:8], "little")
                    data = f.read(length) if len(head) == 12 and length <= 1 << 30 else b""
                example = tf.train.Example.FromString(data) if len(data) == length and data else None
                found = example.features.feature["features"].bytes_list.value if example is not None else []
            except Exception:  # any unreadable first record: reported below
                found = []
            if len(found) != 1:
                raise ValueError(f"{directory}: the first record of shard {Path(file).name!r} is not a feature row "
                                 "(no 'features' bytes); the store is damaged: write it again.")
            if len(found[0]) != width:
                values = len(found[0]) / np.dtype(DTYPES[self.dtype][0]).itemsize
                raise ValueError(f"{directory / MANIFEST} says dim={self.dim} ({self.dtype}: {width} bytes a row), but "
                                 f"the rows of shard {Path(file).name!r} hold {len(found[0])} bytes ({values:g} "
                                 f"values): the manifest does not match its rows; write the store again.")

    # --- the ImageFeatureStore protocol (grounded_text.data.features) -------------
    @property
    def ids(self) -> np.ndarray:
        """[n] str array of ids in row order (read from ``ids.txt`` on first use)."""
        if self._ids is None:
            self._ids = np.array(read_ids(Path(self.path), self.num_rows), dtype=object)
        return self._ids

    def index(self) -> dict[str, int]:
        """Maps image id → row."""
        return {i: r for r, i in enumerate(self.ids.tolist())}

    @property
    def features(self) -> "StreamingFeatureStore":
        """The store itself: rows are streamed, never materialised. ``CaptionPairs``
        joined to a streaming store carry it here, and ``make_dataset`` then streams."""
        return self

    def __len__(self) -> int:
        return self.num_rows

    def take_rows(self, rows) -> np.ndarray:
        """Materialises some rows (one pass over the store; for evaluation sets).

        Args:
          rows: int array-like [m] of rows in ``[0, num_rows)`` (repeats allowed).

        Returns:
          [m] + ``[dim]`` float32 array, row i = store row ``rows[i]``.

        Raises:
          IndexError: a row outside the store.
        """
        rows = np.asarray(rows, dtype=np.int64)
        flat = rows.reshape(-1)
        if flat.size and (flat.min() < 0 or flat.max() >= self.num_rows):
            raise IndexError(f"{self.path}: rows outside [0, {self.num_rows}).")
        want = np.unique(flat)
        mask = np.zeros(self.num_rows, dtype=bool)
        mask[want] = True
        mask_t = tf.constant(mask)
        ds = self._records(False, 0, 1).filter(lambda r, s: tf.gather(mask_t, r)).batch(_PARSE_BATCH)
        ds = ds.map(lambda r, s: (r, tf.cast(self._parse(s)[1], tf.float32)))
        got_rows, got = [np.zeros(0, np.int64)], [np.zeros((0, self.dim), np.float32)]
        for r, f in ds.as_numpy_iterator():
            got_rows.append(r)
            got.append(f)
        got_rows, got = np.concatenate(got_rows), np.concatenate(got)
        order = np.argsort(got_rows)
        return got[order][np.searchsorted(got_rows[order], flat)].reshape(rows.shape + (self.dim,))

    def __getitem__(self, rows) -> np.ndarray:
        """``store[rows]`` = ``take_rows(rows)`` for an int or int array (as for the ``.npz`` matrix)."""
        if isinstance(rows, slice):
            rows = np.arange(self.num_rows)[rows]
        return self.take_rows(rows)

    # --- streams ------------------------------------------------------------------
    def _records(self, shuffle: bool, seed, cycle_length: int, reshuffle: bool = True) -> tf.data.Dataset:
        """(row int64, serialized Example) over all shards, interleaved (``seed``: an int or
        an int64 scalar tensor; ``reshuffle``: a new shard order per iteration)."""
        if not self.shards:
            raise ValueError(f"{self.path}: the store has no rows.")
        files, rows, offsets = zip(*self.shards)
        ds = tf.data.Dataset.from_tensor_slices(
            (list(files), np.array(rows, np.int64), np.array(offsets, np.int64)))
        if shuffle:
            ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=reshuffle)

        def one_shard(f, n, o):
            recs = tf.data.TFRecordDataset(f, buffer_size=1 << 20).take(n)
            return tf.data.Dataset.zip((tf.data.Dataset.range(o, o + n), recs))

        # Unshuffled streams keep the store's row order (one shard after another).
        cycle = max(1, min(cycle_length, len(files))) if shuffle else 1
        return ds.interleave(one_shard, cycle_length=cycle, block_length=1,
                             num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    def _parse(self, serialized):
        """[b] serialized → (ids string[b], features stored dtype [b, dim])."""
        parsed = tf.io.parse_example(serialized, {
            "id": tf.io.FixedLenFeature([], tf.string),
            "features": tf.io.FixedLenFeature([], tf.string),
        })
        feats = tf.io.decode_raw(parsed["features"], DTYPES[self.dtype][1], little_endian=True)
        return parsed["id"], tf.ensure_shape(feats, [None, self.dim])

    def dataset(self, shuffle: bool = True, seed: int = 0, shuffle_buffer: int = 10000, cycle_length: int = 4,
                batch_size: int | None = None, with_rows: bool = False) -> tf.data.Dataset:
        """Every row once per epoch.

        Args:
          shuffle: shuffle the shard order (per epoch), read ``cycle_length``
            shards interleaved, and shuffle the rows through a ``shuffle_buffer``
            of rows; seeded, so the same seed gives the same order (and a
            different order each epoch). ``False``: the store's row order.
          seed: shuffle seed.
          shuffle_buffer: rows held for shuffling (memory ≈ buffer × dim × itemsize).
          cycle_length: shards read concurrently (``interleave``, deterministic).
          batch_size: batch the rows (the last batch may be short), or ``None``.
          with_rows: also yield the int64 row (position in ``ids.txt``).

        Returns:
          Dataset of ``(id string, features float32 [dim])`` (``[B]``/``[B, dim]``
          when batched), preceded by ``row int64`` when ``with_rows``.
        """
        ds = self._records(shuffle, seed, cycle_length).batch(_PARSE_BATCH)
        ds = ds.map(lambda r, s: (r,) + self._parse(s), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        ds = ds.unbatch()
        if shuffle:
            ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        if batch_size:
            ds = ds.batch(batch_size)

        def cast(r, i, f):
            f = tf.cast(f, tf.float32)
            return (r, i, f) if with_rows else (i, f)

        ds = ds.map(cast, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return ds.prefetch(tf.data.AUTOTUNE)


def make_streaming_dataset(pairs, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                           drop_remainder: bool = True, shuffle_buffer: int = 10000,
                           cycle_length: int = 4, epoch: tf.Variable | None = None) -> tf.data.Dataset:
    """``make_dataset`` for ``CaptionPairs`` joined to a ``StreamingFeatureStore``.

    The store is streamed once per epoch; rows of images without a caption in
    ``pairs`` are skipped before their features are parsed; each image row is
    expanded to its captions, the pairs go through a seeded shuffle buffer of
    ``shuffle_buffer`` pairs (features still in the store dtype), then batches.
    All in-graph: no Python per batch.

    Args:
      pairs: ``CaptionPairs`` whose ``features`` is a ``StreamingFeatureStore``
        (from ``join_captions``) and ``feature_rows`` rows of it.
      batch_size: B.
      shuffle, seed: shard order + shuffle buffer, seeded, reshuffled per epoch.
      drop_remainder: drop the last short batch.
      shuffle_buffer: pairs held for shuffling.
      cycle_length: shards read concurrently.
      epoch: an int64 ``tf.Variable`` with the 0-based epoch, read at each iteration's
        start: shard order and shuffle buffer are then seeded by ``(seed, epoch)``, so a
        resumed run replays the epoch's order (see ``make_dataset``).

    Returns:
      Dataset of ``{"caption": string[B], "image_features": float32[B, d],
      "image_id": int64[B]}`` (``image_id`` = the image's row in the store, as in
      ``make_dataset``), with known cardinality.

    Raises:
      ValueError: empty split, ``batch_size < 1``, rows outside the store.
    """
    store = pairs.features
    if not isinstance(store, StreamingFeatureStore):
        raise ValueError("make_streaming_dataset: pairs.features must be a StreamingFeatureStore.")
    n = len(pairs)
    if n == 0:
        raise ValueError("make_streaming_dataset: the split has no caption/image pairs.")
    if batch_size < 1:
        raise ValueError(f"make_streaming_dataset: batch_size must be >= 1, got {batch_size}.")
    rows = np.asarray(pairs.feature_rows, dtype=np.int64)
    if rows.min() < 0 or rows.max() >= store.num_rows:
        raise ValueError(f"make_streaming_dataset: feature rows outside [0, {store.num_rows}) of {store.path}.")
    order = np.argsort(rows, kind="stable")
    captions = np.asarray(pairs.captions)[order]
    captions = tf.constant(captions if captions.dtype.kind in "SU" else captions.astype(str))
    del order
    counts_np = np.bincount(rows, minlength=store.num_rows).astype(np.int64)
    starts_np = np.cumsum(counts_np) - counts_np
    counts, starts = tf.constant(counts_np), tf.constant(starts_np)

    def expand(r, s):
        _, feats = store._parse(s)
        k = tf.gather(counts, r)
        first = tf.gather(starts, r)
        caption_idx = tf.ragged.range(first, first + k).flat_values
        return caption_idx, tf.repeat(r, k), tf.repeat(feats, k, axis=0)

    def caption_of(c):
        return tf.gather(captions, c)

    return _pair_batches(store, n, expand, lambda r: tf.gather(counts, r) > 0, caption_of, batch_size,
                         shuffle=shuffle, seed=seed, drop_remainder=drop_remainder, shuffle_buffer=shuffle_buffer,
                         cycle_length=cycle_length, epoch=epoch)


def _pair_batches(store: "StreamingFeatureStore", n: int, expand, keep_row, caption_of, batch_size: int, *,
                  shuffle: bool, seed: int, drop_remainder: bool, shuffle_buffer: int, cycle_length: int,
                  epoch: tf.Variable | None) -> tf.data.Dataset:
    """The pipeline shared by both pair streams: records (row, serialized) → ``keep_row``
    filter → batches of ``_PARSE_BATCH`` → ``expand`` (→ per pair: caption or its index, row,
    stored features) → seeded shuffle buffer → batches → ``{"caption": caption_of(...),
    "image_features", "image_id"}``, ``n`` pairs per epoch."""
    def pairs_stream(seed_value, reshuffle: bool):
        ds = store._records(shuffle, seed_value, cycle_length, reshuffle)
        if keep_row is not None:
            ds = ds.filter(lambda r, s: keep_row(r))
        ds = ds.batch(_PARSE_BATCH)
        ds = ds.map(expand, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch()
        if shuffle:
            ds = ds.shuffle(shuffle_buffer, seed=seed_value, reshuffle_each_iteration=reshuffle)
        return ds

    if shuffle and epoch is not None:
        def epoch_stream(e):
            # The seed tensor is the whole op seed of both shuffles: TF cannot combine a tensor
            # op seed with a global seed of 0 (set by keras.utils.set_random_seed(0)), so this
            # function's graph has none.
            tf.compat.v1.get_default_graph().seed = None
            return pairs_stream(tf.constant(seed, tf.int64) * 1_000_003 + tf.cast(e, tf.int64), False)

        # One pipeline per iteration, seeded by (seed, epoch) read at its start.
        ds = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).map(lambda _: epoch.read_value()).flat_map(
            epoch_stream)
    else:
        ds = pairs_stream(seed, True)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    ds = ds.map(
        lambda c, r, f: {CAPTION_KEY: caption_of(c), FEATURES_KEY: tf.cast(f, tf.float32), IMAGE_ID_KEY: r},
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True,
    )
    steps = n // batch_size if drop_remainder else -(-n // batch_size)
    ds = ds.apply(tf.data.experimental.assert_cardinality(steps))
    return ds.prefetch(tf.data.AUTOTUNE)


def make_caption_store_dataset(store, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                               drop_remainder: bool = True, shuffle_buffer: int = 10000,
                               cycle_length: int = 4, epoch: tf.Variable | None = None) -> tf.data.Dataset:
    """The caption/image pairs of a caption store, streamed: the captions come from the
    records themselves, so nothing is held per row (no captions, ids or join arrays; the
    manifest's shard list is all that grows with the store).

    Same pipeline and batches as ``make_streaming_dataset`` (shard-order shuffle, interleave,
    parse, each row expanded to its captions, seeded shuffle buffer of pairs, batches,
    known cardinality, ``epoch`` for replayable orders); rows with no caption serve nothing.

    Args:
      store: a ``StreamingFeatureStore`` (or its directory) written with captions
        (``write_caption_store`` or ``TFRecordFeatureSink(..., captions=True)``).
      batch_size, shuffle, seed, drop_remainder, shuffle_buffer, cycle_length, epoch:
        as for ``make_streaming_dataset``.

    Returns:
      Dataset of ``{"caption": string[B], "image_features": float32[B, d],
      "image_id": int64[B]}`` (``image_id`` = the image's row in the store); an epoch
      serves each of the store's ``num_captions`` pairs once (minus the dropped remainder).

    Raises:
      ValueError: a store without captions, no captions, or ``batch_size < 1``.
    """
    if not isinstance(store, StreamingFeatureStore):
        store = StreamingFeatureStore(store)
    if not store.has_captions:
        raise ValueError(f"make_caption_store_dataset: {store.path} holds no captions (a plain feature store: "
                         f"join captions with make_streaming_dataset).")
    if store.num_captions == 0:
        raise ValueError(f"make_caption_store_dataset: {store.path} has no caption/image pairs.")
    if batch_size < 1:
        raise ValueError(f"make_caption_store_dataset: batch_size must be >= 1, got {batch_size}.")
    spec = {"features": tf.io.FixedLenFeature([], tf.string), "captions": tf.io.RaggedFeature(tf.string)}

    def expand(r, s):
        parsed = tf.io.parse_example(s, spec)
        feats = tf.ensure_shape(tf.io.decode_raw(parsed["features"], DTYPES[store.dtype][1], little_endian=True),
                                [None, store.dim])
        caps = parsed["captions"]  # ragged [b, (k)]
        k = caps.row_lengths()
        return caps.flat_values, tf.repeat(r, k), tf.repeat(feats, k, axis=0)

    return _pair_batches(store, store.num_captions, expand, None, lambda c: c, batch_size, shuffle=shuffle,
                         seed=seed, drop_remainder=drop_remainder, shuffle_buffer=shuffle_buffer,
                         cycle_length=cycle_length, epoch=epoch)
