"""``run_layer_test``: the checks every grounded_text layer must pass, in one place
(in the manner of keras-hub's ``TestCase.run_layer_test``); ``registered_layers`` finds every
registered layer and ``run_registered_layer_test`` runs one on its own ``example()``.

For a layer class, its constructor arguments and a batch of inputs it checks:

1. the output's shape and dtype, and that floating outputs are finite;
2. ``get_config`` → ``from_config``: the same config, and with the same weights the
   same outputs (a constructor argument missing from ``get_config`` shows here);
3. ``.keras`` save/load of a functional model around the layer gives the same outputs
   (registration and weight names);
4. eager and ``tf.function`` outputs are equal (graph-only code paths such as Python
   branches on tensors, or shapes unknown while tracing);
5. one ``train_on_batch`` step gives a finite loss and changes the trainable weights,
   and a layer expected to have none has none (frozen or stateless layers);
6. under the ``mixed_float16`` policy a fresh layer runs, keeps float32 variables,
   gives outputs of the expected dtype that are finite, and finite gradients.

Inputs are one tensor, or a tuple of tensors passed positionally (the attention
poolings take ``(h, mask)``). Weights are copied between layers with
``get_weights``/``set_weights``, so that the comparisons do not depend on seeds.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf


def _as_tuple(input_data):
    return tuple(input_data) if isinstance(input_data, (tuple, list)) else (input_data,)


def _numpy(x):
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def _assert_same(got, expected, atol, what):
    got, expected = _numpy(got), _numpy(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    if np.issubdtype(expected.dtype, np.floating):
        np.testing.assert_allclose(got, expected, atol=atol, rtol=0, err_msg=what)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what)


def _functional_model(layer, inputs, call_kwargs):
    """A functional model around ``layer`` whose inputs match the example batch."""
    symbolic = [keras.Input(shape=tuple(x.shape[1:]), dtype=x.dtype.name, batch_size=None) for x in inputs]
    return keras.Model(symbolic if len(symbolic) > 1 else symbolic[0], layer(*symbolic, **call_kwargs))


def run_layer_test(
    layer_cls,
    init_kwargs: dict,
    input_data,
    *,
    tmp_path: Path,
    call_kwargs: dict | None = None,
    expected_output_shape: tuple | None = None,
    expected_output_dtype: str = "float32",
    expected_mixed_output_dtype: str | None = None,
    expect_trainable_weights: bool = True,
    atol: float = 1e-6,
    mixed_atol: float | None = None,
    seed: int = 0,
):
    """Runs the checks above; returns the layer built in float32 (for further checks).

    Args:
      layer_cls: a registered Keras layer class.
      init_kwargs: its constructor arguments.
      input_data: a tensor, or a tuple of tensors passed positionally.
      tmp_path: where the ``.keras`` file goes.
      call_kwargs: extra call arguments (not ``training``, which the checks set).
      expected_output_shape: the output shape, if it should be checked.
      expected_output_dtype: the output dtype under the float32 policy.
      expected_mixed_output_dtype: the output dtype under ``mixed_float16``
        (default: ``expected_output_dtype``; the encoders promise float32 outputs).
      expect_trainable_weights: whether the layer has trainable weights, which one
        training step must change; if False, it must have none.
      atol: tolerance of the float32 comparisons.
      mixed_atol: if set, the mixed-precision outputs must be this close to the float32
        ones (same weights); otherwise only their dtype and finiteness are checked.
      seed: ``keras.utils.set_random_seed`` before the layers are built.
    """
    # Seeded: an unseeded initialisation can, now and then, put a mixed_float16 gradient of a
    # tiny layer (e.g. batch norm over a few rows) out of float16's range, a flaky failure.
    keras.utils.set_random_seed(seed)
    call_kwargs = dict(call_kwargs or {})
    inputs = tuple(tf.convert_to_tensor(x) for x in _as_tuple(input_data))
    expected_mixed_output_dtype = expected_mixed_output_dtype or expected_output_dtype

    # 1. Output shape, dtype, finiteness.
    keras.mixed_precision.set_global_policy("float32")
    layer = layer_cls(**init_kwargs)
    out = layer(*inputs, **call_kwargs, training=False) if _takes_training(layer) else layer(*inputs, **call_kwargs)
    assert out.dtype.name == expected_output_dtype, f"{layer_cls.__name__}: output dtype {out.dtype.name}"
    if expected_output_shape is not None:
        assert tuple(out.shape) == tuple(expected_output_shape), f"{layer_cls.__name__}: shape {out.shape}"
    if out.dtype.is_floating:
        assert np.isfinite(out.numpy()).all(), f"{layer_cls.__name__}: non-finite output"

    def run(lyr, *xs):
        return lyr(*xs, **call_kwargs, training=False) if _takes_training(lyr) else lyr(*xs, **call_kwargs)

    # 2. get_config -> from_config, same weights -> same outputs.
    config = layer.get_config()
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config, f"{layer_cls.__name__}: config changed in the round trip"
    run(clone, *inputs)  # builds it
    assert len(clone.trainable_weights) == len(layer.trainable_weights), (
        f"{layer_cls.__name__}: from_config changed which weights are trainable")
    clone.set_weights(layer.get_weights())
    _assert_same(run(clone, *inputs), out, atol, f"{layer_cls.__name__}: from_config")

    # 3. .keras save/load of a functional model around the layer.
    model = _functional_model(layer, inputs, call_kwargs)
    feed = list(inputs) if len(inputs) > 1 else inputs[0]
    path = Path(tmp_path) / f"{layer_cls.__name__}.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    _assert_same(loaded(feed, training=False), out, atol, f"{layer_cls.__name__}: .keras save/load")

    # 4. Eager and tf.function agree.
    graph_out = tf.function(lambda *xs: run(layer, *xs))(*inputs)
    _assert_same(graph_out, out, atol, f"{layer_cls.__name__}: tf.function")

    # 5. One training step.
    if not expect_trainable_weights:
        assert layer.trainable_weights == [], f"{layer_cls.__name__}: unexpected trainable weights"
    else:
        assert layer.trainable_weights, f"{layer_cls.__name__}: no trainable weights"
        before = [w.numpy().copy() for w in layer.trainable_weights]
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse", jit_compile=False)
        target = tf.random.stateless_normal(tf.shape(out), seed=[1, 2], dtype=tf.float32)
        loss = model.train_on_batch(feed, target)
        assert np.isfinite(loss), f"{layer_cls.__name__}: training loss {loss}"
        changed = [not np.allclose(b, w.numpy()) for b, w in zip(before, layer.trainable_weights)]
        assert any(changed), f"{layer_cls.__name__}: one training step changed no trainable weight"

    # 6. Mixed precision: a fresh layer under mixed_float16, with the float32 layer's weights.
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        mixed = layer_cls(**init_kwargs)
        run(mixed, *inputs)
        mixed.set_weights(clone.get_weights())  # clone: the weights before the training step
        assert all(w.dtype == "float32" for w in mixed.weights if "float" in str(w.dtype)), (
            f"{layer_cls.__name__}: mixed precision keeps float32 variables")
        with tf.GradientTape() as tape:
            mixed_out = run(mixed, *inputs)
            total = tf.reduce_sum(tf.cast(mixed_out, tf.float32)) if mixed_out.dtype.is_floating else None
        assert mixed_out.dtype.name == expected_mixed_output_dtype, (
            f"{layer_cls.__name__}: mixed_float16 output dtype {mixed_out.dtype.name}")
        if mixed_out.dtype.is_floating:
            assert np.isfinite(mixed_out.numpy()).all(), f"{layer_cls.__name__}: non-finite mixed_float16 output"
            if mixed_atol is not None:
                np.testing.assert_allclose(mixed_out.numpy(), _numpy(out), atol=mixed_atol, rtol=0,
                                           err_msg=f"{layer_cls.__name__}: mixed_float16 vs float32")
            if mixed.trainable_weights:
                grads = tape.gradient(total, mixed.trainable_weights)
                for w, g in zip(mixed.trainable_weights, grads):
                    if g is not None:
                        g = tf.convert_to_tensor(g)  # IndexedSlices of an embedding
                        assert np.isfinite(g.numpy()).all(), f"{layer_cls.__name__}: non-finite gradient {w.path}"
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return layer


def _takes_training(layer) -> bool:
    return "training" in inspect.signature(layer.call).parameters


# ----------------------------------------------------------------------------- every registered layer

#: The packages whose modules define the layers the harness runs (importing them registers the layers).
LAYER_PACKAGES = ("grounded_text.layers", "grounded_text.models")


def registered_layers(prefix: str = "grounded_text>") -> list[type]:
    """Every Keras layer registered under ``prefix`` (``register_keras_serializable(package=
    "grounded_text")``) once the modules of ``LAYER_PACKAGES`` are imported, by class name.

    Models (the builders' towers, checked by tests/model_checks.py) and the loss layers (their
    own kind: each is tested against a NumPy reference in tests/test_losses*.py) are left out.
    """
    for package in LAYER_PACKAGES:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            importlib.import_module(info.name)
    found = {obj for key, obj in keras.saving.get_custom_objects().items()
             if key.startswith(prefix) and isinstance(obj, type) and issubclass(obj, keras.layers.Layer)
             and not issubclass(obj, keras.Model) and not obj.__module__.startswith("grounded_text.losses.")}
    return sorted(found, key=lambda cls: (cls.__name__, cls.__module__))


def run_registered_layer_test(layer_cls, tmp_path: Path):
    """``run_layer_test`` on the layer's own ``example()`` (``grounded_text.layers.examples``):
    the one entry point for every registered layer, shipped or new. Skips, with the layer's
    reason, a layer whose example says it cannot run on its own."""
    example = getattr(layer_cls, "example", None)
    assert example is not None, (
        f"{layer_cls.__name__}: a registered layer declares a classmethod example() -> LayerExample "
        "(grounded_text.layers.examples), which the shared layer tests run it on")
    case = example()
    if case.skip:
        pytest.skip(f"{layer_cls.__name__}: {case.skip}")
    return run_layer_test(layer_cls, case.init_kwargs, case.input_data, tmp_path=tmp_path,
                          call_kwargs=case.call_kwargs, expected_output_dtype=case.output_dtype,
                          expected_mixed_output_dtype=case.mixed_output_dtype,
                          expect_trainable_weights=case.trainable)
