"""How a photo enters: its header is read first (format, size, EXIF orientation), then it is decoded
and turned upright, the same way for ``encode_images`` (paths, bytes, PIL images), ``features``,
``search`` and its contact sheet.

References are independent: Pillow's ``ImageOps.exif_transpose`` for the orientation, NumPy for the
cosines, files made here with known content (a real Flickr8k photo re-saved sideways, sparse files,
a JPEG whose header declares another size).
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image, ImageOps

import grounded_text as gt
from grounded_text import features as features_cli
from grounded_text.data.provenance import lite0_provenance, read_npz_provenance
from grounded_text.photos.contact_sheet import save_grid
from grounded_text.photos.index import ImageIndex, index_folder
from grounded_text.serving.images import read_image
from grounded_text.vision import crops
from grounded_text.vision.extractor import extract_features, image_folder_dataset
from grounded_text.vision.networks import get_spec
from grounded_text.vision.photo_header import ORIENTATION_TAG, ImageReadError, orient_pil, probe_bytes, probe_file
from grounded_text.vision.sinks import NpzFeatureSink

SIDEWAYS = 6  # what a phone held upright writes: the stored pixels are turned 90° anticlockwise


def _cos(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _with_orientation(image: Image.Image, fmt: str, orientation: int, **kwargs) -> bytes:
    exif = Image.Exif()
    exif[ORIENTATION_TAG] = orientation
    buf = io.BytesIO()
    image.save(buf, fmt, exif=exif.tobytes(), **kwargs)
    return buf.getvalue()


def _upright_and_sideways(data_dir, folder):
    """A real test photo copied as ``upright.jpg``, and its pixels stored turned 90° anticlockwise
    with ``Orientation = 6`` as ``sideways.jpg``, as a phone stores a portrait photo: JPEG at quality
    100 without chroma subsampling, near what a lossless rotation keeps (re-saving at quality 95
    alone, upright, moves the shipped model's embedding to cosine 0.9987 of the original's)."""
    src = sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[3]
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, folder / "upright.jpg")
    with Image.open(src) as im:
        stored = im.convert("RGB").transpose(Image.Transpose.ROTATE_90)
    (folder / "sideways.jpg").write_bytes(_with_orientation(stored, "JPEG", SIDEWAYS, quality=100, subsampling=0))
    return folder / "upright.jpg", folder / "sideways.jpg", np.asarray(stored)


# ------------------------------------------------------------------ orientation


@pytest.mark.parametrize("orientation", range(1, 9))
def test_every_orientation_turns_the_pixels_as_pillow_does(tmp_path, orientation):
    pixels = np.random.default_rng(orientation).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    data = _with_orientation(Image.fromarray(pixels), "PNG", orientation)  # lossless: pixels compare exactly
    with Image.open(io.BytesIO(data)) as im:
        reference = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
    assert probe_bytes(data).orientation == orientation
    np.testing.assert_array_equal(crops.orient(tf.constant(pixels), orientation).numpy(), reference)
    np.testing.assert_array_equal(np.asarray(orient_pil(Image.fromarray(pixels), orientation)), reference)
    (tmp_path / "p.png").write_bytes(data)
    np.testing.assert_array_equal(read_image(tmp_path / "p.png"), reference)
    np.testing.assert_array_equal(crops.decode_rgb(tf.constant(data)).numpy(), reference)
    # Inside tf.data (the features pipeline's graph) as well.
    out = next(iter(tf.data.Dataset.from_tensors(data).map(crops.decode_rgb).as_numpy_iterator()))
    np.testing.assert_array_equal(out, reference)


def test_webp_orientation_and_the_headers_of_gif_and_bmp_are_read(tmp_path):
    pixels = np.random.default_rng(0).integers(0, 256, (6, 9, 3), dtype=np.uint8)
    webp = _with_orientation(Image.fromarray(pixels), "WEBP", 8, lossless=True)
    with Image.open(io.BytesIO(webp)) as im:
        reference = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
    assert probe_bytes(webp) == ("WebP", 6, 9, 8) and reference.shape == (9, 6, 3)
    np.testing.assert_array_equal(crops.decode_rgb(tf.constant(webp)).numpy(), reference)
    for fmt in ("GIF", "BMP"):
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, fmt)
        assert probe_bytes(buf.getvalue()) == (fmt, 6, 9, 1)
    with pytest.raises(ImageReadError, match="damaged GIF header"):
        probe_bytes(b"GIF89a\x10\x00")
    with pytest.raises(ImageReadError, match=r"image is 6x9 = 54 pixels, above the limit of 50"):
        probe_bytes(buf.getvalue(), max_pixels=50)


def test_a_sideways_jpeg_decodes_to_pillows_upright_pixels(data_dir, tmp_path):
    _, sideways, stored = _upright_and_sideways(data_dir, tmp_path)
    with Image.open(sideways) as im:
        reference = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
    assert probe_file(sideways).orientation == SIDEWAYS and reference.shape == stored.shape[1::-1] + (3,)
    np.testing.assert_array_equal(read_image(sideways), reference)  # the accurate DCT, as Pillow's


def test_a_sideways_photo_embeds_as_the_upright_one_through_encode_images_features_and_search(data_dir, tmp_path):

    upright, sideways, stored = _upright_and_sideways(data_dir, tmp_path / "photos")
    enc = gt.load("vete_bow_flickr8k")
    up = enc.encode_images(upright)
    as_stored = _cos(up, enc.encode_images(stored))  # what the sideways photo used to give
    with Image.open(sideways) as im:
        ways = {"path": enc.encode_images(sideways), "bytes": enc.encode_images(sideways.read_bytes()),
                "PIL image": enc.encode_images(im)}
    cosines = {k: _cos(up, v) for k, v in ways.items()}
    print(f"encode_images, upright vs sideways: {cosines}; the stored pixels: {as_stored:.3f}")
    assert min(cosines.values()) >= 0.999 and as_stored < 0.9

    class Rows:  # a feature sink held in memory
        ids, rows = [], []

        def existing_ids(self):
            return set(self.ids)

        def append(self, ids, rows):
            self.ids += list(ids)
            self.rows += list(rows)

    sink, network = Rows(), enc._image_side().network()
    report = extract_features(image_folder_dataset(upright.parent), sink, cnn=network.spec.name, network=network,
                              progress=False)
    rows = dict(zip(sink.ids, sink.rows))
    print(f"features, upright vs sideways: {_cos(rows['upright.jpg'], rows['sideways.jpg']):.5f}")
    assert report.written == 2 and _cos(rows["upright.jpg"], rows["sideways.jpg"]) >= 0.999

    index = ImageIndex(upright.parent, enc, index_dir=tmp_path / "idx")
    index.update(show_progress_bar=False)
    vectors = dict(zip(index.paths, index.embeddings))
    print(f"search index, upright vs sideways: {_cos(vectors[str(upright)], vectors[str(sideways)]):.5f}")
    assert _cos(vectors[str(upright)], vectors[str(sideways)]) >= 0.999


def test_the_contact_sheet_shows_the_photo_turned_as_it_was_scored(data_dir, tmp_path):
    _, sideways, stored = _upright_and_sideways(data_dir, tmp_path)
    sheet = np.asarray(Image.open(save_grid([(str(sideways), 0.5)], "q", tmp_path / "g.png", thumb=64)))
    thumb = Image.fromarray(np.asarray(orient_pil(Image.fromarray(stored), SIDEWAYS)))
    thumb.thumbnail((64, 64))
    top, left = 48 + (64 - thumb.height) // 2, 12 + (64 - thumb.width) // 2
    cell = sheet[top:top + thumb.height, left:left + thumb.width, :3].astype(int)
    assert np.abs(cell - np.asarray(thumb).astype(int)).mean() < 3  # JPEG: a few levels at most


# ------------------------------------------------------------------ formats and sizes the guard cannot read


JPEG_XL = {"codestream": b"\xff\x0a" + bytes(range(64)), "container": b"\x00\x00\x00\x0cJXL \r\n\x87\n" + bytes(64)}


@pytest.mark.parametrize("kind", sorted(JPEG_XL))
def test_jpeg_xl_is_refused_by_its_signature(tmp_path, kind, capsys):
    photo = tmp_path / "imgs" / "holiday.jpg"
    photo.parent.mkdir()
    photo.write_bytes(JPEG_XL[kind])
    with pytest.raises(ImageReadError, match=r"holiday\.jpg.*a JPEG XL image: not read here"):
        read_image(photo)
    with pytest.raises(tf.errors.InvalidArgumentError, match="a JPEG XL image"):
        crops.decode_rgb(tf.constant(JPEG_XL[kind]))
    rc = features_cli.main(["--images", str(photo.parent), "--out", str(tmp_path / "s.npz"), "--cnn",
                            "efficientnet_lite0", "--no-progress"])
    assert rc == 0 and "FAILED holiday.jpg: a JPEG XL image: not read here" in capsys.readouterr().err


def _sparse(path, size: int, head: bytes = b"") -> None:
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


def test_a_huge_file_is_refused_from_its_header_and_never_read_whole(tmp_path, monkeypatch):

    folder = tmp_path / "imgs"
    folder.mkdir()
    small = tf.io.encode_jpeg(np.full((224, 224, 3), 90, np.uint8)).numpy()
    (folder / "ok.jpg").write_bytes(small)
    _sparse(folder / "x.jpg", 300 * 2 ** 20)  # zeros: no image at all
    _sparse(folder / "y.jpg", 300 * 2 ** 20, small)  # a real 224x224 JPEG, then 300 MB more
    real_read = Path.read_bytes

    def read_bytes(self):
        assert self.stat().st_size < 2 ** 20, f"{self} read whole"
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    with pytest.raises(ImageReadError, match=r"x\.jpg.*unknown image file format"):
        read_image(folder / "x.jpg")
    with pytest.raises(ImageReadError, match=r"y\.jpg.*the file is 314572800 bytes, far more than a 224x224 image "):
        read_image(folder / "y.jpg")
    # features: the refused files stand in its input as a short placeholder, not their bytes.
    ds = image_folder_dataset(folder)
    lengths = {i.decode(): len(b) for i, b in ds.as_numpy_iterator()}
    assert lengths["ok.jpg"] == len(small) and lengths["x.jpg"] < 1000 and lengths["y.jpg"] < 1000

    class Rows:
        ids = []

        def existing_ids(self):
            return set(self.ids)

        def append(self, ids, rows):
            self.ids += list(ids)

    class Mean:  # the extractor's network contract, without a CNN
        spec, input_size, dim = get_spec("efficientnet_b0"), 8, 3

        def __call__(self, x):
            return tf.reduce_mean(x, axis=[1, 2])

    report = extract_features(ds, Rows(), cnn="efficientnet_b0", network=Mean(), progress=False)
    reasons = dict(report.failed)
    assert report.written == 1 and sorted(reasons) == ["x.jpg", "y.jpg"]
    assert reasons["x.jpg"].startswith("unknown image file format")
    assert "far more than a 224x224 image needs" in reasons["y.jpg"]


# ------------------------------------------------------------------ messages


def test_image_errors_are_one_clean_line_without_tensorflows_decoration(data_dir, tmp_path, capfd):
    photo = sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[0].read_bytes()
    (tmp_path / "head.jpg").write_bytes(photo[:200])  # ends inside its header
    (tmp_path / "half.jpg").write_bytes(photo[:len(photo) // 2])  # ends inside its pixels
    bomb = bytearray(photo)
    sof = bomb.index(b"\xff\xc0")
    bomb[sof + 5:sof + 9] = (10000).to_bytes(2, "big") * 2  # declares 10000x10000
    (tmp_path / "bomb.jpg").write_bytes(bytes(bomb))
    capfd.readouterr()
    messages = {}
    for name in ("head.jpg", "half.jpg", "bomb.jpg"):
        with pytest.raises(ImageReadError) as caught:
            read_image(tmp_path / name)
        messages[name] = str(caught.value)
    for name, text in messages.items():
        assert "\n" not in text and "{{" not in text and "[Op:" not in text and "tf.Tensor" not in text, text
        assert text.startswith(repr(str(tmp_path / name))), text
    assert "image is 10000x10000 = 100000000 pixels, above the limit of 40000000 (decompression-bomb guard)" in \
        messages["bomb.jpg"] and "--max-pixels" not in messages["bomb.jpg"]
    assert "damaged JPEG header" in messages["head.jpg"] and "jpeg::Uncompress failed" in messages["half.jpg"]
    assert "Improper call to JPEG library" not in capfd.readouterr().err  # libjpeg's own line on stderr


# ------------------------------------------------------------------ encode_images' inputs and shapes


def test_encode_images_takes_tensors_and_encoded_bytes_with_the_shapes_of_arrays_and_paths(data_dir):

    enc = gt.load("vete_bow_flickr8k")
    paths = sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[:2]
    pixels = read_image(paths[0])
    one = enc.encode_images(pixels)
    assert one.shape == (enc.dim,)
    np.testing.assert_allclose(enc.encode_images(tf.constant(pixels)), one, atol=1e-6)
    data = [p.read_bytes() for p in paths]
    by_path = enc.encode_images(paths)
    np.testing.assert_allclose(enc.encode_images(data[0]), by_path[0], atol=1e-6)
    np.testing.assert_allclose(enc.encode_images(tf.constant(data[0])), by_path[0], atol=1e-6)
    np.testing.assert_allclose(enc.encode_images(data), by_path, atol=1e-6)
    np.testing.assert_allclose(enc.encode_images([bytearray(data[1])]), by_path[1:], atol=1e-6)
    with pytest.raises(ImageReadError, match=r"images\[0\]: unknown image file format"):
        enc.encode_images(b"not a photo")


# ------------------------------------------------------------------ stores and indexes record it


def test_stores_and_indexes_made_before_photos_were_turned_upright_are_not_mixed(tmp_path, capsys):

    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "a.png").write_bytes(tf.io.encode_png(np.full((20, 30, 3), 7, np.uint8)).numpy())
    base = ["--images", str(folder), "--cnn", "efficientnet_lite0", "--no-progress"]
    assert features_cli.main([*base, "--out", str(tmp_path / "new.npz")]) == 0
    assert read_npz_provenance(tmp_path / "new.npz") == {**lite0_provenance(), "orientation": "exif"}
    old = NpzFeatureSink(tmp_path / "old.npz", provenance=lite0_provenance())  # a store of the earlier reading
    old.append(["b.png"], np.ones((1, 1280), np.float32))
    old.close()
    capsys.readouterr()
    assert features_cli.main([*base, "--out", str(tmp_path / "old.npz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "(orientation differ)" in err[0] and "before photos were turned upright" in err[0]

    side = gt.load("vete_bow_flickr8k")._image_side()
    h = hashlib.sha256(json.dumps(side.record, sort_keys=True).encode())  # the fingerprint without the reading
    for name in ("saved_model.pb", "variables/variables.index", "variables/variables.data-00000-of-00001"):
        if (side.export_dir / name).is_file():
            h.update((side.export_dir / name).read_bytes())
    before = h.hexdigest()[:16]
    assert side.fingerprint != before
    assert index_folder(folder, side.fingerprint, tmp_path) != index_folder(folder, before, tmp_path)
