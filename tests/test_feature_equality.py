"""``grounded-text features`` (``grounded_text.features``: ``tf.data`` reading and decoding in a
parallel ``map``, out of order, batched and prefetched, the network called on a batch) gives the
same features as a plain reference written here from the documented rules: each file decoded on
its own with ``tf.io.decode_jpeg`` (the accurate integer DCT, as PIL and the extractor decode),
resized as ``grounded_text.vision.crops`` documents (crops=1:
the whole image to S×S, bilinear with antialiasing, aspect ratio not kept, clipped to [0, 255];
crops=10: short side to R = round(S * 256 / 224), the four corners and the centre, then their
mirrors, features averaged), and the network called on one image (one crop) at a time.

Photos: real Flickr8k test photos (224×224 JPEGs under ``$GROUNDED_TEXT_DATA/flickr8k/images``)
as they are, plus copies of them cut or rescaled to other sizes (so the resize does something
for crops=1 too) and one made grey; without the data, smooth synthetic JPEGs of the same sizes.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from grounded_text import features as cli
from grounded_text.data.features import load_npz_features
from grounded_text.vision import extractor
from grounded_text.vision.networks import FeatureNetwork, get_spec

pytestmark = pytest.mark.xdist_group("test_feature_equality")

REPO = Path(__file__).resolve().parents[1]
SIZE = 224  # the input size of efficientnet_b0, the network both tests use
# (height, width) of the derived images: portrait, landscape, a small one blown up, a thin one.
SHAPES = [(150, 224), (250, 333), (97, 181), (224, 90)]


def _real_photos() -> list[Path]:
    env = os.environ.get("GROUNDED_TEXT_DATA")
    root = Path(env) if env else REPO.parent / "shared" / "data"
    return sorted((root / "flickr8k" / "images").glob("*.jpg"))[:4]


def _jpeg(pixels: np.ndarray) -> bytes:
    return tf.io.encode_jpeg(tf.constant(pixels, tf.uint8), quality=92).numpy()


@pytest.fixture(scope="module")
def photo_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("photos")
    real = _real_photos()
    if real:
        bases = [tf.io.decode_jpeg(p.read_bytes(), channels=3, dct_method="INTEGER_ACCURATE").numpy() for p in real]
        for p in real:
            (folder / p.name).write_bytes(p.read_bytes())  # the photos as they are
    else:  # smooth random images (upsampled noise), not photos, but JPEG-coded the same way
        rng = np.random.default_rng(0)
        bases = [np.clip(tf.image.resize(rng.random((12, 12, 3)) * 255, (SIZE, SIZE)).numpy(), 0, 255)
                 .astype(np.uint8) for _ in range(4)]
        for k, base in enumerate(bases):
            (folder / f"synthetic_{k}.jpg").write_bytes(_jpeg(base))
    for k, (h, w) in enumerate(SHAPES):  # cut (portrait) or rescaled copies: other sizes
        base = bases[k % len(bases)]
        if h <= base.shape[0] and w <= base.shape[1]:
            pixels = base[:h, base.shape[1] - w:]
        else:
            pixels = np.clip(tf.image.resize(base.astype(np.float32), (h, w)).numpy().round(), 0, 255)
        (folder / f"derived_{k}_{h}x{w}.jpg").write_bytes(_jpeg(pixels.astype(np.uint8)))
    grey = tf.image.rgb_to_grayscale(bases[0]).numpy()  # a one-channel JPEG: decoded to 3 channels
    (folder / "derived_grey.jpg").write_bytes(_jpeg(grey))
    return folder


def reference_views(path: Path, size: int, crops: int) -> np.ndarray:
    """The documented views of one file, [views, S, S, 3] float32, built without the package."""
    image = tf.cast(tf.io.decode_jpeg(path.read_bytes(), channels=3, dct_method="INTEGER_ACCURATE"), tf.float32)
    if crops == 1:
        return np.clip(tf.image.resize(image, (size, size), method="bilinear", antialias=True).numpy(),
                       0, 255)[None]
    short = round(size * 256 / 224)
    h, w = image.shape[:2]
    new_h, new_w = (max(round(side * short / min(h, w)), short) for side in (h, w))
    big = np.clip(tf.image.resize(image, (new_h, new_w), method="bilinear", antialias=True).numpy(), 0, 255)
    cy, cx = (new_h - size) // 2, (new_w - size) // 2
    five = [big[:size, :size], big[:size, -size:], big[-size:, :size], big[-size:, -size:],
            big[cy:cy + size, cx:cx + size]]
    return np.stack(five + [v[:, ::-1] for v in five])


def reference_features(folder: Path, size: int, crops: int, one_image) -> dict[str, np.ndarray]:
    """``{file name: features}``: every file on its own, every view through the network alone."""
    out = {}
    for path in sorted(folder.iterdir()):
        views = reference_views(path, size, crops)
        out[path.name] = np.mean([one_image(v[None])[0] for v in views], axis=0)
    return out


def extract(folder: Path, out: Path, crops: int, batch_size: int, weights: str = "none") -> dict[str, np.ndarray]:
    """The ``features`` command's pipeline, in this process; ``{id: row}`` of its store."""
    rc = cli.main(["--images", str(folder), "--out", str(out), "--cnn", "efficientnet_b0", "--weights", weights,
                   "--crops", str(crops), "--batch-size", str(batch_size), "--no-progress"])
    assert rc == 0
    store = load_npz_features(out)
    assert store.features.dtype == np.float32
    return dict(zip(store.ids.tolist(), store.features))


