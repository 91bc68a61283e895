"""The experiments layer: the one reuse rule, the override grammar, the figures registry, the
number formatter and the report writer; and that the drivers are plans over it."""

import ast
import json
import sys
import types
from pathlib import Path

import pytest

from grounded_text.config.files import config_toml
from grounded_text.config.schema import ConfigError
from grounded_text.experiments import runner
from grounded_text.papers import plans
from grounded_text.papers.plans import RunPlan
from grounded_text.reporting import figures
from grounded_text.reporting import tables as report

REPO = Path(__file__).resolve().parents[1]
PLAN = RunPlan("bow", "vete_bow", {"train.epochs": 1, "model.embedding_dim": 16, "data.max_train_images": 64})


def _finished_run(path: Path, config, *, status: str = "complete", toml: bool = True) -> Path:
    """A run folder as grounded_text.train leaves it (config.toml, metrics.json, run_state.json, export/)."""
    (path / "export").mkdir(parents=True)
    d = config.to_dict()
    if toml:
        (path / "config.toml").write_text(config_toml(config))
    (path / "metrics.json").write_text(json.dumps({"config": d, "selection": {"best_epoch": 1}}))
    (path / "run_state.json").write_text(json.dumps({"version": 1, "status": status, "config": d, "epochs": 1,
                                                     "epochs_done": 1}))
    return path


@pytest.fixture
def fake_train(monkeypatch):
    """The trainer replaced by a recorder: a test fails if a reused run would be trained."""
    calls = []
    monkeypatch.setattr(runner, "train",
                        lambda config, data_dir, out, **kw: calls.append((config, Path(out), kw)) or {"config": "new"})
    return calls


def test_a_finished_run_of_the_same_config_is_reused(tmp_path, fake_train):
    run = _finished_run(tmp_path / "bow", PLAN.config())
    assert runner.decide(PLAN.config(), run).action == "reuse"
    result = runner.ensure_run(PLAN.config(), run, tmp_path)
    assert result.reused and result.metrics["selection"] == {"best_epoch": 1}
    assert fake_train == []  # nothing trained


