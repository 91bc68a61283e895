"""Run directories that survive interruptions: protection, resume, divergence, Ctrl-C.

``grounded_text.train`` calls this module in a few places; everything about the state of a
run directory lives here.

* **Protection.** A directory that already holds a run (``run_state.json``,
  ``metrics.json``, ``checkpoints/``, ``export/``, ...) is refused unless ``resume`` (continue
  it) or ``overwrite`` (delete the old run's files first, after the new run's data and
  model were built, so a typo never costs the old run) is given; the error says which
  applies. Files of two runs are therefore never mixed.
* **Resume.** At every epoch end (after the other callbacks, so their results are in the
  logs) ``ResumeCheckpoint`` saves the training model's weights *with the optimizer state*
  (Adam moments and the step counter, hence the learning-rate schedule) and the random
  states of its layers (``keras.random.SeedGenerator``: loss permutations, dropout) to
  ``resume/epoch-NNNN.weights.h5``, copies ``checkpoints/best.weights.h5`` to
  ``resume/best.weights.h5`` when the epoch is the new best, then writes ``run_state.json``
  atomically: the config, the epochs done, the per-epoch history (what ``metrics.json``
  reports), the STS / dev-retrieval callbacks' histories, the snapshots (paths, epochs,
  scores) and the best value and epoch of the selection. That write is the commit point: a
  crash at any moment leaves a state that names files which exist and are complete. A
  resumed run loads the weights and optimizer, restores the callbacks, the best checkpoint
  and ``ModelCheckpoint.best``, and starts ``fit`` at the next epoch; the training data's
  order is a pure function of ``(seed, epoch)`` (``make_dataset(epoch=...)``, set by
  ``DataEpoch``), so a resumed run ends with the same history, best epoch and metrics as
  an uninterrupted one (tests/test_reliability.py checks it after a SIGKILL mid-epoch).
  ``keras.callbacks.BackupAndRestore`` does the weights-and-epoch part, but writes its
  weights file and its epoch file as two non-atomic steps (a crash between them resumes
  the next epoch's weights at the previous epoch's counter) and keeps none of the other
  state, hence this equivalent.
* **Divergence.** ``DivergenceGuard`` stops training as soon as the training loss is NaN
  or Inf (checked after each compiled call of ``steps_per_execution`` steps) with
  ``TrainingDiverged``: the epoch and step, and a lower learning rate to try. An epoch
  whose monitored validation score is not finite is never selected (``select_best_epoch``).
* **Interruption.** ``interrupted_message`` is the one line the CLI prints on Ctrl-C: where
  the last checkpoint is and the command that resumes.

Test-only hook: ``GROUNDED_TEXT_TEST_TRAIN_KILL_AT="E:S"`` makes the process SIGKILL itself
after step S (0-based batch index, as Keras counts) of epoch E (1-based), so the resume test
can kill mid-epoch deterministically. Never set it in use.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import shutil
import signal
import time
from pathlib import Path

import keras
import numpy as np

from grounded_text.durable import atomic_write, fsync_dir, fsync_file

RUN_STATE = "run_state.json"
RESUME_DIR = "resume"
BEST_COPY = "best.weights.h5"
STATE_VERSION = 1
# What a run writes at the top of its directory (a directory holding any of these holds a run).
RUN_ENTRIES = ("run_state.json", "metrics.json", "vocab.txt", "checkpoints", "logs", "snapshots", "resume",
               "export", "image_export")
KILL_ENV = "GROUNDED_TEXT_TEST_TRAIN_KILL_AT"


class RunDirError(ValueError):
    """The output directory cannot be used as asked (holds a run, nothing to resume, ...)."""


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or Inf."""

    def __init__(self, message: str, epoch: int, step: int):
        super().__init__(message)
        self.epoch, self.step = epoch, step


# ---------------------------------------------------------------------------- bad input marking

_USAGE_ATTR = "_grounded_text_usage_error"


@contextlib.contextmanager
def usage_errors():
    """Marks ``ValueError`` / ``FileNotFoundError`` raised inside as bad input (the CLI then
    prints ``error: ...`` and exits 2) without changing their type for library callers."""
    try:
        yield
    except (ValueError, FileNotFoundError) as e:
        setattr(e, _USAGE_ATTR, True)
        raise


def is_usage_error(e: BaseException) -> bool:
    return isinstance(e, RunDirError) or bool(getattr(e, _USAGE_ATTR, False))


# ---------------------------------------------------------------------------- state file


