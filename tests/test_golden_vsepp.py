"""Our bidirectional triplet ranking loss against VSE++'s ``ContrastiveLoss``
(fartashf/vsepp ``model.py:245-287`` at commit ``abe382f``).

The fixture ``tests/fixtures/vsepp/contrastive_loss.npz`` was written by
``tests/fixtures/vsepp/make_fixture.py`` with PyTorch from their code unmodified; this test
needs NumPy and our package only. VSE++ sums the hinges (no mean): ``max_violation=False``
is our ``negatives="all"`` and ``max_violation=True`` (their eq. 5) our ``negatives="hardest",
k=1``, both with ``direction_weight=1`` and ``reduction="sum"``. Their scores are dot
products of L2-normalised embeddings (``cosine_sim``, ``model.py:230-233``, after ``l2norm``
in each encoder); ours normalise inside the loss, so both are fed the same
pre-normalisation vectors and the gradients are taken with respect to those.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "vsepp" / "contrastive_loss.npz"
COMMIT = "abe382fd9c751d1b92c95030df8fb804a7d5ef53"
OURS = {"sum": {"negatives": "all"}, "max_violation": {"negatives": "hardest", "k": 1}}
LOSS_TOL, GRAD_TOL = 1e-5, 1e-4


@pytest.fixture(scope="module")
def fx():
    with np.load(FIXTURE, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def ours(fx, label, **override):
    import tensorflow as tf

    from grounded_text.losses.ranking import triplet_ranking_loss

    image = tf.Variable(fx["image_raw"])
    caption = tf.Variable(fx["caption_raw"])
    params = {"margin": float(fx["margin"]), "direction_weight": 1.0, "reduction": "sum", **OURS[label], **override}
    with tf.GradientTape() as tape:
        loss = triplet_ranking_loss(caption, image, **params)
    g_image, g_caption = tape.gradient(loss, [image, caption])
    return float(loss), g_image.numpy(), g_caption.numpy()


def test_fixture_provenance(fx):
    assert str(fx["commit"]) == COMMIT and str(fx["repository"]) == "fartashf/vsepp"
    assert fx["image_raw"].shape == (6, 8)
    # Their scores are cosines: the embeddings are unit vectors.
    np.testing.assert_allclose(np.linalg.norm(fx["image"], axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(fx["scores"], fx["image"] @ fx["caption"].T, atol=1e-6)


@pytest.mark.parametrize("label", sorted(OURS))
def test_loss_and_gradients(fx, label):
    loss, g_image, g_caption = ours(fx, label)
    assert abs(loss - float(fx[f"{label}.loss"])) < LOSS_TOL
    np.testing.assert_allclose(g_image, fx[f"{label}.grad_image"], rtol=0, atol=GRAD_TOL)
    np.testing.assert_allclose(g_caption, fx[f"{label}.grad_caption"], rtol=0, atol=GRAD_TOL)


def test_the_fixture_has_inactive_and_active_hinges(fx):
    """Both settings are exercised: some hinges are zero, and max violation keeps fewer terms."""
    s, m = fx["scores"], float(fx["margin"])
    hinge = np.maximum(0.0, m + s - np.diag(s)[:, None])
    np.fill_diagonal(hinge, 0.0)
    assert 0 < (hinge > 0).sum() < hinge.size - len(s)
    assert float(fx["max_violation.loss"]) < float(fx["sum.loss"])


def test_planted_differences_fail(fx):
    """The other negative selection, or a mean instead of VSE++'s sum, misses by far more than
    the tolerance; a scale difference is a fact to state, not noise."""
    for label, other in (("sum", "max_violation"), ("max_violation", "sum")):
        loss, _, _ = ours(fx, label, **{"k": 1, **OURS[other]})
        assert abs(loss - float(fx[f"{label}.loss"])) > 100 * LOSS_TOL
        loss, g_image, _ = ours(fx, label, reduction="mean")
        assert abs(loss * 6 - float(fx[f"{label}.loss"])) < LOSS_TOL  # mean = sum / B
        assert abs(loss - float(fx[f"{label}.loss"])) > 100 * LOSS_TOL
        assert np.abs(g_image - fx[f"{label}.grad_image"]).max() > 10 * GRAD_TOL
