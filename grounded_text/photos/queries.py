"""Queries of the photo index: a sentence, a photo, a vector, or a weighted mix of them.

A :class:`Query` is a list of terms, each a sentence, a photo or a vector with a weight
(negative weights push away). Its vector is the standard one: each term's unit vector
(sentences by ``encoder.encode``, photos by ``encoder.encode_images``, vectors as given),
times its weight, summed, and the sum scaled back to unit length::

    q = sum(w_i * u_i) / || sum(w_i * u_i) ||

A query of one term with weight 1 is that term's unit vector, so ranking by it is ranking by
the term alone.

The command line writes a term as ``[WEIGHT:]TEXT`` (:func:`parse_term`): ``"a beach"``,
``"-0.5:people"``, ``"2:a red car"``; a photo term as ``[WEIGHT:]PATH`` after ``--like``;
and one line of ``--interactive`` input as terms separated by ``|``, a photo term written
``like:PATH`` (:func:`parse_line`): ``a beach | -0.5:people | like:sunset.jpg``.

This module imports NumPy only (no TensorFlow): the command checks its queries with it before
the model loads.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Query", "Term", "as_queries", "embed_queries", "kept_rows", "parse_line", "parse_term"]

SENTENCE, PHOTO, VECTOR = "sentence", "photo", "vector"

# A leading weight: a decimal number (sign, point and exponent allowed) then ":".
_WEIGHT = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*:(.*)$", re.S)
LIKE_PREFIX = "like:"


def _is_pil(value) -> bool:
    return type(value).__module__.startswith("PIL.")


def _kind(value) -> str:
    """``SENTENCE``, ``PHOTO`` or ``VECTOR`` for a term's value.

    Raises:
      TypeError: a value that is none of them.
    """
    if isinstance(value, str):
        return SENTENCE
    if isinstance(value, (os.PathLike, bytes, bytearray)) or _is_pil(value):
        return PHOTO
    if isinstance(value, np.ndarray):
        if value.ndim == 1 and np.issubdtype(value.dtype, np.floating):
            return VECTOR
        if value.dtype == np.uint8 and value.ndim in (2, 3):
            return PHOTO
        raise TypeError(f"search: an array query must be a float vector [N] or a uint8 photo [H, W, 3], got "
                        f"{value.dtype} {list(value.shape)}.")
    raise TypeError(f"search: a query term must be a sentence (str), a photo (a pathlib.Path, bytes, a PIL image, a "
                    f"uint8 array [H, W, 3]) or a float vector [N], got {type(value).__name__}.")


@dataclasses.dataclass(frozen=True)
class Term:
    """One term of a :class:`Query`.

    Attributes:
      value: a sentence (``str``), a photo (``pathlib.Path`` or other ``os.PathLike``, encoded
        bytes, a PIL image, a uint8 array [H, W, 3]) or a vector (float array [N]).
      weight: its weight (``float``, finite; negative pushes results away from it).
      kind: ``"sentence"``, ``"photo"`` or ``"vector"`` (from ``value``).

    Raises:
      TypeError: a value of none of these kinds. ValueError: a weight that is not finite, or
        an empty sentence.

    Example:
      >>> Term("people", -0.5).kind, Term(Path("sunset.jpg")).kind
      ('sentence', 'photo')
    """

    value: Any
    weight: float = 1.0
    kind: str = dataclasses.field(default="", init=False)

    def __post_init__(self):
        object.__setattr__(self, "kind", _kind(self.value))
        object.__setattr__(self, "weight", float(self.weight))
        if not math.isfinite(self.weight):
            raise ValueError(f"search: a term's weight must be a finite number, got {self.weight}.")
        if self.kind == SENTENCE and not self.value.strip():
            raise ValueError("search: the query is empty; give a sentence such as 'a dog runs on the grass'.")

    def describe(self) -> str:
        """The term in one short line: ``people``, ``-0.5:people``, ``like:sunset.jpg``."""
        if self.kind == SENTENCE:
            text = self.value.strip()
        elif self.kind == PHOTO and isinstance(self.value, os.PathLike):
            text = LIKE_PREFIX + os.fspath(self.value)
        else:
            text = f"<{self.kind}>"
        return text if self.weight == 1.0 else f"{self.weight:g}:{text}"


@dataclasses.dataclass(frozen=True)
class Query:
    """A query of several weighted terms; its vector is the renormalised weighted sum of the
    terms' unit vectors (see the module's docstring).

    Args:
      terms: a list of :class:`Term`, of ``(value, weight)`` pairs, or of values (weight 1).

    Raises:
      ValueError: no terms, or a term's weight that is not finite. TypeError: a term of no
        known kind.

    Example:
      >>> q = Query([("a beach", 1.0), ("people", -0.5), Path("sunset.jpg")])
      >>> [t.kind for t in q.terms], q.describe()
      (['sentence', 'sentence', 'photo'], 'a beach | -0.5:people | like:sunset.jpg')
    """

    terms: tuple

    def __init__(self, terms: Sequence):
        out = []
        for item in terms:
            if isinstance(item, Term):
                out.append(item)
            elif _is_pair(item):
                out.append(Term(item[0], item[1]))
            else:
                out.append(Term(item))
        if not out:
            raise ValueError("search: a query needs at least one term.")
        object.__setattr__(self, "terms", tuple(out))

    def describe(self) -> str:
        """The query in one line, in the ``--interactive`` syntax (terms joined by `` | ``)."""
        return " | ".join(t.describe() for t in self.terms)


def _is_pair(item) -> bool:
    """A ``(value, weight)`` pair: a 2-tuple whose second item is a real number (not a bool)."""
    return (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], (int, float, np.floating, np.integer))
            and not isinstance(item[1], bool))


def as_queries(query) -> tuple[list[Query], bool]:
    """What :meth:`ImageIndex.search` was given, as a list of queries.

    Args:
      query: one query (a sentence ``str``, a photo, a float vector [N], a :class:`Query`, or a
        list of ``(value, weight)`` pairs: one mixed query), or several (a list of such
        queries, a float array [Q, N] of vectors, a uint8 array [Q, H, W, 3] of photos).

    Returns:
      (the queries, whether ``query`` was one query).

    Raises:
      TypeError: a query of no known kind. ValueError: an empty list, an empty sentence, no
        terms, a weight that is not finite.

    Example:
      >>> qs, single = as_queries([("a beach", 1.0), ("people", -0.5)])
      >>> len(qs), single, len(qs[0].terms)
      (1, True, 2)
      >>> len(as_queries(["a dog", "a cat"])[0])
      2
    """
    if isinstance(query, Query):
        return [query], True
    if isinstance(query, np.ndarray) and (query.ndim == 2 and np.issubdtype(query.dtype, np.floating)
                                          or query.ndim == 4 and query.dtype == np.uint8):
        items, single = list(query), False
    elif isinstance(query, list) and query and all(_is_pair(item) for item in query):
        return [Query(query)], True
    elif isinstance(query, (list, tuple)):
        items, single = list(query), False
    else:
        items, single = [query], True
    if not items:
        raise ValueError("search: the list of queries is empty.")
    return [q if isinstance(q, Query) else Query([q]) for q in items], single


def _unit_rows(vectors: np.ndarray, what: str) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if not np.all(np.isfinite(vectors)) or np.any(norms == 0):
        raise ValueError(f"search: a {what} query term has no direction (a zero or non-finite vector).")
    return vectors / norms


def embed_queries(encoder, queries: Sequence[Query], batch_size: int = 32) -> np.ndarray:
    """The unit vectors of queries: each term's unit vector times its weight, summed, and
    the sum scaled to unit length.

    Args:
      encoder: a ``TextEncoder`` (``encode`` for sentences, ``encode_images`` for photos).
      queries: :class:`Query` values.
      batch_size: photos per ``encode_images`` call.

    Returns:
      float32 [len(queries), N], unit rows.

    Raises:
      ValueError: terms of different widths (a vector of the wrong width, a model whose text
        and image towers differ), a zero vector, or terms that cancel out (a sum of length 0).
      NoImageTowerError, ImageReadError (ValueErrors): a photo term with a model without image
        tower, or a photo that cannot be read.

    Example:
      >>> import grounded_text as gt
      >>> enc = gt.load("vete_bow_flickr8k")
      >>> q = embed_queries(enc, [Query(["a dog"]), Query([("a beach", 1.0), ("people", -0.5)])])
      >>> q.shape, q.dtype, np.round(np.linalg.norm(q, axis=1), 4).tolist()
      ((2, 128), dtype('float32'), [1.0, 1.0])
    """
    terms = [t for q in queries for t in q.terms]
    vectors: list[np.ndarray | None] = [None] * len(terms)
    for kind in (SENTENCE, PHOTO, VECTOR):
        at = [i for i, t in enumerate(terms) if t.kind == kind]
        if not at:
            continue
        values = [terms[i].value for i in at]
        if kind == SENTENCE:
            out = encoder.encode(values, normalize_embeddings=True)
        elif kind == PHOTO:
            out = encoder.encode_images(values, batch_size=batch_size, show_progress_bar=False,
                                        normalize_embeddings=True)
        else:
            if len({len(v) for v in values}) > 1:
                raise ValueError(f"search: vector terms of different widths {sorted({len(v) for v in values})}.")
            out = values
        for i, row in zip(at, _unit_rows(np.asarray(out), kind)):
            vectors[i] = row
    widths = sorted({len(v) for v in vectors})
    if len(widths) > 1:
        raise ValueError(f"search: the query's terms are vectors of different widths {widths} (sentences, photos and "
                         "vectors must share the model's space).")
    rows, at = [], 0
    for q in queries:
        total = np.zeros(widths[0], np.float64)
        for t in q.terms:
            total += t.weight * vectors[at].astype(np.float64)
            at += 1
        norm = float(np.linalg.norm(total))
        if norm < 1e-6:
            raise ValueError(f"search: the terms of the query {q.describe()!r} cancel out (their weighted sum is 0).")
        rows.append(total / norm)
    return np.asarray(rows, dtype=np.float32)


def kept_rows(rels: Sequence[str], exclude: Sequence[str] = ()) -> np.ndarray:
    """The rows whose relative path matches none of the ``exclude`` patterns.

    Args:
      rels: relative paths with ``/`` separators.
      exclude: glob patterns (``fnmatch``, case-sensitive; ``*`` also matches ``/``), each
        matched against the whole relative path.

    Returns:
      int64 [kept] row numbers, ascending.

    Example:
      >>> kept_rows(["a.jpg", "drafts/b.jpg", "c.png"], ["drafts/*", "*.png"]).tolist()
      [0]
    """
    if isinstance(exclude, str):
        exclude = [exclude]
    if not exclude:
        return np.arange(len(rels), dtype=np.int64)
    return np.array([i for i, rel in enumerate(rels) if not any(fnmatch.fnmatchcase(rel, p) for p in exclude)],
                    dtype=np.int64)


def split_weight(text: str) -> tuple[float, str]:
    """``"-0.5:people"`` → ``(-0.5, "people")``; ``"people"`` → ``(1.0, "people")``.

    A leading number followed by ``:`` is the weight; a sentence that itself starts so (``3:30
    in the afternoon``) is written with a weight first (``1:3:30 in the afternoon``).

    Example:
      >>> split_weight("-0.5:people"), split_weight("2: a red car"), split_weight("a beach")
      ((-0.5, 'people'), (2.0, 'a red car'), (1.0, 'a beach'))
    """
    m = _WEIGHT.match(text)
    if m and m.group(2).strip():
        return float(m.group(1)), m.group(2).strip()
    return 1.0, text.strip()


def parse_term(text: str, photo: bool = False) -> Term:
    """One command-line term: ``[WEIGHT:]SENTENCE`` (``--query``), or ``[WEIGHT:]PATH`` for a
    photo (``--like``, ``photo=True``; a path that exists as written is taken whole).

    Raises:
      ValueError: an empty sentence; a photo that is not a file (one line, for ``error:``).

    Example:
      >>> parse_term("-0.5:people")
      Term(value='people', weight=-0.5, kind='sentence')
    """
    if photo:
        weight, path = (1.0, text) if os.path.isfile(text) else split_weight(text)
        path = os.path.expanduser(path)
        if not os.path.isfile(path):
            raise ValueError(f"--like {text!r}: no such photo file.")
        return Term(Path(path), weight)
    weight, sentence = split_weight(text)
    if not sentence:
        raise ValueError("the query is empty; give a sentence, e.g. \"a dog runs on the grass\".")
    return Term(sentence, weight)


def parse_line(line: str) -> Query:
    """One line of ``--interactive`` input: terms separated by ``|``, each ``[WEIGHT:]SENTENCE``
    or ``[WEIGHT:]like:PATH``.

    Raises:
      ValueError: an empty term or line, a photo that is not a file (one line, for ``error:``).

    Example:
      >>> parse_line("a beach | -0.5:people").describe()
      'a beach | -0.5:people'
    """
    terms = []
    for part in line.split("|"):
        weight, text = split_weight(part)
        if text.startswith(LIKE_PREFIX):
            path = os.path.expanduser(text[len(LIKE_PREFIX):].strip())
            if not os.path.isfile(path):
                raise ValueError(f"like:{path!r}: no such photo file.")
            terms.append(Term(Path(path), weight))
        elif not text:
            raise ValueError(f"an empty term in {line.strip()!r}; write terms as 'a beach | -0.5:people | "
                             "like:sunset.jpg'.")
        else:
            terms.append(Term(text, weight))
    return Query(terms)
