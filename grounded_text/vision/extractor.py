"""CNN image features from encoded images (Contract 2 of the feature pipeline).

::

    images = image_folder_dataset("flickr8k/images")      # tf.data of (id, encoded bytes)
    sink = NpzFeatureSink("features/inception_v3.npz")
    report = extract_features(images, sink, cnn="inception_v3", crops=1, weights="imagenet")
    sink.close()

``images`` is any ``tf.data.Dataset`` of ``(image_id tf.string [], encoded tf.string [])``
pairs, e.g. a TFDS split read with ``decoders={"image": tfds.decode.SkipDecoding()}``
and mapped to ``(filename, image)``.

Pipeline: ids already in the sink are skipped (resume); the rest are decoded
(JPEG/PNG/GIF/BMP/WebP, forced to RGB, first frame of animations, turned upright by their EXIF
orientation), resized/cropped
(:mod:`grounded_text.vision.crops`) in a parallel ``map``, batched and prefetched,
run through the pooled CNN (:mod:`grounded_text.vision.networks`), averaged over the
ten crops when ``crops=10``, and appended to the sink batch by batch (so an
interrupted run keeps what it wrote). Images that cannot be decoded are dropped from
the stream (``ignore_errors``), found as the set difference of requested and written
ids, and reported with the decoder's error message; they never abort the run.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from grounded_text.data.provenance import with_orientation
from grounded_text.utils.progress import CountProgress
from grounded_text.vision import crops as crops_lib
from grounded_text.vision.folders import PHOTO_EXTENSIONS, scan_photos
from grounded_text.vision.networks import DEFAULT_RANDOM_SEED, FeatureNetwork, feature_provenance, get_spec


@dataclasses.dataclass
class ExtractionReport:
    """What :func:`extract_features` did.

    Attributes:
      written: number of images whose features were appended to the sink.
      skipped_existing: images skipped because the sink already had their id.
      failed: ``(image_id, reason)`` for every image that could not be decoded.
      seconds: wall time of the whole call (listing, network construction, features).
      images_per_second: ``written`` / seconds of the feature loop (decode + crops +
        CNN + sink writes; excludes network construction and weight loading). 0 when
        nothing was written.
      cnn, crops, dim: the network name, 1 or 10, the feature dimension.
    """

    written: int
    skipped_existing: int
    failed: list[tuple[str, str]]
    seconds: float
    images_per_second: float
    cnn: str = ""
    crops: int = 1
    dim: int = 0

    def summary(self) -> str:
        lines = [
            f"{self.cnn} crops={self.crops} dim={self.dim}: wrote {self.written} image(s), "
            f"skipped {self.skipped_existing} already stored, {len(self.failed)} failed; "
            f"{self.seconds:.1f} s total, {self.images_per_second:.2f} images/s "
            "(feature loop)"
        ]
        for image_id, reason in self.failed:
            lines.append(f"  FAILED {image_id}: {reason}")
        return "\n".join(lines)


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def list_image_files(folder: str | os.PathLike, ids=None) -> list[tuple[str, Path]]:
    """``(id, path)`` of the images to read; the id is the file name.

    Args:
      folder: a folder of images (not searched recursively).
      ids: optional iterable of file names to read (any extension); default: every photo
        of ``folder`` itself (:func:`grounded_text.vision.folders.scan_photos`, not recursive:
        a non-hidden file whose extension, in any case, is one of ``PHOTO_EXTENSIONS``), sorted
        by name.

    Raises:
      FileNotFoundError: ``folder`` does not exist / is not a folder, or some ``ids``
        have no file (the message counts them and names the first few).
      ValueError: no image files (empty folder or empty ``ids``), duplicate ``ids``, or ids
        that leave the folder (absolute, or with a ``..`` part). A scanned file whose name is not
        UTF-8 cannot be an id: it is named on stderr and left out.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"--images {str(folder)!r}: no such folder.")
    if ids is None:
        names = [photo.rel for photo in scan_photos(root, recursive=False)]
        if not names:
            raise ValueError(f"--images {str(folder)!r}: no image files ({', '.join(PHOTO_EXTENSIONS)}).")
        # An id is text (it is matched with a caption file's names): a file name that is not
        # UTF-8 cannot be one, and is set aside by name instead of failing the whole folder.
        unnamed = [n for n in names if not _is_utf8(n)]
        for name in unnamed:
            shown = os.fsencode(name).decode("utf-8", "backslashreplace")
            print(f"skipped {shown!r}: its file name is not valid UTF-8, so it cannot be an image id; rename it.",
                  file=sys.stderr)
        names = [n for n in names if _is_utf8(n)]
        if not names:
            raise ValueError(f"--images {str(folder)!r}: no image file with a UTF-8 name.")
    else:
        names = [str(i) for i in ids]
        if not names:
            raise ValueError("ids: empty list of image ids.")
        dup = sorted(n for n, c in collections.Counter(names).items() if c > 1)
        if dup:
            raise ValueError(f"ids: duplicate image ids {dup[:5]}.")
        # Ids name files inside the folder: an absolute path or a '..' would read any file
        # the process can read (symlinks inside the folder are followed: docs/reliability.md).
        outside = [n for n in names if Path(n).is_absolute() or ".." in Path(n).parts]
        if outside:
            raise ValueError(f"ids: image ids must be file names inside {str(root)!r}, got {outside[:5]}.")
        missing = [n for n in names if not (root / n).is_file()]
        if missing:
            raise FileNotFoundError(
                f"{len(missing)} of {len(names)} requested image(s) not in {str(root)!r}, "
                f"e.g. {missing[:5]}."
            )
    return [(n, root / n) for n in names]


