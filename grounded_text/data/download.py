"""Download the public evaluation and caption data into the layout the package reads.

Usage::

    grounded-text data download sts sick --data-dir DATA      # or: python -m grounded_text.data.download
    grounded-text data download all --data-dir DATA
    grounded-text data list

Each dataset comes from its official public location (the URLs SentEval's
``data/downstream/get_transfer_data.bash`` uses for STS 2012-2016, SICK, MR, CR, SUBJ,
MPQA, TREC, MRPC and SST-2; the STS wiki for STS-B; the Flickr8k text release), and is
unpacked into the layout of ``../shared/data/README.md``::

    DATA/sts/STS1x-en-test/, DATA/sts/STSBenchmark/, DATA/sts/SICK/
    DATA/senteval/{MR,CR,SUBJ,MPQA,TREC,MRPC,SST/binary}/
    DATA/flickr8k/Flickr8k_text/

Files are the releases as published (SentEval also tokenises them; the package's readers
take the raw text). The image features (``flickr8k/features/*.npz``) are not downloadable:
``python -m grounded_text.features`` computes them from the photos.

How a download behaves:

* **Resumable**: bytes go to ``DATA/.downloads/<file>.part``; a second run asks the
  server for the rest (HTTP ``Range``) and appends, or starts over when the server
  ignores the range.
* **Checked**: a file whose registry entry has a ``sha256`` (or ``size``) is verified
  before it is unpacked; a mismatch deletes the download and fails naming the file.
  Entries whose checksum is not yet known (``sha256=None``: the archive could not be
  hashed when the entry was written) are hashed on their first download; the digest
  is printed and recorded in ``DATA/.downloads/checksums.json``, and every later
  download of that URL into the same data directory must match it.
* **Atomic**: a dataset is unpacked into a temporary folder beside its destination and
  renamed into place, so an interrupted run never leaves a half-written dataset.
  A destination that exists is kept (``--force`` replaces it).
* **Mirrors**: ``--mirror URL`` or ``$GROUNDED_TEXT_DOWNLOAD_BASE`` fetches every file
  as ``URL/<file name>`` instead (a folder holding the archives under their registry
  file names), e.g. a lab cache or the tests' local server.
* **Offline**: an unreachable host fails within a few seconds with
  ``error: cannot reach <host> ...`` (exit 2), with no retries.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import hashlib
import http.client
import json
import os
import shutil
import socket
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

MIRROR_ENV_VAR = "GROUNDED_TEXT_DOWNLOAD_BASE"
#: Seconds to resolve and connect to a host: an offline machine answers in about this long.
CONNECT_TIMEOUT_S = 2.0
#: Seconds a transfer may stall before it is reported (the partial file stays, to resume).
READ_TIMEOUT_S = 30.0
CHUNK_BYTES = 1 << 16
DOWNLOADS_DIR = ".downloads"
CHECKSUMS_FILE = "checksums.json"
MARKER_FILE = ".download.json"


class DownloadError(Exception):
    """A download, its check or its unpacking failed; the message names the file or host."""


@dataclasses.dataclass(frozen=True)
class Remote:
    """One published file.

    Attributes:
      url: its official location.
      filename: its name in the download cache and on a mirror (``MIRROR/filename``).
      kind: ``"zip"``, ``"tar.gz"`` or ``"file"`` (kept as is).
      sha256: the expected digest, or ``None`` when not known yet (recorded on the
        first download into a data directory, then enforced there).
      size: the expected size in bytes, or ``None``.
    """

    url: str
    filename: str
    kind: str
    sha256: str | None = None
    size: int | None = None


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A dataset: its files and where their members go.

    Attributes:
      name: the CLI name.
      dest: destination folder, relative to the data directory.
      remotes: the files to fetch.
      members: ``fnmatch`` patterns on the archive member's file name; matching files
        are written to ``dest`` by file name (archive folders are dropped).
      folder: when set, only members whose parent folder is named so are taken (one
        archive holding several datasets, e.g. SentEval's ``datasmall_NB_ACL12.zip``).
      description: one line for ``list``.
    """

    name: str
    dest: str
    remotes: tuple[Remote, ...]
    members: tuple[str, ...] = ("*",)
    folder: str | None = None
    description: str = ""


