"""Search a folder of photos by a sentence: ``ImageIndex`` and ``grounded-text search``.

Real Flickr8k test photos (``$GROUNDED_TEXT_DATA/flickr8k/images``) copied into a temporary
folder, and the shipped ``vete_bow_flickr8k`` with its image tower. Every result is checked
against ``encode_images`` recomputed here, and every run's work is counted (photos encoded,
files read), so that "reused", "resumed" and "skipped" are measured, not assumed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from grounded_text import cli, search
from grounded_text.photos import index as image_index_lib
from grounded_text.photos.contact_sheet import THUMB
from grounded_text.photos.index import (
    INDEX_FILE,
    PARTS_DIR,
    ImageIndex,
    index_folder,
)
from grounded_text.vision.folders import scan_photos

# Its tests share a module-scoped fixture: one pytest-xdist worker builds it once (setup.cfg).
pytestmark = pytest.mark.xdist_group("test_search")

REPO = Path(__file__).resolve().parents[1]
QUERY = "a dog runs on the grass"
N_PHOTOS = 20


@pytest.fixture(scope="module")
def enc():
    import grounded_text as gt

    return gt.load("vete_bow_flickr8k")


@pytest.fixture(scope="module")
def source_photos(data_dir) -> list[Path]:
    """The first 26 test photos, sorted: 20 for the folder, 6 to add later."""
    photos = sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[:N_PHOTOS + 6]
    assert len(photos) == N_PHOTOS + 6
    return photos


@pytest.fixture
def photos(source_photos, tmp_path) -> Path:
    """A fresh folder of 20 photos (ten of them one folder down: the index is recursive)."""
    folder = tmp_path / "photos"
    (folder / "sub").mkdir(parents=True)
    for i, src in enumerate(source_photos[:N_PHOTOS]):
        shutil.copy2(src, folder / ("sub" if i % 2 else "") / src.name)
    return folder


class Counting:
    """An encoder that counts the photos it encodes and can raise ``KeyboardInterrupt`` on its
    ``interrupt_at``-th ``encode_images`` call (as Ctrl-C would, mid-index)."""

    def __init__(self, enc, interrupt_at: int | None = None, fingerprint: str | None = None):
        self.enc, self.interrupt_at, self.fingerprint = enc, interrupt_at, fingerprint
        self.calls = self.photos = 0

    def __getattr__(self, name):
        return getattr(self.enc, name)

    @property
    def image_fingerprint(self):
        return self.fingerprint or self.enc.image_fingerprint

    def encode_images(self, images, **kwargs):
        self.calls += 1
        if self.calls == self.interrupt_at:
            raise KeyboardInterrupt
        out = self.enc.encode_images(images, **kwargs)
        self.photos += len(out)
        return out


def _expected(enc, paths: list[str], query: str) -> np.ndarray:
    """The cosines of ``query`` with ``paths``, computed without the index."""
    return enc.similarity(enc.encode([query]), enc.encode_images(paths))[0]


def test_scan_is_recursive_by_extension_and_leaves_hidden_names_out(tmp_path):
    for name in ["a.jpg", "b.JPEG", "c.png", "d.gif", "e.bmp", "f.webp", "sub/g.Jpg", "notes.txt", "h.tiff",
                 ".hidden.jpg", ".thumbs/i.jpg"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * len(name))
    (tmp_path / "dir.jpg").mkdir()  # a folder with a photo's name is no photo
    found = scan_photos(tmp_path)
    assert [p.rel for p in found] == ["a.jpg", "b.JPEG", "c.png", "d.gif", "e.bmp", "f.webp", "sub/g.Jpg"]
    assert found[0].size == len("a.jpg") and found[0].mtime_ns == (tmp_path / "a.jpg").stat().st_mtime_ns
    with pytest.raises(FileNotFoundError):
        scan_photos(tmp_path / "missing")


def test_search_returns_k_photos_with_the_cosines_of_encode_images(enc, photos, tmp_path):
    index = ImageIndex(photos, enc, index_dir=tmp_path / "idx", batch_size=8)
    report = index.update(show_progress_bar=False)
    assert (report.photos, report.encoded, report.reused, report.failed) == (N_PHOTOS, N_PHOTOS, 0, [])
    hits = index.search(QUERY, top_k=5)
    assert len(hits) == 5
    paths = sorted(str(p) for p in photos.rglob("*.jpg"))
    assert all(h.path in paths and Path(h.path).is_file() for h in hits)
    cosines = [h.cosine for h in hits]
    assert cosines == sorted(cosines, reverse=True)
    # Recomputed without the index: the same five photos, the same cosines.
    expected = _expected(enc, paths, QUERY)
    best = np.argsort(-expected, kind="stable")[:5]
    assert [h.path for h in hits] == [paths[i] for i in best]
    np.testing.assert_allclose(cosines, expected[best], atol=1e-5)
    # Every stored row is a unit vector, in the order of index.paths.
    assert index.paths == paths
    np.testing.assert_allclose(np.linalg.norm(index.embeddings, axis=1), 1.0, atol=1e-5)
    # Several queries at once; top_k above the photos gives them all.
    both = index.search([QUERY, "a man rides a bike"], top_k=50)
    assert [len(h) for h in both] == [N_PHOTOS, N_PHOTOS]
    assert [h.path for h in both[0][:5]] == [h.path for h in hits]
    for bad in ["", "   ", []]:
        with pytest.raises(ValueError):
            index.search(bad)
    with pytest.raises(ValueError):
        index.search(QUERY, top_k=0)


def test_a_second_run_reuses_the_index_without_encoding(enc, photos, tmp_path):
    first = Counting(enc)
    hits = ImageIndex(photos, first, index_dir=tmp_path / "idx", batch_size=8).search(QUERY)
    assert first.photos == N_PHOTOS
    again = Counting(enc)
    index = ImageIndex(photos, again, index_dir=tmp_path / "idx", batch_size=8)
    report = index.update(show_progress_bar=False)
    assert (report.encoded, report.reused, report.photos) == (0, N_PHOTOS, N_PHOTOS)
    assert again.photos == 0 and again.calls == 0
    assert index.search(QUERY) == hits
    folder = index_folder(photos, enc.image_fingerprint, tmp_path / "idx")
    assert index.index_dir == folder and (folder / INDEX_FILE).is_file() and not (folder / PARTS_DIR).exists()


def test_new_photos_are_added_and_removed_or_changed_ones_dropped(enc, photos, source_photos, tmp_path, capsys):
    ImageIndex(photos, enc, index_dir=tmp_path / "idx", batch_size=8).update(show_progress_bar=False)
    removed = sorted(photos.rglob("*.jpg"))[:2]
    changed = sorted(photos.rglob("*.jpg"))[-1]
    for path in removed:
        path.unlink()
    for src in source_photos[N_PHOTOS:N_PHOTOS + 3]:
        shutil.copy2(src, photos / src.name)
    shutil.copyfile(source_photos[-1], changed)  # other bytes under the same name
    counter = Counting(enc)
    index = ImageIndex(photos, counter, index_dir=tmp_path / "idx", batch_size=8)
    capsys.readouterr()
    report = index.update(show_progress_bar=True)
    assert (report.encoded, report.dropped, report.reused, report.photos) == (4, 3, N_PHOTOS - 3, N_PHOTOS + 1)
    assert counter.photos == 4
    # Progress counts only the photos to encode; in a log (no terminal) as plain lines.
    assert capsys.readouterr().err.splitlines() == ["index: 4 photos ...", "index: 4/4 photos"]
    paths = sorted(str(p) for p in photos.rglob("*.jpg"))
    assert index.paths == paths
    assert not {str(p) for p in removed} & set(index.paths)
    row = index.paths.index(str(changed))
    np.testing.assert_allclose(index.embeddings[row], enc.encode_images([str(changed)])[0], atol=1e-5)
    hits = index.search(QUERY, top_k=3)
    expected = _expected(enc, paths, QUERY)
    assert [h.path for h in hits] == [paths[i] for i in np.argsort(-expected, kind="stable")[:3]]


def test_a_corrupt_file_is_reported_skipped_and_retried_only_once_changed(enc, photos, source_photos, tmp_path,
                                                                          monkeypatch):
    (photos / "x.jpg").write_bytes(b"\xff\xd8 these are not the bytes of a photo " * 20)
    (photos / "sub" / "empty.png").write_bytes(b"")
    index = ImageIndex(photos, enc, index_dir=tmp_path / "idx", batch_size=8)
    report = index.update(show_progress_bar=False)
    assert sorted(rel for rel, _ in report.failed) == ["sub/empty.png", "x.jpg"]
    assert all(reason and "x.jpg" not in reason for _, reason in report.failed)  # the path is said once, not twice
    assert report.photos == N_PHOTOS and str(photos / "x.jpg") not in index.paths
    assert len(index.search(QUERY, top_k=N_PHOTOS + 5)) == N_PHOTOS

    from grounded_text.serving import images

    reads = []
    real_read = images.read_image
    monkeypatch.setattr(images, "read_image", lambda path: reads.append(Path(path).name) or real_read(path))
    report = ImageIndex(photos, enc, index_dir=tmp_path / "idx").update(show_progress_bar=False)
    assert report.failed == [] and sorted(rel for rel, _ in report.known_failed) == ["sub/empty.png", "x.jpg"]
    assert reads == []  # unchanged since they failed: not read again
    shutil.copyfile(source_photos[-1], photos / "x.jpg")  # repaired
    index = ImageIndex(photos, enc, index_dir=tmp_path / "idx")
    report = index.update(show_progress_bar=False)
    assert reads == ["x.jpg"] and report.encoded == 1 and report.photos == N_PHOTOS + 1
    assert [rel for rel, _ in report.known_failed] == ["sub/empty.png"]
    assert str(photos / "x.jpg") in index.paths


def test_an_interrupted_update_keeps_its_batches_and_the_next_resumes(enc, photos, tmp_path):
    interrupted = Counting(enc, interrupt_at=2)
    with pytest.raises(KeyboardInterrupt):
        ImageIndex(photos, interrupted, index_dir=tmp_path / "idx", batch_size=8).update(show_progress_bar=False)
    folder = index_folder(photos, enc.image_fingerprint, tmp_path / "idx")
    assert [p.name for p in (folder / PARTS_DIR).iterdir()] == ["part-000000.npz"]
    assert not (folder / INDEX_FILE).exists()
    counter = Counting(enc)
    index = ImageIndex(photos, counter, index_dir=tmp_path / "idx", batch_size=8)
    report = index.update(show_progress_bar=False)
    assert (report.resumed, report.reused, report.encoded, report.photos) == (8, 8, N_PHOTOS - 8, N_PHOTOS)
    assert counter.photos == N_PHOTOS - 8
    assert not (folder / PARTS_DIR).exists()
    paths = sorted(str(p) for p in photos.rglob("*.jpg"))
    np.testing.assert_allclose(index.embeddings @ enc.encode([QUERY], normalize_embeddings=True)[0],
                               _expected(enc, paths, QUERY), atol=1e-5)


def test_a_process_killed_mid_index_resumes(enc, photos, tmp_path):
    """SIGKILL right after the first part is on disk: nothing can be flushed or cleaned up."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(REPO)!r})
        import grounded_text as gt
        from grounded_text.photos import index as lib
        write = lib.write_table
        def write_then_die(path, *args):
            write(path, *args)
            if path.name.startswith("part-"):
                os.kill(os.getpid(), signal.SIGKILL)
        lib.write_table = write_then_die
        lib.ImageIndex({str(photos)!r}, gt.load("vete_bow_flickr8k"), {str(tmp_path / "idx")!r},
                       batch_size=8).update(show_progress_bar=False)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    counter = Counting(enc)
    report = ImageIndex(photos, counter, index_dir=tmp_path / "idx", batch_size=8).update(show_progress_bar=False)
    assert (report.resumed, report.encoded, report.photos, report.discarded) == (8, N_PHOTOS - 8, N_PHOTOS, [])
    assert counter.photos == N_PHOTOS - 8


