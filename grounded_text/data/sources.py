"""Caption sources: standard image–caption datasets as ``list[Caption]`` plus their images.

Every reader returns captions (``grounded_text.data.flickr8k.Caption``: image id,
caption number, raw text, split in ``{"train", "dev", "test", None}``); the
``*_source`` functions wrap them in a ``CaptionSource`` that also knows where the
images are, so the feature extractor (``grounded_text.vision.extractor``) can read
them and ``grounded_text.data.pairs.join_captions`` can join captions to a feature
store **by image id**. Image ids are always the image *file names*
(``COCO_val2014_000000391895.jpg``, ``1000268201_693b08cb0e.jpg``), which is also what
the extractor writes as ids, so a store written from the image folder joins as is.

Sources and layouts:

* **COCO captions JSON** (``captions_train2014.json``, ``captions_val2014.json``, or
  any file in that format: ``{"images": [{"id", "file_name", ...}], "annotations":
  [{"image_id", "id", "caption"}]}``), ``read_coco_captions``.
* **Karpathy split files** (Karpathy & Fei-Fei, CVPR 2015: ``dataset_coco.json``,
  ``dataset_flickr8k.json``, ``dataset_flickr30k.json``: ``{"images": [{"filename",
  "split", "sentences": [{"raw", ...}], "filepath"?, "cocoid"?}]}``),
  ``read_karpathy``; they also give splits to the other readers.
* **Flickr8k** official release, ``read_flickr8k`` (``grounded_text.data.flickr8k``).
* **Flickr30k** (Young et al., TACL 2014): ``results_20130124.token``
  (``<file>.jpg#k\\t<caption>``) or the Kaggle ``results.csv``
  (``image_name| comment_number| comment``), ``read_flickr30k``.
* **TFDS** ``coco_captions`` (COCO 2014 with the Karpathy splits), ``tfds_coco_captions``.

Split mapping (Karpathy → this project): ``train → "train"``, ``restval → "train"``
(the ~30k COCO val2014 images outside Karpathy's val/test; every COCO retrieval paper
since Karpathy & Fei-Fei trains on them, which gives the usual 113,287 training
images), ``val → "dev"``, ``test → "test"``. Without a split file, every caption of a
file gets the split named by the file (``*train*`` → train, ``*val*`` → dev,
``*test*`` → test) or by the ``split`` argument.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable

import tensorflow as tf

from grounded_text.data.flickr8k import SPLITS, Caption, read_flickr8k
from grounded_text.utils.extras import assert_installed

try:
    import tensorflow_datasets as tfds
    from tensorflow_datasets.core.download import downloader
except ImportError:  # the images extra: the TFDS readers name it where they start
    tfds = downloader = None

KARPATHY_SPLITS = {"train": "train", "restval": "train", "val": "dev", "test": "test"}
SPLIT_NAMES = (*SPLITS, None)


# --------------------------------------------------------------------------- helpers


def leaves_folder(name: str) -> bool:
    """Whether an image id or relative image path would name a file outside its image folder:
    an absolute path or one with a ``..`` part. The same rule as the feature extractor's ids
    (``vision.extractor.list_image_files``); symlinks inside the folder are followed."""
    path = Path(str(name))
    return path.is_absolute() or ".." in path.parts


def _read_json(path: Path, what: str):
    if not path.is_file():
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist.")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: {what} is not valid UTF-8 (byte {e.start}): {e.reason}.") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: {what} is not valid JSON ({e}).") from e


def _require(obj, keys: Iterable[str], where: str, path: Path) -> None:
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: {where} must be a JSON object, got {type(obj).__name__}.")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise ValueError(f"{path}: {where} lacks key(s) {missing}; has {sorted(obj)}.")


def _check_split(split, path) -> str | None:
    if split not in SPLIT_NAMES:
        raise ValueError(f"{path}: split must be one of {SPLIT_NAMES}, got {split!r}.")
    return split


def split_from_filename(path: str | Path) -> str | None:
    """``captions_train2014.json`` → ``"train"``, ``*val*`` → ``"dev"``, ``*test*`` → ``"test"``.

    Returns ``None`` when the file name names no split (or names several).
    """
    name = Path(path).name.lower()
    found = {s for key, s in (("train", "train"), ("val", "dev"), ("dev", "dev"), ("test", "test"))
             if re.search(rf"(^|[^a-z]){key}", name)}
    return found.pop() if len(found) == 1 else None


def read_karpathy_splits(path: str | Path) -> dict[str, str]:
    """Maps image file name → split (``KARPATHY_SPLITS`` mapping) from a Karpathy file.

    Raises:
      FileNotFoundError / ValueError: missing file, not UTF-8 JSON, an entry without
        ``filename``/``split``, an unknown split name, a file name listed twice.
    """
    path = Path(path)
    split_of = {}
    for n, image in enumerate(_karpathy_images(path)):
        name = image["filename"]
        if name in split_of:
            raise ValueError(f"{path}: image {name!r} is listed twice (images[{n}]).")
        split_of[name] = KARPATHY_SPLITS[image["split"]]
    return split_of


def _karpathy_images(path: Path) -> list[dict]:
    data = _read_json(path, "Karpathy split file")
    _require(data, ["images"], "the top level", path)
    images = data["images"]
    for n, image in enumerate(images):
        _require(image, ["filename", "split"], f"images[{n}]", path)
        if image["split"] not in KARPATHY_SPLITS:
            raise ValueError(
                f"{path}: images[{n}] ({image['filename']!r}) has split {image['split']!r}; "
                f"expected one of {sorted(KARPATHY_SPLITS)}."
            )
    return images


def _apply_splits(captions: list[Caption], split_of: dict[str, str]) -> list[Caption]:
    """Images absent from the split file get ``None`` (never trained on, never tested on)."""
    return [dataclasses.replace(c, split=split_of.get(c.image_id)) for c in captions]


# --------------------------------------------------------------------------- readers


def read_coco_captions(
    path: str | Path,
    *,
    split: str | None = "auto",
    karpathy: str | Path | None = None,
) -> list[Caption]:
    """Reads a COCO-format captions file.

    Args:
      path: ``captions_*.json`` with ``images`` (each ``id``, ``file_name``) and
        ``annotations`` (each ``image_id``, ``id``, ``caption``).
      split: the split of every caption when no ``karpathy`` file is given:
        ``"auto"`` (from the file name, see ``split_from_filename``), ``"train"``,
        ``"dev"``, ``"test"`` or ``None``.
      karpathy: a Karpathy split file; its splits override ``split`` (images it does
        not list get ``None``).

    Returns:
      Captions in annotation order. ``image_id`` is the image's ``file_name``;
      ``index`` is the caption's position among its image's captions (0, 1, ...).
      Images without annotations give no captions.

    Raises:
      FileNotFoundError: the file is missing.
      ValueError (naming the file and the entry): not UTF-8 or not JSON; a missing
        key; two images with one ``id`` or one ``file_name``; a ``file_name`` that leaves
        the image folder (absolute or with ``..``); two annotations with one ``id``; an
        annotation whose ``image_id`` has no image entry; an empty or non-string caption;
        ``split="auto"`` on a file name that names no split.
    """
    path = Path(path)
    data = _read_json(path, "COCO captions file")
    _require(data, ["images", "annotations"], "the top level", path)
    file_of: dict = {}
    seen_names: dict[str, object] = {}
    for n, image in enumerate(data["images"]):
        _require(image, ["id", "file_name"], f"images[{n}]", path)
        image_id, name = image["id"], image["file_name"]
        if isinstance(name, str) and leaves_folder(name):
            raise ValueError(f"{path}: file name {name!r} of images[{n}] is not a file name inside the image folder "
                             "(an absolute path or a '..' would read any file the process can read).")
        if image_id in file_of:
            raise ValueError(f"{path}: duplicate image id {image_id!r} (images[{n}]).")
        if name in seen_names:
            raise ValueError(
                f"{path}: file name {name!r} of images[{n}] is already used by image id {seen_names[name]!r}.")
        file_of[image_id] = name
        seen_names[name] = image_id
    if karpathy is None:
        if split == "auto":
            split = split_from_filename(path)
            if split is None:
                raise ValueError(
                    f"{path}: the file name names no split (train/val/test); pass split= "
                    "('train', 'dev', 'test' or None) or a Karpathy split file."
                )
        _check_split(split, path)
    seen_ann: set = set()
    per_image: Counter = Counter()
    captions = []
    for n, ann in enumerate(data["annotations"]):
        _require(ann, ["image_id", "id", "caption"], f"annotations[{n}]", path)
        if ann["id"] in seen_ann:
            raise ValueError(f"{path}: duplicate annotation id {ann['id']!r} (annotations[{n}]).")
        seen_ann.add(ann["id"])
        if ann["image_id"] not in file_of:
            raise ValueError(
                f"{path}: annotations[{n}] (id {ann['id']!r}) refers to image_id {ann['image_id']!r}, "
                "which has no entry in 'images'."
            )
        text = ann["caption"]
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{path}: annotations[{n}] (id {ann['id']!r}) has an empty caption {text!r}.")
        name = file_of[ann["image_id"]]
        captions.append(Caption(name, per_image[name], " ".join(text.split()), split))
        per_image[name] += 1
    if karpathy is not None:
        captions = _apply_splits(captions, read_karpathy_splits(karpathy))
    return captions


def read_karpathy(path: str | Path) -> list[Caption]:
    """Reads captions and splits from a Karpathy file (``dataset_{coco,flickr8k,flickr30k}.json``).

    Args:
      path: the JSON file; each image needs ``filename``, ``split`` and
        ``sentences`` (each with ``raw``, the untokenised caption).

    Returns:
      Captions in file order; ``image_id`` = ``filename``, ``index`` = sentence
      position, split mapped by ``KARPATHY_SPLITS``.

    Raises:
      ValueError (naming file and entry): see ``read_karpathy_splits``; a sentence
      without ``raw``; an empty caption.
    """
    path = Path(path)
    captions, seen = [], set()
    for n, image in enumerate(_karpathy_images(path)):
        _require(image, ["sentences"], f"images[{n}]", path)
        name = image["filename"]
        if name in seen:
            raise ValueError(f"{path}: image {name!r} is listed twice (images[{n}]).")
        seen.add(name)
        for k, sent in enumerate(image["sentences"]):
            _require(sent, ["raw"], f"images[{n}].sentences[{k}]", path)
            text = sent["raw"]
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{path}: images[{n}].sentences[{k}] ({name!r}) has an empty caption.")
            captions.append(Caption(name, k, " ".join(text.split()), KARPATHY_SPLITS[image["split"]]))
    return captions


def karpathy_image_paths(path: str | Path) -> dict[str, str]:
    """``filename`` → ``filepath/filename`` for files that give a ``filepath`` (COCO's
    ``train2014``/``val2014`` folders); others map to ``filename``."""
    return {im["filename"]: str(Path(im.get("filepath", "")) / im["filename"]) for im in _karpathy_images(Path(path))}


_FLICKR30K_CSV = re.compile(r"^(?P<image>[^|]+?)\s*\|\s*(?P<k>\d+)\s*(?:\|\s*|\s+)(?P<text>.*)$")


def read_flickr30k(
    path: str | Path,
    *,
    karpathy: str | Path | None = None,
    split: str | None = None,
) -> list[Caption]:
    """Reads Flickr30k captions: the official token file or the Kaggle CSV.

    Args:
      path: ``results_20130124.token`` (``<file>.jpg#k\\t<caption>``) or
        ``results.csv`` (header ``image_name| comment_number| comment``, fields
        separated by ``|``; one known row of the Kaggle copy lacks its second
        ``|``, ``<file>| 4 <caption>``, and is read as caption 4), or a folder
        holding one of them.
      karpathy: ``dataset_flickr30k.json`` for the Karpathy splits (29,000 / 1,014 /
        1,000 images); images it does not list get ``None``.
      split: the split of every caption without ``karpathy`` (Flickr30k has no
        official split); ``None`` by default.

    Returns:
      Captions in file order (``image_id`` = the ``.jpg`` name).

    Raises:
      FileNotFoundError: no caption file.
      ValueError: not UTF-8; a malformed line (naming file and line); an empty caption.
    """
    path = Path(path)
    if path.is_dir():
        for name in ("results_20130124.token", "results.token", "results.csv"):
            if (path / name).is_file():
                path = path / name
                break
        else:
            raise FileNotFoundError(f"No results_20130124.token or results.csv in {str(path)!r}.")
    if not path.is_file():
        raise FileNotFoundError(f"Flickr30k caption file {str(path)!r} does not exist.")
    _check_split(split, path)
    try:
        lines = path.read_bytes().decode("utf-8-sig").splitlines()  # a leading BOM is not part of the first id
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not valid UTF-8 (byte {e.start}).") from e
    is_csv = path.suffix == ".csv" or (lines and lines[0].replace(" ", "").startswith("image_name|"))
    captions = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip() or (is_csv and lineno == 1 and line.replace(" ", "").startswith("image_name|")):
            continue
        if is_csv:
            m = _FLICKR30K_CSV.match(line)
            if not m:
                raise ValueError(f"{path}:{lineno}: expected 'image_name| comment_number| comment'.")
            image_id, k, text = m["image"].strip(), int(m["k"]), m["text"]
        else:
            key, sep, text = line.partition("\t")
            image_id, hash_sep, k = key.rpartition("#")
            if not sep or not hash_sep or not k.isdigit():
                raise ValueError(f"{path}:{lineno}: expected '<image>#<k>\\t<caption>'.")
            k = int(k)
        if not text.strip():
            raise ValueError(f"{path}:{lineno}: empty caption for {image_id!r}.")
        captions.append(Caption(image_id, k, " ".join(text.split()), split))
    _check_unique(captions, path)
    if karpathy is not None:
        captions = _apply_splits(captions, read_karpathy_splits(karpathy))
    return captions


def _check_unique(captions: list[Caption], path) -> None:
    dup = [k for k, v in Counter((c.image_id, c.index) for c in captions).items() if v > 1]
    if dup:
        raise ValueError(f"{path}: caption(s) listed twice (image, number): {dup[:3]}.")


# --------------------------------------------------------------------------- sources


@dataclasses.dataclass(frozen=True)
class CaptionSource:
    """Captions plus where their images are.

    Attributes:
      name: the source kind (``"coco_json"``, ``"karpathy"``, ``"flickr8k"``,
        ``"flickr30k"``, ``"tfds_coco"``).
      captions: the captions (image id = image file name).
      image_dir: folder of the images (``None`` for TFDS).
      image_paths: image id → path relative to ``image_dir`` where it is not the id
        itself (COCO's ``train2014/``/``val2014/`` folders).
      images_fn: for sources whose images are not files: a callable giving the
        ``tf.data.Dataset`` of ``(image_id tf.string, encoded bytes tf.string)``.
    """

    name: str
    captions: list
    image_dir: Path | None = None
    image_paths: dict | None = None
    images_fn: Callable | None = None

    def image_ids(self) -> list[str]:
        """Distinct image ids in caption order."""
        return list(dict.fromkeys(c.image_id for c in self.captions))

    def image_path(self, image_id: str) -> Path:
        """The file of ``image_id`` under ``image_dir``.

        Raises:
          ValueError: no image folder; the id or its recorded path leaves the folder
            (absolute or with ``..``: ``leaves_folder``).
        """
        if self.image_dir is None:
            raise ValueError(f"The {self.name} source has no image folder.")
        rel = (self.image_paths or {}).get(image_id, image_id)
        outside = [str(n) for n in (image_id, rel) if leaves_folder(n)]
        if outside:
            raise ValueError(f"The {self.name} source's image {image_id!r} names {outside[-1]!r}, not a file inside "
                             f"the image folder {str(self.image_dir)!r}; refusing to read it.")
        path = self.image_dir / rel
        if not path.is_file() and rel != image_id and (self.image_dir / image_id).is_file():
            path = self.image_dir / image_id  # all images flat in one folder
        return path

    def images(self, *, missing: str = "error"):
        """``tf.data.Dataset`` of ``(image_id tf.string, encoded JPEG/PNG bytes tf.string)``.

        This is the extractor's input (Contract 2 of the project).

        Args:
          missing: ``"error"`` (default) raises when a captioned image has no file;
            ``"skip"`` leaves it out (its captions are then dropped at the join, with
            a counted warning).

        Raises:
          FileNotFoundError: an image file is missing (``missing="error"``), naming
            how many and the first few.
          ValueError: an image's path leaves the image folder (``image_path``).
        """
        if self.images_fn is not None:
            return self.images_fn()
        ids = self.image_ids()
        paths = [self.image_path(i) for i in ids]
        absent = [i for i, p in zip(ids, paths) if not p.is_file()]
        if absent and missing == "error":
            raise FileNotFoundError(
                f"{len(absent)} of {len(ids)} captioned image(s) have no file under "
                f"{str(self.image_dir)!r}, e.g. {absent[:3]} (pass missing='skip' to leave them out)."
            )
        keep = [(i, str(p)) for i, p in zip(ids, paths) if p.is_file()]
        if not keep:
            raise FileNotFoundError(f"No image files found under {str(self.image_dir)!r}.")
        ds = tf.data.Dataset.from_tensor_slices(([k[0] for k in keep], [k[1] for k in keep]))
        return ds.map(lambda i, p: (i, tf.io.read_file(p)), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def coco_json_source(
    captions: str | Path | list,
    images: str | Path | None = None,
    *,
    karpathy: str | Path | None = None,
    split: str | None = "auto",
) -> CaptionSource:
    """One or more COCO captions files (e.g. train2014 + val2014) and their image folder.

    With a Karpathy file the files' own split names are ignored (val2014 holds
    Karpathy's val, test and restval). ``images`` may hold the images flat or in
    ``train2014/``/``val2014/`` subfolders (found through the Karpathy ``filepath``).

    Raises:
      ValueError: one image file name in two caption files, plus ``read_coco_captions``'s errors.
    """
    files = [captions] if isinstance(captions, (str, Path)) else list(captions)
    out: list[Caption] = []
    owner: dict[str, Path] = {}
    for f in files:
        caps = read_coco_captions(f, split=split, karpathy=karpathy)
        for name in {c.image_id for c in caps}:
            if name in owner:
                raise ValueError(f"Image {name!r} is captioned in both {owner[name]} and {f}.")
            owner[name] = Path(f)
        out += caps
    paths = karpathy_image_paths(karpathy) if karpathy else None
    return CaptionSource("coco_json", out, Path(images) if images else None, paths)


def karpathy_source(path: str | Path, images: str | Path | None = None) -> CaptionSource:
    """Captions and splits from a Karpathy file; images under ``images`` (flat or by ``filepath``)."""
    return CaptionSource("karpathy", read_karpathy(path), Path(images) if images else None,
                         karpathy_image_paths(path))


def flickr8k_source(root: str | Path, images: str | Path | None = None) -> CaptionSource:
    """The official Flickr8k release (``read_flickr8k``); images default to
    ``ROOT/flickr8k/Flicker8k_Dataset`` or ``ROOT/flickr8k/images`` when present."""
    root = Path(root)
    if images is None:
        for cand in (root / "flickr8k" / "Flicker8k_Dataset", root / "Flicker8k_Dataset",
                     root / "flickr8k" / "images", root / "images"):
            if cand.is_dir():
                images = cand
                break
    return CaptionSource("flickr8k", read_flickr8k(root), Path(images) if images else None)


def flickr30k_source(
    path: str | Path, images: str | Path | None = None, *, karpathy: str | Path | None = None,
    split: str | None = None,
) -> CaptionSource:
    """Flickr30k captions (``read_flickr30k``) and the ``flickr30k-images`` folder."""
    return CaptionSource("flickr30k", read_flickr30k(path, karpathy=karpathy, split=split),
                         Path(images) if images else None)


# --------------------------------------------------------------------------- TFDS coco_captions

TFDS_COCO_SPLITS = ("train", "restval", "val", "test")


class TFDSDownloadError(RuntimeError):
    """TFDS could not download/prepare a dataset (offline, or its source is unreachable)."""


def prepare_tfds_builder(name: str, data_dir: str | Path | None, *, download: bool, max_retries: int = 0):
    """A prepared TFDS builder, downloading only when asked.

    Args:
      name: TFDS name (``"coco_captions"`` = ``coco_captions/2014``).
      data_dir: TFDS data folder (``None``: TFDS's default ``~/tensorflow_datasets``).
      download: run ``download_and_prepare`` when the data is not there yet.
      max_retries: HTTP retries per file (TFDS's own default, 10 with back-off,
        makes an offline attempt hang for minutes; 0 fails at once).

    Raises:
      FileNotFoundError: not prepared under ``data_dir`` and ``download`` is False.
      TFDSDownloadError: the download failed (e.g. no network), with the cause.
      MissingExtraError (an ImportError): TensorFlow Datasets is not installed.
    """
    assert_installed(tfds, "tensorflow_datasets", "Reading a TFDS dataset")
    builder = tfds.builder(name, data_dir=str(data_dir) if data_dir else None)
    if builder.is_prepared():
        return builder
    if not download:
        raise FileNotFoundError(
            f"TFDS dataset {name!r} is not prepared under {builder.data_dir!r}; pass download=True "
            "(--download) to fetch it (coco_captions: ~40 GB: the train2014, val2014, test2014 and test2015 zips), "
            "or point data_dir (--tfds-data-dir) at a folder where it was prepared."
        )
    old = downloader.MAX_RETRIES
    downloader.MAX_RETRIES = max_retries
    try:
        builder.download_and_prepare()
    except Exception as e:  # requests/urllib errors, DownloadError, ...
        raise TFDSDownloadError(
            f"Could not download/prepare TFDS {name!r} into {builder.data_dir!r} "
            f"({type(e).__name__}: {str(e)[:300]}). Without network access, prepare it on a "
            "machine with access and copy the data_dir, or use the COCO JSON reader on local files."
        ) from e
    finally:
        downloader.MAX_RETRIES = old
    return builder


def tfds_coco_captions(
    data_dir: str | Path | None = None,
    *,
    splits: Iterable[str] = TFDS_COCO_SPLITS,
    download: bool = False,
    builder=None,
) -> CaptionSource:
    """TFDS ``coco_captions`` (COCO 2014, Karpathy splits) as a ``CaptionSource``.

    Reads the dataset with ``decoders={"image": tfds.decode.SkipDecoding()}``, so the
    images stay encoded JPEG bytes (nothing decoded while collecting captions).

    Args:
      data_dir: TFDS data folder (``None``: TFDS's default).
      splits: TFDS splits to read (``train``, ``restval``, ``val``, ``test``);
        mapped by ``KARPATHY_SPLITS`` (``restval`` → train, ``val`` → dev).
      download: download and prepare when absent (see ``prepare_tfds_builder``).
      builder: an already built ``tfds`` builder (tests); overrides ``data_dir``.

    Returns:
      ``CaptionSource`` whose captions have ``image_id`` = ``image/filename`` and
      ``index`` = position in ``captions/text``; ``images()`` is a ``tf.data`` of
      ``(image/filename, encoded JPEG bytes)`` over the same splits (the extractor's
      input).

    Raises:
      FileNotFoundError / TFDSDownloadError: see ``prepare_tfds_builder``.
      ValueError: an unknown split; an image file name in two splits.
      MissingExtraError (an ImportError): TensorFlow Datasets is not installed.
    """
    assert_installed(tfds, "tensorflow_datasets", "Reading a TFDS dataset")
    splits = list(splits)
    bad = [s for s in splits if s not in KARPATHY_SPLITS]
    if bad:
        raise ValueError(f"Unknown coco_captions split(s) {bad}; choose from {TFDS_COCO_SPLITS}.")
    if builder is None:
        builder = prepare_tfds_builder("coco_captions", data_dir, download=download)
    decoders = {"image": tfds.decode.SkipDecoding()}

    def read(split):
        return builder.as_dataset(split=split, decoders=decoders, shuffle_files=False)

    captions, owner = [], {}
    for split in splits:
        ds = read(split).map(lambda ex: (ex["image/filename"], ex["captions"]["text"]))
        for name, texts in ds.as_numpy_iterator():
            name = name.decode("utf-8")
            if name in owner:
                raise ValueError(f"coco_captions: image {name!r} is in both {owner[name]} and {split}.")
            owner[name] = split
            for k, text in enumerate(texts.tolist()):
                text = " ".join(text.decode("utf-8", errors="replace").split())
                if text:
                    captions.append(Caption(name, k, text, KARPATHY_SPLITS[split]))

    def images():
        ds = None
        for split in splits:
            part = read(split).map(lambda ex: (ex["image/filename"], ex["image"]))
            ds = part if ds is None else ds.concatenate(part)
        return ds

    return CaptionSource("tfds_coco", captions, images_fn=images)
