"""Writes that fail for want of space or permission, said in one line.

``storage_error`` recognises a write that failed for lack of space, over the file-size limit,
on a read-only file system or in a run directory made unwritable (``ENOSPC``, ``EDQUOT``,
``EFBIG``, ``EROFS``, ``EACCES``, ``EPERM``, from Python, HDF5 or TensorFlow);
``storage_message`` is its one ``no space left on ...`` line, which says what
``run_state.json`` kept (``--resume`` continues once space is freed). ``guard_run``
(``grounded_text.training.run_lock``) turns such a failure into ``StorageFull``; the
``DiskSpaceCheck`` callback checks the free space before each write.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
from pathlib import Path

from grounded_text.training.run_errors import RunDirError, StorageFull
from grounded_text.training.run_state import RUN_STATE, read_state

_STORAGE_ERRNOS = {errno.ENOSPC: "no space left on the device of", errno.EDQUOT: "disk quota exceeded on the device of",
                   errno.EROFS: "read-only file system for the device of",
                   errno.EFBIG: "file-size limit (ulimit -f) exceeded writing in",
                   errno.EACCES: "permission denied writing in", errno.EPERM: "operation not permitted writing in"}
# HDF5 and TensorFlow report the errno only in their message.
_STORAGE_TEXT = (("No space left on device", errno.ENOSPC), ("errno = 28", errno.ENOSPC),
                 ("Disk quota exceeded", errno.EDQUOT), ("errno = 122", errno.EDQUOT),
                 ("Read-only file system", errno.EROFS), ("errno = 30", errno.EROFS),
                 ("File too large", errno.EFBIG), ("errno = 27", errno.EFBIG),
                 ("Permission denied", errno.EACCES), ("errno = 13", errno.EACCES),
                 ("Operation not permitted", errno.EPERM))
# Permission errors are a storage failure of the run only where they name a path in the run
# directory: one on the data, a cache or elsewhere keeps its own message.
_PERMISSION_ERRNOS = (errno.EACCES, errno.EPERM)
_REMEDIES = {errno.EROFS: "make it writable or choose another --output-dir",
             errno.EACCES: "make the run directory writable again",
             errno.EPERM: "make the run directory writable again",
             errno.EFBIG: "raise the file-size limit (ulimit -f) or choose another --output-dir"}


def storage_error(e: BaseException, out: str | Path | None = None) -> tuple[int, str | None, bool] | None:
    """``(errno, path, hdf5)`` when ``e`` (or an exception it was raised from or during, unless
    ``raise ... from None`` hid it) is a write that failed for lack of space, over the
    file-size limit (``ulimit -f``) or on a read-only file system, else None. Finds Python's
    ``OSError``, h5py's ``OSError``/``RuntimeError`` (errno in the message) and TensorFlow's
    errors (``No space left on device`` in the message).

    Args:
      e: the exception.
      out: the run directory; given, a permission error (``EACCES``, ``EPERM``) on a path
        inside it counts too (a run directory made unwritable while the run writes).
    """
    inside = None if out is None else Path(out)
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = str(e)
        code = getattr(e, "errno", None) if isinstance(e, OSError) else None
        if code not in _STORAGE_ERRNOS:
            code = next((c for needle, c in _STORAGE_TEXT if needle in text), None)
        if code is not None:
            match = re.search(r"\b(?:file)?name = '([^']*)'", text)
            path = match.group(1) if match else getattr(e, "filename", None)
            if code in _PERMISSION_ERRNOS and not _names_inside(path, text, inside):
                code = None
        if code is not None:
            return code, None if path is None else str(path), bool(match) or "h5py" in type(e).__module__
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return None


def _names_inside(path, text: str, out: Path | None) -> bool:
    """Whether a permission error names a path inside ``out`` (its path, else its message,
    which may give the folder as it was passed, absolute or resolved)."""
    if out is None:
        return False
    if path is not None:
        return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(out))
    return any(str(name) in text for name in (out, os.path.abspath(out), out.resolve()))


def storage_message(out: str | Path, code: int, path: str | None) -> str:
    """The one line for a full disk, a quota, a file-size limit, a read-only file system or a run
    directory made unwritable (``error: `` is added by the CLI)."""
    state = None
    with contextlib.suppress(RunDirError, OSError):
        state = read_state(out)
    where = f" ({path})" if path else ""
    remedy = _REMEDIES.get(code, "free space")
    if state is not None and state.get("status") not in (None, "complete"):
        saved = (f"{out / RUN_STATE} keeps epoch {state.get('epochs_done', 0)} of {state.get('epochs', '?')}; "
                 f"{remedy}, then continue with --resume")
    else:
        saved = f"nothing of this run was saved; {remedy} and run it again"
    return f"{_STORAGE_ERRNOS[code]} {str(out)!r}{where}: {saved}."


def exit_after_storage_error(e: BaseException, status: int) -> None:
    """Ends the process with ``status`` now (``os._exit``, after flushing stdout/stderr) when
    ``e`` is a ``StorageFull`` from a failed HDF5 write: the HDF5 library would otherwise crash
    the interpreter's exit (signal 11, exit status 139). Returns otherwise."""
    if isinstance(e, StorageFull) and e.hdf5:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def h5py_storage_echo(exc, tb, out: Path, where=None) -> bool:
    """Whether ``exc`` is a storage failure (``storage_error``) raised in h5py's code (its
    traceback or ``where``, the object an unraisable exception was ignored in, names h5py)."""
    if exc is None or storage_error(exc, out) is None:
        return False
    if "h5py" in repr(where):
        return True
    while tb is not None:
        if "h5py" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False
