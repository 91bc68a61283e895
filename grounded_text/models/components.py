"""Building blocks shared by the builders: losses by name, parameter checks, text
front-ends, word towers, image towers, word vectors. (The builder modules import from
here, never from each other.)

Loss names (``ModelConfig.loss``; parameters in ``ModelConfig.loss_params``):

======================  ==================================================  ==============
name                    class (module)                                      needs
======================  ==================================================  ==============
``pearson``             ``PearsonCorrelationLoss`` (VETE §3)                 –
``covariance``          ``CovarianceLoss`` (VETE §5.2)                       –
``skt``                 ``SurrogateKendallTauLoss(alpha)`` (VETE §5.2)       –
``rank``                ``PairwiseRankLoss(margin)`` (Kiros et al., VETE)    –
``triplet``             ``TripletRankingLoss(margin, direction_weight,      –
                        negatives, k)`` (Kolluru eq. 3)
``cluster``             ``ClusterLoss(margin)`` (Bordes eq. 2)               grouped batches
``perceptual``          ``PerceptualLoss()`` (Bordes eq. 3)                  –
``grounding``           ``GroundingLoss(alpha_cluster, alpha_perceptual,    grouped batches
                        margin)`` (Bordes §3.2)
``cross_modal``         ``CrossModalProjectionLoss(margin)`` (Bordes CM)     –
======================  ==================================================  ==============
"""

from __future__ import annotations

import importlib
import inspect

import keras

from grounded_text.config.params import RNN_PARAMS
from grounded_text.config.schema import LOSSES, ModelConfig, TextConfig
from grounded_text.layers.char_encoder import PRINTABLE_CHARACTERS, CharacterPreprocessor, build_character_vocabulary
from grounded_text.layers.text_preprocessor import TextPreprocessor
from grounded_text.layers.word_vectors import pretrained_matrix_for
from grounded_text.papers.resolve import NEEDS_GROUPED_BATCHES, loss_needs_grouped_batches  # noqa: F401 (re-exported)


def architecture(text_tower: str, image_branch: str, loss: str):
    """Declares a builder's row of the architecture table of docs/models.md (Markdown cells),
    which ``grounded_text.models.tables`` writes from the registry.

    Args:
      text_tower: the text tower, string → embedding.
      image_branch: what maps the image features (``"none (CNN features)"`` if nothing).
      loss: the training objective.

    Returns:
      A decorator that sets the builder's ``architecture`` attribute to the three cells
      and returns the builder itself.

    Example:
      >>> @architecture("BOW mean → L2", "affine W", "Pearson")
      ... def build_toy(model, text, vocabulary, feature_dim, seed=0, **_):
      ...     pass
      >>> build_toy.architecture
      ('BOW mean → L2', 'affine W', 'Pearson')
    """
    def declare(builder):
        builder.architecture = (text_tower, image_branch, loss)
        return builder

    return declare


def make_loss(name: str, params: dict | None = None, seed: int = 0):
    """Instantiates the loss layer ``name`` with ``params`` (and ``seed`` if it takes one).

    Raises:
      ValueError: unknown name or parameter (message lists the valid ones).
    """
    if name not in LOSSES:
        raise ValueError(f"Unknown loss {name!r}; choose one of {sorted(LOSSES)}.")
    module, cls_name = LOSSES[name]
    cls = getattr(importlib.import_module(module), cls_name)
    params = dict(params or {})
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "kwargs"}
    unknown = set(params) - accepted
    if unknown:
        raise ValueError(f"Loss {name!r} ({cls_name}) has no parameter(s) {sorted(unknown)}; "
                         f"it takes {sorted(accepted)}.")
    if "seed" in accepted:
        params.setdefault("seed", seed)
    return cls(name=f"{name}_loss", **params)


