"""The reproduction report's tables: every paper figure beside ours (with 95 % intervals), the
derived year means, the paired tests and the verdict, on fake results (no training)."""

import copy
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from grounded_text import reproduce as rp
from grounded_text.evaluation.stats import paired_bootstrap, pearson_ci, williams_test
from grounded_text.experiments import comparison, paper_report, verdicts
from grounded_text.papers import published as pf
from grounded_text.papers.reproduction import BUDGETS, PAPER_NAMES, PAPERS

MF_SUBSETS = {"STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
              "STS13": ("FNWN", "headlines", "OnWN"),
              "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question")}


def _corr(r: float, n: int) -> dict:
    return {"pearson": r, "spearman": r - 0.01, "n": n, "pearson_ci95": list(pearson_ci(r, n)),
            "spearman_ci95": list(pearson_ci(r - 0.01, n))}


def _sts(base: float) -> dict:
    sts = {}
    for i, (year, subs) in enumerate(MF_SUBSETS.items()):
        subsets = {s: _corr(base + 0.01 * (i + j), 250 + 10 * j) for j, s in enumerate(subs)}
        mean = float(np.mean([v["pearson"] for v in subsets.values()]))
        sts[year] = {"subsets": subsets, "pearson": {"mean": mean}, "spearman": {"mean": mean - 0.01}}
    sts["STSBenchmark"] = {"test": _corr(base, 1379), "test/captions": _corr(base + 0.1, 625)}
    sts["SICK"] = {"test": _corr(base + 0.05, 4927)}
    return sts


def _retrieval(protocol: str = "flickr8k_1k") -> dict:
    def direction(r1):
        return {"R@1": r1, "R@5": r1 + 20, "R@10": r1 + 30, "medr": 5.0, "R@1_ci95": [r1 - 2, r1 + 2],
                "R@5_ci95": [r1 + 18, r1 + 22], "R@10_ci95": [r1 + 28, r1 + 32], "medr_ci95": [4.0, 6.0]}
    return {"caption_to_image": direction(20.0), "image_to_caption": direction(30.0), "protocol": protocol,
            "n_images": 1000}


def _evaluation(paper: str, base: float = 0.6) -> dict:
    ev = {"status": "ok", "sts": _sts(base), "supervised_sts": {"STSBenchmark": {"test": _corr(0.70, 1379)},
                                                                "SICK": {"test": _corr(0.80, 4927)}},
          "retrieval": _retrieval(), "same_image": {"flickr8k/test": _corr(0.7, 10000)},
          "structure": {"mNNO@10": 0.2, "rho_vis": {"pearson": 0.15, "pearson_ci95": [0.1, 0.2], "spearman": 0.1},
                        "C_inter": 0.3, "C_intra": 0.5, "mNNO@10_ci95": [0.15, 0.25], "C_inter_ci95": [0.28, 0.32],
                        "C_intra_ci95": [0.45, 0.55]},
          "transfer": {"MR": {"acc": 77.0, "n": 10662}, "CR": {"acc": 70.0, "n": 3775},
                       "MRPC": {"acc": 66.9, "f1": 77.4, "n": 1725}}}
    spaces = [s for s, _ in PAPERS[paper].protocol.spaces]
    return {s: ev for s in spaces}


def fake_results(paper: str, budget: str = "cpu", predictions: dict | None = None) -> dict:
    p = PAPERS[paper]
    runs = {}
    for spec in p.runs:
        runs[spec.name] = {"status": "ok", "preset": spec.preset, "record": spec.preset, "trained_with": "5 epochs",
                           "training": {"best_epoch": 1, "selection": "val_loss", "exported": "best_epoch",
                                        "feature_file": "/d/efficientnet_lite0.npz", "feature_dim": 1280,
                                        "train_images": 6000},
                           "config": {"data": {"dataset": "flickr8k"}}, "evaluation": _evaluation(paper),
                           "headline": {}}
    res = {"paper": paper, "title": p.title, "citation": p.citation, "budget": budget,
           "budget_description": BUDGETS[budget].description, "mode": "train", "from_runs": None,
           "command": "python -m grounded_text.reproduce x",
           "evaluation_settings": {"test_images": None, "same_image_n": 5000, "transfer_kfold": 5,
                                   "transfer_max_examples": None},
           "protocol": {"sections": list(p.protocol.sections), "spaces": [s for s, _ in p.protocol.spaces],
                        "transfer": False, "description": ["d"]},
           "runs": runs, "figures": comparison.figure_rows(p, runs), "ablations": comparison.ablation_tables(p, runs),
           "data_differences": comparison.data_differences(p, runs, Path("/nonexistent")), "notes": [],
           "comparison": comparison.comparison_rows(p, runs), "derived_means": comparison.derived_means(p, runs),
           "paired_tests": comparison.paired_tests(p, runs, predictions or {}),
           "ours_data": comparison.dataset_text(runs), "ours_features": comparison.features_text(runs),
           "model_correlations": verdicts.model_correlations(p, predictions or {})}
    res["baselines"] = comparison.baseline_tables(p, res["comparison"])
    res["r23_fallback"] = verdicts.r23_fallback(res["model_correlations"])
    res["verdict"] = verdicts.verdict(p, res)
    return res