def image_folder_dataset(folder: str | os.PathLike, ids=None,
                         max_pixels: int | None = crops_lib.MAX_IMAGE_PIXELS) -> tf.data.Dataset:
    """``tf.data`` of ``(image_id tf.string [], encoded bytes tf.string [])``, one per
    file of :func:`list_image_files` (same arguments and errors); bytes are read with
    ``tf.io.read_file`` in a parallel ``map``.

    Each file's header is read first (:func:`grounded_text.vision.crops.photo_files_dataset`, with
    ``max_pixels``): a file it refuses (another format, such as JPEG XL; a header above the pixel
    limit; a file far larger than its pixels need) is never read, and stands in the dataset as a
    placeholder carrying the reason, which :func:`extract_features` reports as that file's failure."""
    pairs = list_image_files(folder, ids)
    return crops_lib.photo_files_dataset([n for n, _ in pairs], [p for _, p in pairs], max_pixels)


def row_provenance(cnn: str, crops: int, weights="imagenet", seed: int = DEFAULT_RANDOM_SEED) -> dict:
    """What makes the rows :func:`extract_features` writes, as a store records it: the network's
    record (``grounded_text.vision.networks.feature_provenance``, same arguments and errors) and
    ``orientation = "exif"`` (photos turned upright by their EXIF orientation)."""
    return with_orientation(feature_provenance(cnn, crops, weights, seed=seed))


