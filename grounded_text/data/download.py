"""Download the public evaluation and caption data into the layout the package reads.

Usage::

    grounded-text data download sts sick --data-dir DATA      # or: python -m grounded_text.data.download
    grounded-text data download flickr8k --data-dir DATA      # captions, splits and photos (~1.1 GB)
    grounded-text data download all --data-dir DATA
    grounded-text data list

Each dataset comes from its official public location (the URLs SentEval's
``data/downstream/get_transfer_data.bash`` uses for STS 2012-2016, SICK, MR, CR, SUBJ,
MPQA, TREC, MRPC and SST-2; the STS wiki for STS-B; for Flickr8k, the widely used public
copies of the original release archives ``Flickr8k_text.zip`` and ``Flickr8k_Dataset.zip``
on the ``jbrownlee/Datasets`` GitHub release, since the authors' own download form is
gone), and is unpacked into the layout of the data README::

    DATA/sts/STS1x-en-test/, DATA/sts/STSBenchmark/, DATA/sts/SICK/
    DATA/senteval/{MR,CR,SUBJ,MPQA,TREC,MRPC,SST/binary}/
    DATA/flickr8k/Flickr8k_text/, DATA/flickr8k/images/*.jpg

Files are the releases as published (SentEval also tokenises them; the package's readers
take the raw text). The photo archive is large (about 1.1 GB to download, as much again
unpacked, 8,091 JPEGs); ``data list`` states each dataset's download size. The image
features (``flickr8k/features/*.npz``) are not downloadable: ``grounded-text features``
computes them from the photos.

How a download behaves:

* **Resumable, retried**: bytes go to ``DATA/.downloads/<file>.part``; a transfer that
  breaks off, or an HTTP 408/429/5xx answer, is retried up to ``RETRIES`` times with
  exponential back-off (resuming with an HTTP ``Range`` request, or starting over when
  the server ignores the range). An HTTP 404 or a failed check is never retried. A
  progress bar goes to stderr when it is a terminal (``--quiet`` turns it off).
* **Not an error page**: a response served as ``text/html``, a file that starts like an
  HTML page, an archive without its format's signature, or fewer bytes than the
  ``Content-Length`` (or the registry's size) is rejected before it is checked further.
* **Checked**: a file whose registry entry has a ``sha256`` (pinned from a published
  checksum list) must match it. Every archive must also have the expected *structure*
  (``verify_structure``): the member files the readers need, each with its published
  number of non-blank lines (within ``ROW_TOLERANCE``), STS input and gold files that
  pair line by line with gold scores in 0..5. An archive whose digest is not pinned is
  trusted only once it passes that check: its digest is then recorded in
  ``DATA/.downloads/checksums.json`` and later downloads into the same data directory
  must match it. A file that fails any check is deleted and never recorded. When the
  upstream file changes, ``--force`` downloads it again and replaces the recorded digest
  if the new file passes the structure check.
* **Bounded unpacking**: an archive may hold at most ``max_members`` entries (default
  ``MAX_MEMBERS``) and unpack to at most ``max_unpacked`` bytes (default
  ``MAX_UNPACKED_BYTES``, 128 MiB; the files the readers use from any one text archive take
  under 10 MB; the Flickr8k photo archive has its own, larger caps); both are checked on the archive's headers before
  anything is extracted and on the bytes actually read while extracting. Members with an
  absolute path or ``..``, links and device files are refused.
* **Atomic**: a dataset is unpacked into a temporary folder beside its destination and
  renamed into place, so an interrupted run never leaves a half-written dataset. Folders
  get the usual permissions (``0o777`` less the umask), so other users of a shared data
  directory can read them. A destination that exists is kept (``--force`` replaces it).
* **Mirrors**: ``--mirror URL`` or ``$GROUNDED_TEXT_DOWNLOAD_BASE`` fetches every file
  as ``URL/<file name>`` instead (a folder holding the archives under their registry
  file names), e.g. a lab cache or the tests' local server. The same checks apply.
* **Samples**: a mirror may serve a *sample* of a release (fewer lines or photos, e.g. a
  test fixture or a small lab copy). It is accepted only with ``--sample`` or
  ``$GROUNDED_TEXT_DOWNLOAD_SAMPLE=1``: every check stays, except that member line and
  photo counts may be lower than published (at least one each, never more). A sample's
  digest is not recorded, and the dataset's ``.download.json`` says ``"sample": true``.
* **Offline**: an unreachable host fails within a few seconds with
  ``error: cannot reach <host> ...`` (exit 2), with no retries.
"""

from __future__ import annotations

