"""The text encoder an evaluation scores: an export (a folder, a shipped model's name or a TF
Hub handle) loaded with the sentence-end rule it is scored under."""

from __future__ import annotations

import dataclasses
import sys

from grounded_text.evaluation.encoders import with_sentence_end
from grounded_text.serving import loader as serving_loader
from grounded_text.serving.encoder import TextEncoder
from grounded_text.serving.loader import model_sentence_end


def load_text_encoder(model_dir, batch_size: int = 512, sentence_end: str | None = None):
    """The SavedModel text encoder of ``model_dir`` (a folder, a shipped model's name or a
    TF Hub handle) whose sentences end by ``sentence_end`` (``grounded_text.data.sentence_end``),
    or when that is None by the rule it was trained with (``model_sentence_end``, which ``load``
    applies). The rule goes to stderr. The scores of an export rescored this way go into the
    same reports as any other encoder's.

    Raises:
      ValueError: an export whose rule cannot be read, or a damaged export (one line: see
        ``grounded_text.serving.loader.load``).
    """
    # Looked up at each call, so that a test's stand-in for ``load`` is the one called.
    load = serving_loader.load
    return ended(load(model_dir, batch_size, sentence_end=sentence_end), model_dir, sentence_end)


def ended(encoder, model_dir, sentence_end: str | None = None):
    """``encoder`` (of the export ``model_dir``) with the sentence-end rule of
    ``load_text_encoder`` applied to its input; the rule goes to stderr, once.

    ``model_sentence_end`` decides: a ``TextEncoder`` keeps the rule ``load`` decided (a shipped
    model's name, a URL handle and a folder all give their export's rule), unless
    ``sentence_end`` replaces it; another encoder gets its export's rule.
    """
    rule = model_sentence_end(encoder if isinstance(encoder, TextEncoder) else model_dir, sentence_end)
    how = "as given (--sentence-end)" if sentence_end else "as the model was trained"
    print(f"sentence ends of {model_dir}: {rule} ({how})", file=sys.stderr)
    if isinstance(encoder, TextEncoder):  # it applies a rule itself: this one replaces it
        return dataclasses.replace(encoder, sentence_end=rule)
    return with_sentence_end(encoder, rule)
