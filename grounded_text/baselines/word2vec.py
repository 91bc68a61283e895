"""word2vec baseline trained on the Flickr8k training captions (VETE's "Word2Vec" row).

Kurach et al. 2017 (Tables 1 and 5) compare VETE with word2vec vectors trained on the
same caption text as the grounded models: the sentence embedding is the mean of
its words' vectors. This is that baseline:

* corpus: the captions of the Flickr8k **training split only** (never dev/test);
* tokenisation: the package's own ``grounded_text.layers.text_preprocessor.tokenize``
  (Unicode case folding, splitting at whitespace and script boundaries), the same
  tokens the text towers see;
* model: ``gensim.models.Word2Vec`` (Mikolov et al. 2013), skip-gram with
  negative sampling by default, ``vector_size`` 128 (VETE's N), window 5,
  ``min_count`` 1, 20 epochs, ``seed`` fixed and ``workers=1`` so that training
  is reproducible (gensim is only deterministic single-threaded);
* sentence = mean of the vectors of its in-vocabulary tokens; **a sentence with no
  known token maps to the zero vector** (the evaluator scores its cosine as 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from grounded_text.data.flickr8k import read_flickr8k
from grounded_text.data.paths import resolve_data_dir
from grounded_text.layers.text_preprocessor import tokenize
from grounded_text.utils.extras import require


def _tokens(sentences: Sequence[str], batch_size: int = 4096) -> list[list[str]]:
    out: list[list[str]] = []
    sentences = list(sentences)
    for start in range(0, len(sentences), batch_size):
        rag = tokenize(sentences[start : start + batch_size])
        out.extend([t.decode("utf-8") for t in row] for row in rag.to_list())
    return out


class Word2VecMeanEncoder:
    """Callable encoder: list of n ``str`` → float32 [n, vector_size] mean word2vec vectors.

    Args:
      training_sentences: the corpus (raw captions).
      vector_size, window, min_count, epochs, sg: ``gensim.models.Word2Vec``
        arguments (``sg=1`` skip-gram, ``0`` CBOW).
      seed: gensim's ``seed`` (with ``workers=1``: same seed, same vectors).

    Attributes:
      model: the trained ``gensim.models.Word2Vec``.
      dim: ``vector_size``.

    Raises:
      ValueError: empty corpus or no token survives ``min_count``.
    """

    def __init__(self, training_sentences: Sequence[str], *, vector_size: int = 128, window: int = 5,
                 min_count: int = 1, epochs: int = 20, sg: int = 1, seed: int = 0):
        Word2Vec = require("gensim.models", "The word2vec baseline").Word2Vec

        corpus = [t for t in _tokens(training_sentences) if t]
        if not corpus:
            raise ValueError("word2vec baseline: the training corpus has no tokens.")
        try:
            self.model = Word2Vec(corpus, vector_size=vector_size, window=window, min_count=min_count,
                                  epochs=epochs, sg=sg, seed=seed, workers=1)
        except RuntimeError as e:  # gensim: "you must first build vocabulary"
            raise ValueError(f"word2vec baseline: no token occurs >= min_count={min_count} times.") from e
        self.dim = int(vector_size)
        self.num_training_sentences = len(corpus)

    def __call__(self, sentences: Sequence[str]) -> np.ndarray:
        """Encodes sentences: float32 [n, dim]; zero vector where no token is known.

        Raises:
          TypeError: a single string, or a non-string element.
        """
        if isinstance(sentences, (str, bytes)):
            raise TypeError("Word2VecMeanEncoder: pass a list of sentences, not a single string.")
        sentences = list(sentences)
        for i, s in enumerate(sentences):
            if not isinstance(s, str):
                raise TypeError(f"Word2VecMeanEncoder: sentence {i} is {type(s).__name__}, not str.")
        out = np.zeros((len(sentences), self.dim), dtype=np.float32)
        kv = self.model.wv
        for row, tokens in enumerate(_tokens(sentences)):
            known = [kv.key_to_index[t] for t in tokens if t in kv.key_to_index]
            if known:
                out[row] = kv.vectors[known].mean(axis=0)
        return out


def word2vec_mean_encoder(data_dir: str | Path | None = None, *, training_sentences: Sequence[str] | None = None,
                          seed: int = 0, **kwargs) -> Word2VecMeanEncoder:
    """The word2vec baseline trained on Flickr8k training captions (see module docstring).

    Args:
      data_dir: data root (``None``: ``$GROUNDED_TEXT_DATA``); ignored when
        ``training_sentences`` is given.
      training_sentences: train on these instead (tests, other corpora).
      seed: gensim seed.
      **kwargs: further ``Word2VecMeanEncoder`` arguments.

    Returns:
      A callable ``list[str]`` (n) → float32 [n, dim].
    """
    if training_sentences is None:
        training_sentences = [c.text for c in read_flickr8k(resolve_data_dir(data_dir)) if c.split == "train"]
    return Word2VecMeanEncoder(training_sentences, seed=seed, **kwargs)