def read_ids_file(path: str | os.PathLike) -> list[str]:
    """Image ids from a text file, in order, without repeats: one per line; blank lines
    are skipped; a Flickr8k token line ``ID#n<TAB>caption`` gives ``ID``; so both the
    split files (``Flickr_8k.trainImages.txt``) and ``Flickr8k.token.txt`` work.

    Raises:
      FileNotFoundError: no such file. ValueError: no ids in it.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--ids-file {str(path)!r}: no such file.")
    out: dict[str, None] = {}
    for line in path.read_text(encoding="utf-8-sig").splitlines():  # a BOM is not part of the first id
        line = line.strip()
        if not line:
            continue
        image_id = re.split(r"[\t ]", line, maxsplit=1)[0].split("#", 1)[0]
        if image_id:
            out.setdefault(image_id, None)
    if not out:
        raise ValueError(f"--ids-file {str(path)!r}: no image ids.")
    return list(out)


def _check_dataset(images: tf.data.Dataset) -> None:
    spec = images.element_spec
    ok = (
        isinstance(spec, tuple) and len(spec) == 2
        and all(isinstance(s, tf.TensorSpec) and s.dtype == tf.string and s.shape.rank == 0
                for s in spec)
    )
    if not ok:
        raise ValueError(
            "images must be a tf.data.Dataset of (image_id tf.string [], encoded bytes "
            f"tf.string []) pairs; got element_spec {spec}."
        )


def _string_table(keys: list[str]) -> tf.lookup.StaticHashTable:
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, tf.string), tf.ones([len(keys)], tf.int32)
        ),
        default_value=0,
    )


def _failure_reasons(images, failed: list[str], size: int, crops: int,
                     max_pixels: int | None = crops_lib.MAX_IMAGE_PIXELS) -> dict[str, str]:
    """Decodes the failed images again, eagerly, to get the decoder's message."""
    table = _string_table(failed)
    reasons: dict[str, str] = {}
    for image_id, encoded in images.filter(lambda i, b: table.lookup(i) == 1):
        key = image_id.numpy().decode("utf-8", "replace")
        try:
            if int(tf.strings.length(encoded)) == 0:
                raise ValueError("empty file (0 bytes)")
            crops_lib.make_views(crops_lib.decode_rgb(encoded, max_pixels), size, crops)
        except (tf.errors.OpError, ValueError) as e:
            reasons[key] = crops_lib.error_reason(getattr(e, "message", None) or str(e))
        else:
            reasons[key] = "dropped by the input pipeline (error while decoding)"
    return reasons


def extract_features(
    images: tf.data.Dataset,
    sink,
    *,
    cnn: str = "inception_v3",
    crops: int = 1,
    weights="imagenet",
    batch_size: int = 32,
    progress: bool = True,
    mixed_precision: bool = False,
    network: FeatureNetwork | None = None,
    max_pixels: int | None = crops_lib.MAX_IMAGE_PIXELS,
) -> ExtractionReport:
    """Writes pooled CNN features of ``images`` into ``sink``, skipping stored ids.

    Args:
      images: ``tf.data.Dataset`` of ``(image_id tf.string [], encoded tf.string [])``;
        ids must be unique (they become the store's ids, e.g. Flickr8k file names).
      sink: a feature sink (``existing_ids``/``append``/``close``); rows are appended
        one batch at a time (durable per batch). The caller closes the sink.
      cnn: one of :data:`grounded_text.vision.networks.NETWORK_NAMES`.
      crops: 1 (whole image resized to the network size) or 10 (ten-crop, features
        averaged over the crops); see :mod:`grounded_text.vision.crops`.
      weights: ``"imagenet"``, ``"none"``/``None`` (random init) or a weights file.
      batch_size: images per CNN call (with ``crops=10`` the CNN sees 10× as many).
      progress: show the images done on stderr (``grounded_text.utils.progress.CountProgress``:
        a bar in a terminal or a notebook, plain lines in a log).
      mixed_precision: run the CNN under ``mixed_float16`` (GPU); output stays float32.
      network: an already built :class:`FeatureNetwork` to use instead of building one
        (then ``weights``/``mixed_precision`` are ignored; its name must equal ``cnn``).
      max_pixels: images whose header declares more pixels are not decoded but reported
        failed (a decompression-bomb guard, :mod:`grounded_text.vision.crops`); ``None``:
        no limit. With ``crops=10`` images above a 16:1 aspect ratio are refused too.

    Returns:
      :class:`ExtractionReport`; the sink holds float32 [written, d] new rows.

    Raises:
      ValueError: unknown ``cnn``, ``crops`` not in {1, 10}, ``batch_size`` < 1, a
        dataset of the wrong element type, duplicate ids, or ``network`` ≠ ``cnn``.
      FileNotFoundError / WeightsUnavailableError: see :class:`FeatureNetwork`.
    """
    start = time.perf_counter()
    spec = get_spec(cnn)
    crops = crops_lib.check_crops(crops)
    if int(batch_size) < 1:
        raise ValueError(f"--batch-size must be >= 1, got {batch_size}.")
    if network is not None and network.spec.name != spec.name:
        raise ValueError(f"network is {network.spec.name!r} but cnn={cnn!r}.")
    _check_dataset(images)

    all_ids = _unique_ids(images)
    existing = sink.existing_ids()
    todo = [i for i in all_ids if i not in existing]
    skipped = len(all_ids) - len(todo)
    if progress and skipped:
        print(f"Skipping {skipped} image(s) already in the store.", file=sys.stderr)
    if not todo:
        return ExtractionReport(0, skipped, [], time.perf_counter() - start, 0.0,
                                spec.name, crops, spec.dim)

    if network is None:
        network = FeatureNetwork(cnn, weights=weights, mixed_precision=mixed_precision)
    size = network.input_size
    ds = _view_batches(images, todo, size, crops, int(batch_size), max_pixels)

    loop_start = time.perf_counter()
    with CountProgress(len(todo), "features", "image", enabled=progress) as bar:
        written = _write_batches(ds, network, sink, size, crops, bar)
    loop_seconds = time.perf_counter() - loop_start

    failed = _failures(images, [i for i in todo if i not in written], size, crops, max_pixels)
    return ExtractionReport(
        written=len(written),
        skipped_existing=skipped,
        failed=failed,
        seconds=time.perf_counter() - start,
        images_per_second=(len(written) / loop_seconds) if written and loop_seconds > 0 else 0.0,
        cnn=spec.name,
        crops=crops,
        dim=network.dim,
    )


