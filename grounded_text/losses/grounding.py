"""Grounding losses of Bordes et al. (EMNLP 2019), "Incorporating Visual Semantics
into Sentence Representations within a Grounded Space", §3.2 and §4.

The losses act in the grounded space: ``text`` is g(f(s)) (the caller applies the
projection g), ``image`` the images' visual vectors. With ``C`` the in-batch cosine
similarity matrix of ``text``:

* cluster loss (eq. 2), visually equivalent sentences (captions of one image)
  closer than visually different ones by a margin γ:
  ``L_C = E_s E_{s⁺, s⁻} [γ − cos(g(s), g(s⁺)) + cos(g(s), g(s⁻))]₊``;
* perceptual loss (eq. 3): ``L_P = −ρ({cos(g(s_i), g(s_j))}_{i<j}, {cos(v_i, v_j)}_{i<j})``;
* their weighted sum ``α_C L_C + α_P L_P`` (the C_g + P_g model);
* the cross-modal projection baseline CM: ``[γ − cos(f(s), v_s) + cos(f(s), v⁻)]₊``.

The paper samples one s⁺/s⁻ (or v⁻) per sentence; these losses average over every
in-batch choice instead (the expectation of the sampled loss, with lower variance).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from grounded_text.losses.common import (
    BatchLoss,
    check_batch,
    check_reduction,
    same_image_mask,
    similarity_matrix,
)
from grounded_text.losses.correlation import PEARSON_EPSILON


def _reduce(per_anchor, anchor_valid, reduction):
    mask = tf.cast(anchor_valid, tf.float32)
    total = tf.reduce_sum(per_anchor * mask)
    if reduction == "sum":
        return total
    return total / tf.maximum(tf.reduce_sum(mask), 1.0)


def cluster_loss(text, image_ids, margin: float = 0.5, reduction: str = "mean"):
    """Cluster loss L_C of Bordes et al. (2019), eq. 2.

    For anchor i, ``P_i`` = other rows of the same image (visually equivalent),
    ``N_i`` = rows of other images (visually different); the anchor's loss is the
    mean of ``[γ − C[i, p] + C[i, n]]₊`` over all ``(p, n) ∈ P_i × N_i``, with ``C``
    the cosine similarities of ``text``. Anchors without a same-image partner or
    without a different image in the batch contribute nothing and are not counted;
    a batch with no valid anchor gives 0 (finite, zero gradient).

    Args:
      text: float [B, N] sentence vectors in the grounded space.
      image_ids: int [B] (required: it defines visual equivalence).
      margin: γ (cosine units).
      reduction: ``"mean"`` over valid anchors (default) or ``"sum"``.

    Returns:
      ``float32`` scalar >= 0. Memory O(B³).

    Example:
      >>> ids = [0, 0, 1, 1]
      >>> float(cluster_loss([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]], ids))  # clustered
      0.0
      >>> float(cluster_loss([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]], ids))  # mixed
      1.0
    """
    check_reduction("cluster_loss", reduction)
    if image_ids is None:
        raise ValueError("cluster_loss: `image_ids` is required (captions of one image are the positives).")
    sims = similarity_matrix(text, text)
    batch = tf.shape(sims)[0]
    same = same_image_mask(image_ids, batch)
    positive = same & tf.logical_not(tf.eye(batch, dtype=tf.bool))
    negative = tf.logical_not(same)
    hinge = tf.nn.relu(margin - sims[:, :, None] + sims[:, None, :])  # [anchor, p, n]
    pair_mask = tf.cast(positive[:, :, None] & negative[:, None, :], tf.float32)
    pairs = tf.reduce_sum(pair_mask, axis=[1, 2])
    per_anchor = tf.reduce_sum(hinge * pair_mask, axis=[1, 2]) / tf.maximum(pairs, 1.0)
    return _reduce(per_anchor, pairs > 0, reduction)


def perceptual_loss(text, image, epsilon: float = PEARSON_EPSILON):
    """Perceptual loss L_P of Bordes et al. (2019), eq. 3.

    ``L_P = −ρ(x, y)`` with ``x = {cos(t_i, t_j)}_{i<j}`` and ``y = {cos(v_i, v_j)}_{i<j}``
    the strict upper triangles of the in-batch text–text and image–image cosine
    similarity matrices, ρ Pearson's correlation (``pearson_correlation``: 0 when
    either side has zero variance, e.g. B = 2 or all-equal vectors).

    Args:
      text: float [B, N] sentence vectors in the grounded space.
      image: float [B, d] image vectors (any width d; only image–image cosines are used).
      epsilon: variance floor of the Pearson correlation.

    Returns:
      ``float32`` scalar in [−1, 1].

    Example:
      >>> vectors = [[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]
      >>> round(float(perceptual_loss(vectors, vectors)), 4)  # same geometry: ρ = 1
      -1.0
      >>> round(float(perceptual_loss(vectors, [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])), 4)
      0.5
    """
    text_sims = similarity_matrix(text, text)
    image_sims = similarity_matrix(image, image)
    batch = tf.shape(text_sims)[0]
    # Pearson over the strict upper triangle, written with weights instead of a
    # boolean mask so the shapes stay static (XLA-friendly).
    upper = tf.linalg.band_part(tf.ones([batch, batch]), 0, -1) - tf.eye(batch)
    count = tf.maximum(tf.reduce_sum(upper), 1.0)

    def centred(m):
        return (m - tf.reduce_sum(m * upper) / count) * upper

    x, y = centred(text_sims), centred(image_sims)
    cov = tf.reduce_sum(x * y) / count
    return -cov / (
        tf.sqrt(tf.reduce_sum(x * x) / count + epsilon) * tf.sqrt(tf.reduce_sum(y * y) / count + epsilon)
    )


def cross_modal_projection_loss(text, image, image_ids=None, margin: float = 0.5, reduction: str = "mean"):
    """Cross-modal projection baseline CM of Bordes et al. (2019, §4).

    The sentence vector f(s) is projected towards its own image: anchor i's loss is
    the mean of ``[γ − cos(t_i, v_i) + cos(t_i, v_j)]₊`` over the rows j of other
    images (``image_ids``; all other rows without ids). Anchors with no other image
    in the batch are not counted; a one-image batch gives 0.

    Args:
      text: float [B, N] sentence vectors; image: float [B, N] image vectors.
      image_ids: int [B] or ``None``.
      margin: γ (cosine units).
      reduction: ``"mean"`` over anchors (default) or ``"sum"``.

    Returns:
      ``float32`` scalar >= 0.

    Example:
      >>> text, image = [[1.0, 0.0], [1.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]
      >>> round(float(cross_modal_projection_loss(text, image, margin=0.5)), 4)  # (0 + 0.5) / 2
      0.25
      >>> float(cross_modal_projection_loss(text, image, image_ids=[4, 4]))  # one image
      0.0
    """
    check_reduction("cross_modal_projection_loss", reduction)
    sims = similarity_matrix(text, image)
    batch = tf.shape(sims)[0]
    negative = tf.cast(tf.logical_not(same_image_mask(image_ids, batch)), tf.float32)
    hinge = tf.nn.relu(margin - tf.linalg.diag_part(sims)[:, None] + sims)
    count = tf.reduce_sum(negative, axis=1)
    per_anchor = tf.reduce_sum(hinge * negative, axis=1) / tf.maximum(count, 1.0)
    return _reduce(per_anchor, count > 0, reduction)


def _check_margin(name, margin):
    if not margin > 0:
        raise ValueError(f"{name}: margin must be > 0, got {margin}.")
    return float(margin)


@keras.saving.register_keras_serializable(package="grounded_text")
class ClusterLoss(BatchLoss):
    """Cluster loss L_C (Bordes et al. 2019, eq. 2) as a loss layer; see ``cluster_loss``.

    Needs batches with several captions per image (``make_grouped_dataset``).
    ``image`` is accepted for a uniform interface and ignored.

    Args:
      margin: γ > 0.
      reduction: ``"mean"`` or ``"sum"``.

    Call args:
      text: float [B, N]; image: ignored; image_ids: int [B] (required).

    Raises:
      ValueError: ``image_ids`` is ``None``; bad margin/reduction.

    Example:
      >>> loss = ClusterLoss(margin=0.5)
      >>> text = tf.constant([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
      >>> float(loss(text, None, image_ids=tf.constant([0, 0, 1, 1])))
      1.0
    """

    def __init__(self, margin: float = 0.5, reduction: str = "mean", **kwargs):
        super().__init__(**kwargs)
        self.margin = _check_margin("ClusterLoss", margin)
        self.reduction = check_reduction("ClusterLoss", reduction)

    def batch_loss(self, text, image, image_ids=None, training=None):
        if image_ids is None:
            raise ValueError(
                "ClusterLoss needs `image_ids` (feed batches with an 'image_id' key, e.g. "
                "from make_grouped_dataset)."
            )
        check_batch("ClusterLoss", text, None, image_ids)
        return cluster_loss(text, image_ids, self.margin, self.reduction)

    def get_config(self):
        config = super().get_config()
        config.update(margin=self.margin, reduction=self.reduction)
        return config


@keras.saving.register_keras_serializable(package="grounded_text")
class PerceptualLoss(BatchLoss):
    """Perceptual loss L_P (Bordes et al. 2019, eq. 3) as a loss layer; see ``perceptual_loss``.

    Args:
      epsilon: variance floor of the Pearson correlation.

    Call args:
      text: float [B, N]; image: float [B, d]; image_ids: ignored (two captions
      of one image simply have image–image cosine 1). B >= 2.

    Example:
      >>> loss = PerceptualLoss()
      >>> vectors = tf.constant([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
      >>> round(float(loss(vectors, vectors)), 4)
      -1.0
    """

    def __init__(self, epsilon: float = PEARSON_EPSILON, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = float(epsilon)

    def batch_loss(self, text, image, image_ids=None, training=None):
        check_batch("PerceptualLoss", text, image, image_ids, min_batch=2)
        return perceptual_loss(text, image, self.epsilon)

    def get_config(self):
        config = super().get_config()
        config.update(epsilon=self.epsilon)
        return config


@keras.saving.register_keras_serializable(package="grounded_text")
class GroundingLoss(BatchLoss):
    """``α_C L_C + α_P L_P`` (Bordes et al. 2019, §3.2; the C_g + P_g model).

    Args:
      alpha_cluster: α_C >= 0; alpha_perceptual: α_P >= 0.
      margin: γ of the cluster loss.
      reduction: of the cluster loss.

    Call args:
      text: float [B, N] grounded-space sentence vectors; image: float [B, d]
      image vectors; image_ids: int [B] (required when α_C > 0). B >= 2.

    Raises:
      ValueError: negative weights; ``image_ids`` missing while α_C > 0.

    Example:
      >>> loss = GroundingLoss(alpha_cluster=1.0, alpha_perceptual=1.0, margin=0.5)
      >>> text = tf.constant([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
      >>> image = tf.constant([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
      >>> round(float(loss(text, image, image_ids=tf.constant([0, 0, 1, 1]))), 4)  # 0 − 1
      -1.0
    """

    def __init__(
        self,
        alpha_cluster: float = 1.0,
        alpha_perceptual: float = 1.0,
        margin: float = 0.5,
        reduction: str = "mean",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if alpha_cluster < 0 or alpha_perceptual < 0:
            raise ValueError(
                f"GroundingLoss: weights must be >= 0, got α_C={alpha_cluster}, α_P={alpha_perceptual}."
            )
        self.alpha_cluster = float(alpha_cluster)
        self.alpha_perceptual = float(alpha_perceptual)
        self.margin = _check_margin("GroundingLoss", margin)
        self.reduction = check_reduction("GroundingLoss", reduction)

    def batch_loss(self, text, image, image_ids=None, training=None):
        check_batch("GroundingLoss", text, image, image_ids, min_batch=2)
        loss = tf.constant(0.0)
        if self.alpha_cluster > 0:
            if image_ids is None:
                raise ValueError("GroundingLoss: α_C > 0 needs `image_ids` (batches with an 'image_id' key).")
            loss += self.alpha_cluster * cluster_loss(text, image_ids, self.margin, self.reduction)
        if self.alpha_perceptual > 0:
            loss += self.alpha_perceptual * perceptual_loss(text, image)
        return loss

    def get_config(self):
        config = super().get_config()
        config.update(
            alpha_cluster=self.alpha_cluster,
            alpha_perceptual=self.alpha_perceptual,
            margin=self.margin,
            reduction=self.reduction,
        )
        return config


@keras.saving.register_keras_serializable(package="grounded_text")
class CrossModalProjectionLoss(BatchLoss):
    """Cross-modal projection baseline CM (Bordes et al. 2019, §4) as a loss layer.

    See ``cross_modal_projection_loss``.

    Args:
      margin: γ > 0; reduction: ``"mean"`` or ``"sum"``.

    Call args:
      text, image: float [B, N]; image_ids: optional int [B].

    Example:
      >>> loss = CrossModalProjectionLoss(margin=0.5)
      >>> text, image = tf.constant([[1.0, 0.0], [1.0, 1.0]]), tf.constant([[1.0, 0.0], [0.0, 1.0]])
      >>> round(float(loss(text, image)), 4)
      0.25
    """

    def __init__(self, margin: float = 0.5, reduction: str = "mean", **kwargs):
        super().__init__(**kwargs)
        self.margin = _check_margin("CrossModalProjectionLoss", margin)
        self.reduction = check_reduction("CrossModalProjectionLoss", reduction)

    def batch_loss(self, text, image, image_ids=None, training=None):
        check_batch("CrossModalProjectionLoss", text, image, image_ids)
        return cross_modal_projection_loss(text, image, image_ids, self.margin, self.reduction)

    def get_config(self):
        config = super().get_config()
        config.update(margin=self.margin, reduction=self.reduction)
        return config
