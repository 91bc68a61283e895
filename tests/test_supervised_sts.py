"""Supervised STS regressor (SentEval-style features, ridge, alpha on dev)."""

import numpy as np
import pytest

from grounded_text.evaluation.supervised_sts import fit_select_score, relatedness_features


def test_pair_features_layout():
    u = np.array([[1.0, -2.0]])
    v = np.array([[3.0, 1.0]])
    np.testing.assert_array_equal(relatedness_features(u, v), [[1, -2, 3, 1, 2, 3, 3, -2]])
    with pytest.raises(ValueError, match="equal shape"):
        relatedness_features(u, v[:, :1])


def test_fit_select_score_recovers_a_learnable_target_and_selects_on_dev():
    rng = np.random.default_rng(0)
    def make(n):
        u, v = rng.normal(size=(n, 6)), rng.normal(size=(n, 6))
        x = relatedness_features(u, v)
        y = np.clip(2.5 + x @ np.linspace(-0.3, 0.3, x.shape[1]) + 0.05 * rng.normal(size=n), 0, 5)
        return x, y
    r = fit_select_score(make(800), make(200), make(300))
    assert r["protocol"] == "supervised" and "Ridge" in r["regressor"]
    assert r["test"]["pearson"] > 0.95 and r["test"]["n"] == 300
    assert r["dev_by_alpha"][str(r["alpha"])] == max(r["dev_by_alpha"].values())
    # Pure noise targets: no signal on test.
    x_tr, x_dev, x_te = (rng.normal(size=(n, 24)) for n in (300, 100, 300))
    noise = fit_select_score((x_tr, rng.uniform(0, 5, 300)), (x_dev, rng.uniform(0, 5, 100)),
                             (x_te, rng.uniform(0, 5, 300)))
    assert abs(noise["test"]["pearson"]) < 0.2


# --------------------------------------------------------------- SentEval's relatedness classifier


def _reference_encode(y, lo, hi):
    """Tai et al. (2015) / SentEval ``encode_labels`` written as plain loops over the classes."""
    out = np.zeros((len(y), hi - lo + 1))
    for j, score in enumerate(y):
        f = np.floor(score)
        for i, r in enumerate(range(lo, hi + 1)):
            if r == f + 1:
                out[j, i] = score - f
            if r == f:
                out[j, i] = f - score + 1
    return out


@pytest.mark.parametrize("lo,hi", [(1, 5), (0, 5)])
def test_encode_scores_matches_the_tai_et_al_loops_and_keeps_the_expectation(lo, hi):
    from grounded_text.evaluation.supervised_sts import encode_scores, expected_scores

    y = np.array([lo, lo + 0.25, 2.0, 3.6, hi - 0.01, hi], dtype=np.float64)
    got = encode_scores(y, lo, hi)
    np.testing.assert_allclose(got, _reference_encode(y, lo, hi), atol=1e-12)
    np.testing.assert_allclose(got.sum(1), 1.0)
    np.testing.assert_allclose(expected_scores(got, lo), y, atol=1e-12)
    assert got[3, 3 - lo] == pytest.approx(0.4) and got[3, 4 - lo] == pytest.approx(0.6)
    with pytest.raises(ValueError, match="outside the classes"):
        encode_scores([lo - 0.5], lo, hi)
    with pytest.raises(ValueError, match="outside the classes"):
        encode_scores([np.nan], lo, hi)


def test_senteval_features_layout():
    from grounded_text.evaluation.supervised_sts import senteval_features

    u, v = np.array([[1.0, -2.0]]), np.array([[3.0, 1.0]])
    np.testing.assert_array_equal(senteval_features(u, v), [[2, 3, 3, -2]])
    with pytest.raises(ValueError, match="equal shape"):
        senteval_features(u, v[:, :1])


def _relatedness_data(rng, n, dim=8):
    u, v = rng.normal(size=(n, dim)), rng.normal(size=(n, dim))
    y = np.clip(3.0 + 1.2 * np.tanh((u * v).sum(1)) + 0.1 * rng.normal(size=n), 1, 5)
    return u, v, y


def test_fit_senteval_learns_predicts_the_expectation_and_is_seeded(monkeypatch):
    import keras

    from grounded_text.evaluation import supervised_sts as sup

    rng = np.random.default_rng(0)
    splits = []
    for n in (600, 150, 300):
        u, v, y = _relatedness_data(rng, n)
        splits.append((sup.senteval_features(u, v), y))
    # Keep the fitted model to compare its predictions with a NumPy softmax of its weights.
    built = []
    real_sequential = keras.Sequential
    monkeypatch.setattr(keras, "Sequential", lambda *a, **k: built.append(real_sequential(*a, **k)) or built[-1])
    kw = dict(classes=(1, 5), seed=3, epochs_per_round=5, max_epochs=40, patience=2)
    r = sup.fit_senteval(*splits, **kw)
    assert r["model"] == "senteval" and r["protocol"] == "supervised" and r["classes"] == [1, 2, 3, 4, 5]
    assert r["test"]["n"] == 300 and r["test"]["pearson"] > 0.5
    assert r["dev_by_epoch"][str(r["best_epoch"])] == max(r["dev_by_epoch"].values())
    assert r["dev"]["pearson"] == pytest.approx(r["dev_by_epoch"][str(r["best_epoch"])], abs=1e-6)
    # Predicted score = Σ_r r softmax(xW + b)_r, recomputed in NumPy from the kept weights.
    w, b = built[-1].get_weights()
    logits = splits[2][0] @ w.astype(np.float64) + b
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    ref = p @ np.arange(1, 6)
    assert sup.correlations(ref, splits[2][1])["pearson"] == pytest.approx(r["test"]["pearson"], abs=1e-4)
    # Seeded: the same seed gives the same figures.
    again = sup.fit_senteval(*splits, **kw)
    assert again["test"]["pearson"] == pytest.approx(r["test"]["pearson"], abs=1e-9)
    assert again["dev_by_epoch"] == pytest.approx(r["dev_by_epoch"], abs=1e-9)


def test_evaluate_supervised_sts_refuses_an_unknown_model(tmp_path):
    from grounded_text.evaluation.supervised_sts import evaluate_supervised_sts

    with pytest.raises(ValueError, match="ridge"):
        evaluate_supervised_sts(lambda s: np.zeros((len(s), 2)), tmp_path, model="mlp")