def _row(res, table, measure, run=None):
    rows = [r for r in res["comparison"] if r["table"] == table and r["measure"] == measure
            and (run is None or r["run"] == run)]
    assert rows, (table, measure, sorted({r["measure"] for r in res["comparison"] if r["table"] == table}))
    return rows[0]


def test_merkx_frank_table5_every_flickr8k_subset_beside_ours_with_ci():
    res = fake_results("merkx_frank")
    ev = res["runs"]["char_gru_attention"]["evaluation"]["text"]
    t5 = [f for f in pf.figures("merkx2019_char_grounding", "Table 5") if f.column == "char-GRU (Flickr8k)"]
    checked = 0
    for fig in t5:
        row = _row(res, "Table 5", f"{fig.block} {fig.row}")
        assert row["paper"] == fig.value and row["paper_ci"] == pytest.approx(list(fig.ci95))
        if fig.ours and fig.ours[:4] in ("STS1", ) and fig.ours.split("/")[0] in MF_SUBSETS:
            year, sub = fig.ours.split("/")
            ours = ev["sts"][year]["subsets"][sub]
            assert row["ours"] == pytest.approx(100 * ours["pearson"])
            assert row["ours_ci"] == pytest.approx([100 * c for c in ours["pearson_ci95"]])
            assert row["difference"] == pytest.approx(100 * ours["pearson"] - fig.value)
            assert row["compared"] == "same test set"
            checked += 1
    assert checked == 13  # STS12 (5) + STS13 (3, SMT withheld) + STS16 (5)
    stsb = _row(res, "Table 5", "STS-B STS 12-16")
    assert stsb["ours"] == pytest.approx(70.0) and stsb["difference"] == pytest.approx(70.0 - 72.2)
    assert stsb["compared"].startswith("same test set; regressor")
    sick = _row(res, "Table 5", "SICK Relatedness")
    assert sick["ours_ci"] == pytest.approx([100 * c for c in pearson_ci(0.8, 4927)])
    # STS 2014/2015 are not in our data: the paper's figure stays, ours is absent and not differenced.
    deft = _row(res, "Table 5", "STS 2014 Deft-forum")
    assert deft["paper"] == 50.7 and deft["ours"] is None and deft["difference"] is None


def test_merkx_frank_table2_char_gru_retrieval_beside_ours():
    res = fake_results("merkx_frank")
    ret = res["runs"]["char_gru_attention"]["evaluation"]["text"]["retrieval"]
    t2 = [f for f in pf.figures("merkx2019_char_grounding", "Table 2") if f.row == "char-GRU"]
    assert len(t2) == 8
    for fig in t2:
        row = _row(res, "Table 2", fig.column)
        direction = "caption_to_image" if fig.column.startswith("caption") else "image_to_caption"
        metric = fig.column.split(" ")[1]
        assert row["paper"] == fig.value and row["ours"] == ret[direction][metric]
        assert row["ours_ci"] == ret[direction][f"{metric}_ci95"]
        assert row["difference"] == pytest.approx(ret[direction][metric] - fig.value)
        assert (row["paper_ci"] is None) == (metric == "medr")
    # MSCOCO (Table 3) is not our test set: labelled as the nearest measure, never differenced.
    coco = _row(res, "Table 3", "1k results: caption→image R@1")
    assert coco["paper"] == 41.4 and coco["ours"] == 20.0 and coco["difference"] is None
    assert coco["compared"].startswith("nearest:") and "MSCOCO" in coco["compared"]


