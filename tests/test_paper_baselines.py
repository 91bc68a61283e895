"""The papers' baselines: each loss against a NumPy reading of the paper on a fixed
batch, and every baseline trains and exports on a real slice."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
from grounded_text.layers.text_preprocessor import build_vocabulary
from grounded_text.losses.baselines import (
    caption_to_image_ranking,
    fit_pca,
    image_regression_loss,
    next_token_cross_entropy,
    same_image_partner,
)
from grounded_text.models.registry import build_model, resolve_config
from grounded_text.papers.presets import BASELINES

CAPS = ["A dog runs on the beach .", "A dog jumps .", "Two kids play in the snow", "a cat sleeps",
        "A man rides a bike", "a black dog swims", "two girls on a bench", "a red car"]
IDS = np.array([0, 0, 1, 1, 2, 2, 3, 3], np.int64)
D = 6
FEATURES = np.random.default_rng(0).normal(size=(8, D)).astype(np.float32)
PROBE = ["a dog runs on the beach", "", "zebra unicorn", "café 🐶 naïve"]


def _batch():
    return {"caption": tf.constant(CAPS), "image_features": tf.constant(FEATURES), "image_id": tf.constant(IDS)}


def _build(name, **over):
    model = ModelConfig(name=name, **over)
    cfg = resolve_config(ExperimentConfig(model=model))
    return build_model(cfg.model, cfg.text, build_vocabulary(CAPS), feature_dim=D, seed=0, train_captions=CAPS)


def _layer(gm, cls_name):
    return next(layer for m in (gm.train_model, gm.text_tower)
                for layer in m._flatten_layers(include_self=False, recursive=True) if type(layer).__name__ == cls_name)


def _ids(gm, sentences):
    return _layer(gm, "TextPreprocessor")(tf.constant(sentences)).numpy()


# ----------------------------------------------------------------------------- NumPy readings


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _np_gru(gru, x_seq, h0, mask):
    """Cho et al. (2014) GRU, Keras' reset-after form: z, r gates; the candidate resets the
    recurrent term after its matrix product. Returns the states [T, u] (held at padding)."""
    kernel, rec, bias = (w.numpy().astype(np.float64) for w in gru.weights)
    u = rec.shape[0]
    b_in, b_rec = bias if bias.ndim == 2 else (bias, np.zeros_like(bias))
    h, out = h0.astype(np.float64), []
    for x, valid in zip(x_seq, mask):
        xi = x @ kernel + b_in
        hr = h @ rec + b_rec
        z = _sigmoid(xi[:u] + hr[:u])
        r = _sigmoid(xi[u:2 * u] + hr[u:2 * u])
        cand = np.tanh(xi[2 * u:] + r * hr[2 * u:])
        new = z * h + (1 - z) * cand
        h = new if valid else h
        out.append(h)
    return np.array(out)


def _np_lm_loss_and_final(lm, ids, h0s):
    """Mean over the valid next tokens of −log p(w_{t+1} | w_≤t) (softmax over the vocabulary),
    and the final hidden states."""
    emb = lm.embedding.embeddings.numpy().astype(np.float64)
    w_out, b_out = (w.numpy().astype(np.float64) for w in lm.logits.weights)
    nll, finals = [], []
    for row, h0 in zip(ids, h0s):
        states = _np_gru(lm.rnn.cell if hasattr(lm.rnn, "cell") else lm.rnn, emb[row], h0, row != 0)
        finals.append(states[-1])
        for t in range(len(row) - 1):
            if row[t + 1] == 0:
                continue
            logits = states[t] @ w_out + b_out
            logp = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
            nll.append(-logp[row[t + 1]])
    return float(np.mean(nll)), np.array(finals)


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


# ----------------------------------------------------------------------------- the losses


def test_next_token_cross_entropy_is_the_mean_negative_log_likelihood_of_valid_targets():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 4, 5)).astype(np.float32)
    targets = np.array([[3, 1, 4, 0], [2, 0, 0, 0]])
    expected = []
    for b in range(2):
        for t in range(4):
            if targets[b, t]:
                p = np.exp(logits[b, t]) / np.exp(logits[b, t]).sum()
                expected.append(-np.log(p[targets[b, t]]))
    assert float(next_token_cross_entropy(logits, targets)) == pytest.approx(np.mean(expected), rel=1e-5)


@pytest.mark.parametrize("name", ["pure_text_rnn", "pin_model_a"])
def test_language_models_loss_and_embedding_follow_the_numpy_gru(name):
    """PureTextRnn: h_0 = 0. PinModelA: h_0 = W_I v + b_I in training, the zero image (h_0 =
    b_I) in the exported tower. The sentence vector is the final state, L2-normalised."""
    gm = _build(name, embedding_dim=6, encoder={"word_dim": 5})
    lm = _layer(gm, "RecurrentLanguageModel")
    ids = _ids(gm, CAPS)
    if name == "pin_model_a":
        w_i, b_i = (w.numpy().astype(np.float64) for w in _layer(gm, "Dense").weights)
        assert _layer(gm, "Dense").name == "image_to_state"
        h0_train, h0_test = FEATURES.astype(np.float64) @ w_i + b_i, np.tile(b_i, (len(PROBE), 1))
    else:
        h0_train, h0_test = np.zeros((8, 6)), np.zeros((len(PROBE), 6))
    expected, _ = _np_lm_loss_and_final(lm, ids, h0_train)
    assert float(gm.train_model(_batch(), training=False)) == pytest.approx(expected, rel=1e-4)
    _, finals = _np_lm_loss_and_final(lm, _ids(gm, PROBE), h0_test)
    np.testing.assert_allclose(gm.text_tower(tf.constant(PROBE)).numpy(), _unit(finals), atol=1e-5)


def test_word_level_loss_is_pearson_over_word_image_pairs():
    """VETE §5.4: each word of a caption with its caption's image (§3's Pearson over the
    matching pairs and mismatched pairs that join a word to another image)."""
    gm = _build("vete_bow_word", embedding_dim=4)
    pre = _layer(gm, "TextPreprocessor")
    ids = _ids(gm, CAPS)
    emb = _layer(gm, "BagOfWordsEncoder").embedding.embeddings.numpy().astype(np.float64)
    w, b = (x.numpy().astype(np.float64) for x in gm.image_tower.get_layer("image_projection").weights)
    images = FEATURES @ w + b
    not_words = {0} | {1 + pre.num_oov_buckets + pre.vocabulary.index(t) for t in ("<S>", "</S>")}
    words, rows = [], []
    for c, row in enumerate(ids):
        for tok in row:
            if tok not in not_words:
                words.append(emb[tok])
                rows.append(c)
    words, rows = np.array(words), np.array(rows)
    m = len(rows)
    assert m == sum(len(c.split()) for c in CAPS)  # every caption word, nothing else
    loss_layer = _layer(gm, "PearsonCorrelationLoss")
    perm = loss_layer.permutation(m, training=False).numpy()
    img_of = IDS[rows]

    def cos(a, b):
        return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

    sims = [cos(words[j], images[rows[j]]) for j in range(m)]
    labels = [1.0] * m
    for i in range(m):  # word p[i] meets the image of the next word in p's order from another image
        k = next((k for k in range(1, m) if img_of[perm[(i + k) % m]] != img_of[perm[i]]), 1)
        sims.append(cos(words[perm[i]], images[rows[perm[(i + k) % m]]]))
        labels.append(-1.0)
    expected = -np.corrcoef(sims, labels)[0, 1]
    assert float(gm.train_model(_batch(), training=False)) == pytest.approx(expected, abs=1e-5)


def test_seq_regression_and_pca():
    """SEQ: squared error of W T + b against the image; embedding = PCA to d_t of
    [T, l2(W T + b)] (principal axes = top eigenvectors of the covariance)."""
    gm = _build("seq", embedding_dim=4, word_vectors="none")
    t_layer = _layer(gm, "BagOfWordsEncoder")
    t = t_layer(tf.constant(_ids(gm, CAPS))).numpy().astype(np.float64)
    w, b = (x.numpy().astype(np.float64) for x in _layer(gm, "Dense").weights)
    pred = t @ w + b
    expected = np.mean(np.sum((pred - FEATURES) ** 2, axis=1)) / D
    assert float(gm.train_model(_batch(), training=False)) == pytest.approx(expected, rel=1e-5)
    assert float(image_regression_loss(pred, FEATURES)) == pytest.approx(expected, rel=1e-5)

    gm.refit(CAPS)
    joint = np.concatenate([t, _unit(pred)], axis=1)
    centred = joint - joint.mean(axis=0)
    vals, vecs = np.linalg.eigh(centred.T @ centred / len(joint))
    top = vecs[:, np.argsort(vals)[::-1][:4]]
    projected = centred @ top
    got = gm.text_tower(tf.constant(CAPS)).numpy()
    # Each principal axis is defined up to its sign.
    signs = np.sign(np.sum(got * _unit(projected), axis=0))
    np.testing.assert_allclose(got, _unit(projected) * signs, atol=1e-4)
    mean, comp = fit_pca(joint, 4)
    np.testing.assert_allclose(comp.T @ comp, np.eye(4), atol=1e-5)


def test_cap2img_is_the_max_margin_ranking_over_other_images():
    rng = np.random.default_rng(2)
    x, v = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    ids = np.array([7, 7, 8, 9])
    s = _unit(x) @ _unit(v).T
    expected = 0.0
    for i in range(4):
        for k in range(4):
            if ids[k] != ids[i]:
                expected += max(0.0, 0.3 - s[i, i] + s[i, k])
    got = caption_to_image_ranking(x.astype(np.float32), v.astype(np.float32), ids, margin=0.3)
    assert float(got) == pytest.approx(expected / 4, rel=1e-5)


def _np_cap2cap(gm, ids):
    g = _layer(gm, "RNNEncoder")(tf.constant(ids)).numpy().astype(np.float64)
    init = next(layer for layer in gm.train_model.layers if layer.name == "cap2cap_initial_state")
    q, qb = (w.numpy().astype(np.float64) for w in init.weights)
    partner = [1, 0, 3, 2, 5, 4, 7, 6]  # the other caption of each image (IDS)
    expected, _ = _np_lm_loss_and_final(_layer(gm, "RecurrentLanguageModel"), ids[partner], np.tanh(g @ q + qb))
    return expected


GS_SMALL = {"embedding_dim": 4, "word_vectors": "none",
            "encoder": {"trainable_embeddings": True, "units": 3, "decoder_word_dim": 5}}


def test_cap2cap_decoder_predicts_another_caption_of_the_same_image():
    """Kiela et al. 2018 Cap2Cap: the decoder, started from tanh(Q G(s) + q), is scored on
    the next tokens of another caption of s's image."""
    np.testing.assert_array_equal(same_image_partner(tf.constant([5, 5, 6, 6, 7])).numpy(), [1, 0, 3, 2, 4])
    gm = _build("gs_cap", **GS_SMALL)
    expected = _np_cap2cap(gm, _ids(gm, CAPS))
    assert float(gm.train_model(_batch(), training=False)) == pytest.approx(expected, rel=1e-4)


