"""Faults and bad inputs (docs/reliability.md): resume after SIGKILL, protected run directories,
atomic exports under SIGKILL, divergence, Ctrl-C, and the bad inputs that used to crash or mislead.

The training tests run the CLI in subprocesses on a tiny slice of the real data (64 training
images, 32 dev images, N = 16, 3 epochs).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from train_cli import REPO, TINY
from train_cli import env_for_subprocess as _env
from train_cli import train_cli as _train_cli

from grounded_text.config.schema import ExperimentConfig, TrainConfig

# ============================================================================ item 1: resume


@pytest.mark.slow
def test_resume_after_sigkill_mid_epoch_matches_the_uninterrupted_run(data_dir, tmp_path):
    # Cyclic schedule, snapshot ensemble of the 2 best snapshots, dev-retrieval selection and
    # the STS16 curve: optimizer, LR schedule, snapshots and every callback history carry over.
    args = TINY + ["--epochs", "3", "--schedule", "cyclic_cosine", "--cycle-epochs", "1", "--snapshots", "true",
                   "--ensemble-size", "2", "--select-on", "dev_retrieval"]
    full, cut = tmp_path / "full", tmp_path / "cut"
    ran = _train_cli(args + ["--output-dir", str(full)], data_dir)
    assert ran.returncode == 0, ran.stderr[-3000:]

    # SIGKILL after step 4 of epoch 2 (of 10): mid-epoch, after epoch 1 was committed and a
    # mid-epoch checkpoint after every compiled call of 2 steps (--checkpoint-every 0).
    killed = _train_cli(args + ["--output-dir", str(cut), "--checkpoint-every", "0"], data_dir,
                        GROUNDED_TEXT_TEST_TRAIN_KILL_AT="2:3")
    assert killed.returncode == -signal.SIGKILL
    state = json.loads((cut / "run_state.json").read_text())
    assert state["status"] == "running" and state["epochs_done"] == 1
    assert (state["step"]["epoch"], state["step"]["steps"]) == (2, 4) and (cut / state["step"]["checkpoint"]).is_file()
    assert (cut / state["checkpoint"]).is_file() and not (cut / "metrics.json").exists()

    # Without a flag the directory is refused, naming --resume (checked in-process: no TF start-up).
    from grounded_text.models.registry import resolve_config
    from grounded_text.train import config_from_args, parse_args
    from grounded_text.training.run_dir import check_run_dir
    from grounded_text.training.run_errors import RunDirError

    config = resolve_config(config_from_args(parse_args(args + ["--output-dir", str(cut)]))).to_dict()
    with pytest.raises(RunDirError, match="1 of 3 epochs done, 4 steps of epoch 2.*--resume"):
        check_run_dir(cut, config, resume=False, overwrite=False)

    resumed = _train_cli(args + ["--output-dir", str(cut), "--resume"], data_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (full, cut))
    assert b["resumed"] == {"from_epoch": 1, "from_step": 4}  # the rest of epoch 2: its last 6 steps
    assert a["selection"]["best_epoch"] == b["selection"]["best_epoch"]
    assert a["selection"]["best_value"] == pytest.approx(b["selection"]["best_value"], abs=1e-6)
    assert set(a["history"]) == set(b["history"])
    for key in a["history"]:
        np.testing.assert_allclose(a["history"][key], b["history"][key], atol=1e-6, err_msg=key)
    for key in ("sts_validation_subsets", "dev_retrieval"):
        assert len(a[key]) == len(b[key]) == 3
        for ra, rb in zip(a[key], b[key]):
            assert ra.keys() == rb.keys() and all(ra[k] == pytest.approx(rb[k], abs=1e-6) for k in ra)
    assert a["exported"]["snapshot_epochs"] == b["exported"]["snapshot_epochs"]
    # The exported ensembles embed alike.
    from grounded_text.serving.loader import load as load_encoder

    sentences = ["a dog runs on the grass", "two children play in the water", ""]
    np.testing.assert_allclose(load_encoder(full / "export")(sentences), load_encoder(cut / "export")(sentences),
                               atol=1e-6)
    final = json.loads((cut / "run_state.json").read_text())
    assert final["status"] == "complete" and not (cut / "resume").exists()


def test_resume_restores_optimizer_random_state_and_an_earlier_best_epoch(tmp_path):
    """In-process, with a best epoch before the interruption (the subprocess test's scores rise)."""
    import keras

    from grounded_text.training.resume import RunTracker
    from grounded_text.training.run_state import read_state

    scores = [5.0, 1.0, 3.0]  # epoch 1 is the best: epochs 2 and 3 must not replace it

    class Score(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            logs["val_score"] = scores[epoch]

    class Noise(keras.layers.Layer):  # a layer with a keras.random.SeedGenerator, like the losses
        def __init__(self):
            super().__init__()
            self.seed_generator = keras.random.SeedGenerator(1)

        def call(self, x, training=False):
            return x + keras.random.normal(keras.ops.shape(x), seed=self.seed_generator) if training else x

    x, y = np.random.default_rng(0).random((64, 4)).astype(np.float32), np.ones((64, 1), np.float32)

    def build(out, resume_state=None):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((4,)), Noise(), keras.layers.Dense(1)])
        model.compile(keras.optimizers.Adam(0.1), loss="mse")
        best = keras.callbacks.ModelCheckpoint(str(out / "best.weights.h5"), monitor="val_score", mode="max",
                                               save_best_only=True, save_weights_only=True)
        tracker = RunTracker(out, {"c": 1}, model, epochs=3, monitor="val_score", mode="max", best_checkpoint=best,
                             best_path=out / "best.weights.h5", resume_state=resume_state)
        return model, tracker, [Score(), best]

    def fit(model, tracker, cbs, until, start=None):
        start = tracker.start() if start is None else start
        cbs = tracker.callbacks(cbs, steps_per_epoch=4, steps_per_execution=1, learning_rate=0.1)
        model.fit(x, y, batch_size=16, epochs=until, initial_epoch=start, callbacks=cbs, verbose=0, shuffle=False)

    full, cut = tmp_path / "full", tmp_path / "cut"
    model_a, tracker_a, cbs = build(full)
    fit(model_a, tracker_a, cbs, 3)
    model_b, tracker_b, cbs = build(cut)
    fit(model_b, tracker_b, cbs, 2)  # "interrupted" after epoch 2
    model_c, tracker_c, cbs = build(cut, resume_state=read_state(cut))
    assert tracker_c.start() == 2 and cbs[1].best == 5.0
    assert int(model_c.optimizer.iterations) == 8  # two epochs of 4 steps: the schedule's step carries over
    fit(model_c, tracker_c, cbs, 3, start=2)
    for a, c in zip(model_a.weights + model_a.optimizer.variables, model_c.weights + model_c.optimizer.variables):
        np.testing.assert_allclose(a.numpy(), c.numpy(), atol=1e-6, err_msg=a.path)
    assert tracker_a.history == tracker_c.history and tracker_c.history["val_score"] == scores
    best_a, best_c = (build(d)[0] for d in (full, cut))
    best_a.load_weights(str(full / "best.weights.h5"))
    best_c.load_weights(str(cut / "best.weights.h5"))
    for a, c in zip(best_a.weights, best_c.weights):  # both hold epoch 1's weights
        np.testing.assert_allclose(a.numpy(), c.numpy(), atol=1e-6)
    assert read_state(cut)["best"]["epoch"] == 1


