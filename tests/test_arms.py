"""The arms report of a study: cells, paired differences and the caption_gap study's rows."""

import numpy as np
import pytest
from scipy import stats

from grounded_text.experiments.arms import ARM_FIGURES, arms_markdown, figure_cell, p_text, paired_against, paired_cell


def test_cells_print_intervals_differences_and_small_p_values():
    assert figure_cell({"value": 0.7123, "ci": [0.68, 0.74]}, 3) == "0.712 [0.680, 0.740]"
    assert figure_cell({"value": None, "ci": None}, 3) == "–"
    assert figure_cell({"value": 41.04, "ci": None}, 1) == "41.0"
    assert p_text(0.0) == "< 0.001" and p_text(0.0412) == "0.041"
    assert paired_cell({"a": 0.70, "b": 0.72, "p": 0.0412}) == "-0.020 (p = 0.041)"
    assert paired_cell(None) == "–"


def test_paired_against_tests_each_arm_against_the_baseline_on_the_same_pairs():
    rng = np.random.default_rng(0)
    gold = rng.normal(size=300)
    base = gold + rng.normal(size=300)
    better = gold + 0.3 * rng.normal(size=300)
    ranks = {"caption_to_image": rng.integers(1, 50, size=500).astype(np.int32)}
    groups = {"caption_to_image": np.repeat(np.arange(100), 5).astype(np.int32)}

    def pred(x):
        return {"sts": {"STS12/MSRvid": x}, "gold": {"STS12/MSRvid": gold}, "ranks": ranks, "groups": groups}

    paired = paired_against("base", {}, {"base": pred(base), "arm": pred(better)})
    test = paired["arm"]["STS12 MSRvid r"]
    assert test["a"] == pytest.approx(stats.pearsonr(gold, better)[0])
    assert test["b"] == pytest.approx(stats.pearsonr(gold, base)[0])
    assert test["p"] < 0.001  # r 0.96 against 0.71 on 300 pairs
    # The same ranks: no difference in R@K, p = 1.
    assert paired["arm"]["caption→image R@10"]["a"] == paired["arm"]["caption→image R@10"]["b"]
    assert paired["arm"]["caption→image R@10"]["p"] == pytest.approx(1.0)
    assert paired_against("missing", {}, {"arm": pred(base)}) == {}

    arms = {name: {"seed": 0, "figures": {k: {"value": 0.5, "ci": [0.4, 0.6]} for k, _, _ in ARM_FIGURES},
                   "dev_rsum": [100.0, 120.5], "fit_seconds": 10.0,
                   "load_average": {"start": [1.0, 1, 1], "end": [2.0, 2, 2]}} for name in ("base", "arm")}
    md = arms_markdown(arms, paired, "base", {"base": "baseline", "arm": "x = 1"})
    assert "| `arm` | x = 1 | 0 | 0.500 [0.400, 0.600]" in md
    assert "100.0, 120.5 | 10 | 1.0 → 2.0 |" in md
    assert "| `arm` | +0." in md and "(p < 0.001)" in md


def test_an_arm_is_tested_against_the_baseline_seeds_spread_with_the_t_distribution():
    from grounded_text.experiments.arms import seed_prediction_test, seed_spread

    # Student's t with 2 degrees of freedom has a closed form: P(|T| > t) = 1 - t / sqrt(2 + t²).
    test = seed_prediction_test(5.0, [1.0, 2.0, 3.0])  # mean 2, sd 1, t = 3 / sqrt(1 + 1/3)
    t = 3.0 / np.sqrt(4.0 / 3.0)
    assert test["b"] == 2.0 and test["sd"] == pytest.approx(1.0) and test["k"] == 3
    assert test["p"] == pytest.approx(1.0 - t / np.sqrt(2.0 + t * t), rel=1e-12)
    # ... and the 97.5 % quantile t* = sqrt(2 / (1 - 0.95²) - 2) (the same closed form inverted).
    assert test["half_width"] == pytest.approx(np.sqrt(2.0 / (1.0 - 0.95 ** 2) - 2.0) * np.sqrt(4.0 / 3.0))
    # One degree of freedom (two seeds): the Cauchy distribution, P(|T| > t) = 1 - 2 atan(t) / pi.
    two = seed_prediction_test(0.80, [0.78, 0.79])
    t1 = abs(0.80 - 0.785) / (np.std([0.78, 0.79], ddof=1) * np.sqrt(1.5))
    assert two["p"] == pytest.approx(1.0 - 2.0 * np.arctan(t1) / np.pi, rel=1e-9)
    assert seed_prediction_test(0.5, [0.5, 0.5])["p"] == 1.0 and seed_prediction_test(0.6, [0.5, 0.5])["p"] == 0.0
    with pytest.raises(ValueError, match=">= 2 finite seed figures"):
        seed_prediction_test(0.5, [0.5])

    def arm(v):
        return {"seed": 0, "figures": {k: {"value": v, "ci": None} for k, _, _ in ARM_FIGURES}, "dev_rsum": [],
                "fit_seconds": None}

    arms = {"base": arm(1.0), "base_s1": arm(2.0), "base_s2": arm(3.0), "x": arm(5.0)}
    what = {"base": "baseline", "base_s1": "baseline", "base_s2": "baseline", "x": "x = 1"}
    spread = seed_spread(arms, what)
    assert list(spread) == ["x"] and spread["x"]["MSRvid r"]["p"] == pytest.approx(test["p"])
    md = arms_markdown(arms, {}, "base", what)
    assert "| arm − mean of the 3 baseline seeds |" in md and "| `x` | +3.000 (p = 0.122)" in md
    assert "2 degrees of freedom" in md and "MSRvid r ±" in md
    assert seed_spread({"base": arm(1.0), "x": arm(2.0)}, {"base": "baseline"}) == {}  # one seed: no spread


