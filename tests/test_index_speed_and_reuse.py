"""The photo index's encode path: the ``features`` input pipeline, the network features kept for
every model of the same network, queries that build no network, TIFF photos, one-line failures.

Every vector is checked against ``encode_images`` (the eager path: ``read_image`` then the network,
photo by photo), or against Pillow's own pixels, computed here. Speed is not asserted here: it is
measured by ``grounded-text benchmark --search`` (docs/performance.md).
"""

from __future__ import annotations

import io
import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

from grounded_text.photos.feature_cache import FEATURES_DIR, FEATURES_FILE
from grounded_text.photos.index import ImageIndex
from grounded_text.serving import images
from grounded_text.vision.photo_header import ImageReadError, probe_bytes, probe_file

pytestmark = pytest.mark.xdist_group("test_index_speed_and_reuse")

N_PHOTOS = 8


@pytest.fixture(scope="module")
def models():
    import grounded_text as gt

    return gt.load("vete_bow_flickr8k"), gt.load("char_gru_attention_flickr8k")


@pytest.fixture
def photos(data_dir, tmp_path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    for src in sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[:N_PHOTOS]:
        shutil.copy2(src, folder / src.name)
    return folder


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.sum(a * b, axis=1)


def _no_network(monkeypatch):
    """Any image network built from now on fails the test."""
    def refuse(self):
        raise AssertionError("the image network was built")

    monkeypatch.setattr(images.ImageSide, "network", refuse)


def test_a_second_model_of_the_same_network_runs_its_tower_alone(models, photos, tmp_path, monkeypatch):
    import grounded_text as gt

    first, _ = models
    second = gt.load("char_gru_attention_flickr8k")  # a fresh load: nothing built yet
    # Both shipped towers record the same network (Lite0, the same weights, one crop, 224 px).
    assert first._image_side().record == second._image_side().record
    assert first._image_side().network_fingerprint == second._image_side().network_fingerprint
    assert first.image_fingerprint != second.image_fingerprint  # two towers: two indexes

    report = ImageIndex(photos, first, tmp_path / "idx").update(show_progress_bar=False)
    assert (report.encoded, report.features_reused) == (N_PHOTOS, 0)
    cache = next((tmp_path / "idx" / FEATURES_DIR).iterdir())
    assert (cache / FEATURES_FILE).is_file() and not (cache / "parts").exists()

    _no_network(monkeypatch)
    index = ImageIndex(photos, second, tmp_path / "idx")
    report = index.update(show_progress_bar=False)
    assert (report.photos, report.encoded, report.features_reused) == (N_PHOTOS, N_PHOTOS, N_PHOTOS)
    assert "8 features reused" in report.summary()
    assert second._image_side()._network is None
    monkeypatch.undo()
    # The vectors from the stored features are those computed from the photos, eagerly.
    from_scratch = second.encode_images(index.paths)
    assert _cosines(index.embeddings, from_scratch).min() >= 0.9999
    np.testing.assert_allclose(index.embeddings, from_scratch, atol=1e-5)


def test_a_changed_photo_runs_the_network_again_for_that_photo_only(models, photos, data_dir, tmp_path):
    first, second = models
    ImageIndex(photos, first, tmp_path / "idx").update(show_progress_bar=False)
    changed = sorted(photos.iterdir())[0]
    other = sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[N_PHOTOS]
    shutil.copyfile(other, changed)  # new bytes under the old name
    (photos / "gone.jpg").unlink(missing_ok=True)
    sorted(photos.iterdir())[1].unlink()
    index = ImageIndex(photos, second, tmp_path / "idx")
    report = index.update(show_progress_bar=False)
    assert (report.photos, report.encoded, report.features_reused) == (N_PHOTOS - 1, N_PHOTOS - 1, N_PHOTOS - 2)
    np.testing.assert_allclose(index.embeddings, second.encode_images(index.paths), atol=1e-5)
    # The cache now holds the folder as it is: the gone photo's row dropped, the changed one's new.
    cache = next((tmp_path / "idx" / FEATURES_DIR).iterdir())
    with np.load(cache / FEATURES_FILE, allow_pickle=False) as z:
        assert z["embeddings"].shape == (N_PHOTOS - 1, 1280) and z["embeddings"].dtype == np.float32


def test_a_query_on_a_complete_index_builds_no_image_network(models, photos, tmp_path, monkeypatch):
    import grounded_text as gt

    first, _ = models
    built = ImageIndex(photos, first, tmp_path / "idx")
    built.update(show_progress_bar=False)
    expected = built.search("a dog runs on the grass", top_k=3)
    fresh = gt.load("vete_bow_flickr8k")
    _no_network(monkeypatch)
    monkeypatch.setattr(images, "load_image_encoder", lambda *a, **k: pytest.fail("the image tower was loaded"))
    index = ImageIndex(photos, fresh, tmp_path / "idx")
    assert index.search("a dog runs on the grass", top_k=3) == expected
    assert fresh._image_side()._network is None and fresh._image_side()._tower is None


def _tiff(array: np.ndarray, orientation: int = 1) -> bytes:
    exif = Image.Exif()
    if orientation != 1:
        exif[0x0112] = orientation
    out = io.BytesIO()
    Image.fromarray(array).save(out, "TIFF", exif=exif, compression="tiff_lzw")
    return out.getvalue()


def test_tiff_headers_are_read_and_held_to_the_pixel_limit():
    data = _tiff(np.zeros((40, 60, 3), np.uint8), orientation=6)
    header = probe_bytes(data)
    assert (header.format, header.height, header.width, header.orientation) == ("TIFF", 40, 60, 6)
    with pytest.raises(ImageReadError, match="above the limit of 1000"):
        probe_bytes(data, max_pixels=1000)
    with pytest.raises(ImageReadError, match="damaged TIFF header"):
        probe_bytes(data[:40])


def test_tiff_photos_are_decoded_by_pillow_upright_and_indexed(models, photos, data_dir, tmp_path):
    first, _ = models
    src = sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[N_PHOTOS + 1]
    with Image.open(src) as im:
        stored = np.asarray(im.convert("RGB"))
    for name, orientation in [("flat.tif", 1), ("sideways.TIFF", 6)]:
        (photos / name).write_bytes(_tiff(stored, orientation))
    (photos / "broken.tiff").write_bytes(_tiff(stored)[:300])
    # Files that end in NUL bytes (dark pixels stored raw) reach the decoders whole.
    Image.new("RGB", (32, 24)).save(photos / "black.bmp")
    (photos / "black.tif").write_bytes(_tiff(np.zeros((24, 32, 3), np.uint8)))
    # The reference: Pillow's own pixels, turned upright by exif_transpose.
    with Image.open(photos / "sideways.TIFF") as im:
        upright = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
    assert upright.shape == (stored.shape[1], stored.shape[0], 3)
    np.testing.assert_array_equal(images.read_image(photos / "sideways.TIFF"), upright)
    np.testing.assert_array_equal(images.read_image(photos / "flat.tif"), stored)
    assert probe_file(photos / "sideways.TIFF").orientation == 6

    index = ImageIndex(photos, first, tmp_path / "idx")
    report = index.update(show_progress_bar=False)
    assert report.photos == N_PHOTOS + 4 and [rel for rel, _ in report.failed] == ["broken.tiff"]
    rows = {Path(p).name: v for p, v in zip(index.paths, index.embeddings)}
    black = np.zeros((24, 32, 3), np.uint8)
    expected = first.encode_images([upright, stored, black, black])
    np.testing.assert_allclose(np.stack([rows[n] for n in ("sideways.TIFF", "flat.tif", "black.bmp", "black.tif")]),
                               expected, atol=1e-5)


def test_every_unreadable_photo_is_one_clean_line(models, photos, tmp_path):
    first, _ = models
    png = io.BytesIO()
    Image.new("RGB", (4, 4)).save(png, "PNG")
    huge = bytearray(png.getvalue())
    huge[16:24] = (30000).to_bytes(4, "big") + (30000).to_bytes(4, "big")  # IHDR: 30000 x 30000
    huge[29:33] = zlib.crc32(bytes(huge[12:29])).to_bytes(4, "big")  # and its checksum
    jpeg = (sorted(photos.iterdir())[0]).read_bytes()
    bad = {"jxl.jpg": b"\xff\x0a" + b"\x00" * 100, "empty.png": b"", "torn.jpg": jpeg[:len(jpeg) // 3],
           "noise.jpg": b"\xff\xd8\xff" + bytes(range(256)) * 4, "huge.png": bytes(huge),
           "text.webp": b"RIFF....WEBPVP8 not really"}
    for name, data in bad.items():
        (photos / name).write_bytes(data)
    report = ImageIndex(photos, first, tmp_path / "idx").update(show_progress_bar=False)
    reasons = dict(report.failed)
    # The same files as the eager path refuses, photo by photo.
    eager = set()
    for name in bad:
        try:
            images.read_image(photos / name)
        except ImageReadError:
            eager.add(name)
    assert set(reasons) == eager and {"jxl.jpg", "empty.png", "huge.png", "text.webp"} <= eager, reasons
    for name, reason in reasons.items():
        assert reason and "\n" not in reason and len(reason) <= 300, (name, reason)
        assert "{{" not in reason and "[Op:" not in reason and name not in reason, (name, reason)
    assert "JPEG XL" in reasons["jxl.jpg"] and "empty" in reasons["empty.png"]
    assert "above the limit" in reasons["huge.png"]
    assert report.photos == N_PHOTOS + len(bad) - len(eager)


def test_cli_reports_features_reused_in_its_summary_and_json(photos, tmp_path, capsys):
    from grounded_text import cli

    common = ["--images", str(photos), "a dog runs on the grass", "--index", str(tmp_path / "idx"), "--no-progress"]
    assert cli.main(["search", "--model", "vete_bow_flickr8k", *common]) == 0
    assert f"({N_PHOTOS} encoded, 0 reused)" in capsys.readouterr().out
    assert cli.main(["search", "--model", "char_gru_attention_flickr8k", *common, "--json"]) == 0
    captured = capsys.readouterr()
    index = json.loads(captured.out)["index"]
    assert (index["encoded"], index["features_reused"], index["reused"]) == (N_PHOTOS, N_PHOTOS, 0)
    assert f"({N_PHOTOS} encoded, {N_PHOTOS} features reused, 0 reused)" in captured.err


@pytest.mark.slow
def test_benchmark_search_prints_both_rates_their_ratio_and_the_cold_query(data_dir, tmp_path):
    """``benchmark --search`` end to end at the smallest sizes: each phase runs and reports (the
    figures themselves depend on the machine and are not checked)."""
    import os
    import subprocess
    import sys

    out = tmp_path / "search.json"
    env = dict(os.environ, GROUNDED_TEXT_DATA=str(data_dir), TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, "-m", "grounded_text.benchmark", "--search", "--search-photos", "8",
                           "--repeats", "1", "--search-scale", "40", "--json", str(out)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ["features (its loop), photos/s", "search index (wall of update), photos/s",
                  "index / features", "features reused", "import", "index load"]:
        assert label in proc.stdout, (label, proc.stdout)
    report = json.loads(out.read_text())
    speed = report["index_speed"]
    assert speed["photos"] == 8 and speed["index_over_features"]["n"] == 1
    assert speed["index_over_features"]["median"] == pytest.approx(
        speed["index_photos_per_second"]["median"] / speed["features_photos_per_second"]["median"])
    assert report["cold_query"]["encoded"] == 0 and report["cold_query"]["network_built"] is False
    assert report["scale"]["photos"] == 40 and report["scale"]["index_bytes"] > 40 * 512


def test_a_link_planted_in_the_feature_cache_changes_nothing_outside(models, photos, tmp_path):
    first, second = models
    ImageIndex(photos, first, tmp_path / "idx").update(show_progress_bar=False)
    cache = next((tmp_path / "idx" / FEATURES_DIR).iterdir())
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    (cache / "lock").unlink(missing_ok=True)
    (cache / "lock").symlink_to(outside)  # the lock would open and truncate what its name leads to
    index = ImageIndex(photos, second, tmp_path / "idx")
    report = index.update(show_progress_bar=False)
    assert outside.read_text() == "keep me"
    assert (report.encoded, report.features_reused) == (N_PHOTOS, 0)  # the network ran instead
    np.testing.assert_allclose(index.embeddings, second.encode_images(index.paths), atol=1e-5)
