"""Masked pooling over time: mean over valid steps, max over time, vector and scalar self-attention.

Every pooling takes a sequence ``h`` float [B, T, H] and a boolean ``mask`` [B, T]
(True = a real step, False = padding) and ignores the padded steps exactly, so
padding a batch with a longer sentence never changes a sentence's vector (the attention
poolings' ``include_padding`` option, which mirrors the authors' code of Merkx & Frank,
is the one exception). A row with no valid step pools to the zero vector (documented;
never NaN).
"""

from __future__ import annotations

import keras
import tensorflow as tf

import grounded_text.layers.examples as examples
from grounded_text.layers.examples import LayerExample
from grounded_text.layers.torch_init import fan_in_uniform

#: How an attention pooling's (and the character encoder's) weights are drawn: Keras' defaults,
#: or PyTorch's as the authors' code of Merkx & Frank leaves them.
WEIGHT_INITS = ("keras", "torch")


def masked_mean(h, mask):
    """Mean of ``h`` [B, T, H] over the steps where ``mask`` [B, T] is True.

    Returns:
      float32 [B, H]; zeros for a row with no valid step.

    Example:
      >>> h = tf.constant([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]], [[5.0, 6.0], [7.0, 8.0], [9.0, 9.0]]])
      >>> mask = tf.constant([[True, True, False], [False, False, False]])
      >>> masked_mean(h, mask).numpy().tolist()  # row 2 has no valid step
      [[2.0, 3.0], [0.0, 0.0]]
    """
    h = tf.cast(h, tf.float32)
    m = tf.cast(mask, tf.float32)[..., None]
    return tf.reduce_sum(h * m, axis=1) / tf.maximum(tf.reduce_sum(m, axis=1), 1.0)


def masked_max(h, mask):
    """Max over time (Kim 2014, §2) of ``h`` [B, T, H] over the valid steps.

    Returns:
      float32 [B, H]; zeros for a row with no valid step.

    Example:
      >>> h = tf.constant([[[1.0, -2.0], [3.0, -4.0], [9.0, 9.0]], [[5.0, 6.0], [7.0, 8.0], [9.0, 9.0]]])
      >>> mask = tf.constant([[True, True, False], [False, False, False]])
      >>> masked_max(h, mask).numpy().tolist()  # the padded 9s never win
      [[3.0, -2.0], [0.0, 0.0]]
    """
    h = tf.cast(h, tf.float32)
    m = tf.cast(mask, tf.bool)[..., None]
    pooled = tf.reduce_max(tf.where(m, h, tf.float32.min), axis=1)
    any_valid = tf.reduce_any(m, axis=1)
    return tf.where(any_valid, pooled, tf.zeros_like(pooled))


def last_valid(h, mask):
    """The state at the last valid step of each row (right padding), float32 [B, H].

    Example:
      >>> h = tf.constant([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]], [[5.0, 6.0], [7.0, 8.0], [9.0, 9.0]]])
      >>> last_valid(h, tf.constant([[True, True, False], [True, False, False]])).numpy().tolist()
      [[3.0, 4.0], [5.0, 6.0]]
    """
    h = tf.cast(h, tf.float32)
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    idx = tf.maximum(lengths - 1, 0)
    out = tf.gather(h, idx, axis=1, batch_dims=1)
    return tf.where((lengths > 0)[:, None], out, tf.zeros_like(out))


