"""Supervised STS-B / SICK-R over frozen embeddings (SentEval-style, *supervised*).

SentEval (Conneau & Kiela 2018, §3 "relatedness") trains a small classifier on
the pair features ``[u, v, |u − v|, u * v]`` (Tai et al. 2015 encoding of the
score as a distribution over integer bins, the prediction is the expected
score), selects on dev and reports test Pearson r. Papers often quote these
supervised numbers next to unsupervised cosine numbers without saying so; this
module's results are always labelled ``"supervised"``.

Our regressor: **scikit-learn ridge regression** (``sklearn.linear_model.Ridge``)
on the same features ``[u, v, |u − v|, u * v]`` of the frozen embeddings (the
encoder is never trained here), regularisation α chosen from a fixed grid by dev
Pearson r, then refit on train with that α and reported on test; predictions
are clipped to the gold score range of the training set. This is a simpler
regressor than SentEval's 5/6-bin softmax and gives slightly different
numbers; it is named in every report.

Splits: STS-B ``sts-train`` / ``sts-dev`` / ``sts-test`` (5,749 / 1,500 / 1,379);
SICK-R ``SICK_train`` / ``SICK_trial`` / ``SICK_test_annotated`` (4,500 / 500 / 4,927).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grounded_text.data.sts import SentencePairs, read_sick, read_sts_benchmark
from grounded_text.evaluation.encoders import EmbeddingCache, Encoder, cached
from grounded_text.evaluation.sts import correlations

ALPHAS = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
REGRESSOR = "sklearn Ridge on [u, v, |u-v|, u*v], alpha selected on dev Pearson r"


def pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """SentEval's relatedness features ``[u, v, |u − v|, u * v]``: float [n, 4N] from two [n, N]."""
    u = np.asarray(u, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if u.shape != v.shape or u.ndim != 2:
        raise ValueError(f"pair_features: need two [n, N] arrays of equal shape, got {u.shape} and {v.shape}.")
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)


def fit_select_score(train: tuple, dev: tuple, test: tuple, alphas=ALPHAS) -> dict:
    """Ridge on train, α by dev Pearson r, test correlations.

    Args:
      train, dev, test: ``(features [n, F], gold [n])`` each.

    Returns:
      ``{"test": {"pearson", "spearman", "n"}, "dev": {...}, "alpha": float,
      "dev_by_alpha": {alpha: pearson}, "regressor": REGRESSOR, "protocol": "supervised"}``.
    """
    from sklearn.linear_model import Ridge

    lo, hi = float(np.min(train[1])), float(np.max(train[1]))
    dev_scores = {}
    for alpha in alphas:
        model = Ridge(alpha=alpha).fit(*train)
        pred = np.clip(model.predict(dev[0]), lo, hi)
        r = correlations(pred, dev[1])["pearson"]
        dev_scores[alpha] = -np.inf if r is None else r
    best = max(dev_scores, key=dev_scores.get)
    model = Ridge(alpha=best).fit(*train)
    return {
        "test": correlations(np.clip(model.predict(test[0]), lo, hi), test[1]),
        "dev": correlations(np.clip(model.predict(dev[0]), lo, hi), dev[1]),
        "alpha": float(best),
        "dev_by_alpha": {str(a): float(s) for a, s in dev_scores.items()},
        "regressor": REGRESSOR,
        "protocol": "supervised",
    }


def _featurise(cache: EmbeddingCache, pairs: SentencePairs) -> tuple:
    cache.add(list(pairs.sentences1) + list(pairs.sentences2))
    return pair_features(cache(pairs.sentences1), cache(pairs.sentences2)), pairs.scores


def evaluate_supervised_sts(encoder: Encoder, sts_dir: str | Path) -> dict:
    """Supervised STS-B and SICK-R (whichever folders exist under ``sts_dir``).

    Returns:
      ``{"STSBenchmark": fit_select_score(...), "SICK": ...}``.

    Raises:
      FileNotFoundError: neither ``STSBenchmark/`` nor ``SICK/`` exists.
    """
    sts_dir = Path(sts_dir)
    cache = cached(encoder)
    out = {}
    if (sts_dir / "STSBenchmark").is_dir():
        splits = [read_sts_benchmark(sts_dir, s) for s in ("train", "dev", "test")]
        out["STSBenchmark"] = fit_select_score(*(_featurise(cache, p) for p in splits))
    if (sts_dir / "SICK").is_dir():
        splits = [read_sick(sts_dir, s) for s in ("train", "trial", "test")]
        out["SICK"] = fit_select_score(*(_featurise(cache, p) for p in splits))
    if not out:
        raise FileNotFoundError(f"No STSBenchmark/ or SICK/ under {str(sts_dir)!r} for supervised STS.")
    return out
