"""A finished snapshot run read as Merkx & Frank's whole schedule: its per-epoch curve, a single
snapshot exported as a model of its own, and dev retrieval by the package's evaluator."""

from __future__ import annotations

import json

import numpy as np
import pytest


def _metrics(epochs: int = 8, cycle: int = 4, chosen=(4, 8)) -> dict:
    rng = np.random.default_rng(0)
    history = {"loss": list(np.linspace(10, 2, epochs)), "val_rsum": list(rng.uniform(100, 300, epochs)),
               "val_avg2016": list(rng.uniform(0.5, 0.7, epochs))}
    for d in ("t2i", "i2t"):
        for k in (1, 5, 10):
            history[f"val_rsum/{d}_R@{k}"] = list(rng.uniform(0, 100, epochs))
    return {"history": history, "config": {"train": {"cycle_epochs": cycle}},
            "exported": {"kind": "snapshot_ensemble", "snapshot_epochs": list(chosen)}}


def test_curve_reads_every_epoch_and_marks_cycle_ends_and_the_chosen_snapshots():
    from grounded_text.experiments.schedule import curve, curve_markdown

    metrics = _metrics()
    rows = curve(metrics)
    assert [r["epoch"] for r in rows] == list(range(1, 9))
    assert [r["epoch"] for r in rows if r["cycle_end"]] == [4, 8]
    assert [r["epoch"] for r in rows if r["chosen"]] == [4, 8]
    h = metrics["history"]
    for i, r in enumerate(rows):
        assert r["rsum"] == pytest.approx(h["val_rsum"][i]) and r["loss"] == pytest.approx(h["loss"][i])
        assert r["t2i_R@10"] == pytest.approx(h["val_rsum/t2i_R@10"][i])
        assert r["i2t_R@1"] == pytest.approx(h["val_rsum/i2t_R@1"][i])
        assert r["sts16"] == pytest.approx(h["val_avg2016"][i])
        assert r["sts12"] is None  # not logged by this run
    table = curve_markdown(rows).splitlines()
    assert len(table) == 2 + 8
    assert "in the ensemble" in table[2 + 3] and "snapshot" not in table[2 + 2]
    assert f"{h['val_rsum'][0]:.1f}" in table[2]


def test_curve_refuses_a_run_without_history():
    from grounded_text.experiments.schedule import curve

    with pytest.raises(ValueError, match="no per-epoch history"):
        curve({"history": {}, "config": {}})


def test_compare_markdown_pairs_each_row_with_its_difference_and_p():
    from grounded_text.experiments.schedule import compare_markdown

    fig = {"value": 0.7, "ci": [0.65, 0.75], "n": 750}
    result = {
        "figures": {"baseline": {"STS12 MSRvid r": fig, "caption→image R@10": {"value": 53.0, "ci": [50.8, 55.3]}},
                    "ensemble": {"STS12 MSRvid r": {**fig, "value": 0.72},
                                 "caption→image R@10": {"value": 60.0, "ci": [58.0, 62.0]}}},
        "paired": {"ensemble − baseline": {"STS12 MSRvid r": {"a": 0.72, "b": 0.70, "n": 750, "p": 0.0004},
                                          "caption→image R@10": {"a": 60.0, "b": 53.0, "n": 1000, "p": 0.2}}},
        "dev": {row: {"caption_to_image": {"R@1": 1.0, "R@5": 2.0, "R@10": 3.0},
                      "image_to_caption": {"R@1": 4.0, "R@5": 5.0, "R@10": 6.0}, "rsum": 21.0}
                for row in ("baseline", "ensemble")},
    }
    md = compare_markdown(result)
    assert "| `ensemble` | 1.0 | 2.0 | 3.0 | 4.0 | 5.0 | 6.0 | 21.0 |" in md
    assert "| STS12 MSRvid r | 0.700 [0.650, 0.750] | 0.720 [0.650, 0.750] |" in md
    assert "| STS12 MSRvid r | +0.020 (p < 0.001) |" in md
    assert "| caption→image R@10 | +7.0 (p = 0.200) |" in md
    # A figure scored for no row is a dash, never a number.
    assert "| STS-B test r (cosine) | – | – |" in md


