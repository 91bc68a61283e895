"""mNNO@K, ρ_vis, C_intra, C_inter against plain NumPy/SciPy loops."""

import itertools

import numpy as np
import pytest
from scipy import stats

from grounded_text.evaluation.structure import cluster_cohesion, mnno, rho_vis, structural_measures


def cos(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def ref_mnno(x, y, k):
    n = len(x)
    total = 0
    for i in range(n):
        nx = sorted((j for j in range(n) if j != i), key=lambda j: (-cos(x[i], x[j]), j))[:k]
        ny = sorted((j for j in range(n) if j != i), key=lambda j: (-cos(y[i], y[j]), j))[:k]
        total += len(set(nx) & set(ny))
    return total / (k * n)


@pytest.mark.parametrize("k", [1, 3, 7])
def test_mnno_matches_reference(k):
    rng = np.random.default_rng(k)
    v = rng.normal(size=(25, 6))
    s = v @ rng.normal(size=(6, 4)) + 0.5 * rng.normal(size=(25, 4))
    assert mnno(s, v, k) == pytest.approx(ref_mnno(s, v, k))
    assert mnno(v, v, k) == 1.0  # identical spaces overlap fully


def test_rho_vis_matches_reference():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(15, 5))
    s = v[:, :3] + rng.normal(scale=0.3, size=(15, 3))
    pairs = list(itertools.combinations(range(15), 2))
    st = [cos(s[i], s[j]) for i, j in pairs]
    sv = [cos(v[i], v[j]) for i, j in pairs]
    r = rho_vis(s, v)
    assert r["n_pairs"] == 105
    assert r["spearman"] == pytest.approx(stats.spearmanr(st, sv)[0])
    assert r["pearson"] == pytest.approx(np.corrcoef(st, sv)[0, 1])
    with pytest.raises(ValueError, match="undefined"):
        rho_vis(np.ones((4, 3)), v[:4])


def test_cluster_cohesion_matches_pair_loops():
    rng = np.random.default_rng(1)
    groups = ["a"] * 3 + ["b"] * 5 + ["c"] * 1 + ["d"] * 2
    x = rng.normal(size=(len(groups), 4))
    x[4] = 0.0  # a zero embedding counts as cosine 0
    intra, inter = [], []
    for i, j in itertools.combinations(range(len(groups)), 2):
        c = 0.0 if not x[i].any() or not x[j].any() else cos(x[i], x[j])
        (intra if groups[i] == groups[j] else inter).append(c)
    r = cluster_cohesion(x, groups)
    assert r["n_intra_pairs"] == len(intra) == 3 + 10 + 0 + 1
    assert r["n_inter_pairs"] == len(inter)
    assert r["C_intra"] == pytest.approx(np.mean(intra))
    assert r["C_inter"] == pytest.approx(np.mean(inter))
    assert r["C_gap"] == pytest.approx(np.mean(intra) - np.mean(inter))
    with pytest.raises(ValueError, match="no image has two captions"):
        cluster_cohesion(x[:3], ["a", "b", "c"])


def test_structural_measures_uses_one_caption_per_image():
    rng = np.random.default_rng(2)
    feats = rng.normal(size=(12, 5))
    image_of = np.repeat(np.arange(12), 3)
    caps = feats[image_of] + 0.01 * rng.normal(size=(36, 5))
    r = structural_measures(caps, image_of.tolist(), feats[image_of], ks=(3,))
    assert r["n_images"] == 12 and r["n_captions"] == 36
    assert r["mNNO@3"] == pytest.approx(mnno(caps[::3], feats, 3))
    assert r["rho_vis"]["spearman"] > 0.95 and r["C_intra"] > 0.99


def _explicit_rho_vis_bootstrap(s, v, n_resamples, seed):
    """The resample materialised: n items drawn with replacement, all pairs of distinct items."""
    rng = np.random.default_rng(seed)
    n = len(s)
    pearson, spearman = [], []
    for _ in range(n_resamples):
        idx = rng.integers(0, n, n)
        pairs = [(i, j) for i, j in itertools.combinations(idx.tolist(), 2) if i != j]
        st = [cos(s[i], s[j]) for i, j in pairs]
        sv = [cos(v[i], v[j]) for i, j in pairs]
        pearson.append(np.corrcoef(st, sv)[0, 1])
        spearman.append(stats.spearmanr(st, sv)[0])
    return {"pearson_ci95": list(np.quantile(pearson, [0.025, 0.975])),
            "spearman_ci95": list(np.quantile(spearman, [0.025, 0.975]))}


