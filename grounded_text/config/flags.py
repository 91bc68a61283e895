"""Command-line flags generated from the config dataclasses (``grounded_text.config.schema``).

Every ``ExperimentConfig`` field whose ``metadata`` names a ``flag`` becomes that flag;
the value readers below check the text, and ``config_from_flags`` lays the values given
over ``--config FILE.toml`` and under ``--set section.key=value``. Precedence, lowest
first: the dataclass defaults (``None`` = the preset's choice), the config file, the
flags, ``--set``. No TensorFlow is imported here.
"""

from __future__ import annotations

import argparse
import dataclasses

from grounded_text.config.schema import (
    _SECTION_CLASSES,
    SECTIONS,
    ConfigError,
    ExperimentConfig,
    apply_override,
    check_config_dict,
    parse_override,
    read_config_dict,
    rule_value,
)
from grounded_text.config.schema import _choices_of as _field_choices

_DEST = "cfg__"  # argparse dest prefix of a generated flag: cfg__<section>__<field>
# (section, field) → its flag, for the messages naming where a value came from.
_FLAGS = {(s, f.name): f.metadata.get("flag") or f.metadata.get("negative")
          for s in SECTIONS for f in dataclasses.fields(_SECTION_CLASSES[s])
          if f.metadata.get("flag") or f.metadata.get("negative")}


def key_value(s: str):
    """``key=value`` → (key, value), the value read as ``--set`` reads it
    (``grounded_text.config.schema.parse_override``: a TOML value, else a string)."""
    try:
        return parse_override(s)
    except ConfigError:
        raise argparse.ArgumentTypeError(f"expected key=value, got {s!r}") from None


def bool_or_none(s: str):
    """``true``/``false``/``none`` (also ``1``/``0``) → True/False/None."""
    values = {"none": None, "true": True, "false": False, "1": True, "0": False}
    if s.lower() not in values:
        raise argparse.ArgumentTypeError(f"expected true, false or none, got {s!r}")
    return values[s.lower()]


def _ruled(rule: str, value):
    try:
        return rule_value(rule, value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _int(s: str) -> int:
    try:
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {s!r}") from None


def none_or_int(s: str):
    """``none`` or ``0`` → None (no limit); else an integer >= 1."""
    if s.lower() == "none":
        return None
    return _ruled("none_or_int", _int(s))


def positive_int(s: str) -> int:
    """An int >= 1 (0 epochs or steps would build everything and train nothing)."""
    return _ruled("positive_int", _int(s))


def nonnegative_int(s: str) -> int:
    """An int >= 0 (seeds)."""
    return _ruled("nonnegative_int", _int(s))


def positive_float(s: str) -> float:
    """A finite float > 0 (learning rates: ``inf``, ``nan``, 0 and negatives are refused)."""
    try:
        value = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {s!r}") from None
    return _ruled("positive_float", value)


_PARSERS = {"none_or_int": none_or_int, "positive_int": positive_int, "nonnegative_int": nonnegative_int,
            "positive_float": positive_float, "bool_or_none": bool_or_none, "key_value": key_value}


def _choices_of(path: str):
    """A field's closed set of values; ``model.name``'s are the preset records' names."""
    choices = _field_choices(path)
    if choices == "presets":
        from grounded_text.papers.presets import PRESETS

        return tuple(sorted(PRESETS))
    return choices


def _scalar_type(section: str, f: dataclasses.Field):
    import typing

    hint = typing.get_type_hints(_SECTION_CLASSES[section])[f.name]
    args = set(typing.get_args(hint)) or {hint}
    for t in (int, float):
        if t in args:
            return t
    return str


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """Adds ``--config``, ``--set`` and one flag per flagged config field to ``parser``.

    A flag not given leaves no value (``argparse.SUPPRESS``), so the config file's or the
    dataclass default stands."""
    parser.add_argument("--config", default=None, metavar="FILE.toml",
                        help="a run config (tables [data] [text] [model] [train]; a run directory's "
                             "config.toml replays that run); flags and --set override it")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="set one config field (value read as TOML), repeatable; applied last")
    groups = {s: parser.add_argument_group(f"[{s}] config flags") for s in SECTIONS}
    for section in SECTIONS:
        for f in dataclasses.fields(_SECTION_CLASSES[section]):
            meta = f.metadata
            if not meta.get("flag") and not meta.get("negative"):
                continue
            dest = f"{_DEST}{section}__{f.name}"
            help_ = f"{meta.get('help') or ''} [{section}.{f.name}]".strip()
            g = groups[section]
            parse = meta.get("parse")
            choices = _choices_of(f"{section}.{f.name}")
            if meta.get("negative"):  # a bool toggle: FLAG sets True, NEGATIVE sets False
                pair = g.add_mutually_exclusive_group()
                if meta.get("flag"):
                    pair.add_argument(meta["flag"], dest=dest, action="store_const", const=True,
                                      default=argparse.SUPPRESS, help=help_)
                pair.add_argument(meta["negative"], dest=dest, action="store_const", const=False,
                                  default=argparse.SUPPRESS, help=None if meta.get("flag") else help_)
            elif parse == "key_value":
                g.add_argument(meta["flag"], dest=dest, type=key_value, action="append", metavar="KEY=VALUE",
                               default=argparse.SUPPRESS, help=help_)
            elif parse == "optional_const":
                g.add_argument(meta["flag"], dest=dest, nargs="?", const=choices[-1], choices=choices,
                               default=argparse.SUPPRESS, help=help_)
            else:
                kind = _PARSERS.get(parse) or _scalar_type(section, f)
                g.add_argument(meta["flag"], dest=dest, type=kind, choices=choices, default=argparse.SUPPRESS,
                               metavar=None if choices else f.name.upper(), help=help_)


