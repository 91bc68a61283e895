"""The stacked (bidirectional) GRU/LSTM that the recurrent encoders share.

``h^(l) = RNN_l(dropout(h^(l−1)))`` for l = 1..num_layers, ``h^(0)`` the input sequence,
dropout between layers only (never before the first). Each layer is a Keras ``GRU`` or
``LSTM`` with ``return_sequences=True``, wrapped in ``Bidirectional`` (states concatenated
``[forward, backward]``) when bidirectional. Options:

* ``weight_init``: Keras' initialisers or PyTorch's (``torch_init.rnn_initializers``), for
  models ported from PyTorch code;
* ``fused``: bidirectional GRUs run through ``fused_rnn.bidirectional_gru``, the same function
  of the same weights, faster on CPUs; the layers it does not cover (``fused_rnn.can_fuse``)
  run Keras' own loop.
"""

from __future__ import annotations

import keras

import grounded_text.layers.examples as examples
from grounded_text.layers.examples import LayerExample
from grounded_text.layers.fused_rnn import bidirectional_gru, can_fuse
from grounded_text.layers.pooling import WEIGHT_INITS
from grounded_text.layers.torch_init import rnn_initializers

CELLS = {"gru": keras.layers.GRU, "lstm": keras.layers.LSTM}


@keras.saving.register_keras_serializable(package="grounded_text")
class StackedRNN(keras.layers.Layer):
    """float [B, T, d] → float [B, T, N]: ``num_layers`` recurrent layers, N = units × directions.

    Args:
      units: hidden size per direction.
      num_layers: stacked layers (>= 1).
      cell: ``"gru"`` or ``"lstm"``.
      bidirectional: each layer a ``Bidirectional`` RNN (outputs ``[forward, backward]``).
      dropout: dropout rate on the states between layers (training only; none before the
        first layer).
      weight_init: ``"keras"`` (Glorot-uniform input kernels, orthogonal recurrent kernels,
        zero biases, an LSTM's forget bias 1) or ``"torch"``: ``nn.GRU`` / ``nn.LSTM``'s law,
        every weight and bias U(−1/√units, 1/√units), no forget-gate 1.
      fused: bidirectional GRUs through ``fused_rnn.bidirectional_gru`` where ``can_fuse``
        allows it (same outputs and gradients to float rounding); ``False``: Keras' loop.

    Layer names: ``{cell}_{i}``, wrapped in ``bi_{cell}_{i}`` when bidirectional, i = 0..;
    ``rnns`` lists them bottom first (their weights in this order).

    Call args:
      inputs: float [B, T, d].
      mask: bool [B, T] (``True`` = valid step) or ``None``. Masked steps output zeros in the
        returned sequence and leave the states unchanged.

    Returns:
      float [B, T, N].

    Raises:
      ValueError: unknown cell or weight_init, sizes < 1, dropout outside [0, 1).

    Example:
      >>> import tensorflow as tf
      >>> stack = StackedRNN(3, num_layers=2, bidirectional=True, dropout=0.5)
      >>> x = tf.random.stateless_normal([2, 4, 5], seed=[0, 1])
      >>> h = stack(x, tf.constant([[True, True, True, False], [True, False, False, False]]))
      >>> tuple(h.shape), [rnn.name for rnn in stack.rnns], stack.output_dim
      ((2, 4, 6), ['bi_gru_0', 'bi_gru_1'], 6)
      >>> StackedRNN.from_config(stack.get_config()).get_config() == stack.get_config()
      True
    """

    def __init__(self, units: int, num_layers: int = 1, cell: str = "gru", bidirectional: bool = False,
                 dropout: float = 0.0, weight_init: str = "keras", fused: bool = False, **kwargs):
        super().__init__(**kwargs)
        if cell not in CELLS:
            raise ValueError(f"StackedRNN: cell must be one of {sorted(CELLS)}, got {cell!r}.")
        if int(units) < 1 or int(num_layers) < 1:
            raise ValueError(f"StackedRNN: units and num_layers must be >= 1, got {units} and {num_layers}.")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"StackedRNN: dropout must be in [0, 1), got {dropout}.")
        if weight_init not in WEIGHT_INITS:
            raise ValueError(f"StackedRNN: weight_init must be one of {WEIGHT_INITS}, got {weight_init!r}.")
        self.units, self.num_layers, self.cell = int(units), int(num_layers), cell
        self.bidirectional, self.dropout = bool(bidirectional), float(dropout)
        self.weight_init, self.fused = weight_init, bool(fused)
        # Layers are created in this order, each drawing its initialisers' seeds before the next
        # is made, so that a seeded model draws the same weights as the encoders always have.
        self.rnns = []
        for i in range(self.num_layers):
            torch_law = {} if weight_init == "keras" else {
                **rnn_initializers(self.units), **({"unit_forget_bias": False} if cell == "lstm" else {})}
            rnn = CELLS[cell](self.units, return_sequences=True, dtype=self.dtype_policy, name=f"{cell}_{i}",
                              **torch_law)
            if self.bidirectional:
                rnn = keras.layers.Bidirectional(rnn, dtype=self.dtype_policy, name=f"bi_{cell}_{i}")
            self.rnns.append(rnn)
        # At rate 0 this layer has no random state, so a model without dropout keeps exactly the
        # variables (random-generator states included) it had before the block existed.
        self.drop = keras.layers.Dropout(self.dropout)
        # The output sequence has the input's valid steps, so its mask passes on (as an RNN's does).
        self.supports_masking = True

    @property
    def output_dim(self) -> int:
        return self.units * (2 if self.bidirectional else 1)

    def build(self, input_shape):
        self.build_layers(input_shape)

    def build_layers(self, input_shape):
        """Builds the recurrent layers for inputs of ``input_shape`` (…, T, d) in the caller's
        name scope and marks the block built.

        An encoder calls this from its own ``build``, not ``build``: ``build`` opens the
        block's name scope, which would put the block's name into every weight's path
        (``encoder/stacked_rnn/bi_gru_0/...`` instead of ``encoder/bi_gru_0/...``).
        """
        shape = tuple(input_shape)
        for rnn in self.rnns:
            rnn.build(shape)
            shape = shape[:-1] + (self.output_dim,)
        self.built = True

    def call(self, inputs, mask=None, training=None):
        h = inputs
        for i, rnn in enumerate(self.rnns):
            if i > 0 and self.dropout > 0.0:
                h = self.drop(h, training=training)
            if self.fused and can_fuse(rnn, training):
                h = bidirectional_gru(rnn, h, mask, training)
            else:
                h = rnn(h, mask=mask, training=training)
        return h

    # Keras pairs each ``*_shape`` argument with the call argument of that name, so that a
    # functional model can pass the mask positionally.
    def compute_output_shape(self, inputs_shape, mask_shape=None):
        return tuple(inputs_shape)[:-1] + (self.output_dim,)

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"units": 3, "num_layers": 2, "cell": "lstm", "bidirectional": True, "dropout": 0.1},
                            examples.sequence_and_mask(), mixed_output_dtype="float16")

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units, num_layers=self.num_layers, cell=self.cell,
                      bidirectional=self.bidirectional, dropout=self.dropout, weight_init=self.weight_init,
                      fused=self.fused)
        return config


class UsesStackedRNN:
    """What an encoder holding a ``StackedRNN`` as ``self.stacked_rnn`` exposes of it: its
    recurrent layers and its fused-path switch (not serialised: it is no model choice)."""

    @property
    def rnns(self) -> list:
        """The recurrent layers, bottom first (``StackedRNN.rnns``)."""
        return self.stacked_rnn.rnns

    @property
    def fused_rnn(self) -> bool:
        return self.stacked_rnn.fused

    @fused_rnn.setter
    def fused_rnn(self, value: bool):
        self.stacked_rnn.fused = bool(value)
