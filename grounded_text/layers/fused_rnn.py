"""A faster bidirectional GRU with the same mathematics as Keras' ``Bidirectional(GRU)``.

Keras' GRU on a CPU (no cuDNN) runs the generic RNN loop: at every time step and for
each direction separately, the input projection ``x_t W``, the recurrent product
``h_{t-1} U``, the gates, and the masking; TensorFlow then differentiates that loop
step by step (one small ``[n, B] × [B, 3n]`` product per step and direction to
accumulate ``dU``). :func:`bidirectional_gru` computes the same function from the same
weights (the layer's own variables; nothing is copied) with

- the input projections of both directions and all time steps in one matmul
  ``[B·T, d] × [d, 6n]`` before the loop;
- both directions in one loop (their independent ops run concurrently on two cores);
- a hand-written backward pass (``tf.custom_gradient``): one matmul per step and direction
  for ``dh_{t-1}``, then ``dU = Σ_t h_{t-1}ᵀ δ_t``, ``dW = Xᵀ δX`` and ``dX = δX Wᵀ`` as
  three large matmuls after the loop.

The equations are Keras' (``reset_after=True``, the default and cuDNN's form)::

    [x_z, x_r, x_h] = x_t W + b_in            [r_z, r_r, r_h] = h_{t-1} U + b_rec
    z = σ(x_z + r_z)    r = σ(x_r + r_r)    ĥ = tanh(x_h + r ∘ r_h)
    h_new = z ∘ h_{t-1} + (1 − z) ∘ ĥ
    h_t = h_new where the step is valid, else h_{t-1};   output_t = h_new or 0

with the backward direction reading the sequence (and mask) reversed and its outputs
flipped back, outputs concatenated ``[forward, backward]`` — exactly what
``Bidirectional(GRU(return_sequences=True))`` computes under a mask, for any mask (not
only right padding). Only the order of floating-point sums differs (the test compares
loss and gradients with the Keras path to 1e-5). Layers this does not cover (other
cells or activations, dropout, mixed precision, stateful, merge modes other than
``concat``) are left to Keras: :func:`can_fuse` says which.
"""

from __future__ import annotations

import keras
import tensorflow as tf


def _activation_name(fn) -> str:
    return getattr(fn, "__name__", "")


_GPU: list = []


def _gpu_available() -> bool:
    if not _GPU:
        _GPU.append(bool(tf.config.list_physical_devices("GPU")))
    return _GPU[0]


def can_fuse(layer, training=None) -> bool:
    """Whether ``layer`` is a ``Bidirectional(GRU)`` that :func:`bidirectional_gru` computes
    exactly and faster than Keras (no GPU: there Keras runs cuDNN): float32,
    ``reset_after=True``, biases, tanh / sigmoid, no (active) dropout, not stateful,
    ``return_sequences=True``, ``merge_mode="concat"``.

    Example:
      >>> gru = keras.layers.Bidirectional(keras.layers.GRU(3, return_sequences=True))
      >>> can_fuse(gru) == (not tf.config.list_physical_devices("GPU"))  # on a GPU Keras runs cuDNN
      True
      >>> can_fuse(keras.layers.Bidirectional(keras.layers.LSTM(3, return_sequences=True)))
      False
    """
    if not isinstance(layer, keras.layers.Bidirectional) or layer.merge_mode != "concat" or layer.return_state:
        return False
    if _gpu_available():  # Keras takes cuDNN's fused kernel there
        return False
    fwd, bwd = layer.forward_layer, layer.backward_layer
    for rnn, backwards in ((fwd, False), (bwd, True)):
        if not isinstance(rnn, keras.layers.GRU) or bool(rnn.go_backwards) != backwards:
            return False
        cell = rnn.cell
        if (rnn.stateful or not rnn.return_sequences or rnn.unroll or not cell.reset_after or not cell.use_bias
                or _activation_name(cell.activation) != "tanh"
                or _activation_name(cell.recurrent_activation) != "sigmoid"):
            return False
        if training and (cell.dropout or cell.recurrent_dropout):
            return False
        if rnn.compute_dtype != "float32" or rnn.variable_dtype != "float32":
            return False
    return fwd.cell.units == bwd.cell.units


