"""Resume: ``RunTracker`` keeps a run directory's state through a fit (the callbacks it adds,
the epoch checkpoints with the optimizer state, the commit of ``run_state.json``) and restores it
on ``--resume``; ``ResumeCheckpoint`` is its epoch-end callback. The protocol it follows (what is
committed when, and what a crash leaves):

* **Resume.** At every epoch end (after the other callbacks, so their results are in the
  logs) ``ResumeCheckpoint`` saves the training model's weights *with the optimizer state*
  (Adam moments and the step counter, hence the learning-rate schedule) and the random
  states of its layers (``keras.random.SeedGenerator``: loss permutations, dropout) to
  ``resume/epoch-NNNN.weights.h5``, copies ``checkpoints/best.weights.h5`` to
  ``resume/best-NNNN.best.weights.h5`` when the epoch is the new best (a new name: the
  committed state's copy stays whole until the next commit), then writes ``run_state.json``
  atomically: the config, the epochs done, the per-epoch history (what ``metrics.json``
  reports), the STS / dev-retrieval callbacks' histories, the snapshots (paths, epochs,
  scores) and the best value and epoch of the selection. That write is the commit point: a
  crash at any moment leaves a state that names files which exist and are complete. A
  resumed run loads the weights and optimizer, restores the callbacks, the best checkpoint
  and ``ModelCheckpoint.best``, and starts ``fit`` at the next epoch; the training data's
  order is a pure function of ``(seed, epoch)`` (``make_dataset(epoch=...)``, set by
  ``DataEpoch``), so a resumed run ends with the same history, best epoch and metrics as
  an uninterrupted one (tests/test_reliability.py checks it after a SIGKILL mid-epoch).
* **Mid-epoch resume.** Every ``checkpoint_every`` seconds within an epoch (``train``'s
  argument, ``--checkpoint-every``; default ``run_state.CHECKPOINT_EVERY``) ``ResumeCheckpoint`` commits
  a step checkpoint the same way: ``resume/step-EEEE-SSSSSSS.weights.h5`` (weights, optimizer)
  and the state's ``step`` (epoch, steps done, their seconds, the epoch's running training
  means, the random states), a new file name each time. A resumed run loads the latest one of
  the epoch after the last committed, fits the rest of that epoch alone (its batches skipped:
  ``fit_resumable``) and then the other epochs; the epoch's committed means weight the
  steps before and after the resume. The epoch's commit clears ``step`` and its file.
  ``keras.callbacks.BackupAndRestore`` does the weights-and-epoch part, but writes its
  weights file and its epoch file as two non-atomic steps (a crash between them resumes
  the next epoch's weights at the previous epoch's counter) and keeps none of the other
  state, hence this equivalent.
"""

from __future__ import annotations

import errno
import math
import os
import shutil
import time
from pathlib import Path

import keras
import numpy as np

from grounded_text.training.guards import (
    CollapseGuard,
    DataEpoch,
    DiskSpaceCheck,
    DivergenceGuard,
    StopAfterEpoch,
    _TestENOSPC,
    _TestKill,
)
from grounded_text.training.run_errors import RunDirError, TrainingDiverged
from grounded_text.training.run_state import (
    BEST_COPY,
    ENOSPC_ENV,
    KILL_ENV,
    RESUME_DIR,
    STATE_VERSION,
    check_state_paths,
    confined_path,
    plain,
    step_of,
    write_state,
)
from grounded_text.utils.durable import atomic_save, atomic_write


