"""Photos into a model's space: the image network its image tower was trained on, then the tower.

A model's image tower (``image_export/``, beside its text tower ``export/``) maps CNN features
to the text tower's space; its ``assets/config.json`` records which network made those features
(``image_features``: network, weights digest, crops, image size, preprocessing). This module
reads photos, runs that network with its own preprocessing, then the tower, so that a photo
lands where the training features landed. The shipped models' network is Google's
EfficientNet-Lite0, whose weights ship in the package (:mod:`grounded_text.vision.lite0`):
nothing is downloaded.

:class:`ImageSide` owns it: ``encode`` (what ``TextEncoder.encode_images`` hands photos to)
and ``fingerprint`` (what ``TextEncoder.image_fingerprint`` reports, and what a photo index is
made for).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from PIL import ImageOps

from grounded_text.data.provenance import ORIENTATION_KEY, PHOTO_ORIENTATION, lite0_provenance
from grounded_text.serving.integrity import DamagedExportError, check_export
from grounded_text.utils.progress import CountProgress
from grounded_text.utils.similarity import normalize_rows
from grounded_text.vision.crops import decode_rgb, error_reason, make_views
from grounded_text.vision.networks import DEFAULT_RANDOM_SEED, FeatureNetwork, feature_provenance
from grounded_text.vision.photo_header import ImageReadError, probe_bytes, probe_file

__all__ = ["IMAGE_FEATURES_KEY", "PHOTO_READING", "ImageReadError", "ImageSide", "NoImageTowerError", "as_image_list",
           "image_export_beside", "load_image_encoder", "read_image", "tower_record"]

#: The feature record of the image tower (a key of its ``assets/config.json``).
IMAGE_FEATURES_KEY = "image_features"
#: How photos are read before the network sees them, beyond the tower's record: turned upright by
#: their EXIF orientation. Part of :attr:`ImageSide.fingerprint`, so that a photo index made before
#: photos were turned upright is made again rather than mixed with upright rows.
PHOTO_READING = {ORIENTATION_KEY: PHOTO_ORIENTATION}


class NoImageTowerError(ValueError):
    """The model has no image tower, so photos cannot be put into its space."""


def image_export_beside(text_export: str | os.PathLike) -> Path | None:
    """The image tower beside a text tower: ``<parent>/image_export`` (a run folder's and a shipped
    model's layout), or ``None`` when there is none."""
    folder = Path(text_export).parent / "image_export"
    return folder if (folder / "saved_model.pb").is_file() else None


def tower_record(image_export: str | os.PathLike) -> dict | None:
    """What made the features an image tower was trained on (``cnn``, ``weights``, ``crops``,
    ``image_size``, ``preprocessing``), as its ``assets/config.json`` records it. A tower
    exported before towers recorded it, but trained on the data root's ``efficientnet_lite0``
    features, gets that network's record; otherwise ``None``."""
    path = Path(image_export) / "assets" / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    record = config.get(IMAGE_FEATURES_KEY)
    if isinstance(record, dict):
        return record
    if (config.get("data") or {}).get("features") == "efficientnet_lite0":
        return lite0_provenance()
    return None


def load_image_encoder(path: str | Path, batch_size: int = 4096):
    """Loads an image-tower SavedModel (``grounded_text.serving.export.export_image_tower``).

    Returns:
      A callable float [n, d] → float32 [n, N] (batched, NumPy), with attributes
      ``feature_dim``, ``path`` and ``record`` (what made its training features:
      ``grounded_text.serving.images.tower_record``, or ``None``).

    Raises:
      FileNotFoundError: not a SavedModel directory.
      DamagedExportError (a ValueError): files that differ from the tower's integrity record
        (sizes, SHA-256, its feature record: ``grounded_text.serving.integrity.check_export``), or,
        for a tower without a record, missing files or a load that fails; one line naming the file.
      ValueError (when called): features of the wrong dimension (names both), NaN/Inf outputs.
    """
    if not (Path(path) / "saved_model.pb").is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a SavedModel directory (no saved_model.pb).")
    check_export(path)
    try:
        module = tf.saved_model.load(str(path))
    except (tf.errors.OpError, ValueError, OSError) as e:  # a tower without a record, damaged: one line
        reason = (getattr(e, "message", None) or str(e)).strip().splitlines()[0][:300]
        raise DamagedExportError(f"image tower {str(path)!r} cannot be loaded: {reason}") from None
    dim = int(module.feature_dim.numpy()) if hasattr(module, "feature_dim") else None

    def encode(features: np.ndarray) -> np.ndarray:
        features = np.asarray(features, dtype=np.float32)
        if features.ndim != 2 or (dim is not None and features.shape[1] != dim):
            raise ValueError(f"image encoder {str(path)!r} expects features [n, {dim}], got {features.shape}.")
        out = np.concatenate([module(tf.constant(features[i : i + batch_size])).numpy()
                              for i in range(0, features.shape[0], batch_size)])
        if not np.isfinite(out).all():
            raise ValueError("image encoder returned NaN/Inf.")
        return out

    encode.feature_dim = dim
    encode.record = tower_record(path)  # what made its training features, for the pairing check
    encode.path = str(path)
    return encode


def _is_pil(item) -> bool:
    return type(item).__module__.startswith("PIL.")


def _image_to_array(item, index: int) -> np.ndarray:
    """One image (a path, encoded bytes, a PIL image or a uint8 array [H, W, 3]) → uint8 [H, W, 3],
    upright: a file's, the bytes' and a PIL image's EXIF orientation are applied."""
    if isinstance(item, (str, os.PathLike)):
        return read_image(item)
    if isinstance(item, (bytes, bytearray, memoryview)):
        return decode_image_bytes(item, f"images[{index}]")
    if _is_pil(item):
        try:
            return np.asarray(ImageOps.exif_transpose(item).convert("RGB"), dtype=np.uint8)
        except Exception as e:  # noqa: BLE001 — a PIL image that cannot be converted
            raise ImageReadError(f"images[{index}]: cannot convert this PIL image to RGB ({e}).",
                                 f"images[{index}]") from None
    array = np.asarray(item)
    if array.ndim == 2:
        array = np.repeat(array[:, :, None], 3, axis=2)
    if array.ndim != 3 or array.shape[2] not in (3, 4) or array.shape[0] < 1 or array.shape[1] < 1:
        raise ImageReadError(f"images[{index}]: expected a file path, encoded bytes, a PIL image or a uint8 array "
                             f"[H, W, 3], got {type(item).__name__} of shape {getattr(array, 'shape', None)}.",
                             f"images[{index}]")
    if array.dtype != np.uint8:
        raise ImageReadError(f"images[{index}]: expected uint8 pixels in [0, 255], got dtype {array.dtype}.",
                             f"images[{index}]")
    return array[:, :, :3]


def _decode(data: bytes, label: str, name: str) -> np.ndarray:
    """Decodes checked bytes; ``label`` starts the message, ``name`` is the error's ``path``."""
    try:
        return decode_rgb(tf.constant(data)).numpy()
    except (tf.errors.InvalidArgumentError, tf.errors.UnknownError, ValueError) as e:
        reason = error_reason(getattr(e, "message", None) or str(e))[:300]
        raise ImageReadError(f"{label}: not a readable image ({reason}).", name, reason) from None


def decode_image_bytes(data: bytes, what: str = "image") -> np.ndarray:
    """Encoded photo bytes (JPEG, PNG, GIF: first frame, BMP, WebP, TIFF: first image) → uint8 [H, W, 3], upright (its
    EXIF orientation applied), decoded as :func:`read_image` decodes a file.

    Args:
      data: the encoded bytes. what: its name for messages (``"images[2]"``).

    Raises:
      ImageReadError: another format, a damaged image, or a header above 40 million pixels.
    """
    data = bytes(data)
    probe_bytes(data, what)
    return _decode(data, what, what)


def read_image(path: str | os.PathLike) -> np.ndarray:
    """Reads a photo (JPEG, PNG, GIF: first frame, BMP, WebP, TIFF: first image, by Pillow) as RGB, the way the feature
    extractor does (JPEGs with the accurate integer DCT, as PIL decodes them), turned upright by
    its EXIF orientation.

    Its header is read first (:func:`grounded_text.vision.photo_header.probe_file`): a file of
    another format, declaring more than 40 million pixels, or far larger than its pixels need is
    refused without being read whole.

    Args:
      path: the file.

    Returns:
      uint8 [H, W, 3] ([W, H, 3] of the stored pixels for a photo stored sideways).

    Raises:
      ImageReadError: the file cannot be read, is not one of these formats, is damaged, or fails
        the decompression-bomb guard; the message names it.
    """
    probe_file(path)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ImageReadError(f"{str(path)!r}: cannot read it ({e.strerror or e}).", str(path)) from None
    return _decode(data, repr(str(path)), str(path))


def as_image_list(images) -> list:
    """``encode_images``' input → a list of single images (a uint8 array [B, H, W, 3] is split;
    encoded bytes are one image)."""
    if isinstance(images, (str, os.PathLike, bytes, bytearray, memoryview)) or _is_pil(images):
        return [images]
    if isinstance(images, np.ndarray):
        if images.ndim == 4:
            return list(images)
        if images.ndim in (2, 3):
            return [images]
    if type(images).__module__.startswith("tensorflow"):
        return as_image_list(images.numpy())
    try:
        return list(images)
    except TypeError:
        raise TypeError(f"encode_images: expected file paths, encoded bytes, PIL images or uint8 arrays, got "
                        f"{type(images).__name__}.") from None


@dataclasses.dataclass
class ImageSide:
    """A model's image tower and the network that makes its features, built on first use.

    Attributes:
      export_dir: the image tower's SavedModel folder.
      record: what made its training features (:func:`tower_record`).
      dim: N, the width of the model's space (the text tower's).
    """

    export_dir: Path
    record: dict
    dim: int
    _tower: Any = None
    _network: Any = None

    @classmethod
    def open(cls, export_dir: str | os.PathLike | None, what: str, dim: int) -> ImageSide:
        """The image side of the model ``what`` (its name, for messages) whose image tower is
        ``export_dir``.

        Raises:
          NoImageTowerError: ``export_dir`` is ``None`` (no image tower beside the text tower), or
            the tower records no network this package can build.
          DamagedExportError (a ValueError): the tower's files differ from its integrity record
            (``grounded_text.serving.integrity.check_export``).
        """
        if export_dir is None:
            raise NoImageTowerError(f"{what} has no image tower (no image_export/ beside it), so photos cannot be "
                                    "put into its space; a model trained by grounded-text train or shipped with the "
                                    "package has one.")
        check_export(export_dir)  # before its record and files are trusted (the fingerprint hashes them)
        record = tower_record(export_dir)
        if record is None:
            raise NoImageTowerError(f"{what}: its image tower {str(export_dir)!r} does not record which image network "
                                    "made its training features, so photos cannot be put into its space.")
        return cls(Path(export_dir), record, int(dim))

    @property
    def fingerprint(self) -> str:
        """16 hex digits identifying the tower's weights, its feature network and how photos are read
        (:data:`PHOTO_READING`): equal for two loads of one model, different for two towers or two
        networks, and different from this model's before photos were turned upright."""
        h = hashlib.sha256(json.dumps(self.record, sort_keys=True).encode())
        h.update(json.dumps(PHOTO_READING, sort_keys=True).encode())
        for name in ("saved_model.pb", "variables/variables.index", "variables/variables.data-00000-of-00001"):
            path = self.export_dir / name
            if path.is_file():
                h.update(path.read_bytes())
        return h.hexdigest()[:16]

    @property
    def network_fingerprint(self) -> str:
        """16 hex digits identifying the network's features of a photo: the tower's record (network,
        weights, crops, image size, preprocessing) and how photos are read (:data:`PHOTO_READING`).
        Equal for two models whose towers were trained on the same network's features (both shipped
        models), so that one's stored features serve the other (``grounded_text.photos.feature_cache``)."""
        h = hashlib.sha256(json.dumps(self.record, sort_keys=True).encode())
        h.update(json.dumps(PHOTO_READING, sort_keys=True).encode())
        return h.hexdigest()[:16]

    def network(self):
        """The ``FeatureNetwork`` of the record (built once)."""
        if self._network is None:
            cnn, weights = self.record.get("cnn"), str(self.record.get("weights", ""))
            if weights.startswith("random:seed="):
                seed = int(weights.split("=", 1)[1])
                built = FeatureNetwork(cnn, weights=None, seed=seed)
                built.recorded = feature_provenance(cnn, int(self.record.get("crops", 1)), None, seed=seed)
            elif weights == feature_provenance(cnn, int(self.record.get("crops", 1)))["weights"]:
                built = FeatureNetwork(cnn, weights="imagenet")
            else:
                raise NoImageTowerError(
                    f"the image tower {str(self.export_dir)!r} was trained on features of {cnn} with weights "
                    f"{weights!r}, which this package cannot build; make features with them and use the tower on "
                    f"those (seed {DEFAULT_RANDOM_SEED} is the default of a random network).")
            if int(self.record.get("image_size", built.input_size)) != built.input_size:
                raise NoImageTowerError(f"the image tower {str(self.export_dir)!r} was trained on {cnn} features of "
                                        f"{self.record.get('image_size')} px images; the network takes "
                                        f"{built.input_size} px.")
            self._network = built
        return self._network

    def tower(self):
        if self._tower is None:
            self._tower = load_image_encoder(self.export_dir)
        return self._tower

    def features(self, arrays: list[np.ndarray]) -> np.ndarray:
        """uint8 images [H, W, 3] → float32 [len(arrays), d] features of the recorded network,
        preprocessed as the record says (whole image resized, or the ten-crop average)."""
        network = self.network()
        crops = int(self.record.get("crops", 1))
        views = np.stack([make_views(tf.constant(a), network.input_size, crops).numpy() for a in arrays])
        if crops == 1:
            return network.features(views.reshape((-1, *views.shape[-3:])))
        flat = network.features(views.reshape((-1, *views.shape[-3:])))
        return flat.reshape(len(arrays), crops, -1).mean(axis=1)

    def embed_features(self, features: np.ndarray, normalize: bool = True) -> np.ndarray:
        """The network's features → the model's space, through the tower alone.

        Args:
          features: float32 [n, d], d the network's width (1280 for Lite0).
          normalize: unit rows (L2).

        Returns:
          float32 [n, N].

        Raises:
          ValueError: features of another width than the tower takes; NaN/Inf out of the tower.
        """
        out = np.asarray(self.tower()(np.asarray(features, np.float32)), dtype=np.float32)
        return normalize_rows(out, np.float32) if normalize else out

    def embed(self, arrays: list[np.ndarray]) -> np.ndarray:
        """uint8 images → float32 [len(arrays), N] through the network and the tower."""
        return np.asarray(self.tower()(self.features(arrays)), dtype=np.float32)

    def encode(self, images, batch_size: int = 32, show_progress_bar: bool | None = None,
               normalize_embeddings: bool = True, convert_to_tensor: bool = False):
        """Photos → float32 [B, N] in the model's space (``TextEncoder.encode_images``, whose
        docstring gives the arguments, the returned shapes and the errors).

        Raises:
          ValueError: ``batch_size`` < 1 (or not an int). ImageReadError, TypeError: see
            :func:`read_image` and :func:`as_image_list`.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"encode_images: batch_size must be an int >= 1, got {batch_size!r}.")
        if type(images).__module__.startswith("tensorflow"):  # a tensor answers as its array would
            images = images.numpy()
        single = isinstance(images, (str, os.PathLike, bytes, bytearray, memoryview)) or _is_pil(images) or (
            isinstance(images, np.ndarray) and images.ndim in (2, 3))
        items = as_image_list(images)
        parts = []
        with CountProgress(len(items), "encode_images", "photo", enabled=bool(show_progress_bar)) as progress:
            for start in range(0, len(items), batch_size):
                arrays = [_image_to_array(item, start + k) for k, item in enumerate(items[start:start + batch_size])]
                out = self.embed(arrays)
                parts.append(normalize_rows(out, np.float32) if normalize_embeddings else out)
                progress.add(len(arrays))
        out = np.concatenate(parts) if parts else np.zeros((0, self.dim), np.float32)
        if single:
            out = out[0]
        return tf.constant(out) if convert_to_tensor else out
