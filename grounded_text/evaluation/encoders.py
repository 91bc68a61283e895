"""The one encoder interface of the evaluation: text and image encoders as NumPy callables.

* A text ``Encoder`` maps a list of n strings to float32 [n, N]: a SavedModel loaded with
  ``grounded_text.serving.loader.load`` (ours, or any TF Hub text-embedding module), an in-memory Keras text
  tower (``tower_encoder``) or a baseline (``baseline_encoder``: GloVe-mean, word2vec-mean).
* An ``ImageEncoder`` maps float [n, d] CNN features to float32 [n, N]
  (``load_image_encoder`` for an exported image tower, ``image_tower_encoder`` for a Keras one).
* ``EmbeddingCache`` embeds each distinct sentence once per evaluation and checks the
  encoder's output (shape, NaN/Inf), whichever section asks.
* ``EncoderSpec`` names an encoder (and its image encoder) in a report; ``run_dir_specs``
  builds it from a training run directory.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from grounded_text.baselines.glove import glove_mean_encoder
from grounded_text.baselines.word2vec import word2vec_mean_encoder
from grounded_text.data.provenance import check_pairing, store_provenance, unrecorded_warning
from grounded_text.data.sentence_end import add_sentence_end, apply_sentence_end, check_sentence_end
from grounded_text.evaluation.names import BASELINE_ENCODERS
from grounded_text.serving.images import load_image_encoder  # noqa: F401 (re-exported)
from grounded_text.serving.loader import load

log = logging.getLogger("grounded_text.evaluate")

Encoder = Callable[[Sequence[str]], np.ndarray]
ImageEncoder = Callable[[np.ndarray], np.ndarray]


def batched(fn, batch_size: int = 512) -> Encoder:
    """Wraps ``fn(list[str]) → tensor [b, N]`` into an encoder that batches and returns NumPy."""

    def encode(sentences: Sequence[str]) -> np.ndarray:
        sentences = list(sentences)
        outs = [
            np.asarray(fn(sentences[i : i + batch_size]), dtype=np.float32)
            for i in range(0, len(sentences), batch_size)
        ]
        if not outs:
            raise ValueError("encode: no sentences given.")
        out = np.concatenate(outs, axis=0)
        if out.ndim != 2 or out.shape[0] != len(sentences):
            raise ValueError(f"encoder returned shape {out.shape} for {len(sentences)} sentences.")
        if not np.isfinite(out).all():
            raise ValueError("encoder returned NaN/Inf embeddings.")
        return out

    return encode


class EmbeddingCache:
    """Encodes each distinct sentence once; checks the encoder's output.

    Calling it with n sentences returns float32 [n, N] (rows of repeated sentences are
    the same vector). ``seconds`` is the wall time spent in the encoder.

    Raises (when called):
      ValueError: no sentences; the encoder returned a shape other than [n_new, N], or
        NaN/Inf values.
    """

    def __init__(self, encoder: Encoder):
        self.encoder = encoder
        self.rows: dict[str, np.ndarray] = {}
        self.seconds = 0.0

    def add(self, sentences: Sequence[str]) -> None:
        """Encodes the sentences not seen yet."""
        new = [s for s in dict.fromkeys(sentences) if s not in self.rows]
        if new:
            t0 = time.perf_counter()
            out = np.asarray(self.encoder(new), dtype=np.float32)
            self.seconds += time.perf_counter() - t0
            if out.ndim != 2 or out.shape[0] != len(new):
                raise ValueError(f"encoder returned shape {out.shape} for {len(new)} sentences (expected [n, N]).")
            if not np.isfinite(out).all():
                raise ValueError("encoder returned NaN/Inf embeddings.")
            self.rows.update(zip(new, out))

    def __call__(self, sentences: Sequence[str]) -> np.ndarray:
        if len(sentences) == 0:
            raise ValueError("no sentences to encode (an empty split?).")
        self.add(sentences)
        return np.stack([self.rows[s] for s in sentences])


def cached(encoder: Encoder) -> EmbeddingCache:
    """``encoder`` itself if it is already an ``EmbeddingCache``, else a new cache around it."""
    return encoder if isinstance(encoder, EmbeddingCache) else EmbeddingCache(encoder)


class SentenceEndEncoder:
    """A text encoder that first applies a sentence-end rule (``grounded_text.data.sentence_end``:
    ``"space_period"``, ``"space_period_tokens"``) to every sentence it is given, so that STS,
    SICK, STS-B, transfer and retrieval sentences end as the authors' code of Merkx & Frank
    writes them. Other attributes are the wrapped encoder's.

    Args:
      encoder: strings → float [n, N] (a ``TextEncoder``, a tower encoder, any ``Encoder``).
      rule: one of ``grounded_text.config.schema.SENTENCE_ENDS``.
    """

    def __init__(self, encoder: Encoder, rule: str):
        self.encoder = encoder
        self.sentence_end = check_sentence_end(rule)

    def _apply(self, sentences):
        if isinstance(sentences, (str, bytes)):
            return add_sentence_end(sentences, self.sentence_end)
        return apply_sentence_end(list(sentences), self.sentence_end)

    def __call__(self, sentences, **kwargs):
        return self.encoder(self._apply(sentences), **kwargs)

    def encode(self, sentences, **kwargs):
        return getattr(self.encoder, "encode", self.encoder)(self._apply(sentences), **kwargs)

    def __getattr__(self, name):
        if name == "encoder":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.encoder, name)


def with_sentence_end(encoder: Encoder, rule: str | None) -> Encoder:
    """``encoder`` itself for ``None`` or ``"none"``, else a ``SentenceEndEncoder``.

    Raises:
      ValueError: an unknown rule.
    """
    if rule is None or rule == "none":
        return encoder
    return SentenceEndEncoder(encoder, rule)


def tower_encoder(text_tower, batch_size: int = 1024) -> Encoder:
    """An in-memory Keras text tower (string[B] → float[B, N]) as a NumPy ``Encoder``.

    One ``tf.function`` with a ``[None]`` string signature, called in inference mode
    (``training=False``), so every batch size reuses one trace. The sentences are encoded in
    order of length and the rows put back in the caller's order: a batch is padded to its
    longest sentence, so batches of similar lengths (the ``TextEncoder``'s order too) spare a
    recurrent tower most of its padded steps. Each row is the same as in any other batch (the
    towers mask their padding)."""
    forward = tf.function(lambda s: text_tower(s, training=False), input_signature=[tf.TensorSpec([None], tf.string)],
                          reduce_retracing=True)
    encode = batched(lambda b: forward(tf.constant(list(b), dtype=tf.string)), batch_size)

    def by_length(sentences: Sequence[str]) -> np.ndarray:
        sentences = list(sentences)
        order = np.argsort([len(s) for s in sentences], kind="stable")
        out = encode([sentences[i] for i in order])
        rows = np.empty_like(out)
        rows[order] = out
        return rows

    return by_length


def image_tower_encoder(image_tower, feature_dim: int, batch_size: int = 1024) -> ImageEncoder:
    """An in-memory Keras image tower (float[B, d] → float[B, N]) as a NumPy ``ImageEncoder``.

    Raises (when called):
      ValueError: features not [n, ``feature_dim``]; NaN/Inf outputs.
    """
    forward = tf.function(lambda x: image_tower(x, training=False),
                          input_signature=[tf.TensorSpec([None, feature_dim], tf.float32)], reduce_retracing=True)

    def encode(features: np.ndarray) -> np.ndarray:
        features = np.asarray(features, dtype=np.float32)
        if features.ndim != 2 or features.shape[1] != feature_dim:
            raise ValueError(f"image tower expects features [n, {feature_dim}], got {features.shape}.")
        out = np.concatenate([np.asarray(forward(tf.constant(features[i:i + batch_size])), dtype=np.float32)
                              for i in range(0, features.shape[0], batch_size)], axis=0)
        if not np.isfinite(out).all():
            raise ValueError("image tower returned NaN/Inf.")
        return out

    encode.feature_dim = feature_dim
    return encode


@dataclasses.dataclass
class EncoderSpec:
    """One encoder to evaluate.

    Attributes:
      name: column name in the report.
      kind: ``"model"`` (a trained run), ``"hub"`` (any SavedModel) or ``"baseline"``.
      encoder: strings → float [n, N].
      image_encoder: features float [n, d] → float [n, N], or None (no retrieval).
      source: path or description, for the report.
    """

    name: str
    kind: str
    encoder: Encoder
    image_encoder: ImageEncoder | None = None
    source: str = ""


def check_tower_features(image_encoder, store_path: str | Path, accept_unrecorded: bool = False) -> None:
    """Refuses a feature store made by another network (or weights, crops, image size) than the
    one an image tower (``load_image_encoder``) was trained on, or one that records nothing
    (unless ``accept_unrecorded``: then a warning goes to stderr).

    Raises:
      grounded_text.data.provenance.FeaturePairingError (a ValueError): one line naming both.
    """
    expected, store = getattr(image_encoder, "record", None), store_provenance(store_path)
    tower = repr(getattr(image_encoder, "path", ""))
    check_pairing(expected, store, tower, str(store_path), accept_unrecorded=accept_unrecorded)
    warning = unrecorded_warning(expected, store, tower, str(store_path))
    if warning:
        print(warning, file=sys.stderr)


def run_dir_specs(run_dir: str | Path, batch_size: int = 512) -> tuple[EncoderSpec, dict]:
    """The model of a training run directory: text export + image export + its metrics.json.

    Returns:
      ``(EncoderSpec, metrics)``; ``image_encoder`` is None (with a warning) when
      the run has no ``image_export/`` (runs trained before it existed).

    Raises:
      FileNotFoundError: no ``export/`` SavedModel in ``run_dir``.
    """
    run_dir = Path(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text()) if (run_dir / "metrics.json").is_file() else {}
    text = load(run_dir / "export", batch_size)
    image = None
    if (run_dir / "image_export" / "saved_model.pb").is_file():
        image = load_image_encoder(run_dir / "image_export")
    else:
        log.warning("%s has no image_export/: retrieval skipped (retrain to export the image tower).", run_dir)
    model_name = metrics.get("config", {}).get("model", {}).get("name", "model")
    return EncoderSpec(f"{model_name} ({run_dir.name})", "model", text, image, str(run_dir)), metrics


BASELINE_LABELS = {"glove": "GloVe-mean (6B, 50d)", "word2vec": "word2vec-mean (Flickr8k train)"}


def baseline_encoder(name: str, batch_size: int = 4096, *, data_dir: str | Path | None = None, seed: int = 0):
    """The named baseline encoder (``"glove"``: ``grounded_text.baselines.glove_mean_encoder``;
    ``"word2vec"``: ``grounded_text.baselines.word2vec_mean_encoder``, trained on the
    Flickr8k train captions under ``data_dir`` (default ``$GROUNDED_TEXT_DATA``) with ``seed``).

    Raises:
      ValueError: unknown name.
    """
    if name == "glove":
        return glove_mean_encoder(batch_size=batch_size)
    if name == "word2vec":
        return word2vec_mean_encoder(data_dir, seed=seed)
    raise ValueError(f"Unknown baseline {name!r}; choose from {list(BASELINE_ENCODERS)}.")
