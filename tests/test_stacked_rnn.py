"""``StackedRNN``, the recurrent block of ``CharacterEncoder`` and ``RNNEncoder``: the fused
path and dropout between layers agree with Keras' plain loop in inference, both encoders get
every option of the block, and weights keep the paths saved files and checkpoints know."""

from __future__ import annotations

import math

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from grounded_text.layers import CharacterEncoder, RNNEncoder, StackedRNN
from grounded_text.layers.fused_rnn import can_fuse

MASK = tf.constant(np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [0] * 5, [1, 0, 1, 1, 0]]) > 0)
IDS = tf.constant([[4, 2, 3, 9, 5], [2, 1, 7, 0, 0], [3, 0, 0, 0, 0]])


def _randomised(layer):
    rng = np.random.default_rng(1)
    for v in layer.weights:  # biases too, so that every weight counts
        v.assign(rng.normal(scale=0.5, size=v.shape).astype("float32"))
    return layer


def test_fused_stack_with_dropout_equals_the_plain_loop_in_inference():
    fused = StackedRNN(5, num_layers=3, bidirectional=True, dropout=0.4, fused=True)
    plain = StackedRNN.from_config({**fused.get_config(), "fused": False})
    x = tf.constant(np.random.default_rng(2).normal(size=(4, 5, 6)).astype("float32"))
    _randomised(fused)(x, MASK)
    plain(x, MASK)
    plain.set_weights(fused.get_weights())
    if not tf.config.list_physical_devices("GPU"):  # on a GPU Keras' own loop runs cuDNN
        assert all(can_fuse(rnn) for rnn in fused.rnns)
    want = plain(x, MASK, training=False).numpy()
    np.testing.assert_allclose(fused(x, MASK, training=False).numpy(), want, atol=1e-5, rtol=0)
    np.testing.assert_allclose(tf.function(lambda a: fused(a, MASK))(x).numpy(), want, atol=1e-5, rtol=0)
    assert not np.any(want[2]) and want.shape == (4, 5, 10)  # masked steps output zeros
    # In training the dropout between layers acts (and only there).
    assert not np.allclose(fused(x, MASK, training=True).numpy(), want, atol=1e-3)


def test_block_config_round_trip_names_and_bad_arguments():
    stack = StackedRNN(3, num_layers=2, cell="lstm", dropout=0.25, weight_init="torch", name="s")
    config = stack.get_config()
    assert StackedRNN.from_config(config).get_config() == config
    assert keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(stack)).dropout == 0.25
    assert [rnn.name for rnn in stack.rnns] == ["lstm_0", "lstm_1"] and stack.output_dim == 3
    for bad in ({"cell": "rnn"}, {"num_layers": 0}, {"dropout": 1.0}, {"weight_init": "xavier"}):
        with pytest.raises(ValueError, match="StackedRNN"):
            StackedRNN(3, **bad)


def test_rnn_encoder_takes_torch_initialisation_and_the_fused_path():
    units = 4
    bound = 1.0 / math.sqrt(units)
    keras.utils.set_random_seed(0)
    enc = RNNEncoder(30, word_dim=5, units=units, cell="lstm", num_layers=2, weight_init="torch")
    enc(IDS)
    cells = [rnn.cell for rnn in enc.rnns]
    for cell in cells:
        for w in (cell.kernel, cell.recurrent_kernel, cell.bias):
            assert np.abs(w.numpy()).max() <= bound and np.abs(w.numpy()).min() > 0
    assert all(not cell.unit_forget_bias for cell in cells)  # PyTorch adds no 1 to the forget gate
    again = RNNEncoder.from_config(enc.get_config())
    assert again.get_config() == enc.get_config() and again.weight_init == "torch"
    keras_law = RNNEncoder(30, word_dim=5, units=units)
    keras_law(IDS)
    assert not np.any(keras_law.rnns[0].cell.bias.numpy())  # Keras' zero biases by default

    bi = RNNEncoder(30, word_dim=5, units=units, num_layers=2, bidirectional=True, dropout=0.3)
    assert not bi.fused_rnn  # the default keeps Keras' loop
    want = bi(IDS, training=False).numpy()
    bi.fused_rnn = True
    np.testing.assert_allclose(bi(IDS, training=False).numpy(), want, atol=1e-5, rtol=0)
    assert RNNEncoder(30, units=units, fused_rnn=True).fused_rnn
    with pytest.raises(ValueError, match="weight_init"):
        RNNEncoder(30, units=units, weight_init="xavier")


def test_char_encoder_takes_dropout_between_layers():
    enc = CharacterEncoder(30, char_dim=5, units=4, num_layers=2, attention_units=6, dropout=0.5)
    plain = CharacterEncoder.from_config({**enc.get_config(), "dropout": 0.0})
    enc(IDS)
    plain(IDS)
    plain.set_weights(enc.get_weights())
    want = plain(IDS, training=False).numpy()
    np.testing.assert_allclose(enc(IDS, training=False).numpy(), want, atol=1e-6, rtol=0)
    assert not np.allclose(enc(IDS, training=True).numpy(), want, atol=1e-3)
    again = CharacterEncoder.from_config(enc.get_config())
    assert again.get_config() == enc.get_config() and again.dropout == 0.5
    assert enc.fused_rnn and not CharacterEncoder(30, units=4, fused_rnn=False).fused_rnn
    with pytest.raises(ValueError, match="dropout"):
        CharacterEncoder(30, units=4, dropout=1.0)


def test_configs_saved_before_the_block_still_load():
    char = CharacterEncoder(30, char_dim=5, units=4, attention_units=6)
    old = {k: v for k, v in char.get_config().items() if k != "dropout"}
    assert CharacterEncoder.from_config(old).dropout == 0.0
    rnn = RNNEncoder(30, word_dim=5, units=4)
    old = {k: v for k, v in rnn.get_config().items() if k != "weight_init"}
    assert RNNEncoder.from_config(old).weight_init == "keras"


@pytest.mark.parametrize("make, prefix", [
    (lambda: CharacterEncoder(30, char_dim=5, units=4, num_layers=2, attention_units=6, name="char"), "char"),
    (lambda: RNNEncoder(30, word_dim=5, units=4, num_layers=2, bidirectional=True, dropout=0.2, name="rnn"), "rnn"),
])
def test_weights_keep_their_paths_and_file_layout(make, prefix, tmp_path):
    enc = make()
    inputs = keras.Input((None,), dtype="int64")
    model = keras.Model(inputs, enc(inputs))
    paths = [v.path for v in enc.trainable_weights]
    # The block adds no level to the paths: checkpoints name the layers as before it existed.
    assert paths[1:4] == [f"{prefix}/bi_gru_0/forward_gru_0/gru_cell/{n}" for n in ("kernel", "recurrent_kernel",
                                                                                      "bias")]
    assert [p for p in paths if "stacked_rnn" in p] == []
    model.save_weights(tmp_path / "m.weights.h5")
    with h5py.File(tmp_path / "m.weights.h5") as f:
        group = f["layers"][{"char": "character_encoder", "rnn": "rnn_encoder"}[prefix]]
        assert sorted(group["rnns"]) == ["bidirectional", "bidirectional_1"]  # where older files keep them
        assert "rnns" not in group.get("stacked_rnn", {})
    clone = keras.Model.from_config(model.get_config())
    clone.load_weights(tmp_path / "m.weights.h5")
    np.testing.assert_array_equal(clone(IDS).numpy(), model(IDS).numpy())
