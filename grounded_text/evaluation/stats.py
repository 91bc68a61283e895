"""Confidence intervals and paired tests for the evaluation figures.

Every interval here is two-sided at level ``confidence`` (default 0.95); every resampling
method takes a ``seed`` and gives the same answer for the same inputs and seed.

* Pearson r: Fisher's z (``z = atanh r``, standard error ``1 / sqrt(n - 3)``), as Merkx &
  Frank 2019 (Table 5, Pearson's r × 100 with a 95 % interval) and
  ``scipy.stats.pearsonr(...).confidence_interval()``.
* Spearman ρ: Fisher's z with the variance of Bonett & Wright (2000, Psychometrika 65(1),
  "Sample size requirements for estimating Pearson, Kendall and Spearman correlations"):
  ``(1 + ρ² / 2) / (n - 3)``; or, with ``method="fieller"``, Fieller, Hartley & Pearson
  (1957, Biometrika 44): ``1.060 / (n - 3)``.
* Recall@K: the Wilson score interval for a binomial proportion over the queries
  (Wilson 1927), or a percentile bootstrap over queries.
* medr (or any statistic of per-query values): a percentile bootstrap over queries
  (``scipy.stats.bootstrap``).
* Queries that come in clusters (the 5 captions of one image are not independent
  caption→image queries): ``cluster_bootstrap_ci`` resamples the clusters (images) with
  replacement and keeps every query of a drawn cluster (Davison & Hinkley 1997, §3.8,
  the first stage of their two-stage bootstrap), within strata (folds) where given.
* Two encoders on the same pairs: Williams' test for two dependent correlations with a
  variable in common (r_12 vs r_13, given r_23), in Steiger's form (Steiger 1980,
  "Tests for comparing elements of a correlation matrix", Psychological Bulletin 87(2),
  245–251: Williams' T_2, Student's t with n − 3 degrees of freedom); and a paired
  bootstrap for any metric (``paired_bootstrap``, over items or over clusters of items).
* p-values for reports: ``format_p`` (``"< 0.001"`` below 0.001, never ``"0.000"``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats

_DEFAULT_RESAMPLES = 1000


def _check_level(confidence: float) -> float:
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}.")
    return float(stats.norm.ppf(0.5 + float(confidence) / 2))


def _check_r(r: float, n: int, what: str) -> None:
    if not np.isfinite(r) or not -1.0 <= r <= 1.0:
        raise ValueError(f"{what}: the correlation must be a finite number in [-1, 1], got {r!r}.")
    if int(n) != n or n < 4:
        raise ValueError(f"{what}: needs n >= 4 pairs (Fisher z has n - 3 degrees of freedom), got {n!r}.")


def _fisher_interval(r: float, se: float, zcrit: float) -> tuple[float, float]:
    if abs(r) == 1.0:
        return float(r), float(r)
    z = np.arctanh(r)
    return float(np.tanh(z - zcrit * se)), float(np.tanh(z + zcrit * se))


def pearson_ci(r: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Fisher-z interval for a Pearson correlation.

    Args:
      r: the sample Pearson r (float, in [-1, 1]).
      n: the number of pairs it was computed on (int, >= 4).
      confidence: the two-sided level.

    Returns:
      ``(lo, hi)`` floats, ``tanh(atanh r ± z_{(1+c)/2} / sqrt(n - 3))`` (Merkx & Frank 2019,
      Table 5; equal to ``scipy.stats.pearsonr(x, y).confidence_interval(c)``).

    Raises:
      ValueError: r outside [-1, 1] or not finite, n < 4, confidence outside (0, 1).
    """
    zcrit = _check_level(confidence)
    _check_r(r, n, "pearson_ci")
    return _fisher_interval(float(r), 1.0 / np.sqrt(n - 3), zcrit)


