"""Per-tower gradient-norm clipping, as the authors' code of Merkx & Frank (2019) trains.

Their trainer (DannyMerkx/caption2image, ``NLE2019`` code at 8a4dc2c,
``PyTorch/functions/trainer.py:123-125``) clips the image tower's and the caption tower's
gradients separately before each Adam step::

    torch.nn.utils.clip_grad_norm(self.img_embedder.parameters(), self.img_clipper.clip)
    torch.nn.utils.clip_grad_norm(self.cap_embedder.parameters(), self.cap_clipper.clip)

with 0.0025 (image) and 0.05 (caption) (``flickr_char/char_net.py:124-125``; on by default,
``:43``). ``clip_grad_norm`` takes the norm over all of a tower's gradients,
``‖g‖ = sqrt(Σ_p ‖g_p‖²)``, and scales them by ``max_norm / (‖g‖ + 1e-6)`` when that is
below 1. ``TowerClippedAdam`` does the same inside Keras' optimizer step
(``TrainConfig.clip_norm_text`` / ``clip_norm_image``).
"""

from __future__ import annotations

import keras
import tensorflow as tf

#: ``torch.nn.utils.clip_grad_norm``'s ``total_norm + 1e-6``.
CLIP_EPSILON = 1e-6


def clip_tower_gradients(grads, variables, towers, key=id):
    """``grads`` with each tower's gradients scaled to a norm of at most its limit.

    Args:
      grads: gradients (tensors or None), one per variable.
      variables: the variables, in the order of ``grads``.
      towers: ``[(tower variables, max_norm)]``; a variable in no tower is left alone.
      key: the identity of a variable (``id``, or the optimizer's ``_var_key``).

    Returns:
      A new list: for each tower, its gradients × ``min(1, max_norm / (‖g‖ + 1e-6))``, ``‖g‖``
      the norm over all of them (``torch.nn.utils.clip_grad_norm``).
    """
    grads = list(grads)
    index = {key(v): i for i, v in enumerate(variables)}
    for tower_vars, max_norm in towers:
        rows = [index[key(v)] for v in tower_vars if key(v) in index and grads[index[key(v)]] is not None]
        if not rows:
            continue
        # Dense, as PyTorch's (non-sparse) embedding gradient is: an IndexedSlices may repeat a
        # row (a character seen twice), and its norm is that of the summed rows.
        parts = [tf.convert_to_tensor(grads[i]) for i in rows]
        norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in parts]))
        scale = tf.minimum(1.0, float(max_norm) / (norm + CLIP_EPSILON))
        for i, g in zip(rows, parts):
            grads[i] = g * tf.cast(scale, g.dtype)
    return grads


@keras.saving.register_keras_serializable(package="grounded_text")
class TowerClippedAdam(keras.optimizers.Adam):
    """Keras Adam whose step first clips the gradient norm of each tower separately
    (``clip_tower_gradients``), as the authors' code of Merkx & Frank does
    (caption2image 8a4dc2c, ``PyTorch/functions/trainer.py:123-125``).

    ``set_towers`` names the towers once the model exists; until then (and with no towers)
    it is Keras' Adam. Under mixed precision the clipping sees the unscaled gradients (the
    loss-scale optimizer unscales before it calls this one).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._towers: list = []

    def set_towers(self, towers) -> None:
        """``towers``: ``[(variables, max_norm or None)]``; a tower with ``None`` is not clipped."""
        self._towers = [(list(variables), float(limit)) for variables, limit in towers if limit is not None]

    def apply(self, grads, trainable_variables=None):
        if self._towers:
            variables = list(trainable_variables) if trainable_variables is not None else self._trainable_variables
            grads = clip_tower_gradients(grads, variables, self._towers, key=self._var_key)
        return super().apply(grads, trainable_variables)


def make_optimizer(learning_rate, clip_norm_text=None, clip_norm_image=None, text_tower=None, image_tower=None):
    """Keras' ``Adam(learning_rate)``, or with a clip norm set, ``TowerClippedAdam`` clipping
    ``text_tower``'s gradients to ``clip_norm_text`` and ``image_tower``'s to ``clip_norm_image``
    (``None`` or ``0``: that tower is not clipped).

    Raises:
      ValueError: a clip norm set for a tower that is not given.
    """
    clip_norm_text, clip_norm_image = clip_norm_text or None, clip_norm_image or None
    if clip_norm_text is None and clip_norm_image is None:
        return keras.optimizers.Adam(learning_rate)
    for limit, tower, name in ((clip_norm_text, text_tower, "text"), (clip_norm_image, image_tower, "image")):
        if limit is not None and tower is None:
            raise ValueError(f"clip_norm_{name} is set but the model has no {name} tower to clip.")
    optimizer = TowerClippedAdam(learning_rate)
    optimizer.set_towers([(text_tower.trainable_weights if text_tower is not None else [], clip_norm_text),
                          (image_tower.trainable_weights if image_tower is not None else [], clip_norm_image)])
    return optimizer
