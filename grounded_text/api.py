"""The Python API: load an encoder and encode, train a preset, evaluate, list presets.

In the conventions of sentence-transformers (``encode`` takes a ``str`` or a list). A *preset*
is a training configuration, one paper's recipe without weights (``presets()``, ``train``); the
trained models that load by name are ``models()`` (``load``), unlike keras-hub, whose presets
carry weights::

    import grounded_text as gt

    enc = gt.load("vete_bow_flickr8k")               # a shipped model: [m["name"] for m in gt.models()]
    enc = gt.load("runs/vete_bow/export")            # any TF Hub text SavedModel
    enc.encode("a dog runs").shape                   # (N,)
    enc.encode(["a dog runs", "a cat"]).shape        # (2, N)
    enc.encode_images(["dog.jpg"]).shape             # (1, N): photos into the same space
    gt.ImageIndex("photos", enc).search("a dog runs on the grass", top_k=5)   # [(path, cosine)]

    run = gt.train("vete_bow", data_dir="data", output_dir="runs/vete_bow", epochs=1)
    report = gt.evaluate(run.export_dir, data_dir="data")
    [p["name"] for p in gt.presets()]

TensorFlow is imported on first use (``load``, ``train``, ``evaluate``), not by
``import grounded_text`` nor by ``presets()`` or ``models()``. ``load``, ``TextEncoder`` and
``ImageIndex`` are the names of their own modules (``grounded_text.serving.loader``,
``grounded_text.serving.encoder``, ``grounded_text.photos.index``), which the package's
namespace opens on first use; this module holds the rest.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["models", "Run", "train", "evaluate", "presets"]


# ----------------------------------------------------------------------------- train


@dataclasses.dataclass
class Run:
    """What ``train`` returns: the run directory's figures and where its exports are.

    Attributes:
      output_dir: the run directory (absolute).
      export_dir: the text tower (``load`` it); ``image_export_dir``: the image tower.
      spaces: space name → its export folder (models with several sentence spaces).
      best_epoch: the selected epoch (1-based); ``history``: Keras metric name → one
        float per epoch; ``metrics``: the whole ``metrics.json`` (its ``evaluation`` holds
        the STS report when evaluated); ``config``: the resolved config as a dict.

    Example:
      >>> run = train("vete_bow", data_dir="data", output_dir="runs/vete_bow", epochs=1)  # doctest: +SKIP
      >>> run.best_epoch, run.export_dir.name  # doctest: +SKIP
      (1, 'export')

      A finished run directory's ``metrics.json`` gives the same record:

      >>> metrics = {"export_dir": "runs/vete_bow/export", "selection": {"best_epoch": 3}, "config": {},
      ...            "evaluation": {"headline": {"STS16 mean pearson (avg2016)": 0.61}}}
      >>> run = Run.from_metrics("runs/vete_bow", metrics)
      >>> run.best_epoch, run.export_dir.name, run.image_export_dir, run.headline
      (3, 'export', None, {'STS16 mean pearson (avg2016)': 0.61})
    """

    output_dir: Path
    export_dir: Path
    image_export_dir: Path | None
    spaces: dict
    best_epoch: int
    history: dict
    metrics: dict
    config: dict

    @property
    def headline(self) -> dict | None:
        """The STS headline figures (Pearson r means), or ``None`` when not evaluated."""
        return self.metrics.get("evaluation", {}).get("headline")

    @classmethod
    def from_metrics(cls, output_dir: str | os.PathLike, metrics: dict) -> Run:
        image = metrics.get("image_export_dir")
        return cls(output_dir=Path(output_dir).resolve(), export_dir=Path(metrics["export_dir"]),
                   image_export_dir=Path(image) if image else None, spaces=dict(metrics.get("spaces", {})),
                   best_epoch=int(metrics["selection"]["best_epoch"]), history=dict(metrics.get("history", {})),
                   metrics=metrics, config=metrics["config"])


def _field_paths() -> dict[str, list[str]]:
    from grounded_text.config.schema import config_fields

    by_name: dict[str, list[str]] = {}
    for path in config_fields():
        by_name.setdefault(path.split(".", 1)[1], []).append(path)
    return by_name


def _config(model_or_config, overrides: dict):
    """An ``ExperimentConfig`` from a preset name, a config, a dict or a TOML path, with
    ``overrides`` (``epochs=1`` or ``{"train.epochs": 1}``) applied; fields left ``None``
    are the preset's choice."""
    from grounded_text.config.files import read_config_file
    from grounded_text.config.schema import ConfigError, ExperimentConfig, apply_override

    if isinstance(model_or_config, ExperimentConfig):
        d = model_or_config.to_dict()
    elif isinstance(model_or_config, dict):
        d = ExperimentConfig.from_dict(model_or_config).to_dict()
    elif isinstance(model_or_config, (str, os.PathLike)) and str(model_or_config).endswith(".toml"):
        d = read_config_file(model_or_config).to_dict()
    elif isinstance(model_or_config, str):
        from grounded_text.papers.presets import get_preset

        get_preset(model_or_config)  # ValueError listing the presets
        d = ExperimentConfig().to_dict()
        d["model"]["name"] = model_or_config
    else:
        raise TypeError(f"train: a preset name, an ExperimentConfig, a dict or a .toml path is expected, got "
                        f"{type(model_or_config).__name__}.")
    paths = _field_paths()
    for key, value in overrides.items():
        if "." in key:
            path = key
        elif len(paths.get(key, [])) == 1:
            path = paths[key][0]
        elif key in paths:
            raise ConfigError(f"train: {key!r} is ambiguous; name it as one of {paths[key]} "
                              f"(e.g. **{{{paths[key][0]!r}: ...}}).")
        else:
            raise ConfigError(f"train: {key!r} is not a config field; known fields: {sorted(paths)}.")
        apply_override(d, path, value, "train()")
    return ExperimentConfig.from_dict(d)


