"""Losses of the papers' baselines: language models, word-level grounding, regression
to image features, caption-to-image ranking (Kurach et al. 2017 §4.4 and §5.4;
Bordes et al. 2019 §4.2, after Collell et al. 2017 and Kiela et al. 2018).

* ``next_token_cross_entropy`` / ``NextTokenLoss``: the language model's loss (Mao et
  al. 2016's PureTextRnn and model A, Kiela et al.'s Cap2Cap decoder): the mean over the
  valid target tokens of ``−log softmax(logits)[target]``.
* ``word_image_pairs`` / ``WordImagePairs``: VETE §5.4's word-level training: every
  word of a caption, alone, is a training "sentence" paired with its caption's image;
  the VETE loss (Pearson, §3) then acts on these pairs.
* ``image_regression_loss`` / ``ImageRegressionLoss``: SEQ (Collell et al. 2017), the
  squared error of a linear map of the sentence vector against the image features.
* ``caption_to_image_ranking`` / ``CaptionToImageLoss``: Cap2Img (Kiela et al. 2018
  §3.1), a max-margin ranking loss between projected captions and the images of the batch.
* ``fit_pca`` / ``PCAProjection``: SEQ's embedding, PCA of ``[T, W T + b]``.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from grounded_text.layers.text_preprocessor import PADDING_ID
from grounded_text.losses.common import BatchLoss, check_batch, resolve_image_ids, similarity_matrix


def next_token_cross_entropy(logits, targets):
    """Mean next-token cross-entropy over the valid (non-padding) targets.

    ``L = (1 / |V|) Σ_{(b, t) ∈ V} −log softmax(logits[b, t])[targets[b, t]]`` with
    ``V = {(b, t): targets[b, t] != 0}`` (id 0 is padding, never a target).

    Args:
      logits: float [B, T, V]: row ``t`` scores the token that follows input ``t``.
      targets: int [B, T]: the following tokens (input ids shifted left by one).

    Returns:
      ``float32`` scalar >= 0 (0 when no target is valid).

    Example:
      >>> logits = tf.zeros([1, 3, 4])  # uniform over 4 ids: −log(1/4) per valid target
      >>> round(float(next_token_cross_entropy(logits, [[2, 3, 0]])), 4)
      1.3863
    """
    logits = tf.cast(logits, tf.float32)
    targets = tf.cast(targets, tf.int64)
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
    mask = tf.cast(tf.not_equal(targets, PADDING_ID), tf.float32)
    return tf.reduce_sum(ce * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)


@keras.saving.register_keras_serializable(package="grounded_text")
class NextTokenLoss(keras.layers.Layer):
    """``next_token_cross_entropy`` as a loss layer (``add_loss``; returns the scalar).

    Call args:
      logits: float [B, T, V]; targets: int [B, T] (0 = padding).

    Returns:
      ``float32`` scalar.

    Example:
      >>> loss = NextTokenLoss()
      >>> round(float(loss(tf.zeros([1, 3, 4]), tf.constant([[2, 3, 0]]))), 4)
      1.3863
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)

    def call(self, logits, targets):
        loss = next_token_cross_entropy(logits, targets)
        self.add_loss(loss)
        return loss

    def compute_output_spec(self, logits, targets):
        return keras.KerasTensor((), dtype="float32")


