"""Crash-safe writes: single files (``atomic_write``, used by the feature-store writers
``vision.sinks.NpzFeatureSink`` and ``data.store_writer.TFRecordFeatureSink``, the run state
and the model card) and whole folders (``install_dir``, used by every export).

After a crash, even SIGKILL, a reader sees either the old file or folder or the whole new
one, never a torn write.

**Folder installs** (every export: text tower, image tower, snapshot ensemble): the new
folder is written to a hidden sibling ``.<name>.tmp-<pid>`` (``staging_dir``), flushed
(``fsync_tree``) and installed by ``install_dir``: an existing ``<name>`` is first renamed
to ``.<name>.old``, the new one renamed to ``<name>``, then the old one removed, so a crash
at any moment leaves a complete old or new folder. If it strikes between the two renames,
``<name>`` is missing and ``.<name>.old`` complete; ``recover_export`` (run by every export,
by ``grounded_text.load`` and when a training run starts) renames it back. Leftover ``.tmp-*``
folders are removed by the next install to the same place.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger("grounded_text.utils.durable")

#: Test-only: the name of a point of an export at which the process SIGKILLs itself, to check
#: that a crash there leaves a loadable export (tests/test_reliability.py). Never set it in use.
#: Points: ``while-writing`` (once the first file of the staged SavedModel exists, at the
#: latest when its write returns), ``staged``, ``old_moved``, ``installed`` (``install_dir``).
KILL_POINT_ENV = "GROUNDED_TEXT_TEST_EXPORT_KILL_AT"
SAVED_MODEL_PB = "saved_model.pb"


def fsync_file(path: str | os.PathLike) -> None:
    """Flushes a written file's data to disk.

    Raises:
      OSError: the file cannot be opened or synced.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike) -> None:
    """Makes renames and new entries in a folder durable (best effort: file systems
    that cannot sync a folder are ignored)."""
    try:
        fsync_file(path)
    except OSError:
        pass


def _create_temp_file(path: Path, suffix: str = "") -> tuple[int, Path]:
    """Creates a new, empty hidden sibling ``.<name>.tmp-<random><suffix>`` of ``path`` for writing.

    The name is unpredictable (64 random bits) and the file is created with
    ``O_CREAT | O_EXCL | O_NOFOLLOW``: a file or symlink planted at that name makes the open
    fail instead of writing through it. The mode is ``0o666`` less the umask, as ``open``.

    Returns:
      ``(file descriptor open for writing, temp path)``.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(8)}{suffix}")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"atomic_write: no free temp name beside {str(path)!r} after 100 tries.")


def _stage_and_replace(path: Path, fill: Callable[[int, Path], None], suffix: str = "") -> None:
    """The one staging lifecycle of ``atomic_write`` and ``atomic_save``: a new temp sibling
    (``_create_temp_file``), ``fill(fd, tmp)`` (writes, syncs and closes it), ``os.replace`` onto
    ``path``, then the folder synced; on any failure the temp file is removed."""
    fd, tmp = _create_temp_file(path, suffix)
    try:
        fill(fd, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def atomic_save(path: str | os.PathLike, save: Callable[[Path], None], suffix: str = "") -> None:
    """``atomic_write`` for writers that take a path rather than a file object (Keras'
    ``save_weights``, which also wants its suffix ``.weights.h5``): ``save(tmp)`` writes a new,
    empty temp sibling (``_create_temp_file``: an unpredictable name, never a planted file or
    symlink), which is then synced, ``os.replace``d onto ``path`` and its folder synced. On any
    failure the temp file is removed and ``path`` is unchanged.

    Raises:
      OSError: the folder is missing or not writable, or the disk is full; whatever ``save``
        raises.
    """
    def fill(fd: int, tmp: Path) -> None:
        os.close(fd)
        save(tmp)
        fsync_file(tmp)

    _stage_and_replace(Path(path), fill, suffix)


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Writes ``path`` through ``write(f)`` on a temp file in the same folder, fsync,
    ``os.replace`` onto ``path``, then syncs the folder.

    The temp file (``.<name>.tmp-<random>``, see ``_create_temp_file``) never follows a
    symlink and is removed if ``write`` or any later step fails; ``path`` is then unchanged.
    A symlink at ``path`` itself is replaced by the file, not followed.

    Raises:
      OSError: the folder is missing or not writable, or the disk is full; whatever
        ``write`` raises.
    """
    def fill(fd: int, tmp: Path) -> None:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())

    _stage_and_replace(Path(path), fill)


# --- Folder installs (exports) ------------------------------------------------------------------


