"""Correlation losses of VETE (Kurach et al. 2017, §3 and §5.2).

For a batch of B captions ``t_i`` and image vectors ``v_i`` (matching by index),
VETE forms the B matching pairs ``(t_i, v_i)`` with label +1 and B mismatched
pairs ``(t_{p(i)}, v_{p(i+1)})`` with label −1, ``p`` a random permutation (so the
mismatched pairs are a derangement: no caption meets its own image). The loss is

    L = −ρ(s, y),   s_j = cos(t, v) of pair j,   y_j ∈ {+1, −1},   j = 1..2B,

with ρ Pearson's correlation coefficient. §5.2 compares it with other losses on
the same 2B pairs — covariance ``L = −cov(s, y)`` and the Surrogate Kendall τ
``L = −SKT_α(s, y)`` — and with the pairwise rank loss of Kiros et al. (2014).

With ``image_ids`` (same id = same image, e.g. several captions of one image in a
batch), a mismatched pair never joins a caption to an image of its own id where the
batch allows it: see ``vete_pair_similarities``.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from grounded_text.losses.common import BatchLoss, check_batch, check_reduction
from grounded_text.losses.ranking import triplet_ranking_loss

PEARSON_EPSILON = 1e-8


def cosine_similarity(a, b, epsilon: float = 1e-12):
    """Row-wise cosine similarity.

    Args:
      a, b: float tensors [B, N].
      epsilon: floor of the squared norms; a zero row gives similarity 0.

    Returns:
      ``float32`` [B].

    Example:
      >>> print(cosine_similarity([[1.0, 0.0], [1.0, 1.0]], [[3.0, 0.0], [0.0, 1.0]]).numpy().round(4))
      [1.     0.7071]
    """
    a = tf.cast(a, tf.float32)
    b = tf.cast(b, tf.float32)
    a = a * tf.math.rsqrt(tf.maximum(tf.reduce_sum(a * a, -1, keepdims=True), epsilon))
    b = b * tf.math.rsqrt(tf.maximum(tf.reduce_sum(b * b, -1, keepdims=True), epsilon))
    return tf.reduce_sum(a * b, axis=-1)


def pearson_correlation(x, y, epsilon: float = PEARSON_EPSILON):
    """Pearson's ρ between two vectors, finite for zero variance.

    ``ρ = mean(x̃ ỹ) / (sqrt(mean(x̃²) + ε) sqrt(mean(ỹ²) + ε))`` with x̃ = x − mean(x).
    For ε → 0 this is ``scipy.stats.pearsonr``; a constant x or y gives ρ = 0 with
    finite gradients.

    Args:
      x, y: float tensors [n], n >= 2.
      epsilon: variance floor (dimensionless, per element).

    Returns:
      ``float32`` scalar in [−1, 1].

    Example:
      >>> round(float(pearson_correlation([1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 9.0])), 4)
      0.9944
      >>> float(pearson_correlation([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
      0.0
    """
    x = tf.cast(tf.reshape(x, [-1]), tf.float32)
    y = tf.cast(tf.reshape(y, [-1]), tf.float32)
    xc = x - tf.reduce_mean(x)
    yc = y - tf.reduce_mean(y)
    cov = tf.reduce_mean(xc * yc)
    return cov / (
        tf.sqrt(tf.reduce_mean(xc * xc) + epsilon) * tf.sqrt(tf.reduce_mean(yc * yc) + epsilon)
    )


def mismatch_partners(permutation, image_ids=None):
    """The image index paired with each caption in VETE's mismatched pairs.

    Without ``image_ids`` this is ``p[(i+1) mod B]`` (VETE §3: a derangement). With
    ``image_ids``, caption ``p[i]`` meets ``p[(i+k) mod B]`` for the smallest
    ``k >= 1`` whose image id differs from that of ``p[i]``; when every image in the
    batch has that id (one image's captions only) it falls back to ``k = 1`` (the
    pair then shows one image twice and is still labelled −1). With distinct ids
    this is exactly the id-free rule. Note that with repeated ids an image may
    appear in more than one mismatched pair.

    Args:
      permutation: int [B], a permutation of 0..B−1, B >= 2.
      image_ids: int [B] or ``None``.

    Returns:
      ``int32`` [B]: the image row of the mismatched pair whose caption is ``p[i]``.

    Example:
      >>> mismatch_partners([0, 1, 2, 3]).numpy().tolist()
      [1, 2, 3, 0]
      >>> mismatch_partners([0, 1, 2, 3], image_ids=[7, 7, 9, 9]).numpy().tolist()
      [2, 2, 0, 0]
    """
    permutation = tf.cast(tf.reshape(permutation, [-1]), tf.int32)
    if image_ids is None:
        return tf.roll(permutation, shift=-1, axis=0)
    batch = tf.shape(permutation)[0]
    ids = tf.gather(tf.cast(tf.reshape(image_ids, [-1]), tf.int64), permutation)
    offsets = tf.range(1, tf.maximum(batch, 2))  # [B-1]
    positions = (tf.range(batch)[:, None] + offsets[None, :]) % batch  # [B, B-1]
    differs = tf.not_equal(tf.gather(ids, positions), ids[:, None])
    first = tf.argmax(tf.cast(differs, tf.int32), axis=1, output_type=tf.int32)  # 0 if none
    return tf.gather(permutation, (tf.range(batch) + first + 1) % batch)


def vete_pair_similarities(text, image, permutation, image_ids=None):
    """The 2B cosine similarities and ±1 labels of VETE §3.

    Args:
      text: float [B, N] caption embeddings.
      image: float [B, N] projected image features (same order as ``text``).
      permutation: int [B], a permutation p of 0..B−1; the mismatched pairs are
        ``(text[p[i]], image[p[(i+1) mod B]])``.
      image_ids: optional int [B]; when given, the mismatched image of caption
        ``p[i]`` is the next one in the cyclic order ``p`` with a different image
        id (``mismatch_partners``), so two captions of one image never form a
        negative pair unless the batch holds a single image.

    Returns:
      ``(similarities float32 [2B], labels float32 [2B])``; the first B are the
      matching pairs (label +1), the last B the mismatched ones (label −1).

    Example:
      >>> sims, labels = vete_pair_similarities(tf.eye(3), tf.eye(3), permutation=[2, 0, 1])
      >>> print(sims.numpy(), labels.numpy())
      [1. 1. 1. 0. 0. 0.] [ 1.  1.  1. -1. -1. -1.]
    """
    positives = cosine_similarity(text, image)
    negatives = cosine_similarity(
        tf.gather(text, permutation), tf.gather(image, mismatch_partners(permutation, image_ids))
    )
    sims = tf.concat([positives, negatives], axis=0)
    labels = tf.concat([tf.ones_like(positives), -tf.ones_like(negatives)], axis=0)
    return sims, labels


def covariance(x, y):
    """Population covariance ``mean((x − x̄)(y − ȳ))`` of two vectors.

    Args:
      x, y: float tensors [n].

    Returns:
      ``float32`` scalar.

    Example:
      >>> round(float(covariance([1.0, 2.0, 3.0], [1.0, 0.0, -1.0])), 4)
      -0.6667
    """
    x = tf.cast(tf.reshape(x, [-1]), tf.float32)
    y = tf.cast(tf.reshape(y, [-1]), tf.float32)
    return tf.reduce_mean((x - tf.reduce_mean(x)) * (y - tf.reduce_mean(y)))


def surrogate_kendall_tau(x, y, alpha: float):
    """Surrogate Kendall τ, SKT_α (VETE §5.2).

    ``SKT_α(x, y) = Σ_{i<j} tanh(α (x_i − x_j)(y_i − y_j)) / (n(n−1)/2)``: a smooth
    Kendall τ (α → ∞ gives τ_a for untied data).

    Args:
      x, y: float tensors [n], n >= 2.
      alpha: sharpness α > 0.

    Returns:
      ``float32`` scalar in [−1, 1]; memory O(n²).

    Example:
      >>> x, y = [1.0, 2.0, 3.0], [1.0, 2.0, 4.0]
      >>> round(float(surrogate_kendall_tau(x, y, alpha=1.0)), 4)
      0.9085
      >>> round(float(surrogate_kendall_tau(x, y, alpha=100.0)), 4)  # Kendall's tau_a
      1.0
    """
    x = tf.cast(tf.reshape(x, [-1]), tf.float32)
    y = tf.cast(tf.reshape(y, [-1]), tf.float32)
    n = tf.shape(x)[0]
    terms = tf.tanh(alpha * (x[:, None] - x[None, :]) * (y[:, None] - y[None, :]))
    upper = tf.linalg.band_part(tf.ones([n, n]), 0, -1) - tf.eye(n)
    pairs = tf.cast(n * (n - 1), tf.float32) / 2.0
    return tf.reduce_sum(terms * upper) / tf.maximum(pairs, 1.0)


def pairwise_rank_loss(text, image, margin: float = 0.2, image_ids=None, reduction: str = "sum"):
    """Pairwise ranking (contrastive) loss of Kiros et al. (2014), as VETE §5.2 uses it.

    With ``s(t, v)`` cosine similarity and in-batch contrastive samples,

        L = Σ_i Σ_{k ∉ img(i)} [m − s(t_i, v_i) + s(t_i, v_k)]₊
          + Σ_i Σ_{k ∉ img(i)} [m − s(t_i, v_i) + s(t_k, v_i)]₊,

    where ``k ∉ img(i)`` ranges over the rows whose image id differs from row i's
    (all other rows without ``image_ids``). Equal to
    ``triplet_ranking_loss(negatives="all", direction_weight=1)``.

    Args:
      text, image: float [B, N]; image_ids: int [B] or ``None``.
      margin: m (cosine units).
      reduction: ``"sum"`` over anchors (Kiros) or ``"mean"`` (divided by B).

    Returns:
      ``float32`` scalar >= 0.

    Example:
      >>> text, image = [[1.0, 0.0], [1.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]
      >>> round(float(pairwise_rank_loss(text, image, margin=0.2)), 4)  # [0.2 − 0.7071 + 0.7071]₊
      0.2
    """
    return triplet_ranking_loss(
        text, image, image_ids, margin=margin, direction_weight=1.0, negatives="all", reduction=reduction
    )


class _VetePairsLoss(BatchLoss):
    """Base of the VETE losses on the 2B matching/mismatched pairs (§3)."""

    def __init__(self, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def permutation(self, batch_size, training=None):
        """A permutation of 0..B−1 (random in training, fixed otherwise)."""
        ids = tf.range(batch_size)
        if training:
            return tf.cast(keras.random.shuffle(ids, seed=self.seed_generator), tf.int32)
        fixed = [0, self.seed or 0]
        return tf.random.experimental.stateless_shuffle(ids, seed=fixed)

    def pairs(self, text, image, image_ids=None, training=None):
        check_batch(type(self).__name__, text, image, image_ids, min_batch=2)
        batch = tf.shape(text)[0]
        tf.debugging.assert_greater_equal(
            batch, 2, message=f"{type(self).__name__} needs batches of at least 2 pairs"
        )
        return vete_pair_similarities(text, image, self.permutation(batch, training), image_ids)

    def get_config(self):
        config = super().get_config()
        config.update(seed=self.seed)
        return config


@keras.saving.register_keras_serializable(package="grounded_text")
class PearsonCorrelationLoss(_VetePairsLoss):
    """VETE's Pearson correlation loss as a loss layer (Kurach et al. 2017, §3).

    Computes ``L = −ρ(s, y)`` over the 2B pairs (module docstring), adds it with
    ``add_loss`` and returns it, so a functional model built around it trains with
    ``model.compile(optimizer)`` and ``fit`` alone.

    In training the permutation is drawn afresh each step (seeded
    ``keras.random.SeedGenerator``); in inference (``training=False``, e.g.
    validation) a fixed seeded permutation makes the loss reproducible.

    Args:
      seed: seed of the permutations.
      epsilon: variance floor of ``pearson_correlation``.

    Call args:
      text: float [B, N]; image: float [B, N]; B >= 2.
      image_ids: optional int [B]; mismatched pairs then avoid joining a caption
        to an image of its own id (``vete_pair_similarities``). ``None`` keeps
        the plain derangement of §3.

    Returns:
      ``float32`` scalar loss in [−1, 1].

    Example:
      >>> loss = PearsonCorrelationLoss(seed=0)
      >>> round(float(loss(tf.eye(4), tf.eye(4), training=False)), 4)  # matches 1, mismatches 0
      -1.0

      As the loss of a two-tower model, trained with ``compile(optimizer)`` alone:

      >>> text, image = keras.Input((8,)), keras.Input((5,))
      >>> out = PearsonCorrelationLoss(seed=0)(keras.layers.Dense(4)(text), keras.layers.Dense(4)(image))
      >>> model = keras.Model([text, image], out)
      >>> model.compile(optimizer="adam")
      >>> x = [tf.random.stateless_uniform([16, 8], [0, 1]), tf.random.stateless_uniform([16, 5], [0, 2])]
      >>> list(model.fit(x, batch_size=8, epochs=1, verbose=0).history)
      ['loss']
    """

    def __init__(self, seed: int | None = None, epsilon: float = PEARSON_EPSILON, **kwargs):
        super().__init__(seed=seed, **kwargs)
        self.epsilon = float(epsilon)

    def batch_loss(self, text, image, image_ids=None, training=None):
        sims, labels = self.pairs(text, image, image_ids, training)
        return -pearson_correlation(sims, labels, self.epsilon)

    def get_config(self):
        config = super().get_config()
        config.update(epsilon=self.epsilon)
        return config


@keras.saving.register_keras_serializable(package="grounded_text")
class CovarianceLoss(_VetePairsLoss):
    """Covariance loss of VETE §5.2: ``L = −cov(s, y)`` over the 2B pairs of §3.

    Like ``PearsonCorrelationLoss`` without the normalisation by the standard
    deviations (``cov = mean((s − s̄)(y − ȳ))``, population form).

    Args:
      seed: seed of the mismatch permutations (random per step in training,
        fixed in inference).

    Call args:
      text, image: float [B, N], B >= 2; image_ids: optional int [B] (see
      ``PearsonCorrelationLoss``).

    Returns:
      ``float32`` scalar in [−1, 1] (cosines and ±1 labels bound the covariance).

    Example:
      >>> loss = CovarianceLoss(seed=0)
      >>> round(float(loss(tf.eye(4), tf.eye(4), training=False)), 4)  # −mean((s − ½) y)
      -0.5
    """

    def batch_loss(self, text, image, image_ids=None, training=None):
        sims, labels = self.pairs(text, image, image_ids, training)
        return -covariance(sims, labels)


@keras.saving.register_keras_serializable(package="grounded_text")
class SurrogateKendallTauLoss(_VetePairsLoss):
    """Surrogate Kendall τ loss of VETE §5.2: ``L = −SKT_α(s, y)``.

    ``SKT_α(x, y) = Σ_{i<j} tanh(α (x_i − x_j)(y_i − y_j)) / (n(n−1)/2)`` with
    x the 2B cosine similarities and y their ±1 labels (§3), n = 2B.

    Args:
      alpha: sharpness α > 0 (VETE tries several; larger is closer to τ).
      seed: seed of the mismatch permutations.

    Call args:
      text, image: float [B, N], B >= 2; image_ids: optional int [B].

    Returns:
      ``float32`` scalar in [−1, 1]. Memory O((2B)²).

    Raises:
      ValueError: ``alpha <= 0``.

    Example:
      >>> loss = SurrogateKendallTauLoss(alpha=1.0, seed=0)
      >>> round(float(loss(tf.eye(4), tf.eye(4), training=False)), 4)  # −16 tanh(2) / 28
      -0.5509
    """

    def __init__(self, alpha: float = 1.0, seed: int | None = None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        if not alpha > 0:
            raise ValueError(f"SurrogateKendallTauLoss: alpha must be > 0, got {alpha}.")
        self.alpha = float(alpha)

    def batch_loss(self, text, image, image_ids=None, training=None):
        sims, labels = self.pairs(text, image, image_ids, training)
        return -surrogate_kendall_tau(sims, labels, self.alpha)

    def get_config(self):
        config = super().get_config()
        config.update(alpha=self.alpha)
        return config


@keras.saving.register_keras_serializable(package="grounded_text")
class PairwiseRankLoss(BatchLoss):
    """Pairwise rank loss of Kiros et al. (2014), the last loss of VETE §5.2.

    ``L = Σ_i Σ_{k ∉ img(i)} [m − s(t_i, v_i) + s(t_i, v_k)]₊ + [m − s(t_i, v_i) + s(t_k, v_i)]₊``
    over the in-batch contrastive samples (``pairwise_rank_loss``); captions of
    the same image (``image_ids``) are never each other's contrastive samples.

    Args:
      margin: m > 0 (cosine units).
      reduction: ``"sum"`` (Kiros) or ``"mean"`` (divided by B).

    Call args:
      text, image: float [B, N]; image_ids: optional int [B].

    Returns:
      ``float32`` scalar >= 0.

    Example:
      >>> loss = PairwiseRankLoss(margin=0.2)
      >>> text, image = tf.constant([[1.0, 0.0], [1.0, 1.0]]), tf.constant([[1.0, 0.0], [0.0, 1.0]])
      >>> round(float(loss(text, image)), 4)
      0.2
      >>> round(float(loss(text, image, image_ids=tf.constant([3, 3]))), 4)  # one image: no negatives
      0.0
    """

    def __init__(self, margin: float = 0.2, reduction: str = "sum", **kwargs):
        super().__init__(**kwargs)
        self.margin = float(margin)
        self.reduction = check_reduction("PairwiseRankLoss", reduction)

    def batch_loss(self, text, image, image_ids=None, training=None):
        check_batch("PairwiseRankLoss", text, image, image_ids)
        return pairwise_rank_loss(text, image, self.margin, image_ids, self.reduction)

    def get_config(self):
        config = super().get_config()
        config.update(margin=self.margin, reduction=self.reduction)
        return config
