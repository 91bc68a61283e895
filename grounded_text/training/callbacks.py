"""Keras callbacks: model selection on STS, snapshots of cyclic schedules, collapse detection."""

from __future__ import annotations

import math
from pathlib import Path

import keras
import numpy as np

from grounded_text.evaluation.encoders import image_tower_encoder, tower_encoder
from grounded_text.evaluation.sts import score_sts_year


class STSValidation(keras.callbacks.Callback):
    """Scores the text tower on one STS year at each epoch end (VETE's avg2016).

    Adds ``logs[metric_name]`` = mean Pearson r over the year's subsets (cosine,
    unsupervised), so ``ModelCheckpoint``/``TensorBoard`` placed after this callback
    can monitor it. Subset figures go to ``logs[metric_name + "/<subset>"]``.

    Args:
      text_tower: Keras model string[B] → float[B, N].
      year_dir: an ``STS1x-en-test`` folder (VETE tunes on STS 2016).
      metric_name: log key, default ``"val_avg2016"``.
      batch_size: sentences per forward pass.
    """

    def __init__(self, text_tower, year_dir: str | Path, metric_name: str = "val_avg2016", batch_size: int = 1024):
        super().__init__()
        self.text_tower = text_tower
        self.year_dir = Path(year_dir)
        self.metric_name = metric_name
        self.encoder = tower_encoder(text_tower, batch_size)
        self.history: list[dict] = []

    def on_epoch_end(self, epoch, logs=None):
        report = score_sts_year(self.encoder, self.year_dir)
        value = report["pearson"]["mean"]
        if logs is not None:
            logs[self.metric_name] = np.nan if value is None else value
        self.history.append({"epoch": epoch + 1, **{k: v["pearson"] for k, v in report["subsets"].items()}})


class DevRetrieval(keras.callbacks.Callback):
    """Scores caption↔image retrieval on a dev split at each epoch end (the training task).

    Merckx & Frank (2019) select their snapshots on the Flickr8k dev set by the
    task they train for. Adds ``logs[metric_name]`` = rsum (R@1 + R@5 + R@10 of
    both directions, percent, 0–600) and ``logs[metric_name + "/t2i_R@k"]`` /
    ``"/i2t_R@k"``, so ``ModelCheckpoint`` placed after this callback can monitor it.
    Ranks come from ``grounded_text.evaluation.retrieval.retrieval_metrics``.

    Args:
      text_tower: Keras model string[B] → float[B, N].
      image_tower: Keras model float[B, d] → float[B, N].
      pairs: the dev ``CaptionPairs`` (e.g. Flickr8k dev: 1,000 images, 5,000 captions).
      metric_name: log key, default ``"val_rsum"``.
      batch_size: items per forward pass.
    """

    def __init__(self, text_tower, image_tower, pairs, metric_name: str = "val_rsum", batch_size: int = 1024):
        super().__init__()
        from grounded_text.evaluation.retrieval import images_of_pairs

        _, self.caption_image, self.image_features = images_of_pairs(pairs)
        self.captions = pairs.captions.tolist()
        self.metric_name = metric_name
        self.batch_size = int(batch_size)
        self._text = tower_encoder(text_tower, self.batch_size)
        self._image = image_tower_encoder(image_tower, self.image_features.shape[1], self.batch_size)
        self.history: list[dict] = []

    def scores(self) -> dict:
        """``retrieval_metrics`` of the current weights on the dev split."""
        from grounded_text.evaluation.retrieval import cosine_matrix, retrieval_metrics

        text = self._text(self.captions)
        image = self._image(self.image_features)
        return retrieval_metrics(cosine_matrix(text, image), self.caption_image)

    def on_epoch_end(self, epoch, logs=None):
        result = self.scores()
        row = {"epoch": epoch + 1, "rsum": result["rsum"]}
        for short, key in (("t2i", "caption_to_image"), ("i2t", "image_to_caption")):
            for k in (1, 5, 10):
                row[f"{short}_R@{k}"] = result[key][f"R@{k}"]
        if logs is not None:
            logs[self.metric_name] = result["rsum"]
            for key, value in row.items():
                if key not in ("epoch", "rsum"):
                    logs[f"{self.metric_name}/{key}"] = value
        self.history.append(row)


