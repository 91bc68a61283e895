"""Image decoding and the single-crop / ten-crop views fed to the CNN.

All functions are TensorFlow ops usable inside ``tf.data`` ``map``; images are RGB.

Single crop (``crops=1``): the whole image is resized (bilinear, antialiased) to
S×S, aspect ratio *not* kept — the usual ``keras.applications`` usage and what the
VETE / grounded-space feature pipelines do with InceptionV3 (the full image, no
cropping away of borders).

Ten-crop (``crops=10``; Krizhevsky et al. 2012, §4.1; the ResNet-152 features of
Karpathy & Fei-Fei 2015 and Merkx & Frank 2019): resize so that the *short* side is
R (aspect ratio kept; long side ``round(long * R / short)``), take the four S×S corner
crops and the centre crop, in the order top-left, top-right, bottom-left,
bottom-right, centre, then the horizontal mirrors of those five in the same order.
The centre crop starts at ``((H - S) // 2, (W - S) // 2)``. The CNN features of the
ten crops are averaged. R = 256 for the 224-px networks (the standard 256→224). For
the 299-px InceptionV3, R = round(299 * 256 / 224) = 342, keeping the same
crop-to-image ratio 224/256 = 0.875 (the choice of the Inception evaluation code,
which centre-crops 87.5 % of the image).

Before anything is decoded, the header is read (:mod:`grounded_text.vision.photo_header`): data
that is not JPEG, PNG, GIF, BMP or WebP is refused (TensorFlow's decoder also takes JPEG XL, whose
size no guard here reads), and the EXIF orientation found there turns the decoded image upright
(:func:`orient`), as viewers show it and as the contact sheet of a search draws it.

Size limits (a decompression-bomb guard; such images are reported FAILED and skipped,
never decoded): an image whose header declares more than ``MAX_IMAGE_PIXELS`` pixels
(40 million, e.g. 8000×5000; decoding costs about 15 bytes per pixel, 600 MB at the
limit) is refused before decoding (``--max-pixels`` of ``python -m
grounded_text.features`` changes the limit). A GIF declares a size in its header (the
logical screen) and another in each frame's image descriptor, and the decoder allocates
every frame at its own size: a 300 KB GIF with a 16×16 screen can hold a 20000×20000
frame. So a GIF is cut after its first frame (the only one used) before decoding, and that
frame's declared size is held to the same limit as the screen's (:func:`gif_first_frame`).
With ten crops, an image whose short-side resize would exceed ``MAX_TEN_CROP_ASPECT`` (16)
times R² pixels — an aspect ratio above 16:1, e.g. a 3×5000 strip, which would grow to 342×570,000 — is refused too.
"""

from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

from grounded_text.vision.photo_header import MAX_IMAGE_PIXELS, REFUSED, ImageReadError, probe_bytes, probe_file

TEN_CROP_ORDER = (
    "top_left", "top_right", "bottom_left", "bottom_right", "center",
    "top_left_flip", "top_right_flip", "bottom_left_flip", "bottom_right_flip", "center_flip",
)

MAX_TEN_CROP_ASPECT = 16