def spearman_ci(rho: float, n: int, confidence: float = 0.95, method: str = "bonett-wright") -> tuple[float, float]:
    """Fisher-z interval for a Spearman rank correlation.

    Args:
      rho: the sample Spearman ρ (float, in [-1, 1]).
      n: the number of pairs (int, >= 4).
      confidence: the two-sided level.
      method: ``"bonett-wright"`` (variance ``(1 + ρ²/2) / (n - 3)``, Bonett & Wright 2000,
        the default) or ``"fieller"`` (variance ``1.060 / (n - 3)``, Fieller et al. 1957).

    Returns:
      ``(lo, hi)`` floats.

    Raises:
      ValueError: as ``pearson_ci``; an unknown method.
    """
    zcrit = _check_level(confidence)
    _check_r(rho, n, "spearman_ci")
    if method == "bonett-wright":
        var = (1.0 + rho * rho / 2.0) / (n - 3)
    elif method == "fieller":
        var = 1.060 / (n - 3)
    else:
        raise ValueError(f"spearman_ci: unknown method {method!r}; use 'bonett-wright' or 'fieller'.")
    return _fisher_interval(float(rho), float(np.sqrt(var)), zcrit)


def correlation_ci(kind: str, r: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """``pearson_ci`` (``kind="pearson"``) or ``spearman_ci`` (``kind="spearman"``, Bonett–Wright)."""
    if kind == "pearson":
        return pearson_ci(r, n, confidence)
    if kind == "spearman":
        return spearman_ci(r, n, confidence)
    raise ValueError(f"correlation_ci: kind must be 'pearson' or 'spearman', got {kind!r}.")


def wilson_ci(proportion: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson 1927).

    Args:
      proportion: the observed fraction of successes (float in [0, 1]; a Recall@K as a
        fraction, not a percentage). A non-integer number of successes (the expected
        recall under random tie order) is accepted: the formula needs only the fraction.
      n: the number of queries (int, >= 1).
      confidence: the two-sided level.

    Returns:
      ``(lo, hi)`` fractions in [0, 1]; for an integer number of successes equal to
      ``scipy.stats.binomtest(k, n).proportion_ci(confidence, method="wilson")``.

    Raises:
      ValueError: proportion outside [0, 1], n < 1, confidence outside (0, 1).
    """
    zcrit = _check_level(confidence)
    if not np.isfinite(proportion) or not 0.0 <= proportion <= 1.0:
        raise ValueError(f"wilson_ci: proportion must be in [0, 1], got {proportion!r}.")
    if int(n) != n or n < 1:
        raise ValueError(f"wilson_ci: n must be a positive integer, got {n!r}.")
    p, z2 = float(proportion), zcrit * zcrit
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = zcrit / (1 + z2 / n) * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def recall_ci(hits: np.ndarray, confidence: float = 0.95, method: str = "wilson", *, n_resamples: int =
              _DEFAULT_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Interval for Recall@K in percent (0–100) from per-query hits.

    Args:
      hits: float or bool [q], per query 1 if a ground truth is in the top K (or the
        probability of that under random tie order).
      method: ``"wilson"`` (``wilson_ci`` over the q queries) or ``"bootstrap"``
        (percentile bootstrap of the mean over queries, ``bootstrap_ci``).

    Returns:
      ``(lo, hi)`` in percent.

    Raises:
      ValueError: empty ``hits``, values outside [0, 1], unknown method.
    """
    hits = np.asarray(hits, dtype=np.float64).ravel()
    if hits.size == 0 or hits.min() < 0 or hits.max() > 1:
        raise ValueError("recall_ci: need a non-empty array of per-query hits in [0, 1].")
    if method == "wilson":
        lo, hi = wilson_ci(float(hits.mean()), hits.size, confidence)
    elif method == "bootstrap":
        lo, hi = bootstrap_ci(hits, np.mean, confidence, n_resamples=n_resamples, seed=seed)
    else:
        raise ValueError(f"recall_ci: unknown method {method!r}; use 'wilson' or 'bootstrap'.")
    return 100.0 * lo, 100.0 * hi


def bootstrap_ci(values: np.ndarray, statistic: Callable = np.median, confidence: float = 0.95, *,
                 n_resamples: int = _DEFAULT_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over the items of ``values``.

    Args:
      values: [q] per-item values (e.g. the ranks of q queries, for medr).
      statistic: array [q] → float (``np.median`` for medr, ``np.mean`` for a recall);
        called with ``axis=-1`` by ``scipy.stats.bootstrap``.
      n_resamples: bootstrap resamples.
      seed: the generator's seed.

    Returns:
      ``(lo, hi)`` floats (``scipy.stats.bootstrap(..., method="percentile")``).

    Raises:
      ValueError: fewer than 2 values.
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size < 2:
        raise ValueError(f"bootstrap_ci: need at least 2 values, got {values.size}.")
    _check_level(confidence)
    res = stats.bootstrap((values,), statistic, confidence_level=confidence, n_resamples=n_resamples,
                          method="percentile", vectorized=True, rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def williams_test(r12: float, r13: float, r23: float, n: int) -> dict:
    """Williams' test of r_12 = r_13 for two correlations sharing variable 1.

    Typical use: variable 1 = the gold scores, 2 and 3 = two encoders' similarities on
    the same n pairs, r_23 = the correlation between the two encoders' similarities.
    Steiger (1980, Psychological Bulletin 87(2)) recommends Williams' T_2:

      ``t = (r12 - r13) sqrt((n - 1)(1 + r23) / (2 (n - 1)/(n - 3) |R| + r̄² (1 - r23)³))``

    with ``|R| = 1 - r12² - r13² - r23² + 2 r12 r13 r23`` and ``r̄ = (r12 + r13) / 2``,
    Student's t with ``n - 3`` degrees of freedom.

    Args:
      r12, r13, r23: Pearson (or Spearman) correlations, floats in [-1, 1].
      n: the number of items (int, >= 4).

    Returns:
      ``{"t": float, "df": n - 3, "p_value": float}`` (two-sided).

    Raises:
      ValueError: a correlation outside [-1, 1], n < 4, or a correlation matrix that is
        not positive semi-definite (``|R| < 0``).
    """
    for name, r in (("r12", r12), ("r13", r13), ("r23", r23)):
        _check_r(r, n, f"williams_test ({name})")
    det = 1 - r12 ** 2 - r13 ** 2 - r23 ** 2 + 2 * r12 * r13 * r23
    if det < -1e-12:
        raise ValueError(f"williams_test: r12={r12}, r13={r13}, r23={r23} is not a valid correlation matrix.")
    det = max(det, 0.0)
    rbar = (r12 + r13) / 2
    denom = 2 * (n - 1) / (n - 3) * det + rbar ** 2 * (1 - r23) ** 3
    if denom <= 0:  # r23 = 1 and rbar = 0, or identical encoders: no difference to test
        t = 0.0 if r12 == r13 else float(np.sign(r12 - r13) * np.inf)
    else:
        t = float((r12 - r13) * np.sqrt((n - 1) * (1 + r23) / denom))
    return {"t": t, "df": int(n - 3), "p_value": float(2 * stats.t.sf(abs(t), n - 3))}


def _cluster_index(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, starts, lengths)``: the items sorted by cluster, and each cluster's slice of ``order``."""
    groups = np.asarray(groups).ravel()
    order = np.argsort(groups, kind="stable")
    _, starts, lengths = np.unique(groups[order], return_index=True, return_counts=True)
    return order, starts, lengths


def _draw_clusters(rng, order: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Item indices of one resample: as many clusters as there are, drawn with replacement,
    each contributing all its items."""
    picked = rng.integers(0, starts.size, starts.size)
    counts = lengths[picked]
    offsets = np.repeat(starts[picked] - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return order[np.arange(int(counts.sum())) + offsets]


def cluster_bootstrap_ci(values: np.ndarray, groups: np.ndarray, statistic: Callable = np.mean,
                         confidence: float = 0.95, *, strata: np.ndarray | None = None,
                         n_resamples: int = _DEFAULT_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` when the items come in clusters.

    Each resample draws, within each stratum, as many clusters as the stratum holds, with
    replacement, and takes every item of each drawn cluster; the statistic of a resample
    is the mean over strata of ``statistic`` of the stratum's items (one stratum: just
    ``statistic``). E.g. caption→image Recall@K: items = the caption queries' hits,
    clusters = their images, strata = the protocol's folds (the reported figure is the
    mean over folds).

    Args:
      values: [q] per-item values.
      groups: [q] the cluster of each item (any hashable ints or strings).
      statistic: array [q'] → float (``np.mean``, ``np.median``).
      strata: [q] the stratum of each item, or None (one stratum). A cluster must not
        span two strata.
      n_resamples: resamples; seed: the generator's seed.

    Returns:
      ``(lo, hi)`` floats.

    Raises:
      ValueError: shapes differ, fewer than 2 clusters in a stratum.
    """
    values, groups = np.asarray(values, dtype=np.float64).ravel(), np.asarray(groups).ravel()
    strata = np.zeros(values.size, dtype=np.int64) if strata is None else np.asarray(strata).ravel()
    if not values.size == groups.size == strata.size:
        raise ValueError(f"cluster_bootstrap_ci: {values.size} values, {groups.size} groups, {strata.size} strata.")
    _check_level(confidence)
    parts = []
    for s in np.unique(strata):
        mask = strata == s
        index = _cluster_index(groups[mask])
        if index[1].size < 2:
            raise ValueError("cluster_bootstrap_ci: need at least 2 clusters in every stratum.")
        parts.append((values[mask], index))
    rng = np.random.default_rng(seed)
    stats_ = np.empty(n_resamples)
    for i in range(n_resamples):
        stats_[i] = np.mean([statistic(v[_draw_clusters(rng, *index)]) for v, index in parts])
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(stats_, [alpha, 1 - alpha])
    return float(lo), float(hi)


def format_p(p: float | None) -> str:
    """A p-value as a report prints it: ``"< 0.001"`` below 0.001 (never ``"0.000"``), 2
    significant digits below 0.01 (``"0.0058"``), else 3 decimals (``"0.013"``, ``"1.000"``);
    ``"–"`` for None."""
    if p is None or not np.isfinite(p):
        return "–"
    if p < 0.001:
        return "< 0.001"
    return f"{p:.2g}" if p < 0.01 else f"{p:.3f}"


def paired_bootstrap(a: np.ndarray, b: np.ndarray, statistic: Callable[[np.ndarray], float],
                     confidence: float = 0.95, *, groups: np.ndarray | None = None,
                     n_resamples: int = _DEFAULT_RESAMPLES, seed: int = 0) -> dict:
    """Paired bootstrap of ``statistic(a) - statistic(b)`` over shared items.

    The same resampled item indices are applied to both systems, so the test respects
    the pairing (two encoders scored on the same queries or sentence pairs). With
    ``groups``, whole clusters of items are resampled (``cluster_bootstrap_ci``): the 5
    caption queries of an image are drawn together.

    Args:
      a, b: arrays with the same first dimension q (items): e.g. per-query ranks of two
        encoders [q], or [q, 2] (system similarity, gold score) for a correlation.
      statistic: array [q', ...] → float, applied to ``a[idx]`` and ``b[idx]``.
      groups: [q] the cluster of each item, or None (items resampled one by one).
      n_resamples: resamples; seed: the generator's seed.

    Returns:
      ``{"difference": statistic(a) - statistic(b), "ci": [lo, hi]`` (percentile
      interval of the resampled differences, at level ``confidence``), ``"confidence"``, ``"p_value"``
      (two-sided: twice the smaller tail of the resampled differences beyond 0, at most 1),
      ``"n_resamples"``, ``"seed"}``.

    Raises:
      ValueError: different numbers of items, fewer than 2 items.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape[:1] != b.shape[:1] or a.shape[0] < 2:
        raise ValueError(f"paired_bootstrap: a and b need the same number (>= 2) of items, got {a.shape} and "
                         f"{b.shape}.")
    _check_level(confidence)
    rng = np.random.default_rng(seed)
    q = a.shape[0]
    index = None
    if groups is not None:
        if np.asarray(groups).size != q:
            raise ValueError(f"paired_bootstrap: {np.asarray(groups).size} groups for {q} items.")
        index = _cluster_index(groups)
    diffs = np.empty(n_resamples)
    for i in range(n_resamples):
        idx = rng.integers(0, q, q) if index is None else _draw_clusters(rng, *index)
        diffs[i] = statistic(a[idx]) - statistic(b[idx])
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(diffs, [alpha, 1 - alpha])
    p = min(1.0, 2 * min(float((diffs <= 0).mean()), float((diffs >= 0).mean())))
    return {"difference": float(statistic(a) - statistic(b)), "ci": [float(lo), float(hi)],
            "confidence": float(confidence), "p_value": p,
            "n_resamples": int(n_resamples), "seed": int(seed)}
