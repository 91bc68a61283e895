"""What a photo declares in its header, read without decoding it: its format, its size and its EXIF
orientation; and the refusals of the decompression-bomb guard that need no decoding.

Every way a photo enters (``encode_images`` with paths, bytes or PIL images, ``features``, ``search``
and its contact sheet) reads it here first. Pillow's format plugins parse the header (for JPEG the
markers before the compressed data, for PNG the chunks before the image data), so a file is read
only as far as its header, whatever its size. Refused, with an :class:`ImageReadError` that names
the file:

* data of a format TensorFlow's decoder is not given here: only JPEG, PNG, GIF, BMP and WebP are
  read, the formats whose header the guard reads (TensorFlow also decodes JPEG XL, whose 53 KB file
  can declare 20000 × 20000 pixels: a 6.9 GB decode);
* a header declaring more than ``max_pixels`` pixels (40 million by default);
* a file much larger than its pixels can need (more than :func:`max_file_bytes`: 16 bytes a pixel,
  twice a 16-bit RGBA PNG stored uncompressed, plus 64 MiB of metadata), refused before it is read,
  since a reader holds the whole file in memory.

A GIF's logical screen is held to the same limits here; its frames, which declare sizes of their
own, by :func:`grounded_text.vision.crops.check_image_size` once its first frame is cut out.

The orientation (EXIF tag 274, 1 to 8, where 6 is what a phone held upright writes) says how the
stored pixels are to be turned for the photo to stand upright; :func:`orient_pil` applies it to a PIL image, and
:func:`grounded_text.vision.crops.orient` to a decoded tensor.
"""

from __future__ import annotations

import io
import os
from typing import NamedTuple

from PIL import BmpImagePlugin, Image, JpegImagePlugin, PngImagePlugin, WebPImagePlugin

__all__ = ["FORMATS", "MAX_IMAGE_PIXELS", "REFUSED", "ImageReadError", "PhotoHeader", "max_file_bytes",
           "orient_pil", "probe_bytes", "probe_file", "refused_token"]

#: Images whose header declares more pixels are refused before decoding (40 million, e.g.
#: 8000 × 5000; decoding costs about 15 bytes a pixel, 600 MB at the limit).
MAX_IMAGE_PIXELS = 40_000_000
#: The formats read (Pillow's names), by their signatures; other data is refused unread.
FORMATS = ("JPEG", "PNG", "GIF", "BMP", "WebP")
#: Bytes a pixel may take in a file, and the metadata allowed on top (:func:`max_file_bytes`).
BYTES_PER_PIXEL = 16
METADATA_BYTES = 64 * 2 ** 20
#: EXIF's orientation tag.
ORIENTATION_TAG = 0x0112
#: The start of a placeholder that stands for a file refused unread in a stream of encoded images
#: (``features``' input pipeline); the reason follows. No image format starts with a NUL byte then
#: this text.
REFUSED = b"\x00grounded-text refused photo\x00"

_OPENERS = {"JPEG": JpegImagePlugin.JpegImageFile, "PNG": PngImagePlugin.PngImageFile,
            "BMP": BmpImagePlugin.BmpImageFile, "WebP": WebPImagePlugin.WebPImageFile}
# Formats TensorFlow decodes or a camera writes that are named when refused.
_OTHERS = ((b"\xff\x0a", "JPEG XL"), (b"\x00\x00\x00\x0cJXL \r\n\x87\n", "JPEG XL"), (b"II*\x00", "TIFF"),
           (b"MM\x00*", "TIFF"))
_TRANSPOSE = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
              4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270,
              7: Image.Transpose.TRANSVERSE, 8: Image.Transpose.ROTATE_90}


class ImageReadError(ValueError):
    """A photo could not be read or decoded; the message names it.

    Attributes:
      path: the file (or ``"images[i]"`` for an in-memory image; ``""`` when not known).
      reason: why, without the name (one line).
    """

    def __init__(self, message: str, path: str = "", reason: str = ""):
        super().__init__(message)
        self.path = path
        self.reason = reason or message


class PhotoHeader(NamedTuple):
    """What a photo's header declares.

    Attributes:
      format: one of :data:`FORMATS`.
      height, width: the stored size in pixels (a GIF: its logical screen).
      orientation: the EXIF orientation, 1 (upright) to 8; 1 when there is none or it is damaged.
    """

    format: str
    height: int
    width: int
    orientation: int


def max_file_bytes(pixels: int) -> int:
    """The largest file accepted for an image of ``pixels`` pixels (int → int bytes)."""
    return BYTES_PER_PIXEL * int(pixels) + METADATA_BYTES


def _format_of(head: bytes) -> str:
    """The format of the first 16 bytes, or raise the refusal naming what they are."""
    if not head:
        raise ValueError("empty file (0 bytes)")
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if head.startswith(b"BM"):
        return "BMP"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "WebP"
    named = next((name for magic, name in _OTHERS if head.startswith(magic)), None)
    if named is None and head[4:8] == b"ftyp":
        named = "HEIF/AVIF"
    what = f"a {named} image" if named else "unknown image file format"
    raise ValueError(f"{what}: not read here (JPEG, PNG, GIF, BMP and WebP are; the decompression-bomb guard "
                     "reads their headers only)")


