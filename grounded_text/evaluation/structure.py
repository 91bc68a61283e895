"""Structural measures of a sentence space against the visual space (Bordes et al. 2019 §4.3).

Bordes, Zablocki, Soulier, Piwowarski & Gallinari, "Incorporating Visual Semantics
into Sentence Representations within a Grounded Space", EMNLP 2019, §4.3 evaluate
how much of the visual structure a sentence space keeps, on held-out image–caption
pairs. Definitions used here (cosine similarity everywhere; ``s`` = sentence
embeddings, ``v`` = the *visual* vectors, i.e. the image features the grounding
used — by default the CNN features, not a learnt projection, so text-only
encoders such as the baselines can be scored too):

* **mNNO@K** (mean nearest-neighbour overlap; Collell & Moens, "Do Neural Network
  Cross-Modal Mappings Really Bridge Modalities?", ACL 2018, §3.2, Eq. 2):
  for n paired items (caption i ↔ its image i, one caption per image),
  ``mNNO@K = 1/(K n) Σ_i |NN_K(s_i) ∩ NN_K(v_i)|`` where ``NN_K(x_i)`` is the set
  of indices of the K nearest neighbours of item i in its own space (cosine,
  item i itself excluded). 0 = unrelated neighbourhoods, 1 = identical. Ties at
  the K-th neighbour are broken by index (stable sort).
* **ρ_vis** (Bordes §4.3 "ρ^vis"): the correlation, over all unordered pairs
  i < j of the n items, between ``cos(s_i, s_j)`` and ``cos(v_i, v_j)``. Bordes define
  it as the **Pearson** correlation (§4.3; Table 1 prints it × 100), so Pearson r is the
  headline figure (``rho_vis["value"]``, also ``rho_vis["pearson"]``); Spearman ρ is kept
  as its own key (``rho_vis["spearman"]``, ``scipy.stats``), a rank-based check. Their
  95 % intervals (``pearson_ci95``, ``spearman_ci95``) come from a percentile bootstrap over
  the n items (``rho_vis_ci``): the n(n-1)/2 pairs share items, so a Fisher-z interval on the
  pair count would be far too narrow.
  mNNO@K, C_intra and C_inter get intervals from the same bootstrap over images
  (``structure_ci``): a resampled image weighs its neighbour overlap and its caption
  pairs by how often it was drawn; the neighbourhoods themselves are those of the full split
  (as a recall interval keeps the full gallery).
* **C_intra** (Bordes §4.3, cluster cohesion): the mean cosine over all unordered
  pairs of *distinct* captions of the same image (pairs, not images, weigh
  equally).
* **C_inter** (Bordes §4.3, cluster separation): the mean cosine over all
  unordered pairs of captions of *different* images. A space that clusters
  captions by image has C_intra well above C_inter; ``C_intra − C_inter`` is
  reported as ``C_gap``.

For mNNO@K and ρ_vis each image contributes exactly one caption (its first in the
given order, or a seeded choice), so that the visual side has no duplicated
points; C_intra / C_inter use all captions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from grounded_text.utils.similarity import normalize_rows


def knn_indices(x: np.ndarray, k: int) -> np.ndarray:
    """Indices [n, k] of the k cosine nearest neighbours of each row (itself excluded, ties by index).

    Raises:
      ValueError: ``k`` not in 1..n-1.
    """
    x = normalize_rows(x)
    n = x.shape[0]
    if not 1 <= k <= n - 1:
        raise ValueError(f"K must be in 1..{n - 1} for {n} items, got {k}.")
    sims = x @ x.T
    np.fill_diagonal(sims, -np.inf)
    return np.argsort(-sims, axis=1, kind="stable")[:, :k]


def mnno(text: np.ndarray, visual: np.ndarray, k: int = 10) -> float:
    """mNNO@K of paired rows (Collell & Moens 2018, Eq. 2), in [0, 1].

    Args:
      text: float [n, N] sentence embeddings.
      visual: float [n, d] visual vectors; row i is paired with ``text[i]``.
      k: neighbourhood size K.

    Raises:
      ValueError: different numbers of rows, or bad K.
    """
    overlap = nn_overlap(text, visual, k)
    return float(np.sum(overlap) / (k * overlap.size))


def nn_overlap(text: np.ndarray, visual: np.ndarray, k: int = 10) -> np.ndarray:
    """``|NN_K(s_i) ∩ NN_K(v_i)|`` of each paired row (the terms of mNNO@K): int64 [n] in 0..K.

    Raises:
      ValueError: different numbers of rows, or bad K.
    """
    text, visual = np.asarray(text), np.asarray(visual)
    if text.ndim != 2 or visual.ndim != 2 or text.shape[0] != visual.shape[0]:
        raise ValueError(f"mnno: need paired [n, N] and [n, d] arrays, got {text.shape} and {visual.shape}.")
    a, b = knn_indices(text, k), knn_indices(visual, k)
    return np.array([np.intersect1d(a[i], b[i], assume_unique=True).size for i in range(a.shape[0])],
                    dtype=np.int64)


def rho_vis(text: np.ndarray, visual: np.ndarray) -> dict:
    """Correlation of pairwise text cosines with pairwise visual cosines (Bordes §4.3).

    Args:
      text: float [n, N]; visual: float [n, d], row-paired; n ≥ 3.

    Returns:
      ``{"value": float (the headline: Pearson r, Bordes §4.3), "statistic": "pearson",
      "pearson": float, "spearman": float, "n_pairs": n(n-1)/2}``, correlations in [-1, 1].

    Raises:
      ValueError: mismatched rows, n < 3, or a constant side (correlation undefined).
    """
    text, visual = np.asarray(text), np.asarray(visual)
    if text.ndim != 2 or visual.ndim != 2 or text.shape[0] != visual.shape[0] or text.shape[0] < 3:
        raise ValueError(f"rho_vis: need paired arrays with >= 3 rows, got {text.shape} and {visual.shape}.")
    iu = np.triu_indices(text.shape[0], k=1)
    st = (normalize_rows(text) @ normalize_rows(text).T)[iu]
    sv = (normalize_rows(visual) @ normalize_rows(visual).T)[iu]
    if np.ptp(st) == 0 or np.ptp(sv) == 0:
        raise ValueError("rho_vis: all pairwise cosines are equal on one side; correlation undefined.")
    pearson = float(stats.pearsonr(st, sv)[0])
    return {
        "value": pearson,  # Bordes §4.3 define ρ_vis as a Pearson correlation
        "statistic": "pearson",
        "pearson": pearson,
        "spearman": float(stats.spearmanr(st, sv)[0]),
        "n_pairs": int(st.size),
    }


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float | None:
    total = w.sum()
    mx, my = (w * x).sum() / total, (w * y).sum() / total
    dx, dy = x - mx, y - my
    sxx, syy = (w * dx * dx).sum(), (w * dy * dy).sum()
    if sxx <= 0 or syy <= 0:
        return None
    return float((w * dx * dy).sum() / np.sqrt(sxx * syy))


def _tie_groups(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorting order of ``values`` and the start of each run of equal values in it."""
    order = np.argsort(values, kind="stable")
    v = values[order]
    starts = np.flatnonzero(np.concatenate([[True], v[1:] != v[:-1]]))
    return order, starts


