"""``python -m grounded_text.tune``: protocol files, Algorithm-2 seeding, resume, chief/workers.

The two end-to-end tests run the CLI in subprocesses on a small slice of the real data
(100 training images, 1 epoch, batch 32, no STS report per trial where not needed).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import keras_tuner as kt
import pytest

from grounded_text.tuning.space import (
    SpaceError,
    check_space_field,
    load_space,
    parse_space_override,
    resolve_space_file,
    tuner_dir,
    validate_all,
)

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--set", "train.epochs=1", "--set", "data.max_train_images=100", "--set", "data.batch_size=32",
         "--set", "data.one_caption_per_image=false", "--set", "text.max_vocab_size=5000"]


# ----------------------------------------------------------------------------- space files


def test_every_protocol_file_loads_against_config():
    # tuner_dir(): the checkout's tuner/, or the copy an installed wheel carries.
    found = validate_all(tuner_dir())
    assert "vete.toml" in found and "vete_bow" in found["vete.toml"]


def test_vete_defaults_are_the_records_and_algorithm_1_fixes_what_it_fixes():
    """Algorithm 1's `default` values are the vete_bow record's run (``python -m
    grounded_text.train``: Kurach et al. 2017 §4.1–4.2, one caption per image, 10 epochs, N =
    128); what §4.2 fixes is never drawn."""
    from grounded_text.models.registry import resolve_config
    from grounded_text.train import config_from_args, parse_args

    space = load_space("vete", "vete_bow")
    defaults = {h.name: h.default for h in space.hparams}
    cfg = resolve_config(space.to_config(defaults))
    ref = resolve_config(config_from_args(parse_args(["--output-dir", "x"])))
    assert cfg == ref
    fixed = {h.name: h.default for h in space.hparams if h.type == "fixed"}
    assert fixed == {"embedding_dim": 128, "one_caption_per_image": True, "epochs": 10}
    lr = space.get("learning_rate")
    assert (lr.type, lr.sampling, lr.min, lr.max) == ("float", "log", 1e-4, 1e-2)
    assert {h.name for h in space.hparams if h.type != "fixed"} == {"learning_rate", "batch_size", "min_count",
                                                                    "max_vocab_size", "pooling"}


def test_space_found_from_another_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_space_file("vete") == tuner_dir() / "vete.toml"
    with pytest.raises(FileNotFoundError, match="vete_cpu"):
        resolve_space_file("no_such_protocol")


def test_extends_merges_over_the_base():
    base, short = load_space("vete", "vete_bow"), load_space("vete_cpu", "vete_bow")
    assert short.names == base.names  # same hyperparameters, same order
    assert short.get("epochs").values == [1, 2, 3, 4]
    assert short.get("learning_rate") == base.get("learning_rate")
    assert short.protocol["objective"] == "avg2016" and short.protocol["trials"] == 20


def _write(tmp_path, text):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


def test_bad_space_files_fail_at_load(tmp_path):
    with pytest.raises(SpaceError, match="not a field of ExperimentConfig"):
        load_space(_write(tmp_path, '[models.vete_bow.hp.units]\nfield = "model.rnn_units"\ntype = "choice"\n'
                                    'values = [1]\n'), "vete_bow")
    with pytest.raises(SpaceError, match="does not fit model.embedding_dim"):
        load_space(_write(tmp_path, '[models.vete_bow.hp.n]\nfield = "model.embedding_dim"\ntype = "choice"\n'
                                    'values = [64, "big"]\n'), "vete_bow")
    with pytest.raises(SpaceError, match="no \\[models.vete_rnn\\]"):
        load_space(_write(tmp_path, "[models.vete_bow]\n"), "vete_rnn")
    with pytest.raises(SpaceError, match="min > 0"):
        load_space(_write(tmp_path, '[models.vete_bow.hp.lr]\nfield = "train.learning_rate"\ntype = "float"\n'
                                    'min = 0.0\nmax = 1.0\nsampling = "log"\n'), "vete_bow")
    with pytest.raises(SpaceError, match="set twice"):
        load_space(_write(tmp_path, '[fixed]\n"train.epochs" = 3\n[models.vete_bow.hp.e]\nfield = "train.epochs"\n'
                                    'type = "choice"\nvalues = [1, 2]\n'), "vete_bow")
    with pytest.raises(SpaceError, match="ablation_values"):
        load_space("vete", "vete_bow").get("learning_rate").__class__(
            name="x", field="train.learning_rate", type="float", min=0.1, max=1.0).candidates()


def test_overrides_and_field_types():
    assert parse_space_override("train.epochs=3") == ("train.epochs", 3)
    assert parse_space_override("data.one_caption_per_image=true") == ("data.one_caption_per_image", True)
    assert parse_space_override("text.max_vocab_size=none") == ("text.max_vocab_size", None)
    assert parse_space_override("model.pooling=sum") == ("model.pooling", "sum")
    check_space_field("text.max_vocab_size", None, "t")  # int | None
    with pytest.raises(SpaceError):
        check_space_field("train.epochs", 2.5, "t")
    with pytest.raises(SpaceError):
        check_space_field("train.epochs", True, "t")  # a bool is not an int here
    space = load_space("vete", "vete_bow").with_overrides({"train.epochs": 2, "data.max_train_images": 50})
    assert space.get("epochs").type == "fixed" and space.fixed["data.max_train_images"] == 50
    cfg = space.to_config(space.declare(kt.HyperParameters()))
    assert cfg.train.epochs == 2 and cfg.data.max_train_images == 50 and cfg.model.name == "vete_bow"


def test_overrides_use_the_trainers_grammar():
    """A trial is the plan the trainer's ``--set`` would give: one entry of a dict field is set
    with ``model.loss_params.KEY`` and the config equals ``experiments.plans.flags_config``'s."""
    from grounded_text.papers.plans import flags_config, parse_sets

    sets = ["model.loss=rank", "model.loss_params.margin=0.3", "train.epochs=2"]
    space = load_space("vete", "vete_bow").with_overrides(parse_sets(sets, error=SpaceError))
    values = space.declare(kt.HyperParameters())
    cfg = space.to_config(values)
    assert cfg.model.loss_params == {"margin": 0.3} and cfg.model.loss == "rank" and cfg.train.epochs == 2
    assert cfg == flags_config("vete_bow", space.overrides(values))
    with pytest.raises(SpaceError, match="not a field"):
        space.with_overrides({"model.loss_param.margin": 0.3})


