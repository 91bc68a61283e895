"""Export of the text tower as a reusable TF Hub SavedModel (conventions: ``export/README.md``).

The export is a ``tf.Module`` saved with ``tf.saved_model.save`` that follows the TF Hub
reusable-SavedModel API (tensorflow/hub ``docs/reusable_saved_models.md``) and the
text-embedding convention (``docs/common_saved_model_apis/text.md``):

* ``__call__(sentences, training=False)``: ``tf.string`` [batch] → ``float32`` [batch, N];
  ``training`` is a Python bool and both values are traced; for a bag-of-words tower
  (``layers.bow_encoder.bag_of_words_chain``: VETE-BOW and its variants, which compute the
  same in training and inference) ``__call__`` has one concrete function, ``training`` is
  accepted and ignored, and the serving graph pools the ragged ids (``pool_bag_of_words``) instead of
  padding them: same tokens and ids, embeddings equal to 1e-6 (docs/performance.md);
* ``variables``, ``trainable_variables`` (what fine-tuning updates) and
  ``regularization_losses`` (a list of zero-argument ``tf.function``s, one per regularised
  variable; empty for the models without weight regularisers);
* ``signatures["serving_default"]``: input ``sentences``, output ``embeddings``;
* the text processing (tensorflow-text ops) is inside the graph: callers pass raw strings
  and must ``import tensorflow_text`` before ``hub.load``;
* ``assets/vocab.txt`` (one token per line, id = 1 + num_oov_buckets + line) where the
  tower has a ``TextPreprocessor``, and ``assets/config.json`` (the training config, and
  under ``"integrity"`` the vocabulary size and each file's size and SHA-256 digest, which
  ``grounded_text.load`` checks: ``grounded_text.serving.integrity``);
* ``model_card.md`` beside ``saved_model.pb``: TF Hub model-card metadata
  (module-type text-embedding, fine-tunable, format saved_model_2, architecture, training
  data, evaluation table) — see ``grounded_text.serving.model_card.write_model_card``.

**Input limits** (bounded time and memory for any input): each sentence is cut to its first
``MAX_SENTENCE_BYTES`` bytes (a cut UTF-8 character becomes U+FFFD) and, when it has more
than ``MAX_SENTENCE_WORDS`` whitespace-separated words, to its first ``MAX_SENTENCE_WORDS``
words (joined by single spaces). A sentence within both limits is passed through unchanged,
so it embeds exactly as in the Keras tower. The limits are stored in
``assets/config.json`` under ``"input_limits"``. The input must be a 1-D string batch: a
2-D one fails at once, from ``__call__`` and from ``serving_default`` alike, with
"Shape of tensor sentences [r,c] is not compatible with expected shape [?]" (the Python
side of a restored ``__call__`` rejects it before that, listing the expected
``TensorSpec(shape=(None,), dtype=tf.string)``).

**Atomic writes**: every export (text tower, image tower, snapshot ensemble) is written
to a hidden sibling and renamed into place, so a crash at any moment leaves the complete
old or new export (``grounded_text.utils.durable``: ``install_dir``, ``recover_export``). A
target that exists and is not a folder, or a folder that cannot be written, fails before
anything is traced (``NotADirectoryError`` / ``PermissionError``).

Usage::

    import tensorflow as tf, tensorflow_text, tensorflow_hub as hub
    encoder = hub.load("runs/vete_bow/export")
    encoder(tf.constant(["a dog runs on the beach", ""]))  # float32 [2, 128]
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

import keras
import tensorflow as tf

from grounded_text.layers.bow_encoder import bag_of_words_chain, pool_bag_of_words
from grounded_text.layers.text_preprocessor import TextPreprocessor, write_vocabulary
from grounded_text.serving.integrity import record_integrity
from grounded_text.serving.model_card import write_model_card
from grounded_text.utils import compat as _compat
from grounded_text.utils.durable import fsync_tree, install_dir, kill_while_writing, recover_export, staging_dir

log = logging.getLogger("grounded_text.export")

VOCAB_ASSET = "vocab.txt"
CONFIG_ASSET = "config.json"
STRING_BATCH = tf.TensorSpec([None], tf.string, name="sentences")
# Input limits of an exported text tower (see module docstring). Normal sentences are far
# below both (STS, SentEval and caption sentences: < 1 KiB, < 200 words).
MAX_SENTENCE_BYTES = 16384
MAX_SENTENCE_WORDS = 512


def cap_sentences(sentences, max_bytes: int = MAX_SENTENCE_BYTES, max_words: int = MAX_SENTENCE_WORDS):
    """Applies the export's input limits (module docstring) to a string[B] batch."""
    sentences = tf.ensure_shape(sentences, [None])  # a 2-D batch fails here, with its shape
    # Only the rows that may be over a limit are cut: gathered, cut and scattered back, so a
    # batch within the limits (all normal input) sends empty tensors through the cutting ops.
    # n words need at least 2n - 1 bytes, so a row of at most 2 * max_words bytes is within
    # the word limit, and one of at most min(max_bytes, 2 * max_words) bytes within both.
    # No tf.cond: a functional If in the restored serving function cost milliseconds per call.
    rows = tf.where(tf.strings.length(sentences) > min(max_bytes, 2 * max_words))
    long = tf.gather_nd(sentences, rows)
    cut = tf.strings.unicode_transcode(tf.strings.substr(long, 0, max_bytes), "UTF-8", "UTF-8",
                                       errors="replace", replacement_char=0xFFFD)
    long = tf.where(tf.strings.length(long) > max_bytes, cut, long)
    return tf.tensor_scatter_nd_update(sentences, rows, _cut_words(long, max_words))


