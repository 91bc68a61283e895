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

import dataclasses
import difflib
from collections.abc import Iterable

import numpy as np

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
    if check_sentence_end(rule) == "none":
        return pairs
    captions = np.array(apply_sentence_end(pairs.captions.tolist(), rule), dtype=object).astype(str)
    return dataclasses.replace(pairs, captions=captions)


__all__ = ["SENTENCE_ENDS", "add_sentence_end", "apply_sentence_end", "check_sentence_end",
           "pairs_with_sentence_end", "rule_from_config", "space_period", "space_period_tokens"]


def rule_from_config(config: dict | None, where: str = "the export") -> str:
    """The sentence-end rule a training config records (``text.sentence_end``).

    Args:
      config: an export's ``assets/config.json`` as a dict, or ``None`` (no config).
      where: names the config in error messages.

    Returns:
      The rule; ``"none"`` for no config, a config with no ``text`` section (not a model of
      this package's trainer) or a ``text`` section without the key (trained before the
      option existed).

    Raises:
      ValueError: a rule that is not one of ``SENTENCE_ENDS``; a ``text`` section whose key is
        misspelt (``sentence_ends``, ``sentenceend``...: a near miss of ``sentence_end``, which
        would otherwise silently mean ``"none"``); a ``text`` that is not an object.

    Example:
      >>> rule_from_config({"text": {"sentence_end": "space_period"}})
      'space_period'
      >>> rule_from_config(None), rule_from_config({"model": {}}), rule_from_config({"text": {}})
      ('none', 'none', 'none')
      >>> rule_from_config({"text": {"sentence_end": "space_perod"}})
      Traceback (most recent call last):
        ...
      ValueError: the export records text.sentence_end = 'space_perod', which is not one of [...].
    """
    if config is None or "text" not in config:
        return "none"
    text = config["text"]
    if not isinstance(text, dict):
        raise ValueError(f"{where} records a 'text' section that is a {type(text).__name__}, not an object.")
    if "sentence_end" not in text:
        near = difflib.get_close_matches("sentence_end", [str(k) for k in text], n=1, cutoff=0.75)
        if near:
            raise ValueError(f"{where} records text.{near[0]}, not text.sentence_end: its sentence-end rule cannot "
                             "be read (a misspelt key); correct the key in assets/config.json or pass the rule "
                             "(sentence_end=... / --sentence-end).")
        return "none"
    rule = text["sentence_end"]
    if rule not in _RULES:
        raise ValueError(f"{where} records text.sentence_end = {rule!r}, which is not one of "
                         f"{list(SENTENCE_ENDS)}.")
    return rule

