"""Cross-modal retrieval: caption→image and image→caption Recall@K, medr, meanr.

Conventions (as in Karpathy & Fei-Fei 2015, VSE++ — Faghri et al. 2018 §4, Merkx &
Frank 2019 §4):

* similarity = cosine between the text-tower embedding of a caption and the
  image-tower embedding of an image's features;
* ranks are **1-based**; a query's rank is the position of its ground truth in
  the list of candidates sorted by decreasing similarity;
* **ties never count in favour of the ground truth.** Ranks are **pessimistic**:
  ``rank = 1 + (number of candidates scored >= the ground truth, other than the
  ground truth itself)``, i.e. among equal scores the ground truth is placed last.
  This is the only order-independent definition that reduces to the usual one
  without ties, and it is an upper bound on the rank under any tie order (so
  ``medr``/``meanr`` never flatter a model). Recall@K is the **expected** recall
  when ties are broken uniformly at random (for a query with ``g`` candidates
  strictly above the ground truth, ``t`` other candidates tied with it and ``m``
  tied ground-truth items: ``P(first ground truth within the top K)``
  ``= 1 - C(t, K-g) / C(t+m, K-g)`` for ``0 < K-g <= t``, 0 below, 1 above), which
  equals the plain "rank <= K" indicator when there is no tie. A tower that maps
  everything to one point therefore gets chance-level Recall@K (R@1 = 1/1000 =
  0.1 % on the 1k protocol, both directions) and the worst ranks (``medr`` = n),
  never R@1 = 100. (Before this change ties were counted in the ground truth's
  favour; VSE++'s ``argsort`` code breaks ties by index order, which depends on
  how the candidates are stored.)
* caption→image: one query per caption, the candidates are all images of the
  fold, the ground truth is the caption's image;
* image→caption: one query per image, the candidates are all captions of the
  fold, the rank is the **best** rank among the image's captions (VSE++'s
  ``i2t``): ``1 + #(other images' captions scored >= the most similar own
  caption)`` (own captions tied with it are ground truth too: they do not count);
* Recall@K = percentage (0–100) of queries with rank ≤ K; ``medr`` = median rank
  (``numpy.median``, so a half-integer for an even number of queries); ``meanr`` =
  mean rank; ``rsum`` = the sum of the six R@{1,5,10} of both directions (0–600).

Protocols (the name is stored in every result):

* ``flickr8k_1k``: the Flickr8k test split, 1,000 images / 5,000 captions, one
  fold (Hodosh et al. 2013 split; Karpathy & Fei-Fei; Merkx & Frank Table 2);
* ``coco_5fold_1k``: 5,000 test images cut into 5 **contiguous** folds of 1,000
  images (with their captions, in image order), each scored alone, metrics
  averaged over folds (VSE++ "1K test", ranks averaged as numbers: the reported
  medr is the mean of the 5 fold medians);
* ``coco_5k``: the same 5,000 images as one fold.
* ``all``: whatever images are given, one fold (any other split).

95 % intervals (``evaluate_retrieval``, additive keys ``"R@K_ci95"`` and ``"medr_ci95"`` in
each direction, and ``"ci_method"``; ``grounded_text.evaluation.stats``), all by resampling
**images**, the unit the queries depend on:

* caption→image: the 5 captions of an image are 5 queries with one ground truth, not 5
  independent queries, so a binomial (Wilson) interval over the 5,000 captions would be
  too narrow. Recall@K and medr get a percentile bootstrap over images
  (``stats.cluster_bootstrap_ci``: each resample draws the fold's images with replacement
  and keeps all captions of each; the statistic is the mean over folds of the fold's
  recall, or of its median rank; 1,000 resamples, seed ``ci_seed``);
* image→caption: one query per image, so the images are the queries: Recall@K by the
  Wilson score interval over all images of all folds (the fold average of equal folds is
  the pooled recall), medr by a percentile bootstrap over the images (resampled within
  each fold, the statistic being the mean of the fold medians; 1,000 resamples).

Merkx & Frank's Table 2 intervals match a normal interval over 1,000 queries in both
directions, i.e. over the images.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from grounded_text.evaluation.stats import cluster_bootstrap_ci, recall_ci
from grounded_text.utils.similarity import normalize_rows

PROTOCOLS = {
    # name: (expected number of images or None, number of folds)
    "flickr8k_1k": (1000, 1),
    "coco_5fold_1k": (5000, 5),
    "coco_5k": (5000, 1),
    "all": (None, 1),
}
RECALL_KS = (1, 5, 10)
METRIC_KEYS = tuple(f"R@{k}" for k in RECALL_KS) + ("medr", "meanr")


def _check_assignment(sims: np.ndarray, caption_image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sims = np.asarray(sims)
    if sims.dtype.kind != "f":
        sims = sims.astype(np.float64)
    caption_image = np.asarray(caption_image)
    if sims.ndim != 2:
        raise ValueError(f"sims must be [n_captions, n_images], got shape {sims.shape}.")
    if caption_image.shape != (sims.shape[0],) or caption_image.dtype.kind not in "iu":
        raise ValueError(
            f"caption_image must be an int array [{sims.shape[0]}] (one image index per caption), "
            f"got {caption_image.dtype} {caption_image.shape}."
        )
    if caption_image.size and (caption_image.min() < 0 or caption_image.max() >= sims.shape[1]):
        raise ValueError(f"caption_image has indices outside [0, {sims.shape[1]}).")
    if not np.isfinite(sims).all():
        raise ValueError("sims contains NaN/Inf.")
    counts = np.bincount(caption_image, minlength=sims.shape[1])
    if (counts == 0).any():
        raise ValueError(
            f"{int((counts == 0).sum())} image(s) have no caption (e.g. index {int(np.argmax(counts == 0))}); "
            "image→caption retrieval needs at least one per image."
        )
    return sims, caption_image


def _caption_to_image_counts(sims: np.ndarray, caption_image: np.ndarray):
    """Per caption: (images strictly above its image, other images tied with it, 1)."""
    truth = sims[np.arange(sims.shape[0]), caption_image]
    greater = (sims > truth[:, None]).sum(axis=1).astype(np.int64)
    tied = (sims == truth[:, None]).sum(axis=1).astype(np.int64) - 1  # minus the ground truth itself
    return greater, tied, np.ones_like(greater)


def _image_to_caption_counts(sims: np.ndarray, caption_image: np.ndarray):
    """Per image: (other images' captions strictly above its best own caption, other
    images' captions tied with it, own captions tied with it)."""
    n_images = sims.shape[1]
    own = sims[np.arange(sims.shape[0]), caption_image]
    best_own = np.full(n_images, -np.inf)
    np.maximum.at(best_own, caption_image, own)
    # Own captions are never strictly above the best own caption, so the strict count over
    # all captions is the count of other images' captions.
    greater = (sims > best_own[None, :]).sum(axis=0).astype(np.int64)
    at_least = (sims >= best_own[None, :]).sum(axis=0).astype(np.int64)
    own_tied = np.bincount(caption_image[own == best_own[caption_image]], minlength=n_images).astype(np.int64)
    return greater, at_least - greater - own_tied, own_tied


def caption_to_image_ranks(sims: np.ndarray, caption_image: np.ndarray) -> np.ndarray:
    """1-based pessimistic rank of each caption's image among all images (see module doc).

    Args:
      sims: float [n_captions, n_images], similarity of caption i to image j.
      caption_image: int [n_captions], the index of each caption's image.

    Returns:
      int64 [n_captions] ranks in 1..n_images: 1 + the number of other images scored
      >= the caption's image.

    Example:
      >>> sims = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7]])  # 3 captions x 2 images
      >>> caption_to_image_ranks(sims, np.array([0, 0, 1])).tolist()
      [1, 2, 1]
      >>> caption_to_image_ranks(np.array([[0.5, 0.5], [0.1, 0.9]]), np.array([0, 1])).tolist()  # ties lose
      [2, 1]
    """
    sims, caption_image = _check_assignment(sims, caption_image)
    greater, tied, _ = _caption_to_image_counts(sims, caption_image)
    return 1 + greater + tied


def image_to_caption_ranks(sims: np.ndarray, caption_image: np.ndarray) -> np.ndarray:
    """1-based pessimistic rank of each image's best-ranked caption among all captions.

    Args:
      sims: float [n_captions, n_images] (the same matrix as for caption→image).
      caption_image: int [n_captions], the index of each caption's image.

    Returns:
      int64 [n_images] ranks in 1..n_captions: 1 + the number of other images'
      captions scored >= the image's most similar own caption.

    Example:
      >>> sims = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7]])  # 3 captions x 2 images
      >>> image_to_caption_ranks(sims, np.array([0, 0, 1])).tolist()  # image 1: caption 1 beats 2
      [1, 2]
    """
    sims, caption_image = _check_assignment(sims, caption_image)
    greater, tied, _ = _image_to_caption_counts(sims, caption_image)
    return 1 + greater + tied


def expected_recall(greater: np.ndarray, tied: np.ndarray, tied_truth: np.ndarray, k: int) -> np.ndarray:
    """Probability [q] that a ground-truth item is in the top ``k`` when ties are broken
    uniformly at random.

    Args:
      greater: int [q], candidates strictly above the best ground truth.
      tied: int [q], other candidates tied with it.
      tied_truth: int [q] (>= 1), ground-truth items tied at that score.
      k: the cut-off.

    Returns:
      float64 [q]: ``1 - C(t, j) / C(t + m, j)`` with ``j = k - greater`` slots left for
      the tie block (0 when ``j <= 0``, 1 when ``j > t``); 1 or 0 without ties.

    Example:
      >>> expected_recall(greater=[0, 0, 2], tied=[0, 1, 0], tied_truth=[1, 1, 1], k=1).tolist()
      [1.0, 0.5, 0.0]
    """
    greater, tied, m = (np.asarray(a, dtype=np.int64) for a in (greater, tied, tied_truth))
    j = k - greater
    # P(no ground truth among the first j of the t + m tied items) = prod_{i<j} (t - i) / (t + m - i).
    none = np.ones(greater.shape, dtype=np.float64)
    for i in range(max(int(k), 0)):
        step = np.clip(tied - i, 0, None) / (tied + m - i).clip(min=1)
        none = np.where(i < j, none * step, none)
    p = 1.0 - none
    return np.where(j <= 0, 0.0, np.where(j > tied, 1.0, p))


def rank_metrics(ranks: np.ndarray, ks: Sequence[int] = RECALL_KS) -> dict:
    """Recall@K (percent), medr and meanr of 1-based ranks ``ranks`` [q].

    Raises:
      ValueError: empty ranks or ranks < 1.

    Example:
      >>> rank_metrics([1, 2, 1, 12])
      {'R@1': 50.0, 'R@5': 75.0, 'R@10': 75.0, 'medr': 1.5, 'meanr': 4.0}
    """
    ranks = np.asarray(ranks)
    if ranks.size == 0 or ranks.min() < 1:
        raise ValueError("rank_metrics: need a non-empty array of 1-based ranks.")
    out = {f"R@{k}": float(100.0 * (ranks <= k).mean()) for k in ks}
    out["medr"] = float(np.median(ranks))
    out["meanr"] = float(ranks.mean())
    return out


def _tie_aware_metrics(counts, ks: Sequence[int] = RECALL_KS) -> dict:
    """``rank_metrics`` of the pessimistic ranks, with Recall@K the expected recall under
    random tie order (``expected_recall``)."""
    greater, tied, tied_truth = counts
    out = rank_metrics(1 + greater + tied, ks)
    for k in ks:
        out[f"R@{k}"] = float(100.0 * expected_recall(greater, tied, tied_truth, k).mean())
    return out


def retrieval_metrics(sims: np.ndarray, caption_image: np.ndarray) -> dict:
    """Both directions on one fold.

    Ranks (``medr``, ``meanr``) are pessimistic, Recall@K the expected recall under
    random tie order (module docstring).

    Returns:
      ``{"caption_to_image": {R@1, R@5, R@10, medr, meanr}, "image_to_caption": {...},
      "rsum": float, "n_images": int, "n_captions": int}``.

    Example:
      >>> sims = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7]])  # 3 captions x 2 images
      >>> result = retrieval_metrics(sims, np.array([0, 0, 1]))
      >>> round(result["caption_to_image"]["R@1"], 2), result["image_to_caption"]["medr"]
      (66.67, 1.5)
      >>> round(result["rsum"], 2), result["n_images"], result["n_captions"]
      (516.67, 2, 3)
    """
    sims, caption_image = _check_assignment(sims, caption_image)
    t2i = _tie_aware_metrics(_caption_to_image_counts(sims, caption_image))
    i2t = _tie_aware_metrics(_image_to_caption_counts(sims, caption_image))
    return {
        "caption_to_image": t2i,
        "image_to_caption": i2t,
        "rsum": sum(t2i[f"R@{k}"] + i2t[f"R@{k}"] for k in RECALL_KS),
        "n_images": int(np.asarray(sims).shape[1]),
        "n_captions": int(np.asarray(sims).shape[0]),
    }


def contiguous_folds(n_images: int, n_folds: int) -> list[np.ndarray]:
    """Image indices of ``n_folds`` contiguous folds of equal size (VSE++ 5-fold 1K).

    Raises:
      ValueError: ``n_images`` not divisible by ``n_folds``.

    Example:
      >>> [fold.tolist() for fold in contiguous_folds(6, 3)]
      [[0, 1], [2, 3], [4, 5]]
    """
    if n_folds < 1 or n_images % n_folds:
        raise ValueError(f"{n_images} images do not split into {n_folds} equal contiguous folds.")
    size = n_images // n_folds
    return [np.arange(k * size, (k + 1) * size) for k in range(n_folds)]


def evaluate_retrieval(
    caption_embeddings: np.ndarray,
    image_embeddings: np.ndarray,
    caption_image: np.ndarray,
    protocol: str = "flickr8k_1k",
    *,
    n_folds: int | None = None,
    ci: bool = True,
    ci_seed: int = 0,
) -> dict:
    """Retrieval under a named protocol (see module docstring).

    Args:
      caption_embeddings: float [n_captions, N] text-tower outputs.
      image_embeddings: float [n_images, N] image-tower outputs, in image order
        (folds are contiguous in this order).
      caption_image: int [n_captions], index into ``image_embeddings``.
      protocol: a key of ``PROTOCOLS``.
      n_folds: override the protocol's fold count (``"all"`` with k folds).
      ci: add the 95 % intervals (module docstring) to each direction:
        ``"R@1_ci95"``, ``"R@5_ci95"``, ``"R@10_ci95"`` ([lo, hi] percent) and
        ``"medr_ci95"`` ([lo, hi] ranks).
      ci_seed: the medr bootstrap's seed.

    Returns:
      ``retrieval_metrics`` averaged over folds (per-fold results under
      ``"folds"`` when there is more than one), plus ``"protocol"`` and
      ``"n_folds"``.

    Raises:
      ValueError: unknown protocol, wrong number of images for it, shapes that
        do not match, an image without caption.

    Example:
      >>> captions = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0]])
      >>> result = evaluate_retrieval(captions, np.eye(2), np.array([0, 0, 1]), protocol="all")
      >>> result["caption_to_image"]["R@1"], result["rsum"], result["protocol"], result["n_folds"]
      (100.0, 600.0, 'all', 1)
      >>> [round(x, 1) for x in result["caption_to_image"]["R@1_ci95"]]  # bootstrap over the 2 images
      [100.0, 100.0]
      >>> [round(x, 1) for x in result["image_to_caption"]["R@1_ci95"]]  # Wilson, 2 image queries
      [34.2, 100.0]
      >>> evaluate_retrieval(captions, np.eye(2), np.array([0, 0, 1]), protocol="flickr8k_1k")
      Traceback (most recent call last):
        ...
      ValueError: Protocol 'flickr8k_1k' needs 1000 images, got 2.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"Unknown retrieval protocol {protocol!r}; choose one of {sorted(PROTOCOLS)}.")
    expected, folds = PROTOCOLS[protocol]
    folds = n_folds or folds
    caption_image = np.asarray(caption_image)
    n_images = int(np.asarray(image_embeddings).shape[0])
    if expected is not None and n_images != expected:
        raise ValueError(f"Protocol {protocol!r} needs {expected} images, got {n_images}.")
    if np.asarray(caption_embeddings).shape[0] != caption_image.shape[0]:
        raise ValueError(
            f"{np.asarray(caption_embeddings).shape[0]} caption embeddings but {caption_image.shape[0]} "
            "caption→image indices."
        )
    # float64 (ranks depend on near-ties: float32 changes them); COCO 5k: 25,000 x 5,000 = 1 GB.
    text = normalize_rows(caption_embeddings)
    images = normalize_rows(image_embeddings)
    results, queries = [], []
    for fold in contiguous_folds(n_images, folds):
        local = np.full(n_images, -1, dtype=np.int64)
        local[fold] = np.arange(fold.size)
        rows = np.flatnonzero(local[caption_image] >= 0)
        sims = text[rows] @ images[fold].T
        results.append(retrieval_metrics(sims, local[caption_image[rows]]))
        if ci:
            queries.append({"caption_to_image": _caption_to_image_counts(sims, local[caption_image[rows]]),
                            "image_to_caption": _image_to_caption_counts(sims, local[caption_image[rows]]),
                            "caption_image": local[caption_image[rows]]})
    out = average_folds(results)
    if ci:
        _add_intervals(out, queries, ci_seed)
    out.update({"protocol": protocol, "n_folds": folds})
    if folds > 1:
        out["folds"] = results
    return out


def _mean_of_medians(*folds, axis=-1):
    return np.mean([np.median(f, axis=axis) for f in folds], axis=0)


def _add_intervals(out: dict, queries: list[dict], seed: int, n_resamples: int = 1000) -> None:
    """Adds ``R@K_ci95`` and ``medr_ci95`` to both directions (module docstring): caption→image
    by a bootstrap over images (within folds), image→caption by Wilson (R@K) and a bootstrap
    over images (medr, within folds)."""
    _caption_intervals(out["caption_to_image"], queries, seed, n_resamples)
    counts = [q["image_to_caption"] for q in queries]
    node = out["image_to_caption"]
    for k in RECALL_KS:
        hits = np.concatenate([expected_recall(*c, k) for c in counts])
        node[f"R@{k}_ci95"] = [float(x) for x in recall_ci(hits)]
    node["ci_method"] = "R@K: Wilson over the image queries; medr: bootstrap over images (1,000 resamples)"
    ranks = [(1 + c[0] + c[1]).astype(np.float64) for c in counts]
    if min(r.size for r in ranks) < 2:
        node["medr_ci95"] = None
        return
    res = sps.bootstrap(tuple(ranks), _mean_of_medians, n_resamples=n_resamples, method="percentile",
                        vectorized=True, rng=np.random.default_rng(seed))
    node["medr_ci95"] = [float(res.confidence_interval.low), float(res.confidence_interval.high)]


def _caption_intervals(node: dict, queries: list[dict], seed: int, n_resamples: int) -> None:
    """caption→image R@K and medr intervals by a bootstrap over images within folds."""
    counts = [q["caption_to_image"] for q in queries]
    groups = np.concatenate([q["caption_image"] for q in queries])
    strata = np.concatenate([np.full(q["caption_image"].size, f) for f, q in enumerate(queries)])
    node["ci_method"] = f"bootstrap over images, all captions of a drawn image ({n_resamples:,} resamples)"
    if min(np.unique(q["caption_image"]).size for q in queries) < 2:
        for k in RECALL_KS:
            node[f"R@{k}_ci95"] = None
        node["medr_ci95"] = None
        return
    for k in RECALL_KS:
        hits = np.concatenate([expected_recall(*c, k) for c in counts])
        lo, hi = cluster_bootstrap_ci(hits, groups, np.mean, strata=strata, n_resamples=n_resamples, seed=seed)
        node[f"R@{k}_ci95"] = [100.0 * lo, 100.0 * hi]
    ranks = np.concatenate([(1 + c[0] + c[1]).astype(np.float64) for c in counts])
    node["medr_ci95"] = list(cluster_bootstrap_ci(ranks, groups, np.median, strata=strata, n_resamples=n_resamples,
                                                  seed=seed))


def average_folds(results: list[dict]) -> dict:
    """Averages fold results of ``retrieval_metrics`` metric by metric (counts summed).

    Example:
      >>> perfect = retrieval_metrics(np.eye(2), np.array([0, 1]))
      >>> swapped = retrieval_metrics(np.eye(2)[::-1], np.array([0, 1]))
      >>> both = average_folds([perfect, swapped])
      >>> both["caption_to_image"]["R@1"], both["caption_to_image"]["medr"], both["n_images"]
      (50.0, 1.5, 4)
    """
    out = {}
    for direction in ("caption_to_image", "image_to_caption"):
        out[direction] = {k: float(np.mean([r[direction][k] for r in results])) for k in METRIC_KEYS}
    out["rsum"] = float(np.mean([r["rsum"] for r in results]))
    out["n_images"] = int(sum(r["n_images"] for r in results))
    out["n_captions"] = int(sum(r["n_captions"] for r in results))
    return out


def group_by_image(image_ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Distinct image ids in order of first appearance and each caption's index into them.

    Returns:
      ``(images, caption_image)``: ``list[str]`` [n_images], int64 [n_captions].

    Example:
      >>> images, caption_image = group_by_image(["img7", "img3", "img7"])
      >>> images, caption_image.tolist()
      (['img7', 'img3'], [0, 1, 0])
    """
    order: dict[str, int] = {}
    idx = np.array([order.setdefault(i, len(order)) for i in list(image_ids)], dtype=np.int64)
    return list(order), idx


def images_of_pairs(pairs) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The distinct images of a caption split, for retrieval against its captions.

    Args:
      pairs: a ``grounded_text.data.pairs.CaptionPairs`` (``image_ids`` [m] str,
        ``feature_rows`` [m] int, ``features`` [n, d]: an array or a streaming store).

    Returns:
      ``(images, caption_image, image_features)``: ``list[str]`` [n_images] in order
      of first appearance, int64 [m] (each caption's index into ``images``) and float32
      [n_images, d], the feature row of each image (one gather).

    Example:
      >>> from grounded_text.data.pairs import CaptionPairs
      >>> pairs = CaptionPairs(captions=np.array(["a dog", "a dog runs", "a cat"]),
      ...                      image_ids=np.array(["dog.jpg", "dog.jpg", "cat.jpg"]),
      ...                      feature_rows=np.array([1, 1, 0]), features=np.eye(2, dtype=np.float32))
      >>> images, caption_image, features = images_of_pairs(pairs)
      >>> images, caption_image.tolist(), features.tolist()
      (['dog.jpg', 'cat.jpg'], [0, 0, 1], [[0.0, 1.0], [1.0, 0.0]])
    """
    images, caption_image = group_by_image(pairs.image_ids.tolist())
    rows = np.zeros(len(images), dtype=np.int64)
    rows[caption_image] = pairs.feature_rows  # captions of one image share its row (joined by id)
    return images, caption_image, np.asarray(pairs.features[rows], dtype=np.float32)


def format_retrieval_markdown(result: dict, title: str = "Retrieval") -> str:
    """A Markdown table of one ``evaluate_retrieval`` result (both directions).

    Example:
      >>> captions = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0]])
      >>> result = evaluate_retrieval(captions, np.eye(2), np.array([0, 0, 1]), protocol="all", ci=False)
      >>> print(format_retrieval_markdown(result))
      ### Retrieval — protocol `all` (2 images, 3 captions, 1 fold(s))
      <BLANKLINE>
      | direction | R@1 | R@5 | R@10 | medr | meanr |
      |---|---:|---:|---:|---:|---:|
      | caption→image | 100.0 | 100.0 | 100.0 | 1.0 | 1.0 |
      | image→caption | 100.0 | 100.0 | 100.0 | 1.0 | 1.0 |
      | rsum (0–600) | 600.0 | | | | |
    """
    lines = [
        f"### {title} — protocol `{result['protocol']}` ({result['n_images']} images, "
        f"{result['n_captions']} captions, {result['n_folds']} fold(s))",
        "",
        "| direction | R@1 | R@5 | R@10 | medr | meanr |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for direction, label in (("caption_to_image", "caption→image"), ("image_to_caption", "image→caption")):
        r = result[direction]
        lines.append(
            f"| {label} | {r['R@1']:.1f} | {r['R@5']:.1f} | {r['R@10']:.1f} | {r['medr']:.1f} | {r['meanr']:.1f} |"
        )
    lines.append(f"| rsum (0–600) | {result['rsum']:.1f} | | | | |")
    return "\n".join(lines)
