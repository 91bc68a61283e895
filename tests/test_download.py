"""``grounded-text data download`` against a local HTTP server (nothing leaves 127.0.0.1).

The server serves small archives built here in the published formats (a SICK zip, the
STS-B tarball, SentEval's MR/CR/SUBJ/MPQA zip, plain TREC files) and can corrupt a file,
serve a web page, answer 503 once or drop the connection half-way through one, to check
the checksum, structure, resume, retry and offline paths. The registry's line counts
are patched down to the fixtures' sizes (written out below, not computed from the
fixtures); one test serves archives rebuilt from the real data instead, with the
registry as shipped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pooch
import pytest
from flickr_mirror import LocalServer
from release_archives import pack_sts_archives

from grounded_text.data import download as dl
from grounded_text.data.sts import read_sick, read_sts_benchmark, read_sts_year

SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"

#: Non-blank lines of each fixture file (header included), as the small registry expects.
SMALL_ROWS = {
    "sick_train.zip": (("SICK_train.txt", 7),),
    "sick_trial.zip": (("SICK_trial.txt", 4),),
    "sick_test_annotated.zip": (("SICK_test_annotated.txt", 5),),
    "Stsbenchmark.tar.gz": (("stsbenchmark/sts-train.csv", 6), ("stsbenchmark/sts-dev.csv", 4),
                            ("stsbenchmark/sts-test.csv", 5)),
    "datasmall_NB_ACL12.zip": tuple((f"{d}/{f}", 1) for d, f in (
        ("rt10662", "rt-polarity.pos"), ("rt10662", "rt-polarity.neg"), ("customerr", "custrev.pos"),
        ("customerr", "custrev.neg"), ("subj", "subj.objective"), ("subj", "subj.subjective"),
        ("mpqa", "mpqa.pos"), ("mpqa", "mpqa.neg"))),
    "train_5500.label": (("train_5500.label", 1),),
    "TREC_10.label": (("TREC_10.label", 1),),
}


def _zip(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buf.getvalue()


def _tar_gz(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _sick(split: str, n: int, word: str = "plays") -> bytes:
    rows = "".join(f"{i}\tA man {word} {split} {i}\tA man is playing {i}\t{1 + i % 5}.0\tNEUTRAL\n" for i in range(n))
    # The published zips hold the table and a readme, at the archive's top level.
    return _zip({f"SICK_{split}.txt": SICK_HEADER + rows, "readme.txt": "SICK\n"})


def _stsb() -> bytes:
    def rows(split, n):
        return "".join(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{i % 6}.000\tA cat {split} {i}.\tA dog {i}.\n"
                       for i in range(n))
    return _tar_gz({"stsbenchmark/sts-train.csv": rows("train", 6), "stsbenchmark/sts-dev.csv": rows("dev", 4),
                    "stsbenchmark/sts-test.csv": rows("test", 5), "stsbenchmark/readme.txt": "STS-B\n"})


def _binclassif() -> bytes:
    return _zip({"data/rt10662/rt-polarity.pos": "good film\n", "data/rt10662/rt-polarity.neg": "bad film\n",
                 "data/customerr/custrev.pos": "works\n", "data/customerr/custrev.neg": "broke\n",
                 "data/subj/subj.objective": "it is red\n", "data/subj/subj.subjective": "i love it\n",
                 "data/mpqa/mpqa.pos": "fine\n", "data/mpqa/mpqa.neg": "awful\n",
                 "__MACOSX/data/mpqa/._mpqa.pos": "junk"})


class _Server(LocalServer):
    """Serves ``files`` (name → bytes) at http://127.0.0.1:PORT/NAME, honouring ``Range``.

    ``drop_after[name] = n`` sends the full ``Content-Length`` but closes the connection
    after ``n`` bytes, once (a transfer that breaks off). ``fail_once[name] = code``
    answers that HTTP status once. ``content_type[name]`` sets the Content-Type.
    ``requests`` logs (path, Range).
    """

    def __init__(self, files: dict[str, bytes]):
        self.files = dict(files)
        self.drop_after: dict[str, int] = {}
        self.fail_once: dict[str, int] = {}
        self.content_type: dict[str, str] = {}
        self.ignore_range = False
        self.requests: list[tuple[str, str | None]] = []
        #: an ``Authorization`` header value every request must carry (else 401), or None
        self.auth: str | None = None
        #: seconds to wait before answering (to make two downloads overlap)
        self.delay_s = 0.0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                name = self.path.lstrip("/")
                rng = self.headers.get("Range")
                server.requests.append((name, rng))
                if server.delay_s:
                    time.sleep(server.delay_s)
                if server.auth is not None and self.headers.get("Authorization") != server.auth:
                    self.send_error(401, "Unauthorized")
                    return
                if server.ignore_range:
                    rng = None
                if name not in server.files:
                    self.send_error(404)
                    return
                code = server.fail_once.pop(name, None)
                if code is not None:
                    self.send_response(code)
                    self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = server.files[name]
                start = int(rng.split("=")[1].split("-")[0]) if rng else 0
                if start >= len(data) and rng:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.end_headers()
                    return
                body = data[start:]
                self.send_response(206 if rng else 200)
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Type", server.content_type.get(name, "application/octet-stream"))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                cut = server.drop_after.pop(name, None)
                if cut is not None:
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                self.wfile.write(body)

        super().__init__(Handler)


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch):
    monkeypatch.setattr(dl.fetching, "RETRY_BACKOFF_S", 0.01)


@pytest.fixture
def archives():
    return {"sick_train.zip": _sick("train", 6), "sick_trial.zip": _sick("trial", 3),
            "sick_test_annotated.zip": _sick("test_annotated", 4), "Stsbenchmark.tar.gz": _stsb(),
            "datasmall_NB_ACL12.zip": _binclassif(),
            "train_5500.label": b"DESC:manner How did serfdom develop ?\n", "TREC_10.label": b"NUM:dist How far ?\n"}


@pytest.fixture
def server(archives):
    s = _Server(archives)
    yield s
    s.close()


@pytest.fixture
def small(monkeypatch):
    """The registry with the fixtures' line counts."""
    _patch(monkeypatch, lambda r: dataclasses.replace(r, rows=SMALL_ROWS[r.filename]) if r.filename in SMALL_ROWS
           else r)


