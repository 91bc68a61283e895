"""Crash-safe writes shared by the feature-store writers (``vision.sinks.NpzFeatureSink``,
``data.streaming.TFRecordFeatureSink``): after a crash, even SIGKILL, a reader sees
either the old file or the whole new one, never a torn write."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


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


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Writes ``path`` through ``write(f)`` on a temp file in the same folder, fsync,
    ``os.replace`` onto ``path``, then syncs the folder."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
