"""Search-space files (``tuner/*.toml``) → KerasTuner hyperparameters → ``ExperimentConfig``.

A space file is TOML (read with the standard library's ``tomllib``), one file per
paper protocol. Its layout::

    [protocol]                  # what the file reproduces, and the defaults of the run
    name = "vete"
    paper = "Kurach et al. 2017, arXiv:1705.08386, Algorithm 1"
    objective = "avg2016"       # the only objective the trainer reports (STS16 mean Pearson r)
    trials = 100
    seed = 2017                 # random-search seed: the same seed gives the same sets

    [fixed]                     # config fields set for every trial of every model
    "train.select_on" = "avg2016"

    [hp.learning_rate]          # searched for every model of the file
    field = "train.learning_rate"      # "section.field" of ExperimentConfig
    type = "float"                     # float | int | choice | boolean | fixed
    min = 1e-4
    max = 1e-2
    sampling = "log"                   # linear | log | reverse_log
    default = 1e-3                     # the published / default value
    paper = "..."                      # free text: where the range comes from

    [models.vete_bow.fixed]            # per model family: more fixed fields ...
    [models.vete_bow.hp.embedding_dim] # ... and more hyperparameters
    field = "model.embedding_dim"
    type = "choice"
    values = [64, 128, 256, 512]

A file may start with ``extends = "other.toml"`` (a path relative to it): the other
file is read first and this file's tables are merged over it, key by key.

Every ``field`` is checked against the dataclasses of ``grounded_text.config.schema`` when
the file is loaded (unknown section/field, or a value whose type does not fit the
field's annotation → ``SpaceError`` naming the file and the entry), so a space for a
model family whose config fields do not exist yet fails at load time, not mid-search.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import os
import tomllib
import typing
from pathlib import Path

from grounded_text.config.schema import ExperimentConfig, config_fields  # noqa: F401 (config_fields re-exported)
from grounded_text.papers.plans import check_overrides, flags_config, parse_sets
from grounded_text.papers.record import deep_merge

if typing.TYPE_CHECKING:  # annotations only: reading a space file needs no TensorFlow
    import keras_tuner as kt

HP_TYPES = ("float", "int", "choice", "boolean", "fixed")
#: The objectives a search can maximise: the trainer reports avg2016 (STS16 mean Pearson r) only.
OBJECTIVES = ("avg2016",)
#: The keys of a ``[protocol]`` table.
PROTOCOL_KEYS = ("name", "paper", "objective", "trials", "seed")
SAMPLINGS = ("linear", "log", "reverse_log")

#: The search-space folder of a source checkout (also used after ``pip install -e .``,
#: whose package directory is the checkout's). ``$GROUNDED_TEXT_TUNER_DIR`` overrides it.
REPO_TUNER_DIR = Path(__file__).resolve().parents[2] / "tuner"
#: Where a wheel carries the same files (setup.py maps ``tuner/`` to ``grounded_text/tuner``).
PACKAGE_TUNER_DIR = "tuner"


class SpaceError(ValueError):
    """A search-space file or an override does not fit ``ExperimentConfig``."""


def tuner_dir() -> Path:
    """The folder holding the protocol files.

    Returns:
      ``$GROUNDED_TEXT_TUNER_DIR`` when set; else the checkout's ``tuner/`` when this
      package runs from a checkout (source tree or editable install), so edits there take
      effect at once; else the copy installed with the package (a wheel), found through
      ``importlib.resources``. The path may not exist (the callers report it).
    """
    env = os.environ.get("GROUNDED_TEXT_TUNER_DIR")
    if env:
        return Path(env)
    # setup.cfg beside it tells a checkout from a site-packages folder that holds a "tuner".
    if REPO_TUNER_DIR.is_dir() and (REPO_TUNER_DIR.parent / "setup.cfg").is_file():
        return REPO_TUNER_DIR
    packaged = importlib.resources.files("grounded_text") / PACKAGE_TUNER_DIR
    # A wheel unpacks to plain files, so the resource is a real folder on disk.
    return Path(str(packaged))


def resolve_space_file(space: str | Path) -> Path:
    """``space`` is a path to a ``.toml`` file or a protocol name (``"vete"`` → ``tuner/vete.toml``).

    Raises:
      FileNotFoundError: neither exists (the message lists the protocols found).
    """
    p = Path(space)
    if p.suffix == ".toml" and p.is_file():
        return p
    cand = tuner_dir() / f"{space}.toml"
    if cand.is_file():
        return cand
    found = sorted(f.stem for f in tuner_dir().glob("*.toml")) if tuner_dir().is_dir() else []
    raise FileNotFoundError(
        f"Search space {str(space)!r} not found (as a file, or as {str(cand)!r}); protocols in "
        f"{str(tuner_dir())!r}: {found}. Pass --space PATH.toml, or set GROUNDED_TEXT_TUNER_DIR."
    )


def read_space_file(path: str | Path, _seen: tuple = ()) -> dict:
    """Reads a TOML space file, following ``extends``. Returns the merged tables.

    Raises:
      SpaceError: not UTF-8 TOML; ``extends`` is not a string, names no file, or is circular.
    """
    path = Path(path).resolve()
    if path in _seen:
        raise SpaceError(f"{path}: circular 'extends'.")
    with open(path, "rb") as f:
        try:
            doc = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise SpaceError(f"{path}: not valid TOML: {e}") from None
        except UnicodeDecodeError as e:  # TOML is UTF-8 by definition; tomllib raises this, not TOMLDecodeError
            raise SpaceError(f"{path}: not UTF-8 text (byte {e.start}); save the file as UTF-8.") from None
    parent = doc.pop("extends", None)
    if parent is not None:
        if not isinstance(parent, str) or not parent:
            raise SpaceError(f"{path}: extends must be the path of another space file (a string, relative to this "
                             f"file), got {parent!r}.")
        base = path.parent / parent
        if not base.is_file():
            raise SpaceError(f"{path}: extends = {parent!r}: no such file ({base}).")
        doc = deep_merge(read_space_file(base, _seen + (path,)), doc)
    doc.setdefault("_files", [])
    doc["_files"] = doc["_files"] + [str(path)]
    return doc


# ----------------------------------------------------------------------------- config fields


def check_space_field(path: str, value, where: str) -> None:
    """Raises ``SpaceError`` unless ``path`` is a config field and ``value`` fits its type, in
    the one override grammar of ``grounded_text.papers.plans`` (the trainer's
    ``--config``/``--set`` checks; ``model.loss_params.KEY`` and ``model.encoder.KEY`` set one
    entry of a dict field)."""
    check_overrides({path: value}, where, error=SpaceError)


# ----------------------------------------------------------------------------- the space


@dataclasses.dataclass
class HParam:
    """One searched hyperparameter: KerasTuner name, config field, distribution."""

    name: str
    field: str
    type: str
    min: float | int | None = None
    max: float | int | None = None
    step: float | int | None = None
    sampling: str = "linear"
    values: list | None = None
    default: object = None
    ablation_values: list | None = None
    paper: str = ""

    def candidates(self) -> list:
        """The values an ablation (Algorithm 2) fixes this hyperparameter at."""
        if self.ablation_values is not None:
            return list(self.ablation_values)
        if self.type == "choice":
            return list(self.values)
        if self.type == "boolean":
            return [False, True]
        if self.type == "fixed":
            return [self.default]
        if self.type == "int":
            step = self.step or 1
            vals = list(range(int(self.min), int(self.max) + 1, int(step)))
            if self.sampling == "linear" and len(vals) <= 20:
                return vals
        raise SpaceError(
            f"hyperparameter {self.name!r} ({self.type}, {self.min}..{self.max}) has no finite value list: "
            f"give 'ablation_values = [...]' in its table to ablate it."
        )

    def declare(self, hp: kt.HyperParameters, fixed=dataclasses.MISSING):
        """Registers the hyperparameter on ``hp`` (as ``hp.Fixed`` when ``fixed`` is given) → its value."""
        if fixed is not dataclasses.MISSING:
            return hp.Fixed(self.name, fixed)
        if self.type == "float":
            return hp.Float(self.name, float(self.min), float(self.max), step=self.step,
                            sampling=self.sampling, default=self.default)
        if self.type == "int":
            return hp.Int(self.name, int(self.min), int(self.max), step=self.step,
                          sampling=self.sampling, default=self.default)
        if self.type == "choice":
            return hp.Choice(self.name, list(self.values), default=self.default)
        if self.type == "boolean":
            return hp.Boolean(self.name, default=bool(self.default))
        return hp.Fixed(self.name, self.default)


def _is_number(value, integer: bool = False) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (not integer and isinstance(value, float))


def _check_hp_types(table: dict, where: str) -> None:
    """The value types of an ``[hp.NAME]`` table's keys, checked before any is compared.

    Raises:
      SpaceError: naming the key, what it must be and the value found.
    """
    integer = table.get("type") == "int"
    rules = {"field": ("a string", lambda v: isinstance(v, str)),
             "type": (f"one of {list(HP_TYPES)}", lambda v: isinstance(v, str)),
             "sampling": (f"one of {list(SAMPLINGS)}", lambda v: isinstance(v, str)),
             "paper": ("a string", lambda v: isinstance(v, str)),
             "values": ("a list", lambda v: isinstance(v, list)),
             "ablation_values": ("a list", lambda v: isinstance(v, list))}
    number = "an integer" if integer else "a number"
    for key in ("min", "max", "step"):
        rules[key] = (number, lambda v: _is_number(v, integer))
    if table.get("type") in ("float", "int"):
        rules["default"] = (number, lambda v: _is_number(v, integer))
    for key, (what, ok) in rules.items():
        if key in table and not ok(table[key]):
            raise SpaceError(f"{where}: {key} must be {what}, got {table[key]!r}.")


def _parse_hp(name: str, table: dict, where: str) -> HParam:
    where = f"{where} [hp.{name}]"
    if not isinstance(table, dict):
        raise SpaceError(f"{where}: must be a table ([hp.{name}] with field, type, ...), got {table!r}.")
    known = {f.name for f in dataclasses.fields(HParam)} - {"name"}
    extra = set(table) - known
    if extra:
        raise SpaceError(f"{where}: unknown keys {sorted(extra)}; allowed: {sorted(known)}.")
    if "field" not in table or "type" not in table:
        raise SpaceError(f"{where}: needs 'field' and 'type'.")
    _check_hp_types(table, where)
    h = HParam(name=name, **table)
    if h.type not in HP_TYPES:
        raise SpaceError(f"{where}: type {h.type!r} not one of {HP_TYPES}.")
    if h.sampling not in SAMPLINGS:
        raise SpaceError(f"{where}: sampling {h.sampling!r} not one of {SAMPLINGS}.")
    if h.type in ("float", "int"):
        if h.min is None or h.max is None or not h.min < h.max:
            raise SpaceError(f"{where}: {h.type} needs min < max, got {h.min}..{h.max}.")
        if h.sampling != "linear" and h.min <= 0:
            raise SpaceError(f"{where}: {h.sampling} sampling needs min > 0.")
        samples = [h.min, h.max] + ([h.default] if h.default is not None else [])
        if h.type == "int":
            samples = [int(v) for v in samples]
        if h.default is not None and not h.min <= h.default <= h.max:
            raise SpaceError(f"{where}: default {h.default} outside {h.min}..{h.max}.")
    elif h.type == "choice":
        if not h.values:
            raise SpaceError(f"{where}: choice needs a non-empty 'values' list.")
        if h.default is not None and h.default not in h.values:
            raise SpaceError(f"{where}: default {h.default!r} not in values {h.values}.")
        samples = list(h.values)
    elif h.type == "boolean":
        samples = [False, True]
    else:
        if h.default is None:
            raise SpaceError(f"{where}: fixed needs 'default' (the value).")
        samples = [h.default]
    for v in samples + list(h.ablation_values or []):
        check_space_field(h.field, v, where)
    return h


@dataclasses.dataclass
class SearchSpace:
    """A protocol for one model family: fixed config fields + hyperparameters, in file order."""

    protocol: dict
    model: str
    fixed: dict
    hparams: list[HParam]
    files: list[str]

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hparams]

    def get(self, name: str) -> HParam:
        for h in self.hparams:
            if h.name == name:
                return h
        raise SpaceError(f"No hyperparameter {name!r} in the space; have {self.names}.")

    def with_overrides(self, overrides: dict) -> "SearchSpace":
        """``{"section.field" or hp name: value}`` → a space where those are fixed.

        A searched field becomes ``hp.Fixed`` at the same place in the space, so the
        random draws of the other hyperparameters stay those of the same seed.
        """
        fixed = dict(self.fixed)
        hps = list(self.hparams)
        by_field = {h.field: i for i, h in enumerate(hps)}
        by_name = {h.name: i for i, h in enumerate(hps)}
        for key, value in overrides.items():
            idx = by_name.get(key, by_field.get(key))
            if idx is not None:
                h = hps[idx]
                check_space_field(h.field, value, f"override {key}={value!r}")
                hps[idx] = dataclasses.replace(h, type="fixed", default=value, values=None, min=None, max=None)
            else:
                check_space_field(key, value, f"override {key}={value!r}")
                fixed[key] = value
        return dataclasses.replace(self, fixed=fixed, hparams=hps)

    def declare(self, hp: kt.HyperParameters) -> dict:
        """Registers all hyperparameters on ``hp`` → ``{name: value}``."""
        return {h.name: h.declare(hp) for h in self.hparams}

    def overrides(self, values: dict) -> dict:
        """Hyperparameter values → the trial's overrides (``{"section.field": value}``): the
        fixed fields, then the searched ones."""
        return {**self.fixed, **{h.field: values[h.name] for h in self.hparams}}

    def to_config(self, values: dict) -> ExperimentConfig:
        """Hyperparameter values → the trainer's (unresolved) ``ExperimentConfig``: the trial
        as a plan of ``self.model`` on the trainer's flags
        (``grounded_text.papers.plans.flags_config``; defaults elsewhere).

        Raises:
          SpaceError: a value that does not fit its field.
        """
        try:
            return flags_config(self.model, self.overrides(values), f"{self.model} trial")
        except ValueError as e:
            raise SpaceError(str(e)) from None


def check_protocol(protocol: dict, where: str) -> None:
    """Checks a ``[protocol]`` table: known keys only, an ``objective`` the tuner can
    maximise (``OBJECTIVES``), ``trials`` >= 1 and ``seed`` >= 0 integers.

    Raises:
      SpaceError: naming the file, the key and what is allowed (an objective the trainer does
        not report, such as ``"accuracy"``, would otherwise be ignored: the search would
        maximise avg2016 while the file says otherwise).
    """
    extra = sorted(set(protocol) - set(PROTOCOL_KEYS))
    if extra:
        raise SpaceError(f"{where} [protocol]: unknown keys {extra}; allowed: {list(PROTOCOL_KEYS)}.")
    objective = protocol.get("objective", OBJECTIVES[0])
    if objective not in OBJECTIVES:
        raise SpaceError(f"{where} [protocol]: objective {objective!r} is not one the tuner can maximise; "
                         f"choose from {list(OBJECTIVES)} (the STS16 mean Pearson r the trainer reports).")
    for key, low in (("trials", 1), ("seed", 0)):
        value = protocol.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise SpaceError(f"{where} [protocol]: {key} must be an integer >= {low}, got {value!r}.")


def load_space(space: str | Path, model: str) -> SearchSpace:
    """Loads protocol file ``space`` (name or path) for model family ``model``.

    Raises:
      FileNotFoundError: no such file.
      SpaceError: bad file (``read_space_file``), a table that is not a table, a key of an
        ``[hp.NAME]`` table of the wrong type (``min = "a"``), unknown field, an unknown
        ``[protocol]`` key or objective (``check_protocol``), or ``model`` has no
        ``[models.<model>]`` table.
    """
    path = resolve_space_file(space)
    doc = read_space_file(path)
    where = str(path)
    for table, value in (("protocol", doc.get("protocol", {})), ("fixed", doc.get("fixed", {})),
                         ("hp", doc.get("hp", {})), ("models", doc.get("models", {}))):
        if not isinstance(value, dict):
            raise SpaceError(f"{where}: {table} must be a table ([{table}]), got {value!r}.")
    models = doc.get("models", {})
    if model in models and not (isinstance(models[model], dict)
                                and all(isinstance(models[model].get(k, {}), dict) for k in ("fixed", "hp"))):
        raise SpaceError(f"{where}: [models.{model}] must be a table holding the tables fixed and hp.")
    if model not in models:
        raise SpaceError(f"{where}: no [models.{model}] table; this protocol covers {sorted(models)}.")
    unknown = set(doc) - {"protocol", "fixed", "hp", "models", "_files"}
    if unknown:
        raise SpaceError(f"{where}: unknown top-level tables {sorted(unknown)}.")
    protocol = dict(doc.get("protocol", {}))
    check_protocol(protocol, where)
    fixed = dict(doc.get("fixed", {}))
    fixed.update(models[model].get("fixed", {}))
    for k, v in fixed.items():
        check_space_field(k, v, f"{where} [fixed]")
    if "model.name" in fixed and fixed["model.name"] != model:
        raise SpaceError(f"{where}: [models.{model}.fixed] sets model.name={fixed['model.name']!r}.")
    tables = dict(doc.get("hp", {}))
    tables.update(models[model].get("hp", {}))
    hps = [_parse_hp(n, t, where) for n, t in tables.items()]
    fields = [h.field for h in hps]
    dup = {f for f in fields if fields.count(f) > 1} | (set(fields) & set(fixed))
    if dup:
        raise SpaceError(f"{where}: fields set twice (searched and/or fixed): {sorted(dup)}.")
    return SearchSpace(protocol=protocol, model=model, fixed=fixed, hparams=hps,
                       files=doc["_files"])


def validate_all(folder: str | Path | None = None) -> dict[str, list[str]]:
    """Loads every model table of every ``*.toml`` in ``folder`` → ``{file: [models]}`` (raises on error)."""
    folder = Path(folder) if folder else tuner_dir()
    out = {}
    for f in sorted(folder.glob("*.toml")):
        models = sorted(read_space_file(f).get("models", {}))
        for m in models:
            load_space(f, m)
        out[f.name] = models
    return out


def parse_space_override(text: str) -> tuple[str, object]:
    """``"train.epochs=3"`` → ``("train.epochs", 3)`` (the one override grammar,
    ``grounded_text.papers.plans.parse_sets``).

    Raises:
      SpaceError: no ``=`` in ``text``.
    """
    ((key, value),) = parse_sets([text], error=SpaceError).items()
    return key, value