def test_an_index_made_for_another_model_is_never_used(enc, photos, tmp_path):
    ImageIndex(photos, enc, index_dir=tmp_path / "idx", batch_size=8).update(show_progress_bar=False)
    other = Counting(enc, fingerprint="0123456789abcdef")
    index = ImageIndex(photos, other, index_dir=tmp_path / "idx", batch_size=8)
    assert index.index_dir != index_folder(photos, enc.image_fingerprint, tmp_path / "idx")
    # Even planted in its place, the first model's index is refused: it records its fingerprint.
    index.index_dir.mkdir(parents=True)
    shutil.copy2(index_folder(photos, enc.image_fingerprint, tmp_path / "idx") / INDEX_FILE,
                 index.index_dir / INDEX_FILE)
    report = index.update(show_progress_bar=False)
    assert len(report.discarded) == 1 and "made for" in report.discarded[0]
    assert report.encoded == N_PHOTOS and other.photos == N_PHOTOS


def test_the_index_files_hold_no_pickles(enc, photos, tmp_path):
    index = ImageIndex(photos, enc, index_dir=tmp_path / "idx", batch_size=8)
    index.update(show_progress_bar=False)
    with np.load(index.index_dir / INDEX_FILE, allow_pickle=False) as z:
        assert all(z[name].dtype != object for name in z.files)
        assert z["embeddings"].shape == (N_PHOTOS, enc.dim) and z["embeddings"].dtype == np.float32


