"""One run per directory: ``guard_run`` holds the run directory's lock for the whole run,
records a failure in the state and reports a full disk in one line.

The lock is an advisory ``fcntl.flock`` on ``.run.lock`` in the run directory, with the
holder's pid, taken before the directory is checked: a second run into the same directory is
refused at once. A write that fails for want of space or permission
(``grounded_text.training.storage_errors.storage_error``) becomes ``StorageFull``: one
``no space left on ...`` line; ``run_state.json`` keeps the last committed epoch, so ``--resume``
continues once space is freed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import sys
import time
from pathlib import Path

from grounded_text.training.run_errors import RunDirError, StorageFull, TrainingDiverged
from grounded_text.training.run_state import read_state, write_state
from grounded_text.training.storage_errors import h5py_storage_echo, storage_error, storage_message

LOCK_FILE = ".run.lock"


def _open_lock(path: Path) -> int:
    """Opens (creates) the lock file without following a link: a symlink planted at its name
    is refused (``O_NOFOLLOW``), and so is anything but a regular file with one link (a hard
    link to a file elsewhere), before a byte is written.

    Raises:
      RunDirError: the name holds a symlink, a hard link or something not a regular file.
    """
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    refused = (f"{str(path)!r} is not a plain lock file (a symlink, a hard link or not a regular file); "
               "remove it and run again.")
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP or path.is_symlink():
            raise RunDirError(refused) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise RunDirError(refused)
    return fd


def _lock(out: Path) -> int:
    """Takes the run directory's lock; returns its file descriptor.

    Raises:
      RunDirError: another run holds it, or its name holds a link (``_open_lock``).
    """
    path = out / LOCK_FILE
    while True:
        fd = _open_lock(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise RunDirError(f"{str(out)!r} is in use by another run (pid {holder}); wait for it to end or choose "
                              "another --output-dir.") from None
        try:  # the previous holder may have removed the file between our open and our lock
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode("ascii"))
            return fd
        os.close(fd)


def _mark_failed(out: Path, e: TrainingDiverged) -> None:
    """Records a failure in a state that still says ``running``/``diverged`` (never
    ``complete``), so the refusal that follows does not advise ``--resume``."""
    state = read_state(out)
    if state is not None and state.get("status") not in ("complete", "interrupted"):
        state["status"] = e.status
        state["error"] = str(e)
        state["updated"] = time.time()
        write_state(out, state)


@contextlib.contextmanager
def guard_run(out: str | Path, *, enabled: bool = True):
    """Around a whole run into ``out``: one run per directory, failures recorded, full disks
    reported.

    * Takes an advisory lock (``fcntl.flock`` on ``out/.run.lock``, which holds the pid; the
      folder is created for it) before anything else, held until the run ends, then removed
      (with ``out`` when the run created it and left it empty).
    * ``TrainingDiverged``: the state's status becomes the error's (``diverged``/``failed``)
      with the message, so it never stays ``running``.
    * A write that fails for lack of space, over the file-size limit, on a read-only file
      system or in the run directory made unwritable (``storage_error``) becomes
      ``StorageFull`` (a ``RunDirError``: the CLI's one ``error:`` line, exit 2); the state
      keeps the last committed epoch. The echoes of such a failure from h5py's destructors
      (printed by Python with tracebacks) are dropped while the run is guarded, and after a
      storage failure for the rest of the process.

    Args:
      out: the run directory.
      enabled: False for the non-chief workers of a multi-worker run (they write elsewhere).

    Raises:
      RunDirError: another run holds the lock (the message names its pid); ``out`` or its lock
        file cannot be created (permissions).
      StorageFull: see above.
    """
    out = Path(out)
    if not enabled or (out.exists() and not out.is_dir()):  # check_run_dir reports a file
        yield
        return
    created = []
    for parent in (out, *out.parents):
        if parent.exists():
            break
        created.append(parent)
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = _lock(out)
    except OSError as e:
        found = storage_error(e)
        if found is not None:
            raise StorageFull(storage_message(out, found[0], found[1]), found[1]) from None
        message = f"--output-dir {str(out)!r}: cannot create it or its lock file ({e.strerror or e})."
        raise RunDirError(message) from None
    # A failed HDF5 write fails again in h5py's destructors, which print it with a traceback
    # (sys.excepthook, then "Exception ignored in ..." through sys.unraisablehook); the one
    # storage line says it all, so those echoes are dropped (any other error is printed).
    previous_hook, previous_excepthook = sys.unraisablehook, sys.excepthook

    def quiet_unraisable(unraisable) -> None:
        if not h5py_storage_echo(unraisable.exc_value, unraisable.exc_traceback, out, unraisable.object):
            previous_hook(unraisable)

    def quiet_excepthook(kind, value, tb) -> None:
        if not h5py_storage_echo(value, tb, out):
            previous_excepthook(kind, value, tb)

    sys.unraisablehook, sys.excepthook = quiet_unraisable, quiet_excepthook
    storage_failed = False
    try:
        yield
    except TrainingDiverged as e:
        with contextlib.suppress(OSError, RunDirError):
            _mark_failed(out, e)
        raise
    except Exception as e:
        found = storage_error(e, out)
        storage_failed = found is not None
        if found is None or isinstance(e, StorageFull):
            raise
        code, path, hdf5 = found
        raise StorageFull(storage_message(out, code, path), path, hdf5) from e
    finally:
        if not storage_failed:  # after one, h5py's objects may be freed later still: the filters stay
            if sys.unraisablehook is quiet_unraisable:
                sys.unraisablehook = previous_hook
            if sys.excepthook is quiet_excepthook:
                sys.excepthook = previous_excepthook
        with contextlib.suppress(OSError):
            (out / LOCK_FILE).unlink()  # while still locked: a waiting opener sees another inode
        os.close(fd)
        for folder in created:  # a run that failed before writing anything leaves no folder
            with contextlib.suppress(OSError):
                folder.rmdir()