def header_size(encoded: tf.Tensor) -> tf.Tensor:
    """int64 [2] (height, width) read from the image header without decoding: JPEG, PNG,
    GIF (logical screen), BMP and WebP (VP8, VP8L, VP8X); [0, 0] for other data (left to
    the decoder, which rejects it)."""
    head = tf.strings.substr(tf.strings.join([tf.strings.substr(encoded, 0, 32), "\0" * 32]), 0, 32)
    b = tf.cast(tf.io.decode_raw(head, tf.uint8), tf.int64)

    def le(i, n):
        return sum(b[i + k] * (256 ** k) for k in range(n))

    def be(i, n):
        return sum(b[i + k] * (256 ** (n - 1 - k)) for k in range(n))

    def starts(magic: bytes, at: int = 0):
        return tf.reduce_all(tf.stack([tf.equal(b[at + k], c) for k, c in enumerate(magic)]))

    png = tf.stack([be(20, 4), be(16, 4)])
    gif = tf.stack([le(8, 2), le(6, 2)])
    bmp_h = le(22, 4)
    bmp = tf.stack([tf.abs(tf.where(bmp_h >= 2 ** 31, bmp_h - 2 ** 32, bmp_h)), le(18, 4)])
    vp8 = tf.stack([le(28, 2) % 16384, le(26, 2) % 16384])
    vp8l = tf.stack([1 + b[22] // 64 + b[23] * 4 + (b[24] % 16) * 1024, 1 + b[21] + (b[22] % 64) * 256])
    vp8x = tf.stack([1 + le(27, 3), 1 + le(24, 3)])
    webp = starts(b"RIFF") & starts(b"WEBP", 8)
    other = tf.where(starts(b"\x89PNG"), png,
            tf.where(starts(b"GIF8"), gif,
            tf.where(starts(b"BM"), bmp,
            tf.where(webp & starts(b"VP8 ", 12), vp8,
            tf.where(webp & starts(b"VP8L", 12), vp8l,
            tf.where(webp & starts(b"VP8X", 12), vp8x, tf.zeros([2], tf.int64)))))))
    return tf.cond(starts(b"\xff\xd8"),
                   lambda: tf.cast(tf.io.extract_jpeg_shape(encoded)[:2], tf.int64),
                   lambda: other)


def _pixel_assert(hw: tf.Tensor, max_pixels: int, what: str) -> tf.Operation:
    pixels = hw[0] * hw[1]
    return tf.debugging.Assert(pixels <= max_pixels, [tf.strings.format(
        what + " is {}x{} = {} pixels, above the limit of {} (decompression-bomb guard)",
        (hw[0], hw[1], pixels, tf.constant(int(max_pixels), tf.int64)))], summarize=1)


def check_image_size(encoded: tf.Tensor, max_pixels: int | None = MAX_IMAGE_PIXELS,
                     frame_size: tf.Tensor | None = None) -> tf.Tensor:
    """An op that fails (``InvalidArgumentError``, "image is HxW = n pixels, above the
    limit ...") when the header declares more than ``max_pixels`` pixels; ``None``: no limit.

    ``frame_size``: optional int64 [2] (height, width) of a GIF's first frame
    (:func:`gif_first_frame`), held to the same limit ("GIF frame is ...")."""
    if max_pixels is None:
        return tf.no_op()
    checks = [_pixel_assert(header_size(encoded), max_pixels, "image")]
    if frame_size is not None:
        checks.append(_pixel_assert(frame_size, max_pixels, "GIF frame"))
    return tf.group(*checks)


def _skip_sub_blocks(data: bytes, pos: int) -> int:
    """Position after the GIF data sub-blocks starting at ``pos`` (each: a length byte, then
    that many bytes; a 0 length ends them); ``-1`` when the data ends first."""
    n = len(data)
    while pos < n:
        size = data[pos]
        if size == 0:
            return pos + 1
        pos += size + 1
    return -1


def gif_first_frame(data: bytes) -> tuple[bytes, tuple[int, int]]:
    """A GIF cut after its first frame, and that frame's declared ``(height, width)``.

    Reads the block structure only (GIF89a specification: header, logical screen
    descriptor, optional global colour table, extension blocks, then the first image
    descriptor, its local colour table and LZW sub-blocks) and never decompresses. The
    returned bytes end with the trailer (``0x3B``) right after the first frame, so the
    decoder allocates that frame only; its pixels are those of frame 0 of the whole file.

    Args:
      data: encoded bytes (any format).

    Returns:
      ``(bytes, (height, width))``; for data that is not a GIF, or a GIF whose structure
      ends before the first frame does, ``(data, (0, 0))`` unchanged (left to the decoder,
      which rejects a damaged file).
    """
    data = bytes(data)
    if len(data) < 13 or data[:4] != b"GIF8":
        return data, (0, 0)
    flags = data[10]
    pos = 13 + (3 * 2 ** ((flags & 7) + 1) if flags & 0x80 else 0)
    while pos < len(data):
        block = data[pos]
        if block == 0x21:  # extension: label byte, then sub-blocks
            pos = _skip_sub_blocks(data, pos + 2)
            if pos < 0:
                break
        elif block == 0x2C:  # image descriptor: left, top, width, height, flags (10 bytes)
            if pos + 11 > len(data):
                break
            width = int.from_bytes(data[pos + 5:pos + 7], "little")
            height = int.from_bytes(data[pos + 7:pos + 9], "little")
            local = data[pos + 9]
            start = pos + 10 + (3 * 2 ** ((local & 7) + 1) if local & 0x80 else 0)
            end = _skip_sub_blocks(data, start + 1)  # + 1: the LZW minimum code size byte
            if end < 0:
                return data, (height, width)
            return data[:end] + b"\x3b", (height, width)
        else:  # the trailer, or damaged data
            break
    return data, (0, 0)


def _first_gif_frame_op(encoded: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """TF wrapper of :func:`gif_first_frame` for GIF bytes; other data passes unchanged."""
    def cut(data):  # a 0-d object array holding bytes, in and out (bytes -> numpy would drop NULs)
        out, hw = gif_first_frame(np.asarray(data).item())
        return np.array(out, dtype=object), np.asarray(hw, np.int64)

    def gif():
        out, hw = tf.numpy_function(cut, [encoded], (tf.string, tf.int64), stateful=False)
        out.set_shape([])
        hw.set_shape([2])
        return out, hw

    is_gif = tf.equal(tf.strings.substr(encoded, 0, 4), b"GIF8")
    return tf.cond(is_gif, gif, lambda: (encoded, tf.zeros([2], tf.int64)))


def ten_crop_resize(size: int) -> int:
    """Short-side length R for a network input of ``size`` px: 256 for 224 px, 342 for
    299 px (``round(size * 256 / 224)``)."""
    return int(round(size * 256 / 224))


def _probe_op(encoded: tf.Tensor, max_pixels: int | None) -> tf.Tensor:
    """int32 [] EXIF orientation of encoded bytes (:func:`~grounded_text.vision.photo_header.probe_bytes`,
    run in Python on the header only); an op that fails with the probe's reason for data it refuses."""
    def probe(data):
        try:
            return np.int32(probe_bytes(np.asarray(data).item(), max_pixels=max_pixels).orientation), b""
        except ImageReadError as e:
            return np.int32(1), e.reason.encode("utf-8")

    orientation, reason = tf.numpy_function(probe, [encoded], (tf.int32, tf.string), stateful=False)
    orientation.set_shape([])
    reason.set_shape([])
    check = tf.debugging.Assert(tf.equal(reason, ""), [reason], summarize=1)
    with tf.control_dependencies([check]):
        return tf.identity(orientation)


def orient(image: tf.Tensor, orientation) -> tf.Tensor:
    """[H, W, C] image → the same turned upright by an EXIF orientation (int [], 1–8; other values
    leave it as it is): [H, W, C] for 1–4, [W, H, C] for 5–8, as ``PIL.ImageOps.exif_transpose``."""
    def transposed():
        return tf.transpose(image, [1, 0, 2])

    branches = [
        lambda: image, lambda: image,
        lambda: tf.reverse(image, [1]),  # 2: mirrored left-right
        lambda: tf.reverse(image, [0, 1]),  # 3: turned 180°
        lambda: tf.reverse(image, [0]),  # 4: mirrored top-bottom
        transposed,  # 5: mirrored along the main diagonal
        lambda: tf.reverse(transposed(), [1]),  # 6: stored 90° anticlockwise (a phone held upright)
        lambda: tf.reverse(transposed(), [0, 1]),  # 7: mirrored along the other diagonal
        lambda: tf.reverse(transposed(), [0]),  # 8: stored 90° clockwise
    ]
    index = tf.cast(orientation, tf.int32)
    index = tf.where((index >= 1) & (index <= 8), index, 1)
    return tf.switch_case(index, branches)


def decode_rgb(encoded: tf.Tensor, max_pixels: int | None = MAX_IMAGE_PIXELS) -> tf.Tensor:
    """Encoded JPEG/PNG/GIF/BMP/WebP bytes (scalar ``tf.string``) → uint8 [H, W, 3], upright.

    The header is read first (:mod:`grounded_text.vision.photo_header`, in Python): other formats,
    damaged headers and images above ``max_pixels`` are refused there, and the EXIF orientation it
    finds turns the image upright (:func:`orient`; [W, H, 3] for a photo stored sideways).
    Grey images are broadcast to 3 channels, alpha is dropped, animated GIFs give
    their first frame (only that frame is decoded: :func:`gif_first_frame`). Invalid
    data, or a header (or a GIF's first frame) declaring more than ``max_pixels``
    pixels (``check_image_size``; checked before decoding), raises
    ``tf.errors.InvalidArgumentError`` (at run time, inside ``tf.data``); :func:`error_reason`
    gives its reason in one line."""
    encoded, frame_size = _first_gif_frame_op(encoded)
    # The probe runs before any TensorFlow JPEG op: libjpeg prints "Improper call to JPEG library"
    # on stderr for a header that ends early, which the probe refuses first.
    orientation = _probe_op(encoded, max_pixels)
    with tf.control_dependencies([orientation]):
        size_check = check_image_size(encoded, max_pixels, frame_size)
    with tf.control_dependencies([size_check]):
        # JPEG with libjpeg's accurate integer DCT, as PIL decodes it: the pipelines that made the
        # papers' and the data root's features read photos with PIL, and TensorFlow's default (fast)
        # DCT moves pixels by up to 23 levels, enough to turn a feature row to cosine 0.96.
        image = tf.cond(tf.strings.substr(encoded, 0, 2) == b"\xff\xd8",
                        lambda: tf.io.decode_jpeg(encoded, channels=3, dct_method="INTEGER_ACCURATE"),
                        lambda: tf.io.decode_image(encoded, channels=3, expand_animations=False))
    image.set_shape([None, None, 3])
    image = orient(image, orientation)
    image.set_shape([None, None, 3])
    return image


def error_reason(message: str) -> str:
    """The reason in a decoding error's message (str → str, one line): a guard's own sentence
    (``tf.debugging.Assert``, eager and graph wording), else the message without TensorFlow's
    op decoration (``{{function_node ...}}``, ``[Op:...]``)."""
    guard = re.search(r"Summarized data: b'(.*?)'\s*$|assertion failed: \[(.*?)\]", message, re.S)
    if guard:
        return (guard.group(1) or guard.group(2)).strip()
    message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", message)
    message = re.sub(r"\s*\[Op:[^\]]*\]( name:.*)?\s*$", "", message)
    return message.strip().splitlines()[0] if message.strip() else "decode error"


def photo_files_dataset(ids: list[str], paths: list, max_pixels: int | None = MAX_IMAGE_PIXELS) -> tf.data.Dataset:
    """``tf.data`` of ``(id tf.string [], encoded bytes tf.string [])`` for files, each file's header
    read first, here, in Python (:func:`~grounded_text.vision.photo_header.probe_file`, with
    ``max_pixels``).

    A file the probe refuses (another format, such as JPEG XL; a header above the pixel limit; a file
    far larger than its pixels need) is never read: it stands in the dataset as a short placeholder
    carrying the reason, which :func:`decode_rgb` raises as that file's error. The others are read
    with ``tf.io.read_file`` in a parallel ``map`` (order kept).

    Args:
      ids: one id (str) per file. paths: the files (str or ``os.PathLike``), as many.
      max_pixels: the pixel limit; ``None``: none.
    """
    refused = []
    for path in paths:
        try:
            probe_file(path, max_pixels)
            refused.append("")
        except ImageReadError as e:
            refused.append(e.reason)
    ds = tf.data.Dataset.from_tensor_slices((tf.constant(list(ids), tf.string),
                                             tf.constant([str(p) for p in paths], tf.string),
                                             tf.constant(refused, tf.string)))
    return ds.map(lambda i, p, r: (i, tf.cond(tf.equal(r, ""), lambda: tf.io.read_file(p),
                                              lambda: tf.strings.join([REFUSED, r]))),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


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
    shape = tf.shape(image)
    short, long = tf.minimum(shape[0], shape[1]), tf.maximum(shape[0], shape[1])
    # A strip (3x5000) would grow to R x (long * R / short) before cropping: gigabytes.
    ok = tf.cast(long, tf.int64) <= MAX_TEN_CROP_ASPECT * tf.cast(short, tf.int64)
    check = tf.debugging.Assert(ok, [tf.strings.format(
        "image is {}x{}: aspect ratio above {}:1, refused for ten crops (its short-side resize would be "
        "too large)", (shape[0], shape[1], MAX_TEN_CROP_ASPECT))], summarize=1)
    with tf.control_dependencies([check]):
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