def train(model_or_config, *, output_dir: str | os.PathLike, data_dir: str | os.PathLike | None = None,
          callbacks: Sequence = (), verbose: int | str = "auto", evaluate: bool = True, resume: bool = False,
          overwrite: bool = False, **overrides) -> Run:
    """Trains a model, exports its text (and image) tower and scores it on STS.

    The same path as ``python -m grounded_text.train`` (one trainer): the preset's
    loss, sampler and schedule unless overridden, model selection on STS16 or dev.

    Args:
      model_or_config: a preset name (see ``presets()``), an ``ExperimentConfig``, its dict
        form, or a ``config.toml`` path (a run's ``config.toml`` replays it).
      output_dir: the run directory (created; a directory holding a run is refused unless
        ``resume`` or ``overwrite``).
      data_dir: the data root (default ``$GROUNDED_TEXT_DATA``).
      callbacks: Keras callbacks, passed to ``fit`` after the trainer's own.
      verbose: Keras ``fit`` verbosity; ``0`` prints nothing (figures go to ``logging``).
      evaluate: score the export on the STS sets under ``data_dir/sts``.
      resume, overwrite: continue an interrupted run / replace the run in ``output_dir``.
      **overrides: config fields, by name when unique (``epochs=1``,
        ``max_train_images=300``) or dotted (``**{"train.seed": 1}``).

    Returns:
      A ``Run``.

    Every argument is checked, and the data and the model are built, before ``output_dir`` is
    touched: with ``overwrite=True``, a bad argument never costs the run already there.

    Raises:
      TypeError: ``callbacks`` is not a list of ``keras.callbacks.Callback`` (the message
        names the entry), ``output_dir``/``data_dir`` is not a path, ``evaluate``/``resume``/
        ``overwrite`` is not a bool.
      ValueError (``grounded_text.config.schema.ConfigError`` and the trainer's errors): an unknown
        preset or field, a value that does not fit, a bad combination, a ``verbose`` Keras does
        not know, bad data (constant image features, an empty split), an ``output_dir`` that is,
        holds or lies inside the data folder, or a run directory that holds a run.
      grounded_text.training.run_errors.TrainingDiverged: the loss diverged or collapsed.

    Example:
      >>> import grounded_text as gt
      >>> run = gt.train("vete_bow", data_dir="data", output_dir="runs/vete_bow", epochs=1,  # doctest: +SKIP
      ...                max_train_images=300)
      >>> run.best_epoch  # doctest: +SKIP
      1
      >>> list(run.headline)  # doctest: +SKIP
      ['STS12/MSRvid pearson', 'STS16 mean pearson (avg2016)', 'STS-B test pearson', 'SICK test pearson']
      >>> gt.load(run.export_dir).encode(["a dog runs"]).shape[0]  # doctest: +SKIP
      1

      A misspelt field is refused before anything is written:

      >>> gt.train("vete_bow", output_dir="runs/vete_bow", epoch=1)
      Traceback (most recent call last):
        ...
      grounded_text.config.schema.ConfigError: train: 'epoch' is not a config field; known fields: [...].
    """
    from grounded_text.papers.resolve import resolve_config
    from grounded_text.training.arguments import check_callbacks, check_verbose
    from grounded_text.training.trainer import train as run_trainer

    # Every argument is checked before the config is resolved and long before the run
    # directory is touched (the trainer checks again, for its other callers).
    _check_path("output_dir", output_dir)
    if data_dir is not None:
        _check_path("data_dir", data_dir)
    for name, value in (("evaluate", evaluate), ("resume", resume), ("overwrite", overwrite)):
        if not isinstance(value, bool):
            raise TypeError(f"train: {name} must be True or False, got {value!r}.")
    callbacks = check_callbacks(callbacks)
    check_verbose(verbose)
    config = resolve_config(_config(model_or_config, overrides))
    metrics = run_trainer(config, data_dir, output_dir, evaluate=evaluate, verbose=verbose, resume=resume,
                          overwrite=overwrite, callbacks=callbacks)
    return Run.from_metrics(output_dir, metrics)


