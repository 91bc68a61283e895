"""Experiment plans as data: a run is a preset name and overrides in the one override grammar.

The grammar is the trainer's (``python -m grounded_text.train --set`` and the config TOML
files): ``{"section.field": value}``, with ``"model.encoder.KEY"`` and
``"model.loss_params.KEY"`` setting one entry of a dict field (``grounded_text.config.schema``).
Text such as ``"train.epochs=3"`` is read by ``parse_sets`` (``config.parse_override``).

A run's resolved config (``RunPlan.config``) starts from one of two bases:

* ``"record"``: the preset record as the paper trains it (every field of the record),
  the overrides deep-merged over it (``grounded_text.models.registry.preset_config``);
  what ``python -m grounded_text.reproduce`` trains.
* ``"flags"``: the config dataclasses' defaults with ``model.name = preset`` and the
  overrides applied, the fields left unset filled from the record
  (``grounded_text.models.registry.resolve_config``); what ``train --model PRESET --set
  ...`` trains, and what the ablation studies and the tuner's trials are.

Nothing here imports TensorFlow until a config is resolved.
"""

from __future__ import annotations

import copy
import dataclasses

from grounded_text.config.schema import ConfigError, ExperimentConfig, apply_override, check_field, config_fields
from grounded_text.config.schema import parse_override as _parse_override
from grounded_text.papers.resolve import preset_config, resolve_config

BASES = ("record", "flags")


def parse_sets(texts, error: type[Exception] = ConfigError) -> dict:
    """``["train.epochs=3", ...]`` → ``{"train.epochs": 3, ...}`` (values read as TOML, else text).

    Raises:
      ``error``: an item without ``=``.
    """
    return dict(_parse_override(t, error=error) for t in texts)


def check_overrides(overrides: dict, where: str, error: type[Exception] = ConfigError) -> None:
    """Checks every key of ``overrides`` against ``ExperimentConfig`` (and its value's type).

    Raises:
      ``error``: an unknown field, a value that does not fit, or a key with more than one dot
        under a field that is no dict (``model.encoder.KEY`` and ``model.loss_params.KEY`` are).
    """
    fields = config_fields()
    for key, value in overrides.items():
        parts = key.split(".")
        if len(parts) == 3 and dict in fields.get(f"{parts[0]}.{parts[1]}", ()):
            continue
        check_field(key, value, where, error=error)


def nest(overrides: dict) -> dict:
    """``{"model.loss_params.k": 5}`` → ``{"model": {"loss_params": {"k": 5}}}`` (a copy)."""
    out: dict = {}
    for key, value in overrides.items():
        node = out
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        if isinstance(value, dict) and isinstance(node.get(last), dict):
            node[last] = {**node[last], **copy.deepcopy(value)}
        else:
            node[last] = copy.deepcopy(value)
    return out


def merge_overrides(*layers: dict) -> dict:
    """Later layers win key by key; a dict value (``model.encoder``) merges with an earlier one."""
    out: dict = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = {**out[key], **copy.deepcopy(value)}
            else:
                out[key] = copy.deepcopy(value)
    return out


def flags_config(preset: str, overrides: dict | None = None, where: str = "overrides") -> ExperimentConfig:
    """The unresolved config of base ``"flags"``: dataclass defaults, ``model.name = preset``,
    then ``overrides`` (as ``train --set`` applies them; a ``model.name`` among them wins).

    Raises:
      ConfigError: a key that is no config field, or a value that does not fit.
    """
    d = ExperimentConfig().to_dict()
    if preset is not None:
        d["model"]["name"] = preset
    for key, value in (overrides or {}).items():
        apply_override(d, key, copy.deepcopy(value), where)
    return ExperimentConfig.from_dict(d)


def resolve(preset: str, overrides: dict | None = None, base: str = "record") -> ExperimentConfig:
    """The resolved ``ExperimentConfig`` of ``preset`` with ``overrides`` (dotted keys) on ``base``.

    Raises:
      ValueError: unknown base or preset, an override that is no config field (``ConfigError``),
        ``model.name`` among a record's overrides, and ``resolve_config``'s checks.
    """
    overrides = overrides or {}
    if base == "record":
        check_overrides(overrides, f"overrides of record {preset!r}")
        return preset_config(preset, nest(overrides))
    if base == "flags":
        return resolve_config(flags_config(preset, overrides, f"overrides of {preset!r}"))
    raise ValueError(f"unknown base {base!r}; choose one of {BASES}")


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """One run of an experiment.

    Attributes:
      name: the run's folder name and its key in tables and ``--only``.
      preset: a record of ``grounded_text.papers.presets.PRESETS``.
      overrides: ``{"section.field": value}`` (the one override grammar).
      base: ``"record"`` or ``"flags"`` (module docstring).
    """

    name: str
    preset: str
    overrides: dict = dataclasses.field(default_factory=dict)
    base: str = "record"

    def config(self) -> ExperimentConfig:
        """The resolved config (``resolve``); raises as ``resolve`` does."""
        return resolve(self.preset, self.overrides, self.base)

    def with_overrides(self, *layers: dict) -> "RunPlan":
        """The same run with ``layers`` merged over its overrides."""
        return dataclasses.replace(self, overrides=merge_overrides(self.overrides, *layers))
