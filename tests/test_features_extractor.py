"""Tests of grounded_text.vision (CNN feature extraction) and the features CLI.

Real Flickr8k photos (224×224 JPEGs under $GROUNDED_TEXT_DATA/flickr8k/images), random
weights (``weights=None``: no internet here). Each network is built once per module.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from grounded_text.data.features import load_npz_features
from grounded_text.vision import crops as crops_lib
from grounded_text.vision import networks as networks_lib
from grounded_text.vision.extractor import (
    extract_features,
    image_folder_dataset,
    list_image_files,
    read_ids_file,
)
from grounded_text.vision.networks import FeatureNetwork, WeightsUnavailableError
from grounded_text.vision.sinks import NpzFeatureSink

# Its tests share a module-scoped fixture: one pytest-xdist worker builds it once (setup.cfg).
pytestmark = pytest.mark.xdist_group("test_features_extractor")

REPO = Path(__file__).resolve().parents[1]
EXPECTED = {  # name: (input px, pooled dim) — keras.applications, include_top=False, avg pool
    "inception_v3": (299, 2048),
    "resnet152": (224, 2048),
    "resnet50": (224, 2048),
    "vgg19": (224, 512),
    "efficientnet_b0": (224, 1280),
}


@pytest.fixture(scope="module")
def nets():
    cache: dict[str, FeatureNetwork] = {}

    def get(name: str) -> FeatureNetwork:
        if name not in cache:
            keras.utils.set_random_seed(1234)
            cache[name] = FeatureNetwork(name, weights=None)
        return cache[name]

    yield get
    cache.clear()
    keras.backend.clear_session()


@pytest.fixture(scope="module")
def photos(data_dir) -> list[Path]:
    folder = data_dir / "flickr8k" / "images"
    files = sorted(folder.glob("*.jpg"))
    if len(files) < 8:
        pytest.skip(f"need real photos in {folder}")
    return files[:8]


def _copy(photos, dst: Path, n: int) -> list[str]:
    dst.mkdir(parents=True, exist_ok=True)
    for p in photos[:n]:
        shutil.copy(p, dst / p.name)
    return [p.name for p in photos[:n]]


class _ListSink:
    """In-memory sink (Contract 1) for tests."""

    def __init__(self, existing=()):
        self.ids, self.rows, self._existing = [], [], set(existing)

    def existing_ids(self):
        return set(self._existing) | set(self.ids)

    def append(self, ids, features):
        assert features.dtype == np.float32
        self.ids += list(ids)
        self.rows += list(features)

    def close(self):
        return None

    def as_dict(self):
        return dict(zip(self.ids, self.rows))


class _CountingNetwork:
    """Wraps a FeatureNetwork and counts the images (crops) it is called on."""

    def __init__(self, net):
        self.net, self.spec, self.input_size, self.dim = net, net.spec, net.input_size, net.dim
        self.images_seen = 0

    def __call__(self, x):
        self.images_seen += int(x.shape[0])
        return self.net(x)


def _decode(path: Path) -> np.ndarray:
    """The extractor decodes JPEGs as PIL does: libjpeg's accurate integer DCT."""
    return tf.io.decode_jpeg(path.read_bytes(), channels=3, dct_method="INTEGER_ACCURATE").numpy()


def _numpy_ten_crops(big: np.ndarray, s: int) -> np.ndarray:
    """Independent reference of the crop boxes: 4 corners + centre, then mirrors."""
    h, w = big.shape[:2]
    cy, cx = (h - s) // 2, (w - s) // 2
    five = [big[:s, :s], big[:s, w - s:], big[h - s:, :s], big[h - s:, w - s:],
            big[cy:cy + s, cx:cx + s]]
    return np.stack(five + [c[:, ::-1] for c in five])


# ---------------------------------------------------------------- crops


def test_ten_crops_equal_numpy_slices_and_mirrors():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, size=(256, 320, 3), dtype=np.uint8)  # short side already 256
    got = crops_lib.ten_crops(tf.constant(img), 224).numpy()
    assert got.shape == (10, 224, 224, 3)
    np.testing.assert_array_equal(got, _numpy_ten_crops(img.astype(np.float32), 224))
    # Explicit boxes, hand-computed: centre starts at ((256-224)//2, (320-224)//2) = (16, 48).
    np.testing.assert_array_equal(got[4], img[16:240, 48:272])
    np.testing.assert_array_equal(got[1], img[0:224, 96:320])
    np.testing.assert_array_equal(got[8], img[32:256, 96:320][:, ::-1])
    assert not np.array_equal(got[0], got[5])