class SnapshotSaver(keras.callbacks.Callback):
    """Saves the text tower at the end of every learning-rate cycle (snapshot ensembles).

    With ``CyclicCosineSchedule`` over cycles of ``cycle_epochs`` epochs (Merckx &
    Frank 2019, §3.3; Huang et al. 2017), the model at the end of each cycle sits at
    the lowest learning rate: a snapshot. After epoch e (1-based) with
    ``e % cycle_epochs == 0`` this callback writes ``directory/snapshot_{k:02d}.keras``
    (k = 1, 2, …: the whole text tower, loadable with ``keras.saving.load_model``) or,
    with ``weights_only=True``, ``snapshot_{k:02d}.weights.h5`` (load into a clone
    of the tower with ``load_snapshot_towers``). Paths are kept in ``self.paths``.

    Args:
      text_tower: Keras model string[B] → float[B, N] (trained through the
        training model; shares its weights).
      directory: output folder (created).
      cycle_epochs: epochs per cycle (>= 1); it must equal the schedule's cycle
        (``steps_per_cycle = cycle_steps(cycle_epochs, steps_per_epoch)``).
      weights_only: save weights instead of whole models.
      keep_last: keep only the last n snapshots on disk (None = all).
      image_tower: also save the image tower at each cycle's end
        (``image_snapshot_{k:02d}.keras``, in ``self.image_paths``), to ensemble the
        image side for retrieval as well.
      score_key: a log key (e.g. ``"val_rsum"``) whose value at each snapshot's epoch
        is kept in ``self.scores`` (None when absent), to rank the snapshots.

    Raises:
      ValueError: ``cycle_epochs < 1`` or ``keep_last < 1``.
    """

    def __init__(
        self,
        text_tower,
        directory: str | Path,
        cycle_epochs: int,
        weights_only: bool = False,
        keep_last: int | None = None,
        image_tower=None,
        score_key: str | None = None,
    ):
        super().__init__()
        if int(cycle_epochs) != cycle_epochs or cycle_epochs < 1:
            raise ValueError(f"SnapshotSaver: cycle_epochs must be an integer >= 1, got {cycle_epochs}.")
        if keep_last is not None and keep_last < 1:
            raise ValueError(f"SnapshotSaver: keep_last must be >= 1 or None, got {keep_last}.")
        self.text_tower = text_tower
        self.directory = Path(directory)
        self.cycle_epochs = int(cycle_epochs)
        self.weights_only = bool(weights_only)
        self.keep_last = keep_last
        self.image_tower = image_tower
        self.score_key = score_key
        self.paths: list[Path] = []
        self.image_paths: list[Path] = []
        self.epochs: list[int] = []
        self.scores: list[float | None] = []

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.cycle_epochs:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        k = (epoch + 1) // self.cycle_epochs
        suffix = ".weights.h5" if self.weights_only else ".keras"
        path = self.directory / f"snapshot_{k:02d}{suffix}"
        if self.weights_only:
            self.text_tower.save_weights(str(path))
        else:
            self.text_tower.save(str(path))
        self.paths.append(path)
        if self.image_tower is not None:
            image_path = self.directory / f"image_snapshot_{k:02d}.keras"
            self.image_tower.save(str(image_path))
            self.image_paths.append(image_path)
        self.epochs.append(epoch + 1)
        value = (logs or {}).get(self.score_key) if self.score_key else None
        self.scores.append(None if value is None else float(value))
        if self.keep_last is not None:
            while len(self.paths) > self.keep_last:
                self.paths.pop(0).unlink(missing_ok=True)
                if self.image_paths:
                    self.image_paths.pop(0).unlink(missing_ok=True)
                self.epochs.pop(0)
                self.scores.pop(0)

    def best(self, n: int | None) -> list[int]:
        """Indices (into ``paths``) of the ``n`` best-scored snapshots, best first; all
        snapshots in order when ``n`` is None or no score was recorded. NaN scores rank last."""
        if n is None or not self.scores or all(s is None for s in self.scores):
            return list(range(len(self.paths)))
        key = [(-s if s is not None and np.isfinite(s) else np.inf) for s in self.scores]
        return sorted(range(len(self.paths)), key=lambda i: (key[i], i))[: int(n)]


