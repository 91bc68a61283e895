"""Unpacking an archive safely: entries counted and sizes capped on the headers and again on the
bytes read, no absolute or ``..`` paths, no links or device files; the dataset's members
written flat, by file name, into a folder.
"""

from __future__ import annotations

import fnmatch
import re
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from grounded_text.data.download.catalogue import MAX_MEMBERS, Dataset, DownloadError, Remote
from grounded_text.data.download.fetching import CHUNK_BYTES


class _Budget:
    """Counts the bytes actually unpacked from one archive against its cap."""

    def __init__(self, remote: Remote):
        self.remote, self.left = remote, remote.max_unpacked

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise DownloadError(f"{self.remote.filename} unpacks to over {self.remote.max_unpacked} bytes, the "
                                "cap for it (a damaged or hostile archive); refused, nothing installed.")


def _pump(src, budget: _Budget, dst=None) -> bytes | None:
    """Reads ``src`` to its end within the budget: into ``dst``, or returned as bytes."""
    chunks = []
    while True:
        block = src.read(CHUNK_BYTES)
        if not block:
            break
        budget.take(len(block))
        if dst is None:
            chunks.append(block)
        else:
            dst.write(block)
    return b"".join(chunks) if dst is None else None


def _refuse(remote: Remote, why: str) -> DownloadError:
    return DownloadError(f"{remote.filename}: {why}; refused, nothing installed.")


def _check_name(remote: Remote, name: str) -> None:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise _refuse(remote, f"member {name!r} points outside the archive's folder")


_ARCHIVE_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, tarfile.TarError, EOFError, OSError, ValueError,
                   zlib.error)


def _unpack_error(remote: Remote, path: Path, e: Exception) -> DownloadError:
    return DownloadError(f"cannot unpack {remote.filename} ({path}): {e}; a damaged or wrong file")


def _members(remote: Remote, path: Path):
    """Yields ``(member path, read)`` for each regular file of the archive, where
    ``read(dst=None)`` returns its bytes (or writes them to ``dst``); ``kind="file"`` is one
    member named ``remote.filename``. The member count and the declared sizes are checked
    before any member is read, and the bytes read are counted against ``max_unpacked``.

    Raises:
      DownloadError: too many members, over the size cap (declared or read), an absolute
        or ``..`` path, a link or device entry, or a damaged archive.
    """
    budget = _Budget(remote)
    try:
        if remote.kind == "file":
            with open(path, "rb") as f:
                yield remote.filename, _guarded(remote, path, lambda dst: _pump(f, budget, dst))
        elif remote.kind == "zip":
            with zipfile.ZipFile(path) as z:
                infos = z.infolist()
                if len(infos) > (remote.max_members or MAX_MEMBERS):
                    raise _refuse(remote, f"{len(infos)} entries, over the cap of {remote.max_members or MAX_MEMBERS}")
                declared = sum(i.file_size for i in infos)
                if declared > remote.max_unpacked:
                    raise _refuse(remote, f"its entries unpack to {declared} bytes, over the cap of "
                                          f"{remote.max_unpacked}")
                for info in infos:
                    _check_name(remote, info.filename)
                    mode = info.external_attr >> 16
                    if stat.S_ISLNK(mode):
                        raise _refuse(remote, f"member {info.filename!r} is a link")
                    if info.is_dir():
                        continue
                    if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
                        raise _refuse(remote, f"member {info.filename!r} is not a regular file")

                    def read(dst, info=info):
                        with z.open(info) as src:
                            return _pump(src, budget, dst)

                    yield info.filename, _guarded(remote, path, read)
        elif remote.kind == "tar.gz":
            with tarfile.open(path, "r:gz") as t:
                count = declared = 0
                for info in t:
                    count += 1
                    if count > (remote.max_members or MAX_MEMBERS):
                        raise _refuse(remote, f"over {remote.max_members or MAX_MEMBERS} entries")
                    _check_name(remote, info.name)
                    if info.issym() or info.islnk():
                        raise _refuse(remote, f"member {info.name!r} is a link")
                    if info.isdir():
                        continue
                    if not info.isfile():
                        raise _refuse(remote, f"member {info.name!r} is not a regular file")
                    declared += info.size
                    if declared > remote.max_unpacked:
                        raise _refuse(remote, f"its entries unpack to more than the cap of {remote.max_unpacked} bytes")

                    def read(dst, info=info):
                        with t.extractfile(info) as src:
                            return _pump(src, budget, dst)

                    yield info.name, _guarded(remote, path, read)
        else:
            raise DownloadError(f"{remote.filename}: unknown archive kind {remote.kind!r}.")
    except _ARCHIVE_ERRORS as e:
        raise _unpack_error(remote, path, e) from None


def _guarded(remote: Remote, path: Path, read):
    """``read`` runs in the caller's frame, outside ``_members``'s handler: wrap it too."""

    def guarded(dst=None):
        try:
            return read(dst)
        except _ARCHIVE_ERRORS as e:
            raise _unpack_error(remote, path, e) from None

    return guarded


def _skipped(member: str) -> bool:
    path = PurePosixPath(member)
    return "__MACOSX" in path.parts or path.name.startswith("._") or not path.name


_JPEG_MAGIC = b"\xff\xd8\xff"


class _Discard:
    """A sink that drops what is written (members read only to count their bytes)."""

    @staticmethod
    def write(data: bytes) -> int:
        return len(data)


class _Head:
    """A sink that keeps the first bytes written (a member's signature) and drops the rest."""

    def __init__(self, keep: int = 16):
        self.data, self.keep = b"", keep

    def write(self, data: bytes) -> int:
        if len(self.data) < self.keep:
            self.data += data[: self.keep - len(self.data)]
        return len(data)


def _wanted(dataset: Dataset, member: str) -> str | None:
    """The file name ``member`` is written as, or ``None`` when the dataset skips it."""
    path = PurePosixPath(member)
    if _skipped(member):
        return None
    if dataset.folder is not None and (len(path.parts) < 2 or path.parts[-2] != dataset.folder):
        return None
    return path.name if any(fnmatch.fnmatch(path.name, p) for p in dataset.members) else None


def _unpack(dataset: Dataset, remote: Remote, archive: Path, into: Path, written: list[str]) -> None:
    """Writes the dataset's members of ``archive`` into ``into`` (flat, by file name),
    appending their names to ``written``.

    Raises:
      DownloadError: two data members with one file name (only the first readme or
        licence is kept), none of the dataset's members, or see ``_members``.
    """
    before = len(written)
    for member, read in _members(remote, archive):
        name = _wanted(dataset, member)
        if name is None:
            continue
        if name in written:
            if re.search(r"readme|license", name, re.IGNORECASE):
                continue
            raise _refuse(remote, f"two members are named {name!r}")
        with open(into / name, "xb") as dst:
            read(dst)
        written.append(name)
    if len(written) == before:
        raise DownloadError(f"{remote.filename} holds none of the files {dataset.name} needs "
                            f"({', '.join(dataset.members)}); is it the right archive?")