def _draws(space, seed, n):
    hp = kt.HyperParameters()
    space.declare(hp)
    oracle = kt.oracles.RandomSearchOracle(objective=kt.Objective("avg2016", "max"), max_trials=n, seed=seed)
    oracle.update_space(hp)
    return [oracle.populate_space(str(i))["values"] for i in range(n)]


def test_ablation_keeps_the_same_random_sets():
    """Algorithm 2: fixing PARAM leaves every other hyperparameter's seeded draws unchanged."""
    space = load_space("vete", "vete_bow")
    free = _draws(space, 2017, 6)
    assert len({json.dumps(d, sort_keys=True) for d in free}) == 6  # distinct sets
    for value in space.get("batch_size").candidates():
        fixed = _draws(space.with_overrides({"batch_size": value}), 2017, 6)
        for a, b in zip(free, fixed):
            assert b["batch_size"] == value
            assert {k: v for k, v in a.items() if k != "batch_size"} == \
                   {k: v for k, v in b.items() if k != "batch_size"}
    other_seed = _draws(space, 7, 6)
    assert other_seed != free


# ----------------------------------------------------------------------------- end to end


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["CUDA_VISIBLE_DEVICES"] = ""
    for k in ("KERASTUNER_TUNER_ID", "KERASTUNER_ORACLE_IP", "KERASTUNER_ORACLE_PORT"):
        env.pop(k, None)
    env.update(extra)
    return env


