"""The guards of a training run, as Keras callbacks: the data order of each epoch
(``DataEpoch``), divergence (``DivergenceGuard``: a non-finite loss), collapse (``CollapseGuard``:
a finite loss with every caption mapped to nearly one vector), and disk space before each
checkpoint (``DiskSpaceCheck``); and the test-only kill and full-disk hooks. What the two run
guards guarantee:

* **Divergence.** ``DivergenceGuard`` stops training as soon as the training loss is NaN
  or Inf (checked after each compiled call of ``steps_per_execution`` steps) with
  ``TrainingDiverged``: the epoch and step, and a lower learning rate to try. An epoch
  whose monitored validation score is not finite is never selected (``select_best_epoch``).
* **Collapse.** A loss can stay finite while the model degenerates (``--learning-rate 1e30``
  maps every sentence to one vector; the in-batch losses are then constant, often 0).
  ``CollapseGuard`` encodes a fixed probe of training captions
  (and their images) every ``check_every`` steps, at each epoch's last step, and at once when
  the training loss stops moving; it stops the run with ``TrainingDiverged`` (status
  ``failed``) when the probe's relative spread falls below a fraction of its value at the
  start of training. A run whose monitored score has no finite epoch is never marked complete.
"""

from __future__ import annotations

import errno
import math
import os
import shutil
import signal
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from grounded_text.training.run_errors import StorageFull, TrainingDiverged, learning_rate_advice
from grounded_text.training.storage_errors import storage_message


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
    ``steps_per_execution`` steps; the message says so. ``resumed``: ``(epoch, steps)`` where
    the run resumed mid-epoch (1-based epoch, steps done before): Keras counts that epoch's
    batches from the resume, the message from the epoch's start.
    """

    def __init__(self, steps_per_epoch: int, steps_per_execution: int, learning_rate: float,
                 resumed: tuple[int, int] | None = None):
        super().__init__()
        self.steps_per_epoch = int(steps_per_epoch)
        self.steps_per_execution = max(1, int(steps_per_execution))
        self.learning_rate = float(learning_rate)
        self.resumed = resumed
        self._epoch, self._offset = 0, 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch) + 1
        self._offset = _offset(self.resumed, self._epoch)

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None:
            return
        value = float(np.asarray(loss).reshape(-1)[0])
        if math.isfinite(value):
            return
        # Keras reports a call as ending at begin + steps_per_execution - 1, also the epoch's
        # last call, which runs only the steps left: its first step is from that end, its
        # last the epoch's.
        end = int(batch) + 1 + self._offset
        step = min(end, self.steps_per_epoch)
        first = min(max(1 + self._offset, end - self.steps_per_execution + 1), step)
        within = "" if first == step else (f" (the loss is checked every {self.steps_per_execution} steps: it "
                                           f"became non-finite in steps {first}-{step})")
        raise TrainingDiverged(
            f"training diverged: the loss became {value} at epoch {self._epoch}, step {step} of "
            f"{self.steps_per_epoch}{within}. Try a lower learning rate, "
            f"{learning_rate_advice(self.learning_rate)}.", self._epoch, step)


class DiskSpaceCheck(keras.callbacks.Callback):
    """Stops training with ``StorageFull`` before a write the disk cannot hold.

    Before training, at each epoch's end (placed first: before the checkpoints are written)
    and at the end (before the exports), compares ``shutil.disk_usage(out).free`` with an
    estimate of what is written next, from the bytes of the model's weights ``W`` and of the
    optimizer's variables ``O``: an epoch writes ``checkpoints/best`` and ``last`` (``W`` each),
    the resume checkpoint (``W + O``, staged beside the previous one) and the copy of a new best
    (``W``), and snapshots (``2 W``) when ``snapshots``; each HDF5 file adds 10 % and
    ``H5_FILE_BYTES`` + ``H5_VARIABLE_BYTES`` per variable (measured: a 121 kB, 3-variable
    model makes a 406 kB file). ``checkpoints/best`` and ``last`` are rewritten in place, so
    their current sizes count as free. The exports need at least ``3 W`` (their graphs vary by
    model, so they are not counted: the estimate stays a lower bound there). ``MARGIN`` covers
    the state, metrics and TensorBoard events. A write that fails anyway (another process
    filling the disk, an export graph larger than the space left) is caught by ``guard_run``.
    """

    MARGIN = 256 << 10
    H5_FILE_BYTES = 128 << 10
    REWRITTEN = ("checkpoints/best.weights.h5", "checkpoints/last.weights.h5")
    H5_VARIABLE_BYTES = 64 << 10

    def __init__(self, out, train_model, *, snapshots: bool = False):
        super().__init__()
        self.out = Path(out)

        def size(variables) -> tuple[int, int]:
            variables = list(variables)
            return sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in variables), len(variables)

        def h5(nbytes: int, count: int) -> int:
            return int(1.1 * nbytes) + self.H5_FILE_BYTES + self.H5_VARIABLE_BYTES * count

        weights, n = size(train_model.weights)
        optimizer = getattr(train_model, "optimizer", None)
        extra, m = size(optimizer.variables) if optimizer is not None and optimizer.built else (2 * weights, 2 * n + 2)
        files = 3 + 2 * bool(snapshots)  # best, last, best copy (+ text and image snapshots)
        self.weights_file = h5(weights, n)
        self.epoch_bytes = files * self.weights_file + h5(weights + extra, n + m) + self.MARGIN
        self.export_bytes = 3 * weights + self.MARGIN

    def _check(self, needed: int, what: str) -> None:
        free = shutil.disk_usage(self.out).free
        if free < needed:
            message = storage_message(self.out, errno.ENOSPC, None)
            raise StorageFull(f"{message[:-1]} ({free / 1e6:.1f} MB free, {what} need about "
                              f"{needed / 1e6:.1f} MB).", str(self.out))

    def on_train_begin(self, logs=None):
        self._check(self.epoch_bytes, "an epoch's checkpoints")

    def on_epoch_end(self, epoch, logs=None):
        reused = sum(min((self.out / name).stat().st_size, self.weights_file) for name in self.REWRITTEN
                     if (self.out / name).is_file())
        self._check(self.epoch_bytes - reused, f"epoch {int(epoch) + 1}'s checkpoints")

    def on_train_end(self, logs=None):
        self._check(self.export_bytes, "the exports")


def relative_spread(embeddings) -> float:
    """How far a batch of embeddings is from one shared vector: the root-mean-square distance
    of the rows to their mean over their root-mean-square norm, ``sqrt(1 - ||mean||² /
    mean ||e_i||²)``, in [0, 1] (float64 arithmetic). 0 when every row is the same vector,
    the zero vector included; scale-free, so it means the same for normalised and raw towers.

    Args:
      embeddings: float[B, N].

    Returns:
      float in [0, 1]; NaN when an entry is NaN or Inf.
    """
    e = np.asarray(embeddings, dtype=np.float64).reshape(len(embeddings), -1)
    if not np.isfinite(e).all():
        return float("nan")
    norm = np.sqrt(np.mean(np.sum(e * e, axis=1)))
    if norm == 0.0:
        return 0.0
    centred = e - e.mean(axis=0, keepdims=True)
    return float(np.sqrt(np.mean(np.sum(centred * centred, axis=1))) / norm)


class CollapseGuard(keras.callbacks.Callback):
    """Stops training when the encoders collapse although the loss stays finite.

    A learning rate far too high (``--learning-rate 1e30``) can map every input to one vector
    (often zero) within a step; the in-batch losses are then constant (often 0) and finite, so
    ``DivergenceGuard`` sees nothing and a ``val_loss`` selection even prefers the dead model.
    This guard encodes a fixed probe, the first ``probe_size`` distinct training captions with
    the text tower (and their images' features with the image tower), and compares the probe's
    ``relative_spread`` with its value when training starts. It raises ``TrainingDiverged``
    (status ``"failed"``) when, for either tower,

        spread < max(min_ratio * spread_at_start, min_spread)

    i.e. the embeddings of different sentences (images) have become one vector up to a factor
    ``min_ratio`` (default 1e-3) of the initial spread. Healthy training spreads embeddings out
    or keeps their spread within a small factor (contrastive losses push negatives apart);
    ``tests/test_run_dir.py`` checks that healthy runs stay far above the limit.

    The probe runs every ``check_every`` optimizer steps, at each epoch's last step (before the
    validation and the checkpoints), and at once when the training loss stops moving: the
    per-report loss (recovered from Keras' running mean) equal to relative ``loss_rtol`` over
    ``loss_patience`` consecutive reports (different batches giving the same loss means the
    model's output no longer depends on its input; the probe confirms, so a loss that is
    legitimately flat never stops a run on its own). A probe of 32 captions costs one small
    forward pass of each tower.

    Args:
      text_tower: Keras model string[B] → float[B, N].
      captions: the probe captions (list of str, at least 2 distinct).
      image_tower, image_features: Keras model float[B, d] → float[B, N] and the probe's
        float32[P, d] features (None: text tower only, e.g. a streamed feature store).
      steps_per_epoch, steps_per_execution, learning_rate: for the message.
      check_every: optimizer steps between probes.
      min_ratio, min_spread: the limit above.
      loss_patience, loss_rtol: when the loss counts as stopped.
      resumed: ``(epoch, steps)`` where the run resumed mid-epoch (see ``DivergenceGuard``).
    """

    def __init__(self, text_tower, captions, image_tower=None, image_features=None, *, steps_per_epoch: int,
                 steps_per_execution: int = 1, learning_rate: float = 1e-3, check_every: int = 100,
                 min_ratio: float = 1e-3, min_spread: float = 1e-6, loss_patience: int = 3,
                 loss_rtol: float = 1e-4, resumed: tuple[int, int] | None = None):
        super().__init__()

        self.resumed = resumed
        self._offset = 0
        self.captions = tf.constant(list(captions), dtype=tf.string)
        self._text = tf.function(lambda s: text_tower(s, training=False), reduce_retracing=True)
        self._image = None
        if image_tower is not None and image_features is not None and len(image_features) >= 2:
            self.image_features = tf.constant(np.asarray(image_features, dtype=np.float32))
            self._image = tf.function(lambda x: image_tower(x, training=False), reduce_retracing=True)
        self.steps_per_epoch = int(steps_per_epoch)
        self.steps_per_execution = max(1, int(steps_per_execution))
        self.learning_rate = float(learning_rate)
        self.check_every = max(1, int(check_every))
        self.min_ratio, self.min_spread = float(min_ratio), float(min_spread)
        self.loss_patience, self.loss_rtol = max(2, int(loss_patience)), float(loss_rtol)
        self.start: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.lowest: dict[str, float] = {}
        self.checks = 0
        self._epoch, self._seen, self._checked = 0, 0, 0
        self._mean, self._step, self._last_step, self._losses = None, 0, 0, []

    @classmethod
    def from_setup(cls, setup, probe_size: int = 32, **kwargs) -> "CollapseGuard":
        """The guard for a ``TrainingSetup``: its towers and the first ``probe_size`` distinct
        training captions (with their images' features unless the store is streamed)."""
        pairs = setup.train_pairs
        captions = pairs.captions.tolist()
        first = {}
        for i, caption in enumerate(captions):
            first.setdefault(caption, i)
            if len(first) == probe_size:
                break
        index = list(first.values())
        features = None
        if not pairs.streamed:
            rows = list(dict.fromkeys(np.asarray(pairs.feature_rows)[index].tolist()))
            features = np.asarray(pairs.features)[rows]
        return cls(setup.model.text_tower, [captions[i] for i in index], setup.model.image_tower, features,
                   **kwargs)

    def spreads(self) -> dict[str, float]:
        """``relative_spread`` of the probe through each tower now."""
        out = {"text tower": relative_spread(np.asarray(self._text(self.captions)))}
        if self._image is not None:
            out["image tower"] = relative_spread(np.asarray(self._image(self.image_features)))
        self.checks += 1
        for tower, value in out.items():
            self.lowest[tower] = min(self.lowest.get(tower, np.inf), value)
        return out

    def on_train_begin(self, logs=None):
        if not self.start:  # a second fit of the same run (the rest of a resumed epoch, then the others) keeps it
            self.start = self.last = self.spreads()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch) + 1
        self._offset = _offset(self.resumed, self._epoch)
        self._mean, self._step, self._last_step, self._losses = None, 0, self._offset, []

    def on_train_batch_end(self, batch, logs=None):
        step = min(int(batch) + 1 + self._offset, self.steps_per_epoch)
        self._seen += max(1, step - self._last_step)
        self._last_step = step
        # Keras' running mean covers the steps this process ran of the epoch.
        stuck = self._loss_stuck((logs or {}).get("loss"), step - self._offset)
        due = self._seen - self._checked >= self.check_every or step >= self.steps_per_epoch
        if stuck or due:
            self._checked = self._seen
            self._losses = []
            self._check(step)

    def _loss_stuck(self, loss, step: int) -> bool:
        if loss is None:
            return False
        mean = float(np.asarray(loss).reshape(-1)[0])
        if not math.isfinite(mean):
            return False  # DivergenceGuard's case
        if self._mean is None:
            value = mean
        else:  # Keras logs the epoch's running mean: undo it to get this report's loss
            value = (mean * step - self._mean * self._step) / max(1, step - self._step)
        self._mean, self._step = mean, step
        self._losses = (self._losses + [value])[-self.loss_patience:]
        if len(self._losses) < self.loss_patience:
            return False
        return max(self._losses) - min(self._losses) <= self.loss_rtol * max(abs(v) for v in self._losses)

    def _check(self, step: int) -> None:
        self.last = now = self.spreads()
        for tower, spread in now.items():
            start = self.start.get(tower, float("nan"))
            limit = max(self.min_ratio * start if math.isfinite(start) else 0.0, self.min_spread)
            if math.isfinite(spread) and spread >= limit:
                continue
            size = (f"{self.captions.shape[0]} probe captions" if tower == "text tower"
                    else f"{self.image_features.shape[0]} probe images")
            what = ("non-finite embeddings" if not math.isfinite(spread)
                    else f"relative spread {spread:.3g}, {start:.3g} at the start; limit {limit:.3g}")
            raise TrainingDiverged(
                f"training collapsed: the {tower} maps the {size} to nearly one vector ({what}) at "
                f"epoch {self._epoch}, step {step} of {self.steps_per_epoch}, although the loss is finite. Try a "
                f"lower learning rate, {learning_rate_advice(self.learning_rate)}.", self._epoch, step,
                status="failed")


class StopAfterEpoch(keras.callbacks.Callback):
    """Ends a ``fit`` after its first epoch (place it last): a run resumed mid-epoch fits the
    rest of that epoch alone. ``stopped_by_other``: a callback before it (``EarlyStopping``, a
    user's) had asked to stop already."""

    stopped_by_other = False

    def on_epoch_end(self, epoch, logs=None):
        self.stopped_by_other = bool(self.model.stop_training)
        self.model.stop_training = True


def _offset(resumed: tuple[int, int] | None, epoch: int) -> int:
    """The steps of ``epoch`` (1-based) run before a mid-epoch resume into it (0 otherwise)."""
    return int(resumed[1]) if resumed is not None and int(resumed[0]) == epoch else 0


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


class _TestENOSPC(keras.callbacks.Callback):
    """Test-only (module docstring): the resume checkpoint of epoch E fails with ENOSPC."""

    def __init__(self, tracker, spec: str):  # tracker: a resume.RunTracker
        super().__init__()
        self.tracker, self.epoch = tracker, int(spec)

    def on_epoch_end(self, epoch, logs=None):  # placed before ResumeCheckpoint
        if int(epoch) + 1 == self.epoch:
            self.tracker.fail_next_save = True
