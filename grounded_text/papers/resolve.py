"""Config resolution: a config's ``None`` choices filled from its preset record, and the
combination checked. No TensorFlow is imported here, so a bad combination answers at once.

``ExperimentConfig`` fields whose ``None`` means "the preset's choice" (``grounded_text.config.schema``)
take the value of the record named by ``ModelConfig.name`` (``grounded_text.papers.presets``: the
paper's values, or ours where the paper leaves them unsaid); a value set by the user wins.

A config is checked once per command: ``config_from_flags`` (a command's flags) and
``check_config`` (a config built in code) check every value and mark what they return, and
``resolve_config`` checks only a config not so marked (or changed since). The value rules live
in ``grounded_text.config.schema.check_field`` (and, for the builders' parameters,
``grounded_text.config.params``); the values ``fill_config`` takes from a record go through
``check_field`` too, and ``resolve_config`` adds only the checks that join several fields.

A run resolves its config once, at the top (the train CLI's ``main``, or
``grounded_text.training.trainer.train``), and hands the resolved config down: the data
pipeline, the builders and the run directory read it as it is. ``resolve_config`` marks what
it returns, and ``ensure_resolved`` returns a marked config unchanged (a config changed after
resolution is resolved again). Resolution is idempotent: resolving a resolved config gives an
equal config.
"""

from __future__ import annotations

import copy
import dataclasses

from grounded_text.config.flags import flags_to_dict
from grounded_text.config.params import ParamError, check_model_params
from grounded_text.config.schema import (
    SECTION_CLASSES,
    ConfigError,
    ExperimentConfig,
    ModelConfig,
    TextConfig,
    check_config_dict,
    check_field,
)
from grounded_text.papers.presets import DICT_FIELDS, PRESET_FIELDS, PRESETS, get_preset, record_config
from grounded_text.papers.record import deep_merge

# Losses that need several captions of one image in a batch (the grouped sampler).
NEEDS_GROUPED_BATCHES = {"cluster", "grounding", "cap2cap", "cap2both"}
CYCLIC = ("cyclic_cosine", "warm_restarts")
# Attribute a resolved config (and each of its sections) carries: its field values at resolution.
_MARK = "_grounded_text_resolved_as"
# Attribute a checked config carries: its field values when checked.
_CHECKED = "_grounded_text_checked_as"


def loss_needs_grouped_batches(name: str, params: dict | None = None) -> bool:
    """True when the loss needs the multi-caption sampler (``GroundingLoss`` only if α_C > 0)."""
    if name == "grounding" and float((params or {}).get("alpha_cluster", 1.0)) == 0.0:
        return False
    return name in NEEDS_GROUPED_BATCHES


# ----------------------------------------------------------------------------- filling


def check_record_overrides(overrides: dict, record: dict) -> None:
    """Raises ``ValueError`` naming the first key of ``overrides`` (nested like
    ``Preset.config``) that is not a config field (or, under ``model.encoder``, not a
    parameter of the record's encoder)."""
    fields = {s: {f.name for f in dataclasses.fields(c)} for s, c in SECTION_CLASSES.items()}
    for section, values in overrides.items():
        if section not in SECTION_CLASSES:
            raise ValueError(f"Unknown config section {section!r}; sections are {sorted(SECTION_CLASSES)}.")
        if not isinstance(values, dict):
            raise ValueError(f"Config section {section!r} must be a dict of fields, got {values!r}.")
        for key, value in values.items():
            if key not in fields[section]:
                raise ValueError(f"Unknown config field {section}.{key}; {section} has {sorted(fields[section])}.")
            if f"{section}.{key}" in DICT_FIELDS and not isinstance(value, dict):
                raise ValueError(f"{section}.{key} must be a dict, got {value!r}.")
    known = record.get("model", {}).get("encoder", {})
    for key in overrides.get("model", {}).get("encoder", {}):
        if key not in known:
            raise ValueError(f"Unknown config field model.encoder.{key}; the encoder takes {sorted(known)}.")


