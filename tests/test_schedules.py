"""Cyclic cosine schedule, snapshot saving and snapshot ensembles (Merkx & Frank §3.3)."""

import json
import math
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from grounded_text.config.schema import ModelConfig, TextConfig
from grounded_text.layers import build_vocabulary
from grounded_text.models import build_model
from grounded_text.models.ensemble import build_snapshot_ensemble
from grounded_text.serving.export import export_text_tower
from grounded_text.training import (
    CyclicCosineSchedule,
    SnapshotSaver,
    WarmRestartCosineSchedule,
    cycle_steps,
    load_snapshot_towers,
)

# Its tests share a module-scoped fixture: one pytest-xdist worker builds it once (setup.cfg).
pytestmark = pytest.mark.xdist_group("test_schedules")

CAPS = ["A dog runs on the beach .", "A man rides a red bike .", "Two kids play in the snow", "a cat sleeps"]
PROBE = CAPS + ["", "zebra unicorn", "a dog and a cat"]


def merkx_frank_lr(mb, lr_min, lr_max, step):
    """Merkx & Frank (2019) §3.3 as printed: lr = lr_min + ½(lr_max − lr_min)(1 + cos(π(1 + 2·mb/step))),
    mb counted from each cycle's start."""
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + np.cos(np.pi * (1 + 2 * (mb % step) / step)))


def test_merkx_frank_schedule_matches_the_paper():
    lr_min, lr_max = 1e-6, 1e-3  # the paper's Flickr8k constants
    steps_per_epoch, cycle_epochs = 5, 4  # a cycle is 4 epochs
    period = cycle_steps(cycle_epochs, steps_per_epoch)
    schedule = CyclicCosineSchedule(lr_min, lr_max, period)
    for mb in [0, 1, 3, 7, 10, 13, 19, 20, 21, 30, 39, 40, 55]:
        assert float(schedule(mb)) == pytest.approx(merkx_frank_lr(mb, lr_min, lr_max, period), rel=1e-5, abs=1e-9)
    # lr_min at each cycle's start and end, lr_max at its middle.
    for c in range(3):
        assert float(schedule(c * period)) == pytest.approx(lr_min, abs=1e-9)
        assert float(schedule(c * period + period // 2)) == pytest.approx(lr_max, rel=1e-6)
        assert float(schedule(c * period + period - 1)) < 0.05 * lr_max  # the last step, about to restart
    # Rising over the first half, falling over the second.
    lrs = [float(schedule(mb)) for mb in range(period)]
    half = period // 2
    assert all(a < b for a, b in zip(lrs[:half], lrs[1:half + 1]))
    assert all(a > b for a, b in zip(lrs[half:-1], lrs[half + 1:]))
    assert schedule.cycle(period - 1) == 0 and schedule.cycle(period) == 1
    clone = CyclicCosineSchedule.from_config(schedule.get_config())
    assert clone.get_config() == schedule.get_config()
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert float(restored(3)) == pytest.approx(float(schedule(3)))


def test_warm_restart_schedule_is_sgdr():
    """Huang et al. (2017) eq. 2: starts each cycle at lr_max and falls to lr_min."""
    lr_min, lr_max, period = 2e-5, 2e-3, 7
    schedule = WarmRestartCosineSchedule(lr_min, lr_max, period)
    for step in [0, 1, 3, 6, 7, 8, 13, 14, 100]:
        expected = lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * (step % period) / period))
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-6)
    assert float(schedule(0)) == pytest.approx(lr_max) and float(schedule(7)) == pytest.approx(lr_max)
    assert schedule.cycle(13) == 1 and schedule.cycle(14) == 2
    assert WarmRestartCosineSchedule.from_config(schedule.get_config()).get_config() == schedule.get_config()
    # The two schedules differ: SGDR starts high, Merkx & Frank start low.
    assert float(CyclicCosineSchedule(lr_min, lr_max, period)(0)) == pytest.approx(lr_min)


