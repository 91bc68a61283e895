"""Progress displays of the long steps: the training bar ends at the batches each epoch runs
(no ``944/937``), and the evaluation suite reports its sections on stderr unless
``--no-progress``."""

from __future__ import annotations

import numpy as np
import pytest

WORDS = "a dog runs on the beach man rides red bike two kids play in snow cat sleeps".split()


def _bucketed_pairs(n: int, n_images: int = 9, d: int = 3):
    from grounded_text.data.pairs import CaptionPairs

    rng = np.random.default_rng(0)
    caps = np.array([" ".join(rng.choice(WORDS, size=int(rng.integers(1, 12)))) for _ in range(n)])
    rows = rng.integers(0, n_images, size=n).astype(np.int64)
    return CaptionPairs(caps, np.array([f"im{r}" for r in rows]), rows,
                        rng.normal(size=(n_images, d)).astype(np.float32))


@pytest.fixture
def bar_updates(monkeypatch):
    """Every ``keras.utils.Progbar.update`` call: (count shown, total, finalize)."""
    from keras.src.utils import progbar

    seen = []
    real = progbar.Progbar.update

    def update(self, current, values=None, finalize=None):
        seen.append((int(current), self.target, bool(finalize)))
        return real(self, current, values, finalize)

    monkeypatch.setattr(progbar.Progbar, "update", update)
    return seen


def test_training_bar_ends_at_the_batches_each_epoch_runs(bar_updates, capsys):
    """10 bucketed batches of 8 in compiled calls of 4 steps: Keras' own bar shows 12/10 at the
    epoch's last call (3 calls of 4), the trainer's bar 10/10, the total being the batches the
    optimizer ran each epoch."""
    import keras

    from grounded_text.config.schema import ModelConfig, TextConfig, TrainConfig
    from grounded_text.data.pairs import make_dataset
    from grounded_text.layers import build_vocabulary
    from grounded_text.models import build_model
    from grounded_text.training.callbacks import StepProgbar, progress_callbacks
    from grounded_text.training.preparation import compile_for_training

    pairs = _bucketed_pairs(83)  # 10 full batches of 8, 3 pairs left over
    ds = make_dataset(pairs, 8, seed=0, bucket_by_length=True, bucket_pool=2)
    steps = int(ds.cardinality())
    assert steps == 10
    gm = build_model(ModelConfig(embedding_dim=4), TextConfig(), build_vocabulary(pairs.captions.tolist()),
                     feature_dim=3, seed=0)
    compile_for_training(gm.train_model, TrainConfig(learning_rate=1e-3, schedule="constant", steps_per_execution=4),
                         steps)

    class Count(keras.callbacks.Callback):
        """The batches the optimizer ran each epoch, and the bar's total (``params["steps"]``)."""

        def __init__(self):
            super().__init__()
            self.epochs = []

        def on_epoch_begin(self, epoch, logs=None):
            self.start = int(self.model.optimizer.iterations)

        def on_epoch_end(self, epoch, logs=None):
            self.epochs.append((int(self.model.optimizer.iterations) - self.start, self.params["steps"]))

    count = Count()
    bars = progress_callbacks([count], verbose=1)
    assert [type(b) for b in bars] == [StepProgbar]
    gm.train_model.fit(ds, epochs=2, verbose=1, shuffle=False, callbacks=[count, *bars])
    capsys.readouterr()
    assert count.epochs == [(steps, steps)] * 2  # the total is the batches run, each epoch
    assert bar_updates, "no progress bar was shown"
    assert all(shown <= total for shown, total, _ in bar_updates), bar_updates  # never 12/10
    assert [shown for shown, _, _ in bar_updates] == [4, 8, 10, 10] * 2  # the last call ends the epoch
    assert {total for _, total, _ in bar_updates} == {steps}

    # Where Keras would show no bar, or the caller brought one, the trainer adds none.
    assert progress_callbacks([count], verbose=0) == []
    assert progress_callbacks([keras.callbacks.ProgbarLogger()], verbose="auto") == []


@pytest.mark.slow
def test_the_trainer_shows_that_bar(data_dir, tmp_path, bar_updates, capsys):
    """``train`` on a bucketed 64-image slice: 320 captions, 10 batches of 32 in calls of 4
    steps; the bar's count ends at 10 of 10 in each epoch."""
    from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
    from grounded_text.training.trainer import train

    config = ExperimentConfig(data=DataConfig(max_train_images=64, max_dev_images=16, batch_size=32,
                                              one_caption_per_image=False, bucket_by_length=True),
                              model=ModelConfig(embedding_dim=8),
                              train=TrainConfig(epochs=2, steps_per_execution=4, select_on="last"))
    metrics = train(config, data_dir, tmp_path / "run", evaluate=False, verbose=1)
    out = capsys.readouterr().out
    assert metrics["data"]["train_pairs"] == 320
    training = [(shown, total) for shown, total, _ in bar_updates if total == 10]
    assert [shown for shown, _ in training] == [4, 8, 10, 10] * 2, bar_updates
    assert all(shown <= total for shown, total, _ in bar_updates if total is not None), bar_updates
    assert "10/10" in out and "12/10" not in out


