"""Fetching one published file: reachability first (offline fails in seconds), then a
resumable, retried HTTP transfer into ``<file>.part``, then a sniff that refuses a web page or
a file without its format's signature.

The transfer is pooch's: ``pooch.retrieve`` with a ``pooch.HTTPDownloader`` (requests,
streamed, its ``progressbar`` driving ours) that writes a temporary file and moves it into
place once complete. Our checks ride on it (``_Downloader``): a requests response hook reads
the headers before the body (HTTP errors sorted into transient and final, a web page, the
registry's size, the size cap), the body is counted against the cap as it arrives, a partial
file is resumed with an HTTP ``Range`` request, and ``fetch`` retries transient failures with
its own backoff (pooch's ``retrieve`` has no retries, and its ``Pooch`` retries ignore
``Retry-After`` and cannot resume). Where the file's SHA-256 is known (pinned, or recorded by an
earlier verified download), pooch checks it (``known_hash``) before the file is moved into place,
and deletes a file that differs (``DigestMismatch``). Recording a digest, the structure checks and
the unpacking stay ``verifying``'s and ``unpacking``'s.

A mirror URL may carry a user name and password (``https://user:secret@host/path``): they go
to the server as HTTP Basic authorisation, never into a request line, a message or a log
(``redact``).
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import logging
import math
import os
import re
import socket
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pooch
import requests
from tqdm.auto import tqdm

from grounded_text.data.download.catalogue import MAX_UNPACKED_BYTES, DownloadError, Remote
from grounded_text.utils.progress import interactive

#: Seconds to resolve and connect to a host: an offline machine answers in about this long.
CONNECT_TIMEOUT_S = 2.0
#: Seconds a transfer may stall before it is reported (the partial file stays, to resume).
READ_TIMEOUT_S = 30.0
CHUNK_BYTES = 1 << 16
#: Further attempts after a transient failure (HTTP 408/429/5xx, a transfer that broke off).
RETRIES = 3
#: Seconds before the first retry; doubled for each further one (a ``Retry-After`` of up to
#: ``MAX_BACKOFF_S`` seconds is honoured instead).
RETRY_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
TRANSIENT_HTTP = frozenset({408, 425, 429, 500, 502, 503, 504})
#: Seconds between progress lines where stderr is not a terminal (a log file, CI).
PROGRESS_EVERY_S = 10.0


class DigestMismatch(DownloadError):
    """The fetched file's SHA-256 is not the known one; the file was deleted."""

    def __init__(self, digest: str):
        super().__init__(f"sha256 {digest}")
        self.digest = digest


def _check_known(part: Path, sha256: str | None) -> None:
    """For a complete ``part`` that pooch did not fetch (a finished earlier transfer): pooch's check."""
    if sha256 is not None and (digest := pooch.file_hash(str(part), alg="sha256")) != sha256:
        part.unlink()
        raise DigestMismatch(digest)


class _Transient(DownloadError):
    """A failure worth another attempt (the server was busy, the transfer broke off)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after




def _source_url(remote: Remote, mirror: str | None) -> str:
    return f"{mirror.rstrip('/')}/{remote.filename}" if mirror else remote.url


def _host(url: str) -> str:
    """``host[:port]`` of a URL, without any user name or password."""
    parts = urllib.parse.urlsplit(url)
    return parts.netloc.rpartition("@")[2] or redact(url)


def redact(url: str) -> str:
    """The URL with its password (and user name) replaced by ``***``, for messages and logs."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


def _split_credentials(url: str) -> tuple[str, str | None]:
    """``(the URL without user name and password, an HTTP Basic Authorization value or None)``.

    urllib would otherwise take ``user:secret@host`` for the host name (and fail its lookup
    with "Name or service not known", printing the password).
    """
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    clean = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return clean, f"Basic {token}"


