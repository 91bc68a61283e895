"""Progress displays of the long steps: the training bar ends at the batches each epoch runs
(no ``944/937``), and the evaluation suite reports its sections on stderr unless
``--no-progress``."""

from __future__ import annotations

import numpy as np
import pytest

WORDS = "a dog runs on the beach man rides red bike two kids play in snow cat sleeps".split()


def _bucketed_pairs(n: int, n_images: int = 9, d: int = 3):
    from grounded_text.data.pairs import CaptionPairs

    rng = np.random.default_rng(0)
    caps = np.array([" ".join(rng.choice(WORDS, size=int(rng.integers(1, 12)))) for _ in range(n)])
    rows = rng.integers(0, n_images, size=n).astype(np.int64)
    return CaptionPairs(caps, np.array([f"im{r}" for r in rows]), rows,
                        rng.normal(size=(n_images, d)).astype(np.float32))


@pytest.fixture
def bar_updates(monkeypatch):
    """Every ``keras.utils.Progbar.update`` call: (count shown, total, finalize)."""
    from keras.src.utils import progbar

    seen = []
    real = progbar.Progbar.update

    def update(self, current, values=None, finalize=None):
        seen.append((int(current), self.target, bool(finalize)))
        return real(self, current, values, finalize)

    monkeypatch.setattr(progbar.Progbar, "update", update)
    return seen


def test_training_bar_ends_at_the_batches_each_epoch_runs(bar_updates, capsys):
    """10 bucketed batches of 8 in compiled calls of 4 steps: Keras' own bar shows 12/10 at the
    epoch's last call (3 calls of 4), the trainer's bar 10/10, the total being the batches the
    optimizer ran each epoch."""
    import keras

    from grounded_text.config.schema import ModelConfig, TextConfig, TrainConfig
    from grounded_text.data.pairs import make_dataset
    from grounded_text.layers import build_vocabulary
    from grounded_text.models import build_model
    from grounded_text.training.callbacks import StepProgbar, progress_callbacks
    from grounded_text.training.preparation import compile_for_training

    pairs = _bucketed_pairs(83)  # 10 full batches of 8, 3 pairs left over
    ds = make_dataset(pairs, 8, seed=0, bucket_by_length=True, bucket_pool=2)
    steps = int(ds.cardinality())
    assert steps == 10
    gm = build_model(ModelConfig(embedding_dim=4), TextConfig(), build_vocabulary(pairs.captions.tolist()),
                     feature_dim=3, seed=0)
    compile_for_training(gm.train_model, TrainConfig(learning_rate=1e-3, schedule="constant", steps_per_execution=4),
                         steps)

    class Count(keras.callbacks.Callback):
        """The batches the optimizer ran each epoch, and the bar's total (``params["steps"]``)."""

        def __init__(self):
            super().__init__()
            self.epochs = []

        def on_epoch_begin(self, epoch, logs=None):
            self.start = int(self.model.optimizer.iterations)

        def on_epoch_end(self, epoch, logs=None):
            self.epochs.append((int(self.model.optimizer.iterations) - self.start, self.params["steps"]))

    count = Count()
    bars = progress_callbacks([count], verbose=1)
    assert [type(b) for b in bars] == [StepProgbar]
    gm.train_model.fit(ds, epochs=2, verbose=1, shuffle=False, callbacks=[count, *bars])
    capsys.readouterr()
    assert count.epochs == [(steps, steps)] * 2  # the total is the batches run, each epoch
    assert bar_updates, "no progress bar was shown"
    assert all(shown <= total for shown, total, _ in bar_updates), bar_updates  # never 12/10
    assert [shown for shown, _, _ in bar_updates] == [4, 8, 10, 10] * 2  # the last call ends the epoch
    assert {total for _, total, _ in bar_updates} == {steps}

    # Where Keras would show no bar, or the caller brought one, the trainer adds none.
    assert progress_callbacks([count], verbose=0) == []
    assert progress_callbacks([keras.callbacks.ProgbarLogger()], verbose="auto") == []


@pytest.mark.slow
def test_the_trainer_shows_that_bar(data_dir, tmp_path, bar_updates, capsys):
    """``train`` on a bucketed 64-image slice: 320 captions, 10 batches of 32 in calls of 4
    steps; the bar's count ends at 10 of 10 in each epoch."""
    from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
    from grounded_text.training.trainer import train

    config = ExperimentConfig(data=DataConfig(max_train_images=64, max_dev_images=16, batch_size=32,
                                              one_caption_per_image=False, bucket_by_length=True),
                              model=ModelConfig(embedding_dim=8),
                              train=TrainConfig(epochs=2, steps_per_execution=4, select_on="last"))
    metrics = train(config, data_dir, tmp_path / "run", evaluate=False, verbose=1)
    out = capsys.readouterr().out
    assert metrics["data"]["train_pairs"] == 320
    training = [(shown, total) for shown, total, _ in bar_updates if total == 10]
    assert [shown for shown, _ in training] == [4, 8, 10, 10] * 2, bar_updates
    assert all(shown <= total for shown, total, _ in bar_updates if total is not None), bar_updates
    assert "10/10" in out and "12/10" not in out


def test_divergence_guard_names_the_steps_of_the_epochs_last_call():
    from grounded_text.training.guards import DivergenceGuard
    from grounded_text.training.run_dir import TrainingDiverged

    guard = DivergenceGuard(steps_per_epoch=10, steps_per_execution=4, learning_rate=1e-3)
    guard.on_epoch_begin(0)
    with pytest.raises(TrainingDiverged, match=r"step 10 of 10 .*steps 9-10\)"):  # Keras reports batch 11
        guard.on_train_batch_end(11, {"loss": float("nan")})
