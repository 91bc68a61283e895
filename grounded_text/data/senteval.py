"""Readers for the SentEval transfer tasks, in the layout SentEval's own loaders read.

SentEval: Conneau & Kiela, "SentEval: An Evaluation Toolkit for Universal Sentence
Representations", LREC 2018 (``senteval/{binary,sst,trec,mrpc,sick,snli}.py``). Every
reader keeps exactly the examples SentEval keeps, with SentEval's label ids and
class order, and normalises whitespace the way SentEval does before its batcher
(``line.split()`` then ``" ".join``). Layout under ``SENTEVAL_DIR`` (the
``senteval/`` folder of the data root):

==========  =========================================  ==========================  =================
task        files                                      encoding                    kept (SentEval)
==========  =========================================  ==========================  =================
MR          ``MR/rt-polarity.{pos,neg}``               latin-1 (as SentEval)       10,662
CR          ``CR/custrev.{pos,neg}``                   latin-1                     3,775 (4 blank)
SUBJ        ``SUBJ/subj.{objective,subjective}``       latin-1                     10,000
MPQA        ``MPQA/mpqa.{pos,neg}``                    latin-1                     10,606 (3 blank)
SST-2       ``SST/binary/sentiment-{train,dev,test}``  UTF-8, ``sentence\\tlabel``  67,349/872/1,821
TREC        ``TREC/{train_5500,TREC_10}.label``        latin-1 (one bad byte)      5,452/500
MRPC        ``MRPC/msr_paraphrase_{train,test}.txt``   UTF-8 with BOM, header row  4,076/1,725
SNLI        ``SNLI/{s1,s2,labels}.{train,dev,test}``   UTF-8                       -/9,842/9,824
SICK-E      ``sts/SICK/SICK_{train,trial,test_annotated}.txt`` (entailment_judgment)  4,500/500/4,927
==========  =========================================  ==========================  =================

Blank lines of the four binary tasks are kept as empty sentences, as SentEval keeps
them (its counts include them). UTF-8 files are decoded with replacement (never a
crash on a bad byte). The SNLI training set is not part of this data: ``read_snli``
returns only the splits whose three files exist.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from grounded_text.data.sts import SICK_FILES, _split_lines


@dataclasses.dataclass(frozen=True)
class LabelledSentences:
    """Labelled sentences (or sentence pairs) of one split of one task.

    Attributes:
      sentences: list of n ``str`` (the first sentence of a pair task).
      labels: int64 [n], values in ``0 .. len(classes) - 1``.
      classes: class names, index = label id (SentEval's ids).
      name: e.g. ``"MR"`` or ``"MRPC/train"``.
      sentences2: list of n ``str`` for pair tasks (MRPC, SICK-E, SNLI), else ``None``.
    """

    sentences: list
    labels: np.ndarray
    classes: tuple
    name: str = ""
    sentences2: list | None = None

    def __post_init__(self):
        if len(self.labels) != len(self.sentences) or (
            self.sentences2 is not None and len(self.sentences2) != len(self.sentences)
        ):
            raise ValueError(f"{self.name}: sentences and labels differ in length.")

    @property
    def is_pair(self) -> bool:
        return self.sentences2 is not None

    def __len__(self) -> int:
        return len(self.sentences)

    def take(self, indices) -> "LabelledSentences":
        """The examples at ``indices`` (int array), in that order."""
        idx = np.asarray(indices, dtype=np.int64)
        pick = lambda seq: [seq[i] for i in idx]  # noqa: E731
        return LabelledSentences(
            pick(self.sentences), self.labels[idx], self.classes, self.name,
            None if self.sentences2 is None else pick(self.sentences2),
        )


def _file(path: Path) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"SentEval file {str(path)!r} not found.")
    return path


def _lines(path: Path, encoding: str) -> list[str]:
    """Lines of a file decoded as SentEval does, split at ``\n`` only (one trailing ``\r``
    dropped), as SentEval's ``for line in f`` reads them: ``str.splitlines`` would also break
    inside a sentence at U+2028, U+0085 (latin-1 byte 0x85), ``\f`` and the like, and shift
    SNLI's parallel s1 / s2 / labels files against each other."""
    data = _file(path).read_bytes()
    if encoding == "latin-1":
        return _split_lines(data.decode("latin-1"))
    return _split_lines(data.decode(encoding, errors="replace"))


def _norm(text: str) -> str:
    return " ".join(text.split())


def _binary(root: Path, task: str, pos_file: str, neg_file: str) -> LabelledSentences:
    pos = [_norm(s) for s in _lines(root / task / pos_file, "latin-1")]
    neg = [_norm(s) for s in _lines(root / task / neg_file, "latin-1")]
    labels = np.array([1] * len(pos) + [0] * len(neg), dtype=np.int64)
    return LabelledSentences(pos + neg, labels, (neg_file.split(".")[-1], pos_file.split(".")[-1]), task)


def read_mr(senteval_dir: str | Path) -> LabelledSentences:
    """MR movie-review polarity (Pang & Lee 2005): 5,331 pos (label 1) + 5,331 neg (0).

    Raises:
      FileNotFoundError: a file is missing (the message names it).
    """
    return _binary(Path(senteval_dir), "MR", "rt-polarity.pos", "rt-polarity.neg")


def read_cr(senteval_dir: str | Path) -> LabelledSentences:
    """CR product reviews (Hu & Liu 2004): 2,407 pos (1) + 1,368 neg (0), blanks kept."""
    return _binary(Path(senteval_dir), "CR", "custrev.pos", "custrev.neg")


def read_subj(senteval_dir: str | Path) -> LabelledSentences:
    """SUBJ (Pang & Lee 2004): 5,000 objective (label 1, as SentEval) + 5,000 subjective (0)."""
    return _binary(Path(senteval_dir), "SUBJ", "subj.objective", "subj.subjective")


def read_mpqa(senteval_dir: str | Path) -> LabelledSentences:
    """MPQA opinion polarity (Wiebe et al. 2005): 3,312 pos (1) + 7,294 neg (0) phrases."""
    return _binary(Path(senteval_dir), "MPQA", "mpqa.pos", "mpqa.neg")


SST2_SPLITS = ("train", "dev", "test")


def read_sst2(senteval_dir: str | Path) -> dict[str, LabelledSentences]:
    """SST-2 binary (Socher et al. 2013), SentEval's phrase-level training set.

    Returns:
      ``{"train": 67,349, "dev": 872, "test": 1,821}`` examples; labels 0 = negative, 1 = positive.

    Raises:
      FileNotFoundError: a file is missing. ValueError: a line is not ``sentence<TAB>0|1``.
    """
    out = {}
    for split in SST2_SPLITS:
        path = Path(senteval_dir) / "SST" / "binary" / f"sentiment-{split}"
        sents, labels = [], []
        for lineno, line in enumerate(_lines(path, "utf-8"), 1):
            if not line.strip():
                continue
            cols = line.strip().split("\t")
            if len(cols) != 2 or cols[1] not in ("0", "1"):
                raise ValueError(f"{path}:{lineno}: expected 'sentence<TAB>0|1'.")
            sents.append(_norm(cols[0]))
            labels.append(int(cols[1]))
        out[split] = LabelledSentences(sents, np.asarray(labels, dtype=np.int64), ("negative", "positive"),
                                       f"SST2/{split}")
    return out


TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
TREC_FILES = {"train": "train_5500.label", "test": "TREC_10.label"}


def read_trec(senteval_dir: str | Path) -> dict[str, LabelledSentences]:
    """TREC question types (Li & Roth 2002), 6 coarse classes (fine label dropped).

    Lines ``COARSE:fine question ...``, read as latin-1 (``train_5500.label`` has one
    byte that is not valid UTF-8; SentEval reads it so).

    Returns:
      ``{"train": 5,452, "test": 500}``; label ids follow ``TREC_CLASSES``.

    Raises:
      FileNotFoundError: a file is missing. ValueError: unknown coarse class or malformed line.
    """
    out = {}
    for split, fname in TREC_FILES.items():
        path = Path(senteval_dir) / "TREC" / fname
        sents, labels = [], []
        for lineno, line in enumerate(_lines(path, "latin-1"), 1):
            if not line.strip():
                continue
            target, sep, rest = line.strip().partition(":")
            parts = rest.split(" ", 1)
            if not sep or target not in TREC_CLASSES or len(parts) != 2:
                raise ValueError(f"{path}:{lineno}: expected 'COARSE:fine question' with COARSE in {TREC_CLASSES}.")
            sents.append(_norm(parts[1]))
            labels.append(TREC_CLASSES.index(target))
        out[split] = LabelledSentences(sents, np.asarray(labels, dtype=np.int64), TREC_CLASSES, f"TREC/{split}")
    return out


MRPC_FILES = {"train": "msr_paraphrase_train.txt", "test": "msr_paraphrase_test.txt"}


def read_mrpc(senteval_dir: str | Path) -> dict[str, LabelledSentences]:
    """MRPC paraphrase pairs (Dolan et al. 2004): label 1 = paraphrase.

    Columns ``Quality, #1 ID, #2 ID, #1 String, #2 String``; the header row (which
    starts with a UTF-8 BOM) is skipped.

    Returns:
      ``{"train": 4,076, "test": 1,725}`` pair examples.

    Raises:
      FileNotFoundError: a file is missing. ValueError: a malformed row.
    """
    out = {}
    for split, fname in MRPC_FILES.items():
        path = Path(senteval_dir) / "MRPC" / fname
        lines = _lines(path, "utf-8-sig")
        if lines and lines[0].split("\t")[0].strip() not in ("0", "1"):
            lines = lines[1:]
            start = 2
        else:
            start = 1
        s1, s2, labels = [], [], []
        for lineno, line in enumerate(lines, start):
            if not line.strip():
                continue
            cols = line.rstrip("\r\n").split("\t")
            if len(cols) < 5 or cols[0].strip() not in ("0", "1"):
                raise ValueError(f"{path}:{lineno}: expected 'Quality<TAB>id<TAB>id<TAB>s1<TAB>s2', Quality 0|1.")
            labels.append(int(cols[0]))
            s1.append(_norm(cols[3]))
            s2.append(_norm(cols[4]))
        out[split] = LabelledSentences(s1, np.asarray(labels, dtype=np.int64), ("not paraphrase", "paraphrase"),
                                       f"MRPC/{split}", s2)
    return out


SNLI_CLASSES = ("entailment", "neutral", "contradiction")


def read_snli(senteval_dir: str | Path) -> dict[str, LabelledSentences]:
    """SNLI (Bowman et al. 2015) pairs from ``SNLI/{s1,s2,labels}.<split>``.

    Returns:
      ``{split: pairs}`` for each of ``train``, ``dev``, ``test`` whose three files
      exist (here: dev 9,842 and test 9,824; the training set is absent). Label ids
      follow ``SNLI_CLASSES`` (SentEval's order).

    Raises:
      FileNotFoundError: the ``SNLI`` folder is missing. ValueError: files of one split
      differ in length, or an unknown label.
    """
    root = Path(senteval_dir) / "SNLI"
    if not root.is_dir():
        raise FileNotFoundError(f"SNLI folder {str(root)!r} not found.")
    out = {}
    for split in ("train", "dev", "test"):
        paths = [root / f"{k}.{split}" for k in ("s1", "s2", "labels")]
        if not all(p.is_file() for p in paths):
            continue
        a, b, lab = (_lines(p, "utf-8") for p in paths)
        if not len(a) == len(b) == len(lab):
            raise ValueError(f"SNLI {split}: s1/s2/labels have {len(a)}/{len(b)}/{len(lab)} lines.")
        labels = []
        for lineno, name in enumerate(lab, 1):
            if name.strip() not in SNLI_CLASSES:
                raise ValueError(f"{paths[2]}:{lineno}: label {name!r} not in {SNLI_CLASSES}.")
            labels.append(SNLI_CLASSES.index(name.strip()))
        out[split] = LabelledSentences([_norm(s) for s in a], np.asarray(labels, dtype=np.int64), SNLI_CLASSES,
                                       f"SNLI/{split}", [_norm(s) for s in b])
    return out


SICK_E_CLASSES = ("CONTRADICTION", "NEUTRAL", "ENTAILMENT")
SICK_E_SPLITS = {"train": "train", "dev": "trial", "test": "test"}


def read_sick_e(sts_dir: str | Path) -> dict[str, LabelledSentences]:
    """SICK entailment (Marelli et al. 2014) from ``sts_dir/SICK/`` (entailment_judgment).

    SentEval's SICK-E uses SICK train / trial / test as train / dev / test.

    Returns:
      ``{"train": 4,500, "dev": 500, "test": 4,927}``; label ids follow
      ``SICK_E_CLASSES`` (SentEval's order).

    Raises:
      FileNotFoundError: a file is missing. ValueError: header lacks a column, or an
      unknown judgment.
    """
    out = {}
    for split, sick_split in SICK_E_SPLITS.items():
        path = _file(Path(sts_dir) / "SICK" / SICK_FILES[sick_split])
        lines = _lines(path, "utf-8")
        header = lines[0].split("\t") if lines else []
        try:
            ia, ib, ie = (header.index(c) for c in ("sentence_A", "sentence_B", "entailment_judgment"))
        except ValueError:
            raise ValueError(f"{path}: header lacks sentence_A / sentence_B / entailment_judgment.") from None
        s1, s2, labels = [], [], []
        for lineno, line in enumerate(lines[1:], 2):
            if not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) <= max(ia, ib, ie) or cols[ie].strip() not in SICK_E_CLASSES:
                raise ValueError(f"{path}:{lineno}: too few fields or judgment not in {SICK_E_CLASSES}.")
            s1.append(_norm(cols[ia]))
            s2.append(_norm(cols[ib]))
            labels.append(SICK_E_CLASSES.index(cols[ie].strip()))
        out[split] = LabelledSentences(s1, np.asarray(labels, dtype=np.int64), SICK_E_CLASSES, f"SICK-E/{split}", s2)
    return out