def test_resume_from_a_mid_epoch_checkpoint_ends_as_the_uninterrupted_run(tmp_path):
    """In-process: killed (an exception) after step 2 of epoch 2, resumed from that step's
    checkpoint: the same weights, optimizer state and history as a run never stopped."""
    import keras
    import tensorflow as tf

    from grounded_text.training.resume import RunTracker, fit_resumable
    from grounded_text.training.run_state import interrupted_message, read_state

    class Noise(keras.layers.Layer):  # a random state that moves every step, like the losses' permutations
        def __init__(self):
            super().__init__()
            self.seed_generator = keras.random.SeedGenerator(1)

        def call(self, x, training=False):
            return x + keras.random.normal(keras.ops.shape(x), seed=self.seed_generator) if training else x

    class Killed(Exception):
        pass

    class Kill(keras.callbacks.Callback):
        def __init__(self, epoch, batch):
            super().__init__()
            self.at, self.epoch = (epoch, batch), 0

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch + 1

        def on_train_batch_end(self, batch, logs=None):
            if (self.epoch, batch) == self.at:
                raise Killed

    rng = np.random.default_rng(0)
    x, y = rng.random((64, 4)).astype(np.float32), rng.random((64, 1)).astype(np.float32)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)  # 4 steps an epoch, one order

    def build(out, resume_state=None):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((4,)), Noise(), keras.layers.Dense(1)])
        model.compile(keras.optimizers.Adam(0.1), loss="mse")
        tracker = RunTracker(out, {"c": 1}, model, epochs=3, monitor="loss", mode="min",
                             resume_state=resume_state, checkpoint_every=0)
        return model, tracker

    def fit(model, tracker, extra=()):
        start = tracker.start()
        cbs = tracker.callbacks([], steps_per_epoch=4, steps_per_execution=1, learning_rate=0.1) + list(extra)
        fit_resumable(model, data, tracker, start=start, epochs=3, callbacks=cbs, verbose=0)
        return start

    full, cut = tmp_path / "full", tmp_path / "cut"
    model_a, tracker_a = build(full)
    fit(model_a, tracker_a)
    model_b, tracker_b = build(cut)
    with pytest.raises(Killed):
        fit(model_b, tracker_b, [Kill(2, 1)])  # after batch 1 (step 2) of epoch 2
    state = read_state(cut)
    assert state["epochs_done"] == 1 and state["step"]["epoch"] == 2 and state["step"]["steps"] == 2
    assert sorted(p.name for p in (cut / "resume").iterdir()) == ["epoch-0001.weights.h5",
                                                                  "step-0002-0000002.weights.h5"]
    assert "(epoch 2 of 3, after 2 steps)" in interrupted_message(cut, ["--output-dir", str(cut)])

    model_c, tracker_c = build(cut, resume_state=state)
    assert fit(model_c, tracker_c) == 1 and tracker_c.steps_done == 2
    assert int(model_c.optimizer.iterations) == 12
    for a, c in zip(model_a.weights + model_a.optimizer.variables + tracker_a._random_states(),
                    model_c.weights + model_c.optimizer.variables + tracker_c._random_states()):
        np.testing.assert_allclose(a.numpy(), c.numpy(), rtol=1e-6, atol=1e-7, err_msg=a.path)
    # Epoch 2's loss covers its 4 steps: the 2 before the kill weighted with the 2 after it.
    np.testing.assert_allclose(tracker_c.history["loss"], tracker_a.history["loss"], rtol=1e-6)
    final = read_state(cut)
    assert final["step"] is None and final["epochs_done"] == 3
    assert sorted(p.name for p in (cut / "resume").iterdir()) == ["epoch-0003.weights.h5"]