def _orientation(info: dict) -> int:
    exif = info.get("exif")
    if not exif:
        return 1
    try:
        value = Image.Exif()
        value.load(exif)
        orientation = int(value.get(ORIENTATION_TAG, 1))
    except Exception:  # noqa: BLE001 — damaged metadata leaves the pixels as stored, as viewers do
        return 1
    return orientation if 1 <= orientation <= 8 else 1


def _read_header(fp, size: int, max_pixels: int | None) -> PhotoHeader:
    """The header of the data in ``fp`` (``size`` bytes); ValueError with the reason when refused."""
    head = fp.read(16)
    fp.seek(0)
    fmt = _format_of(head)
    if max_pixels is not None and size > max_file_bytes(max_pixels):
        raise ValueError(f"the file is {size} bytes, more than an image of at most {max_pixels} pixels needs "
                         f"({max_file_bytes(max_pixels)} bytes; decompression-bomb guard)")
    if fmt == "GIF":
        # No EXIF in a GIF; its frames declare sizes of their own, guarded once its first frame is
        # cut out (where the frame is named), so the logical screen is all that is read here.
        screen = fp.read(13)
        if len(screen) < 13:
            raise ValueError("damaged GIF header (it ends before its logical screen descriptor)")
        return PhotoHeader(fmt, int.from_bytes(screen[8:10], "little"), int.from_bytes(screen[6:8], "little"), 1)
    try:
        image = _OPENERS[fmt](fp)
    except Exception as e:  # noqa: BLE001 — a plugin's parse errors are SyntaxError, OSError, struct.error, ...
        raise ValueError(f"damaged {fmt} header ({' '.join(str(e).split()) or type(e).__name__})") from None
    width, height = image.size
    header = PhotoHeader(fmt, int(height), int(width), _orientation(image.info))
    if max_pixels is not None:
        pixels = header.height * header.width
        if pixels > max_pixels:
            raise ValueError(f"image is {header.height}x{header.width} = {pixels} pixels, above the limit of "
                             f"{max_pixels} (decompression-bomb guard)")
        if size > max_file_bytes(pixels):
            raise ValueError(f"the file is {size} bytes, far more than a {header.height}x{header.width} image needs "
                             f"(at most {max_file_bytes(pixels)}); refused unread")
    return header


def probe_file(path: str | os.PathLike, max_pixels: int | None = MAX_IMAGE_PIXELS) -> PhotoHeader:
    """Reads a photo file's header (only the header: never the whole file).

    Args:
      path: the file.
      max_pixels: the pixel limit of the decompression-bomb guard; ``None``: no limit (and no
        bound on the file's size).

    Returns:
      :class:`PhotoHeader`.

    Raises:
      ImageReadError: the file cannot be opened, is empty, is not JPEG, PNG, GIF, BMP or WebP, has
        a damaged header, declares more than ``max_pixels`` pixels, or is far larger than they need;
        the message starts with the path in quotes.
    """
    name = str(path)
    try:
        with open(path, "rb") as fp:
            return _read_header(fp, os.fstat(fp.fileno()).st_size, max_pixels)
    except OSError as e:
        reason = f"cannot read it ({e.strerror or e})"
    except ValueError as e:
        reason = str(e)
    raise ImageReadError(f"{name!r}: {reason}.", name, reason)


def probe_bytes(data: bytes, what: str = "", max_pixels: int | None = MAX_IMAGE_PIXELS) -> PhotoHeader:
    """:func:`probe_file` of encoded bytes held in memory.

    Args:
      data: the encoded photo, or a :func:`refused_token` (refused with its reason).
      what: its name for the message (``"images[3]"``); ``""``: the message is the reason alone.
      max_pixels: as :func:`probe_file`.

    Returns:
      :class:`PhotoHeader`.

    Raises:
      ImageReadError: as :func:`probe_file`.
    """
    data = bytes(data)
    if data.startswith(REFUSED):
        reason = data[len(REFUSED):].decode("utf-8", "replace")
    else:
        try:
            return _read_header(io.BytesIO(data), len(data), max_pixels)
        except ValueError as e:
            reason = str(e)
    raise ImageReadError(f"{what}: {reason}." if what else reason, what, reason)


def refused_token(reason: str) -> bytes:
    """The placeholder that stands for a file refused unread, carrying ``reason`` (str → bytes)."""
    return REFUSED + reason.encode("utf-8")


def orient_pil(image: Image.Image, orientation: int) -> Image.Image:
    """A PIL image turned upright by an EXIF ``orientation`` (1–8; others leave it as it is)."""
    method = _TRANSPOSE.get(int(orientation))
    return image if method is None else image.transpose(method)
