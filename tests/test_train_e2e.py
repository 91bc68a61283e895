"""The whole path on a slice of the real data: train → export → evaluate (CLI)."""

import json
import subprocess
import sys

import pytest

from grounded_text.config.schema import DataConfig, ExperimentConfig, TrainConfig
from grounded_text.training.trainer import train


@pytest.mark.slow
def test_train_export_evaluate_on_real_slice(data_dir, tmp_path):
    cfg = ExperimentConfig(
        data=DataConfig(max_train_images=400, batch_size=64, one_caption_per_image=False),
        train=TrainConfig(epochs=2, learning_rate=3e-3),
    )
    metrics = train(cfg, data_dir, tmp_path / "run", evaluate=False, verbose=0)
    assert metrics["data"]["train_images"] == 400 and metrics["data"]["train_pairs"] == 2000
    assert metrics["data"]["dropped_captions_without_features"] == 5
    assert metrics["selection"]["monitor"] == "val_avg2016"
    assert len(metrics["history"]["val_avg2016"]) == 2
    assert metrics["history"]["loss"][-1] < metrics["history"]["loss"][0]  # it learns
    for f in ("metrics.json", "vocab.txt", "checkpoints/best.weights.h5", "export/saved_model.pb",
              "image_export/saved_model.pb"):
        assert (tmp_path / "run" / f).exists(), f
    assert any((tmp_path / "run" / "logs").rglob("*tfevents*"))

    report_path = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "grounded_text.evaluate", "--model", str(tmp_path / "run" / "export"),
         "--sts-dir", str(data_dir / "sts"), "--years", "STS16", "--json", str(report_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(report_path.read_text())["sts"]
    assert set(report) == {"STS16", "STSBenchmark", "SICK"}
    # The best epoch's avg2016 (selected in training) equals the evaluator's on the export.
    best = metrics["selection"]["best_value"]
    assert report["STS16"]["pearson"]["mean"] == pytest.approx(best, abs=1e-5)
    assert "| STS16 | **mean** |" in proc.stdout


    # The evaluation suite also runs from the run directory (both towers, for retrieval), on the
    # Flickr8k 1k test protocol.
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "grounded_text.evaluate", "--run-dir", str(tmp_path / "run"), "--data-dir",
         str(data_dir), "--sections", "retrieval", "structure", "same_image", "--same-image-n", "500",
         "--out", str(out), "--plots"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    suite = json.loads((out / "report.json").read_text())
    (name, enc), = suite["encoders"].items()
    r = enc["retrieval"]
    assert r["protocol"] == "flickr8k_1k" and r["n_images"] == 1000 and r["n_captions"] == 5000
    assert r["caption_to_image"]["R@10"] > 1.0  # chance: 1%
    assert enc["structure"]["n_images"] == 1000 and enc["same_image"]["flickr8k/test"]["n"] == 1000
    assert suite["contamination"]["SICK/test"]["n_sentences"] == 9854
    assert suite["contamination_all_flickr8k"]["SICK/test"]["n_contaminated"] == 334
    assert {"training_curves.png", "report.md"} <= {p.name for p in out.iterdir()}
    assert "caption→image" in (out / "report.md").read_text()
