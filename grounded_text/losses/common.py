"""Shared pieces of the in-batch losses: cosine matrices, image-id masks, checks.

Conventions of every loss of ``grounded_text.losses``: ``text`` float [B, N] and
``image`` float [B, N'] (any float dtype, computed in ``float32``), row i of both
describing the same caption/image pair; ``image_ids`` int [B] or ``None`` (same id =
same image; ``None`` means every row is its own image).
"""

from __future__ import annotations

import keras
import tensorflow as tf

NORM_EPSILON = 1e-12


def l2_normalize(x, epsilon: float = NORM_EPSILON):
    """Rows of ``x`` scaled to unit L2 norm in ``float32``; a zero row stays zero.

    Args:
      x: float [B, N].
      epsilon: floor of the squared norm.

    Returns:
      ``float32`` [B, N].

    Example:
      >>> print(l2_normalize([[3.0, 4.0], [0.0, 0.0]]).numpy())
      [[0.6 0.8]
       [0.  0. ]]
    """
    x = tf.cast(x, tf.float32)
    return x * tf.math.rsqrt(tf.maximum(tf.reduce_sum(x * x, axis=-1, keepdims=True), epsilon))


def similarity_matrix(a, b):
    """Cosine similarity matrix ``S[i, j] = cos(a_i, b_j)``.

    Args:
      a: float [B, N]; b: float [C, N].

    Returns:
      ``float32`` [B, C]; rows or columns of zero vectors give 0.

    Example:
      >>> s = similarity_matrix([[1.0, 0.0], [1.0, 1.0]], [[2.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
      >>> print(s.numpy().round(4))
      [[1.     0.     0.    ]
       [0.7071 0.7071 0.    ]]
    """
    return tf.matmul(l2_normalize(a), l2_normalize(b), transpose_b=True)


def resolve_image_ids(image_ids, batch_size):
    """``image_ids`` as int64 [B]; ``None`` → ``range(B)`` (every row its own image).

    Example:
      >>> resolve_image_ids(None, 3).numpy().tolist()
      [0, 1, 2]
      >>> resolve_image_ids([[7], [7], [9]], 3).numpy().tolist()
      [7, 7, 9]
    """
    if image_ids is None:
        return tf.range(tf.cast(batch_size, tf.int64), dtype=tf.int64)
    return tf.cast(tf.reshape(image_ids, [-1]), tf.int64)


def same_image_mask(image_ids, batch_size):
    """``M[i, j] = (image_ids[i] == image_ids[j])`` as bool [B, B] (diagonal True).

    Example:
      >>> same_image_mask([5, 5, 8], 3).numpy().astype(int).tolist()
      [[1, 1, 0], [1, 1, 0], [0, 0, 1]]
    """
    ids = resolve_image_ids(image_ids, batch_size)
    return tf.equal(ids[:, None], ids[None, :])


def check_batch(name: str, text, image=None, image_ids=None, min_batch: int = 1):
    """Static checks of a loss's inputs; raises ``ValueError`` naming the input.

    Rank must be 2 for ``text``/``image`` and 1 for ``image_ids``; known batch sizes
    must agree and be at least ``min_batch``. Dynamic shapes are checked with
    ``tf.debugging`` assertions (``InvalidArgumentError`` naming the loss).

    Example:
      >>> check_batch("MyLoss", tf.zeros([4, 8]), tf.zeros([4, 3]), [0, 0, 1, 2], min_batch=2)
      >>> check_batch("MyLoss", tf.zeros([4, 8]), tf.zeros([3, 8]))
      Traceback (most recent call last):
        ...
      ValueError: MyLoss: `text` and `image` batch sizes differ (4 vs 3).
    """
    text = tf.convert_to_tensor(text)
    if text.shape.rank is not None and text.shape.rank != 2:
        raise ValueError(f"{name}: `text` must be [B, N], got shape {text.shape}.")
    batch = text.shape[0]
    if image is not None:
        image = tf.convert_to_tensor(image)
        if image.shape.rank is not None and image.shape.rank != 2:
            raise ValueError(f"{name}: `image` must be [B, N], got shape {image.shape}.")
        if batch is not None and image.shape[0] is not None and image.shape[0] != batch:
            raise ValueError(
                f"{name}: `text` and `image` batch sizes differ ({batch} vs {image.shape[0]})."
            )
    if image_ids is not None:
        image_ids = tf.convert_to_tensor(image_ids)
        if not (image_ids.dtype.is_integer):
            raise ValueError(f"{name}: `image_ids` must be integers, got {image_ids.dtype.name}.")
        if image_ids.shape.rank is not None and image_ids.shape.rank != 1:
            raise ValueError(f"{name}: `image_ids` must be [B], got shape {image_ids.shape}.")
        if batch is not None and image_ids.shape[0] is not None and image_ids.shape[0] != batch:
            raise ValueError(
                f"{name}: `image_ids` has {image_ids.shape[0]} entries for a batch of {batch}."
            )
    if batch is not None and batch < min_batch:
        raise ValueError(f"{name}: needs batches of at least {min_batch} rows, got {batch}.")
    if batch is None or (image is not None and image.shape[0] is None):
        tf.debugging.assert_greater_equal(
            tf.shape(text)[0], min_batch, message=f"{name}: batch smaller than {min_batch}"
        )
        if image is not None:
            tf.debugging.assert_equal(
                tf.shape(text)[0], tf.shape(image)[0], message=f"{name}: text/image batch sizes differ"
            )
    if image_ids is not None and (batch is None or image_ids.shape[0] is None):
        tf.debugging.assert_equal(
            tf.shape(text)[0], tf.shape(image_ids)[0], message=f"{name}: image_ids/batch size differ"
        )


