"""The photos of a folder: the one scanner of the feature extractor (``grounded-text features``,
one folder's files) and of the photo index (``grounded-text search``, a whole tree).

A photo is a file whose extension is one of :data:`PHOTO_EXTENSIONS` (any case) and whose name
does not start with ``.``; hidden folders are left out, links to folders are not followed, and a
link to a file counts as that file. This module imports neither NumPy nor TensorFlow: a
command checks its folder with it before anything heavy loads.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple

__all__ = ["PHOTO_EXTENSIONS", "PhotoFile", "has_photos", "is_photo", "scan_photos"]

#: The file extensions of photos (compared in lower case).
PHOTO_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff")


class PhotoFile(NamedTuple):
    """One photo of a folder.

    Attributes:
      rel: the path relative to the folder, with ``/`` separators.
      size: ``st_size`` in bytes.
      mtime_ns: ``st_mtime_ns``.

    Example:
      >>> PhotoFile("holiday/beach.jpg", 48213, 1733300000000000000).rel
      'holiday/beach.jpg'
    """

    rel: str
    size: int
    mtime_ns: int


def is_photo(name: str) -> bool:
    """Whether a file name is a photo's: not hidden, and one of :data:`PHOTO_EXTENSIONS`.

    Example:
      >>> is_photo("a.JPG"), is_photo(".a.jpg"), is_photo("notes.txt")
      (True, False, False)
    """
    return not name.startswith(".") and os.path.splitext(name)[1].lower() in PHOTO_EXTENSIONS


def scan_photos(folder: str | os.PathLike, recursive: bool = True) -> list[PhotoFile]:
    """The photos under ``folder`` (hidden names left out, folder links not followed), sorted by
    relative path.

    Args:
      folder: the folder.
      recursive: look in its subfolders too (the photo index); ``False``: its own files only
        (the feature extractor, whose ids are file names).

    Raises:
      FileNotFoundError: ``folder`` does not exist. NotADirectoryError: it is not a folder.

    Example:
      >>> import tempfile
      >>> folder = Path(tempfile.mkdtemp())
      >>> for name in ["a.jpg", "sub/b.PNG", ".hidden/c.jpg", "notes.txt"]:
      ...     (folder / name).parent.mkdir(parents=True, exist_ok=True)
      ...     _ = (folder / name).write_bytes(b"not decoded here")
      >>> [p.rel for p in scan_photos(folder)], [p.rel for p in scan_photos(folder, recursive=False)]
      (['a.jpg', 'sub/b.PNG'], ['a.jpg'])
      >>> has_photos(folder), has_photos(folder / "sub"), has_photos(folder / "missing")
      (True, True, False)
      >>> import shutil; shutil.rmtree(folder)
    """
    folder = Path(folder).expanduser()
    if not folder.exists():
        raise FileNotFoundError(f"{str(folder)!r} does not exist.")
    if not folder.is_dir():
        raise NotADirectoryError(f"{str(folder)!r} is not a folder.")
    out = []
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")] if recursive else []
        for name in files:
            if not is_photo(name):
                continue
            path = os.path.join(top, name)
            try:
                st = os.stat(path)  # a link to a file counts as that file
            except OSError:  # a dangling link, or removed while we walk
                continue
            if not stat.S_ISREG(st.st_mode):  # from the same stat: one system call a photo, not two
                continue
            out.append(PhotoFile(Path(os.path.relpath(path, folder)).as_posix(), int(st.st_size), int(st.st_mtime_ns)))
    out.sort(key=lambda p: p.rel)
    return out


def has_photos(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds at least one photo, in it or below (:func:`scan_photos`' rule);
    stops at the first.

    Example:
      >>> import tempfile
      >>> has_photos(tempfile.mkdtemp())
      False
    """
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if any(is_photo(name) and os.path.isfile(os.path.join(top, name)) for name in files):
            return True
    return False