def fill_config(config: ExperimentConfig) -> ExperimentConfig:
    """Fills the ``None`` ("the preset's choice") fields of ``config`` from the record
    ``config.model.name``; set fields win. The record's ``encoder`` is merged under the
    user's; its ``loss_params`` too when the loss is the record's (another loss takes only
    the user's). Idempotent. Each value taken from the record is checked against its field's rule
    (``check_field``); the user's are checked by ``check_config`` (``resolve_config``).

    Returns:
      A new ``ExperimentConfig`` (not marked resolved: ``resolve_config`` marks).

    Raises:
      ValueError: unknown preset; an encoder key the record's builder does not take; a record
        value that does not fit its field (``ConfigError``).
    """
    record = record_config(config.model.name).to_dict()
    d = config.to_dict()
    for path in PRESET_FIELDS:
        section, field = path.split(".")
        if d[section][field] is None and field != "snapshots":
            d[section][field] = check_field(path, copy.deepcopy(record[section][field]),
                                            f"preset record {config.model.name!r}")
    if d["train"]["snapshots"] is None:
        # A record's snapshots follow its cyclic schedule: with the schedule overridden to
        # "constant" there are no cycles to snapshot.
        d["train"]["snapshots"] = bool(record["train"]["snapshots"]) and d["train"]["schedule"] == "cyclic_cosine"
    rec_model = record["model"]
    rec_encoder = rec_model["encoder"]
    unknown = set(d["model"]["encoder"]) - set(rec_encoder)
    if unknown:
        raise ValueError(f"Model {config.model.name!r} has no encoder parameter(s) {sorted(unknown)}; "
                         f"it takes {sorted(rec_encoder)}.")
    d["model"]["encoder"] = {**copy.deepcopy(rec_encoder), **d["model"]["encoder"]}
    if d["model"]["loss"] == rec_model["loss"]:
        d["model"]["loss_params"] = {**copy.deepcopy(rec_model["loss_params"]), **d["model"]["loss_params"]}
    return ExperimentConfig.from_dict(d)


def fill_model_text(model: ModelConfig, text: TextConfig) -> tuple[ModelConfig, TextConfig]:
    """``fill_config`` for the two parts a builder reads; parts already resolved (sections of
    a ``resolve_config`` result, unchanged since) are returned as they are."""
    if is_resolved(model) and is_resolved(text):
        return model, text
    cfg = fill_config(ExperimentConfig(model=model, text=text))
    return cfg.model, cfg.text


# ----------------------------------------------------------------------------- checks
# The one place a config is checked: each field's rule (``check_config_dict``), the builder's and
# the loss's parameters (they need the preset record, hence here and not in the config system),
# and the combination (``_check``, run by ``resolve_config``).


def _mark_checked(config: ExperimentConfig) -> ExperimentConfig:
    # The values, not a flag: a config edited after its check is checked again.
    object.__setattr__(config, _CHECKED, dataclasses.asdict(config))
    return config


def is_checked(config: ExperimentConfig) -> bool:
    """True for a ``check_config`` or ``config_from_flags`` result unchanged since."""
    marked = getattr(config, _CHECKED, None)
    return marked is not None and marked == dataclasses.asdict(config)


def config_from_flags(args) -> ExperimentConfig:
    """The checked ``ExperimentConfig`` of a command's parsed flags: defaults < ``--config`` <
    flags < ``--set`` (``grounded_text.config.flags.flags_to_dict``).

    Every field is checked whichever way it was set: the builder parameters of ``model.encoder``
    / ``model.loss_params`` are typed for the final model and loss (``--encoder-param
    trainable_embeddings=False`` is ``False``), and an error names the field and where its value
    came from (the file, the flag, ``--set``). No TensorFlow is imported.

    Raises:
      ConfigError (a ValueError): a bad config file (missing, a directory, unreadable, not
        TOML) or a value from any source that does not fit its field or parameter (unknown
        field or parameter, wrong type, outside the choices or the range).
    """
    d, origins = flags_to_dict(args)
    d = check_builder_params(check_config_dict(d, "config", origins, params=False), "config", origins)
    return _mark_checked(ExperimentConfig.from_dict(d))


