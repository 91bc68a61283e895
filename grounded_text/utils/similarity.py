"""Cosine similarity in NumPy: the one place the package scales rows to unit length and takes
their cosines (as sentence-transformers' ``util/similarity.py``).

The evaluation scores in float64 (``cosine_rows``: STS pairs; ``cosine_matrix``: retrieval);
``TextEncoder.similarity`` and ``similarity_pairwise`` answer in float32 (``cos_sim``,
``pairwise_cos_sim``, which also take ``tf.Tensor``\\ s and lists). A zero row has cosine 0
with everything, in every function.

Example:
    >>> cosine_matrix([[1.0, 0.0], [1.0, 1.0]], [[2.0, 0.0], [0.0, 3.0], [0.0, 0.0]]).round(4).tolist()
    [[1.0, 0.0, 0.0], [0.7071, 0.7071, 0.0]]
"""

from __future__ import annotations

import numpy as np

__all__ = ["as_embeddings", "cos_sim", "cosine_matrix", "cosine_rows", "normalize_rows", "pairwise_cos_sim"]


def normalize_rows(x, dtype=np.float64) -> np.ndarray:
    """Rows scaled to unit L2 norm; an all-zero row stays zero.

    Args:
      x: float [..., N] (an array or a nested list).
      dtype: the dtype computed in and returned (float64 for scoring, float32 for the encoder).

    Returns:
      ``dtype`` [..., N].

    Example:
      >>> normalize_rows([[3.0, 4.0], [0.0, 0.0]]).tolist()
      [[0.6, 0.8], [0.0, 0.0]]
    """
    x = np.asarray(x, dtype=dtype)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(dtype, copy=False)


def cosine_matrix(a, b, dtype=np.float64) -> np.ndarray:
    """Cosine similarities [n, m] of the rows of ``a`` [n, N] and ``b`` [m, N].

    Raises:
      ValueError: an input that is not 2-D, or widths that differ.

    Example:
      >>> cosine_matrix([[1.0, 0.0]], [[1.0, 1.0]]).round(4).tolist()
      [[0.7071]]
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"cosine_matrix: need [n, N] and [m, N] arrays, got {a.shape} and {b.shape}.")
    return normalize_rows(a, dtype) @ normalize_rows(b, dtype).T


def cosine_rows(a, b, dtype=np.float64) -> np.ndarray:
    """Row-wise cosine similarity [n] of two [n, N] arrays; a zero row gives 0.

    Example:
      >>> cosine_rows([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]], [[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]]).round(4).tolist()
      [1.0, 0.7071, 0.0]
    """
    # The dot product over the product of the norms, not the dot of normalised rows: the two
    # differ in the last bits, and a Spearman ρ over pairs whose cosines tie (a sentence paired
    # with itself) moves by 1e-4 when such a tie breaks.
    a, b = np.asarray(a, dtype=dtype), np.asarray(b, dtype=dtype)
    denom = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    return np.divide(dots, denom, out=np.zeros_like(dots), where=denom > 0)


def as_embeddings(x, name: str) -> np.ndarray:
    """An embedding or a batch of them (NumPy, ``tf.Tensor``, CPU PyTorch tensor, list) as
    float32 [rows, N].

    Raises:
      TypeError: ``x`` is not numeric (e.g. sentences: encode them first).
      ValueError: ``x`` has rank above 2.

    Example:
      >>> as_embeddings([1, 2], "a").shape
      (1, 2)
    """
    if type(x).__module__.startswith("tensorflow"):
        x = x.numpy()
    x = np.asarray(x)
    if x.dtype.kind not in "fiu":
        raise TypeError(f"similarity: {name} must be embeddings (a float array or tensor), got dtype {x.dtype}; "
                        "encode the sentences first.")
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        raise ValueError(f"similarity: {name} must be [N] or [rows, N], got shape {x.shape}.")
    return x.astype(np.float32, copy=False)


def cos_sim(a, b) -> np.ndarray:
    """Cosine similarity of every row of ``a`` with every row of ``b`` (``TextEncoder.similarity``).

    Args:
      a: float [A, N] or [N] (NumPy, ``tf.Tensor`` or a list). b: float [B, N] or [N].

    Returns:
      float32 [A, B] (a 1-D input counts as one row).

    Raises:
      TypeError, ValueError: see ``as_embeddings``; widths that differ.

    Example:
      >>> cos_sim([1.0, 0.0], [[2.0, 0.0], [0.0, 5.0]]).tolist()
      [[1.0, 0.0]]
    """
    x, y = as_embeddings(a, "a"), as_embeddings(b, "b")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"similarity: widths differ: a is [.., {x.shape[1]}], b is [.., {y.shape[1]}].")
    return cosine_matrix(x, y, np.float32).astype(np.float32)


def pairwise_cos_sim(a, b) -> np.ndarray:
    """Cosine similarity of each row of ``a`` with the same row of ``b``
    (``TextEncoder.similarity_pairwise``).

    Args:
      a: float [A, N] or [N]. b: float [A, N] or [N]: as many rows as ``a``.

    Returns:
      float32 [A] (a 1-D input counts as one row).

    Raises:
      TypeError, ValueError: see ``as_embeddings``; shapes that differ.

    Example:
      >>> [round(float(s), 4) for s in pairwise_cos_sim([[1.0, 0.0], [1.0, 1.0]], [[2.0, 0.0], [0.0, 1.0]])]
      [1.0, 0.7071]
    """
    x, y = as_embeddings(a, "a"), as_embeddings(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"similarity_pairwise: a is {list(x.shape)} and b is {list(y.shape)}; the same "
                         "[rows, N] is expected.")
    return cosine_rows(x, y, np.float32).astype(np.float32)