def _plain(value):
    """JSON round trip (tuples → lists, numpy scalars → floats), for comparisons and writes."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def read_state(out: str | Path) -> dict | None:
    """``run_state.json`` of a run directory, or None when absent."""
    path = Path(out) / RUN_STATE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:  # written atomically: only a foreign file gets here
        raise RunDirError(f"{path} is not a readable run state ({e}); pass --overwrite to start over.") from None


def write_state(out: str | Path, state: dict) -> None:
    data = json.dumps(state, indent=1, default=_json_default).encode("utf-8")
    atomic_write(Path(out) / RUN_STATE, lambda f: f.write(data))


def _describe(state: dict | None) -> str:
    if state is None:
        return "a run (made before resumable runs, or not by grounded_text.train)"
    done, total = state.get("epochs_done", 0), state.get("epochs", "?")
    status = state.get("status")
    if status == "complete":
        return f"a finished run ({done} epochs)"
    if status == "diverged":
        return f"a run that diverged after {done} of {total} epochs"
    return f"an unfinished run ({done} of {total} epochs done)"


def holds_run(out: Path) -> bool:
    return out.is_dir() and any((out / name).exists() for name in RUN_ENTRIES)


def _config_diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    keys = sorted(set(old) | set(new))
    out = []
    for k in keys:
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _config_diff(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: {a!r} → {b!r}")
    return out


def check_run_dir(out: str | Path, config: dict, *, resume: bool, overwrite: bool) -> dict | None:
    """Decides what to do with ``out`` before anything is built; changes nothing on disk
    (except finishing an export swap a crash cut short).

    Args:
      out: the run directory.
      config: the resolved config (``ExperimentConfig.to_dict()``).
      resume: continue the run in ``out``.
      overwrite: replace the run in ``out`` (``clear_run_dir``, called later).

    Returns:
      The state to resume from (``resume``), else None.

    Raises:
      RunDirError: both flags; ``out`` holds a run and neither flag is given (the message
        says which flag applies); ``resume`` with nothing to resume, a finished run, or a
        different config (the differing fields are listed).
    """
    from grounded_text.durable import recover_export

    out = Path(out)
    if resume and overwrite:
        raise RunDirError("--resume and --overwrite exclude each other: continue the run, or replace it.")
    if out.exists() and not out.is_dir():
        raise RunDirError(f"--output-dir {str(out)!r} exists and is not a folder.")
    if out.is_dir():
        for old in out.glob(".*.old"):  # an export swap cut short by a crash
            recover_export(out / old.name[1:-len(".old")])
    state = read_state(out) if out.is_dir() else None
    if not holds_run(out):
        if resume:
            raise RunDirError(f"--resume: {str(out)!r} holds no run to resume.")
        return None
    if overwrite:
        return None
    if not resume:
        status = None if state is None else state.get("status")
        hint = "pass --resume to continue it or --overwrite to replace it"
        if state is None or status == "complete":
            hint = "pass --overwrite to replace it"
        elif status == "diverged":  # resuming with the same flags would diverge again
            hint = "pass --overwrite to replace it (e.g. with a lower --learning-rate)"
        raise RunDirError(f"{str(out)!r} already holds {_describe(state)}; {hint} (or choose another --output-dir).")
    if state is None:
        raise RunDirError(f"--resume: {str(out)!r} holds {_describe(state)} with no {RUN_STATE}: nothing to resume "
                          "from; pass --overwrite to train it again.")
    if state.get("version") != STATE_VERSION:
        raise RunDirError(f"--resume: {out / RUN_STATE} has format version {state.get('version')}, this code reads "
                          f"{STATE_VERSION}; pass --overwrite to start over.")
    if state.get("status") == "complete":
        raise RunDirError(f"--resume: {str(out)!r} holds {_describe(state)}: nothing left to do; pass --overwrite "
                          "to train it again.")
    diff = _config_diff(_plain(state["config"]), _plain(config))
    if diff:
        raise RunDirError(f"--resume: the config differs from the interrupted run's ({'; '.join(diff)}); pass the "
                          f"same flags as that run (its config is in {out / RUN_STATE}).")
    return state


def clear_run_dir(out: str | Path) -> None:
    """Deletes a previous run's files from ``out`` (``--overwrite``); other files stay."""
    out = Path(out)
    if not out.is_dir():
        return
    names = set(RUN_ENTRIES) | {p.name for p in out.glob("export_*")} | {p.name for p in out.glob(".export*")} \
        | {p.name for p in out.glob(".image_export*")} | {p.name for p in out.glob(f".{RUN_STATE}.tmp-*")}
    for name in sorted(names):
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    fsync_dir(out)


# ---------------------------------------------------------------------------- selection


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
                               "Training probably diverged; try a lower --learning-rate.", len(scores), 0)
    masked = np.where(finite, scores, -np.inf if mode == "max" else np.inf)
    return int(np.argmax(masked) if mode == "max" else np.argmin(masked)) + 1


# ---------------------------------------------------------------------------- callbacks