def _cut_words(sentences, max_words: int):
    """Each row of string[K] with more than ``max_words`` whitespace-separated words cut to its
    first ``max_words`` words joined by single spaces; the other rows unchanged. The split's
    own (row, position) indices, not a RaggedTensor: its construction and slicing were most of
    the limits' cost per call on an all-normal batch (empty K)."""
    index, words, _ = tf.raw_ops.StringSplitV2(input=sentences, sep="", maxsplit=-1)
    row, position = index[:, 0], index[:, 1]
    k = tf.size(sentences, out_type=tf.int64)
    over = tf.math.unsorted_segment_max(position, row, k) >= max_words  # a word at position max_words
    # Words past the limit go to an extra segment k, dropped.
    kept = tf.strings.unsorted_segment_join(words, tf.where(position < max_words, row, k), k + 1, separator=" ")
    return tf.where(over, kept[:k], sentences)


def _tf_variables(variables) -> list:
    """Underlying ``tf.Variable``s of Keras 3 variables (plain tf.Variables pass through)."""
    return [getattr(v, "value", v) for v in variables]


def _tracked_resources(model: keras.Model) -> list:
    """Every ``TrackableResource`` reachable from ``model``'s checkpoint graph (lookup tables)."""
    resource = tf.saved_model.experimental.TrackableResource
    return [obj for obj in tf.train.TrackableView(model).descendants() if isinstance(obj, resource)]


def _regularization_losses(model: keras.Model) -> list:
    """One zero-argument ``tf.function`` per weight that has a regulariser."""
    fns = []
    for v in model.weights:
        reg = getattr(v, "regularizer", None)
        if reg is not None:
            tv = getattr(v, "value", v)
            fns.append(tf.function(lambda tv=tv, reg=reg: tf.cast(reg(tv), tf.float32), input_signature=[]))
    return fns


class TextTowerModule(tf.Module):
    """The exported text tower (see module docstring).

    Args:
      text_tower: Keras model string[B] → float[B, N].
      assets: optional ``{name: path}`` files tracked as ``tf.saved_model.Asset``.
    """

    # Plain attributes (not tf.Module's computed properties) so they are saved as the
    # reusable-SavedModel attributes and restored by ``hub.load``.
    variables = None
    trainable_variables = None

    def __init__(self, text_tower: keras.Model, assets: dict | None = None, name: str = "text_tower",
                 max_bytes: int = MAX_SENTENCE_BYTES, max_words: int = MAX_SENTENCE_WORDS):
        super().__init__(name=name)
        self._hold_untracked(text_tower)
        self._max_bytes, self._max_words = int(max_bytes), int(max_words)
        self.assets = {k: tf.saved_model.Asset(str(v)) for k, v in (assets or {}).items()}
        self.variables = _tf_variables(text_tower.weights)
        self.trainable_variables = _tf_variables(text_tower.trainable_weights)
        self.regularization_losses = _regularization_losses(text_tower)
        # Random-state variables (dropout seed generators) used by the training=True trace.
        weight_ids = {id(v) for v in self.variables}
        self.random_states = [v for v in _tf_variables(text_tower.variables) if id(v) not in weight_ids]
        # The resources the traced functions capture (the vocabulary lookup tables and their
        # asset files): saved through these lists, since the Keras model is not.
        self.resources = _tracked_resources(text_tower)

    @_compat.no_automatic_dependency_tracking
    def _hold_untracked(self, text_tower: keras.Model) -> None:
        # Out of the SavedModel's object graph: saved, the Keras model would bring Keras's own
        # default signatures, which trace the text pipeline again and which no consumer calls.
        # Its variables, random states and resources are saved through the module's lists.
        self.text_tower = text_tower

    @tf.function
    def __call__(self, sentences, training=False):
        sentences = cap_sentences(sentences, self._max_bytes, self._max_words)
        return tf.cast(self.text_tower(sentences, training=training), tf.float32)

    @tf.function(input_signature=[STRING_BATCH])
    def serve(self, sentences):
        return {"embeddings": self.__call__(sentences, training=False)}

    def trace(self) -> None:
        """Traces ``__call__`` for string batches with ``training`` False and True."""
        for training in (False, True):
            self.__call__.get_concrete_function(STRING_BATCH, training=training)


