"""The report charts: each chart function writes a PNG and refuses bad figures; the ablation
command writes its chart beside its table; the reproduction report's forest plots are drawn
from its own tables; the benchmark's model-choice chart reads each export's figure; and the
docs show the charts they link."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from grounded_text import ablation
from grounded_text import benchmark as bench
from grounded_text import reproduce as rp
from grounded_text.benchmarks import runs
from grounded_text.experiments import charts, paper_report, studies
from grounded_text.experiments.reproduction import forest_chart
from grounded_text.papers.reproduction import PAPER_NAMES
from grounded_text.papers.studies import SNAPSHOT_ENSEMBLE
from grounded_text.reporting.figures import FIGURES
from grounded_text.reporting.tables import update_sections
from grounded_text.utils.extras import MissingExtraError

pytest.importorskip("matplotlib")

REPO = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_shape(path: Path) -> tuple[int, int]:
    """(height, width) in pixels, as matplotlib's image reader reads the file."""
    from matplotlib import image

    assert Path(path).read_bytes()[:8] == PNG_MAGIC
    return image.imread(path).shape[:2]


# ----------------------------------------------------------------------------- the chart functions


def _forest_rows(n: int) -> list[dict]:
    return [{"label": f"STS 2012 subset {i}", "group": "Table 5 (Pearson r × 100)", "ours": (50.0 + i, 45.0, 58.0),
             "paper": (60.0, None, None) if i % 2 else (60.0, 55.0, 65.0)} for i in range(n)]


def test_forest_plot_writes_a_png_that_grows_with_its_rows(tmp_path):
    few = charts.forest_plot(_forest_rows(2), tmp_path / "few.png", title="a paper")
    many = charts.forest_plot(_forest_rows(20) + [{"label": "caption→image R@1", "group": "Table 2 (R@K %)",
                                                   "ours": (10.0, 9.0, 11.0), "paper": (27.5, 24.7, 30.3)}],
                              tmp_path / "sub" / "many.png")
    assert few == tmp_path / "few.png" and many.is_file()  # parent folders are created
    (h_few, w_few), (h_many, w_many) = _png_shape(few), _png_shape(many)
    assert w_few == w_many == 850  # 8.5 in at 100 dpi
    assert h_many > h_few + 20 * 0.2 * 100  # about 0.24 in per row
    assert few.stat().st_size < 150_000


@pytest.mark.parametrize("rows, match", [
    ([], "no rows"),
    ([{"label": "x", "ours": (0.5, 0.6, 0.4), "paper": (0.5, None, None)}], "lower bound 0.6 above"),
    ([{"label": "x", "ours": (0.5, 0.4, 0.6), "paper": (0.5, 0.3, None)}], "upper bound"),
    ([{"label": "x", "ours": (float("nan"), 0.4, 0.6), "paper": 0.5}], "finite number"),
    ([{"label": "", "ours": 0.5, "paper": 0.5}], "non-empty label"),
    ([{"label": "x", "ours": (0.5, 0.4), "paper": 0.5}], r"\(value, lo, hi\)"),
    ([{"label": "x", "ours": 0.5, "paper": None}], "paper"),
])
def test_forest_plot_refuses_bad_rows(tmp_path, rows, match):
    with pytest.raises(ValueError, match=match):
        charts.forest_plot(rows, tmp_path / "f.png")
    assert not (tmp_path / "f.png").exists()


def test_model_choice_chart_writes_a_png(tmp_path):
    points = [{"label": "vete_bow", "throughput": (18459.0, 16459.0, 19306.0), "quality": (0.58, 0.543, 0.614)},
              {"label": "MiniLM", "throughput": 314.2, "quality": (0.8275, 0.81, 0.843)}]
    out = charts.model_choice_chart(points, tmp_path / "m.png", quality_label="STS-B test r")
    assert _png_shape(out) == (420, 650)


