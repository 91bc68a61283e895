"""The model card of a shipped model (``grounded_text.experiments.shipped`` writes it beside
the export): what it is, its terms, its figures with their intervals, how it was trained and
selected, and how to load it."""

from __future__ import annotations

import json

from grounded_text.serving.model_card import use_and_limits
from grounded_text.vision.lite0 import PROVENANCE, WEIGHTS_SHA256

#: Bootstrap resamples of the interval of a mean over subsets (STS16 mean), and their seed.
RESAMPLES = 2000
SEED = 0


def _image_weights_text(image_weights: dict | None) -> str:
    if not image_weights or image_weights.get("weights") != "int8":
        return ""
    return (" (the image tower's matrix in int8, Keras weight quantization: its outputs have cosine >= "
            f"{image_weights['min_cosine']} to the float32 tower's on the 1,000 Flickr8k test images)")


def _exported_text(record: dict) -> str:
    """What the export holds: the best epoch, or a snapshot ensemble (Merkx & Frank 2019, §3.3)."""
    exported = record.get("exported") or {}
    epochs = exported.get("snapshot_epochs") or []
    if exported.get("kind") == "snapshot_ensemble" and len(epochs) > 1:
        taken = " and ".join(str(e) for e in epochs)
        return (f"The ensemble of the snapshots of epochs {taken} of {record['epochs']} (the "
                f"{len(epochs)} of {len(exported.get('all_snapshots') or epochs)} cycle-end snapshots with the "
                "highest Flickr8k dev rsum, as Merkx & Frank 2019, §3.3: each tower is the mean of its "
                "snapshots' outputs, L2-normalised)")
    return f"Best epoch {record['best_epoch']} of {record['epochs']}"


def selection_sentence(select_on: str | None) -> str:
    """What chose the exported epoch, and so which of the card's figures are not an unseen test
    (``TrainConfig.select_on``)."""
    unseen = "no STS or SICK set was used in training or selection"
    return {"avg2016": "STS16 chose the epoch, so it is not an unseen test.",
            "sick_val": "SICK's validation split chose the epoch (the SICK figure is of its test split).",
            "dev_retrieval": f"Flickr8k dev retrieval chose the epoch: {unseen}.",
            "val_loss": f"The Flickr8k dev loss chose the epoch: {unseen}.",
            "last": f"The last epoch is exported: {unseen}."}.get(select_on, f"`{select_on}` chose the epoch.")


def _image_network(record: dict) -> list[str]:
    """The card's section on the network photos go through (the one of the training features)."""
    if record.get("features") != "efficientnet_lite0":
        return []

    return [
        "## Image network",
        "",
        "Photos reach the image tower through the network of its training features, shipped inside the "
        "package: `enc.encode_images(photos)` and `grounded-text search` run it offline. It is "
        f"{PROVENANCE} (SHA-256 {WEIGHTS_SHA256}). The tower records it (`image_features` in "
        "`image_export/assets/config.json`); features made by another network are refused when they meet it.",
        "",
    ]


def _retrieval_section(retrieval: dict | None) -> list[str]:
    """The card's retrieval table (``shipped_retrieval``), or nothing for a card without one."""
    if not retrieval:
        return []
    return [
        "## Evaluation (caption↔image retrieval, Flickr8k test, 1,000 images)",
        "",
        "Scored by `grounded_text.experiments.shipped.shipped_retrieval`: cosine of the text tower's and the "
        "image tower's outputs, R@K in percent (expected over random tie order). Intervals: a bootstrap over "
        "images for caption→image (an image's captions drawn together), Wilson over the image queries for "
        "image→caption.",
        "",
        "| figure | R@K (%) | 95% interval | queries |",
        "|---|---:|---:|---:|",
        *(f"| {k} | {v['value']:.1f} | [{v['ci95'][0]:.1f}, {v['ci95'][1]:.1f}] | {v['n']:,} |"
          for k, v in retrieval.items()),
        "",
    ]


def shipped_card(name: str, record: dict) -> str:
    """The ``model_card.md`` of shipped model ``name`` from its ``model.json`` record (Markdown)."""
    rows = [f"| {k} | {v['value']:.3f} | [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}] | {v['n']:,} |"
            for k, v in record["figures"].items()]
    return "\n".join([
        f"# grounded_text/{name}",
        "",
        "<!-- module-type: text-embedding -->",
        "<!-- fine-tunable: true -->",
        "<!-- format: saved_model_2 -->",
        f"<!-- network-architecture: {record['preset']} (grounded_text), N={record['dims']} -->",
        "<!-- dataset: flickr8k -->",
        "<!-- language: en -->",
        "<!-- license: research use only (the training data's terms) -->",
        "",
        "## Overview",
        "",
        f"{record['description']}. Shipped inside the `grounded_text` package: "
        f"`grounded_text.load(\"{name}\")` loads it offline. Output: float32 [batch, {record['dims']}], rows of "
        "unit norm. Beside it, `image_export/` maps "
        f"{record['image_dims']}-d image features into the same space (retrieval).",
        "",
        *_image_network(record),
        *use_and_limits("flickr8k", record["features"]),
        "## Licence of the training data",
        "",
        record["licence"],
        "",
        "## Evaluation (cosine similarity, unsupervised; Pearson r)",
        "",
        "Scored by `grounded_text.experiments.shipped.shipped_figures` on the data root's `sts/` folder (the "
        "original SemEval / STS-B / SICK releases). Intervals: Fisher z for one set of pairs; a percentile "
        f"bootstrap over pairs within each subset ({RESAMPLES} resamples, seed {SEED}) for the STS16 mean. "
        + selection_sentence(record["config"]["train"].get("select_on")),
        "",
        "| figure | Pearson r | 95% interval | pairs |",
        "|---|---:|---:|---:|",
        *rows,
        "",
        *_retrieval_section(record.get("retrieval")),
        "## Training",
        "",
        f"Data: {record['data']}.",
        "",
        "```bash",
        record["command"],
        "```",
        "",
        f"{_exported_text(record)}; weights stored as {record['weights_dtype']}"
        + _image_weights_text(record.get("image_weights")) + "; "
        f"{record['parameters']:,} parameters in the text tower. Rebuild this folder (train, copy, score, "
        "write this card):",
        "",
        "```bash",
        f"python -m grounded_text.experiments.shipped {name} --data-dir \"$GROUNDED_TEXT_DATA\"",
        "```",
        "",
        "## Usage",
        "",
        "```python",
        "import grounded_text as gt",
        f"enc = gt.load(\"{name}\")",
        "enc.encode([\"a dog runs on the beach\"])       # float32 [1, "
        f"{record['dims']}]",
        f"enc.encode_images([\"photo.jpg\"])               # float32 [1, {record['dims']}], the same space",
        "```",
        "",
        "## Training config",
        "",
        "```json",
        json.dumps(record["config"], indent=2),
        "```",
        "",
    ])
