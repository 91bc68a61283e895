"""Character-level grounded sentence encoder (Merkx & Frank 2019, §3.1).

Raw strings → characters (inside the graph, tensorflow-text) → 20-d character
embeddings → bidirectional GRU/LSTM → self-attention (or max) pooling → L2.
"""

from __future__ import annotations

import string
from collections.abc import Iterable

import keras
import tensorflow as tf
import tensorflow_text as tf_text

import grounded_text.layers.examples as examples
from grounded_text.layers.examples import LayerExample
from grounded_text.layers.pooling import (
    WEIGHT_INITS,
    ScalarAttentionPooling,
    VectorAttentionPooling,
    masked_max,
    masked_mean,
)
from grounded_text.layers.stacked_rnn import CELLS, StackedRNN, UsesStackedRNN
from grounded_text.layers.text_preprocessor import PADDING_ID, count_vocabulary, lookup_ids

# "attention" is Merkx & Frank's vector self-attention (§3.1), "scalar_attention" one weight per step.
CHAR_POOLINGS = ("attention", "scalar_attention", "max", "mean")
#: Character embedding initialisers: "uniform" is Keras' ``Embedding`` default, U(-0.05, 0.05);
#: "normal" is PyTorch's ``nn.Embedding`` default, N(0, 1), which the authors' code of Merkx &
#: Frank uses (DannyMerkx/caption2image 8a4dc2c, ``PyTorch/functions/encoders.py:21-23``).
CHAR_EMBEDDING_INITS = ("uniform", "normal")
#: Character id rules. "vocabulary": the training captions' characters, one shared id for any
#: other character. "printable": the authors' rule (DannyMerkx/caption2image 8a4dc2c,
#: ``PyTorch/functions/prep_text.py:21-35``, ``SentEval/evaluate_char.py:33-50``): the 100
#: characters of Python's ``string.printable``, each with its own row whether or not training
#: saw it; ``'0'`` (their id 0, ``padding_idx``) and any other character read a zero row that
#: is never trained, and the recurrent layer still steps over them.
CHAR_ID_RULES = ("vocabulary", "printable")
#: ``string.printable`` in its own order without ``'0'``, which the "printable" rule sends to
#: the zero row with every character outside the set.
PRINTABLE_CHARACTERS = tuple(c for c in string.printable if c != "0")


def attention_diversity_loss(kernels, first_alphas, embedding, margin: float = 1.0):
    """The multi-head penalty of the authors' code of Merkx & Frank, ``attention_loss``
    (DannyMerkx/caption2image, ``NLE2019`` code at 8a4dc2c, ``PyTorch/functions/costum_loss.py:72-94``).

    For every pair of heads x < y it adds ``[margin − ||·||]₊`` of three differences
    (Frobenius norms): the heads' first weight matrices W (``costum_loss.py:84``; W
    transposed has the same norm), their attention weights for the batch's first sentence
    (``costum_loss.py:88``, ``att_layer.alpha[x][0]``; their trainer sorts each batch by
    length, so that is the longest sentence) and the heads' slices of the
    sentence embeddings of the whole batch (``costum_loss.py:90-93``).

    Args:
      kernels: list of the heads' W, each float [H, U].
      first_alphas: list of the heads' attention weights of one sentence, each float [T, H].
      embedding: float [B, heads × H], the (normalised) concatenated sentence vectors.
      margin: their ``margin = 1``.

    Returns:
      float32 scalar >= 0 (0 with one head).

    Example:
      >>> kernel, alphas = tf.ones([2, 3]), tf.fill([4, 2], 0.25)
      >>> float(attention_diversity_loss([kernel, kernel], [alphas, alphas], tf.ones([5, 4])))  # 3 × [1 − 0]₊
      3.0
      >>> float(attention_diversity_loss([kernel], [alphas], tf.ones([5, 2])))  # one head
      0.0
    """
    heads = len(kernels)
    embedding = tf.cast(embedding, tf.float32)
    chunks = tf.split(embedding, heads, axis=-1) if heads > 1 else [embedding]
    loss = tf.constant(0.0, tf.float32)
    for group in (kernels, first_alphas, chunks):
        for x in range(heads):
            for y in range(x + 1, heads):
                diff = tf.cast(group[x], tf.float32) - tf.cast(group[y], tf.float32)
                loss += tf.nn.relu(margin - tf.norm(diff))
    return loss


