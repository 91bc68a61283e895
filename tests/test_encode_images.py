"""Photos into a model's space: the shipped image network, ``encode_images`` and the pairing of
feature stores with image towers. References are independent: the data root's feature file,
PIL's decoder, and NumPy cosines and ranks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import grounded_text as gt
from grounded_text.shipped import MODEL_FILE, SHIPPED_DIR

SHIPPED = ("vete_bow_flickr8k", "char_gru_attention_flickr8k")
#: Shipped models whose card carries test retrieval figures (``model.json``'s ``retrieval``).
CARDS_WITH_RETRIEVAL = ("char_gru_attention_flickr8k",)


def _shared_rows(data_dir: Path, names: list[str]) -> np.ndarray:
    with np.load(data_dir / "flickr8k" / "features" / "efficientnet_lite0.npz", allow_pickle=False) as z:
        row = {str(i): k for k, i in enumerate(z["ids"])}
        return z["features"][[row[n] for n in names]]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_the_shipped_weights_are_checked_before_they_are_loaded(tmp_path):
    from grounded_text.vision import lite0

    assert lite0.file_sha256(lite0.WEIGHTS_FILE) == lite0.WEIGHTS_SHA256
    damaged = tmp_path / "w.weights.h5"
    data = bytearray(lite0.WEIGHTS_FILE.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    damaged.write_bytes(bytes(data))
    with pytest.raises(lite0.WeightsIntegrityError, match="damaged.*reinstall"):
        lite0.check_weights_file(damaged)
    with pytest.raises(lite0.WeightsIntegrityError, match="missing"):
        lite0.check_weights_file(tmp_path / "absent.weights.h5")


def test_every_checkpoint_array_has_one_keras_home():
    """The layer names map one-to-one onto the checkpoint's modules (what the conversion relies on)."""
    from grounded_text.vision import lite0

    model = lite0.build_lite0()
    names = [lite0.torch_name(layer.name) for layer in model.layers if layer.weights]
    assert None not in names and len(names) == len(set(names)) == 2 + 2 + 16 * 3 * 2 - 2
    # Lite0 has 4,652,008 parameters with its 1280 x 1000 classifier (published): ours lack it
    # and count the BN moving statistics, which are not trained.
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    assert trainable == 4_652_008 - (1280 * 1000 + 1000)


def test_the_network_reproduces_the_shared_features_on_photos_read_as_the_cli_reads_them(data_dir):
    from grounded_text.serving.images import read_image
    from grounded_text.vision.networks import FeatureNetwork

    folder = data_dir / "flickr8k" / "images"
    names = sorted(p.name for p in folder.glob("*.jpg"))[:24]
    net = FeatureNetwork("efficientnet_lite0")  # "imagenet": the shipped weights, offline
    ours = net.features(np.stack([read_image(folder / n) for n in names]).astype(np.float32))
    ref = _shared_rows(data_dir, names)
    assert _cosines(ours, ref).min() >= 0.9999
    assert np.abs(ours - ref).max() < 1e-3


def test_jpegs_are_decoded_as_pil_decodes_them(data_dir):
    """TensorFlow's default (fast) DCT moves pixels by up to 23 levels; features need PIL's."""
    pil = pytest.importorskip("PIL.Image")
    from grounded_text.serving.images import read_image

    for path in sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[:20]:
        with pil.open(path) as im:
            assert np.array_equal(read_image(path), np.asarray(im.convert("RGB")))


