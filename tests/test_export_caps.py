"""The export's input limits (``cap_sentences``: 16 KiB, 512 words) give, row for row, the same
strings as their first implementation: two passes, each splitting off the rows over one limit
(``dynamic_partition``), cutting them (bytes: ``substr`` + transcoding with U+FFFD; words: a
RaggedTensor split, its first words joined by single spaces) and stitching them back."""

import numpy as np
import pytest
import tensorflow as tf

from grounded_text.serving.export import MAX_SENTENCE_BYTES, MAX_SENTENCE_WORDS, cap_sentences


def two_pass_caps(sentences, max_bytes, max_words):
    """The first implementation of the limits (the reference)."""
    sentences = tf.ensure_shape(tf.constant(sentences, tf.string), [None])

    def cut(rows_mask, fn):
        part = tf.cast(rows_mask, tf.int32)
        index = tf.dynamic_partition(tf.range(tf.size(sentences)), part, 2)
        texts = tf.dynamic_partition(sentences, part, 2)
        return tf.dynamic_stitch(index, [texts[0], fn(texts[1])])

    sentences = cut(tf.strings.length(sentences) > max_bytes, lambda s: tf.strings.unicode_transcode(
        tf.strings.substr(s, 0, max_bytes), "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD))

    def cut_words(s):
        words = tf.strings.split(s)
        joined = tf.strings.reduce_join(words[:, :max_words], axis=1, separator=" ")
        return tf.where(words.row_lengths() > max_words, joined, s)

    return cut(tf.strings.length(sentences) >= 2 * max_words + 1, cut_words).numpy().tolist()


def odd_rows(max_bytes, max_words):
    """Rows at, just under and just over both limits, with every whitespace byte the split
    knows, runs of it at both ends, invalid UTF-8 and multi-byte characters cut in half."""
    w = max_words
    rows = [b"", b" ", b"\t\n\x0b\x0c\r ", b"a", b"a dog runs", "caf\u00e9 \U0001f436".encode()]
    for n in (w - 1, w, w + 1, 2 * w, 3 * w + 7):
        rows += [b" ".join([b"x"] * n), b" ".join([b"x"] * n) + b" ", b"  " + b"\t\n".join([b"ab"] * n) + b"\x0b\r",
                 b"\x0c".join([b"w%d" % i for i in range(n)]), b" \xff".join([b"\xc3\xa9"] * n)]
    for n in (max_bytes - 2, max_bytes - 1, max_bytes, max_bytes + 1, max_bytes + 2, 2 * max_bytes):
        rows += [b"y" * n, b"\xe2\x82\xac" * (n // 3) + b"z" * (n % 3), b"\xff" * n, b"a " * (n // 2) + b"b" * (n % 2)]
        rows += [b"\xf0\x9f\x90\xb6" * (n // 4 + 1), b"\xe2\x82" + b"q" * n]
    return rows


@pytest.mark.parametrize("max_bytes, max_words", [(MAX_SENTENCE_BYTES, MAX_SENTENCE_WORDS), (20, 4), (9, 6), (1, 1)])
def test_caps_equal_the_two_pass_reference(max_bytes, max_words):
    rows = odd_rows(max_bytes, max_words)
    rng = np.random.default_rng(0)
    batches = [rows, [rows[i] for i in rng.permutation(len(rows))], rows[:1], rows[-1:], [b"a dog"] * 3, []]
    cap = tf.function(lambda s: cap_sentences(s, max_bytes, max_words),
                      input_signature=[tf.TensorSpec([None], tf.string)])
    for batch in batches:
        expected = two_pass_caps(batch, max_bytes, max_words)
        assert cap(tf.constant(batch, tf.string)).numpy().tolist() == expected
        assert cap_sentences(tf.constant(batch, tf.string), max_bytes, max_words).numpy().tolist() == expected


def test_caps_keep_rows_within_the_limits_and_cut_the_others():
    huge = "dog " * 600 + "a " * 100_000
    out = [s.decode() for s in cap_sentences(tf.constant(["a  dog\truns", huge, "\u00e9" * 9000, "x" * 20000])).numpy()]
    assert out[0] == "a  dog\truns"  # within both limits: unchanged, whitespace and all
    assert out[1] == " ".join(["dog"] * 512)
    assert out[2] == "\u00e9" * 8192  # 16,384 bytes: a whole number of two-byte characters
    assert out[3] == "x" * 16384
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"is not compatible with expected shape \[\?\]"):
        cap_sentences(tf.constant([["a", "b"]]))