def _check_path(name: str, value) -> None:
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise TypeError(f"train: {name} must be a non-empty path (str or os.PathLike), got {value!r}.")


# ----------------------------------------------------------------------------- evaluate

EVALUATE_SECTIONS = ("sts", "supervised", "transfer")


def evaluate(encoder_or_path, *, data_dir: str | os.PathLike | None = None, sections: Sequence[str] = ("sts",),
             years: Sequence[str] | None = None, batch_size: int = 512) -> dict:
    r"""Scores a text encoder: the figures of ``python -m grounded_text.evaluate --json``.

    Args:
      encoder_or_path: a ``TextEncoder``, a SavedModel path, or any callable mapping a list
        of str to float [B, N].
      data_dir: the data root (default ``$GROUNDED_TEXT_DATA``); STS sets are read from
        ``data_dir/sts``, SentEval tasks from ``data_dir/senteval``.
      sections: any of ``"sts"`` (cosine, unsupervised: Pearson r and Spearman ρ per
        subset, year means), ``"supervised"`` (STS-B and SICK-R regressors on the frozen
        embeddings) and ``"transfer"`` (SentEval classification accuracy %).
      years: STS years to score, a list (``["STS12", "STS16"]``) or one ``str``
        (``"STS16"``); default: every year folder found.
      batch_size: sentences per call when a path or ``TextEncoder`` is given.

    Returns:
      The CLI's report: ``{"model", "sts", "headline", "sts_seconds"}`` for ``"sts"``,
      ``"supervised_sts"`` and ``"transfer"`` keys when asked.

    Raises:
      ValueError: an unknown section, no data root, an empty ``years``, or a year with no
        ``STSxx-en-test`` folder (the message lists the years found), as the CLI refuses them;
      FileNotFoundError: a missing folder.
      MissingExtraError (an ImportError): ``"supervised"`` or ``"transfer"`` without
        scikit-learn (the ``eval`` extra), raised before anything is loaded or scored.

    Example:
      >>> import grounded_text as gt
      >>> report = gt.evaluate("runs/vete_bow/export", data_dir="data")  # doctest: +SKIP
      >>> list(report["headline"])  # doctest: +SKIP
      ['STS12/MSRvid pearson', 'STS16 mean pearson (avg2016)', 'STS-B test pearson', 'SICK test pearson']

      Any callable list[str] → float [n, N] is an encoder; here a tiny STS folder:

      >>> import tempfile
      >>> import numpy as np
      >>> tmp = tempfile.TemporaryDirectory()
      >>> year = Path(tmp.name) / "sts" / "STS16-en-test"
      >>> year.mkdir(parents=True)
      >>> _ = (year / "STS2016.input.toy.txt").write_text("a dog\tthe dog\na cat\ta dog\na dog\ta cat dog\n")
      >>> _ = (year / "STS2016.gs.toy.txt").write_text("5\n1\n3\n")
      >>> def counts(sentences):
      ...     return np.array([[s.count("dog"), s.count("cat"), 1.0] for s in sentences])
      >>> report = gt.evaluate(counts, data_dir=tmp.name)
      >>> report["model"], round(report["headline"]["STS16 mean pearson (avg2016)"], 4)
      ('counts', 0.9884)
      >>> tmp.cleanup()
    """
    from grounded_text.data.paths import resolve_data_dir
    from grounded_text.evaluation.suite import model_report

    if isinstance(sections, str):
        sections = [sections]
    unknown = [s for s in sections if s not in EVALUATE_SECTIONS]
    if unknown:
        raise ValueError(f"evaluate: unknown sections {unknown}; choose from {list(EVALUATE_SECTIONS)}.")
    from grounded_text.utils.extras import check_extras

    # scikit-learn is named before anything is loaded or scored, not after the STS section
    check_extras([("sklearn", f"evaluate(sections=[{s!r}])") for s in ("supervised", "transfer") if s in sections])
    root = resolve_data_dir(data_dir)
    years = _check_years(years, root / "sts")
    from grounded_text.serving.encoder import TextEncoder
    from grounded_text.serving.loader import load

    if isinstance(encoder_or_path, (str, os.PathLike)):
        encoder_or_path = load(encoder_or_path)
    if isinstance(encoder_or_path, TextEncoder):
        label = encoder_or_path.handle
        enc = encoder_or_path

        def encoder(sentences):
            return enc.encode(list(sentences), batch_size=batch_size)
    elif callable(encoder_or_path):
        label, encoder = getattr(encoder_or_path, "__name__", "encoder"), encoder_or_path
    else:
        raise TypeError(f"evaluate: a TextEncoder, a path or a callable is expected, got "
                        f"{type(encoder_or_path).__name__}.")
    sts_dir = root / "sts"
    report = model_report(label, encoder, sts_dir=sts_dir if "sts" in sections else None,
                          senteval_dir=root / "senteval" if "transfer" in sections else None,
                          sick_dir=sts_dir, years=years)
    if "supervised" in sections:
        from grounded_text.evaluation.supervised_sts import evaluate_supervised_sts

        report["supervised_sts"] = evaluate_supervised_sts(encoder, sts_dir)
    return json.loads(json.dumps(report, default=float))


