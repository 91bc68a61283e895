"""A Keras 3 layer around ``hub.load`` for text-embedding SavedModels.

``hub.KerasLayer`` is a tf-keras (Keras 2) layer and cannot live in a Keras 3 model; this
layer is the Keras 3 counterpart for any SavedModel with ``__call__(strings[batch],
training=...) → float[batch, N]`` (the grounded_text export, or a TF Hub text-embedding
module). With ``trainable=True`` the module's ``trainable_variables`` become the layer's
trainable weights (the same variables, not copies), so fine-tuning updates the module.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import keras
import tensorflow as tf

from grounded_text.layers.examples import LayerExample
from grounded_text.utils.compat import in_safe_mode, track_variable


@keras.saving.register_keras_serializable(package="grounded_text")
class HubTextEmbedding(keras.layers.Layer):
    """String[B] → float32[B, N] from a SavedModel loaded with ``hub.load``.

    Args:
      handle: path (or TF Hub handle resolvable offline) of the SavedModel. A local path is
        stored absolute, so a saved model reloads from any working directory.
      trainable: fine-tune the module's ``trainable_variables``.
      output_dim: N, if known (used for shape inference; read from a probe call otherwise).

    Call args:
      inputs: ``tf.string`` [B] (in ``fit``, a NumPy array of ``str`` works too).
      training: forwarded to the module when its ``__call__`` accepts it.

    Returns:
      ``float32`` [B, N].

    Raises:
      ValueError: the SavedModel is not callable on a string batch; or (``from_config``)
        deserialisation under safe mode.

    Example:
      >>> import tempfile
      >>> class Lengths(tf.Module):  # any SavedModel string[B] → float[B, N]
      ...     @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
      ...     def __call__(self, sentences):
      ...         return tf.cast(tf.strings.length(sentences), tf.float32)[:, None]
      >>> tmp = tempfile.TemporaryDirectory()
      >>> tf.saved_model.save(Lengths(), tmp.name)
      >>> layer = HubTextEmbedding(tmp.name)
      >>> layer.output_dim, layer(tf.constant(["a dog", "a cat runs"])).numpy().tolist()
      (1, [[5.0], [10.0]])
      >>> tmp.cleanup()

      Fine-tuning an exported grounded_text tower inside a Keras 3 model:

      >>> sentences = keras.Input(shape=(), dtype="string")  # doctest: +SKIP
      >>> tower = HubTextEmbedding("runs/vete_bow/export", trainable=True)  # doctest: +SKIP
      >>> model = keras.Model(sentences, keras.layers.Dense(1)(tower(sentences)))  # doctest: +SKIP
    """

    def __init__(self, handle: str, trainable: bool = False, output_dim: int | None = None, **kwargs):
        super().__init__(trainable=trainable, **kwargs)
        import tensorflow_hub as hub  # noqa: PLC0415 (slow: every Keras process loads this module to register the layer)
        import tensorflow_text  # noqa: F401, PLC0415 (registers the modules' ops; slow, as hub just above)

        local = Path(os.fspath(handle)).expanduser()
        self.handle = str(local.resolve()) if local.exists() else str(handle)
        self._module = hub.load(self.handle)
        if not callable(self._module):
            raise ValueError(f"HubTextEmbedding: {self.handle!r} has no __call__.")
        self._accepts_training = self._has_training_arg()
        if output_dim is None:
            output_dim = int(self._module(tf.constant(["probe"])).shape[-1])
        self.output_dim = int(output_dim)
        own = {id(v) for v in getattr(self._module, "trainable_variables", [])}
        for v in getattr(self._module, "trainable_variables", []):
            self._wrap(v, trainable=True)
        for v in getattr(self._module, "variables", []):
            if id(v) not in own:
                self._wrap(v, trainable=False)
        self.built = True

    def _has_training_arg(self) -> bool:
        fn = self._module.__call__
        for concrete in getattr(fn, "concrete_functions", []):
            args = concrete.structured_input_signature[1]
            if "training" in args:
                return True
        try:
            return "training" in inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return False

    def _wrap(self, variable, trainable: bool):
        # Same approach as keras.layers.TFSMLayer: a Keras variable wrapping the tf.Variable.
        kv = keras.Variable(
            initializer=variable, trainable=trainable and self.trainable, dtype=variable.dtype,
            shape=variable.shape, name=variable.name.replace("/", "_").replace(":", "_"),
        )
        track_variable(self, kv)

    def call(self, inputs, training=False):
        inputs = tf.convert_to_tensor(inputs, dtype_hint=tf.string)
        if self._accepts_training:
            out = self._module(inputs, training=bool(training) and self.trainable)
        else:
            out = self._module(inputs)
        return tf.cast(out, tf.float32)

    def compute_output_spec(self, inputs, training=False):
        return keras.KerasTensor((inputs.shape[0], self.output_dim), dtype="float32")

    @classmethod
    def from_config(cls, config, custom_objects=None, safe_mode=None):
        """Rebuilds the layer from ``get_config()``; refused under safe mode (Keras' default
        when loading a ``.keras`` file), as ``keras.layers.TFSMLayer`` does, because the
        SavedModel it loads is code.

        Raises:
          ValueError: safe mode is on (pass ``safe_mode=False`` to ``keras.saving.load_model``
            for an artifact you trust, or call ``keras.config.enable_unsafe_deserialization()``).
        """

        if (safe_mode if safe_mode is not None else in_safe_mode()) is not False:
            raise ValueError(
                f"Refusing to deserialize HubTextEmbedding({config.get('handle')!r}): it loads an external "
                "SavedModel, whose graph can run arbitrary code. If you trust the file, pass safe_mode=False "
                "to keras.saving.load_model, or call keras.config.enable_unsafe_deserialization().")
        return cls(**config)

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"handle": ""}, skip="it loads a SavedModel, and from_config refuses to in safe mode: "
                            "tests/test_keras_layer.py runs it on one, through a .keras file with safe_mode=False")

    def get_config(self):
        config = super().get_config()
        config.update(handle=self.handle, output_dim=self.output_dim)
        return config