def test_divergence_guard_names_the_steps_of_the_epochs_last_call():
    from grounded_text.training.guards import DivergenceGuard
    from grounded_text.training.run_errors import TrainingDiverged

    guard = DivergenceGuard(steps_per_epoch=10, steps_per_execution=4, learning_rate=1e-3)
    guard.on_epoch_begin(0)
    with pytest.raises(TrainingDiverged, match=r"step 10 of 10 .*steps 9-10\)"):  # Keras reports batch 11
        guard.on_train_batch_end(11, {"loss": float("nan")})


# ----------------------------------------------------------------------------- evaluate and reproduce sections


def _toy_encoder(sentences):
    """A deterministic stand-in for a SavedModel: a few character counts per sentence."""
    return np.array([[len(s) + 1.0, s.count("a") + 1.0, s.count("o") + 0.5, s.count(" ") + 2.0] for s in sentences],
                    np.float32)


@pytest.fixture
def toy_suite(tmp_path, monkeypatch):
    """The evaluate CLI's suite on two toy models (``serving.loader.load`` replaced), toy STS
    years and a COCO-format captions file: 2 models x (sts, same_image) = 4 sections."""
    import importlib
    import json

    from grounded_text.serving import loader as serving_loader

    cli = importlib.import_module("grounded_text.evaluate")  # the command (gt.evaluate is the API's)
    monkeypatch.setattr(serving_loader, "load", lambda path, batch_size=512, sentence_end=None: _toy_encoder)
    for year in ("STS12", "STS16"):
        folder = tmp_path / "data" / "sts" / f"{year}-en-test"
        folder.mkdir(parents=True)
        (folder / "STS.input.toy.txt").write_text("a dog\ta cat\na man runs\ta boy walks\nsnow\ta red bike\n"
                                                  "two kids\ttwo children\n")
        (folder / "STS.gs.toy.txt").write_text("3\n2.5\n0\n4.5\n")
    rng = np.random.default_rng(1)
    annotations = [{"image_id": i, "id": 10 * i + k, "caption": " ".join(rng.choice(WORDS, 5))}
                   for i in range(6) for k in range(3)]
    coco = tmp_path / "coco.json"
    coco.write_text(json.dumps({"annotations": annotations}))

    def run(*extra, report="report.json"):
        return cli.main(["--model", str(tmp_path / "toyA"), str(tmp_path / "toyB"), "--sections", "sts",
                         "same_image", "--data-dir", str(tmp_path / "data"), "--coco-captions", str(coco),
                         "--same-image-n", "5", "--json", str(tmp_path / report), *extra])

    return run, tmp_path


def _without_seconds(node):
    if isinstance(node, dict):
        return {k: _without_seconds(v) for k, v in node.items() if k != "seconds"}
    if isinstance(node, list):
        return [_without_seconds(v) for v in node]
    return node


def test_evaluate_shows_each_section_on_stderr_unless_no_progress(toy_suite, capsys):
    import json
    import re

    run, tmp = toy_suite
    assert run() == 0
    shown = capsys.readouterr()
    lines = [line for line in shown.err.splitlines() if line.startswith("evaluate [")]
    sections = ["toyA: sts", "toyA: same_image", "toyB: sts", "toyB: same_image"]
    expected = [p for k, name in enumerate(sections, 1)
                for p in (rf"evaluate \[{k}/4\] {name} \.\.\.$", rf"evaluate \[{k}/4\] {name} done in \d+\.\d s$")]
    assert len(lines) == len(expected), shown.err
    for line, pattern in zip(lines, expected):
        assert re.match(pattern, line), (line, pattern)
    assert "\r" not in shown.err and "evaluate [" not in shown.out  # a log: no redraws; stdout is the report's

    assert run("--no-progress", report="quiet.json") == 0
    quiet = capsys.readouterr()
    assert "evaluate [" not in quiet.err and quiet.out == shown.out.replace("report.json", "quiet.json")
    loud, silent = (json.loads((tmp / name).read_text()) for name in ("report.json", "quiet.json"))
    assert silent["command"] == loud["command"].replace("report.json", "quiet.json")  # --no-progress left out
    assert _without_seconds(silent) | {"command": ""} == _without_seconds(loud) | {"command": ""}


def test_evaluate_draws_a_bar_in_a_terminal(toy_suite, capsys, monkeypatch):
    import sys

    run, _ = toy_suite
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert run() == 0
    err = capsys.readouterr().err
    assert "evaluate [" not in err and "4/4" in err and "section" in err, err  # tqdm's bar, not the lines