def word_image_pairs(word_vectors, ids, image, image_ids=None, skip_ids=(PADDING_ID,)):
    """VETE §5.4 word-level pairs: each word of caption b, with caption b's image.

    Args:
      word_vectors: float [B, T, N], the embedding of each token.
      ids: int [B, T] token ids.
      image: float [B, N'] (the image of caption b in row b).
      image_ids: int [B] or ``None`` (every caption its own image).
      skip_ids: ids that are not words (padding, sentence boundaries).

    Returns:
      ``(words float [M, N], images float [M, N'], pair_image_ids int64 [M])``, M = the
      number of kept tokens, in row-major (caption, position) order.

    Example:
      >>> word_vectors = tf.reshape(tf.range(12.0), [2, 3, 2])
      >>> ids = [[5, 6, 0], [7, 0, 0]]
      >>> words, images, pair_ids = word_image_pairs(word_vectors, ids, tf.constant([[10.0], [20.0]]))
      >>> words.numpy().tolist(), images.numpy().tolist(), pair_ids.numpy().tolist()
      ([[0.0, 1.0], [2.0, 3.0], [6.0, 7.0]], [[10.0], [10.0], [20.0]], [0, 0, 1])
    """
    ids = tf.cast(ids, tf.int64)
    keep = tf.ones_like(ids, dtype=tf.bool)
    for s in skip_ids:
        keep = tf.logical_and(keep, tf.not_equal(ids, tf.constant(s, tf.int64)))
    where = tf.where(keep)  # [M, 2]: (caption, position)
    rows = where[:, 0]
    words = tf.gather_nd(word_vectors, where)
    image_ids = resolve_image_ids(image_ids, tf.shape(ids)[0])
    return words, tf.gather(image, rows), tf.gather(image_ids, rows)


@keras.saving.register_keras_serializable(package="grounded_text")
class WordImagePairs(keras.layers.Layer):
    """``word_image_pairs`` as a layer; ``skip_ids`` is its config.

    Call args:
      word_vectors float [B, T, N], ids int [B, T], image float [B, N'], image_ids int [B] or None.

    Returns:
      ``(words [M, N], images [M, N'], image_ids int64 [M])``.

    Example:
      >>> pairs = WordImagePairs(skip_ids=(0, 2, 3))  # padding, <S>, </S>
      >>> ids = tf.constant([[2, 5, 6, 3], [2, 7, 3, 0]])
      >>> words, images, image_ids = pairs(tf.ones([2, 4, 8]), ids, tf.ones([2, 5]), tf.constant([4, 9]))
      >>> tuple(words.shape), tuple(images.shape), image_ids.numpy().tolist()
      ((3, 8), (3, 5), [4, 4, 9])
    """

    def __init__(self, skip_ids=(PADDING_ID,), **kwargs):
        super().__init__(**kwargs)
        self.skip_ids = tuple(int(s) for s in skip_ids)

    def call(self, word_vectors, ids, image, image_ids=None):
        return word_image_pairs(word_vectors, ids, image, image_ids, self.skip_ids)

    def compute_output_spec(self, word_vectors, ids, image, image_ids=None):
        return (keras.KerasTensor((None, word_vectors.shape[-1]), dtype=word_vectors.dtype),
                keras.KerasTensor((None, image.shape[-1]), dtype=image.dtype),
                keras.KerasTensor((None,), dtype="int64"))

    def get_config(self):
        return {**super().get_config(), "skip_ids": list(self.skip_ids)}


def image_regression_loss(predicted, image):
    """SEQ's regression loss (Collell et al. 2017; Bordes et al. 2019 §4.2): the mean
    squared error ``(1 / (B d)) Σ_b ||ŷ_b − v_b||²`` of the predicted image features.

    Args:
      predicted: float [B, d] (``W T(s) + b``); image: float [B, d], the CNN features.

    Returns:
      ``float32`` scalar >= 0.

    Example:
      >>> float(image_regression_loss([[1.0, 2.0]], [[1.0, 0.0]]))  # (0² + 2²) / 2
      2.0
    """
    d = tf.cast(predicted, tf.float32) - tf.cast(image, tf.float32)
    return tf.reduce_mean(tf.square(d))


@keras.saving.register_keras_serializable(package="grounded_text")
class ImageRegressionLoss(BatchLoss):
    """``image_regression_loss`` as a loss layer: ``text`` is the prediction [B, d],
    ``image`` the features [B, d]; ``image_ids`` is not used.

    Example:
      >>> loss = ImageRegressionLoss()
      >>> float(loss(tf.constant([[1.0, 2.0]]), tf.constant([[1.0, 0.0]])))
      2.0
    """

    def batch_loss(self, text, image, image_ids=None, training=None):
        check_batch("ImageRegressionLoss", text, image)
        return image_regression_loss(text, image)


