"""Convolutional sentence encoder of Kim (2014) (VETE-CNN, Kurach et al. 2017, §3)."""

from __future__ import annotations

import keras
import tensorflow as tf

import grounded_text.layers.examples as examples
from grounded_text.layers.examples import LayerExample
from grounded_text.layers.pooling import masked_max
from grounded_text.layers.text_preprocessor import PADDING_ID


@keras.saving.register_keras_serializable(package="grounded_text")
class KimCNNEncoder(keras.layers.Layer):
    """Token ids → convolutions of several widths → max over time → FC → L2.

    Kim (2014, §2): for each width w, ``c_t = ReLU(W_w · E[w_{t..t+w−1}] + b_w)``
    (``filters`` feature maps), ``ĉ = max_t c_t`` (max-over-time pooling), the ĉ of
    all widths concatenated, dropout, then a fully connected layer to N and
    ``e / ||e||_2``. Padding embeddings are zeroed and convolutions use ``"same"``
    zero padding, and the max runs over valid positions only, so a sentence's
    vector does not depend on how far its batch is padded (sentences shorter than
    w are zero-padded, as Kim pads).

    Args:
      vocabulary_size: number of ids (padding and OOV buckets included).
      word_dim: word embedding size (Kim: 300).
      filter_widths: tuple of window widths (Kim: 3, 4, 5).
      filters: feature maps per width (Kim: 100).
      output_dim: N.
      dropout: dropout on the pooled features (Kim: 0.5), training only.
      normalize: L2-normalise the output.
      trainable_embeddings: False freezes E.

    Call args:
      ids: int [B, T], 0 = padding.

    Returns:
      float32 [B, N]; a row with no token pools to zeros before the FC.

    Raises:
      ValueError: empty/non-positive ``filter_widths`` or sizes.

    Example:
      >>> encoder = KimCNNEncoder(vocabulary_size=10, word_dim=4, filter_widths=(2, 3), filters=5, output_dim=3)
      >>> ids = tf.constant([[2, 5, 7, 0], [3, 4, 0, 0]])
      >>> e = encoder(ids, training=False)
      >>> tuple(e.shape), e.dtype.name, tf.norm(e, axis=-1).numpy().round(4).tolist()
      ((2, 3), 'float32', [1.0, 1.0])
      >>> float(tf.reduce_max(tf.abs(encoder(ids[1:, :2]) - e[1:]))) < 1e-6  # padding never counts
      True
    """

    def __init__(self, vocabulary_size: int, word_dim: int = 300, filter_widths=(3, 4, 5), filters: int = 100,
                 output_dim: int = 128, dropout: float = 0.5, normalize: bool = True,
                 trainable_embeddings: bool = True, **kwargs):
        super().__init__(**kwargs)
        widths = tuple(int(w) for w in filter_widths)
        if not widths or min(widths) < 1:
            raise ValueError(f"KimCNNEncoder: filter_widths must be positive widths, got {filter_widths!r}.")
        if min(vocabulary_size, word_dim, filters, output_dim) < 1:
            raise ValueError("KimCNNEncoder: vocabulary_size, word_dim, filters, output_dim must be >= 1.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"KimCNNEncoder: dropout must be in [0, 1), got {dropout}.")
        self.vocabulary_size, self.word_dim, self.filter_widths = int(vocabulary_size), int(word_dim), widths
        self.filters, self.output_dim, self.dropout = int(filters), int(output_dim), float(dropout)
        self.normalize, self.trainable_embeddings = bool(normalize), bool(trainable_embeddings)
        self.embedding = keras.layers.Embedding(self.vocabulary_size, self.word_dim, dtype=self.dtype_policy,
                                                name="word_embedding")
        self.embedding.trainable = self.trainable_embeddings
        self.convs = [keras.layers.Conv1D(self.filters, w, padding="same", activation="relu",
                                          dtype=self.dtype_policy, name=f"conv_w{w}") for w in widths]
        self.drop = keras.layers.Dropout(self.dropout)
        self.fc = keras.layers.Dense(self.output_dim, dtype=self.dtype_policy, name="fc")

    def build(self, input_shape):
        self.embedding.build(input_shape)
        for conv in self.convs:
            conv.build(tuple(input_shape) + (self.word_dim,))
        self.fc.build((input_shape[0], self.filters * len(self.convs)))
        self.built = True

    def feature_maps(self, ids):
        """The ReLU feature maps ``c`` of every width, each [B, T, filters], and the mask."""
        mask = tf.not_equal(ids, PADDING_ID)
        x = self.embedding(ids)
        x = x * tf.cast(mask, x.dtype)[..., None]
        return [conv(x) for conv in self.convs], mask

    def call(self, ids, training=None):
        maps, mask = self.feature_maps(ids)
        pooled = tf.concat([masked_max(c, mask) for c in maps], axis=-1)
        pooled = self.drop(pooled, training=training)
        e = tf.cast(self.fc(tf.cast(pooled, self.compute_dtype)), tf.float32)
        if self.normalize:
            e = tf.math.l2_normalize(e, axis=-1, epsilon=1e-24)
        return e

    def compute_output_spec(self, ids, training=None):
        return keras.KerasTensor((ids.shape[0], self.output_dim), dtype="float32")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"vocabulary_size": 11, "word_dim": 6, "filter_widths": (2, 3), "filters": 3,
                             "output_dim": 4}, examples.word_ids())

    def get_config(self):
        config = super().get_config()
        config.update(vocabulary_size=self.vocabulary_size, word_dim=self.word_dim,
                      filter_widths=list(self.filter_widths), filters=self.filters, output_dim=self.output_dim,
                      dropout=self.dropout, normalize=self.normalize,
                      trainable_embeddings=self.trainable_embeddings)
        return config
