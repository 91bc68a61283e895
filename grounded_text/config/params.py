"""The builders' parameters as data: what ``ModelConfig.encoder`` and
``ModelConfig.loss_params`` may hold, with each parameter's type, default and range.

The values reach the builders from ``--encoder-param K=V`` / ``--loss-param K=V``, the
tables ``[model.encoder]`` / ``[model.loss_params]`` of a config file and ``--set
model.encoder.K=V``; each is read as a TOML value, else kept as a string. So
``trainable_embeddings=False`` arrives as the string ``"False"``, which Python finds
true. ``coerce_param`` turns such values into the parameter's type (``"False"`` →
``False``) or refuses them, and ``check_params`` refuses keys the builder does not take,
before TensorFlow is imported (this module imports neither TensorFlow nor Keras).

``ENCODER_PARAMS`` maps each builder of ``grounded_text.models.registry.MODELS`` to its
encoder parameters (the builder reads its table here: it is the one list of what it takes),
``TINY_ENCODERS`` each builder to its smallest sizes (for tests and smoke runs), and
``LOSS_PARAMS`` each loss of ``grounded_text.config.schema.LOSSES`` and each baseline
objective of ``grounded_text.config.schema.BASELINE_OBJECTIVES`` to its parameters.
Each ``Param.source`` names where the value goes (``"module:Class.argument"``, or
``"module:CONSTANT"`` for a closed set of values the builder checks itself); a test
compares the tables with those signatures and constants, so they cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import math

#: ``Param.default`` of a parameter whose target has no default.
REQUIRED = "<required>"

_BOOL_WORDS = {"true": True, "false": False, "1": True, "0": False}


@dataclasses.dataclass(frozen=True)
class Param:
    """One builder or loss parameter.

    Attributes:
      type: ``bool``, ``int``, ``float``, ``str`` or ``list`` (a list of ``int``).
      default: the target's default (``REQUIRED``: none; the preset records give every
        encoder parameter, the builders hide no defaults).
      choices: the closed set of values of a ``str`` parameter, or None.
      nullable: ``None`` is a value (its meaning in ``note``).
      minimum: the smallest value (of each item of a list), or None.
      above: an exclusive lower bound, or None.
      below: an exclusive upper bound, or None.
      maximum: an inclusive upper bound, or None.
      source: where the value goes, ``"module:Class.argument"`` or ``"module:CONSTANT"``.
      note: what ``None`` or the value means, where it is not plain.
    """

    type: type
    default: object = REQUIRED
    choices: tuple | None = None
    nullable: bool = False
    minimum: float | None = None
    above: float | None = None
    below: float | None = None
    maximum: float | None = None
    source: str = ""
    note: str = ""

    def describe(self) -> str:
        """``"int >= 1 or none"``-like text for error messages."""
        name = (f"one of {list(self.choices)}" if self.choices
                else "list of int" if self.type is list else self.type.__name__)
        bounds = [f"{op} {x:g}" for op, x in ((">=", self.minimum), (">", self.above), ("<", self.below),
                                               ("<=", self.maximum)) if x is not None]
        return name + (" " + " and ".join(bounds) if bounds else "") + (" or none" if self.nullable else "")


# ----------------------------------------------------------------------------- encoders

_RNN = "grounded_text.layers.rnn_encoder:RNNEncoder"
_CHAR = "grounded_text.layers.char_encoder"
_BRANCHES = "grounded_text.layers.branches"
_BOW = "grounded_text.layers.bow_encoder:BagOfWordsEncoder"
_LM = "grounded_text.layers.language_model:RecurrentLanguageModel"

_TRAINABLE = {"trainable_embeddings": Param(bool, True, source=f"{_RNN}.trainable_embeddings")}
#: ``RNNEncoder``'s parameters (``vete_rnn`` takes these; ``bordes_cg_pg`` adds its projection).
RNN_PARAMS = {
    "word_dim": Param(int, 300, minimum=1, source=f"{_RNN}.word_dim"),
    "units": Param(int, 512, nullable=True, minimum=1, source=f"{_RNN}.units", note="None = N"),
    "num_layers": Param(int, 1, minimum=1, maximum=3, source=f"{_RNN}.num_layers"),
    "cell": Param(str, "gru", choices=("gru", "lstm"), source="grounded_text.layers.rnn_encoder:CELLS"),
    "pooling": Param(str, "last", choices=("last", "mean", "max"),
                     source="grounded_text.layers.rnn_encoder:RNN_POOLINGS"),
    "bidirectional": Param(bool, False, source=f"{_RNN}.bidirectional"),
    "dropout": Param(float, 0.0, minimum=0.0, below=1.0, source=f"{_RNN}.dropout"),
    **_TRAINABLE,
}
_PROJECTION = {
    "projection": Param(str, "mlp", choices=("mlp", "identity"), source=f"{_BRANCHES}:GroundedProjection.kind"),
    "grounded_hidden": Param(int, 512, minimum=1, source=f"{_BRANCHES}:GroundedProjection.hidden_units"),
    "grounded_dim": Param(int, 512, minimum=1, source=f"{_BRANCHES}:GroundedProjection.output_dim"),
}

#: Builder name (``grounded_text.models.registry.MODELS``) → encoder parameter → ``Param``.
ENCODER_PARAMS: dict[str, dict[str, Param]] = {
    "vete_bow": {"trainable_embeddings": Param(bool, True, source=f"{_BOW}.trainable_embeddings")},
    "vete_rnn": RNN_PARAMS,
    "vete_cnn": {
        "word_dim": Param(int, 300, minimum=1, source="grounded_text.layers.cnn_encoder:KimCNNEncoder.word_dim"),
        "filter_widths": Param(list, [3, 4, 5], minimum=1,
                               source="grounded_text.layers.cnn_encoder:KimCNNEncoder.filter_widths"),
        "filters": Param(int, 100, minimum=1, source="grounded_text.layers.cnn_encoder:KimCNNEncoder.filters"),
        "dropout": Param(float, 0.5, minimum=0.0, below=1.0,
                         source="grounded_text.layers.cnn_encoder:KimCNNEncoder.dropout"),
        "trainable_embeddings": Param(bool, True,
                                      source="grounded_text.layers.cnn_encoder:KimCNNEncoder.trainable_embeddings"),
    },
    "bordes_cg_pg": {
        **RNN_PARAMS, **_PROJECTION,
        "export_space": Param(str, REQUIRED, choices=("grounded", "textual"),
                              source="grounded_text.models.bordes:EXPORT_SPACES",
                              note="the space exported as the main text tower"),
    },
    "two_branch_khard": {
        "word_dim": Param(int, 128, minimum=1, source=f"{_BOW}.embedding_dim"),
        "trainable_embeddings": Param(bool, True, source=f"{_BOW}.trainable_embeddings"),
        "hidden_units": Param(list, [2048], minimum=1, source=f"{_BRANCHES}:MLPBranch.hidden_units"),
        "dropout": Param(float, 0.5, minimum=0.0, below=1.0, source=f"{_BRANCHES}:MLPBranch.dropout"),
        "batch_norm": Param(bool, True, source=f"{_BRANCHES}:MLPBranch.batch_norm"),
    },
    "char_gru_attention": {
        "char_dim": Param(int, 20, minimum=1, source=f"{_CHAR}:CharacterEncoder.char_dim"),
        "units": Param(int, 512, nullable=True, minimum=1, source=f"{_CHAR}:CharacterEncoder.units",
                       note="None = N / directions"),
        "num_layers": Param(int, 1, minimum=1, maximum=3, source=f"{_CHAR}:CharacterEncoder.num_layers"),
        "cell": Param(str, "gru", choices=("gru", "lstm"), source="grounded_text.layers.rnn_encoder:CELLS"),
        "bidirectional": Param(bool, True, source=f"{_CHAR}:CharacterEncoder.bidirectional"),
        "pooling": Param(str, "attention", choices=("attention", "scalar_attention", "max", "mean"),
                         source=f"{_CHAR}:CHAR_POOLINGS"),
        "attention_units": Param(int, 128, minimum=1, source=f"{_CHAR}:CharacterEncoder.attention_units"),
        "max_chars": Param(int, None, nullable=True, minimum=1, source=f"{_CHAR}:CharacterPreprocessor.max_chars",
                           note="None: no truncation"),
        # The options that mirror the authors' code (DannyMerkx/caption2image at 8a4dc2c; off by default).
        "attention_heads": Param(int, 1, minimum=1, source=f"{_CHAR}:CharacterEncoder.attention_heads",
                                 note="multi_attention, PyTorch/functions/costum_layers.py:71-85 (their "
                                      "flickr_char/char_net.py:50 trains 2); N = units × directions × heads"),
        "attention_include_padding": Param(bool, False, source=f"{_CHAR}:CharacterEncoder.attention_include_padding",
                                           note="true: their unmasked attention softmax, costum_layers.py:95,98"),
        "attention_diversity_margin": Param(float, None, nullable=True, above=0.0,
                                            source=f"{_CHAR}:CharacterEncoder.attention_diversity_margin",
                                            note="None: no diversity loss; 1.0: their attention_loss, "
                                                 "costum_loss.py:72-94, added by flickr_char/char_net.py:117"),
        "char_embedding_init": Param(str, "uniform", choices=("uniform", "normal"),
                                     source=f"{_CHAR}:CHAR_EMBEDDING_INITS",
                                     note="normal: N(0, 1), their nn.Embedding default, encoders.py:21-23"),
        "weight_init": Param(str, "keras", choices=("keras", "torch"),
                             source="grounded_text.layers.pooling:WEIGHT_INITS",
                             note="torch: every other weight as their code leaves it (PyTorch defaults; nn.GRU "
                                  "U(±1/√units), encoders.py:24-26; attention costum_layers.py:91-94; image "
                                  "bias encoders.py:52-53)"),
        "char_ids": Param(str, "vocabulary", choices=("vocabulary", "printable"), source=f"{_CHAR}:CHAR_ID_RULES",
                          note="printable: their ids, string.printable with '0' and unknown characters on a zero "
                               "row never trained, prep_text.py:21-35"),
    },
    "grounded_pretrained": {
        "preset": Param(str, REQUIRED, nullable=True,
                        source="grounded_text.layers.backbone_encoder:build_pretrained_text_tower.preset",
                        note="a local keras-hub or Hugging Face-format model folder (required to build)"),
        "sequence_length": Param(int, 128, minimum=1,
                                 source="grounded_text.layers.backbone_encoder:build_pretrained_text_tower"
                                        ".sequence_length"),
        "trainable_backbone": Param(bool, True,
                                    source="grounded_text.layers.backbone_encoder:build_pretrained_text_tower"
                                           ".trainable_backbone"),
        **_PROJECTION,
        "anchor_weight": Param(float, 1.0, minimum=0.0, source="grounded_text.models.backbone:EmbeddingAnchor.weight",
                               note="0: no anchor"),
    },
    "pure_text_rnn": {"word_dim": Param(int, REQUIRED, minimum=1, source=f"{_LM}.word_dim")},
    "pin_model_a": {"word_dim": Param(int, REQUIRED, minimum=1, source=f"{_LM}.word_dim")},
    "vete_bow_word": {"trainable_embeddings": Param(bool, True, source=f"{_BOW}.trainable_embeddings")},
    "seq": {"trainable_embeddings": Param(bool, True, source=f"{_BOW}.trainable_embeddings")},
    "ground_sent": {
        "trainable_embeddings": Param(bool, True, source=f"{_RNN}.trainable_embeddings"),
        "units": Param(int, 512, minimum=1, source=f"{_RNN}.units"),
        "decoder_word_dim": Param(int, REQUIRED, minimum=1, source=f"{_LM}.word_dim"),
    },
}

#: ``model.embedding_dim`` N that ``TINY_ENCODERS`` are sized for.
TINY_EMBEDDING_DIM = 16

#: Builder → the smallest encoder sizes that build and train at N = ``TINY_EMBEDDING_DIM``,
#: merged over the record's encoder by the tests and the smoke runs (one table for both, so
#: the two cannot disagree). ``{}``: the record's sizes are kept (N alone sets the size, or the
#: model's own tests size it). The character model's ``units`` = 8 are per direction: 8 × 2 = N.
TINY_ENCODERS: dict[str, dict] = {
    "vete_bow": {},
    "vete_rnn": {"word_dim": 8, "units": 8},
    "vete_cnn": {"word_dim": 8, "filters": 4},
    "bordes_cg_pg": {"word_dim": 8, "units": 8, "grounded_hidden": 8, "grounded_dim": 8},
    "two_branch_khard": {"hidden_units": [16]},
    "char_gru_attention": {"char_dim": 4, "units": 8, "attention_units": 8},
    "grounded_pretrained": {},
    "pure_text_rnn": {},
    "pin_model_a": {},
    "vete_bow_word": {},
    "seq": {},
    "ground_sent": {},
}

# ----------------------------------------------------------------------------- losses

_CORR = "grounded_text.losses.correlation"
_GROUND = "grounded_text.losses.grounding"
_RANK = "grounded_text.losses.ranking:TripletRankingLoss"
_EPSILON = 1e-8  # correlation.PEARSON_EPSILON (the drift test compares)


def _seed(cls: str) -> Param:
    return Param(int, None, nullable=True, minimum=0, source=f"{cls}.seed", note="None: the run's seed")


def _reduction(cls: str, default: str, choices: tuple = ("sum", "mean"), note: str = "") -> Param:
    return Param(str, default, choices=choices, source=f"{cls}.reduction", note=note)


def _margin(cls: str, default: float) -> Param:
    return Param(float, default, above=0.0, source=f"{cls}.margin")


#: Loss name (``grounded_text.config.schema.LOSSES`` and ``BASELINE_OBJECTIVES``) → parameter → ``Param``.
LOSS_PARAMS: dict[str, dict[str, Param]] = {
    "pearson": {"seed": _seed(f"{_CORR}:PearsonCorrelationLoss"),
                "epsilon": Param(float, _EPSILON, minimum=0.0, source=f"{_CORR}:PearsonCorrelationLoss.epsilon")},
    "covariance": {"seed": _seed(f"{_CORR}:CovarianceLoss")},
    "skt": {"alpha": Param(float, 1.0, above=0.0, source=f"{_CORR}:SurrogateKendallTauLoss.alpha"),
            "seed": _seed(f"{_CORR}:SurrogateKendallTauLoss")},
    "rank": {"margin": Param(float, 0.2, source=f"{_CORR}:PairwiseRankLoss.margin"),
             "reduction": _reduction(f"{_CORR}:PairwiseRankLoss", "sum")},
    "triplet": {
        "margin": _margin(_RANK, 0.2),
        "direction_weight": Param(float, 1.0, minimum=0.0, source=f"{_RANK}.direction_weight"),
        "negatives": Param(str, "all", choices=("all", "hardest", "semi_hard", "hard"),
                           source="grounded_text.losses.ranking:NEGATIVES"),
        "k": Param(int, 1, minimum=1, source=f"{_RANK}.k", note="with negatives = hardest"),
        # "mean_matrix": the hinge averaged over the B × B cost matrix, cost.mean() of the authors' code of
        # Merkx & Frank (DannyMerkx/caption2image 8a4dc2c, PyTorch/functions/costum_loss.py:39).
        "reduction": _reduction(_RANK, "sum", ("sum", "mean", "mean_matrix"),
                                note="mean_matrix: ÷ B², their costum_loss.py:39"),
    },
    "cluster": {"margin": _margin(f"{_GROUND}:ClusterLoss", 0.5),
                "reduction": _reduction(f"{_GROUND}:ClusterLoss", "mean")},
    "perceptual": {"epsilon": Param(float, _EPSILON, minimum=0.0, source=f"{_GROUND}:PerceptualLoss.epsilon")},
    "grounding": {
        "alpha_cluster": Param(float, 1.0, minimum=0.0, source=f"{_GROUND}:GroundingLoss.alpha_cluster"),
        "alpha_perceptual": Param(float, 1.0, minimum=0.0, source=f"{_GROUND}:GroundingLoss.alpha_perceptual"),
        "margin": _margin(f"{_GROUND}:GroundingLoss", 0.5),
        "reduction": _reduction(f"{_GROUND}:GroundingLoss", "mean"),
    },
    "cross_modal": {"margin": _margin(f"{_GROUND}:CrossModalProjectionLoss", 0.5),
                    "reduction": _reduction(f"{_GROUND}:CrossModalProjectionLoss", "mean")},
    # The papers' baselines' objectives (grounded_text.models.paper_baselines reads these).
    "next_token": {},
    "regression": {},
    "cap2img": {"margin": Param(float, 0.2, source="grounded_text.losses.baselines:CaptionToImageLoss.margin")},
    "cap2cap": {},
    "cap2both": {"margin": Param(float, 0.2, source="grounded_text.losses.baselines:CaptionToImageLoss.margin")},
}


# ----------------------------------------------------------------------------- checks


class ParamError(ValueError):
    """A value or key of ``ModelConfig.encoder`` / ``ModelConfig.loss_params`` that the
    builder does not take."""


def _int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _float(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def check_checkpoint_every(seconds) -> float:
    """``seconds`` as a float >= 0 (``math.inf``: epoch ends only).

    Raises:
      ValueError: negative, NaN or not a number.
    """
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        raise ValueError(f"checkpoint_every must be a number of seconds, got {seconds!r}.") from None
    if not value >= 0:
        raise ValueError(f"checkpoint_every must be >= 0 seconds, got {seconds!r}.")
    return value


def in_range(x, spec: Param) -> bool:
    """``x`` (a number) is finite and within ``spec``'s bounds. The one range rule: the config
    fields' ``parse`` rules (``grounded_text.config.schema.RULES``) are ``Param`` bounds too."""
    if isinstance(x, float) and not math.isfinite(x):
        return False
    return ((spec.minimum is None or x >= spec.minimum) and (spec.above is None or x > spec.above)
            and (spec.below is None or x < spec.below)
            and (spec.maximum is None or x <= spec.maximum))


