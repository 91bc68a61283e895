"""Grounding a pretrained sentence encoder (Bordes et al. 2019 §3 ground SkipThought; here a
modern keras-hub transformer such as all-MiniLM-L6-v2, loaded from a local preset folder).

Text space u = F_t(s): the pretrained tower (mean pooling over the padding mask, L2).
Grounded space g(u): a projection (2-layer MLP or identity) where the grounding loss
α_C L_C + α_P L_P acts over batches with several captions per image (grouped sampler),
against the images' CNN features (identity image tower).

Both spaces are kept, as for Bordes et al.'s model (``grounded_text.models.bordes``):
``GroundedModel.spaces`` holds u and g(u) (L2-normalised), which the trainer exports to
``export_textual/`` and ``export_grounded/``; ask for the grounded space by loading
``export_grounded/``. The main text tower (``export/``) is u, the fine-tuned transformer
(the ``grounded_pretrained`` record's choice: the space the pretrained encoder is used
in).

Optional anchor (beyond the paper): ``anchor_weight`` λ_A > 0 adds
λ_A · mean_i (1 − cos(u_i, u⁰_i)), u⁰ the frozen original encoder's embedding of the same
sentence, which keeps the fine-tuned text space close to the original one.
"""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

from grounded_text.config.params import ENCODER_PARAMS
from grounded_text.config.schema import ModelConfig, TextConfig
from grounded_text.layers import examples
from grounded_text.layers.backbone_encoder import build_pretrained_text_tower
from grounded_text.layers.branches import GroundedProjection
from grounded_text.layers.examples import LayerExample
from grounded_text.models.components import (
    GROUNDING_KEYS,
    architecture,
    build_identity_image_tower,
    family_loss,
    require_params,
)
from grounded_text.models.grounded_model import GroundedModel, assemble


@keras.saving.register_keras_serializable(package="grounded_text")
class EmbeddingAnchor(keras.layers.Layer):
    """Passes u through and adds ``weight · mean(1 − cos(u, u⁰))`` with ``add_loss``.

    Call args: ``u`` float [B, N] (trained), ``u0`` float [B, N] (frozen original).
    Returns: ``u`` unchanged (float32).
    """

    def __init__(self, weight: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.weight = float(weight)

    def call(self, u, u0):
        u = tf.cast(u, tf.float32)
        u0 = tf.stop_gradient(tf.cast(u0, tf.float32))
        cos = tf.reduce_sum(tf.math.l2_normalize(u, -1) * tf.math.l2_normalize(u0, -1), -1)
        self.add_loss(self.weight * tf.reduce_mean(1.0 - cos))
        return u

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"weight": 0.5}, (examples.image_features(4), examples.image_features(4)[::-1].copy()),
                            trainable=False)

    def get_config(self):
        return {**super().get_config(), "weight": self.weight}


@architecture(
    "keras-hub transformer → mean over tokens → L2 = textual space u (exported in `export/`); g: 2-layer MLP "
    "to the grounded space (both spaces also in `export_textual/`, `export_grounded/`: ask for g(u) there)",
    "none (CNN features)",
    "α_C L_C + α_P L_P (+ optional anchor)")
def build_grounded_pretrained(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int,
                              seed: int = 0, **_) -> GroundedModel:
    """A pretrained keras-hub tower grounded with C_g + P_g (Bordes et al. 2019 eqs. 2–3).

    Encoder keys (``ModelConfig.encoder``; ``--encoder-param K=V``; the
    ``grounded_pretrained`` record gives them): ``preset`` (required from the user: a local
    keras-hub or Hugging Face-format folder), ``sequence_length``, ``trainable_backbone``,
    ``projection`` "mlp" | "identity", ``grounded_hidden``, ``grounded_dim``,
    ``anchor_weight`` (see module docstring). ``ModelConfig.embedding_dim`` is not used.

    Spaces (``GroundedModel.spaces``, string[B] → float32[B, ·], L2-normalised rows):
    ``"textual"``: u = F_t(s), float32[B, hidden] (also ``GroundedModel.text_tower``, what
    ``export/`` holds); ``"grounded"``: g(u), float32[B, grounded_dim] (hidden with
    ``projection="identity"``), exported to ``export_grounded/``.

    Raises:
      ValueError: no ``preset`` given; a missing or unknown encoder or loss parameter.
    """
    p = require_params(model, model.encoder, ENCODER_PARAMS["grounded_pretrained"], "encoder")
    if not p["preset"]:
        raise ValueError("grounded_pretrained needs --encoder-param preset=DIR (a local keras-hub "
                         "or Hugging Face-format model folder).")
    seq_len = int(p["sequence_length"])
    text_tower = build_pretrained_text_tower(p["preset"], seq_len, bool(p["trainable_backbone"]))
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    u = u_plain = text_tower(sentences)
    if float(p["anchor_weight"]) > 0:
        original = build_pretrained_text_tower(p["preset"], seq_len, trainable_backbone=False,
                                               name="original_text_tower")
        u = EmbeddingAnchor(float(p["anchor_weight"]), name="embedding_anchor")(u, original(sentences))
    g = GroundedProjection(p["projection"], int(p["grounded_hidden"]), int(p["grounded_dim"]),
                           name="grounded_projection")
    grounded_tower = keras.Model(sentences, g(u), name="grounded_text_tower")
    # The exported grounded space: g(u) without the anchor's loss (the anchor passes u
    # through unchanged), L2-normalised like every export, float32 under mixed precision.
    grounded_space = keras.Model(
        sentences, keras.layers.UnitNormalization(dtype="float32", name="grounded_l2")(g(u_plain)),
        name="grounded_space")
    loss = family_loss(model, "grounding", GROUNDING_KEYS, seed)
    gm = assemble(grounded_tower, build_identity_image_tower(feature_dim), loss)
    return dataclasses.replace(gm, text_tower=text_tower, spaces={"textual": text_tower, "grounded": grounded_space})