class BagOfWordsTowerModule(TextTowerModule):
    """``TextTowerModule`` for a bag-of-words tower (``bag_of_words_chain``): the same API, with
    a single concrete ``__call__``. ``training`` is accepted (a bool tensor or Python bool,
    default False) and ignored: the tower computes the same in training and inference, so
    serving carries no training branch and no retrace per ``training`` value."""

    def __init__(self, text_tower: keras.Model, assets: dict | None = None, **kwargs):
        super().__init__(text_tower, assets, **kwargs)
        self._preprocessor, self._encoder = bag_of_words_chain(text_tower)

    @tf.function(input_signature=[STRING_BATCH, tf.TensorSpec([], tf.bool, name="training")])
    def __call__(self, sentences, training=False):
        del training  # same graph either way (class docstring)
        sentences = cap_sentences(sentences, self._max_bytes, self._max_words)
        return pool_bag_of_words(self._preprocessor, self._encoder, sentences)

    @tf.function(input_signature=[STRING_BATCH])
    def serve(self, sentences):
        return {"embeddings": self.__call__(sentences)}

    def trace(self) -> None:
        """Traces the one concrete ``__call__``."""
        self.__call__.get_concrete_function()


def clone_with_vocabulary_file(text_tower: keras.Model, vocabulary_file: str | Path) -> keras.Model:
    """A copy of ``text_tower`` (same weights) whose lookup reads ``vocabulary_file``.

    The file must hold exactly the tower's vocabulary; the lookup then becomes a
    SavedModel asset instead of an inlined constant.
    """

    def clone(layer):
        config = layer.get_config()
        if isinstance(layer, TextPreprocessor):
            return TextPreprocessor.from_config({**config, "vocabulary_file": str(vocabulary_file)})
        return layer.__class__.from_config(config)

    copy = keras.models.clone_model(text_tower, clone_function=clone)
    copy.set_weights(text_tower.get_weights())
    return copy


def find_preprocessor(text_tower: keras.Model) -> TextPreprocessor | None:
    for layer in text_tower.layers:
        if isinstance(layer, TextPreprocessor):
            return layer
    return None


def export_text_tower(
    text_tower: keras.Model,
    export_dir: str | Path,
    config: dict | None = None,
    evaluation: dict | None = None,
    *,
    max_bytes: int = MAX_SENTENCE_BYTES,
    max_words: int = MAX_SENTENCE_WORDS,
) -> Path:
    """Writes the TF Hub text tower to ``export_dir`` (replaced atomically if it exists).

    Args:
      text_tower: Keras model string[B] → float[B, N].
      export_dir: target directory.
      config: JSON-serialisable training config, stored as ``assets/config.json`` with
        ``"input_limits": {"max_bytes", "max_words"}`` and the files' record
        (``"integrity"``, ``grounded_text.serving.integrity.record_integrity``) added.
      evaluation: optional headline figures for the model card (``write_model_card``).
      max_bytes, max_words: the input limits (module docstring).

    Returns:
      ``export_dir`` as a ``Path``.

    Raises:
      NotADirectoryError, PermissionError: ``export_dir`` exists and is not a folder, or cannot
        be written (before anything is traced).

    Example:
      >>> import tempfile
      >>> import grounded_text as gt
      >>> from grounded_text.config.schema import ModelConfig, TextConfig
      >>> from grounded_text.layers import build_vocabulary
      >>> from grounded_text.models import build_model
      >>> words = build_vocabulary(["a dog runs on the grass", "a man rides a bike"])
      >>> model = build_model(ModelConfig(embedding_dim=16), TextConfig(), words, feature_dim=6)
      >>> path = export_text_tower(model.text_tower, Path(tempfile.mkdtemp()) / "export",
      ...                          {"model": {"name": "vete_bow"}})
      >>> gt.load(path).encode(["a dog runs"]).shape       # any TF Hub user: hub.load(str(path))
      (1, 16)
    """
    export_dir = Path(export_dir)
    recover_export(export_dir)
    config = {**(config or {}), "input_limits": {"max_bytes": int(max_bytes), "max_words": int(max_words)}}
    staged = staging_dir(export_dir)
    with tempfile.TemporaryDirectory() as staging:
        staging = Path(staging)
        assets = {}
        preprocessor = find_preprocessor(text_tower)
        tower = text_tower
        if preprocessor is not None:
            assets["vocab"] = write_vocabulary(preprocessor.vocabulary, staging / VOCAB_ASSET)
            tower = clone_with_vocabulary_file(text_tower, assets["vocab"])
        (staging / CONFIG_ASSET).write_text(json.dumps(config, indent=2, default=str))
        assets["config"] = staging / CONFIG_ASSET
        module_class = BagOfWordsTowerModule if bag_of_words_chain(tower) else TextTowerModule
        module = module_class(tower, assets, max_bytes=max_bytes, max_words=max_words)
        options = tf.saved_model.SaveOptions()
        with _compat.save_context(options):
            module.trace()
        with kill_while_writing(staged):
            tf.saved_model.save(module, str(staged), signatures={"serving_default": module.serve}, options=options)
    write_model_card(staged, config, evaluation, embedding_dim=int(tower.output.shape[-1]),
                     parameters=int(tower.count_params()))
    record_integrity(staged)  # last: it describes the files as they are installed
    fsync_tree(staged)
    install_dir(staged, export_dir)
    return export_dir


