"""The trainer as a library (grounded_text.training.trainer) and TF-free config resolution
(grounded_text.papers.resolve): resolved once per run, user callbacks after ours, ``verbose=0``
silent, a bad config refused before TensorFlow loads, and the exported width rule."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
from grounded_text.papers import resolve
from grounded_text.papers.presets import PRESETS, record_config

REPO = Path(__file__).resolve().parents[1]
CAPS = ["A dog runs on the beach .", "A dog jumps .", "Two kids play in the snow", "a cat sleeps",
        "A man rides a bike", "a black dog swims", "two girls on a bench", "a red car"]


# ----------------------------------------------------------------------------- resolution, no TensorFlow


def test_a_bad_combination_is_refused_before_tensorflow_loads(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[model]\nname = "vete_bow"\nloss = "cluster"\n')  # cluster needs the grouped sampler
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "grounded_text.train", "--config", str(bad),
                           "--output-dir", str(tmp_path / "run")], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    errors = [line for line in lines if not line.startswith("import time:")]
    assert len(errors) == 1 and errors[0].startswith("error: Loss 'cluster' needs several captions"), errors
    imported = [line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")]
    assert "grounded_text.papers.resolve" in imported  # the log is the real one
    assert not [m for m in imported if "tensorflow" in m or "keras" in m]
    assert not (tmp_path / "run").exists()


def test_resolution_is_marked_idempotent_and_undone_by_an_edit():
    raw = ExperimentConfig(model=ModelConfig(name="vete_rnn"))
    assert not resolve.is_resolved(raw)
    cfg = resolve.resolve_config(raw)
    assert resolve.is_resolved(cfg) and resolve.is_resolved(cfg.model) and resolve.is_resolved(cfg.text)
    assert resolve.ensure_resolved(cfg) is cfg  # not resolved a second time
    again = resolve.resolve_config(cfg)
    assert again == cfg and again is not cfg
    assert cfg.model.encoder["cell"] == "lstm" and raw.model.encoder == {}  # the input is not modified
    cfg.model.encoder["cell"] = "gru"  # edited after resolution: resolved again on use
    assert not resolve.is_resolved(cfg) and not resolve.is_resolved(cfg.model)
    cfg.train.epochs = 0
    with pytest.raises(ValueError, match="epochs must be an integer >= 1"):
        resolve.ensure_resolved(cfg)
    assert not resolve.is_resolved(dataclasses.replace(resolve.resolve_config(raw)))


def test_fill_config_of_a_bare_config_is_the_record():
    for name in PRESETS:
        assert resolve.fill_config(ExperimentConfig(model=ModelConfig(name=name))) == record_config(name), name


def test_build_model_takes_a_resolved_config_as_it_is(monkeypatch):
    from grounded_text.layers import build_vocabulary
    from grounded_text.models.registry import build_model

    cfg = resolve.preset_config("vete_rnn", {"model": {"embedding_dim": 8, "encoder": {"word_dim": 8}}})
    calls = []
    monkeypatch.setattr(resolve, "fill_config", lambda c: calls.append(c) or pytest.fail("filled again"))
    gm = build_model(cfg.model, cfg.text, build_vocabulary(CAPS), feature_dim=5, seed=0)
    assert calls == [] and gm.text_tower.output.shape[-1] == 8


# ----------------------------------------------------------------------------- the exported width


def _built_width(cfg, feature_dim=7):
    from grounded_text.layers import build_vocabulary
    from grounded_text.models.registry import build_model

    gm = build_model(cfg.model, cfg.text, build_vocabulary(CAPS), feature_dim=feature_dim, seed=0,
                     train_captions=CAPS)
    return int(gm.text_tower.output.shape[-1])


def test_bordes_exports_its_grounded_width_not_n():
    cfg = resolve.preset_config("bordes_cg_pg")
    assert (cfg.model.embedding_dim, cfg.model.encoder["grounded_dim"]) == (128, 512)  # u is 128-d, g(u) 512-d
    small = {"word_dim": 8, "grounded_hidden": 8, "grounded_dim": 12}
    cases = [({}, None, 12), ({"export_space": "textual"}, None, 8), ({"projection": "identity"}, None, 8),
             ({}, "cross_modal", 7)]  # the CM baseline: g maps into the image feature space (d = 7)
    for encoder, loss, width in cases:
        cfg = resolve.resolve_config(ExperimentConfig(model=ModelConfig(
            name="bordes_cg_pg", embedding_dim=8, encoder={**small, **encoder}, loss=loss)))
        assert _built_width(cfg, feature_dim=7) == width, (encoder, loss)


@pytest.mark.parametrize("name, over", [
    ("vete_bow", {"model": {"embedding_dim": 8}}),
    ("vete_cnn", {"model": {"embedding_dim": 8, "encoder": {"word_dim": 8, "filters": 4}}}),
    ("char_gru_attention", {"model": {"embedding_dim": 8, "encoder": {"char_dim": 4, "units": 4,
                                                                      "attention_units": 8}}}),
])
def test_exported_width_is_n(name, over):
    cfg = resolve.preset_config(name, over)
    assert _built_width(cfg) == 8


# ----------------------------------------------------------------------------- one tiny run


@pytest.fixture(scope="module")
def tiny_run(data_dir, tmp_path_factory):
    """One 2-epoch run on 64 images through ``trainer.train`` with ``verbose=0``, an
    unresolved config, a user callback, fill_config counted and stdout/stderr captured."""
    import keras

    from grounded_text.training import trainer

    out = tmp_path_factory.mktemp("trainer") / "run"
    seen = []

    class UserCallback(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            state = json.loads((out / "run_state.json").read_text())
            seen.append({"epoch": epoch, "logs": sorted(logs), "epochs_done": state["epochs_done"],
                         "last_checkpoint": (out / "checkpoints" / "last.weights.h5").is_file()})

    config = ExperimentConfig(data=DataConfig(max_train_images=64, max_dev_images=16, batch_size=32,
                                              one_caption_per_image=False),
                              model=ModelConfig(embedding_dim=16), train=TrainConfig(epochs=2, steps_per_execution=2))
    fills = []
    real_fill = resolve.fill_config
    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        mp.setattr(resolve, "fill_config", lambda c: fills.append(c) or real_fill(c))
        metrics = trainer.train(config, data_dir, out, verbose=0, callbacks=[UserCallback()])
    return {"out": out, "metrics": metrics, "seen": seen, "fills": fills, "stdout": stdout.getvalue(),
            "stderr": stderr.getvalue()}


@pytest.mark.xdist_group("test_trainer_tiny_run")
@pytest.mark.slow
def test_the_config_is_resolved_once_per_run(tiny_run):
    assert len(tiny_run["fills"]) == 1  # train() resolves; prepare_training and build_model do not
    assert tiny_run["metrics"]["config"] == resolve.resolve_config(tiny_run["fills"][0]).to_dict()


@pytest.mark.xdist_group("test_trainer_tiny_run")
@pytest.mark.slow
def test_user_callbacks_run_after_ours(tiny_run):
    seen = tiny_run["seen"]
    assert [s["epoch"] for s in seen] == [0, 1]
    for s in seen:
        assert {"loss", "val_loss", "val_avg2016"} <= set(s["logs"])  # our STS scorer ran first
        assert s["epochs_done"] == s["epoch"] + 1 and s["last_checkpoint"]  # so did the checkpoints


@pytest.mark.xdist_group("test_trainer_tiny_run")
@pytest.mark.slow
def test_verbose_0_prints_nothing(tiny_run):
    assert tiny_run["stdout"] == "" and tiny_run["stderr"] == ""
    metrics = tiny_run["metrics"]
    assert "STS16" in metrics["evaluation"]["sts"]  # evaluated all the same: only not printed
    assert json.loads((tiny_run["out"] / "metrics.json").read_text())["selection"] == metrics["selection"]
    card = (tiny_run["out"] / "export" / "model_card.md").read_text()
    assert "float32 [batch, 16]" in card and "not evaluated" not in card