import argparse
import dataclasses
import email.utils
import fnmatch
import hashlib
import http.client
import json
import math
import os
import re
import secrets
import shutil
import socket
import stat
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from pathlib import Path, PurePosixPath

MIRROR_ENV_VAR = "GROUNDED_TEXT_DOWNLOAD_BASE"
#: Set to 1 to accept a mirror's sample of a release (see the module docstring).
SAMPLE_ENV_VAR = "GROUNDED_TEXT_DOWNLOAD_SAMPLE"
#: Seconds to resolve and connect to a host: an offline machine answers in about this long.
CONNECT_TIMEOUT_S = 2.0
#: Seconds a transfer may stall before it is reported (the partial file stays, to resume).
READ_TIMEOUT_S = 30.0
CHUNK_BYTES = 1 << 16
DOWNLOADS_DIR = ".downloads"
CHECKSUMS_FILE = "checksums.json"
MARKER_FILE = ".download.json"
#: Further attempts after a transient failure (HTTP 408/429/5xx, a transfer that broke off).
RETRIES = 3
#: Seconds before the first retry; doubled for each further one (a ``Retry-After`` of up to
#: ``MAX_BACKOFF_S`` seconds is honoured instead).
RETRY_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
TRANSIENT_HTTP = frozenset({408, 425, 429, 500, 502, 503, 504})
#: Default cap on the bytes one archive unpacks to (all members, wanted or not).
MAX_UNPACKED_BYTES = 128 << 20
#: Default cap on the number of entries of one archive.
MAX_MEMBERS = 10_000
#: Relative tolerance of the line counts of ``verify_structure`` (at least 2 lines): copies
#: re-saved by redistributors differ by a blank or stray line, a wrong file by far more.
ROW_TOLERANCE = 0.01


class DownloadError(Exception):
    """A download, its check or its unpacking failed; the message names the file or host."""