def kill_point(name: str) -> None:
    """SIGKILLs this process when ``$GROUNDED_TEXT_TEST_EXPORT_KILL_AT`` is ``name`` (tests only)."""
    if os.environ.get(KILL_POINT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def kill_while_writing(folder: Path) -> Iterator[None]:
    """Test-only (``$GROUNDED_TEXT_TEST_EXPORT_KILL_AT`` = ``while-writing``): SIGKILLs this
    process once a file exists under ``folder`` while the block writes it, and at the
    latest when the block returns, so the kill always lands on a partly or wholly written,
    never installed, folder. Does nothing otherwise."""
    if os.environ.get(KILL_POINT_ENV) != "while-writing":
        yield
        return
    done = threading.Event()

    def watch():
        while not done.wait(0.001):
            if any(p.is_file() for p in folder.rglob("*")):
                os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()
    try:
        yield
    finally:
        done.set()
    os.kill(os.getpid(), signal.SIGKILL)


def old_sibling(target: Path) -> Path:
    """``.<name>.old``: where ``install_dir`` keeps the previous ``target`` during a swap."""
    return target.with_name(f".{target.name}.old")


def recover_export(export_dir: str | Path) -> Path:
    """Finishes a folder swap cut short by a crash (see module docstring).

    If ``export_dir`` is missing and ``.<name>.old`` holds a complete SavedModel, that
    one is renamed back. Stale ``.<name>.old`` beside a present export is left for the
    next export to remove.

    Returns:
      ``export_dir`` as a ``Path``.
    """
    target = Path(export_dir)
    old = old_sibling(target)
    if not target.exists() and (old / SAVED_MODEL_PB).is_file():
        os.replace(old, target)
        fsync_dir(target.parent)
        log.warning("Restored %s from %s (an export was interrupted between its two renames).", target, old)
    return target


def check_writable_target(target: str | Path, what: str = "export folder") -> Path:
    """Checks that ``install_dir`` can later put a folder at ``target``: ``target`` is a
    folder or absent, and the folder that will hold it (the nearest existing ancestor,
    created as needed) is a writable folder.

    Returns:
      ``target`` as a ``Path``.

    Raises:
      NotADirectoryError: ``target`` or an ancestor exists and is not a folder.
      PermissionError: that ancestor (or an existing ``target``) is not writable.
    """
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{what} {str(target)!r} exists and is not a folder.")
    parent = target.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise NotADirectoryError(f"{what} {str(target)!r}: {str(parent)!r} is not a folder.")
    check_can_write_in(parent, what, target)
    if target.is_dir() and not os.access(target, os.W_OK | os.X_OK):  # its files are removed after the swap
        raise PermissionError(f"{what} {str(target)!r} is not writable.")
    return target


def check_can_write_in(folder: str | Path, what: str, target: str | Path) -> None:
    """Fails unless something can be written in ``folder`` now: a real write (a probe folder
    created and removed), not ``os.access``, which answers yes to root and to some read-only
    mounts. The one writability test of the package's output paths.

    Args:
      folder: an existing folder.
      what: the flag or argument that named ``target``, for the message (``"--out"``).
      target: the path that will be written in ``folder`` (named by the message).

    Raises:
      PermissionError: ``"<what> '<target>': cannot write in '<folder>' (<reason>)."``
    """
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-probe-", dir=folder))
    except OSError as e:
        raise PermissionError(f"{what} {str(target)!r}: cannot write in {str(folder)!r} ({e.strerror}).") from e


def staging_dir(target: Path) -> Path:
    """A fresh hidden sibling ``.<name>.tmp-<pid>`` of ``target`` (same file system, so the
    rename is atomic); stale ones of dead writers are removed first.

    Raises:
      NotADirectoryError, PermissionError: see ``check_writable_target``.
    """
    check_writable_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.tmp-*"):
        if stale.is_symlink() or not stale.is_dir():
            stale.unlink(missing_ok=True)  # never followed into
        else:
            shutil.rmtree(stale, ignore_errors=True)
    staged = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    staged.mkdir()
    return staged


def fsync_tree(root: Path) -> None:
    """Flushes every file and folder of a written tree (a staged SavedModel) before it is
    renamed into place."""
    for path in root.rglob("*"):
        if path.is_file():
            fsync_file(path)
    for path in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        fsync_dir(path)


def install_dir(staged: Path, target: Path) -> None:
    """Renames the complete folder ``staged`` to ``target``, keeping the previous ``target``
    complete until the new one is in place (see module docstring)."""
    old = old_sibling(target)
    if old.exists():
        if target.exists():
            shutil.rmtree(old)  # a finished swap's leftover
        else:
            os.replace(old, target)  # a cut swap: the old export is the current one
    kill_point("staged")
    if target.exists():
        os.replace(target, old)
        fsync_dir(target.parent)
        kill_point("old_moved")
    os.replace(staged, target)
    fsync_dir(target.parent)
    kill_point("installed")
    shutil.rmtree(old, ignore_errors=True)


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 (hex) of a file, read in 1 MiB blocks (any size in bounded memory).

    Raises:
      OSError: the file cannot be read.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