def test_epoch_order_is_a_function_of_seed_and_epoch(tmp_path):
    """However often the pipeline was iterated before, epoch e serves the same batches."""
    import keras

    from grounded_text.data.features import open_feature_store
    from grounded_text.data.pairs import CaptionPairs, make_dataset
    from grounded_text.data.sampler import make_grouped_dataset
    from grounded_text.data.store_writer import write_feature_store

    keras.utils.set_random_seed(0)  # as the trainer does (a global seed of 0 is a TF corner case)
    n = 40
    ids, feats = np.array([f"im{i}" for i in range(10)]), np.random.default_rng(0).random((10, 3)).astype(np.float32)
    rows = np.arange(n, dtype=np.int64) // 4
    captions = np.array([f"w{i} " * (i % 7 + 1) for i in range(n)])
    pairs = CaptionPairs(captions, ids[rows], rows, feats)
    store = open_feature_store(write_feature_store(tmp_path / "store", ids, feats, dtype="float32", rows_per_shard=3))
    streamed = CaptionPairs(captions, ids[rows], rows, store.features)
    builders = {
        "random": lambda v: make_dataset(pairs, 8, seed=3, epoch=v),
        "bucketed": lambda v: make_dataset(pairs, 8, seed=3, epoch=v, bucket_by_length=True, bucket_pool=2),
        "grouped": lambda v: make_grouped_dataset(pairs, 2, 2, seed=3, epoch=v),
        "streaming": lambda v: make_dataset(streamed, 8, seed=3, epoch=v),
    }
    for name, build in builders.items():
        def epoch_batches(ds, var, e):
            var.assign(e)
            return [b["image_id"].numpy().tolist() for b in ds]

        v1, v2 = tf.Variable(0, dtype=tf.int64), tf.Variable(0, dtype=tf.int64)
        d1, d2 = build(v1), build(v2)
        first = [epoch_batches(d1, v1, e) for e in range(3)]
        for _ in range(3):  # e.g. Keras' extra iterators, or a resumed run's fresh pipeline
            list(d2)
        assert epoch_batches(d2, v2, 2) == first[2], name
        assert first[0] != first[1], name
        assert int(d1.cardinality()) == 5, name


# ============================================================================ item 2: protected run dirs


