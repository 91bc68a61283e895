"""A local stand-in for the public download locations, built from a real slice of the shared
data: what ``grounded-text data download`` fetches when ``GROUNDED_TEXT_DOWNLOAD_BASE`` points
at ``Mirror.url``. Used by the README's "From nothing" test and the Colab notebook test.

``build_mirror`` writes archives in the release layouts: ``Flickr8k_Dataset.zip``
(``Flicker8k_Dataset/<id>.jpg`` plus macOS resource forks) with a few hundred of the real
test-split photos, ``Flickr8k_text.zip`` with those photos' real captions and a train/dev/test
split of them (a sample of the release, hence ``GROUNDED_TEXT_DOWNLOAD_SAMPLE=1``), and the real
STS 2012/2013/2016, STS-B and SICK archives (``release_archives``).
"""

from __future__ import annotations

import functools
import http.server
import threading
import zipfile
from pathlib import Path

from release_archives import pack_sts_archives

#: Photos served, and how the test split's photos are re-split (train / dev / test).
N_TRAIN, N_DEV, N_TEST = 160, 40, 40


def build_mirror(data: Path, out: Path) -> list[str]:
    """Release-layout archives from the shared data under ``out`` (created); returns the photo
    ids served, sorted: the first ``N_TRAIN`` are the train split, then dev, then test."""
    out.mkdir()
    text = data / "flickr8k" / "Flickr8k_text"
    photos = sorted(p.name for p in (data / "flickr8k" / "images").glob("*.jpg"))[: N_TRAIN + N_DEV + N_TEST]
    assert len(photos) == N_TRAIN + N_DEV + N_TEST
    splits = {"train": photos[:N_TRAIN], "dev": photos[N_TRAIN:N_TRAIN + N_DEV], "test": photos[N_TRAIN + N_DEV:]}
    chosen = set(photos)
    lines = [line for line in (text / "Flickr8k.token.txt").read_text(encoding="utf-8").splitlines()
             if line.partition("#")[0] in chosen]
    assert len(lines) == 5 * len(photos)
    with zipfile.ZipFile(out / "Flickr8k_text.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("Flickr8k.token.txt", "\n".join(lines) + "\n")
        for split, ids in splits.items():
            z.writestr(f"Flickr_8k.{split}Images.txt", "\n".join(ids) + "\n")
    with zipfile.ZipFile(out / "Flickr8k_Dataset.zip", "w", zipfile.ZIP_STORED) as z:
        for name in photos:
            z.write(data / "flickr8k" / "images" / name, f"Flicker8k_Dataset/{name}")
            z.writestr(f"__MACOSX/Flicker8k_Dataset/._{name}", b"\x00\x05\x16\x07")
    pack_sts_archives(data, out)
    return photos


class LocalServer:
    """An HTTP server on 127.0.0.1 with request handler class ``handler`` (a thread; stopped by
    ``close``); ``url`` is its base URL."""

    def __init__(self, handler):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Mirror(LocalServer):
    """A static file server of ``folder`` on 127.0.0.1."""

    def __init__(self, folder: Path):
        super().__init__(functools.partial(_QuietHandler, directory=str(folder)))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