def coerce_param(value, spec: Param, what: str):
    """``value`` as the type of ``spec``.

    Booleans: ``True``/``False``, ``1``/``0`` and the strings ``true``/``false``/``1``/``0``
    (any case); ints: ints, integral floats and their strings; floats: finite numbers and
    their strings; lists: lists of ints (or a comma-separated string of them); strings:
    strings (one of ``spec.choices`` where given). ``None`` (also the string ``none`` for a
    parameter that is not a string) where ``spec.nullable``.

    Args:
      value: the value as read (TOML value or string).
      spec: the parameter.
      what: the parameter's name for the message (``"model.encoder.units"``).

    Returns:
      The typed value (``list`` for lists).

    Raises:
      ParamError: the value does not fit ``spec`` (message: ``what``, the value, the
        expected type and range).
    """
    if value is None or (spec.type is not str and isinstance(value, str) and value.strip().lower() in ("none", "null")):
        if spec.nullable:
            return None
        raise ParamError(f"{what} cannot be none (expected {spec.describe()}).")
    out = None
    if spec.type is bool:
        if isinstance(value, bool):
            out = value
        elif isinstance(value, int) and value in (0, 1):
            out = bool(value)
        elif isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:
            out = _BOOL_WORDS[value.strip().lower()]
        if out is None:
            raise ParamError(f"{what} = {value!r} is not a boolean (true/false or 1/0).")
        return out
    if spec.type is int:
        out = _int(value)
        if out is None or not in_range(out, spec):
            raise ParamError(f"{what} = {value!r} is not an {spec.describe()}.")
        return out
    if spec.type is float:
        out = _float(value)
        if out is None or not in_range(out, spec):
            raise ParamError(f"{what} = {value!r} is not a finite {spec.describe()}.")
        return out
    if spec.type is list:
        items = value.split(",") if isinstance(value, str) else value
        if isinstance(items, (list, tuple)) and items:
            out = [_int(v) for v in items]
        if out is None or any(v is None or not in_range(v, spec) for v in out):
            raise ParamError(f"{what} = {value!r} is not a non-empty {spec.describe()} (e.g. [3, 4, 5]).")
        return out
    if not isinstance(value, str):
        raise ParamError(f"{what} = {value!r} is not a string ({spec.describe()}).")
    if spec.choices and value not in spec.choices:
        raise ParamError(f"{what} = {value!r} is not one of {list(spec.choices)}.")
    return value