def test_a_finished_run_of_another_config_is_not_reused(tmp_path, fake_train):
    run = _finished_run(tmp_path / "bow", PLAN.config())
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    other = PLAN.with_overrides({"train.epochs": 2})
    with pytest.raises(runner.RunConflict, match=r"train\.epochs: 1 → 2"):
        runner.decide(other.config(), run)
    with pytest.raises(runner.RunConflict, match="remove it or choose another output folder"):
        runner.ensure_run(other.config(), run, tmp_path)
    assert fake_train == [] and {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    # The config is also read from metrics.json when the run has no config.toml.
    legacy = _finished_run(tmp_path / "legacy", PLAN.config(), toml=False)
    (legacy / "run_state.json").unlink()  # a run from before resumable runs
    assert runner.decide(PLAN.config(), legacy).action == "reuse"
    with pytest.raises(runner.RunConflict, match=r"model\.embedding_dim: 16 → 32"):
        runner.decide(PLAN.with_overrides({"model.embedding_dim": 32}).config(), legacy)


def test_unfinished_or_empty_run_folders_are_trained(tmp_path, fake_train):
    assert runner.decide(PLAN.config(), tmp_path / "none").action == "train"
    interrupted = _finished_run(tmp_path / "int", PLAN.config(), status="interrupted")
    assert runner.decide(PLAN.config(), interrupted).action == "resume"
    other = PLAN.with_overrides({"train.epochs": 3}).config()
    assert runner.decide(other, interrupted).action == "overwrite"  # holds no result: replaced
    result = runner.ensure_run(other, interrupted, tmp_path, evaluate=False, verbose=0)
    assert not result.reused and len(fake_train) == 1
    config, out, kw = fake_train[0]
    assert out == interrupted and config.train.epochs == 3
    assert kw == {"evaluate": False, "verbose": 0, "resume": False, "overwrite": True}


def test_override_grammar_is_the_trainers():
    assert plans.parse_sets(["train.epochs=3", "model.loss_params.k=5", "data.max_train_images=none"]) == {
        "train.epochs": 3, "model.loss_params.k": 5, "data.max_train_images": None}
    assert plans.nest({"model.loss_params.k": 5, "model.loss": "triplet"}) == {
        "model": {"loss_params": {"k": 5}, "loss": "triplet"}}
    assert plans.merge_overrides({"model.encoder": {"units": 8, "word_dim": 8}, "train.epochs": 1},
                                 {"model.encoder": {"units": 4}, "train.epochs": 2}) == {
        "model.encoder": {"units": 4, "word_dim": 8}, "train.epochs": 2}
    with pytest.raises(ConfigError, match="not a field"):
        RunPlan("x", "vete_bow", {"train.epoch": 1}).config()
    with pytest.raises(ConfigError, match="does not fit"):
        RunPlan("x", "vete_bow", {"train.epochs": "many"}, base="flags").config()
    # The two bases: the record's settings, or the trainer's flags (defaults + the record's choices).
    record = RunPlan("x", "two_branch_khard", {"model.loss_params.k": 5}).config()
    flags = RunPlan("x", "two_branch_khard", {"model.loss_params.k": 5}, base="flags").config()
    assert record.model.loss_params["k"] == flags.model.loss_params["k"] == 5
    assert record.model.name == flags.model.name == "two_branch_khard"


def test_one_formatter():
    assert report.fmt(-0.0991) == "−0.099" and report.fmt(-0.0991, minus="-") == "-0.099"
    assert report.fmt(2.5, 1, signed=True) == "+2.5" and report.fmt(-2.5, 1, signed=True) == "−2.5"
    assert report.fmt(None) == report.fmt(float("nan")) == "–"
    assert report.fmt(0.4567, 1, scale=100) == "45.7" and report.fmt(1234, 0, thousands=True) == "1,234"
    assert report.fmt(0.00012345, 4, small=3) == "0.000123" and report.fmt(128, 4, exact_ints=True) == "128"
    assert report.fmt("abc") == "abc"
    assert figures.fmt_figure(27.51, "caption→image R@1") == "27.5" and figures.fmt_figure(0.7, "STS12 r") == "0.700"


def test_figures_registry_reads_suite_reports():
    node = {"sts": {"STS12": {"subsets": {"MSRvid": {"pearson": 0.8, "spearman": 0.7}},
                              "pearson": {"mean": 0.6}, "spearman": {"mean": 0.5}},
                    "STS13": {"subsets": {}, "pearson": {"mean": 0.3}, "spearman": {"mean": 0.2}},
                    "STS16": {"subsets": {}, "pearson": {"mean": 0.9}, "spearman": {"mean": 0.8}},
                    "SICK": {"test": {"pearson": 0.4, "spearman": 0.35}}},
            "retrieval": {"caption_to_image": {"R@1": 1.0, "R@5": 5.0, "R@10": 10.0, "medr": 50.0},
                          "image_to_caption": {"R@1": 2.0, "R@5": 6.0, "R@10": 11.0, "medr": 40.0}, "rsum": 35.0}}
    assert figures.FIGURES["sts12_msrvid"].read(node, "spearman") == 0.7
    assert figures.FIGURES["sts12_mean"].cell(node) == "60.0" and figures.FIGURES["stsb_test"].read(node) is None
    rows = figures.read_families(node, [("sts", {"subsets": True}), "mean_of_year_means", "rsum"])
    assert list(rows) == ["STS12 MSRvid r", "STS12 mean r", "STS13 mean r", "STS16 mean r", "SICK-R test r (cosine)",
                          "mean of STS12/13/16 means r", "rsum"]
    assert rows["mean of STS12/13/16 means r"] == pytest.approx((0.6 + 0.3 + 0.9) / 3)
    assert figures.read_families(node, ["retrieval"])["image→caption medr"] == 40.0


def test_report_writer_and_sections(tmp_path):
    report.write_report({"a": 1}, "| x |", json_path=tmp_path / "r.json", markdown_path=tmp_path / "r.md")
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 1} and (tmp_path / "r.md").read_text() == "| x |\n"
    doc = tmp_path / "doc.md"
    report.update_sections(doc, {"b": "B1"}, ["a", "b"], header="# H\n", tag="t")
    report.update_sections(doc, {"a": "A1"}, ["a", "b"], header="# H\n", tag="t")
    report.update_sections(doc, {"b": "B2"}, ["a", "b"], header="# H\n", tag="t")
    text = doc.read_text()
    assert text.startswith("# H") and text.index("A1") < text.index("B2") and "B1" not in text
    assert report.markdown_table(["a", "b"], [(1, 2)], ["---", "---:"]) == ["| a | b |", "|---|---:|", "| 1 | 2 |"]


@pytest.mark.parametrize("module", ["grounded_text/reproduce.py", "grounded_text/ablation.py",
                                    "grounded_text/benchmarks/paper_baselines.py"])