def test_run_directory_is_protected_and_overwrite_clears_only_the_run(tmp_path):
    from grounded_text.training.run_dir import check_run_dir, clear_run_dir
    from grounded_text.training.run_errors import RunDirError
    from grounded_text.training.run_state import write_state

    config = ExperimentConfig().to_dict()
    out = tmp_path / "run"
    assert check_run_dir(out, config, resume=False, overwrite=False) is None  # new: fine
    with pytest.raises(RunDirError, match="no run to resume"):
        check_run_dir(out, config, resume=True, overwrite=False)
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert check_run_dir(out, config, resume=False, overwrite=False) is None  # foreign files only
    (out / "metrics.json").write_text("{}")
    (out / "export").mkdir()
    with pytest.raises(RunDirError, match="already holds a run .*--overwrite"):
        check_run_dir(out, config, resume=False, overwrite=False)
    with pytest.raises(RunDirError, match="exclude each other"):
        check_run_dir(out, config, resume=True, overwrite=True)
    with pytest.raises(RunDirError, match="nothing to resume"):
        check_run_dir(out, config, resume=True, overwrite=False)
    write_state(out, {"version": 1, "status": "running", "config": config, "epochs": 5, "epochs_done": 2})
    with pytest.raises(RunDirError, match=r"2 of 5 epochs done.*--resume to continue it or --overwrite"):
        check_run_dir(out, config, resume=False, overwrite=False)
    other = ExperimentConfig(train=TrainConfig(seed=7)).to_dict()
    with pytest.raises(RunDirError, match=r"config differs .*train\.seed: 0 → 7"):
        check_run_dir(out, other, resume=True, overwrite=False)
    assert check_run_dir(out, config, resume=True, overwrite=False)["epochs_done"] == 2
    write_state(out, {"version": 1, "status": "complete", "config": config, "epochs": 5, "epochs_done": 5})
    with pytest.raises(RunDirError, match="finished run .*nothing left to do"):
        check_run_dir(out, config, resume=True, overwrite=False)
    clear_run_dir(out)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_train_cli_refuses_a_finished_run_with_one_error_line(tmp_path, capsys):
    from grounded_text.train import main
    from grounded_text.training.run_state import write_state

    out = tmp_path / "run"
    out.mkdir()
    write_state(out, {"version": 1, "status": "complete", "config": {}, "epochs": 1, "epochs_done": 1})
    assert main(["--output-dir", str(out), "--data-dir", str(tmp_path / "no-data")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "finished run" in err and "--overwrite" in err and "Traceback" not in err


# ============================================================================ item 3: atomic export

_EXPORT_SCRIPT = """
import sys
from grounded_text.config.schema import ModelConfig, TextConfig
from grounded_text.serving.export import export_text_tower
from grounded_text.models.vete import build_bow_text_tower
import keras
keras.utils.set_random_seed(int(sys.argv[2]))
tower = build_bow_text_tower(ModelConfig(embedding_dim=8), TextConfig(), ["<S>", "</S>", "a", "dog", "runs"])
export_text_tower(tower, sys.argv[1], {"version": sys.argv[3]})
"""


def _export_subprocess(target, version, kill_at=None):
    # The export SIGKILLs itself at the named point (grounded_text.utils.durable.KILL_POINT_ENV), so
    # the kill lands there on every run; "while-writing" fires once the first file of the
    # staged SavedModel exists, at the latest when its write returns.
    env = _env(**({"GROUNDED_TEXT_TEST_EXPORT_KILL_AT": kill_at} if kill_at else {}))
    proc = subprocess.run([sys.executable, "-c", _EXPORT_SCRIPT, str(target), "1", version], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    return proc.returncode, proc.stdout


@pytest.mark.slow
def test_export_killed_at_any_point_leaves_a_loadable_export(tmp_path):
    from grounded_text.serving.loader import load as load_encoder

    target = tmp_path / "export"
    rc, out = _export_subprocess(target, "v0")
    assert rc == 0, out
    current = "v0"
    # SIGKILL while the SavedModel is being written, at each step of the swap, then no kill.
    for i, point in enumerate(("while-writing", "staged", "old_moved", "installed", None), 1):
        rc, out = _export_subprocess(target, f"v{i}", kill_at=point)
        assert rc == (0 if point is None else -signal.SIGKILL), (point, out)
        if point == "while-writing":  # killed with part (or all) of the staged copy on disk
            assert any(p.is_file() for staged in tmp_path.glob(".export.tmp-*") for p in staged.rglob("*"))
        encoder = load_encoder(target)  # restores the previous export if the swap was cut in two
        version = json.loads((target / "assets" / "config.json").read_text())["version"]
        current = f"v{i}" if point in ("installed", None) else current
        assert version == current, point
        assert encoder(["a dog runs"]).shape == (1, 8)
    # Each export removed what the previous kill left behind (staging folders, .old copies).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]


# ============================================================================ item 4: divergence


def test_divergence_guard_and_selection_skip_non_finite_epochs():
    from grounded_text.training.guards import DivergenceGuard
    from grounded_text.training.run_errors import TrainingDiverged
    from grounded_text.training.trainer import select_best_epoch

    guard = DivergenceGuard(steps_per_epoch=10, steps_per_execution=4, learning_rate=1e-3)
    guard.on_epoch_begin(2)
    guard.on_train_batch_end(3, {"loss": 0.5})
    with pytest.raises(TrainingDiverged, match=r"nan at epoch 3, step 8 of 10 .*steps 5-8.*--learning-rate 0\.0001"):
        guard.on_train_batch_end(7, {"loss": float("nan")})
    with pytest.raises(TrainingDiverged, match="inf at epoch 3, step 10 of 10"):
        guard.on_train_batch_end(11, {"loss": float("inf")})
    assert select_best_epoch([0.1, float("nan"), 0.3, float("inf")], "max") == 3
    assert select_best_epoch([0.5, float("nan"), -float("inf"), 0.2], "min") == 4
    with pytest.raises(TrainingDiverged, match="no epoch has a finite"):
        select_best_epoch([float("nan")] * 2, "max")


@pytest.mark.slow
def test_diverging_run_stops_at_once_with_epoch_step_and_exit_1(data_dir, tmp_path):
    # A learning rate of 1e38 throws the weights to float32's edge in one Adam step (each moves by
    # about the learning rate): the loss is not finite from step 2. (Features that large are refused
    # before training as a data problem: test_faults_round5_hardening.)
    out = tmp_path / "run"
    proc = _train_cli(TINY + ["--epochs", "3", "--learning-rate", "1e38", "--select-on", "val_loss",
                              "--output-dir", str(out)], data_dir)
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: training diverged: the loss became nan at epoch 1, step 2 of 10"), last
    assert "--learning-rate 0.001 (now 1e+38)" in last and "Traceback" not in proc.stderr
    state = json.loads((out / "run_state.json").read_text())
    assert state["status"] == "diverged" and state["epochs_done"] == 0
    assert not (out / "metrics.json").exists() and not (out / "export").exists()


# ============================================================================ item 5: see tests/test_retrieval.py


# ============================================================================ item 6: bad inputs


def test_zero_or_negative_epochs_steps_and_trials_are_rejected_by_the_parsers(tmp_path, capsys):
    from grounded_text.models.registry import resolve_config
    from grounded_text.train import parse_args
    from grounded_text.tune import parse_args as tune_args

    for flags in (["--epochs", "0"], ["--epochs", "-3"], ["--steps-per-execution", "0"]):
        with pytest.raises(SystemExit) as e:
            parse_args(["--output-dir", str(tmp_path / "run"), *flags])
        assert e.value.code == 2 and "must be an integer >= 1" in capsys.readouterr().err, flags
    for seconds in ("-1", "nan", "often"):
        with pytest.raises(SystemExit) as e:
            parse_args(["--output-dir", str(tmp_path / "run"), "--checkpoint-every", seconds])
        assert e.value.code == 2 and "--checkpoint-every: expected seconds >= 0 or inf" in capsys.readouterr().err
    assert parse_args(["--output-dir", str(tmp_path / "run"), "--checkpoint-every", "inf"]).checkpoint_every == np.inf
    assert parse_args(["--output-dir", str(tmp_path / "run")]).checkpoint_every is None  # train()'s default: 600 s
    for trials in ("0", "-1"):
        with pytest.raises(SystemExit) as e:
            tune_args(["--directory", str(tmp_path / "tune"), "--trials", trials])
        assert e.value.code == 2 and "argument --trials: must be an integer >= 1" in capsys.readouterr().err
    assert not (tmp_path / "run").exists() and not (tmp_path / "tune").exists()
    for train in (TrainConfig(epochs=0), TrainConfig(steps_per_execution=0)):  # the library path too
        with pytest.raises(ValueError, match="must be an integer >= 1"):
            resolve_config(ExperimentConfig(train=train))


def test_tiny_constant_learning_rate_is_accepted_and_lr_min_checked_only_for_cyclic_schedules():
    from grounded_text.models.registry import resolve_config

    cfg = resolve_config(ExperimentConfig(train=TrainConfig(learning_rate=1e-7)))  # vete_bow: constant
    assert cfg.train.schedule == "constant" and cfg.train.learning_rate == 1e-7
    with pytest.raises(ValueError, match="cyclic_cosine schedule needs .*lr_min"):
        resolve_config(ExperimentConfig(train=TrainConfig(learning_rate=1e-7, schedule="cyclic_cosine")))


def test_non_finite_gold_scores_and_non_numeric_sick_scores_name_file_and_line(tmp_path):
    from grounded_text.data.sts import read_sick, read_sts_benchmark, read_sts_year

    year = tmp_path / "STS16-en-test"
    year.mkdir()
    (year / "STS2016.input.news.txt").write_text("a\tb\nc\td\ne\tf\n")
    (year / "STS2016.gs.news.txt").write_text("4.0\nnan\n3\n")
    with pytest.raises(ValueError, match=r"STS2016\.gs\.news\.txt:2: gold score 'nan' is not a finite number"):
        read_sts_year(year)
    (tmp_path / "STSBenchmark").mkdir()
    (tmp_path / "STSBenchmark" / "sts-test.csv").write_text("g\tf\t2012\t1\tinf\ta\tb\n")
    with pytest.raises(ValueError, match=r"sts-test\.csv:1: score 'inf' is not a finite number"):
        read_sts_benchmark(tmp_path)
    (tmp_path / "SICK").mkdir()
    (tmp_path / "SICK" / "SICK_test_annotated.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
        "1\ta\tb\t4.5\tNEUTRAL\n2\tc\td\thigh\tNEUTRAL\n")
    with pytest.raises(ValueError, match=r"SICK_test_annotated\.txt:3: relatedness_score 'high' is not a number"):
        read_sick(tmp_path)


def test_split_files_with_a_utf8_bom_keep_their_first_image(tmp_path):
    from grounded_text.data.flickr8k import read_flickr8k

    text = tmp_path / "Flickr8k_text"
    text.mkdir()
    (text / "Flickr8k.token.txt").write_text("a.jpg#0\ta dog\nb.jpg#0\ta cat\nc.jpg#0\ta bird\n", encoding="utf-8-sig")
    for split, image in (("train", "a.jpg"), ("dev", "b.jpg"), ("test", "c.jpg")):
        (text / f"Flickr_8k.{split}Images.txt").write_text(image + "\n", encoding="utf-8-sig")
    captions = read_flickr8k(tmp_path)
    assert [(c.image_id, c.split) for c in captions] == [("a.jpg", "train"), ("b.jpg", "dev"), ("c.jpg", "test")]


def test_duplicate_ids_in_a_feature_file_are_an_error_naming_the_id(tmp_path):
    from grounded_text.data.features import load_npz_features

    path = tmp_path / "f.npz"
    np.savez(path, ids=np.array(["a.jpg", "b.jpg", "a.jpg"]), features=np.eye(3, dtype=np.float32))
    with pytest.raises(ValueError, match=r"duplicate image id 'a\.jpg' \(rows 0 and 2\)"):
        load_npz_features(path)


def test_evaluate_on_a_model_with_another_signature_prints_one_clear_line(tmp_path, capsys):
    import keras

    from grounded_text.evaluate import main as evaluate_main
    from grounded_text.serving.export import export_image_tower

    image_tower = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    export_image_tower(image_tower, tmp_path / "image_export")
    sts = tmp_path / "sts" / "STS16-en-test"
    sts.mkdir(parents=True)
    (sts / "STS2016.input.news.txt").write_text("".join(f"sentence number {i}\tother {i}\n" for i in range(300)))
    (sts / "STS2016.gs.news.txt").write_text("3\n" * 300)
    rc = evaluate_main(["--model", str(tmp_path / "image_export"), "--sts-dir", str(tmp_path / "sts")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and "not a text-embedding SavedModel" in err
    assert "signature serving_default(features: float32[None, 4]) -> embeddings: float32[None, 3]" in err
    assert "sentence number" not in err and "Traceback" not in err


def test_unwritable_json_or_out_is_caught_before_the_evaluation(tmp_path, capsys):
    from grounded_text.evaluate import main as evaluate_main

    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    model = str(tmp_path / "no-model")  # would fail (later) if the output check did not come first
    for flags, what in ((["--json", str(tmp_path / "missing" / "r.json")], "--json"),
                        (["--json", str(blocker / "r.json")], "--json"),
                        (["--out", str(blocker / "report"), "--sections", "sts"], "--out")):
        assert evaluate_main(["--model", model, "--sts-dir", str(tmp_path), *flags]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {what} ") and "Traceback" not in err, err


def test_non_utf8_search_space_file_gives_a_clear_error(tmp_path, capsys):
    from grounded_text.tune import main
    from grounded_text.tuning.space import SpaceError, load_space

    path = tmp_path / "latin1.toml"
    path.write_bytes('[protocol]\nname = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(SpaceError, match=r"latin1\.toml: not UTF-8 text \(byte \d+\)"):
        load_space(str(path), "vete_bow")
    assert main(["--space", str(path), "--directory", str(tmp_path / "t")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_tune_exits_non_zero_when_every_trial_failed(data_dir, tmp_path, capsys):
    from grounded_text.tune import main

    # Every trial fails at once: one training image gives fewer pairs than a batch (a value the
    # config accepts, refused by the trainer once the data is read).
    rc = main(["--space", "vete_cpu", "--directory", str(tmp_path / "t"), "--data-dir", str(data_dir),
               "--trials", "2", "--set", "data.max_train_images=1", "--no-evaluate"])
    assert rc == 1
    assert "error: all 2 trial(s) failed" in capsys.readouterr().err


def test_serving_default_rejects_a_2d_batch_as_clearly_as_call(tiny_export):
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401

    module = hub.load(str(tiny_export.path))
    batch = tf.constant([["a dog", "runs"], ["a", "dog"]])
    # The generic export's __call__ answers ValueError ("Could not find matching concrete
    # function"); the bag-of-words export (one concrete function) TypeError ("Binding inputs to
    # tf.function failed"): both name the expected spec, before any tokenising.
    with pytest.raises((ValueError, TypeError), match=r"TensorSpec\(shape=\(None,\), dtype=tf\.string"):
        module(batch)
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        module.signatures["serving_default"](sentences=batch)
    message = e.value.message
    assert "Shape of tensor sentences [2,2] is not compatible with expected shape [?]" in message
    assert "Ragged" not in message and "Tokenize" not in message
    assert module.signatures["serving_default"](sentences=tf.constant(["a dog"]))["embeddings"].shape == (
        1, tiny_export.dim)


def test_export_caps_huge_sentences_and_keeps_normal_ones(tiny_export):
    import resource

    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401

    tower = tiny_export.tower  # "a", "dog" and "runs" are in its vocabulary
    module = hub.load(str(tiny_export.path))
    normal = ["a dog runs", "", "  a   dog\truns\n", "dog " * 400, "é" * 3000]  # within both limits
    # Up to float32 summation order (400 word vectors summed in another order than the tower's).
    np.testing.assert_allclose(module(tf.constant(normal)).numpy(), tower(tf.constant(normal)).numpy(), atol=1e-5)
    huge = "dog " * 600 + "a " * 5_000_000  # 10 MB, 5 million words
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    out = module(tf.constant([huge])).numpy()
    seconds = time.perf_counter() - start
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    first_words = " ".join(["dog"] * 512)
    np.testing.assert_allclose(out, module(tf.constant([first_words])).numpy(), atol=1e-6)
    assert seconds < 5 and grown_mb < 200, (seconds, grown_mb)  # unbounded: ~5 s and ~540 MB
    limits = json.loads((tiny_export.path / "assets" / "config.json").read_text())["input_limits"]
    assert limits == {"max_bytes": 16384, "max_words": 512}


def _fake_network():
    from grounded_text.vision.networks import get_spec

    class Fake:  # the extractor's network contract, without a CNN: mean colour
        spec, input_size, dim = get_spec("efficientnet_b0"), 224, 3

        def __call__(self, x):
            return tf.reduce_mean(tf.cast(x, tf.float32), axis=[1, 2])

    return Fake()


def test_features_refuses_decompression_bombs_and_extreme_strips(tmp_path, capsys, monkeypatch):
    from grounded_text import features as cli
    from grounded_text.data.features import load_npz_features
    from grounded_text.vision import extractor

    monkeypatch.setattr(extractor, "FeatureNetwork", lambda *a, **k: _fake_network())
    folder = tmp_path / "imgs"
    folder.mkdir()
    rng = np.random.default_rng(0)
    small = (rng.random((37, 53, 3)) * 255).astype(np.uint8)
    (folder / "ok.png").write_bytes(tf.io.encode_png(small).numpy())
    # A 37x53 JPEG whose header declares 10000x10000 (100 MP): refused from the header.
    jpeg = bytearray(tf.io.encode_jpeg(small).numpy())
    sof = jpeg.index(b"\xff\xc0")
    jpeg[sof + 5:sof + 9] = (10000).to_bytes(2, "big") * 2
    (folder / "bomb.jpg").write_bytes(bytes(jpeg))
    # A real 3x5000 PNG: tiny, but ten crops would resize it to 342 x 570,000 first.
    (folder / "strip.png").write_bytes(tf.io.encode_png(np.zeros((3, 5000, 3), np.uint8)).numpy())
    out = tmp_path / "s.npz"
    rc = cli.main(["--images", str(folder), "--out", str(out), "--cnn", "efficientnet_b0", "--weights", "none",
                   "--crops", "10", "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 0 and "wrote 1" in captured.out and "2 failed" in captured.out, captured
    failed = {ln.split(":")[0][len("FAILED "):]: ln for ln in captured.err.splitlines() if ln.startswith("FAILED ")}
    assert "image is 10000x10000 = 100000000 pixels, above the limit of 40000000" in failed["bomb.jpg"]
    assert "image is 3x5000: aspect ratio above 16:1" in failed["strip.png"]
    assert load_npz_features(out).ids.tolist() == ["ok.png"]
    # The limit is a flag: at 1,000 pixels even the small image is refused, from its header.
    rc = cli.main(["--images", str(folder), "--out", str(tmp_path / "t.npz"), "--cnn", "efficientnet_b0",
                   "--weights", "none", "--crops", "1", "--max-pixels", "1000", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 0 and "FAILED ok.png: image is 37x53 = 1961 pixels, above the limit of 1000" in err


def test_features_ids_cannot_leave_the_images_folder(tmp_path):
    from grounded_text.vision.extractor import list_image_files

    (tmp_path / "imgs").mkdir()
    (tmp_path / "secret.png").write_bytes(b"x")
    with pytest.raises(ValueError, match="must be file names inside"):
        list_image_files(tmp_path / "imgs", ["../secret.png"])
    with pytest.raises(ValueError, match="must be file names inside"):
        list_image_files(tmp_path / "imgs", [str(tmp_path / "secret.png")])


def test_interrupted_message_fits_how_far_the_run_got(tmp_path):
    from grounded_text.training.run_dir import check_run_dir
    from grounded_text.training.run_errors import RunDirError
    from grounded_text.training.run_state import interrupted_message, write_state

    out, argv = tmp_path / "run", ["--output-dir", str(tmp_path / "run"), "--overwrite", "--epochs", "9"]
    assert interrupted_message(out, argv).startswith(
        f"interrupted before training started: nothing of this run was saved; run `python -m grounded_text.train "
        f"--output-dir {out}")
    out.mkdir()
    write_state(out, {"version": 1, "status": "running", "config": {}, "epochs": 9, "epochs_done": 0,
                      "checkpoint": None})
    assert "no checkpoint" in interrupted_message(out, argv) and "--overwrite" not in interrupted_message(out, argv)
    write_state(out, {"version": 1, "status": "interrupted", "config": {}, "epochs": 9, "epochs_done": 4,
                      "checkpoint": "resume/epoch-0004.weights.h5"})
    assert interrupted_message(out, argv) == (
        f"interrupted: the last checkpoint is {out}/resume/epoch-0004.weights.h5 (epoch 4 of 9); continue with "
        f"`python -m grounded_text.train --output-dir {out} --epochs 9 --resume`.")
    write_state(out, {"version": 1, "status": "diverged", "config": {}, "epochs": 9, "epochs_done": 4})
    with pytest.raises(RunDirError, match=r"diverged after 4 of 9 epochs; pass --overwrite .*lower --learning-rate"):
        check_run_dir(out, {}, resume=False, overwrite=False)


# `python -m grounded_text.train` as a terminal starts it: with Python's SIGINT handler. A job that
# a non-interactive shell starts in the background (nohup ... &, many CI runners) inherits SIGINT
# ignored, so that a terminal's Ctrl-C does not reach it; pytest's children inherit that, and a
# SIGINT sent to them is then ignored by design.
_AS_FROM_A_TERMINAL = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                       "runpy.run_module('grounded_text.train', run_name='__main__', alter_sys=True)")


@pytest.mark.slow
def test_ctrl_c_during_train_prints_where_to_resume(data_dir, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", _AS_FROM_A_TERMINAL, "--data-dir", str(data_dir), *TINY,
                             # Enough epochs that the run is still training when Ctrl-C comes
                             # (a tiny epoch takes ~0.05 s; 40 epochs could end first).
                             "--epochs", "2000", "--select-on", "val_loss", "--output-dir", str(out)],
                            cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (out / "checkpoints" / "last.weights.h5").exists():  # an epoch has finished
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"interrupted: the last checkpoint is {out}/resume/epoch-"), last
    assert last.endswith("--resume`.") and "python -m grounded_text.train" in last
    state = json.loads((out / "run_state.json").read_text())
    assert state["status"] == "interrupted" and (out / state["checkpoint"]).is_file()
