"""Kolluru eq. 3 (after Wang et al. 2016), read independently of the implementation.

    L = Σ_i Σ_{j∈N(x_i)} [m + d(x_i, y_i) − d(x_i, y_j)]₊            image anchored
      + λ Σ_i′ Σ_{j∈N(y_i′)} [m + d(x_i′, y_i′) − d(x_j, y_i′)]₊      sentence anchored

x are images, y sentences. With cosine similarity instead of a distance the hinge
is [m − cos(pos) + cos(neg)]₊, and only the K largest hinges of each anchor are
kept ("hardest", K-hard mining) or all of them ("all"). λ weights the
sentence-anchored term only.
"""

import math

import numpy as np
import pytest

from grounded_text.losses import TripletRankingLoss, triplet_ranking_loss
from grounded_text.papers.presets import get_preset

B, N = 7, 5
# Rows 0–1 are two captions of image 10, rows 3–5 three captions of image 30.
IDS = np.array([10, 10, 20, 30, 30, 30, 40], np.int64)


def cos(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.dot(a, b) / (math.sqrt(np.dot(a, a)) * math.sqrt(np.dot(b, b))))


def keep(hinges, negatives, k):
    """The hinges of one anchor that enter the sum."""
    if negatives == "all":
        return hinges
    return sorted(hinges, reverse=True)[:k]  # K hardest (fewer if fewer negatives)


def image_anchored(x, y, ids, m, negatives, k):
    """Σ_i Σ_{j∈N(x_i)} [m − cos(x_i, y_i) + cos(x_i, y_j)]₊: anchor image x_i, negatives sentences y_j."""
    total = 0.0
    for i in range(len(x)):
        hinges = [max(0.0, m - cos(x[i], y[i]) + cos(x[i], y[j])) for j in range(len(y)) if ids[j] != ids[i]]
        total += sum(keep(hinges, negatives, k))
    return total


def sentence_anchored(x, y, ids, m, negatives, k):
    """Σ_i′ Σ_{j∈N(y_i′)} [m − cos(x_i′, y_i′) + cos(x_j, y_i′)]₊: anchor sentence y_i′, negatives images x_j."""
    total = 0.0
    for ip in range(len(y)):
        hinges = [max(0.0, m - cos(x[ip], y[ip]) + cos(x[j], y[ip])) for j in range(len(x)) if ids[j] != ids[ip]]
        total += sum(keep(hinges, negatives, k))
    return total


def eq3(text, image, ids, m, lam, negatives, k):
    if ids is None:
        ids = np.arange(len(text))
    return (image_anchored(image, text, ids, m, negatives, k)
            + lam * sentence_anchored(image, text, ids, m, negatives, k))


def batch(seed, with_ids):
    rng = np.random.default_rng(seed)
    text = rng.normal(size=(B, N)).astype(np.float32)
    if with_ids:
        # One image vector per image id: rows of one image share it.
        per_image = {i: rng.normal(size=N) for i in np.unique(IDS)}
        image = np.stack([per_image[i] for i in IDS])
    else:
        image = rng.normal(size=(B, N))
    image = (image + 0.7 * text).astype(np.float32)  # correlated, so positives tend to win
    return text, image, (IDS if with_ids else None)


@pytest.mark.parametrize("lam", [0.1, 1.0, 2.5])
@pytest.mark.parametrize("negatives,k", [("all", 1), ("hardest", 1), ("hardest", 2), ("hardest", 3)])
@pytest.mark.parametrize("with_ids", [False, True])
@pytest.mark.parametrize("margin", [0.1, 0.5])
def test_matches_independent_eq3(with_ids, negatives, k, lam, margin):
    text, image, ids = batch(3 + int(with_ids), with_ids)
    expected = eq3(text, image, ids, margin, lam, negatives, k)
    assert expected > 0
    got = float(triplet_ranking_loss(text, image, ids, margin=margin, direction_weight=lam, negatives=negatives, k=k))
    assert got == pytest.approx(expected, abs=1e-5)
    layer = TripletRankingLoss(margin=margin, direction_weight=lam, negatives=negatives, k=k)
    assert float(layer(text, image, image_ids=ids)) == pytest.approx(expected, abs=1e-5)


