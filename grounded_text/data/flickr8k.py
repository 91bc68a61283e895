"""Reader for the official Flickr8k text release (Hodosh, Young & Hockenmaier 2013).

Layout (``ROOT/flickr8k/Flickr8k_text``):
  * ``Flickr8k.token.txt``: ``<image>.jpg#<k>\\t<caption>`` (5 captions per image).
  * ``Flickr_8k.{train,dev,test}Images.txt``: one image file name per line.

Images listed in no split get the split ``None`` (91 in the official release). Files
are read as UTF-8 with an optional byte-order mark (``utf-8-sig``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

SPLITS = ("train", "dev", "test")
TOKEN_FILE = "Flickr8k.token.txt"
SPLIT_FILES = {s: f"Flickr_8k.{s}Images.txt" for s in SPLITS}


@dataclasses.dataclass(frozen=True)
class Caption:
    """One caption of the release.

    Attributes:
      image_id: image file name as written in the token file (``str``).
      index: the caption number ``k`` after ``#`` (``int``).
      text: the raw caption (``str``, untokenised, mixed case).
      split: ``"train"``, ``"dev"``, ``"test"`` or ``None``.
    """

    image_id: str
    index: int
    text: str
    split: str | None


def flickr8k_text_dir(root: str | Path) -> Path:
    """Accepts the data root, ``ROOT/flickr8k`` or the text folder itself."""
    root = Path(root)
    for cand in (root, root / "Flickr8k_text", root / "flickr8k" / "Flickr8k_text"):
        if (cand / TOKEN_FILE).is_file():
            return cand
    raise FileNotFoundError(
        f"No {TOKEN_FILE} under {str(root)!r} (looked in ., Flickr8k_text/, "
        "flickr8k/Flickr8k_text/)."
    )


def read_split_files(text_dir: str | Path) -> dict[str, str]:
    """Maps image id → split from the three official split files.

    Raises:
      FileNotFoundError: a split file is missing.
      ValueError: an image is listed in two splits.
    """
    text_dir = Path(text_dir)
    split_of: dict[str, str] = {}
    for split, name in SPLIT_FILES.items():
        path = text_dir / name
        if not path.is_file():
            raise FileNotFoundError(f"Missing Flickr8k split file {str(path)!r}.")
        # utf-8-sig: a byte-order mark (Windows editors write one) would otherwise become part
        # of the first id, which then matches no caption and silently drops that image.
        for line in path.read_text(encoding="utf-8-sig", errors="replace").splitlines():
            image_id = line.strip()
            if not image_id:
                continue
            if split_of.get(image_id, split) != split:
                raise ValueError(
                    f"{image_id!r} is in both {split_of[image_id]} and {split} ({path})."
                )
            split_of[image_id] = split
    return split_of


def read_flickr8k(root: str | Path) -> list[Caption]:
    """Reads every caption of the release with its image id and split.

    Args:
      root: data root, ``ROOT/flickr8k`` or ``Flickr8k_text`` folder.

    Returns:
      Captions in file order (40,460 for the official release).

    Raises:
      FileNotFoundError: token or split files missing.
      ValueError: a malformed line (no tab, or no ``#k`` suffix), or a caption id
        (``<image>#<k>``) that repeats an earlier line's; the message names the file and
        both lines.
    """
    text_dir = flickr8k_text_dir(root)
    split_of = read_split_files(text_dir)
    path = text_dir / TOKEN_FILE
    captions = []
    first_line: dict[tuple[str, int], int] = {}
    with open(path, encoding="utf-8-sig", errors="replace") as f:  # a BOM is not part of the first id
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            key, sep, text = line.partition("\t")
            image_id, hash_sep, index = key.rpartition("#")
            if not sep or not hash_sep or not index.isdigit():
                raise ValueError(f"{path}:{lineno}: expected '<image>#<k>\\t<caption>'.")
            seen = first_line.setdefault((image_id, int(index)), lineno)
            if seen != lineno:
                raise ValueError(f"{path}:{lineno}: caption id {key!r} repeats line {seen}; each caption id "
                                 "must appear once (remove or renumber the duplicate).")
            captions.append(Caption(image_id, int(index), text.strip(), split_of.get(image_id)))
    return captions
