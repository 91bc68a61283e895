"""The contact sheet of a photo search: the query as title, then the photos found, each with its
rank, cosine and file name (``grounded-text search --save GRID.png``). Pillow draws it (a core
requirement)."""

from __future__ import annotations

import os
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from grounded_text.utils.durable import atomic_save
from grounded_text.vision.photo_header import orient_pil, probe_file

__all__ = ["COLUMNS", "THUMB", "save_grid"]

#: Thumbnail box of the contact sheet, in pixels, and thumbnails per row.
THUMB = 224
COLUMNS = 5


def _font(size: int):
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
    (each fitted into a ``thumb`` square, aspect kept, turned upright by its EXIF orientation as
    the search read it) with rank, cosine and file name under each.

    Args:
      hits: ``(path, cosine)`` pairs, best first (``ImageIndex.search``'s result).
      query: the title.
      path: the image file to write (its extension chooses the format); written atomically.
      thumb: the thumbnail box in pixels. columns: thumbnails per row.

    Returns:
      ``path`` as a ``Path``.

    Raises:
      OSError: ``path`` cannot be written.
    """
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
                # Turned as the search read it (the same header probe), so the sheet shows what was scored.
                im = orient_pil(im, probe_file(photo).orientation).convert("RGB")
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