@pytest.mark.parametrize("points, match", [
    ([], "no points"),
    ([{"label": "a", "throughput": 0.0, "quality": 0.5}], "positive"),
    ([{"label": "a", "throughput": (100.0, -1.0, 200.0), "quality": 0.5}], "positive"),
    ([{"label": "a", "throughput": 100.0, "quality": (0.5, 0.7, 0.3)}], "lower bound"),
    ([{"label": "a", "throughput": "fast", "quality": 0.5}], "throughput"),
])
def test_model_choice_chart_refuses_bad_points(tmp_path, points, match):
    with pytest.raises(ValueError, match=match):
        charts.model_choice_chart(points, tmp_path / "m.png")


def test_ablation_chart_writes_a_png_with_a_panel_per_metric(tmp_path):
    rows = [{"run": "base_s0", "metrics": {"a": (0.5, 0.45, 0.55), "b": 0.4}},
            {"run": "arm", "metrics": {"a": (0.52, 0.47, 0.57), "b": None}},
            {"run": "not scored", "metrics": {}}]
    one = charts.ablation_chart(rows, tmp_path / "one.png", ["a"])
    two = charts.ablation_chart(rows, tmp_path / "two.png", ["a", "b"], baseline="arm", title="t")
    assert _png_shape(two)[1] > _png_shape(one)[1]  # 2.6 in more per metric
    assert _png_shape(one)[0] == _png_shape(two)[0]  # the same runs


@pytest.mark.parametrize("rows, metrics, kwargs, match", [
    ([], ["a"], {}, "no rows"),
    ([{"run": "r", "metrics": {"a": 0.5}}], [], {}, "no metrics"),
    ([{"run": "r", "metrics": {"a": 0.5}}], ["a"], {"baseline": "other"}, "baseline 'other'"),
    ([{"run": "r", "metrics": {"a": None}}], ["a"], {}, "no run has a value"),
    ([{"run": "r", "metrics": {"a": (0.5, 0.6, 0.4)}}], ["a"], {}, "lower bound"),
])
def test_ablation_chart_refuses_bad_input(tmp_path, rows, metrics, kwargs, match):
    with pytest.raises(ValueError, match=match):
        charts.ablation_chart(rows, tmp_path / "a.png", metrics, **kwargs)


def test_interval_reads_a_number_or_a_triple():
    assert charts.interval(0.5, "x") == (0.5, None, None)
    assert charts.interval([1, 0, 2], "x") == (1.0, 0.0, 2.0)
    assert charts.interval((0.5, None, None), "x") == (0.5, None, None)
    with pytest.raises(ValueError, match="x"):
        charts.interval(True, "x")


def test_figures_carry_the_interval_their_node_holds():
    metrics = _metrics(0.4, 0.5, [0.45, 0.55])
    assert FIGURES["trainer_stsb_test"].with_interval(metrics) == (0.5, 0.45, 0.55)
    assert FIGURES["trainer_sts12_msrvid"].with_interval(metrics) == (0.7, 0.65, 0.75)
    assert FIGURES["trainer_sts16_mean"].with_interval(metrics) == (0.4, None, None)  # a mean: none carried
    assert FIGURES["trainer_sick_test"].with_interval({"evaluation": {"headline": {}}}) is None
    # The suite's figures: on the table's scale (× 100), Spearman's interval for Spearman.
    node = {"sts": {"STSBenchmark": {"test": {"pearson": 0.5, "pearson_ci95": [0.4, 0.6], "spearman": 0.45,
                                              "spearman_ci95": [0.35, 0.55]}}}}
    assert FIGURES["stsb_test"].with_interval(node) == pytest.approx((50.0, 40.0, 60.0))
    assert FIGURES["stsb_test"].with_interval(node, "spearman") == pytest.approx((45.0, 35.0, 55.0))


# ----------------------------------------------------------------------------- the ablation command


