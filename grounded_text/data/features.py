"""Precomputed image features in ``.npz`` files.

Format: ``ids`` [n] str (image file names, as in the caption file) and ``features``
[n, d] float (any d: 1280 for EfficientNet-Lite0, 768 for MobileNet v1, the papers'
2048 for InceptionV3 / ResNet). Files are read with ``allow_pickle=False``: object
arrays (pickles) are refused, never unpickled.
"""

from __future__ import annotations

import dataclasses
import tokenize
import typing
import zipfile
from pathlib import Path

import numpy as np

from grounded_text.config.choices import NETWORK_NAMES


@typing.runtime_checkable
class ImageFeatureStore(typing.Protocol):
    """What every image-feature store offers: the in-memory ``FeatureStore`` (an ``.npz``)
    and the streamed ``grounded_text.data.streaming.StreamingFeatureStore`` (a store
    directory). ``open_feature_store`` returns one or the other; the code that joins
    captions to rows (``data.pairs.join_captions``) and evaluates on a split
    (``take_rows``) needs only this.

    Attributes:
      path: where it was read from (for messages), or ``None``.
      streamed: True when rows stay on disk and are read by ``tf.data`` (then
        ``features`` is the store itself, not a matrix).
    """

    path: str | None
    streamed: bool

    @property
    def ids(self) -> np.ndarray:
        """[n] image ids in row order."""

    @property
    def dim(self) -> int:
        """d, the feature width."""

    @property
    def num_rows(self) -> int:
        """n."""

    def index(self) -> dict[str, int]:
        """image id → row (``ValueError`` on a duplicate id where the store checks it)."""

    def take_rows(self, rows) -> np.ndarray:
        """float32 [len(rows), d]: the rows ``rows`` (int array-like, repeats allowed)."""


@dataclasses.dataclass(frozen=True)
class FeatureStore:
    """Image features keyed by image id.

    Attributes:
      ids: [n] ``str`` numpy array of image ids.
      features: [n, d] ``float32`` numpy array; row i belongs to ``ids[i]``.
      path: the file it came from (for messages), or ``None``.
    """

    ids: np.ndarray
    features: np.ndarray
    path: str | None = None

    #: Rows are in memory (``ImageFeatureStore.streamed``).
    streamed: typing.ClassVar[bool] = False

    @property
    def dim(self) -> int:
        return int(self.features.shape[1])

    @property
    def num_rows(self) -> int:
        return int(self.features.shape[0])

    def take_rows(self, rows) -> np.ndarray:
        """float32 [len(rows), d]: ``features[rows]``.

        Raises:
          IndexError: a row outside ``[0, num_rows)``."""
        return self.features[np.asarray(rows, dtype=np.int64)]

    def index(self) -> dict[str, int]:
        """Maps image id → row.

        Raises:
          ValueError: an id has two rows (named, with both rows and the file): which
            row is the image's features would be a guess.
        """
        out: dict[str, int] = {}
        for i, image_id in enumerate(self.ids.tolist()):
            first = out.setdefault(image_id, i)
            if first != i:
                raise ValueError(f"{self.path or 'feature store'}: duplicate image id {image_id!r} "
                                 f"(rows {first} and {i}); each image must have one row.")
        return out


def resolve_features_path(root: str | Path, name: str) -> Path:
    """``name`` may be a path to an ``.npz``, a path to a store directory
    (``grounded_text.data.streaming``), or a file stem under ``ROOT/flickr8k/features``."""
    cand = Path(name)
    if cand.suffix == ".npz" and cand.is_file():
        return cand
    if (cand / "manifest.json").is_file():  # a streaming store directory
        return cand
    for base in (Path(root) / "flickr8k" / "features", Path(root) / "features", Path(root)):
        path = base / (name if name.endswith(".npz") else name + ".npz")
        if path.is_file():
            return path
        if (base / name / "manifest.json").is_file():
            return base / name
    raise FileNotFoundError(f"No feature file {name!r} under {str(root)!r} (looked for "
                            f"{Path(root) / 'flickr8k' / 'features' / (name + '.npz')}). {_how_to_make(root, name)}")


def _how_to_make(root: str | Path, name: str) -> str:
    """The command that makes feature file ``name`` from the Flickr8k photos under ``root``,
    or, for a network ``grounded-text features`` does not build, one it does."""
    stem = Path(name).stem
    images = Path(root) / "flickr8k" / "images"

    def command(cnn: str) -> str:
        out = Path(root) / "flickr8k" / "features" / f"{cnn}.npz"
        return f"grounded-text features --images {images} --out {out} --cnn {cnn}"

    if stem in NETWORK_NAMES:
        return f"Make it with: {command(stem)}"
    return (f"{stem!r} is not a network that grounded-text features builds ({', '.join(NETWORK_NAMES)}): "
            f"make one of those, e.g. {command('efficientnet_b0')}, then train with --features efficientnet_b0.")