def _unique_ids(images: tf.data.Dataset) -> list[str]:
    """The dataset's ids in order; ValueError naming a few when an id repeats (two rows
    for one image id would make the store ambiguous)."""
    all_ids = [i.decode("utf-8") for i in images.map(lambda i, b: i).as_numpy_iterator()]
    if len(set(all_ids)) != len(all_ids):
        seen, dup = set(), []
        for i in all_ids:
            if i in seen:
                dup.append(i)
            seen.add(i)
        raise ValueError(f"images: duplicate image ids, e.g. {dup[:5]}.")
    return all_ids


def _view_batches(images: tf.data.Dataset, todo: list[str], size: int, crops: int, batch_size: int,
                  max_pixels: int | None) -> tf.data.Dataset:
    """``(ids [b], views)`` batches of the ``todo`` images: decoded, size-guarded, cropped in
    a parallel map; undecodable images are dropped (``ignore_errors``) and found later as
    missing ids."""
    table = _string_table(todo)
    return (
        images.filter(lambda i, b: table.lookup(i) == 1)
        .map(lambda i, b: (i, crops_lib.make_views(crops_lib.decode_rgb(b, max_pixels), size, crops)),
             num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        .ignore_errors()
        .batch(batch_size)
        .prefetch(tf.data.AUTOTUNE)
    )


def _write_batches(ds: tf.data.Dataset, network, sink, size: int, crops: int, bar) -> set[str]:
    """Runs the CNN over every batch (ten-crop features averaged over the crops) and appends
    float32 rows to ``sink`` batch by batch; returns the ids written."""
    written: set[str] = set()
    for ids_b, views in ds:
        if crops == 10:
            n = tf.shape(views)[0]
            flat = tf.reshape(views, [-1, size, size, 3])
            feats = tf.reduce_mean(tf.reshape(network(flat), [n, 10, -1]), axis=1)
        else:
            feats = network(views)
        ids_np = np.array([i.decode("utf-8") for i in ids_b.numpy()])
        sink.append(ids_np, feats.numpy().astype(np.float32, copy=False))
        written.update(ids_np.tolist())
        if bar is not None:
            bar.add(len(ids_np))
    return written


def _failures(images, failed_ids: list[str], size: int, crops: int,
              max_pixels: int | None) -> list[tuple[str, str]]:
    """``(id, reason)`` for every requested id the loop did not write."""
    if not failed_ids:
        return []
    reasons = _failure_reasons(images, failed_ids, size, crops, max_pixels)
    return [(i, reasons.get(i, "not produced by the input dataset")) for i in failed_ids]