def _check_reachable(url: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Resolves and connects once, each within ``timeout`` seconds, so an offline machine
    fails at once instead of waiting on the resolver or on retries.

    Raises:
      DownloadError: ``cannot reach <host>``.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DownloadError(f"cannot download {redact(url)!r}: only http(s) URLs are supported.")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname):
        # urllib will talk to the proxy, not the host: that is what must answer.
        proxied = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        parts, port = proxied, proxied.port or (443 if proxied.scheme == "https" else 80)
    where = _host(urllib.parse.urlunsplit(parts))
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
        raise DownloadError(f"cannot reach {where}: name lookup took over {timeout:g} s (offline?).")
    if isinstance(found[0], OSError):
        raise DownloadError(f"cannot reach {where}: name lookup failed ({found[0]}); offline?")
    family, socktype, proto, _, address = found[0][0]
    try:
        with socket.socket(family, socktype, proto) as s:
            s.settimeout(timeout)
            s.connect(address)
    except OSError as e:
        reason = "timed out" if isinstance(e, TimeoutError) else (e.strerror or str(e))
        raise DownloadError(f"cannot reach {where}: {reason} (offline, or the host is down?).") from None


class _Lines:
    """Progress as a plain line on stderr every ``PROGRESS_EVERY_S`` seconds (a log file or CI:
    no redraws)."""

    def __init__(self, name: str, total: int | None, have: int, every: float | None = None):
        self.name, self.total, self.got = name, total, have
        self.every = PROGRESS_EVERY_S if every is None else every
        self.next = time.monotonic() + self.every

    def update(self, n: int) -> None:
        self.got += n
        if time.monotonic() >= self.next:
            self.next = time.monotonic() + self.every
            got = min(self.got, self.total) if self.total else self.got  # pooch counts whole chunks
            of = f" of {self.total / 1e6:,.1f} MB ({100 * got / self.total:.0f}%)" if self.total else ""
            print(f"  {self.name}: {got / 1e6:,.1f} MB{of}", file=sys.stderr, flush=True)

    def reset(self) -> None:
        self.got = 0

    def close(self) -> None:
        pass


def progress_bar(name: str, total: int | None, have: int = 0):
    """A progress display for one transfer: a ``tqdm.auto`` bar in a terminal or a notebook
    kernel (a widget there), else a plain line every ``PROGRESS_EVERY_S`` on stderr (``update(n)``, ``close()``)."""
    if interactive():
        return tqdm(total=total, initial=have, desc=name, unit="B", unit_scale=True, unit_divisor=1024,
                    file=sys.stderr, leave=False, dynamic_ncols=True)
    return _Lines(name, total, have)


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


class _Complete(Exception):
    """The partial file already holds the whole file (the server answered a resume with 416)."""


class _PoochBar:
    """Our progress display as pooch's ``progressbar`` object: pooch sets ``total`` to the
    body's ``Content-Length``, calls ``update`` per chunk, then ``reset``, ``update(total)``
    and ``close``; a resumed transfer counts the ``have`` bytes already there."""

    def __init__(self, bar, have: int):
        self.bar, self.have = bar, have

    def __bool__(self) -> bool:  # pooch tests ``if self.progressbar``; tqdm has no truth without a total
        return True

    @property
    def total(self):
        return self.bar.total

    @total.setter
    def total(self, value) -> None:
        self.bar.total = self.have + value if value else None

    def update(self, n: int) -> None:
        self.bar.update(n)

    def reset(self) -> None:
        self.bar.reset()
        if self.have:
            self.bar.update(self.have)

    def close(self) -> None:
        self.bar.close()


