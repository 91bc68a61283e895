"""python -m grounded_text.reproduce: the plans and budgets, run lookup, the docs writer, the CLI's
errors, and every paper's smoke budget on the real 64-image slice."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grounded_text import reproduce as rp
from grounded_text.experiments import comparison, paper_report
from grounded_text.experiments.reproduction import find_run_dir, write_docs
from grounded_text.papers.reproduction import BUDGETS, PAPER_NAMES, PAPERS, plan_runs

REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- fast: plans, lookup, docs


def test_plans_follow_the_budget_table():
    full = plan_runs("vete", "full")
    assert [r.spec.name for r in full] == ["vete_bow", "vete_rnn", "vete_cnn", "vete_bow_covariance",
                                           "vete_bow_skt", "vete_bow_rank"]
    assert all(r.selected for r in full) and full[0].overrides == {}
    assert [r.overrides["model.loss"] for r in full[3:]] == ["covariance", "skt", "rank"]

    smoke = plan_runs("kolluru", "smoke")
    assert [r.selected for r in smoke] == [True, False, False]  # the main run only
    assert [r.overrides["model.loss_params.k"] for r in smoke] == [1, 5, 10]
    assert smoke[0].overrides["data.max_train_images"] == 64 and smoke[0].overrides["train.epochs"] == 1
    assert smoke[0].overrides["model.encoder"] == {"hidden_units": [16]}

    cpu = plan_runs("merkx_frank", "cpu")[0]
    assert cpu.preset == "char_gru_attention_512"
    assert cpu.overrides == {"train.epochs": 8, "train.cycle_epochs": 4}  # 2 cosine cycles
    cfg = cpu.config()
    assert (cfg.model.name, cfg.model.encoder["units"], cfg.train.epochs, cfg.train.cycle_epochs) == (
        "char_gru_attention_512", 512, 8, 4)
    assert plan_runs("merkx_frank", "full")[0].config().model.encoder["units"] == 1024  # the paper's n
    # The width ablation is the main run itself where the budget trains the half width instead.
    assert [r.selected for r in plan_runs("merkx_frank", "cpu")] == [True, False]
    assert "same run as char_gru_attention" in plan_runs("merkx_frank", "cpu")[1].reason
    # One cycle at the paper's width, with the half width beside it as the width ablation.
    cycle = plan_runs("merkx_frank", "cycle")
    assert [r.selected for r in cycle] == [True, True]
    assert [(c.model.encoder["units"], c.train.epochs, c.train.cycle_epochs)
            for c in (r.config() for r in cycle)] == [(1024, 4, 4), (512, 4, 4)]
    full = [r.config() for r in plan_runs("merkx_frank", "full")]
    assert [(c.model.encoder["units"], c.train.epochs) for c in full] == [(1024, 32), (512, 32)]
    assert plan_runs("bordes", "cpu")[0].overrides["train.epochs"] == 8

    only = plan_runs("kolluru", "smoke", only=["two_branch_khard_k10"])
    assert [r.selected for r in only] == [False, False, True]
    assert [r.selected for r in plan_runs("vete", "smoke", only=["vete_rnn"])] == [False, True] + [False] * 4
    assert all(r.selected for r in plan_runs("kolluru", "smoke", training=False))  # --from-runs: all looked up


def test_smoke_overrides_reach_the_config():
    planned = plan_runs("kolluru", "smoke", only=["two_branch_khard_k5"])[1]
    cfg = planned.config()
    assert (cfg.model.name, cfg.model.loss_params["k"], cfg.model.embedding_dim) == ("two_branch_khard", 5, 16)
    assert (cfg.data.max_train_images, cfg.data.max_dev_images, cfg.train.epochs) == (64, 64, 1)


def test_smoke_encoder_merges_with_the_records_encoder():
    cfg = plan_runs("vete", "smoke", only=["vete_rnn"])[1].config()
    assert cfg.model.encoder["word_dim"] == 8 and cfg.model.encoder["units"] == 8
    assert set(cfg.model.encoder) > {"word_dim", "units"}  # the record's other keys are kept


def _fake_run(path: Path, model: str, loss_params: dict) -> Path:
    (path / "export").mkdir(parents=True)
    (path / "metrics.json").write_text(json.dumps({"config": {"model": {"name": model, "loss": "triplet",
                                                                        "loss_params": loss_params}}}))
    return path


def test_from_runs_lookup_by_name_then_by_config(tmp_path):
    k1, k5, k10 = PAPERS["kolluru"].runs
    _fake_run(tmp_path / "long" / "a", "two_branch_khard", {})  # trained without --loss-param: the preset's K = 1
    _fake_run(tmp_path / "long" / "b", "two_branch_khard", {"k": 5})
    _fake_run(tmp_path / "two_branch_khard_k10", "two_branch_khard", {"k": 3})  # named: the name wins
    _fake_run(tmp_path / "other", "vete_bow", {})
    assert find_run_dir(tmp_path, "kolluru", k1)[0] == tmp_path / "long" / "a"
    assert find_run_dir(tmp_path, "kolluru", k5)[0] == tmp_path / "long" / "b"
    assert find_run_dir(tmp_path, "kolluru", k10)[0] == tmp_path / "two_branch_khard_k10"
    vete_rnn = PAPERS["vete"].runs[1]
    assert find_run_dir(tmp_path, "vete", vete_rnn) == (None, [])
    # A CPU-size variant of the record stands for the paper's run.
    _fake_run(tmp_path / "cpu" / "char", "char_gru_attention_512", {})
    char = PAPERS["merkx_frank"].runs[0]
    assert find_run_dir(tmp_path, "merkx_frank", char)[0] == tmp_path / "cpu" / "char"
    # Run folders linked into one place are found through the links.
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "k5").symlink_to(tmp_path / "long" / "b", target_is_directory=True)
    (linked / "loop").symlink_to(linked, target_is_directory=True)  # bounded by the depth
    assert find_run_dir(linked, "kolluru", k5)[0] == linked / "k5"
    assert find_run_dir(linked, "kolluru", k10) == (None, [])


def _fake_results(paper: str, headline: dict, command: str = "python -m grounded_text.reproduce x") -> dict:
    runs = {}
    for spec in PAPERS[paper].runs:
        if spec.main:
            runs[spec.name] = {"status": "ok", "preset": spec.preset, "record": spec.preset, "trained_with": "1 epochs",
                               "training": {"best_epoch": 1, "selection": "val_loss", "exported": "best_epoch",
                                            "feature_file": "/d/efficientnet_lite0.npz", "feature_dim": 1280,
                                            "train_images": 64},
                               "config": {"data": {"dataset": "flickr8k"}}, "headline": headline}
        else:
            runs[spec.name] = {"status": "skipped", "reason": "ablation run"}
    return {"paper": paper, "title": PAPERS[paper].title, "citation": PAPERS[paper].citation,
            "budget": "smoke", "budget_description": BUDGETS["smoke"].description, "mode": "train",
            "from_runs": None, "command": command,
            "evaluation_settings": {"test_images": 64, "same_image_n": 100, "transfer_kfold": 3,
                                    "transfer_max_examples": 200},
            "protocol": {"sections": list(PAPERS[paper].protocol.sections), "transfer": False,
                         "description": ["d"]},
            "runs": runs, "figures": comparison.figure_rows(PAPERS[paper], runs),
            "ablations": comparison.ablation_tables(PAPERS[paper], runs),
            "data_differences": comparison.data_differences(PAPERS[paper], runs, Path("/nonexistent")), "notes": [],
            "comparison": comparison.comparison_rows(PAPERS[paper], runs)}


def test_docs_writer_tables_and_section_update(tmp_path):
    mf = _fake_results("merkx_frank", {"STS12 MSRvid r": 0.7, "caption→image R@1": 30.0})
    rows = {r["measure"]: r for r in mf["figures"]}
    assert rows["STS12 MSRvid r"]["paper"] == 0.799 and rows["STS12 MSRvid r"]["difference"] == pytest.approx(-0.099)
    assert rows["image→caption R@10"]["ours"] is None and rows["image→caption R@10"]["paper"] == 79.3
    docs = tmp_path / "reproduction.md"
    write_docs(docs, {"merkx_frank": mf})
    write_docs(docs, {"vete": _fake_results("vete", {"STS12 mean r": 0.5})})
    text = docs.read_text()
    assert text.startswith("# Reproducing the papers")
    assert text.index("reproduce:vete:start") < text.index("reproduce:merkx_frank:start")  # PAPERS order
    assert "| STS12 MSRvid r | 0.799 | 0.700 | −0.099 | Merkx & Frank 2019, Table 5, Flickr8k column |" in text
    assert "| caption→image R@1 | 27.5 | 30.0 | +2.5 |" in text
    assert "| image features | ResNet-152, 2048-d, mean of 10 crops | efficientnet_lite0, 1280-d" in text
    assert "| STS12 mean r | not in the paper | 0.500 | – | – |" in text
    assert "| budget | `smoke`:" in text and "| command | `python -m grounded_text.reproduce x`" in text
    assert "| RNN | `vete_rnn` | (skipped) |" in text  # ablation rows of runs not trained
    # The paper's tables: every recorded figure shown, never "not reported" beside one.
    assert "| MSRvid | STS 2012 MSRvid | 79.9 | [77.2, 82.3] |" in text and "not reported" not in text
    # Running merkx_frank again replaces its section only.
    write_docs(docs, {"merkx_frank": _fake_results("merkx_frank", {"STS12 MSRvid r": 0.8}, "cmd2")})
    text = docs.read_text()
    assert text.count("reproduce:merkx_frank:start") == 1 and "`cmd2`" in text
    assert "| STS12 MSRvid r | 0.799 | 0.700 |" not in text and "| STS12 MSRvid r | 0.799 | 0.800 |" in text
    assert "| STS12 mean r | not in the paper | 0.500 |" in text


def test_an_ablation_whose_run_is_a_budget_twin_is_not_tabled():
    mf = PAPERS["merkx_frank"]
    runs = {"char_gru_attention": {"status": "ok", "headline": {"STS12 MSRvid r": 0.7}},
            "char_gru_attention_512": {"status": "skipped", "twin": "char_gru_attention"}}
    assert comparison.ablation_tables(mf, runs) == {}  # "n = 1024" would label the n = 512 stand-in
    runs["char_gru_attention_512"] = {"status": "ok", "headline": {"STS12 MSRvid r": 0.6}}
    assert [r["setting"] for r in comparison.ablation_tables(mf, runs)["width"]] == ["n = 1024", "n = 512"]


def test_supervised_figures_name_the_regressor_that_made_them():
    node = {"test": {"pearson": 0.7, "pearson_ci95": [0.6, 0.8], "n": 1379}}
    senteval = comparison.read_ours({"supervised_sts": {"STSBenchmark": {**node, "model": "senteval"}}},
                                "supervised/STSBenchmark/test")
    ridge = comparison.read_ours({"supervised_sts": {"STSBenchmark": node}}, "supervised/STSBenchmark/test")
    assert (senteval["value"], senteval["protocol"], ridge["protocol"]) == (0.7, "senteval", "ridge")


def test_the_documented_command_leaves_the_data_variable_to_the_shell(tmp_path, monkeypatch):
    import shlex

    from grounded_text.reporting.tables import public_command

    monkeypatch.setenv("GROUNDED_TEXT_DATA", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    cmd = public_command("python -m grounded_text.reproduce", ["vete", "--data-dir", str(tmp_path), "--output-dir",
                                                              str(tmp_path / "runs" / "a b")])
    assert cmd == 'python -m grounded_text.reproduce vete --data-dir "$GROUNDED_TEXT_DATA" --output-dir \'runs/a b\''
    assert shlex.split(cmd)[5] == "$GROUNDED_TEXT_DATA"  # what the shell expands


def test_training_curve_table_reads_the_logged_history():
    metrics = {"history": {"loss": [3.0, 2.0], "val_rsum": [100.0, 120.5], "val_avg2016": [0.5, 0.6],
                           "val_avg2012/MSRvid": [0.7, 0.65], "val_avg2016/headlines": [0.1, 0.2]}}
    curve = comparison.training_curve(metrics)
    assert list(curve) == ["val_rsum", "val_avg2016", "val_avg2012/MSRvid"]  # the validation figures only
    mf = _fake_results("merkx_frank", {})
    mf["runs"]["char_gru_attention"]["training"]["curve"] = curve
    text = paper_report.format_paper_markdown(mf)
    assert "| epoch | dev R@1+5+10 (both directions) | STS16 mean r | STS12 MSRvid r |" in text
    assert "| 1 | 100.0 | 0.500 | 0.700 |" in text and "| 2 | 120.5 | 0.600 | 0.650 |" in text
    assert comparison.training_curve({}) == {}


@pytest.mark.parametrize("argv", [["nope", "--output-dir", "x"], ["vete", "--budget", "huge", "--output-dir", "x"],
                                  ["vete", "--only", "not_a_run", "--output-dir", "x"],
                                  ["vete", "--from-runs", "/nonexistent/runs", "--output-dir", "x"]])
def test_bad_arguments_exit_2_with_an_error(argv, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "grounded_text.reproduce", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "error:" in proc.stderr


# ----------------------------------------------------------------------------- real data: smoke budgets

EXPECTED = {
    "merkx_frank": ["STS12 MSRvid r", "STS16 mean r", "mean of STS12/13/16 means r", "STS-B test r (cosine)",
                     "SICK-R test r (cosine)", "STS-B test r (supervised)", "SICK-R test r (supervised)",
                     "caption→image R@1", "caption→image R@10", "image→caption R@1", "image→caption medr"],
    "kolluru": ["caption→image R@1", "caption→image R@5", "caption→image R@10", "image→caption R@1", "rsum"],
    "vete": ["STS12 mean r", "STS13 mean r", "STS16 mean r", "STS-B test r (cosine)", "same-image r"],
    "bordes": ["textual: STS12 mean r", "textual: STS16 mean ρ", "textual: mNNO@10", "textual: ρ_vis",
               "textual: C_inter", "textual: C_intra", "textual: MR acc", "textual: TREC acc", "textual: MRPC F1"],
}


@pytest.fixture(scope="module")
def smoke_all(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    docs = out / "reproduction.md"
    assert rp.main(["all", "--budget", "smoke", "--output-dir", str(out), "--data-dir", str(data_dir),
                    "--write-docs", str(docs)]) == 0
    return out, docs


@pytest.mark.slow
@pytest.mark.xdist_group("reproduce_smoke_all")  # one worker trains smoke_all once
@pytest.mark.parametrize("paper", PAPER_NAMES)
def test_smoke_budget_writes_results(smoke_all, paper):
    out, docs = smoke_all
    res = json.loads((out / paper / "results.json").read_text())
    assert {"paper", "budget", "command", "runs", "figures", "ablations", "data_differences", "protocol",
            "evaluation_settings"} <= set(res)
    assert (res["paper"], res["budget"], res["mode"]) == (paper, "smoke", "train")
    main = next(s.name for s in PAPERS[paper].runs if s.main)
    run = res["runs"][main]
    assert run["status"] == "ok", run
    assert run["config"]["data"]["max_train_images"] == 64 and run["config"]["train"]["epochs"] == 1
    assert run["training"]["train_images"] == 64
    for key in EXPECTED[paper]:
        assert run["headline"].get(key) is not None, (paper, key, sorted(run["headline"]))
    assert all(r["status"] == "skipped" for n, r in res["runs"].items() if n != main)  # smoke: no ablations
    if "retrieval" in res["protocol"]["sections"]:
        ret = run["evaluation"]["text"]["retrieval"]
        assert (ret["protocol"], ret["n_images"]) == ("all", 64)
    if paper == "bordes":
        assert run["evaluation"]["grounded"]["status"] in ("ok", "missing")
        assert run["evaluation"]["textual"]["transfer"]["SNLI"]["status"] == "unavailable"  # no SNLI train set
    figures = {r["measure"]: r for r in res["figures"]}
    for label, fig in PAPERS[paper].figures.items():
        assert figures[label]["paper"] == fig.value
        if " R@" in label or label.endswith("medr"):  # the smoke slice is not the paper's 1,000-image test
            assert figures[label]["difference"] is None
        else:
            assert figures[label]["difference"] == pytest.approx(figures[label]["ours"] - fig.value)
    assert (out / paper / "results.md").read_text().startswith("## ")
    text = docs.read_text()
    assert f"<!-- reproduce:{paper}:start -->" in text and "| measure | paper | ours | ours − paper |" in text
    assert "| paper row | measure | paper | paper 95 % CI | ours | our 95 % CI | ours − paper |" in text
    assert res["comparison"] and "not reported" not in text and res["verdict"]


@pytest.mark.slow
@pytest.mark.xdist_group("reproduce_smoke_all")
def test_only_trains_an_ablation_run_and_from_runs_finds_it(smoke_all, data_dir, tmp_path):
    out, _ = smoke_all
    assert rp.main(["kolluru", "--budget", "smoke", "--only", "two_branch_khard_k5", "--output-dir",
                    str(tmp_path / "k5"), "--data-dir", str(data_dir)]) == 0
    res = json.loads((tmp_path / "k5" / "kolluru" / "results.json").read_text())
    assert res["runs"]["two_branch_khard_k5"]["config"]["model"]["loss_params"]["k"] == 5
    assert res["runs"]["two_branch_khard_k1"]["status"] == "skipped"

    # Runs trained elsewhere, in folders not named after the runs: found by their configs.
    runs = tmp_path / "long_runs"
    shutil.copytree(out / "kolluru" / "runs" / "two_branch_khard_k1", runs / "x" / "2026-run-a")
    shutil.copytree(tmp_path / "k5" / "kolluru" / "runs" / "two_branch_khard_k5", runs / "y")
    docs = tmp_path / "reproduction.md"
    assert rp.main(["kolluru", "--budget", "smoke", "--from-runs", str(runs), "--output-dir", str(tmp_path / "fr"),
                    "--data-dir", str(data_dir), "--write-docs", str(docs)]) == 0
    res = json.loads((tmp_path / "fr" / "kolluru" / "results.json").read_text())
    assert res["mode"] == "from_runs"
    assert res["runs"]["two_branch_khard_k1"]["run_dir"] == str(runs / "x" / "2026-run-a")
    assert res["runs"]["two_branch_khard_k5"]["run_dir"] == str(runs / "y")
    assert res["runs"]["two_branch_khard_k10"]["status"] == "missing"
    k_table = {r["setting"]: r for r in res["ablations"]["K"]}
    assert k_table["K = 5"]["measures"]["caption→image R@10"] is not None
    assert not (tmp_path / "fr" / "kolluru" / "runs").exists()  # nothing trained
    assert "evaluates already-trained runs found under" in docs.read_text()


def test_the_misspelt_paper_key_still_works_for_one_release_and_warns():
    with pytest.warns(FutureWarning, match="removed in 0.3.0; use 'merkx_frank'"):
        a = rp.parse_args(["merckx_frank", "--output-dir", "out"])
    assert a.papers == ["merkx_frank"]
