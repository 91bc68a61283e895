"""Readers for semantic textual similarity benchmarks in their original layouts.

* ``STS1x-en-test/`` (SemEval 2012–2016, any year): ``*.input.<subset>.txt`` (two
  tab-separated sentences per line, further columns ignored) and
  ``*.gs.<subset>.txt`` (gold 0..5 per line). Blank gold lines mean "not scored"
  and drop the pair; a gold file without an input file (STS13 SMT, withheld by its
  licence) is skipped with a warning; ``STS.gs.ALL.txt`` (STS12's concatenation of
  the subsets) is not a subset. Files are decoded as UTF-8 with replacement (a leading
  byte-order mark is dropped). Lines end at ``\n`` only (``\r\n`` too), never at the
  other breaks of ``str.splitlines`` (U+2028, U+0085, ``\f``, ...), which can occur inside a
  sentence. Input and gold must have one line per pair (trailing blank lines aside), else
  an error names both files and their line counts. A gold score that is not a finite
  number (text, NaN, Inf) or lies outside 0..5 is an error naming the file and line. A
  subset without a scored pair is skipped with a warning (and recorded by the
  evaluation report); a path that is a folder is an error naming it, and so is a file in
  UTF-16 or UTF-32 (a byte-order mark, or NUL bytes), named as an encoding problem.
* ``STSBenchmark/sts-{train,dev,test}.csv``: tab-separated
  ``genre, file, year, id, score, sentence1, sentence2[, extra...]``; scores 0..5.
* ``SICK/SICK_{train,trial,test_annotated}.txt``: header row, then
  ``pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment``;
  relatedness 1..5. An STS-B or SICK file without pairs (header only) is an error naming it.
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings
from pathlib import Path

import numpy as np

from grounded_text.utils.quiet import GroundedTextWarning

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


STS_SCALE = (0.0, 5.0)
SICK_SCALE = (1.0, 5.0)


# Byte-order marks of the encodings that are not UTF-8 (UTF-32 first: its LE mark starts with UTF-16's).
_OTHER_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
               (b"\xfe\xff", "UTF-16"))


def _read_text(path: Path) -> str:
    """The file decoded as UTF-8 with replacement (a leading BOM dropped).

    Raises:
      ValueError: ``path`` is not a regular file (a folder, say) or cannot be read; the
        message names it (an ``OSError`` here would end the CLI in a traceback). The file
        is UTF-16 or UTF-32 (a byte-order mark) or holds NUL bytes (UTF-16 without one):
        decoded as UTF-8 its lines would be miscounted, and the error would name a line
        count instead of the encoding.
    """
    if not path.is_file():
        what = "a folder" if path.is_dir() else "missing or not a regular file"
        raise ValueError(f"{path}: expected a text file, but it is {what}.")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"{path}: cannot be read ({e.strerror}).") from None
    encoding = next((name for bom, name in _OTHER_BOMS if data.startswith(bom)), None)
    nul = data.find(b"\x00")
    if encoding is not None or nul >= 0:
        found = (f"is {encoding} text (it starts with a {encoding} byte-order mark)" if encoding is not None
                 else f"holds NUL bytes (the first at byte {nul}; UTF-16 text without a byte-order mark?)")
        raise ValueError(f"{path}: the file {found}; these files are UTF-8 text: convert it, e.g. "
                         f"`iconv -f {encoding or 'UTF-16'} -t UTF-8`.")
    return data.decode("utf-8-sig", errors="replace")


def _split_lines(text: str) -> list[str]:
    """Lines split at ``\n`` only, one trailing ``\r`` stripped from each; the empty
    string after a final ``\n`` is not a line. ``str.splitlines`` is not used: it also
    breaks at U+2028/U+2029, U+0085, ``\v``, ``\f`` and ``\x1c``-``\x1e``, which may occur
    inside a sentence and would shift every later pair against its gold score."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _read_lines(path: Path) -> list[str]:
    return _split_lines(_read_text(path))


def _file_line_count(path: Path) -> int:
    """Lines of the file as ``wc -l`` counts them, plus an unterminated last line."""
    return len(_read_lines(path))


def _score(text: str, path: Path, lineno: int, what: str, scale: tuple[float, float] = STS_SCALE) -> float:
    """A finite gold score inside the dataset's scale, or a ValueError naming the file and
    line (NaN, Inf or 1e300 gold scores would skew or void every correlation without saying
    where they came from).

    Args:
      scale: ``(low, high)``, inclusive: :data:`STS_SCALE` (0..5; SemEval STS and STS-B) or
        :data:`SICK_SCALE` (1..5; SICK relatedness, Marelli et al. 2014).
    """
    try:
        score = float(text.strip())
    except ValueError:
        raise ValueError(f"{path}:{lineno}: {what} {text!r} is not a number.") from None
    if not math.isfinite(score):
        raise ValueError(f"{path}:{lineno}: {what} {text!r} is not a finite number.")
    low, high = scale
    if not low <= score <= high:
        raise ValueError(f"{path}:{lineno}: {what} {text.strip()!r} is outside the scale {low:g}..{high:g}.")
    return score


