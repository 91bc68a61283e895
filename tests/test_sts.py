import numpy as np
import pytest
from scipy import stats

from grounded_text.data.sts import read_sick, read_sts_benchmark, read_sts_year, sts_year_dirs
from grounded_text.evaluation.sts import correlations, cosine_rows, evaluate_sts, format_markdown

# A toy encoder: sentence -> fixed 2-d vector, so cosine similarities are known by hand.
VECS = {
    "a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0], "d": [1.0, -1.0],
    "e": [2.0, 0.0], "f": [-1.0, 0.0], "caf\ufffd": [0.0, 3.0],
}


def encoder(sentences):
    return np.array([VECS[s] for s in sentences], dtype=np.float32)


def make_fixture(root):
    y = root / "STS99-en-test"
    y.mkdir(parents=True)
    # Pairs: cos(a,e)=1, cos(a,c)=.7071, cos(b,d)=-.7071, cos(a,f)=-1, (blank gold) cos(a,b)=0
    (y / "STS.input.toy.txt").write_bytes(
        b"a\te\nc\ta\nb\td\tignored extra column\na\tf\na\tb\ncaf\xff\tb\n"
    )
    (y / "STS.gs.toy.txt").write_text("5\n3.5\n1\n0.5\n\n4\n")
    (y / "STS.gs.withheld.txt").write_text("1\n2\n")  # no input file -> skipped, warned
    (y / "STS.gs.ALL.txt").write_text("1\n")  # aggregate, not a subset
    (root / "not-a-year").mkdir()
    return y


def test_year_reader_blank_gold_missing_input_and_bad_utf8(tmp_path):
    y = make_fixture(tmp_path)
    assert list(sts_year_dirs(tmp_path)) == ["STS99"]
    with pytest.warns(UserWarning, match="withheld"):
        subsets = read_sts_year(y)
    assert list(subsets) == ["toy"]
    toy = subsets["toy"]
    assert len(toy) == 5  # the blank gold line dropped
    assert toy.sentences1[4] == "caf\ufffd"
    np.testing.assert_array_equal(toy.scores, [5, 3.5, 1, 0.5, 4])


def test_evaluator_reproduces_hand_computed_correlations(tmp_path):
    make_fixture(tmp_path)
    with pytest.warns(UserWarning):
        report = evaluate_sts(encoder, tmp_path)
    r = report["STS99"]["subsets"]["toy"]
    sims = np.array([1.0, 1 / np.sqrt(2), -1 / np.sqrt(2), -1.0, 1.0])  # by hand
    gold = np.array([5, 3.5, 1, 0.5, 4])
    assert r["n"] == 5
    assert r["pearson"] == pytest.approx(stats.pearsonr(sims, gold)[0], abs=1e-6)
    # Spearman by hand: ranks of sims [4.5, 3, 2, 1, 4.5] vs gold [5, 3, 2, 1, 4]
    assert r["spearman"] == pytest.approx(stats.pearsonr([4.5, 3, 2, 1, 4.5], [5, 3, 2, 1, 4])[0], abs=1e-9)
    assert report["STS99"]["pearson"]["mean"] == pytest.approx(r["pearson"])
    assert "STS99 | toy | 5" in format_markdown(report)


def test_mean_and_weighted_mean(tmp_path):
    y = tmp_path / "STS98-en-test"
    y.mkdir()
    (y / "STS.input.x.txt").write_text("a\te\nc\ta\nb\td\n")
    (y / "STS.gs.x.txt").write_text("5\n3\n1\n")
    (y / "STS.input.y.txt").write_text("a\te\na\tf\n")
    (y / "STS.gs.y.txt").write_text("1\n5\n")
    rep = evaluate_sts(encoder, tmp_path)["STS98"]
    px, py = rep["subsets"]["x"]["pearson"], rep["subsets"]["y"]["pearson"]
    assert py == pytest.approx(-1.0)
    assert rep["pearson"]["mean"] == pytest.approx((px + py) / 2)
    assert rep["pearson"]["wmean"] == pytest.approx((3 * px + 2 * py) / 5)


def test_cosine_zero_rows_and_undefined_correlation():
    np.testing.assert_array_equal(cosine_rows(np.zeros((2, 2)), np.ones((2, 2))), [0, 0])
    with pytest.warns(UserWarning, match="undefined"):
        assert correlations(np.ones(4), np.arange(4))["pearson"] is None


def test_real_sts_readers(data_dir):
    sts = data_dir / "sts"
    assert set(sts_year_dirs(sts)) >= {"STS12", "STS13", "STS16"}
    s12 = read_sts_year(sts / "STS12-en-test")
    assert sorted(s12) == ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"]
    assert sum(len(p) for p in s12.values()) == 3108
    with pytest.warns(UserWarning, match="SMT"):
        s13 = read_sts_year(sts / "STS13-en-test")
    assert sorted(s13) == ["FNWN", "OnWN", "headlines"]
    s16 = read_sts_year(sts / "STS16-en-test")
    assert {k: len(v) for k, v in s16.items()} == {
        "answer-answer": 254, "headlines": 249, "plagiarism": 230, "postediting": 244, "question-question": 209,
    }
    assert len(read_sts_benchmark(sts, "test")) == 1379
    assert len(read_sts_benchmark(sts, "train")) == 5749
    sick = read_sick(sts, "test")
    assert len(sick) == 4927 and sick.scores.min() >= 1 and sick.scores.max() <= 5