def test_cap2both_is_the_sum_and_the_ground_sent_tower_concatenates_t_and_g():
    gm = _build("gs_both", **GS_SMALL)
    ids = _ids(gm, CAPS)
    g = _layer(gm, "RNNEncoder")(tf.constant(ids)).numpy().astype(np.float64)
    p, pb = (w.numpy().astype(np.float64) for w in
             next(layer for layer in gm.train_model.layers if layer.name == "cap2img_projection").weights)
    x, v = _unit(g @ p + pb), _unit(FEATURES.astype(np.float64))
    s = x @ v.T
    l_img = sum(max(0.0, 0.2 - s[i, i] + s[i, k]) for i in range(8) for k in range(8) if IDS[k] != IDS[i]) / 8
    total = float(gm.train_model(_batch(), training=False))
    assert total == pytest.approx(l_img + _np_cap2cap(gm, ids), rel=1e-4)
    out = gm.text_tower(tf.constant(PROBE)).numpy()
    t = _layer(gm, "BagOfWordsEncoder")(tf.constant(_ids(gm, PROBE))).numpy()
    gp = _layer(gm, "RNNEncoder")(tf.constant(_ids(gm, PROBE))).numpy()
    np.testing.assert_allclose(out, _unit(np.concatenate([_unit(t), _unit(gp)], axis=1)), atol=1e-5)