def test_reproduce_shows_each_run_unless_no_progress(tmp_path, capsys):
    from grounded_text import reproduce as rp

    runs, data = tmp_path / "runs", tmp_path / "data"
    runs.mkdir()
    data.mkdir()
    argv = ["kolluru", "--budget", "smoke", "--from-runs", str(runs), "--data-dir", str(data)]
    assert rp.main([*argv, "--output-dir", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    selected = [r.spec.name for r in rp.plan_runs("kolluru", "smoke", training=False) if r.selected]
    assert len(selected) == 3
    lines = [line for line in err.splitlines() if line.startswith("reproduce kolluru [")]
    assert len(lines) == 3 * len(selected), err  # find ..., find done, evaluate skipped: per run
    assert lines[:3] == [f"reproduce kolluru [1/6] {selected[0]}: find ...",
                         lines[1], f"reproduce kolluru [2/6] {selected[0]}: evaluate skipped: no run found"]
    assert lines[1].startswith(f"reproduce kolluru [1/6] {selected[0]}: find done in ")
    assert lines[-1] == f"reproduce kolluru [6/6] {selected[-1]}: evaluate skipped: no run found"

    assert rp.main([*argv, "--output-dir", str(tmp_path / "b"), "--no-progress"]) == 0
    assert "reproduce kolluru [" not in capsys.readouterr().err
    a, b = ((tmp_path / x / "kolluru" / "results.md").read_text() for x in "ab")
    # The same report: the recorded command leaves --no-progress out.
    assert b == a.replace(str(tmp_path / "a"), str(tmp_path / "b")) and "no-progress" not in b


def test_train_no_progress_is_one_line_per_epoch():
    from grounded_text.train import config_from_args, parse_args

    assert parse_args(["--output-dir", "r"]).verbose == "auto"
    assert parse_args(["--output-dir", "r", "--no-progress"]).verbose == 2
    assert parse_args(["--output-dir", "r", "--no-progress", "--verbose", "1"]).verbose == 2
    assert parse_args(["--output-dir", "r", "--no-progress", "--verbose", "0"]).verbose == 0
    config_from_args(parse_args(["--output-dir", "r", "--model", "vete_bow", "--no-progress"]))  # not a config flag


def test_an_imported_ipykernel_is_not_a_notebook(monkeypatch):
    """A process that has only imported ``ipykernel`` (a test worker, a library) writes plain
    lines to a non-terminal stream; a running kernel's shell draws a bar."""
    import io
    import sys
    import types

    from grounded_text.utils.progress import interactive

    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    fake_ipython = types.ModuleType("IPython")
    fake_ipython.get_ipython = lambda: None
    monkeypatch.setitem(sys.modules, "IPython", fake_ipython)
    assert not interactive(io.StringIO())

    class KernelShell:
        config = {"IPKernelApp": {}}

    fake_ipython.get_ipython = KernelShell
    assert interactive(io.StringIO())


class _Terminal:
    """A stream that says it is a terminal and keeps every write in order."""

    def __init__(self):
        self.writes: list[str] = []

    def write(self, text):
        self.writes.append(text)
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return True

    def getvalue(self) -> str:
        return "".join(self.writes)


@pytest.mark.parametrize("kind", ["sections", "count"])
def test_a_log_line_and_a_warning_print_above_a_drawn_bar(kind, monkeypatch):
    """While a bar is drawn, a console log record and a command's warning are written through
    ``tqdm.write`` (the bar cleared, the line written whole, the bar drawn again): no line is
    glued to the middle of the bar."""
    import logging
    import sys
    import warnings

    from grounded_text.utils import quiet
    from grounded_text.utils.progress import CountProgress, SectionProgress
    from grounded_text.utils.quiet import one_line_warnings

    monkeypatch.setattr(quiet, "_recording", lambda: False)  # as on a console, not under pytest's recorder
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.delenv("GROUNDED_TEXT_VERBOSE", raising=False)
    console = logging.StreamHandler(term)  # a command's basicConfig handler on stderr
    console.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    monkeypatch.setattr(logging.root, "handlers", [console])
    log = logging.getLogger("grounded_text.test")
    with one_line_warnings(), warnings.catch_warnings():
        warnings.simplefilter("always")
        if kind == "sections":
            with SectionProgress(2, "evaluate", file=term) as progress, progress.section("sts"):
                log.warning("sts done in 0.2s")
                warnings.warn("STS13: skipping subset 'SMT'", UserWarning, stacklevel=1)
        else:
            with CountProgress(4, "encode", "sentence", file=term) as progress:
                progress.add(2)
                log.warning("sts done in 0.2s")
                warnings.warn("STS13: skipping subset 'SMT'", UserWarning, stacklevel=1)
                progress.add(2)
    assert logging.root.handlers == [console]  # the redirect ends with the bar
    text = term.getvalue()
    lines = text.replace("\r", "\n").split("\n")
    assert "WARNING grounded_text.test: sts done in 0.2s" in lines, text  # whole lines, not inside the bar
    assert "warning: STS13: skipping subset 'SMT'" in lines, text
    assert "UserWarning" not in text and "test_progress.py" not in text
