"""Runs that fail loudly and run directories that protect themselves (docs/reliability.md, "Run
directories and failed runs"): collapse with a finite loss, paths in run_state.json confined to
the run directory, the data checked on --resume, full disks, one run per directory, Ctrl-C while
TensorFlow loads, sane learning-rate advice.

The CLI tests run ``python -m grounded_text.train`` on a tiny slice of the real data (64 training
images, 32 dev images, N = 16), as tests/test_reliability.py does.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf
from train_cli import TINY
from train_cli import train_cli as _train_cli


def _last_line(proc) -> str:
    return proc.stderr.strip().splitlines()[-1]


def _state(out: Path) -> dict:
    return json.loads((out / "run_state.json").read_text())


# ============================================================================ collapse with a finite loss


def test_relative_spread_matches_a_numpy_reference():
    from grounded_text.training.guards import relative_spread

    e = np.random.default_rng(0).normal(size=(32, 8)) + 3.0
    reference = np.sqrt(np.var(e, axis=0).sum() / np.mean(np.linalg.norm(e, axis=1) ** 2))
    assert relative_spread(e) == pytest.approx(reference, rel=1e-12)
    assert relative_spread(e * 1e-20) == pytest.approx(reference, rel=1e-9)  # scale-free
    assert relative_spread(np.tile(e[:1], (32, 1))) == pytest.approx(0.0, abs=1e-12)
    assert relative_spread(np.zeros((32, 8))) == 0.0  # all zero: collapsed, not NaN
    assert np.isnan(relative_spread(np.where(np.eye(32, 8) > 0, np.nan, e)))


def _towers(rng):
    table = tf.constant(rng.normal(size=(64, 8)), tf.float32)
    text_scale, image_scale = tf.Variable(1.0), tf.Variable(1.0)
    offset = tf.constant(np.ones(8), tf.float32)

    def text(s, training=False):
        return tf.gather(table, tf.strings.to_hash_bucket_fast(s, 64)) * text_scale + offset

    def image(x, training=False):
        return x * image_scale + 1.0

    return text, image, text_scale, image_scale


def _run_epoch(guard, epoch, losses, steps=10, every=2):
    """Feeds ``guard`` one epoch of per-report losses as Keras logs them (the running mean)."""
    guard.on_epoch_begin(epoch)
    total = 0.0
    for i, step in enumerate(range(every, steps + 1, every)):
        total += losses[i] * every
        guard.on_train_batch_end(step - 1, {"loss": total / step})


def test_collapse_guard_stops_a_collapsed_tower_and_spares_a_healthy_one():
    from grounded_text.training.guards import CollapseGuard
    from grounded_text.training.run_errors import TrainingDiverged

    rng = np.random.default_rng(0)
    text, image, text_scale, image_scale = _towers(rng)
    captions = [f"caption number {i}" for i in range(32)]
    guard = CollapseGuard(text, captions, image, rng.normal(size=(16, 4)), steps_per_epoch=10, steps_per_execution=2,
                          learning_rate=1e30, check_every=100)
    guard.on_train_begin()
    assert guard.checks == 1 and 0.3 < guard.start["text tower"] < 1 and 0.3 < guard.start["image tower"] < 1
    _run_epoch(guard, 0, [0.9, 0.8, 0.85, 0.7, 0.75])  # healthy: probed at the epoch's last step only
    assert guard.checks == 2
    _run_epoch(guard, 1, [0.5, 0.5, 0.5, 0.5, 0.5])  # a flat loss alone probes, and passes
    assert guard.checks == 4
    text_scale.assign(1e-5)  # the spread falls 1e5-fold: below 1e-3 of the start
    with pytest.raises(TrainingDiverged, match=r"text tower maps the 32 probe captions to nearly one vector .* at "
                                               r"epoch 3, step 10 of 10.*--learning-rate 0\.001 \(now 1e\+30\)") as e:
        _run_epoch(guard, 2, [0.9, 0.8, 0.85, 0.7, 0.75])
    assert e.value.status == "failed" and e.value.epoch == 3
    # A loss that stops moving triggers the probe at once: 3 equal reports (steps 4, 6, 8), not
    # the epoch's end.
    with pytest.raises(TrainingDiverged, match="epoch 4, step 8 of 10"):
        _run_epoch(guard, 3, [0.3, 0.0, 0.0, 0.0, 0.0])
    text_scale.assign(1.0)
    image_scale.assign(0.0)
    with pytest.raises(TrainingDiverged, match="image tower maps the 16 probe images"):
        _run_epoch(guard, 4, [0.9, 0.8, 0.85, 0.7, 0.75])


def test_learning_rate_advice_is_finite_and_sane():
    from grounded_text.training.guards import DivergenceGuard
    from grounded_text.training.run_errors import TrainingDiverged, learning_rate_advice

    assert learning_rate_advice(1e-3) == "e.g. --learning-rate 0.0001 (now 0.001)"
    for lr in (1e30, float("inf"), float("nan"), 5.0, 0.0, -1.0):
        advice = learning_rate_advice(lr)
        suggested = float(advice.split("--learning-rate ")[1].split()[0])
        assert suggested == 1e-3, (lr, advice)
    guard = DivergenceGuard(steps_per_epoch=10, steps_per_execution=1, learning_rate=float("inf"))
    guard.on_epoch_begin(0)
    with pytest.raises(TrainingDiverged, match=r"--learning-rate 0\.001 \(now inf\)"):
        guard.on_train_batch_end(0, {"loss": float("nan")})


@pytest.mark.slow
def test_learning_rate_1e30_fails_in_the_first_epoch_with_state_failed(data_dir, tmp_path):
    # The loss stays finite (0 from step 3) while every sentence maps to the zero vector; it used
    # to exit 0 with --select-on val_loss, marked complete, exporting the dead model.
    out = tmp_path / "run"
    proc = _train_cli(TINY + ["--epochs", "3", "--learning-rate", "1e30", "--select-on", "val_loss",
                              "--output-dir", str(out)], data_dir)
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = _last_line(proc)
    assert last.startswith("error: training collapsed: the text tower maps the 32 probe captions"), last
    assert "at epoch 1, step" in last and "--learning-rate 0.001 (now 1e+30)" in last
    assert "Traceback" not in proc.stderr
    state = _state(out)
    assert state["status"] == "failed" and state["epochs_done"] == 0 and "collapsed" in state["error"]
    assert not (out / "metrics.json").exists() and not (out / "export").exists()
    # Running again is refused with --overwrite advice, not --resume.
    again = _train_cli(TINY + ["--epochs", "3", "--output-dir", str(out)], data_dir)
    assert again.returncode == 2
    assert "failed after 0 of 3 epochs" in _last_line(again) and "--resume" not in _last_line(again)


@pytest.mark.slow
def test_healthy_tiny_runs_stay_far_from_the_collapse_limit_at_every_step(data_dir, tmp_path):
    """One tiny epoch probed at every step (the guard's own schedule is sparser), for the
    architectures whose probe spread fell lowest when every preset was probed this way
    (pure_text_rnn, 76 % of its start; the character model): it never falls below 10 % of its
    start (the guard stops at 0.1 %). Every preset's run records its margin in metrics.json
    (``collapse_guard``), checked above 10 % in tests/test_presets.py and
    tests/test_paper_baselines.py."""
    import keras

    from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
    from grounded_text.training.guards import CollapseGuard
    from grounded_text.training.preparation import prepare_training

    lowest = {}
    for name in ("pure_text_rnn", "char_gru_attention_512"):
        keras.backend.clear_session()
        config = ExperimentConfig(data=DataConfig(max_train_images=64, max_dev_images=32, batch_size=32),
                                  model=ModelConfig(name=name), train=TrainConfig(epochs=1, steps_per_execution=1))
        setup = prepare_training(config, data_dir)
        guard = CollapseGuard.from_setup(setup, steps_per_epoch=setup.steps_per_epoch, check_every=1)
        setup.model.train_model.fit(setup.train_ds, epochs=1, callbacks=[guard], verbose=0)
        lowest[name] = min(guard.lowest[t] / guard.start[t] for t in guard.start)
        assert guard.checks >= setup.steps_per_epoch
    print(json.dumps(lowest, indent=1))
    assert all(ratio > 0.1 for ratio in lowest.values()), lowest


# ============================================================================ paths in run_state.json


def _resumable_state(config, **fields):
    state = {"version": 1, "status": "interrupted", "config": config, "epochs": 3, "epochs_done": 1,
             "checkpoint": "resume/epoch-0001.weights.h5",
             "best": {"monitor": "val_loss", "mode": "min", "value": 1.0, "epoch": 1,
                      "checkpoint": "resume/best-0001.best.weights.h5"},
             "snapshots": {"paths": ["snapshots/snapshot_01.keras"], "image_paths": [], "epochs": [1],
                           "scores": [1.0]}}
    for key, value in fields.items():
        *parents, last = key.split(".")
        target = state
        for p in parents:
            target = target[p]
        target[last] = value
    return state


def test_paths_in_the_run_state_must_stay_inside_the_run_directory(tmp_path):
    from grounded_text.config.schema import ExperimentConfig
    from grounded_text.training.run_dir import check_run_dir
    from grounded_text.training.run_errors import RunDirError
    from grounded_text.training.run_state import write_state

    config = ExperimentConfig().to_dict()
    out = tmp_path / "run"
    out.mkdir()
    victim = tmp_path / "other" / "x.weights.h5"
    victim.parent.mkdir()
    victim.write_bytes(b"not yours")
    (out / "link.weights.h5").symlink_to(victim)
    write_state(out, _resumable_state(config))
    assert check_run_dir(out, config, resume=True, overwrite=False)["epochs_done"] == 1  # the normal case
    for field, value, shown in (("checkpoint", str(victim), "checkpoint"),
                                ("checkpoint", "../other/x.weights.h5", "checkpoint"),
                                ("checkpoint", "link.weights.h5", "checkpoint"),
                                ("best.checkpoint", "resume/../../other/x.weights.h5", "best.checkpoint"),
                                ("snapshots.paths", ["snapshots/a.keras", str(victim)], r"snapshots.paths\[1\]"),
                                ("checkpoint", 7, "checkpoint")):
        write_state(out, _resumable_state(config, **{field: value}))
        with pytest.raises(RunDirError, match=rf"run_state\.json: {shown} .*(outside|inside) the run directory"):
            check_run_dir(out, config, resume=True, overwrite=False)
    assert victim.read_bytes() == b"not yours"


def test_resume_with_a_checkpoint_outside_the_run_directory_is_refused_by_the_cli(data_dir, tmp_path):
    from grounded_text.models.registry import resolve_config
    from grounded_text.train import config_from_args, parse_args
    from grounded_text.training.run_state import write_state

    out, victim = tmp_path / "run", tmp_path / "x.weights.h5"
    victim.write_bytes(b"not yours")
    args = TINY + ["--epochs", "3", "--output-dir", str(out)]
    config = resolve_config(config_from_args(parse_args(args))).to_dict()
    out.mkdir()
    write_state(out, _resumable_state(config, checkpoint=str(victim)))
    proc = _train_cli(args + ["--resume"], data_dir)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert _last_line(proc).startswith("error: --resume: ") and f"checkpoint '{victim}' is outside" in proc.stderr
    assert "Traceback" not in proc.stderr and victim.read_bytes() == b"not yours"


# ============================================================================ data fingerprint


def _setup(feature_path, ids, captions, vocabulary):
    pairs = SimpleNamespace(image_ids=np.array(ids), captions=np.array(captions))
    return SimpleNamespace(flickr=SimpleNamespace(store=SimpleNamespace(path=str(feature_path))), train_pairs=pairs,
                           dev_pairs=pairs, vocabulary=list(vocabulary))


def test_data_fingerprint_names_what_differs(tmp_path, monkeypatch):
    from grounded_text.training import fingerprint as fingerprinting
    from grounded_text.training.fingerprint import check_data, file_digest
    from grounded_text.training.run_errors import RunDirError

    rng = np.random.default_rng(0)
    features = rng.normal(size=(6, 4)).astype(np.float32)
    ids, captions, vocab = ["a.jpg", "b.jpg"], ["a dog", "a cat"], ["<S>", "a", "dog", "cat"]
    np.savez(tmp_path / "f.npz", ids=np.array(ids * 3), features=features)
    np.savez(tmp_path / "g.npz", ids=np.array(ids * 3), features=features[::-1])  # same ids, rows permuted
    assert file_digest(tmp_path / "f.npz") == hashlib.sha256((tmp_path / "f.npz").read_bytes()).hexdigest()
    fingerprint = check_data(None, _setup(tmp_path / "f.npz", ids, captions, vocab))
    state = {"data": fingerprint}
    assert check_data(state, _setup(tmp_path / "f.npz", ids, captions, vocab)) == fingerprint
    assert check_data({}, _setup(tmp_path / "g.npz", ids, captions, vocab))  # an old state: no check
    for setup, named in ((_setup(tmp_path / "g.npz", ids, captions, vocab), r"\(feature file\)"),
                         (_setup(tmp_path / "f.npz", ids[::-1], captions, vocab), r"\(split ids .*\)"),
                         (_setup(tmp_path / "f.npz", ids, ["a dog", "a hound"], vocab + ["hound"]),
                          r"\(split ids .*, vocabulary\)")):
        with pytest.raises(RunDirError, match=r"--resume: the data differ from the interrupted run's " + named):
            check_data(state, setup)
    # Large files: size and sampled blocks (here 3 of 1 MiB, forced by a low limit).
    big = tmp_path / "big.bin"
    big.write_bytes(rng.integers(0, 256, size=3 << 20, dtype=np.uint8).tobytes())
    monkeypatch.setattr(fingerprinting, "FULL_HASH_LIMIT", 1 << 20)
    monkeypatch.setattr(fingerprinting, "SAMPLE_BLOCKS", 3)
    data = big.read_bytes()
    expected = hashlib.sha256(data[:1 << 20] + data[1 << 20:2 << 20] + data[2 << 20:]).hexdigest()
    assert file_digest(big) == f"size:{3 << 20}:sample:{expected}"


@pytest.mark.slow
def test_resume_on_other_data_is_refused_naming_what_differs(data_dir, tmp_path):
    from grounded_text.data.features import load_npz_features

    out = tmp_path / "run"
    args = TINY + ["--epochs", "3", "--select-on", "val_loss", "--output-dir", str(out)]
    killed = _train_cli(args, data_dir, GROUNDED_TEXT_TEST_TRAIN_KILL_AT="2:0")  # epoch 1 committed
    assert killed.returncode == -9 and _state(out)["epochs_done"] == 1
    before = (out / "vocab.txt").read_bytes()
    # Same ids, rows permuted.
    permuted = tmp_path / "permuted"
    (permuted / "flickr8k" / "features").mkdir(parents=True)
    (permuted / "flickr8k" / "Flickr8k_text").symlink_to(data_dir / "flickr8k" / "Flickr8k_text")
    (permuted / "sts").symlink_to(data_dir / "sts")
    store = load_npz_features(data_dir / "flickr8k" / "features" / "efficientnet_lite0.npz")
    order = np.random.default_rng(0).permutation(len(store.ids))
    np.savez(permuted / "flickr8k" / "features" / "efficientnet_lite0.npz", ids=store.ids,
             features=store.features[order])
    proc = _train_cli(args + ["--resume"], permuted)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert _last_line(proc) == ("error: --resume: the data differ from the interrupted run's (feature file); pass the "
                                "same --data-dir and data flags as that run, or --overwrite to start over.")
    # Other captions for the same images: another vocabulary (it used to dump the weight arrays).
    other = tmp_path / "other"
    (other / "flickr8k" / "Flickr8k_text").mkdir(parents=True)
    (other / "flickr8k" / "features").symlink_to(data_dir / "flickr8k" / "features")
    for f in (data_dir / "flickr8k" / "Flickr8k_text").iterdir():
        text = f.read_text(encoding="utf-8")
        (other / "flickr8k" / "Flickr8k_text" / f.name).write_text(
            text.replace(" dog", " hound") if f.name == "Flickr8k.token.txt" else text, encoding="utf-8")
    proc = _train_cli(args + ["--resume"], other)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "(split ids (train/dev image ids and captions), vocabulary)" in _last_line(proc)
    assert "Traceback" not in proc.stderr and len(proc.stderr) < 20000
    assert (out / "vocab.txt").read_bytes() == before and _state(out)["epochs_done"] == 1


# ============================================================================ full disk


def test_storage_errors_are_recognised_from_python_hdf5_and_tensorflow():
    from grounded_text.training.storage_errors import storage_error

    h5 = RuntimeError("Disable slist on flush dest failure failed (file write failed: time = x, filename = "
                      "'/r/resume/.tmp-epoch-0001.weights.h5', file descriptor = 5, errno = 28, error message = "
                      "'No space left on device', buf = 0x1)")
    assert storage_error(h5) == (errno.ENOSPC, "/r/resume/.tmp-epoch-0001.weights.h5", True)
    assert storage_error(OSError(errno.ENOSPC, "No space left on device", "/r/x")) == (errno.ENOSPC, "/r/x", False)
    assert storage_error(OSError(errno.EROFS, "Read-only file system", "/r/y"))[0] == errno.EROFS
    tf_error = tf.errors.ResourceExhaustedError(None, None, "/r/export/variables.data; No space left on device")
    assert storage_error(tf_error)[0] == errno.ENOSPC
    try:
        try:
            raise OSError(errno.EDQUOT, "Disk quota exceeded", "/r/z")
        except OSError:
            raise ValueError("wrapped") from None
    except ValueError as chained:
        assert storage_error(chained) is None  # "from None": no cause and no context kept
    try:
        try:
            raise OSError(errno.EDQUOT, "Disk quota exceeded", "/r/z")
        except OSError as e:
            raise KeyError("during") from e
    except KeyError as caused:
        assert storage_error(caused) == (errno.EDQUOT, "/r/z", False)
    assert storage_error(OSError(errno.ENOENT, "No such file")) is None
    assert storage_error(ValueError("bad flag")) is None


def test_free_space_is_checked_before_an_epoch_is_written(tmp_path, monkeypatch):
    import shutil

    import keras

    from grounded_text.training.guards import DiskSpaceCheck
    from grounded_text.training.run_errors import StorageFull
    from grounded_text.training.run_state import write_state

    model = keras.Sequential([keras.Input((100,)), keras.layers.Dense(1000)])  # 101,000 float32 = 404 kB
    model.compile(keras.optimizers.Adam(), loss="mse")
    write_state(tmp_path, {"version": 1, "status": "running", "epochs": 3, "epochs_done": 1})
    check = DiskSpaceCheck(tmp_path, model)
    weights, h5 = 101_000 * 4, DiskSpaceCheck.H5_FILE_BYTES
    per_variable = DiskSpaceCheck.H5_VARIABLE_BYTES
    # best, last, best copy (2 variables each) + the resume checkpoint (2 + Adam's 2 x 2 + 2)
    expected = 3 * (int(1.1 * weights) + h5 + 2 * per_variable) + int(1.1 * 3 * weights) + h5 + 8 * per_variable
    assert check.epoch_bytes == expected + DiskSpaceCheck.MARGIN
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=check.epoch_bytes))
    check.on_epoch_end(1)  # just enough
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=check.epoch_bytes - 1))
    with pytest.raises(StorageFull, match=r"^no space left on the device of '[^']*': .*keeps epoch 1 of 3; free "
                                          r"space, then continue with --resume \(4\.4 MB free, epoch 2's checkpoints "
                                          r"need about 4\.4 MB\)\.$"):
        check.on_epoch_end(1)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.weights.h5").write_bytes(b"x" * 1000)  # rewritten in place: counts as free
    check.on_epoch_end(1)


@pytest.mark.slow
def test_a_full_disk_gives_one_line_a_consistent_state_and_resumes(data_dir, tmp_path):
    out = tmp_path / "run"
    args = TINY + ["--epochs", "3", "--select-on", "val_loss", "--output-dir", str(out)]
    # Epoch 2's resume checkpoint fails with ENOSPC (test hook; a real 6 MB tmpfs gives the same).
    proc = _train_cli(args, data_dir, GROUNDED_TEXT_TEST_TRAIN_ENOSPC_AT="2")
    assert proc.returncode == 2, proc.stderr[-3000:]
    # The file that failed is the epoch's staging file (an unpredictable name beside its target).
    assert re.fullmatch(re.escape(f"error: no space left on the device of '{out}' ({out}/resume/.epoch-0002.weights.h5"
                                  ".tmp-") + "[0-9a-f]{16}" + re.escape(f".weights.h5): {out}/run_state.json keeps "
                                                                        "epoch 1 of 3; free space, then continue "
                                                                        "with --resume."), _last_line(proc))
    assert "Traceback" not in proc.stderr
    state = _state(out)
    assert state["status"] == "running" and state["epochs_done"] == 1 and (out / state["checkpoint"]).is_file()
    assert sorted(p.name for p in (out / "resume").iterdir()) == ["best-0001.best.weights.h5", "epoch-0001.weights.h5"]
    resumed = _train_cli(args + ["--resume"], data_dir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert _state(out)["status"] == "complete" and metrics["resumed"] == {"from_epoch": 1}
    # The training time adds up over both sessions: epoch 1's from the first, 2 and 3 from the second.
    timing = metrics["timing_seconds"]
    assert len(timing["epochs"]) == 3 and all(s > 0 for s in timing["epochs"]), timing
    assert timing["fit"] == pytest.approx(sum(timing["epochs"])) and timing["this_session"] >= sum(timing["epochs"][1:])
    assert metrics["load_average"]["start"] == state["load_start"]  # the first session's, not the resume's


# ============================================================================ one run per directory


def test_a_run_directory_holds_one_run_at_a_time(tmp_path):
    from grounded_text.training.run_errors import RunDirError
    from grounded_text.training.run_lock import LOCK_FILE, guard_run

    out = tmp_path / "a" / "run"
    with guard_run(out):
        assert (out / LOCK_FILE).read_text() == f"{os.getpid()}\n"
        with pytest.raises(RunDirError, match=rf"'{out}' is in use by another run \(pid {os.getpid()}\)"):
            with guard_run(out):
                pass
        (out / "metrics.json").write_text("{}")
    assert not (out / LOCK_FILE).exists()
    with guard_run(out):  # released: the next run gets it
        pass
    fresh = tmp_path / "b" / "run"
    with pytest.raises(KeyError), guard_run(fresh):
        raise KeyError("failed before writing anything")
    assert not (tmp_path / "b").exists()  # the folders it created for the lock are gone
    with guard_run(out, enabled=False), guard_run(out, enabled=False):  # non-chief workers take no lock
        pass
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if not os.access(locked, os.W_OK):  # root may write anyway
            with pytest.raises(RunDirError, match=r"--output-dir '.*locked/run': cannot create it or its lock file"):
                with guard_run(locked / "run"):
                    pass
    finally:
        locked.chmod(0o700)


def test_a_second_train_into_a_directory_in_use_is_refused(data_dir, tmp_path):
    from grounded_text.training.run_lock import guard_run

    out = tmp_path / "run"
    with guard_run(out):  # "another run" (this process) holds the directory
        for flags in ([], ["--overwrite"]):
            proc = _train_cli(TINY + ["--epochs", "1", "--output-dir", str(out), *flags], data_dir)
            assert proc.returncode == 2, proc.stderr[-3000:]
            assert _last_line(proc) == (f"error: '{out}' is in use by another run (pid {os.getpid()}); wait for it to "
                                        "end or choose another --output-dir.")
    assert not out.exists()  # nothing written by the refused runs; the lock's folder removed


# ============================================================================ Ctrl-C while TensorFlow loads


def test_ctrl_c_while_tensorflow_loads_prints_one_line_and_exits_130(tmp_path, capsys, monkeypatch):
    train = importlib.import_module("grounded_text.train")  # the command (gt.train is the API's)

    real_import = builtins.__import__

    def interrupted(name, globals=None, locals=None, fromlist=(), level=0):
        if name == "grounded_text.training" and "run_errors" in (fromlist or ()):  # main's first TensorFlow import
            raise KeyboardInterrupt
        return real_import(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    assert train.main(["--output-dir", str(tmp_path / "run")]) == 130
    err = capsys.readouterr().err.strip()
    assert err == "interrupted while starting (loading TensorFlow): nothing was written."
    assert not (tmp_path / "run").exists()


def test_ctrl_c_inside_tensorflow_native_import_code_still_exits_130(tmp_path):
    """TensorFlow's native library runs Python through ``PyRun_String``; a KeyboardInterrupt raised
    there leaves CPython's "unhandled KeyboardInterrupt" flag set even after ``main`` has caught it,
    and ``python -m`` then ends the process by SIGINT (rc -2) instead of the 130 it returned. The
    interrupt is raised the same way here: through ``PyRun_String``, while main imports TensorFlow."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import ctypes, sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'grounded_text.training.run_errors':\n"
        "            run = ctypes.pythonapi.PyRun_String\n"
        "            run.restype = ctypes.py_object\n"
        "            run.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.py_object, ctypes.py_object]\n"
        "            run(b'raise KeyboardInterrupt', 257, {}, {})  # 257: Py_file_input\n"
        "        return None\n"
        "sys.meta_path.insert(0, Interrupt())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "grounded_text.train", "--output-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-2000:])
    assert proc.stderr.strip().splitlines()[-1] == (
        "interrupted while starting (loading TensorFlow): nothing was written.")
    assert not (tmp_path / "run").exists()


