"""A peer run of the authors' code set beside our runs: the same figures, paired tests.

A peer run trains the authors' own model with their own classes (Merkx & Frank's
caption2image, in PyTorch: ``tests/fixtures/caption2image/peer_train.py``) on our Flickr8k
features, and writes ``OUT.test.npz``: the Flickr8k test images' and captions' embeddings as
their evaluator computes them, with the image names and raw captions, and STS12 MSRvid's
cosines and gold scores in the file's order. This module reads that file (NumPy only, no
pickle), lines its captions up with our test split's pairs, ranks them with our retrieval code
(the same pessimistic ranks as our arms) and compares it with our arms' cached predictions::

    python -m grounded_text.experiments.peer PEER.test.npz --arms-dir runs/caption_gap \\
        --against base_s0 char_init_normal [--data-dir DATA] [--name authors_512_s0]

It prints, and writes beside the peer file (``PEER.md``), the peer's figures with their 95 %
intervals (MSRvid r: Fisher z; R@K: a bootstrap over images) and each named arm against it
(arm − peer: Williams' test on MSRvid, a paired bootstrap over images on R@K). No TensorFlow
is needed for the peer's own figures; the arms' predictions come from their cache
(``arms.score_arms``), which scores a run once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from grounded_text.data.paths import resolve_data_dir
from grounded_text.evaluation.retrieval import (
    caption_to_image_ranks,
    image_to_caption_ranks,
    images_of_pairs,
)
from grounded_text.evaluation.stats import cluster_bootstrap_ci, pearson_ci
from grounded_text.experiments.arms import figure_cell, paired_cell, recalls_with_intervals, score_arms
from grounded_text.experiments.comparison import paired_retrieval, paired_sts, sts_label
from grounded_text.experiments.runner import read_metrics
from grounded_text.experiments.scoring import TestData
from grounded_text.reporting.tables import markdown_table, write_text
from grounded_text.utils.similarity import cosine_matrix

MSRVID = "STS12/MSRvid"
KEYS = ("image_names", "image_embeddings", "raw_captions", "caption_embeddings", "msrvid_scores", "msrvid_gold")


def read_peer(path: str | Path) -> dict:
    """The arrays of a peer's ``.test.npz`` (``KEYS``).

    Raises:
      FileNotFoundError: no such file. ValueError: a key missing, or shapes that do not agree.
    """
    with np.load(Path(path), allow_pickle=False) as z:
        missing = [k for k in KEYS if k not in z.files]
        if missing:
            raise ValueError(f"{path}: not a peer's scores (missing {missing}).")
        out = {k: z[k] for k in KEYS}
    n, d = out["image_embeddings"].shape
    if (out["caption_embeddings"].shape[:1] != (n,) or out["caption_embeddings"].shape[-1] != d
            or out["raw_captions"].shape != out["caption_embeddings"].shape[:2] or len(out["image_names"]) != n
            or out["msrvid_scores"].shape != out["msrvid_gold"].shape):
        raise ValueError(f"{path}: the arrays' shapes do not agree.")
    return out


def peer_prediction(peer: dict, pairs) -> dict:
    """The peer as one of our arms' prediction dicts (``scoring.predictions``), on our pairs.

    Args:
      peer: ``read_peer``'s arrays.
      pairs: our test split (``CaptionPairs``); each caption is found among the peer's by its
        image and its raw text (a caption written twice for one image takes the peer's slots
        in order).

    Returns:
      ``{"sts": {MSRVID: cosines}, "gold": {MSRVID: gold}, "ranks": {"caption_to_image": int
      [m], "image_to_caption": int [n]}, "groups": {"caption_to_image": int [m]}}`` in our
      pairs' order (``grounded_text.evaluation.retrieval``'s pessimistic ranks).

    Raises:
      ValueError: a caption or image of ``pairs`` that the peer did not embed.
    """
    slots: dict = {}  # (image, caption) → the peer's (row, slot)s not yet taken, first last
    for i, name in enumerate(peer["image_names"].tolist()):
        for j, caption in enumerate(peer["raw_captions"][i].tolist()):
            slots.setdefault((name, caption), []).insert(0, (i, j))
    images, groups, _ = images_of_pairs(pairs)
    row = {name: i for i, name in enumerate(peer["image_names"].tolist())}
    missing_images = [x for x in images if x not in row]
    if missing_images:
        raise ValueError(f"the peer embedded none of {len(missing_images)} test images, e.g. {missing_images[:3]}")
    captions = []
    for image, caption in zip(pairs.image_ids.tolist(), pairs.captions.tolist()):
        if not slots.get((image, caption)):
            raise ValueError(f"the peer did not embed the caption {caption!r} of {image}.")
        i, j = slots[(image, caption)].pop()
        captions.append(peer["caption_embeddings"][i, j])
    sims = cosine_matrix(np.stack(captions), peer["image_embeddings"][[row[x] for x in images]])
    return {"sts": {MSRVID: np.asarray(peer["msrvid_scores"], float)},
            "gold": {MSRVID: np.asarray(peer["msrvid_gold"], float)},
            "ranks": {"caption_to_image": caption_to_image_ranks(sims, groups),
                      "image_to_caption": image_to_caption_ranks(sims, groups)},
            "groups": {"caption_to_image": np.asarray(groups)}}


def figures(prediction: dict) -> dict:
    """MSRvid Pearson r and caption→image R@1/5/10 (%) and median rank, each with its 95 %
    interval (Fisher z; a bootstrap over images, ``stats.cluster_bootstrap_ci``):
    ``{label: {"value", "ci"}}``."""
    scores, gold = prediction["sts"][MSRVID], prediction["gold"][MSRVID]
    r = float(np.corrcoef(scores, gold)[0, 1])
    out = {"MSRvid r": {"value": r, "ci": list(pearson_ci(r, len(gold)))}}
    ranks, groups = prediction["ranks"]["caption_to_image"], prediction["groups"]["caption_to_image"]
    out.update({f"caption→image {k}": v for k, v in recalls_with_intervals(ranks, groups).items()})
    out["caption→image medr"] = {"value": float(np.median(ranks)),
                                 "ci": list(cluster_bootstrap_ci(ranks.astype(float), groups, np.median))}
    return out


def comparison_markdown(name: str, peer_figures: dict, paired: dict) -> str:
    """The peer's figures, then each arm − peer with its paired test (``arms.paired_cell``).

    Args:
      peer_figures: ``figures``' answer. paired: ``{arm: {test label: {"a", "b", "p"}}}``
        (``comparison.paired_sts`` and ``paired_retrieval``, the arm as ``a``).
    """
    labels = list(peer_figures)
    body = [[f"`{name}` (the authors' code)"] + [figure_cell(peer_figures[x], 3 if x.endswith(" r") else 1)
                                                 for x in labels]]
    tests = {"MSRvid r": sts_label(MSRVID)} | {f"caption→image R@{k}": f"caption→image R@{k}" for k in (1, 5, 10)}
    pair_body = [[f"`{arm}`"] + [paired_cell(result.get(key), 3 if label.endswith(" r") else 1)
                                 for label, key in tests.items()] for arm, result in paired.items()]
    return "\n".join(markdown_table(["run"] + labels, body) + [""]
                     + markdown_table(["arm − peer"] + list(tests), pair_body))


def main(argv=None) -> int:
    """The CLI: exit 0, or 2 with one ``error:`` line (a missing or malformed peer file, an arm
    without a finished run, captions the peer did not embed)."""
    p = argparse.ArgumentParser(prog="python -m grounded_text.experiments.peer", description=__doc__.split("\n\n")[0])
    p.add_argument("peer", type=Path, help="the peer run's OUT.test.npz")
    p.add_argument("--arms-dir", type=Path, required=True, help="the study's output folder (its runs and caches)")
    p.add_argument("--against", nargs="+", required=True, metavar="ARM", help="finished runs under --arms-dir")
    p.add_argument("--data-dir", default=None, help="data root (default: $GROUNDED_TEXT_DATA)")
    p.add_argument("--name", default=None, help="the peer's name in the table (default: the file's stem)")
    a = p.parse_args(argv)

    name = a.name or a.peer.name.split(".")[0]
    try:
        peer = read_peer(a.peer)
        data_dir = resolve_data_dir(a.data_dir)
        arms, predictions = score_arms(a.arms_dir, a.against, data_dir)
        absent = [x for x in a.against if x not in arms]
        if absent:
            raise ValueError(f"--against: no finished run {absent} under {a.arms_dir}")
        metrics = read_metrics(a.arms_dir / arms[a.against[0]]["run"])
        pairs = TestData(data_dir).test_pairs(metrics["config"]["data"], None)
        prediction = peer_prediction(peer, pairs)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    paired = {}
    for arm in a.against:
        ours = predictions[arm]
        if not np.allclose(ours["gold"][MSRVID], prediction["gold"][MSRVID]):
            print(f"error: {arm}'s MSRvid pairs are not the peer's (gold scores differ).", file=sys.stderr)
            return 2
        sub = {"sts": {MSRVID: ours["sts"][MSRVID]}, "gold": {MSRVID: ours["gold"][MSRVID]},
               "ranks": ours["ranks"], "groups": ours["groups"]}
        paired[arm] = {**paired_sts(sub, prediction), **paired_retrieval(sub, prediction)}
    md = comparison_markdown(name, figures(prediction), paired)
    write_text(a.peer.with_name(f"{name}.md"), md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
