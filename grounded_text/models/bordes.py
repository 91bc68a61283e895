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

Both spaces are kept: ``GroundedModel.spaces`` holds the textual tower u = F_t(s) and
the grounded tower g(u) (the trainer exports them to ``export_textual/`` and
``export_grounded/``). The main text tower (``export/``) is the grounded space g(u) by
default: the paper's grounding-only models (Table 1, textual loss discarded) are
measured in g(u), and this package trains no textual loss. The encoder key
``export_space`` ("grounded" or "textual") overrides the choice.
"""

from __future__ import annotations

import dataclasses

import keras

from grounded_text.config.params import ENCODER_PARAMS
from grounded_text.config.schema import ModelConfig, TextConfig
from grounded_text.layers.branches import GroundedProjection
from grounded_text.layers.rnn_encoder import RNNEncoder
from grounded_text.models.components import (
    GROUNDING_KEYS,
    architecture,
    build_identity_image_tower,
    family_loss,
    init_word_embeddings,
    require_params,
    rnn_encoder_kwargs,
    word_preprocessor,
)
from grounded_text.models.grounded_model import GroundedModel, assemble

EXPORT_SPACES = ("grounded", "textual")


@architecture(
    "GRU → L2 = textual space u; g: 2-layer MLP to the grounded space; exported: g(u) → L2 (both spaces also "
    "in `export_textual/`, `export_grounded/`)",
    "none (CNN features)",
    "α_C L_C + α_P L_P")
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
    ("mlp" or "identity"), ``grounded_hidden``, ``grounded_dim``, ``export_space``
    ("grounded" or "textual": which space is the main text tower, below). Loss parameters of
    ``"grounding"``: ``alpha_cluster``, ``alpha_perceptual``, ``margin``. With
    ``ModelConfig.loss = "cross_modal"`` (the CM baseline) g maps into the image feature
    space, so its output size is the feature dimension d.

    Spaces (``GroundedModel.spaces``, string[B] → float32[B, ·], L2-normalised rows like
    every export, so their cosines are those of u and g(u)):

    * ``"textual"``: u = F_t(s), float32[B, N] (N = ``ModelConfig.embedding_dim``);
    * ``"grounded"``: g(u), float32[B, N_g] (N_g = ``grounded_dim``; d with the
      cross-modal loss; N with ``projection="identity"``).

    ``GroundedModel.text_tower`` (what ``export/`` holds, what model selection and
    snapshots use) is ``spaces[export_space]``. The record's choice is the grounded space:
    Bordes et al. (2019, Table 1) evaluate the models trained without the textual loss
    L_T in the grounded space g(u), where the grounding losses act (eqs. 2–3); this
    package has no textual loss, so every model it trains is such a grounding-only
    model. ``export_space="textual"`` exports u instead. The training loss always acts on g(u).

    The ``GroundedModel.image_tower`` is the identity on CNN features [B, d].

    Raises:
      ValueError: a missing or unknown encoder or loss parameter; N unset.
    """
    p = require_params(model, model.encoder, ENCODER_PARAMS["bordes_cg_pg"], "encoder")
    export_space = p["export_space"]
    if export_space not in EXPORT_SPACES:
        raise ValueError(f"bordes_cg_pg: export_space must be one of {EXPORT_SPACES}, got {export_space!r}.")
    grounded_dim = feature_dim if model.loss == "cross_modal" else int(p["grounded_dim"])

    preprocessor = word_preprocessor(text, vocabulary)
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    encoder = RNNEncoder(preprocessor.vocabulary_size, name="rnn_encoder", **rnn_encoder_kwargs(model, p))
    u = encoder(preprocessor(sentences))
    init_word_embeddings(encoder.embedding, preprocessor, model)
    g = GroundedProjection(p["projection"], int(p["grounded_hidden"]), grounded_dim, name="grounded_projection")
    gu = g(u)
    # The towers are flat graphs over the same layers (not nested models), so that the
    # exporter finds the TextPreprocessor and ships the vocabulary as an asset.
    grounded_tower = keras.Model(sentences, gu, name="grounded_text_tower")
    # Exports promise L2-normalised rows; the grounding losses only use cosines of g(u),
    # so they train on g(u) itself and the normalisation is added for the exported space.
    # float32 so that mixed precision still exports float32 embeddings.
    grounded_space = keras.Model(sentences, keras.layers.UnitNormalization(dtype="float32", name="grounded_l2")(gu),
                                 name="grounded_space")
    spaces = {"textual": keras.Model(sentences, u, name="text_tower"), "grounded": grounded_space}
    loss = family_loss(model, "grounding", GROUNDING_KEYS, seed)
    gm = assemble(grounded_tower, build_identity_image_tower(feature_dim), loss)
    return dataclasses.replace(gm, text_tower=spaces[export_space], spaces=spaces)