def test_checkpoint_temp_files_never_write_through_a_planted_symlink(tmp_path, monkeypatch):
    """The epoch checkpoint and the best-epoch copy are staged beside their targets under
    unpredictable names; links planted at the names earlier versions used (``resume/.tmp-<name>``)
    are left alone, and a guessed name makes the write fail instead of following the link."""
    import keras

    from grounded_text.training.resume import RunTracker
    from grounded_text.training.run_state import read_state
    from grounded_text.utils import durable

    out = tmp_path / "run"
    (out / "resume").mkdir(parents=True)
    victims = []
    for i, name in enumerate(("epoch-0001.weights.h5", "epoch-0002.weights.h5", "best-0002.best.weights.h5")):
        victim = tmp_path / f"victim{i}.txt"
        victim.write_bytes(b"precious")
        (out / "resume" / f".tmp-{name}").symlink_to(victim)
        victims.append(victim)

    class Score(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            logs["val_score"] = float(epoch)  # epoch 2 is the best: its checkpoint is copied

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.1), loss="mse")
    best = keras.callbacks.ModelCheckpoint(str(out / "best.weights.h5"), monitor="val_score", mode="max",
                                           save_best_only=True, save_weights_only=True)
    tracker = RunTracker(out, {"c": 1}, model, epochs=3, monitor="val_score", mode="max", best_checkpoint=best,
                         best_path=out / "best.weights.h5")
    x, y = np.ones((32, 4), np.float32), np.ones((32, 1), np.float32)
    fit = dict(batch_size=16, verbose=0, shuffle=False)
    model.fit(x, y, epochs=2, callbacks=tracker.callbacks([Score(), best], steps_per_epoch=2, steps_per_execution=1,
                                                          learning_rate=0.1), **fit)
    assert [v.read_bytes() for v in victims] == [b"precious"] * 3
    state = read_state(out)
    assert state["epochs_done"] == 2 and state["best"]["checkpoint"] == "resume/best-0002.best.weights.h5"
    for name in ("epoch-0002.weights.h5", "best-0002.best.weights.h5"):
        path = out / "resume" / name
        assert path.is_file() and not path.is_symlink()
    # An attacker who could guess the name: the save fails (O_EXCL | O_NOFOLLOW), nothing is written through.
    monkeypatch.setattr(durable.secrets, "token_hex", lambda n: "0" * (2 * n))
    guessed = out / "resume" / f".epoch-0003.weights.h5.tmp-{'0' * 16}.weights.h5"
    guessed.symlink_to(victims[0])
    with pytest.raises(FileExistsError, match="no free temp name"):
        model.fit(x, y, epochs=3, initial_epoch=2, callbacks=tracker.callbacks(
            [Score(), best], steps_per_epoch=2, steps_per_execution=1, learning_rate=0.1), **fit)
    assert victims[0].read_bytes() == b"precious" and read_state(out)["epochs_done"] == 2