def test_ten_crops_resize_keeps_aspect_ratio():
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, size=(400, 300, 3), dtype=np.uint8)  # portrait
    big = crops_lib.resize_short_side(tf.constant(img), 256).numpy()
    assert big.shape == (341, 256, 3)  # 400 * 256 / 300 = 341.33
    got = crops_lib.ten_crops(tf.constant(img), 224).numpy()
    np.testing.assert_allclose(got, _numpy_ten_crops(big, 224), atol=1e-4)
    # InceptionV3: 299-px crops from a 342-px short side (same 0.875 ratio).
    assert crops_lib.ten_crop_resize(299) == 342 and crops_lib.ten_crop_resize(224) == 256
    assert crops_lib.ten_crops(tf.constant(img), 299).shape == (10, 299, 299, 3)
    single = crops_lib.single_crop(tf.constant(img), 224).numpy()
    assert single.shape == (224, 224, 3) and 0 <= single.min() and single.max() <= 255
    with pytest.raises(ValueError, match="crops must be 1 or 10"):
        crops_lib.make_views(tf.constant(img), 224, 5)


# ---------------------------------------------------------------- networks × crops


# The inner loop keeps the two networks the other tests build anyway (EfficientNet-B0, ResNet-50):
# ResNet-152 alone takes over 20 s on a quiet 2-core machine (built with random weights, then 13
# forward passes), InceptionV3 and VGG19 together about as much.
SLOW_NETWORKS = {"resnet152", "inception_v3", "vgg19"}


@pytest.mark.parametrize("cnn", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_NETWORKS else n
                                 for n in EXPECTED])
def test_every_network_both_crop_modes(cnn, nets, photos):
    net = nets(cnn)
    size, dim = EXPECTED[cnn]
    assert (net.input_size, net.dim) == (size, dim)
    assert net.model.output_shape == (None, dim)
    folder = photos[0].parent
    names = [p.name for p in photos[:3]]
    sink1 = _ListSink()
    rep1 = extract_features(image_folder_dataset(folder, names), sink1, cnn=cnn, crops=1,
                            batch_size=2, progress=False, network=net)
    assert (rep1.written, rep1.failed, rep1.dim) == (3, [], dim)
    f1 = np.stack(sink1.rows)
    assert f1.shape == (3, dim) and f1.dtype == np.float32 and np.isfinite(f1).all()
    assert sorted(sink1.ids) == sorted(names)
    assert not np.allclose(f1[0], f1[1])  # different photos → different features
    sink10 = _ListSink()
    rep10 = extract_features(image_folder_dataset(folder, names[:1]), sink10, cnn=cnn,
                             crops=10, batch_size=1, progress=False, network=net)
    assert rep10.written == 1 and sink10.rows[0].shape == (dim,)
    assert np.isfinite(sink10.rows[0]).all()
    # Ten-crop features are not the single-crop features of the same photo.
    assert not np.allclose(sink10.rows[0], sink1.as_dict()[names[0]])


def test_ten_crop_feature_is_mean_of_crop_features(nets, photos):
    net = nets("efficientnet_b0")
    names = [p.name for p in photos[:2]]
    sink = _ListSink()
    extract_features(image_folder_dataset(photos[0].parent, names), sink,
                     cnn="efficientnet_b0", crops=10, batch_size=2, progress=False, network=net)
    got = sink.as_dict()
    for p in photos[:2]:
        img = _decode(p)  # 224×224 → short side 256 → 256×256
        big = tf.image.resize(img.astype(np.float32), (256, 256), antialias=True).numpy()
        views = _numpy_ten_crops(np.clip(big, 0, 255), 224)
        x = keras.applications.efficientnet.preprocess_input(views)
        ref = net.model(x, training=False).numpy().mean(axis=0)
        np.testing.assert_allclose(got[p.name], ref, rtol=1e-4, atol=1e-4)


def test_store_loads_and_rows_match_direct_model_call(nets, photos, tmp_path):
    net = nets("resnet50")  # "caffe" preprocessing: checks the network's own scaling.
    folder = tmp_path / "imgs"
    names = _copy(photos, folder, 4)
    sink = NpzFeatureSink(tmp_path / "out" / "feats.npz")
    extract_features(image_folder_dataset(folder), sink, cnn="resnet50", crops=1,
                     batch_size=3, progress=False, network=net)
    path = sink.close()
    assert not (tmp_path / "out" / "feats.npz.parts").exists()
    store = load_npz_features(path)
    assert sorted(store.ids.tolist()) == sorted(names) and store.features.shape == (4, 2048)
    row = store.index()[names[2]]
    img = tf.image.resize(_decode(folder / names[2]).astype(np.float32), (224, 224),
                          antialias=True).numpy()
    x = keras.applications.resnet50.preprocess_input(np.clip(img, 0, 255)[None].copy())
    ref = net.model(x, training=False).numpy()[0]
    np.testing.assert_allclose(store.features[row], ref, rtol=1e-4, atol=1e-4)
    other = store.index()[names[0]]
    assert not np.allclose(store.features[other], ref)


