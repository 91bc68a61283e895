"""Image decoding and the single-crop / ten-crop views fed to the CNN.

All functions are TensorFlow ops usable inside ``tf.data`` ``map``; images are RGB.

Single crop (``crops=1``): the whole image is resized (bilinear, antialiased) to
S×S, aspect ratio *not* kept — the usual ``keras.applications`` usage and what the
VETE / grounded-space feature pipelines do with InceptionV3 (the full image, no
cropping away of borders).

Ten-crop (``crops=10``; Krizhevsky et al. 2012, §4.1; the ResNet-152 features of
Karpathy & Fei-Fei 2015 and Merckx & Frank 2019): resize so that the *short* side is
R (aspect ratio kept; long side ``round(long * R / short)``), take the four S×S corner
crops and the centre crop, in the order top-left, top-right, bottom-left,
bottom-right, centre, then the horizontal mirrors of those five in the same order.
The centre crop starts at ``((H - S) // 2, (W - S) // 2)``. The CNN features of the
ten crops are averaged. R = 256 for the 224-px networks (the standard 256→224). For
the 299-px InceptionV3, R = round(299 * 256 / 224) = 342, keeping the same
crop-to-image ratio 224/256 = 0.875 (the choice of the Inception evaluation code,
which centre-crops 87.5 % of the image).
"""

from __future__ import annotations

import tensorflow as tf

TEN_CROP_ORDER = (
    "top_left", "top_right", "bottom_left", "bottom_right", "center",
    "top_left_flip", "top_right_flip", "bottom_left_flip", "bottom_right_flip", "center_flip",
)


def ten_crop_resize(size: int) -> int:
    """Short-side length R for a network input of ``size`` px: 256 for 224 px, 342 for
    299 px (``round(size * 256 / 224)``)."""
    return int(round(size * 256 / 224))


def decode_rgb(encoded: tf.Tensor) -> tf.Tensor:
    """Encoded JPEG/PNG/GIF/BMP/WebP bytes (scalar ``tf.string``) → uint8 [H, W, 3].

    Grey images are broadcast to 3 channels, alpha is dropped, animated GIFs give
    their first frame (``expand_animations=False``). Invalid data raises
    ``tf.errors.InvalidArgumentError`` (at run time, inside ``tf.data``)."""
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    image.set_shape([None, None, 3])
    return image


def single_crop(image: tf.Tensor, size: int) -> tf.Tensor:
    """[H, W, 3] uint8/float image → float32 [size, size, 3] in [0, 255] (whole image
    resized, bilinear with antialiasing, aspect ratio not kept)."""
    out = tf.image.resize(tf.cast(image, tf.float32), (size, size), antialias=True)
    return tf.clip_by_value(out, 0.0, 255.0)


def resize_short_side(image: tf.Tensor, short: int) -> tf.Tensor:
    """[H, W, 3] → float32 [H', W', 3] with ``min(H', W') == short``, the other side
    ``round(side * short / min(H, W))`` (at least ``short``); bilinear, antialiased."""
    shape = tf.shape(image)
    h = tf.cast(shape[0], tf.float64)
    w = tf.cast(shape[1], tf.float64)
    scale = tf.cast(short, tf.float64) / tf.minimum(h, w)
    new_h = tf.maximum(tf.cast(tf.round(h * scale), tf.int32), short)
    new_w = tf.maximum(tf.cast(tf.round(w * scale), tf.int32), short)
    out = tf.image.resize(tf.cast(image, tf.float32), tf.stack([new_h, new_w]), antialias=True)
    return tf.clip_by_value(out, 0.0, 255.0)


def ten_crops(image: tf.Tensor, size: int, resize: int | None = None) -> tf.Tensor:
    """[H, W, 3] image → float32 [10, size, size, 3], crops in :data:`TEN_CROP_ORDER`.

    Args:
      image: [H, W, 3] uint8 or float image, RGB.
      size: crop size S (the network input).
      resize: short side R after resizing; default :func:`ten_crop_resize` (size).
        Must be ≥ ``size``.

    Raises:
      ValueError: ``resize < size``.
    """
    resize = ten_crop_resize(size) if resize is None else int(resize)
    if resize < size:
        raise ValueError(f"ten-crop resize {resize} must be >= crop size {size}.")
    big = resize_short_side(image, resize)
    shape = tf.shape(big)
    h, w = shape[0], shape[1]
    bottom, right = h - size, w - size
    cy, cx = (h - size) // 2, (w - size) // 2
    offsets = [(0, 0), (0, right), (bottom, 0), (bottom, right), (cy, cx)]
    five = [tf.image.crop_to_bounding_box(big, y, x, size, size) for y, x in offsets]
    five = tf.stack(five)  # [5, S, S, 3]
    return tf.concat([five, tf.reverse(five, axis=[2])], axis=0)


def make_views(image: tf.Tensor, size: int, crops: int) -> tf.Tensor:
    """``crops == 1`` → [size, size, 3]; ``crops == 10`` → [10, size, size, 3] (float32).

    Raises:
      ValueError: ``crops`` not in {1, 10}.
    """
    check_crops(crops)
    return single_crop(image, size) if crops == 1 else ten_crops(image, size)


def check_crops(crops) -> int:
    """Validates ``--crops``. Raises ValueError unless it is 1 or 10."""
    if crops not in (1, 10) or isinstance(crops, bool):
        raise ValueError(f"--crops must be 1 or 10, got {crops!r}.")
    return int(crops)