def check_npz_members(path: str | Path, names=("ids", "features")) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Reads the ``.npy`` headers of an ``.npz``'s members and checks them against the
    members' real sizes, without loading any array.

    A header declares a shape and dtype; ``np.load`` trusts it and allocates that much
    memory first (a 100-byte header can ask for terabytes). Here the declared size,
    ``prod(shape) * itemsize``, must equal the bytes the member holds after its header
    (NumPy's ``.npy`` format, ``numpy.lib.format``), and object dtypes (pickles) are refused.

    Args:
      path: the ``.npz`` file. names: members to check (``NAME`` is ``NAME.npy`` in the
        zip); members that are absent are skipped (the caller reports missing keys).

    Returns:
      ``{name: (shape, dtype)}`` of the members checked.

    Raises:
      ValueError: not a zip file, a header NumPy cannot read, an object dtype, or a
        declared size different from the member's data size; the message names the file
        and the member.
    """
    path = Path(path)
    out = {}
    try:
        with zipfile.ZipFile(path) as archive:
            members = {info.filename: info for info in archive.infolist()}
            for name in names:
                info = members.get(f"{name}.npy")
                if info is None:
                    continue
                with archive.open(info) as f:
                    try:
                        version = np.lib.format.read_magic(f)
                        if version == (1, 0):
                            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                        else:
                            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
                    # A damaged header reaches NumPy's parser of old headers, which raises the
                    # tokenizer's and the parser's own errors, not only ValueError.
                    except (ValueError, OSError, EOFError, SyntaxError, TypeError, RecursionError,
                            tokenize.TokenError) as e:
                        raise ValueError(f"{path}: member {info.filename!r} has no valid .npy header ({e}).") from None
                    header_bytes = f.tell()
                if dtype.hasobject:
                    raise ValueError(f"{path}: member {info.filename!r} holds Python objects (dtype {dtype}); "
                                     "pickled arrays are refused, never unpickled.")
                declared = int(np.prod(shape, dtype=object)) * dtype.itemsize if shape else dtype.itemsize
                held = info.file_size - header_bytes
                if declared != held:
                    raise ValueError(
                        f"{path}: member {info.filename!r} declares shape {tuple(shape)} {dtype} "
                        f"({declared:,} bytes) but holds {held:,} bytes of data; the file is damaged or forged.")
                out[name] = (tuple(shape), dtype)
    except zipfile.BadZipFile as e:
        raise ValueError(f"{path}: not a readable .npz feature file ({e}).") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot be read ({e.strerror or e}).") from None
    return out


def load_npz_features(path: str | Path) -> FeatureStore:
    """Loads and validates a feature file.

    Args:
      path: ``.npz`` file with keys ``ids`` and ``features``.

    Returns:
      A ``FeatureStore`` with float32 features.

    Raises:
      FileNotFoundError: the file does not exist.
      ValueError: not a readable ``.npz``, a member whose ``.npy`` header declares a
        shape/dtype that does not match its size or an object dtype (checked before
        loading: :func:`check_npz_members`), a key is missing, ``ids`` is not a 1-D
        string array, ``features`` is not a 2-D numeric array with one row per id,
        features contain NaN/Inf, or an id has two rows. The message names the file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Feature file {str(path)!r} does not exist.")
    check_npz_members(path)
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: not a readable .npz feature file ({e}).") from e
    with archive:
        missing = {"ids", "features"} - set(archive.files)
        if missing:
            raise ValueError(
                f"{path}: missing key(s) {sorted(missing)}; found {sorted(archive.files)}. "
                "Expected 'ids' [n] str and 'features' [n, d] float."
            )
        try:
            ids = archive["ids"]
            features = archive["features"]
        except ValueError as e:  # object arrays need pickle: refused.
            raise ValueError(f"{path}: arrays must not be pickled objects ({e}).") from e
    if ids.ndim != 1 or ids.dtype.kind not in "US":
        raise ValueError(f"{path}: 'ids' must be a 1-D string array, got {ids.dtype} {ids.shape}.")
    if features.ndim != 2 or features.dtype.kind not in "fiu":
        raise ValueError(
            f"{path}: 'features' must be a 2-D numeric array, got {features.dtype} {features.shape}."
        )
    if features.shape[0] != ids.shape[0]:
        raise ValueError(
            f"{path}: ragged shapes: {ids.shape[0]} ids but {features.shape[0]} feature rows."
        )
    if features.shape[1] == 0:
        raise ValueError(f"{path}: features have dimension 0.")
    features = features.astype(np.float32, copy=False)
    finite = np.isfinite(features).all(axis=1)
    if not finite.all():
        bad = ids[~finite][:3].tolist()
        raise ValueError(
            f"{path}: {int((~finite).sum())} feature row(s) contain NaN/Inf, e.g. {bad}."
        )
    ids = ids.astype(str)
    store = FeatureStore(ids=ids, features=features, path=str(path))
    store.index()  # duplicate ids are an error here, at load time
    return store


def open_feature_store(path: str | Path):
    """Opens an image-feature store for reading.

    Args:
      path: an ``.npz`` file (loaded into memory) or a store directory with a
        ``manifest.json`` (``grounded_text.data.streaming``; streamed from disk).

    Returns:
      An ``ImageFeatureStore``: ``FeatureStore`` for an ``.npz``;
      ``StreamingFeatureStore`` (also ``dataset(...)``) for a store directory.

    Raises:
      FileNotFoundError: ``path`` does not exist, or a directory without a
        manifest, or a shard it lists is missing.
      ValueError: the checks of ``load_npz_features`` / ``read_manifest``.
    """
    path = Path(path)
    if path.is_dir():
        from grounded_text.data.streaming import StreamingFeatureStore  # noqa: PLC0415 (it loads TensorFlow; reading an .npz needs none)

        return StreamingFeatureStore(path)
    return load_npz_features(path)