def _check_years(years, sts_dir: Path) -> list[str] | None:
    """``years`` as a list of year names found under ``sts_dir`` (a ``str`` is one year).

    Raises:
      TypeError: not a str or a sequence of str. ValueError: empty, or a year with no folder.
    """
    if years is None:
        return None
    if isinstance(years, str):
        years = [years]
    if not isinstance(years, Sequence) or not all(isinstance(y, str) for y in years):
        raise TypeError(f"evaluate: years must be a str or a list of str such as ['STS16'], got {years!r}.")
    years = list(years)
    if not years:
        raise ValueError("evaluate: years is empty; give at least one year, e.g. years=['STS12', 'STS16'].")
    from grounded_text.data.sts import sts_year_dirs

    found = list(sts_year_dirs(sts_dir))
    missing = [y for y in years if y not in found]
    if missing:
        raise ValueError(f"evaluate: no {', '.join(f'{y}-en-test' for y in missing)} folder under {str(sts_dir)!r} "
                         f"(years found: {', '.join(found) or 'none'}).")
    return years


# ----------------------------------------------------------------------------- presets


def models() -> list[dict]:
    """The trained models shipped inside the package, which ``load(NAME)`` loads offline (TF-free).

    Returns:
      One dict per model: ``name``, ``description``, ``dims`` (embedding width),
      ``image_dims``, ``figures`` (``{figure: {"value", "ci95", "n"}}``: Pearson r of the
      cosine on STS12 MSRvid, the STS16 mean, STS-B test and SICK test, with 95% intervals),
      ``size_bytes``, ``weights_dtype``, ``command`` (how it was trained), ``data``,
      ``licence`` (the training data's terms, in full), ``terms`` (in short: research use
      only, the terms of Flickr8k, which these weights are trained on) and ``path`` (see
      ``grounded_text.shipped.models``).

    Example:
      >>> import grounded_text as gt
      >>> [m["name"] for m in gt.models()]
      ['char_gru_attention_flickr8k', 'vete_bow_flickr8k']
      >>> m = {m["name"]: m for m in gt.models()}["vete_bow_flickr8k"]
      >>> m["dims"], round(m["figures"]["STS12 MSRvid"]["value"], 3), m["size_bytes"] < 10 * 2**20
      (128, 0.761, True)
      >>> m["terms"].startswith("research use only")
      True
    """
    from grounded_text.shipped import models as shipped

    return shipped()


def presets() -> list[dict]:
    """The preset records (one per paper configuration), TF-free.

    A preset is a training configuration without weights (``train(NAME, ...)`` trains it); the
    trained models that ``load(NAME)`` loads are ``models()``.

    Returns:
      One dict per preset: ``name``, ``builder`` (architecture family), ``paper`` (the
      source and section), ``variant_of``, ``notes``, ``config`` (the record's values),
      ``sources`` (field → where the paper gives it) and ``unsaid`` (field → why ours).

    Example:
      >>> records = {p["name"]: p for p in presets()}
      >>> "vete_bow" in records, "bordes_cg_pg" in records
      (True, True)
      >>> sorted(records["vete_bow"])
      ['builder', 'config', 'name', 'notes', 'paper', 'sources', 'unsaid', 'variant_of']
      >>> records["vete_bow"]["paper"]
      'Kurach et al. 2017, ...'
    """
    from grounded_text.papers.presets import PRESETS

    return [record.to_dict() for record in PRESETS.values()]
