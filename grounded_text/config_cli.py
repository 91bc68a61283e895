"""Command-line flags generated from the config dataclasses (``grounded_text.config``).

Every ``ExperimentConfig`` field whose ``metadata`` names a ``flag`` becomes that flag;
the value readers below check the text, and ``config_from_flags`` lays the values given
over ``--config FILE.toml`` and under ``--set section.key=value``. Precedence, lowest
first: the dataclass defaults (``None`` = the preset's choice), the config file, the
flags, ``--set``. No TensorFlow is imported here.
"""

from __future__ import annotations

import argparse
import dataclasses

from grounded_text.config import (SECTIONS, ConfigError, ExperimentConfig, _SECTION_CLASSES, apply_override,
                                  parse_override, read_config_file)
from grounded_text.config import _choices_of as _field_choices

_DEST = "cfg__"  # argparse dest prefix of a generated flag: cfg__<section>__<field>


def key_value(s: str):
    """``key=value`` → (key, value), the value read as ``--set`` reads it
    (``grounded_text.config.parse_override``: a TOML value, else a string)."""
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


def none_or_int(s: str):
    """``none`` or ``0`` → None (no limit); else an integer >= 1."""
    if s.lower() in ("none", "0"):
        return None
    return positive_int(s)


def positive_int(s: str) -> int:
    """An int >= 1 (0 epochs or steps would build everything and train nothing)."""
    try:
        value = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {s!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


_PARSERS = {"none_or_int": none_or_int, "positive_int": positive_int, "bool_or_none": bool_or_none,
            "key_value": key_value}


def _choices_of(path: str):
    """A field's closed set of values; ``model.name``'s are the preset records' names."""
    choices = _field_choices(path)
    if choices == "presets":
        from grounded_text.presets import PRESETS

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

    Raises:
      ConfigError (a ValueError): a bad config file or ``--set`` entry (unknown field,
        value of the wrong type or outside the field's choices).
    """
    base = read_config_file(args.config) if getattr(args, "config", None) else ExperimentConfig()
    d = base.to_dict()
    for key, value in vars(args).items():
        if not key.startswith(_DEST):
            continue
        section, name = key[len(_DEST):].split("__", 1)
        if isinstance(value, list):  # KEY=VALUE flags merge over the file's dict
            value = {**d[section][name], **dict(value)}
        d[section][name] = value
        if (section, name) == ("train", "seed"):
            d["data"]["seed"] = value
    for text in getattr(args, "overrides", []) or []:
        path, value = parse_override(text)
        apply_override(d, path, value, "--set")
    names = _choices_of("model.name")
    if d["model"]["name"] not in names:
        raise ConfigError(f"model.name = {d['model']['name']!r} is not one of {list(names)}.")
    return ExperimentConfig.from_dict(d)


__all__ = ["ConfigError", "add_config_flags", "config_from_flags", "key_value", "bool_or_none", "none_or_int",
           "positive_int"]
