"""The trainer as a library: data → vocabulary → model → fit → select → export → record.

``train(config, data_dir, output_dir)`` runs every preset of ``grounded_text.papers.presets``
(``python -m grounded_text.train`` is its command line) and returns the ``metrics.json``
content. It is cut into named steps, each its own function:

1. ``prepare_run``: the run directory checked (``grounded_text.training.run_dir``), data,
   vocabulary and compiled model (``prepare_training``); nothing written yet;
2. ``fit``: our callbacks (STS16 scorer, dev retrieval, checkpoints, TensorBoard,
   snapshots, resume state), then the user's; ``begin`` (the first write: with
   ``overwrite`` the old run's files go only now, then ``config.toml`` and ``vocab.txt``)
   and Keras ``fit``;
3. ``select``: the best epoch by ``train.select_on`` (or the last), its weights loaded;
4. ``export``: the TF Hub text tower (or snapshot ensemble), each named sentence space
   and the image tower;
5. ``record``: the STS evaluation of the exports, their model cards and ``metrics.json``.

Writes to ``output_dir``: ``config.toml`` (the resolved config: ``--config RUN/config.toml``
replays the run), ``vocab.txt``, ``checkpoints/{best,last}.weights.h5``, ``logs/``
(TensorBoard), ``export/``, ``export_<space>/``, ``image_export/``, ``metrics.json``,
``run_state.json`` and, while unfinished, ``resume/``.

Model selection never uses a test set: ``avg2016`` (mean Pearson over the STS 2016 subsets,
VETE's signal, Kurach et al. 2017 Algorithm 1), ``dev_retrieval`` (Flickr8k dev rsum,
Merkx & Frank 2019 §3.3), ``val_loss`` (Flickr8k dev) or ``sick_val`` (cosine Pearson on the
SICK validation split ``SICK_trial``, Bordes et al. 2019 §4.4). STS16 is then not an unseen test:
the papers report on the held-out STS 2014/2015 years.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# This module loads TensorFlow: the command line (grounded_text.train) imports it only once its
# flags are checked, so that --help and bad flags answer before TensorFlow loads.
import keras
import numpy as np

from grounded_text.config.files import config_toml
from grounded_text.config.params import check_checkpoint_every
from grounded_text.config.schema import ExperimentConfig
from grounded_text.data.provenance import store_provenance
from grounded_text.data.sts import sick_path, sts_year_dirs
from grounded_text.evaluation.sts import evaluate_sts, format_markdown, headline_figures
from grounded_text.layers.text_preprocessor import write_vocabulary
from grounded_text.models.ensemble import build_snapshot_ensemble
from grounded_text.papers.resolve import ensure_resolved
from grounded_text.serving.export import IMAGE_EXPORT_DIR, export_image_tower, export_text_tower
from grounded_text.serving.loader import load
from grounded_text.serving.model_card import write_model_card
from grounded_text.training.arguments import check_callbacks, check_output_dir, check_selection_data, check_verbose
from grounded_text.training.callbacks import (
    DevRetrieval,
    SICKValidation,
    SnapshotSaver,
    STSValidation,
    load_snapshot_towers,
    progress_callbacks,
)
from grounded_text.training.distribute import is_chief, make_strategy
from grounded_text.training.fingerprint import check_data
from grounded_text.training.preparation import TrainingSetup, prepare_training
from grounded_text.training.resume import RunTracker, fit_resumable
from grounded_text.training.run_dir import check_run_dir, clear_run_dir
from grounded_text.training.run_errors import RunDirError, TrainingDiverged, usage_errors
from grounded_text.training.run_lock import guard_run
from grounded_text.training.run_state import CHECKPOINT_EVERY
from grounded_text.utils.durable import atomic_write
from grounded_text.utils.progress import interactive

log = logging.getLogger("grounded_text.train")
SELECTION_YEAR = "STS16"
CAPTION_LIKE_YEAR = "STS12"  # holds MSRvid
# select_on → (the metric ModelCheckpoint and the selection read, its direction).
MONITORS = {"avg2016": ("val_avg2016", "max"), "dev_retrieval": ("val_rsum", "max"),
            "val_loss": ("val_loss", "min"), "last": ("val_loss", "min"), "sick_val": ("val_sick", "max")}


def train(
    config: ExperimentConfig,
    data_dir: str | Path | None,
    output_dir: str | Path,
    *,
    evaluate: bool = True,
    verbose: str | int = "auto",
    resume: bool = False,
    overwrite: bool = False,
    callbacks=(),
    checkpoint_every: float | None = None,
) -> dict:
    """Runs the whole path: data → vocabulary → model → fit → select → export → evaluate.

    Args:
      config: the experiment; resolved here (``grounded_text.papers.resolve``) unless it already is.
      data_dir: data root (``None``: ``$GROUNDED_TEXT_DATA``).
      output_dir: run directory (created).
      evaluate: score the export on every STS set found under ``data_dir/sts``.
      verbose: Keras ``fit`` verbosity (``"auto"``: a progress bar where stdout is a terminal
        or a notebook, else one plain line per epoch, as ``2``). ``0`` prints nothing at
        all: the STS table goes to the ``grounded_text.train`` logger (DEBUG) instead.
      resume: continue the interrupted run in ``output_dir`` (same config).
      overwrite: replace the run in ``output_dir``.
      callbacks: Keras callbacks passed to ``fit`` after the trainer's own (they see the
        epoch's ``val_avg2016`` / ``val_rsum``); on the chief and every worker alike.
      checkpoint_every: seconds (wall time) between the mid-epoch resume checkpoints (weights,
        optimizer and random states after a compiled call), so that ``resume`` loses at most
        that much of an interrupted epoch; ``None``: ``run_state.CHECKPOINT_EVERY`` (600 s); ``0``: after
        every compiled call (tests); ``math.inf``: at epoch ends only. Not part of the config:
        it never changes what the run computes.

    Returns:
      The ``metrics.json`` content as a dict.

    Every argument is checked, and the data, the model and the callbacks are built, before the
    run directory is written to: with ``overwrite``, the old run's files are deleted only
    when the new run can start (``begin``).

    Raises:
      TypeError: ``callbacks`` is not a list of ``keras.callbacks.Callback``.
      ValueError: a negative or non-numeric ``checkpoint_every``; bad config (the checks of
        ``grounded_text.papers.resolve.resolve_config``,
        ``batch_size < 2``, a training slice with fewer than ``batch_size`` pairs), a
        ``verbose`` Keras does not know, an ``output_dir`` that is, holds or lies inside the
        data folder, constant image features, an empty split.
      grounded_text.training.run_errors.RunDirError (a ValueError): ``output_dir`` holds a
        run and neither ``resume`` nor ``overwrite`` is given, or it cannot be resumed.
      grounded_text.training.run_errors.TrainingDiverged: the loss became NaN/Inf.
    """
    t_start = time.perf_counter()
    # Every argument is checked before the run directory is touched: a bad one never costs the old run.
    callbacks = check_callbacks(callbacks)
    check_verbose(verbose)
    every = check_checkpoint_every(CHECKPOINT_EVERY if checkpoint_every is None else checkpoint_every)
    with usage_errors():  # resolved once (prepare keeps it); refused before the run directory is touched
        config = ensure_resolved(config)
        check_output_dir(output_dir, data_dir, config)
        check_selection_data(config, data_dir)
    # Distribution strategy and mixed precision (the policy is restored on return).
    strategy = make_strategy(config.train.strategy)
    previous_policy = keras.mixed_precision.global_policy().name
    try:
        # The run directory's lock, its "failed" state on a collapse, and a full disk's one-line error.
        with guard_run(output_dir, enabled=is_chief(strategy)):
            run = prepare_run(config, data_dir, output_dir, strategy, resume=resume, overwrite=overwrite)
            run.checkpoint_every = every
            fit(run, verbose=verbose, callbacks=callbacks)
            select(run)
            export(run)
            return record(run, t_start=t_start, evaluate=evaluate, verbose=verbose)
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)


# ----------------------------------------------------------------------------- the steps


@dataclasses.dataclass
class TrainingRun:
    """One run's state, filled in step by step (``prepare_run`` → ``fit`` → ``select`` →
    ``export`` → ``record``)."""

    setup: TrainingSetup
    out: Path  # the run directory (a temporary folder on non-chief workers)
    chief: bool
    resume_state: dict | None
    data_fingerprint: dict | None = None  # feature file, split ids, vocabulary: checked on --resume
    select_on: str = ""
    monitor: str = ""
    mode: str = ""
    sts_dir: Path | None = None
    cb: dict = dataclasses.field(default_factory=dict)  # sts, retrieval, best, snapshot (or None)
    tracker: object = None
    initial_epoch: int = 0
    overwrite: bool = False  # the old run's files are cleared by ``begin``, once the new run can start
    checkpoint_every: float = 600.0  # seconds between mid-epoch checkpoints (run_state.CHECKPOINT_EVERY)
    fit_seconds: float = 0.0
    fit_load: dict = dataclasses.field(default_factory=dict)
    best_epoch: int = 0
    scores: object = None  # float64[epochs], the monitored metric
    export_tower: object = None
    exported: dict = dataclasses.field(default_factory=dict)
    export_dir: Path | None = None
    space_dirs: dict = dataclasses.field(default_factory=dict)
    image_export_dir: Path | None = None

    @property
    def config(self) -> ExperimentConfig:
        return self.setup.config

    @property
    def best_path(self) -> Path:
        return self.out / "checkpoints" / "best.weights.h5"

    @property
    def last_path(self) -> Path:
        return self.out / "checkpoints" / "last.weights.h5"


def prepare_run(config: ExperimentConfig, data_dir, output_dir, strategy, *, resume: bool = False,
                overwrite: bool = False) -> TrainingRun:
    """Step 1: the config resolved (once), the run directory checked, data, vocabulary and
    model built (``prepare_training``) and the data fingerprint checked (``--resume``). Nothing
    is written: ``fit`` calls ``begin`` (the old run cleared, ``config.toml`` and ``vocab.txt``
    written) once its callbacks are built too.

    Raises:
      ValueError, RunDirError: see ``train`` (marked as usage errors: the CLI's exit 2).
    """
    chief = is_chief(strategy)
    with usage_errors():  # bad flags, data or run directory: the CLI's "error: ..." (exit 2)
        config = ensure_resolved(config)
        resume_state = None
        if chief:
            if resume and config.train.strategy == "multi_worker":
                raise RunDirError("--resume is not supported with --strategy multi_worker.")
            resume_state = check_run_dir(output_dir, config.to_dict(), resume=resume, overwrite=overwrite)
        setup = prepare_training(config, data_dir, strategy=strategy)
        # --resume on other data (features, splits, vocabulary, validation sets) is refused.
        fingerprint = check_data(resume_state, setup, validation_files(config, setup.root))
    # Non-chief workers write to a temporary folder (TF multi-worker guide), removed at the end.
    out = Path(output_dir) if chief else Path(tempfile.mkdtemp(prefix="grounded_text_worker_"))
    return TrainingRun(setup, out, chief, resume_state, fingerprint, overwrite=chief and overwrite)


def begin(run: TrainingRun) -> None:
    """The first write of a run, once everything it needs is built (data, model, our callbacks
    and the user's): with ``overwrite`` the old run's files go now (``run_dir.clear_run_dir``,
    only what that run made), then ``checkpoints/``, ``config.toml`` and ``vocab.txt``."""
    if run.overwrite:
        clear_run_dir(run.out, spaces=run.setup.model.spaces)
    (run.out / "checkpoints").mkdir(parents=True, exist_ok=True)
    # The resolved config: ``train --config RUN/config.toml`` replays this run.
    config_text = config_toml(run.setup.config).encode("utf-8")
    atomic_write(run.out / "config.toml", lambda f: f.write(config_text))
    write_vocabulary(run.setup.vocabulary, run.out / "vocab.txt")


def validation_files(config: ExperimentConfig, root: Path) -> list[Path]:
    """The validation data a run scores each epoch on (for the ``--resume`` data check): the
    STS16 folder (``avg2016``, and logged beside ``dev_retrieval``), STS12 (logged beside
    ``dev_retrieval``) or the SICK validation split (``sick_val``); those that exist."""
    sts_dir = Path(root) / "sts"
    years = sts_year_dirs(sts_dir) if sts_dir.is_dir() else {}
    select_on = config.train.select_on
    wanted = []
    if select_on in ("avg2016", "dev_retrieval"):
        wanted.append(years.get(SELECTION_YEAR))
    if select_on == "dev_retrieval":
        wanted.append(years.get(CAPTION_LIKE_YEAR))
    if select_on == "sick_val":
        wanted.append(sick_path(sts_dir, "trial"))
    return [p for p in wanted if p is not None and p.exists()]


def _watch(run: TrainingRun) -> list:
    """Our callbacks, the STS scorer first so that later ones see its metric; sets the
    run's selection (``select_on``, ``monitor``, ``mode``) and ``cb``."""
    model, config = run.setup.model, run.config
    run.sts_dir = run.setup.root / "sts"
    years = sts_year_dirs(run.sts_dir) if run.sts_dir.is_dir() else {}
    run.select_on = select_on = config.train.select_on
    sentence_end = config.text.sentence_end  # the STS sentences end as the training captions do
    callbacks: list = []
    train_captions = run.setup.train_pairs.captions.tolist()
    if model.refit is not None:
        # Statistics the tower holds beside its trained weights (SEQ's PCA) follow the
        # weights each epoch, before the scorer sees the tower.
        callbacks.append(keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: model.refit(train_captions)))
    sts = retrieval = None
    if select_on == "sick_val":
        with usage_errors():  # no SICK validation split: the CLI's "error: ..." (exit 2), before fit
            check_selection_data(config, run.setup.root)
            # In the STS scorer's slot: its per-epoch rows are kept across --resume and recorded.
            sts = SICKValidation(model.text_tower, run.sts_dir, metric_name="val_sick", sentence_end=sentence_end)
        callbacks.append(sts)
    if select_on == "avg2016":
        if SELECTION_YEAR not in years:
            log.warning("No %s folder under %s: selecting on Flickr8k dev loss instead.", SELECTION_YEAR, run.sts_dir)
            run.select_on = select_on = "val_loss"
        else:
            sts = STSValidation(model.text_tower, years[SELECTION_YEAR], metric_name="val_avg2016",
                                sentence_end=sentence_end)
            callbacks.append(sts)
    if select_on == "dev_retrieval" or config.train.snapshots:
        retrieval = DevRetrieval(model.text_tower, model.image_tower, run.setup.dev_pairs)
        callbacks.append(retrieval)
    if select_on == "dev_retrieval" and SELECTION_YEAR in years and sts is None:
        # Logged, not selected on: the semantic score's curve over training (Merkx & Frank, Fig. 4).
        sts = STSValidation(model.text_tower, years[SELECTION_YEAR], metric_name="val_avg2016",
                            sentence_end=sentence_end)
        callbacks.append(sts)
    if select_on == "dev_retrieval" and CAPTION_LIKE_YEAR in years:
        # Logged beside it: STS 2012, whose MSRvid (video descriptions) is the subset closest to
        # captions, so the caption-like and the general semantic curves can be told apart.
        callbacks.append(STSValidation(model.text_tower, years[CAPTION_LIKE_YEAR], metric_name="val_avg2012",
                                       sentence_end=sentence_end))
    run.monitor, run.mode = MONITORS[select_on]
    run.cb = {"sts": sts, "retrieval": retrieval}
    return callbacks + _checkpoints(run)


def _checkpoints(run: TrainingRun) -> list:
    """The best-epoch and last-epoch checkpoints, TensorBoard and the snapshot saver."""
    best = None
    callbacks = []
    if run.select_on != "last":
        best = keras.callbacks.ModelCheckpoint(str(run.best_path), monitor=run.monitor, mode=run.mode,
                                               save_best_only=True, save_weights_only=True)
        callbacks.append(best)
    callbacks += [
        keras.callbacks.ModelCheckpoint(str(run.last_path), save_weights_only=True),
        keras.callbacks.TensorBoard(log_dir=str(run.out / "logs"), write_graph=False),
    ]
    snapshot = None
    if run.config.train.snapshots:
        model = run.setup.model
        snapshot = SnapshotSaver(model.text_tower, run.out / "snapshots", run.config.train.cycle_epochs,
                                 image_tower=model.image_tower, score_key="val_rsum")
        callbacks.append(snapshot)
    run.cb.update(best=best, snapshot=snapshot)
    return callbacks


def fit(run: TrainingRun, *, verbose="auto", callbacks=()) -> None:
    """Step 2: our callbacks, the resume state (``resume.RunTracker``: divergence guard,
    data epoch, per-epoch commits), the user's ``callbacks`` after them (then the progress
    bar, ``callbacks.StepProgbar``: its count ends at the epoch's batches), then Keras
    ``fit`` from the first epoch not done.

    Raises:
      TrainingDiverged: NaN/Inf loss (the run is marked "diverged").
      KeyboardInterrupt: Ctrl-C (the run is marked "interrupted").
    """
    callbacks = check_callbacks(callbacks)
    if verbose == "auto":
        # Keras' bar (verbose 1) redraws with carriage returns and colour codes on any POSIX
        # system, a terminal or not: a log (stdout not a terminal) gets one line per epoch.
        verbose = 1 if interactive(sys.stdout) else 2
    ours = _watch(run)
    config, setup, cb = run.config, run.setup, run.cb
    run.tracker = tracker = RunTracker(
        run.out, config.to_dict(), setup.model.train_model, epochs=config.train.epochs, monitor=run.monitor,
        mode=run.mode, best_checkpoint=cb["best"], best_path=run.best_path, sts_cb=cb["sts"],
        retrieval_cb=cb["retrieval"], snapshot_cb=cb["snapshot"], resume_state=run.resume_state,
        data_fingerprint=run.data_fingerprint, checkpoint_every=run.checkpoint_every)
    begin(run)  # data, model and callbacks are built: only now is the old run (with overwrite) replaced
    run.initial_epoch = tracker.start()
    ours = tracker.callbacks(ours, data_epoch=setup.data_epoch, steps_per_epoch=setup.steps_per_epoch,
                             steps_per_execution=config.train.steps_per_execution,
                             learning_rate=config.train.learning_rate, setup=setup,
                             snapshots=config.train.snapshots)  # collapse guard, disk-space check
    t_fit = time.perf_counter()
    # A wall time means little without the machine's load beside it (shared CPUs).
    run.fit_load["start"] = _load_average()
    if run.initial_epoch:  # resumed: the load when the run first started, where recorded
        run.fit_load["start"] = tracker.state.get("load_start") or run.fit_load["start"]
    else:
        tracker.state["load_start"] = run.fit_load["start"]  # written with the first epoch's commit
    try:
        fit_resumable(setup.model.train_model, setup.train_ds, tracker, start=run.initial_epoch,
                      epochs=config.train.epochs,
                      callbacks=ours + list(callbacks) + progress_callbacks(callbacks, verbose),
                      validation_data=setup.dev_ds, verbose=verbose, shuffle=False)
    except TrainingDiverged:
        tracker.mark("diverged")
        raise
    except KeyboardInterrupt:
        tracker.mark("interrupted")
        raise
    run.fit_seconds = time.perf_counter() - t_fit
    run.fit_load["end"] = _load_average()


def _fit_timing(run: TrainingRun) -> dict:
    """``{"fit": s, "epochs": [s per epoch], "this_session": s}``. A resumed run's ``fit`` is the
    sum of its epochs over every session (None where an epoch's time was not recorded), not the
    time of the session that finished it."""
    epochs = run.tracker.epoch_seconds
    fit = run.fit_seconds
    if run.initial_epoch:
        fit = sum(epochs) if epochs and None not in epochs else None
    return {"fit": fit, "epochs": epochs, "this_session": run.fit_seconds}


def _load_average() -> list | None:
    """The 1, 5 and 15-minute load averages (None where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def select(run: TrainingRun) -> None:
    """Step 3: the best epoch by the monitored metric (NaN/Inf epochs never), or the last
    with ``select_on="last"``; its weights loaded (and the tower's refit statistics).

    Raises:
      TrainingDiverged: ``select_on="last"`` and the last epoch's metric is NaN/Inf.
    """
    model = run.setup.model
    run.scores = scores = np.array(run.tracker.history[run.monitor], dtype=np.float64)
    if run.select_on == "last":
        run.best_epoch = len(scores)
        if not np.isfinite(scores[-1]):
            raise TrainingDiverged(f"the last epoch's {run.monitor} is {scores[-1]}: not exported. Try a "
                                   "lower --learning-rate.", run.best_epoch, 0)
        model.train_model.load_weights(str(run.last_path))
    else:
        run.best_epoch = select_best_epoch(scores, run.mode)
        model.train_model.load_weights(str(run.best_path))
    if model.refit is not None:
        model.refit(run.setup.train_pairs.captions.tolist())


def select_best_epoch(scores, mode: str) -> int:
    """1-based best epoch of per-epoch ``scores`` (``"max"`` or ``"min"``) among the finite
    ones: an epoch scored NaN or ±Inf is never selected.

    Raises:
      TrainingDiverged: no epoch has a finite score.
    """
    scores = np.asarray(scores, dtype=np.float64)
    finite = np.isfinite(scores)
    if not finite.any():
        raise TrainingDiverged(f"no epoch has a finite validation score ({scores.tolist()}): nothing to select. "
                               "Training probably diverged; try a lower --learning-rate.", len(scores), 0,
                               status="failed")
    masked = np.where(finite, scores, -np.inf if mode == "max" else np.inf)
    return int(np.argmax(masked) if mode == "max" else np.argmin(masked)) + 1


def export(run: TrainingRun) -> None:
    """Step 4: ``export/`` (the best epoch's text tower, or the snapshot ensemble), each named
    sentence space ``export_<name>/`` (best epoch; e.g. ``bordes_cg_pg``'s textual u and
    grounded g(u)) and ``image_export/`` (retrieval from the run directory)."""
    model, config = run.setup.model, run.config.to_dict()
    run.export_tower, image_tower = model.text_tower, model.image_tower
    run.exported = {"kind": "best_epoch", "epoch": run.best_epoch}
    snapshot = run.cb["snapshot"]
    if snapshot is not None and snapshot.paths:
        chosen = snapshot.best(run.config.train.ensemble_size)
        run.export_tower = build_snapshot_ensemble(load_snapshot_towers([snapshot.paths[i] for i in chosen]))
        image_tower = build_snapshot_ensemble(load_snapshot_towers([snapshot.image_paths[i] for i in chosen]),
                                              name="image_snapshot_ensemble")
        run.exported = {"kind": "snapshot_ensemble", "snapshots": [str(snapshot.paths[i]) for i in chosen],
                        "snapshot_epochs": [snapshot.epochs[i] for i in chosen],
                        "ranked_on": "val_rsum (dev retrieval)",
                        "all_snapshots": [{"epoch": e, "val_rsum": v} for e, v in zip(snapshot.epochs,
                                                                                       snapshot.scores)]}
    if run.chief:  # recorded before they are written: --overwrite deletes these names, not the user's export_*
        run.tracker.record_exports(["export", *(f"export_{name}" for name in model.spaces), IMAGE_EXPORT_DIR])
    run.export_dir = export_text_tower(run.export_tower, run.out / "export", config)
    run.space_dirs = {name: str(export_text_tower(tower, run.out / f"export_{name}", config))
                      for name, tower in model.spaces.items()}

    store = getattr(run.setup.flickr, "store", None)
    features = store_provenance(store.path) if store is not None and getattr(store, "path", None) else None
    run.image_export_dir = export_image_tower(image_tower, run.out / IMAGE_EXPORT_DIR, config, image_features=features)


def record(run: TrainingRun, *, t_start: float, evaluate: bool = True, verbose="auto") -> dict:
    """Step 5: the STS evaluation of the exports (chief only, when ``evaluate`` and the data
    has ``sts/``) with their model cards, then ``metrics.json``; the run is marked complete.

    Args:
      run: the run, exported.
      t_start: ``time.perf_counter()`` at the run's start (``timing_seconds.total``).
      evaluate, verbose: see ``train``.

    Returns:
      The ``metrics.json`` content.
    """
    metrics = _metrics(run)
    if evaluate and run.chief and run.sts_dir.is_dir():
        _evaluate(run, metrics, verbose)
    metrics["timing_seconds"]["total"] = time.perf_counter() - t_start
    if run.tracker.resumed:
        metrics["resumed"] = {"from_epoch": run.initial_epoch}  # epochs done when it resumed
        if run.tracker.steps_done:  # and the steps of the next one (a mid-epoch checkpoint)
            metrics["resumed"]["from_step"] = run.tracker.steps_done
    payload = json.dumps(metrics, indent=2).encode("utf-8")
    atomic_write(run.out / "metrics.json", lambda f: f.write(payload))
    run.tracker.finish()
    if not run.chief:
        shutil.rmtree(run.out, ignore_errors=True)
    return metrics


def _metrics(run: TrainingRun) -> dict:
    """``metrics.json`` before the evaluation: config, data counts, history, selection,
    parameters, exports, fit time, distribution."""
    setup, cb = run.setup, run.cb
    model, flickr = setup.model, setup.flickr
    return {
        "config": run.config.to_dict(),
        "data": {
            "data_dir": str(setup.root),
            "feature_file": flickr.store.path,
            "feature_dim": flickr.store.dim,
            "images_with_features": flickr.num_images_with_features,
            "dropped_captions_without_features": flickr.dropped_captions,
            "train_pairs": len(setup.train_pairs),
            "train_images": setup.train_pairs.num_images,
            "dev_pairs": len(setup.dev_pairs),
            "vocabulary_size": len(setup.vocabulary),
        },
        "selection": {"monitor": run.monitor, "mode": run.mode, "best_epoch": run.best_epoch,
                      "best_value": float(run.scores[run.best_epoch - 1])},
        "history": run.tracker.history,  # every epoch, the resumed run's earlier ones included
        "sts_validation_subsets": cb["sts"].history if cb["sts"] else [],
        "dev_retrieval": cb["retrieval"].history if cb["retrieval"] else [],
        "parameters": {
            "text_tower": int(model.text_tower.count_params()),
            "image_tower": int(model.image_tower.count_params()),
            "train_model": int(model.train_model.count_params()),
        },
        "exported": run.exported,
        "timing_seconds": _fit_timing(run),
        "load_average": {**run.fit_load, "cores": os.cpu_count()},
        "export_dir": str(run.export_dir),
        "image_export_dir": str(run.image_export_dir),
        "spaces": run.space_dirs,
        "distribution": {"strategy": run.config.train.strategy, "replicas": setup.strategy.num_replicas_in_sync,
                         "precision": setup.precision, "chief": run.chief},
        "collapse_guard": _guard_margin(run.tracker.collapse_guard),
    }


def _guard_margin(guard) -> dict | None:
    """The collapse guard's margin this run: the probe's lowest spread over its start, per tower
    and overall (the guard stops a run below 0.001), and how many checks it made."""
    if guard is None or not guard.checks:
        return None
    ratios = {tower: float(guard.lowest[tower] / guard.start[tower]) for tower in guard.start if guard.start[tower]}
    return {"lowest_relative_spread": min(ratios.values(), default=None), "towers": ratios, "checks": guard.checks}


def _evaluate(run: TrainingRun, metrics: dict, verbose) -> None:
    """Sets ``metrics["evaluation"]``: the STS report of ``export/`` and its headline figures
    (``timing_seconds.evaluate`` times that), and each space's headline (the space ``export/``
    holds is not scored twice); every export's model card is rewritten with its figures."""
    def encoder(path):  # the rule the export records (model_sentence_end): the training captions'
        enc = load(path)
        log.info("sentence ends of %s: %s", path, enc.sentence_end)
        return enc

    t_eval = time.perf_counter()
    report = evaluate_sts(encoder(run.export_dir), run.sts_dir)
    metrics["evaluation"] = evaluation = {"sts": report, "headline": headline_figures(report)}
    metrics["timing_seconds"]["evaluate"] = time.perf_counter() - t_eval
    write_card(run.export_dir, run.export_tower, run.config, evaluation["headline"])
    table = format_markdown(report, f"{run.config.model.name}: STS (cosine, unsupervised) of {run.export_dir}")
    if verbose in (0, "0"):
        # verbose=0 prints nothing; the headline figures are in metrics.json (and the CLI's summary).
        log.debug("%s", table)
    else:
        print(table)
    evaluation["spaces"] = {}
    spaces = run.setup.model.spaces
    for name, space_dir in run.space_dirs.items():
        headline = (evaluation["headline"] if spaces[name] is run.export_tower
                    else headline_figures(evaluate_sts(encoder(space_dir), run.sts_dir)))
        evaluation["spaces"][name] = headline
        write_card(space_dir, spaces[name], run.config, headline)


def write_card(export_dir, tower, config: ExperimentConfig, headline: dict | None) -> Path:
    """The model card of one export (``grounded_text.serving.model_card.write_model_card``) with its
    evaluation figures, its real width (``tower``'s output, float32[B, width]) and parameters."""
    return write_model_card(export_dir, config.to_dict(), headline, embedding_dim=int(tower.output.shape[-1]),
                            parameters=int(tower.count_params()))
