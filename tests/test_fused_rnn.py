"""The fused bidirectional GRU (``grounded_text.layers.fused_rnn``) computes what Keras'
``Bidirectional(GRU)`` computes: same outputs, same loss, same gradients (to 1e-5).

No timing here: speeds belong in the benchmark's output (docs/performance.md).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from grounded_text.layers.char_encoder import CharacterEncoder
from grounded_text.layers.fused_rnn import bidirectional_gru, can_fuse
from grounded_text.models import build_model
from grounded_text.models.registry import preset_config

CAPTIONS = ["A dog runs .", "Two children play on the beach .", "A man", "Kids jump into a pool .", "",
            "é ~ unseen characters"]


def _layer(units=7, d=5, **gru):
    layer = keras.layers.Bidirectional(keras.layers.GRU(units, return_sequences=True, **gru))
    layer.build((None, None, d))
    rng = np.random.default_rng(1)
    for v in layer.weights:  # biases too, so that both bias rows are exercised
        v.assign(rng.normal(scale=0.5, size=v.shape).astype("float32"))
    return layer


@pytest.mark.parametrize("training", [True, False])
def test_same_outputs_and_gradients_as_keras_under_any_mask(training):
    layer = _layer()
    x = tf.constant(np.random.default_rng(2).normal(size=(5, 6, 5)).astype("float32"))
    # Right padding, a fully padded row, and holes (any mask, not only right padding).
    mask = tf.constant(np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [0] * 6, [1, 0, 1, 1, 0, 1],
                                 [0, 0, 1, 1, 1, 1]]) > 0)
    w = tf.constant(np.random.default_rng(3).normal(size=(5, 6, 14)).astype("float32"))

    @tf.function
    def run(fused):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = bidirectional_gru(layer, x, mask, training) if fused else layer(x, mask=mask, training=training)
            loss = tf.reduce_sum(y * w)
        return y, tape.gradient(loss, [x] + layer.trainable_weights)

    (y0, g0), (y1, g1) = run(False), run(True)
    np.testing.assert_allclose(y1.numpy(), y0.numpy(), atol=1e-5, rtol=0)
    assert not np.any(y1.numpy()[2])  # masked steps output zeros, as Bidirectional does
    for a, b in zip(g1, g0):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, rtol=1e-5)


def test_layers_it_does_not_cover_are_left_to_keras():
    assert can_fuse(_layer())
    assert not can_fuse(_layer(reset_after=False))
    assert not can_fuse(_layer(activation="relu"))
    assert not can_fuse(_layer(dropout=0.2), training=True)
    assert can_fuse(_layer(dropout=0.2), training=False)
    assert not can_fuse(keras.layers.Bidirectional(keras.layers.LSTM(3, return_sequences=True)))
    assert not can_fuse(keras.layers.Bidirectional(keras.layers.GRU(3, return_sequences=True), merge_mode="sum"))
    assert not can_fuse(keras.layers.GRU(3, return_sequences=True))


def test_one_train_step_of_the_char_model_equals_the_plain_path():
    """Loss and every gradient of one training step of ``char_gru_attention`` (small) on a
    fixed batch, fused vs Keras' own GRU loop."""
    units = 16
    cfg = preset_config("char_gru_attention", {"model": {"embedding_dim": 2 * units, "encoder": {"units": units}}})
    model = build_model(cfg.model, cfg.text, None, feature_dim=6, train_captions=CAPTIONS)
    encoder = next(layer for layer in model.text_tower.layers if isinstance(layer, CharacterEncoder))
    assert encoder.fused_rnn and can_fuse(encoder.rnns[0], True)
    rng = np.random.default_rng(4)
    batch = {"caption": tf.constant(CAPTIONS), "image_features": tf.constant(rng.normal(size=(6, 6)), tf.float32),
             "image_id": tf.constant(np.arange(6), tf.int64)}
    train = model.train_model
    variables = train.trainable_weights

    def step(fused):
        encoder.fused_rnn = fused

        @tf.function
        def run():
            with tf.GradientTape() as tape:
                train(batch, training=True)
                loss = tf.add_n(train.losses)
            return loss, tape.gradient(loss, variables)

        return run()

    try:
        (l0, g0), (l1, g1) = step(False), step(True)
    finally:
        encoder.fused_rnn = True
    assert float(l0) > 0
    np.testing.assert_allclose(float(l1), float(l0), atol=1e-5, rtol=1e-5)
    for v, a, b in zip(variables, g1, g0):
        a, b = tf.convert_to_tensor(a).numpy(), tf.convert_to_tensor(b).numpy()
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5, err_msg=v.path)
