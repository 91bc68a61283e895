"""Grounded-space model of Bordes et al. (2019), "Incorporating Visual Semantics into
Sentence Representations within a Grounded Space" (EMNLP), §3.

The sentence encoder F_t maps a sentence to the textual space u = F_t(s); a
projection g maps u to the grounded space, where the grounding losses act:

* cluster loss L_C (eq. 2): in the grounded space, a caption is closer by a margin γ
  to a visually equivalent sentence (another caption of the same image) than to a
  visually different one — needs batches with several captions per image
  (``DataConfig.sampler = "grouped"``);
* perceptual loss L_P (eq. 3): −Pearson between the in-batch text–text cosine
  similarities (grounded space) and the image–image cosine similarities of the
  images' CNN features;
* the C_g + P_g model trains α_C L_C + α_P L_P.

The exported text tower is u = F_t(s) (the textual space), not g(u).
"""

from __future__ import annotations

import dataclasses

import keras

from grounded_text.config import ModelConfig, TextConfig
from grounded_text.layers.branches import GroundedProjection
from grounded_text.layers.rnn_encoder import RNNEncoder
from grounded_text.models.components import (GROUNDING_KEYS, RNN_KEYS, build_identity_image_tower,
                                              family_loss, init_word_embeddings, require_params,
                                              rnn_encoder_kwargs, word_preprocessor)
from grounded_text.models.grounded_model import GroundedModel, assemble

BORDES_KEYS = RNN_KEYS + ("projection", "grounded_hidden", "grounded_dim")


def build_bordes_cg_pg(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, seed: int = 0,
                       **_) -> GroundedModel:
    """Bordes et al. (2019) C_g + P_g: cluster + perceptual loss in a grounded space over a GRU encoder.

    Sentence encoder F_t an RNN over word embeddings (the paper's is the SkipThought-style
    GRU); projection g to the grounded space; loss α_C L_C + α_P L_P (``GroundingLoss``)
    over batches holding several captions per image (the grouped sampler). **No
    SkipThought textual loss**: the paper adds a textual objective L_T (SkipThought, on
    the Toronto BookCorpus) to the grounding losses; this package has no such corpus or
    loss, so this preset trains the grounding objective alone (the paper's grounded-only
    setting).

    Encoder keys (``ModelConfig.encoder``; the ``bordes_cg_pg`` record gives them): the
    ``RNNEncoder`` keys (``word_dim``, ``units`` (None = N), ``num_layers``, ``cell``,
    ``pooling``, ``bidirectional``, ``dropout``, ``trainable_embeddings``), ``projection``
    ("mlp" or "identity"), ``grounded_hidden``, ``grounded_dim``. Loss parameters of
    ``"grounding"``: ``alpha_cluster``, ``alpha_perceptual``, ``margin``. With
    ``ModelConfig.loss = "cross_modal"`` (the CM baseline) g maps into the image feature
    space, so its output size is the feature dimension d.

    The ``GroundedModel.image_tower`` is the identity on CNN features [B, d]; the
    text tower is F_t (string[B] → float32[B, N]).

    Raises:
      ValueError: a missing or unknown encoder or loss parameter; N unset.
    """
    p = require_params(model, model.encoder, BORDES_KEYS, "encoder")
    grounded_dim = feature_dim if model.loss == "cross_modal" else int(p["grounded_dim"])

    preprocessor = word_preprocessor(text, vocabulary)
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    encoder = RNNEncoder(preprocessor.vocabulary_size, name="rnn_encoder", **rnn_encoder_kwargs(model, p))
    u = encoder(preprocessor(sentences))
    init_word_embeddings(encoder.embedding, preprocessor, model)
    text_tower = keras.Model(sentences, u, name="text_tower")
    g = GroundedProjection(p["projection"], int(p["grounded_hidden"]), grounded_dim, name="grounded_projection")
    grounded_tower = keras.Model(sentences, g(text_tower(sentences)), name="grounded_text_tower")
    loss = family_loss(model, "grounding", GROUNDING_KEYS, seed)
    gm = assemble(grounded_tower, build_identity_image_tower(feature_dim), loss)
    return dataclasses.replace(gm, text_tower=text_tower)