def _metrics(sts16: float, stsb: float, stsb_ci: list) -> dict:
    """A ``metrics.json`` with what the ablation table and chart read (no training)."""
    msrvid, sick = 0.7, 0.6
    return {"config": {"model": {"name": "vete_bow", "loss": "pearson"}, "data": {"features": "efficientnet_lite0"},
                       "train": {"epochs": 6}},
            "data": {"feature_dim": 1280}, "selection": {"best_epoch": 6}, "exported": {"kind": "best_epoch"},
            "timing_seconds": {"fit": 12.0}, "parameters": {"text_tower": 949248},
            "evaluation": {
                "headline": {"STS12/MSRvid pearson": msrvid, "STS16 mean pearson (avg2016)": sts16,
                             "STS-B test pearson": stsb, "SICK test pearson": sick},
                "sts": {"STS12": {"subsets": {"MSRvid": {"pearson": msrvid, "pearson_ci95": [0.65, 0.75]}}},
                        "STS16": {"pearson": {"mean": sts16}},
                        "STSBenchmark": {"test": {"pearson": stsb, "pearson_ci95": stsb_ci}},
                        "SICK": {"test": {"pearson": sick, "pearson_ci95": [0.58, 0.62]}}}}}


@pytest.fixture
def study_dir(tmp_path):
    """Two finished runs of the snapshot-ensemble study (its third is not run)."""
    out = tmp_path / "study"
    for run, m in (("last_epoch", _metrics(0.4, 0.5, [0.45, 0.55])),
                   ("ensemble_of_3_snapshots", _metrics(0.42, 0.56, [0.51, 0.61]))):
        (out / studies.run_dir_name(run)).mkdir(parents=True)
        (out / studies.run_dir_name(run) / "metrics.json").write_text(json.dumps(m))
    return out


def test_ablation_chart_rows_take_the_intervals_of_metrics_json(study_dir):
    rows = studies.chart_rows(SNAPSHOT_ENSEMBLE, study_dir)
    assert [r["run"] for r in rows] == ["last_epoch", "ensemble_of_3_snapshots"]  # the unfinished run is left out
    assert rows[1]["metrics"]["STS-B test r"] == (0.56, 0.51, 0.61)
    assert rows[0]["metrics"]["STS16 mean r"] == (0.4, None, None)


def test_ablation_command_writes_the_chart_beside_the_table(study_dir, capsys):
    assert ablation.main(["snapshot_ensemble", "--output-dir", str(study_dir), "--table-only"]) == 0
    md = (study_dir / "snapshot_ensemble.md").read_text(encoding="utf-8")
    assert "| best_epoch_avg2016 | (not run) |" in md
    assert re.search(r"^!\[[^\]]+\]\(snapshot_ensemble\.png\)$", md, re.M)  # a relative link beside the table
    height, width = _png_shape(study_dir / "snapshot_ensemble.png")
    assert width == round((1.6 + 2.6 * 4) * 100) and height > 100  # one panel per figure column


def test_ablation_table_is_written_without_matplotlib(study_dir, capsys, monkeypatch):
    def missing():
        raise MissingExtraError("The report charts needs matplotlib, which is not installed")

    monkeypatch.setattr(charts, "_pyplot", missing)
    assert ablation.main(["snapshot_ensemble", "--output-dir", str(study_dir), "--table-only"]) == 0
    md = (study_dir / "snapshot_ensemble.md").read_text(encoding="utf-8")
    assert "| last_epoch |" in md and "![" not in md
    assert not (study_dir / "snapshot_ensemble.png").exists()
    assert "[snapshot_ensemble] no chart: The report charts needs matplotlib" in capsys.readouterr().out


# ----------------------------------------------------------------------------- the reproduction report


def _comparison() -> list[dict]:
    base = {"training_data": "Flickr8k", "image_features": "ResNet-152", "run": "char_gru_attention"}
    return [
        {**base, "table": "Table 5", "scale": "Pearson r × 100", "row": "MSRvid", "measure": "STS 2012 MSRvid",
         "paper": 79.9, "paper_ci": [77.2, 82.3], "ours": 69.1, "ours_ci": [65.2, 72.7], "difference": -10.8,
         "space": "textual", "compared": "same test set"},
        {**base, "table": "Table 5", "scale": "Pearson r × 100", "row": "Images", "measure": "STS 2014 Images",
         "paper": 81.4, "paper_ci": [78.8, 83.7], "ours": None, "ours_ci": None, "difference": None,
         "space": "textual", "compared": "ours: not measured"},
        {**base, "table": "Table 2", "scale": "R@K %", "row": "char-GRU", "measure": "caption→image medr",
         "paper": 4.0, "paper_ci": None, "ours": 16.0, "ours_ci": [15.0, 17.0], "difference": 12.0,
         "space": "grounded", "compared": "same test set"},
        {**base, "table": "Table 3", "scale": "R@K %", "row": "$+{\\bf P}_a$", "measure": "caption→image R@1",
         "paper": 41.4, "paper_ci": [40.0, 42.8], "ours": -1.5, "ours_ci": [-2.0, 11.1], "difference": None,
         "space": "textual", "compared": "nearest: ours on Flickr8k"},
        {**base, "table": "Table 3", "scale": "R@K %", "row": "$\\mathbf{C}_g$", "measure": "caption→image R@1",
         "paper": 20.2, "paper_ci": None, "ours": 10.2, "ours_ci": [9.4, 11.1], "difference": None,
         "space": "textual", "compared": "nearest: ours on Flickr8k"},
    ]


