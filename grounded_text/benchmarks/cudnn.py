"""Whether a built model's recurrent layers can take Keras' cuDNN kernel on a GPU.

Keras 3 (TensorFlow backend) runs ``keras.layers.GRU`` / ``LSTM`` through
``CudnnRNNV3`` only when (``keras/src/layers/rnn/gru.py`` ``inner_loop`` and
``keras/src/backend/tensorflow/rnn.py`` ``cudnn_ok``):

* the layer's arguments allow it: tanh activation, sigmoid recurrent activation,
  ``unroll=False``, ``use_bias=True`` and, for the GRU, ``reset_after=True``
  (Keras' own ``_do_gru_arguments_support_cudnn`` / ``_do_lstm_arguments_support_cudnn``);
* ``recurrent_dropout == 0`` and ``use_cudnn`` is ``"auto"`` or ``True``;
* a GPU is visible;
* and, at run time, the mask is strictly right-padded with no fully masked row
  (``_assert_valid_mask``: otherwise the cuDNN path *fails* with an assertion, it
  does not fall back).

Otherwise Keras silently runs the generic ``tf.while_loop`` kernel, which is many
times slower on a GPU. The argument checks are static, so they can be read off a
built model on any machine (``rnn_cudnn_report``); the mask conditions are checked
on the ids the model's own preprocessor produces (``padding_report``).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from grounded_text.utils.compat import flatten_layers, rnn_cudnn_argument_checks


def gpu_available() -> bool:
    """Keras' own test (``_is_gpu_available``: a logical GPU device exists)."""
    return bool(tf.config.list_logical_devices("GPU"))


def recurrent_layers(model) -> list:
    """Every ``keras.layers.GRU`` / ``LSTM`` inside ``model`` (a layer or model), the
    two directions of a ``Bidirectional`` included, each once."""
    seen, out = set(), []
    for layer in flatten_layers(model):
        candidates = [layer]
        if isinstance(layer, keras.layers.Bidirectional):
            candidates = [layer.forward_layer, layer.backward_layer]
        for c in candidates:
            if isinstance(c, (keras.layers.GRU, keras.layers.LSTM)) and id(c) not in seen:
                seen.add(id(c))
                out.append(c)
    return out


def rnn_cudnn_report(model) -> list[dict]:
    """For each GRU/LSTM layer of ``model``: whether its configuration lets Keras use the
    cuDNN kernel (``eligible``: the argument check, ``recurrent_dropout == 0`` and
    ``use_cudnn`` not False), independent of the machine, with the reasons when not;
    and ``on_this_machine`` (eligible and a GPU visible)."""
    # Keras' own predicates, or a copy of their conditions where Keras no longer has them.
    gru_check, lstm_check, source = rnn_cudnn_argument_checks()
    gpu = gpu_available()
    rows = []
    for layer in recurrent_layers(model):
        cell = layer.cell
        is_gru = isinstance(layer, keras.layers.GRU)
        if is_gru:
            args_ok = bool(gru_check(activation=cell.activation, recurrent_activation=cell.recurrent_activation,
                                     unroll=layer.unroll, use_bias=cell.use_bias, reset_after=cell.reset_after))
        else:
            args_ok = bool(lstm_check(activation=cell.activation, recurrent_activation=cell.recurrent_activation,
                                      unroll=layer.unroll, use_bias=cell.use_bias))
        reasons = []
        if not args_ok:
            act = getattr(cell.activation, "__name__", str(cell.activation))
            rec = getattr(cell.recurrent_activation, "__name__", str(cell.recurrent_activation))
            if act != "tanh":
                reasons.append(f"activation={act}")
            if rec != "sigmoid":
                reasons.append(f"recurrent_activation={rec}")
            if layer.unroll:
                reasons.append("unroll=True")
            if not cell.use_bias:
                reasons.append("use_bias=False")
            if is_gru and not cell.reset_after:
                reasons.append("reset_after=False")
            if not reasons:
                reasons.append("arguments rejected by Keras' check")
        if cell.recurrent_dropout:
            reasons.append(f"recurrent_dropout={cell.recurrent_dropout}")
        use_cudnn = getattr(layer, "use_cudnn", "auto")
        if use_cudnn not in ("auto", True):
            reasons.append(f"use_cudnn={use_cudnn}")
        eligible = not reasons
        rows.append({"layer": layer.path if hasattr(layer, "path") else layer.name,
                     "type": "GRU" if is_gru else "LSTM", "units": int(cell.units),
                     "go_backwards": bool(layer.go_backwards), "arguments_ok": args_ok, "eligible": eligible,
                     "reasons": reasons, "gpu_available": gpu, "on_this_machine": eligible and gpu,
                     "check": f"{source} {'_do_gru' if is_gru else '_do_lstm'}_arguments_support_cudnn"})
    return rows


def mask_statistics(ids) -> dict:
    """Padding of one batch of ids (int [B, T], 0 = padding) as the RNN mask sees it.

    Returns ``{"rows", "padded_length" (T), "true_lengths" (list), "right_padded"
    (every row: non-zero ids first, then only zeros, Keras' ``_is_sequence_right_padded``
    condition), "fully_masked_rows" (all-padding rows: the cuDNN path asserts on them)}``.
    """
    ids = np.asarray(ids)
    if ids.ndim != 2:
        raise ValueError(f"mask_statistics: ids must be [B, T], got shape {ids.shape}.")
    mask = ids != 0
    lengths = mask.sum(axis=1)
    right = np.arange(ids.shape[1])[None, :] < lengths[:, None]
    return {"rows": int(ids.shape[0]), "padded_length": int(ids.shape[1]),
            "true_lengths": [int(x) for x in lengths], "right_padded": bool(np.array_equal(mask, right)),
            "fully_masked_rows": int((lengths == 0).sum())}


def padding_report(batch_stats: list[dict]) -> dict:
    """Aggregates ``mask_statistics`` of several batches.

    ``mean_padded_length``: mean over batches of T (each row of a batch is padded to
    its T); ``mean_true_length``: mean characters per caption; ``padding_fraction``:
    padded positions / all positions = 1 − Σ true / Σ (B·T); ``right_padded``: every batch."""
    if not batch_stats:
        raise ValueError("padding_report: no batches.")
    cells = sum(s["rows"] * s["padded_length"] for s in batch_stats)
    true = sum(sum(s["true_lengths"]) for s in batch_stats)
    rows = sum(s["rows"] for s in batch_stats)
    return {"batches": len(batch_stats), "rows": rows,
            "mean_padded_length": float(np.mean([s["padded_length"] for s in batch_stats])),
            "mean_true_length": true / rows, "padding_fraction": 1.0 - true / cells if cells else 0.0,
            "right_padded": all(s["right_padded"] for s in batch_stats),
            "fully_masked_rows": sum(s["fully_masked_rows"] for s in batch_stats)}
