"""The Python API: load an encoder and encode, train a preset, evaluate, list presets.

In the conventions of sentence-transformers (``encode`` takes a ``str`` or a list) and
keras-hub (presets as data)::

    import grounded_text as gt

    enc = gt.load("vete_bow_flickr8k")               # a shipped model: [m["name"] for m in gt.models()]
    enc = gt.load("runs/vete_bow/export")            # any TF Hub text SavedModel
    enc.encode("a dog runs").shape                   # (N,)
    enc.encode(["a dog runs", "a cat"]).shape        # (2, N)

    run = gt.train("vete_bow", data_dir="data", output_dir="runs/vete_bow", epochs=1)
    report = gt.evaluate(run.export_dir, data_dir="data")
    [p["name"] for p in gt.presets()]

TensorFlow is imported on first use (``load``, ``train``, ``evaluate``), not by
``import grounded_text`` nor by ``presets()``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path

from grounded_text.serving.encoder import TextEncoder, load

__all__ = ["TextEncoder", "load", "models", "Run", "train", "evaluate", "presets"]


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
    from grounded_text.config.schema import ConfigError, ExperimentConfig, apply_override, read_config_file

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

    Raises:
      ValueError (``grounded_text.config.schema.ConfigError`` and the trainer's errors): an unknown
        preset or field, a value that does not fit, a bad combination, bad data, or a run
        directory that holds a run.
      grounded_text.training.run_dir.TrainingDiverged: the loss diverged or collapsed.
    """
    from grounded_text.papers.resolve import resolve_config
    from grounded_text.training.trainer import train as run_trainer

    config = resolve_config(_config(model_or_config, overrides))
    metrics = run_trainer(config, data_dir, output_dir, evaluate=evaluate, verbose=verbose, resume=resume,
                          overwrite=overwrite, callbacks=tuple(callbacks))
    return Run.from_metrics(output_dir, metrics)


# ----------------------------------------------------------------------------- evaluate

EVALUATE_SECTIONS = ("sts", "supervised", "transfer")


def evaluate(encoder_or_path, *, data_dir: str | os.PathLike | None = None, sections: Sequence[str] = ("sts",),
             years: Sequence[str] | None = None, batch_size: int = 512) -> dict:
    """Scores a text encoder: the figures of ``python -m grounded_text.evaluate --json``.

    Args:
      encoder_or_path: a ``TextEncoder``, a SavedModel path, or any callable mapping a list
        of str to float [B, N].
      data_dir: the data root (default ``$GROUNDED_TEXT_DATA``); STS sets are read from
        ``data_dir/sts``, SentEval tasks from ``data_dir/senteval``.
      sections: any of ``"sts"`` (cosine, unsupervised: Pearson r and Spearman ρ per
        subset, year means), ``"supervised"`` (STS-B and SICK-R regressors on the frozen
        embeddings) and ``"transfer"`` (SentEval classification accuracy %).
      years: STS years to score (default: every year folder found).
      batch_size: sentences per call when a path or ``TextEncoder`` is given.

    Returns:
      The CLI's report: ``{"model", "sts", "headline", "sts_seconds"}`` for ``"sts"``,
      ``"supervised_sts"`` and ``"transfer"`` keys when asked.

    Raises:
      ValueError: an unknown section, or no data root; FileNotFoundError: a missing folder.
    """
    from grounded_text.data.paths import resolve_data_dir
    from grounded_text.evaluation.suite import model_report

    unknown = [s for s in sections if s not in EVALUATE_SECTIONS]
    if unknown:
        raise ValueError(f"evaluate: unknown sections {unknown}; choose from {list(EVALUATE_SECTIONS)}.")
    root = resolve_data_dir(data_dir)
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


# ----------------------------------------------------------------------------- presets


def models() -> list[dict]:
    """The trained models shipped inside the package, which ``load(NAME)`` loads offline (TF-free).

    Returns:
      One dict per model: ``name``, ``description``, ``dims`` (embedding width),
      ``image_dims``, ``figures`` (``{figure: {"value", "ci95", "n"}}``: Pearson r of the
      cosine on STS12 MSRvid, the STS16 mean, STS-B test and SICK test, with 95% intervals),
      ``size_bytes``, ``weights_dtype``, ``command`` (how it was trained), ``data``,
      ``licence`` and ``path`` (see ``grounded_text.pretrained.models``).
    """
    from grounded_text.pretrained import models as shipped

    return shipped()


def presets() -> list[dict]:
    """The preset records (one per paper configuration), TF-free.

    Returns:
      One dict per preset: ``name``, ``builder`` (architecture family), ``paper`` (the
      source and section), ``variant_of``, ``notes``, ``config`` (the record's values),
      ``sources`` (field → where the paper gives it) and ``unsaid`` (field → why ours).
    """
    from grounded_text.papers.presets import PRESETS

    return [record.to_dict() for record in PRESETS.values()]