def test_the_headline_reads_another_run_where_the_main_run_was_not_scored():
    res = fake_results("merkx_frank")
    runs = dict(res["runs"])
    assert comparison.main_run(PAPERS["merkx_frank"], runs) == "char_gru_attention"
    runs["char_gru_attention"] = {"status": "skipped", "reason": "not named by --only"}
    runs["char_gru_attention_512"] = {**runs["char_gru_attention_512"], "headline": {"STS12 MSRvid r": 0.8}}
    rows = {r["measure"]: r for r in comparison.figure_rows(PAPERS["merkx_frank"], runs)}
    assert rows["STS12 MSRvid r"]["run"] == "char_gru_attention_512" and rows["STS12 MSRvid r"]["ours"] == 0.8
    assert {r["run"] for r in comparison.derived_means(PAPERS["merkx_frank"], runs)} == {"char_gru_attention_512"}
    # The paper's tables read the same run: its figures, never "not scored".
    runs["char_gru_attention_512"] = copy.deepcopy(runs["char_gru_attention_512"])
    runs["char_gru_attention_512"]["evaluation"]["text"]["sts"]["STS12"]["subsets"]["MSRvid"]["pearson"] = 0.777
    table = comparison.comparison_rows(PAPERS["merkx_frank"], runs)
    msrvid = next(r for r in table if r["table"] == "Table 5" and r["measure"] == "STS 2012 MSRvid")
    assert msrvid["run"] == "char_gru_attention_512" and msrvid["ours"] == pytest.approx(77.7)
    assert not any("not scored" in r["compared"] for r in table)
    assert rows["STS12 MSRvid r"]["paper"] == pytest.approx(0.799)  # the paper's figure beside it
    runs["char_gru_attention_512"] = {"status": "failed"}
    assert comparison.main_run(PAPERS["merkx_frank"], runs) is None


def test_a_retrieval_slice_is_not_the_papers_test_set():
    res = fake_results("merkx_frank")
    runs = res["runs"]
    for node in runs.values():
        node["evaluation"]["text"]["retrieval"] = _retrieval("all")
    rows = [r for r in comparison.comparison_rows(PAPERS["merkx_frank"], runs) if r["table"] == "Table 2"]
    assert rows and all(r["difference"] is None and r["compared"].startswith("nearest:") for r in rows)


def test_merkx_frank_year_means_are_derived_without_an_interval():
    res = fake_results("merkx_frank")
    means = {r["measure"]: r for r in res["derived_means"]}
    t5 = {f.ours: f.value for f in pf.figures("merkx2019_char_grounding", "Table 5")
          if f.column == "char-GRU (Flickr8k)" and f.ours}
    want12 = np.mean([t5[f"STS12/{s}"] for s in MF_SUBSETS["STS12"]])
    assert means["STS12 mean"]["paper"] == pytest.approx(want12)
    ours12 = res["runs"]["char_gru_attention"]["evaluation"]["text"]["sts"]["STS12"]["pearson"]["mean"]
    assert means["STS12 mean"]["ours"] == pytest.approx(100 * ours12)
    assert means["mean of STS12/13/16 means"]["paper"] == pytest.approx(
        np.mean([np.mean([t5[f"{y}/{s}"] for s in subs]) for y, subs in MF_SUBSETS.items()]))
    text = paper_report.format_paper_markdown(res)
    assert "| STS12 mean | 61.0 |" in text and "| — |" in text


def test_bordes_grounding_only_rows_and_vete_bow_row_appear():
    res = fake_results("bordes")
    names = {r["row"] for r in res["comparison"]}
    assert {"$+{\\bf P}_a$", "${\\bf P}_g$", "$\\mathbf{C}_g$"} <= names
    sts = _row(res, "Table 1", "STS/All", run="bordes_cg_pg")
    assert sts["paper"] == 63.0 and sts["compared"].startswith("nearest:")  # the paper states no STS split
    assert sts["ours"] == pytest.approx(100 * 0.59)  # Spearman (the table's scale)
    rho = _row(res, "Table 1", "ρ_vis", run="bordes_cg_pg")  # Pearson, as Bordes §4.3 defines it
    assert rho["ours"] == pytest.approx(15.0) and rho["ours_ci"] == pytest.approx([10.0, 20.0])
    mnno = _row(res, "Table 1", "mNNO", run="bordes_cg_pg")
    assert mnno["compared"].startswith("nearest:") and mnno["difference"] is None and mnno["ours"] == 20.0
    assert mnno["ours_ci"] == pytest.approx([15.0, 25.0])  # a bootstrap over images, on the table's scale
    for measure, ci in (("C_inter", [28.0, 32.0]), ("C_intra", [45.0, 55.0])):
        assert _row(res, "Table 1", measure, run="bordes_cg_pg")["ours_ci"] == pytest.approx(ci)
    pg = [r for r in res["comparison"] if r["row"] == "${\\bf P}_g$"]
    assert all(r["ours"] is None and r["paper"] is not None for r in pg)

    vete = fake_results("vete")
    bow = [r for r in vete["comparison"] if r["table"] == "Table 1" and r["row"] == "VETE-BOW"]
    assert {r["measure"]: r["paper"] for r in bow} == {"images2014": 0.861, "images2015": 0.855, "COCO-Test": 0.894,
                                                        "Pin-Test": 0.579, "avg2014": 0.579, "avg2015": 0.622}
    coco = next(r for r in bow if r["measure"] == "COCO-Test")
    assert coco["ours"] == pytest.approx(0.7) and coco["compared"].startswith("nearest:")
    text = paper_report.format_paper_markdown(vete)
    assert "| VETE-BOW | COCO-Test | 0.894 |" in text