def test_storage_message_advises_by_cause(tmp_path):
    from grounded_text.config.schema import ExperimentConfig
    from grounded_text.training.run_state import write_state
    from grounded_text.training.storage_errors import storage_message

    out = tmp_path / "run"
    out.mkdir()
    full = storage_message(out, errno.ENOSPC, None)
    assert full.startswith("no space left on the device of") and "free space and run it again" in full
    read_only = storage_message(out, errno.EROFS, str(out / "x"))
    assert read_only.startswith("read-only file system for the device of") and "free space" not in read_only
    assert read_only.endswith("nothing of this run was saved; make it writable or choose another --output-dir "
                              "and run it again.")
    write_state(out, _resumable_state(ExperimentConfig().to_dict()))
    assert "keeps epoch 1 of 3; make it writable or choose another --output-dir, then continue with --resume." in \
        storage_message(out, errno.EROFS, None)


def test_an_output_dir_that_is_a_file_or_lies_under_one_is_named(tmp_path):
    from grounded_text.config.schema import ExperimentConfig
    from grounded_text.training.run_dir import check_run_dir
    from grounded_text.training.run_errors import RunDirError, is_usage_error
    from grounded_text.training.run_lock import guard_run

    a_file = tmp_path / "afile"
    a_file.write_text("keep me")
    config = ExperimentConfig().to_dict()
    with pytest.raises(RunDirError, match=f"--output-dir '{a_file}' exists and is not a folder") as e:
        check_run_dir(a_file, config, resume=False, overwrite=False)
    assert is_usage_error(e.value)  # the CLI prints it as one `error:` line, exit 2
    with pytest.raises(RunDirError, match=r"cannot create it or its lock file \(Not a directory\)"), \
            guard_run(a_file / "run"):
        pass
    assert a_file.read_text() == "keep me"


