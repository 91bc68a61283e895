"""ImageNet CNNs used as image encoders, and how to load their weights.

Every network is a ``keras.applications`` backbone built with ``include_top=False,
pooling="avg"``: the output is the global-average-pooled last convolutional block
(the "penultimate layer" features of the grounding papers). The table:

=================  ======  =======================================  ======  ==============================
``--cnn``          input   ``preprocess_input`` scaling             dim     used by
=================  ======  =======================================  ======  ==============================
inception_v3       299 px  "tf": x / 127.5 - 1 → [-1, 1]            2048    Kurach et al. 2017 (VETE);
                                                                            Bordes et al. 2019
resnet152          224 px  "caffe": RGB→BGR, minus ImageNet mean    2048    Merkx & Frank 2019 (ten-crop);
                                                                            Karpathy & Fei-Fei 2015 style
resnet50           224 px  "caffe"                                  2048    He et al. 2016
vgg19              224 px  "caffe"                                  512     Kiros et al. 2014; VSE
efficientnet_b0    224 px  none (rescaling is inside the model)      1280    Tan & Le 2019
efficientnet_lite0 224 px  (x - 127) / 128 → about [-1, 1]          1280    Tan & Le 2019 (Lite variant);
                                                                            the package's default features
                                                                            (Google's weights, shipped)
efficientnet_lite0_ra 224  (x - 127) / 128                           1280    keras-hub's RandAugment Lite0
=================  ======  =======================================  ======  ==============================

Input to every network here is float32 RGB in [0, 255]; :func:`FeatureNetwork.__call__`
applies the network's own ``preprocess_input``.

``efficientnet_lite0`` is the network of the Flickr8k features in the data root and of the
shipped models' image towers: Google's EfficientNet-Lite0 ImageNet checkpoint, converted once
into Keras weights that ship inside the package (:mod:`grounded_text.vision.lite0`; built from core
Keras layers, no extra, nothing downloaded, the file's SHA-256 checked at load). On the 1,000
test photos of the data root it reproduces ``efficientnet_lite0.npz`` (docs/features.md gives the
figures).

``efficientnet_lite0_ra`` is another network of the same architecture: keras-hub's
``efficientnet_lite0_ra_imagenet`` preset (timm's RandAugment training; the ``[images]`` extra,
fetched from Kaggle Models on first use and cached under ``$KAGGLEHUB_CACHE``, by default
``~/.cache/kagglehub``). Its features live in an unrelated basis: a tower trained on
``efficientnet_lite0`` features cannot read them, and the pairing check refuses them.

Weights: ``"imagenet"`` (the Keras ImageNet checkpoint, downloaded once into
``$KERAS_HOME/models`` or ``~/.keras/models``; offline and not cached this fails fast
with :class:`WeightsUnavailableError`), ``None``/``"none"`` (random initialisation),
or a path to a ``.weights.h5`` / ``.h5`` file for the same architecture.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
from pathlib import Path
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from grounded_text.config.choices import NETWORK_NAMES
from grounded_text.utils.compat import keras_application_weight_hash, keras_home
from grounded_text.utils.durable import file_sha256
from grounded_text.utils.extras import require
from grounded_text.vision import lite0

_GCS = "https://storage.googleapis.com/"
_KERAS_APPS = _GCS + "tensorflow/keras-applications/"
_PROBE_HOST = ("storage.googleapis.com", 443)
PROBE_TIMEOUT_S = 5.0
DOWNLOAD_SOCKET_TIMEOUT_S = 30.0


class WeightsUnavailableError(RuntimeError):
    """The ImageNet weights are neither cached nor downloadable (offline)."""


@dataclasses.dataclass(frozen=True)
class NetworkSpec:
    """One ``keras.applications`` backbone.

    Attributes:
      name: the ``--cnn`` name.
      constructor: the ``keras.applications`` function (called with
        ``include_top=False, pooling="avg", weights=..., input_shape=(S, S, 3)``).
      preprocess: the network's ``keras.applications.<module>.preprocess_input``:
        float32 RGB [..., S, S, 3] in [0, 255] → the network's input scaling.
      input_size: S, the square crop size in pixels.
      dim: output dimension of the pooled penultimate layer.
      scaling: human-readable description of ``preprocess``.
      notop_file: file name of the no-top ImageNet checkpoint in the Keras cache.
      notop_origin: its download URL.
      notop_hash: its sha256 / md5 as listed by Keras, or ``None`` where Keras lists none.
      source: the paper.
      shipped: weights that ship inside the package (``"imagenet"`` loads them, offline, after
        checking their SHA-256), or ``None``.
      preset: for a keras-hub network, the preset its ImageNet weights come from
        (``keras_hub.models.EfficientNetBackbone.from_preset``); ``None`` for
        ``keras.applications`` networks, whose weights are ``notop_file``.
    """

    name: str
    constructor: Callable[..., keras.Model]
    preprocess: Callable
    input_size: int
    dim: int
    scaling: str
    notop_file: str
    notop_origin: str
    notop_hash: str | None
    source: str
    preset: str | None = None
    shipped: Path | None = None


def _resnet_hash(name: str) -> str | None:
    return keras_application_weight_hash("resnet", name)


def _efficientnet_hash(key: str) -> str | None:
    return keras_application_weight_hash("efficientnet", key)


#: keras-hub ``EfficientNetBackbone`` arguments of EfficientNet-Lite0: the B0 stage table
#: (Tan & Le 2019, Table 1) with width and depth 1.0, ReLU6 and no squeeze-and-excitation
#: (the Lite changes), as keras-hub's converter of the timm ``efficientnet_lite0`` weights
#: (``keras_hub/src/utils/timm/convert_efficientnet.py``) configures it.
LITE0_CONFIG = {
    "stackwise_width_coefficients": [1.0] * 7,
    "stackwise_depth_coefficients": [1.0] * 7,
    "stackwise_kernel_sizes": [3, 3, 5, 3, 5, 5, 3],
    "stackwise_num_repeats": [1, 2, 2, 3, 3, 4, 1],
    "stackwise_input_filters": [32, 16, 24, 40, 80, 112, 192],
    "stackwise_output_filters": [16, 24, 40, 80, 112, 192, 320],
    "stackwise_expansion_ratios": [1, 6, 6, 6, 6, 6, 6],
    "stackwise_strides": [1, 2, 2, 2, 1, 2, 1],
    "stackwise_squeeze_and_excite_ratios": [0] * 7,
    "stackwise_block_types": ["v1"] * 7,
    "min_depth": None,
    "include_stem_padding": True,
    "use_depth_divisor_as_min_depth": True,
    "cap_round_filter_decrease": True,
    "stem_conv_padding": "valid",
    "batch_norm_momentum": 0.9,
    "batch_norm_epsilon": 1e-5,
    "dropout": 0,
    "projection_activation": None,
    "activation": "relu6",
}
LITE0_PRESET = "efficientnet_lite0_ra_imagenet"
_KAGGLE_HOST = ("www.kaggle.com", 443)


def _preset_cached(preset: str) -> bool:
    """Whether kagglehub holds a copy of the keras-hub ``preset`` (no network needed)."""
    root = Path(os.environ.get("KAGGLEHUB_CACHE") or "~/.cache/kagglehub").expanduser()
    folder = root / "models" / "keras" / "efficientnet" / "keras" / preset
    return folder.is_dir() and any(folder.rglob("*.weights.h5"))


def _pooled(backbone, size: int, name: str) -> keras.Model:
    inputs = keras.Input((size, size, 3))
    outputs = keras.layers.GlobalAveragePooling2D(name="avg_pool")(backbone(inputs))
    return keras.Model(inputs, outputs, name=name)


def efficientnet_lite0_ra(*, include_top=False, weights=None, pooling="avg", input_shape=(224, 224, 3)) -> keras.Model:
    """keras-hub's RandAugment EfficientNet-Lite0, global-average pooled: float32 [N, S, S, 3]
    already scaled by :func:`lite0.preprocess` → float32 [N, 1280]. Not the network of the
    package's features (that is :func:`efficientnet_lite0`). Same call as a ``keras.applications``
    constructor, for :class:`FeatureNetwork`.

    Args:
      include_top, pooling: only ``False`` and ``"avg"`` (pooled features).
      weights: ``None`` (random, offline) or ``"imagenet"`` (keras-hub's
        ``efficientnet_lite0_ra_imagenet`` preset, downloaded by keras-hub on first use).
      input_shape: ``(S, S, 3)``.

    Raises:
      MissingExtraError: keras-hub is not installed (``pip install 'grounded_text[images]'``).
      WeightsUnavailableError: ``"imagenet"`` and the preset cannot be fetched or read.
      ValueError: another ``include_top``/``pooling``/``weights``.
    """
    if include_top or pooling != "avg" or weights not in (None, "imagenet"):
        raise ValueError("efficientnet_lite0 builds pooled features only (include_top=False, pooling='avg', "
                         f"weights None or 'imagenet'), got {include_top=}, {pooling=}, {weights=}.")
    hub = require("keras_hub", "the efficientnet_lite0_ra network")
    if weights is None:
        backbone = hub.models.EfficientNetBackbone(input_shape=tuple(input_shape), **LITE0_CONFIG)
    else:
        hint = (f"ImageNet weights for efficientnet_lite0_ra (keras-hub preset {LITE0_PRESET!r}, fetched from Kaggle "
                "Models into $KAGGLEHUB_CACHE, by default ~/.cache/kagglehub) are not available")
        advice = (". Connect once to download them, pass --weights PATH to a .weights.h5 file for the same "
                  "architecture, or use --weights none (random initialisation, for testing only).")
        # Like imagenet_weights_path: a quick probe so an offline machine fails at once
        # instead of waiting on kagglehub's retries.
        reason = None if _preset_cached(LITE0_PRESET) else _probe_network(_KAGGLE_HOST, PROBE_TIMEOUT_S)
        if reason is not None:
            raise WeightsUnavailableError(f"{hint} (offline? {reason}){advice}")
        try:
            backbone = hub.models.EfficientNetBackbone.from_preset(LITE0_PRESET, input_shape=tuple(input_shape))
        except Exception as e:  # noqa: BLE001 — no Kaggle access, a damaged cache: the same advice.
            raise WeightsUnavailableError(f"{hint} ({type(e).__name__}: {e}){advice}") from e
    return _pooled(backbone, int(input_shape[0]), "efficientnet_lite0_ra")


def efficientnet_lite0(*, include_top=False, weights=None, pooling="avg", input_shape=(224, 224, 3)) -> keras.Model:
    """Google's EfficientNet-Lite0, global-average pooled (:mod:`grounded_text.vision.lite0`):
    float32 [N, S, S, 3] already scaled by :func:`lite0.preprocess` → float32 [N, 1280]. Same call
    as a ``keras.applications`` constructor; built with random weights (``FeatureNetwork`` loads
    the shipped file into it).

    Raises:
      ValueError: another ``include_top``/``pooling``, or ``weights`` other than ``None``.
    """
    if include_top or pooling != "avg" or weights is not None:
        raise ValueError("efficientnet_lite0 builds pooled features only (include_top=False, pooling='avg', "
                         f"weights loaded afterwards), got {include_top=}, {pooling=}, {weights=}.")
    return lite0.build_lite0(int(input_shape[0]))


def _specs() -> dict[str, NetworkSpec]:
    apps = keras.applications
    return {
        "inception_v3": NetworkSpec(
            "inception_v3", apps.InceptionV3, apps.inception_v3.preprocess_input, 299, 2048,
            "x/127.5 - 1 (range [-1, 1])",
            "inception_v3_weights_tf_dim_ordering_tf_kernels_notop.h5",
            _KERAS_APPS + "inception_v3/inception_v3_weights_tf_dim_ordering_tf_kernels_notop.h5",
            None,
            "Szegedy et al. 2016 (CVPR); features of Kurach et al. 2017 (VETE) and "
            "Bordes et al. 2019",
        ),
        "resnet152": NetworkSpec(
            "resnet152", apps.ResNet152, apps.resnet.preprocess_input, 224, 2048,
            "caffe: RGB→BGR, minus ImageNet mean (103.939, 116.779, 123.68)",
            "resnet152_weights_tf_dim_ordering_tf_kernels_notop.h5",
            _KERAS_APPS + "resnet/resnet152_weights_tf_dim_ordering_tf_kernels_notop.h5",
            _resnet_hash("resnet152"),
            "He et al. 2016 (CVPR); ten-crop features of Merkx & Frank 2019",
        ),
        "resnet50": NetworkSpec(
            "resnet50", apps.ResNet50, apps.resnet50.preprocess_input, 224, 2048,
            "caffe: RGB→BGR, minus ImageNet mean (103.939, 116.779, 123.68)",
            "resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5",
            _KERAS_APPS + "resnet/resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5",
            _resnet_hash("resnet50"),
            "He et al. 2016 (CVPR)",
        ),
        "vgg19": NetworkSpec(
            "vgg19", apps.VGG19, apps.vgg19.preprocess_input, 224, 512,
            "caffe: RGB→BGR, minus ImageNet mean (103.939, 116.779, 123.68)",
            "vgg19_weights_tf_dim_ordering_tf_kernels_notop.h5",
            _KERAS_APPS + "vgg19/vgg19_weights_tf_dim_ordering_tf_kernels_notop.h5",
            None,
            "Simonyan & Zisserman 2015 (ICLR); image encoder of Kiros et al. 2014 / VSE++",
        ),
        "efficientnet_b0": NetworkSpec(
            "efficientnet_b0", apps.EfficientNetB0, apps.efficientnet.preprocess_input, 224,
            1280, "none (Rescaling + Normalization layers inside the model)",
            "efficientnetb0_notop.h5",
            "https://storage.googleapis.com/keras-applications/efficientnetb0_notop.h5",
            _efficientnet_hash("b0"),
            "Tan & Le 2019 (ICML)",
        ),
        "efficientnet_lite0": NetworkSpec(
            "efficientnet_lite0", efficientnet_lite0, lite0.preprocess, 224, 1280,
            "(x - 127) / 128 (range about [-1, 1])",
            lite0.CHECKPOINT, "shipped in the package", lite0.CHECKPOINT_SHA256,
            "Tan & Le 2019 (ICML), Lite variant (no squeeze-and-excitation, ReLU6); Google's ImageNet "
            "weights, the network of the package's features and shipped image towers",
            shipped=lite0.WEIGHTS_FILE,
        ),
        "efficientnet_lite0_ra": NetworkSpec(
            "efficientnet_lite0_ra", efficientnet_lite0_ra, lite0.preprocess, 224, 1280,
            "(x - 127) / 128 (range about [-1, 1])",
            LITE0_PRESET, "kaggle://keras/efficientnet/keras/efficientnet_lite0_ra_imagenet", None,
            "Tan & Le 2019 (ICML), Lite variant; keras-hub's RandAugment (timm) weights, another network "
            "than efficientnet_lite0",
            preset=LITE0_PRESET,
        ),
    }




def get_spec(cnn: str) -> NetworkSpec:
    """Returns the :class:`NetworkSpec` of ``cnn``.

    Raises:
      ValueError: unknown name; the message lists the known ones.
    """
    if cnn not in NETWORK_NAMES:
        raise ValueError(f"Unknown --cnn {cnn!r}; choose one of {list(NETWORK_NAMES)}.")
    return _specs()[cnn]


def keras_cache_dir() -> Path:
    """Folder where Keras keeps downloaded weights: ``$KERAS_HOME/models`` (read at call
    time), else Keras's own home (``~/.keras``, or ``/tmp/.keras`` when home is read-only)."""
    home = os.environ.get("KERAS_HOME")
    if not home:
        home = keras_home()
    return Path(os.path.expanduser(home)) / "models"