class PooledGrid:
    """A stand-in for the CNN with the extractor's network contract: each image's 16×16-pixel
    block means, scaled to [0, 1] and squared ([14, 14, 3] → 588 numbers). Every number depends on
    where pixels are, so another resize, crop box or mirror changes the features; no number
    mixes two images, so batching cannot change them."""

    spec, input_size = get_spec("efficientnet_b0"), SIZE
    dim = (SIZE // 16) ** 2 * 3

    def __call__(self, images):
        pooled = tf.nn.avg_pool2d(tf.cast(images, tf.float32) / 255.0, 16, 16, "VALID")
        return tf.reshape(pooled * pooled, [tf.shape(images)[0], self.dim])


def _max_abs_difference(got: dict, expected: dict) -> float:
    assert sorted(got) == sorted(expected)  # every file, each under its own id
    return max(float(np.max(np.abs(got[k] - expected[k]))) for k in expected)


@pytest.mark.parametrize("crops", [1, 10])
def test_the_command_gives_the_reference_features_of_a_stand_in_network(photo_folder, tmp_path, monkeypatch,
                                                                        crops):
    monkeypatch.setattr(extractor, "FeatureNetwork", lambda *a, **k: PooledGrid())
    net = PooledGrid()
    expected = reference_features(photo_folder, SIZE, crops, lambda x: net(x).numpy())
    got = extract(photo_folder, tmp_path / "f.npz", crops, batch_size=3)  # 9 photos: batches of 3, 3, 3
    assert _max_abs_difference(got, expected) <= 1e-6


PLANTED = {  # plausible slips in the pipeline's resizing
    1: ("single_crop", lambda image, size: tf.image.resize(tf.cast(image, tf.float32), (size, size),
                                                           method="nearest")),
    10: ("ten_crop_resize", lambda size: 240),  # short side 240 instead of 256 before the crops
}


@pytest.mark.parametrize("crops", [1, 10])
def test_a_planted_resize_change_is_caught(photo_folder, tmp_path, monkeypatch, crops):
    """The comparison can fail: the pipeline with nearest-neighbour instead of antialiased
    bilinear resizing (crops=1), or ten crops from a resize to 240 instead of 256, is far from
    the reference (measured: 0.021 and 0.22, on features in [0, 1])."""
    from grounded_text.vision import crops as crops_lib

    monkeypatch.setattr(extractor, "FeatureNetwork", lambda *a, **k: PooledGrid())
    monkeypatch.setattr(crops_lib, *PLANTED[crops])
    net = PooledGrid()
    expected = reference_features(photo_folder, SIZE, crops, lambda x: net(x).numpy())
    assert _max_abs_difference(extract(photo_folder, tmp_path / "f.npz", crops, batch_size=3), expected) > 1e-3


# Building efficientnet_b0 and 9 + 9 x 10 forward passes: over 20 s on a quiet 2-core machine.
@pytest.mark.slow
def test_the_command_gives_the_reference_features_of_a_real_network(photo_folder, tmp_path, monkeypatch):
    """efficientnet_b0 (random weights, offline: the same architecture and arithmetic as with
    ImageNet weights). The command's network, kept, is then called through its Keras model on
    one image at a time. With random weights its features are small (largest |feature| about
    3e-5), so an absolute 1e-6 would hold for any features at all: the bound is relative to the
    largest feature instead. Batching changes the float32 convolutions' order of summation
    (oneDNN blocks a batch differently from a single image): measured 1.9e-7 (crops=1) and
    1.1e-7 (crops=10) of the largest feature, 9 Flickr8k-derived photos, batch 4."""
    built = []

    def keep(*args, **kwargs):
        built.append(FeatureNetwork(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(extractor, "FeatureNetwork", keep)
    for crops in (1, 10):
        got = extract(photo_folder, tmp_path / f"f{crops}.npz", crops, batch_size=4)
        net = built[-1]  # the network the command built and ran

        def one_image(x, net=net):
            return net.model(net.spec.preprocess(tf.constant(x, tf.float32)), training=False).numpy()

        expected = reference_features(photo_folder, SIZE, crops, one_image)
        scale = max(float(np.max(np.abs(v))) for v in expected.values())
        difference = _max_abs_difference(got, expected)
        assert scale > 0 and difference <= 1e-6 * scale, (crops, difference, scale)