def test_drivers_are_plans_over_the_experiments_layer(module):
    tree = ast.parse((REPO / module).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert any(m == "grounded_text.experiments" or m.startswith("grounded_text.experiments.") for m in imported), module


def test_predictions_are_the_pairs_behind_the_sts_report(data_dir):
    import numpy as np

    from grounded_text.evaluation.sts import evaluate_sts
    from grounded_text.experiments.scoring import predictions

    def encoder(sentences):  # a fixed random bag of characters: fast, deterministic, not constant
        table = np.random.default_rng(0).normal(size=(256, 8))
        return np.array([table[[ord(c) % 256 for c in s] or [0]].mean(0) for s in sentences], dtype=np.float32)

    sts_dir = data_dir / "sts"
    pred = predictions(encoder, sts_dir, sections=("sts",))
    report = evaluate_sts(encoder, sts_dir)
    assert set(pred["sts"]) == set(pred["gold"]) and pred["ranks"] == {}
    for key in ("STS12/MSRvid", "STS16/headlines", "STSBenchmark/test", "SICK/test"):
        year, _, name = key.partition("/")
        node = report[year]["subsets"][name] if year.startswith("STS1") else report[year][name]
        assert len(pred["sts"][key]) == node["n"]
        assert np.corrcoef(pred["sts"][key], pred["gold"][key])[0, 1] == pytest.approx(node["pearson"], abs=1e-5)


def test_predictions_hold_the_retrieval_ranks_of_each_query():
    import numpy as np

    from grounded_text.experiments.scoring import predictions

    rng = np.random.default_rng(1)
    feats = rng.normal(size=(4, 5)).astype(np.float32)
    ids = np.array(["a", "a", "b", "b", "c", "c"])
    pairs = types.SimpleNamespace(image_ids=ids, feature_rows=np.array([0, 0, 2, 2, 3, 3]), features=feats,
                                  captions=np.array([f"cap {i}" for i in range(6)]))
    vecs = rng.normal(size=(6, 5))
    encoder = lambda s: vecs[[int(x.split()[1]) for x in s]]  # noqa: E731
    pred = predictions(encoder, None, pairs, lambda x: x, sections=("retrieval",))
    # Independent reference: cosine, then 1 + the number of other images (captions) scored at least as high.
    t = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    imgs = feats[[0, 2, 3]] / np.linalg.norm(feats[[0, 2, 3]], axis=1, keepdims=True)
    sims, own = t @ imgs.T, np.array([0, 0, 1, 1, 2, 2])
    c2i = [1 + sum(sims[i, j] >= sims[i, own[i]] for j in range(3) if j != own[i]) for i in range(6)]
    best = [max(sims[own == j, j]) for j in range(3)]
    i2c = [1 + sum(sims[i, j] >= best[j] for i in range(6) if own[i] != j) for j in range(3)]
    assert pred["ranks"]["caption_to_image"].tolist() == c2i and pred["ranks"]["image_to_caption"].tolist() == i2c


def test_a_logged_run_trains_in_a_child_that_writes_the_log_and_returns_its_status(tmp_path, monkeypatch):
    """The subprocess path (ablation's): the child's output goes to the log, its status comes
    back, and a failed child gives no metrics (the child is run by utils.children.run_child,
    which stops it with its parent)."""
    seen = []

    def command(data_dir, config_file, run_dir, action):
        seen.append((Path(config_file).read_text(), action))
        return [sys.executable, "-c", "import sys; print('trained'); sys.exit(3)"]

    monkeypatch.setattr(runner, "train_command", command)
    log = tmp_path / "logs" / "bow.log"
    result = runner.ensure_run(PLAN.config(), tmp_path / "bow", tmp_path, log=log)
    assert log.read_text().strip() == "trained" and result.metrics is None
    assert seen == [(config_toml(PLAN.config()), "train")] and log.with_suffix(".toml").is_file()
    assert result.returncode == 3


def test_a_resumed_logged_run_appends_to_its_log(tmp_path, monkeypatch):
    """Resuming keeps the trainer's output of the epochs before the interruption (kept only in
    the log); training anew starts the log afresh."""
    monkeypatch.setattr(runner, "train_command",
                        lambda *a: [sys.executable, "-c", "print('epoch 3')"])
    log = tmp_path / "bow.log"
    log.write_text("epoch 1\nepoch 2\n")
    monkeypatch.setattr(runner, "decide", lambda c, d: runner.Decision("resume", "an interrupted run"))
    runner.ensure_run(PLAN.config(), tmp_path / "bow", tmp_path, log=log)
    lines = log.read_text().splitlines()
    assert lines[:2] == ["epoch 1", "epoch 2"] and lines[-1] == "epoch 3"
    assert lines[2].startswith("--- resumed ") and lines[2].endswith(": an interrupted run ---")
    monkeypatch.setattr(runner, "decide", lambda c, d: runner.Decision("train", "no run"))
    runner.ensure_run(PLAN.config(), tmp_path / "bow", tmp_path, log=log)
    assert log.read_text().splitlines() == ["epoch 3"]