def test_two_captions_of_one_image_are_never_negatives():
    text, image, ids = batch(5, with_ids=True)
    with_ids = float(triplet_ranking_loss(text, image, ids, margin=0.5, direction_weight=0.1, negatives="all"))
    # Treating every row as its own image counts same-image pairs as negatives: a different value.
    without = float(triplet_ranking_loss(text, image, None, margin=0.5, direction_weight=0.1, negatives="all"))
    assert with_ids == pytest.approx(eq3(text, image, ids, 0.5, 0.1, "all", 1), abs=1e-5)
    assert without == pytest.approx(eq3(text, image, None, 0.5, 0.1, "all", 1), abs=1e-5)
    assert abs(with_ids - without) > 1e-3


def test_lambda_weights_the_sentence_anchored_term_not_the_image_anchored_one():
    # Images all close to one direction: for a sentence anchor every negative image is
    # nearly as similar as its own, so the two terms differ.
    rng = np.random.default_rng(11)
    text = rng.normal(size=(B, N)).astype(np.float32)
    image = (rng.normal(size=N) + 0.3 * rng.normal(size=(B, N)) + 0.2 * text).astype(np.float32)
    m, lam = 0.1, 0.1
    img = image_anchored(image, text, np.arange(B), m, "all", 1)
    sen = sentence_anchored(image, text, np.arange(B), m, "all", 1)
    eq3_value, swapped = img + lam * sen, sen + lam * img
    assert abs(eq3_value - swapped) > 0.1  # the weighting is observable on this batch
    got = float(TripletRankingLoss(margin=m, direction_weight=lam, negatives="all")(text, image))
    assert got == pytest.approx(eq3_value, abs=1e-5)
    assert got != pytest.approx(swapped, abs=1e-2)


def test_lambda_on_sentence_anchored_term_hand_built():
    # S[i, j] = cos(t_i, v_j) = [[1, 0], [0.8, 0.6]], m = 0.1.
    # Sentence anchored: caption 1 vs image 0: [0.1 − 0.6 + 0.8]₊ = 0.3; caption 0: [0.1 − 1 + 0]₊ = 0.
    # Image anchored: image 0 vs caption 1: [0.1 − 1 + 0.8]₊ = 0; image 1 vs caption 0: [0.1 − 0.6 + 0]₊ = 0.
    text = np.array([[1.0, 0.0], [0.8, 0.6]], np.float32)
    image = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    for negatives in ("all", "hardest"):
        got = float(triplet_ranking_loss(text, image, margin=0.1, direction_weight=0.1, negatives=negatives, k=1))
        assert got == pytest.approx(0.1 * 0.3, abs=1e-6)  # old weighting gave 0.3
        # Swapping the modalities moves the violation to the image-anchored term: weight 1.
        got = float(triplet_ranking_loss(image, text, margin=0.1, direction_weight=0.1, negatives=negatives, k=1))
        assert got == pytest.approx(0.3, abs=1e-6)


def test_two_branch_preset_uses_the_thesis_constants():
    # Kolluru: m = 0.1, λ = 0.1 (sentence-anchored term), K = 1 hardest negative, dropout 0.5.
    record = get_preset("two_branch_khard").config
    assert record["model"]["loss_params"] == {"margin": 0.1, "direction_weight": 0.1, "negatives": "hardest", "k": 1}
    assert record["model"]["encoder"]["dropout"] == 0.5
    assert record["train"]["learning_rate"] == 2e-4 and record["data"]["batch_size"] == 64


def test_two_branch_model_builds_its_loss_with_the_thesis_constants():
    from grounded_text.config.schema import ModelConfig, TextConfig
    from grounded_text.layers import build_vocabulary
    from grounded_text.models import build_model

    vocab = build_vocabulary(["a dog runs", "a man rides a bike"])
    cfg = ModelConfig(name="two_branch_khard", embedding_dim=8, word_vectors="none", encoder={"hidden_units": [8]})
    gm = build_model(cfg, TextConfig(), vocab, feature_dim=5, seed=0)
    losses = [layer for layer in gm.train_model.layers if isinstance(layer, TripletRankingLoss)]
    assert len(losses) == 1
    loss = losses[0]
    assert (loss.margin, loss.direction_weight, loss.negatives, loss.k) == (0.1, 0.1, "hardest", 1)
