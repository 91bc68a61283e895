"""The search command's library side: its checks of the flags before TensorFlow loads, and the
contact sheet of its results (Pillow). The index itself is ``grounded_text.serving.image_index``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from grounded_text import shipped as pretrained
from grounded_text.serving.image_index import PHOTO_EXTENSIONS, has_photos
from grounded_text.utils.durable import atomic_save, check_writable_target

#: Thumbnail box of the contact sheet, in pixels, and thumbnails per row.
THUMB = 224
COLUMNS = 5


def check_save_path(path: str) -> str | None:
    """Why ``--save`` cannot be written (Pillow missing, an extension it cannot write, a folder
    that cannot be written), or ``None``."""
    try:
        from PIL import Image  # noqa: PLC0415 (Pillow is an optional extra: its absence is the answer)
    except ImportError:
        return "--save needs Pillow, which is not installed: pip install 'grounded_text[eval]' (or pillow)"
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in Image.registered_extensions():
        return f"--save {path!r}: give an image file name such as grid.png (Pillow cannot write {suffix or 'it'!r})."
    if target.is_dir():
        return f"--save {path!r} is a folder; give a file name such as grid.png."
    try:
        check_writable_target(target.absolute().parent, "--save folder")
    except OSError as e:
        return str(e)
    return None


def usage_error(args: argparse.Namespace) -> str | None:
    """Checks the flags before TensorFlow is imported.

    Returns:
      ``None``, or the problem (one line; the caller prints it as ``error: ...`` and exits 2).
    """
    query = " ".join(args.query).strip()
    images = Path(args.images).expanduser()
    if not query:
        return "the query is empty; give a sentence, e.g. \"a dog runs on the grass\"."
    if args.top_k < 1:
        return f"--top-k must be >= 1, got {args.top_k}."
    if args.batch_size < 1:
        return f"--batch-size must be >= 1, got {args.batch_size}."
    if not images.exists():
        return f"--images {args.images!r} does not exist."
    if not images.is_dir():
        return f"--images {args.images!r} is not a folder."
    if not has_photos(images):
        return (f"--images {args.images!r} holds no photos (looked for {' '.join(PHOTO_EXTENSIONS)} files, "
                "recursively, hidden names left out).")
    model = str(args.model)
    if not (pretrained.is_name(model) or Path(model).expanduser().exists() or "://" in model):
        return (f"--model {model!r} is neither a shipped model ({', '.join(pretrained.names())}) "
                "nor an existing export folder.")
    if args.index is not None:
        try:
            check_writable_target(Path(args.index).expanduser(), "--index")
        except OSError as e:
            return str(e)
    if args.save is not None:
        return check_save_path(args.save)
    return None


def _font(size: int):
    from PIL import ImageFont  # noqa: PLC0415 (Pillow is an optional extra, needed by --save only)

    try:
        return ImageFont.load_default(size=size)  # Pillow >= 10.1: a scalable default font
    except TypeError:
        return ImageFont.load_default()


def _fit(draw, text: str, font, width: int) -> str:
    """``text`` cut with an ellipsis to fit ``width`` pixels."""
    if draw.textlength(text, font=font) <= width:
        return text
    while text and draw.textlength(text + "…", font=font) > width:
        text = text[:-1]
    return text + "…"


def save_grid(hits, query: str, path: str | os.PathLike, *, thumb: int = THUMB, columns: int = COLUMNS) -> Path:
    """Writes a contact sheet of search results: the query as title, then the photos in rows
    (each fitted into a ``thumb`` square, aspect kept) with rank, cosine and file name under
    each. Needs Pillow.

    Args:
      hits: ``(path, cosine)`` pairs, best first (``ImageIndex.search``'s result).
      query: the title.
      path: the image file to write (its extension chooses the format); written atomically.
      thumb: the thumbnail box in pixels. columns: thumbnails per row.

    Returns:
      ``path`` as a ``Path``.

    Raises:
      ImportError: Pillow is not installed. OSError: ``path`` cannot be written.
    """
    from PIL import Image, ImageDraw, ImageOps  # noqa: PLC0415 (Pillow is an optional extra, needed by --save only)

    hits = list(hits)
    pad, caption_h, title_h = 12, 40, 48
    cols = max(1, min(columns, len(hits)))
    rows = max(1, -(-len(hits) // cols))
    width = pad + cols * (thumb + pad)
    height = title_h + rows * (thumb + caption_h + pad) + pad
    sheet = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(sheet)
    title_font, caption_font = _font(22), _font(14)
    draw.text((pad, pad), _fit(draw, f"\u201c{query}\u201d", title_font, width - 2 * pad), fill="black",
              font=title_font)
    for i, (photo, cosine) in enumerate(hits):
        x = pad + (i % cols) * (thumb + pad)
        y = title_h + (i // cols) * (thumb + caption_h + pad)
        try:
            with Image.open(photo) as im:
                im = ImageOps.exif_transpose(im).convert("RGB")
                im.thumbnail((thumb, thumb))
                sheet.paste(im, (x + (thumb - im.width) // 2, y + (thumb - im.height) // 2))
        except (OSError, ValueError):  # a format this Pillow cannot open: a grey box keeps the layout
            draw.rectangle([x, y, x + thumb - 1, y + thumb - 1], fill=(200, 200, 200))
        draw.text((x, y + thumb + 3), f"{i + 1}. cosine {cosine:.3f}", fill="black", font=caption_font)
        draw.text((x, y + thumb + 20), _fit(draw, Path(photo).name, caption_font, thumb), fill=(90, 90, 90),
                  font=caption_font)
    target = Path(path)
    fmt = Image.registered_extensions()[target.suffix.lower()]
    atomic_save(target, lambda tmp: sheet.save(tmp, format=fmt), suffix=target.suffix)
    return target
