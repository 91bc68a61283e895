"""The trained models shipped inside the package: listed, loadable by name offline, within the
wheel's size budget, and scoring on STS what their cards say."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

import grounded_text as gt
from grounded_text import shipped
from grounded_text.experiments.shipped import (
    FIGURES,
    MAX_EXPORT_BYTES,
    MAX_SHIPPED_BYTES,
    RECIPES,
    shipped_figures,
)

SHIPPED = shipped.names()


def test_at_least_the_readme_job_is_shipped_and_listed_without_tensorflow():
    assert "vete_bow_flickr8k" in SHIPPED
    code = ("import sys, grounded_text as gt; ms = gt.models(); "
            "assert 'tensorflow' not in sys.modules; print([(m['name'], m['dims']) for m in ms])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "('vete_bow_flickr8k', 128)" in out.stdout


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_model_has_its_record_card_and_fits_the_budget(name):
    (record,) = [m for m in gt.models() if m["name"] == name]
    assert name in RECIPES
    folder = shipped.SHIPPED_DIR / name
    for part in ("export", "image_export"):
        assert sum(p.stat().st_size for p in (folder / part).rglob("*") if p.is_file()) <= MAX_EXPORT_BYTES
    assert sum(p.stat().st_size for p in shipped.SHIPPED_DIR.rglob("*") if p.is_file()) <= MAX_SHIPPED_BYTES
    assert list(record["figures"]) == list(FIGURES)
    for figure in record["figures"].values():
        lo, hi = figure["ci95"]
        assert lo < figure["value"] < hi and figure["n"] > 0
    card = (shipped.export_dir(name) / "model_card.md").read_text()
    assert record["command"] in card and "research use" in card
    assert f"python -m grounded_text.experiments.shipped {name}" in card
    # The card's table shows the record's figures (3 decimals, with their intervals).
    for key, figure in record["figures"].items():
        row = f"| {key} | {figure['value']:.3f} | [{figure['ci95'][0]:.3f}, {figure['ci95'][1]:.3f}] |"
        assert row in card, row
    assert (shipped.export_dir(name) / "saved_model.pb").is_file()
    assert shipped.image_export_dir(name) is not None


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_model_was_trained_by_its_recipe(name):
    """The card's command is the recipe's: the shipped config is what that command resolves to."""
    from grounded_text.experiments.shipped import recipe_config
    from grounded_text.experiments.shipped_card import selection_sentence
    from grounded_text.shipped import MODEL_FILE, SHIPPED_DIR
    from grounded_text.training.run_dir import config_diff

    record = json.loads((SHIPPED_DIR / name / MODEL_FILE).read_text())
    assert config_diff(record["config"], recipe_config(name)) == []
    # The card says what chose the epoch: STS16 only where it did.
    card = (shipped.export_dir(name) / "model_card.md").read_text()
    select_on = record["config"]["train"]["select_on"]
    assert selection_sentence(select_on) in card
    assert ("STS16 chose the epoch" in card) == (select_on == "avg2016")


def test_from_run_refuses_a_run_the_recipe_did_not_make(tmp_path, capsys):
    from grounded_text.experiments.shipped import main, recipe_config

    name = "char_gru_attention_flickr8k"
    assert main([name, "--data-dir", str(tmp_path), "--from-run", str(tmp_path)]) == 2
    assert "error: --from-run:" in capsys.readouterr().err  # no metrics.json: no finished run
    config = recipe_config(name)
    config["train"]["seed"] = 7
    (tmp_path / "metrics.json").write_text(json.dumps({"config": config}))
    assert main([name, "--data-dir", str(tmp_path), "--from-run", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --from-run:") and "train.seed: 7 → 0" in err
    assert "--model char_gru_attention_512" in err  # the command that makes the run it wants


def test_as_run_writes_a_study_arm_of_the_shipped_model_and_never_overwrites(tmp_path, capsys):
    from grounded_text.experiments.runner import finished, plain, run_config
    from grounded_text.experiments.shipped import main
    from grounded_text.papers.studies import CAPTION_GAP_ON_RECORD
    from grounded_text.reporting.figures import FIGURES as TABLE_FIGURES
    from grounded_text.training.run_dir import config_diff

    name, run = "char_gru_attention_flickr8k", tmp_path / "record_s0"
    assert main([name, "--as-run", str(run)]) == 0
    record = json.loads((shipped.SHIPPED_DIR / name / shipped.MODEL_FILE).read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    assert finished(run) and "shipped model" in metrics["assembled_from"]
    for part in ("export", "image_export"):
        assert (run / part / "saved_model.pb").read_bytes() == (
            shipped.SHIPPED_DIR / name / part / "saved_model.pb").read_bytes()
    # The shipped model is the study's clip_per_tower arm trained for the paper's whole schedule:
    # its run config differs from the arm's in the epochs alone.
    study_config = plain(CAPTION_GAP_ON_RECORD.plan("clip_per_tower").config().to_dict())
    assert config_diff(run_config(run), study_config) == ["train.epochs: 32 → 4"]
    # The ablation table reads the card's figures.
    assert TABLE_FIGURES["trainer_sts12_msrvid"].read(metrics) == record["figures"]["STS12 MSRvid"]["value"]
    assert TABLE_FIGURES["trainer_sick_test"].with_interval(metrics)[1:] == tuple(
        v * 1.0 for v in record["figures"]["SICK test"]["ci95"])
    before = (run / "metrics.json").read_bytes()
    assert main([name, "--as-run", str(run)]) == 2
    assert capsys.readouterr().err.startswith("error: --as-run:") and (run / "metrics.json").read_bytes() == before


@pytest.mark.parametrize("name", SHIPPED)
def test_load_by_name_encodes(name):
    enc = gt.load(name)
    emb = enc.encode(["a dog runs", ""])
    assert emb.shape == (2, json.loads((shipped.SHIPPED_DIR / name / "model.json").read_text())["dims"])
    assert np.isfinite(emb).all()
    norms = np.linalg.norm(emb, axis=1)
    assert norms[0] == pytest.approx(1.0, abs=1e-4)
    # The empty sentence: unit norm where the tower adds sentence boundaries (bag of words) or the
    # model's sentence-end rule gives it a "." to read (a character model trained on " ."-ended
    # captions); the documented zero vector where nothing is left to read.
    empty_reads_nothing = name.startswith("char_") and enc.sentence_end == "none"
    assert norms[1] == pytest.approx(0.0 if empty_reads_nothing else 1.0, abs=1e-4)
    assert enc.handle == str(shipped.export_dir(name))


def test_a_folder_wins_over_a_shipped_name_and_an_unknown_name_lists_the_shipped(tmp_path, monkeypatch):
    from grounded_text.serving.loader import resolve_model

    assert resolve_model("vete_bow_flickr8k") == shipped.export_dir("vete_bow_flickr8k")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vete_bow_flickr8k").mkdir()
    assert resolve_model("vete_bow_flickr8k") == "vete_bow_flickr8k"
    with pytest.raises(FileNotFoundError, match="vete_bow_flickr8k"):
        gt.load("no_such_model")


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_model_scores_what_its_card_says(name, data_dir):
    record = next(m for m in gt.models() if m["name"] == name)
    fresh = shipped_figures(gt.load(name).encode, data_dir / "sts")
    card = (shipped.export_dir(name) / "model_card.md").read_text()
    for key, figure in fresh.items():
        assert figure["n"] == record["figures"][key]["n"]
        assert abs(figure["value"] - record["figures"][key]["value"]) <= 1e-3, (key, figure, record["figures"][key])
        np.testing.assert_allclose(figure["ci95"], record["figures"][key]["ci95"], atol=1e-3)
        shown = re.search(rf"\| {re.escape(key)} \| ([0-9.]+) \|", card)
        assert shown and abs(float(shown.group(1)) - figure["value"]) <= 1e-3 + 5e-4, key


def test_evaluate_takes_a_shipped_name(data_dir, tmp_path):
    from grounded_text.evaluate import main

    out = tmp_path / "report.json"
    assert main(["--model", "vete_bow_flickr8k", "--sts-dir", str(data_dir / "sts"), "--years", "STS12",
                 "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    record = next(m for m in gt.models() if m["name"] == "vete_bow_flickr8k")
    assert abs(report["headline"]["STS12/MSRvid pearson"] - record["figures"]["STS12 MSRvid"]["value"]) <= 1e-3


@pytest.mark.parametrize("normalize", [True, False])
def test_an_int8_image_tower_keeps_the_map_and_shrinks(tmp_path, normalize):
    import keras
    import tensorflow as tf

    from grounded_text.experiments.shipped import _bytes, quantize_image_tower
    from grounded_text.layers.branches import LinearImageEncoder
    from grounded_text.serving.export import export_image_tower

    rng = np.random.default_rng(0)
    d, n = 512, 256  # weights large enough (512 KB) to outweigh the SavedModel's graph
    inputs = keras.Input((d,))
    layer = LinearImageEncoder(n, normalize=normalize)
    tower = keras.Model(inputs, layer(inputs))
    kernel, bias = rng.normal(size=(d, n)).astype(np.float32), rng.normal(size=n).astype(np.float32)
    layer.dense.set_weights([kernel, bias])
    path = export_image_tower(tower, tmp_path / "image_export", {"data": {"features": "x"}})
    before = _bytes(path)
    x = rng.normal(size=(50, d)).astype(np.float32)
    report = quantize_image_tower(path, x)
    got = tf.saved_model.load(str(path))(tf.constant(x)).numpy()
    want = x @ kernel + bias  # the float32 map, computed independently
    if normalize:
        want /= np.linalg.norm(want, axis=1, keepdims=True)
    cos = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    assert report["weights"] == "int8" and report["min_cosine"] == pytest.approx(cos.min(), abs=1e-6)
    assert cos.min() > 0.999 and report["max_abs_diff"] > 0  # quantized, and close
    assert _bytes(path) < 0.5 * before
    config = json.loads((path / "assets" / "config.json").read_text())
    assert config.pop("integrity")["files"]["saved_model.pb"]["bytes"] == (path / "saved_model.pb").stat().st_size
    assert config == {"data": {"features": "x"}}  # the record describes the quantized files
    from grounded_text.serving.integrity import check_export

    check_export(path)


def test_int8_quantization_refuses_a_tower_that_is_not_linear(tmp_path):
    import keras

    from grounded_text.experiments.shipped import quantize_image_tower
    from grounded_text.serving.export import export_image_tower

    inputs = keras.Input((8,))
    tower = keras.Model(inputs, keras.layers.Dense(4)(keras.layers.Dense(16, activation="relu")(inputs)))
    path = export_image_tower(tower, tmp_path / "mlp", {})
    with pytest.raises(ValueError, match="not a linear image tower"):
        quantize_image_tower(path, np.ones((3, 8), np.float32))


def test_a_card_says_which_snapshots_an_ensemble_holds():
    """A snapshot ensemble's card names its epochs and how they were chosen; a best-epoch
    export's card names its epoch."""
    from grounded_text.experiments.shipped_card import shipped_card
    from grounded_text.shipped import MODEL_FILE, SHIPPED_DIR

    record = json.loads((SHIPPED_DIR / "char_gru_attention_flickr8k" / MODEL_FILE).read_text())
    snaps = [{"epoch": 4 * k, "val_rsum": 200.0 + k} for k in range(1, 9)]
    ensemble = {**record, "epochs": 32, "best_epoch": 32,
                "exported": {"kind": "snapshot_ensemble", "snapshot_epochs": [32, 28],
                             "ranked_on": "val_rsum (dev retrieval)", "all_snapshots": snaps}}
    card = shipped_card("char_gru_attention_flickr8k", ensemble)
    assert ("The ensemble of the snapshots of epochs 32 and 28 of 32 (the 2 of 8 cycle-end snapshots with "
            "the highest Flickr8k dev rsum") in card
    assert "Best epoch" not in card
    single = {**record, "epochs": 4, "best_epoch": 4, "exported": {"kind": "best_epoch", "epoch": 4}}
    assert "Best epoch 4 of 4;" in shipped_card("char_gru_attention_flickr8k", single)
