"""Merkx & Frank's training protocol: length-bucketed batches, dev-retrieval selection,
snapshots ranked on dev retrieval, and the ensemble of the best snapshots (both towers)."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TextConfig, TrainConfig
from grounded_text.data.pairs import CaptionPairs, make_dataset
from grounded_text.data.sentence_end import apply_sentence_end
from grounded_text.data.sts import read_sts_subset
from grounded_text.training.trainer import train

rng = np.random.default_rng(0)
WORDS = "a dog runs on the beach man rides red bike two kids play in snow cat sleeps".split()


def random_pairs(n=203, n_images=41, d=3):
    caps = np.array([f"{i} " + " ".join(rng.choice(WORDS, size=int(rng.integers(1, 15)))) for i in range(n)])
    rows = rng.integers(0, n_images, size=n).astype(np.int64)
    return CaptionPairs(caps, np.array([f"im{r}" for r in rows]), rows,
                        rng.normal(size=(n_images, d)).astype(np.float32))


def epochs_of(ds, k):
    it = iter(ds.repeat(k))
    per_epoch = int(ds.cardinality())
    return [[next(it) for _ in range(per_epoch)] for _ in range(k)]


def test_bucketed_batches_serve_every_pair_once_with_less_padding():
    pairs = random_pairs()
    b = 8
    bucketed = make_dataset(pairs, b, seed=3, bucket_by_length=True, bucket_pool=5)
    plain = make_dataset(pairs, b, seed=3)
    assert int(bucketed.cardinality()) == int(plain.cardinality()) == len(pairs) // b
    index = {c: i for i, c in enumerate(pairs.captions.tolist())}
    e1, e2 = epochs_of(bucketed, 2)
    for epoch in (e1, e2):
        caps = [c.decode() for batch in epoch for c in batch["caption"].numpy()]
        assert len(caps) == (len(pairs) // b) * b and len(set(caps)) == len(caps)
        # Pairs stay pairs: each caption comes with its own image's features and id.
        for batch in epoch:
            for c, f, i in zip(batch["caption"].numpy(), batch["image_features"].numpy(), batch["image_id"].numpy()):
                row = pairs.feature_rows[index[c.decode()]]
                assert i == row
                np.testing.assert_array_equal(f, pairs.features[row])
    def order(epoch):
        return [c for batch in epoch for c in batch["caption"].numpy()]

    assert order(e1) != order(e2)  # a new arrangement each epoch

    def padding(epoch):
        lengths = [[len(c) for c in batch["caption"].numpy()] for batch in epoch]
        return np.mean([max(n) - np.mean(n) for n in lengths])

    assert padding(e1) < 0.5 * padding(epochs_of(plain, 1)[0])
    # Same seed, same batches.
    again = epochs_of(make_dataset(pairs, b, seed=3, bucket_by_length=True, bucket_pool=5), 1)[0]
    assert order(again) == order(e1)
    # Without drop_remainder every pair is served exactly once.
    full = make_dataset(pairs, b, shuffle=False, drop_remainder=False, bucket_by_length=True)
    served = sorted(c.decode() for batch in full for c in batch["caption"].numpy())
    assert served == sorted(pairs.captions.tolist())


@pytest.mark.slow
def test_char_training_selects_and_ensembles_the_best_snapshots_on_dev_retrieval(data_dir, tmp_path):
    cfg = ExperimentConfig(
        data=DataConfig(batch_size=32, bucket_by_length=True, max_train_images=64, max_dev_images=64),
        text=TextConfig(lowercase=False),
        model=ModelConfig(name="char_gru_attention", embedding_dim=8,
                          encoder={"units": 4, "char_dim": 4, "attention_units": 8}),
        train=TrainConfig(epochs=3, learning_rate=1e-2, lr_min=1e-5, cycle_epochs=1, schedule="cyclic_cosine",
                          snapshots=True, ensemble_size=2, select_on="dev_retrieval"),
    )
    metrics = train(cfg, data_dir, tmp_path / "run", evaluate=False, verbose=0)
    assert metrics["selection"]["monitor"] == "val_rsum"
    rsums = [row["rsum"] for row in metrics["dev_retrieval"]]
    assert len(rsums) == 3 and metrics["history"]["val_rsum"] == pytest.approx(rsums)
    exported = metrics["exported"]
    assert exported["kind"] == "snapshot_ensemble"
    best_two = sorted(range(3), key=lambda i: (-rsums[i], i))[:2]
    assert exported["snapshot_epochs"] == [i + 1 for i in best_two]
    # The text and image exports are the mean-then-normalise of the chosen snapshots.
    run = tmp_path / "run"
    towers = [keras.saving.load_model(run / "snapshots" / f"snapshot_{i + 1:02d}.keras") for i in best_two]
    images = [keras.saving.load_model(run / "snapshots" / f"image_snapshot_{i + 1:02d}.keras") for i in best_two]
    probe = ["A dog runs.", "TWO kids!", ""]
    feats = np.random.default_rng(1).normal(size=(3, metrics["data"]["feature_dim"])).astype(np.float32)

    def mean_normalise(outs):
        m = np.mean([o.astype(np.float64) for o in outs], axis=0)
        n = np.linalg.norm(m, axis=1, keepdims=True)
        return m / np.maximum(n, 1e-12)

    text_ref = mean_normalise([t(tf.constant(probe)).numpy() for t in towers])
    image_ref = mean_normalise([t(tf.constant(feats)).numpy() for t in images])
    text_export = tf.saved_model.load(str(run / "export"))
    image_export = tf.saved_model.load(str(run / "image_export"))
    np.testing.assert_allclose(text_export(tf.constant(probe)).numpy(), text_ref, atol=1e-5)
    np.testing.assert_allclose(image_export(tf.constant(feats)).numpy(), image_ref, atol=1e-5)
    # Case is kept: the character vocabulary holds capitals.
    assert json.loads((run / "metrics.json").read_text())["config"]["text"]["lowercase"] is False
    # STS 2012's MSRvid is logged per epoch beside STS 2016: the last epoch's figure is the
    # Pearson r of cosines of the last snapshot's vectors (SciPy reference).
    assert len(metrics["history"]["val_avg2012/MSRvid"]) == 3 and len(metrics["history"]["val_avg2016"]) == 3
    year = data_dir / "sts" / "STS12-en-test"
    pairs = read_sts_subset(year / "STS.input.MSRvid.txt", year / "STS.gs.MSRvid.txt")
    last = keras.saving.load_model(run / "snapshots" / "snapshot_03.keras")
    # The sentences end as the run's training captions do (the record's " ." rule).
    rule = metrics["config"]["text"]["sentence_end"]
    assert rule == "space_period"
    a, b = (last(tf.constant(apply_sentence_end(list(side), rule))).numpy().astype(np.float64)
            for side in (pairs.sentences1, pairs.sentences2))
    cosines = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert metrics["history"]["val_avg2012/MSRvid"][-1] == pytest.approx(stats.pearsonr(cosines, pairs.scores)[0],
                                                                        abs=1e-4)


@pytest.mark.slow
def test_select_on_last_exports_the_last_epoch(data_dir, tmp_path):
    cfg = ExperimentConfig(
        data=DataConfig(batch_size=32, max_train_images=64, max_dev_images=32),
        model=ModelConfig(name="vete_bow", embedding_dim=8),
        train=TrainConfig(epochs=2, select_on="last"),
    )
    metrics = train(cfg, data_dir, tmp_path / "run", evaluate=False, verbose=0)
    assert metrics["selection"]["best_epoch"] == 2 and metrics["exported"] == {"kind": "best_epoch", "epoch": 2}
    assert not (tmp_path / "run" / "checkpoints" / "best.weights.h5").exists()
