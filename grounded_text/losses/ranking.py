"""Bidirectional triplet ranking losses with in-batch negative selection.

For a batch of B caption embeddings ``t_i`` and image embeddings ``v_i`` (row i of
both is a matching pair), with cosine similarity ``S[i, j] = cos(t_i, v_j)``, the
loss of Kolluru (two-branch network, §3.2, eq. 3; after Wang et al., "Learning Two-Branch
Neural Networks for Image-Text Matching Tasks", 2017, the thesis's [2], and their 2016
"Learning Deep Structure-Preserving Image-Text Embeddings", the bidirectional ranking
constraints) is

    L =     Σ_i Σ_{j ∈ N_i} [m − S[i, i] + S[j, i]]₊      (image anchored: image i,
                                                          negatives = other captions j)
      + λ Σ_i Σ_{j ∈ N_i} [m − S[i, i] + S[i, j]]₊      (sentence anchored: caption i,
                                                          negatives = other images j)

The thesis writes it with a distance d; with cosine similarity the hinge
``[m + d(pos) − d(neg)]₊`` becomes ``[m − S_pos + S_neg]₊``. Kolluru eq. 3, with
images x and sentences y:

    Σ_i Σ_{j ∈ N(x_i)} [m + d(x_i, y_i) − d(x_i, y_j)]₊
      + λ Σ_i′ Σ_{j ∈ N(y_i′)} [m + d(x_i′, y_i′) − d(x_j, y_i′)]₊

so λ (``direction_weight``) weights the **sentence-anchored** term (anchor a
sentence y_i′, negatives other images x_j: row i of S) and the image-anchored term
(anchor an image x_i, negatives other sentences y_j: column i of S) is unweighted.
The thesis uses m = 0.1, λ = 0.1 (§4.2) and K = 1 (§4.4.2, Tables 1-2; see
``models/two_branch.py``).

``m`` is the margin and ``N_i`` the selected negatives of anchor i among the rows
whose image id differs from row i's (two captions of one image are never a negative
pair: no false negatives). Negative selection:

* ``"all"``: every in-batch negative — the hinge sum of Merkx & Frank (2019, §3.1.2,
  after Kiros et al. 2014);
* ``"hardest"``: the K negatives with the largest violation per anchor
  (``k``; K = 1 is the max-violation loss of VSE++, Faghri et al. 2018, eq. 5;
  Kolluru's K-hard mining, §3.3); an anchor with fewer than K negatives uses all;
* ``"semi_hard"``: negatives ranked below the positive but inside the margin,
  ``S_pos − m < S_neg < S_pos`` (Schroff et al. 2015, FaceNet §3.2);
* ``"hard"``: negatives ranked at or above the positive, ``S_neg >= S_pos``
  (FaceNet's hard negatives). ``semi_hard`` ∪ ``hard`` are exactly the negatives
  with a non-zero hinge, so ``"all"`` = ``"semi_hard"`` + ``"hard"``.

Selection masks are computed on stopped-gradient similarities; the gradient flows
through the selected hinge terms only.

Reductions: ``"sum"`` (the papers' formulas), ``"mean"`` (÷ B) and ``"mean_matrix"``
(÷ B²): the mean over the B × B cost matrix whose zeroed diagonal still counts, as the
authors' code of Merkx & Frank reduces its hinge (DannyMerkx/caption2image, the
``NLE2019`` code at 8a4dc2c, ``PyTorch/functions/costum_loss.py:39``, ``cost.mean()``).
Adam is nearly invariant to that constant factor, but not a margin-based auxiliary loss
added to it, a gradient-norm clip or Adam's epsilon.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from grounded_text.losses.common import (
    BatchLoss,
    check_batch,
    same_image_mask,
    similarity_matrix,
)

NEGATIVES = ("all", "hardest", "semi_hard", "hard")
REDUCTIONS = ("sum", "mean", "mean_matrix")


def _check_reduction(name: str, reduction: str) -> str:
    if reduction not in REDUCTIONS:
        raise ValueError(f"{name}: reduction must be one of {REDUCTIONS}, got {reduction!r}.")
    return reduction


def _anchor_losses(negative_sims, positive_sims, valid, margin, negatives, k):
    """Per-anchor hinge sums [B] over the selected negatives of each row."""
    positive = positive_sims[:, None]
    cost = tf.nn.relu(margin - positive + negative_sims)
    if negatives == "all":
        return tf.reduce_sum(tf.where(valid, cost, 0.0), axis=1)
    if negatives == "hardest":
        kk = tf.minimum(tf.constant(k, tf.int32), tf.shape(cost)[1])
        # Non-negatives get −1 < any hinge; relu clears them when an anchor has < K negatives.
        top = tf.math.top_k(tf.where(valid, cost, -1.0), k=kk, sorted=False).values
        return tf.reduce_sum(tf.nn.relu(top), axis=1)
    neg = tf.stop_gradient(negative_sims)
    pos = tf.stop_gradient(positive)
    if negatives == "semi_hard":
        chosen = valid & (neg < pos) & (neg > pos - margin)
    else:  # "hard"
        chosen = valid & (neg >= pos)
    return tf.reduce_sum(tf.where(chosen, cost, 0.0), axis=1)


def triplet_ranking_loss(
    text,
    image,
    image_ids=None,
    *,
    margin: float = 0.2,
    direction_weight: float = 1.0,
    negatives: str = "all",
    k: int = 1,
    reduction: str = "sum",
):
    """Bidirectional triplet ranking loss (module docstring; Kolluru eq. 3).

    Args:
      text: float [B, N] caption embeddings (normalised here: cosine similarity).
      image: float [B, N] image embeddings.
      image_ids: int [B] or ``None`` (every row its own image).
      margin: m (cosine units).
      direction_weight: λ, weight of the sentence-anchored term (Kolluru eq. 3):
        the caption → image hinges, anchor a caption, negatives other images. The
        image-anchored term has weight 1. The thesis uses λ = 0.1 (§4.2).
      negatives: ``"all" | "hardest" | "semi_hard" | "hard"``.
      k: K for ``"hardest"`` (ignored otherwise), >= 1.
      reduction: ``"sum"`` over anchors (the papers), ``"mean"`` (÷ B) or
        ``"mean_matrix"`` (÷ B², the authors' code of Merkx & Frank: ``cost.mean()`` over
        the B × B matrix, ``PyTorch/functions/costum_loss.py:39`` at caption2image 8a4dc2c).

    Returns:
      ``float32`` scalar >= 0. A batch with no negative pair (one image) gives 0.

    Raises:
      ValueError: unknown ``negatives``/``reduction``, ``k < 1``.

    Example:
      >>> text, image = [[1.0, 0.0], [1.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]
      >>> round(float(triplet_ranking_loss(text, image, margin=0.2)), 4)  # caption 1: [0.2 − 0.7071 + 0.7071]₊
      0.2
      >>> round(float(triplet_ranking_loss(text, image, margin=0.2, direction_weight=0.1)), 4)  # sentence anchored
      0.02
      >>> float(triplet_ranking_loss(text, image, image_ids=[5, 5]))  # one image: no negatives
      0.0
    """
    if negatives not in NEGATIVES:
        raise ValueError(f"triplet_ranking_loss: negatives must be one of {NEGATIVES}, got {negatives!r}.")
    if int(k) != k or k < 1:
        raise ValueError(f"triplet_ranking_loss: k must be an integer >= 1, got {k}.")
    _check_reduction("triplet_ranking_loss", reduction)
    sims = similarity_matrix(text, image)  # [B, B], S[i, j] = cos(t_i, v_j)
    batch = tf.shape(sims)[0]
    valid = tf.logical_not(same_image_mask(image_ids, batch))
    positive = tf.linalg.diag_part(sims)
    # Sentence anchored: caption i against the images of row i (Kolluru eq. 3, λ term).
    sentence_anchored = _anchor_losses(sims, positive, valid, margin, negatives, int(k))
    # Image anchored: image i against the captions of column i (eq. 3, unweighted term).
    image_anchored = _anchor_losses(
        tf.transpose(sims), positive, tf.transpose(valid), margin, negatives, int(k)
    )
    loss = tf.reduce_sum(image_anchored) + direction_weight * tf.reduce_sum(sentence_anchored)
    if reduction == "mean":
        loss = loss / tf.cast(batch, tf.float32)
    elif reduction == "mean_matrix":
        loss = loss / tf.cast(batch * batch, tf.float32)
    return loss


@keras.saving.register_keras_serializable(package="grounded_text")
class TripletRankingLoss(BatchLoss):
    """Bidirectional triplet ranking loss layer (Kolluru eq. 3; module docstring).

    Presets: ``negatives="all"`` is the hinge sum of Merkx & Frank (2019);
    ``negatives="hardest", k=1`` is VSE++ max-violation (Faghri et al. 2018);
    ``negatives="hardest", k=K`` is Kolluru's K-hard negative mining.

    Args:
      margin: m > 0 (cosine units), default 0.2 (VSE++).
      direction_weight: λ >= 0, weight of the sentence-anchored term (Kolluru
        eq. 3): anchor a caption, negatives other images; the image-anchored term
        has weight 1. Default 1.0 (both directions equal, VSE++); the thesis uses 0.1 (§4.2).
      negatives: ``"all" | "hardest" | "semi_hard" | "hard"``.
      k: K hardest negatives per anchor (``"hardest"`` only), >= 1.
      reduction: ``"sum"`` (default, the papers), ``"mean"`` (÷ B) or ``"mean_matrix"``
        (÷ B², as the authors' code of Merkx & Frank averages its cost matrix:
        caption2image 8a4dc2c, ``PyTorch/functions/costum_loss.py:39``).

    Call args:
      text, image: float [B, N]; image_ids: optional int [B] — rows of one image
      are never each other's negatives.

    Returns:
      ``float32`` scalar >= 0.

    Raises:
      ValueError: bad ``negatives``, ``k``, ``reduction``, ``margin`` or
      ``direction_weight``.

    Example:
      >>> text = tf.constant([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
      >>> image = tf.constant([[1.0, 0.2], [0.0, 1.0], [1.0, 1.0]])
      >>> losses = {n: TripletRankingLoss(margin=0.2, negatives=n)(text, image) for n in NEGATIVES}
      >>> {n: round(float(v), 4) for n, v in losses.items()}  # "all" = "semi_hard" + "hard"
      {'all': 2.548, 'hardest': 2.023, 'semi_hard': 0.0515, 'hard': 2.4965}
      >>> round(float(TripletRankingLoss(negatives="hardest")(text, image, image_ids=tf.constant([0, 0, 1]))), 4)
      1.9716
    """

    def __init__(
        self,
        margin: float = 0.2,
        direction_weight: float = 1.0,
        negatives: str = "all",
        k: int = 1,
        reduction: str = "sum",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if negatives not in NEGATIVES:
            raise ValueError(f"TripletRankingLoss: negatives must be one of {NEGATIVES}, got {negatives!r}.")
        if int(k) != k or k < 1:
            raise ValueError(f"TripletRankingLoss: k must be an integer >= 1, got {k}.")
        if not margin > 0:
            raise ValueError(f"TripletRankingLoss: margin must be > 0, got {margin}.")
        if not direction_weight >= 0:
            raise ValueError(f"TripletRankingLoss: direction_weight must be >= 0, got {direction_weight}.")
        self.margin = float(margin)
        self.direction_weight = float(direction_weight)
        self.negatives = negatives
        self.k = int(k)
        self.reduction = _check_reduction("TripletRankingLoss", reduction)

    def batch_loss(self, text, image, image_ids=None, training=None):
        check_batch("TripletRankingLoss", text, image, image_ids)
        return triplet_ranking_loss(
            text,
            image,
            image_ids,
            margin=self.margin,
            direction_weight=self.direction_weight,
            negatives=self.negatives,
            k=self.k,
            reduction=self.reduction,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            margin=self.margin,
            direction_weight=self.direction_weight,
            negatives=self.negatives,
            k=self.k,
            reduction=self.reduction,
        )
        return config
