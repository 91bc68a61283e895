"""Contamination: evaluation sentences that occur verbatim among training captions.

SICK was built from Flickr8k and MSRvid captions, and STS-B's "images" pairs come
from Flickr-style captions, so a model trained on Flickr8k captions has *seen*
some evaluation sentences. This module counts them so that every score is printed
beside its overlap.

Normalisation (``normalize_sentence``): Unicode lowercasing, every character that
is neither a word character nor whitespace (regex ``[^\\w\\s]``) replaced by a
space, whitespace runs collapsed, ends stripped. Stripping punctuation is needed
because the Flickr8k release is tokenised ("a dog 's ball ." ) and SICK is not
("A dog's ball"): on the real data, SICK test's 9,854 sentence slots (2 × 4,927
pairs) contain **334** occurrences (118 distinct sentences) of Flickr8k captions
(all 40,460 captions of the release) under this normalisation — the figure in the
data README — but only 11 with lowercasing and whitespace normalisation alone.
Against the Flickr8k *training split* only (what our models train on) the count
is 243 (87 distinct).

Counts are over sentence occurrences (a pair contributes two), with the number
of distinct contaminated sentences beside them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_PUNCT = re.compile(r"[^\w\s]", flags=re.UNICODE)


def normalize_sentence(sentence: str, strip_punctuation: bool = True) -> str:
    """Lowercase, (optionally) punctuation → space, collapse whitespace (see module docstring)."""
    s = sentence.lower()
    if strip_punctuation:
        s = _PUNCT.sub(" ", s)
    return " ".join(s.split())


class ContaminationIndex:
    """A set of normalised training sentences to check evaluation sentences against.

    Args:
      training_sentences: the training captions (raw strings).
      name: what they are, for reports (e.g. ``"flickr8k/train captions"``).
      strip_punctuation: see ``normalize_sentence``.
    """

    def __init__(self, training_sentences: Iterable[str], name: str = "training captions",
                 strip_punctuation: bool = True):
        self.strip_punctuation = strip_punctuation
        self.name = name
        self.sentences = {normalize_sentence(s, strip_punctuation) for s in training_sentences}
        self.sentences.discard("")

    def count(self, sentences: Sequence[str]) -> dict:
        """Overlap of ``sentences`` (occurrences, in order) with the training set.

        Returns:
          ``{"n_sentences": occurrences checked, "n_contaminated": occurrences
          found, "fraction": n_contaminated / n_sentences, "n_distinct_contaminated":
          distinct normalised sentences found, "against": self.name}``.
          Empty sentences never count as contaminated.
        """
        normed = [normalize_sentence(s, self.strip_punctuation) for s in sentences]
        hits = [s for s in normed if s and s in self.sentences]
        return {
            "n_sentences": len(normed),
            "n_contaminated": len(hits),
            "fraction": (len(hits) / len(normed)) if normed else 0.0,
            "n_distinct_contaminated": len(set(hits)),
            "against": self.name,
        }

    def count_pairs(self, sentences1: Sequence[str], sentences2: Sequence[str]) -> dict:
        """``count`` over both sides of a pair set, plus pairs with at least one / both sides seen."""
        out = self.count(list(sentences1) + list(sentences2))
        a = [normalize_sentence(s, self.strip_punctuation) in self.sentences for s in sentences1]
        b = [normalize_sentence(s, self.strip_punctuation) in self.sentences for s in sentences2]
        out["n_pairs"] = len(a)
        out["pairs_any_side"] = int(sum(x or y for x, y in zip(a, b)))
        out["pairs_both_sides"] = int(sum(x and y for x, y in zip(a, b)))
        return out


