"""Retrieval metrics against brute-force references (ties included) and a hand-computed 2-fold case."""

import itertools
import statistics

import numpy as np
import pytest

from grounded_text.evaluation.retrieval import (
    caption_to_image_ranks,
    contiguous_folds,
    evaluate_retrieval,
    image_to_caption_ranks,
    rank_metrics,
    retrieval_metrics,
)


def brute_t2i(sims, cap_img):
    ranks = []
    for i, gt in enumerate(cap_img):
        # Sort candidates by decreasing similarity; among ties the ground truth goes last.
        order = sorted(range(sims.shape[1]), key=lambda j: (-sims[i, j], j == gt))
        ranks.append(order.index(gt) + 1)
    return ranks


def brute_i2t(sims, cap_img):
    ranks = []
    for j in range(sims.shape[1]):
        own = {i for i, g in enumerate(cap_img) if g == j}
        order = sorted(range(sims.shape[0]), key=lambda i: (-sims[i, j], i in own))
        # The best-placed own caption; own captions tied with each other are all ground truth.
        ranks.append(min(order.index(i) for i in own) + 1)
    return ranks


def brute_expected_recall(scores, truth, k):
    """Exact P(some ground truth in the top k) under a uniformly random order of ties, by
    enumerating every placement of the tied ground-truth items inside their tie block."""
    scores = np.asarray(scores)
    best = max(scores[i] for i in truth)
    above = sum(1 for s in scores if s > best)
    block = [i for i in range(len(scores)) if scores[i] == best]
    m = sum(1 for i in block if i in truth)
    hits = total = 0
    for slots in itertools.combinations(range(len(block)), m):  # each equally likely
        total += 1
        hits += above + min(slots) + 1 <= k
    return hits / total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranks_and_metrics_match_brute_force_with_ties(seed):
    rng = np.random.default_rng(seed)
    n_img = 30
    cap_img = np.concatenate([np.arange(n_img), rng.integers(0, n_img, size=50)])  # 1..k captions per image
    rng.shuffle(cap_img)
    sims = rng.integers(0, 4, size=(cap_img.size, n_img)).astype(np.float64)  # many ties
    t2i = caption_to_image_ranks(sims, cap_img)
    i2t = image_to_caption_ranks(sims, cap_img)
    ref_t2i, ref_i2t = brute_t2i(sims, cap_img), brute_i2t(sims, cap_img)
    np.testing.assert_array_equal(t2i, ref_t2i)
    np.testing.assert_array_equal(i2t, ref_i2t)
    m = retrieval_metrics(sims, cap_img)
    queries = {"caption_to_image": [(sims[i], {gt}) for i, gt in enumerate(cap_img)],
               "image_to_caption": [(sims[:, j], set(np.flatnonzero(cap_img == j).tolist()))
                                    for j in range(n_img)]}
    for direction, ref in (("caption_to_image", ref_t2i), ("image_to_caption", ref_i2t)):
        for k in (1, 5, 10):
            expected = np.mean([brute_expected_recall(s, truth, k) for s, truth in queries[direction]])
            assert m[direction][f"R@{k}"] == pytest.approx(100 * expected)
            # Never above the optimistic count, never below the pessimistic one.
            assert 100 * np.mean(np.asarray(ref) <= k) - 1e-9 <= m[direction][f"R@{k}"]
        assert m[direction]["medr"] == pytest.approx(statistics.median(ref))
        assert m[direction]["meanr"] == pytest.approx(sum(ref) / len(ref))
    assert m["rsum"] == pytest.approx(sum(m[d][f"R@{k}"] for d in ("caption_to_image", "image_to_caption")
                                          for k in (1, 5, 10)))


def test_ties_are_pessimistic_and_perfect_scores():
    sims = np.zeros((4, 2))
    assert caption_to_image_ranks(sims, np.array([0, 0, 1, 1])).tolist() == [2, 2, 2, 2]
    # Image 0's two captions tie with each other (both ground truth) and with image 1's two.
    assert image_to_caption_ranks(sims, np.array([0, 0, 1, 1])).tolist() == [3, 3]
    sims = np.eye(3)
    m = retrieval_metrics(sims, np.arange(3))
    assert m["caption_to_image"]["R@1"] == 100 and m["image_to_caption"]["medr"] == 1