def caption_to_image_ranking(projected, image, image_ids=None, margin: float = 0.2):
    """Cap2Img (Kiela et al. 2018 §3.1, as Bordes et al. 2019 §4.2 re-implement it).

    With ``s(x, v)`` cosine similarity, caption b's projection ``x_b`` and its image
    ``v_b``, the contrastive images being the batch's other images (rows of another
    image id),

        L = (1 / B) Σ_b Σ_{k: id_k ≠ id_b} [m − s(x_b, v_b) + s(x_b, v_k)]₊.

    Args:
      projected: float [B, d] (captions projected to the image space).
      image: float [B, d] image features.
      image_ids: int [B] or ``None`` (all rows distinct images).
      margin: m.

    Returns:
      ``float32`` scalar >= 0.

    Example:
      >>> projected, image = [[1.0, 0.0], [1.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]
      >>> round(float(caption_to_image_ranking(projected, image, margin=0.2)), 4)  # (0 + 0.2) / 2
      0.1
    """
    s = similarity_matrix(projected, image)  # [B, B]
    batch = tf.shape(s)[0]
    ids = resolve_image_ids(image_ids, batch)
    negative = tf.cast(tf.not_equal(ids[:, None], ids[None, :]), tf.float32)
    positive = tf.linalg.diag_part(s)[:, None]
    hinge = tf.nn.relu(margin - positive + s) * negative
    return tf.reduce_sum(hinge) / tf.cast(batch, tf.float32)


@keras.saving.register_keras_serializable(package="grounded_text")
class CaptionToImageLoss(BatchLoss):
    """``caption_to_image_ranking`` as a loss layer (``text`` = projected captions [B, d]).

    Args:
      margin: m of the hinge.

    Example:
      >>> loss = CaptionToImageLoss(margin=0.2)
      >>> projected, image = tf.constant([[1.0, 0.0], [1.0, 1.0]]), tf.constant([[1.0, 0.0], [0.0, 1.0]])
      >>> round(float(loss(projected, image)), 4)
      0.1
    """

    def __init__(self, margin: float = 0.2, **kwargs):
        super().__init__(**kwargs)
        self.margin = float(margin)

    def batch_loss(self, text, image, image_ids=None, training=None):
        check_batch("CaptionToImageLoss", text, image, image_ids, min_batch=2)
        return caption_to_image_ranking(text, image, image_ids, self.margin)

    def get_config(self):
        return {**super().get_config(), "margin": self.margin}


def same_image_partner(image_ids):
    """For Cap2Cap: the row of another caption of the same image, for every row.

    Row b gets the first row ``(b + k) mod B``, k = 1..B−1, with the same image id;
    a row whose image has no other caption in the batch gets itself.

    Args:
      image_ids: int [B].

    Returns:
      ``int32`` [B].

    Example:
      >>> same_image_partner([4, 4, 9, 4, 7]).numpy().tolist()
      [1, 3, 2, 0, 4]
    """
    ids = tf.cast(tf.reshape(image_ids, [-1]), tf.int64)
    batch = tf.shape(ids)[0]
    offsets = tf.range(1, tf.maximum(batch, 2))
    positions = (tf.range(batch)[:, None] + offsets[None, :]) % batch  # [B, B-1]
    same = tf.equal(tf.gather(ids, positions), ids[:, None])
    found = tf.reduce_any(same, axis=1)
    first = tf.argmax(tf.cast(same, tf.int32), axis=1, output_type=tf.int32)
    partner = tf.gather_nd(positions, tf.stack([tf.range(batch), first], axis=1))
    return tf.where(found, partner, tf.range(batch))


