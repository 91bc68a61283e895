"""The output precisions of ``TextEncoder.encode(precision=...)``: float32 and float16, and
sentence-transformers' quantised forms with the semantics of its ``quantize_embeddings``
(``sentence_transformers/util/quantization.py``, version 6.3), so that the same float32 vectors
and the same calibration give bit-identical codes.

* ``int8`` / ``uint8`` (scalar quantisation, [B, N]): each dimension's range ``[lo, hi]`` is cut
  into 255 equal steps; a value's code is ``floor((x - lo) / step)`` clipped to 0..255 (minus 128
  for ``int8``). The ranges come from ``ranges`` (float [2, N]: the minima, then the maxima),
  else from ``calibration_embeddings`` (float [M, N]), else from the vectors being encoded, which
  then must be at least two (fewer than 100 warn: the ranges of a small batch are unstable).
* ``binary`` / ``ubinary`` ([B, ceil(N / 8)]): one bit per dimension, set where the value is
  above 0, packed eight to a byte, most significant bit first (``np.packbits``); ``ubinary`` is
  the bytes as uint8, ``binary`` the bytes minus 128 as int8.

All are computed from the float32 vectors (after ``normalize_embeddings``, as
sentence-transformers does).
"""

from __future__ import annotations

import warnings

import numpy as np

from grounded_text.utils.quiet import GroundedTextWarning

__all__ = ["PRECISIONS", "check", "convert", "empty", "per_batch"]

#: The dtype of each precision's output.
PRECISIONS = {"float32": np.float32, "float16": np.float16, "int8": np.int8, "uint8": np.uint8,
              "binary": np.int8, "ubinary": np.uint8}
_SCALAR = ("int8", "uint8")
_BINARY = ("binary", "ubinary")
#: Fewer calibration rows than this warn, as sentence-transformers does.
STABLE_ROWS = 100


def _float_matrix(x, what: str, dim: int) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind not in "fiu" or x.ndim != 2 or x.shape[1] != dim:
        raise ValueError(f"encode: {what} must be a float array [rows, {dim}], got {x.dtype} {x.shape}.")
    return x


def check(precision: str, dim: int, ranges=None, calibration_embeddings=None) -> np.ndarray | None:
    """Checks ``encode``'s precision arguments before any work; the ranges they fix.

    Args:
      precision: one of ``PRECISIONS``.
      dim: N, the width of the vectors.
      ranges: float [2, N] (minima, maxima per dimension), or ``None``.
      calibration_embeddings: float [M, N], M >= 1, or ``None``; its per-dimension minima and
        maxima are the ranges when ``ranges`` is not given.

    Returns:
      float32 [2, N] for ``int8`` / ``uint8`` when ``ranges`` or ``calibration_embeddings`` is
      given; otherwise ``None`` (an ``int8`` / ``uint8`` encode then takes its own vectors' ranges).

    Raises:
      ValueError: an unknown precision; ``ranges`` or ``calibration_embeddings`` of another shape
        or not numeric, or given with a precision that does not use them (float, binary).

    Example:
      >>> check("int8", 2, calibration_embeddings=[[0.0, 1.0], [2.0, -1.0]]).tolist()
      [[0.0, -1.0], [2.0, 1.0]]
      >>> check("binary", 2) is None
      True
    """
    if precision not in PRECISIONS:
        raise ValueError(f"encode: precision must be one of {list(PRECISIONS)}, got {precision!r}.")
    if ranges is None and calibration_embeddings is None:
        return None
    if precision not in _SCALAR:
        raise ValueError(f"encode: ranges and calibration_embeddings apply to precision 'int8' or 'uint8' only, "
                         f"not {precision!r}.")
    if ranges is not None:
        ranges = _float_matrix(ranges, "ranges", dim)
        if ranges.shape[0] != 2:
            raise ValueError(f"encode: ranges must be [2, {dim}] (minima, then maxima), got {ranges.shape}.")
        return ranges.astype(np.float32, copy=False)
    calibration = _float_matrix(calibration_embeddings, "calibration_embeddings", dim)
    if calibration.shape[0] == 0:
        raise ValueError("encode: calibration_embeddings holds no rows.")
    return np.vstack((np.min(calibration, axis=0), np.max(calibration, axis=0))).astype(np.float32, copy=False)