def test_two_fold_average_against_hand_computation():
    # Fold 1: images i0=(1,0), i1=(0,1); captions c0=(1,0)->i0, c1=(1,.1)->i1.
    # Fold 2: images i2=(1,0), i3=(0,1); captions c2=(0,1)->i2, c3=(0,1)->i3.
    images = np.array([[1, 0], [0, 1], [1, 0], [0, 1]], float)
    caps = np.array([[1, 0], [1, 0.1], [0, 1], [0, 1]], float)
    cap_img = np.array([0, 1, 2, 3])
    r = evaluate_retrieval(caps, images, cap_img, "all", n_folds=2)
    # Caption->image ranks: fold 1 [1, 2], fold 2 [2, 1] -> R@1 50, medr 1.5, meanr 1.5 in both.
    t2i = {k: r["caption_to_image"][k] for k in ("R@1", "R@5", "R@10", "medr", "meanr")}
    assert t2i == pytest.approx({"R@1": 50.0, "R@5": 100.0, "R@10": 100.0, "medr": 1.5, "meanr": 1.5})
    # Image->caption: fold 1 [1, 1]; fold 2 [2 (tie with c3, counted against), 2]; R@1 in fold 2
    # is the expected recall of a random tie order, 50 %.
    assert r["image_to_caption"]["R@1"] == 75.0 and r["image_to_caption"]["meanr"] == 1.5
    assert r["n_folds"] == 2 and r["n_images"] == 4 and r["n_captions"] == 4 and len(r["folds"]) == 2
    # One fold over all four images gives different (worse) ranks: images 0/2 and 1/3 are
    # duplicates, so every ground truth ties with one other image: ranks [2, 4, 4, 2].
    one = evaluate_retrieval(caps, images, cap_img, "all")
    assert one["caption_to_image"]["meanr"] == pytest.approx((2 + 4 + 4 + 2) / 4)


def test_coco_protocols_use_contiguous_folds_and_need_5000_images():
    rng = np.random.default_rng(0)
    n_img, dim = 5000, 8
    images = rng.normal(size=(n_img, dim))
    cap_img = np.repeat(np.arange(n_img), 2)
    caps = images[cap_img] + rng.normal(scale=2.0, size=(cap_img.size, dim))
    r = evaluate_retrieval(caps, images, cap_img, "coco_5fold_1k")
    assert r["protocol"] == "coco_5fold_1k" and r["n_folds"] == 5
    # Fold 3 = images 2000..2999 and their captions, scored alone.
    norm = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    rows = np.flatnonzero((cap_img >= 2000) & (cap_img < 3000))
    fold3 = retrieval_metrics(norm(caps[rows]) @ norm(images[2000:3000]).T, cap_img[rows] - 2000)
    for k in ("R@1", "R@10", "medr", "meanr"):
        assert r["folds"][2]["caption_to_image"][k] == pytest.approx(fold3["caption_to_image"][k], abs=1e-9)
    mean_r1 = np.mean([f["image_to_caption"]["R@1"] for f in r["folds"]])
    assert r["image_to_caption"]["R@1"] == pytest.approx(mean_r1)
    full = evaluate_retrieval(caps, images, cap_img, "coco_5k")
    assert full["n_folds"] == 1 and full["caption_to_image"]["R@1"] <= r["caption_to_image"]["R@1"]
    with pytest.raises(ValueError, match="needs 5000 images"):
        evaluate_retrieval(caps[:20], images[:10], cap_img[:20], "coco_5k")
    with pytest.raises(ValueError, match="needs 1000 images"):
        evaluate_retrieval(caps[:20], images[:10], cap_img[:20], "flickr8k_1k")


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="no caption"):
        retrieval_metrics(np.zeros((2, 3)), np.array([0, 1]))
    with pytest.raises(ValueError, match="outside"):
        retrieval_metrics(np.zeros((2, 2)), np.array([0, 2]))
    with pytest.raises(ValueError, match="NaN"):
        retrieval_metrics(np.array([[np.nan, 0], [0, 1]]), np.array([0, 1]))
    with pytest.raises(ValueError, match="equal contiguous folds"):
        contiguous_folds(10, 3)
    with pytest.raises(ValueError, match="Unknown retrieval protocol"):
        evaluate_retrieval(np.eye(2), np.eye(2), np.arange(2), "coco_1k")
    with pytest.raises(ValueError, match="1-based"):
        rank_metrics(np.array([0, 1]))


def test_constant_encoder_gets_chance_level_on_the_1k_protocol():
    # A collapsed tower: every caption and every image embeds to the same point.
    n_img = 1000
    cap_img = np.repeat(np.arange(n_img), 5)
    r = evaluate_retrieval(np.ones((cap_img.size, 4)), np.ones((n_img, 4)), cap_img, "flickr8k_1k")
    t2i, i2t = r["caption_to_image"], r["image_to_caption"]
    assert t2i["R@1"] == pytest.approx(100 / 1000) and t2i["R@5"] == pytest.approx(500 / 1000)
    assert t2i["R@10"] == pytest.approx(1000 / 1000)
    # One of 5 own captions first among 5,000 tied ones: 5/5000; top 5: 1 - C(4995,5)/C(5000,5).
    assert i2t["R@1"] == pytest.approx(100 * 5 / 5000)
    assert i2t["R@5"] == pytest.approx(100 * (1 - np.prod([(4995 - i) / (5000 - i) for i in range(5)])))
    assert t2i["medr"] == t2i["meanr"] == 1000 and i2t["medr"] == i2t["meanr"] == 4996