def test_the_caption_gap_study_changes_one_thing_per_arm():
    from grounded_text.papers.studies import CAPTION_GAP

    rows = dict(CAPTION_GAP.rows)
    base = rows["base_s0"]
    for name, fields in rows.items():
        changed = {k for k in fields if fields[k] != base.get(k)}
        if name.startswith("base_s"):
            assert changed <= {"train.seed", "data.seed"}
        elif name == "init_normal+sentence_end":  # the two arms that helped, together
            assert fields == {**rows["char_init_normal"], **rows["sentence_end_train"]}
        else:  # one difference (the two-head arm: heads, their diversity loss and the width they imply)
            assert fields["train.seed"] == 0 and len(changed) <= 3, name
    what = CAPTION_GAP.what()
    assert what["base_s1"] == "baseline" and what["hinge_mean_matrix"] == "model.loss_params.reduction = mean_matrix"
    assert CAPTION_GAP.rescored[0].run == "base_s0" and "base_s0+senteval_ends" in what


def test_the_record_study_pins_what_the_record_trains_now():
    from grounded_text.papers.resolve import resolve_config
    from grounded_text.papers.studies import CAPTION_GAP_RECORD

    config = resolve_config(CAPTION_GAP_RECORD.config("record_1024_s0"))
    assert config.model.encoder["units"] == 1024 and config.model.encoder["char_embedding_init"] == "normal"
    assert config.text.sentence_end == "space_period" and config.train.epochs == 4 and config.train.seed == 0


def test_an_arms_cache_round_trips_and_expires_with_its_run(tmp_path):
    from grounded_text.experiments.arms import _Cache

    metrics = tmp_path / "metrics.json"
    metrics.write_text("{}")
    arm = {"seed": 1, "figures": {"STS12/MSRvid": {"value": 0.5, "ci": [0.4, 0.6]}}}
    prediction = {"sts": {"STS12/MSRvid": np.arange(3, dtype=np.float32)}, "gold": {"STS12/MSRvid": np.ones(3)},
                  "ranks": {"caption_to_image": np.array([1, 2], np.int32)}, "groups": {}}
    cache = _Cache(tmp_path / "a.arm", metrics, "none")
    assert not cache.valid()
    cache.write(arm, prediction)
    assert cache.valid() and not _Cache(tmp_path / "a.arm", metrics, "space_period").valid()
    got_arm, got = cache.read()
    assert got_arm == arm
    np.testing.assert_array_equal(got["sts"]["STS12/MSRvid"], prediction["sts"]["STS12/MSRvid"])
    np.testing.assert_array_equal(got["ranks"]["caption_to_image"], [1, 2])
    metrics.write_text('{"changed": 1}')
    assert not _Cache(tmp_path / "a.arm", metrics, "none").valid()


def test_train_retrieval_counts_pessimistic_hits_per_caption_and_draws_images_whole():
    from grounded_text.data.pairs import CaptionPairs
    from grounded_text.experiments.arms import train_retrieval

    rng = np.random.default_rng(3)
    n_images, per_image, d = 30, 5, 4
    features = rng.normal(size=(n_images, d)).astype(np.float32)
    captions = np.array([f"c{i}" for i in range(n_images * per_image)])
    image_of = np.repeat(np.arange(n_images), per_image)
    features[2] = features[0]  # two images alike: their captions tie, and a pessimistic rank counts the tie
    vectors = {c: features[i] + rng.normal(scale=1.5, size=d) for c, i in zip(captions, image_of)}
    vectors["c0"] = features[0].copy()  # exactly on its image, and so exactly on image 2 too: rank 2
    pairs = CaptionPairs(captions=captions, image_ids=np.array([f"im{i}.jpg" for i in image_of]),
                         feature_rows=image_of, features=features)
    got = train_retrieval(lambda xs: np.stack([vectors[x] for x in xs]), lambda f: np.asarray(f), pairs)

    # Reference: cosines by NumPy, rank = 1 + images scoring at least the true image's cosine, bar itself.
    t = np.stack([vectors[c] for c in captions])
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    v = features / np.linalg.norm(features, axis=1, keepdims=True)
    sims = t @ v.T
    true = sims[np.arange(len(captions)), image_of][:, None]
    ranks = (sims >= true - 1e-6).sum(1)
    assert ranks[0] == 2 and got["images"] == n_images and got["captions"] == n_images * per_image
    for k in (1, 5, 10):
        hits = 100.0 * (ranks <= k)
        assert got[f"R@{k}"]["value"] == pytest.approx(hits.mean())
        lo, hi = got[f"R@{k}"]["ci"]
        assert lo <= hits.mean() <= hi
        # Images drawn whole: the interval is that of the per-image hit means, not of 150 free captions.
        per_image_mean = hits.reshape(n_images, per_image).mean(1)
        boot = np.random.default_rng(0).choice(per_image_mean, size=(4000, n_images)).mean(1)
        ref = np.percentile(boot, [2.5, 97.5])
        assert hi - lo == pytest.approx(ref[1] - ref[0], rel=0.25)