@pytest.fixture
def loaded(enc, monkeypatch):
    """``gt.load`` answers with the module's encoder: the CLI tests skip a second load."""
    import grounded_text as gt

    monkeypatch.setattr(gt, "load", lambda *args, **kwargs: enc)


def test_cli_prints_the_results_and_saves_a_contact_sheet(loaded, photos, tmp_path, capsys):
    grid = tmp_path / "out" / "grid.png"
    (tmp_path / "out").mkdir()
    argv = ["search", "--model", "vete_bow_flickr8k", "--images", str(photos), QUERY, "--top-k", "5",
            "--index", str(tmp_path / "idx"), "--save", str(grid), "--no-progress"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in out if line.strip()[:1].isdigit()]
    assert len(rows) == 5 and all(Path(r[2]).is_file() for r in rows)
    assert [float(r[1]) for r in rows] == sorted((float(r[1]) for r in rows), reverse=True)
    assert out[-1].startswith(f"Index: {N_PHOTOS} photos ({N_PHOTOS} encoded, 0 reused)")
    from PIL import Image

    with Image.open(grid) as im:
        assert im.format == "PNG" and im.width >= 5 * THUMB and im.height >= THUMB
    assert 20_000 < grid.stat().st_size < 5_000_000

    assert cli.main([*argv[:-3], "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert [r["path"] for r in result["results"]] == [r[2] for r in rows]
    assert (result["index"]["encoded"], result["index"]["reused"]) == (0, N_PHOTOS)
    assert "0 encoded, 20 reused" in captured.err


def test_cli_ctrl_c_keeps_the_index_and_exits_130(loaded, photos, tmp_path, capsys, monkeypatch):
    def interrupted(self, show_progress_bar=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(image_index_lib.ImageIndex, "update", interrupted)
    assert search.main(["--model", "vete_bow_flickr8k", "--images", str(photos), QUERY,
                        "--index", str(tmp_path / "idx")]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("interrupted:") and "resume" in err[0]


@pytest.mark.parametrize("case", ["missing folder", "empty query", "blank query", "no photos", "top-k 0",
                                  "unknown model", "no pillow", "bad save extension"])
def test_cli_bad_input_is_one_error_line_and_exit_2(case, tmp_path, capsys, monkeypatch):
    """All checked before TensorFlow is imported (tests/test_packaging.py checks one in a subprocess)."""
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "a.jpg").write_bytes(b"x")
    args = {"missing folder": ["--images", str(tmp_path / "nope"), QUERY],
            "empty query": ["--images", str(folder), ""],
            "blank query": ["--images", str(folder), "  "],
            "no photos": ["--images", str(tmp_path), QUERY, "--top-k", "1"],
            "top-k 0": ["--images", str(folder), QUERY, "--top-k", "0"],
            "unknown model": ["--images", str(folder), QUERY],
            "no pillow": ["--images", str(folder), QUERY, "--save", str(tmp_path / "g.png")],
            "bad save extension": ["--images", str(folder), QUERY, "--save", str(tmp_path / "g.nosuchformat")],
            }[case]
    model = "no_such_model" if case == "unknown model" else "vete_bow_flickr8k"
    if case == "no photos":
        (folder / "a.jpg").unlink()
        args[1] = str(folder)
    if case == "no pillow":
        monkeypatch.setitem(sys.modules, "PIL", None)  # import PIL then fails
    assert cli.main(["search", "--model", model, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    expected = {"missing folder": "does not exist", "empty query": "query is empty", "blank query": "query is empty",
                "no photos": "holds no photos", "top-k 0": "--top-k", "unknown model": "no_such_model",
                "no pillow": "(or pillow)", "bad save extension": "grid.png"}[case]
    assert expected in err[0]


def test_the_default_index_root_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert image_index_lib.default_index_root() == tmp_path / "grounded_text" / "image_index"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert image_index_lib.default_index_root() == Path("~/.cache/grounded_text/image_index").expanduser()
    assert os.path.basename(index_folder(tmp_path / "My Photos", "f")).startswith("My_Photos-")
    # Elsewhere the platform's own cache folder, as platformdirs names it (here a macOS one).
    calls = []
    monkeypatch.setattr(image_index_lib.platformdirs, "user_cache_dir",
                        lambda *args, **kwargs: calls.append((args, kwargs)) or "/Users/u/Library/Caches/grounded_text")
    assert image_index_lib.default_index_root() == Path("/Users/u/Library/Caches/grounded_text/image_index")
    assert calls == [(("grounded_text",), {"appauthor": False})]


def test_a_model_without_image_tower_is_one_error_line(photos, tmp_path, capsys):
    import grounded_text as gt
    from grounded_text import shipped
    from grounded_text.serving.images import NoImageTowerError

    text_only = tmp_path / "text_only" / "export"  # the shipped text tower, no image_export/ beside it
    shutil.copytree(shipped.export_dir("vete_bow_flickr8k"), text_only)
    with pytest.raises(NoImageTowerError):
        ImageIndex(photos, gt.load(text_only), index_dir=tmp_path / "idx")
    assert search.main(["--model", str(text_only), "--images", str(photos), QUERY,
                        "--index", str(tmp_path / "idx")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "image tower" in err[0], err


def test_one_process_at_a_time_updates_an_index(enc, photos, tmp_path):
    fcntl = pytest.importorskip("fcntl")
    index = ImageIndex(photos, enc, index_dir=tmp_path / "idx")
    index.index_dir.mkdir(parents=True)
    with open(index.index_dir / image_index_lib.LOCK_FILE, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(image_index_lib.IndexBusyError, match="another process"):
            index.update(show_progress_bar=False)


def test_a_damaged_or_pickled_index_file_is_ignored_and_rebuilt(enc, photos, tmp_path):
    index = ImageIndex(photos, enc, index_dir=tmp_path / "idx", batch_size=8)
    index.update(show_progress_bar=False)
    (index.index_dir / INDEX_FILE).write_bytes(b"PK\x03\x04 torn")
    (index.index_dir / PARTS_DIR).mkdir()
    np.savez(index.index_dir / PARTS_DIR / "part-000000.npz", embeddings=np.array([{"x": 1}], dtype=object))
    counter = Counting(enc)
    again = ImageIndex(photos, counter, index_dir=tmp_path / "idx", batch_size=8)
    report = again.update(show_progress_bar=False)
    assert len(report.discarded) == 2 and any("objects" in d for d in report.discarded), report.discarded
    assert (report.encoded, report.photos, counter.photos) == (N_PHOTOS, N_PHOTOS, N_PHOTOS)
    assert not (index.index_dir / PARTS_DIR).exists()
    np.testing.assert_allclose(again.embeddings, index.embeddings, atol=1e-6)