def _probe_network(host: tuple[str, int], timeout: float) -> str | None:
    """``None`` when a TCP connection to ``host`` opens within ``timeout`` seconds, else
    the reason. Runs in a daemon thread so even a stuck DNS lookup cannot hang the caller."""
    result: list[str | None] = ["timed out after %.0f s" % timeout]

    def _try():
        try:
            with socket.create_connection(host, timeout=timeout):
                result[0] = None
        except OSError as e:
            result[0] = f"{type(e).__name__}: {e}"

    thread = threading.Thread(target=_try, daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    return result[0]


def imagenet_weights_path(spec: NetworkSpec) -> Path:
    """Local path of the no-top ImageNet checkpoint, downloading it if needed.

    Never hangs: a cached file is used as is; otherwise a TCP probe of
    ``storage.googleapis.com:443`` (``PROBE_TIMEOUT_S``) decides whether to try the
    download, which runs with a ``DOWNLOAD_SOCKET_TIMEOUT_S`` socket timeout.

    Raises:
      WeightsUnavailableError: not cached and the host is unreachable or the download
        failed. The message names the expected cache file and the alternatives.
    """
    cache = keras_cache_dir()
    cached = cache / spec.notop_file
    if cached.is_file() and cached.stat().st_size > 0:
        return cached
    hint = (
        f"ImageNet weights for {spec.name} are not cached at {cached} and cannot be "
        f"downloaded from {spec.notop_origin}"
    )
    alternatives = (
        f". Copy that file into {cache} (or set KERAS_HOME), pass --weights PATH to a "
        ".weights.h5/.h5 file for the same architecture, or use --weights none (random "
        "initialisation, for testing only)."
    )
    reason = _probe_network(_PROBE_HOST, PROBE_TIMEOUT_S)
    if reason is not None:
        raise WeightsUnavailableError(f"{hint} (offline? {reason}){alternatives}")
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_SOCKET_TIMEOUT_S)
    try:
        path = keras.utils.get_file(
            spec.notop_file, spec.notop_origin, cache_subdir="models",
            cache_dir=str(cache.parent), file_hash=spec.notop_hash,
        )
    except Exception as e:  # noqa: BLE001 — any download failure gets the same advice.
        raise WeightsUnavailableError(f"{hint} ({type(e).__name__}: {e}){alternatives}") from e
    finally:
        socket.setdefaulttimeout(old)
    return Path(path)