# ---------------------------------------------------------------- resume / durability


def test_resume_computes_only_missing_ids(nets, photos, tmp_path):
    net = nets("efficientnet_b0")
    folder = tmp_path / "imgs"
    names = _copy(photos, folder, 5)
    store = tmp_path / "f.npz"
    first = NpzFeatureSink(store)
    extract_features(image_folder_dataset(folder, names[:2]), first, cnn="efficientnet_b0",
                     progress=False, network=net)
    del first  # "interrupted": never closed, only the part files exist
    assert not store.exists() and (tmp_path / "f.npz.parts").is_dir()
    counting = _CountingNetwork(net)
    sink = NpzFeatureSink(store)
    assert sink.existing_ids() == set(names[:2])
    rep = extract_features(image_folder_dataset(folder), sink, cnn="efficientnet_b0",
                           batch_size=2, progress=False, network=counting)
    assert (rep.written, rep.skipped_existing) == (3, 2)
    assert counting.images_seen == 3
    resumed = load_npz_features(sink.close())
    full = _ListSink()
    extract_features(image_folder_dataset(folder), full, cnn="efficientnet_b0",
                     progress=False, network=net)
    ref = full.as_dict()
    assert sorted(resumed.ids.tolist()) == sorted(names)
    for i, image_id in enumerate(resumed.ids.tolist()):
        np.testing.assert_allclose(resumed.features[i], ref[image_id], rtol=1e-4, atol=1e-4)
    # A third run has nothing to do and builds nothing.
    again = NpzFeatureSink(store)
    rep = extract_features(image_folder_dataset(folder), again, cnn="efficientnet_b0",
                           progress=False, network=counting)
    assert (rep.written, rep.skipped_existing, counting.images_seen) == (0, 5, 3)


