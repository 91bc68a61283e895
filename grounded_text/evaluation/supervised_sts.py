"""Supervised STS-B / SICK-R over frozen embeddings (SentEval-style, *supervised*).

SentEval (Conneau & Kiela 2018, §3 "relatedness") trains a small classifier on
the pair features ``[|u − v|, u * v]`` (Tai et al. 2015 encoding of the
score as a distribution over integer bins, the prediction is the expected
score), selects on dev and reports test Pearson r. Papers often quote these
supervised numbers next to unsupervised cosine numbers without saying so; this
module's results are always labelled ``"supervised"``.

The default regressor: **scikit-learn ridge regression** (``sklearn.linear_model.Ridge``)
on the same features ``[u, v, |u − v|, u * v]`` of the frozen embeddings (the
encoder is never trained here), regularisation α chosen from a fixed grid by dev
Pearson r, then refit on train with that α and reported on test; predictions
are clipped to the gold score range of the training set. This is a simpler
regressor than SentEval's 5/6-bin softmax and gives slightly different
numbers; it is named in every report.

Two regressors, chosen with ``model`` (``--supervised-model``):

* ``"ridge"`` (the default, above);
* ``"senteval"``: **SentEval's relatedness classifier** (Tai, Socher & Manning 2015, §4.2, as
  SentEval's ``RelatednessPytorch`` implements it, Conneau & Kiela 2018): features
  ``[|u − v|, u * v]`` (``senteval_features``); the gold score y is encoded as a
  distribution p over the integer score classes r = lo..hi (``encode_scores``: mass
  ``floor(y) − y + 1`` on class ``floor(y)`` and ``y − floor(y)`` on ``floor(y) + 1``), with
  classes 1..5 for SICK-R and 0..5 for STS-B (SentEval itself uses 1..5 for both, which
  leaves STS-B scores below 1 without a full distribution); a softmax layer (multinomial
  logistic regression, a Keras ``Dense``) is trained with Adam (learning rate 1e-3, no
  weight decay), batches of 64 and a summed squared error between the predicted and the
  target distributions, in rounds of 50 epochs; after each round the dev Pearson r of the
  predicted score ``ŷ = Σ_r r p̂_r`` (``expected_scores``) is measured, the best round's
  weights are kept, and training stops at the 4th round without a new best (counted over the
  whole run, not in a row, as SentEval counts) or at 1,000 epochs (SentEval's schedule).
  Seeded (weights and batch order): the same seed gives the same numbers.

Splits: STS-B ``sts-train`` / ``sts-dev`` / ``sts-test`` (5,749 / 1,500 / 1,379);
SICK-R ``SICK_train`` / ``SICK_trial`` / ``SICK_test_annotated`` (4,500 / 500 / 4,927).
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from grounded_text.data.sts import SentencePairs, read_sick, read_sts_benchmark
from grounded_text.evaluation.encoders import EmbeddingCache, Encoder, cached
from grounded_text.evaluation.sts import correlations
from grounded_text.utils.extras import require

ALPHAS = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
REGRESSOR = "sklearn Ridge on [u, v, |u-v|, u*v], alpha selected on dev Pearson r"
SENTEVAL_REGRESSOR = ("SentEval softmax over score classes on [|u-v|, u*v] (Tai et al. 2015 targets), "
                      "early stopped on dev Pearson r")
SUPERVISED_MODELS = ("ridge", "senteval")
# Short labels for reports (the regressor column).
MODEL_LABELS = {"ridge": "ridge on [u,v,|u−v|,u*v]", "senteval": "SentEval softmax on [|u−v|,u*v]"}
# The integer score classes (lowest, highest) of each task's gold scale.
SCORE_CLASSES = {"STSBenchmark": (0, 5), "SICK": (1, 5)}


def relatedness_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """SentEval's relatedness features ``[u, v, |u − v|, u * v]``: float [n, 4N] from two [n, N]."""
    u = np.asarray(u, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if u.shape != v.shape or u.ndim != 2:
        raise ValueError(f"relatedness_features: need two [n, N] arrays of equal shape, got {u.shape} and {v.shape}.")
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)


def fit_select_score(train: tuple, dev: tuple, test: tuple, alphas=ALPHAS) -> dict:
    """Ridge on train, α by dev Pearson r, test correlations.

    Args:
      train, dev, test: ``(features [n, F], gold [n])`` each.

    Returns:
      ``{"test": {"pearson", "spearman", "n"}, "dev": {...}, "alpha": float,
      "dev_by_alpha": {alpha: pearson}, "regressor": REGRESSOR, "model": "ridge",
      "protocol": "supervised"}``.
    """
    Ridge = require("sklearn.linear_model", "Supervised STS").Ridge
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
        "model": "ridge",
        "protocol": "supervised",
    }


