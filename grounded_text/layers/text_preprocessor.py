"""Raw strings → token ids, inside the model graph (tensorflow-text).

Steps (VETE §4.1 text handling): invalid UTF-8 replaced by U+FFFD, Unicode case
folding (lowercase + NFKC), tokenisation at Unicode script boundaries and
whitespace (``tf_text.UnicodeScriptTokenizer``: "dancing." → "dancing", "."),
optional truncation to ``max_tokens``, optional ``<S>`` … ``</S>`` wrapping, and
vocabulary lookup. The same layer ships inside the exported TF Hub text tower, so
users pass raw strings.

Id layout: 0 = padding, ``1 .. num_oov_buckets`` = out-of-vocabulary buckets
(hashed), then the vocabulary in order.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import keras
import tensorflow as tf
import tensorflow_text as tf_text

import grounded_text.layers.examples as examples
from grounded_text.layers.examples import LayerExample
from grounded_text.utils.durable import atomic_write

BOS = "<S>"
EOS = "</S>"
PADDING_ID = 0

_TOKENIZER = tf_text.UnicodeScriptTokenizer()


# One whole-string match per sentence: the rows for which the Unicode normalisation is
# the identity (NFKC) or plain ASCII lowercasing (NFKC case folding), see ``normalize``.
_ASCII_PATTERN = "[\\x00-\\x7f]*"


def _normalize_unicode(strings, lowercase: bool):
    strings = tf.strings.unicode_transcode(
        strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    return tf_text.case_fold_utf8(strings) if lowercase else tf_text.normalize_utf8(strings, "NFKC")


def normalize(strings, lowercase: bool = True) -> tf.Tensor:
    """The normalisation step of ``tokenize``: invalid UTF-8 → U+FFFD, then Unicode case
    folding (``tf_text.case_fold_utf8``, NFKC_Casefold) or, with ``lowercase=False``, NFKC.

    ASCII sentences skip the Unicode work, with the same result: ASCII is valid UTF-8 and
    NFKC-stable, and NFKC_Casefold maps an ASCII string exactly as ASCII lowercasing does
    (``tf.strings.lower``; tested over all 128 code points). Only the non-ASCII rows of a
    batch (0.3 % of STS-B + SICK sentences) go through transcoding and case folding.

    Args:
      strings: ``tf.string`` [B].
      lowercase: case folding (True) or NFKC only (False).

    Returns:
      ``tf.string`` [B], valid UTF-8.

    Example:
      >>> [s.decode() for s in normalize(["A Dog RUNS.", "Straße ﬁne"]).numpy()]
      ['a dog runs.', 'strasse fine']
      >>> [s.decode() for s in normalize(["Straße ﬁne"], lowercase=False).numpy()]
      ['Straße fine']
    """
    strings = tf.convert_to_tensor(strings, dtype=tf.string)
    part = tf.cast(tf.strings.regex_full_match(strings, _ASCII_PATTERN), tf.int32)  # 0: Unicode work, 1: ASCII
    rows = tf.dynamic_partition(tf.range(tf.size(strings)), part, 2)
    texts = tf.dynamic_partition(strings, part, 2)
    ascii_rows = tf.strings.lower(texts[1]) if lowercase else texts[1]
    # No tf.cond: a functional If in the restored serving function cost milliseconds per
    # call; an all-ASCII batch just sends an empty tensor through the Unicode ops.
    return tf.dynamic_stitch(rows, [_normalize_unicode(texts[0], lowercase), ascii_rows])


def tokenize(strings, lowercase: bool = True) -> tf.RaggedTensor:
    """Normalises and tokenises a batch of raw strings.

    Args:
      strings: ``tf.string`` tensor [B] (or anything ``tf.constant`` accepts).
      lowercase: apply Unicode case folding (``tf_text.case_fold_utf8``).

    Returns:
      ``tf.RaggedTensor`` [B, (tokens)] of ``tf.string``. Empty or whitespace-only
      strings give zero tokens. Equal to ``tokenize_reference`` (``normalize`` skips the
      Unicode work on ASCII rows only).

    Raises:
      ValueError: ``strings`` has a known rank other than 1 (a single string: pass ``[s]``).

    Example:
      >>> tokenize(["A dog, dancing.", ""]).to_list()
      [[b'a', b'dog', b',', b'dancing', b'.'], []]
    """
    strings = tf.convert_to_tensor(strings, dtype=tf.string)
    if strings.shape.rank is None:  # a graph of unknown rank: checked when it runs
        strings = tf.ensure_shape(strings, [None])
    elif strings.shape.rank != 1:
        raise ValueError(f"tokenize: strings must be a batch of shape [B], got shape {strings.shape.as_list()}"
                         " (a single string: pass [s])")
    return _traced_tokenize(bool(lowercase))(strings)


@functools.cache
def _traced_tokenize(lowercase: bool):
    # Tracing the tokeniser builds about 1,400 ops (its byte offsets, which we drop, are most of
    # them) and took seconds; every model graph (train, evaluate, predict, each export
    # signature) traced it anew. One traced function per process is reused by all of them;
    # grappler inlines it, so the graphs that run are the same.
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def traced(strings):
        return _TOKENIZER.tokenize(normalize(strings, lowercase))

    return traced


def tokenize_reference(strings, lowercase: bool = True) -> tf.RaggedTensor:
    """``tokenize`` without the ASCII shortcut: transcoding, case folding (or NFKC) and
    ``UnicodeScriptTokenizer`` on every row. The tokeniser-only floor that the export's
    speed is compared with (``grounded_text.benchmark``), and the tests' reference.

    Example:
      >>> tokenize_reference(["A dog, dancing."]).to_list() == tokenize(["A dog, dancing."]).to_list()
      True
    """
    strings = tf.convert_to_tensor(strings, dtype=tf.string)
    return _TOKENIZER.tokenize(_normalize_unicode(strings, lowercase))


def build_vocabulary(
    texts: Iterable[str],
    *,
    max_size: int | None = None,
    min_count: int = 1,
    lowercase: bool = True,
    boundary_tokens: bool = True,
    batch_size: int = 8192,
) -> list[str]:
    """Builds a vocabulary from training captions only.

    Args:
      texts: raw training sentences (never evaluation sentences).
      max_size: keep at most this many tokens (after the boundary tokens), most
        frequent first; ``None`` for no cap.
      min_count: drop tokens seen fewer times.
      lowercase: must match the ``TextPreprocessor`` that will use it.
      boundary_tokens: put ``<S>`` and ``</S>`` first.
      batch_size: strings tokenised per TF call.

    Returns:
      Tokens ordered by descending count, ties alphabetically.

    Raises:
      ValueError: ``min_count < 1`` or ``max_size < 0``.

    Example:
      >>> build_vocabulary(["a dog runs", "a cat", "A dog!"])
      ['<S>', '</S>', 'a', 'dog', '!', 'cat', 'runs']
      >>> build_vocabulary(["a dog runs", "a cat", "A dog!"], min_count=2, boundary_tokens=False)
      ['a', 'dog']
    """
    # The boundary tokens are never counted, also when they are left out.
    vocabulary = count_vocabulary(texts, lambda batch: tokenize(batch, lowercase), min_count=min_count,
                                  max_size=max_size, reserved=(BOS, EOS), batch_size=batch_size,
                                  what="build_vocabulary")
    return vocabulary if boundary_tokens else vocabulary[2:]


def count_vocabulary(texts: Iterable[str], split, *, min_count: int = 1, max_size: int | None = None,
                     reserved: tuple[str, ...] = (), batch_size: int = 8192, what: str = "count_vocabulary"
                     ) -> list[str]:
    """The one vocabulary builder: the units ``split`` cuts ``texts`` into, counted and
    ordered by descending count, ties by code point (Python's string order).

    ``build_vocabulary`` (words, ``tokenize``) and ``build_character_vocabulary``
    (characters, ``split_characters``) are this function with their own ``split``.

    Args:
      texts: raw training sentences.
      split: ``list[str]`` (a batch) → ``tf.RaggedTensor`` [B, (units)] of ``tf.string``.
      min_count: drop units seen fewer times.
      max_size: keep at most this many units (after ``reserved``), or ``None``.
      reserved: units put first whatever their counts (their counts are dropped).
      batch_size: strings split per TF call.
      what: the caller's name, for the error messages.

    Returns:
      ``list(reserved)`` + the kept units, ``list[str]``.

    Raises:
      ValueError: ``min_count < 1`` or ``max_size < 0``.

    Example:
      >>> count_vocabulary(["a b b", "c b a"], tokenize, reserved=("<S>",))
      ['<S>', 'b', 'a', 'c']
    """
    if min_count < 1:
        raise ValueError(f"{what}: min_count must be >= 1, got {min_count}.")
    if max_size is not None and max_size < 0:
        raise ValueError(f"{what}: max_size must be >= 0, got {max_size}.")
    texts = list(texts)
    counts: Counter = Counter()
    for start in range(0, len(texts), batch_size):
        units = split(texts[start : start + batch_size]).flat_values.numpy()
        counts.update(u.decode("utf-8") for u in units)
    for unit in reserved:
        counts.pop(unit, None)
    kept = sorted((u for u, c in counts.items() if c >= min_count), key=lambda u: (-counts[u], u))
    if max_size is not None:
        kept = kept[:max_size]
    return list(reserved) + kept


def write_vocabulary(vocabulary: list[str], path: str | Path) -> Path:
    """Writes one token per line (UTF-8) atomically (``durable.atomic_write``: a symlink planted
    at ``path`` is replaced, never written through); returns the path.

    Example:
      >>> import tempfile
      >>> tmp = tempfile.TemporaryDirectory()
      >>> path = write_vocabulary(["<S>", "</S>", "a", "dog"], Path(tmp.name) / "vocab.txt")
      >>> path.read_text(encoding="utf-8").splitlines()
      ['<S>', '</S>', 'a', 'dog']
      >>> tmp.cleanup()
    """

    path = Path(path)
    data = "".join(t + "\n" for t in vocabulary).encode("utf-8")
    atomic_write(path, lambda f: f.write(data))
    return path


def read_vocabulary(path: str | Path) -> list[str]:
    """Reads a vocabulary written by ``write_vocabulary``.

    Example:
      >>> import tempfile
      >>> tmp = tempfile.TemporaryDirectory()
      >>> path = write_vocabulary(["<S>", "</S>", "a", "dog"], Path(tmp.name) / "vocab.txt")
      >>> read_vocabulary(path)
      ['<S>', '</S>', 'a', 'dog']
      >>> tmp.cleanup()
    """
    return Path(path).read_text(encoding="utf-8").splitlines()


def lookup_ids(table, tokens: tf.RaggedTensor, num_oov_buckets: int, vocab_len: int) -> tf.Tensor:
    """Ragged tokens → padded int64 ids in the module's id layout.

    ``table`` is a ``tf.lookup.StaticVocabularyTable`` (vocabulary 0..V−1, OOV buckets
    V..V+k−1); the result puts padding at 0, OOV buckets at 1..k and the vocabulary
    after them.

    Example:
      >>> init = tf.lookup.KeyValueTensorInitializer(["a", "dog"], tf.constant([0, 1], tf.int64))
      >>> table = tf.lookup.StaticVocabularyTable(init, num_oov_buckets=1)
      >>> lookup_ids(table, tokenize(["a dog", "a zebra dog"]), 1, 2).numpy().tolist()  # zebra: OOV id 1
      [[2, 3, 0], [2, 1, 3]]
    """
    raw = tf.ragged.map_flat_values(table.lookup, tokens)
    k = tf.constant(num_oov_buckets, tf.int64)
    v = tf.constant(vocab_len, tf.int64)
    ids = tf.ragged.map_flat_values(lambda r: tf.where(r < v, r + 1 + k, r - v + 1), raw)
    return ids.to_tensor(default_value=PADDING_ID)


@keras.saving.register_keras_serializable(package="grounded_text")
class TextPreprocessor(keras.layers.Layer):
    """String[B] → int64[B, T] token ids, padded with 0 (see module docstring).

    Args:
      vocabulary: list of tokens (ids ``1 + num_oov_buckets + i``). Must be
        unique and free of whitespace; ``<S>``/``</S>`` must be in it when
        ``boundary_tokens`` is set.
      num_oov_buckets: hashed buckets for unknown tokens (>= 1).
      lowercase: Unicode case folding before tokenising.
      boundary_tokens: wrap every sentence in ``<S>`` … ``</S>`` (VETE §4.1); then
        even the empty string has two tokens.
      max_tokens: truncate to this many word tokens (before wrapping); ``None``
        keeps all.
      vocabulary_file: optional path of the same vocabulary, one token per line;
        when given the lookup table reads it (``tf.lookup.TextFileInitializer``),
        so ``tf.saved_model.save`` stores it as an asset. Not part of the config.

    Call args:
      inputs: ``tf.string`` [B].

    Returns:
      ``int64`` [B, T] ids, T = longest sentence in the batch (0 for an all-empty
      batch without boundary tokens).

    Raises:
      ValueError: bad vocabulary (duplicates, whitespace, missing boundary tokens)
        or ``num_oov_buckets < 1``, ``max_tokens < 1``; a vocabulary file that
        differs from ``vocabulary``.

    Example:
      >>> preprocessor = TextPreprocessor(["<S>", "</S>", "a", "dog", "runs"], num_oov_buckets=1)
      >>> preprocessor(tf.constant(["A dog runs.", "a zebra"])).numpy().tolist()
      [[2, 4, 5, 6, 1, 3], [2, 4, 1, 3, 0, 0]]
      >>> preprocessor.vocabulary_size, preprocessor.boundary_ids
      (7, (2, 3))
    """

    def __init__(
        self,
        vocabulary,
        num_oov_buckets: int = 1,
        lowercase: bool = True,
        boundary_tokens: bool = True,
        max_tokens: int | None = None,
        vocabulary_file: str | None = None,
        **kwargs,
    ):
        kwargs.setdefault("dtype", "string")
        super().__init__(**kwargs)
        vocabulary = [str(t) for t in vocabulary]
        if num_oov_buckets < 1:
            raise ValueError(f"TextPreprocessor: num_oov_buckets must be >= 1, got {num_oov_buckets}.")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"TextPreprocessor: max_tokens must be >= 1 or None, got {max_tokens}.")
        if len(set(vocabulary)) != len(vocabulary):
            dup = [t for t, c in Counter(vocabulary).items() if c > 1][:5]
            raise ValueError(f"TextPreprocessor: vocabulary has duplicate tokens {dup}.")
        bad = [t for t in vocabulary if not t or any(ch.isspace() for ch in t)][:5]
        if bad:
            raise ValueError(f"TextPreprocessor: vocabulary tokens must be non-empty, no whitespace: {bad}.")
        if boundary_tokens and not {BOS, EOS} <= set(vocabulary):
            raise ValueError("TextPreprocessor: boundary_tokens=True needs '<S>' and '</S>' in the vocabulary.")
        self.vocabulary = vocabulary
        self.num_oov_buckets = int(num_oov_buckets)
        self.lowercase = bool(lowercase)
        self.boundary_tokens = bool(boundary_tokens)
        self.max_tokens = None if max_tokens is None else int(max_tokens)
        if vocabulary_file is not None:
            on_disk = read_vocabulary(vocabulary_file)
            if on_disk != vocabulary:
                raise ValueError(f"TextPreprocessor: {vocabulary_file} differs from the vocabulary.")
            initializer = tf.lookup.TextFileInitializer(
                str(vocabulary_file),
                key_dtype=tf.string,
                key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
                value_dtype=tf.int64,
                value_index=tf.lookup.TextFileIndex.LINE_NUMBER,
            )
        else:
            initializer = tf.lookup.KeyValueTensorInitializer(
                tf.constant(vocabulary if vocabulary else [""], dtype=tf.string),
                tf.range(max(len(vocabulary), 1), dtype=tf.int64),
            )
        self._vocab_len = len(vocabulary)
        self.table = tf.lookup.StaticVocabularyTable(initializer, self.num_oov_buckets)
        self.built = True

    @property
    def vocabulary_size(self) -> int:
        """Number of ids including padding and OOV buckets."""
        return 1 + self.num_oov_buckets + len(self.vocabulary)

    @property
    def boundary_ids(self) -> tuple[int, int] | None:
        """``(id of <S>, id of </S>)`` when ``boundary_tokens`` is set, else ``None``."""
        if not self.boundary_tokens:
            return None
        offset = 1 + self.num_oov_buckets
        return offset + self.vocabulary.index(BOS), offset + self.vocabulary.index(EOS)

    def flat_ids(self, inputs) -> tuple[tf.Tensor, tf.Tensor]:
        """The word ids without padding or boundary tokens, as a ragged batch's parts.

        Args:
          inputs: ``tf.string`` [B].

        Returns:
          ``(ids, row_splits)``: ``int64`` [total tokens] in the module's id layout (never
          0) and ``int64`` [B + 1]; sentence b's ids are ``ids[row_splits[b]:row_splits[b+1]]``
          (after ``max_tokens`` truncation). ``call`` wraps them in ``<S>`` … ``</S>`` and
          pads; the exported bag-of-words tower pools them directly (``grounded_text.serving.export``).
        """
        tokens = tokenize(inputs, self.lowercase)
        if self.max_tokens is not None:
            tokens = tokens[:, : self.max_tokens]
        raw = self.table.lookup(tokens.flat_values)
        v = tf.constant(self._vocab_len, tf.int64)
        ids = tf.where(raw < v, raw + (1 + self.num_oov_buckets), raw - v + 1)
        return ids, tokens.row_splits

    def call(self, inputs):
        ids, row_splits = self.flat_ids(inputs)
        ids = tf.RaggedTensor.from_row_splits(ids, row_splits, validate=False)
        if self.boundary_tokens:
            bos, eos = self.boundary_ids
            ids = tf_text.pad_along_dimension(
                ids, axis=1, left_pad=tf.constant([bos], tf.int64), right_pad=tf.constant([eos], tf.int64)
            )
        return ids.to_tensor(default_value=PADDING_ID)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor((inputs.shape[0], None), dtype="int64")

    @classmethod
    def example(cls) -> LayerExample:
        """Small constructor arguments and an input batch, for the shared layer tests."""
        return LayerExample({"vocabulary": build_vocabulary(examples.CAPTIONS), "num_oov_buckets": 3, "max_tokens": 5},
                            examples.captions(), output_dtype="int64", trainable=False)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary=list(self.vocabulary),
            num_oov_buckets=self.num_oov_buckets,
            lowercase=self.lowercase,
            boundary_tokens=self.boundary_tokens,
            max_tokens=self.max_tokens,
        )
        return config
