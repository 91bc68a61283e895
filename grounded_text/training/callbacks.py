"""Keras callbacks: model selection on STS or SICK validation, dev retrieval, snapshots of cyclic
schedules, and the training progress bar (``StepProgbar``)."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np

from grounded_text.data.sts import read_sick, sick_path
from grounded_text.evaluation.encoders import image_tower_encoder, tower_encoder, with_sentence_end
from grounded_text.evaluation.retrieval import images_of_pairs, retrieval_metrics
from grounded_text.evaluation.sts import correlations, score_sts_year
from grounded_text.utils.similarity import cosine_matrix, cosine_rows


def _logged(value: float | None) -> float:
    """A figure as an epoch log: NaN for an undefined one (a constant prediction), which
    ``ModelCheckpoint`` never selects."""
    return np.nan if value is None else value


class StepProgbar(keras.callbacks.ProgbarLogger):
    """Keras' progress bar, whose count never passes the epoch's batches.

    Keras (3.15, ``trainers/epoch_iterator.py``) reports every compiled call of
    ``steps_per_execution`` steps as ending at ``begin + steps_per_execution - 1``, also the
    epoch's last call, which runs only the ``steps_per_epoch % steps_per_execution`` batches
    left: ``ProgbarLogger`` then shows ``944/937`` (937 batches, 59 calls of 16) and a
    negative ETA. The batches run are right (the optimizer counts 937 steps): only the count
    shown is clamped here to the epoch's total (``params["steps"]``, the pipeline's
    cardinality), so the bar ends at ``937/937``.
    """

    def on_train_batch_end(self, batch, logs=None):
        if self.target is not None:
            batch = min(int(batch), int(self.target) - 1)
        super().on_train_batch_end(batch, logs)


def progress_callbacks(callbacks, verbose) -> list:
    """``[StepProgbar()]`` for ``fit``'s ``callbacks`` where Keras would add its own bar
    (``verbose`` not 0, and no ``ProgbarLogger`` among ``callbacks``), else ``[]``.

    Placed last (where Keras puts its own), so the epoch's line shows the logs every other
    callback added (``val_avg2016``, ``val_rsum``).
    """
    if verbose in (0, "0") or any(isinstance(c, keras.callbacks.ProgbarLogger) for c in callbacks):
        return []
    return [StepProgbar()]


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
      sentence_end: the sentences' full stop (``grounded_text.data.sentence_end``; the run's
        ``TextConfig.sentence_end``), default ``"none"``.
    """

    def __init__(self, text_tower, year_dir: str | Path, metric_name: str = "val_avg2016", batch_size: int = 1024,
                 sentence_end: str = "none"):
        super().__init__()
        self.text_tower = text_tower
        self.year_dir = Path(year_dir)
        self.metric_name = metric_name
        self.encoder = with_sentence_end(tower_encoder(text_tower, batch_size), sentence_end)
        self.history: list[dict] = []

    def on_epoch_end(self, epoch, logs=None):
        report = score_sts_year(self.encoder, self.year_dir)
        value = report["pearson"]["mean"]
        if logs is not None:
            logs[self.metric_name] = _logged(value)
            for subset, figures in report["subsets"].items():
                logs[f"{self.metric_name}/{subset}"] = _logged(figures["pearson"])
        self.history.append({"epoch": epoch + 1, **{k: v["pearson"] for k, v in report["subsets"].items()}})


class SICKValidation(keras.callbacks.Callback):
    """Scores the text tower on the SICK validation split at each epoch end (Bordes §4.4).

    Bordes et al. (2019, §4.4) tune on "the Pearson correlation measure on the validation set
    of the SICK benchmark"; the SICK 2014 release's validation split is ``SICK_trial.txt``
    (500 pairs, relatedness 1..5). This callback adds ``logs[metric_name]`` = Pearson r between
    the cosine of the two sentences' embeddings and the gold relatedness (unsupervised: no
    regressor is trained per epoch, so the signal is cheap and never sees SICK test), and
    ``logs[metric_name + "/spearman"]``, so ``ModelCheckpoint`` placed after it can monitor it.
    A constant prediction (a collapsed tower) logs NaN, which selection never picks.

    Args:
      text_tower: Keras model string[B] → float[B, N].
      sts_dir: the STS root holding ``SICK/SICK_trial.txt``.
      metric_name: log key, default ``"val_sick"``.
      batch_size: sentences per forward pass.
      sentence_end: the sentences' full stop (as ``STSValidation``).

    Raises:
      FileNotFoundError: no ``SICK/SICK_trial.txt`` under ``sts_dir``.
      ValueError: a malformed file (``grounded_text.data.sts.read_sick``).
    """

    def __init__(self, text_tower, sts_dir: str | Path, metric_name: str = "val_sick", batch_size: int = 1024,
                 sentence_end: str = "none"):
        super().__init__()

        path = sick_path(sts_dir, "trial")
        if not path.is_file():
            raise FileNotFoundError(f"No SICK validation split {str(path)!r} (SICK_trial.txt of the SICK 2014 "
                                    "release) for select_on='sick_val'.")
        self.pairs = read_sick(sts_dir, "trial")
        self.metric_name = metric_name
        self.encoder = with_sentence_end(tower_encoder(text_tower, batch_size), sentence_end)
        self.history: list[dict] = []

    def scores(self) -> dict:
        """``{"pearson", "spearman", "n", ...}`` of the current weights (``evaluation.sts.correlations``)."""
        first = self.encoder(list(self.pairs.sentences1))
        second = self.encoder(list(self.pairs.sentences2))
        return correlations(cosine_rows(first, second), np.asarray(self.pairs.scores, dtype=np.float64))

    def on_epoch_end(self, epoch, logs=None):
        result = self.scores()
        pearson, spearman = result["pearson"], result["spearman"]
        if logs is not None:
            logs[self.metric_name] = _logged(pearson)
            logs[f"{self.metric_name}/spearman"] = _logged(spearman)
        self.history.append({"epoch": epoch + 1, "SICK/trial": pearson, "SICK/trial spearman": spearman})


class DevRetrieval(keras.callbacks.Callback):
    """Scores caption↔image retrieval on a dev split at each epoch end (the training task).

    Merkx & Frank (2019) select their snapshots on the Flickr8k dev set by the
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

        _, self.caption_image, self.image_features = images_of_pairs(pairs)
        self.captions = pairs.captions.tolist()
        self.metric_name = metric_name
        self.batch_size = int(batch_size)
        self._text = tower_encoder(text_tower, self.batch_size)
        self._image = image_tower_encoder(image_tower, self.image_features.shape[1], self.batch_size)
        self.history: list[dict] = []

    def scores(self) -> dict:
        """``retrieval_metrics`` of the current weights on the dev split."""
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

    With ``CyclicCosineSchedule`` over cycles of ``cycle_epochs`` epochs (Merkx &
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