def test_comparison_tables_read_back_from_their_markdown():
    res = {"comparison": _comparison(), "protocol": {"spaces": ["textual", "grounded"]}}
    rows = paper_report.comparison_from_markdown("\n".join(paper_report.comparison_lines(res)))
    assert len(rows) == 5
    want = _comparison()
    for got, w in zip(rows, want):
        for key in ("table", "scale", "measure", "paper", "paper_ci", "ours", "ours_ci", "run", "space", "compared"):
            assert got[key] == w[key], key
    assert rows[3]["row"] == "$+{\\bf P}_a$"


def test_forest_rows_have_both_figures_a_group_per_unit_and_mark_the_nearest():
    rows = paper_report.forest_rows(_comparison(), spaces=True)
    assert [r["label"] for r in rows] == ["STS 2012 MSRvid (textual)", "caption→image medr (grounded)",
                                          "caption→image R@1 (textual) ≈ — +P_a", "caption→image R@1 (textual) ≈ — C_g"]
    assert [r["group"] for r in rows] == ["Table 5 (Pearson r × 100)", "Table 2 (median rank)", "Table 3 (R@K %)",
                                          "Table 3 (R@K %)"]
    assert rows[1]["paper"] == (4.0, None, None) and rows[1]["ours"] == (16.0, 15.0, 17.0)


def test_the_forest_link_sits_where_the_report_puts_it():
    res = {"comparison": _comparison(), "protocol": {"spaces": []}}
    plain = "\n".join(["## A paper", "", "setup"] + paper_report.comparison_lines(res))
    linked = "\n".join(["## A paper", "", "setup"] + paper_report.comparison_lines(res, "figures/r-x.png"))
    assert paper_report.with_forest_link(plain, "figures/r-x.png") == linked
    assert paper_report.with_forest_link(linked, "figures/r-x.png") == linked  # once, however often redrawn
    assert paper_report.with_forest_link(linked, None) == plain
    assert paper_report.with_forest_link("## no tables", "figures/r-x.png") == "## no tables"


def test_charts_only_redraws_the_forest_plots_of_a_report_from_its_tables(tmp_path, capsys):
    docs = tmp_path / "report.md"
    section = "\n".join(["## Character-level grounding", ""] + paper_report.comparison_lines(
        {"comparison": _comparison(), "protocol": {"spaces": []}}))
    update_sections(docs, {"merkx_frank": section}, PAPER_NAMES, header=paper_report.DOCS_HEADER, tag="reproduce")
    assert rp.main(["all", "--charts-only", "--write-docs", str(docs)]) == 0
    text = docs.read_text(encoding="utf-8")
    assert text.count("](figures/report-merkx_frank.png)") == 1
    assert "[vete] no section in" in capsys.readouterr().out
    height, width = _png_shape(tmp_path / "figures" / "report-merkx_frank.png")
    assert width == 850 and height > 300
    assert rp.main(["merkx_frank", "--charts-only", "--write-docs", str(docs)]) == 0
    assert docs.read_text(encoding="utf-8") == text  # redrawing changes nothing


