"""The TF Hub model card written beside an exported text tower (``model_card.md``).

The card follows the TF Hub / Kaggle Models card style: metadata lines ``<!-- key: value -->``,
then overview (with the paper), intended use, limitations, training data and its terms, usage,
the evaluation table and the training config. It is written
atomically, since evaluation rewrites it in a live export.
"""

from __future__ import annotations

import json
from pathlib import Path

from grounded_text.papers.presets import PRESETS
from grounded_text.utils.durable import atomic_write

MODEL_CARD = "model_card.md"


#: dataset → its terms of use, as its publishers state them.
DATA_TERMS = {
    "flickr8k": "Flickr8k (Hodosh, Young & Hockenmaier 2013, JAIR 47): captions released by the University "
                "of Illinois for research use (their request form's terms); the photos stay under their Flickr "
                "owners' terms.",
    "coco_captions": "COCO captions (Chen et al. 2015): annotations under CC BY 4.0; the images under the Flickr "
                     "terms of use.",
}


def _data_licence(dataset: str) -> str:
    return DATA_TERMS.get(dataset, f"`{dataset}`: see that dataset's own terms of use.")


def _paper_lines(name: str) -> list[str]:
    record = PRESETS.get(name)
    return ["", f"Configuration from: {record.paper}."] if record is not None else []


def use_and_limits(dataset: str, features: str) -> list[str]:
    """The card's intended-use, limitations and training-data sections (Kaggle Models' card
    headings)."""
    return [
        "## Intended use",
        "",
        "Sentence embeddings of short English text for semantic similarity (cosine) and caption/image "
        "retrieval, as a light encoder, a frozen feature for a downstream model, or a module to fine-tune; "
        "and reproducing the papers' grounded encoders. It maps text to vectors: it does not generate, "
        "classify or answer on its own.",
        "",
        "## Limitations",
        "",
        "- English only: the vocabulary and the training text are English image captions.",
        "- Trained on descriptions of everyday photos (people, animals, scenes): it is weak on questions, "
        "definitions, negation, abstract, technical or domain-specific language, and long documents. "
        "A pretrained transformer is the better general-purpose choice.",
        "- Inputs are cut to their first 16,384 bytes and 512 words; in word models, words outside the "
        "training vocabulary share out-of-vocabulary buckets.",
        "- Captions written by crowd workers carry their assumptions (e.g. about gender and age); the "
        "embeddings can reproduce them.",
        "- Model selection may have used STS 2016 (see the config's `select_on`), so its STS16 figures "
        "are not an unseen test.",
        "",
        "## Training data",
        "",
        f"{_data_licence(dataset)} Image features: `{features}`, a CNN pretrained on "
        "ImageNet (ImageNet's terms of access limit its images to non-commercial research and education: "
        "check whether they bind your use of weights trained on them).",
        "",
    ]


def write_model_card(
    export_dir: str | Path,
    config: dict,
    evaluation: dict | None = None,
    *,
    embedding_dim: int | None = None,
    parameters: int | None = None,
) -> Path:
    """Writes ``export_dir/model_card.md`` in the TF Hub model-card markdown style.

    Metadata lines (``<!-- key: value -->``): module-type ``text-embedding``,
    fine-tunable ``true``, format ``saved_model_2``, network-architecture, dataset,
    language, license; then an overview (and the preset's paper), intended use, limitations,
    training data and its terms, usage and the evaluation table (``evaluation``: ``{figure
    name: value}``; "not evaluated" when ``None``).

    Args:
      export_dir: the export folder (must exist).
      config: the training config (``{"model": {...}, "data": {...}, ...}``), JSON-serialisable
        (other objects are written with ``str``).
      evaluation: ``{figure name: float or None}``, shown to 4 decimals.
      embedding_dim: N of the float32 [batch, N] output.
      parameters: the tower's parameter count.

    Returns:
      The card's path.
    """
    model = config.get("model", {})
    data = config.get("data", {})
    name = model.get("name", "text_tower")
    arch = model.get("architecture") or f"{name} (grounded_text), N={embedding_dim}"
    captions = "one caption per image" if data.get("one_caption_per_image") else "all captions"
    # The run's dataset: "flickr8k", or a prepared / TFDS export folder (named by its folder).
    dataset = str(data.get("dataset") or "flickr8k")
    dataset = dataset if dataset == "flickr8k" else (Path(dataset).name or dataset)
    lines = [
        f"# Module grounded_text/{name}",
        "",
        "<!-- module-type: text-embedding -->",
        "<!-- fine-tunable: true -->",
        "<!-- format: saved_model_2 -->",
        f"<!-- network-architecture: {arch} -->",
        f"<!-- dataset: {dataset} -->",
        "<!-- language: en -->",
        "<!-- license: apache-2.0 -->",
        "",
        "## Overview",
        "",
        f"Visually grounded sentence encoder `{name}` trained by grounded_text on {dataset} train "
        f"({captions}) against precomputed `{data.get('features', '?')}` image features. "
        f"Output: float32 [batch, {embedding_dim}] L2-normalised embeddings; {parameters} parameters.",
        *_paper_lines(name),
        "",
        *use_and_limits(dataset, data.get("features", "?")),
        "## Usage",
        "",
        "```python",
        "import tensorflow as tf, tensorflow_text, tensorflow_hub as hub",
        "encoder = hub.load(PATH)  # import tensorflow_text first: the tokeniser ops live in the graph",
        'embeddings = encoder(tf.constant(["a dog runs on the beach"]))',
        "",
        "import grounded_text as gt  # or, with NumPy out and batching:",
        'gt.load(PATH).encode(["a dog runs on the beach"])',
        "```",
        "",
        "## Evaluation (cosine similarity, unsupervised; Pearson r)",
        "",
        "| figure | value |",
        "|---|---:|",
    ]
    if evaluation:
        for key, value in evaluation.items():
            lines.append(f"| {key} | {'n/a' if value is None else f'{value:.4f}'} |")
    else:
        lines.append("| not evaluated | — |")
    lines += ["", "## Training config", "", "```json", json.dumps(config, indent=2, default=str), "```", ""]
    path = Path(export_dir) / MODEL_CARD
    text = "\n".join(lines).encode("utf-8")
    atomic_write(path, lambda f: f.write(text))  # rewritten in a live export after evaluation
    return path