def test_a_field_added_later_at_its_old_value_is_the_same_config():
    """A run made before ``model.encoder.weight_init`` existed ran with Keras' initialisers: its
    config lacking the field equals one that holds ``"keras"``, not one that holds ``"torch"``."""
    from grounded_text.training.run_dir import FIELDS_ADDED_AT, config_diff

    old = {"model": {"encoder": {"units": 512}}, "train": {"seed": 0}}
    now = {"model": {"encoder": {"units": 512, "weight_init": "keras"}}, "train": {"seed": 0}}
    assert FIELDS_ADDED_AT["model.encoder.weight_init"] == "keras"
    assert config_diff(old, now) == []
    torch = {"model": {"encoder": {"units": 512, "weight_init": "torch"}}, "train": {"seed": 0}}
    assert config_diff(old, torch) == ["model.encoder.weight_init: None → 'torch'"]
    assert config_diff(now, old) == ["model.encoder.weight_init: 'keras' → None"]  # only a field the old run lacks
    assert config_diff(old, {**now, "train": {"seed": 1}}) == ["train.seed: 0 → 1"]


def test_a_stored_none_clip_norm_is_no_clipping(tmp_path):
    """Before the records could clip, a resolved config stored ``None`` for "no clipping"; now
    ``None`` is the record's choice and ``0`` is no clipping. A stored run's ``None`` (JSON null,
    or ``unset`` in its config.toml) compares equal to ``0`` and replays without clipping, and
    never equal to a clipping value."""
    from grounded_text.config.files import config_toml, read_config_file
    from grounded_text.config.schema import ExperimentConfig, TrainConfig
    from grounded_text.training.run_dir import config_diff

    old = {"train": {"clip_norm_text": None, "clip_norm_image": None}}
    assert config_diff(old, {"train": {"clip_norm_text": 0.0, "clip_norm_image": 0.0}}) == []
    assert config_diff(old, {"train": {"clip_norm_text": 51.2, "clip_norm_image": 0.0}}) == [
        "train.clip_norm_text: None → 51.2"]
    assert config_diff({"train": {}}, {"train": {"clip_norm_text": 0.0, "clip_norm_image": 0.0}}) == []
    assert config_diff({"train": {"clip_norm_text": 0.0}}, {"train": {"clip_norm_text": None}}) == [
        "train.clip_norm_text: 0.0 → None"]  # only the stored side's None is read as it was meant
    path = tmp_path / "config.toml"
    path.write_text('unset = ["train.clip_norm_text"]\n[train]\nclip_norm_image = 2.56\n')  # as written before
    back = read_config_file(path).train
    assert (back.clip_norm_text, back.clip_norm_image) == (0.0, 2.56)
    # Written now, the record's choice (None) round-trips as None, and "no clipping" as 0.
    for value in (None, 0.0, 51.2):
        path.write_text(config_toml(ExperimentConfig(train=TrainConfig(clip_norm_text=value))))
        assert read_config_file(path).train.clip_norm_text == value