@pytest.mark.parametrize("paper", PAPER_NAMES)
def test_no_not_reported_where_the_paper_reports_a_figure(paper):
    res = fake_results(paper)
    text = paper_report.format_paper_markdown(res)
    assert "not reported" not in text
    assert all(r["paper"] is not None for r in res["comparison"])
    published = [f for f in pf.figures(PAPERS[paper].figures_key)]
    assert len(res["comparison"]) <= len(published) and res["comparison"]


def test_paired_tests_match_the_references():
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 300)
    a = gold + rng.normal(0, 1.0, 300)
    b = gold + rng.normal(0, 2.0, 300)
    ranks_a, ranks_b = rng.integers(1, 20, 500), rng.integers(1, 40, 500)
    pa = {"sts": {"STS12/MSRvid": a}, "gold": {"STS12/MSRvid": gold}, "ranks": {"caption_to_image": ranks_a}}
    pb = {"sts": {"STS12/MSRvid": b}, "gold": {"STS12/MSRvid": gold}, "ranks": {"caption_to_image": ranks_b}}
    sts = comparison.paired_sts(pa, pb)["STS12 MSRvid r"]
    r12, r13, r23 = stats.pearsonr(gold, a)[0], stats.pearsonr(gold, b)[0], stats.pearsonr(a, b)[0]
    assert sts["a"] == pytest.approx(r12) and sts["p"] == pytest.approx(williams_test(r12, r13, r23, 300)["p_value"])
    assert sts["p"] < 0.001
    ret = comparison.paired_retrieval(pa, pb)["caption→image R@5"]
    want = paired_bootstrap((ranks_a <= 5).astype(float), (ranks_b <= 5).astype(float), np.mean)
    assert ret["a"] == pytest.approx(100 * np.mean(ranks_a <= 5)) and ret["p"] == want["p_value"]
    assert ret["unit"] == "queries"
    groups = np.repeat(np.arange(100), 5)  # the captions' images: resampled together
    pa["groups"] = {"caption_to_image": groups}
    ret = comparison.paired_retrieval(pa, pb)["caption→image R@5"]
    want = paired_bootstrap((ranks_a <= 5).astype(float), (ranks_b <= 5).astype(float), np.mean, groups=groups)
    assert ret["unit"] == "images" and ret["p"] == want["p_value"]

    # In a report: an ablation against its first setting, shown with the test's name.
    res = fake_results("vete", predictions={"vete_bow": {"text": pa}, "vete_rnn": {"text": pb}})
    comp = next(c for c in res["paired_tests"] if c["a"] == "vete_rnn")
    assert comp["b"] == "vete_bow" and comp["tests"]["STS12 MSRvid r"]["p"] == pytest.approx(
        williams_test(r13, r12, r23, 300)["p_value"])
    assert "Williams" in paper_report.format_paper_markdown(res)


def test_verdict_judges_every_same_test_figure_and_names_documented_differences():
    res = fake_results("merkx_frank")
    text = " ".join(res["verdict"])
    same = [r for r in res["comparison"] if r["difference"] is not None]
    rows = verdicts.verdict_rows(res)
    assert len(rows) == len(same) and f"{len(same)} figures on the paper's own test sets" in text
    assert "Williams' test" in text and "ResNet-152" in text and "efficientnet_lite0" in text
    assert "training budget (`cpu`" in text
    md = paper_report.format_paper_markdown(res)
    assert "Verdict:" in md and "Verdict per figure" in md and "r₂₃ from our models" in md and "p at r₂₃ = 0.7" in md
    assert "0.000" not in md


def _question_question(res, ours=0.291, n=209):
    ev = res["runs"]["char_gru_attention"]["evaluation"]["text"]
    ev["sts"]["STS16"]["subsets"]["question-question"] = _corr(ours, n)
    res["comparison"] = comparison.comparison_rows(PAPERS["merkx_frank"], res["runs"])
    return _row(res, "Table 5", "STS 2016 Question-Question")