class _Transient(DownloadError):
    """A failure worth another attempt (the server was busy, the transfer broke off)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


@dataclasses.dataclass(frozen=True)
class Remote:
    """One published file.

    Attributes:
      url: its official location.
      filename: its name in the download cache and on a mirror (``MIRROR/filename``).
      kind: ``"zip"``, ``"tar.gz"`` or ``"file"`` (kept as is).
      sha256: the expected digest when a published one is known (pinned), else ``None``:
        the file is then trusted once ``verify_structure`` passes, and its digest is
        recorded in the data directory.
      size: the expected size in bytes, or ``None``.
      rows: ``(member, non-blank lines)`` the file must hold; ``member`` is the member's
        path or its trailing part (``"stsbenchmark/sts-test.csv"``, ``"SICK_train.txt"``;
        for ``kind="file"``, the file name).
      sts: for an STS test archive, ``(subset, scored pairs)``: each subset needs an input
        and a gold file of equal length; ``scored pairs`` 0 means any positive number.
      max_unpacked: cap on the bytes the archive unpacks to (and on its download).
      max_members: cap on the archive's entries (``None``: ``MAX_MEMBERS``).
      files: ``(pattern, count)``: the exact number of members whose path matches the ``fnmatch``
        pattern (e.g. ``"Flicker8k_Dataset/*.jpg"``); each ``.jpg``/``.jpeg`` member must
        also start with the JPEG signature.
      approx_bytes: the download's size in bytes, rounded, for ``list`` and the docs
        (``size`` is the exact one, when published).
    """

    url: str
    filename: str
    kind: str
    sha256: str | None = None
    size: int | None = None
    rows: tuple[tuple[str, int], ...] = ()
    sts: tuple[tuple[str, int], ...] = ()
    max_unpacked: int = MAX_UNPACKED_BYTES
    max_members: int | None = None
    files: tuple[tuple[str, int], ...] = ()
    approx_bytes: int | None = None


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


# Both hosts serve the same paths over https (the Hugging Face ``sick`` loader and
# sentence-transformers fetch them so); SentEval's script predates that.
_STS_WIKI = "https://ixa2.si.ehu.eus/stswiki/images/"
_SICK = "https://alt.qcri.org/semeval2014/task1/data/uploads/"
_SENTEVAL = "https://dl.fbaipublicfiles.com/senteval/senteval_data/"
_TREC = "https://cogcomp.seas.upenn.edu/Data/QA/QC/"
_SST2 = "https://raw.githubusercontent.com/PrincetonML/SIF/master/data/"
_FLICKR8K = "https://github.com/jbrownlee/Datasets/releases/download/Flickr8k/"

# Line counts (non-blank lines, header included) are the published sizes of each file,
# which the data README lists: SICK 4,500 / 500 / 4,927 pairs, STS-B 5,749 / 1,500 / 1,379,
# MR 5,331 + 5,331, CR 3,775, SUBJ 5,000 + 5,000, MPQA 10,606, TREC 5,452 / 500, MRPC 4,076 /
# 1,725 pairs, SST-2 67,349 / 872 / 1,821, Flickr8k 40,460 captions and 6,000 / 1,000 / 1,000
# split images. STS scored pairs per subset are those of the SemEval releases.
_BINCLASSIF = Remote(_SENTEVAL + "datasmall_NB_ACL12.zip", "datasmall_NB_ACL12.zip", "zip",
                     rows=(("rt10662/rt-polarity.pos", 5331), ("rt10662/rt-polarity.neg", 5331),
                           ("customerr/custrev.pos", 2405), ("customerr/custrev.neg", 1366),
                           ("subj/subj.objective", 5000), ("subj/subj.subjective", 5000),
                           ("mpqa/mpqa.pos", 3311), ("mpqa/mpqa.neg", 7292)))

_STS_SUBSETS = {
    2012: (("MSRpar", 750), ("MSRvid", 750), ("SMTeuroparl", 459), ("surprise.OnWN", 750),
           ("surprise.SMTnews", 399)),
    # SMT has a gold file but no input file (withheld by its licence).
    2013: (("FNWN", 189), ("OnWN", 561), ("headlines", 750)),
    2014: (("deft-forum", 0), ("deft-news", 0), ("headlines", 0), ("images", 0), ("OnWN", 0), ("tweet-news", 0)),
    2015: (("answers-forums", 0), ("answers-students", 0), ("belief", 0), ("headlines", 0), ("images", 0)),
    2016: (("answer-answer", 254), ("headlines", 249), ("plagiarism", 230), ("postediting", 244),
           ("question-question", 209)),
}


def _sts(year: int, path: str) -> Dataset:
    name = f"STS{year}-en-test.zip"
    return Dataset(f"sts{year % 100}", f"sts/STS{year % 100}-en-test",
                   (Remote(_STS_WIKI + path + name, name, "zip", sts=_STS_SUBSETS[year]),),
                   members=("STS*.txt", "*readme*", "*README*", "LICENSE*"),
                   description=f"SemEval STS {year} English test set (gold scores)")


def _binclassif(name: str, folder: str, files: tuple[str, ...], what: str) -> Dataset:
    return Dataset(name, f"senteval/{name.upper()}", (_BINCLASSIF,), members=files, folder=folder,
                   description=what)


def _file(base: str, name: str, rows: int, sha256: str | None = None, size: int | None = None) -> Remote:
    return Remote(base + name, name, "file", sha256=sha256, size=size, rows=((name, rows),))


def _sick(split: str, rows: int) -> Remote:
    return Remote(f"{_SICK}sick_{split}.zip", f"sick_{split}.zip", "zip", rows=((f"SICK_{split}.txt", rows),))


#: NAME → dataset. A ``sha256`` is pinned where a published checksum list gives one for
#: the same URL; the others are trusted once their structure verifies (module docstring).
DATASETS: dict[str, Dataset] = {d.name: d for d in (
    _sts(2012, "4/40/"),
    _sts(2013, "2/2f/"),
    _sts(2014, "8/8c/"),
    _sts(2015, "d/da/"),
    _sts(2016, "9/98/"),
    Dataset("stsb", "sts/STSBenchmark",
            (Remote(_STS_WIKI + "4/48/Stsbenchmark.tar.gz", "Stsbenchmark.tar.gz", "tar.gz",
                    rows=(("stsbenchmark/sts-train.csv", 5749), ("stsbenchmark/sts-dev.csv", 1500),
                          ("stsbenchmark/sts-test.csv", 1379))),),
            members=("sts-*.csv", "readme.txt", "LICENSE.txt"), folder="stsbenchmark",
            description="STS Benchmark train/dev/test (Cer et al. 2017)"),
    Dataset("sick", "sts/SICK", (_sick("train", 4501), _sick("trial", 501), _sick("test_annotated", 4928)),
            members=("SICK_*.txt",), description="SICK 2014 relatedness and entailment (CC BY-NC-SA 3.0)"),
    _binclassif("mr", "rt10662", ("rt-polarity.pos", "rt-polarity.neg"), "MR movie-review polarity"),
    _binclassif("cr", "customerr", ("custrev.pos", "custrev.neg"), "CR customer-review polarity"),
    _binclassif("subj", "subj", ("subj.objective", "subj.subjective"), "SUBJ subjectivity"),
    _binclassif("mpqa", "mpqa", ("mpqa.pos", "mpqa.neg"), "MPQA opinion polarity"),
    Dataset("trec", "senteval/TREC", (_file(_TREC, "train_5500.label", 5452), _file(_TREC, "TREC_10.label", 500)),
            description="TREC question types"),
    # sha256 and size: tensorflow_datasets 4.9 url_checksums/glue.txt (its GLUE MRPC config
    # fetches these two URLs); the data README's reference copies hash the same.
    Dataset("mrpc", "senteval/MRPC",
            (_file(_SENTEVAL, "msr_paraphrase_train.txt", 4077, size=1047044,
                   sha256="60a9b09084528f0673eedee2b69cb941920f0b8cd0eeccefc464a98768457f89"),
             _file(_SENTEVAL, "msr_paraphrase_test.txt", 1726, size=441275,
                   sha256="a04e271090879aaba6423d65b94950c089298587d9c084bf9cd7439bd785f784")),
            description="MRPC paraphrase pairs (Microsoft research licence)"),
    Dataset("sst2", "senteval/SST/binary",
            (_file(_SST2, "sentiment-train", 67349), _file(_SST2, "sentiment-dev", 872),
             _file(_SST2, "sentiment-test", 1821)),
            description="SST-2 binary sentiment, as SentEval uses it"),
    Dataset("flickr8k-text", "flickr8k/Flickr8k_text",
            (Remote(_FLICKR8K + "Flickr8k_text.zip", "Flickr8k_text.zip", "zip",
                    rows=(("Flickr8k.token.txt", 40460), ("Flickr_8k.trainImages.txt", 6000),
                          ("Flickr_8k.devImages.txt", 1000), ("Flickr_8k.testImages.txt", 1000)),
                    approx_bytes=2_300_000),),
            members=("*.txt",), description="Flickr8k captions and the official train/dev/test split files"),
    # The photo archive holds Flicker8k_Dataset/<id>.jpg (the release's own spelling) and
    # macOS resource forks under __MACOSX/ (skipped), so it needs higher caps than the
    # text archives: 8,091 photos, about 1.1 GB packed and unpacked (JPEGs do not compress).
    Dataset("flickr8k-images", "flickr8k/images",
            (Remote(_FLICKR8K + "Flickr8k_Dataset.zip", "Flickr8k_Dataset.zip", "zip",
                    files=(("Flicker8k_Dataset/*.jpg", 8091),), max_unpacked=3 << 30, max_members=20_000,
                    approx_bytes=1_115_000_000),),
            members=("*.jpg",), folder="Flicker8k_Dataset",
            description="Flickr8k photos, 8,091 JPEGs (download about 1.1 GB; research use, (c) their owners)"),
)}

#: Names that stand for several datasets.
GROUPS: dict[str, tuple[str, ...]] = {
    "sts": ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb"),
    "senteval": ("mr", "cr", "subj", "mpqa", "trec", "mrpc", "sst2"),
    "flickr8k": ("flickr8k-text", "flickr8k-images"),
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


def _retry_after(headers) -> float | None:
    """Seconds from a ``Retry-After`` header (a number or an HTTP date), capped."""
    value = headers.get("Retry-After") if headers is not None else None
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, OverflowError):
            return None
    return min(max(seconds, 0.0), MAX_BACKOFF_S) if math.isfinite(seconds) else None


def _is_html_type(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() in ("text/html", "application/xhtml+xml")


def _fetch_once(url: str, part: Path, expected_size: int | None, max_bytes: int, log, progress: bool) -> Path:
    """One attempt of ``fetch``; raises ``_Transient`` for failures worth retrying."""
    have = part.stat().st_size if part.exists() else 0
    if expected_size is not None and have > expected_size:
        part.unlink()  # longer than the file can be: not a prefix of it
        have = 0
    if expected_size is not None and have == expected_size:
        return part
    request = urllib.request.Request(url, headers={"User-Agent": "grounded_text-download"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=READ_TIMEOUT_S)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:
            # The range starts at or past the end: complete when the server's size is ours.
            total = (e.headers.get("Content-Range") or "").rpartition("/")[2]
            if not total.isdigit() or int(total) == have:
                return part
            part.unlink()
            raise _Transient(f"{part.name[:-5]} on {_host(url)} has {total} bytes, the partial file "
                             f"{have}: starting over") from None
        message = f"{url}: the server answered HTTP {e.code} {e.reason}"
        if e.code in TRANSIENT_HTTP:
            raise _Transient(message, _retry_after(e.headers)) from None
        raise DownloadError(message + ".") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise _Transient(f"cannot reach {_host(url)}: {reason}") from None
    with response:
        content_type = response.headers.get("Content-Type") or ""
        if _is_html_type(content_type):
            raise DownloadError(f"{url} answered with a web page (Content-Type {content_type}), not the file "
                                f"{part.name[:-5]}: an error, login or landing page; check the URL or --mirror.")
        resumed = bool(have) and response.status == 206
        if resumed:
            start = re.match(r"bytes (\d+)-", response.headers.get("Content-Range") or "")
            if not start or int(start.group(1)) != have:
                part.unlink()
                raise _Transient(f"{_host(url)} answered the resume request of {part.name[:-5]} with another "
                                 "range: starting over")
            log(f"  resuming {part.name} at byte {have}")
        elif have:
            log(f"  {_host(url)} ignored the resume request: starting {part.name} again")
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length is not None and length.strip().isdigit() else None
        name = part.name[:-5]
        if total is not None and expected_size is not None and total != expected_size:
            part.unlink(missing_ok=True)
            raise DownloadError(f"{url} offers {total} bytes of {name}; the registry expects {expected_size}: "
                                "another file, or a mirror serving the wrong one.")
        if total is not None and total > max_bytes:
            raise DownloadError(f"{url} offers {total} bytes of {name}, over the {max_bytes}-byte cap for it; "
                                "refused.")
        got = have
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total, initial=have, desc=name, unit="B", unit_scale=True, unit_divisor=1024,
                       file=sys.stderr, leave=False, dynamic_ncols=True)
        try:
            with open(part, "ab" if resumed else "wb") as out:
                while True:
                    chunk = response.read(CHUNK_BYTES)
                    if not chunk:
                        break
                    out.write(chunk)
                    got += len(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
                    if got > max_bytes:
                        break
        except (OSError, http.client.HTTPException) as e:
            raise _Transient(f"download of {name} from {_host(url)} broke off after {got} bytes ({e})") from None
        finally:
            if bar is not None:
                bar.close()
    if got > max_bytes:
        part.unlink()
        raise DownloadError(f"{url} sent over {max_bytes} bytes of {name}, the cap for it; refused.")
    if total is not None and got < total:
        raise _Transient(f"download of {name} from {_host(url)} broke off after {got} of {total} bytes")
    return part


def fetch(url: str, part: Path, *, expected_size: int | None = None, max_bytes: int = MAX_UNPACKED_BYTES,
          log=print, progress: bool = False, retries: int | None = None) -> Path:
    """Downloads ``url`` into ``part``, resuming a partial file with an HTTP ``Range`` request.

    Transient failures (HTTP 408, 425, 429, 500, 502, 503, 504; a connection that breaks
    off or stalls for ``READ_TIMEOUT_S``) are retried ``retries`` times, waiting
    ``RETRY_BACKOFF_S`` seconds doubled at each retry (or the server's ``Retry-After``, up
    to ``MAX_BACKOFF_S``); each retry resumes where the last one stopped.

    Args:
      url: http(s) URL.
      part: the partial file (created, or appended to when the server honours the range).
      expected_size: the full size in bytes when known (a complete ``part`` is then not
        fetched again; a server offering another size is refused).
      max_bytes: refuse a file larger than this many bytes.
      log: where progress lines go.
      progress: show a tqdm progress bar on stderr.
      retries: further attempts after a transient failure (default ``RETRIES``).

    Returns:
      ``part``, holding as many bytes as the server announced.

    Raises:
      DownloadError: the host cannot be reached (no retries: offline fails at once), an
        HTTP error that is not transient (e.g. 404), a web page instead of the file, a
        size other than ``expected_size`` or over ``max_bytes``, or a transient failure
        on the last attempt (``part`` then keeps what arrived: run again to resume).
    """
    if expected_size is not None and part.is_file() and part.stat().st_size == expected_size:
        return part
    _check_reachable(url)
    retries = RETRIES if retries is None else retries
    for attempt in range(retries + 1):
        try:
            return _fetch_once(url, part, expected_size, max_bytes, log, progress)
        except _Transient as e:
            if attempt == retries:
                kept = part.is_file() and part.stat().st_size > 0
                tries = f" (after {retries + 1} attempts)" if retries else ""
                raise DownloadError(f"{e}{tries}; " + ("run the same command again to resume." if kept else
                                                      "run the same command again later.")) from None
            wait = e.retry_after if e.retry_after is not None else min(RETRY_BACKOFF_S * 2 ** attempt,
                                                                        MAX_BACKOFF_S)
            log(f"  {e}; retrying in {wait:g} s (attempt {attempt + 2} of {retries + 1})")
            time.sleep(wait)
    raise AssertionError("unreachable")


def _sniff(path: Path, remote: Remote, url: str) -> None:
    """Refuses a web page or a file without its format's signature (deleting it).

    Raises:
      DownloadError: naming the file, the source and what its first bytes look like.
    """
    with open(path, "rb") as f:
        head = f.read(512)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    problem = None
    if not head:
        problem = "it is empty"
    elif text.startswith((b"<!doctype html", b"<html", b"<head", b"<?xml")) or b"<html" in text[:256]:
        problem = "it is a web page (an error, login or landing page?)"
    elif remote.kind == "zip" and head[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):
        problem = f"it is not a zip archive (it starts with {head[:8]!r})"
    elif remote.kind == "tar.gz" and head[:2] != b"\x1f\x8b":
        problem = f"it is not gzip-compressed (it starts with {head[:8]!r})"
    if problem:
        path.unlink()
        raise DownloadError(f"{remote.filename} from {url}: {problem}; the file was deleted and nothing was "
                            "recorded. Check the URL or --mirror.")


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
        records = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (ValueError, OSError) as e:
        raise DownloadError(f"{path}: cannot read the recorded checksums ({e}); delete it to start over.") from None
    if not isinstance(records, dict):
        raise DownloadError(f"{path}: the recorded checksums are not a JSON object; delete it to start over.")
    return records


def _record(cache: Path, remote: Remote, digest: str, size: int, source: str) -> None:
    records = _recorded(cache)
    records[remote.url] = {"sha256": digest, "size": size, "verified": True, "source": source}
    tmp = cache / f"{CHECKSUMS_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(records, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, cache / CHECKSUMS_FILE)


def verify(path: Path, remote: Remote, cache: Path, *, force: bool = False, log=print) -> tuple[str, bool]:
    """Checks a complete download against its pinned digest, or else the digest recorded
    by an earlier verified download into this data directory.

    A digest recorded by an earlier version of this tool (without ``"verified": true``:
    it may be an error page's) or, with ``force``, a verified one that differs, does not
    stop the file: the caller replaces it once ``verify_structure`` passes.

    Returns:
      ``(sha256 hex digest, whether the caller should record it after the structure check)``.

    Raises:
      DownloadError: size or SHA-256 mismatch (the message names the file, the source
        and both values). The bad file is deleted so the next run fetches it afresh.
    """
    size = path.stat().st_size
    digest = sha256_of(path)
    problem = None
    if remote.size is not None and size != remote.size:
        problem = f"size {size} bytes, expected {remote.size}"
    elif remote.sha256 is not None and digest != remote.sha256:
        problem = f"sha256 {digest}, expected {remote.sha256} (pinned)"
    if problem is None and remote.sha256 is not None:
        return digest, False
    known = _recorded(cache).get(remote.url) if problem is None else None
    if problem is None and (not isinstance(known, dict) or known.get("sha256") == digest):
        # An unchecked record of this same file is recorded again, as verified, after the check.
        return digest, not isinstance(known, dict) or known.get("verified") is not True
    if problem is None and (force or known.get("verified") is not True):
        why = "--force" if known.get("verified") is True else "it was recorded without a structure check"
        log(f"  {remote.filename}: sha256 {digest} differs from the digest recorded in {cache / CHECKSUMS_FILE} "
            f"({why}); it replaces that digest if the file passes the structure check")
        return digest, True
    if problem is None:
        problem = (f"sha256 {digest}, expected {known.get('sha256')} (recorded in {cache / CHECKSUMS_FILE} by "
                   "the first verified download; if the published file changed, --force downloads it again "
                   "and replaces the recorded digest once the new file passes the structure check)")
    path.unlink()
    raise DownloadError(f"checksum mismatch for {remote.filename} (from {remote.url}): {problem}; "
                        "the file was deleted. A mirror with a different file, or a corrupted "
                        "transfer: run again, or check the source.")


# --------------------------------------------------------------------------- archives

_STS_FILE = re.compile(r"^STS(?:\d{4})?\.(?P<what>input|gs)\.(?P<subset>.+)\.txt$")


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


def _close(n: int, want: int, sample: bool = False) -> bool:
    slack = max(2, ROW_TOLERANCE * want)
    return 1 <= n <= want + slack if sample else abs(n - want) <= slack


_JPEG_MAGIC = b"\xff\xd8\xff"


def verify_structure(remote: Remote, path: Path, *, sample: bool = False) -> None:
    """Checks that a downloaded file is the expected one before it is trusted.

    Checks ``remote.rows`` (each member there, with its number of non-blank lines within
    ``ROW_TOLERANCE`` or 2 lines, decoded as UTF-8 with replacement as the readers do) and
    ``remote.sts`` (each subset's input and gold files present and of equal length, gold
    lines blank or a number in 0..5, scored input lines with two tab-separated
    sentences, the scored pairs within the tolerance of the count given) and
    ``remote.files`` (the number of members matching each pattern; every JPEG member
    starts with the JPEG signature), while unpacking within the caps of ``_members``.

    Args:
      remote: the registry entry.
      path: the complete download.
      sample: accept a sample of the release: line, pair and file counts may be lower
        than published (at least 1, never more than the tolerance allows).

    Raises:
      DownloadError: listing what is missing or wrong (at most five problems), or see
        ``_members``.
    """
    wanted = dict(remote.rows)
    found: dict[str, tuple[str, int]] = {}
    sts: dict[tuple[str, str], list[str]] = {}
    counts = dict.fromkeys((pattern for pattern, _ in remote.files), 0)
    problems = []
    for name, read in _members(remote, path):
        if _skipped(name):
            continue
        matched = [pattern for pattern in counts if fnmatch.fnmatch(name, pattern)]
        if matched:
            for pattern in matched:
                counts[pattern] += 1
            if name.lower().endswith((".jpg", ".jpeg")):
                head = _Head()
                read(dst=head)
                if head.data[:3] != _JPEG_MAGIC and len(problems) < 6:
                    problems.append(f"{name} is not a JPEG (it starts with {head.data[:8]!r})")
            else:
                read(dst=_Discard)
            continue
        key = next((k for k in wanted if name == k or name.endswith("/" + k)), None)
        m = _STS_FILE.match(PurePosixPath(name).name) if remote.sts else None
        if key is None and m is None:
            read(dst=_Discard)  # counted against the cap all the same
            continue
        lines = read().decode("utf-8-sig", errors="replace").splitlines()
        if key is not None:
            if key in found:
                raise _refuse(remote, f"two members match {key!r} ({found[key][0]!r}, {name!r})")
            found[key] = (name, sum(1 for line in lines if line.strip()))
        if m is not None:
            sts[m.group("what"), m.group("subset")] = lines
    for pattern, want in remote.files:
        # A release's photos are counted exactly (no re-saved copy adds or drops one).
        if not (1 <= counts[pattern] <= want if sample else counts[pattern] == want):
            problems.append(f"{counts[pattern]} members match {pattern!r}, expected {want}"
                            + (" at most" if sample else ""))
    for key, want in remote.rows:
        if key not in found:
            problems.append(f"no member {key!r}")
        elif not _close(found[key][1], want, sample):
            problems.append(f"{found[key][0]} has {found[key][1]} non-blank lines, expected {want}"
                            + (" at most" if sample else ""))
    for subset, want in remote.sts:
        inputs, golds = sts.get(("input", subset)), sts.get(("gs", subset))
        if inputs is None or golds is None:
            problems.append(f"STS subset {subset!r} lacks its {'input' if inputs is None else 'gold'} file")
            continue
        if len(inputs) != len(golds):
            problems.append(f"STS subset {subset!r}: {len(inputs)} input lines but {len(golds)} gold lines")
            continue
        scored = 0
        for lineno, (line, gold) in enumerate(zip(inputs, golds), 1):
            if not gold.strip():
                continue
            try:
                score = float(gold.strip())
            except ValueError:
                score = math.nan
            if not 0.0 <= score <= 5.0:
                problems.append(f"STS subset {subset!r} line {lineno}: gold {gold.strip()[:20]!r} is not a score 0..5")
                break
            if len(line.split("\t")) < 2:
                problems.append(f"STS subset {subset!r} line {lineno}: not two tab-separated sentences")
                break
            scored += 1
        else:
            if scored == 0 or (want and not _close(scored, want, sample)):
                problems.append(f"STS subset {subset!r} has {scored} scored pairs, expected {want or 'some'}")
    if problems:
        raise DownloadError(f"{remote.filename} is not the expected file: " + "; ".join(problems[:5])
                            + ("; ..." if len(problems) > 5 else "") + ". It was deleted and nothing was recorded.")


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


# --------------------------------------------------------------------------- installing


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
        recorded and the marker file says ``"sample": true``.

    Returns:
      ``"present"`` (kept, nothing fetched) or ``"installed"``.

    Raises:
      DownloadError: see ``fetch``, ``verify``, ``verify_structure`` and ``_unpack`` (the
        destination is then untouched, and no digest of a failed file is recorded).
    """
    dest = data_dir / dataset.dest
    if dest.exists() and not force:
        how = "downloaded earlier" if (dest / MARKER_FILE).is_file() else "not by this tool"
        log(f"{dataset.name}: {dest} exists ({how}); kept (--force replaces it)")
        return "present"
    fresh = set() if fresh is None else fresh
    cache = data_dir / DOWNLOADS_DIR
    cache.mkdir(parents=True, exist_ok=True)
    sources = []
    for remote in dataset.remotes:
        final = cache / remote.filename
        part = cache / (remote.filename + ".part")
        url = _source_url(remote, mirror)
        if force and remote.filename not in fresh:
            final.unlink(missing_ok=True)
            part.unlink(missing_ok=True)
        if not final.is_file():
            log(f"{dataset.name}: fetching {remote.filename} from {_host(url)}")
            fetch(url, part, expected_size=remote.size, max_bytes=remote.max_unpacked, log=log, progress=progress)
            _sniff(part, remote, url)
            os.replace(part, final)
            fresh.add(remote.filename)
        digest, to_record = verify(final, remote, cache, force=force, log=log)
        try:
            verify_structure(remote, final, sample=sample)
        except DownloadError as e:
            final.unlink(missing_ok=True)
            message = str(e)
            if "nothing was recorded" not in message:
                message = message.rstrip(".") + "; it was deleted and nothing was recorded."
            raise DownloadError(message) from None
        if to_record and not sample:
            _record(cache, remote, digest, final.stat().st_size, url)
            log(f"  {remote.filename}: no published checksum; passed the structure check, recorded sha256 "
                f"{digest} in {cache / CHECKSUMS_FILE}")
        sources.append({"url": url, "file": remote.filename, "sha256": digest,
                        "pinned": remote.sha256 is not None})
    dest.parent.mkdir(parents=True, exist_ok=True)
    # os.mkdir (not mkdtemp, which makes 0700 folders) so the dataset gets 0o777 less the
    # umask, readable by the other users of a shared data directory.
    tmp = dest.parent / f".tmp-{dest.name}-{os.getpid()}-{secrets.token_hex(4)}"
    os.mkdir(tmp)
    try:
        files: list[str] = []
        for remote in dataset.remotes:
            _unpack(dataset, remote, cache / remote.filename, tmp, files)
        marker = {"dataset": dataset.name, "sources": sources, "files": sorted(files)}
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
      progress: tqdm progress bars on stderr; default: when stderr is a terminal.
      sample: accept a mirror's sample of a release (``install``); default:
        ``$GROUNDED_TEXT_DOWNLOAD_SAMPLE`` is ``1``.

    Returns:
      ``{name: "installed" | "present"}``.

    Raises:
      ValueError: an unknown name.
      DownloadError: a download, check or unpacking failed (earlier datasets stay installed).
    """
    wanted = expand_names(names)
    mirror = mirror or os.environ.get(MIRROR_ENV_VAR) or None
    if sample is None:
        sample = _sample_from_env()
    if progress is None:
        progress = sys.stderr.isatty()
    root = Path(data_dir).expanduser()
    fresh: set[str] = set()
    done = {name: install(DATASETS[name], root, mirror=mirror, force=force, log=log, progress=progress,
                          fresh=fresh, sample=sample) for name in wanted}
    if not keep_archives:
        for name in wanted:
            for remote in DATASETS[name].remotes:
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


def _size(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


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
                   help=f"fetch URL/<file name> instead of the official locations (default: ${MIRROR_ENV_VAR}); "
                        "the same checks apply")
    p.add_argument("--force", action="store_true",
                   help="download again and replace datasets that are already there; a new file that passes "
                        "the structure check replaces the checksum recorded for it")
    p.add_argument("--keep-archives", action="store_true", help="keep the archives in DATA/.downloads")
    p.add_argument("--sample", action="store_true", default=None,
                   help="accept a mirror's sample of a release: fewer lines or photos than published "
                        f"(default: ${SAMPLE_ENV_VAR}=1); every other check applies")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bars or progress lines, only the result")
    p.add_argument("--list", action="store_true", help="list the datasets and their sources, then exit")
    return p.parse_args(argv)


def format_list() -> str:
    """One line per dataset: name, destination, description; then its source URLs, each
    marked ``(sha256 pinned)`` or ``(structure-checked)`` and, where known, its size."""
    lines = []
    for d in DATASETS.values():
        lines.append(f"{d.name:<16} {d.dest:<26} {d.description}")
        for r in d.remotes:
            size = r.size or r.approx_bytes
            about = "" if r.size else "about "
            lines.append(f"{'':<16} {r.url} ({'sha256 pinned' if r.sha256 else 'structure-checked'})"
                         + (f" {about}{_size(size)}" if size else ""))
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
        sample = _sample_from_env() if a.sample is None else True
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    log = (lambda *args, **kwargs: None) if a.quiet else print
    try:
        done = download(names, data_dir, mirror=a.mirror, force=a.force, keep_archives=a.keep_archives, log=log,
                        progress=False if a.quiet else None, sample=sample)
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
