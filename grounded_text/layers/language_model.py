"""A GRU language model over word ids (Mao et al. 2016's PureTextRnn and model A; the
Cap2Cap decoder of Kiela et al. 2018)."""

from __future__ import annotations

import keras
import tensorflow as tf

import grounded_text.layers.examples as examples
from grounded_text.layers.examples import LayerExample
from grounded_text.layers.text_preprocessor import PADDING_ID


@keras.saving.register_keras_serializable(package="grounded_text")
class RecurrentLanguageModel(keras.layers.Layer):
    """Word ids → GRU states → next-token logits.

    ``h_t = GRU(E[w_t], h_{t−1})``, ``h_0`` = the given initial state (zeros by
    default), ``logits_t = U h_t + c`` scores ``w_{t+1}``. Padding (id 0) is masked, so
    the final state is the state after the last valid token.

    Args:
      vocabulary_size: V, number of ids (padding and OOV buckets included).
      word_dim: word embedding size.
      units: hidden size (the sentence vector's size).

    Call args:
      ids: int [B, T] (with ``<S>`` … ``</S>``).
      initial_state: float [B, units] or ``None``.
      return_logits: if True return ``(logits float32 [B, T−1, V], final float32 [B, units])``
        (logits of steps 0..T−2, i.e. the predictions of ``ids[:, 1:]``); else the final
        state alone.

    Example:
      >>> lm = RecurrentLanguageModel(vocabulary_size=10, word_dim=4, units=8)
      >>> ids = tf.constant([[2, 5, 6, 3, 0], [2, 7, 3, 0, 0]])  # <S> … </S>, 0-padded
      >>> tuple(lm(ids).shape)
      (2, 8)
      >>> logits, final = lm(ids, initial_state=tf.zeros([2, 8]), return_logits=True)
      >>> tuple(logits.shape), tuple(final.shape)
      ((2, 4, 10), (2, 8))
    """

    def __init__(self, vocabulary_size: int, word_dim: int, units: int, **kwargs):
        super().__init__(**kwargs)
        if min(vocabulary_size, word_dim, units) < 1:
            raise ValueError("RecurrentLanguageModel: vocabulary_size, word_dim and units must be >= 1.")
        self.vocabulary_size, self.word_dim, self.units = int(vocabulary_size), int(word_dim), int(units)
        self.embedding = keras.layers.Embedding(self.vocabulary_size, self.word_dim, name="word_embedding")
        self.rnn = keras.layers.GRU(self.units, return_sequences=True, return_state=True, name="gru")
        self.logits = keras.layers.Dense(self.vocabulary_size, name="next_token_logits")

    def build(self, input_shape):
        self.embedding.build(input_shape)
        self.rnn.build(tuple(input_shape) + (self.word_dim,))
        self.logits.build((None, None, self.units))
        self.built = True

    def call(self, ids, initial_state=None, return_logits=False):
        mask = tf.not_equal(ids, PADDING_ID)
        x = self.embedding(ids)
        seq, final = self.rnn(x, mask=mask, initial_state=None if initial_state is None else [initial_state])
        final = tf.cast(final, tf.float32)
        if not return_logits:
            return final
        return tf.cast(self.logits(seq[:, :-1]), tf.float32), final

    def compute_output_spec(self, ids, initial_state=None, return_logits=False):
        final = keras.KerasTensor((ids.shape[0], self.units), dtype="float32")
        if not return_logits:
            return final
        t = None if ids.shape[1] is None else ids.shape[1] - 1
        return keras.KerasTensor((ids.shape[0], t, self.vocabulary_size), dtype="float32"), final

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"vocabulary_size": 11, "word_dim": 4, "units": 5}, examples.word_ids())

    def get_config(self):
        return {**super().get_config(), "vocabulary_size": self.vocabulary_size, "word_dim": self.word_dim,
                "units": self.units}


@keras.saving.register_keras_serializable(package="grounded_text")
class ZeroImage(keras.layers.Layer):
    """The zero image: ids int [B, T] → float32 zeros [B, d] (PinModelA's test-time input:
    the sentence embedding is computed without an image).

    Example:
      >>> ZeroImage(feature_dim=3)(tf.constant([[2, 5, 3], [2, 3, 0]])).numpy().tolist()
      [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """

    def __init__(self, feature_dim: int, **kwargs):
        super().__init__(**kwargs)
        self.feature_dim = int(feature_dim)

    def call(self, ids):
        return tf.zeros([tf.shape(ids)[0], self.feature_dim], tf.float32)

    def compute_output_spec(self, ids):
        return keras.KerasTensor((ids.shape[0], self.feature_dim), dtype="float32")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"feature_dim": 3}, examples.word_ids(), trainable=False)

    def get_config(self):
        return {**super().get_config(), "feature_dim": self.feature_dim}