def bidirectional_gru(layer, inputs, mask=None, training=None):
    """``layer(inputs, mask=mask)`` for a ``Bidirectional(GRU)`` that :func:`can_fuse`.

    Args:
      layer: the Keras ``Bidirectional`` layer (its weights are used as they are; built
        here if it is not yet).
      inputs: float32 [B, T, d].
      mask: bool [B, T] (``True`` = valid step) or ``None`` (all valid).
      training: truthy: the loop records what the hand-written backward pass needs; otherwise
        a lighter loop that records the outputs only (still differentiable, by TensorFlow's
        own while-loop gradient).

    Returns:
      float32 [B, T, 2n]: the forward outputs, then the backward ones, zero at masked steps.

    Example:
      >>> layer = keras.layers.Bidirectional(keras.layers.GRU(3, return_sequences=True))
      >>> x = tf.random.stateless_normal([2, 4, 5], seed=[0, 1])
      >>> mask = tf.constant([[True, True, True, False], [True, True, False, False]])
      >>> fused = bidirectional_gru(layer, x, mask)
      >>> tuple(fused.shape), float(tf.reduce_max(tf.abs(fused - layer(x, mask=mask)))) < 1e-5
      ((2, 4, 6), True)
    """
    inputs = tf.convert_to_tensor(inputs, tf.float32)
    if not layer.built:
        layer.build(tuple(inputs.shape))
    fwd, bwd = layer.forward_layer.cell, layer.backward_layer.cell
    if mask is None:
        mask = tf.ones(tf.shape(inputs)[:2], tf.bool)
    def weights(cell):
        return (tf.convert_to_tensor(v.value) for v in (cell.kernel, cell.recurrent_kernel, cell.bias))

    f_kernel, f_recurrent, f_bias = weights(fwd)
    b_kernel, b_recurrent, b_bias = weights(bwd)
    kernel = tf.concat([f_kernel, b_kernel], axis=1)  # [d, 6n]
    recurrent = tf.stack([f_recurrent, b_recurrent])  # [2, n, 3n]
    input_bias = tf.concat([f_bias[0], b_bias[0]], axis=0)  # [6n]
    recurrent_bias = tf.stack([f_bias[1], b_bias[1]])  # [2, 3n]
    fn = _bigru if training else _bigru_outputs
    return fn(inputs, tf.cast(mask, tf.float32), kernel, recurrent, input_bias, recurrent_bias)


def _time_major(a, reverse: bool):
    """[B, T, k] → [T, B, k], reversed in time for the backward direction."""
    a = tf.transpose(a, [1, 0, 2])
    return tf.reverse(a, [0]) if reverse else a


def _batch_major(a, reverse: bool):
    """[T, B, k] → [B, T, k], flipped back in time for the backward direction."""
    return tf.transpose(tf.reverse(a, [0]) if reverse else a, [1, 0, 2])


def _forward_step(xg, h, recurrent, recurrent_bias, n):
    hr = tf.matmul(h, recurrent) + recurrent_bias
    z = tf.sigmoid(xg[:, :n] + hr[:, :n])
    r = tf.sigmoid(xg[:, n:2 * n] + hr[:, n:2 * n])
    rh = hr[:, 2 * n:]
    hh = tf.tanh(xg[:, 2 * n:] + r * rh)
    return z * h + (1.0 - z) * hh, z, r, hh, rh


def _backward_step(dh, dy, m, z, r, hh, rh, hp, recurrent_t):
    """Gradients of one step: (dh_{t-1}, d(x_t W + b_in), d(h_{t-1} U + b_rec)); ``m`` is the
    step's mask as float [B, 1] (a product by 0 or 1 selects exactly, and is several times
    faster on CPUs than a broadcasting ``tf.where``)."""
    dh_new = m * (dh + dy)
    dz = dh_new * (hp - hh)
    da_h = dh_new * (1.0 - z) * (1.0 - hh * hh)
    da_r = da_h * rh * r * (1.0 - r)
    da_z = dz * z * (1.0 - z)
    d_rec = tf.concat([da_z, da_r, da_h * r], -1)
    dh_prev = (1.0 - m) * dh + dh_new * z + tf.matmul(d_rec, recurrent_t)
    return dh_prev, tf.concat([da_z, da_r, da_h], -1), d_rec


def _bigru_outputs(x, mask, kernel, recurrent, input_bias, recurrent_bias):
    """The forward pass of :func:`_bigru` recording the outputs only (inference)."""
    n = recurrent.shape[1]
    batch, steps, d = tf.shape(x)[0], tf.shape(x)[1], tf.shape(x)[2]
    xw = tf.reshape(tf.matmul(tf.reshape(x, [-1, d]), kernel) + input_bias, [batch, steps, 6 * n])
    dirs = (0, 1)
    xs = [_time_major(xw[..., 3 * n * k:3 * n * (k + 1)], k == 1) for k in dirs]
    valid = [_time_major(mask[..., None], k == 1) for k in dirs]

    def step(t, hs, outs):
        new_hs, new_outs = [], []
        for k in dirs:
            h_new = _forward_step(xs[k][t], hs[k], recurrent[k], recurrent_bias[k], n)[0]
            v = valid[k][t]
            new_outs.append(outs[k].write(t, v * h_new))
            new_hs.append(v * h_new + (1.0 - v) * hs[k])
        return t + 1, new_hs, new_outs

    h0 = tf.zeros([batch, n], tf.float32)
    outs = [tf.TensorArray(tf.float32, size=steps, element_shape=tf.TensorShape([None, n])) for _ in dirs]
    _, _, outs = tf.while_loop(lambda t, *_: t < steps, step, (tf.constant(0), [h0, h0], outs),
                               parallel_iterations=1)
    return tf.concat([_batch_major(tf.reshape(outs[k].stack(), [steps, batch, n]), k == 1) for k in dirs], -1)