def _patch(monkeypatch, change):
    # The fixtures are not the releases: their files cannot match the release manifest.
    patched = {name: dataclasses.replace(d, remotes=tuple(change(r) for r in d.remotes), manifest=())
               for name, d in dl.catalogue.DATASETS.items()}
    monkeypatch.setattr(dl.catalogue, "DATASETS", patched)


def _with_checksums(monkeypatch, archives: dict[str, bytes]):
    """Registry entries carrying the fixtures' real SHA-256 (pinned), as for a published digest."""
    _patch(monkeypatch, lambda r: dataclasses.replace(r, sha256=hashlib.sha256(archives[r.filename]).hexdigest())
           if r.filename in archives else r)


def _recorded(data: Path) -> dict:
    path = data / ".downloads" / dl.CHECKSUMS_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _url(dataset: str, filename: str) -> str:
    return next(r.url for r in dl.catalogue.DATASETS[dataset].remotes if r.filename == filename)


def test_good_archives_unpack_into_the_layout_the_readers_take(server, archives, small, tmp_path, monkeypatch,
                                                               capsys):
    _with_checksums(monkeypatch, archives)
    data = tmp_path / "data"
    rc = dl.main(["sick", "stsb", "mr", "mpqa", "trec", "--data-dir", str(data), "--mirror", server.url])
    out = capsys.readouterr()
    assert rc == 0, out.err
    sick = data / "sts" / "SICK"
    assert sorted(p.name for p in sick.iterdir()) == [
        ".download.json", "SICK_test_annotated.txt", "SICK_train.txt", "SICK_trial.txt"]
    assert len(read_sick(data / "sts", "train").scores) == 6
    stsb = data / "sts" / "STSBenchmark"
    assert (stsb / "sts-test.csv").is_file() and (stsb / "sts-dev.csv").is_file()
    assert len(read_sts_benchmark(data / "sts", "test").scores) == 5
    assert (data / "senteval" / "MR" / "rt-polarity.pos").read_text() == "good film\n"
    assert sorted(p.name for p in (data / "senteval" / "MPQA").iterdir()) == [".download.json", "mpqa.neg", "mpqa.pos"]
    assert not (data / "senteval" / "CR").exists()  # in the same archive, but not asked for
    assert (data / "senteval" / "TREC" / "TREC_10.label").read_bytes() == archives["TREC_10.label"]
    # The shared MR/MPQA archive was fetched once; the archives are gone afterwards.
    assert [p for p, _ in server.requests].count("datasmall_NB_ACL12.zip") == 1
    assert not any((data / ".downloads").glob("*.zip"))
    marker = json.loads((sick / ".download.json").read_text())
    assert marker["sources"][0]["sha256"] == _sha(archives["sick_train.zip"])
    assert _recorded(data) == {}  # pinned digests are not recorded
    # A second run keeps what is there and fetches nothing.
    n = len(server.requests)
    assert dl.main(["sick", "--data-dir", str(data), "--mirror", server.url]) == 0
    assert len(server.requests) == n and "kept" in capsys.readouterr().out


