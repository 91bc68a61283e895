"""The fast serving path of the exported bag-of-words tower gives the same tokens, ids and
embeddings as a straightforward reference of the original tokenisation + lookup + mean."""

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from grounded_text.config.schema import ModelConfig, TextConfig
from grounded_text.layers import build_vocabulary
from grounded_text.layers.text_preprocessor import BOS, EOS, normalize, tokenize, tokenize_reference
from grounded_text.models import build_model
from grounded_text.serving.export import BagOfWordsTowerModule, bag_of_words_chain, export_text_tower, find_preprocessor

# Its tests share a module-scoped fixture: one pytest-xdist worker builds it once (setup.cfg).
pytestmark = pytest.mark.xdist_group("test_export_speed")

# Non-ASCII, invalid UTF-8, case and compatibility forms, empty and whitespace-only rows,
# mixed into batches with ASCII rows (the partitioned path).
ODD = ["Café NAÏVE ﬁne Ⅻ", "a dog\xa0runs", b"bad \xff\xfe bytes", "", "   \t", "日本語 テキスト", "İstanbul ß ẞ",
       "ＦＵＬＬ width", "A DOG RUNS.", "don't stop-it 3.5 ...", "😀 emoji😀dog", "\x00\x01 ctrl \x7f"]


def reference_ids(sentences, vocabulary, num_oov_buckets, max_tokens=None):
    """The original id layout, computed independently of the lookup table: tf-text
    tokenisation on every row (no ASCII shortcut), <S> … </S> wrapping, then a Python dict
    (1 + k + vocabulary index) and Fingerprint64 buckets 1..k for unknown tokens."""
    index = {t: 1 + num_oov_buckets + i for i, t in enumerate(vocabulary)}
    rows = [[BOS] + [t.decode("utf-8") for t in row][:max_tokens] + [EOS]
            for row in tokenize_reference(tf.constant(sentences)).to_list()]
    unknown = sorted({t for row in rows for t in row if t not in index})
    if unknown:
        index.update(zip(unknown, (1 + tf.strings.to_hash_bucket_fast(unknown, num_oov_buckets).numpy()).tolist()))
    return [[index[t] for t in row] for row in rows]


def reference_embeddings(ids, table):
    """Mean of the rows (float64), L2-normalised."""
    table = np.asarray(table, np.float64)
    means = np.stack([table[r].mean(axis=0) for r in ids])
    return means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)


def test_ascii_rows_normalise_as_unicode_case_folding():
    chars = [chr(i) for i in range(128)]
    for lowercase in (True, False):
        got = normalize(tf.constant(chars), lowercase).numpy().tolist()
        ref = tf.strings.unicode_transcode(chars, "UTF-8", "UTF-8", errors="replace")
        ref = (tf_text.case_fold_utf8(ref) if lowercase else tf_text.normalize_utf8(ref, "NFKC")).numpy().tolist()
        assert got == ref
    mixed = ["ABC", *ODD, "Dog"]
    for lowercase in (True, False):
        assert tokenize(tf.constant(mixed), lowercase).to_list() == tokenize_reference(tf.constant(mixed),
                                                                                      lowercase).to_list()


@pytest.fixture(scope="module")
def real(data_dir, tmp_path_factory):
    from grounded_text.benchmarks.runs import benchmark_sentences

    token_file = data_dir / "flickr8k" / "Flickr8k_text" / "Flickr8k.token.txt"
    captions = [ln.split("\t", 1)[1] for ln in token_file.read_text(encoding="utf-8").splitlines() if "\t" in ln]
    vocabulary = build_vocabulary(captions, max_size=20000)
    sentences = benchmark_sentences(data_dir / "sts") + ODD
    out = {"vocabulary": vocabulary, "sentences": sentences}
    for k in (1, 3):
        gm = build_model(ModelConfig(embedding_dim=64), TextConfig(num_oov_buckets=k), vocabulary, feature_dim=8,
                         seed=0)
        path = export_text_tower(gm.text_tower, tmp_path_factory.mktemp("export") / f"oov{k}",
                                 {"model": {"name": "vete_bow"}})
        out[k] = (gm.text_tower, path)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 3])