def _trim_trailing_blank(lines: list[str], keep: int) -> list[str]:
    """``lines`` without trailing blank lines, but never shorter than ``keep``."""
    end = len(lines)
    while end > keep and not lines[end - 1].strip():
        end -= 1
    return lines[:end]


def _last_non_blank(lines: list[str]) -> int:
    return max((i + 1 for i, line in enumerate(lines) if line.strip()), default=0)


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

    Lines are split at ``\n`` only (``\r\n`` works); see :func:`_split_lines`. Trailing
    blank lines are treated the same in both files: both are cut back to the last line
    that is non-blank in either file, so a stray blank line at the end of one file is no
    pair, while blank gold lines facing sentence pairs still mean "not scored" (STS 2016
    ends so).

    Returns:
      :class:`SentencePairs` of the scored pairs, scores float64 in 0..5.

    Raises:
      ValueError: a file is not a readable regular file; the line counts differ (the
        message names both files and their line counts); an input line facing a score
        has fewer than two columns; or a gold value is not a number in 0..5. File and
        line are named.
    """
    inputs = _read_lines(input_path)
    golds = _read_lines(gold_path)
    keep = max(_last_non_blank(inputs), _last_non_blank(golds))
    inputs, golds = _trim_trailing_blank(inputs, keep), _trim_trailing_blank(golds, keep)
    if len(inputs) != len(golds):
        raise ValueError(
            f"{input_path} has {_file_line_count(input_path)} lines but {gold_path} has "
            f"{_file_line_count(gold_path)} (after dropping trailing blank lines: {len(inputs)} and "
            f"{len(golds)}); every input line needs one gold line (blank: not scored)."
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


def read_sts_year(year_dir: str | Path, skipped: dict | None = None) -> dict[str, SentencePairs]:
    """Reads every scored subset of one ``STS1x-en-test`` folder.

    Args:
      year_dir: the ``STS1x-en-test`` folder.
      skipped: optional dict that receives ``{subset: reason}`` for every subset skipped
        because it has no scored pair (empty files, or every gold line blank); the
        evaluation report records it (``"skipped"``) beside the subsets it scored.

    Returns:
      ``{subset: SentencePairs}`` in file-name order. Subsets with a gold file but
      no input file, and subsets without a scored pair, are skipped with a ``UserWarning``
      (one empty subset in a folder of many should not abort the whole evaluation).

    Raises:
      ValueError: see :func:`read_sts_subset` (also for a gold or input path that is a folder).
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
        if not input_path.exists():
            warnings.warn(
                f"{year}: skipping subset {subset!r}: gold file {gold_path.name} has no "
                f"input file {input_path.name}.",
                GroundedTextWarning, stacklevel=2,
            )
            continue
        pairs = read_sts_subset(input_path, gold_path, f"{year}/{subset}")
        if not len(pairs):
            reason = f"no scored sentence pairs in {input_path} / {gold_path}"
            warnings.warn(f"{year}: skipping subset {subset!r}: {reason}.", GroundedTextWarning, stacklevel=2)
            if skipped is not None:
                skipped[subset] = reason
            continue
        subsets[subset] = pairs
    return subsets


def read_sts_benchmark(sts_dir: str | Path, split: str = "test") -> SentencePairs:
    """Reads STS-B ``sts-<split>.csv`` (extra trailing fields ignored).

    Raises:
      FileNotFoundError: no such file. ValueError: a malformed row or a score outside
        0..5 (names the line), or a file without any pair (names the file).
    """
    path = Path(sts_dir) / "STSBenchmark" / f"sts-{split}.csv"
    if not path.exists():
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
    if not s1:
        raise ValueError(f"{path}: no sentence pairs in the file.")
    return SentencePairs(s1, s2, np.asarray(scores, dtype=np.float64), f"STSBenchmark/{split}", genres)


def sick_path(sts_dir: str | Path, split: str) -> Path:
    """The file of SICK split ``split`` (train, trial, test) under ``sts_dir``.

    Raises:
      ValueError: unknown split.
    """
    if split not in SICK_FILES:
        raise ValueError(f"SICK split must be one of {sorted(SICK_FILES)}, got {split!r}.")
    return Path(sts_dir) / "SICK" / SICK_FILES[split]


def read_sick(sts_dir: str | Path, split: str = "test") -> SentencePairs:
    """Reads SICK relatedness pairs (``split`` in train, trial, test).

    Raises:
      FileNotFoundError: no such file. ValueError: unknown split, a malformed row or a
        relatedness score outside 1..5 (names the line), or a header-only file (names it).
    """
    path = sick_path(sts_dir, split)
    if not path.exists():
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
        scores.append(_score(cols[isc], path, lineno, "relatedness_score", SICK_SCALE))
        s1.append(cols[ia].strip())
        s2.append(cols[ib].strip())
    if not s1:
        raise ValueError(f"{path}: no sentence pairs after the header.")
    return SentencePairs(s1, s2, np.asarray(scores, dtype=np.float64), f"SICK/{split}")