def per_batch(precision: str, ranges: np.ndarray | None) -> bool:
    """Whether each batch can be converted on its own: all but ``int8`` / ``uint8`` without
    fixed ranges, which take the ranges of every vector of the call.

    Example:
      >>> per_batch("binary", None), per_batch("int8", None)
      (True, False)
    """
    return precision not in _SCALAR or ranges is not None


def _batch_ranges(x: np.ndarray, precision: str) -> np.ndarray:
    if x.shape[0] < 2:
        raise ValueError(f"encode: cannot compute {precision} ranges from a single embedding; pass ranges= or "
                         "calibration_embeddings= from a representative set of embeddings.")
    if x.shape[0] < STABLE_ROWS:
        warnings.warn(f"{precision} ranges computed from {x.shape[0]} embeddings; pass calibration_embeddings= "
                      f"(at least {STABLE_ROWS} rows) for stable ones.", GroundedTextWarning, stacklevel=5)
    return np.vstack((np.min(x, axis=0), np.max(x, axis=0))).astype(np.float32, copy=False)


def convert(x: np.ndarray, precision: str, ranges: np.ndarray | None = None) -> np.ndarray:
    """float32 [B, N] vectors in ``precision``.

    Args:
      x: float32 [B, N], B >= 1.
      precision: one of ``PRECISIONS`` (checked by ``check``).
      ranges: float32 [2, N] from ``check``; ``None`` takes ``x``'s own ranges (``int8`` / ``uint8``).

    Returns:
      float32 / float16 / int8 / uint8 [B, N]; int8 (``binary``) or uint8 (``ubinary``)
      [B, ceil(N / 8)].

    Raises:
      ValueError: ``int8`` / ``uint8`` without ``ranges`` on a single row (its ranges are empty).

    Example:
      >>> x = np.array([[0.5, -1.0, 0.0, 2.0], [1.5, 1.0, -1.0, 0.0]], np.float32)
      >>> convert(x, "uint8", np.array([[0, -1, -1, 0], [2, 1, 1, 2]], np.float32)).tolist()  # max: 254.99...
      [[63, 0, 127, 254], [191, 254, 0, 0]]
      >>> convert(x, "ubinary").tolist()       # bits 1001 and 1100, then four zero bits
      [[144], [192]]
    """
    if precision in _BINARY:
        packed = np.packbits(x > 0, axis=-1)
        return (packed - 128).astype(np.int8) if precision == "binary" else packed
    if precision not in _SCALAR:
        return x.astype(PRECISIONS[precision], copy=False)
    # The same operations, in the same dtypes, as sentence-transformers' quantize_embeddings:
    # a different but equal-looking formula rounds differently at the steps' edges.
    ranges = _batch_ranges(x, precision) if ranges is None else ranges
    starts = ranges[0, :]
    steps = (ranges[1, :] - starts) / 255
    steps = np.where(steps == 0, 1, steps)
    codes = np.clip(np.floor((x - starts) / steps), 0, 255)
    return codes.astype(np.uint8) if precision == "uint8" else (codes - 128).astype(np.int8)


def empty(precision: str, dim: int) -> np.ndarray:
    """The output of no sentences: ``precision`` [0, N] (packed: [0, ceil(N / 8)]).

    Example:
      >>> empty("binary", 128).shape, empty("uint8", 128).dtype
      ((0, 16), dtype('uint8'))
    """
    width = (dim + 7) // 8 if precision in _BINARY else dim
    return np.zeros((0, width), PRECISIONS[precision])
