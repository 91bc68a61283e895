"""Every use of a private TensorFlow or Keras API in grounded_text, one small function each.

Nothing else in the package imports ``tensorflow.python``, ``keras.src`` or
``tf.__internal__``, or reads a private attribute of a TensorFlow or Keras object: callers
go through these functions. Each docstring says what it wraps and what breaks when an
upgrade removes it; ``tests/test_compat.py`` checks every one against the installed
versions (TensorFlow 2.21, Keras 3), so an upgrade that removes one fails there first.

TensorFlow and Keras are imported inside the functions: importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable

# --- TensorFlow --------------------------------------------------------------------------------


def save_context(options):
    """The context ``tf.saved_model.save(..., options=options)`` traces in
    (``tensorflow.python.saved_model.save_context.save_context``).

    TensorFlow keys a ``tf.function``'s traces by whether a save is under way (and its
    variable policy), so traces made before the save are all traced again inside it;
    traced in this context, the save reuses them (the export's ``trace`` step).

    If gone: a ``contextlib.nullcontext()``; the export is the same, only slower (each text
    tower trace costs about 1.2 s on 2 cores, three of the five per export).
    """
    try:
        from tensorflow.python.saved_model import save_context as context  # noqa: PLC0415 (a fallback: private, may move)
    except ImportError:
        return contextlib.nullcontext()
    return context.save_context(options)


def no_automatic_dependency_tracking(method: Callable) -> Callable:
    """Decorates ``method`` so that attributes it sets on a ``tf.Module`` are not tracked
    (``tf.__internal__.tracking.no_automatic_dependency_tracking``).

    The export holds its Keras text tower this way: tracked, the Keras model would be saved
    into the SavedModel's object graph with Keras's own default signatures, which trace the
    text pipeline again (slower export, bigger SavedModel) and which no consumer calls.

    If gone: ``AttributeError`` when ``grounded_text.serving.export`` is imported.
    """
    import tensorflow as tf  # noqa: PLC0415 (light room: TF internals, loaded on use)

    return tf.__internal__.tracking.no_automatic_dependency_tracking(method)


def in_multi_worker_mode(strategy) -> bool:
    """Whether ``strategy`` spans several workers (``strategy.extended._in_multi_worker_mode()``).

    Used to pick the chief (who writes checkpoints and exports) and to reshape the step's
    logs for ``MultiWorkerMirroredStrategy``.

    If gone: ``False`` (every process acts as a single worker: under a multi-worker strategy
    every worker would write, and the logs' reduction fails on scalars).
    """
    check = getattr(getattr(strategy, "extended", None), "_in_multi_worker_mode", None)
    return bool(check()) if callable(check) else False


# --- Keras -------------------------------------------------------------------------------------


def keras_home() -> str:
    """Keras's home folder (``keras.src.backend.config.keras_home()``: ``$KERAS_HOME``, else
    ``~/.keras``, or ``/tmp/.keras`` where the home folder is not writable), where Keras keeps
    downloaded weights.

    If gone: ``ImportError`` from ``vision.networks.keras_cache_dir`` when ``$KERAS_HOME`` is
    not set.
    """
    from keras.src.backend import config  # noqa: PLC0415 (light room: TF internals, loaded on use)

    return config.keras_home()


def keras_application_weight_hash(module: str, key: str) -> str | None:
    """The file hash Keras lists for the no-top ImageNet weights of ``keras.applications``
    model ``key`` (``keras.src.applications.<module>.WEIGHTS_HASHES[key][1]``), ``None`` where
    Keras lists none. ``module``: ``"resnet"`` (keys ``"resnet50"``, ``"resnet152"``, …) or
    ``"efficientnet"`` (keys ``"b0"`` … ``"b7"``).

    If gone: ``ImportError`` (or ``AttributeError``) from ``vision.networks.get_spec`` for
    every network.
    """
    hashes = importlib.import_module(f"keras.src.applications.{module}").WEIGHTS_HASHES
    return hashes.get(key, (None, None))[1]


def rnn_cudnn_argument_checks():
    """Keras's own predicates of whether a GRU / LSTM's arguments allow the cuDNN kernel
    (``keras.src.backend.tensorflow.rnn._do_gru_arguments_support_cudnn`` and
    ``_do_lstm_arguments_support_cudnn``).

    Returns:
      ``(gru_check, lstm_check, source)``: ``gru_check(activation, recurrent_activation,
      unroll, use_bias, reset_after)`` and ``lstm_check(activation, recurrent_activation,
      unroll, use_bias)`` → bool; ``source`` is ``"keras"``, or ``"restated"`` when Keras no
      longer has them under these names and a copy of their conditions is returned (then
      the report may drift from what Keras checks).
    """
    try:
        from keras.src.backend.tensorflow.rnn import (  # noqa: PLC0415 (a fallback: private, may move)
            _do_gru_arguments_support_cudnn,
            _do_lstm_arguments_support_cudnn,
        )

        return _do_gru_arguments_support_cudnn, _do_lstm_arguments_support_cudnn, "keras"
    except ImportError:
        import tensorflow as tf  # noqa: PLC0415 (the fallback's own; utils is a light room)
        from keras import activations, ops  # noqa: PLC0415 (the fallback's own; utils is a light room)

        def lstm_check(activation, recurrent_activation, unroll, use_bias):
            return (activation in (activations.tanh, tf.tanh, ops.tanh)
                    and recurrent_activation in (activations.sigmoid, tf.sigmoid, ops.sigmoid)
                    and not unroll and use_bias)

        def gru_check(activation, recurrent_activation, unroll, use_bias, reset_after):
            return lstm_check(activation, recurrent_activation, unroll, use_bias) and reset_after

        return gru_check, lstm_check, "restated"


def flatten_layers(layer) -> list:
    """``layer`` and every layer nested in it, at any depth, including sub-layers held as
    attributes of custom layers (``Layer._flatten_layers(include_self=True, recursive=True)``);
    ``model.layers`` lists only the top level.

    If gone: ``AttributeError`` from ``benchmarks.cudnn.recurrent_layers`` (the cuDNN report).
    """
    return list(layer._flatten_layers(include_self=True, recursive=True))


def in_safe_mode() -> bool | None:
    """Keras' current safe-mode setting while deserialising (``keras.src.saving.
    serialization_lib.in_safe_mode``): ``True``/``False`` inside ``load_model(safe_mode=...)``,
    else ``None`` unless ``keras.config.enable_unsafe_deserialization()`` was called.

    If gone: ``ImportError`` when a ``.keras`` file holding a ``HubTextEmbedding`` is loaded
    (its refusal under safe mode, as Keras' ``TFSMLayer`` refuses).
    """
    from keras.src.saving import serialization_lib  # noqa: PLC0415 (light room: TF internals, loaded on use)

    return serialization_lib.in_safe_mode()


def track_variable(layer, variable) -> None:
    """Adds the Keras ``variable`` to ``layer``'s weights (``Layer._track_variable``), as
    ``keras.layers.TFSMLayer`` does for the variables of a loaded SavedModel.

    If gone: ``AttributeError`` when a ``HubTextEmbedding`` is built (a hub module as a text
    tower).
    """
    layer._track_variable(variable)


def distribute_strategy(model):
    """The ``tf.distribute`` strategy ``model`` was created under, ``None`` if none
    (``model._distribute_strategy``; the public ``model.distribute_strategy`` answers the
    default strategy instead of ``None``).

    If gone: ``None``: a model built under a strategy is then treated as built without one
    (its first build averages the string captions across replicas and fails).
    """
    return getattr(model, "_distribute_strategy", None)


#: The ``keras.Model`` method that builds a model from its first batch before ``fit``
#: (``Trainer._maybe_symbolic_build(iterator=None, data_batch=None)``); ``GroundedModel``'s
#: training model overrides it. If renamed, the override is never called and training under
#: a multi-replica strategy fails on the string captions.
SYMBOLIC_BUILD = "_maybe_symbolic_build"


def symbolic_build(cls: type, model, **kwargs):
    """Calls the ``keras.Model`` implementation of ``SYMBOLIC_BUILD`` above ``cls`` on
    ``model`` (``super(cls, model)._maybe_symbolic_build(**kwargs)``), for an override."""
    return getattr(super(cls, model), SYMBOLIC_BUILD)(**kwargs)