def check_params(params: dict, table: dict[str, Param], field: str, owner: str, where=None) -> dict:
    """``params`` (``ModelConfig.encoder`` or ``loss_params``) with each value coerced
    (``coerce_param``) and no key the builder does not take.

    Args:
      params: key → value as read.
      table: key → ``Param`` (an entry of ``ENCODER_PARAMS`` or ``LOSS_PARAMS``).
      field: ``"model.encoder"`` or ``"model.loss_params"`` (for the messages).
      owner: what takes the parameters (``"model 'vete_rnn'"``, ``"loss 'triplet'"``).
      where: key → where the value came from (a config file, ``--encoder-param``, ...),
        or one string for every key, or None; it starts the message.

    Returns:
      A new dict of typed values, in the order of ``params``.

    Raises:
      ParamError: an unknown key (the message lists the known ones, with their types) or a
        value that does not fit.
    """
    out = {}
    for key, value in params.items():
        origin = where.get(key) if isinstance(where, dict) else where
        prefix = f"{origin}: " if origin else ""
        if key not in table:
            known = ", ".join(f"{k} ({p.describe()})" for k, p in table.items()) or "none"
            raise ParamError(f"{prefix}{field}.{key}: {owner} has no parameter {key!r}; it takes: {known}.")
        try:
            out[key] = coerce_param(value, table[key], f"{field}.{key}")
        except ParamError as e:
            raise ParamError(f"{prefix}{e}") from None
    return out