class _Downloader(pooch.HTTPDownloader):
    """pooch's HTTP downloader (requests, streamed, ``progressbar``) with our checks on top:
    it resumes ``part`` with an HTTP ``Range`` request, refuses a web page, a size other than
    the registry's or over the cap from the response headers (a requests ``response`` hook,
    before the body), stops a body that runs over the cap, and sorts failures into
    transient (``_Transient``: retried) and final (``DownloadError``). The finished ``part``
    becomes pooch's temporary file, which pooch moves into place."""

    def __init__(self, part: Path, expected_size: int | None, max_bytes: int, log, progress: bool,
                 auth: str | None):
        headers = {"User-Agent": "grounded_text-download"}
        if auth is not None:
            headers["Authorization"] = auth  # requests drops it on a redirect to another host
        self.part, self.expected_size, self.max_bytes, self.log = part, expected_size, max_bytes, log
        self.have = part.stat().st_size if part.exists() else 0
        if self.have:
            headers["Range"] = f"bytes={self.have}-"
        self.bar = progress_bar(part.name[:-5], None, self.have) if progress else None
        super().__init__(progressbar=_PoochBar(self.bar, self.have) if self.bar is not None else False,
                         chunk_size=CHUNK_BYTES, timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S), headers=headers,
                         hooks={"response": self._check_response})
        self.out = None
        self.over_cap = False
        self.got = self.have
        self.total: int | None = None

    # pooch writes each chunk here (a file-like ``output_file``): the part file, capped.
    def write(self, chunk: bytes) -> None:
        self.out.write(chunk)
        self.got += len(chunk)
        if self.got > self.max_bytes:
            self.over_cap = True
            raise DownloadError(f"{self.url} sent over {self.max_bytes} bytes of {self.part.name[:-5]}, the cap for "
                                "it; refused.")

    def flush(self) -> None:
        self.out.flush()

    def _check_response(self, response, *args, **kwargs):
        """The headers, before any of the body is read."""
        if response.is_redirect:
            return response
        url, part, have, name = self.url, self.part, self.have, self.part.name[:-5]
        code = response.status_code
        if code == 416 and have:
            # The range starts at or past the end: complete when the server's size is ours.
            total = (response.headers.get("Content-Range") or "").rpartition("/")[2]
            if not total.isdigit() or int(total) == have:
                raise _Complete()
            part.unlink()
            raise _Transient(f"{name} on {_host(url)} has {total} bytes, the partial file {have}: starting over")
        if code >= 400:
            message = f"{url}: the server answered HTTP {code} {response.reason}"
            if code in TRANSIENT_HTTP:
                raise _Transient(message, _retry_after(response.headers))
            raise DownloadError(message + ".")
        content_type = response.headers.get("Content-Type") or ""
        if _is_html_type(content_type):
            raise DownloadError(f"{url} answered with a web page (Content-Type {content_type}), not the file "
                                f"{name}: an error, login or landing page; check the URL or --mirror.")
        resumed = bool(have) and code == 206
        if resumed:
            start = re.match(r"bytes (\d+)-", response.headers.get("Content-Range") or "")
            if not start or int(start.group(1)) != have:
                part.unlink()
                raise _Transient(f"{_host(url)} answered the resume request of {name} with another range: "
                                 "starting over")
            self.log(f"  resuming {part.name} at byte {have}")
        elif have:
            self.log(f"  {_host(url)} ignored the resume request: starting {part.name} again")
            self.have = self.got = 0
            if isinstance(self.progressbar, _PoochBar):
                self.progressbar.have = 0
        length = response.headers.get("Content-Length")
        total = self.have + int(length) if length is not None and length.strip().isdigit() else None
        if total is not None and self.expected_size is not None and total != self.expected_size:
            part.unlink(missing_ok=True)
            raise DownloadError(f"{url} offers {total} bytes of {name}; the registry expects "
                                f"{self.expected_size}: another file, or a mirror serving the wrong one.")
        if total is not None and total > self.max_bytes:
            raise DownloadError(f"{url} offers {total} bytes of {name}, over the {self.max_bytes}-byte cap for it; "
                                "refused.")
        self.total = total
        # A body that breaks off short of its Content-Length: keep what arrived (to resume it)
        # and report it below, instead of urllib3 dropping the bytes it buffered.
        response.raw.enforce_content_length = False
        self.out = open(part, "ab" if resumed else "wb")
        return response

    def __call__(self, url, output_file, pooch_, check_only=False):
        self.url = url
        try:
            try:
                super().__call__(url, self, pooch_)
            finally:
                if self.out is not None:
                    self.out.close()
        except _Complete:
            pass
        except requests.exceptions.ConnectionError as e:
            if self.out is None and "NameResolutionError" in repr(e):  # no retry helps
                raise DownloadError(f"cannot reach {_host(url)}: name lookup failed.") from None
            if self.out is None:
                raise _Transient(f"cannot reach {_host(url)}: {type(e).__name__}") from None
            raise _Transient(f"download of {self.part.name[:-5]} from {_host(url)} broke off after {self.got} "
                             f"bytes ({type(e).__name__})") from None
        except requests.exceptions.RequestException as e:
            raise _Transient(f"download of {self.part.name[:-5]} from {_host(url)} broke off after {self.got} "
                             f"bytes ({type(e).__name__})") from None
        except DownloadError:
            if self.over_cap and self.part.exists():
                self.part.unlink()
            raise
        finally:
            if self.bar is not None:
                self.bar.close()
        if self.total is not None and self.got < self.total:
            raise _Transient(f"download of {self.part.name[:-5]} from {_host(url)} broke off after {self.got} of "
                             f"{self.total} bytes")
        os.replace(self.part, output_file)  # pooch moves its temporary file into place


