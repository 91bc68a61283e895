"""File names as the commands print them: one printable line each (:func:`shown`), and valid
Unicode with the exact bytes beside it in JSON (:func:`json_path`). No NumPy, no TensorFlow."""

from __future__ import annotations

import os

__all__ = ["json_path", "shown"]


def shown(path: str) -> str:
    """A file name as one printable line: itself when it is printable UTF-8; otherwise quoted,
    with each byte that is not UTF-8 as ``\\xNN`` and control characters (a newline) escaped,
    as ``ls`` shows such names.

    Example:
      >>> shown("photos/dog.jpg")
      'photos/dog.jpg'
      >>> shown("photos/a\\nb.jpg"), shown("photos/caf\\udce9.jpg")
      ("'photos/a\\\\nb.jpg'", "'photos/caf\\\\xe9.jpg'")
    """
    if path.isprintable() and not any(0xDC80 <= ord(c) <= 0xDCFF for c in path):
        return path
    out = []
    for c in path:
        if 0xDC80 <= ord(c) <= 0xDCFF:  # a byte that was not UTF-8 (Python's surrogateescape)
            out.append(f"\\x{ord(c) - 0xDC00:02x}")
        elif c in "\\'" or not c.isprintable():
            out.append(repr(c)[1:-1] if c != "'" else "\\'")
        else:
            out.append(c)
    return "'" + "".join(out) + "'"


def json_path(path: str) -> dict:
    """``{"path": ...}`` for ``--json``: valid Unicode (a byte that is not UTF-8 written as
    ``\\xNN``), plus ``path_hex``, the name's exact bytes, when they are not UTF-8.

    Example:
      >>> json_path("photos/dog.jpg")
      {'path': 'photos/dog.jpg'}
    """
    raw = os.fsencode(path)
    text = raw.decode("utf-8", "backslashreplace")
    return {"path": text} if text == path else {"path": text, "path_hex": raw.hex()}