@tf.custom_gradient
def _bigru(x, mask, kernel, recurrent, input_bias, recurrent_bias):
    # Two directions, k = 0 (forward) and 1 (backward), each in time-major order of its own
    # reading; two plain matmuls per step (a batched [2, B, n] matmul is several times slower
    # on CPUs), and the two directions' independent ops run concurrently.
    n = recurrent.shape[1]
    batch, steps, d = tf.shape(x)[0], tf.shape(x)[1], tf.shape(x)[2]
    x2 = tf.reshape(x, [-1, d])
    xw = tf.reshape(tf.matmul(x2, kernel) + input_bias, [batch, steps, 6 * n])
    dirs = (0, 1)
    xs = [_time_major(xw[..., 3 * n * k:3 * n * (k + 1)], k == 1) for k in dirs]  # [T, B, 3n]
    valid = [_time_major(mask[..., None], k == 1) for k in dirs]  # [T, B, 1], 1.0 = valid step
    us = [recurrent[k] for k in dirs]
    rbs = [recurrent_bias[k] for k in dirs]
    names = ("out", "h", "z", "r", "hh", "rh")

    def arrays():
        return {name: tf.TensorArray(tf.float32, size=steps, element_shape=tf.TensorShape([None, n]))
                for name in names}

    def step(t, hs, records):
        new_hs, new_records = [], []
        for k in dirs:
            h_new, z, r, hh, rh = _forward_step(xs[k][t], hs[k], us[k], rbs[k], n)
            v = valid[k][t]
            # Masking by products with 0.0 / 1.0: exact for finite values (x·1 + h·0 = x).
            values = {"out": v * h_new, "h": hs[k], "z": z, "r": r, "hh": hh, "rh": rh}
            new_records.append({name: records[k][name].write(t, values[name]) for name in names})
            new_hs.append(v * h_new + (1.0 - v) * hs[k])
        return t + 1, new_hs, new_records

    h0 = tf.zeros([batch, n], tf.float32)
    _, _, records = tf.while_loop(lambda t, *_: t < steps, step, (tf.constant(0), [h0, h0], [arrays(), arrays()]),
                                  parallel_iterations=1)
    saved = [{name: tf.reshape(records[k][name].stack(), [steps, batch, n]) for name in names} for k in dirs]
    out = tf.concat([_batch_major(saved[k]["out"], k == 1) for k in dirs], axis=-1)

    def grad(dy):
        dys = [_time_major(dy[..., n * k:n * (k + 1)], k == 1) for k in dirs]
        # Transposed once here, not per step: on CPUs matmul(..., transpose_b=True) of these
        # shapes runs at a third of the rate of a matmul by an already transposed matrix.
        us_t = [tf.transpose(u) for u in us]

        def gates():
            return [tf.TensorArray(tf.float32, size=steps, element_shape=tf.TensorShape([None, 3 * n]))
                    for _ in range(2)]

        def back(i, dhs, records):
            t = steps - 1 - i
            new_dhs, new_records = [], []
            for k in dirs:
                s = saved[k]
                dh_prev, dxg, d_rec = _backward_step(dhs[k], dys[k][t], valid[k][t], s["z"][t], s["r"][t],
                                                     s["hh"][t], s["rh"][t], s["h"][t], us_t[k])
                new_dhs.append(dh_prev)
                new_records.append([records[k][0].write(t, dxg), records[k][1].write(t, d_rec)])
            return i + 1, new_dhs, new_records

        _, _, records = tf.while_loop(lambda i, *_: i < steps, back,
                                      (tf.constant(0), [h0, h0], [gates(), gates()]), parallel_iterations=1)
        d_recurrent, d_recurrent_bias, dxw = [], [], []
        for k in dirs:
            dxg = tf.reshape(records[k][0].stack(), [steps, batch, 3 * n])
            d_rec = tf.reshape(records[k][1].stack(), [-1, 3 * n])
            # dU = Σ_t h_{t-1}ᵀ δ_t over every step and row: one matmul.
            d_recurrent.append(tf.matmul(tf.transpose(tf.reshape(saved[k]["h"], [-1, n])), d_rec))
            d_recurrent_bias.append(tf.reduce_sum(d_rec, axis=0))
            dxw.append(_batch_major(dxg, k == 1))
        dxw = tf.reshape(tf.concat(dxw, axis=-1), [-1, 6 * n])  # [B·T, 6n]
        d_kernel = tf.matmul(tf.transpose(x2), dxw)
        d_input_bias = tf.reduce_sum(dxw, axis=0)
        dx = tf.reshape(tf.matmul(dxw, tf.transpose(kernel)), tf.shape(x))
        return (dx, tf.zeros_like(mask), d_kernel, tf.stack(d_recurrent), d_input_bias,
                tf.stack(d_recurrent_bias))

    return out, grad