def check_builder_params(d: dict, where: str = "config", origins: dict | None = None) -> dict:
    """The config dict ``d`` with ``model.encoder`` and ``model.loss_params`` checked
    against the builder of preset ``model.name`` and its loss (``model.loss``, or the
    record's), with ``grounded_text.config.params.check_model_params``: unknown keys (the message
    lists the ones taken), types, ranges, choices.

    Args:
      d: a config dict (``ExperimentConfig.to_dict()`` form; not changed).
      where, origins: where the values came from (see
        ``grounded_text.config.schema.check_config_dict``).

    Returns:
      A new config dict with typed parameters.

    Raises:
      ConfigError: unknown preset, or a parameter the builder or loss does not take or
        whose value does not fit.
    """
    origins = origins or {}
    name = d["model"]["name"]
    if name not in PRESETS:
        raise ConfigError(f"{origins.get('model.name', where)}: model.name = {name!r} is not one of "
                          f"{sorted(PRESETS)}.")
    record = PRESETS[name]
    keyed = {field: {k: origins.get(f"model.{field}.{k}", origins.get(f"model.{field}", where))
                     for k in d["model"][field]} for field in ("encoder", "loss_params")}
    try:
        model = check_model_params(d["model"], record.builder, record.config.get("model", {}).get("loss"), where,
                                   keyed["encoder"], keyed["loss_params"])
    except ParamError as e:
        raise ConfigError(str(e)) from None
    return {**d, "model": model}


def check_config(config: ExperimentConfig, where: str = "config") -> ExperimentConfig:
    """Every value of ``config`` checked and typed, as ``config_from_flags`` checks the
    flags' (``grounded_text.config.schema.check_config_dict``, then ``check_builder_params``).
    Imports no TensorFlow.

    Returns:
      A new ``ExperimentConfig`` with normalised, typed values, marked checked (``is_checked``).

    Raises:
      ConfigError: see ``check_config_dict`` and ``check_builder_params``.
    """
    d = check_config_dict(config.to_dict(), where, params=False)
    return _mark_checked(ExperimentConfig.from_dict(check_builder_params(d, where)))


# ----------------------------------------------------------------------------- resolution


def _check(config: ExperimentConfig) -> None:
    """The combination checks of ``resolve_config`` (its Raises) on a filled config: what joins
    several fields. Each field's own rule (choices, ranges) was checked by ``check_field``, for the
    user's values by ``check_config`` and for the record's by ``fill_config``."""
    model, data, train = config.model, config.data, config.train
    if train.snapshots and train.schedule not in CYCLIC:
        raise ValueError("snapshots=True needs a cyclic schedule, 'cyclic_cosine' or 'warm_restarts' "
                         "(a snapshot is taken at each cycle's end, where both are at lr_min).")
    # lr_min and cycle_epochs only mean something to the cyclic schedules: a constant
    # learning rate below the record's lr_min (e.g. 1e-7) is a valid choice.
    if train.schedule in CYCLIC and (train.cycle_epochs < 1 or not 0 < train.lr_min <= train.learning_rate):
        raise ValueError(f"The {train.schedule} schedule needs cycle_epochs >= 1 and 0 < lr_min <= "
                         f"learning_rate; got cycle_epochs={train.cycle_epochs}, lr_min={train.lr_min}, "
                         f"learning_rate={train.learning_rate}.")
    if loss_needs_grouped_batches(model.loss, model.loss_params):
        if data.sampler != "grouped" or data.one_caption_per_image:
            raise ValueError(f"Loss {model.loss!r} needs several captions per image in a batch: use "
                             f"sampler='grouped' and all captions (not one_caption_per_image).")
    _check_char_encoder(model)
    if data.sampler == "grouped":
        if data.one_caption_per_image:
            raise ValueError("sampler='grouped' needs all captions (one_caption_per_image=False).")
        if data.captions_per_image < 2 or data.batch_size % data.captions_per_image:
            raise ValueError(f"grouped sampler: captions_per_image ({data.captions_per_image}) must be >= 2 and "
                             f"divide batch_size ({data.batch_size}).")