def split_characters(strings, lowercase: bool = True) -> tf.RaggedTensor:
    """Raw strings → ragged [B, (chars)] of UTF-8 characters.

    Invalid UTF-8 is replaced by U+FFFD, then Unicode case folding (lowercase +
    NFKC, ``tf_text.case_fold_utf8``) or NFKC only; leading/trailing whitespace is
    stripped (``tf.strings.strip``).

    Example:
      >>> split_characters([" Ab c ", ""]).to_list()
      [[b'a', b'b', b' ', b'c'], []]
      >>> [c.decode() for c in split_characters(["Éß"], lowercase=False).flat_values.numpy()]
      ['É', 'ß']
    """
    strings = tf.convert_to_tensor(strings, dtype=tf.string)
    strings = tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
    strings = tf_text.case_fold_utf8(strings) if lowercase else tf_text.normalize_utf8(strings, "NFKC")
    return tf.strings.unicode_split(tf.strings.strip(strings), "UTF-8")


def build_character_vocabulary(texts: Iterable[str], *, min_count: int = 1, lowercase: bool = True,
                               max_size: int | None = None, batch_size: int = 8192) -> list[str]:
    """The characters of the training captions, most frequent first (ties by code point):
    ``count_vocabulary`` over ``split_characters``.

    Raises:
      ValueError: ``min_count < 1`` or ``max_size < 0``.

    Example:
      >>> build_character_vocabulary(["Abba", "cab"])
      ['a', 'b', 'c']
      >>> build_character_vocabulary(["Abba", "cab"], min_count=2, lowercase=False)
      ['b', 'a']
    """
    return count_vocabulary(texts, lambda batch: split_characters(batch, lowercase), min_count=min_count,
                            max_size=max_size, batch_size=batch_size, what="build_character_vocabulary")


@keras.saving.register_keras_serializable(package="grounded_text")
class CharacterPreprocessor(keras.layers.Layer):
    """String[B] → int64[B, T] character ids, padded with 0.

    Id layout: 0 = padding, ``1 .. num_oov_buckets`` = unseen characters (hashed),
    then the character vocabulary in order. T = longest string (in characters) of
    the batch, or ``max_chars``.

    Args:
      vocabulary: list of single characters (unique).
      num_oov_buckets: buckets for unseen characters (>= 1).
      lowercase: Unicode case folding first; ``False`` keeps case and punctuation as
        they are (NFKC only), as Merkx & Frank feed characters (§3.2.1).
      max_chars: truncate to this many characters, or ``None``.

    Returns:
      int64 [B, T]; an empty string is all padding.

    Raises:
      ValueError: duplicate or multi-character entries, ``num_oov_buckets < 1``,
        ``max_chars < 1``.

    Example:
      >>> preprocessor = CharacterPreprocessor(["a", "b", "c"])  # ids: 0 padding, 1 unseen, a = 2, ...
      >>> preprocessor(tf.constant(["Cab", "ax", ""])).numpy().tolist()
      [[4, 2, 3], [2, 1, 0], [0, 0, 0]]
      >>> preprocessor.vocabulary_size
      5
    """

    def __init__(self, vocabulary, num_oov_buckets: int = 1, lowercase: bool = True,
                 max_chars: int | None = None, **kwargs):
        kwargs.setdefault("dtype", "string")
        super().__init__(**kwargs)
        vocabulary = [str(c) for c in vocabulary]
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError("CharacterPreprocessor: vocabulary has duplicate characters.")
        bad = [c for c in vocabulary if len(c) != 1][:5]
        if bad:
            raise ValueError(f"CharacterPreprocessor: vocabulary entries must be single characters: {bad}.")
        if num_oov_buckets < 1:
            raise ValueError(f"CharacterPreprocessor: num_oov_buckets must be >= 1, got {num_oov_buckets}.")
        if max_chars is not None and max_chars < 1:
            raise ValueError(f"CharacterPreprocessor: max_chars must be >= 1 or None, got {max_chars}.")
        self.vocabulary = vocabulary
        self.num_oov_buckets = int(num_oov_buckets)
        self.lowercase = bool(lowercase)
        self.max_chars = None if max_chars is None else int(max_chars)
        keys = vocabulary if vocabulary else ["\x00"]
        self._vocab_len = len(vocabulary)
        self.table = tf.lookup.StaticVocabularyTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(keys, tf.string),
                                                tf.range(len(keys), dtype=tf.int64)),
            self.num_oov_buckets)
        self.built = True

    @property
    def vocabulary_size(self) -> int:
        return 1 + self.num_oov_buckets + len(self.vocabulary)

    def call(self, inputs):
        chars = split_characters(inputs, self.lowercase)
        if self.max_chars is not None:
            chars = chars[:, : self.max_chars]
        return lookup_ids(self.table, chars, self.num_oov_buckets, self._vocab_len)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor((inputs.shape[0], None), dtype="int64")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"vocabulary": build_character_vocabulary(examples.CAPTIONS), "max_chars": 40},
                            examples.captions(), output_dtype="int64", trainable=False)

    def get_config(self):
        config = super().get_config()
        config.update(vocabulary=list(self.vocabulary), num_oov_buckets=self.num_oov_buckets,
                      lowercase=self.lowercase, max_chars=self.max_chars)
        return config