def test_a_corrupt_archive_fails_naming_the_file_and_installs_nothing(server, archives, small, tmp_path, monkeypatch,
                                                                      capsys):
    _with_checksums(monkeypatch, archives)
    bad = bytearray(archives["Stsbenchmark.tar.gz"])
    bad[len(bad) // 2] ^= 0xFF
    server.files["Stsbenchmark.tar.gz"] = bytes(bad)
    data = tmp_path / "data"
    rc = dl.main(["stsb", "--data-dir", str(data), "--mirror", server.url])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: checksum mismatch for Stsbenchmark.tar.gz"), err
    assert _sha(archives["Stsbenchmark.tar.gz"]) in err
    assert not (data / "sts" / "STSBenchmark").exists()
    assert not (data / ".downloads" / "Stsbenchmark.tar.gz").exists()  # deleted: the next run starts afresh
    server.files["Stsbenchmark.tar.gz"] = archives["Stsbenchmark.tar.gz"]
    assert dl.main(["stsb", "--data-dir", str(data), "--mirror", server.url]) == 0


def test_an_unpinned_archive_is_recorded_after_its_structure_check_then_enforced(server, archives, small, tmp_path,
                                                                                 capsys):
    assert all(r.sha256 is None for r in dl.catalogue.DATASETS["sick"].remotes)
    data = tmp_path / "data"
    assert dl.main(["sick", "--data-dir", str(data), "--mirror", server.url]) == 0
    record = _recorded(data)[_url("sick", "sick_train.zip")]
    assert record["sha256"] == _sha(archives["sick_train.zip"]) and record["verified"] is True
    assert record["size"] == len(archives["sick_train.zip"])
    assert "passed the structure check, recorded sha256" in capsys.readouterr().out
    # The mirror now serves another file that is well-formed: the recorded digest wins...
    changed = _sick("train", 6, word="walks")
    server.files["sick_train.zip"] = changed
    rc = dl.main(["sick", "--data-dir", str(data), "--mirror", server.url, "--force"])
    assert rc == 0  # --force: the new file verifies, so it replaces the recorded digest
    assert _recorded(data)[_url("sick", "sick_train.zip")]["sha256"] == _sha(changed)
    assert "walks" in (data / "sts" / "SICK" / "SICK_train.txt").read_text()
    server.files["sick_train.zip"] = archives["sick_train.zip"]
    (data / "sts" / "SICK").rename(data / "sick-old")
    rc = dl.main(["sick", "--data-dir", str(data), "--mirror", server.url])
    err = capsys.readouterr().err
    assert rc == 2 and "checksum mismatch for sick_train.zip" in err and "--force" in err, err
    assert _recorded(data)[_url("sick", "sick_train.zip")]["sha256"] == _sha(changed)
    assert not (data / "sts" / "SICK").exists()


def test_pooch_checks_every_known_digest_as_it_fetches(server, archives, small, tmp_path, monkeypatch, capsys):
    """A pinned digest, and one recorded by a verified download, go to pooch's ``known_hash``;
    an unknown one (a first download, or --force) does not."""
    asked = []
    real = pooch.retrieve
    monkeypatch.setattr(pooch, "retrieve", lambda url, known_hash, **kw: asked.append(
        (url.rsplit("/", 1)[1], known_hash)) or real(url, known_hash, **kw))
    _patch(monkeypatch, lambda r: dataclasses.replace(r, sha256=_sha(archives[r.filename]))
           if r.filename == "Stsbenchmark.tar.gz" else r)
    data = tmp_path / "data"
    assert dl.main(["stsb", "sick", "--data-dir", str(data), "--mirror", server.url]) == 0
    sick = [(name, None) for name in ("sick_train.zip", "sick_trial.zip", "sick_test_annotated.zip")]
    assert asked == [("Stsbenchmark.tar.gz", "sha256:" + _sha(archives["Stsbenchmark.tar.gz"])), *sick]
    asked.clear()
    assert dl.main(["sick", "--data-dir", str(data), "--mirror", server.url, "--force"]) == 0
    assert asked == sick  # --force: a new file may replace the recorded digest
    asked.clear()
    for name in ("sick_train.zip", "sick_trial.zip", "sick_test_annotated.zip"):
        server.files[name] = _sick(name[5:-4], 6 if name == "sick_train.zip" else 3, word="walks")
    shutil.rmtree(data / "sts" / "SICK")
    rc = dl.main(["sick", "--data-dir", str(data), "--mirror", server.url])
    err = capsys.readouterr().err
    # The recorded digest goes to pooch, which refuses the changed file before it is kept.
    assert asked == [("sick_train.zip", "sha256:" + _sha(archives["sick_train.zip"]))]
    assert rc == 2 and "checksum mismatch for sick_train.zip" in err and _sha(server.files["sick_train.zip"]) in err
    assert not list((data / ".downloads").glob("sick_train.zip*")) and not (data / "sts" / "SICK").exists()


def test_a_complete_partial_file_of_another_digest_is_refused(server, archives, small, tmp_path, monkeypatch, capsys):
    # A .part of the full size left by an earlier transfer is not fetched again: its digest is
    # checked all the same.
    _patch(monkeypatch, lambda r: dataclasses.replace(r, sha256=_sha(archives[r.filename]),
                                                      size=len(archives[r.filename]))
           if r.filename == "TREC_10.label" else r)
    bad = bytes(b ^ 1 for b in archives["TREC_10.label"])
    cache = tmp_path / "data" / ".downloads"
    cache.mkdir(parents=True)
    (cache / "TREC_10.label.part").write_bytes(bad)
    rc = dl.main(["trec", "--data-dir", str(tmp_path / "data"), "--mirror", server.url])
    err = capsys.readouterr().err
    assert rc == 2 and f"sha256 {_sha(bad)}, expected {_sha(archives['TREC_10.label'])} (pinned)" in err, err
    assert not (cache / "TREC_10.label.part").exists()
    assert dl.main(["trec", "--data-dir", str(tmp_path / "data"), "--mirror", server.url]) == 0


@pytest.mark.parametrize("how", ["content-type", "sniffed", "truncated", "wrong-rows", "missing-member"])
def test_a_bad_download_never_becomes_the_trusted_digest(server, archives, small, tmp_path, capsys, how):
    """A mirror serving an error page, a truncated or a wrong archive fails with rc 2 and
    records nothing; the good file then installs, without and with --force."""
    good = archives["sick_train.zip"]
    page = b"<!DOCTYPE html>\n<html><head><title>Moved</title></head><body>Not here</body></html>\n"
    if how == "content-type":
        server.files["sick_train.zip"] = page
        server.content_type["sick_train.zip"] = "text/html; charset=utf-8"
        expected = "answered with a web page (Content-Type text/html"
    elif how == "sniffed":
        server.files["sick_train.zip"] = page  # served as application/octet-stream
        expected = "it is a web page"
    elif how == "truncated":
        server.files["sick_train.zip"] = good[: len(good) // 2]  # a complete transfer of half a file
        expected = "cannot unpack sick_train.zip"
    elif how == "wrong-rows":
        server.files["sick_train.zip"] = _sick("train", 40)
        expected = "SICK_train.txt has 41 non-blank lines, expected 7"
    else:
        server.files["sick_train.zip"] = _zip({"readme.txt": "SICK\n"})
        expected = "no member 'SICK_train.txt'"
    data = tmp_path / "data"
    rc = dl.main(["sick", "--data-dir", str(data), "--mirror", server.url])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and expected in err, err
    assert err.count("\n") == 1
    assert _url("sick", "sick_train.zip") not in _recorded(data)
    assert not (data / "sts" / "SICK").exists()
    assert not (data / ".downloads" / "sick_train.zip").exists()
    assert not (data / ".downloads" / "sick_train.zip.part").exists()
    server.files["sick_train.zip"] = good
    server.content_type.clear()
    assert dl.main(["sick", "--data-dir", str(data), "--mirror", server.url]) == 0
    assert _recorded(data)[_url("sick", "sick_train.zip")]["sha256"] == _sha(good)
    assert dl.main(["sick", "--force", "--data-dir", str(data), "--mirror", server.url]) == 0
    assert len(read_sick(data / "sts", "train").scores) == 6


def test_a_digest_recorded_without_a_check_is_replaced_by_a_good_file(server, archives, small, tmp_path, capsys):
    """Data directories filled by earlier versions may hold the digest of an error page."""
    data = tmp_path / "data"
    (data / ".downloads").mkdir(parents=True)
    url = _url("sick", "sick_train.zip")
    (data / ".downloads" / dl.CHECKSUMS_FILE).write_text(json.dumps({url: {"sha256": "0" * 64, "size": 120}}))
    assert dl.main(["sick", "--data-dir", str(data), "--mirror", server.url]) == 0
    assert "recorded without a structure check" in capsys.readouterr().out
    assert _recorded(data)[url] == {"sha256": _sha(archives["sick_train.zip"]), "size": len(archives["sick_train.zip"]),
                                    "verified": True, "source": f"{server.url}/sick_train.zip"}
    # An unchecked record of the right file is marked verified once the file passes the check.
    unchecked = {url: {"sha256": _sha(archives["sick_train.zip"])}}
    (data / ".downloads" / dl.CHECKSUMS_FILE).write_text(json.dumps(unchecked))
    assert dl.main(["sick", "--force", "--data-dir", str(data), "--mirror", server.url]) == 0
    assert _recorded(data)[url]["verified"] is True


def test_a_size_other_than_the_registry_s_is_refused_before_the_transfer(server, archives, small, tmp_path,
                                                                          monkeypatch, capsys):
    _patch(monkeypatch, lambda r: dataclasses.replace(r, size=len(archives[r.filename]) + 10)
           if r.filename == "TREC_10.label" else r)
    data = tmp_path / "data"
    assert dl.main(["trec", "--data-dir", str(data), "--mirror", server.url]) == 2
    err = capsys.readouterr().err
    assert f"offers {len(archives['TREC_10.label'])} bytes of TREC_10.label; the registry expects" in err, err


def test_a_transient_503_is_retried_and_a_404_is_not(server, archives, small, tmp_path, capsys):
    server.fail_once["sick_trial.zip"] = 503
    data = tmp_path / "data"
    assert dl.main(["sick", "--data-dir", str(data), "--mirror", server.url]) == 0
    assert [p for p, _ in server.requests].count("sick_trial.zip") == 2
    assert "HTTP 503 Service Unavailable; retrying in 0 s (attempt 2 of 4)" in capsys.readouterr().out
    del server.files["TREC_10.label"]
    assert dl.main(["trec", "--data-dir", str(data), "--mirror", server.url]) == 2
    assert "HTTP 404" in capsys.readouterr().err
    assert [p for p, _ in server.requests].count("TREC_10.label") == 1


def test_retries_are_bounded(server, small, tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(dl.fetching.time, "sleep", calls.append)
    server.files["broken"] = b"x" * 10

    class Always503(dict):
        def pop(self, name, default=None):
            return 503

    server.fail_once = Always503()
    with pytest.raises(dl.DownloadError, match=r"HTTP 503 Service Unavailable \(after 4 attempts\)"):
        dl.fetch(f"{server.url}/broken", tmp_path / "broken.part", log=lambda *a: None)
    assert len(calls) == dl.RETRIES == 3


def test_an_interrupted_download_resumes_with_range(server, archives, small, tmp_path, monkeypatch, capsys):
    name = "datasmall_NB_ACL12.zip"
    half = len(archives[name]) // 2
    data = tmp_path / "data"
    # Within one run: the retry resumes where the transfer broke off.
    server.drop_after[name] = half
    assert dl.main(["subj", "--data-dir", str(data), "--mirror", server.url]) == 0
    assert server.requests[-2:] == [(name, None), (name, f"bytes={half}-")]
    assert "resuming" in capsys.readouterr().out
    assert (data / "senteval" / "SUBJ" / "subj.subjective").read_text() == "i love it\n"
    # Without retries: the partial file stays, and the next run resumes it.
    monkeypatch.setattr(dl.fetching, "RETRIES", 0)
    server.drop_after[name] = half
    rc = dl.main(["mpqa", "--data-dir", str(data), "--mirror", server.url])
    err = capsys.readouterr().err
    assert rc == 2 and "broke off" in err and "run the same command again to resume" in err, err
    part = data / ".downloads" / (name + ".part")
    assert part.stat().st_size == half
    assert dl.main(["mpqa", "--data-dir", str(data), "--mirror", server.url]) == 0
    assert server.requests[-1] == (name, f"bytes={half}-")


def test_a_server_that_ignores_range_restarts_the_file(server, archives, tmp_path):
    cache = tmp_path / ".downloads"
    cache.mkdir()
    part = cache / "TREC_10.label.part"
    part.write_bytes(b"stale bytes from another version")
    server.ignore_range = True
    messages = []
    dl.fetch(f"{server.url}/TREC_10.label", part, log=messages.append)
    assert part.read_bytes() == archives["TREC_10.label"]
    assert server.requests[-1][1] == f"bytes={len(b'stale bytes from another version')}-"
    assert any("ignored the resume request" in m for m in messages)


def _bomb_zip(path: Path, member_bytes: int) -> None:
    """A zip whose one member is ``member_bytes`` zero bytes, written in 1 MiB blocks."""
    block = bytes(1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z, z.open("SICK_train.txt", "w", force_zip64=True) as f:
        for _ in range(member_bytes // len(block)):
            f.write(block)


def test_a_zip_bomb_is_refused_on_its_headers(server, small, tmp_path, capsys):
    bomb = tmp_path / "bomb.zip"
    _bomb_zip(bomb, dl.MAX_UNPACKED_BYTES + (1 << 20))
    assert bomb.stat().st_size < dl.MAX_UNPACKED_BYTES // 100  # a small download
    server.files["sick_train.zip"] = bomb.read_bytes()
    data = tmp_path / "data"
    assert dl.main(["sick", "--data-dir", str(data), "--mirror", server.url]) == 2
    err = capsys.readouterr().err
    assert f"unpack to {dl.MAX_UNPACKED_BYTES + (1 << 20)} bytes, over the cap of {dl.MAX_UNPACKED_BYTES}" in err, err
    assert not (data / "sts" / "SICK").exists() and _recorded(data) == {}
    assert not (data / ".downloads" / "sick_train.zip").exists()


def test_unpacked_bytes_are_counted_on_the_headers_and_while_reading(tmp_path):
    path = tmp_path / "x.tar.gz"
    path.write_bytes(_tar_gz({"stsbenchmark/sts-train.csv": "a\tb\n" * 3000}))
    remote = dl.Remote("https://example.org/x.tar.gz", "x.tar.gz", "tar.gz", max_unpacked=10_000)
    with pytest.raises(dl.DownloadError, match="unpack to more than the cap of 10000 bytes"):
        dl.verify_structure(remote, path)
    # A plain file has no header: the bytes read are counted.
    path = tmp_path / "x.txt"
    path.write_bytes(b"a\tb\n" * 3000)
    remote = dl.Remote("https://example.org/x.txt", "x.txt", "file", rows=(("x.txt", 3000),), max_unpacked=10_000)
    with pytest.raises(dl.DownloadError, match="x.txt unpacks to over 10000 bytes"):
        dl.verify_structure(remote, path)
    dl.verify_structure(dataclasses.replace(remote, max_unpacked=12_000), path)


@pytest.mark.parametrize("member", ["../../evil.txt", "/etc/evil.txt", "link", "many"])
def test_unsafe_archives_are_refused(member, tmp_path, monkeypatch):
    remote = dl.Remote("https://example.org/x", "x", "zip", rows=(("SICK_train.txt", 1),))
    path = tmp_path / "x"
    if member == "link":
        path = tmp_path / "x.tar.gz"
        remote = dataclasses.replace(remote, kind="tar.gz")
        with tarfile.open(path, "w:gz") as t:
            info = tarfile.TarInfo("SICK_train.txt")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            t.addfile(info)
        expected = "is a link"
    elif member == "many":
        monkeypatch.setattr(dl.unpacking, "MAX_MEMBERS", 5)
        path.write_bytes(_zip({f"f{i}.txt": "x\n" for i in range(6)}))
        expected = "6 entries, over the cap of 5"
    else:
        path.write_bytes(_zip({member: "x\n", "SICK_train.txt": "x\n"}))
        expected = "points outside the archive's folder"
    with pytest.raises(dl.DownloadError, match=expected):
        dl.verify_structure(remote, path)


def test_a_zip_symlink_is_refused(tmp_path):
    path = tmp_path / "x.zip"
    with zipfile.ZipFile(path, "w") as z:
        info = zipfile.ZipInfo("SICK_train.txt")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(info, "/etc/passwd")
    with pytest.raises(dl.DownloadError, match="is a link"):
        dl.verify_structure(dl.Remote("https://example.org/x.zip", "x.zip", "zip"), path)


def test_installed_folders_are_readable_by_others(server, small, tmp_path):
    old = os.umask(0o022)
    try:
        data = tmp_path / "data"
        assert dl.main(["sick", "trec", "--data-dir", str(data), "--mirror", server.url]) == 0
    finally:
        os.umask(old)
    for folder in (data / "sts" / "SICK", data / "senteval" / "TREC"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755, oct(folder.stat().st_mode)
        for f in folder.iterdir():
            assert stat.S_IMODE(f.stat().st_mode) == 0o644, (f, oct(f.stat().st_mode))


def test_progress_is_shown_by_default_on_stderr_and_quiet_is_quiet(server, small, tmp_path, capsys, monkeypatch):
    # stderr is not a terminal here: plain progress lines (every PROGRESS_EVERY_S), no redraws.
    monkeypatch.setattr(dl.fetching, "PROGRESS_EVERY_S", 0.0)
    assert dl.main(["trec", "--data-dir", str(tmp_path / "a"), "--mirror", server.url]) == 0
    err = capsys.readouterr().err
    assert "  TREC_10.label: 0.0 MB of 0.0 MB (100%)" in err and "\r" not in err, err
    # A terminal gets a tqdm.auto bar.
    with monkeypatch.context() as m:
        m.setattr(sys.stderr, "isatty", lambda: True, raising=False)
        bar = dl.fetching.progress_bar("x.zip", 10)
        assert type(bar).__module__.startswith("tqdm")
        bar.close()
    capsys.readouterr()
    assert dl.main(["trec", "--quiet", "--data-dir", str(tmp_path / "b"), "--mirror", server.url]) == 0
    out = capsys.readouterr()
    assert out.err == "" and out.out.startswith("done in ") and out.out.count("\n") == 1


def test_offline_fails_fast_with_a_clear_error(tmp_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens on this port any more
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "grounded_text.data.download", "sick", "--data-dir",
                           str(tmp_path / "data"), "--mirror", f"http://127.0.0.1:{port}"],
                          capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: cannot reach 127.0.0.1:{port}"), proc.stderr
    assert elapsed < 5, f"{elapsed:.1f} s"
    assert "tensorflow" not in proc.stderr.lower()


def test_an_unknown_host_fails_within_the_connect_limit():
    start = time.perf_counter()
    with pytest.raises(dl.DownloadError, match="cannot reach no-such-host.invalid"):
        dl.fetching._check_reachable("http://no-such-host.invalid/x.zip")
    assert time.perf_counter() - start < 5


def test_bad_names_and_missing_data_dir_are_usage_errors(capsys, monkeypatch):
    monkeypatch.delenv("GROUNDED_TEXT_DATA", raising=False)
    assert dl.main(["stsx", "--data-dir", "/tmp"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown dataset 'stsx'")
    assert dl.main(["sick"]) == 2
    assert "--data-dir" in capsys.readouterr().err
    assert dl.main([]) == 2
    assert dl.main(["--list"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in ("sts12", "sts16", "stsb", "sick", "mr", "trec", "mrpc", "sst2",
                                            "flickr8k-text"))
    assert "(sha256 pinned)" in listing and "(structure-checked)" in listing


def test_groups_expand_in_order_without_repeats():
    assert dl.expand_names(["sts", "sts12", "sick"]) == ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sick"]
    assert set(dl.expand_names(["all"])) == set(dl.catalogue.DATASETS)


def test_every_registry_url_is_https_and_every_file_has_a_structure_check():
    for d in dl.catalogue.DATASETS.values():
        for r in d.remotes:
            assert r.url.endswith(r.filename) and r.url.startswith("https://"), r
            assert r.rows or r.sts or r.files, r


def test_pinned_digests_match_the_published_checksum_lists():
    """Each pinned digest is the one tensorflow_datasets ships for the same URL."""
    import tensorflow_datasets

    root = Path(tensorflow_datasets.__file__).parent
    published = {}
    for path in [*root.glob("url_checksums/*.txt"), *root.glob("**/checksums.tsv")]:
        for line in path.read_text(errors="replace").splitlines():
            fields = line.split()
            if len(fields) >= 3 and fields[1].isdigit():
                published[fields[0]] = (int(fields[1]), fields[2])
    pinned = {r.url: (r.size, r.sha256) for d in dl.catalogue.DATASETS.values() for r in d.remotes if r.sha256}
    assert len(pinned) >= 2
    for url, entry in pinned.items():
        assert published.get(url) == entry, url


# ----------------------------------------------------------------------------- the real files


def _real_mirror(root: Path, out: Path) -> None:
    """Archives in the published formats, rebuilt from the data README's reference copies."""
    out.mkdir()

    def zip_folder(name, folder, prefix=""):
        with zipfile.ZipFile(out / name, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(folder.iterdir()):
                z.write(f, prefix + f.name)

    pack_sts_archives(root, out)
    with zipfile.ZipFile(out / "datasmall_NB_ACL12.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for task, folder in (("MR", "rt10662"), ("CR", "customerr"), ("SUBJ", "subj"), ("MPQA", "mpqa")):
            for f in sorted((root / "senteval" / task).iterdir()):
                z.write(f, f"data/{folder}/{f.name}")
    for task in ("TREC", "MRPC", "SST/binary"):
        for f in (root / "senteval" / task).iterdir():
            (out / f.name).write_bytes(f.read_bytes())
    zip_folder("Flickr8k_text.zip", root / "flickr8k" / "Flickr8k_text")


@pytest.mark.filterwarnings("ignore:STS13. skipping subset")
def test_the_real_files_pass_the_shipped_registry(data_dir, tmp_path, capsys):
    """The registry as shipped (line counts, STS subsets, the pinned MRPC digests) accepts
    the real releases, and the installed folders read as the reference copies do."""
    mirror = tmp_path / "mirror"
    _real_mirror(data_dir, mirror)
    server = _Server({f.name: f.read_bytes() for f in mirror.iterdir()})
    try:
        names = ["sts12", "sts13", "sts16", "stsb", "sick", "mr", "cr", "subj", "mpqa", "trec", "mrpc", "sst2",
                 "flickr8k-text"]
        rc = dl.main([*names, "--data-dir", str(tmp_path / "data"), "--mirror", server.url])
    finally:
        server.close()
    out = capsys.readouterr()
    assert rc == 0, out.err
    data = tmp_path / "data"
    for year in (12, 13, 16):
        got, ref = (read_sts_year(r / "sts" / f"STS{year}-en-test") for r in (data, data_dir))
        assert {k: len(v) for k, v in got.items()} == {k: len(v) for k, v in ref.items()}
    assert len(read_sick(data / "sts", "test").scores) == 4927
    assert (data / "senteval" / "MRPC" / "msr_paraphrase_train.txt").read_bytes() == (
        data_dir / "senteval" / "MRPC" / "msr_paraphrase_train.txt").read_bytes()
    recorded = _recorded(data)
    assert _url("mrpc", "msr_paraphrase_train.txt") not in recorded  # pinned
    assert len(recorded) == 14  # every other file: verified, then recorded


# --------------------------------------------------------------------------- Flickr8k photos


def _jpeg(seed: int) -> bytes:
    """A small real JPEG (PIL-encoded noise), as the photo archive holds."""
    import numpy as np
    from PIL import Image

    buf = io.BytesIO()
    pixels = np.random.default_rng(seed).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(buf, format="JPEG")
    return buf.getvalue()


def _photo_zip(names: list[str], bad: str | None = None) -> bytes:
    """The release's layout: ``Flicker8k_Dataset/<id>.jpg`` plus macOS resource forks."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for k, name in enumerate(names):
            z.writestr(f"Flicker8k_Dataset/{name}", b"not a photo\n" if name == bad else _jpeg(k))
            z.writestr(f"__MACOSX/Flicker8k_Dataset/._{name}", b"\x00\x05\x16\x07junk")
    return buf.getvalue()


PHOTOS = ["1000268201_693b08cb0e.jpg", "1001773457_577c3a7d70.jpg", "1002674143_1b742ab4b8.jpg"]


def _photo_registry(monkeypatch, count: int) -> None:
    _patch(monkeypatch, lambda r: dataclasses.replace(r, files=(("Flicker8k_Dataset/*.jpg", count),))
           if r.filename == "Flickr8k_Dataset.zip" else r)


def test_the_photo_archive_unpacks_flat_into_flickr8k_images(tmp_path, monkeypatch, capsys):
    _photo_registry(monkeypatch, 3)
    archive = _photo_zip(PHOTOS)
    server = _Server({"Flickr8k_Dataset.zip": archive})
    try:
        rc = dl.main(["flickr8k-images", "--data-dir", str(tmp_path), "--mirror", server.url])
    finally:
        server.close()
    assert rc == 0, capsys.readouterr().err
    images = tmp_path / "flickr8k" / "images"
    assert sorted(p.name for p in images.iterdir()) == [".download.json", *PHOTOS]  # no resource forks
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        assert (images / PHOTOS[1]).read_bytes() == z.read(f"Flicker8k_Dataset/{PHOTOS[1]}")
    assert "sample" not in json.loads((images / ".download.json").read_text())
    assert _url("flickr8k-images", "Flickr8k_Dataset.zip") in _recorded(tmp_path)


def test_a_photo_that_is_not_a_jpeg_or_a_wrong_count_is_refused(tmp_path, monkeypatch):
    _photo_registry(monkeypatch, 3)
    remote = dl.catalogue.DATASETS["flickr8k-images"].remotes[0]
    path = tmp_path / "Flickr8k_Dataset.zip"
    path.write_bytes(_photo_zip(PHOTOS, bad=PHOTOS[2]))
    with pytest.raises(dl.DownloadError, match=f"Flicker8k_Dataset/{PHOTOS[2]} is not a JPEG"):
        dl.verify_structure(remote, path)
    path.write_bytes(_photo_zip(PHOTOS[:2]))
    with pytest.raises(dl.DownloadError, match=r"2 members match 'Flicker8k_Dataset/\*.jpg', expected 3"):
        dl.verify_structure(remote, path)
    # The photo archive's own member cap (photos plus resource forks), not the text archives'.
    with pytest.raises(dl.DownloadError, match="6 entries, over the cap of 5"):
        dl.verify_structure(dataclasses.replace(remote, max_members=5), _write(tmp_path / "x.zip", _photo_zip(PHOTOS)))


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_sample_of_the_photos_needs_sample_and_is_not_recorded(tmp_path, monkeypatch, capsys):
    """The shipped count (8,091 photos) refuses three photos, unless a sample is accepted
    (--sample or the environment variable); a sample's digest is never recorded."""
    assert dl.catalogue.DATASETS["flickr8k-images"].remotes[0].files == (("Flicker8k_Dataset/*.jpg", 8091),)
    server = _Server({"Flickr8k_Dataset.zip": _photo_zip(PHOTOS)})
    try:
        args = ["flickr8k-images", "--data-dir", str(tmp_path), "--mirror", server.url]
        assert dl.main(args) == 2
        assert "3 members match 'Flicker8k_Dataset/*.jpg', expected 8091" in capsys.readouterr().err
        assert not (tmp_path / "flickr8k" / "images").exists()
        monkeypatch.setenv(dl.SAMPLE_ENV_VAR, "yes")
        assert dl.main(args) == 2
        assert f"${dl.SAMPLE_ENV_VAR} must be 1" in capsys.readouterr().err
        monkeypatch.setenv(dl.SAMPLE_ENV_VAR, "1")
        assert dl.main(args) == 0, capsys.readouterr().err
    finally:
        server.close()
    images = tmp_path / "flickr8k" / "images"
    assert sorted(p.name for p in images.glob("*.jpg")) == PHOTOS
    assert json.loads((images / ".download.json").read_text())["sample"] is True
    assert _recorded(tmp_path) == {}
    # More lines than published is never a sample.
    remote = dataclasses.replace(dl.catalogue.DATASETS["flickr8k-images"].remotes[0],
                                 files=(("Flicker8k_Dataset/*.jpg", 1),))
    path = _write(tmp_path / "y.zip", _photo_zip(PHOTOS * 1 + ["1003163366_44323f5815.jpg"]))
    with pytest.raises(dl.DownloadError, match="expected 1 at most"):
        dl.verify_structure(remote, path, sample=True)


def test_flickr8k_is_captions_splits_and_photos_and_list_states_the_size(capsys):
    assert dl.expand_names(["flickr8k"]) == ["flickr8k-text", "flickr8k-images"]
    assert dl.catalogue.DATASETS["flickr8k-images"].dest == "flickr8k/images"
    assert dl.main(["--list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().endswith("Flickr8k_Dataset.zip")
                or "Flickr8k_Dataset.zip" in x)
    assert "about 1.1 GB" in line


# --------------------------------------------------------------------------- the release manifest


def test_the_manifest_is_the_sha256_of_the_reference_copies(data_dir):
    """manifest.json holds the digests of the data root's copies of the original releases, for
    every dataset they cover (the Flickr8k photos there are resized copies, not the release)."""
    from grounded_text.data.download.verifying import compute_manifest

    manifest = json.loads(dl.MANIFEST_FILE.read_text())
    names = [n for n in manifest if not n.startswith("_")]
    datasets = [(dl.DATASETS[n], manifest[n]["complete"]) for n in names]
    assert compute_manifest(data_dir, datasets) == {n: manifest[n] for n in names}
    assert {"sts12", "sts13", "sts16", "stsb", "sick", "mrpc", "flickr8k-text"} <= set(names)
    assert "flickr8k-images" not in names
    assert dict(dl.DATASETS["sts16"].manifest)["STS2016.gs.headlines.txt"] == \
        manifest["sts16"]["files"]["STS2016.gs.headlines.txt"]
    # The pinned MRPC archives are the files themselves: the manifest agrees with the pins.
    pins = {r.filename: r.sha256 for r in dl.DATASETS["mrpc"].remotes}
    assert pins == manifest["mrpc"]["files"]


def _poisoned_sts16(data_dir: Path, out: Path) -> None:
    """The real STS16 release archive with one gold score changed: every structure check passes."""
    pack_sts_archives(data_dir, out)
    name = "STS2016-en-test.zip"
    with zipfile.ZipFile(out / name) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    key = "test-gold/STS2016.gs.headlines.txt"
    lines = members[key].decode().split("\n")
    lines[0] = "0" if lines[0].strip() != "0" else "5"
    members[key] = "\n".join(lines).encode()
    with zipfile.ZipFile(out / name, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in members.items():
            z.writestr(member, data)


def test_a_poisoned_archive_fails_on_first_use_naming_the_file(data_dir, tmp_path, capsys):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    _poisoned_sts16(data_dir, mirror)
    server = _Server({f.name: f.read_bytes() for f in mirror.iterdir()})
    data = tmp_path / "data"
    try:
        rc = dl.main(["sts16", "--data-dir", str(data), "--mirror", server.url])
    finally:
        server.close()
    err = capsys.readouterr().err
    assert rc == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("error: sts16: ") and "STS2016.gs.headlines.txt has sha256" in line, line
    assert "the release's is " + dict(dl.DATASETS["sts16"].manifest)["STS2016.gs.headlines.txt"] in line
    assert not (data / "sts" / "STS16-en-test").exists()
    assert _recorded(data) == {} and not any((data / ".downloads").glob("*.zip"))  # deleted, never trusted
    assert not list((data / "sts").glob(".tmp-*"))


def test_a_file_the_complete_manifest_does_not_list_is_refused(tmp_path):
    """An extra STS input file would be scored as a new subset: refused where the manifest
    is complete; a readme passes; an incomplete manifest (Flickr8k's text) lets others by."""
    from grounded_text.data.download.verifying import check_manifest

    for name, text in (("STS.input.a.txt", "x\ty\n"), ("STS.gs.a.txt", "1\n"), ("00-readme.txt", "hi\n")):
        (tmp_path / name).write_text(text)
    digests = {n: dl.sha256_of(tmp_path / n) for n in ("STS.input.a.txt", "STS.gs.a.txt")}
    d = dl.Dataset("x", "x", (), manifest=tuple(digests.items()), manifest_complete=True)
    check_manifest(d, tmp_path, ["STS.input.a.txt", "STS.gs.a.txt", "00-readme.txt"])
    (tmp_path / "STS.input.b.txt").write_text("x\ty\n")
    with pytest.raises(dl.DownloadError, match="STS.input.b.txt is not a file of the release"):
        check_manifest(d, tmp_path, ["STS.input.a.txt", "STS.gs.a.txt", "STS.input.b.txt"])
    check_manifest(dataclasses.replace(d, manifest_complete=False), tmp_path,
                   ["STS.input.a.txt", "STS.gs.a.txt", "STS.input.b.txt"])
    with pytest.raises(dl.DownloadError, match="STS.gs.a.txt is missing"):
        check_manifest(d, tmp_path, ["STS.input.a.txt"])


# --------------------------------------------------------------------------- faults


def test_the_checksum_record_never_follows_a_planted_link(server, small, tmp_path):
    data = tmp_path / "data"
    cache = data / ".downloads"
    cache.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    # The name the recorder used to write through, predictable from the pid.
    (cache / f"{dl.CHECKSUMS_FILE}.{os.getpid()}.tmp").symlink_to(victim)
    assert dl.download(["trec"], data, mirror=server.url, log=lambda *a: None, progress=False)
    assert victim.read_text() == "keep me\n"
    assert len(_recorded(data)) == 2
    assert not list(cache.glob(f".{dl.CHECKSUMS_FILE}.tmp-*"))


def test_two_downloads_of_one_dataset_into_one_folder_both_succeed(server, small, tmp_path):
    import threading

    server.delay_s = 0.2
    data = tmp_path / "data"
    results, errors, logs = [], [], []

    def run():
        try:
            results.append(dl.download(["sick"], data, mirror=server.url, log=logs.append, progress=False))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert sorted(r["sick"] for r in results) == ["installed", "present"]
    assert any("another download into" in line and "waiting" in line for line in logs)
    assert len(read_sick(data / "sts", "train").scores) == 6


def test_an_unwritable_data_dir_names_the_path_that_failed(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert dl.main(["trec", "--data-dir", str(blocker / "data"), "--mirror", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {blocker}") and err.count("\n") == 1, err


def test_a_password_in_the_mirror_url_is_sent_as_basic_auth_and_never_shown(server, small, tmp_path, capsys):
    import base64

    server.auth = "Basic " + base64.b64encode(b"lab:s3cret").decode()
    host = server.url.split("://", 1)[1]
    rc = dl.main(["trec", "--data-dir", str(tmp_path / "a"), "--mirror", f"http://lab:s3cret@{host}"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "s3cret" not in out.out + out.err
    marker = (tmp_path / "a" / "senteval" / "TREC" / ".download.json").read_text()
    assert "s3cret" not in marker and "***@" in marker
    assert "s3cret" not in (tmp_path / "a" / ".downloads" / dl.CHECKSUMS_FILE).read_text()
    # A wrong password: the server's answer, once, and no password.
    rc = dl.main(["trec", "--data-dir", str(tmp_path / "b"), "--mirror", f"http://lab:wrong@{host}"])
    out = capsys.readouterr()
    assert rc == 2
    assert "wrong" not in out.out + out.err
    assert out.err.count("HTTP 401") == 1 and out.err.count("\n") == 1, out.err
    assert "Name or service not known" not in out.err


def test_the_transfer_goes_through_pooch(server, archives, tmp_path, monkeypatch):
    import pooch

    calls = []
    real = pooch.retrieve

    def spy(url, **kwargs):
        calls.append((url, kwargs))
        return real(url, **kwargs)

    monkeypatch.setattr(dl.fetching.pooch, "retrieve", spy)
    part = tmp_path / "TREC_10.label.part"
    assert dl.fetch(f"{server.url}/TREC_10.label", part, log=lambda *a: None) == part
    assert part.read_bytes() == archives["TREC_10.label"]
    (url, kwargs), = calls
    assert url == f"{server.url}/TREC_10.label"
    assert isinstance(kwargs["downloader"], pooch.HTTPDownloader)
    assert kwargs["path"] == tmp_path and not list(tmp_path.glob("*.done"))  # pooch's file moved into place


def test_the_size_cap_still_fails_naming_the_redacted_url(server, archives, tmp_path):
    server.auth = "Basic " + __import__("base64").b64encode(b"me:s3cret").decode()
    url = server.url.replace("://", "://me:s3cret@")
    size = len(archives["TREC_10.label"])
    with pytest.raises(dl.DownloadError) as e:
        dl.fetch(f"{url}/TREC_10.label", tmp_path / "TREC_10.label.part", max_bytes=size - 1, log=lambda *a: None)
    message = str(e.value)
    assert f"{server.url}/TREC_10.label offers {size} bytes" in message and "cap" in message, message
    assert "s3cret" not in message and "me:" not in message
    # The body is counted too, where the server announces no Content-Length.
    downloader = dl.fetching._Downloader(tmp_path / "x.part", None, 4, lambda *a: None, False, None)
    downloader.url, downloader.out = f"{server.url}/x", open(tmp_path / "x.part", "wb")
    with pytest.raises(dl.DownloadError, match=rf"{server.url}/x sent over 4 bytes of x, the cap"):
        downloader.write(b"12345")
    downloader.out.close()