def _predictions(n_pairs: int, noise: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    gold = rng.uniform(0, 5, n_pairs)
    base = gold + rng.normal(0, 3.0, n_pairs)
    a, b = base + rng.normal(0, noise, n_pairs), base + rng.normal(0, noise, n_pairs)
    key = "STS16/question-question"
    return ({"sts": {key: a}, "gold": {key: gold}, "ranks": {}}, {"sts": {key: b}, "gold": {key: gold}, "ranks": {}})


def test_overlapping_marginal_intervals_can_still_be_below_the_paper():
    # STS16 Question-Question: ours 0.291 [0.162, 0.411] and the paper's 0.405 [0.285, 0.513]
    # overlap, but both are measured on the same 209 pairs: Williams' test rejects.
    res = fake_results("merkx_frank")
    row = _question_question(res)
    assert row["ours_ci"][1] > row["paper_ci"][0]  # the marginal intervals overlap
    pa, pb = _predictions(209, 0.9)
    mc = verdicts.model_correlations(PAPERS["merkx_frank"], {"char_gru_attention": {"text": pa},
                                                              "char_gru_attention_512": {"text": pb}})
    r23 = mc["STS16/question-question"]["pearson"]
    assert 0.87 < r23 < 0.97 and mc["STS16/question-question"]["pair"] == ["char_gru_attention",
                                                                             "char_gru_attention_512"]
    res["model_correlations"], res["r23_fallback"] = mc, verdicts.r23_fallback(mc)
    judged = next(r for r in verdicts.verdict_rows(res) if r["measure"] == "STS 2016 Question-Question")
    assert judged["r23"] == pytest.approx(r23) and judged["p"] == pytest.approx(
        williams_test(0.291, 0.405, r23, 209)["p_value"])
    assert judged["p"] < 0.05 and judged["verdict"] == "below the paper (worse)"
    md = paper_report.format_paper_markdown({**res, "verdict": verdicts.verdict(PAPERS["merkx_frank"], res)})
    line = next(x for x in md.splitlines() if x.startswith("| STS 2016 Question-Question | 29.1 | 40.5 | 209 |"))
    assert f"{r23:.3f}: lowest of our 2 models on it (char_gru_attention vs char_gru_attention_512)" in line
    assert "below the paper (worse)" in line
    # With one model only, the stated fallback is used and named.
    res["model_correlations"] = {}
    res["r23_fallback"] = verdicts.r23_fallback({})
    judged = next(r for r in verdicts.verdict_rows(res) if r["measure"] == "STS 2016 Question-Question")
    assert judged["r23"] == verdicts.FALLBACK_R23 and "fallback" in judged["r23_how"]
    assert judged["verdict"] == "below the paper (worse)"


def test_a_small_gap_on_the_same_pairs_agrees_and_a_gap_above_is_better():
    res = fake_results("merkx_frank")
    _question_question(res, ours=0.395)
    judged = next(r for r in verdicts.verdict_rows(res) if r["measure"] == "STS 2016 Question-Question")
    assert judged["p"] >= 0.05 and judged["verdict"] == "agrees"
    _question_question(res, ours=0.52)
    judged = next(r for r in verdicts.verdict_rows(res) if r["measure"] == "STS 2016 Question-Question")
    assert judged["verdict"] == "above the paper (better)"


def test_the_fallback_takes_the_lowest_across_papers():
    other = {"vete": {"STS12/MSRvid": {"pearson": 0.81, "spearman": 0.8, "pair": ["vete_bow", "vete_rnn"],
                                       "models": 6, "n": 750}}}
    fb = verdicts.r23_fallback({}, other)
    assert fb["pearson"] == 0.81 and "vete" in fb["source"] and "vete_bow vs vete_rnn" in fb["source"]
    assert verdicts.r23_fallback({})["pearson"] == verdicts.FALLBACK_R23


def test_retrieval_verdicts_use_our_interval_and_medr_lower_is_better():
    res = fake_results("merkx_frank")
    rows = {r["measure"]: r for r in verdicts.verdict_rows(res)}
    # Ours: caption→image R@1 20.0 [18, 22] against the paper's 27.5: below, worse.
    assert rows["caption→image R@1"]["verdict"] == "below the paper (worse)"
    # image→caption R@10: ours 60.0 [58, 62]: the paper's 79.3 is above it.
    assert rows["image→caption R@10"]["verdict"] == "below the paper (worse)"
    # medr: ours 5.0 [4, 6] against the paper's 4.0: inside, agrees; 2.0 (image→caption) is below ours: worse.
    assert rows["caption→image medr"]["verdict"] == "agrees"
    assert rows["image→caption medr"]["verdict"] == "above the paper (worse: a higher median rank)"
    ret = res["runs"]["char_gru_attention"]["evaluation"]["text"]["retrieval"]["caption_to_image"]
    ret.update({"R@1": 27.0, "R@1_ci95": [25.0, 29.0], "medr": 3.0, "medr_ci95": [2.5, 3.5]})
    res["comparison"] = comparison.comparison_rows(PAPERS["merkx_frank"], res["runs"])
    rows = {r["measure"]: r for r in verdicts.verdict_rows(res)}
    assert rows["caption→image R@1"]["verdict"] == "agrees"
    assert rows["caption→image medr"]["verdict"] == "below the paper (better: a lower median rank)"


def test_merkx_frank_tables_2_and_5_show_the_published_baselines_beside_ours():
    res = fake_results("merkx_frank")
    tables = {t["table"]: t for t in res["baselines"]}
    t2 = tables["Table 2"]
    assert [r[0] for r in t2["rows"]] == ["[27]", "[24]", "[25]", "[30]", "[31]", "char-GRU",
                                          "ours: `char_gru_attention`"]
    assert t2["header"][1] == "caption→image R@1" and t2["rows"][0][1] == "11.8" and t2["rows"][4][1] == "–"
    t5 = tables["Table 5"]
    assert t5["header"][1:5] == ["BOW", "InferSent", "char-GRU (Flickr8k)", "char-GRU (MSCOCO)"]
    msrvid = next(r for r in t5["rows"] if r[0] == "STS 2012 MSRvid")
    assert msrvid[1:5] == ["66.2", "83.6", "79.9", "82.7"] and msrvid[5] == "61.0"
    deft = next(r for r in t5["rows"] if r[0] == "STS 2014 Deft-forum")
    assert deft[5] == "–"  # not in our data
    md = paper_report.format_paper_markdown(res)
    assert "| [27] | 11.8 |" in md and "Table 5 as the paper prints it" in md


def test_vete_pin_test_does_not_stand_beside_our_in_domain_same_image_test():
    res = fake_results("vete")
    pin = [r for r in res["comparison"] if r["measure"] == "Pin-Test"]
    assert pin and all(r["ours"] is None and "out of domain" in r["compared"] for r in pin)
    coco = [r for r in res["comparison"] if r["measure"] == "COCO-Test"]
    assert all(r["ours"] is not None and r["compared"].startswith("nearest:") for r in coco)


def test_bordes_sts_and_sick_are_nearest_and_table_3_beside_ours():
    res = fake_results("bordes")
    sts = _row(res, "Table 1", "STS/All", run="bordes_cg_pg")
    assert sts["difference"] is None and "states no split" in sts["compared"] and sts["ours"] is not None
    # §4.3 names no split of SICK either: ours is its test set, the nearest, not differenced.
    sick = _row(res, "Table 1", "SICK", run="bordes_cg_pg")
    assert sick["compared"].startswith("nearest:") and "no split of SICK" in sick["compared"]
    assert sick["difference"] is None and sick["ours"] is not None
    mr = _row(res, "Table 3", "MR", run="bordes_cg_pg")
    assert mr["paper"] == 77.4 and mr["ours"] == 77.0 and mr["compared"] == "same test set"
    assert mr["ours_ci"] == pytest.approx([100 * c for c in stats.binomtest(8210, 10662).proportion_ci(
        0.95, method="wilson")], abs=0.02)
    assert _row(res, "Table 3", "MRPC (F1)", run="bordes_cg_pg")["ours"] == 77.4
    assert "SNLI's training set" in _row(res, "Table 3", "SNLI", run="bordes_cg_pg")["compared"]
    judged = {(r["measure"], r["space"]): r for r in verdicts.verdict_rows(res)}
    assert judged[("MR", "textual")]["verdict"] == "agrees"  # 77.4 inside our [76.2, 77.8]
    assert judged[("CR", "textual")]["verdict"] == "below the paper (worse)"
    text = " ".join(res["verdict"])
    assert "SkipThought" in text and "initialized with T" in text
    runs = res["runs"]
    runs["bordes_cg_pg"]["headline"] = {"textual: MR acc": 77.0, "textual: STS-B test ρ (cosine)": 0.47}
    rows = {r["measure"]: r for r in comparison.figure_rows(PAPERS["bordes"], runs)}
    assert rows["textual: MR acc"]["paper"] == 77.4 and rows["textual: MR acc"]["difference"] == pytest.approx(-0.4)
    stsb = rows["textual: STS-B test ρ (cosine)"]
    assert stsb["paper"] == pytest.approx(0.63) and stsb["difference"] is None and "nearest" in stsb["source"]
    # No figure of Table 1 is on a test set the paper names, so no row of ours joins its systems.
    t1 = res["baselines"][0]
    assert t1["table"] == "Table 1" and not any(r[0].startswith("ours:") for r in t1["rows"])


def test_kolluru_training_data_is_the_papers():
    res = fake_results("kolluru")
    diff = {d["aspect"]: d["paper"] for d in res["data_differences"]}
    assert "Flickr30K" in diff["training data"] and "MSCOCO" in diff["training data"]
    assert "not recorded" not in paper_report.format_paper_markdown(res)


def test_headline_table_takes_the_papers_figure_wherever_it_is_recorded():
    res = fake_results("merkx_frank")
    runs = res["runs"]
    runs["char_gru_attention"]["headline"] = {"STS12 MSRpar r": 0.5, "STS-B test r (cosine)": 0.4,
                                              "caption→image R@1": 20.0}
    rows = {r["measure"]: r for r in comparison.figure_rows(PAPERS["merkx_frank"], runs)}
    assert rows["STS12 MSRpar r"]["paper"] == pytest.approx(0.491)
    assert rows["STS12 MSRpar r"]["difference"] == pytest.approx(0.5 - 0.491)
    assert "Table 5" in rows["STS12 MSRpar r"]["source"]
    assert rows["STS-B test r (cosine)"]["paper"] is None  # the paper reports STS-B supervised only
    assert rows["caption→image R@1"]["difference"] == pytest.approx(20.0 - 27.5)  # protocol flickr8k_1k
    for node in runs.values():
        node["evaluation"]["text"]["retrieval"]["protocol"] = "all"
    rows = {r["measure"]: r for r in comparison.figure_rows(PAPERS["merkx_frank"], runs)}
    assert rows["caption→image R@1"]["difference"] is None  # a slice is not the paper's 1,000-image test


def test_a_measure_named_alike_in_two_tables_carries_its_table_in_the_verdict():
    # Bordes names SICK relatedness (Table 1, Spearman ρ × 100) and SICK entailment (Table 3,
    # accuracy %) alike; a verdict listing "SICK" twice would not say which is which.
    common = {"space": "textual", "run": "bordes_cg_pg", "n": 4927}
    rows = [{**common, "table": "Table 1", "measure": "SICK", "key": "SICK/test", "scale": "Spearman ρ × 100",
             "ours": 51.7, "paper": 60.0, "difference": -8.3, "ours_ci": [49.5, 53.8]},
            {**common, "table": "Table 3", "measure": "SICK", "key": "transfer/SICKEntailment",
             "scale": "accuracy %", "ours": 67.5, "paper": 82.9, "difference": -15.4, "ours_ci": [66.2, 68.8]},
            {**common, "table": "Table 3", "measure": "MR", "key": "transfer/MR", "scale": "accuracy %",
             "ours": 55.7, "paper": 77.4, "difference": -21.7, "ours_ci": [54.7, 56.6]}]
    judged = verdicts.verdict_rows({"comparison": rows, "model_correlations": {}})
    assert [r["measure"] for r in judged] == ["SICK (Table 1)", "SICK (Table 3)", "MR"]
    assert [r["test"] for r in judged] == ["Williams' test", "paper inside our 95 % interval",
                                           "paper inside our 95 % interval"]
    assert all(r["verdict"] == "below the paper (worse)" for r in judged)


def test_a_verdict_significant_only_at_the_measured_r23_is_not_distinguishable():
    # STS16 answer-answer as the n = 1,024 record had it: 0.589 against the paper's 0.538 on
    # 254 pairs. At the r₂₃ measured between two of our models (0.953) Williams' test rejects;
    # at the conservative r₂₃ it does not, so the figure is neither above nor below the paper.
    res = fake_results("merkx_frank")
    _question_question(res, ours=0.589, n=254)
    row = _row(res, "Table 5", "STS 2016 Question-Question")
    row["paper"] = 53.8
    mc = {"STS16/question-question": {"pearson": 0.953, "spearman": 0.95, "pair": ["a", "b"], "models": 2,
                                      "n": 254}}
    res["model_correlations"], res["r23_fallback"] = mc, verdicts.r23_fallback(mc)
    judged = next(r for r in verdicts.verdict_rows(res) if r["measure"] == "STS 2016 Question-Question")
    assert judged["p"] < 0.05 <= judged["p_conservative"]
    assert judged["p"] == pytest.approx(williams_test(0.589, 0.538, 0.953, 254)["p_value"])
    assert judged["p_conservative"] == pytest.approx(
        williams_test(0.589, 0.538, verdicts.CONSERVATIVE_R23, 254)["p_value"])
    assert judged["verdict"] == verdicts.NOT_DISTINGUISHABLE == "not distinguishable"
    assert "above the paper only at the measured r₂₃" in judged["why"]
    res["verdict"] = verdicts.verdict(PAPERS["merkx_frank"], res)
    md = paper_report.format_paper_markdown(res)
    line = next(x for x in md.splitlines() if x.startswith("| STS 2016 Question-Question | 58.9 | 53.8 | 254 |"))
    assert "| not distinguishable (above the paper only at the measured r₂₃" in line
    assert "above the paper (better)" not in line
    group = " ".join(res["verdict"]).split("not distinguishable: ")[1].split(";")[0]
    assert "STS 2016 Question-Question" in group
    # Significant at both: above; at neither: agrees.
    assert verdicts.williams_verdict(0.70, 0.538, 254, 0.953, "m")["verdict"] == "above the paper (better)"
    assert verdicts.williams_verdict(0.545, 0.538, 254, 0.953, "m")["verdict"] == "agrees"
    # An r₂₃ that no two of our models measured is called assumed, with its value.
    assumed = verdicts.williams_verdict(0.589, 0.538, 254, 0.953, "fallback (fewer than two of our models scored it)")
    assert assumed["verdict"] == "not distinguishable"
    assert "above the paper only at the assumed r₂₃ = 0.95," in assumed["why"] and "measured" not in assumed["why"]
    # A measured r₂₃ below the conservative one is used as it is for both tests.
    low = verdicts.williams_verdict(0.589, 0.538, 254, 0.5, "m")
    assert low["r23_conservative"] == 0.5 and low["p"] == low["p_conservative"]


def test_verdicts_render_again_from_the_sections_own_tables():
    res = fake_results("merkx_frank")
    _question_question(res, ours=0.589, n=254)
    _row(res, "Table 5", "STS 2016 Question-Question")["paper"] = 53.8
    mc = {"STS16/question-question": {"pearson": 0.953, "spearman": 0.95, "pair": ["a", "b"], "models": 2,
                                      "n": 254}}
    res["model_correlations"], res["r23_fallback"] = mc, verdicts.r23_fallback(mc)
    res["verdict"] = verdicts.verdict(PAPERS["merkx_frank"], res)
    md = paper_report.format_paper_markdown(res)
    again = paper_report.rerender_verdicts(md, PAPERS["merkx_frank"])
    assert paper_report.rerender_verdicts(again, PAPERS["merkx_frank"]) == again  # idempotent
    want = {r["measure"]: r["verdict"] for r in verdicts.verdict_rows(res)}
    lines = again.splitlines()
    i = next(k for k, x in enumerate(lines) if x.startswith("| measure | ours | paper | n | test | r₂₃"))
    table, _ = paper_report._table_rows(lines, i)
    got = {r["measure"]: r["verdict"] for r in paper_report.verdict_rows_from_markdown(table)}
    assert got == want and got["STS 2016 Question-Question"] == "not distinguishable"
    # The Merkx & Frank training data is the paper's (Flickr8k train, 6,000 images), and every run
    # is scored with the authors' test-time sentence ends: no difference; the ensemble is one.
    diffs = next(x for x in lines if x.startswith("* Documented differences"))
    assert "training data" not in diffs and "model scored" in diffs and "test-time sentence ends" not in diffs


def test_an_old_verdict_table_renders_with_both_r23():
    old = ["| measure | ours | paper | n | test | assumed r₂₃ | p | verdict |",
           "|---|---:|---:|---:|---|---|---:|---|",
           "| STS 2012 MSRvid | 79.5 | 79.9 | 750 | Williams' test | 0.983: lowest of our 2 models on it (a vs b) "
           "| 0.381 | agrees |",
           "| STS 2016 Answer-Answer | 58.9 | 53.8 | 254 | Williams' test | 0.953: lowest of our 2 models on it "
           "(a vs b) | 0.0013 | above the paper (better) |",
           "| caption→image R@1 | 15.6 | 27.5 | 1,000 | paper inside our 95 % interval | – | – | below the paper "
           "(worse) |"]
    table, _ = paper_report._table_rows(old, 0)
    rows = {r["measure"]: r for r in paper_report.verdict_rows_from_markdown(table)}
    # The printed p is reproduced from our r refined within its printed digit (79.45–79.55):
    # the printed 79.5 alone would give p = 0.32 at r₂₃ = 0.983.
    assert round(rows["STS 2012 MSRvid"]["p"], 3) == 0.381 and rows["STS 2012 MSRvid"]["verdict"] == "agrees"
    aa = rows["STS 2016 Answer-Answer"]
    assert f"{aa['p']:.2g}" == "0.0013" and aa["p_conservative"] > 0.05 and aa["verdict"] == "not distinguishable"
    assert rows["caption→image R@1"]["verdict"] == "below the paper (worse)"


def test_verdicts_only_renders_a_report_again(tmp_path):
    res = fake_results("merkx_frank")
    old = paper_report.format_paper_markdown(res).replace("r₂₃ from our models", "assumed r₂₃")
    path = tmp_path / "report.md"
    path.write_text(f"# r\n\n<!-- reproduce:merkx_frank:start -->\n{old}\n<!-- reproduce:merkx_frank:end -->\n")
    assert rp.main(["merkx_frank", "--verdicts-only", "--write-docs", str(path)]) == 0
    text = path.read_text()
    assert "| p at r₂₃ = 0.7 |" in text and "model scored" in text
    with pytest.raises(SystemExit):
        rp.parse_args(["merkx_frank", "--verdicts-only"])  # names no report
