"""Sharded TFRecord feature stores (write, resume, stream, caption join, training)."""

import json

import numpy as np
import pytest

from grounded_text.data.features import FeatureStore, open_feature_store
from grounded_text.data.pairs import CaptionPairs, load_flickr8k_pairs, make_dataset
from grounded_text.data.store_writer import TFRecordFeatureSink, write_feature_store
from grounded_text.data.streaming import IDS_FILE, MANIFEST, StreamingFeatureStore, make_streaming_dataset

N, D = 700, 12


def _data(n=N, d=D, seed=0):
    rng = np.random.default_rng(seed)
    ids = np.array([f"img_{i:05d}.jpg" for i in range(n)])
    return ids, (rng.normal(size=(n, d)) * 3).astype(np.float32)


def _write(path, ids, feats, dtype, rows_per_shard=128, chunks=(0, 100, 333, N)):
    sink = TFRecordFeatureSink(path, feats.shape[1], dtype=dtype, rows_per_shard=rows_per_shard)
    for a, b in zip(chunks[:-1], chunks[1:]):
        sink.append(ids[a:b], feats[a:b])
    return sink.close()


def _stream(store, **kw):
    out = list(store.dataset(batch_size=64, with_rows=True, **kw).as_numpy_iterator())
    rows = np.concatenate([o[0] for o in out])
    ids = np.concatenate([o[1] for o in out]).astype(str)
    feats = np.concatenate([o[2] for o in out])
    return rows, ids, feats


def test_float32_roundtrip_bit_exact_in_store_order(tmp_path):
    ids, feats = _data()
    store = open_feature_store(_write(tmp_path / "s", ids, feats, "float32"))
    assert isinstance(store, StreamingFeatureStore)
    assert (store.num_rows, store.dim, store.dtype) == (N, D, "float32")
    m = json.loads((tmp_path / "s" / MANIFEST).read_text())
    # appends of one sink fill the open shard up to rows_per_shard
    assert [s["rows"] for s in m["shards"]] == [128, 128, 128, 128, 128, 60] and m["closed"]
    rows, got_ids, got = _stream(store, shuffle=False)
    np.testing.assert_array_equal(rows, np.arange(N))
    np.testing.assert_array_equal(got_ids, ids)
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), feats.view(np.uint32))
    np.testing.assert_array_equal(store.ids, ids)
    assert store.index()["img_00042.jpg"] == 42
    pick = [650, 3, 3, 129, 0]  # random access for evaluation sets: one pass, any order, repeats
    np.testing.assert_array_equal(store[pick], feats[pick])
    np.testing.assert_array_equal(store[5], feats[5])
    with pytest.raises(IndexError, match="outside"):
        store[[N]]


def test_float16_matches_numpy_rounding(tmp_path):
    ids, feats = _data()
    store = open_feature_store(_write(tmp_path / "s", ids, feats, "float16"))
    rows, got_ids, got = _stream(store, shuffle=True, seed=3)
    np.testing.assert_array_equal(got_ids, ids[rows])
    ref = feats[rows].astype(np.float16).astype(np.float32)  # NumPy's round-to-nearest-even
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_allclose(got, feats[rows], rtol=2 ** -10, atol=2 ** -24)
    _write(tmp_path / "s32", ids, feats, "float32")
    size = lambda name: (tmp_path / name / "shard-00000.tfrecord").stat().st_size  # noqa: E731
    assert size("s32") - size("s") == 128 * D * 2  # raw bytes: 2 B/value instead of 4


def test_shuffled_epochs_each_row_once_seeded(tmp_path):
    ids, feats = _data()
    store = open_feature_store(_write(tmp_path / "s", ids, feats, "float32"))
    kw = dict(shuffle_buffer=200, cycle_length=3)
    r1, i1, f1 = _stream(store, seed=7, **kw)
    r1b, _, _ = _stream(store, seed=7, **kw)
    r2, _, _ = _stream(store, seed=8, **kw)
    for r in (r1, r2):
        np.testing.assert_array_equal(np.sort(r), np.arange(N))  # each row exactly once
    np.testing.assert_array_equal(r1, r1b)  # same seed → same order
    assert not np.array_equal(r1, r2)  # other seed → other order
    assert not np.array_equal(r1, np.arange(N))
    np.testing.assert_array_equal(i1, ids[r1])
    np.testing.assert_array_equal(f1, feats[r1])
    # Two epochs of one dataset: both permutations, reshuffled.
    ds = store.dataset(seed=7, with_rows=True, **kw)
    e1 = np.array([r for r, _, _ in ds.as_numpy_iterator()])
    e2 = np.array([r for r, _, _ in ds.as_numpy_iterator()])
    np.testing.assert_array_equal(np.sort(e2), np.arange(N))
    assert not np.array_equal(e1, e2)


