"""Sentence-final full stops, as the authors' code of Merkx & Frank (2019) writes them.

Their code (DannyMerkx/caption2image, ``NLE2019`` code at commit 8a4dc2c) changes the end of
every sentence its character model reads, in two different ways:

* training and retrieval captions, ``preprocessing/text_features.py:28-29``::

      if not raw[-1] == '.':
          raw = raw +' .'

  (``"space_period"``): a caption that does not end in ``.`` gets ``" ."``; one that
  does is left alone, attached full stop or not (3,896 of the 40,460 Flickr8k captions
  change).
* SentEval sentences (STS 2012-2016, STS-B, SICK, the transfer tasks),
  ``SentEval/evaluate_char.py:58-60``::

      batch = [sent if sent != [] else ['.'] for sent in batch]
      sents = [' '.join(s) + ' .' if s[-1] != '.' else ' '.join(s) for s in batch]

  on the tokens SentEval hands the batcher, the sentence split at whitespace
  (``s.split()``: facebookresearch/SentEval ``senteval/sts.py:42-43`` for STS,
  ``:166-167`` for STS-B, ``senteval/sick.py:51-52`` for SICK). An attached full stop is
  part of the last token (``"flute."`` is not ``"."``), so ``"A man is playing a flute."``
  becomes ``"A man is playing a flute. ."``; runs of whitespace become one space
  (``"space_period_tokens"``). In STS12 MSRvid, 1,496 of the 1,500 sentences end in an
  attached ``.`` and all 1,500 get ``" ."``.

``"none"`` leaves the text as it is (our default). Imports no TensorFlow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

# The rules (``TextConfig.sentence_end`` for training captions, ``--sentence-end`` of the
# evaluate command for the sentences it scores); the config system lists them.
from grounded_text.config.schema import SENTENCE_ENDS


def space_period(text: str) -> str:
    """``text_features.py:28-29``: ``text + " ."`` unless ``text`` ends in ``.``. An empty
    string (their code would fail on ``raw[-1]``) gives ``"."``, as their SentEval rule does."""
    if not text:
        return "."
    return text if text[-1] == "." else text + " ."


def space_period_tokens(text: str) -> str:
    """``SentEval/evaluate_char.py:58-60`` on SentEval's whitespace tokens (``text.split()``):
    no tokens → ``"."``; the tokens joined by single spaces, ``" ."`` appended unless the last
    token is ``"."`` itself."""
    tokens = text.split() or ["."]
    joined = " ".join(tokens)
    return joined if tokens[-1] == "." else joined + " ."


_RULES = {"none": lambda text: text, "space_period": space_period, "space_period_tokens": space_period_tokens}


def check_sentence_end(rule: str) -> str:
    """``rule`` if it is one of ``SENTENCE_ENDS``.

    Raises:
      ValueError: any other value (names the choices).
    """
    if rule not in _RULES:
        raise ValueError(f"sentence_end must be one of {list(SENTENCE_ENDS)}, got {rule!r}.")
    return rule


def add_sentence_end(text: str, rule: str) -> str:
    """One string with ``rule`` (``SENTENCE_ENDS``) applied; bytes are read as UTF-8."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return _RULES[check_sentence_end(rule)](str(text))


def apply_sentence_end(texts: Iterable[str], rule: str) -> list[str]:
    """``add_sentence_end`` of each string (a new list; ``"none"`` copies them)."""
    fn = _RULES[check_sentence_end(rule)]
    return [fn(t.decode("utf-8") if isinstance(t, bytes) else str(t)) for t in texts]


def pairs_with_sentence_end(pairs, rule: str):
    """``CaptionPairs`` whose captions have ``rule`` applied (``pairs`` itself for ``"none"``)."""
    import dataclasses

    import numpy as np

    if check_sentence_end(rule) == "none":
        return pairs
    captions = np.array(apply_sentence_end(pairs.captions.tolist(), rule), dtype=object).astype(str)
    return dataclasses.replace(pairs, captions=captions)


__all__ = ["SENTENCE_ENDS", "add_sentence_end", "apply_sentence_end", "check_sentence_end", "space_period",
           "space_period_tokens", "pairs_with_sentence_end"]


def recorded_sentence_end(model_dir) -> str:
    """The sentence-end rule a model was trained with: ``text.sentence_end`` of the training
    config its export records (``assets/config.json``); ``"none"`` for an export that records
    none (trained before the option existed, or not ours) or a handle that is not a folder."""
    try:
        config = json.loads((Path(model_dir) / "assets" / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return "none"
    rule = (config.get("text") or {}).get("sentence_end", "none") if isinstance(config, dict) else "none"
    return rule if rule in _RULES else "none"