def check_reduction(name: str, reduction: str) -> str:
    """``reduction`` itself when it is ``"sum"`` or ``"mean"``; raises ``ValueError`` naming
    ``name`` otherwise.

    Example:
      >>> check_reduction("MyLoss", "mean")
      'mean'
      >>> check_reduction("MyLoss", "max")
      Traceback (most recent call last):
        ...
      ValueError: MyLoss: reduction must be 'sum' or 'mean', got 'max'.
    """
    if reduction not in ("sum", "mean"):
        raise ValueError(f"{name}: reduction must be 'sum' or 'mean', got {reduction!r}.")
    return reduction


def gather_replicas(*tensors):
    """Under a ``tf.distribute`` strategy with several replicas, each tensor
    concatenated (axis 0) over the replicas in replica order; else unchanged.

    The in-batch losses then see the global batch (all B pairs as negatives) on
    every replica, as on one device. ``all_gather`` is differentiable: its gradient
    sums the replicas' upstream gradients, and Keras divides each replica's loss by
    the replica count before the gradients are summed, so the update equals the
    single-device one (the all-gather of SimCLR/CLIP-style contrastive
    training). ``None`` entries stay ``None``.

    Example:
      >>> text, image, ids = gather_replicas(tf.ones([2, 3]), tf.ones([2, 4]), None)
      >>> tuple(text.shape), tuple(image.shape), ids
      ((2, 3), (2, 4), None)
    """
    ctx = tf.distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return tensors
    devices = tf.distribute.get_strategy().extended.worker_devices
    out = []
    for t in tensors:
        if t is not None and not t.device and len(devices) == 1:
            # MultiWorkerMirroredStrategy with one device per worker: all_gather needs
            # a placed tensor ("destinations can not be empty" otherwise).
            with tf.device(devices[0]):
                t = tf.identity(t)
        out.append(None if t is None else ctx.all_gather(t, axis=0))
    return tuple(out)


class BatchLoss(keras.layers.Layer):
    """Base of the loss layers: float32 policy, scalar output, ``add_loss``.

    Subclasses implement ``batch_loss(text, image, image_ids, training)`` returning a
    ``float32`` scalar. ``call`` adds it with ``add_loss`` and returns it, so a
    functional model built around the layer trains with ``compile(optimizer)``.
    The layer's dtype policy is ``float32`` whatever the global policy (mixed
    precision towers feed ``float16``; the loss is computed in ``float32``).

    Example:
      >>> class NegativeMeanCosine(BatchLoss):
      ...     def batch_loss(self, text, image, image_ids=None, training=None):
      ...         return -tf.reduce_mean(tf.linalg.diag_part(similarity_matrix(text, image)))
      >>> layer = NegativeMeanCosine()
      >>> x = tf.constant([[1.0, 0.0], [0.0, 2.0]])
      >>> round(float(layer(x, x)), 4)
      -1.0
      >>> layer.dtype_policy.name, len(layer.losses)
      ('float32', 1)
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)

    def batch_loss(self, text, image, image_ids=None, training=None):  # pragma: no cover
        raise NotImplementedError

    def call(self, text, image, image_ids=None, training=None):
        text, image, image_ids = gather_replicas(text, image, image_ids)
        loss = tf.cast(self.batch_loss(text, image, image_ids=image_ids, training=training), tf.float32)
        self.add_loss(loss)
        return loss

    def compute_output_spec(self, text, image, image_ids=None, training=None):
        return keras.KerasTensor((), dtype="float32")