class _AttentionPoolingBase(keras.layers.Layer):
    """The attention MLP shared by the vector and scalar self-attention poolings:
    ``logits_t = V tanh(W h_t + b_w) + b_v``, a softmax over the valid time steps,
    and ``Σ_t a_t ∘ h_t``; subclasses set the width of V's output.

    ``include_padding=True`` runs the softmax over every step of the padded batch instead,
    the padded states set to zero, as the authors' code of Merkx & Frank does
    (DannyMerkx/caption2image, ``NLE2019`` code at 8a4dc2c: ``PyTorch/functions/encoders.py:37``
    pads the GRU output with zeros, ``pad_packed_sequence``, and ``costum_layers.py:95,98``
    takes ``nn.Softmax(dim = 1)`` over all T steps without a mask). The padded steps then
    take weight from the real ones, so a sentence's vector depends on the longest sentence
    of its batch. Default ``False`` (the exact masked softmax).

    ``weight_init="torch"`` draws W, V and their biases as the authors' ``attention`` class
    leaves them (``costum_layers.py:91-94``): W orthogonal (``nn.init.orthogonal``, applied
    twice to W and never to V), its bias and V and V's bias ``nn.Linear``'s default,
    U(−1/√fan_in, 1/√fan_in) (``grounded_text.layers.torch_init``). Default ``"keras"``:
    Glorot-uniform kernels, zero biases."""

    def __init__(self, units: int = 128, include_padding: bool = False, weight_init: str = "keras", **kwargs):
        super().__init__(**kwargs)
        if units < 1:
            raise ValueError(f"{type(self).__name__}: units must be >= 1, got {units}.")
        if weight_init not in WEIGHT_INITS:
            raise ValueError(f"{type(self).__name__}: weight_init must be one of {WEIGHT_INITS}, got {weight_init!r}.")
        self.units = int(units)
        self.include_padding = bool(include_padding)
        self.weight_init = weight_init
        self.supports_masking = True  # the mask is an explicit call argument
        self.hidden = keras.layers.Dense(self.units, activation="tanh", dtype=self.dtype_policy, name="W")
        self.score = None

    def _score_width(self, features: int) -> int:
        raise NotImplementedError

    def build(self, h_shape, mask_shape=None):
        features = int(h_shape[-1])
        score_init = {}
        if self.weight_init == "torch":  # W's fan-in is known only now
            self.hidden.kernel_initializer = keras.initializers.Orthogonal()
            self.hidden.bias_initializer = fan_in_uniform(features)
            score_init = {"kernel_initializer": fan_in_uniform(self.units),
                          "bias_initializer": fan_in_uniform(self.units)}
        self.hidden.build(h_shape)
        self.score = keras.layers.Dense(self._score_width(features), dtype=self.dtype_policy, name="V", **score_init)
        self.score.build(tuple(h_shape[:-1]) + (self.units,))
        self.built = True

    def _states(self, h, mask):
        """``h`` as float32; with ``include_padding`` the padded steps set to zero."""
        h = tf.cast(h, tf.float32)
        if self.include_padding:
            h = h * tf.cast(mask, tf.float32)[..., None]
        return h

    def weights_of(self, h, mask):
        """The attention weights a: float32 [B, T, H] (vector) or [B, T, 1] (scalar);
        each column sums to 1 over the valid steps and is zero on padding (with
        ``include_padding``: sums to 1 over all T steps, padding included)."""
        valid = tf.cast(mask, tf.bool)[..., None]
        if self.include_padding:
            logits = tf.cast(self.score(self.hidden(self._states(h, mask))), tf.float32)
            return tf.nn.softmax(logits, axis=1)
        logits = tf.cast(self.score(self.hidden(h)), tf.float32)
        logits = tf.where(valid, logits, tf.float32.min)
        a = tf.nn.softmax(logits, axis=1)  # over time, separately for each column
        return tf.where(valid, a, tf.zeros_like(a))

    def call(self, h, mask):
        return tf.reduce_sum(self.weights_of(h, mask) * self._states(h, mask), axis=1)

    def compute_mask(self, h, mask=None):
        return None

    def compute_output_spec(self, h, mask):
        return keras.KerasTensor((h.shape[0], h.shape[-1]), dtype="float32")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"units": 4}, examples.sequence_and_mask())

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, include_padding=self.include_padding, weight_init=self.weight_init)
        return config


@keras.saving.register_keras_serializable(package="grounded_text")
class VectorAttentionPooling(_AttentionPoolingBase):
    """Vector self-attention of Merkx & Frank (2019, §3.1): one weight per feature and step.

    ``a_t = softmax_t(V tanh(W h_t + b_w) + b_v) ∈ R^H`` (the softmax runs over time,
    separately for each of the H features, over the valid steps only) and
    ``Att = Σ_t a_t ∘ h_t``. W: H → ``units`` (paper: 128), V: ``units`` → H.

    Args:
      units: hidden size of the attention MLP (paper: 128).
      include_padding: softmax over all steps of the padded batch, padded states zero
        (the authors' code; see ``_AttentionPoolingBase``). Default ``False``: valid steps only.

    Call args:
      h: float [B, T, H]; mask: bool [B, T] (True = valid step).

    Returns:
      float32 [B, H]; zeros for a row with no valid step.

    Raises:
      ValueError: ``units < 1``.

    Example:
      >>> pool = VectorAttentionPooling(units=8)
      >>> h = tf.random.stateless_normal([2, 4, 6], seed=[0, 1])
      >>> mask = tf.constant([[True, True, True, False], [True, True, False, False]])
      >>> tuple(pool(h, mask).shape), tuple(pool.weights_of(h, mask).shape)
      ((2, 6), (2, 4, 6))
      >>> sorted(set(tf.reduce_sum(pool.weights_of(h, mask), axis=1).numpy().round(4).ravel().tolist()))
      [1.0]
      >>> float(tf.reduce_max(tf.abs(pool(h[:1, :3], mask[:1, :3]) - pool(h, mask)[:1]))) < 1e-6  # padding ignored
      True
    """

    def _score_width(self, features: int) -> int:
        return features


@keras.saving.register_keras_serializable(package="grounded_text")
class ScalarAttentionPooling(_AttentionPoolingBase):
    """Scalar self-attention: one weight per time step, shared by all features.

    ``a_t = softmax_t(v·tanh(W h_t + b_w) + b_v) ∈ R`` over the valid steps and
    ``Σ_t a_t h_t`` (the additive attention of Yang et al. 2016 without a context
    query; a lighter variant of ``VectorAttentionPooling``, not Merkx & Frank's).

    Args:
      units: hidden size of the attention MLP.
      include_padding: softmax over all steps of the padded batch (``_AttentionPoolingBase``).

    Call args:
      h: float [B, T, H]; mask: bool [B, T] (True = valid step).

    Returns:
      float32 [B, H]; zeros for a row with no valid step.

    Raises:
      ValueError: ``units < 1``.

    Example:
      >>> pool = ScalarAttentionPooling(units=8)
      >>> h = tf.random.stateless_normal([2, 4, 6], seed=[0, 1])
      >>> mask = tf.constant([[True, True, True, False], [False, False, False, False]])
      >>> pool(h, mask)[1].numpy().tolist()  # no valid step
      [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
      >>> a = pool.weights_of(h, mask)  # one weight per step, shared by the features
      >>> tuple(a.shape), tf.reduce_sum(a, axis=[1, 2]).numpy().round(4).tolist()
      ((2, 4, 1), [1.0, 0.0])
    """

    def _score_width(self, features: int) -> int:
        return 1
