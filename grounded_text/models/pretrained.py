"""Grounding a pretrained sentence encoder (Bordes et al. 2019 §3 ground SkipThought; here a
modern keras-hub transformer such as all-MiniLM-L6-v2, loaded from a local preset folder).

Text space u = F_t(s): the pretrained tower (mean pooling over the padding mask, L2) —
this is what is exported. Grounded space g(u): a projection (2-layer MLP or identity)
where the grounding loss α_C L_C + α_P L_P acts over batches with several captions per
image (grouped sampler), against the images' CNN features (identity image tower).

Optional anchor (beyond the paper): ``anchor_weight`` λ_A > 0 adds
λ_A · mean_i (1 − cos(u_i, u⁰_i)), u⁰ the frozen original encoder's embedding of the same
sentence, which keeps the fine-tuned text space close to the original one.
"""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

from grounded_text.config.schema import ModelConfig, TextConfig
from grounded_text.layers.branches import GroundedProjection
from grounded_text.layers.pretrained_encoder import build_pretrained_text_tower
from grounded_text.models.components import GROUNDING_KEYS, build_identity_image_tower, family_loss, require_params
from grounded_text.models.grounded_model import GroundedModel, assemble

PRETRAINED_KEYS = ("preset", "sequence_length", "trainable_backbone", "projection", "grounded_hidden",
                   "grounded_dim", "anchor_weight")


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

    def get_config(self):
        return {**super().get_config(), "weight": self.weight}


def build_grounded_pretrained(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int,
                              seed: int = 0, **_) -> GroundedModel:
    """A pretrained keras-hub tower grounded with C_g + P_g (Bordes et al. 2019 eqs. 2–3).

    Encoder keys (``ModelConfig.encoder``; ``--encoder-param K=V``; the
    ``grounded_pretrained`` record gives them): ``preset`` (required from the user: a local
    keras-hub or Hugging Face-format folder), ``sequence_length``, ``trainable_backbone``,
    ``projection`` "mlp" | "identity", ``grounded_hidden``, ``grounded_dim``,
    ``anchor_weight`` (see module docstring). The exported text tower is F_t (string[B] →
    float32[B, hidden]); ``ModelConfig.embedding_dim`` is not used.

    Raises:
      ValueError: no ``preset`` given; a missing or unknown encoder or loss parameter.
    """
    p = require_params(model, model.encoder, PRETRAINED_KEYS, "encoder")
    if not p["preset"]:
        raise ValueError("grounded_pretrained needs --encoder-param preset=DIR (a local keras-hub "
                         "or Hugging Face-format model folder).")
    seq_len = int(p["sequence_length"])
    text_tower = build_pretrained_text_tower(p["preset"], seq_len, bool(p["trainable_backbone"]))
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    u = text_tower(sentences)
    if float(p["anchor_weight"]) > 0:
        original = build_pretrained_text_tower(p["preset"], seq_len, trainable_backbone=False,
                                               name="original_text_tower")
        u = EmbeddingAnchor(float(p["anchor_weight"]), name="embedding_anchor")(u, original(sentences))
    g = GroundedProjection(p["projection"], int(p["grounded_hidden"]), int(p["grounded_dim"]),
                           name="grounded_projection")
    grounded_tower = keras.Model(sentences, g(u), name="grounded_text_tower")
    loss = family_loss(model, "grounding", GROUNDING_KEYS, seed)
    gm = assemble(grounded_tower, build_identity_image_tower(feature_dim), loss)
    return dataclasses.replace(gm, text_tower=text_tower)