def test_npz_sink_survives_sigkill(tmp_path):
    store = tmp_path / "k.npz"
    script = textwrap.dedent(f"""
        import os, signal, numpy as np
        from grounded_text.vision.sinks import NpzFeatureSink
        s = NpzFeatureSink({str(store)!r})
        s.append(np.array(["a.jpg", "b.jpg"]), np.ones((2, 3), np.float32))
        s.append(np.array(["c.jpg"]), np.full((1, 3), 2, np.float32))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == -9
    sink = NpzFeatureSink(store)
    assert sink.existing_ids() == {"a.jpg", "b.jpg", "c.jpg"} and sink.dim == 3
    sink.append(np.array(["d.jpg"]), np.zeros((1, 3), np.float32))
    loaded = load_npz_features(sink.close())
    assert loaded.ids.tolist() == ["a.jpg", "b.jpg", "c.jpg", "d.jpg"]
    np.testing.assert_array_equal(loaded.features[:, 0], [1, 1, 2, 0])
    with pytest.raises(ValueError, match="dimension 4 differs"):
        NpzFeatureSink(store).append(np.array(["e.jpg"]), np.zeros((1, 4), np.float32))
    with pytest.raises(ValueError, match="already stored"):
        NpzFeatureSink(store).append(np.array(["a.jpg"]), np.zeros((1, 3), np.float32))
    with pytest.raises(ValueError, match="non-finite"):
        NpzFeatureSink(store).append(np.array(["z.jpg"]), np.full((1, 3), np.nan, np.float32))
    with pytest.raises(ValueError, match="must end in .npz"):
        NpzFeatureSink(tmp_path / "x.h5")


# ---------------------------------------------------------------- bad images, CLI


def test_corrupt_and_non_image_files_reported_and_skipped(nets, photos, tmp_path, capsys,
                                                         monkeypatch):
    from grounded_text import features as cli
    from grounded_text.vision import extractor

    built = []

    def reuse(cnn, weights, mixed_precision):  # the CLI's network, built once per module
        built.append((cnn, weights, mixed_precision))
        return nets(cnn)

    monkeypatch.setattr(extractor, "FeatureNetwork", reuse)

    folder = tmp_path / "imgs"
    good = _copy(photos, folder, 3)
    data = photos[3].read_bytes()
    (folder / "truncated.jpg").write_bytes(data[: len(data) // 2])
    (folder / "notes.jpg").write_text("this is not an image\n")
    (folder / "empty.png").write_bytes(b"")
    (folder / "README.txt").write_text("ignored: not an image extension")
    out = tmp_path / "s.npz"
    rc = cli.main(["--images", str(folder), "--out", str(out), "--cnn", "efficientnet_b0",
                   "--weights", "none", "--batch-size", "2", "--no-progress"])
    assert rc == 0 and built == [("efficientnet_b0", "none", False)]
    captured = capsys.readouterr()
    err = captured.err
    assert "wrote 3" in captured.out and "3 failed" in captured.out
    for bad, why in [("truncated.jpg", "jpeg"), ("notes.jpg", "Unknown image file format"),
                     ("empty.png", "empty")]:
        line = next((ln for ln in err.splitlines() if ln.startswith(f"FAILED {bad}:")), None)
        assert line is not None and why.lower() in line.lower(), err
    store = load_npz_features(out)
    assert sorted(store.ids.tolist()) == sorted(good)


def test_library_report_lists_failures(nets, photos, tmp_path):
    folder = tmp_path / "imgs"
    _copy(photos, folder, 2)
    (folder / "bad.jpg").write_bytes(b"\xff\xd8\xff\xe0garbage")
    rep = extract_features(image_folder_dataset(folder), _ListSink(), cnn="efficientnet_b0",
                           progress=False, network=nets("efficientnet_b0"))
    assert rep.written == 2 and [i for i, _ in rep.failed] == ["bad.jpg"]
    assert rep.failed[0][1] and "FAILED bad.jpg" in rep.summary()


def test_bad_arguments_give_clear_errors(photos, tmp_path, capsys):
    from grounded_text import features as cli

    with pytest.raises(ValueError, match="Unknown --cnn 'alexnet'"):
        FeatureNetwork("alexnet", weights=None)
    ds = image_folder_dataset(photos[0].parent, [photos[0].name])
    with pytest.raises(ValueError, match="crops must be 1 or 10"):
        extract_features(ds, _ListSink(), cnn="efficientnet_b0", crops=5, weights=None)
    with pytest.raises(ValueError, match="element_spec"):
        extract_features(tf.data.Dataset.from_tensor_slices([b"x"]), _ListSink(),
                         cnn="efficientnet_b0", weights=None)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        list_image_files(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no image files"):
        list_image_files(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="1 of 2 requested"):
        list_image_files(photos[0].parent, [photos[0].name, "nope.jpg"])
    with pytest.raises(FileNotFoundError, match="no such file"):
        FeatureNetwork("efficientnet_b0", weights=str(tmp_path / "none.weights.h5"))
    assert cli.main(["--images", str(tmp_path / "empty"), "--out", str(tmp_path / "o.npz"),
                     "--weights", "none"]) == 2
    assert "no image files" in capsys.readouterr().err
    for bad in (["--crops", "5"], ["--cnn", "alexnet"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(["--images", str(tmp_path), "--out", str(tmp_path / "o.npz"), *bad])
        assert exc.value.code == 2
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text("a.jpg#0\tA dog runs .\na.jpg#1\tA dog .\n\nb.jpg\n")
    assert read_ids_file(ids_file) == ["a.jpg", "b.jpg"]


# ---------------------------------------------------------------- weights


def test_imagenet_offline_fails_fast(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))

    def blocked(*args, **kwargs):
        raise OSError("network unreachable (sockets blocked by the test)")

    monkeypatch.setattr(socket, "create_connection", blocked)
    monkeypatch.setattr(socket.socket, "connect", blocked)
    start = time.perf_counter()
    with pytest.raises(WeightsUnavailableError) as exc:
        FeatureNetwork("efficientnet_b0", weights="imagenet")
    assert time.perf_counter() - start < 30  # hang guard, not a benchmark
    msg = str(exc.value)
    expected = tmp_path / "keras_home" / "models" / "efficientnetb0_notop.h5"
    assert str(expected) in msg and "--weights none" in msg and "offline" in msg
    # A cached checkpoint is used without touching the network.
    expected.parent.mkdir(parents=True)
    expected.write_bytes(b"stub")
    spec = networks_lib.get_spec("efficientnet_b0")
    assert networks_lib.imagenet_weights_path(spec) == expected


# Saves VGG19's weights (80 MB) and builds EfficientNet-B0 twice: over 20 s on a quiet 2-core machine.
@pytest.mark.slow
def test_weights_file_round_trip(nets, photos, tmp_path):
    net = nets("efficientnet_b0")
    path = tmp_path / "effb0.weights.h5"
    net.model.save_weights(path)
    loaded = FeatureNetwork("efficientnet_b0", weights=str(path))
    x = crops_lib.single_crop(tf.constant(_decode(photos[0])), 224)[None]
    np.testing.assert_allclose(loaded.features(x), net.features(x), rtol=1e-5, atol=1e-5)
    vgg_path = tmp_path / "vgg.weights.h5"
    nets("vgg19").model.save_weights(vgg_path)
    with pytest.raises(ValueError, match="does not fit efficientnet_b0"):
        FeatureNetwork("efficientnet_b0", weights=str(vgg_path))
    # Mixed precision: float16 compute, float32 output, close to the float32 model.
    mixed = FeatureNetwork("efficientnet_b0", weights=str(path), mixed_precision=True)
    assert keras.mixed_precision.global_policy().name == "float32"
    out = mixed(x)
    assert out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy(), net.features(x), rtol=0.1, atol=0.05)
