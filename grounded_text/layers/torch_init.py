"""PyTorch's default weight initialisations, for layers that mirror a model written in PyTorch.

Keras and PyTorch draw a fresh layer's weights differently; a model ported from PyTorch code
starts from another point unless its weights are drawn as PyTorch draws them. The laws
(PyTorch 2.x, ``torch/nn/modules``):

* ``nn.Linear`` (``linear.py``, ``reset_parameters``): the weight by ``kaiming_uniform_`` with
  ``a = √5``, which is U(−1/√fan_in, 1/√fan_in), and the bias U(−1/√fan_in, 1/√fan_in);
* ``nn.GRU``, ``nn.LSTM`` (``rnn.py``, ``RNNBase.reset_parameters``): every weight and bias,
  input and recurrent, U(−1/√H, 1/√H) for H hidden units;
* ``nn.Embedding`` (``sparse.py``): N(0, 1).

Every function returns new initializer instances: an unseeded Keras initializer gives the
same values each time it is called with one shape, so no instance is shared by two weights.
Their seeds come from Python's ``random``, which ``keras.utils.set_random_seed`` seeds.
"""

from __future__ import annotations

import math

import keras


def fan_in_uniform(fan_in: int) -> keras.initializers.Initializer:
    """U(−1/√fan_in, 1/√fan_in): an ``nn.Linear`` weight of ``fan_in`` inputs, or its bias.

    Raises:
      ValueError: ``fan_in < 1``.
    """
    if int(fan_in) < 1:
        raise ValueError(f"fan_in_uniform: fan_in must be >= 1, got {fan_in}.")
    bound = 1.0 / math.sqrt(int(fan_in))
    return keras.initializers.RandomUniform(-bound, bound)


def rnn_initializers(units: int) -> dict:
    """``nn.GRU`` / ``nn.LSTM``'s law for a Keras ``GRU`` / ``LSTM`` of ``units`` → its
    keyword arguments: kernel, recurrent kernel and bias each U(−1/√units, 1/√units) (a Keras
    GRU's bias ``[2, 3H]`` holds PyTorch's ``b_ih`` and ``b_hh``; an LSTM's one bias is drawn
    once, and ``unit_forget_bias`` is off, as PyTorch adds no 1 to the forget gate)."""
    return {"kernel_initializer": fan_in_uniform(units), "recurrent_initializer": fan_in_uniform(units),
            "bias_initializer": fan_in_uniform(units)}
