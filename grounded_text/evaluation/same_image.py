"""Same-image similarity test sets (VETE §4.3, "COCO-Test" / "Pin-Test").

Kurach et al. 2017 (§4.3) build in-domain similarity tests from captioned images:
two captions of the same image are "similar" (label 1), two captions of different
images are "not similar" (label 0), and an encoder is scored by the Pearson
correlation between the cosine of the two embeddings and the label (a
point-biserial correlation). This module builds such a set from any captioned
split — Flickr8k (``CaptionPairs``) or any COCO-format captions JSON
(``annotations/captions_*.json``, read by ``read_coco_captioned_images``) — and scores it.

Sampling (``sample_same_image_pairs``), seeded with ``numpy.random.default_rng``:

* positives: N distinct unordered pairs {i, j}, i ≠ j, drawn uniformly without
  replacement from all pairs of captions sharing an image;
* negatives: N distinct unordered pairs {i, j} of captions of different images,
  drawn uniformly (rejection sampling on uniform index pairs);
* a caption (a row index) is never paired with itself. Two *different* captions
  may have identical text (annotators repeat "a dog runs on the grass"); such
  pairs are kept, as in the data.

Raises ``ValueError`` when fewer than N positive pairs exist (the message gives
the maximum).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from grounded_text.evaluation.encoders import EmbeddingCache, Encoder, cached  # noqa: F401
from grounded_text.evaluation.stats import correlation_ci
from grounded_text.evaluation.sts import correlations
from grounded_text.utils.similarity import cosine_rows


@dataclasses.dataclass(frozen=True)
class CaptionedImages:
    """Captions with their image keys (any source).

    Attributes:
      captions: list[str] [m].
      image_ids: list[str] [m], the image of each caption.
      name: e.g. ``"flickr8k/test"`` or ``"coco/captions_val2014"``.
      image_order: the images in their canonical order (COCO: the ``images``
        list of the file; else first appearance), used for contiguous retrieval
        folds; ``None`` = first appearance among the captions.
    """

    captions: list
    image_ids: list
    name: str = ""
    image_order: list | None = None

    def __len__(self) -> int:
        return len(self.captions)


@dataclasses.dataclass(frozen=True)
class SameImagePairs:
    """A sampled test set: row indices into the captions, and labels.

    Attributes:
      first, second: int64 [2N] caption indices (first < second).
      labels: int64 [2N], 1 = same image, 0 = different images (positives first).
      seed: the sampling seed.
    """

    first: np.ndarray
    second: np.ndarray
    labels: np.ndarray
    seed: int


def read_coco_captioned_images(path: str | Path, name: str | None = None) -> CaptionedImages:
    """Reads a COCO-format captions file (``annotations/captions_<split>.json``).

    Format (Lin et al. 2014; the official 2014/2017 releases): a JSON object with
    ``"annotations": [{"image_id": int, "id": int, "caption": str}, ...]`` and
    optionally ``"images": [{"id": int, "file_name": str}, ...]``. Captions are
    returned in file order; image keys are the image ``file_name`` when the
    ``images`` list names it, else ``str(image_id)``. Captions are stripped;
    empty captions are dropped. ``image_order`` follows the ``images`` list
    (images without captions left out), then any other image by first appearance.

    Raises:
      FileNotFoundError: no file. ValueError: not JSON, no ``annotations`` list,
      or an annotation without ``image_id``/``caption`` (names the index).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No COCO captions file {str(path)!r}.")
    try:
        data = json.loads(path.read_bytes().decode("utf-8", errors="replace"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e}).") from e
    if not isinstance(data, dict) or not isinstance(data.get("annotations"), list):
        raise ValueError(f"{path}: expected a JSON object with an 'annotations' list (COCO captions format).")
    file_of = {}
    for image in data.get("images") or []:
        if isinstance(image, dict) and "id" in image and "file_name" in image:
            file_of[image["id"]] = str(image["file_name"])
    captions, image_ids = [], []
    for k, ann in enumerate(data["annotations"]):
        if not isinstance(ann, dict) or "image_id" not in ann or not isinstance(ann.get("caption"), str):
            raise ValueError(f"{path}: annotation {k} lacks 'image_id' or a string 'caption'.")
        text = ann["caption"].strip()
        if not text:
            continue
        captions.append(text)
        image_ids.append(file_of.get(ann["image_id"], str(ann["image_id"])))
    present = set(image_ids)
    order = [f for f in file_of.values() if f in present]
    seen = set(order)
    order += [i for i in dict.fromkeys(image_ids) if i not in seen]
    return CaptionedImages(captions, image_ids, name or f"coco/{path.stem}", order)