class DataEpoch(keras.callbacks.Callback):
    """Sets the data pipeline's epoch variable (``make_dataset(epoch=...)``) at each epoch's
    start, before Keras creates that epoch's iterator."""

    def __init__(self, variable):
        super().__init__()
        self.variable = variable

    def on_epoch_begin(self, epoch, logs=None):
        self.variable.assign(int(epoch))


class DivergenceGuard(keras.callbacks.Callback):
    """Raises ``TrainingDiverged`` as soon as the running training loss is NaN or Inf.

    Keras reports the loss once per compiled call, so the step is known to within
    ``steps_per_execution`` steps; the message says so.
    """

    def __init__(self, steps_per_epoch: int, steps_per_execution: int, learning_rate: float):
        super().__init__()
        self.steps_per_epoch = int(steps_per_epoch)
        self.steps_per_execution = max(1, int(steps_per_execution))
        self.learning_rate = float(learning_rate)
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch) + 1

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None:
            return
        value = float(np.asarray(loss).reshape(-1)[0])
        if math.isfinite(value):
            return
        step = min(int(batch) + 1, self.steps_per_epoch)
        first = max(1, step - self.steps_per_execution + 1)
        within = "" if first == step else \
            f" (the loss is checked every {self.steps_per_execution} steps: it became non-finite in steps {first}-{step})"
        raise TrainingDiverged(
            f"training diverged: the loss became {value} at epoch {self._epoch}, step {step} of "
            f"{self.steps_per_epoch}{within}. Try a lower learning rate, e.g. --learning-rate "
            f"{self.learning_rate / 10:g} (now {self.learning_rate:g}).", self._epoch, step)


class _TestKill(keras.callbacks.Callback):
    """Test-only (module docstring): SIGKILL after step S of epoch E."""

    def __init__(self, spec: str):
        super().__init__()
        epoch, step = spec.split(":")
        self.epoch, self.step = int(epoch), int(step)
        self._current = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._current = int(epoch) + 1

    def on_train_batch_end(self, batch, logs=None):
        if self._current == self.epoch and int(batch) >= self.step:
            os.kill(os.getpid(), signal.SIGKILL)


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
    """

    def __init__(self, out, config: dict, train_model, *, epochs: int, monitor: str, mode: str,
                 best_checkpoint=None, best_path=None, sts_cb=None, retrieval_cb=None, snapshot_cb=None,
                 resume_state: dict | None = None):
        self.out = Path(out)
        self.resume_dir = self.out / RESUME_DIR
        self.model = train_model
        self.best_checkpoint, self.best_path = best_checkpoint, Path(best_path) if best_path else None
        self.sts_cb, self.retrieval_cb, self.snapshot_cb = sts_cb, retrieval_cb, snapshot_cb
        self.resumed = resume_state is not None
        self.state = resume_state or {
            "version": STATE_VERSION, "status": "running", "config": _plain(config), "epochs": int(epochs),
            "epochs_done": 0, "checkpoint": None, "random_state": [], "history": {}, "sts_history": [],
            "retrieval_history": [], "snapshots": None,
            "best": {"monitor": monitor, "mode": mode, "value": None, "epoch": None, "checkpoint": None},
        }

    # -- state ------------------------------------------------------------------------------
    @property
    def epochs_done(self) -> int:
        return int(self.state["epochs_done"])

    @property
    def history(self) -> dict:
        """Per-epoch logs of every epoch so far (resumed ones included), as ``History`` has them."""
        return {k: list(v) for k, v in self.state["history"].items()}

    def last_checkpoint(self) -> Path | None:
        ckpt = self.state.get("checkpoint")
        return self.out / ckpt if ckpt else None

    def mark(self, status: str) -> None:
        """Records ``status`` (``"interrupted"``, ``"diverged"``...) in the state file."""
        self.state["status"] = status
        self.state["updated"] = time.time()
        write_state(self.out, self.state)

    def _random_states(self) -> list:
        """The layers' random-generator states (``SeedGenerator``), which ``save_weights`` skips."""
        weights = {id(w) for w in self.model.weights}
        return [v for v in self.model.variables if id(v) not in weights]

    # -- start ------------------------------------------------------------------------------
    def start(self) -> int:
        """Writes the initial state (fresh run) or restores everything (resume); returns the
        epoch ``fit`` starts at."""
        self.out.mkdir(parents=True, exist_ok=True)
        if not self.resumed:
            self.mark("running")
            return 0
        state = self.state
        ckpt = self.last_checkpoint()
        if ckpt is not None:
            optimizer = self.model.optimizer
            if optimizer is not None and not optimizer.built:
                optimizer.build(self.model.trainable_variables)  # its variables must exist to be loaded
            self.model.load_weights(str(ckpt))
            saved = state.get("random_state", [])
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
                  learning_rate: float) -> list:
        """``callbacks`` with the data-epoch setter and the divergence guard first and the
        resume checkpoint last (after the callbacks whose results it records)."""
        first = [DivergenceGuard(steps_per_epoch, steps_per_execution, learning_rate)]
        if data_epoch is not None:
            first.insert(0, DataEpoch(data_epoch))
        last = [ResumeCheckpoint(self)]
        if os.environ.get(KILL_ENV):
            last.append(_TestKill(os.environ[KILL_ENV]))
        return first + list(callbacks) + last

    # -- epoch end --------------------------------------------------------------------------
    def commit_epoch(self, epoch: int, logs: dict) -> None:
        """Checkpoints epoch ``epoch`` (1-based) and writes the state (the commit point)."""
        self.resume_dir.mkdir(parents=True, exist_ok=True)
        name = f"epoch-{epoch:04d}.weights.h5"
        staged = self.resume_dir / f".tmp-{name}"  # Keras wants the .weights.h5 suffix
        self.model.save_weights(str(staged))
        fsync_file(staged)
        os.replace(staged, self.resume_dir / name)
        state = self.state
        best = state["best"]
        if self.best_checkpoint is not None:
            value = self.best_checkpoint.best
            value = None if value is None or not math.isfinite(float(value)) else float(value)
            if value is not None and value != best.get("value"):
                # This epoch is the new best: keep its checkpoint with the committed state.
                _copy_atomic(self.best_path, self.resume_dir / BEST_COPY)
                best.update(value=value, epoch=epoch, checkpoint=f"{RESUME_DIR}/{BEST_COPY}")
        for key, value in (logs or {}).items():
            state["history"].setdefault(key, []).append(_to_float(value))
        if self.sts_cb is not None:
            state["sts_history"] = _plain(self.sts_cb.history)
        if self.retrieval_cb is not None:
            state["retrieval_history"] = _plain(self.retrieval_cb.history)
        if self.snapshot_cb is not None:
            rel = lambda p: str(Path(p).relative_to(self.out))  # noqa: E731
            state["snapshots"] = {"paths": [rel(p) for p in self.snapshot_cb.paths],
                                  "image_paths": [rel(p) for p in self.snapshot_cb.image_paths],
                                  "epochs": list(self.snapshot_cb.epochs), "scores": list(self.snapshot_cb.scores)}
        state["random_state"] = [{"path": v.path, "value": np.asarray(v.numpy()).tolist()}
                                 for v in self._random_states()]
        previous = self.last_checkpoint()
        state["epochs_done"] = int(epoch)
        state["checkpoint"] = f"{RESUME_DIR}/{name}"
        state["status"] = "running"
        state["updated"] = time.time()
        write_state(self.out, state)
        if previous is not None and previous.name != name:
            previous.unlink(missing_ok=True)

    # -- end --------------------------------------------------------------------------------
    def finish(self) -> None:
        """Marks the run complete and removes the resume checkpoints (weights with optimizer
        state: three times the model's size)."""
        self.state["checkpoint"] = None
        self.state["best"]["checkpoint"] = None
        self.mark("complete")
        shutil.rmtree(self.resume_dir, ignore_errors=True)