@pytest.mark.parametrize("lr_min, lr_max, period", [(2e-5, 2e-3, 8), (1e-6, 1e-3, 3740), (0.0, 1.0, 4)])
def test_warm_restart_schedule_is_keras_cosine_decay_restarts(lr_min, lr_max, period):
    """Keras' CosineDecayRestarts (t_mul = m_mul = 1, alpha = lr_min / lr_max) gives the
    hand-written SGDR formula it replaced, computed here in float64 NumPy. The schedule
    runs in float32: the bound is 1e-7 of lr_max plus 1e-7 of the value (near a cycle's
    end, lr_min + (lr_max − lr_min)·c rounds at the scale of lr_max, not of the result)."""
    schedule = WarmRestartCosineSchedule(lr_min, lr_max, period)
    assert isinstance(schedule, keras.optimizers.schedules.CosineDecayRestarts)
    keras_config = keras.optimizers.schedules.CosineDecayRestarts.get_config(schedule)
    assert keras_config == {"initial_learning_rate": lr_max, "first_decay_steps": period, "t_mul": 1.0,
                            "m_mul": 1.0, "alpha": lr_min / lr_max, "name": "warm_restarts"}
    steps = np.array([0, 1, period // 2, period - 1, period, period + 1, 3 * period + 5])
    expected = lr_min + (lr_max - lr_min) * 0.5 * (1.0 + np.cos(np.pi * (steps % period) / period))
    got = np.array([float(schedule(int(t))) for t in steps])
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-7 * lr_max)
    clone = WarmRestartCosineSchedule.from_config(schedule.get_config())
    assert schedule.get_config() == {"lr_min": lr_min, "lr_max": lr_max, "steps_per_cycle": period,
                                     "name": "warm_restarts"}
    assert type(clone) is WarmRestartCosineSchedule and clone.get_config() == schedule.get_config()
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert type(restored) is WarmRestartCosineSchedule
    np.testing.assert_array_equal([float(restored(int(t))) for t in steps], got)


def test_warm_restart_schedule_survives_a_saved_compiled_model(tmp_path):
    """A compiled model's optimizer keeps the schedule through keras.saving (run-dir checkpoints)."""
    gm = tiny_model()
    schedule = WarmRestartCosineSchedule(1e-4, 5e-2, cycle_steps(2, 2))
    gm.train_model.compile(optimizer=keras.optimizers.Adam(schedule), jit_compile=False)
    x = {"caption": tf.constant(CAPS), "image_features": tf.random.stateless_normal([4, 6], seed=[0, 1])}
    gm.train_model.fit(tf.data.Dataset.from_tensors(x).repeat(3), epochs=1, verbose=0)
    gm.train_model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    lr = loaded.optimizer._learning_rate
    assert type(lr) is WarmRestartCosineSchedule and lr.get_config() == schedule.get_config()
    assert int(loaded.optimizer.iterations) == 3
    assert float(loaded.optimizer.learning_rate) == pytest.approx(float(schedule(3)), rel=1e-7)


def test_schedule_drives_an_optimizer_and_validates():
    schedule = CyclicCosineSchedule(0.0, 1.0, cycle_steps(cycle_epochs=2, steps_per_epoch=2))
    opt = keras.optimizers.SGD(schedule)
    var = tf.Variable(0.0)
    seen = []
    for _ in range(6):
        seen.append(float(opt.learning_rate))
        opt.apply_gradients([(tf.constant(1.0), var)])
    np.testing.assert_allclose(seen, [0.0, 0.5, 1.0, 0.5, 0.0, 0.5], atol=1e-5)
    assert float(var) == pytest.approx(-sum(seen), abs=1e-5)
    for cls in (CyclicCosineSchedule, WarmRestartCosineSchedule):
        with pytest.raises(ValueError, match="lr_min"):
            cls(1e-2, 1e-3, 10)
        with pytest.raises(ValueError, match="steps_per_cycle"):
            cls(0.0, 1e-3, 0)
    with pytest.raises(ValueError, match="cycle_epochs"):
        cycle_steps(0, 10)


def tiny_model(seed=0, dim=8):
    return build_model(ModelConfig(embedding_dim=dim), TextConfig(), build_vocabulary(CAPS), feature_dim=6, seed=seed)


def test_snapshot_saver_saves_each_cycle_end(tmp_path):
    gm = tiny_model()
    steps_per_epoch = 2
    schedule = CyclicCosineSchedule(1e-4, 5e-2, cycle_steps(2, steps_per_epoch))
    gm.train_model.compile(optimizer=keras.optimizers.Adam(schedule), jit_compile=False)
    x = {"caption": tf.constant(CAPS), "image_features": tf.random.stateless_normal([4, 6], seed=[0, 1])}
    ds = tf.data.Dataset.from_tensors(x).repeat(steps_per_epoch)

    states = {}

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            states[epoch + 1] = gm.text_tower(tf.constant(PROBE)).numpy()

    saver = SnapshotSaver(gm.text_tower, tmp_path / "snaps", cycle_epochs=2)
    weights = SnapshotSaver(gm.text_tower, tmp_path / "w", cycle_epochs=2, weights_only=True, keep_last=1)
    gm.train_model.fit(ds, epochs=5, callbacks=[Record(), saver, weights], verbose=0)
    assert [p.name for p in saver.paths] == ["snapshot_01.keras", "snapshot_02.keras"]
    assert [p.name for p in weights.paths] == ["snapshot_02.weights.h5"]
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["snapshot_02.weights.h5"]
    towers = load_snapshot_towers(saver.paths)
    np.testing.assert_allclose(towers[0](tf.constant(PROBE)).numpy(), states[2], atol=1e-6)
    np.testing.assert_allclose(towers[1](tf.constant(PROBE)).numpy(), states[4], atol=1e-6)
    assert not np.allclose(states[2], states[4])
    (from_weights,) = load_snapshot_towers(weights.paths, text_tower=tiny_model(seed=9).text_tower)
    np.testing.assert_allclose(from_weights(tf.constant(PROBE)).numpy(), states[4], atol=1e-6)
    with pytest.raises(ValueError, match="pass text_tower"):
        load_snapshot_towers(weights.paths)


@pytest.fixture(scope="module")
def ensemble_and_reference():
    towers = [tiny_model(seed=s).text_tower for s in range(2)]
    outs = [t(tf.constant(PROBE)).numpy().astype(np.float64) for t in towers]
    mean = np.mean(outs, axis=0)
    reference = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    return build_snapshot_ensemble(towers), reference, outs


def test_ensemble_is_mean_then_normalise(ensemble_and_reference):
    ensemble, reference, outs = ensemble_and_reference
    got = ensemble(tf.constant(PROBE)).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, reference, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    # The un-normalised mean (caption2image) is shorter than unit length here.
    assert (np.linalg.norm(np.mean(outs, axis=0), axis=1) < 0.999).all()
    with pytest.raises(ValueError, match="empty"):
        build_snapshot_ensemble([])
    with pytest.raises(ValueError, match="output shape"):
        build_snapshot_ensemble([tiny_model(dim=8).text_tower, tiny_model(dim=4).text_tower])


def test_ensemble_keras_round_trip(ensemble_and_reference, tmp_path):
    ensemble, reference, _ = ensemble_and_reference
    ensemble.save(tmp_path / "ensemble.keras")
    loaded = keras.saving.load_model(tmp_path / "ensemble.keras")
    np.testing.assert_allclose(loaded(tf.constant(PROBE)).numpy(), reference, atol=1e-6)


# Exports the ensemble, then reloads it in a fresh TensorFlow process.
@pytest.mark.slow
def test_ensemble_exports_as_one_hub_module(ensemble_and_reference, tmp_path):
    ensemble, reference, _ = ensemble_and_reference
    expected = ensemble(tf.constant(PROBE)).numpy()
    path = export_text_tower(ensemble, tmp_path / "export", {"model": {"name": "snapshot_ensemble"}})
    script = textwrap.dedent(
        f"""
        import json
        import numpy as np, tensorflow as tf, tensorflow_text, tensorflow_hub as hub
        m = hub.load({str(path)!r})
        out = m(tf.constant({PROBE!r}))
        np.save({str(tmp_path / "got.npy")!r}, out.numpy())
        print(json.dumps({{"dtype": out.dtype.name, "shape": out.shape.as_list()}}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"dtype": "float32", "shape": [len(PROBE), 8]}
    np.testing.assert_allclose(np.load(tmp_path / "got.npy"), expected, atol=1e-6, rtol=0)
    np.testing.assert_allclose(np.load(tmp_path / "got.npy"), reference, atol=1e-6)