@pytest.mark.slow
def test_features_cli_default_reproduces_the_shared_file_offline(data_dir, tmp_path):
    """``grounded-text features --cnn efficientnet_lite0`` with no ``--weights``, on all 1,000
    test photos, without the network where ``unshare`` can take it away."""
    out = tmp_path / "lite0.npz"
    can_unshare = subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    offline = ["unshare", "-n"] if can_unshare else []
    proc = subprocess.run([*offline, sys.executable, "-m", "grounded_text.features", "--images",
                           str(data_dir / "flickr8k" / "images"), "--out", str(out), "--cnn", "efficientnet_lite0",
                           "--no-progress"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with np.load(out, allow_pickle=False) as z:
        ids, rows = [str(i) for i in z["ids"]], z["features"]
        recorded = json.loads(str(z["provenance"]))
    assert len(ids) == 1000
    cos = _cosines(rows, _shared_rows(data_dir, ids))
    print(f"features vs the shared file, 1,000 photos: lowest cosine {cos.min():.7f}, mean {cos.mean():.7f}")
    assert cos.min() >= 0.9999
    from grounded_text.data.provenance import lite0_provenance, store_provenance

    assert recorded == {**lite0_provenance(), "orientation": "exif"}  # no test photo has an EXIF orientation
    assert lite0_provenance() == store_provenance(data_dir / "flickr8k" / "features" / "efficientnet_lite0.npz")


def test_encode_images_takes_paths_pil_images_and_arrays_into_the_text_space(data_dir):
    enc = gt.load("vete_bow_flickr8k")
    paths = sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[:5]
    v = enc.encode_images(paths)
    assert v.shape == (5, enc.dim) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    from grounded_text.serving.images import read_image

    arrays = np.stack([read_image(p) for p in paths])
    np.testing.assert_allclose(enc.encode_images(arrays), v, atol=1e-5)
    np.testing.assert_allclose(enc.encode_images(str(paths[0])), v[0], atol=1e-5)
    pil = pytest.importorskip("PIL.Image")
    with pil.open(paths[1]) as im:
        np.testing.assert_allclose(enc.encode_images(im), v[1], atol=1e-5)
    # The same space as encode: an independent cosine of the two outputs.
    t = enc.encode(["a dog runs"], normalize_embeddings=True)
    np.testing.assert_allclose(enc.similarity(t, v), t @ v.T, atol=1e-5)
    assert enc.encode_images([]).shape == (0, enc.dim)
    # Not normalised: the tower's own output, the feature-file path's.
    from grounded_text.evaluation.encoders import load_image_encoder

    raw = enc.encode_images(paths, normalize_embeddings=False)
    tower = load_image_encoder(enc.image_export)
    np.testing.assert_allclose(raw, tower(_shared_rows(data_dir, [p.name for p in paths])), rtol=1e-3, atol=1e-4)


def test_encode_images_names_a_bad_file_and_a_bad_array(tmp_path):
    from grounded_text.serving.images import ImageReadError

    enc = gt.load("vete_bow_flickr8k")
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(ImageReadError, match="broken.jpg"):
        enc.encode_images([bad])
    with pytest.raises(ImageReadError, match="cannot read"):
        enc.encode_images([tmp_path / "absent.jpg"])
    with pytest.raises(ImageReadError, match=r"images\[1\].*uint8"):
        enc.encode_images([np.zeros((8, 8, 3), np.uint8), np.zeros((8, 8, 3), np.float32)])
    with pytest.raises(TypeError, match="encode_images"):
        enc.encode_images(5)


def test_a_model_without_an_image_tower_says_so(tmp_path):
    import shutil

    from grounded_text import shipped
    from grounded_text.serving.images import NoImageTowerError

    text_only = tmp_path / "model" / "export"
    shutil.copytree(shipped.export_dir("vete_bow_flickr8k"), text_only)
    enc = gt.load(text_only)
    assert enc.encode(["a dog"]).shape == (1, 128)
    with pytest.raises(NoImageTowerError, match="no image tower"):
        enc.encode_images(np.zeros((1, 8, 8, 3), np.uint8))


def test_shipped_image_towers_record_their_network():
    from grounded_text import shipped
    from grounded_text.data.provenance import lite0_provenance
    from grounded_text.serving.images import IMAGE_FEATURES_KEY

    for name in SHIPPED:
        config = json.loads((shipped.image_export_dir(name) / "assets" / "config.json").read_text())
        assert config[IMAGE_FEATURES_KEY] == lite0_provenance(), name


def test_a_store_of_another_network_is_refused_where_it_meets_a_tower(tmp_path):
    from grounded_text.data.provenance import FeaturePairingError, check_pairing, lite0_provenance

    other = dict(lite0_provenance(), cnn="efficientnet_lite0_ra", weights="imagenet:keras-hub preset x")
    with pytest.raises(FeaturePairingError, match="cnn, weights differ"):
        check_pairing(lite0_provenance(), other, "T", "S.npz")
    check_pairing(lite0_provenance(), lite0_provenance(), "T", "S.npz")
    check_pairing(None, other, "T", "S.npz")  # a tower that records nothing: nothing to compare


def _retrieval(sims: np.ndarray, caption_image: np.ndarray) -> dict:
    """Caption→image Recall@K (percent) from a [captions, images] matrix, in plain NumPy."""
    truth = sims[np.arange(len(sims)), caption_image]
    ranks = 1 + (sims > truth[:, None]).sum(1)
    return {k: 100.0 * float((ranks <= k).mean()) for k in (1, 5, 10)}


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_retrieval_from_photos_equals_retrieval_from_the_feature_file(name, data_dir):
    """The 1,000 test photos through ``encode_images`` against their 5,000 captions give
    caption→image R@1 / R@5 / R@10 within 1.0 point of the feature file through the tower."""
    from grounded_text.data.flickr8k import read_flickr8k
    from grounded_text.evaluation.encoders import load_image_encoder

    folder = data_dir / "flickr8k" / "images"
    captions = [c for c in read_flickr8k(data_dir) if c.split == "test"]
    images = sorted({c.image_id for c in captions})
    assert len(images) == 1000 and all((folder / i).is_file() for i in images)
    column = {i: k for k, i in enumerate(images)}
    caption_image = np.array([column[c.image_id] for c in captions])
    enc = gt.load(name)
    text = enc.encode([c.text for c in captions], normalize_embeddings=True)
    from_photos = enc.encode_images([folder / i for i in images], batch_size=50)
    from_file = _unit(load_image_encoder(enc.image_export)(_shared_rows(data_dir, images)))
    a, b = _retrieval(text @ from_photos.T, caption_image), _retrieval(text @ from_file.T, caption_image)
    print(f"{name}: caption->image R@1/5/10 from photos {a[1]:.2f} / {a[5]:.2f} / {a[10]:.2f}, "
          f"from the feature file {b[1]:.2f} / {b[5]:.2f} / {b[10]:.2f}; lowest cosine of the two image "
          f"embeddings {float((from_photos * from_file).sum(1).min()):.6f}")
    for k in (1, 5, 10):
        assert abs(a[k] - b[k]) <= 1.0
    card = json.loads((SHIPPED_DIR / name / MODEL_FILE).read_text()).get("retrieval")
    assert card or name not in CARDS_WITH_RETRIEVAL, f"{name}'s card has no retrieval figures"
    if card:  # the card's figure (the package's evaluator, on the feature file) against the photos'
        print(f"{name}: the card's caption->image R@10 {card['caption→image R@10']['value']:.2f}")
        assert abs(a[10] - card["caption→image R@10"]["value"]) <= 0.5


def test_evaluate_refuses_a_planted_store_of_another_network_in_one_line(data_dir, tmp_path):
    """A feature store made by keras-hub's RandAugment Lite0 (recorded in the store) meets the
    shipped image tower, trained on Google's Lite0: ``evaluate`` stops before any work."""
    from grounded_text import shipped
    from grounded_text.data.provenance import lite0_provenance

    root = tmp_path / "data"
    (root / "flickr8k" / "features").mkdir(parents=True)
    (root / "flickr8k" / "Flickr8k_text").symlink_to(data_dir / "flickr8k" / "Flickr8k_text")
    with np.load(data_dir / "flickr8k" / "features" / "efficientnet_lite0.npz", allow_pickle=False) as z:
        ids, rows = z["ids"], z["features"]
    other = dict(lite0_provenance(), cnn="efficientnet_lite0_ra",
                 weights="imagenet:keras-hub preset efficientnet_lite0_ra_imagenet")
    np.savez(root / "flickr8k" / "features" / "planted.npz", ids=ids, features=rows,
             provenance=np.array(json.dumps(other)))
    proc = subprocess.run([sys.executable, "-m", "grounded_text.evaluate", "--model", "vete_bow_flickr8k",
                           "--image-model", str(shipped.image_export_dir("vete_bow_flickr8k")),
                           "--data-dir", str(root), "--features", "planted", "--sections", "retrieval",
                           "--no-progress"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and "efficientnet_lite0_ra" in errors[0] and "(cnn, weights differ)" in errors[0], lines
    assert "Traceback" not in proc.stderr