# ----------------------------------------------------------------------------- the real slice


SLICE_SIZES = {"pure_text_rnn": {"embedding_dim": 8, "encoder": {"word_dim": 8}},
               "pin_model_a": {"embedding_dim": 8, "encoder": {"word_dim": 8}},
               "vete_bow_word": {"embedding_dim": 8},
               "seq": {},
               **{n: {"encoder": {"units": 8, "decoder_word_dim": 8}} for n in ("gs_img", "gs_cap", "gs_both")}}


@pytest.fixture(scope="module")
def trained_baselines(data_dir, tmp_path_factory):
    """Every baseline trained for one epoch on 64 real training images with its record's
    sampler and exported; the exports embedded in-process and by ``hub.load`` in one fresh
    process (one TensorFlow start-up for all, not one per baseline)."""
    from grounded_text.training.trainer import train

    root = tmp_path_factory.mktemp("baselines")
    runs = {}
    for name in BASELINES:
        cfg = ExperimentConfig(
            data=DataConfig(max_train_images=64, max_dev_images=16, batch_size=32),
            model=ModelConfig(name=name, **SLICE_SIZES[name]),
            train=TrainConfig(epochs=1, select_on="val_loss"),
        )
        metrics = train(cfg, data_dir, root / name, evaluate=False, verbose=0)
        export = str(root / name / "export")
        runs[name] = {"metrics": metrics, "export": export,
                      "in_process": tf.saved_model.load(export)(tf.constant(PROBE)).numpy()}
    script = textwrap.dedent(
        f"""
        import json, tensorflow as tf, tensorflow_text, tensorflow_hub as hub
        exports = {({n: r["export"] for n, r in runs.items()})!r}
        print(json.dumps({{n: hub.load(p)(tf.constant({PROBE!r})).numpy().tolist() for n, p in exports.items()}}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    fresh = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, run in runs.items():
        run["fresh_process"] = np.array(fresh[name], dtype=np.float32)
    return runs


@pytest.mark.slow
@pytest.mark.xdist_group("trained_baselines")  # one worker trains them all once
@pytest.mark.parametrize("name", BASELINES)
def test_every_baseline_trains_and_exports_on_a_real_slice(name, trained_baselines):
    """One epoch on 64 real training images with the record's sampler; the export loads in a
    fresh process and gives the in-process vectors."""
    run = trained_baselines[name]
    assert run["metrics"]["data"]["train_images"] == 64
    assert all(np.isfinite(run["metrics"]["history"]["loss"]))
    # A healthy run stays far from the collapse guard's limit (0.1 % of the probe's start).
    assert run["metrics"]["collapse_guard"]["lowest_relative_spread"] > 0.1, run["metrics"]["collapse_guard"]
    values = run["fresh_process"]
    np.testing.assert_allclose(values, run["in_process"], atol=1e-5)
    assert np.isfinite(values).all() and values.shape[0] == len(PROBE)
    np.testing.assert_allclose(np.linalg.norm(values[[0, 2]], axis=1), 1.0, atol=1e-4)


# ----------------------------------------------------------------------------- the comparison


def test_sts_benchmark_by_genre(data_dir):
    from grounded_text.data.sts import read_sts_benchmark

    parts = read_sts_benchmark(data_dir / "sts", "test").by_genre()
    assert {g: len(p) for g, p in parts.items()} == {"news": 500, "captions": 625, "forum": 254}
    assert parts["captions"].name == "STSBenchmark/test/captions"


def _enc(r, sts14=None, sts15=None, transfer=None):
    """A suite report node: STS12 (mean, MSRvid) at r, STS14/STS15 (mean, images) when
    given as (mean, images), same-image r, SentEval results when given."""
    sts = {"STS12": {"pearson": {"mean": r}, "spearman": {"mean": r}, "subsets": {
        "MSRvid": {"pearson": r, "spearman": r}}}}
    for year, v in (("STS14", sts14), ("STS15", sts15)):
        if v is not None:
            sts[year] = {"pearson": {"mean": v[0]}, "spearman": {"mean": v[0]},
                         "subsets": {"images": {"pearson": v[1], "spearman": v[1]}}}
    out = {"sts": sts, "same_image": {"flickr8k/test": {"pearson": r, "spearman": r / 2}}}
    if transfer is not None:
        out["transfer"] = transfer
    return out


def _ok(acc, f1=None):
    return {"status": "ok", "acc": acc, **({"f1": f1} if f1 is not None else {})}


def test_the_claims_are_stated_per_column_as_the_papers_tables_give_them():
    """The papers' verdicts, column by column, against the tables as printed (Kurach et al.
    2017 Tables 1 and 6, Bordes et al. 2019 Table 3; transcribed here by hand)."""
    from grounded_text.benchmarks.paper_baselines import check_claims, claim_lines

    claims = {c["claim"].split(": ")[1]: c for c in check_claims({"encoders": {}})}
    # VETE Table 1: PinModelA 0.671 0.683 0.709 0.536 0.493 0.573; PureTextRnn 0.662 0.692 0.705 0.484 0.517 0.568.
    p = claims["PinModelA > PureTextRnn"]["paper"]
    assert (p["holds_in"], p["columns"], p["lost_on"]) == (4, 6, ["images2015", "avg2014"])
    cell = {c["column"]: (c["better"], c["worse"]) for c in p["cells"]}
    assert cell["images2015"] == (0.683, 0.692) and cell["avg2014"] == (0.493, 0.517)
    assert (claims["VETE-BOW > PinModelA"]["paper"]["holds_in"], claims["VETE-BOW > PinModelA"]["paper"]["columns"]) \
        == (6, 6)
    t6 = claims["sentence-level > word-level training"]["paper"]
    assert (t6["holds_in"], t6["columns"]) == (4, 4)
    # Bordes Table 3, row T + C_g + P_g: 77.4 81.5 93.0 88.1 73.2/80.9 82.7 73.9 82.9.
    seq = claims["T+C_g+P_g > SEQ"]["paper"]  # SEQ's MRPC F1 is not in the copy: its 70.0 is the accuracy
    assert (seq["holds_in"], seq["columns"]) == (8, 8) and "MRPC (F1)" not in [c["column"] for c in seq["cells"]]
    assert (claims["T+C_g+P_g > GS-Img"]["paper"]["holds_in"], claims["T+C_g+P_g > GS-Img"]["paper"]["columns"]) \
        == (9, 9)
    assert claims["T+C_g+P_g > GS-Cap"]["paper"]["lost_on"] == ["SICK"]  # 82.9 against 82.9: a tie
    assert claims["T+C_g+P_g > GS-Both"]["paper"]["lost_on"] == ["MRPC (F1)"]  # 80.9 against 81.3
    for c in claims.values():
        assert c["verdict"] == "not measured" and c["columns"] == 0
    lines = claim_lines(check_claims({"encoders": {}}))
    assert any("PinModelA > PureTextRnn. Paper: holds in 4 of 6 columns (not on images2015 0.683 vs 0.692, "
               "avg2014 0.493 vs 0.517)" in line for line in lines)
    bordes = [line for line in lines if "Bordes" in line]
    assert len(bordes) == 4 and all("without the textual loss L_T" in line and "partial" in line for line in bordes)


def test_comparison_table_and_claims_read_the_suite_report():
    from grounded_text.benchmarks.paper_baselines import STS_COLUMNS, baselines_markdown, check_claims, claim_lines

    report = {"encoders": {
        "vete_bow": _enc(0.5),
        "pin_model_a": _enc(0.4, sts14=(0.30, 0.60), sts15=(0.35, 0.50)),
        "pure_text_rnn": _enc(0.45, sts14=(0.20, 0.70), sts15=(0.40, 0.40)),
        "bordes_cg_pg": _enc(0.3, transfer={"MR": _ok(70.0), "CR": _ok(75.0), "MRPC": _ok(70.0, 80.0),
                                            "SNLI": {"status": "unavailable", "acc": None}}),
        "seq": _enc(0.3, transfer={"MR": _ok(72.0), "CR": _ok(74.0), "MRPC": _ok(69.0, 81.0)}),
    }}
    table = baselines_markdown(report)
    row = next(line for line in table.splitlines() if line.startswith("| `vete_bow`"))
    assert row.startswith("| `vete_bow` | 50.0 / 50.0 | n/a |") and row.endswith("50.0 / 25.0 |")
    assert table.splitlines()[1].count("---") == 11 and len(STS_COLUMNS) == 9
    assert "| `bordes_cg_pg` | 70.0 | 75.0 | n/a | n/a | n/a | n/a | 70.0 / 80.0 | n/a |" in table
    claims = {c["claim"].split(": ")[1]: c for c in check_claims(report)}

    # VETE-BOW > PinModelA: only the same-image test (COCO-Test's analogue) is measured; no STS14/15 for vete_bow.
    c = claims["VETE-BOW > PinModelA"]
    assert (c["verdict"], c["holds_in"], c["columns"]) == ("holds", 1, 1)
    assert c["cells"][0]["column"] == "COCO-Test" and c["cells"][0]["ours"] == "same_image"
    assert {m["column"] for m in c["not_measured"]} == {"images2014", "images2015", "Pin-Test", "avg2014", "avg2015"}
    assert c["sts"] == {"holds_in": 2, "columns": 2, "lost_on": [], "verdict": "holds"}

    # PinModelA > PureTextRnn on five columns: images2014 0.60 < 0.70, images2015 0.50 > 0.40,
    # COCO-Test 0.40 < 0.45, avg2014 0.30 > 0.20, avg2015 0.35 < 0.40; Pin-Test not measured.
    c = claims["PinModelA > PureTextRnn"]
    assert (c["verdict"], c["holds_in"], c["columns"]) == ("mixed", 2, 5)
    assert c["lost_on"] == ["images2014", "COCO-Test", "avg2015"]
    # The paper's order (4 of 6 hold; not images2015, avg2014) is ours on no column here.
    assert c["agrees_with_paper"] == 0
    assert c["not_measured"] == [{"column": "Pin-Test", "reason": "no Pinterest5M test set here"}]
    assert c["sts"]["verdict"] == "does not hold"

    # Bordes Table 3 on SentEval accuracy: MR 70 < 72, CR 75 > 74, MRPC acc 70 > 69, F1 80 < 81.
    c = claims["T+C_g+P_g > SEQ"]  # SEQ's paper row has no MRPC F1: that column is not compared
    assert [(x["column"], x["holds"]) for x in c["cells"]] == [("MR", False), ("CR", True), ("MRPC (acc)", True)]
    assert c["verdict"] == "mixed" and c["agrees_with_paper"] == 2
    reasons = {m["column"]: m["reason"] for m in c["not_measured"]}
    assert reasons["SNLI"] == "no SNLI training set in our data" and "--transfer" in reasons["SUBJ"]
    assert "L_T" in c["partial"]
    assert claims["T+C_g+P_g > GS-Img"]["verdict"] == "not measured"
    assert claims["T+C_g+P_g > GS-Img"]["not_measured"][0]["reason"] == "gs_img not in the report"
    line = next(x for x in claim_lines(check_claims(report)) if "PinModelA > PureTextRnn" in x)
    assert "Ours: mixed (2 of 5 measured columns, not on images2014, COCO-Test, avg2015" in line
    assert "COCO-Test: analogue: our Flickr8k same-image test" in line


def test_the_cli_scores_an_encoder_with_the_experiments_scoring_call(data_dir, tmp_path, monkeypatch):
    """``--glove-t``'s encoder replaced by hashed bags of words: the report's STS12 MSRvid r is the
    SciPy Pearson r of the cosines, and the table and JSON are written."""
    import zlib

    from scipy.stats import pearsonr

    from grounded_text.baselines import glove
    from grounded_text.benchmarks import paper_baselines as pb
    from grounded_text.data.sts import read_sts_year, sts_year_dirs

    def encode(sentences):
        out = np.zeros((len(sentences), 64), np.float32)
        for i, s in enumerate(sentences):
            for w in s.lower().split():
                out[i, zlib.crc32(w.encode()) % 64] += 1.0
        return out

    monkeypatch.setattr(glove, "glove_mean_encoder", lambda: encode)
    out_json, out_md = tmp_path / "r.json", tmp_path / "t.md"
    assert pb.main(["--data-dir", str(data_dir), "--glove-t", "--same-image-n", "50", "--json", str(out_json),
                    "--markdown", str(out_md), "--transfer", "--transfer-kfold", "2",
                    "--transfer-max-examples", "100"]) == 0
    enc = json.loads(out_json.read_text())["encoders"]["T (GloVe 6B 50d mean)"]
    # --transfer scores the SentEval tasks (SNLI: no training set, reported as unavailable).
    assert enc["transfer"]["MR"]["status"] == "ok" and 0 <= enc["transfer"]["MR"]["acc"] <= 100
    assert enc["transfer"]["SNLI"]["status"] == "unavailable"
    pairs = read_sts_year(sts_year_dirs(data_dir / "sts")["STS12"])["MSRvid"]
    a, b = encode(pairs.sentences1), encode(pairs.sentences2)
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    assert pb.cell_value(enc, "sts12_msrvid", "pearson") == pytest.approx(pearsonr(cos, pairs.scores)[0], abs=1e-4)
    assert -1 <= pb.cell_value(enc, "same_image_flickr8k", "pearson") <= 1
    table = out_md.read_text()
    assert table.startswith("| model | STS12 mean |") and "| `T (GloVe 6B 50d mean)` |" in table
    assert "| model | MR acc |" in table and "- Bordes et al. 2019 Table 3: T+C_g+P_g > SEQ. Paper:" in table


def test_the_cli_refuses_a_bad_merge_file(tmp_path, capsys):
    from grounded_text.benchmarks import paper_baselines as pb

    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(SystemExit) as e:
        pb.main(["--merge", str(tmp_path / "bad.json")])
    assert e.value.code == 2 and "error: --merge" in capsys.readouterr().err
    for flags, word in ((["--transfer-kfold", "1"], "--transfer-kfold"), (["--transfer-max-examples", "0"],
                                                                          "--transfer-max-examples")):
        with pytest.raises(SystemExit) as e:
            pb.main(flags)
        assert e.value.code == 2 and f"error: {word}" in capsys.readouterr().err
