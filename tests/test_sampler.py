"""make_grouped_dataset (several captions per image per batch) and image ids in make_dataset."""

from collections import Counter

import numpy as np
import pytest

from grounded_text.data import load_flickr8k_pairs, make_dataset, make_grouped_dataset
from grounded_text.data.pairs import CaptionPairs


def synthetic_pairs(num_images=9, short_image=4):
    """Caption text names its image; feature row r is [r, r, r] (so pairing is checkable)."""
    caps, ids, rows = [], [], []
    for im in range(num_images):
        for j in range(2 if im == short_image else 5):
            caps.append(f"img{im} cap{j}")
            ids.append(f"id{im}")
            rows.append(3 * im + 1)  # feature rows in a different order/space than image index
    feats = np.repeat(np.arange(40, dtype=np.float32)[:, None], 3, axis=1)
    return CaptionPairs(np.array(caps), np.array(ids), np.array(rows, np.int64), feats)


def epoch(ds):
    return [{k: v.numpy() for k, v in batch.items()} for batch in ds]


def check_batch(batch, pairs, images_per_batch, captions_per_image):
    row_of_caption = dict(zip(pairs.captions.tolist(), pairs.feature_rows.tolist()))
    caps = [c.decode() for c in batch["caption"]]
    assert len(caps) == images_per_batch * captions_per_image
    counts = Counter(batch["image_id"].tolist())
    assert len(counts) == images_per_batch
    assert set(counts.values()) == {captions_per_image}
    assert len(set(caps)) == len(caps)  # C distinct captions of each image
    for cap, image_id, feat in zip(caps, batch["image_id"], batch["image_features"]):
        assert row_of_caption[cap] == image_id  # caption and id agree
        np.testing.assert_array_equal(feat, pairs.features[image_id])  # features agree


def test_batches_hold_c_captions_per_image_and_never_mispair():
    pairs = synthetic_pairs()
    with pytest.warns(UserWarning, match="left out 1 image"):
        ds = make_grouped_dataset(pairs, images_per_batch=3, captions_per_image=3, seed=5)
    seen = []
    for batch in epoch(ds):
        check_batch(batch, pairs, 3, 3)
        seen += sorted(set(batch["image_id"].tolist()))
    # One epoch: the 8 eligible images once each (drop_remainder drops 2).
    assert len(seen) == 6 and len(set(seen)) == 6
    assert 13 not in seen  # image 4 (feature row 13) has 2 captions < 3


def test_reproducible_by_seed_and_reshuffled_per_epoch():
    pairs = synthetic_pairs(short_image=-1)
    a = make_grouped_dataset(pairs, 2, 2, seed=1)
    b = make_grouped_dataset(pairs, 2, 2, seed=1)
    a1, a2 = epoch(a), epoch(a)
    b1, b2 = epoch(b), epoch(b)
    flat = lambda e: [c for batch in e for c in batch["caption"].tolist()]  # noqa: E731
    assert flat(a1) == flat(b1) and flat(a2) == flat(b2)
    assert flat(a1) != flat(a2)
    assert flat(epoch(make_grouped_dataset(pairs, 2, 2, seed=2))) != flat(a1)


def test_no_shuffle_and_bad_arguments():
    pairs = synthetic_pairs(short_image=-1)
    batches = epoch(make_grouped_dataset(pairs, 4, 2, shuffle=False, drop_remainder=False))
    assert [b["caption"][0].decode() for b in batches] == ["img0 cap0", "img4 cap0", "img8 cap0"]
    assert len(batches[-1]["caption"]) == 2
    with pytest.raises(ValueError, match="captions_per_image"):
        make_grouped_dataset(pairs, 2, 0)
    with pytest.raises(ValueError, match="no image has 6 captions"):
        make_grouped_dataset(pairs, 2, 6)
    with pytest.raises(ValueError, match="images_per_batch"):
        make_grouped_dataset(pairs, 20, 2)


