"""The in-memory and the streamed feature stores answer the same protocol
(``grounded_text.data.features.ImageFeatureStore``) with the same values."""

from __future__ import annotations

import numpy as np
import pytest

from grounded_text.data.features import FeatureStore, ImageFeatureStore, open_feature_store
from grounded_text.data.pairs import CaptionPairs


@pytest.fixture()
def stores(tmp_path):
    from grounded_text.data.store_writer import write_feature_store

    rng = np.random.default_rng(0)
    ids = np.array([f"img{i:03d}.jpg" for i in range(37)])
    feats = rng.standard_normal((37, 5)).astype(np.float32)
    np.savez(tmp_path / "f.npz", ids=ids, features=feats)
    write_feature_store(tmp_path / "store", ids, feats, dtype="float32", rows_per_shard=10)
    return open_feature_store(tmp_path / "f.npz"), open_feature_store(tmp_path / "store"), ids, feats


def test_both_stores_follow_the_protocol(stores):
    memory, streamed, ids, feats = stores
    for store in (memory, streamed):
        assert isinstance(store, ImageFeatureStore)
        assert (store.dim, store.num_rows) == (5, 37)
        assert list(np.asarray(store.ids).astype(str)) == ids.tolist()
        assert store.index() == {i: r for r, i in enumerate(ids.tolist())}
    assert (memory.streamed, streamed.streamed) == (False, True)
    assert isinstance(memory, FeatureStore)


def test_take_rows_agrees_with_the_matrix(stores):
    memory, streamed, _, feats = stores
    rows = [36, 0, 5, 5, 12]  # unordered, with a repeat, across shards
    np.testing.assert_array_equal(memory.take_rows(rows), feats[rows])
    np.testing.assert_array_equal(streamed.take_rows(rows), feats[rows])
    with pytest.raises(IndexError):
        streamed.take_rows([37])
    with pytest.raises(IndexError):
        memory.take_rows([37])


def test_caption_pairs_know_whether_they_stream(stores):
    memory, streamed, ids, _ = stores
    rows = np.arange(3, dtype=np.int64)
    caps = np.array(["a", "b", "c"])
    assert not CaptionPairs(caps, ids[:3], rows, memory.features).streamed
    assert CaptionPairs(caps, ids[:3], rows, streamed.features).streamed