@contextlib.contextmanager
def _pooch_quiet():
    """pooch logs each download (and the SHA-256 of an unpinned file) at INFO on stderr; our
    own lines say that, and ``--quiet`` must stay quiet."""
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _fetch_once(url: str, part: Path, expected_size: int | None, max_bytes: int, log, progress: bool,
                auth: str | None = None, sha256: str | None = None) -> Path:
    """One attempt of ``fetch`` through ``pooch.retrieve`` (``url`` holds no credentials:
    ``auth`` carries them); raises ``_Transient`` for failures worth retrying."""
    have = part.stat().st_size if part.exists() else 0
    if expected_size is not None and have > expected_size:
        part.unlink()  # longer than the file can be: not a prefix of it
    elif expected_size is not None and have == expected_size:
        _check_known(part, sha256)
        return part
    # pooch places the file at ``<part>.done`` (its temporary file, moved there once complete and
    # its digest checked where one is known).
    done = part.with_name(part.name + ".done")
    done.unlink(missing_ok=True)
    downloader = _Downloader(part, expected_size, max_bytes, log, progress, auth)
    try:
        with _pooch_quiet():
            pooch.retrieve(url, known_hash=None if sha256 is None else f"sha256:{sha256}", fname=done.name,
                           path=part.parent, downloader=downloader)
    except ValueError as e:
        # pooch's digest check failed and it deleted the file; its message holds the digest it computed.
        got = re.search(r"but got ([0-9a-fA-F]+)", str(e))
        if sha256 is None or got is None:
            raise
        raise DigestMismatch(got.group(1).lower()) from None
    os.replace(done, part)
    return part


def fetch(url: str, part: Path, *, expected_size: int | None = None, max_bytes: int = MAX_UNPACKED_BYTES,
          log=print, progress: bool = False, retries: int | None = None, sha256: str | None = None) -> Path:
    """Downloads ``url`` into ``part``, resuming a partial file with an HTTP ``Range`` request.

    Transient failures (HTTP 408, 425, 429, 500, 502, 503, 504; a connection that breaks
    off or stalls for ``READ_TIMEOUT_S``) are retried ``retries`` times, waiting
    ``RETRY_BACKOFF_S`` seconds doubled at each retry (or the server's ``Retry-After``, up
    to ``MAX_BACKOFF_S``); each retry resumes where the last one stopped.

    Args:
      url: http(s) URL; a ``user:password@`` in it is sent as HTTP Basic authorisation and
        never shown (``redact``).
      part: the partial file (created, or appended to when the server honours the range).
      expected_size: the full size in bytes when known (a complete ``part`` is then not
        fetched again; a server offering another size is refused).
      max_bytes: refuse a file larger than this many bytes.
      log: where progress lines go.
      progress: show its progress (``progress_bar``).
      retries: further attempts after a transient failure (default ``RETRIES``).
      sha256: the file's known SHA-256 (hex), checked by pooch (``known_hash``) before
        ``part`` is returned; ``None``: not checked here.

    Returns:
      ``part``, holding as many bytes as the server announced (and, with ``sha256``, that digest).

    Raises:
      DownloadError: the host cannot be reached (no retries: offline fails at once), an
        HTTP error that is not transient (e.g. 404), a web page instead of the file, a
        size other than ``expected_size`` or over ``max_bytes``, or a transient failure
        on the last attempt (``part`` then keeps what arrived: run again to resume).
        DigestMismatch (a DownloadError): the file's SHA-256 is not ``sha256`` (``part`` is deleted).
    """
    if expected_size is not None and part.is_file() and part.stat().st_size == expected_size:
        _check_known(part, sha256)
        return part
    url, auth = _split_credentials(url)
    _check_reachable(url)
    retries = RETRIES if retries is None else retries
    for attempt in range(retries + 1):
        try:
            return _fetch_once(url, part, expected_size, max_bytes, log, progress, auth, sha256)
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
        raise DownloadError(f"{remote.filename} from {redact(url)}: {problem}; the file was deleted and nothing was "
                            "recorded. Check the URL or --mirror.")

