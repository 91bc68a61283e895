"""Stacked recurrent sentence encoder (VETE-RNN, Kurach et al. 2017, §3; Table 3, §5.1)."""

from __future__ import annotations

import keras
import tensorflow as tf

import grounded_text.layers.examples as examples
from grounded_text.layers.examples import LayerExample
from grounded_text.layers.pooling import WEIGHT_INITS, last_valid, masked_max, masked_mean
from grounded_text.layers.stacked_rnn import CELLS, StackedRNN, UsesStackedRNN
from grounded_text.layers.text_preprocessor import PADDING_ID

__all__ = ["CELLS", "RNN_POOLINGS", "RNNEncoder"]

RNN_POOLINGS = ("last", "mean", "max")


@keras.saving.register_keras_serializable(package="grounded_text")
class RNNEncoder(UsesStackedRNN, keras.layers.Layer):
    """Token ids → stacked GRU/LSTM (``StackedRNN``) → pooled state → (optional FC) → L2.

    ``h^(l) = RNN_l(h^(l−1))``, ``h^(0) = E[w]``, l = 1..num_layers; the sentence
    vector is the state at the last valid step (``pooling="last"``, VETE-RNN), the
    mean over valid steps (``"mean"``) or the max over time (``"max"``); then an
    optional linear map to N = ``output_dim`` and ``e / ||e||_2``. Padding (id 0)
    is masked in the recurrences and the pooling, so right-padding never changes a
    sentence's vector. With ``bidirectional`` each layer is a bidirectional RNN
    (concatenated states; ``"last"`` then takes the forward state at the last valid
    step and the backward state at step 0, i.e. the final states of both
    directions).

    Args:
      vocabulary_size: number of ids (padding and OOV buckets included).
      word_dim: word embedding size.
      units: hidden size per direction.
      num_layers: 1–3 stacked layers.
      cell: ``"gru"`` or ``"lstm"``.
      pooling: ``"last"``, ``"mean"`` or ``"max"``.
      bidirectional: bidirectional layers.
      output_dim: N of a final linear map, or ``None`` (N = units × directions).
      dropout: dropout between layers (training only).
      normalize: L2-normalise the output.
      trainable_embeddings: False freezes E (e.g. pretrained GloVe).
      weight_init: the recurrent weights' law: ``"keras"`` (default: Keras' initialisers) or
        ``"torch"`` (PyTorch's ``nn.GRU`` / ``nn.LSTM`` law; see ``StackedRNN``). The embedding
        and the projection keep Keras' initialisers.
      fused_rnn: bidirectional GRUs through ``fused_rnn.bidirectional_gru`` (the same function
        of the same weights, faster on CPUs). Default ``False``: Keras' own loop. Not
        serialised: it is no model choice; also settable later (``encoder.fused_rnn = True``).

    Call args:
      ids: int [B, T] token ids, 0 = padding.

    Returns:
      float32 [B, N]. A row with no token gives zeros (only possible without
      boundary tokens).

    Raises:
      ValueError: bad sizes, ``num_layers`` outside 1..3, unknown cell/pooling.

    Example:
      >>> encoder = RNNEncoder(vocabulary_size=10, word_dim=4, units=3, bidirectional=True)
      >>> ids = tf.constant([[2, 5, 7, 0], [3, 0, 0, 0]])
      >>> e = encoder(ids)
      >>> tuple(e.shape), e.dtype.name, tf.norm(e, axis=-1).numpy().round(4).tolist()
      ((2, 6), 'float32', [1.0, 1.0])
      >>> float(tf.reduce_max(tf.abs(encoder(ids[1:, :1]) - e[1:]))) < 1e-6  # padding never counts
      True
    """

    def __init__(self, vocabulary_size: int, word_dim: int = 300, units: int = 512, num_layers: int = 1,
                 cell: str = "gru", pooling: str = "last", bidirectional: bool = False,
                 output_dim: int | None = None, dropout: float = 0.0, normalize: bool = True,
                 trainable_embeddings: bool = True, weight_init: str = "keras", fused_rnn: bool = False,
                 **kwargs):
        super().__init__(**kwargs)
        if cell not in CELLS:
            raise ValueError(f"RNNEncoder: cell must be one of {sorted(CELLS)}, got {cell!r}.")
        if pooling not in RNN_POOLINGS:
            raise ValueError(f"RNNEncoder: pooling must be one of {RNN_POOLINGS}, got {pooling!r}.")
        if not 1 <= int(num_layers) <= 3:
            raise ValueError(f"RNNEncoder: num_layers must be 1..3, got {num_layers}.")
        if min(vocabulary_size, word_dim, units) < 1 or (output_dim is not None and output_dim < 1):
            raise ValueError("RNNEncoder: vocabulary_size, word_dim, units, output_dim must be >= 1.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"RNNEncoder: dropout must be in [0, 1), got {dropout}.")
        if weight_init not in WEIGHT_INITS:
            raise ValueError(f"RNNEncoder: weight_init must be one of {WEIGHT_INITS}, got {weight_init!r}.")
        self.vocabulary_size, self.word_dim, self.units = int(vocabulary_size), int(word_dim), int(units)
        self.num_layers, self.cell, self.pooling = int(num_layers), cell, pooling
        self.bidirectional, self.dropout = bool(bidirectional), float(dropout)
        self.output_dim = None if output_dim is None else int(output_dim)
        self.normalize, self.trainable_embeddings = bool(normalize), bool(trainable_embeddings)
        self.weight_init = weight_init
        self.embedding = keras.layers.Embedding(self.vocabulary_size, self.word_dim, dtype=self.dtype_policy,
                                                name="word_embedding")
        self.embedding.trainable = self.trainable_embeddings
        # Keras' weight files walk a layer's attributes in sorted order and store each layer once,
        # at its first name: ``rnns`` (the property below) sorts before ``stacked_rnn``, so files
        # keep the recurrent layers where files saved before the block have them.
        self.stacked_rnn = StackedRNN(self.units, self.num_layers, cell, self.bidirectional, self.dropout,
                                      weight_init, fused_rnn, dtype=self.dtype_policy, name="stacked_rnn")
        self.projection = (keras.layers.Dense(self.output_dim, dtype=self.dtype_policy, name="projection")
                           if self.output_dim else None)

    @property
    def drop(self) -> keras.layers.Dropout:
        """The dropout between layers."""
        return self.stacked_rnn.drop

    @property
    def state_dim(self) -> int:
        return self.stacked_rnn.output_dim

    def build(self, input_shape):
        self.embedding.build(input_shape)
        self.stacked_rnn.build_layers(tuple(input_shape) + (self.word_dim,))
        if self.projection is not None:
            self.projection.build((input_shape[0], self.state_dim))
        self.built = True

    def call(self, ids, training=None):
        mask = tf.not_equal(ids, PADDING_ID)
        h = self.stacked_rnn(self.embedding(ids), mask=mask, training=training)
        if self.pooling == "mean":
            e = masked_mean(h, mask)
        elif self.pooling == "max":
            e = masked_max(h, mask)
        elif self.bidirectional:
            fwd = last_valid(h[..., : self.units], mask)
            bwd = tf.cast(h[:, 0, self.units:], tf.float32)
            bwd = tf.where(tf.reduce_any(mask, axis=1)[:, None], bwd, tf.zeros_like(bwd))
            e = tf.concat([fwd, bwd], axis=-1)
        else:
            e = last_valid(h, mask)
        if self.projection is not None:
            e = tf.cast(self.projection(e), tf.float32)
        if self.normalize:
            e = tf.math.l2_normalize(e, axis=-1, epsilon=1e-24)
        return e

    def compute_output_spec(self, ids, training=None):
        return keras.KerasTensor((ids.shape[0], self.output_dim or self.state_dim), dtype="float32")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"vocabulary_size": 11, "word_dim": 6, "units": 4, "num_layers": 2, "cell": "lstm",
                             "pooling": "mean", "bidirectional": True, "output_dim": 3, "dropout": 0.1},
                            examples.word_ids())

    def get_config(self):
        config = super().get_config()
        config.update(vocabulary_size=self.vocabulary_size, word_dim=self.word_dim, units=self.units,
                      num_layers=self.num_layers, cell=self.cell, pooling=self.pooling,
                      bidirectional=self.bidirectional, output_dim=self.output_dim, dropout=self.dropout,
                      normalize=self.normalize, trainable_embeddings=self.trainable_embeddings,
                      weight_init=self.weight_init)
        return config