def test_charts_only_needs_the_report_and_nothing_else(tmp_path):
    with pytest.raises(SystemExit) as e:
        rp.parse_args(["vete", "--charts-only"])
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        rp.parse_args(["vete"])  # without --charts-only, --output-dir stays required
    assert rp.parse_args(["vete", "--charts-only", "--write-docs", "r.md"]).output_dir is None


def test_a_report_without_comparable_figures_gets_no_forest_plot(tmp_path, capsys):
    rows = [dict(r, ours=None) for r in _comparison()]
    assert not forest_chart({"paper": "vete", "title": "t", "comparison": rows}, tmp_path / "f.png")
    assert not (tmp_path / "f.png").exists()
    assert "no forest plot" in capsys.readouterr().out


# ----------------------------------------------------------------------------- the benchmark's model-choice chart


def test_an_exports_figure_comes_from_its_card_or_its_run(tmp_path):
    shipped = REPO / "grounded_text" / "shipped" / "vete_bow_flickr8k" / "export"
    (value, lo, hi), source = runs.export_figure(shipped)
    card = json.loads((shipped.parent / "model.json").read_text())["figures"]["STS-B test"]
    assert (value, [lo, hi]) == (card["value"], card["ci95"]) and source == "vete_bow_flickr8k/model.json"
    run = tmp_path / "run"
    (run / "export").mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps(_metrics(0.4, 0.5, [0.45, 0.55])))
    assert runs.export_figure(run / "export") == ((0.5, 0.45, 0.55), "run/metrics.json")
    assert runs.export_figure(tmp_path / "nothing" / "export") is None


def _rates(median: float) -> dict:
    return {"32": {"median": median, "min": median - 90.0, "max": median + 90.0}}


def test_chart_node_keeps_the_timed_encoders_with_a_figure(tmp_path):
    run = tmp_path / "runs" / "char"
    (run / "export").mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps(_metrics(0.6, 0.64, [0.61, 0.67])))
    shipped = str(REPO / "grounded_text" / "shipped" / "vete_bow_flickr8k" / "export")
    report = {"encode": {"export_dir": shipped, "sentences_per_second": _rates(18000.0)},
              "chart_exports": {"char": {"export_dir": str(run / "export"), "sentences_per_second": _rates(900.0)}},
              "reference": {"sentences_per_second": _rates(300.0)}}
    args = bench.parse_args(["--skip-fit", "--export", shipped, "--chart", str(tmp_path / "c.png")])
    node = runs.chart_node(report, args, tmp_path)
    assert [p["label"] for p in node["points"]] == ["vete_bow_flickr8k", "char"]
    assert node["points"][1] == {"label": "char", "sentences_per_second": [900.0, 810.0, 990.0],
                                 "quality": [0.64, 0.61, 0.67], "quality_source": "char/metrics.json"}
    assert [p["label"] for p in node["left_out"]] == ["reference: TextVectorization"]  # no figure of its own
    assert _png_shape(runs.draw_chart(node, tmp_path / "c.png")) == (420, 650)


def test_benchmark_redraws_the_chart_of_a_saved_report(tmp_path, capsys):
    out = tmp_path / "model_choice.png"
    assert bench.main(["--chart-from", str(REPO / "docs" / "figures" / "model_choice.json"), "--chart", str(out)]) == 0
    assert _png_shape(out) == (420, 650) and f"wrote {out}" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--chart-from", "r.json"], ["--chart", "c.png", "--chart-batch", "64"],
                                  ["--chart", "c.png", "--floors"]])
def test_benchmark_chart_options_that_do_not_fit_are_refused(argv):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(argv)
    assert e.value.code == 2


# ----------------------------------------------------------------------------- the docs show their charts


@pytest.mark.parametrize("doc", ["reproduction.md", "models.md"])
def test_the_docs_show_their_charts(doc):
    text = (REPO / "docs" / doc).read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]+\]\(([^)]+\.png)\)", text)
    assert links, f"docs/{doc} links no chart"
    for link in links:
        png = REPO / "docs" / link
        assert png.is_file(), link
        assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size < 150_000, link
    if doc == "reproduction.md":  # a forest plot in every paper's section
        assert {f"figures/reproduction-{p}.png" for p in PAPER_NAMES} <= set(links)
