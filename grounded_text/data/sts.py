"""Readers for semantic textual similarity benchmarks in their original layouts.

* ``STS1x-en-test/`` (SemEval 2012–2016, any year): ``*.input.<subset>.txt`` (two
  tab-separated sentences per line, further columns ignored) and
  ``*.gs.<subset>.txt`` (gold 0..5 per line). Blank gold lines mean "not scored"
  and drop the pair; a gold file without an input file (STS13 SMT, withheld by its
  licence) is skipped with a warning; ``STS.gs.ALL.txt`` (STS12's concatenation of
  the subsets) is not a subset. Files are decoded as UTF-8 with replacement (a leading
  byte-order mark is dropped). A gold score that is not a finite number (text, NaN,
  Inf) is an error naming the file and line.
* ``STSBenchmark/sts-{train,dev,test}.csv``: tab-separated
  ``genre, file, year, id, score, sentence1, sentence2[, extra...]``.
* ``SICK/SICK_{train,trial,test_annotated}.txt``: header row, then
  ``pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings
from pathlib import Path

import numpy as np

YEAR_DIR_PATTERN = re.compile(r"^STS(\d\d)-en-test$")
GOLD_PATTERN = re.compile(r"^(?P<prefix>STS(?:\d{4})?)\.gs\.(?P<subset>.+)\.txt$")
AGGREGATE_SUBSETS = {"ALL"}
SICK_FILES = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


@dataclasses.dataclass(frozen=True)
class SentencePairs:
    """Scored sentence pairs.

    Attributes:
      sentences1, sentences2: lists of ``str`` of equal length n.
      scores: [n] ``float64`` gold similarity (STS 0..5, SICK 1..5).
      name: e.g. ``"STS12/MSRvid"``.
    """

    sentences1: list
    sentences2: list
    scores: np.ndarray
    name: str = ""
    genres: list | None = None

    def __len__(self) -> int:
        return len(self.sentences1)

    def by_genre(self) -> dict[str, "SentencePairs"]:
        """The pairs split by genre (STS-B's ``genre`` column, ``"main-"`` dropped:
        ``captions``, ``news``, ``forum``; Bordes et al. 2019 report STS-B so), in order of
        first appearance; ``{}`` when the set has no genres."""
        if self.genres is None:
            return {}
        out = {}
        for genre in dict.fromkeys(self.genres):
            idx = [i for i, g in enumerate(self.genres) if g == genre]
            short = genre[len("main-"):] if genre.startswith("main-") else genre
            short = {"forums": "forum"}.get(short, short)
            out[short] = SentencePairs([self.sentences1[i] for i in idx], [self.sentences2[i] for i in idx],
                                       self.scores[idx], f"{self.name}/{short}", [genre] * len(idx))
        return out


def _read_lines(path: Path) -> list[str]:
    return path.read_bytes().decode("utf-8-sig", errors="replace").splitlines()


def _score(text: str, path: Path, lineno: int, what: str) -> float:
    """A finite gold score, or a ValueError naming the file and line (NaN or Inf gold
    scores would turn every correlation into NaN without saying where they came from)."""
    try:
        score = float(text.strip())
    except ValueError:
        raise ValueError(f"{path}:{lineno}: {what} {text!r} is not a number.") from None
    if not math.isfinite(score):
        raise ValueError(f"{path}:{lineno}: {what} {text!r} is not a finite number.")
    return score


def sts_year_dirs(sts_dir: str | Path) -> dict[str, Path]:
    """Finds every ``STS1x-en-test`` folder: ``{"STS12": path, ...}`` sorted by year."""
    sts_dir = Path(sts_dir)
    found = {}
    for child in sorted(sts_dir.iterdir()) if sts_dir.is_dir() else []:
        m = YEAR_DIR_PATTERN.match(child.name)
        if m and child.is_dir():
            found[f"STS{m.group(1)}"] = child
    return found


def read_sts_subset(input_path: Path, gold_path: Path, name: str = "") -> SentencePairs:
    """Reads one subset; pairs with a blank gold line are dropped.

    Raises:
      ValueError: line counts differ, an input line has fewer than two columns, or
        a gold value is not a number; the message names the file and line.
    """
    inputs = _read_lines(input_path)
    golds = _read_lines(gold_path)
    if len(inputs) != len(golds):
        raise ValueError(
            f"{input_path} has {len(inputs)} lines but {gold_path} has {len(golds)}."
        )
    s1, s2, scores = [], [], []
    for lineno, (line, gold) in enumerate(zip(inputs, golds), 1):
        if not gold.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 2:
            raise ValueError(f"{input_path}:{lineno}: expected two tab-separated sentences.")
        score = _score(gold, gold_path, lineno, "gold score")
        s1.append(cols[0].strip())
        s2.append(cols[1].strip())
        scores.append(score)
    return SentencePairs(s1, s2, np.asarray(scores, dtype=np.float64), name)


def read_sts_year(year_dir: str | Path) -> dict[str, SentencePairs]:
    """Reads every scored subset of one ``STS1x-en-test`` folder.

    Returns:
      ``{subset: SentencePairs}`` in file-name order. Subsets with a gold file but
      no input file are skipped with a ``UserWarning``.
    """
    year_dir = Path(year_dir)
    year = year_dir.name.split("-")[0]
    subsets = {}
    for gold_path in sorted(year_dir.iterdir()):
        m = GOLD_PATTERN.match(gold_path.name)
        if not m or m.group("subset") in AGGREGATE_SUBSETS:
            continue
        subset = m.group("subset")
        input_path = year_dir / f"{m.group('prefix')}.input.{subset}.txt"
        if not input_path.is_file():
            warnings.warn(
                f"{year}: skipping subset {subset!r}: gold file {gold_path.name} has no "
                f"input file {input_path.name}.",
                stacklevel=2,
            )
            continue
        subsets[subset] = read_sts_subset(input_path, gold_path, f"{year}/{subset}")
    return subsets


def read_sts_benchmark(sts_dir: str | Path, split: str = "test") -> SentencePairs:
    """Reads STS-B ``sts-<split>.csv`` (extra trailing fields ignored).

    Raises:
      FileNotFoundError: no such file. ValueError: a malformed row (names the line).
    """
    path = Path(sts_dir) / "STSBenchmark" / f"sts-{split}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"No STS-B file {str(path)!r}.")
    s1, s2, scores, genres = [], [], [], []
    for lineno, line in enumerate(_read_lines(path), 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 7:
            raise ValueError(f"{path}:{lineno}: expected at least 7 tab-separated fields.")
        scores.append(_score(cols[4], path, lineno, "score"))
        s1.append(cols[5].strip())
        s2.append(cols[6].strip())
        genres.append(cols[0].strip())
    return SentencePairs(s1, s2, np.asarray(scores, dtype=np.float64), f"STSBenchmark/{split}", genres)


def read_sick(sts_dir: str | Path, split: str = "test") -> SentencePairs:
    """Reads SICK relatedness pairs (``split`` in train, trial, test).

    Raises:
      FileNotFoundError: no such file. ValueError: unknown split or malformed row.
    """
    if split not in SICK_FILES:
        raise ValueError(f"SICK split must be one of {sorted(SICK_FILES)}, got {split!r}.")
    path = Path(sts_dir) / "SICK" / SICK_FILES[split]
    if not path.is_file():
        raise FileNotFoundError(f"No SICK file {str(path)!r}.")
    lines = _read_lines(path)
    header = lines[0].split("\t") if lines else []
    try:
        ia, ib, isc = (header.index(c) for c in ("sentence_A", "sentence_B", "relatedness_score"))
    except ValueError:
        raise ValueError(f"{path}: header lacks sentence_A / sentence_B / relatedness_score.") from None
    s1, s2, scores = [], [], []
    for lineno, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) <= max(ia, ib, isc):
            raise ValueError(f"{path}:{lineno}: too few fields.")
        scores.append(_score(cols[isc], path, lineno, "relatedness_score"))
        s1.append(cols[ia].strip())
        s2.append(cols[ib].strip())
    return SentencePairs(s1, s2, np.asarray(scores, dtype=np.float64), f"SICK/{split}")