def load_snapshot_towers(paths, text_tower=None) -> list:
    """Loads snapshots written by ``SnapshotSaver``.

    Args:
      paths: snapshot files (``.keras`` or ``.weights.h5``).
      text_tower: the architecture to clone for ``.weights.h5`` files (required
        for them; ignored for ``.keras``).

    Returns:
      list of Keras text towers, in the order of ``paths``.

    Raises:
      ValueError: a weights file without ``text_tower``, or an unknown suffix.
    """
    towers = []
    for path in map(Path, paths):
        if path.name.endswith(".keras"):
            towers.append(keras.saving.load_model(str(path)))
        elif path.name.endswith(".weights.h5"):
            if text_tower is None:
                raise ValueError(f"load_snapshot_towers: {path} holds weights only; pass text_tower.")
            clone = keras.models.clone_model(text_tower)
            clone.load_weights(str(path))
            towers.append(clone)
        else:
            raise ValueError(f"load_snapshot_towers: unknown snapshot file {path} (.keras or .weights.h5).")
    return towers


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
    tests/test_run_dir.py checks that healthy runs stay far above the limit.

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
    """

    def __init__(self, text_tower, captions, image_tower=None, image_features=None, *, steps_per_epoch: int,
                 steps_per_execution: int = 1, learning_rate: float = 1e-3, check_every: int = 100,
                 min_ratio: float = 1e-3, min_spread: float = 1e-6, loss_patience: int = 3,
                 loss_rtol: float = 1e-4):
        super().__init__()
        import tensorflow as tf

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
        self._mean, self._step, self._losses = None, 0, []

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
        self.start = self.last = self.spreads()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch) + 1
        self._mean, self._step, self._losses = None, 0, []

    def on_train_batch_end(self, batch, logs=None):
        step = min(int(batch) + 1, self.steps_per_epoch)
        self._seen += max(1, step - self._step)
        stuck = self._loss_stuck((logs or {}).get("loss"), step)
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
            value = mean * step / max(1, step)
        else:  # Keras logs the epoch's running mean: undo it to get this report's loss
            value = (mean * step - self._mean * self._step) / max(1, step - self._step)
        self._mean, self._step = mean, step
        self._losses = (self._losses + [value])[-self.loss_patience:]
        if len(self._losses) < self.loss_patience:
            return False
        return max(self._losses) - min(self._losses) <= self.loss_rtol * max(abs(v) for v in self._losses)

    def _check(self, step: int) -> None:
        from grounded_text.training.run_dir import TrainingDiverged, learning_rate_advice

        self.last = now = self.spreads()
        for tower, spread in now.items():
            start = self.start.get(tower, float("nan"))
            limit = max(self.min_ratio * start if math.isfinite(start) else 0.0, self.min_spread)
            if math.isfinite(spread) and spread >= limit:
                continue
            size = int(self.captions.shape[0] if tower == "text tower" else self.image_features.shape[0])
            what = "non-finite embeddings" if not math.isfinite(spread) else \
                f"relative spread {spread:.3g}, {start:.3g} at the start; limit {limit:.3g}"
            raise TrainingDiverged(
                f"training collapsed: the {tower} maps the {size} probe inputs to nearly one vector ({what}) at "
                f"epoch {self._epoch}, step {step} of {self.steps_per_epoch}, although the loss is finite. Try a "
                f"lower learning rate, {learning_rate_advice(self.learning_rate)}.", self._epoch, step,
                status="failed")
