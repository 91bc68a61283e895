"""Each private TensorFlow/Keras API that grounded_text uses (grounded_text.utils.compat) still exists
and still does what the package relies on: an upgrade that removes or changes one fails here."""

import importlib
import inspect
import re
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from grounded_text.utils import compat as _compat


def test_save_context_is_tensorflows_own_and_is_entered():
    from tensorflow.python.saved_model import save_context  # the private module itself

    options = tf.saved_model.SaveOptions()
    assert not save_context.in_save_context()
    with _compat.save_context(options):
        assert save_context.in_save_context()
        assert save_context.get_save_options() is options
    assert not save_context.in_save_context()


def test_no_automatic_dependency_tracking_keeps_an_attribute_out_of_the_checkpoint_graph():
    assert callable(tf.__internal__.tracking.no_automatic_dependency_tracking)

    class Holder(tf.Module):
        def __init__(self, tracked, untracked):
            super().__init__()
            self.tracked = tracked
            self._hold(untracked)

        @_compat.no_automatic_dependency_tracking
        def _hold(self, untracked):
            self.untracked = untracked

    a, b = tf.Module(name="a"), tf.Module(name="b")
    children = tf.train.TrackableView(Holder(a, b)).children(Holder(a, b))
    assert [v for v in children.values() if v is a] and not [v for v in children.values() if v is b]


def test_in_multi_worker_mode_reads_the_strategys_own_flag():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    assert callable(strategy.extended._in_multi_worker_mode)  # the private method itself
    assert _compat.in_multi_worker_mode(strategy) is False
    assert _compat.in_multi_worker_mode(tf.distribute.get_strategy()) is False


def test_keras_home_is_keras_own_setting():
    from keras.src.backend import config

    assert _compat.keras_home() == config.keras_home()
    assert isinstance(_compat.keras_home(), str) and _compat.keras_home()


@pytest.mark.parametrize("module, key", [("resnet", "resnet50"), ("resnet", "resnet152"), ("efficientnet", "b0")])
def test_keras_application_weight_hashes_are_listed(module, key):
    importlib.import_module(f"keras.src.applications.{module}")
    digest = _compat.keras_application_weight_hash(module, key)
    assert re.fullmatch(r"[0-9a-f]{32}|[0-9a-f]{64}", digest), digest  # md5 or sha256
    assert _compat.keras_application_weight_hash(module, "no_such_model") is None


_ACTIVATIONS = [keras.activations.tanh, keras.activations.sigmoid, keras.activations.relu]


def _argument_grid():
    for act in _ACTIVATIONS:
        for rec in _ACTIVATIONS:
            for unroll in (False, True):
                for use_bias in (False, True):
                    yield act, rec, unroll, use_bias


def test_rnn_cudnn_checks_are_keras_own_and_the_restated_copy_agrees(monkeypatch):
    gru, lstm, source = _compat.rnn_cudnn_argument_checks()
    assert source == "keras"  # the private functions are still there
    assert gru(keras.activations.tanh, keras.activations.sigmoid, False, True, True)
    assert not gru(keras.activations.tanh, keras.activations.sigmoid, False, True, False)
    assert not lstm(keras.activations.relu, keras.activations.sigmoid, False, True)
    monkeypatch.setitem(sys.modules, "keras.src.backend.tensorflow.rnn", None)  # as if moved
    gru2, lstm2, source2 = _compat.rnn_cudnn_argument_checks()
    assert source2 == "restated"
    for act, rec, unroll, use_bias in _argument_grid():
        assert bool(lstm(act, rec, unroll, use_bias)) == bool(lstm2(act, rec, unroll, use_bias))
        for reset_after in (False, True):
            assert bool(gru(act, rec, unroll, use_bias, reset_after)) == bool(gru2(act, rec, unroll, use_bias,
                                                                                   reset_after))


def test_flatten_layers_finds_layers_nested_in_custom_layers():
    class Holder(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.gru = keras.layers.GRU(3)

        def call(self, x):
            return self.gru(x)

    holder = Holder()
    bidi = keras.layers.Bidirectional(keras.layers.LSTM(2))
    x = keras.Input((4, 2))
    model = keras.Model(x, [holder(x), bidi(x)])
    found = _compat.flatten_layers(model)
    assert found[0] is model and holder in found and holder.gru in found and bidi in found
    assert holder.gru not in model.layers  # what the public list misses


def test_in_safe_mode_follows_load_model_and_the_global_switch():
    from keras.src.saving import serialization_lib

    assert _compat.in_safe_mode() in (None, True)
    with serialization_lib.SafeModeScope(False):
        assert _compat.in_safe_mode() is False
    with serialization_lib.SafeModeScope(True):
        assert _compat.in_safe_mode() is True


def test_track_variable_makes_an_outside_variable_a_layer_weight():
    layer = keras.layers.Layer()
    variable = keras.Variable(np.ones((2, 3), np.float32), trainable=True, name="outside")
    _compat.track_variable(layer, variable)
    assert [w is variable for w in layer.weights] == [True]
    assert [w is variable for w in layer.trainable_weights] == [True]


def test_distribute_strategy_is_the_one_the_model_was_built_under():
    x = keras.Input((2,))
    plain = keras.Model(x, keras.layers.Dense(1)(x))
    assert hasattr(plain, "_distribute_strategy")  # the private attribute itself
    assert _compat.distribute_strategy(plain) is None
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        y = keras.Input((2,))
        model = keras.Model(y, keras.layers.Dense(1)(y))
    assert _compat.distribute_strategy(model) is strategy


def test_symbolic_build_hook_exists_with_its_arguments_and_is_reached_by_an_override():
    method = getattr(keras.Model, _compat.SYMBOLIC_BUILD)
    assert {"iterator", "data_batch"} <= set(inspect.signature(method).parameters)
    calls = []

    class Probe(keras.Model):
        def _maybe_symbolic_build(self, iterator=None, data_batch=None):
            calls.append(data_batch is not None)
            return _compat.symbolic_build(Probe, self, iterator=iterator, data_batch=data_batch)

    x = keras.Input((2,))
    model = Probe(x, keras.layers.Dense(1)(x))
    model.compile(optimizer="sgd", loss="mse")
    model.fit(np.ones((4, 2), np.float32), np.ones((4, 1), np.float32), epochs=1, verbose=0)
    assert calls  # Keras's fit still calls the hook by this name
    assert _compat.SYMBOLIC_BUILD == "_maybe_symbolic_build"


def test_no_other_module_uses_private_tensorflow_or_keras_apis():
    """Callers import from _compat only (module docstring)."""
    from pathlib import Path

    root = Path(_compat.__file__).parents[1]
    pattern = re.compile(r"keras\.src|tensorflow\.python|__internal__|_inbound_nodes|_flatten_layers|_track_variable"
                         r"|_distribute_strategy|_in_multi_worker_mode|super\(\)\._maybe_symbolic_build")
    offenders = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py") if p != Path(_compat.__file__)
                 for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == []
