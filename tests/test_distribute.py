"""tf.distribute strategies and mixed precision in the one trainer.

The multi-device tests run in fresh subprocesses (logical devices and collective
ops are fixed when TensorFlow starts) with hard timeouts, so a hang fails the test.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from grounded_text.training import distribute

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 240


def _env(data_dir, **extra):
    env = {**os.environ, "PYTHONPATH": str(REPO), "GROUNDED_TEXT_DATA": str(data_dir),
           "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "-1", **extra}
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


def test_make_strategy_names_and_errors(monkeypatch):
    with pytest.raises(ValueError, match="Unknown strategy"):
        distribute.make_strategy("horovod")
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG"):
        distribute.make_strategy("multi_worker")
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {}}))
    with pytest.raises(ValueError, match="'cluster' and 'task'"):
        distribute.make_strategy("multi_worker")
    assert distribute.is_chief(distribute.make_strategy("default"))


def test_resolve_mixed_precision(monkeypatch, caplog):
    assert distribute.resolve_mixed_precision(None) == "float32"
    assert distribute.resolve_mixed_precision("mixed_bfloat16") == "mixed_bfloat16"
    with pytest.raises(ValueError, match="Unknown mixed_precision"):
        distribute.resolve_mixed_precision("fp8")
    monkeypatch.setattr(distribute.tf.config, "list_physical_devices", lambda kind=None: [])
    monkeypatch.setattr(distribute.tf.config, "list_logical_devices", lambda kind=None: [])
    monkeypatch.setattr(distribute, "cpu_supports_bfloat16", lambda: False)
    with caplog.at_level(logging.WARNING, logger="grounded_text.distribute"):
        assert distribute.resolve_mixed_precision("auto") == "float32"
    assert "training in float32" in caplog.text
    monkeypatch.setattr(distribute, "cpu_supports_bfloat16", lambda: True)
    assert distribute.resolve_mixed_precision("auto") == "mixed_bfloat16"
    monkeypatch.setattr(distribute.tf.config, "list_physical_devices",
                        lambda kind=None: ["gpu"] if kind == "GPU" else [])
    assert distribute.resolve_mixed_precision("auto") == "mixed_float16"


MIRRORED = textwrap.dedent(
    """
    import json, sys, numpy as np, tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
    from grounded_text.data.pairs import make_dataset
    from grounded_text.training.preparation import prepare_training
    from grounded_text.training.distribute import shard_by_data

    def run(strategy, loss):
        cfg = ExperimentConfig(data=DataConfig(max_train_images=52, max_dev_images=4, batch_size=32,
                                           one_caption_per_image=False),
                               model=ModelConfig(embedding_dim=16, loss=loss),
                               train=TrainConfig(strategy=strategy, select_on="val_loss", learning_rate=1e-2))
        s = prepare_training(cfg, None)
        # Fixed order (the shuffled pipeline reshuffles on each iteration).
        batches = shard_by_data(make_dataset(s.train_pairs, 32, shuffle=False).take(3))
        s.model.train_model.fit(batches, epochs=1, verbose=0)
        probe = next(iter(batches))
        return (s.strategy.num_replicas_in_sync, len(s.train_pairs), float(s.model.train_model(probe)),
                [w.numpy() for w in s.model.train_model.weights])

    out = {}
    for loss in ("pearson",):  # the vete_bow preset (random mismatched pairs: a seeded permutation)
        r1, n, l1, w1 = run("default", loss)
        r2, _, l2, w2 = run("mirrored", loss)
        out[loss] = {"replicas": [r1, r2], "pairs": n, "loss": [l1, l2],
                     "max_weight_diff": max(float(np.abs(a - b).max()) for a, b in zip(w1, w2)),
                     "max_update": max(float(np.abs(a).max()) for a in w1)}
    print(json.dumps(out))
    """
)


# A fresh TensorFlow process that trains each loss under two strategies.
@pytest.mark.slow
def test_mirrored_two_cpus_matches_default_strategy(data_dir):
    proc = subprocess.run([sys.executable, "-c", MIRRORED], capture_output=True, text=True, timeout=TIMEOUT,
                          env=_env(data_dir), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for loss, r in got.items():
        assert r["replicas"] == [1, 2] and r["pairs"] == 260, r
        # The in-batch losses gather the replicas' halves: same loss, same update.
        np.testing.assert_allclose(r["loss"][1], r["loss"][0], rtol=1e-4, err_msg=loss)
        assert r["max_weight_diff"] < 1e-5, (loss, r)


WORKER = textwrap.dedent(
    """
    import json, sys, numpy as np
    from grounded_text.training.distribute import is_chief, make_strategy
    strategy = make_strategy("multi_worker")  # first, before other TF work
    from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
    from grounded_text.training.preparation import prepare_training
    cfg = ExperimentConfig(data=DataConfig(max_train_images=52, max_dev_images=4, batch_size=32,
                                           one_caption_per_image=False),
                           model=ModelConfig(embedding_dim=16),
                           train=TrainConfig(strategy="multi_worker", select_on="val_loss", learning_rate=1e-2))
    s = prepare_training(cfg, None, strategy=strategy)
    before = [w.numpy().copy() for w in s.model.train_model.weights]
    h = s.model.train_model.fit(s.train_ds.take(2), epochs=1, verbose=0)
    np.savez(sys.argv[1], *[w.numpy() for w in s.model.train_model.weights])
    print(json.dumps({"replicas": strategy.num_replicas_in_sync, "chief": is_chief(strategy),
                      "loss": h.history["loss"],
                      "update": max(float(np.abs(a - w.numpy()).max())
                                    for a, w in zip(before, s.model.train_model.weights))}))
    """
)


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


# Two fresh TensorFlow processes that train together.
@pytest.mark.slow
def test_multi_worker_two_processes_end_with_equal_weights(data_dir, tmp_path):
    cluster = {"worker": [f"127.0.0.1:{p}" for p in _free_ports(2)]}
    procs = []
    for i in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path / f"w{i}.npz")],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                      env=_env(data_dir, TF_CONFIG=tf_config)))
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=TIMEOUT)
            assert p.returncode == 0, err[-3000:]
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [r["replicas"] for r in results] == [2, 2]
    assert [r["chief"] for r in results] == [True, False]  # worker 0 writes checkpoints/exports
    assert min(r["update"] for r in results) > 1e-3  # it trained
    assert np.isfinite(results[0]["loss"]).all() and results[0]["loss"] == results[1]["loss"]
    w0, w1 = np.load(tmp_path / "w0.npz"), np.load(tmp_path / "w1.npz")
    assert len(w0.files) == len(w1.files) > 0
    for k in w0.files:
        np.testing.assert_array_equal(w0[k], w1[k], err_msg=k)


# Trains and exports (an export alone is about 26 s).
@pytest.mark.slow
def test_train_under_mixed_float16_exports_float32_and_restores_policy(data_dir, tmp_path):
    import keras
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
    from grounded_text.train import config_from_args, parse_args
    from grounded_text.training.trainer import train

    a = parse_args(["--output-dir", "x", "--mixed-precision", "--strategy", "mirrored", "--steps-per-execution", "4"])
    c = config_from_args(a).train
    assert (c.mixed_precision, c.strategy, c.steps_per_execution) == ("auto", "mirrored", 4)
    cfg = ExperimentConfig(data=DataConfig(max_train_images=16, max_dev_images=4, batch_size=16,
                                           one_caption_per_image=False),
                           model=ModelConfig(embedding_dim=8),
                           train=TrainConfig(epochs=1, select_on="val_loss", mixed_precision="mixed_float16"))
    metrics = train(cfg, data_dir, tmp_path / "run", evaluate=False, verbose=0)
    assert metrics["distribution"] == {"strategy": "default", "replicas": 1, "precision": "mixed_float16",
                                       "chief": True}
    assert np.isfinite(metrics["history"]["loss"]).all()
    assert keras.mixed_precision.global_policy().name == "float32"  # restored
    out = tf.saved_model.load(str(tmp_path / "run" / "export"))(tf.constant(["a dog runs", ""]))
    assert out.dtype == tf.float32 and out.shape == (2, 8)
    np.testing.assert_allclose(np.linalg.norm(out.numpy(), axis=1), 1.0, atol=1e-3)


def test_benchmark_sentence_list_and_summary(data_dir):
    from grounded_text.benchmarks.runs import benchmark_sentences
    from grounded_text.benchmarks.throughput import summary
    from grounded_text.data.sts import read_sick, read_sts_benchmark

    sents = benchmark_sentences(data_dir / "sts")
    n = sum(2 * len(read_sts_benchmark(data_dir / "sts", s)) for s in ("train", "dev", "test"))
    n += sum(2 * len(read_sick(data_dir / "sts", s)) for s in ("train", "trial", "test"))
    assert len(sents) == n > 30000 and all(isinstance(x, str) for x in sents)
    s = summary([3.0, 1.0, 2.0, 10.0])
    assert (s["median"], s["min"], s["max"]) == (2.5, 1.0, 10.0)
    assert (s["q1"], s["q3"]) == tuple(np.percentile([1, 2, 3, 10], [25, 75]))


def test_make_dataset_vectorised_shuffle_reshuffles_and_keeps_pairs():
    from grounded_text.data.pairs import CaptionPairs, make_dataset

    n, d = 37, 3
    captions = np.array([f"cäption {i} 🐶" for i in range(n)])
    rows = np.arange(n) % 11
    feats = np.arange(11 * d, dtype=np.float32).reshape(11, d)
    pairs = CaptionPairs(captions, np.array([f"{r}.jpg" for r in rows]), rows, feats)
    ds = make_dataset(pairs, 8, seed=5, drop_remainder=False)
    assert int(ds.cardinality()) == 5
    epochs = [[b for b in ds] for _ in range(2)]
    orders = []
    for batches in epochs:
        got = [c.decode() for b in batches for c in b["caption"].numpy()]
        assert sorted(got) == sorted(captions.tolist())  # every pair once, UTF-8 intact
        for b in batches:
            r = np.array([int(c.decode().split()[1]) % 11 for c in b["caption"].numpy()])
            np.testing.assert_array_equal(b["image_features"].numpy(), feats[r])  # caption ↔ features
            np.testing.assert_array_equal(b["image_id"].numpy(), r)
        orders.append(got)
    assert orders[0] != orders[1]  # a new permutation each epoch
    assert int(make_dataset(pairs, 8, seed=5).cardinality()) == 4
    again = [c.decode() for b in make_dataset(pairs, 8, seed=5, drop_remainder=False) for c in b["caption"].numpy()]
    assert again == orders[0]  # seeded
    plain = [c.decode() for b in make_dataset(pairs, 8, shuffle=False, drop_remainder=False)
             for c in b["caption"].numpy()]
    assert plain == captions.tolist()