def sample_same_image_pairs(image_ids: Sequence, n: int, seed: int = 0) -> SameImagePairs:
    """Samples N same-image and N different-image caption pairs (see module docstring).

    Args:
      image_ids: [m] image key of each caption.
      n: pairs per label.
      seed: ``numpy.random.default_rng`` seed (same seed, same set).

    Returns:
      ``SameImagePairs`` with 2N pairs, positives first.

    Raises:
      ValueError: ``n < 1``, fewer than N same-image pairs, or fewer than two images.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}.")
    keys = np.asarray(list(image_ids), dtype=object).astype(str)
    _, group = np.unique(keys, return_inverse=True)
    m = group.size
    order = np.argsort(group, kind="stable")
    sizes = np.bincount(group)
    if sizes.size < 2:
        raise ValueError("same-image test needs captions of at least two images.")
    # All same-image pairs (i < j) as one array; ~10 per image for 5 captions.
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    pos_pairs = []
    for s, c in zip(starts, sizes):
        if c >= 2:
            rows = np.sort(order[s : s + c])
            a, b = np.triu_indices(c, k=1)
            pos_pairs.append(np.stack([rows[a], rows[b]], axis=1))
    if not pos_pairs or sum(p.shape[0] for p in pos_pairs) < n:
        total = sum(p.shape[0] for p in pos_pairs) if pos_pairs else 0
        raise ValueError(f"Only {total} same-image caption pairs exist; asked for n={n}.")
    pos_pairs = np.concatenate(pos_pairs)
    rng = np.random.default_rng(seed)
    pos = pos_pairs[rng.choice(pos_pairs.shape[0], size=n, replace=False)]
    inter_total = m * (m - 1) // 2 - pos_pairs.shape[0]
    if inter_total < n:
        raise ValueError(f"Only {inter_total} different-image caption pairs exist; asked for n={n}.")
    seen: set = set()
    neg = []
    while len(neg) < n:
        draw = rng.integers(0, m, size=(2 * (n - len(neg)) + 16, 2))
        for i, j in draw.tolist():
            if i == j or group[i] == group[j]:
                continue
            pair = (min(i, j), max(i, j))
            if pair in seen:
                continue
            seen.add(pair)
            neg.append(pair)
            if len(neg) == n:
                break
    neg = np.asarray(neg, dtype=np.int64)
    first = np.concatenate([pos[:, 0], neg[:, 0]]).astype(np.int64)
    second = np.concatenate([pos[:, 1], neg[:, 1]]).astype(np.int64)
    labels = np.concatenate([np.ones(n, np.int64), np.zeros(n, np.int64)])
    return SameImagePairs(first, second, labels, seed)


def evaluate_same_image(encoder: Encoder, data: CaptionedImages, n: int = 5000, seed: int = 0) -> dict:
    """Pearson r (and Spearman ρ) of cosine vs same-image label (VETE §4.3).

    Args:
      encoder: strings → float [m, N].
      data: the captioned split.
      n: pairs per label (2N pairs in all).
      seed: sampling seed.

    Returns:
      ``{"pearson", "spearman", "n" (2N), "pearson_ci95", "spearman_ci95" ([lo, hi], the
      95 % Fisher-z intervals over the 2N pairs, Spearman with the Bonett–Wright variance;
      None where the correlation is), "n_per_label", "seed", "name", "mean_cosine_same",
      "mean_cosine_different"}``.
    """
    pairs = sample_same_image_pairs(data.image_ids, n, seed)
    used = np.unique(np.concatenate([pairs.first, pairs.second]))
    cache = cached(encoder)
    captions = list(data.captions)
    cache.add([captions[i] for i in used.tolist()])
    sims = cosine_rows(cache([captions[i] for i in pairs.first.tolist()]),
                       cache([captions[i] for i in pairs.second.tolist()]))
    out = correlations(sims, pairs.labels.astype(np.float64))
    # 95 % intervals by Fisher z over the 2N pairs (evaluation.stats; Spearman: Bonett-Wright).
    for key in ("pearson", "spearman"):
        r = out[key]
        out[f"{key}_ci95"] = None if r is None or out["n"] < 4 else list(correlation_ci(key, r, out["n"]))
    out.update({
        "n_per_label": n,
        "seed": seed,
        "name": data.name,
        "mean_cosine_same": float(sims[pairs.labels == 1].mean()),
        "mean_cosine_different": float(sims[pairs.labels == 0].mean()),
    })
    return out