def test_resume_appends_new_shards_and_skips_existing(tmp_path):
    ids, feats = _data()
    path = tmp_path / "s"
    sink = TFRecordFeatureSink(path, D, dtype="float32", rows_per_shard=256)
    sink.append(ids[:300], feats[:300])
    del sink  # "killed" before close(): each append is already committed
    readable = open_feature_store(path)
    assert readable.num_rows == 300 and not readable.closed
    # A crash after ids were written but before the manifest: the extra ids are dropped.
    with open(path / IDS_FILE, "a") as f:
        f.write("ghost.jpg\n")
    sink = TFRecordFeatureSink(path, D, dtype="float32", rows_per_shard=256)
    assert sink.existing_ids() == set(ids[:300].tolist())
    todo = [i for i, x in enumerate(ids) if x not in sink.existing_ids()]
    sink.append(ids[todo], feats[todo])
    sink.close()
    store = open_feature_store(path)
    assert store.num_rows == N and store.closed
    assert [s[1] for s in store.shards] == [256, 44, 256, 144]
    rows, got_ids, got = _stream(store, shuffle=False)
    np.testing.assert_array_equal(got_ids, ids)
    np.testing.assert_array_equal(got, feats)
    assert "ghost.jpg" not in (path / IDS_FILE).read_text()


def test_append_refuses_bad_rows_naming_the_id(tmp_path):
    ids, feats = _data(20)
    sink = TFRecordFeatureSink(tmp_path / "s", D, dtype="float16")
    bad = feats.copy()
    bad[7, 3] = np.nan
    with pytest.raises(ValueError, match="img_00007.jpg"):
        sink.append(ids, bad)
    big = feats.copy()
    big[4, 0] = 1e6  # beyond float16 range
    with pytest.raises(ValueError, match=r"overflow float16.*img_00004.jpg"):
        sink.append(ids, big)
    assert sink.num_rows == 0 and sink.existing_ids() == set()  # nothing written
    sink.append(ids[:5], feats[:5])
    with pytest.raises(ValueError, match="img_00002.jpg.*already stored"):
        sink.append(ids[2:3], feats[2:3])
    with pytest.raises(ValueError, match=r"\[n=2, dim=12\]"):
        sink.append(ids[5:7], feats[5:7, :6])
    with pytest.raises(ValueError, match="newline"):
        sink.append(np.array(["a\nb"]), feats[:1])
    sink.close()
    with pytest.raises(ValueError, match="dim=12 dtype=float16; cannot append dim=13"):
        TFRecordFeatureSink(tmp_path / "s", 13, dtype="float16")
    with pytest.raises(ValueError, match="cannot append dim=12 dtype=float32"):
        TFRecordFeatureSink(tmp_path / "s", D, dtype="float32")