def require_params(model: ModelConfig, params: dict, keys, what: str) -> dict:
    """``params`` checked against the builder's parameter names ``keys``: its table of
    ``grounded_text.config.params.ENCODER_PARAMS`` (the names are its keys), so the table
    is the one list of what a builder takes.

    The builders hide no defaults: every parameter comes from the preset record
    (``grounded_text.papers.presets``) or the user, through ``ModelConfig.encoder`` /
    ``ModelConfig.loss_params``.

    Raises:
      ValueError: a missing key (named; the preset records give them all) or an
        unknown one (the message lists the valid ones).
    """
    keys = tuple(keys)
    unknown = set(params) - set(keys)
    if unknown:
        raise ValueError(f"Model {model.name!r} has no {what} parameter(s) {sorted(unknown)}; it takes {sorted(keys)}.")
    missing = [k for k in keys if k not in params]
    if missing:
        field = "encoder" if what == "encoder" else "loss_params"
        raise ValueError(f"Model {model.name!r} needs {what} parameter(s) {missing}: set them in its preset "
                         f"record (grounded_text.papers.presets) or ModelConfig.{field}.")
    return dict(params)


def require_embedding_dim(model: ModelConfig) -> int:
    """``ModelConfig.embedding_dim`` N, which the record or the user must set.

    Raises:
      ValueError: unset or < 1.
    """
    if model.embedding_dim is None or int(model.embedding_dim) < 1:
        raise ValueError(f"Model {model.name!r} needs embedding_dim (N >= 1), got {model.embedding_dim!r}.")
    return int(model.embedding_dim)


# The triplet loss's parameters a builder passes (``k`` only with the hardest negatives).
TRIPLET_KEYS = ("margin", "direction_weight", "negatives")
GROUNDING_KEYS = ("alpha_cluster", "alpha_perceptual", "margin")


def family_loss(model: ModelConfig, family_loss_name: str, keys, seed: int):
    """The loss layer. With the family's own loss its parameters ``keys`` are required
    (``"triplet"`` also needs ``k`` when ``negatives="hardest"``); another loss takes the
    user's ``loss_params`` alone (that loss class's own defaults fill the rest).

    Raises:
      ValueError: no loss set; a missing parameter (named); an unknown one (``make_loss``).
    """
    if model.loss is None:
        raise ValueError(f"Model {model.name!r} needs ModelConfig.loss (its preset record gives one).")
    if model.loss == family_loss_name:
        keys = tuple(keys) + (("k",) if family_loss_name == "triplet"
                              and model.loss_params.get("negatives") == "hardest" else ())
        missing = [k for k in keys if k not in model.loss_params]
        if missing:
            raise ValueError(f"Model {model.name!r} needs loss parameter(s) {missing} for {family_loss_name!r}: set "
                             f"them in its preset record (grounded_text.papers.presets) or ModelConfig.loss_params.")
    return make_loss(model.loss, model.loss_params, seed)


def word_preprocessor(text: TextConfig, vocabulary, vocabulary_file=None) -> TextPreprocessor:
    """Word front-end (string[B] → int ids) for ``TextConfig`` (``lowercase`` must be set)."""
    if text.lowercase is None:
        raise ValueError("TextConfig.lowercase is unset: resolve the config (its preset record sets it).")
    return TextPreprocessor(vocabulary, num_oov_buckets=text.num_oov_buckets, lowercase=text.lowercase,
                            boundary_tokens=text.boundary_tokens, max_tokens=text.max_tokens,
                            vocabulary_file=vocabulary_file, name="text_preprocessor")


def word_tower(model: ModelConfig, text: TextConfig, vocabulary, encoder_cls, kwargs: dict, name: str) -> keras.Model:
    """string[B] → ``encoder_cls(vocabulary_size, **kwargs)`` over word ids, with
    ``model.word_vectors`` loaded into its embedding when given."""
    preprocessor = word_preprocessor(text, vocabulary)
    sentences = keras.Input(shape=(), dtype="string", name="sentences")
    encoder = encoder_cls(preprocessor.vocabulary_size, name=name, **kwargs)
    embedding = encoder(preprocessor(sentences))
    init_word_embeddings(encoder.embedding, preprocessor, model)
    return keras.Model(sentences, embedding, name="text_tower")


