"""grounded_text.evaluation.stats against SciPy/NumPy references and worked numbers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from grounded_text.evaluation import stats


def _pair(n, rho, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return x, rho * x + np.sqrt(1 - rho ** 2) * rng.normal(size=n)


@pytest.mark.parametrize("n,rho,conf", [(30, 0.5, 0.95), (750, 0.8, 0.95), (12, -0.3, 0.9)])
def test_pearson_ci_matches_scipy(n, rho, conf):
    x, y = _pair(n, rho, n)
    res = sps.pearsonr(x, y)
    ref = res.confidence_interval(conf)
    np.testing.assert_allclose(stats.pearson_ci(res.statistic, n, conf), [ref.low, ref.high], rtol=1e-12)


def test_pearson_ci_reproduces_merkx_frank_table5():
    # Table 5, char-GRU (Flickr8k), STS12 MSRvid: 79.9 +2.4 -2.7 on 750 pairs (Table 1).
    lo, hi = stats.pearson_ci(0.799, 750)
    assert round(100 * (hi - 0.799), 1) == 2.4 and round(100 * (0.799 - lo), 1) == 2.7
    # STS13 FNWN (189 pairs): 23.8 +13.0 -13.9.
    lo, hi = stats.pearson_ci(0.238, 189)
    assert round(100 * (hi - 0.238), 1) == 13.0 and round(100 * (0.238 - lo), 1) == 13.9


def test_spearman_ci_variances():
    rho, n = 0.6, 103
    z = np.arctanh(rho)
    for method, var in (("bonett-wright", (1 + rho ** 2 / 2) / (n - 3)), ("fieller", 1.060 / (n - 3))):
        half = sps.norm.ppf(0.975) * np.sqrt(var)
        np.testing.assert_allclose(stats.spearman_ci(rho, n, method=method), np.tanh([z - half, z + half]))
    wider = stats.spearman_ci(rho, n)
    narrower = stats.pearson_ci(rho, n)
    assert wider[0] < narrower[0] and wider[1] > narrower[1]


@pytest.mark.parametrize("k,n", [(0, 10), (275, 1000), (1000, 1000), (3, 7)])
def test_wilson_matches_binomtest(k, n):
    ref = sps.binomtest(k, n).proportion_ci(0.95, method="wilson")
    np.testing.assert_allclose(stats.wilson_ci(k / n, n), [ref.low, ref.high], rtol=1e-10, atol=1e-12)


def test_recall_ci_wilson_reproduces_merkx_frank_table2():
    # Table 2, char-GRU image→caption R@1 = 38.5 ± 3.0 on the 1,000 test images.
    hits = np.zeros(1000)
    hits[:385] = 1
    lo, hi = stats.recall_ci(hits)
    assert round((hi - lo) / 2, 1) == 3.0


def test_bootstrap_ci_matches_scipy_and_is_seeded():
    ranks = np.random.default_rng(3).integers(1, 50, size=400).astype(float)
    ref = sps.bootstrap((ranks,), np.median, n_resamples=500, method="percentile", vectorized=True,
                        rng=np.random.default_rng(7)).confidence_interval
    assert stats.bootstrap_ci(ranks, np.median, n_resamples=500, seed=7) == (ref.low, ref.high)
    assert stats.bootstrap_ci(ranks, seed=1) == stats.bootstrap_ci(ranks, seed=1)
    lo, hi = stats.recall_ci((ranks <= 10).astype(float), method="bootstrap", seed=0)
    assert lo <= 100 * (ranks <= 10).mean() <= hi


def _williams_reference(r12, r13, r23, n):
    # Steiger (1980), Williams' T2, written out term by term.
    detr = 1 - r12 * r12 - r13 * r13 - r23 * r23 + 2 * r12 * r13 * r23
    rbar = (r12 + r13) / 2
    t = (r12 - r13) * np.sqrt(((n - 1) * (1 + r23)) / (2 * ((n - 1) / (n - 3)) * detr + rbar ** 2 * (1 - r23) ** 3))
    return t, 2 * sps.t.sf(abs(t), n - 3)


def test_williams_worked_example():
    r12, r13, r23, n = 0.5, 0.3, 0.4, 100
    # By hand: |R| = 1 - .25 - .09 - .16 + 2(.5)(.3)(.4) = 0.62; rbar = 0.4;
    # denominator = 2 (99/97) 0.62 + 0.16 (0.6)^3 = 1.30013; t = 0.2 sqrt(99 * 1.4 / 1.30013) = 2.0650;
    # p (97 df) = 0.0416.
    out = stats.williams_test(r12, r13, r23, n)
    t, p = _williams_reference(r12, r13, r23, n)
    assert out["df"] == 97
    np.testing.assert_allclose([out["t"], out["p_value"]], [t, p], rtol=1e-12)
    assert abs(out["t"] - 2.0650) < 1e-4 and abs(out["p_value"] - 0.0416) < 1e-4
    same = stats.williams_test(0.4, 0.4, 0.7, 50)
    assert same["t"] == 0 and same["p_value"] == 1.0
    with pytest.raises(ValueError):
        stats.williams_test(0.9, -0.9, 0.9, 50)  # not a correlation matrix
    with pytest.raises(ValueError):
        stats.williams_test(0.5, 0.3, 0.4, 3)


def test_williams_matches_published_outputs():
    # 1. R's psych::r.test documentation (William Revelle, package psych, "r.test" help page,
    #    Examples): a test of two dependent correlations sharing a variable, n = 5105,
    #    r12 = 0.693458895410494, r13 = 0.695966022434845, r23 = 0.988475791500198; printed
    #    with digits = 8 as "p < 0.1000759" (and "p < 0.1001" with digits = 4). psych's test
    #    for this case is Williams' T2 as given by Steiger (1980, eq. 7).
    out = stats.williams_test(0.693458895410494, 0.695966022434845, 0.988475791500198, 5105)
    assert out["df"] == 5102 and round(out["p_value"], 7) == 0.1000759
    # 2. The README of nlp-williams (the Python port of Graham & Baldwin's Williams test for
    #    metric–human correlations, EMNLP 2014): r12 = 0.65, r13 = 0.55, r23 = 0.3, n = 50,
    #    one-sided "P-value: 0.20928617286753592"; ours is two-sided, i.e. twice that.
    out = stats.williams_test(0.65, 0.55, 0.3, 50)
    assert out["t"] > 0 and out["p_value"] / 2 == pytest.approx(0.20928617286753592, abs=1e-12)


def test_paired_bootstrap_matches_the_exact_bootstrap_distribution():
    # The bootstrap distribution of mean(a*) - mean(b*) over n = 4 items is known exactly:
    # each of the 4^4 index tuples is equally likely. Its two-sided p-value and percentile
    # interval, computed by enumeration, are the reference for the Monte Carlo estimate.
    import itertools

    a = np.array([3.0, 1.0, 4.0, 1.5])
    b = np.array([1.0, 1.5, 2.0, 2.5])
    d = np.array([(a[list(i)] - b[list(i)]).mean() for i in itertools.product(range(4), repeat=4)])
    p_exact = min(1.0, 2 * min((d <= 0).mean(), (d >= 0).mean()))
    out = stats.paired_bootstrap(a, b, np.mean, n_resamples=20000, seed=3)
    assert abs(out["p_value"] - p_exact) < 0.01
    assert out["difference"] == pytest.approx(a.mean() - b.mean())
    np.testing.assert_allclose(out["ci"], np.quantile(d, [0.025, 0.975]), atol=0.13)
    # Large n: the bootstrap standard error of a difference of means is sd(a - b) / sqrt(n)
    # (the plug-in sd), so the percentile interval is close to the normal one.
    rng = np.random.default_rng(1)
    x = rng.normal(size=2000)
    y = x + rng.normal(0.05, 0.5, size=2000)
    out = stats.paired_bootstrap(y, x, np.mean, n_resamples=4000, seed=2)
    half = 1.959964 * np.std(y - x) / np.sqrt(2000)
    np.testing.assert_allclose(out["ci"], [np.mean(y - x) - half, np.mean(y - x) + half], atol=0.1 * half)


def test_cluster_resampling_draws_whole_clusters():
    # Clusters of 5 identical items: resampling clusters is resampling the 40 cluster values
    # (the same generator calls), not 200 independent items.
    rng = np.random.default_rng(4)
    a, b = rng.uniform(size=40), rng.uniform(size=40)
    groups = np.repeat(np.arange(40), 5)
    by_cluster = stats.paired_bootstrap(np.repeat(a, 5), np.repeat(b, 5), np.mean, groups=groups, seed=9)
    by_value = stats.paired_bootstrap(a, b, np.mean, seed=9)
    assert by_cluster["p_value"] == by_value["p_value"]
    np.testing.assert_allclose(by_cluster["ci"], by_value["ci"], rtol=1e-12)
    lo, hi = stats.cluster_bootstrap_ci(np.repeat(a, 5), groups, seed=9)
    ref = stats.bootstrap_ci(a, np.mean, seed=9)
    assert hi - lo == pytest.approx(ref[1] - ref[0], rel=0.2)
    naive = stats.bootstrap_ci(np.repeat(a, 5), np.mean, seed=9)
    assert hi - lo > 1.8 * (naive[1] - naive[0])  # treating the 200 items as independent is too narrow
    with pytest.raises(ValueError):
        stats.paired_bootstrap(a, b, np.mean, groups=groups)


def test_format_p_never_prints_zero():
    assert stats.format_p(0.0) == "< 0.001" and stats.format_p(4.9e-4) == "< 0.001"
    assert stats.format_p(0.0058) == "0.0058" and stats.format_p(0.013) == "0.013"
    assert stats.format_p(0.001) == "0.001" and stats.format_p(1.0) == "1.000" and stats.format_p(None) == "–"


def test_paired_bootstrap():
    rng = np.random.default_rng(0)
    gold = rng.normal(size=300)
    good = gold + 0.5 * rng.normal(size=300)
    bad = gold + 2.0 * rng.normal(size=300)

    def r(d):
        return np.corrcoef(d[:, 0], d[:, 1])[0, 1]

    a, b = np.stack([good, gold], 1), np.stack([bad, gold], 1)
    out = stats.paired_bootstrap(a, b, r, n_resamples=300, seed=1)
    assert out == stats.paired_bootstrap(a, b, r, n_resamples=300, seed=1)
    np.testing.assert_allclose(out["difference"], r(a) - r(b))
    assert 0 < out["ci"][0] < out["difference"] < out["ci"][1] and out["p_value"] < 0.01
    null = stats.paired_bootstrap(a, a, r, n_resamples=100, seed=1)
    assert null["difference"] == 0 and null["p_value"] == 1.0
    with pytest.raises(ValueError):
        stats.paired_bootstrap(a, b[:10], r)


def test_bad_inputs():
    for bad in (lambda: stats.pearson_ci(1.5, 10), lambda: stats.pearson_ci(0.5, 3),
                lambda: stats.pearson_ci(float("nan"), 10), lambda: stats.wilson_ci(0.5, 0),
                lambda: stats.spearman_ci(0.5, 10, method="x"), lambda: stats.pearson_ci(0.5, 10, confidence=1.0),
                lambda: stats.recall_ci([]), lambda: stats.bootstrap_ci([1.0])):
        with pytest.raises(ValueError):
            bad()


def test_sts_correlations_carry_fisher_z_intervals_equal_to_scipy():
    from scipy import stats as sps

    from grounded_text.evaluation.sts import correlations

    rng = np.random.default_rng(3)
    gold = rng.uniform(0, 5, 250)
    pred = gold + rng.normal(0, 2, 250)
    got = correlations(pred, gold)
    want = sps.pearsonr(pred, gold).confidence_interval(0.95)
    np.testing.assert_allclose(got["pearson_ci95"], [want.low, want.high], atol=1e-12)
    lo, hi = got["spearman_ci95"]
    assert lo < got["spearman"] < hi
    assert "pearson_ci95" not in correlations(pred[:3], gold[:3])