@keras.saving.register_keras_serializable(package="grounded_text")
class CharacterEncoder(UsesStackedRNN, keras.layers.Layer):
    """Character ids → embeddings → bidirectional RNN(s) (``StackedRNN``) → attention/max pooling → L2.

    Merkx & Frank (2019, §3.1): 20-d character embeddings, a bidirectional
    GRU (or LSTM), then vector self-attention ``a_t = softmax_t(V tanh(W h_t + b_w) + b_v)
    ∈ R^N`` (softmax over time for each feature, 128 hidden units) and
    ``e = Σ_t a_t ∘ h_t`` (``VectorAttentionPooling``); or scalar attention, max or mean
    pooling over time; then ``e / ||e||_2``. Padding (id 0) is masked throughout.

    Args:
      vocabulary_size: number of ids (``CharacterPreprocessor.vocabulary_size``).
      char_dim: character embedding size (paper: 20).
      units: RNN hidden size per direction (N = 2 × units when bidirectional).
      num_layers: stacked RNN layers (1–3).
      cell: ``"gru"`` or ``"lstm"``.
      bidirectional: bidirectional RNN (paper: yes).
      pooling: ``"attention"`` (vector, the paper's), ``"scalar_attention"``, ``"max"`` or ``"mean"``.
      attention_units: hidden size of the attention MLP (paper: 128).
      normalize: L2-normalise the output.
      attention_heads: independent attention poolings whose outputs are concatenated
        (N × heads), as ``multi_attention`` of the authors' code (caption2image 8a4dc2c,
        ``PyTorch/functions/costum_layers.py:71-85``; its ``flickr_char/char_net.py:50``
        sets 2 heads, its SentEval script ``SentEval/evaluate_char.py:78`` loads 1, the paper
        describes one). Default 1.
      attention_include_padding: the softmax of the attention runs over every step of the
        padded batch, padded states zero, as the authors' code does (no mask:
        ``costum_layers.py:95,98`` over the zero-padded ``pad_packed_sequence`` output,
        ``encoders.py:37``). Default ``False``: the exact masked softmax.
      attention_diversity_margin: with several heads, adds (``add_loss``) the authors'
        ``attention_loss`` with this margin (``attention_diversity_loss``; their
        ``costum_loss.py:72``, margin 1, added by ``flickr_char/char_net.py:117``). Default
        ``None``: no such loss.
      char_embedding_init: ``"uniform"`` (default: Keras' ``Embedding`` default,
        U(-0.05, 0.05)) or ``"normal"``: N(0, 1), PyTorch's ``nn.Embedding`` default, as the
        authors' code initialises its character embeddings (``encoders.py:21-23``). Their
        padding row is zero; ours is never read (id 0 is masked), so it is drawn like the others.
      zero_ids: ids whose embedding is a zero row that is never trained, although the
        recurrent layer still reads them (the authors' ``padding_idx`` row, which their
        character-id rule gives to ``'0'`` and to unknown characters: ``CHAR_ID_RULES``).
        Default: none. Unlike padding, they are not masked.
      weight_init: how every other weight is drawn: ``"keras"`` (default: Glorot-uniform input
        kernels, orthogonal recurrent kernels, zero biases, Glorot-uniform attention) or
        ``"torch"``: PyTorch's defaults as the authors' code leaves them, every GRU weight and
        bias U(−1/√units, 1/√units) (``nn.GRU``, ``encoders.py:24-26``) and the attention's as
        their ``attention`` class draws them (``costum_layers.py:91-94``; see
        ``VectorAttentionPooling``).
      dropout: dropout rate on the states between stacked RNN layers (training only; none
        with one layer). Default 0.
      fused_rnn: bidirectional GRUs through ``fused_rnn.bidirectional_gru`` (the same function
        of the same weights, faster on CPUs); ``False``: Keras' own loop. Default ``True``. Not
        serialised: it is no model choice; also settable later (``encoder.fused_rnn = False``).

    Call args:
      ids: int [B, T] character ids, 0 = padding.

    Returns:
      float32 [B, N]; the empty string gives zeros (documented, never NaN).

    Raises:
      ValueError: bad sizes, unknown cell or pooling, ``num_layers`` outside 1..3.

    Example:
      >>> encoder = CharacterEncoder(vocabulary_size=5, char_dim=4, units=3, attention_units=8)
      >>> e = encoder(tf.constant([[4, 2, 3], [2, 1, 0], [0, 0, 0]]))
      >>> tuple(e.shape), e.dtype.name, tf.norm(e, axis=-1).numpy().round(4).tolist()  # "" gives zeros
      ((3, 6), 'float32', [1.0, 1.0, 0.0])
      >>> CharacterEncoder(5, char_dim=4, units=3, attention_heads=2).output_dim  # heads concatenated
      12
    """

    def __init__(self, vocabulary_size: int, char_dim: int = 20, units: int = 512, num_layers: int = 1,
                 cell: str = "gru", bidirectional: bool = True, pooling: str = "attention",
                 attention_units: int = 128, normalize: bool = True, attention_heads: int = 1,
                 attention_include_padding: bool = False, attention_diversity_margin: float | None = None,
                 char_embedding_init: str = "uniform", weight_init: str = "keras", zero_ids=(),
                 dropout: float = 0.0, fused_rnn: bool = True, **kwargs):
        super().__init__(**kwargs)
        if cell not in CELLS:
            raise ValueError(f"CharacterEncoder: cell must be one of {sorted(CELLS)}, got {cell!r}.")
        if pooling not in CHAR_POOLINGS:
            raise ValueError(f"CharacterEncoder: pooling must be one of {CHAR_POOLINGS}, got {pooling!r}.")
        if not 1 <= int(num_layers) <= 3:
            raise ValueError(f"CharacterEncoder: num_layers must be 1..3, got {num_layers}.")
        if min(vocabulary_size, char_dim, units, attention_units, attention_heads) < 1:
            raise ValueError("CharacterEncoder: sizes must be >= 1.")
        if int(attention_heads) > 1 and pooling not in ("attention", "scalar_attention"):
            raise ValueError(f"CharacterEncoder: attention_heads > 1 needs an attention pooling, got {pooling!r}.")
        if char_embedding_init not in CHAR_EMBEDDING_INITS:
            raise ValueError(f"CharacterEncoder: char_embedding_init must be one of {CHAR_EMBEDDING_INITS}, "
                             f"got {char_embedding_init!r}.")
        if weight_init not in WEIGHT_INITS:
            raise ValueError(f"CharacterEncoder: weight_init must be one of {WEIGHT_INITS}, got {weight_init!r}.")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"CharacterEncoder: dropout must be in [0, 1), got {dropout}.")
        self.zero_ids = tuple(sorted({int(i) for i in zero_ids}))
        if any(not PADDING_ID < i < int(vocabulary_size) for i in self.zero_ids):
            raise ValueError(f"CharacterEncoder: zero_ids must lie in 1..{int(vocabulary_size) - 1}, "
                             f"got {list(self.zero_ids)}.")
        self.vocabulary_size, self.char_dim, self.units = int(vocabulary_size), int(char_dim), int(units)
        self.num_layers, self.cell, self.bidirectional = int(num_layers), cell, bool(bidirectional)
        self.pooling, self.attention_units, self.normalize = pooling, int(attention_units), bool(normalize)
        self.char_embedding_init, self.weight_init, self.dropout = char_embedding_init, weight_init, float(dropout)
        initializer = ("uniform" if char_embedding_init == "uniform"
                       else keras.initializers.RandomNormal(mean=0.0, stddev=1.0))
        self.embedding = keras.layers.Embedding(self.vocabulary_size, self.char_dim, dtype=self.dtype_policy,
                                                embeddings_initializer=initializer, name="char_embedding")
        # Keras' weight files walk a layer's attributes in sorted order and store each layer once,
        # at its first name: ``rnns`` (the property below) sorts before ``stacked_rnn``, so files
        # keep the recurrent layers where files saved before the block have them.
        self.stacked_rnn = StackedRNN(self.units, self.num_layers, cell, self.bidirectional, self.dropout,
                                      weight_init, fused_rnn, dtype=self.dtype_policy, name="stacked_rnn")
        self.attention_heads = int(attention_heads)
        self.attention_include_padding = bool(attention_include_padding)
        self.attention_diversity_margin = (None if attention_diversity_margin is None
                                           else float(attention_diversity_margin))
        attention_cls = {"attention": VectorAttentionPooling, "scalar_attention": ScalarAttentionPooling}.get(pooling)

        def head(name):
            return attention_cls(self.attention_units, include_padding=self.attention_include_padding,
                                 weight_init=weight_init, dtype=self.dtype_policy, name=name)

        self.attention = head("attention") if attention_cls is not None else None
        # Heads 2.. (none by default, so a one-head encoder keeps its weight layout).
        self.extra_heads = ([head(f"attention_{i}") for i in range(1, self.attention_heads)]
                            if attention_cls is not None else [])

    @property
    def output_dim(self) -> int:
        return self.stacked_rnn.output_dim * self.attention_heads

    def build(self, input_shape):
        self.embedding.build(input_shape)
        self.stacked_rnn.build_layers(tuple(input_shape) + (self.char_dim,))
        shape = tuple(input_shape) + (self.stacked_rnn.output_dim,)
        for head in self.heads:
            head.build(shape)
        self.built = True

    @property
    def heads(self) -> list:
        """The attention poolings, in the order of their output slices (empty without attention)."""
        return [] if self.attention is None else [self.attention, *self.extra_heads]

    def sequence(self, ids, training=None):
        """The top RNN layer's states h [B, T, N] and the mask [B, T]."""
        mask = tf.not_equal(ids, PADDING_ID)
        h = self.embedding(ids)
        if self.zero_ids:  # a zero row with a zero gradient, as PyTorch's padding_idx
            live = tf.reduce_all(tf.not_equal(ids[..., None], tf.constant(self.zero_ids, ids.dtype)), axis=-1)
            h = h * tf.cast(live, h.dtype)[..., None]
        return self.stacked_rnn(h, mask=mask, training=training), mask

    def call(self, ids, training=None):
        h, mask = self.sequence(ids, training)
        if len(self.heads) > 1:
            e = tf.concat([head(h, mask) for head in self.heads], axis=-1)
        elif self.attention is not None:
            e = self.attention(h, mask)
        elif self.pooling == "max":
            e = masked_max(h, mask)
        else:
            e = masked_mean(h, mask)
        if self.normalize:
            e = tf.math.l2_normalize(e, axis=-1, epsilon=1e-24)
        if self.attention_diversity_margin is not None and len(self.heads) > 1:
            self.add_loss(self.diversity_loss(h, mask, e))
        return e

    def diversity_loss(self, h, mask, embedding):
        """``attention_diversity_loss`` of the heads for states ``h`` [B, T, H], ``mask``
        [B, T] and the output ``embedding`` [B, N], with the attention weights of the batch's
        longest sentence (the first of the longest on ties). Their ``costum_loss.py:88`` reads
        the batch's first sentence, which is the longest because their trainer sorts each batch
        by length, longest first (``trainer.py:164-166``); our batches are not sorted."""
        lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
        longest = tf.where(tf.equal(lengths, tf.reduce_max(lengths)))[:1, 0]
        h, mask = tf.gather(h, longest), tf.gather(mask, longest)
        first_alphas = [head.weights_of(h, mask)[0] for head in self.heads]
        kernels = [head.hidden.kernel for head in self.heads]
        return attention_diversity_loss(kernels, first_alphas, embedding, self.attention_diversity_margin or 0.0)

    def compute_output_spec(self, ids, training=None):
        return keras.KerasTensor((ids.shape[0], self.output_dim), dtype="float32")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"vocabulary_size": 11, "char_dim": 4, "units": 3, "attention_units": 5},
                            examples.word_ids())

    def get_config(self):
        config = super().get_config()
        config.update(vocabulary_size=self.vocabulary_size, char_dim=self.char_dim, units=self.units,
                      num_layers=self.num_layers, cell=self.cell, bidirectional=self.bidirectional,
                      pooling=self.pooling, attention_units=self.attention_units, normalize=self.normalize,
                      attention_heads=self.attention_heads, attention_include_padding=self.attention_include_padding,
                      attention_diversity_margin=self.attention_diversity_margin,
                      char_embedding_init=self.char_embedding_init, weight_init=self.weight_init,
                      zero_ids=list(self.zero_ids), dropout=self.dropout)
        return config