_STS_WIKI = "http://ixa2.si.ehu.eus/stswiki/images/"
_SICK = "http://alt.qcri.org/semeval2014/task1/data/uploads/"
_SENTEVAL = "https://dl.fbaipublicfiles.com/senteval/senteval_data/"
_BINCLASSIF = Remote(_SENTEVAL + "datasmall_NB_ACL12.zip", "datasmall_NB_ACL12.zip", "zip")
_TREC = "https://cogcomp.seas.upenn.edu/Data/QA/QC/"
_SST2 = "https://raw.githubusercontent.com/PrincetonML/SIF/master/data/"
_FLICKR8K = "https://github.com/jbrownlee/Datasets/releases/download/Flickr8k/"


def _sts(year: int, path: str) -> Dataset:
    name = f"STS{year}-en-test.zip"
    return Dataset(f"sts{year % 100}", f"sts/STS{year % 100}-en-test",
                   (Remote(_STS_WIKI + path + name, name, "zip"),),
                   members=("STS*.txt", "*readme*", "*README*", "LICENSE*"),
                   description=f"SemEval STS {year} English test set (gold scores)")


def _binclassif(name: str, folder: str, files: tuple[str, ...], what: str) -> Dataset:
    return Dataset(name, f"senteval/{name.upper()}", (_BINCLASSIF,), members=files, folder=folder,
                   description=what)


def _files(base: str, names: tuple[str, ...]) -> tuple[Remote, ...]:
    return tuple(Remote(base + n, n, "file") for n in names)