def _check_char_encoder(model: ModelConfig) -> None:
    """The character model's combinations (its builder checks them again, after TensorFlow
    loads): several attention heads need an attention pooling, and N = units × directions ×
    heads (the heads' outputs are concatenated, as ``multi_attention`` of the authors' code)."""
    if get_preset(model.name).builder != "char_gru_attention":
        return
    enc = model.encoder
    heads = int(enc.get("attention_heads") or 1)
    if heads > 1 and enc.get("pooling") not in ("attention", "scalar_attention"):
        raise ValueError(f"model.encoder.attention_heads = {heads} needs an attention pooling "
                         f"(pooling = 'attention' or 'scalar_attention'), got pooling = {enc.get('pooling')!r}.")
    directions = 2 if enc.get("bidirectional") else 1
    if (enc.get("units") is not None and model.embedding_dim is not None
            and int(enc["units"]) * directions * heads != int(model.embedding_dim)):
        raise ValueError(f"model.embedding_dim = {model.embedding_dim} must equal units × directions × "
                         f"attention heads = {enc['units']} × {directions} × {heads} (or set units = none).")


def _mark(config: ExperimentConfig) -> ExperimentConfig:
    for part in (config, config.data, config.text, config.model, config.train):
        # The values, not a flag: a config edited after resolution no longer counts as resolved.
        object.__setattr__(part, _MARK, dataclasses.asdict(part))
    return config


def is_resolved(part) -> bool:
    """True for a ``resolve_config`` result, or one of its sections, unchanged since."""
    marked = getattr(part, _MARK, None)
    return marked is not None and marked == dataclasses.asdict(part)


def resolve_config(config: ExperimentConfig) -> ExperimentConfig:
    """Fills the config's ``None`` choices from its preset record (``grounded_text.papers.presets``)
    and checks the combination.

    Args:
      config: an ``ExperimentConfig``; not modified.

    Returns:
      A new ``ExperimentConfig``, marked resolved (``is_resolved``); explicit settings are
      kept (the record's ``encoder`` and, for the record's own loss, ``loss_params`` are
      merged under the user's). Idempotent.

    Raises:
      ValueError: ``epochs`` or ``steps_per_execution`` < 1, ``learning_rate`` <= 0; unknown
        model, loss, sampler, schedule or ``select_on``; an encoder key
        the preset does not take; a loss that needs grouped batches (cluster, grounding)
        with the random sampler or one caption per image; snapshots without the cyclic
        cosine schedule; ``ensemble_size < 1``; for a cyclic schedule ``cycle_epochs < 1`` or
        not ``0 < lr_min <= learning_rate``; ``captions_per_image < 2`` or not dividing
        ``batch_size`` for the grouped sampler.

    Example:
      >>> from grounded_text.config.schema import ExperimentConfig, ModelConfig, TrainConfig
      >>> config = resolve_config(ExperimentConfig(model=ModelConfig(name="vete_rnn"), train=TrainConfig(epochs=3)))
      >>> config.train.epochs, config.model.loss, config.data.batch_size  # yours, then the record's
      (3, 'pearson', 128)
      >>> config.model.encoder["cell"], is_resolved(config)
      ('lstm', True)
      >>> resolve_config(ExperimentConfig(train=TrainConfig(epochs=0)))
      Traceback (most recent call last):
        ...
      grounded_text.config.schema.ConfigError: config: train.epochs must be an integer >= 1, got 0.
    """
    # Values typed and range-checked first, as for flags and files: a config built in code
    # (the API, the experiments) gets the same checks; one from a command's flags was checked
    # there (config_from_flags) and is not checked again.
    config = fill_config(config if is_checked(config) else check_config(config))
    _check(config)
    return _mark(config)


def ensure_resolved(config: ExperimentConfig) -> ExperimentConfig:
    """``config`` itself when ``is_resolved(config)``, else ``resolve_config(config)``.

    Raises:
      ValueError: see ``resolve_config``.
    """
    return config if is_resolved(config) else resolve_config(config)


def preset_config(name: str, overrides: dict | None = None) -> ExperimentConfig:
    """The resolved ``ExperimentConfig`` of record ``name`` with ``overrides`` (nested like
    ``Preset.config``) deep-merged over it.

    Raises:
      ValueError: unknown preset; an override key that is no config field (named);
        ``model.name`` in the overrides (pick another preset instead); and the checks of
        ``resolve_config``.
    """
    preset = get_preset(name)
    overrides = overrides or {}
    check_record_overrides(overrides, preset.config)
    if "name" in overrides.get("model", {}):
        raise ValueError("preset_config: model.name is the preset's; choose another preset instead.")
    d = deep_merge(preset.config, overrides)
    d.setdefault("model", {})["name"] = name
    return resolve_config(ExperimentConfig.from_dict(d))