def check_model_params(model: dict, builder: str, default_loss: str | None = None, where=None,
                       encoder_where: dict | None = None, loss_where: dict | None = None) -> dict:
    """The ``model`` section of a config dict (``ExperimentConfig.to_dict()["model"]``)
    with ``encoder`` checked against the builder's parameters and ``loss_params`` against
    the loss's (``model["loss"]``, or ``default_loss`` when that is unset).

    Args:
      model: the ``model`` section (not changed).
      builder: the builder of the preset ``model["name"]`` (its record's ``builder``).
      default_loss: the preset's loss (its record's ``model.loss``).
      where: where the values came from (a string), used where ``encoder_where`` /
        ``loss_where`` (key → where) do not name the key.

    Returns:
      A copy of ``model`` with typed ``encoder`` and ``loss_params``.

    Raises:
      ParamError: unknown builder or loss, an unknown key or a value that does not fit
        (``check_params``).
    """
    prefix = f"{where}: " if where else ""
    if builder not in ENCODER_PARAMS:
        raise ParamError(f"{prefix}no builder {builder!r}; the builders are {sorted(ENCODER_PARAMS)}.")
    loss = model.get("loss") or default_loss
    if loss not in LOSS_PARAMS:
        raise ParamError(f"{prefix}model.loss = {loss!r} is not one of {sorted(LOSS_PARAMS)}.")
    out = dict(model)
    for field, table, owner, specific in (("encoder", ENCODER_PARAMS[builder], f"model {model.get('name')!r}",
                                           encoder_where),
                                          ("loss_params", LOSS_PARAMS[loss], f"loss {loss!r}", loss_where)):
        values = model.get(field) or {}
        origins = {k: (specific or {}).get(k, where) for k in values}
        out[field] = check_params(values, table, f"model.{field}", owner, origins)
    return out