def _start(args, log: Path, **env):
    return subprocess.Popen([sys.executable, "-m", "grounded_text.tune", *args], cwd=REPO, env=_env(**env),
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)


def _kill(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _trial_status(project: Path) -> dict[str, str]:
    out = {}
    for f in project.glob("trial_*/trial.json"):
        try:
            out[f.parent.name] = json.loads(f.read_text())["status"]
        except json.JSONDecodeError:
            # KerasTuner writes trial.json in place (no rename), so a poll can read it half-written:
            # not written yet, for this poll.
            continue
    return out


def _wait(pred, timeout, procs, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        for p in procs:
            if p.poll() not in (None, 0):
                raise AssertionError(f"{what}: a process exited with {p.returncode}")
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.mark.slow
def test_search_resumes_after_kill_without_rerunning(data_dir, tmp_path, capsys):
    directory = tmp_path / "tune"
    args = ["--data-dir", str(data_dir), "--directory", str(directory), "--project-name", "p",
            "--space", "vete_cpu", "--trials", "3", "--seed", "11", *SMALL]
    project = directory / "p"
    first = _start(args + ["--no-evaluate"], tmp_path / "first.log")
    try:
        # Trial 0 finished and trial 1 started (so the oracle has saved trial 0 as done): kill.
        _wait(lambda: _trial_status(project).get("trial_0") == "COMPLETED"
              and (project / "trial_1" / "worker.json").is_file(), 400, [first], "the first trial")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        _kill(first)
    t0_metrics = (project / "trial_0" / "run" / "metrics.json").read_text()
    t0_worker = json.loads((project / "trial_0" / "worker.json").read_text())
    assert t0_worker["pid"] == first.pid
    assert _trial_status(project).get("trial_2") is None

    second = _start(args + ["--no-evaluate"], tmp_path / "second.log")
    try:
        assert second.wait(timeout=600) == 0, (tmp_path / "second.log").read_text()[-4000:]
    finally:
        _kill(second)
    assert _trial_status(project) == {f"trial_{i}": "COMPLETED" for i in range(3)}
    # Trial 0 was not re-run: its files and its worker record are the first process's.
    assert (project / "trial_0" / "run" / "metrics.json").read_text() == t0_metrics
    assert json.loads((project / "trial_0" / "worker.json").read_text())["pid"] == first.pid
    for t in ("trial_1", "trial_2"):  # the interrupted trial 1 and trial 2 ran in the resumed process
        assert json.loads((project / t / "worker.json").read_text())["pid"] == second.pid
    summary = json.loads((project / "summary.json").read_text())
    assert summary["completed_trials"] == 3
    scores = {r["trial_id"]: r["avg2016"] for r in summary["trials"]}
    for tid, score in scores.items():  # the objective is the trainer's best-epoch avg2016
        m = json.loads((project / f"trial_{tid}" / "run" / "metrics.json").read_text())
        assert m["selection"]["monitor"] == "val_avg2016"
        assert score == pytest.approx(m["selection"]["best_value"], abs=1e-9)
    best = summary["best"]
    assert best["avg2016"] == max(scores.values())
    assert (Path(best["best_export_dir"]) / "saved_model.pb").is_file()
    assert "| trial | status | tuner |" in (project / "summary.md").read_text()

    # Rerunning a finished search runs nothing new (in-process: no TF start-up cost).
    from grounded_text.tune import main

    assert main(args + ["--no-evaluate"]) == 0
    assert (project / "trial_0" / "run" / "metrics.json").read_text() == t0_metrics
    assert not (project / "trial_3").exists() and _trial_status(project)["trial_2"] == "COMPLETED"
    # A different search in the same project directory is refused (error: ..., exit 2).
    assert main(args + ["--seed", "12"]) == 2
    assert "error: " in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_chief_and_two_workers_share_one_search(data_dir, tmp_path):
    directory = tmp_path / "tune"
    args = ["--data-dir", str(data_dir), "--directory", str(directory), "--project-name", "p",
            "--space", "vete_cpu", "--trials", "2", "--seed", "5", "--no-evaluate", *SMALL]
    port = str(_free_port())
    dist = {"KERASTUNER_ORACLE_IP": "127.0.0.1", "KERASTUNER_ORACLE_PORT": port}
    procs = []
    try:
        chief = _start(args, tmp_path / "chief.log", KERASTUNER_TUNER_ID="chief", **dist)
        procs.append(chief)

        def listening():
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", int(port))) == 0

        _wait(listening, 120, procs, "the chief's oracle server")
        for wid in ("tuner0", "tuner1"):
            procs.append(_start(args, tmp_path / f"{wid}.log", KERASTUNER_TUNER_ID=wid, **dist))
        for p, name in zip(procs[1:] + procs[:1], ("tuner0", "tuner1", "chief")):
            rc = p.wait(timeout=600)
            assert rc == 0, (tmp_path / f"{name}.log").read_text()[-4000:]
    finally:
        for p in procs:
            _kill(p)
    project = directory / "p"
    assert _trial_status(project) == {"trial_0": "COMPLETED", "trial_1": "COMPLETED"}
    summary = json.loads((project / "summary.json").read_text())  # written by the chief
    assert summary["completed_trials"] == 2
    ran_by = sorted(r["tuner_id"] for r in summary["trials"])
    assert ran_by == ["tuner0", "tuner1"]  # split between the workers, each trial once
    pids = {json.loads((project / f"trial_{i}" / "worker.json").read_text())["pid"] for i in range(2)}
    assert pids == {procs[1].pid, procs[2].pid}


def test_summary_and_ablation_table_pick_the_best(tmp_path):
    """write_summary: best = max avg2016 among COMPLETED trials; its export is copied; tables list all."""
    import types

    from keras_tuner.engine import trial as trial_module

    from grounded_text.tuning.report import write_ablation_table, write_summary

    space = load_space("vete_cpu", "vete_bow")
    trials = {}
    for tid, (status, score, sick) in enumerate([("COMPLETED", 0.30, 0.6), ("COMPLETED", 0.41, 0.7),
                                                 ("FAILED", None, None), ("COMPLETED", 0.35, 0.8)]):
        hp = kt.HyperParameters()
        space.declare(hp)
        t = trial_module.Trial(hp, trial_id=str(tid), status=status)
        if score is not None:
            for name, v in (("avg2016", score), ("SICK/test", sick), ("STS12/mean", score / 2)):
                t.metrics.register(name)
                t.metrics.update(name, v)
        trials[str(tid)] = t
        run = tmp_path / f"trial_{tid}" / "run"
        (run / "export").mkdir(parents=True)
        (run / "export" / "saved_model.pb").write_text(f"model {tid}")
        (run / "metrics.json").write_text(json.dumps({"config": {"id": tid}, "evaluation": {"sts": {}}}))
    tuner = types.SimpleNamespace(project_dir=str(tmp_path), oracle=types.SimpleNamespace(trials=trials))
    summary = write_summary(tuner, space)
    assert summary["completed_trials"] == 3 and len(summary["trials"]) == 4
    assert summary["best"]["trial_id"] == "1" and summary["best"]["avg2016"] == pytest.approx(0.41)
    assert (tmp_path / "best" / "export" / "saved_model.pb").read_text() == "model 1"
    md = (tmp_path / "summary.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| ") and "COMPLETED" in line]
    assert [r.split(" | ")[0] for r in rows] == ["| 1", "| 3", "| 0"]  # sorted by avg2016
    table = write_ablation_table("pooling", [("mean", summary), ("sum", {"completed_trials": 0, "best": None})],
                                 tmp_path)
    assert table["rows"][0]["avg2016"] == pytest.approx(0.41) and table["rows"][0]["best_trial"] == "1"
    assert table["rows"][0]["figures"]["SICK/test"] == pytest.approx(0.7)
    assert table["rows"][1]["avg2016"] is None
    assert "| mean | 3 | 1 | 0.4100 |" in (tmp_path / "ablation.md").read_text()