def test_ids_and_embeddings_equal_reference_on_sts_and_sick(real, k):
    tower, path = real[k]
    sentences = real["sentences"]
    pre = find_preprocessor(tower)
    assert pre.num_oov_buckets == k
    ref = reference_ids(sentences, real["vocabulary"], k)
    # The ragged ids the export pools: word ids + the boundary ids added per row.
    flat, splits = pre.flat_ids(tf.constant(sentences))
    bos, eos = pre.boundary_ids
    got = [[bos, *r, eos] for r in tf.RaggedTensor.from_row_splits(flat, splits).to_list()]
    assert got == ref
    # The Keras layer (training path) pads the same ids.
    dense = pre(tf.constant(sentences)).numpy()
    assert [row[row != 0].tolist() for row in dense] == ref
    assert sum(len(r) - 2 for r in ref) > 300_000  # the whole list, not a few rows
    if k > 1:
        assert len({i for r in ref for i in r if 1 <= i <= k}) > 1  # several OOV buckets in use

    loaded = tf.saved_model.load(str(path))
    table = tower.get_layer("bow_encoder").embedding.embeddings.numpy()
    want = reference_embeddings(ref, table)
    got_e = np.concatenate([loaded(tf.constant(sentences[i:i + 4096])).numpy()
                            for i in range(0, len(sentences), 4096)])
    assert got_e.dtype == np.float32 and got_e.shape == want.shape
    np.testing.assert_allclose(got_e, want, atol=1e-6, rtol=0)
    keras_e = tower(tf.constant(sentences)).numpy()  # the padded Keras path
    np.testing.assert_allclose(got_e, keras_e, atol=1e-6, rtol=0)
    # One concrete function, no training branch; training=True accepted and the same.
    assert len(loaded.__call__.concrete_functions) == 1
    np.testing.assert_array_equal(loaded(tf.constant(sentences[:64]), training=True).numpy(), got_e[:64])
    sig = loaded.signatures["serving_default"](sentences=tf.constant(sentences[:64]))["embeddings"].numpy()
    np.testing.assert_array_equal(sig, got_e[:64])


def test_only_plain_float32_bag_of_words_towers_take_the_fast_path():
    caps = ["a dog runs", "a cat sleeps"]
    bow = build_model(ModelConfig(embedding_dim=8), TextConfig(), build_vocabulary(caps), feature_dim=4, seed=0)
    assert bag_of_words_chain(bow.text_tower) is not None
    assert isinstance(BagOfWordsTowerModule(bow.text_tower), BagOfWordsTowerModule)
    gru = build_model(ModelConfig(name="vete_rnn", embedding_dim=8), TextConfig(), build_vocabulary(caps),
                      feature_dim=4, seed=0)
    assert bag_of_words_chain(gru.text_tower) is None
    # A tower built under mixed precision (the GPU path) computes in float16: it keeps the
    # generic export (same float32 output), whose CPU fallback tests/test_distribute.py runs.
    keras.mixed_precision.set_global_policy("mixed_float16")
    half = build_model(ModelConfig(embedding_dim=8), TextConfig(), build_vocabulary(caps), feature_dim=4, seed=0)
    keras.mixed_precision.set_global_policy("float32")
    assert bag_of_words_chain(half.text_tower) is None


def test_side_by_side_loop_times_each_encoder_on_its_own():
    import time

    from grounded_text.benchmarks.throughput import _side_by_side_loop

    calls = {"slow": [], "fast": []}

    def encoder(name, seconds):
        def run(batch):
            calls[name].append(tuple(batch))
            time.sleep(seconds)
        return run

    rates, ratios = _side_by_side_loop({"slow": encoder("slow", 0.004), "fast": encoder("fast", 0.002)},
                                       ["a", "b", "c"], [2], repeats=2, min_seconds=0.05)
    assert calls["slow"] == calls["fast"]  # the same batches, interleaved
    assert rates["slow"]["2"]["n"] == 2 and rates["slow"]["2"]["median"] <= 2 / 0.004
    assert 0.3 < ratios["fast"]["2"]["median"] < 0.8  # slow / fast ≈ 0.5