def _loose(spec: Param, nullable: bool) -> Param:
    return dataclasses.replace(spec, choices=None, nullable=nullable, minimum=None, above=None, below=None,
                               maximum=None)


def type_params(params: dict, field: str, where=None) -> dict:
    """``params`` typed without knowing the builder or loss: each key is read as the type
    every builder (``field="model.encoder"``) or loss (``"model.loss_params"``) that takes
    it gives it (the types of a name agree across the tables; a test checks it). Ranges,
    choices and whether this model's builder takes the key are left to
    ``check_model_params``.

    Args:
      params: key → value as read.
      field: ``"model.encoder"`` or ``"model.loss_params"``.
      where: key → where the value came from, or one string, or None.

    Returns:
      A new dict of typed values.

    Raises:
      ParamError: a key that no builder (no loss) takes, or a value that is not of its type.
    """
    tables = ENCODER_PARAMS if field == "model.encoder" else LOSS_PARAMS
    specs = {}
    for table in tables.values():
        for key, spec in table.items():
            specs[key] = _loose(spec, spec.nullable or (key in specs and specs[key].nullable))
    owner = "no builder" if field == "model.encoder" else "no loss"
    out = {}
    for key, value in params.items():
        origin = where.get(key) if isinstance(where, dict) else where
        prefix = f"{origin}: " if origin else ""
        if key not in specs:
            raise ParamError(f"{prefix}{field}.{key}: {owner} takes a parameter {key!r}; they take: {sorted(specs)}.")
        try:
            out[key] = coerce_param(value, specs[key], f"{field}.{key}")
        except ParamError as e:
            raise ParamError(f"{prefix}{e}") from None
    return out


__all__ = ["ENCODER_PARAMS", "LOSS_PARAMS", "RNN_PARAMS", "TINY_EMBEDDING_DIM", "TINY_ENCODERS", "Param", "ParamError",
           "REQUIRED", "check_model_params", "check_params", "coerce_param", "in_range", "type_params"]