def _resolve_weights(spec: NetworkSpec, weights) -> str | None:
    if weights is None or (isinstance(weights, str) and weights.lower() == "none"):
        return None
    if isinstance(weights, str) and weights == "imagenet":
        if spec.shipped is not None:  # inside the package: checked, never downloaded
            return str(lite0.check_weights_file(spec.shipped))
        if spec.preset is not None:
            return "imagenet"  # keras-hub fetches and caches the preset itself
        return str(imagenet_weights_path(spec))
    path = Path(weights)
    if not path.is_file():
        raise FileNotFoundError(
            f"--weights {str(weights)!r}: no such file (expected 'imagenet', 'none' or a "
            f"path to a .weights.h5/.h5 file for {spec.name})."
        )
    if not (path.name.endswith(".h5") or path.name.endswith(".keras")):
        raise ValueError(f"--weights {str(path)!r}: expected a .weights.h5 or .h5 file.")
    return str(path)


#: The seed of a randomly initialised network (``--weights none``) unless another is given.
DEFAULT_RANDOM_SEED = 0


def feature_provenance(cnn: str, crops: int, weights="imagenet", seed: int = DEFAULT_RANDOM_SEED) -> dict:
    """What makes a feature row, as a feature store records it (``NpzFeatureSink(provenance=)``).

    Args:
      cnn: the network name (``NETWORK_NAMES``).
      crops: 1 or 10.
      weights: ``"imagenet"``, ``None``/``"none"`` (random, seeded with ``seed``) or a weights
        file (recorded by its SHA-256, read now).
      seed: the random network's seed.

    Returns:
      ``{"cnn", "weights", "crops", "image_size", "preprocessing"}`` (str/int values):
      ``weights`` is ``"imagenet:<cache file or keras-hub preset>"`` (for a network whose weights
      ship in the package, ``"imagenet:<checkpoint> sha256:<its digest>"``), ``"random:seed=<n>"`` or
      ``"sha256:<digest> (<file name>)"``.

    Raises:
      ValueError: unknown ``cnn``. FileNotFoundError: a weights file that does not exist.
    """
    spec = get_spec(cnn)
    if weights is None or (isinstance(weights, str) and weights.lower() == "none"):
        recorded = f"random:seed={int(seed)}"
    elif isinstance(weights, str) and weights == "imagenet":
        if spec.shipped is not None:  # the checkpoint's digest: the same weights in any file format
            recorded = f"imagenet:{spec.notop_file} sha256:{spec.notop_hash}"
        elif spec.preset:
            recorded = f"imagenet:keras-hub preset {spec.preset}"
        else:
            recorded = f"imagenet:{spec.notop_file}"
    else:
        path = Path(weights)
        if not path.is_file():
            raise FileNotFoundError(f"--weights {str(weights)!r}: no such file (expected 'imagenet', 'none' or a "
                                    f"path to a .weights.h5/.h5 file for {spec.name}).")
        recorded = f"sha256:{file_sha256(path)} ({path.name})"
    return {"cnn": spec.name, "weights": recorded, "crops": int(crops), "image_size": int(spec.input_size),
            "preprocessing": spec.scaling}