class ResumeCheckpoint(keras.callbacks.Callback):
    """Calls ``RunTracker.commit_epoch`` at each epoch end (place it last)."""

    def __init__(self, tracker: RunTracker):
        super().__init__()
        self.tracker = tracker

    def on_epoch_end(self, epoch, logs=None):
        self.tracker.commit_epoch(int(epoch) + 1, logs or {})


def _to_float(value) -> float:
    return float(np.asarray(value).reshape(-1)[0])


def _copy_atomic(src: Path, dst: Path) -> None:
    staged = dst.with_name(f".tmp-{dst.name}")
    shutil.copyfile(src, staged)
    fsync_file(staged)
    os.replace(staged, dst)
    fsync_dir(dst.parent)


# ---------------------------------------------------------------------------- Ctrl-C


def interrupted_message(out: str | Path, argv: list[str] | None) -> str:
    """The one line printed when ``train`` is interrupted: where the last checkpoint is and
    how to resume."""
    state = None
    try:
        state = read_state(out)
    except RunDirError:
        pass
    if state is None or state.get("status") == "complete":  # this run wrote nothing yet (or an old run's state)
        again = shlex.join(["python", "-m", "grounded_text.train", *(argv or [])])
        return f"interrupted before training started: nothing of this run was saved; run `{again}` again."
    args = [a for a in (argv or []) if a not in ("--overwrite", "--resume")]
    command = shlex.join(["python", "-m", "grounded_text.train", *args, "--resume"])
    if not state.get("checkpoint"):
        return (f"interrupted before the first epoch ended: no checkpoint in {out} yet; `{command}` starts the "
                "run again from epoch 1.")
    return (f"interrupted: the last checkpoint is {Path(out) / state['checkpoint']} (epoch {state['epochs_done']} "
            f"of {state['epochs']}); continue with `{command}`.")