class RunTracker:
    """The resumable state of one training run (module docstring).

    Args:
      out: the run directory.
      config: the resolved config dict (stored; a resume must match it).
      train_model: the compiled Keras training model (weights + optimizer are checkpointed).
      epochs: the run's total epochs.
      monitor, mode: the selection metric and ``"max"``/``"min"``.
      best_checkpoint: the ``ModelCheckpoint`` of the best epoch (None for ``select_on="last"``).
      best_path: its file.
      sts_cb, retrieval_cb, snapshot_cb: the callbacks whose state carries over (or None).
      resume_state: ``check_run_dir``'s result (None: a fresh run).
      data_fingerprint: ``check_data``'s result, recorded in a fresh run's state.
      checkpoint_every: seconds between the mid-epoch checkpoints (``commit_step``); 0: after
        every compiled call; None: at epoch ends only.
    """

    def __init__(self, out, config: dict, train_model, *, epochs: int, monitor: str, mode: str,
                 best_checkpoint=None, best_path=None, sts_cb=None, retrieval_cb=None, snapshot_cb=None,
                 resume_state: dict | None = None, data_fingerprint: dict | None = None,
                 checkpoint_every: float | None = None):
        self.out = Path(out)
        self.checkpoint_every = None if checkpoint_every is None else max(0.0, float(checkpoint_every))
        self.steps_per_epoch = None  # set by callbacks()
        # The mid-epoch checkpoint start() resumed from (its epoch, steps, logs, seconds), or None.
        self.resumed_step = None
        self.fail_next_save = False
        self.collapse_guard = None  # set by callbacks(setup=...); its margin goes into metrics.json
        self.resume_dir = self.out / RESUME_DIR
        self.model = train_model
        self.best_checkpoint, self.best_path = best_checkpoint, Path(best_path) if best_path else None
        self.sts_cb, self.retrieval_cb, self.snapshot_cb = sts_cb, retrieval_cb, snapshot_cb
        self.resumed = resume_state is not None
        self.state = resume_state or {
            "version": STATE_VERSION, "status": "running", "config": plain(config), "epochs": int(epochs),
            "epochs_done": 0, "checkpoint": None, "random_state": [], "history": {}, "sts_history": [],
            "retrieval_history": [], "snapshots": None,
            "best": {"monitor": monitor, "mode": mode, "value": None, "epoch": None, "checkpoint": None},
        }
        if data_fingerprint is not None and not self.resumed:
            self.state["data"] = dict(data_fingerprint)

    # -- state ------------------------------------------------------------------------------
    @property
    def epochs_done(self) -> int:
        return int(self.state["epochs_done"])

    @property
    def steps_done(self) -> int:
        """Optimizer steps of the epoch ``fit`` starts at that ran before the resume (0 unless
        ``start`` resumed from a mid-epoch checkpoint): its data skips that many batches."""
        return int(self.resumed_step["steps"]) if self.resumed_step else 0

    @property
    def history(self) -> dict:
        """Per-epoch logs of every epoch so far (resumed ones included), as ``History`` has them."""
        return {k: list(v) for k, v in self.state["history"].items()}

    def last_checkpoint(self) -> Path | None:
        ckpt = self.state.get("checkpoint")
        return confined_path(self.out, ckpt, "checkpoint") if ckpt else None

    def mark(self, status: str) -> None:
        """Records ``status`` (``"interrupted"``, ``"diverged"``...) in the state file."""
        self.state["status"] = status
        self.state["updated"] = time.time()
        write_state(self.out, self.state)

    def record_exports(self, names: list[str]) -> None:
        """Records the export folders the run is about to write (``exports`` in the state), so
        that ``--overwrite`` later deletes those and no other ``export_*`` of the folder."""
        self.state["exports"] = list(names)
        self.state["updated"] = time.time()
        write_state(self.out, self.state)

    def _random_states(self) -> list:
        """The layers' random-generator states (``SeedGenerator``), which ``save_weights`` skips."""
        weights = {id(w) for w in self.model.weights}
        return [v for v in self.model.variables if id(v) not in weights]

    def _random_state_record(self) -> list:
        """The random-generator states as ``run_state.json`` keeps them (``[{"path", "value"}]``)."""
        return [{"path": v.path, "value": np.asarray(v.numpy()).tolist()} for v in self._random_states()]

    # -- start ------------------------------------------------------------------------------
    def start(self) -> int:
        """Writes the initial state (fresh run) or restores everything (resume); returns the
        epoch ``fit`` starts at."""
        self.out.mkdir(parents=True, exist_ok=True)
        if not self.resumed:
            self.mark("running")
            return 0
        state = self.state
        check_state_paths(self.out, state)
        ckpt, saved = self.last_checkpoint(), state.get("random_state", [])
        step = step_of(state)
        if step is not None:  # killed mid-epoch after a step commit: continue from that step
            ckpt, saved = confined_path(self.out, step["checkpoint"], "step.checkpoint"), step["random_state"]
            self.resumed_step = {k: step[k] for k in ("epoch", "steps", "logs", "seconds")}
        if ckpt is not None:
            optimizer = self.model.optimizer
            if optimizer is not None and not optimizer.built:
                optimizer.build(self.model.trainable_variables)  # its variables must exist to be loaded
            self.model.load_weights(str(ckpt))
            variables = self._random_states()
            if len(saved) != len(variables):
                raise RunDirError(f"--resume: {len(saved)} random states saved, the model has {len(variables)}.")
            for v, s in zip(variables, saved):
                v.assign(np.asarray(s["value"], dtype=v.dtype))
        best = state["best"]
        if self.best_checkpoint is not None and best.get("value") is not None:
            self.best_checkpoint.best = float(best["value"])
            if best.get("checkpoint"):
                _copy_atomic(self.out / best["checkpoint"], self.best_path)
        if self.sts_cb is not None:
            self.sts_cb.history = list(state.get("sts_history", []))
        if self.retrieval_cb is not None:
            self.retrieval_cb.history = list(state.get("retrieval_history", []))
        snaps = state.get("snapshots")
        if self.snapshot_cb is not None and snaps:
            self.snapshot_cb.paths = [self.out / p for p in snaps["paths"]]
            self.snapshot_cb.image_paths = [self.out / p for p in snaps["image_paths"]]
            self.snapshot_cb.epochs = list(snaps["epochs"])
            self.snapshot_cb.scores = list(snaps["scores"])
        self.mark("running")
        return self.epochs_done

    def callbacks(self, callbacks: list, *, data_epoch=None, steps_per_epoch: int, steps_per_execution: int,
                  learning_rate: float, setup=None, snapshots: bool = False) -> list:
        """``callbacks`` with the data-epoch setter, the divergence guard, the free-space check
        and (given ``setup``) the collapse guard first, and the resume checkpoint last (after
        the callbacks whose results it records).

        Args:
          setup: a ``TrainingSetup`` (``model.text_tower``, ``model.image_tower``,
            ``train_pairs``): the collapse guard's towers and probe (None: no collapse guard).
          snapshots: the run saves snapshots (the free-space estimate counts them).
        """
        self.steps_per_epoch = int(steps_per_epoch)
        resumed = (int(self.resumed_step["epoch"]), self.steps_done) if self.resumed_step else None
        first = [DivergenceGuard(steps_per_epoch, steps_per_execution, learning_rate, resumed=resumed),
                 DiskSpaceCheck(self.out, self.model, snapshots=snapshots)]
        if setup is not None:
            self.collapse_guard = CollapseGuard.from_setup(setup, steps_per_epoch=steps_per_epoch,
                                                           steps_per_execution=steps_per_execution,
                                                           learning_rate=learning_rate, resumed=resumed)
            first.append(self.collapse_guard)
        if data_epoch is not None:
            first.insert(0, DataEpoch(data_epoch))
        last = [ResumeCheckpoint(self)]
        if os.environ.get(ENOSPC_ENV):
            last.insert(0, _TestENOSPC(self, os.environ[ENOSPC_ENV]))
        if os.environ.get(KILL_ENV):
            last.append(_TestKill(os.environ[KILL_ENV]))
        return first + list(callbacks) + last

    # -- epoch end --------------------------------------------------------------------------
    @property
    def epoch_seconds(self) -> list:
        """Each committed epoch's wall time in seconds, over every session of the run (None for
        an epoch committed by a version that did not record it)."""
        seconds = list(self.state.get("epoch_seconds", []))
        return [None] * (self.epochs_done - len(seconds)) + seconds[-self.epochs_done:] if self.epochs_done else []

    def commit_step(self, epoch: int, steps: int, logs: dict, seconds: float) -> None:
        """Checkpoints the training model after ``steps`` optimizer steps of epoch ``epoch``
        (1-based), with the optimizer and random states, and writes the state (its commit
        point): a run killed later in the epoch resumes from this step, not from the epoch's
        start. ``logs``: the epoch's running training means so far (Keras' batch logs), so that
        the epoch's committed means cover all of its steps; ``seconds``: its wall time so far."""
        self.resume_dir.mkdir(parents=True, exist_ok=True)
        name = f"step-{epoch:04d}-{steps:07d}.weights.h5"  # a new name each time: the committed one stays whole
        atomic_save(self.resume_dir / name, lambda staged: self.model.save_weights(str(staged)), ".weights.h5")
        previous = self.state.get("step")
        self.state["step"] = {
            "epoch": int(epoch), "steps": int(steps), "checkpoint": f"{RESUME_DIR}/{name}",
            "seconds": round(float(seconds), 3), "logs": self._running(epoch, steps, logs),
            "random_state": self._random_state_record()}
        self.state["updated"] = time.time()
        write_state(self.out, self.state)
        self._drop_step_file(previous, keep=name)

    def _drop_step_file(self, step, keep: str | None = None) -> None:
        if isinstance(step, dict) and step.get("checkpoint"):
            path = confined_path(self.out, step["checkpoint"], "step.checkpoint")
            if path.name != keep:
                path.unlink(missing_ok=True)

    def _running(self, epoch: int, steps: int, logs: dict) -> dict:
        """``logs`` (Keras' running training means over the steps this process ran of epoch
        ``epoch``, 1-based, ``steps`` of it done) as means over all ``steps``: an epoch resumed
        from a mid-epoch checkpoint ran its first ``s`` steps in an earlier process, whose
        committed means are weighted in."""
        out = {k: _to_float(v) for k, v in (logs or {}).items()}
        resumed = self.resumed_step
        if resumed is None or resumed["epoch"] != epoch:
            return out
        before = int(resumed["steps"])
        for key, mean in resumed.get("logs", {}).items():
            if key in out and not key.startswith("val_") and steps > before:
                out[key] = (float(mean) * before + out[key] * (steps - before)) / steps
        return out

    def commit_epoch(self, epoch: int, logs: dict, seconds: float | None = None) -> None:
        """Checkpoints epoch ``epoch`` (1-based) and writes the state (the commit point);
        ``seconds``: the epoch's wall time, kept so that a resumed run's training time adds up."""
        self.resume_dir.mkdir(parents=True, exist_ok=True)
        name = f"epoch-{epoch:04d}.weights.h5"

        def save(staged: Path) -> None:
            if self.fail_next_save:  # test hook (module docstring)
                self.fail_next_save = False
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(staged))
            self.model.save_weights(str(staged))

        # Staged beside the target and removed on failure: never a torn file (the state does not name it).
        atomic_save(self.resume_dir / name, save, ".weights.h5")  # Keras wants the suffix
        state = self.state
        best = state["best"]
        previous_best = best.get("checkpoint")
        if self.best_checkpoint is not None:
            value = self.best_checkpoint.best
            value = None if value is None or not math.isfinite(float(value)) else float(value)
            if value is not None and value != best.get("value"):
                # This epoch is the new best: keep its checkpoint with the committed state, under
                # a new name, so the committed state's copy stays intact until the next commit.
                copy = f"best-{epoch:04d}.{BEST_COPY}"
                _copy_atomic(self.best_path, self.resume_dir / copy)
                best.update(value=value, epoch=epoch, checkpoint=f"{RESUME_DIR}/{copy}")
        for key, value in self._running(epoch, self.steps_per_epoch or 0, logs).items():
            state["history"].setdefault(key, []).append(value)
        if self.sts_cb is not None:
            state["sts_history"] = plain(self.sts_cb.history)
        if self.retrieval_cb is not None:
            state["retrieval_history"] = plain(self.retrieval_cb.history)
        if self.snapshot_cb is not None:
            rel = lambda p: str(Path(p).relative_to(self.out))  # noqa: E731
            state["snapshots"] = {"paths": [rel(p) for p in self.snapshot_cb.paths],
                                  "image_paths": [rel(p) for p in self.snapshot_cb.image_paths],
                                  "epochs": list(self.snapshot_cb.epochs), "scores": list(self.snapshot_cb.scores)}
        state["random_state"] = self._random_state_record()
        step, state["step"] = state.get("step"), None
        recorded = self.epoch_seconds  # aligned with the epochs committed so far
        state["epoch_seconds"] = recorded + [None if seconds is None else round(float(seconds), 3)]
        previous = self.last_checkpoint()
        state["epochs_done"] = int(epoch)
        state["checkpoint"] = f"{RESUME_DIR}/{name}"
        state["status"] = "running"
        state["updated"] = time.time()
        write_state(self.out, state)
        if previous is not None and previous.name != name:
            previous.unlink(missing_ok=True)
        self._drop_step_file(step)
        if previous_best and previous_best != best.get("checkpoint"):
            confined_path(self.out, previous_best, "best.checkpoint").unlink(missing_ok=True)

    # -- end --------------------------------------------------------------------------------
    def finish(self) -> None:
        """Marks the run complete and removes the resume checkpoints (weights with optimizer
        state: three times the model's size).

        Raises:
          TrainingDiverged: (status ``failed``, recorded) the monitored score has no finite
            epoch: such a run is never marked complete.
        """
        monitor = self.state["best"].get("monitor")
        scores = np.asarray(self.state["history"].get(monitor, []), dtype=np.float64)
        if scores.size and not np.isfinite(scores).any():
            error = TrainingDiverged(f"no epoch has a finite {monitor} ({scores.tolist()}): the run is not marked "
                                     "complete. Try a lower --learning-rate.", len(scores), 0, status="failed")
            self.state["error"] = str(error)
            self.mark("failed")
            raise error
        self.state["checkpoint"] = None
        self.state["best"]["checkpoint"] = None
        self.mark("complete")
        shutil.rmtree(self.resume_dir, ignore_errors=True)