def senteval_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """SentEval's relatedness features ``[|u − v|, u * v]`` (Tai et al. 2015, §4.2): float [n, 2N]
    from two float [n, N] arrays.

    Raises:
      ValueError: arrays of different shapes, or not 2-D.
    """
    u = np.asarray(u, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if u.shape != v.shape or u.ndim != 2:
        raise ValueError(f"senteval_features: need two [n, N] arrays of equal shape, got {u.shape} and {v.shape}.")
    return np.concatenate([np.abs(u - v), u * v], axis=1)


def encode_scores(scores, lo: int, hi: int) -> np.ndarray:
    """Tai et al. (2015, §4.2) target distribution of each gold score over the classes lo..hi.

    A score y puts mass ``floor(y) − y + 1`` on class ``floor(y)`` and ``y − floor(y)`` on class
    ``floor(y) + 1``, so that the expectation over the classes is y again (an integer y puts
    all its mass on its own class).

    Args:
      scores: float [n] gold scores in [lo, hi].
      lo, hi: the lowest and highest integer class (SICK-R 1, 5; STS-B 0, 5).

    Returns:
      float64 [n, hi − lo + 1]; row i sums to 1.

    Raises:
      ValueError: ``hi <= lo``, or a score outside [lo, hi] or not finite (names the first).
    """
    y = np.asarray(scores, dtype=np.float64).reshape(-1)
    if int(hi) <= int(lo):
        raise ValueError(f"encode_scores: need lo < hi, got {lo}, {hi}.")
    bad = np.flatnonzero(~np.isfinite(y) | (y < lo) | (y > hi))
    if bad.size:
        raise ValueError(f"encode_scores: score {y[bad[0]]!r} (row {int(bad[0])}) is outside the classes {lo}..{hi}.")
    k = hi - lo + 1
    base = np.minimum(np.floor(y), hi - 1)  # y = hi: all mass on hi (weight 1 on base + 1)
    frac = y - base
    out = np.zeros((y.size, k))
    rows = np.arange(y.size)
    out[rows, (base - lo).astype(np.int64)] = 1.0 - frac
    out[rows, (base - lo + 1).astype(np.int64)] += frac
    return out


def expected_scores(probabilities: np.ndarray, lo: int) -> np.ndarray:
    """The predicted score ``ŷ = Σ_r r p_r`` over the classes r = lo, lo + 1, ...: float64 [n]
    from float [n, k] class probabilities."""
    p = np.asarray(probabilities, dtype=np.float64)
    return p @ np.arange(lo, lo + p.shape[1], dtype=np.float64)


def fit_senteval(train: tuple, dev: tuple, test: tuple, *, classes: tuple[int, int], seed: int = 1111,
                 batch_size: int = 64, epochs_per_round: int = 50, max_epochs: int = 1000,
                 patience: int = 4, learning_rate: float = 1e-3, keep_predictions: bool = False) -> dict:
    """SentEval's relatedness classifier (module docstring): a softmax over the score classes
    trained on train, the round with the best dev Pearson r kept, scored on test.

    Args:
      train, dev, test: ``(features float [n, F], gold float [n])`` each, e.g. from
        ``senteval_features``.
      classes: ``(lo, hi)``, the integer score classes (``SCORE_CLASSES``).
      seed: weight initialisation and batch order (SentEval's default 1111).
      batch_size, epochs_per_round, max_epochs, patience, learning_rate: SentEval's 64, 50,
        1000, 4 (training stops at the patience-th round without a new best dev r, counted over
        the whole run) and Adam's 1e-3.
      keep_predictions: also return ``"test_predictions"`` (float [n]), the predicted test
        scores, for a paired test of two encoders on the same test pairs.

    Returns:
      ``{"test": {"pearson", "spearman", "n", ...}, "dev": {...}, "epochs": int (trained),
      "best_epoch": int, "dev_by_epoch": {epoch: dev pearson}, "classes": [lo, ..., hi],
      "seed", "regressor": SENTEVAL_REGRESSOR, "model": "senteval", "protocol": "supervised"}``.

    Raises:
      ValueError: a gold score outside the classes; mismatched rows; empty splits.
    """
    lo, hi = int(classes[0]), int(classes[1])
    x_tr, x_dev, x_te = (np.asarray(split[0], dtype=np.float32) for split in (train, dev, test))
    for name, (x, y) in (("train", (x_tr, train[1])), ("dev", (x_dev, dev[1])), ("test", (x_te, test[1]))):
        if x.ndim != 2 or x.shape[0] != len(y) or x.shape[0] == 0:
            raise ValueError(f"fit_senteval: {name} needs [n, F] features and [n] scores, got {x.shape} and {len(y)}.")
    y_tr = encode_scores(train[1], lo, hi).astype(np.float32)
    encode_scores(dev[1], lo, hi), encode_scores(test[1], lo, hi)  # the same range check on every split
    k = hi - lo + 1
    model = keras.Sequential([keras.Input((x_tr.shape[1],)),
                              keras.layers.Dense(k, activation="softmax",
                                                 kernel_initializer=keras.initializers.GlorotUniform(seed),
                                                 bias_initializer="zeros")])
    # SentEval's loss is torch's MSELoss summed over the batch and the classes; Keras' "sum"
    # reduction sums the per-example mean over the k classes: a constant factor, to which
    # Adam's steps are invariant (up to its epsilon).
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=keras.losses.MeanSquaredError(reduction="sum"))
    rng = np.random.default_rng(seed)
    x_const, y_const = tf.constant(x_tr), tf.constant(y_tr)

    def round_data(epochs: int):
        perms = np.stack([rng.permutation(x_tr.shape[0]) for _ in range(epochs)])
        ds = tf.data.Dataset.from_tensor_slices(perms).flat_map(
            lambda p: tf.data.Dataset.from_tensor_slices(p).batch(batch_size))
        steps = epochs * -(-x_tr.shape[0] // batch_size)
        ds = ds.map(lambda idx: (tf.gather(x_const, idx), tf.gather(y_const, idx)))
        return ds.apply(tf.data.experimental.assert_cardinality(steps))  # a known length: no "ran out" warning

    def predict(x):
        return expected_scores(model.predict(x, batch_size=4096, verbose=0), lo)

    best, best_weights, best_epoch, stale, epoch = -np.inf, None, 0, 0, 0
    dev_by_epoch = {}
    while epoch < max_epochs:
        n = min(epochs_per_round, max_epochs - epoch)
        model.fit(round_data(n), epochs=1, verbose=0, shuffle=False)  # the order is round_data's
        epoch += n
        r = correlations(predict(x_dev), dev[1])["pearson"]
        r = -1.0 if r is None else float(r)  # constant predictions: no signal
        dev_by_epoch[str(epoch)] = r
        if r > best:
            best, best_weights, best_epoch = r, model.get_weights(), epoch
        else:
            stale += 1
            if stale >= patience:
                break
    model.set_weights(best_weights)
    predicted = predict(x_te)
    kept = {"test_predictions": predicted.astype(np.float64).tolist()} if keep_predictions else {}
    return {
        **kept,
        "test": correlations(predicted, test[1]),
        "dev": correlations(predict(x_dev), dev[1]),
        "epochs": epoch,
        "best_epoch": best_epoch,
        "dev_by_epoch": dev_by_epoch,
        "classes": list(range(lo, hi + 1)),
        "seed": int(seed),
        "regressor": SENTEVAL_REGRESSOR,
        "model": "senteval",
        "protocol": "supervised",
    }


def _featurise(cache: EmbeddingCache, pairs: SentencePairs, features=relatedness_features) -> tuple:
    cache.add(list(pairs.sentences1) + list(pairs.sentences2))
    return features(cache(pairs.sentences1), cache(pairs.sentences2)), pairs.scores


def evaluate_supervised_sts(encoder: Encoder, sts_dir: str | Path, model: str = "ridge", seed: int = 1111, *,
                            keep_predictions: bool = False) -> dict:
    """Supervised STS-B and SICK-R (whichever folders exist under ``sts_dir``).

    Args:
      encoder: strings → float [n, N] (frozen).
      sts_dir: the STS root holding ``STSBenchmark/`` and/or ``SICK/``.
      model: ``"ridge"`` (``fit_select_score``) or ``"senteval"`` (``fit_senteval``, SentEval's
        relatedness classifier); see the module docstring.
      seed: the SentEval classifier's seed (the ridge has no randomness).
      keep_predictions: (``"senteval"`` only) each result also holds ``"test_predictions"``.

    Returns:
      ``{"STSBenchmark": result, "SICK": result}``, each ``fit_select_score``'s or
      ``fit_senteval``'s dict (both hold ``"model"`` and ``"regressor"``).

    Raises:
      FileNotFoundError: neither ``STSBenchmark/`` nor ``SICK/`` exists.
      ValueError: an unknown ``model``.
      MissingExtraError (an ImportError): scikit-learn is missing (the ``[eval]`` extra).
    """
    if model not in SUPERVISED_MODELS:
        raise ValueError(f"supervised STS model must be one of {SUPERVISED_MODELS}, got {model!r}.")
    require("sklearn.linear_model", "Supervised STS")  # named before anything is encoded
    sts_dir = Path(sts_dir)
    cache = cached(encoder)
    features = relatedness_features if model == "ridge" else senteval_features

    def fit(task: str, splits: list) -> dict:
        data = [_featurise(cache, p, features) for p in splits]
        if model == "ridge":
            return fit_select_score(*data)
        return fit_senteval(*data, classes=SCORE_CLASSES[task], seed=seed, keep_predictions=keep_predictions)

    out = {}
    if (sts_dir / "STSBenchmark").is_dir():
        out["STSBenchmark"] = fit("STSBenchmark", [read_sts_benchmark(sts_dir, s) for s in ("train", "dev", "test")])
    if (sts_dir / "SICK").is_dir():
        out["SICK"] = fit("SICK", [read_sick(sts_dir, s) for s in ("train", "trial", "test")])
    if not out:
        raise FileNotFoundError(f"No STSBenchmark/ or SICK/ under {str(sts_dir)!r} for supervised STS.")
    return out
