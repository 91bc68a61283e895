"""A pretrained transformer text tower from a local keras-hub preset (Bordes et al. 2019 ground a
pretrained sentence encoder, SkipThought; here a modern one, e.g. all-MiniLM-L6-v2).

The preset directory may be a Keras preset (``metadata.json``) or a Hugging Face-format folder
(``config.json`` + ``model.safetensors`` + tokenizer files), which keras-hub converts offline.
Nothing is downloaded: a preset name that is not a local directory is refused.
"""

from __future__ import annotations

from pathlib import Path

import keras
import tensorflow as tf

from grounded_text.layers.examples import LayerExample
from grounded_text.utils.extras import require


def _keras_hub():
    return require("keras_hub", "PretrainedTextEncoder")


@keras.saving.register_keras_serializable(package="grounded_text")
class PretrainedTextEncoder(keras.layers.Layer):
    """String[B] → float32[B, N]: keras-hub tokeniser + backbone, mean pooling, L2.

    ``e(s) = Σ_t m_t h_t / Σ_t m_t`` over the backbone's ``sequence_output`` h with the
    padding mask m (special tokens included, as sentence-transformers' mean pooling),
    then ``e / ||e||_2`` (all-MiniLM-L6-v2's Normalize module).

    Args:
      preset: local keras-hub preset directory (Keras or Hugging Face format).
      sequence_length: tokens per sentence after tokenisation (longer input is truncated).
      trainable_backbone: fine-tune the backbone (False: frozen).
      normalize: L2-normalise the output.
      backbone_config: internal; set by ``get_config`` so ``from_config`` rebuilds the
        architecture without reading weights again (the weights come from the saved model).

    Call args:
      inputs: ``tf.string`` [B] raw sentences.

    Returns:
      ``float32`` [B, hidden_dim]. An empty string still has [CLS]/[SEP] tokens: finite.

    Raises:
      FileNotFoundError: ``preset`` is not a local directory.

    Example:
      >>> encoder = PretrainedTextEncoder("presets/all-MiniLM-L6-v2", sequence_length=64)  # doctest: +SKIP
      >>> tuple(encoder(tf.constant(["a dog runs", "a cat"])).shape)  # doctest: +SKIP
      (2, 384)
      >>> PretrainedTextEncoder("sentence-transformers/all-MiniLM-L6-v2")  # nothing is downloaded
      Traceback (most recent call last):
        ...
      FileNotFoundError: PretrainedTextEncoder: preset 'sentence-transformers/all-MiniLM-L6-v2' is not a local ...
    """

    def __init__(self, preset: str, sequence_length: int = 128, trainable_backbone: bool = True,
                 normalize: bool = True, load_weights: bool = True, **kwargs):
        super().__init__(**kwargs)
        if not Path(preset).is_dir():
            raise FileNotFoundError(f"PretrainedTextEncoder: preset {preset!r} is not a local directory.")
        kh = _keras_hub()
        self.preset = str(preset)
        self.sequence_length = int(sequence_length)
        self.trainable_backbone = bool(trainable_backbone)
        self.normalize = bool(normalize)
        self.preprocessor = kh.models.TextClassifierPreprocessor.from_preset(
            self.preset, sequence_length=self.sequence_length
        )
        self.backbone = kh.models.Backbone.from_preset(self.preset, load_weights=load_weights)
        self.backbone.trainable = self.trainable_backbone
        self.hidden_dim = int(self.backbone.hidden_dim)

    def build(self, input_shape):
        self.built = True

    def call(self, inputs, training=False):
        x = self.preprocessor(inputs)
        # Trim the static padding to the batch's longest sentence: exact (padding is
        # masked) and several times faster for short sentences.
        length = tf.maximum(tf.reduce_max(tf.reduce_sum(tf.cast(x["padding_mask"], tf.int32), axis=1)), 1)
        x = {k: x[k][:, :length] for k in ("token_ids", "segment_ids", "padding_mask")}
        seq = self.backbone(x, training=training)["sequence_output"]
        seq = tf.cast(seq, tf.float32)
        mask = tf.cast(x["padding_mask"], tf.float32)[..., None]
        pooled = tf.reduce_sum(seq * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
        if self.normalize:
            pooled = tf.math.l2_normalize(pooled, axis=-1, epsilon=1e-24)
        return pooled

    def compute_output_spec(self, inputs, training=False):
        return keras.KerasTensor((inputs.shape[0], self.hidden_dim), dtype="float32")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"preset": ""}, skip="it loads a keras-hub model folder: tests/test_backbone_encoder.py "
                            "runs it on a tiny one")

    def get_config(self):
        config = super().get_config()
        config.update(preset=self.preset, sequence_length=self.sequence_length,
                      trainable_backbone=self.trainable_backbone, normalize=self.normalize)
        return config


def build_pretrained_text_tower(preset: str, sequence_length: int = 128, trainable_backbone: bool = True,
                                name: str = "text_tower") -> keras.Model:
    """Functional text tower string[B] → float32[B, hidden] around ``PretrainedTextEncoder``.

    Example:
      >>> tower = build_pretrained_text_tower("presets/all-MiniLM-L6-v2", trainable_backbone=False)  # doctest: +SKIP
      >>> tower.trainable_weights  # doctest: +SKIP
      []
      >>> tuple(tower(tf.constant(["a dog runs"])).shape)  # doctest: +SKIP
      (1, 384)
    """
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    out = PretrainedTextEncoder(preset, sequence_length, trainable_backbone, name="pretrained_encoder")(sentences)
    return keras.Model(sentences, out, name=name)