class ResumeCheckpoint(keras.callbacks.Callback):
    """Calls ``RunTracker.commit_epoch`` at each epoch end and, every
    ``tracker.checkpoint_every`` seconds within an epoch, ``RunTracker.commit_step`` (place it
    last). In the epoch a run resumed into mid-epoch, Keras counts batches from the resume:
    the steps before it (``tracker.steps_done``) are added here."""

    def __init__(self, tracker: RunTracker):
        super().__init__()
        self.tracker = tracker
        self.t_epoch = self.t_saved = None
        self.epoch, self.offset, self.before = 0, 0, 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = int(epoch) + 1
        resumed = self.tracker.resumed_step
        into = resumed is not None and int(resumed["epoch"]) == self.epoch
        # The epoch's steps and seconds in the process that ran its start.
        self.offset = int(resumed["steps"]) if into else 0
        self.before = float(resumed.get("seconds") or 0.0) if into else 0.0
        self.t_epoch = self.t_saved = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        every = self.tracker.checkpoint_every
        if every is None or self.t_saved is None or time.perf_counter() - self.t_saved < every:
            return
        total = self.tracker.steps_per_epoch
        steps = self.offset + int(batch) + 1
        if total is not None and steps >= int(total):  # the epoch's end commits it
            return
        self.tracker.commit_step(self.epoch, steps, logs or {}, self.before + time.perf_counter() - self.t_epoch)
        self.t_saved = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        seconds = None if self.t_epoch is None else self.before + time.perf_counter() - self.t_epoch
        self.tracker.commit_epoch(int(epoch) + 1, logs or {}, seconds)


