"""Caption stores: the captions travel in the TFRecord records, and the streamed pairs are
the in-memory path's pairs (as a multiset)."""

import hashlib
import json

import numpy as np
import pytest
import tensorflow as tf

from grounded_text.data.features import open_feature_store
from grounded_text.data.pairs import CaptionPairs, load_flickr8k_pairs, make_dataset
from grounded_text.data.store_writer import TFRecordFeatureSink, write_caption_store, write_feature_store
from grounded_text.data.streaming import MANIFEST, StreamingFeatureStore, make_caption_store_dataset


def _pairs(n=300, d=12, seed=0):
    rng = np.random.default_rng(seed)
    ids = np.array([f"img_{i:05d}.jpg" for i in range(n)])
    feats = (rng.normal(size=(n, d)) * 3).astype(np.float32)
    # 0-3 captions per image, images in a shuffled order, non-ASCII captions among them.
    rows = np.concatenate([[r] * int(rng.integers(0, 4)) for r in rng.permutation(n)]).astype(np.int64)
    caps = np.array([f"caption {j} of image {r} {'café ☕' if j % 7 == 0 else ''}" for j, r in enumerate(rows)])
    return CaptionPairs(caps, ids[rows], rows, feats), ids


def _multiset(ds, ids):
    """Sorted (image id, caption, digest of the features' bytes) of every served pair;
    ``ids`` maps the batches' ``image_id`` (a row of the dataset's own store) to the image."""
    out = []
    for b in ds.as_numpy_iterator():
        for c, f, i in zip(b["caption"], b["image_features"], b["image_id"]):
            out.append((str(ids[int(i)]), c.decode("utf-8"), hashlib.blake2b(f.tobytes(), digest_size=16).digest()))
    return sorted(out)


def test_caption_store_serves_the_in_memory_pairs(tmp_path):
    pairs, ids = _pairs()
    store_dir = write_caption_store(tmp_path / "s", pairs, dtype="float32", rows_per_shard=64, batch=50)
    store = open_feature_store(store_dir)
    assert isinstance(store, StreamingFeatureStore) and store.has_captions
    assert store.num_captions == len(pairs)
    assert store.num_rows == len(set(pairs.feature_rows.tolist()))  # only images with a caption
    m = json.loads((store_dir / MANIFEST).read_text())
    assert m["captions"] is True and m["num_captions"] == len(pairs)
    want = _multiset(make_dataset(pairs, 32, shuffle=False, drop_remainder=False), ids)
    got = _multiset(make_caption_store_dataset(store, 32, shuffle=True, seed=3, shuffle_buffer=50,
                                               drop_remainder=False), store.ids)
    assert got == want
    # Batches: the same image's captions carry the same image_id; seeded order; cardinality.
    ds = make_caption_store_dataset(store_dir, 16, seed=5, shuffle_buffer=100)
    assert int(ds.cardinality()) == len(pairs) // 16
    first = lambda d: next(iter(d))["caption"].numpy().tolist()  # noqa: E731
    assert first(ds) == first(make_caption_store_dataset(store_dir, 16, seed=5, shuffle_buffer=100))
    assert first(ds) != first(make_caption_store_dataset(store_dir, 16, seed=6, shuffle_buffer=100))
    for b in ds.as_numpy_iterator():
        for c, i in zip(b["caption"], b["image_id"]):
            assert int(c.decode("utf-8").split(" of image ")[1].split()[0]) == int(store.ids[int(i)][4:9])
    # The epoch variable replays an epoch's order.
    epoch = tf.Variable(0, dtype=tf.int64)
    ds_e = make_caption_store_dataset(store_dir, 16, seed=5, shuffle_buffer=100, epoch=epoch)
    e0 = first(ds_e)
    epoch.assign(1)
    e1 = first(ds_e)
    epoch.assign(0)
    assert first(ds_e) == e0 != e1


def test_caption_store_rows_without_captions_and_errors(tmp_path):
    pairs, ids = _pairs(20)
    feats = pairs.features
    sink = TFRecordFeatureSink(tmp_path / "s", feats.shape[1], dtype="float16", captions=True)
    with pytest.raises(ValueError, match="captions must be given"):
        sink.append(ids[:2], feats[:2])
    with pytest.raises(ValueError, match="2 caption lists for 3 rows"):
        sink.append(ids[:3], feats[:3], [["a"], ["b"]])
    sink.append(ids[:3], feats[:3], [["a dog"], [], ["two", "captions"]])
    sink.close()
    with pytest.raises(ValueError, match="captions=True; cannot append with captions=False"):
        TFRecordFeatureSink(tmp_path / "s", feats.shape[1], dtype="float16")
    store = StreamingFeatureStore(tmp_path / "s")
    assert store.num_captions == 3
    got = [(c.decode(), int(i)) for b in make_caption_store_dataset(store, 2, shuffle=False, drop_remainder=False)
           .as_numpy_iterator() for c, i in zip(b["caption"], b["image_id"])]
    assert got == [("a dog", 0), ("two", 2), ("captions", 2)]  # the caption-less row serves nothing
    plain = write_feature_store(tmp_path / "plain", ids, feats)
    with pytest.raises(ValueError, match="holds no captions"):
        make_caption_store_dataset(plain, 4)
    with pytest.raises(ValueError, match="captions must be given"):
        TFRecordFeatureSink(plain, feats.shape[1]).append(ids[:1], feats[:1], [["x"]])


@pytest.mark.slow
def test_real_flickr8k_caption_store_pairs_equal_in_memory(data_dir, tmp_path):
    """Flickr8k train (all captions) on the real EfficientNet-Lite0 features: the caption
    store streams exactly the in-memory path's (image, caption, features) multiset."""
    with pytest.warns(UserWarning, match="Dropped 5 caption"):
        flickr = load_flickr8k_pairs(data_dir)
    train = flickr.splits["train"]
    assert len(train) > 29_000
    store_dir = write_caption_store(tmp_path / "train", train, dtype="float32", rows_per_shard=1024)
    store = StreamingFeatureStore(store_dir)
    assert store.num_rows == train.num_images and store.num_captions == len(train)
    want = _multiset(make_dataset(train, 128, shuffle=False, drop_remainder=False), flickr.store.ids)
    got = _multiset(make_caption_store_dataset(store, 128, seed=0, drop_remainder=False), store.ids)
    assert len(got) == len(train)
    assert got == want
