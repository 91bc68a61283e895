"""``grounded-text data download`` against a local HTTP server (nothing leaves 127.0.0.1).

The server serves small archives built here in the published formats (a SICK zip, the
STS-B tarball, SentEval's MR/CR/SUBJ/MPQA zip, plain TREC files) and can corrupt a file or
drop the connection half-way through one, to check the checksum, resume and offline paths.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import json
import socket
import subprocess
import sys
import tarfile
import threading
import time
import zipfile

import pytest

from grounded_text.data import download as dl
from grounded_text.data.sts import read_sick, read_sts_benchmark

SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"


def _zip(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
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


def _sick(split: str, n: int) -> bytes:
    rows = "".join(f"{i}\tA man plays {split} {i}\tA man is playing {i}\t{1 + i % 5}.0\tNEUTRAL\n" for i in range(n))
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


class _Server:
    """Serves ``files`` (name → bytes) at http://127.0.0.1:PORT/NAME, honouring ``Range``.

    ``drop_after[name] = n`` sends the full ``Content-Length`` but closes the connection
    after ``n`` bytes, once (a transfer that breaks off). ``requests`` logs (path, Range).
    """

    def __init__(self, files: dict[str, bytes]):
        self.files = dict(files)
        self.drop_after: dict[str, int] = {}
        self.ignore_range = False
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                name = self.path.lstrip("/")
                rng = self.headers.get("Range")
                server.requests.append((name, rng))
                if server.ignore_range:
                    rng = None
                if name not in server.files:
                    self.send_error(404)
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

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


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


def _with_checksums(monkeypatch, archives: dict[str, bytes], names=None):
    """Registry entries carrying the fixtures' real SHA-256 (the published ones are the
    real archives'), so the checks run as they do for a registry with known digests."""
    patched = {}
    for name, d in dl.DATASETS.items():
        remotes = tuple(dataclasses.replace(r, sha256=hashlib.sha256(archives[r.filename]).hexdigest())
                        if r.filename in archives and (names is None or r.filename in names) else r
                        for r in d.remotes)
        patched[name] = dataclasses.replace(d, remotes=remotes)
    monkeypatch.setattr(dl, "DATASETS", patched)


def test_good_archives_unpack_into_the_layout_the_readers_take(server, archives, tmp_path, monkeypatch, capsys):
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
    assert marker["sources"][0]["sha256"] == hashlib.sha256(archives["sick_train.zip"]).hexdigest()
    # A second run keeps what is there and fetches nothing.
    n = len(server.requests)
    assert dl.main(["sick", "--data-dir", str(data), "--mirror", server.url]) == 0
    assert len(server.requests) == n and "kept" in capsys.readouterr().out


def test_a_corrupt_archive_fails_naming_the_file_and_installs_nothing(server, archives, tmp_path, monkeypatch,
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
    assert hashlib.sha256(archives["Stsbenchmark.tar.gz"]).hexdigest() in err
    assert not (data / "sts" / "STSBenchmark").exists()
    assert not (data / ".downloads" / "Stsbenchmark.tar.gz").exists()  # deleted: the next run starts afresh
    server.files["Stsbenchmark.tar.gz"] = archives["Stsbenchmark.tar.gz"]
    assert dl.main(["stsb", "--data-dir", str(data), "--mirror", server.url]) == 0


def test_an_unknown_checksum_is_recorded_then_enforced(server, archives, tmp_path, capsys):
    # The shipped registry has no digest for the SICK zips yet: the first download records it.
    assert all(r.sha256 is None for r in dl.DATASETS["sick"].remotes)
    data = tmp_path / "data"
    assert dl.main(["sick", "--data-dir", str(data), "--mirror", server.url]) == 0
    recorded = json.loads((data / ".downloads" / dl.CHECKSUMS_FILE).read_text())
    url = f"{dl.DATASETS['sick'].remotes[0].url}"
    assert recorded[url]["sha256"] == hashlib.sha256(archives["sick_train.zip"]).hexdigest()
    assert "recorded sha256" in capsys.readouterr().out
    server.files["sick_train.zip"] = _sick("train", 7)  # the mirror now serves another file
    rc = dl.main(["sick", "--force", "--data-dir", str(data), "--mirror", server.url])
    assert rc == 2 and "checksum mismatch for sick_train.zip" in capsys.readouterr().err
    assert len(read_sick(data / "sts", "train").scores) == 6  # the old copy is intact


def test_an_interrupted_download_resumes_with_range(server, archives, tmp_path, monkeypatch, capsys):
    _with_checksums(monkeypatch, archives)
    name = "datasmall_NB_ACL12.zip"
    half = len(archives[name]) // 2
    server.drop_after[name] = half
    data = tmp_path / "data"
    rc = dl.main(["subj", "--data-dir", str(data), "--mirror", server.url])
    err = capsys.readouterr().err
    assert rc == 2 and "broke off" in err and "run the same command again" in err, err
    part = data / ".downloads" / (name + ".part")
    assert part.stat().st_size == half
    assert not (data / "senteval" / "SUBJ").exists()
    assert dl.main(["subj", "--data-dir", str(data), "--mirror", server.url]) == 0
    assert server.requests[-1] == (name, f"bytes={half}-")
    assert "resuming" in capsys.readouterr().out
    assert (data / "senteval" / "SUBJ" / "subj.subjective").read_text() == "i love it\n"


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
        dl._check_reachable("http://no-such-host.invalid/x.zip")
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


def test_groups_expand_in_order_without_repeats():
    assert dl.expand_names(["sts", "sts12", "sick"]) == ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sick"]
    assert set(dl.expand_names(["all"])) == set(dl.DATASETS)


def test_every_registry_url_is_official_https_or_the_sts_wiki():
    for d in dl.DATASETS.values():
        for r in d.remotes:
            assert r.url.endswith(r.filename), r
            assert r.url.startswith(("https://", "http://ixa2.si.ehu.eus/", "http://alt.qcri.org/")), r