def config_from_flags(args: argparse.Namespace) -> ExperimentConfig:
    """The ``ExperimentConfig`` of parsed flags: defaults < ``--config`` < flags < ``--set``.

    ``--seed`` (``train.seed``) sets ``data.seed`` too (a ``--set data.seed=...`` wins).
    Every field is checked at the end, whichever way it was set (``check_config_dict``):
    the builder parameters of ``model.encoder`` / ``model.loss_params`` are typed for the
    final model and loss (``--encoder-param trainable_embeddings=False`` is ``False``), and
    an error names the field and where its value came from (the file, the flag, ``--set``).
    No TensorFlow is imported.

    Raises:
      ConfigError (a ValueError): a bad config file (missing, a directory, unreadable, not
        TOML) or a value from any source that does not fit its field or parameter (unknown
        field or parameter, wrong type, outside the choices or the range).
    """
    origins: dict = {}
    d = ExperimentConfig().to_dict()
    if getattr(args, "config", None):
        d = read_config_dict(args.config, d, origins)
    for key, value in vars(args).items():
        if not key.startswith(_DEST):
            continue
        section, name = key[len(_DEST):].split("__", 1)
        flag = _FLAGS.get((section, name), f"--{name.replace('_', '-')}")
        if isinstance(value, list):  # KEY=VALUE flags merge over the file's dict
            origins.update({f"{section}.{name}.{k}": flag for k, _ in value})
            value = {**d[section][name], **dict(value)}
        origins[f"{section}.{name}"] = flag
        d[section][name] = value
        if (section, name) == ("train", "seed"):
            d["data"]["seed"] = value
            origins["data.seed"] = flag
    for text in getattr(args, "overrides", []) or []:
        path, value = parse_override(text)
        apply_override(d, path, value, "--set")
        origins[path] = "--set"
        if isinstance(value, dict):  # a whole dict field replaced: its keys are --set's
            origins.update({f"{path}.{k}": "--set" for k in value})
    d = check_builder_params(check_config_dict(d, "config", origins, params=False), "config", origins)
    return ExperimentConfig.from_dict(d)


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
    from grounded_text.config.params import ParamError, check_model_params
    from grounded_text.papers.presets import PRESETS

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
      A new ``ExperimentConfig`` with normalised, typed values.

    Raises:
      ConfigError: see ``check_config_dict`` and ``check_builder_params``.
    """
    d = check_config_dict(config.to_dict(), where, params=False)
    return ExperimentConfig.from_dict(check_builder_params(d, where))


__all__ = ["ConfigError", "add_config_flags", "check_builder_params", "check_config", "config_from_flags", "key_value",
           "bool_or_none", "none_or_int", "positive_int", "nonnegative_int", "positive_float"]