def test_manifest_errors_are_clear(tmp_path):
    ids, feats = _data()
    path = _write(tmp_path / "s", ids, feats, "float32")
    (path / "shard-00002.tfrecord").unlink()
    with pytest.raises(FileNotFoundError, match="shard-00002.tfrecord"):
        open_feature_store(path)
    path = _write(tmp_path / "t", ids, feats, "float32")
    with open(path / "shard-00001.tfrecord", "r+b") as f:
        f.truncate(100)
    with pytest.raises(ValueError, match="shard-00001.tfrecord.*truncated"):
        open_feature_store(path)
    m = json.loads((path / MANIFEST).read_text())
    m["num_rows"] += 1
    (path / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(ValueError, match="num_rows"):
        open_feature_store(path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="not a feature store"):
        open_feature_store(tmp_path / "empty")


def test_open_feature_store_npz_stays_in_memory(tmp_path):
    ids, feats = _data(10)
    np.savez(tmp_path / "f.npz", ids=ids, features=feats)
    store = open_feature_store(tmp_path / "f.npz")
    assert isinstance(store, FeatureStore)
    np.testing.assert_array_equal(store.features, feats)


def _pair_multiset(ds):
    out = []
    for b in ds.as_numpy_iterator():
        for c, f, i in zip(b["caption"], b["image_features"], b["image_id"]):
            out.append((int(i), c.decode(), f.tobytes()))
    return sorted(out)


def test_streaming_pairs_equal_in_memory_pairs(tmp_path):
    ids, feats = _data(300)
    rng = np.random.default_rng(1)
    # 0-3 captions per image, images in a shuffled order (join by row, not position).
    rows = np.concatenate([[r] * int(rng.integers(0, 4)) for r in rng.permutation(300)]).astype(np.int64)
    captions = np.array([f"caption {k} of image {r}" for k, r in enumerate(rows)])
    mem = CaptionPairs(captions, ids[rows], rows, feats)
    store = open_feature_store(_write(tmp_path / "s", ids, feats, "float32", rows_per_shard=64,
                                      chunks=(0, 300)))
    streamed = CaptionPairs(captions, ids[rows], rows, store.features)
    ref = _pair_multiset(make_dataset(mem, 16, shuffle=False, drop_remainder=False))
    ds = make_dataset(streamed, 16, shuffle=True, seed=5, drop_remainder=False)
    assert int(ds.cardinality()) == -(-len(rows) // 16)
    assert _pair_multiset(ds) == ref and len(ref) == len(rows)
    # Seeded: same seed → same batches; another seed → another order.
    first = lambda d: next(iter(d))["image_id"].numpy()  # noqa: E731
    a = make_streaming_dataset(streamed, 16, seed=5, shuffle_buffer=100)
    b = make_streaming_dataset(streamed, 16, seed=5, shuffle_buffer=100)
    c = make_streaming_dataset(streamed, 16, seed=6, shuffle_buffer=100)
    np.testing.assert_array_equal(first(a), first(b))
    assert not np.array_equal(first(a), first(c))
    assert int(a.cardinality()) == len(rows) // 16
    with pytest.raises(ValueError, match="grouped sampler needs an in-memory"):
        from grounded_text.data.sampler import make_grouped_dataset
        make_grouped_dataset(streamed, 4, 2)


# Writes the real feature store, trains and exports.
@pytest.mark.slow
def test_real_features_stream_and_train(data_dir, tmp_path):
    """The real EfficientNet-Lite0 features as a store: same pairs as the .npz path; trains and exports."""
    from grounded_text.config.schema import DataConfig, ExperimentConfig, TrainConfig
    from grounded_text.training.trainer import train

    npz = data_dir / "flickr8k" / "features" / "efficientnet_lite0.npz"
    mem = open_feature_store(npz)
    store_dir = write_feature_store(tmp_path / "store", mem.ids, mem.features, dtype="float32",
                                    rows_per_shard=2048)
    with pytest.warns(UserWarning, match="Dropped 5 caption"):
        flickr_mem = load_flickr8k_pairs(data_dir)
    with pytest.warns(UserWarning, match="Dropped 5 caption"):
        flickr_st = load_flickr8k_pairs(data_dir, str(store_dir))
    assert isinstance(flickr_st.store, StreamingFeatureStore) and flickr_st.store.dim == 1280
    a = flickr_mem.splits["dev"].first_images(40)
    b = flickr_st.splits["dev"].first_images(40)
    np.testing.assert_array_equal(a.feature_rows, b.feature_rows)
    assert _pair_multiset(make_dataset(a, 32, shuffle=False, drop_remainder=False)) == \
        _pair_multiset(make_dataset(b, 32, shuffle=True, seed=1, drop_remainder=False))

    cfg = ExperimentConfig(
        data=DataConfig(features=str(store_dir), max_train_images=150, batch_size=32, max_dev_images=40,
                        one_caption_per_image=False),
        train=TrainConfig(epochs=1, learning_rate=3e-3, select_on="val_loss"),
    )
    metrics = train(cfg, data_dir, tmp_path / "run", evaluate=False, verbose=0)
    assert metrics["data"]["feature_file"] == str(store_dir)
    assert metrics["data"]["train_pairs"] == 750 and metrics["data"]["feature_dim"] == 1280
    assert len(metrics["history"]["loss"]) == 1 and np.isfinite(metrics["history"]["loss"][0])
    assert (tmp_path / "run" / "export" / "saved_model.pb").exists()