def _weighted_midranks(order: np.ndarray, starts: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Mid-ranks of the values when value k is repeated w[k] times (ties share their mean rank)."""
    ranks = np.empty(w.shape, dtype=np.float64)
    if starts.size == w.size:  # no ties (the usual case for cosines): one cumulative sum
        ws = w[order]
        ranks[order] = np.cumsum(ws) - (ws - 1) / 2
        return ranks
    sums = np.add.reduceat(w[order], starts)
    mid = np.cumsum(sums) - sums + (sums + 1) / 2
    ranks[order] = np.repeat(mid, np.diff(np.append(starts, w.size)))
    return ranks


def rho_vis_ci(text: np.ndarray, visual: np.ndarray, confidence: float = 0.95, *, n_resamples: int = 200,
               seed: int = 0) -> dict:
    """Bootstrap intervals of ρ_vis: resample the n items with replacement and recompute both
    correlations over the pairs of distinct items of the resample.

    A resample that draws item i w_i times holds the pair (i, j) w_i w_j times (pairs of one
    item drawn twice are not pairs of items), so each resample is computed as a weighted
    Pearson correlation (of the cosines, or of their weighted mid-ranks for Spearman) over the
    original n(n-1)/2 pairs: the same numbers as materialising the resample, without it.

    Args:
      text: float [n, N]; visual: float [n, d], row-paired; n >= 3.
      confidence: the two-sided level; n_resamples: bootstrap resamples; seed: the seed
        (resample k draws ``numpy.random.default_rng(seed).integers(0, n, n)``, k-th call).

    Returns:
      ``{"pearson_ci95": [lo, hi], "spearman_ci95": [lo, hi]}`` (percentile intervals;
      resamples where a correlation is undefined are skipped; None if all are).

    Raises:
      ValueError: unpaired arrays or n < 3; ``n_resamples`` < 1.
    """
    text, visual = np.asarray(text), np.asarray(visual)
    if text.ndim != 2 or visual.ndim != 2 or text.shape[0] != visual.shape[0] or text.shape[0] < 3:
        raise ValueError(f"rho_vis_ci: need paired arrays with >= 3 rows, got {text.shape} and {visual.shape}.")
    if n_resamples < 1:
        raise ValueError(f"rho_vis_ci: n_resamples must be >= 1, got {n_resamples}.")
    n = text.shape[0]
    a, b = np.triu_indices(n, k=1)
    st = (normalize_rows(text) @ normalize_rows(text).T)[a, b]
    sv = (normalize_rows(visual) @ normalize_rows(visual).T)[a, b]
    groups_t, groups_v = _tie_groups(st), _tie_groups(sv)
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {"pearson": [], "spearman": []}
    for _ in range(n_resamples):
        w_item = np.bincount(rng.integers(0, n, n), minlength=n).astype(np.float64)
        w = w_item[a] * w_item[b]
        if np.count_nonzero(w) < 3:
            continue
        for key, value in (("pearson", _weighted_pearson(st, sv, w)),
                           ("spearman", _weighted_pearson(_weighted_midranks(*groups_t, w),
                                                          _weighted_midranks(*groups_v, w), w))):
            if value is not None:
                draws[key].append(value)
    alpha = (1 - confidence) / 2
    return {f"{k}_ci95": ([float(x) for x in np.quantile(v, [alpha, 1 - alpha])] if v else None)
            for k, v in draws.items()}


def cluster_cohesion(text: np.ndarray, caption_image: Sequence) -> dict:
    """C_intra and C_inter (Bordes §4.3) from all captions.

    Computed without the n × n matrix: with unit rows e_i, the sum of cosines over
    ordered pairs inside a group g is ``|Σ_{i∈g} e_i|² − |g|``; over ordered pairs of
    different groups ``|Σ_i e_i|² − Σ_g |Σ_{i∈g} e_i|²`` (``_weighted_cohesion`` with unit
    weights). Zero embeddings count as cosine 0 with everything.

    Args:
      text: float [m, N] caption embeddings.
      caption_image: [m] image key of each caption (any hashable values).

    Returns:
      ``{"C_intra", "C_inter", "C_gap", "n_intra_pairs", "n_inter_pairs"}``
      (unordered pair counts).

    Raises:
      ValueError: length mismatch, no image with ≥ 2 captions, or only one image.
    """
    _, sums, sizes, self_sims = _image_sums(normalize_rows(text), caption_image)
    c_intra, c_inter = _weighted_cohesion(sums, sizes, self_sims, np.ones_like(sizes))
    if c_intra is None:
        raise ValueError("C_intra undefined: no image has two captions.")
    if c_inter is None:
        raise ValueError("C_inter undefined: all captions belong to one image.")
    intra_pairs = float((sizes * (sizes - 1)).sum()) / 2
    inter_pairs = float(sizes.sum()) * (float(sizes.sum()) - 1) / 2 - intra_pairs
    return {
        "C_intra": c_intra,
        "C_inter": c_inter,
        "C_gap": c_intra - c_inter,
        "n_intra_pairs": int(intra_pairs),
        "n_inter_pairs": int(inter_pairs),
    }


def _image_sums(e: np.ndarray, caption_image: Sequence):
    """Per image (sorted keys): the sum of its unit caption rows, its caption count and the sum of
    its rows' self-similarities (1, or 0 for a zero row); with each caption's image index."""
    keys = list(caption_image)
    if e.shape[0] != len(keys):
        raise ValueError(f"{e.shape[0]} embeddings but {len(keys)} image keys.")
    _, group = np.unique(np.asarray(keys, dtype=object).astype(str), return_inverse=True)
    n_groups = int(group.max()) + 1 if group.size else 0
    sums = np.zeros((n_groups, e.shape[1]))
    np.add.at(sums, group, e)
    sizes = np.bincount(group, minlength=n_groups).astype(np.float64)
    self_sims = np.bincount(group, weights=(e * e).sum(1), minlength=n_groups)
    return group, sums, sizes, self_sims


def _weighted_cohesion(sums, sizes, self_sims, w) -> tuple[float | None, float | None]:
    """C_intra and C_inter of a resample that draws image g ``w[g]`` times.

    Two copies of one image are not two images: their caption pairs count as neither intra nor
    inter pairs (as ``rho_vis_ci`` leaves out the pairs of an item with its copy). Over ordered
    pairs, the intra sum is ``Σ w_g (|S_g|² − self_g)`` and the inter sum ``|Σ w_g S_g|² − Σ w_g² |S_g|²``
    (S_g = the sum of image g's unit rows). None where a measure has no pair.
    """
    sq = (sums * sums).sum(1)
    intra_sum, intra_pairs = float(w @ (sq - self_sims)), float(w @ (sizes * (sizes - 1)))
    total = w @ sums
    inter_sum = float(total @ total) - float((w * w) @ sq)
    inter_pairs = float(w @ sizes) ** 2 - float((w * w) @ (sizes * sizes))
    return (intra_sum / intra_pairs if intra_pairs else None,
            inter_sum / inter_pairs if inter_pairs else None)


def structure_ci(caption_embeddings: np.ndarray, caption_image: Sequence, overlaps: dict, rows: np.ndarray,
                 confidence: float = 0.95, *, n_resamples: int = 200, seed: int = 0) -> dict:
    """Percentile bootstrap intervals over images of mNNO@K, C_intra and C_inter.

    Each resample draws the images with replacement (``numpy.random.default_rng(seed)
    .integers(0, n_images, n_images)``, k-th call; images in sorted key order). mNNO@K of the
    resample is the draw-weighted mean of the images' neighbour overlaps / K (neighbourhoods of
    the full split); C_intra and C_inter are recomputed over the resample's caption pairs
    (``_weighted_cohesion``).

    Args:
      caption_embeddings: float [m, N]; caption_image: [m] image keys.
      overlaps: ``{K: int [n_images] nn_overlap}`` of the rows ``rows`` (one caption per image).
      rows: int [n_images] the caption row representing each image in ``overlaps``.
      confidence, n_resamples, seed: the interval's level, resamples and seed.

    Returns:
      ``{"mNNO@K_ci95": [lo, hi], ..., "C_intra_ci95": [lo, hi], "C_inter_ci95": [lo, hi]}``
      (None where every resample left a measure undefined).

    Raises:
      ValueError: ``n_resamples`` < 1.
    """
    if n_resamples < 1:
        raise ValueError(f"structure_ci: n_resamples must be >= 1, got {n_resamples}.")
    group, sums, sizes, self_sims = _image_sums(normalize_rows(caption_embeddings), caption_image)
    row_group = group[np.asarray(rows)]
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {**{f"mNNO@{k}": [] for k in overlaps}, "C_intra": [], "C_inter": []}
    for _ in range(n_resamples):
        w = np.bincount(rng.integers(0, sizes.size, sizes.size), minlength=sizes.size).astype(np.float64)
        for k, overlap in overlaps.items():
            draws[f"mNNO@{k}"].append(float(w[row_group] @ overlap) / (k * float(w[row_group].sum())))
        for key, value in zip(("C_intra", "C_inter"), _weighted_cohesion(sums, sizes, self_sims, w)):
            if value is not None:
                draws[key].append(value)
    alpha = (1 - confidence) / 2
    return {f"{k}_ci95": ([float(x) for x in np.quantile(v, [alpha, 1 - alpha])] if v else None)
            for k, v in draws.items()}


def one_caption_per_image(caption_image: Sequence, seed: int | None = None) -> np.ndarray:
    """Row indices choosing one caption per image: the first (``seed=None``) or a seeded one.

    Returns:
      int64 [n_images], in order of first appearance of each image.
    """
    groups: dict = {}
    for i, key in enumerate(list(caption_image)):
        groups.setdefault(key, []).append(i)
    if seed is None:
        return np.array([rows[0] for rows in groups.values()], dtype=np.int64)
    rng = np.random.default_rng(seed)
    return np.array([rows[int(rng.integers(len(rows)))] for rows in groups.values()], dtype=np.int64)


def structural_measures(
    caption_embeddings: np.ndarray,
    caption_image: Sequence,
    image_vectors: np.ndarray,
    *,
    ks: Sequence[int] = (10,),
    seed: int | None = None,
    ci_resamples: int = 100,
) -> dict:
    """All Bordes §4.3 measures on one held-out split.

    Args:
      caption_embeddings: float [m, N], one row per caption.
      caption_image: [m] image key of each caption.
      image_vectors: float [m, d] visual vector of each caption's image (rows of
        one image are equal; one row per image is used for mNNO / ρ_vis).
      ks: the K of mNNO@K.
      seed: which caption represents an image for mNNO / ρ_vis (None: the first).
      ci_resamples: bootstrap resamples for the 95 % intervals (``rho_vis_ci`` for ρ_vis,
        ``structure_ci`` for mNNO@K, C_intra and C_inter; seed 0); 0 leaves them out.

    Returns:
      ``{"mNNO@K": float, ..., "rho_vis": {"value" (= "pearson", the headline), "statistic",
      "pearson", "spearman", "n_pairs", "pearson_ci95", "spearman_ci95"}, "C_intra", "C_inter", "C_gap", "n_images",
      "n_captions", ..., "mNNO@K_ci95", "C_intra_ci95", "C_inter_ci95"}`` (``[lo, hi]``).
    """
    caption_embeddings = np.asarray(caption_embeddings)
    image_vectors = np.asarray(image_vectors)
    if caption_embeddings.shape[0] != image_vectors.shape[0] or caption_embeddings.shape[0] != len(caption_image):
        raise ValueError(
            f"structural_measures: {caption_embeddings.shape[0]} captions, {image_vectors.shape[0]} image "
            f"rows and {len(caption_image)} image keys must agree."
        )
    rows = one_caption_per_image(caption_image, seed)
    text, visual = caption_embeddings[rows], image_vectors[rows]
    overlaps = {k: nn_overlap(text, visual, k) for k in ks}
    out: dict = {f"mNNO@{k}": float(o.sum() / (k * o.size)) for k, o in overlaps.items()}
    out["rho_vis"] = rho_vis(text, visual)
    out.update(cluster_cohesion(caption_embeddings, caption_image))
    if ci_resamples:
        out["rho_vis"].update(rho_vis_ci(text, visual, n_resamples=ci_resamples))
        out.update(structure_ci(caption_embeddings, caption_image, overlaps, rows, n_resamples=ci_resamples))
    out["n_images"] = int(rows.size)
    out["n_captions"] = int(caption_embeddings.shape[0])
    return out