class FeatureNetwork:
    """A pooled ImageNet backbone: float32 RGB [N, S, S, 3] in [0, 255] → float32 [N, d].

    Args:
      cnn: a name in :data:`NETWORK_NAMES`.
      weights: ``"imagenet"``, ``None``/``"none"`` or a weights-file path (see module doc).
      mixed_precision: build the backbone under the ``mixed_float16`` policy (for GPUs);
        the output is still float32. The global policy is restored afterwards.
      seed: with random weights (``"none"``), the seed of the initialisation, so that every
        process builds the same network (``keras.utils.set_random_seed``); ignored otherwise.

    Raises:
      ValueError: unknown ``cnn``; a weights file that does not fit the architecture; a
        damaged ImageNet file in Keras' cache (``"imagenet"``: the message names the cache
        file, not ``--weights``).
      FileNotFoundError: ``weights`` is a path that does not exist.
      WeightsUnavailableError: ``"imagenet"`` while offline and not cached.
      MissingExtraError: ``efficientnet_lite0_ra`` without keras-hub (the ``[images]`` extra).
      WeightsIntegrityError (a ValueError): the shipped ``efficientnet_lite0`` weights are missing
        or damaged.
    """

    def __init__(self, cnn: str, weights="imagenet", mixed_precision: bool = False,
                 seed: int = DEFAULT_RANDOM_SEED):
        self.spec = get_spec(cnn)
        path = _resolve_weights(self.spec, weights)
        if path is None:  # a random network: the same one in every process
            keras.utils.set_random_seed(int(seed))
        self.seed = int(seed)
        previous = keras.mixed_precision.global_policy()
        if mixed_precision:
            keras.mixed_precision.set_global_policy("mixed_float16")
        try:
            size = self.spec.input_size
            preset = path == "imagenet" and self.spec.preset is not None
            self.model = self.spec.constructor(
                include_top=False, weights="imagenet" if preset else None, pooling="avg",
                input_shape=(size, size, 3)
            )
            if path is not None and not preset:
                try:
                    self.model.load_weights(path)
                except Exception as e:  # noqa: BLE001
                    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                    if weights == "imagenet":  # the user passed no file: Keras' cache holds a damaged one
                        raise ValueError(
                            f"the cached ImageNet weights of {cnn}, {path!r} (Keras' cache), cannot be loaded "
                            f"({type(e).__name__}: {first[:200]}); the file is damaged or truncated: delete it "
                            "so that it is downloaded again, or copy a good copy there."
                        ) from None
                    raise ValueError(
                        f"--weights {path!r} does not fit {cnn} (include_top=False): "
                        f"{type(e).__name__}: {first[:200]}"
                    ) from e
        finally:
            keras.mixed_precision.set_global_policy(previous)
        self.mixed_precision = mixed_precision
        self.weights = "none" if path is None else path
        size = self.spec.input_size
        # One trace per network, whatever the batch size.
        self._call = tf.function(
            self._forward, input_signature=[tf.TensorSpec([None, size, size, 3], tf.float32)]
        )

    @property
    def input_size(self) -> int:
        return self.spec.input_size

    @property
    def dim(self) -> int:
        return self.spec.dim

    def _forward(self, images):
        x = self.spec.preprocess(tf.cast(images, tf.float32))
        return tf.cast(self.model(x, training=False), tf.float32)

    def __call__(self, images) -> tf.Tensor:
        """float32 [N, S, S, 3] RGB in [0, 255] → float32 [N, d] tensor."""
        return self._call(tf.cast(images, tf.float32))

    def features(self, images) -> np.ndarray:
        """Like ``__call__`` but returns a NumPy array."""
        return self(images).numpy()