def test_two_rows_naming_one_model_are_scored_once_and_read_alike(monkeypatch, tmp_path):
    """The best single snapshot can be the last one: the study scores that model once, and both
    rows carry its figures and its paired tests."""
    from grounded_text.experiments import schedule

    calls = {"score": [], "dev": []}

    def score(model, rule, data_dir, cache_dir, stem):
        calls["score"].append(model)
        return {"STS12 MSRvid r": {"value": len(model) / 100}}, np.full(3, len(model), dtype=float)

    def dev(model, data_dir):
        calls["dev"].append(model)
        return {"rsum": float(len(model))}

    monkeypatch.setattr(schedule, "score_with_rule", score)
    monkeypatch.setattr(schedule, "dev_retrieval", dev)
    monkeypatch.setattr(schedule, "paired", lambda a, b: {"d": float(a[0] - b[0])})
    models = {"baseline": "base", "ensemble": "run32", "best_single": "snap8", "last": "snap8"}
    result = schedule.compare(models, "baseline", tmp_path, tmp_path, ensemble="ensemble", single="best_single")
    assert calls == {"score": ["base", "run32", "snap8"], "dev": ["base", "run32", "snap8"]}
    assert result["figures"]["last"] == result["figures"]["best_single"] == {"STS12 MSRvid r": {"value": 0.05}}
    assert result["dev"]["last"] == result["dev"]["best_single"] == {"rsum": 5.0}
    assert result["paired"]["last − baseline"] == result["paired"]["best_single − baseline"] == {"d": 1.0}
    assert result["paired"]["ensemble − best_single"] == {"d": 0.0}


def test_training_curve_chart_draws_and_refuses_bad_lines(tmp_path):
    pytest.importorskip("matplotlib")
    from grounded_text.experiments.charts import training_curve_chart

    path = training_curve_chart([1, 2, 3, 4], {"R@10": [10.0, 20.0, None, 40.0]}, {"r": [50.0, 55.0, 54.0, 53.0]},
                                tmp_path / "c" / "curve.png", marks=[4], chosen=[4])
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="3 values for 4 epochs"):
        training_curve_chart([1, 2, 3, 4], {"R@10": [1.0, 2.0, 3.0]}, {"r": [1.0] * 4}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="no value"):
        training_curve_chart([1, 2], {"R@10": [None, None]}, {"r": [1.0, 2.0]}, tmp_path / "x.png")
    with pytest.raises(ValueError):
        training_curve_chart([1, 2], {"R@10": [1.0, float("nan")]}, {"r": [1.0, 2.0]}, tmp_path / "x.png")


@pytest.mark.slow
def test_a_single_snapshot_exports_as_its_own_model_and_scores_as_the_trainer_logged_it(data_dir, tmp_path):
    """The last snapshot, exported alone, gives the snapshot file's outputs (text and image
    towers), and its dev retrieval by the package's evaluator equals the trainer's last-epoch
    dev rsum (the same weights, split and sentence ends; R@K recomputed here in NumPy)."""
    import keras
    import tensorflow as tf

    from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TextConfig, TrainConfig
    from grounded_text.experiments.schedule import curve, dev_retrieval, export_snapshot
    from grounded_text.training.trainer import train

    cfg = ExperimentConfig(
        data=DataConfig(batch_size=32, bucket_by_length=True, max_train_images=64, max_dev_images=64),
        text=TextConfig(lowercase=False, sentence_end="space_period"),
        model=ModelConfig(name="char_gru_attention", embedding_dim=8,
                          encoder={"units": 4, "char_dim": 4, "attention_units": 8}),
        train=TrainConfig(epochs=2, learning_rate=1e-2, lr_min=1e-5, cycle_epochs=1, schedule="cyclic_cosine",
                          snapshots=True, ensemble_size=2, select_on="dev_retrieval"),
    )
    run = tmp_path / "run"
    metrics = train(cfg, data_dir, run, evaluate=False, verbose=0)
    rows = curve(json.loads((run / "metrics.json").read_text()))
    assert [r["epoch"] for r in rows if r["cycle_end"]] == [1, 2] and all(r["chosen"] for r in rows)
    out = export_snapshot(run, 2, tmp_path / "last")
    probe = ["A dog runs .", "TWO kids!", ""]
    feats = np.random.default_rng(1).normal(size=(3, metrics["data"]["feature_dim"])).astype(np.float32)
    text = keras.saving.load_model(run / "snapshots" / "snapshot_02.keras")
    image = keras.saving.load_model(run / "snapshots" / "image_snapshot_02.keras")
    np.testing.assert_allclose(tf.saved_model.load(str(out / "export"))(tf.constant(probe)).numpy(),
                               text(tf.constant(probe)).numpy(), atol=1e-5)
    np.testing.assert_allclose(tf.saved_model.load(str(out / "image_export"))(tf.constant(feats)).numpy(),
                               image(tf.constant(feats)).numpy(), atol=1e-5)
    dev = dev_retrieval(out, data_dir)
    assert dev["rsum"] == pytest.approx(metrics["history"]["val_rsum"][-1], abs=0.05)
    with pytest.raises(FileNotFoundError, match="snapshot_03"):
        export_snapshot(run, 3, tmp_path / "none")