def rnn_encoder_kwargs(model: ModelConfig, params: dict) -> dict:
    """``RNNEncoder`` arguments from the ``RNN_PARAMS`` keys of ``params``: ``units=None``
    means N; a projection to N is added when the pooled state's size differs from N."""
    n = require_embedding_dim(model)
    p = {k: params[k] for k in RNN_PARAMS}
    units = int(p.pop("units") or n)
    state = units * (2 if p["bidirectional"] else 1)
    return {**p, "units": units, "output_dim": None if state == n else n}


def build_affine_image_tower(feature_dim: int, embedding_dim: int) -> keras.Model:
    """Float[B, d] → float32[B, N], ``v = W x + b`` (VETE's affine image branch)."""
    features = keras.Input(shape=(feature_dim,), dtype="float32", name="image_features")
    projected = keras.layers.Dense(embedding_dim, name="image_projection")(features)
    projected = keras.layers.Activation("linear", dtype="float32", name="image_embedding")(projected)
    return keras.Model(features, projected, name="image_tower")


def build_identity_image_tower(feature_dim: int) -> keras.Model:
    """Float[B, d] → float32[B, d]: the CNN features themselves (no learnt image branch)."""
    features = keras.Input(shape=(feature_dim,), dtype="float32", name="image_features")
    out = keras.layers.Activation("linear", dtype="float32", name="image_embedding")(features)
    return keras.Model(features, out, name="image_tower")


def character_preprocessor(text: TextConfig, train_captions, max_chars: int | None = None,
                           char_ids: str = "vocabulary") -> CharacterPreprocessor:
    """Character front-end: its alphabet comes from the training captions only, or with
    ``char_ids="printable"`` is ``PRINTABLE_CHARACTERS`` (the authors' rule; every other
    character, ``'0'`` included, reads the one unknown id 1: ``CHAR_ID_RULES``).

    Raises:
      ValueError: ``train_captions`` missing.
    """
    if train_captions is None:
        raise ValueError("A character-level model needs train_captions to build its character vocabulary.")
    if text.lowercase is None:
        raise ValueError("TextConfig.lowercase is unset: resolve the config (its preset record sets it).")
    if char_ids == "printable":
        return CharacterPreprocessor(list(PRINTABLE_CHARACTERS), num_oov_buckets=1, lowercase=text.lowercase,
                                     max_chars=max_chars, name="char_preprocessor")
    chars = build_character_vocabulary(train_captions, lowercase=text.lowercase)
    return CharacterPreprocessor(chars, num_oov_buckets=text.num_oov_buckets, lowercase=text.lowercase,
                                 max_chars=max_chars, name="char_preprocessor")


def init_word_embeddings(embedding_layer, preprocessor: TextPreprocessor, model: ModelConfig, seed: int = 0):
    """Loads ``model.word_vectors`` into a built ``keras.layers.Embedding``; returns coverage or None.

    Raises:
      ValueError: the vectors' dimension differs from the embedding's.
    """
    if not model.word_vectors or str(model.word_vectors).lower() == "none":  # "none": explicitly no vectors
        return None
    matrix, coverage = pretrained_matrix_for(preprocessor.vocabulary, preprocessor.num_oov_buckets,
                                             model.word_vectors, model.word_vectors_vocab, seed=seed)
    if matrix.shape != tuple(embedding_layer.embeddings.shape):
        raise ValueError(f"Word vectors {model.word_vectors!r} give an embedding of shape {matrix.shape}, "
                         f"the model's is {tuple(embedding_layer.embeddings.shape)}: set the word dimension "
                         f"to {matrix.shape[1]}.")
    embedding_layer.embeddings.assign(matrix)
    return coverage
