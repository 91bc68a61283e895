"""Train a grounded sentence encoder, export its text tower and evaluate it.

Usage::

    python -m grounded_text.train --data-dir ../shared/data --output-dir runs/vete_bow \\
        [--model vete_bow] [--epochs 20] [--one-caption-per-image] ...
    python -m grounded_text.train --model char_gru_attention --output-dir runs/char \\
        [--loss triplet --loss-param negatives=hardest --loss-param k=1] \\
        [--encoder-param units=256] [--schedule cyclic_cosine --cycle-epochs 2] ...

Every preset of ``grounded_text.models.registry`` trains here: the preset fixes the
loss, the sampler (random pairs, or several captions per image for the cluster
loss), the learning-rate schedule (constant, or cyclic cosine with snapshot
ensembling) unless the config/flags set them (see ``resolve_config``).

Writes to ``--output-dir``:
  * ``config.toml``: the resolved config (every preset choice filled in);
    ``--config RUN/config.toml`` replays the run;
  * ``vocab.txt``: the vocabulary (training captions only);
  * ``checkpoints/best.weights.h5`` (best epoch by ``--select-on``) and
    ``checkpoints/last.weights.h5``;
  * ``logs/``: TensorBoard logs;
  * ``export/``: the TF Hub text tower of the best epoch (see ``grounded_text.export``),
    or, with snapshots, the snapshot ensemble (``snapshots/`` holds the snapshots);
  * ``export_<name>/``: each named sentence space of the model (best epoch), e.g.
    ``export_textual/`` (u) and ``export_grounded/`` (g(u)) for ``bordes_cg_pg``;
  * ``image_export/``: the best epoch's image tower (float32 [B, d] → [B, N]), for
    retrieval (for ``bordes_cg_pg`` it is the identity on the CNN features: that model
    has no image branch, and its text space is not aligned with them);
  * ``metrics.json``: config, data counts, per-epoch history, best epoch, timings
    and the STS report of the export (``grounded_text.evaluate``); ``spaces`` maps each
    space to its folder, ``evaluation.spaces`` to its STS headline figures;
  * ``run_state.json`` and, while the run is unfinished, ``resume/``: what ``--resume``
    continues from (``grounded_text.training.run_dir``).

A directory that already holds a run is refused unless ``--resume`` (continue an
interrupted run from its last completed epoch, with the same flags) or ``--overwrite``
(replace it) is given. A NaN/Inf training loss stops the run at once (exit 1, with the
epoch, step and a lower learning rate to try); Ctrl-C prints where the last checkpoint is
and the command that resumes (exit 130); bad flags or data print ``error: ...`` (exit 2).
See docs/reliability.md.

Model selection never uses a test set: ``avg2016`` (mean Pearson over the STS 2016
subsets, VETE's signal) or ``val_loss`` (Flickr8k dev). Note that STS16 is then
not an unseen test: the papers report on the held-out STS 2014/2015 years.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

# TensorFlow, Keras and the modules built on them are imported where the work starts (in
# the functions below), so that --help and bad flags answer in well under a second.
from grounded_text.config import DataConfig, ExperimentConfig, TrainConfig, config_toml
from grounded_text.config_cli import add_config_flags, config_from_flags
from grounded_text.data.paths import resolve_data_dir
from grounded_text.durable import atomic_write

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

log = logging.getLogger("grounded_text.train")
SELECTION_YEAR = "STS16"


def train(
    config: ExperimentConfig,
    data_dir: str | Path | None,
    output_dir: str | Path,
    *,
    evaluate: bool = True,
    verbose: str | int = "auto",
    resume: bool = False,
    overwrite: bool = False,
) -> dict:
    """Runs the whole path: data → vocabulary → model → fit → export → evaluate.

    Args:
      config: the experiment.
      data_dir: data root (``None``: ``$GROUNDED_TEXT_DATA``).
      output_dir: run directory (created).
      evaluate: score the export on every STS set found under ``data_dir/sts``.
      verbose: Keras ``fit`` verbosity (progress bar by default).
      resume: continue the interrupted run in ``output_dir`` (same config).
      overwrite: replace the run in ``output_dir``.

    Returns:
      The ``metrics.json`` content as a dict.

    Raises:
      ValueError: bad config (unknown model, ``batch_size < 2``, unknown
        ``select_on``, training slice with fewer than ``batch_size`` pairs, and
        the checks of ``resolve_config``).
      grounded_text.training.run_dir.RunDirError (a ValueError): ``output_dir`` holds a
        run and neither ``resume`` nor ``overwrite`` is given, or it cannot be resumed.
      grounded_text.training.run_dir.TrainingDiverged: the loss became NaN/Inf.
    """
    import keras

    from grounded_text.training import run_dir
    from grounded_text.training.distribute import is_chief, make_strategy

    t_start = time.perf_counter()
    # Distribution strategy and mixed precision (the policy is restored on return).
    strategy = make_strategy(config.train.strategy)
    previous_policy = keras.mixed_precision.global_policy().name
    try:
        with run_dir.guard_run(output_dir, enabled=is_chief(strategy)):  # run_dir: lock, failed state, full disk
            return _train(config, data_dir, output_dir, strategy, evaluate=evaluate, verbose=verbose,
                          t_start=t_start, resume=resume, overwrite=overwrite)
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)


@dataclasses.dataclass
class TrainingSetup:
    """What ``prepare_training`` builds: everything ``fit`` needs (shared by
    ``train`` and ``grounded_text.benchmark``, so the benchmark measures the real path).

    Attributes:
      config: the resolved ``ExperimentConfig``.
      root: the data root.
      flickr: ``SplitPairs`` (all splits, feature store).
      train_pairs, dev_pairs: the ``CaptionPairs`` used (slices applied).
      train_ds, dev_ds: the ``tf.data`` pipelines (dicts of caption string[B],
        image_features float32[B, d], image_id int64[B]).
      steps_per_epoch: full training batches per epoch.
      vocabulary: the word vocabulary (training captions only).
      model: the ``GroundedModel``; ``train_model`` is compiled (Adam).
      strategy: the ``tf.distribute.Strategy`` the model was built under.
      precision: the Keras dtype policy name in force (``"float32"``, ``"mixed_float16"``...).
      data_epoch: int64 ``tf.Variable`` the training pipeline reads its epoch from (each
        epoch's order is a function of the seed and it; ``run_dir.DataEpoch`` sets it).
    """

    config: ExperimentConfig
    root: Path
    flickr: object
    train_pairs: object
    dev_pairs: object
    train_ds: tf.data.Dataset
    dev_ds: tf.data.Dataset
    steps_per_epoch: int
    vocabulary: list
    model: object
    strategy: tf.distribute.Strategy
    precision: str
    data_epoch: tf.Variable | None = None


def prepare_training(config: ExperimentConfig, data_dir: str | Path | None, *, strategy=None) -> TrainingSetup:
    """Data → vocabulary → model built and compiled inside ``strategy.scope()``.

    Sets the global Keras dtype policy from ``config.train.mixed_precision`` (see
    ``grounded_text.training.distribute.resolve_mixed_precision``); the caller restores it.

    Args:
      config: the experiment (``resolve_config`` is applied here).
      data_dir: data root (``None``: ``$GROUNDED_TEXT_DATA``).
      strategy: a ``tf.distribute.Strategy`` (``None``: ``make_strategy(config.train.strategy)``).

    Raises:
      ValueError: see ``train``.
    """
    import keras
    import tensorflow as tf

    from grounded_text.data.prepared import load_pairs
    from grounded_text.layers.text_preprocessor import build_vocabulary
    from grounded_text.models.registry import build_model, resolve_config
    from grounded_text.training.distribute import apply_mixed_precision, make_strategy, shard_by_data

    config = resolve_config(config)  # the preset's loss/sampler/schedule for None fields
    if config.data.batch_size < 2:
        raise ValueError(f"batch_size must be >= 2 for in-batch losses, got {config.data.batch_size}.")
    strategy = strategy if strategy is not None else make_strategy(config.train.strategy)
    precision = apply_mixed_precision(config.train.mixed_precision)
    root = resolve_data_dir(data_dir)
    keras.utils.set_random_seed(config.train.seed)

    # Data.
    flickr = load_pairs(config.data, root)  # flickr8k, a prepared folder or a TFDS export
    train_pairs = flickr.splits["train"]
    if config.data.max_train_images:
        train_pairs = train_pairs.first_images(config.data.max_train_images)
    if config.data.one_caption_per_image:
        train_pairs = train_pairs.one_caption_per_image(config.data.seed)
    dev_pairs = flickr.splits["dev"]
    if config.data.max_dev_images:
        dev_pairs = dev_pairs.first_images(config.data.max_dev_images)
    if len(train_pairs) < config.data.batch_size:
        raise ValueError(
            f"Only {len(train_pairs)} training pairs for batch_size {config.data.batch_size}."
        )
    data_epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_epoch")
    train_ds, dev_ds, steps_per_epoch = _datasets(config.data, train_pairs, dev_pairs, epoch=data_epoch)
    train_ds, dev_ds = shard_by_data(train_ds), shard_by_data(dev_ds)

    # Vocabulary from training captions only.
    vocabulary = build_vocabulary(
        train_pairs.captions.tolist(),
        max_size=config.text.max_vocab_size,
        min_count=config.text.min_count,
        lowercase=config.text.lowercase,
        boundary_tokens=config.text.boundary_tokens,
    )

    # Model, built and compiled under the strategy (global batch = batch_size).
    steps_per_execution = config.train.steps_per_execution
    if strategy.num_replicas_in_sync > 1 and steps_per_execution > 1:
        # Keras 3.15's multi-step loop fails on distributed string batches ("while/cond/Placeholder").
        log.info("steps_per_execution=%d → 1 under %d replicas.", steps_per_execution, strategy.num_replicas_in_sync)
        steps_per_execution = 1
    with strategy.scope():
        model = build_model(config.model, config.text, vocabulary, flickr.store.dim, seed=config.train.seed,
                            train_captions=train_pairs.captions.tolist())
        compile_for_training(model.train_model, config.train, steps_per_epoch, steps_per_execution)
    return TrainingSetup(config, root, flickr, train_pairs, dev_pairs, train_ds, dev_ds, steps_per_epoch,
                         vocabulary, model, strategy, precision, data_epoch)


def _train(config, data_dir, output_dir, strategy, *, evaluate, verbose, t_start, resume=False,
           overwrite=False) -> dict:
    import keras
    import numpy as np

    from grounded_text.data.sts import sts_year_dirs
    from grounded_text.evaluation.sts import evaluate_sts, format_markdown, headline_figures, load_encoder
    from grounded_text.export import IMAGE_EXPORT_DIR, export_image_tower, export_text_tower, write_model_card
    from grounded_text.layers.text_preprocessor import write_vocabulary
    from grounded_text.models.registry import resolve_config
    from grounded_text.training import run_dir
    from grounded_text.training.callbacks import STSValidation
    from grounded_text.training.distribute import is_chief

    chief = is_chief(strategy)
    with run_dir.usage_errors():  # bad flags, data or run directory: the CLI's "error: ..." (exit 2)
        resume_state = None
        if chief:
            if resume and config.train.strategy == "multi_worker":
                raise run_dir.RunDirError("--resume is not supported with --strategy multi_worker.")
            resume_state = run_dir.check_run_dir(output_dir, resolve_config(config).to_dict(), resume=resume,
                                                 overwrite=overwrite)
        setup = prepare_training(config, data_dir, strategy=strategy)
        fingerprint = run_dir.check_data(resume_state, setup)  # run_dir: data fingerprint, checked on --resume
    config, root, flickr, model = setup.config, setup.root, setup.flickr, setup.model
    train_pairs, dev_pairs, vocabulary = setup.train_pairs, setup.dev_pairs, setup.vocabulary
    train_ds, dev_ds = setup.train_ds, setup.dev_ds
    # Non-chief workers write to a temporary folder (TF multi-worker guide), removed at the end.
    out = Path(output_dir) if chief else Path(tempfile.mkdtemp(prefix="grounded_text_worker_"))
    if chief and overwrite:
        run_dir.clear_run_dir(out)  # only now: the new run's data and model are built
    (out / "checkpoints").mkdir(parents=True, exist_ok=True)
    # The resolved config: ``train --config RUN/config.toml`` replays this run.
    config_text = config_toml(config).encode("utf-8")
    atomic_write(out / "config.toml", lambda f: f.write(config_text))
    write_vocabulary(vocabulary, out / "vocab.txt")

    # Callbacks: the STS scorer first, so later callbacks see its metric.
    sts_dir = root / "sts"
    years = sts_year_dirs(sts_dir) if sts_dir.is_dir() else {}
    select_on = config.train.select_on
    callbacks: list = []
    train_captions = train_pairs.captions.tolist()
    if model.refit is not None:
        # Statistics the tower holds beside its trained weights (SEQ's PCA) follow the
        # weights each epoch, before the scorer sees the tower.
        callbacks.append(keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: model.refit(train_captions)))
    sts_cb = None
    if select_on == "avg2016":
        if SELECTION_YEAR not in years:
            log.warning("No %s folder under %s: selecting on Flickr8k dev loss instead.", SELECTION_YEAR, sts_dir)
            select_on = "val_loss"
        else:
            sts_cb = STSValidation(model.text_tower, years[SELECTION_YEAR], metric_name="val_avg2016")
            callbacks.append(sts_cb)
    retrieval_cb = None
    if select_on == "dev_retrieval" or config.train.snapshots:
        from grounded_text.training.callbacks import DevRetrieval

        retrieval_cb = DevRetrieval(model.text_tower, model.image_tower, dev_pairs)
        callbacks.append(retrieval_cb)
    if select_on == "dev_retrieval" and SELECTION_YEAR in years and sts_cb is None:
        # Logged, not selected on: the semantic score's curve over training (Merckx & Frank, Fig. 4).
        sts_cb = STSValidation(model.text_tower, years[SELECTION_YEAR], metric_name="val_avg2016")
        callbacks.append(sts_cb)
    monitor, mode = {"avg2016": ("val_avg2016", "max"), "dev_retrieval": ("val_rsum", "max"),
                     "val_loss": ("val_loss", "min"), "last": ("val_loss", "min")}[select_on]
    best_path = out / "checkpoints" / "best.weights.h5"
    last_path = out / "checkpoints" / "last.weights.h5"
    best_cb = None
    if select_on != "last":
        best_cb = keras.callbacks.ModelCheckpoint(
            str(best_path), monitor=monitor, mode=mode, save_best_only=True, save_weights_only=True)
        callbacks.append(best_cb)
    callbacks += [
        keras.callbacks.ModelCheckpoint(str(last_path), save_weights_only=True),
        keras.callbacks.TensorBoard(log_dir=str(out / "logs"), write_graph=False),
    ]
    snapshot_cb = None
    if config.train.snapshots:
        from grounded_text.training.callbacks import SnapshotSaver

        snapshot_cb = SnapshotSaver(model.text_tower, out / "snapshots", config.train.cycle_epochs,
                                    image_tower=model.image_tower, score_key="val_rsum")
        callbacks.append(snapshot_cb)

    # Resume state, divergence guard, data epoch (grounded_text.training.run_dir).
    tracker = run_dir.RunTracker(out, config.to_dict(), model.train_model, epochs=config.train.epochs,
                                 monitor=monitor, mode=mode, best_checkpoint=best_cb, best_path=best_path,
                                 sts_cb=sts_cb, retrieval_cb=retrieval_cb, snapshot_cb=snapshot_cb,
                                 resume_state=resume_state,
                                 data_fingerprint=fingerprint)  # run_dir: recorded in run_state.json
    initial_epoch = tracker.start()
    callbacks = tracker.callbacks(callbacks, data_epoch=setup.data_epoch, steps_per_epoch=setup.steps_per_epoch,
                                  steps_per_execution=config.train.steps_per_execution,
                                  learning_rate=config.train.learning_rate,
                                  setup=setup, snapshots=config.train.snapshots)  # run_dir: collapse, disk space

    t_fit = time.perf_counter()
    try:
        if initial_epoch < config.train.epochs:
            model.train_model.fit(train_ds, validation_data=dev_ds, epochs=config.train.epochs, callbacks=callbacks,
                                  verbose=verbose, shuffle=False, initial_epoch=initial_epoch)
    except run_dir.TrainingDiverged:
        tracker.mark("diverged")
        raise
    except KeyboardInterrupt:
        tracker.mark("interrupted")
        raise
    fit_seconds = time.perf_counter() - t_fit
    hist = tracker.history  # every epoch, the resumed run's earlier ones included
    scores = np.array(hist[monitor], dtype=np.float64)
    if select_on == "last":
        best_epoch = len(scores)
        if not np.isfinite(scores[-1]):
            raise run_dir.TrainingDiverged(f"the last epoch's {monitor} is {scores[-1]}: not exported. Try a lower "
                                           "--learning-rate.", best_epoch, 0)
        model.train_model.load_weights(str(last_path))
    else:
        best_epoch = run_dir.select_best_epoch(scores, mode)  # NaN/Inf epochs are never selected
        model.train_model.load_weights(str(best_path))
    if model.refit is not None:
        model.refit(train_captions)

    export_tower, image_tower = model.text_tower, model.image_tower
    exported = {"kind": "best_epoch", "epoch": best_epoch}
    if snapshot_cb is not None and snapshot_cb.paths:
        from grounded_text.models.ensemble import build_snapshot_ensemble
        from grounded_text.training.callbacks import load_snapshot_towers

        chosen = snapshot_cb.best(config.train.ensemble_size)
        export_tower = build_snapshot_ensemble(load_snapshot_towers([snapshot_cb.paths[i] for i in chosen]))
        image_tower = build_snapshot_ensemble(load_snapshot_towers([snapshot_cb.image_paths[i] for i in chosen]),
                                              name="image_snapshot_ensemble")
        exported = {"kind": "snapshot_ensemble", "snapshots": [str(snapshot_cb.paths[i]) for i in chosen],
                    "snapshot_epochs": [snapshot_cb.epochs[i] for i in chosen],
                    "ranked_on": "val_rsum (dev retrieval)",
                    "all_snapshots": [{"epoch": e, "val_rsum": v} for e, v in zip(snapshot_cb.epochs,
                                                                                   snapshot_cb.scores)]}
    export_dir = export_text_tower(export_tower, out / "export", config.to_dict())
    # Models with several sentence spaces (bordes_cg_pg: textual u, grounded g(u)) export
    # each one too (best epoch), so that every space can be scored from the run directory.
    space_dirs = {name: str(export_text_tower(tower, out / f"export_{name}", config.to_dict()))
                  for name, tower in model.spaces.items()}
    # Image tower too, for retrieval from the run directory.
    image_export_dir = export_image_tower(image_tower, out / IMAGE_EXPORT_DIR, config.to_dict())

    metrics = {
        "config": config.to_dict(),
        "data": {
            "data_dir": str(root),
            "feature_file": flickr.store.path,
            "feature_dim": flickr.store.dim,
            "images_with_features": flickr.num_images_with_features,
            "dropped_captions_without_features": flickr.dropped_captions,
            "train_pairs": len(train_pairs),
            "train_images": train_pairs.num_images,
            "dev_pairs": len(dev_pairs),
            "vocabulary_size": len(vocabulary),
        },
        "selection": {"monitor": monitor, "mode": mode, "best_epoch": best_epoch,
                      "best_value": float(scores[best_epoch - 1])},
        "history": hist,
        "sts_validation_subsets": sts_cb.history if sts_cb else [],
        "dev_retrieval": retrieval_cb.history if retrieval_cb else [],
        "parameters": {
            "text_tower": int(model.text_tower.count_params()),
            "image_tower": int(model.image_tower.count_params()),
            "train_model": int(model.train_model.count_params()),
        },
        "exported": exported,
        "timing_seconds": {"fit": fit_seconds},
        "export_dir": str(export_dir),
        "image_export_dir": str(image_export_dir),
        "spaces": space_dirs,
    }
    metrics["distribution"] = {"strategy": config.train.strategy, "replicas": strategy.num_replicas_in_sync,
                               "precision": setup.precision, "chief": chief}
    if evaluate and chief and sts_dir.is_dir():
        t_eval = time.perf_counter()
        report = evaluate_sts(load_encoder(export_dir), sts_dir)
        metrics["evaluation"] = {"sts": report, "headline": headline_figures(report)}
        metrics["timing_seconds"]["evaluate"] = time.perf_counter() - t_eval
        write_model_card(export_dir, config.to_dict(), metrics["evaluation"]["headline"],
                         embedding_dim=int(model.text_tower.output.shape[-1]),
                         parameters=int(model.text_tower.count_params()))
        print(format_markdown(report, f"{config.model.name}: STS (cosine, unsupervised) of {export_dir}"))
        metrics["evaluation"]["spaces"] = {}
        for name, space_dir in space_dirs.items():
            # The space export/ already holds is not scored twice.
            headline = metrics["evaluation"]["headline"] if model.spaces[name] is export_tower else \
                headline_figures(evaluate_sts(load_encoder(space_dir), sts_dir))
            metrics["evaluation"]["spaces"][name] = headline
            write_model_card(space_dir, config.to_dict(), headline,
                             embedding_dim=int(model.spaces[name].output.shape[-1]),
                             parameters=int(model.spaces[name].count_params()))
    metrics["timing_seconds"]["total"] = time.perf_counter() - t_start
    if tracker.resumed:
        metrics["resumed"] = {"from_epoch": initial_epoch}
    payload = json.dumps(metrics, indent=2).encode("utf-8")
    atomic_write(out / "metrics.json", lambda f: f.write(payload))
    tracker.finish()
    if not chief:
        shutil.rmtree(out, ignore_errors=True)
    return metrics


def compile_for_training(train_model: keras.Model, train_cfg: TrainConfig, steps_per_epoch: int,
                         steps_per_execution: int | None = None) -> None:
    """The one ``compile`` of the package: Adam under the config's learning-rate schedule.

    Every model that trains (the trainer's, and the benchmarks' variants of it) is compiled
    here, so that a figure measured on one is measured under the trainer's settings.

    Args:
      train_model: a Keras model whose loss is ``add_loss``-ed (``GroundedModel.train_model``).
      train_cfg: a resolved ``TrainConfig`` (learning rate, schedule, ``steps_per_execution``).
      steps_per_epoch: optimizer steps per epoch (the cyclic schedules' period unit).
      steps_per_execution: overrides ``train_cfg.steps_per_execution`` (the trainer caps it
        at ``steps_per_epoch``).
    """
    import keras

    train_model.compile(
        optimizer=keras.optimizers.Adam(_learning_rate(train_cfg, steps_per_epoch)),
        steps_per_execution=steps_per_execution or train_cfg.steps_per_execution,
    )


def _datasets(data: DataConfig, train_pairs, dev_pairs, epoch=None):
    """(train_ds, dev_ds, steps_per_epoch) for the configured sampler (``epoch``: the
    variable the training order is seeded with, see ``make_dataset``)."""
    from grounded_text.data.pairs import make_dataset

    if data.sampler == "grouped":
        from grounded_text.data.sampler import make_grouped_dataset

        per_batch = data.batch_size // data.captions_per_image
        train_ds = make_grouped_dataset(train_pairs, per_batch, data.captions_per_image, seed=data.seed, epoch=epoch)
        dev_ds = make_grouped_dataset(dev_pairs, per_batch, data.captions_per_image, seed=data.seed, shuffle=False)
    else:
        train_ds = make_dataset(train_pairs, data.batch_size, shuffle=True, seed=data.seed,
                                bucket_by_length=data.bucket_by_length, epoch=epoch)
        dev_ds = make_dataset(dev_pairs, data.batch_size, shuffle=False)
    steps = int(train_ds.cardinality())
    if steps < 0:  # unknown cardinality: count once
        steps = sum(1 for _ in train_ds)
    if steps < 1:
        raise ValueError(f"The {data.sampler} sampler yields no full training batch of {data.batch_size}.")
    return train_ds, dev_ds, steps


def _learning_rate(train_cfg: TrainConfig, steps_per_epoch: int):
    """A float (constant), or a cyclic cosine schedule: ``CyclicCosineSchedule``
    (Merckx & Frank §3.3, min → max → min) or ``WarmRestartCosineSchedule`` (SGDR)."""
    from grounded_text.training.schedules import CYCLIC_SCHEDULES, cycle_steps

    if train_cfg.schedule in CYCLIC_SCHEDULES:
        return CYCLIC_SCHEDULES[train_cfg.schedule](train_cfg.lr_min, train_cfg.learning_rate,
                                                    cycle_steps(train_cfg.cycle_epochs, steps_per_epoch))
    return train_cfg.learning_rate


def parse_args(argv=None) -> argparse.Namespace:
    """The train CLI. ``--model NAME`` picks a preset record (``grounded_text.presets``);
    the config flags are generated from the config dataclasses (``grounded_text.config_cli``)
    and override the record only when given; ``--config FILE.toml`` and ``--set`` set any
    field."""
    p = argparse.ArgumentParser(prog="python -m grounded_text.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=None, help="data root (default: $GROUNDED_TEXT_DATA)")
    p.add_argument("--output-dir", required=True, help="run directory")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--resume", action="store_true",
                     help="continue the interrupted run in --output-dir from its last completed epoch (same flags)")
    run.add_argument("--overwrite", action="store_true", help="replace the run already in --output-dir")
    p.add_argument("--no-evaluate", dest="evaluate", action="store_false", default=True)
    p.add_argument("--verbose", default="auto", help="Keras fit verbosity: auto, 0, 1, 2")
    add_config_flags(p)
    return p.parse_args(argv)


def config_from_args(a: argparse.Namespace) -> ExperimentConfig:
    """The flags as an ``ExperimentConfig`` (``grounded_text.config_cli.config_from_flags``);
    fields left unset stay ``None`` (the preset's choice, filled by ``resolve_config``)."""
    return config_from_flags(a)


def main(argv=None) -> int:
    """The CLI. Exit status: 0 done; 2 bad flags, data or run directory (one ``error: ...``
    line); 1 training diverged (``error: training diverged ...``); 130 interrupted (Ctrl-C:
    one line with the last checkpoint and the command that resumes)."""
    import sys

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    # The flags are good: now the TensorFlow side.
    try:  # run_dir: Ctrl-C while TensorFlow loads is one line, exit 130
        from grounded_text.models.registry import resolve_config
        from grounded_text.training import run_dir
    except KeyboardInterrupt:
        print("interrupted while starting (loading TensorFlow): nothing was written.", file=sys.stderr)
        return 130

    verbose = args.verbose if args.verbose == "auto" else int(args.verbose)
    try:
        config = config_from_args(args)
        resolve_config(config)  # the flags' combination, checked before anything is built
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        metrics = train(config, args.data_dir, args.output_dir, evaluate=args.evaluate, verbose=verbose,
                        resume=args.resume, overwrite=args.overwrite)
    except run_dir.TrainingDiverged as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(run_dir.interrupted_message(args.output_dir, argv), file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError) as e:
        if not run_dir.is_usage_error(e):
            raise
        print(f"error: {e}", file=sys.stderr)
        run_dir.exit_after_storage_error(e, 2)  # run_dir: a failed HDF5 write would crash the exit (rc 139)
        return 2
    print(json.dumps({"best_epoch": metrics["selection"]["best_epoch"],
                      "headline": metrics.get("evaluation", {}).get("headline"),
                      "total_seconds": round(metrics["timing_seconds"]["total"], 1),
                      "export_dir": metrics["export_dir"]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
