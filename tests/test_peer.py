"""A peer run's scores (the authors' code, written by tests/fixtures/caption2image/peer_train.py)
lined up with our test pairs and ranked as our arms are: checked against NumPy on known inputs."""

from __future__ import annotations

import numpy as np
import pytest

from grounded_text.data.pairs import CaptionPairs
from grounded_text.experiments.peer import MSRVID, figures, peer_prediction, read_peer


def _peer(tmp_path, rng):
    names = np.array(["a.jpg", "b.jpg", "c.jpg"])
    raw = np.array([[f"{n} caption {j} ." for j in range(5)] for n in ("a", "b", "c")])
    raw[1, 4] = raw[1, 3]  # one image with the same caption twice
    images = rng.normal(size=(3, 4)).astype(np.float32)
    captions = rng.normal(size=(3, 5, 4)).astype(np.float32)
    path = tmp_path / "peer.test.npz"
    np.savez(path, image_names=names, image_embeddings=images, raw_captions=raw, caption_embeddings=captions,
             msrvid_scores=rng.uniform(size=6), msrvid_gold=rng.uniform(0, 5, size=6))
    return path, names, raw, images, captions


def test_the_peer_is_lined_up_with_our_pairs_and_ranked_pessimistically(tmp_path):
    rng = np.random.default_rng(0)
    path, names, raw, images, captions = _peer(tmp_path, rng)
    peer = read_peer(path)
    # Our pairs: another order of images and captions (c first), both copies of b's repeated caption.
    order = [(2, j) for j in (4, 0, 1, 2, 3)] + [(0, j) for j in range(5)] + [(1, j) for j in (3, 0, 4, 1, 2)]
    pairs = CaptionPairs(captions=np.array([raw[i, j] for i, j in order]),
                         image_ids=np.array([names[i] for i, _ in order]),
                         feature_rows=np.array([i for i, _ in order]), features=np.zeros((3, 2), np.float32))
    got = peer_prediction(peer, pairs)
    # NumPy reference: the gallery in our order of first appearance (c, a, b), cosine similarities.
    gallery = images[[2, 0, 1]]
    gallery = gallery / np.linalg.norm(gallery, axis=1, keepdims=True)
    owner = {2: 0, 0: 1, 1: 2}
    want = []
    used = {}
    for i, j in order:
        if (i, j) == (1, 4) or (i, j) == (1, 3):  # the repeated caption takes b's slots 3, 4 in order
            j = 3 + used.get("b", 0)
            used["b"] = used.get("b", 0) + 1
        q = captions[i, j] / np.linalg.norm(captions[i, j])
        sims = gallery @ q
        want.append(1 + int(np.sum(np.delete(sims, owner[i]) >= sims[owner[i]])))
    np.testing.assert_array_equal(got["ranks"]["caption_to_image"], want)
    np.testing.assert_array_equal(got["groups"]["caption_to_image"], [owner[i] for i, _ in order])
    assert got["ranks"]["image_to_caption"].shape == (3,)
    np.testing.assert_array_equal(got["sts"][MSRVID], peer["msrvid_scores"])
    figs = figures(got)
    r = np.corrcoef(peer["msrvid_scores"], peer["msrvid_gold"])[0, 1]
    assert figs["MSRvid r"]["value"] == pytest.approx(r)
    assert figs["caption→image R@1"]["value"] == pytest.approx(100 * np.mean(np.array(want) <= 1))
    lo, hi = figs["caption→image R@10"]["ci"]
    assert lo <= figs["caption→image R@10"]["value"] <= hi


def test_a_caption_the_peer_did_not_embed_is_named(tmp_path):
    rng = np.random.default_rng(1)
    path, names, raw, _, _ = _peer(tmp_path, rng)
    pairs = CaptionPairs(captions=np.array(["a caption nobody wrote ."]), image_ids=np.array(["a.jpg"]),
                         feature_rows=np.array([0]), features=np.zeros((1, 2), np.float32))
    with pytest.raises(ValueError, match="a caption nobody wrote"):
        peer_prediction(read_peer(path), pairs)
    np.savez(tmp_path / "bad.npz", image_names=names)
    with pytest.raises(ValueError, match="missing"):
        read_peer(tmp_path / "bad.npz")


def test_the_cli_says_error_for_a_missing_peer_file(tmp_path, capsys):
    from grounded_text.experiments.peer import main

    assert main([str(tmp_path / "none.test.npz"), "--arms-dir", str(tmp_path), "--against", "base_s0",
                 "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: ")