@pytest.mark.parametrize("ties", [False, True])
def test_rho_vis_ci_is_the_item_bootstrap(ties):
    from grounded_text.evaluation.structure import rho_vis_ci

    rng = np.random.default_rng(4)
    v = rng.normal(size=(12, 5))
    s = v[:, :3] + rng.normal(scale=0.5, size=(12, 3))
    if ties:  # two identical sentences: their cosines with every other item tie
        s[1] = s[0]
    got = rho_vis_ci(s, v, n_resamples=40, seed=3)
    ref = _explicit_rho_vis_bootstrap(s, v, 40, 3)
    for key in ("pearson_ci95", "spearman_ci95"):
        np.testing.assert_allclose(got[key], ref[key], rtol=1e-9)
    r = rho_vis(s, v)
    assert got["pearson_ci95"][0] < r["pearson"] < got["pearson_ci95"][1]
    with pytest.raises(ValueError):
        rho_vis_ci(s, v, n_resamples=0)


def test_structural_measures_reports_every_interval():
    rng = np.random.default_rng(6)
    feats = rng.normal(size=(30, 5))
    image_of = np.repeat(np.arange(30), 3)
    caps = feats[image_of] + 0.5 * rng.normal(size=(90, 5))
    r = structural_measures(caps, image_of.tolist(), feats[image_of], ks=(3,), ci_resamples=50)
    lo, hi = r["rho_vis"]["pearson_ci95"]
    assert lo < r["rho_vis"]["pearson"] < hi
    assert "spearman_ci95" in r["rho_vis"]
    for key in ("mNNO@3", "C_intra", "C_inter"):
        lo, hi = r[f"{key}_ci95"]
        assert lo <= r[key] <= hi, key
    bare = structural_measures(caps, image_of.tolist(), feats[image_of], ks=(3,), ci_resamples=0)
    assert "pearson_ci95" not in bare["rho_vis"] and "C_intra_ci95" not in bare


def _explicit_structure_bootstrap(caps, image_of, text_rows, visual_rows, k, n_resamples, seed):
    """The resample materialised: each drawn image copy is its own item; mNNO terms are counted
    with the full split's neighbourhoods (``ref_mnno``'s loop per image); C_intra / C_inter loop
    over every caption pair of the resample, leaving out pairs between two copies of one image."""
    images = sorted(set(image_of), key=str)
    n = len(images)
    # The full split's neighbour overlap of each image's representative caption.
    overlap = {}
    for i, img in enumerate(images):
        nx = sorted((j for j in range(n) if j != i), key=lambda j: (-cos(text_rows[i], text_rows[j]), j))[:k]
        ny = sorted((j for j in range(n) if j != i), key=lambda j: (-cos(visual_rows[i], visual_rows[j]), j))[:k]
        overlap[img] = len(set(nx) & set(ny))
    rng = np.random.default_rng(seed)
    draws = {"mNNO": [], "C_intra": [], "C_inter": []}
    for _ in range(n_resamples):
        drawn = [images[i] for i in rng.integers(0, n, n)]
        draws["mNNO"].append(sum(overlap[img] for img in drawn) / (k * len(drawn)))
        items = [(copy, img, c) for copy, img in enumerate(drawn) for c in np.flatnonzero(np.asarray(image_of) == img)]
        intra, inter = [], []
        for (ca, ia, a), (cb, ib, b) in itertools.combinations(items, 2):
            if ca == cb:
                intra.append(cos(caps[a], caps[b]))
            elif ia != ib:
                inter.append(cos(caps[a], caps[b]))
        if intra:
            draws["C_intra"].append(np.mean(intra))
        draws["C_inter"].append(np.mean(inter))
    return {key: np.quantile(v, [0.025, 0.975]) for key, v in draws.items()}


def test_structure_ci_is_the_image_bootstrap():
    from grounded_text.evaluation.structure import nn_overlap, one_caption_per_image, structure_ci

    rng = np.random.default_rng(7)
    n_images = 9
    feats = rng.normal(size=(n_images, 5))
    image_of = [f"img{i}" for i in range(n_images) for _ in range(1 + i % 3)]  # 1, 2 or 3 captions each
    idx = np.array([int(key[3:]) for key in image_of])
    caps = feats[idx, :4] + 0.7 * rng.normal(size=(len(image_of), 4))
    rows = one_caption_per_image(image_of)
    overlaps = {3: nn_overlap(caps[rows], feats[idx][rows], 3)}
    got = structure_ci(caps, image_of, overlaps, rows, n_resamples=25, seed=2)
    # Images are drawn in sorted key order, so the reference represents them the same way.
    order = sorted(range(n_images), key=lambda i: f"img{i}")
    text_rows = caps[rows][order]
    visual_rows = feats[order]
    ref = _explicit_structure_bootstrap(caps, image_of, text_rows, visual_rows, 3, 25, 2)
    np.testing.assert_allclose(got["mNNO@3_ci95"], ref["mNNO"], rtol=1e-9)
    np.testing.assert_allclose(got["C_intra_ci95"], ref["C_intra"], rtol=1e-9)
    np.testing.assert_allclose(got["C_inter_ci95"], ref["C_inter"], rtol=1e-9)
    with pytest.raises(ValueError):
        structure_ci(caps, image_of, overlaps, rows, n_resamples=0)
