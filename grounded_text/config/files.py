"""Config files: the TOML form of an ``ExperimentConfig``.

``read_config_file`` reads a ``--config FILE.toml`` (tables ``[data]``, ``[text]``, ``[model]``,
``[train]`` and a top-level ``unset`` list), checking every field as its flag would
(``grounded_text.config.schema.check_field``); ``config_toml`` writes the TOML text that a run
directory's ``config.toml`` holds and that reads back to an equal config. Imports no TensorFlow.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import tomli_w

from grounded_text.config.schema import (
    SECTIONS,
    ConfigError,
    ExperimentConfig,
    apply_override,
    check_config_dict,
    is_dict_field,
)

#: Top-level key of a config file listing the fields set to ``None`` (TOML has no null).
UNSET_KEY = "unset"

#: Fields whose ``None`` meant a value before ``None`` became "the preset's choice" for them:
#: a resolved config stored earlier (a run's ``config.toml`` under ``unset``, its
#: ``metrics.json`` and ``run_state.json`` as null) holds ``None`` where it ran with that value,
#: and reads as that value, so the run replays, resumes and compares as it ran.
STORED_NONE_MEANT = {"train.clip_norm_text": 0.0, "train.clip_norm_image": 0.0}


def read_config_dict(path: str | Path, base: dict | None = None, origins: dict | None = None) -> dict:
    """The config dict (``ExperimentConfig.to_dict()`` form) of TOML file ``path`` over
    ``base`` (default: the dataclass defaults); each field is checked (``check_field``),
    the builder parameters are not yet typed (``check_config_dict`` does it, once the
    model is known). ``origins``, if given, gets ``"section.field"`` / ``"model.encoder.key"``
    → ``str(path)`` for every entry the file sets.

    Raises:
      ConfigError: see ``read_config_file``.
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
        doc = tomllib.loads(text)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file.") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file (give its config.toml).") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config file: {e.strerror or e}.") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not a UTF-8 TOML file: {e}") from None
    d = base if base is not None else ExperimentConfig().to_dict()
    d = {s: dict(d[s]) for s in SECTIONS}
    origins = {} if origins is None else origins
    unset = doc.pop(UNSET_KEY, [])
    unknown = set(doc) - set(SECTIONS)
    if unknown:
        raise ConfigError(f"{path}: unknown tables {sorted(unknown)}; a config file has {list(SECTIONS)} "
                          f"and {UNSET_KEY!r}.")
    for section, table in doc.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: {section!r} must be a table ([{section}]).")
        for name, value in table.items():
            apply_override(d, f"{section}.{name}", value, str(path))
            origins[f"{section}.{name}"] = str(path)
            if isinstance(value, dict) and is_dict_field(f"{section}.{name}"):
                origins.update({f"{section}.{name}.{k}": str(path) for k in value})
    if not isinstance(unset, list):
        raise ConfigError(f"{path}: {UNSET_KEY!r} must be a list of \"section.field\" names.")
    for name in unset:
        apply_override(d, str(name), STORED_NONE_MEANT.get(str(name)), f"{path} ({UNSET_KEY})")
        origins[str(name)] = f"{path} ({UNSET_KEY})"
    return d


def read_config_file(path: str | Path, base: ExperimentConfig | None = None) -> ExperimentConfig:
    """Reads a TOML config file over ``base`` (default: the dataclass defaults).

    Layout: tables ``[data]``, ``[text]``, ``[model]`` (with ``[model.loss_params]`` and
    ``[model.encoder]``) and ``[train]`` holding ``ExperimentConfig`` fields, and an
    optional top-level ``unset = ["section.field", "model.encoder.key", ...]`` of the
    fields (or dict entries) set to ``None`` (those of ``STORED_NONE_MEANT`` read as the value
    that ``None`` meant when the file was written: ``0``, no clipping, for the clip norms).
    A field not in the file keeps its value in ``base``. The builder parameters of
    ``[model.encoder]`` and ``[model.loss_params]`` are typed by name
    (``check_config_dict``): ``trainable_embeddings = "false"`` reads as ``False``.

    Raises:
      ConfigError: file missing, a directory, unreadable or not UTF-8 TOML, unknown table
        or field, a value that does not fit its field, or a parameter that no builder (loss)
        takes or of the wrong type (the message names the file and the entry).
    """
    origins: dict = {}
    d = read_config_dict(path, (base or ExperimentConfig()).to_dict(), origins)
    return ExperimentConfig.from_dict(check_config_dict(d, str(path), origins))


def config_toml(config: ExperimentConfig) -> str:
    """The TOML text of ``config`` that ``read_config_file`` reads back to an equal config
    (``None`` fields are listed under ``unset``, but those of ``STORED_NONE_MEANT``, which are
    left out: their default is ``None`` and an ``unset`` entry reads as the value older files
    meant); booleans, ints and floats stay typed."""
    d = config.to_dict()
    unset, body = [], {}
    for s in SECTIONS:
        body[s] = {}
        for k, v in d[s].items():
            if v is None and f"{s}.{k}" in STORED_NONE_MEANT:
                continue
            if v is None:
                unset.append(f"{s}.{k}")
            elif isinstance(v, dict):  # a dict field's None entries go to ``unset`` as section.field.key
                unset += [f"{s}.{k}.{key}" for key, x in v.items() if x is None]
                body[s][k] = {key: list(x) if isinstance(x, tuple) else x for key, x in v.items() if x is not None}
            else:
                body[s][k] = v
    return tomli_w.dumps({UNSET_KEY: unset, **body})