#: NAME → dataset. Checksums are ``None`` where the archive could not be hashed when
#: the entry was written (see the module docstring: first download records them).
DATASETS: dict[str, Dataset] = {d.name: d for d in (
    _sts(2012, "4/40/"),
    _sts(2013, "2/2f/"),
    _sts(2014, "8/8c/"),
    _sts(2015, "d/da/"),
    _sts(2016, "9/98/"),
    Dataset("stsb", "sts/STSBenchmark",
            (Remote(_STS_WIKI + "4/48/Stsbenchmark.tar.gz", "Stsbenchmark.tar.gz", "tar.gz"),),
            members=("sts-*.csv", "readme.txt", "LICENSE.txt"), folder="stsbenchmark",
            description="STS Benchmark train/dev/test (Cer et al. 2017)"),
    Dataset("sick", "sts/SICK",
            tuple(Remote(f"{_SICK}sick_{s}.zip", f"sick_{s}.zip", "zip") for s in ("train", "trial", "test_annotated")),
            members=("SICK_*.txt",), description="SICK 2014 relatedness and entailment (CC BY-NC-SA 3.0)"),
    _binclassif("mr", "rt10662", ("rt-polarity.pos", "rt-polarity.neg"), "MR movie-review polarity"),
    _binclassif("cr", "customerr", ("custrev.pos", "custrev.neg"), "CR customer-review polarity"),
    _binclassif("subj", "subj", ("subj.objective", "subj.subjective"), "SUBJ subjectivity"),
    _binclassif("mpqa", "mpqa", ("mpqa.pos", "mpqa.neg"), "MPQA opinion polarity"),
    Dataset("trec", "senteval/TREC", _files(_TREC, ("train_5500.label", "TREC_10.label")),
            description="TREC question types"),
    Dataset("mrpc", "senteval/MRPC", _files(_SENTEVAL, ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt")),
            description="MRPC paraphrase pairs (Microsoft research licence)"),
    Dataset("sst2", "senteval/SST/binary", _files(_SST2, ("sentiment-train", "sentiment-dev", "sentiment-test")),
            description="SST-2 binary sentiment, as SentEval uses it"),
    Dataset("flickr8k-text", "flickr8k/Flickr8k_text",
            (Remote(_FLICKR8K + "Flickr8k_text.zip", "Flickr8k_text.zip", "zip"),),
            members=("*.txt",), description="Flickr8k captions and the official train/dev/test split files"),
)}

#: Names that stand for several datasets.
GROUPS: dict[str, tuple[str, ...]] = {
    "sts": ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb"),
    "senteval": ("mr", "cr", "subj", "mpqa", "trec", "mrpc", "sst2"),
    "all": tuple(DATASETS),
}


# --------------------------------------------------------------------------- fetching


def _source_url(remote: Remote, mirror: str | None) -> str:
    return f"{mirror.rstrip('/')}/{remote.filename}" if mirror else remote.url


def _host(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return parts.netloc or url


def _check_reachable(url: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Resolves and connects once, each within ``timeout`` seconds, so an offline machine
    fails at once instead of waiting on the resolver or on retries.

    Raises:
      DownloadError: ``cannot reach <host>``.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DownloadError(f"cannot download {url!r}: only http(s) URLs are supported.")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname):
        # urllib will talk to the proxy, not the host: that is what must answer.
        proxied = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        parts, port = proxied, proxied.port or (443 if proxied.scheme == "https" else 80)
    found: list = []

    def resolve():
        try:
            found.append(socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM))
        except OSError as e:
            found.append(e)

    # getaddrinfo takes no timeout; a daemon thread bounds the wait on a dead resolver.
    resolver = threading.Thread(target=resolve, daemon=True)
    resolver.start()
    resolver.join(timeout)
    if not found:
        raise DownloadError(f"cannot reach {parts.netloc}: name lookup took over {timeout:g} s (offline?).")
    if isinstance(found[0], OSError):
        raise DownloadError(f"cannot reach {parts.netloc}: name lookup failed ({found[0]}); offline?")
    family, socktype, proto, _, address = found[0][0]
    try:
        with socket.socket(family, socktype, proto) as s:
            s.settimeout(timeout)
            s.connect(address)
    except OSError as e:
        reason = "timed out" if isinstance(e, TimeoutError) else (e.strerror or str(e))
        raise DownloadError(f"cannot reach {parts.netloc}: {reason} (offline, or the host is down?).") from None


def fetch(url: str, part: Path, *, expected_size: int | None = None, log=print) -> Path:
    """Downloads ``url`` into ``part``, resuming a partial file with an HTTP ``Range`` request.

    Args:
      url: http(s) URL.
      part: the partial file (created, or appended to when the server honours the range).
      expected_size: the full size when known (a complete ``part`` is then not fetched again).
      log: where progress lines go.

    Returns:
      ``part``, now complete.

    Raises:
      DownloadError: the host cannot be reached, the server answers with an HTTP error,
        or the transfer breaks off (``part`` keeps what arrived: run again to resume).
    """
    have = part.stat().st_size if part.exists() else 0
    if expected_size is not None and have == expected_size:
        return part
    _check_reachable(url)
    request = urllib.request.Request(url, headers={"User-Agent": "grounded_text-download"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=READ_TIMEOUT_S)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # the range starts at the end: the part file is complete
            return part
        raise DownloadError(f"{url}: the server answered HTTP {e.code} {e.reason}.") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise DownloadError(f"cannot reach {_host(url)}: {reason}.") from None
    with response:
        resumed = have and response.status == 206
        if have and not resumed:
            log(f"  {_host(url)} ignored the resume request: starting {part.name} again")
            have = 0
        mode = "ab" if resumed else "wb"
        if resumed:
            log(f"  resuming {part.name} at byte {have}")
        length = response.headers.get("Content-Length")
        total = have + int(length) if length is not None else None
        got = have
        try:
            with open(part, mode) as out:
                while True:
                    chunk = response.read(CHUNK_BYTES)
                    if not chunk:
                        break
                    out.write(chunk)
                    got += len(chunk)
        except (OSError, http.client.HTTPException) as e:
            raise DownloadError(
                f"download of {part.name[:-5]} from {_host(url)} broke off after {got} bytes ({e}); "
                "run the same command again to resume.") from None
    if total is not None and got < total:
        raise DownloadError(f"download of {part.name[:-5]} from {_host(url)} broke off after {got} of {total} "
                            "bytes; run the same command again to resume.")
    return part


def sha256_of(path: Path) -> str:
    """The file's SHA-256 hex digest (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _recorded(cache: Path) -> dict:
    path = cache / CHECKSUMS_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (ValueError, OSError) as e:
        raise DownloadError(f"{path}: cannot read the recorded checksums ({e}); delete it to start over.") from None


def _record(cache: Path, url: str, digest: str, size: int) -> None:
    records = _recorded(cache)
    records[url] = {"sha256": digest, "size": size}
    tmp = cache / (CHECKSUMS_FILE + ".tmp")
    tmp.write_text(json.dumps(records, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, cache / CHECKSUMS_FILE)


def verify(path: Path, remote: Remote, cache: Path, *, log=print) -> str:
    """Checks a complete download against its registry entry, or else the digest recorded
    by an earlier download into this data directory; records it when neither exists.

    Returns:
      The file's SHA-256.

    Raises:
      DownloadError: size or SHA-256 mismatch (the message names the file, the source
        and both values). The bad file is deleted so the next run fetches it afresh.
    """
    size = path.stat().st_size
    digest = sha256_of(path)
    known = _recorded(cache).get(remote.url, {})
    expected_sha = remote.sha256 or known.get("sha256")
    expected_size = remote.size if remote.size is not None else known.get("size")
    problem = None
    if expected_size is not None and size != expected_size:
        problem = f"size {size} bytes, expected {expected_size}"
    elif expected_sha is not None and digest != expected_sha:
        problem = f"sha256 {digest}, expected {expected_sha}"
    if problem:
        path.unlink()
        raise DownloadError(f"checksum mismatch for {remote.filename} (from {remote.url}): {problem}; "
                            "the file was deleted. A mirror with a different file, or a corrupted "
                            "transfer: run again, or check the source.")
    if expected_sha is None:
        _record(cache, remote.url, digest, size)
        log(f"  {remote.filename}: no published checksum; recorded sha256 {digest} ({size} bytes) "
            f"in {cache / CHECKSUMS_FILE}")
    return digest


# --------------------------------------------------------------------------- unpacking


def _wanted(dataset: Dataset, member: str) -> str | None:
    """The file name ``member`` is written as, or ``None`` when the dataset skips it."""
    path = PurePosixPath(member)
    if "__MACOSX" in path.parts or path.name.startswith("._") or not path.name:
        return None
    if dataset.folder is not None and (len(path.parts) < 2 or path.parts[-2] != dataset.folder):
        return None
    return path.name if any(fnmatch.fnmatch(path.name, p) for p in dataset.members) else None


def _unpack(dataset: Dataset, remote: Remote, archive: Path, into: Path) -> list[str]:
    """Writes the dataset's members of ``archive`` into ``into`` (flat, by file name)."""
    written = []
    try:
        if remote.kind == "file":
            shutil.copyfile(archive, into / remote.filename)
            return [remote.filename]
        if remote.kind == "zip":
            with zipfile.ZipFile(archive) as z:
                for info in z.infolist():
                    name = None if info.is_dir() else _wanted(dataset, info.filename)
                    if name:
                        with z.open(info) as src, open(into / name, "wb") as dst:
                            shutil.copyfileobj(src, dst)
                        written.append(name)
        elif remote.kind == "tar.gz":
            with tarfile.open(archive, "r:gz") as t:
                for info in t:
                    name = _wanted(dataset, info.name) if info.isfile() else None
                    if name:
                        with t.extractfile(info) as src, open(into / name, "wb") as dst:
                            shutil.copyfileobj(src, dst)
                        written.append(name)
        else:
            raise DownloadError(f"{remote.filename}: unknown archive kind {remote.kind!r}.")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as e:
        raise DownloadError(f"cannot unpack {remote.filename} ({archive}): {e}.") from None
    if not written:
        raise DownloadError(f"{remote.filename} holds none of the files {dataset.name} needs "
                            f"({', '.join(dataset.members)}); is it the right archive?")
    return written


def install(dataset: Dataset, data_dir: Path, *, mirror: str | None = None, force: bool = False,
            log=print) -> str:
    """Downloads, checks and unpacks one dataset into ``data_dir/dataset.dest``.

    Args:
      dataset: the registry entry.
      data_dir: the data root (created when missing).
      mirror: fetch ``mirror/<file name>`` instead of the official URLs.
      force: replace a destination that exists.
      log: where progress lines go.

    Returns:
      ``"present"`` (kept, nothing fetched) or ``"installed"``.

    Raises:
      DownloadError: see ``fetch``, ``verify`` and the unpacking (the destination is
        then untouched).
    """
    dest = data_dir / dataset.dest
    if dest.exists() and not force:
        how = "downloaded earlier" if (dest / MARKER_FILE).is_file() else "not by this tool"
        log(f"{dataset.name}: {dest} exists ({how}); kept (--force replaces it)")
        return "present"
    cache = data_dir / DOWNLOADS_DIR
    cache.mkdir(parents=True, exist_ok=True)
    sources = []
    for remote in dataset.remotes:
        final = cache / remote.filename
        url = _source_url(remote, mirror)
        if not final.is_file():
            part = cache / (remote.filename + ".part")
            log(f"{dataset.name}: fetching {remote.filename} from {_host(url)}")
            fetch(url, part, expected_size=remote.size, log=log)
            os.replace(part, final)
        digest = verify(final, remote, cache, log=log)
        sources.append({"url": url, "file": remote.filename, "sha256": digest})
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{dest.name}-", dir=dest.parent))
    try:
        files = []
        for remote in dataset.remotes:
            files += _unpack(dataset, remote, cache / remote.filename, tmp)
        (tmp / MARKER_FILE).write_text(json.dumps({"dataset": dataset.name, "sources": sources,
                                                   "files": sorted(files)}, indent=2) + "\n", encoding="utf-8")
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
    log(f"{dataset.name}: {len(files)} files in {dest}")
    return "installed"


def expand_names(names: list[str]) -> list[str]:
    """Dataset and group names → dataset names, in order, without repeats.

    Raises:
      ValueError: an unknown name (the message lists the known ones).
    """
    out: list[str] = []
    for name in names:
        key = name.lower()
        if key not in DATASETS and key not in GROUPS:
            raise ValueError(f"unknown dataset {name!r}; choose from {', '.join([*DATASETS, *GROUPS])}.")
        for one in GROUPS.get(key, (key,)):
            if one not in out:
                out.append(one)
    return out


def download(names: list[str], data_dir: str | os.PathLike, *, mirror: str | None = None,
             force: bool = False, keep_archives: bool = False, log=print) -> dict[str, str]:
    """Installs the named datasets (see ``install``).

    Args:
      names: dataset or group names (``DATASETS``, ``GROUPS``).
      data_dir: the data root.
      mirror: base URL replacing the official locations; default ``$GROUNDED_TEXT_DOWNLOAD_BASE``.
      force: replace destinations that exist.
      keep_archives: keep the downloaded archives in ``data_dir/.downloads``.
      log: where progress lines go.

    Returns:
      ``{name: "installed" | "present"}``.

    Raises:
      ValueError: an unknown name.
      DownloadError: a download, check or unpacking failed (earlier datasets stay installed).
    """
    wanted = expand_names(names)
    mirror = mirror or os.environ.get(MIRROR_ENV_VAR) or None
    root = Path(data_dir).expanduser()
    done = {name: install(DATASETS[name], root, mirror=mirror, force=force, log=log) for name in wanted}
    if not keep_archives:
        for name in wanted:
            for remote in DATASETS[name].remotes:
                (root / DOWNLOADS_DIR / remote.filename).unlink(missing_ok=True)
    return done


# --------------------------------------------------------------------------- CLI


def parse_args(argv=None) -> argparse.Namespace:
    """The download CLI (``grounded-text data download``)."""
    p = argparse.ArgumentParser(prog="grounded-text data download", description=__doc__.split("\n\n")[0],
                                epilog=f"datasets: {', '.join(DATASETS)}; groups: "
                                       + "; ".join(f"{g} = {' '.join(v)}" for g, v in GROUPS.items() if g != "all")
                                       + "; all = every dataset.")
    p.add_argument("names", nargs="*", metavar="NAME", help="datasets or groups to download")
    p.add_argument("--data-dir", default=None,
                   help="data root to fill (default: $GROUNDED_TEXT_DATA)")
    p.add_argument("--mirror", default=None, metavar="URL",
                   help=f"fetch URL/<file name> instead of the official locations (default: ${MIRROR_ENV_VAR})")
    p.add_argument("--force", action="store_true", help="replace datasets that are already there")
    p.add_argument("--keep-archives", action="store_true", help="keep the archives in DATA/.downloads")
    p.add_argument("--list", action="store_true", help="list the datasets and their sources, then exit")
    return p.parse_args(argv)


def format_list() -> str:
    """One line per dataset: name, destination, description, source URLs."""
    lines = []
    for d in DATASETS.values():
        lines.append(f"{d.name:<14} {d.dest:<26} {d.description}")
        lines += [f"{'':<14} {r.url}" for r in d.remotes]
    return "\n".join(lines)


def main(argv=None) -> int:
    """The CLI. Exit status: 0 done; 2 bad names, no data directory, or a failed
    download (one ``error: ...`` line)."""
    from grounded_text.data.paths import DATA_ENV_VAR

    a = parse_args(argv)
    if a.list:
        print(format_list())
        return 0
    if not a.names:
        print("error: name at least one dataset (or: sts, senteval, all); --list shows them.", file=sys.stderr)
        return 2
    data_dir = a.data_dir or os.environ.get(DATA_ENV_VAR)
    if not data_dir:
        print(f"error: no data directory: pass --data-dir or set {DATA_ENV_VAR}.", file=sys.stderr)
        return 2
    try:
        names = expand_names(a.names)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    try:
        done = download(names, data_dir, mirror=a.mirror, force=a.force, keep_archives=a.keep_archives)
    except DownloadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # e.g. the data directory cannot be written
        print(f"error: {data_dir}: {e.strerror or e}.", file=sys.stderr)
        return 2
    print(f"done in {time.perf_counter() - start:.1f} s: "
          + ", ".join(f"{k} {v}" for k, v in done.items()) + f" (data directory {data_dir})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
