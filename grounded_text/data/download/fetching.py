"""Fetching one published file: reachability first (offline fails in seconds), then a
resumable, retried HTTP transfer into ``<file>.part``, then a sniff that refuses a web page or
a file without its format's signature.

A mirror URL may carry a user name and password (``https://user:secret@host/path``): they go
to the server as HTTP Basic authorisation, never into a request line, a message or a log
(``redact``).
"""

from __future__ import annotations

import base64
import email.utils
import http.client
import math
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from grounded_text.data.download.catalogue import MAX_UNPACKED_BYTES, DownloadError, Remote

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
            of = f" of {self.total / 1e6:,.1f} MB ({100 * self.got / self.total:.0f}%)" if self.total else ""
            print(f"  {self.name}: {self.got / 1e6:,.1f} MB{of}", file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


def progress_bar(name: str, total: int | None, have: int = 0):
    """A progress display for one transfer: a ``tqdm.auto`` bar in a terminal or a notebook
    kernel (a widget there), else a plain line every ``PROGRESS_EVERY_S`` on stderr (``update(n)``, ``close()``)."""
    from grounded_text.utils.progress import interactive

    if interactive():
        from tqdm.auto import tqdm

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


def _fetch_once(url: str, part: Path, expected_size: int | None, max_bytes: int, log, progress: bool,
                auth: str | None = None) -> Path:
    """One attempt of ``fetch`` (``url`` holds no credentials: ``auth`` carries them); raises
    ``_Transient`` for failures worth retrying."""
    have = part.stat().st_size if part.exists() else 0
    if expected_size is not None and have > expected_size:
        part.unlink()  # longer than the file can be: not a prefix of it
        have = 0
    if expected_size is not None and have == expected_size:
        return part
    request = urllib.request.Request(url, headers={"User-Agent": "grounded_text-download"})
    if auth is not None:
        request.add_unredirected_header("Authorization", auth)
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
        if isinstance(reason, socket.gaierror):  # the name does not resolve: no retry helps
            raise DownloadError(f"cannot reach {_host(url)}: name lookup failed ({reason.strerror or reason}).") \
                from None
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
        bar = progress_bar(name, total, have) if progress else None
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
      url: http(s) URL; a ``user:password@`` in it is sent as HTTP Basic authorisation and
        never shown (``redact``).
      part: the partial file (created, or appended to when the server honours the range).
      expected_size: the full size in bytes when known (a complete ``part`` is then not
        fetched again; a server offering another size is refused).
      max_bytes: refuse a file larger than this many bytes.
      log: where progress lines go.
      progress: show its progress (``progress_bar``).
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
    url, auth = _split_credentials(url)
    _check_reachable(url)
    retries = RETRIES if retries is None else retries
    for attempt in range(retries + 1):
        try:
            return _fetch_once(url, part, expected_size, max_bytes, log, progress, auth)
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