@keras.saving.register_keras_serializable(package="grounded_text")
class SameImagePartner(keras.layers.Layer):
    """Gathers, for every caption, the token ids of another caption of its image
    (``same_image_partner``; without ``image_ids`` every caption is its own partner).

    Call args:
      ids: int [B, T]; image_ids: int [B] or None.

    Returns:
      int64 [B, T].

    Example:
      >>> ids = tf.constant([[5, 6], [7, 8], [9, 9]], tf.int64)
      >>> SameImagePartner()(ids, tf.constant([1, 1, 2])).numpy().tolist()
      [[7, 8], [5, 6], [9, 9]]
    """

    def call(self, ids, image_ids=None):
        if image_ids is None:
            return ids
        return tf.gather(ids, same_image_partner(image_ids))

    def compute_output_spec(self, ids, image_ids=None):
        return keras.KerasTensor(ids.shape, dtype=ids.dtype)


def fit_pca(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Principal component analysis: the mean and the top-k principal directions.

    Args:
      x: float [n, D], n >= 1; k: 1 <= k <= D.

    Returns:
      ``(mean float32 [D], components float32 [D, k])``; columns are the right singular
      vectors of the centred data, by decreasing singular value, each with its largest
      absolute entry positive (a deterministic sign). With fewer than k rows the columns
      beyond the n-th are zero.

    Raises:
      ValueError: bad k.

    Example:
      >>> mean, components = fit_pca(np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0], [2.0, 1.0]]), k=1)
      >>> mean.tolist(), components.tolist()
      ([1.0, 0.5], [[1.0], [0.0]])
    """
    x = np.asarray(x, dtype=np.float64)
    if not 1 <= k <= x.shape[1]:
        raise ValueError(f"fit_pca: k must be in 1..{x.shape[1]}, got {k}.")
    mean = x.mean(axis=0)
    centred = x - mean
    # The eigenvectors of the D x D scatter matrix are the right singular vectors of the
    # centred data; for n >> D (every caption of a training split) this is the cheaper route.
    vals, vecs = np.linalg.eigh(centred.T @ centred)
    order = np.argsort(vals)[::-1]
    comp = np.zeros((x.shape[1], k))
    r = min(k, x.shape[0])
    comp[:, :r] = vecs[:, order[:r]]
    idx = np.argmax(np.abs(comp), axis=0)
    signs = np.sign(comp[idx, np.arange(k)])
    signs[signs == 0] = 1.0
    return mean.astype(np.float32), (comp * signs).astype(np.float32)


@keras.saving.register_keras_serializable(package="grounded_text")
class PCAProjection(keras.layers.Layer):
    """``(x − mean) @ components``: float [B, D] → float32 [B, k]. Not trained: the
    statistics are set by ``set_pca`` (e.g. ``fit_pca`` on the training captions).

    Args:
      input_dim: D; output_dim: k.

    Example:
      >>> layer = PCAProjection(input_dim=2, output_dim=1)
      >>> layer.set_pca(np.array([1.0, 0.5]), np.array([[1.0], [0.0]]))
      >>> layer(tf.constant([[3.0, 0.5], [0.0, 9.0]])).numpy().tolist()
      [[2.0], [-1.0]]
    """

    def __init__(self, input_dim: int, output_dim: int, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.mean = self.add_weight(shape=(self.input_dim,), initializer="zeros", trainable=False, name="pca_mean")
        eye = np.eye(self.input_dim, self.output_dim, dtype=np.float32)
        self.components = self.add_weight(shape=(self.input_dim, self.output_dim),
                                          initializer=keras.initializers.Constant(eye), trainable=False,
                                          name="pca_components")

    def set_pca(self, mean: np.ndarray, components: np.ndarray) -> None:
        self.mean.assign(mean)
        self.components.assign(components)

    def call(self, x):
        return tf.matmul(tf.cast(x, tf.float32) - self.mean, self.components)

    def compute_output_spec(self, x):
        return keras.KerasTensor((x.shape[0], self.output_dim), dtype="float32")

    def get_config(self):
        return {**super().get_config(), "input_dim": self.input_dim, "output_dim": self.output_dim}
