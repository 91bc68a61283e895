"""Prepared datasets: captions + image-feature store in one folder, and their TFDS export.

A *prepared folder* (written by ``python -m grounded_text.prepare``)::

    OUT/dataset.json      # manifest: format, source, feature store, counts per split
    OUT/captions.jsonl    # one caption per line: {"image_id", "index", "text", "split"}
    OUT/features.npz      # the image-feature store (ids = image file names)
    OUT/tfds/             # optional: the same data as a TFDS dataset (see export_tfds)

The TFDS export has one example per image with features ``image_id`` (text),
``captions`` (sequence of text), ``caption_index`` (sequence of int64) and
``image_features`` (float32 [d]); splits ``train``/``dev``/``test`` (captions with no
split and images without captions are not exported). It is written with
``tfds.dataset_builders.store_as_tfds_dataset`` and read back with
``tfds.builder_from_directory`` (or ``tfds.load(name, data_dir=...)``), so it can be
shared like any TFDS dataset.

``load_pairs(data_config, root)`` is the trainer's one entry point: the Flickr8k
release, a prepared folder or a TFDS export, all joined by image id into
``SplitPairs`` (``grounded_text.data.pairs``).
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import numpy as np

from grounded_text.data.features import FeatureStore, open_feature_store
from grounded_text.data.flickr8k import SPLITS, Caption
from grounded_text.data.pairs import join_captions, load_flickr8k_pairs
from grounded_text.utils.extras import require
from grounded_text.utils.quiet import GroundedTextWarning

PREPARED_MANIFEST = "dataset.json"
CAPTIONS_FILE = "captions.jsonl"
FEATURES_FILE = "features.npz"
TFDS_DIR = "tfds"
PREPARED_FORMAT = "grounded_text.prepared/1"
TFDS_NAME = "grounded_text_pairs"


# --------------------------------------------------------------------------- captions file


def write_captions(captions: list[Caption], path: str | Path) -> Path:
    """Writes ``captions.jsonl`` (UTF-8, one JSON object per caption, in order)."""
    path = Path(path)
    with open(path, "w", encoding="utf-8") as f:
        for c in captions:
            f.write(json.dumps({"image_id": c.image_id, "index": c.index, "text": c.text, "split": c.split},
                               ensure_ascii=False) + "\n")
    return path


def read_captions(path: str | Path) -> list[Caption]:
    """Reads ``captions.jsonl``.

    Raises:
      FileNotFoundError: missing file.
      ValueError (naming file and line): not UTF-8, not JSON, a missing key, a bad split.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Captions file {str(path)!r} does not exist.")
    out = []
    try:
        lines = path.read_bytes().decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not valid UTF-8 (byte {e.start}).") from e
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            c = Caption(str(d["image_id"]), int(d["index"]), str(d["text"]), d["split"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}:{lineno}: expected {{'image_id', 'index', 'text', 'split'}} ({e!r}).") from e
        if c.split not in (*SPLITS, None):
            raise ValueError(f"{path}:{lineno}: unknown split {c.split!r}.")
        out.append(c)
    return out


def split_counts(captions: list[Caption]) -> dict:
    out = {}
    for s in (*SPLITS, None):
        rows = [c for c in captions if c.split == s]
        out[str(s)] = {"captions": len(rows), "images": len({c.image_id for c in rows})}
    return out


def write_prepared(out: str | Path, captions: list[Caption], store_path: str | Path | None, *,
                   source: str, extra: dict | None = None) -> Path:
    """Writes ``captions.jsonl`` and ``dataset.json`` into ``out`` (the store is written
    by the extractor, or given as an existing file: recorded relative when inside ``out``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_captions(captions, out / CAPTIONS_FILE)
    store = None
    if store_path is not None:
        store_path = Path(store_path).resolve()
        try:
            store = str(store_path.relative_to(out.resolve()))
        except ValueError:
            store = str(store_path)
    manifest = {"format": PREPARED_FORMAT, "source": source, "captions": CAPTIONS_FILE, "features": store,
                "splits": split_counts(captions), **(extra or {})}
    (out / PREPARED_MANIFEST).write_text(json.dumps(manifest, indent=2))
    return out


def load_prepared(folder: str | Path, features: str | Path | None = None) -> tuple[list[Caption], FeatureStore]:
    """Reads a prepared folder.

    Args:
      folder: the folder with ``dataset.json``.
      features: a feature store overriding the manifest's (e.g. another CNN's).

    Returns:
      (captions, store): the store as ``open_feature_store`` opens it (an ``.npz`` in
      memory, a store directory streamed from disk).

    Raises:
      FileNotFoundError: no manifest / captions / store.
      ValueError: unknown manifest format, or the manifest names no feature store
        and none is given.
    """
    folder = Path(folder)
    manifest_path = folder / PREPARED_MANIFEST
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{str(folder)!r} is not a prepared dataset folder (no {PREPARED_MANIFEST}).")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("format") != PREPARED_FORMAT:
        raise ValueError(f"{manifest_path}: format {manifest.get('format')!r}, expected {PREPARED_FORMAT!r}.")
    captions = read_captions(folder / manifest.get("captions", CAPTIONS_FILE))
    store_path = features or manifest.get("features")
    if not store_path:
        raise ValueError(f"{manifest_path}: no feature store recorded; pass one (--features).")
    store_path = Path(store_path)
    if not store_path.is_absolute() and not store_path.exists():
        store_path = folder / store_path
    return captions, open_feature_store(store_path)


# --------------------------------------------------------------------------- TFDS export


def _examples(captions: list[Caption], store, split: str) -> list[dict]:
    row = store.index()
    by_image: dict[str, list[Caption]] = {}
    for c in captions:
        if c.split == split and c.image_id in row:
            by_image.setdefault(c.image_id, []).append(c)
    # One gather of the split's rows (one pass over a streaming store).
    feats = store.features[np.array([row[i] for i in by_image], dtype=np.int64)]
    # (key, example) pairs: the key fixes the order with disable_shuffling.
    return [(n, {"image_id": i, "captions": [c.text for c in cs], "caption_index": [c.index for c in cs],
                 "image_features": feats[n]}) for n, (i, cs) in enumerate(by_image.items())]


def export_tfds(captions: list[Caption], store: FeatureStore, data_dir: str | Path, *,
                name: str = TFDS_NAME, version: str = "1.0.0", description: str | None = None) -> Path:
    """Writes captions + feature rows as a TFDS dataset (``store_as_tfds_dataset``).

    Args:
      captions: the captions (split ``None`` ones are not exported).
      store: their image features, a ``FeatureStore`` or a streaming store (rows
        read in one gather per split); captions of images without a row are dropped
        with a counted warning, as in ``join_captions``.
      data_dir: TFDS data folder; the dataset lands in ``data_dir/name/version``.
      name, version: the TFDS name and version.

    Returns:
      The builder directory (``data_dir/name/version``), readable with
      ``tfds.builder_from_directory`` or ``read_tfds_export``.

    Raises:
      ValueError: no caption with a split has features; RuntimeError: already exported there.
    """
    tfds = require("tensorflow_datasets", "Reading a TFDS dataset")

    row = store.index()
    dropped = {c.image_id for c in captions if c.image_id not in row}
    if dropped:
        warnings.warn(f"export_tfds: {len(dropped)} image(s) without features dropped, e.g. {sorted(dropped)[:3]}",
                      GroundedTextWarning, stacklevel=2)
    splits = {s: _examples(captions, store, s) for s in SPLITS}
    splits = {s: ex for s, ex in splits.items() if ex}
    if not splits:
        raise ValueError("export_tfds: no caption with a split (train/dev/test) has image features.")
    features = tfds.features.FeaturesDict({
        "image_id": tfds.features.Text(),
        "captions": tfds.features.Sequence(tfds.features.Text()),
        "caption_index": tfds.features.Sequence(np.int64),
        "image_features": tfds.features.Tensor(shape=(store.dim,), dtype=np.float32),
    })
    builder = tfds.dataset_builders.store_as_tfds_dataset(
        name=name, version=version, features=features, split_datasets=splits, data_dir=str(data_dir),
        description=description or "Image-caption pairs with precomputed image features (grounded_text).",
        disable_shuffling=True,
    )
    return Path(builder.data_dir)


def is_tfds_dir(path: str | Path) -> bool:
    return (Path(path) / "dataset_info.json").is_file()


def find_tfds_dir(path: str | Path) -> Path | None:
    """``path`` itself, or the newest ``path/NAME/VERSION`` / ``path/VERSION`` builder dir below it."""
    path = Path(path)
    if is_tfds_dir(path):
        return path
    cands = sorted(p.parent for p in path.glob("*/dataset_info.json")) + sorted(
        p.parent for p in path.glob("*/*/dataset_info.json"))
    return cands[-1] if cands else None


def read_tfds_export(builder_dir: str | Path) -> tuple[list[Caption], FeatureStore]:
    """Reads an ``export_tfds`` dataset back.

    Returns:
      (captions, store): captions in export order (per split, per image) and a
      store with one row per exported image.

    Raises:
      FileNotFoundError: no TFDS dataset there; ValueError: features are not this format.
    """
    tfds = require("tensorflow_datasets", "Reading a TFDS dataset")

    found = find_tfds_dir(builder_dir)
    if found is None:
        raise FileNotFoundError(f"No TFDS dataset (dataset_info.json) in {str(builder_dir)!r}.")
    builder = tfds.builder_from_directory(str(found))
    need = {"image_id", "captions", "caption_index", "image_features"}
    if not need <= set(builder.info.features.keys()):
        raise ValueError(f"{found}: TFDS features {sorted(builder.info.features.keys())}, expected {sorted(need)}.")
    captions, ids, rows = [], [], []
    for split in SPLITS:
        if split not in builder.info.splits:
            continue
        for ex in builder.as_dataset(split=split, shuffle_files=False).as_numpy_iterator():
            image_id = ex["image_id"].decode("utf-8")
            ids.append(image_id)
            rows.append(ex["image_features"])
            for k, text in zip(ex["caption_index"].tolist(), ex["captions"].tolist()):
                captions.append(Caption(image_id, int(k), text.decode("utf-8"), split))
    store = FeatureStore(np.array(ids, dtype=str), np.stack(rows).astype(np.float32), str(found))
    return captions, store


# --------------------------------------------------------------------------- trainer entry


def load_pairs(data_config, root: str | Path | None):
    """The trainer's data: ``data_config.dataset`` joined to its image features.

    Args:
      data_config: ``grounded_text.config.schema.DataConfig``; ``dataset`` is ``"flickr8k"``
        (the release under ``root`` with ``data_config.features``), a prepared folder
        (``dataset.json``; ``features`` overrides its store when it is a path to a
        file) or a TFDS export folder (``dataset_info.json`` in it or below it).
      root: the data root (used by ``"flickr8k"``).

    Returns:
      ``SplitPairs`` (``grounded_text.data.pairs.join_captions``).

    Raises:
      ValueError: ``dataset`` is neither ``"flickr8k"`` nor an existing folder of
        either kind; plus the readers' errors.
    """
    dataset = getattr(data_config, "dataset", "flickr8k") or "flickr8k"
    if dataset == "flickr8k":
        if root is None:
            raise ValueError("dataset 'flickr8k' needs the data root (--data-dir or $GROUNDED_TEXT_DATA).")
        return load_flickr8k_pairs(root, data_config.features)
    path = Path(dataset).expanduser()

    def joined(captions, store, where):
        pairs = join_captions(captions, store)
        return dataclasses.replace(pairs, sources={split: {"file": str(where)} for split in pairs.splits})

    if (path / PREPARED_MANIFEST).is_file():
        override = Path(data_config.features) if data_config.features and Path(data_config.features).is_file() else None
        captions, store = load_prepared(path, override)
        return joined(captions, store, path / PREPARED_MANIFEST)
    if path.is_dir() and find_tfds_dir(path) is not None:
        captions, store = read_tfds_export(path)
        return joined(captions, store, path)
    if path.is_dir() and find_tfds_dir(path / TFDS_DIR) is not None:
        captions, store = read_tfds_export(path / TFDS_DIR)
        return joined(captions, store, path / TFDS_DIR)
    raise ValueError(
        f"dataset {dataset!r}: expected 'flickr8k', a prepared folder (with {PREPARED_MANIFEST}) or a TFDS "
        "export folder (with dataset_info.json); see docs/datasets.md."
    )
