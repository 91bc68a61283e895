"""Same-image sampler (VETE §4.3) and the COCO captions reader."""

import json

import numpy as np
import pytest

from grounded_text.evaluation.same_image import (
    CaptionedImages,
    evaluate_same_image,
    read_coco_captioned_images,
    sample_same_image_pairs,
)

IMAGES = [f"img{i}" for i in np.repeat(np.arange(40), 5)] + ["lonely"]


def test_sampler_never_self_pairs_labels_correct_and_unique():
    p = sample_same_image_pairs(IMAGES, 300, seed=3)
    assert p.first.size == p.second.size == p.labels.size == 600
    assert (p.first != p.second).all() and (p.first < p.second).all()
    same = np.array([IMAGES[i] == IMAGES[j] for i, j in zip(p.first, p.second)])
    np.testing.assert_array_equal(same, p.labels == 1)
    assert p.labels.sum() == 300
    assert len(set(zip(p.first.tolist(), p.second.tolist()))) == 600


def test_sampler_reproducible_by_seed():
    a, b, c = (sample_same_image_pairs(IMAGES, 100, seed=s) for s in (7, 7, 8))
    np.testing.assert_array_equal(a.first, b.first)
    np.testing.assert_array_equal(a.second, b.second)
    assert not np.array_equal(a.first, c.first)


def test_sampler_limits():
    assert sample_same_image_pairs(IMAGES, 400, seed=0).labels.sum() == 400  # 40 images x 10 pairs: all of them
    with pytest.raises(ValueError, match="Only 400 same-image"):
        sample_same_image_pairs(IMAGES, 401)
    with pytest.raises(ValueError, match="two images"):
        sample_same_image_pairs(["x"] * 5, 2)


def test_evaluate_same_image_perfect_encoder():
    data = CaptionedImages([f"{im} caption {k}" for k, im in enumerate(IMAGES)], IMAGES, "toy")
    vecs = {im: np.random.default_rng(i).normal(size=16) for i, im in enumerate(dict.fromkeys(IMAGES))}
    enc = lambda sents: np.stack([vecs[s.split()[0]] for s in sents])  # noqa: E731  (one vector per image)
    r = evaluate_same_image(enc, data, n=100, seed=0)
    assert r["mean_cosine_same"] == pytest.approx(1.0)
    assert r["pearson"] > 0.9 and r["n"] == 200 and r["name"] == "toy"


def test_read_coco_captioned_images_fixture(tmp_path):
    doc = {
        "images": [{"id": 1, "file_name": "COCO_val2014_000000000001.jpg"}, {"id": 2, "file_name": "b.jpg"}],
        "annotations": [
            {"image_id": 1, "id": 10, "caption": "A man riding a horse. "},
            {"image_id": 2, "id": 11, "caption": "Two dogs."},
            {"image_id": 1, "id": 12, "caption": "A rider on a brown horse"},
            {"image_id": 3, "id": 13, "caption": "  "},
            {"image_id": 3, "id": 14, "caption": "An image not in the images list"},
        ],
    }
    path = tmp_path / "annotations" / "captions_val2014.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    d = read_coco_captioned_images(path)
    assert d.name == "coco/captions_val2014"
    assert d.captions == ["A man riding a horse.", "Two dogs.", "A rider on a brown horse",
                          "An image not in the images list"]
    assert d.image_ids == ["COCO_val2014_000000000001.jpg", "b.jpg", "COCO_val2014_000000000001.jpg", "3"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"annotations": [{"id": 1, "caption": "x"}]}))
    with pytest.raises(ValueError, match="annotation 0"):
        read_coco_captioned_images(bad)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_coco_captioned_images(bad)
    with pytest.raises(FileNotFoundError):
        read_coco_captioned_images(tmp_path / "missing.json")


def test_coco_retrieval_fixture_order_folds_and_missing_features(tmp_path):
    from grounded_text.evaluation.retrieval import evaluate_retrieval
    from grounded_text.evaluation.suite import EncoderSpec, coco_retrieval

    rng = np.random.default_rng(0)
    n = 10
    # The images list order (reversed ids) defines the folds, not the annotation order.
    images = [{"id": i, "file_name": f"im{i}.jpg"} for i in reversed(range(n))]
    images.append({"id": 99, "file_name": "nofeat.jpg"})
    anns = [{"image_id": i, "id": 100 * i + k, "caption": f"w{i} cap{k}"} for i in range(n) for k in range(2)]
    anns.append({"image_id": 99, "id": 9999, "caption": "w0 lost"})
    path = tmp_path / "captions_test.json"
    path.write_text(json.dumps({"images": images, "annotations": anns}))
    feats = rng.normal(size=(n, 4)).astype(np.float32)
    np.savez(tmp_path / "f.npz", ids=np.array([f"im{i}.jpg" for i in range(n)]), features=feats)
    word_vec = {f"w{i}": feats[i] + 0.8 * rng.normal(size=4) for i in range(n)}
    text = lambda sents: np.stack([word_vec[s.split()[0]] for s in sents])  # noqa: E731
    spec = EncoderSpec("toy", "hub", text, lambda x: np.asarray(x))
    with pytest.warns(UserWarning, match="1 image"):
        r = coco_retrieval(spec, path, tmp_path / "f.npz", protocol="all", n_folds=5)
    assert r["n_images"] == 10 and r["n_captions"] == 20 and r["dropped_images"] == 1
    order = list(reversed(range(n)))
    caps = [f"w{i} cap{k}" for i in range(n) for k in range(2)]
    cap_img = np.array([order.index(i) for i in range(n) for _ in range(2)])
    ref = evaluate_retrieval(text(caps), feats[order], cap_img, "all", n_folds=5)
    assert r["caption_to_image"] == ref["caption_to_image"] and r["image_to_caption"] == ref["image_to_caption"]


def test_evaluate_same_image_intervals_match_scipy():
    from scipy import stats as sps

    data = CaptionedImages([f"{im} caption {k}" for k, im in enumerate(IMAGES)], IMAGES, "toy")
    rng = np.random.default_rng(7)
    vecs = {s: rng.normal(size=8) for s in data.captions}
    base = {im: rng.normal(size=8) for im in dict.fromkeys(IMAGES)}
    enc = lambda sents: np.stack([base[s.split()[0]] + 2 * vecs[s] for s in sents])  # noqa: E731
    r = evaluate_same_image(enc, data, n=60, seed=1)
    pairs = sample_same_image_pairs(data.image_ids, 60, 1)
    e = enc(list(data.captions))
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    sims = (e[pairs.first] * e[pairs.second]).sum(1)
    ref = sps.pearsonr(sims, pairs.labels.astype(float))
    assert r["pearson"] == pytest.approx(ref.statistic)
    ci = ref.confidence_interval(0.95)
    assert r["pearson_ci95"] == pytest.approx([ci.low, ci.high])
    rho = sps.spearmanr(sims, pairs.labels)[0]
    half = 1.959964 * np.sqrt((1 + rho ** 2 / 2) / (120 - 3))  # Bonett & Wright (2000)
    expected = np.tanh([np.arctanh(rho) - half, np.arctanh(rho) + half])
    assert r["spearman_ci95"] == pytest.approx(expected, rel=1e-5)
