"""Installing datasets: fetch each file, verify it, unpack into a temporary folder, check the
manifest, record digests and rename the folder into place; one download at a time per data
directory (a lock file), so that two commands filling one folder neither clash nor fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from pathlib import Path

import grounded_text.data.download.catalogue as catalogue
from grounded_text.data.download.catalogue import (
    CHECKSUMS_FILE,
    DOWNLOADS_DIR,
    MARKER_FILE,
    MIRROR_ENV_VAR,
    SAMPLE_ENV_VAR,
    Dataset,
    DownloadError,
    expand_names,
)
from grounded_text.data.download.fetching import DigestMismatch, _host, _sniff, _source_url, fetch, redact
from grounded_text.data.download.unpacking import _unpack
from grounded_text.data.download.verifying import (
    _record,
    check_manifest,
    digest_problem,
    known_digest,
    mismatch,
    verify,
    verify_structure,
)

#: The lock file of ``data_dir_lock`` (in ``DATA/.downloads``).
LOCK_FILE = ".lock"


def install(dataset: Dataset, data_dir: Path, *, mirror: str | None = None, force: bool = False,
            log=print, progress: bool = False, fresh: set[str] | None = None, sample: bool = False) -> str:
    """Downloads, checks and unpacks one dataset into ``data_dir/dataset.dest``.

    Args:
      dataset: the registry entry.
      data_dir: the data root (created when missing).
      mirror: fetch ``mirror/<file name>`` instead of the official URLs.
      force: replace a destination that exists; download the files again (a file already
        in ``fresh`` is kept) and let a new file that passes the structure check replace
        the digest recorded for it.
      log: where progress lines go.
      progress: show tqdm progress bars on stderr.
      fresh: file names downloaded during this run (shared by the datasets of one
        ``download`` call, so a shared archive is fetched once); updated.
      sample: accept a sample of the release (``verify_structure``); its digest is not
        recorded, the manifest is not checked (a sample's files differ from the release's by
        design) and the marker file says ``"sample": true``.

    Returns:
      ``"present"`` (kept, nothing fetched) or ``"installed"``.

    Every file unpacked is checked against the dataset's manifest (``check_manifest``)
    before anything is recorded or renamed into place, so a tampered archive fails on first
    use, naming the file.

    Raises:
      DownloadError: see ``fetch``, ``verify``, ``verify_structure``, ``_unpack`` and
        ``check_manifest`` (the destination is then untouched, the archive deleted, and no
        digest of a failed file is recorded).
    """
    dest = data_dir / dataset.dest
    if dest.exists() and not force:
        how = "downloaded earlier" if (dest / MARKER_FILE).is_file() else "not by this tool"
        log(f"{dataset.name}: {dest} exists ({how}); kept (--force replaces it)")
        return "present"
    fresh = set() if fresh is None else fresh
    cache = data_dir / DOWNLOADS_DIR
    cache.mkdir(parents=True, exist_ok=True)
    sources, to_record = _fetch_all(dataset, cache, mirror=mirror, force=force, log=log, progress=progress,
                                    fresh=fresh, sample=sample)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # os.mkdir (not mkdtemp, which makes 0700 folders) so the dataset gets 0o777 less the
    # umask, readable by the other users of a shared data directory.
    tmp = dest.parent / f".tmp-{dest.name}-{os.getpid()}-{secrets.token_hex(4)}"
    os.mkdir(tmp)
    try:
        files: list[str] = []
        for remote in dataset.remotes:
            _unpack(dataset, remote, cache / remote.filename, tmp, files)
        if not sample:
            try:
                check_manifest(dataset, tmp, files)
            except DownloadError as e:
                for remote in dataset.remotes:  # never kept, never recorded: the next run fetches afresh
                    (cache / remote.filename).unlink(missing_ok=True)
                raise DownloadError(_deleted(str(e))) from None
        for remote, digest, size, url in to_record:
            _record(cache, remote, digest, size, redact(url))
            log(f"  {remote.filename}: no published checksum; passed the structure check, recorded sha256 "
                f"{digest} in {cache / CHECKSUMS_FILE}")
        marker = {"dataset": dataset.name, "sources": sources, "files": sorted(files),
                  "manifest": bool(dataset.manifest) and not sample}
        if sample:
            marker["sample"] = True
        (tmp / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        old = None
        if dest.exists():
            old = dest.parent / f".old-{dest.name}-{os.getpid()}"
            os.replace(dest, old)
        os.replace(tmp, dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log(f"{dataset.name}: {len(files)} files in {dest}"
        + (", each matching the release's manifest" if dataset.manifest and not sample else ""))
    return "installed"


def _fetch_all(dataset: Dataset, cache: Path, *, mirror, force: bool, log, progress: bool, fresh: set,
               sample: bool) -> tuple[list, list]:
    """Fetches (or reuses) each archive of ``dataset`` into ``cache`` and checks its digest and
    structure (``install``'s arguments); returns ``(sources, to_record)``: the marker's source
    entries and the digests to record once the unpacked files have passed the manifest."""
    sources, to_record = [], []
    for remote in dataset.remotes:
        final = cache / remote.filename
        part = cache / (remote.filename + ".part")
        url = _source_url(remote, mirror)
        if force and remote.filename not in fresh:
            final.unlink(missing_ok=True)
            part.unlink(missing_ok=True)
        checked = None
        if not final.is_file():
            log(f"{dataset.name}: fetching {remote.filename} from {_host(url)}")
            checked = known_digest(remote, cache, force=force)
            try:
                fetch(url, part, expected_size=remote.size, max_bytes=remote.max_unpacked, log=log, progress=progress,
                      sha256=checked)
            except DigestMismatch as e:
                raise mismatch(remote, cache, digest_problem(remote, cache, e.digest, checked)) from None
            _sniff(part, remote, url)
            os.replace(part, final)
            fresh.add(remote.filename)
        digest, record = verify(final, remote, cache, force=force, log=log, checked=checked)
        try:
            verify_structure(remote, final, sample=sample)
        except DownloadError as e:
            final.unlink(missing_ok=True)
            raise DownloadError(_deleted(str(e))) from None
        if record and not sample:
            to_record.append((remote, digest, final.stat().st_size, url))
        sources.append({"url": redact(url), "file": remote.filename, "sha256": digest,
                        "pinned": remote.sha256 is not None})
    return sources, to_record


def _deleted(message: str) -> str:
    if "nothing was recorded" not in message:
        message = message.rstrip(".") + "; it was deleted and nothing was recorded."
    return message


@contextlib.contextmanager
def data_dir_lock(data_dir: Path, log=print):
    """Holds ``DATA/.downloads/.lock`` (an exclusive ``flock``) for one download at a time per
    data directory: a second command filling the same folder waits, then finds what the first
    installed ("present") instead of racing it for the same partial files. The lock goes with
    the process (a killed download never leaves it held). Where ``fcntl`` is missing
    (Windows), nothing is locked.
    """
    try:
        import fcntl  # noqa: PLC0415 (POSIX only)
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    cache = data_dir / DOWNLOADS_DIR
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        fd = os.open(cache / LOCK_FILE, flags, 0o666)
    except OSError:  # a read-only data directory: nothing can be installed into it, nothing to lock
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another download into {data_dir} is running: waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def download(names: list[str], data_dir: str | os.PathLike, *, mirror: str | None = None,
             force: bool = False, keep_archives: bool = False, log=print,
             progress: bool | None = None, sample: bool | None = None) -> dict[str, str]:
    """Installs the named datasets (see ``install``).

    Args:
      names: dataset or group names (``DATASETS``, ``GROUPS``).
      data_dir: the data root.
      mirror: base URL replacing the official locations; default ``$GROUNDED_TEXT_DOWNLOAD_BASE``.
      force: replace destinations that exist, downloading their files again.
      keep_archives: keep the downloaded archives in ``data_dir/.downloads``.
      log: where progress lines go.
      progress: progress bars (``tqdm.auto``: on stderr, or a widget in a notebook); default on.
      sample: accept a mirror's sample of a release (``install``); default:
        ``$GROUNDED_TEXT_DOWNLOAD_SAMPLE`` is ``1``.

    Returns:
      ``{name: "installed" | "present"}``.

    Raises:
      ValueError: an unknown name.
      DownloadError: a download, check or unpacking failed (earlier datasets stay installed).
      OSError: the data directory cannot be written.

    One download runs at a time per data directory (``data_dir_lock``): a second call waits.
    """
    wanted = expand_names(names)
    mirror = mirror or os.environ.get(MIRROR_ENV_VAR) or None
    if sample is None:
        sample = _sample_from_env()
    if progress is None:
        progress = True
    root = Path(data_dir).expanduser()
    fresh: set[str] = set()
    with data_dir_lock(root, log):
        done = {name: install(catalogue.DATASETS[name], root, mirror=mirror, force=force, log=log,
                              progress=progress, fresh=fresh, sample=sample) for name in wanted}
        if not keep_archives:
            for name in wanted:
                for remote in catalogue.DATASETS[name].remotes:
                    (root / DOWNLOADS_DIR / remote.filename).unlink(missing_ok=True)
    return done


def _sample_from_env() -> bool:
    """``$GROUNDED_TEXT_DOWNLOAD_SAMPLE``: unset, empty or ``0`` → False; ``1`` → True.

    Raises:
      ValueError: any other value (the message names the variable).
    """
    value = os.environ.get(SAMPLE_ENV_VAR, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"${SAMPLE_ENV_VAR} must be 1 (accept a mirror's sample of a release) or 0, got {value!r}.")
    return value == "1"