def test_make_dataset_carries_image_ids():
    pairs = synthetic_pairs()
    for batch in epoch(make_dataset(pairs, 7, seed=0, drop_remainder=False)):
        row_of_caption = dict(zip(pairs.captions.tolist(), pairs.feature_rows.tolist()))
        assert batch["image_id"].dtype == np.int64
        for cap, image_id, feat in zip(batch["caption"], batch["image_id"], batch["image_features"]):
            assert row_of_caption[cap.decode()] == image_id
            np.testing.assert_array_equal(feat, pairs.features[image_id])


def test_real_flickr8k_slice(data_dir):
    pairs = load_flickr8k_pairs(data_dir).splits["train"].first_images(24)
    ds = make_grouped_dataset(pairs, images_per_batch=4, captions_per_image=5, seed=0)
    batches = epoch(ds)
    assert len(batches) == 6
    for batch in batches:
        check_batch(batch, pairs, 4, 5)


def authors_passes(order, captions_of, batch_size, width=5):
    """caption2image ``minibatchers.py:70-94`` (``iterate_char_5fold``) restated: for each
    caption slot i, ``range(0, len(f_nodes) - batchsize + 1, batchsize)`` over the shuffled
    images, each with its caption i (images without a caption i sit the pass out)."""
    batches = []
    for i in range(width):
        nodes = [im for im in order if len(captions_of[im]) > i]
        for start in range(0, len(nodes) - batch_size + 1, batch_size):
            batches.append([captions_of[im][i] for im in nodes[start:start + batch_size]])
    return batches


def test_caption_passes_follow_the_authors_loop_and_never_mispair():
    import tensorflow as tf

    from grounded_text.data.sampler import caption_groups, make_caption_pass_dataset

    pairs = synthetic_pairs(num_images=9, short_image=4)
    epoch_var = tf.Variable(0, dtype=tf.int64)
    ds = make_caption_pass_dataset(pairs, batch_size=2, seed=3, epoch=epoch_var)
    got = epoch(ds)
    # 8 images with 5 captions + image 4 with 2: passes 0, 1 have 9 images (4 batches
    # each), passes 2-4 have 8 (4 batches each).
    assert int(ds.cardinality()) == len(got) == 20
    row_of_caption = dict(zip(pairs.captions.tolist(), pairs.feature_rows.tolist()))
    for batch in got:
        caps = [c.decode() for c in batch["caption"]]
        assert len(set(batch["image_id"].tolist())) == 2  # distinct images
        for cap, image_id, feat in zip(caps, batch["image_id"], batch["image_features"]):
            assert row_of_caption[cap] == image_id
            np.testing.assert_array_equal(feat, pairs.features[image_id])
    # The order is the authors' loop over the same image order.
    table, counts, _ = caption_groups(pairs)
    captions_of = [[pairs.captions[j] for j in table[r, :counts[r]]] for r in range(table.shape[0])]
    first_of_pass0 = [c.decode() for b in got[:4] for c in b["caption"]]
    order = [int(c.split()[0][3:]) for c in first_of_pass0]
    order += [im for im in range(9) if im not in order]  # the one image cut from pass 0
    want = authors_passes(order, captions_of, 2)
    assert [[c.decode() for c in b["caption"]] for b in got] == want
    # Each caption of the eight 5-caption images served once per epoch, except the cut ones.
    served = Counter(c for b in got for c in [x.decode() for x in b["caption"]])
    assert max(served.values()) == 1 and len(served) == 40
    # Reproducible per (seed, epoch); a new epoch reshuffles.
    assert [b["caption"].tolist() for b in epoch(make_caption_pass_dataset(pairs, 2, seed=3, epoch=epoch_var))] == \
        [b["caption"].tolist() for b in got]
    epoch_var.assign(1)
    assert [b["caption"].tolist() for b in epoch(ds)] != [b["caption"].tolist() for b in got]


def test_caption_passes_reject_bad_arguments():
    from grounded_text.data.sampler import make_caption_pass_dataset

    pairs = synthetic_pairs()
    with pytest.raises(ValueError, match="batch_size must be >= 2"):
        make_caption_pass_dataset(pairs, 1)
    with pytest.raises(ValueError, match="9 image"):
        make_caption_pass_dataset(pairs, 10)
