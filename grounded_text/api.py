"""The Python API: load an encoder and encode, train a preset, evaluate, list presets.

In the conventions of sentence-transformers (``encode`` takes a ``str`` or a list) and
keras-hub (presets as data)::

    import grounded_text as gt

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
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["TextEncoder", "load", "Run", "train", "evaluate", "presets"]


# ----------------------------------------------------------------------------- encode


def _as_sentences(sentences) -> tuple[list, bool]:
    """``(list of str/bytes, single)``: ``single`` when one sentence was given.

    Raises:
      TypeError: not a str, bytes, sequence, NumPy array or ``tf.Tensor`` of strings;
        or an element that is not a str/bytes (the message gives its index and type).
      ValueError: an array or tensor of rank above 1.
    """
    if isinstance(sentences, (str, bytes)):
        return [sentences], True
    if type(sentences).__module__.startswith("tensorflow"):
        import tensorflow as tf

        if isinstance(sentences, tf.Tensor):
            if sentences.dtype != tf.string:
                raise TypeError(f"encode: a tf.Tensor of dtype string is expected, got {sentences.dtype.name}.")
            sentences = sentences.numpy()
    if isinstance(sentences, np.ndarray):
        if sentences.dtype.kind not in "USO":
            raise TypeError(f"encode: an array of strings is expected, got dtype {sentences.dtype}.")
        if sentences.ndim == 0:
            return [sentences.item()], True
        if sentences.ndim > 1:
            raise ValueError(f"encode: a 1-D batch of sentences is expected, got shape {sentences.shape}.")
        sentences = sentences.tolist()
    if not isinstance(sentences, Iterable):
        raise TypeError(f"encode: a str or a list of str is expected, got {type(sentences).__name__}.")
    out = list(sentences)
    for i, s in enumerate(out):
        if not isinstance(s, (str, bytes)):
            raise TypeError(f"encode: sentence {i} is a {type(s).__name__}, not a str.")
    return out, False


@dataclasses.dataclass
class TextEncoder:
    """A text-embedding SavedModel (string[B] → float[B, N]) loaded for encoding.

    Made by ``load``. ``encode`` (also ``__call__``) maps sentences to vectors with the
    module's own ``__call__`` (its ``serving_default`` computes the same), in batches.

    Attributes:
      module: the object ``tensorflow_hub.load`` returned (callable on ``tf.string`` [B]).
      handle: the absolute path (or TF Hub handle) it was loaded from.
      dim: N, the embedding width.
    """

    module: Any
    handle: str
    dim: int

    def encode(self, sentences, *, batch_size: int = 512, show_progress: bool = False) -> np.ndarray:
        """Embeds sentences.

        Args:
          sentences: one ``str`` (or ``bytes``, UTF-8); or a list/tuple, 1-D NumPy array
            or 1-D ``tf.Tensor`` of strings (B of them; B may be 0).
          batch_size: sentences per call of the module (≥ 1). Each call is padded with
            empty strings to a power of two (8 … ``batch_size``), whose rows are dropped:
            the loaded graph is re-optimised for every new batch shape (about 1.5 s each on
            2 CPU cores), so a few fixed shapes are much faster than arbitrary ones. The
            vectors do not depend on the batch (each row is encoded on its own).
          show_progress: a Keras progress bar over the batches (stderr).

        Returns:
          ``float32`` [N] for one ``str``; ``float32`` [B, N] otherwise.

        Raises:
          TypeError: see ``_as_sentences``; ValueError: a rank-2 input or ``batch_size < 1``.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"encode: batch_size must be an int >= 1, got {batch_size!r}.")
        items, single = _as_sentences(sentences)
        if not items:
            return np.zeros((0, self.dim), np.float32)
        import tensorflow as tf

        progress = None
        if show_progress:
            import keras

            progress = keras.utils.Progbar(len(items), unit_name="sentence")
        parts = []
        for start in range(0, len(items), batch_size):
            batch = items[start:start + batch_size]
            n = len(batch)
            size = max(n, min(batch_size, max(8, 1 << (n - 1).bit_length())))
            padded = tf.constant(list(batch) + [""] * (size - n), dtype=tf.string)
            parts.append(np.asarray(self.module(padded), dtype=np.float32)[:n])
            if progress is not None:
                progress.add(n)
        out = np.concatenate(parts, axis=0)
        return out[0] if single else out

    __call__ = encode


def load(path_or_handle: str | os.PathLike) -> TextEncoder:
    """Loads a text-embedding SavedModel: a grounded_text export or any TF Hub text module.

    ``tensorflow_text`` is imported first, so modules that use its ops load. A SavedModel's
    graph is code: load only models you trust. A local export left half-swapped by a crash
    is restored first.

    Args:
      path_or_handle: a SavedModel folder (a relative path is resolved against the working
        directory now), or a TF Hub handle that ``tensorflow_hub`` resolves.

    Returns:
      A ``TextEncoder``.

    Raises:
      FileNotFoundError: a local folder with no ``saved_model.pb``.
      grounded_text.evaluation.encoders.EncoderSignatureError (a ValueError): the module
        does not map string[B] to float[B, N].
    """
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (registers the ops the module uses)

    from grounded_text.evaluation.encoders import check_text_encoder
    from grounded_text.utils.durable import recover_export

    path = Path(os.fspath(path_or_handle)).expanduser()
    if path.exists() or "://" not in str(path_or_handle):
        path = path.resolve()
        recover_export(path)
        if not (path / "saved_model.pb").is_file():
            raise FileNotFoundError(f"{str(path)!r} is not a SavedModel directory (no saved_model.pb).")
        handle = str(path)
    else:
        handle = str(path_or_handle)
    module = hub.load(handle)
    dim = check_text_encoder(module, handle)
    return TextEncoder(module, handle, dim)


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


def presets() -> list[dict]:
    """The preset records (one per paper configuration), TF-free.

    Returns:
      One dict per preset: ``name``, ``builder`` (architecture family), ``paper`` (the
      source and section), ``variant_of``, ``notes``, ``config`` (the record's values),
      ``sources`` (field → where the paper gives it) and ``unsaid`` (field → why ours).
    """
    from grounded_text.papers.presets import PRESETS

    return [record.to_dict() for record in PRESETS.values()]