def test_intervals_resample_images_wilson_and_bootstrap():
    from scipy import stats as sps

    from grounded_text.evaluation.stats import cluster_bootstrap_ci

    rng = np.random.default_rng(11)
    n_img = 200
    images = rng.normal(size=(n_img, 6))
    cap_img = np.repeat(np.arange(n_img), 2)
    caps = images[cap_img] + rng.normal(scale=1.5, size=(cap_img.size, 6))
    r = evaluate_retrieval(caps, images, cap_img, "all")
    norm = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    sims = norm(caps) @ norm(images).T
    # image→caption: one query per image, so the image queries are independent: Wilson and a bootstrap over them.
    ranks = image_to_caption_ranks(sims, cap_img)
    m = r["image_to_caption"]
    for k in (1, 5, 10):  # continuous scores: no ties, so the hits are whole
        ci = sps.binomtest(int((ranks <= k).sum()), ranks.size).proportion_ci(0.95, method="wilson")
        assert m[f"R@{k}_ci95"] == pytest.approx([100 * ci.low, 100 * ci.high])
        assert m[f"R@{k}_ci95"][0] <= m[f"R@{k}"] <= m[f"R@{k}_ci95"][1]
    ref = sps.bootstrap((ranks.astype(float),), np.median, n_resamples=1000, method="percentile",
                        vectorized=True, rng=np.random.default_rng(0)).confidence_interval
    assert m["medr_ci95"] == pytest.approx([ref.low, ref.high])
    # caption→image: the captions of one image are drawn together (a bootstrap over images).
    ranks = caption_to_image_ranks(sims, cap_img)
    m = r["caption_to_image"]
    for k in (1, 5, 10):
        lo, hi = cluster_bootstrap_ci((ranks <= k).astype(float), cap_img, np.mean, seed=0)
        assert m[f"R@{k}_ci95"] == pytest.approx([100 * lo, 100 * hi])
        assert m[f"R@{k}_ci95"][0] <= m[f"R@{k}"] <= m[f"R@{k}_ci95"][1]
    assert m["medr_ci95"] == pytest.approx(list(cluster_bootstrap_ci(ranks.astype(float), cap_img, np.median, seed=0)))
    assert "images" in m["ci_method"]
    assert "R@1_ci95" not in evaluate_retrieval(caps, images, cap_img, "all", ci=False)["caption_to_image"]


def test_caption_interval_is_wider_than_a_binomial_one_when_an_images_captions_agree():
    # Every caption of an image is the same query (5 copies): there are 100 independent
    # queries, not 500, and the interval must say so.
    from grounded_text.evaluation.stats import wilson_ci

    rng = np.random.default_rng(5)
    images = rng.normal(size=(100, 6))
    cap_img = np.repeat(np.arange(100), 5)
    caps = (images + rng.normal(scale=1.2, size=images.shape))[cap_img]
    m = evaluate_retrieval(caps, images, cap_img, "all")["caption_to_image"]
    lo, hi = m["R@5_ci95"]
    w_lo, w_hi = wilson_ci(m["R@5"] / 100, 500)
    assert hi - lo > 1.8 * 100 * (w_hi - w_lo)  # about sqrt(5) wider
    w_lo, w_hi = wilson_ci(m["R@5"] / 100, 100)  # close to a binomial interval over the 100 images
    assert abs((hi - lo) - 100 * (w_hi - w_lo)) < 0.25 * 100 * (w_hi - w_lo)


def test_fold_intervals_pool_queries_and_are_seeded():
    rng = np.random.default_rng(12)
    images = rng.normal(size=(100, 6))
    cap_img = np.repeat(np.arange(100), 3)
    caps = images[cap_img] + rng.normal(scale=1.5, size=(cap_img.size, 6))
    r = evaluate_retrieval(caps, images, cap_img, "all", n_folds=4)
    again = evaluate_retrieval(caps, images, cap_img, "all", n_folds=4)
    assert r["image_to_caption"] == again["image_to_caption"]
    assert r["caption_to_image"] == again["caption_to_image"]
    from grounded_text.evaluation.stats import wilson_ci

    lo, hi = wilson_ci(r["image_to_caption"]["R@5"] / 100, 100)  # equal folds: pooled recall over 100 images
    assert r["image_to_caption"]["R@5_ci95"] == pytest.approx([100 * lo, 100 * hi])
    lo, hi = r["caption_to_image"]["R@5_ci95"]  # a bootstrap over images within the 4 folds
    assert lo <= r["caption_to_image"]["R@5"] <= hi
    lo, hi = r["image_to_caption"]["medr_ci95"]
    assert lo <= r["image_to_caption"]["medr"] <= hi