# --- Image tower export (retrieval from a run directory) ----------------------------------------

IMAGE_EXPORT_DIR = "image_export"


class ImageTowerModule(tf.Module):
    """The exported image tower: ``__call__(features)`` float32 [B, d] → float32 [B, N].

    Also the ``serving_default`` signature (input ``features``, output ``embeddings``).
    The feature dimension d is fixed by the tower (``input_signature`` [None, d]).
    """

    def __init__(self, image_tower: keras.Model, name: str = "image_tower"):
        super().__init__(name=name)
        self.image_tower = image_tower
        dim = int(image_tower.input_shape[-1])
        self.feature_dim = tf.Variable(dim, trainable=False, dtype=tf.int64, name="feature_dim")
        spec = tf.TensorSpec([None, dim], tf.float32, name="features")
        self.__call__ = tf.function(self._call, input_signature=[spec])
        self.serve = tf.function(lambda features: {"embeddings": self._call(features)}, input_signature=[spec])

    def _call(self, features):
        return tf.cast(self.image_tower(features, training=False), tf.float32)


def export_image_tower(image_tower: keras.Model, export_dir: str | Path, config: dict | None = None,
                       image_features: dict | None = None) -> Path:
    """Writes the image tower (float32 [B, d] → float32 [B, N]) as a SavedModel.

    Used by retrieval (``grounded_text.evaluation.retrieval``): captions go through
    the text export, test images' precomputed features through this one. The
    training config is stored as ``assets/config.json`` (it names the feature file), with the
    files' record (``"integrity"``: sizes, SHA-256 and a copy of ``image_features``;
    ``grounded_text.serving.integrity.record_integrity``), which loading checks.

    Args:
      image_tower: Keras model float[B, d] → float[B, N].
      export_dir: target directory (replaced atomically if it exists, as the text tower).
      config: JSON-serialisable training config.
      image_features: what made the training features (network, weights digest, crops, image
        size, preprocessing: ``grounded_text.data.provenance.store_provenance``), recorded as
        ``image_features`` beside the config: ``encode_images`` builds that network, and a store
        made another way is refused when it meets the tower. ``None``: not known.

    Returns:
      ``export_dir`` as a ``Path``.
    """
    export_dir = Path(export_dir)
    recover_export(export_dir)
    staged = staging_dir(export_dir)
    with tempfile.TemporaryDirectory() as staging:
        staging = Path(staging)
        recorded = dict(config or {})
        if image_features is not None:
            recorded["image_features"] = dict(image_features)
        (staging / CONFIG_ASSET).write_text(json.dumps(recorded, indent=2, default=str))
        module = ImageTowerModule(image_tower)
        module.assets = {"config": tf.saved_model.Asset(str(staging / CONFIG_ASSET))}
        tf.saved_model.save(module, str(staged), signatures={"serving_default": module.serve})
    record_integrity(staged)  # as the text tower: sizes, SHA-256, and the feature record, checked at load
    fsync_tree(staged)
    install_dir(staged, export_dir)
    return export_dir