def fit_resumable(model, train_ds, tracker: RunTracker, *, start: int, epochs: int, callbacks: list,
                  **fit_kwargs) -> None:
    """Keras ``fit`` of ``model`` on ``train_ds`` from epoch ``start`` (0-based, from
    ``tracker.start()``) to ``epochs``. Where the tracker resumed mid-epoch
    (``tracker.steps_done`` > 0), first the rest of that epoch alone: ``train_ds``, whose order
    is the epoch's (``make_dataset(epoch=...)``), with the batches already run skipped; then the
    other epochs. The callbacks see both calls (``on_train_begin`` twice).

    Args:
      train_ds: a finite ``tf.data.Dataset`` of one epoch's batches.
      callbacks: ``tracker.callbacks(...)`` and any others.
      fit_kwargs: passed to ``fit`` (``validation_data``, ``verbose``, ``shuffle``...).
    """
    if start < epochs and tracker.steps_done:
        stop = StopAfterEpoch()
        model.fit(train_ds.skip(tracker.steps_done), epochs=epochs, initial_epoch=start,
                  callbacks=list(callbacks) + [stop], **fit_kwargs)
        start = epochs if stop.stopped_by_other else start + 1
    if start < epochs:
        model.fit(train_ds, epochs=epochs, initial_epoch=start, callbacks=list(callbacks), **fit_kwargs)


def _to_float(value) -> float:
    return float(np.asarray(value).reshape(-1)[0])


def _copy_atomic(src: Path, dst: Path) -> None:
    with open(src, "rb") as f:
        atomic_write(dst, lambda out: shutil.copyfileobj(f, out))
