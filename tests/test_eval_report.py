"""Image-tower export round trip, plots (PNG files), TensorBoard history reader, Markdown report."""

import json

import numpy as np
import pytest

from grounded_text.evaluation.plots import history_from_tensorboard, plot_training_curves, plot_tsne
from grounded_text.evaluation.report import flatten_sts, format_report_markdown

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_image_export_round_trip(tmp_path):
    from grounded_text.evaluation.suite import load_image_encoder
    from grounded_text.models.vete import build_affine_image_tower
    from grounded_text.serving.export import export_image_tower

    tower = build_affine_image_tower(7, 5)
    path = export_image_tower(tower, tmp_path / "image_export", {"data": {"features": "x"}})
    enc = load_image_encoder(path, batch_size=3)
    x = np.random.default_rng(0).normal(size=(8, 7)).astype(np.float32)
    np.testing.assert_allclose(enc(x), tower(x).numpy(), atol=1e-6)
    assert enc.feature_dim == 7
    assert json.loads((path / "assets" / "config.json").read_text())["data"]["features"] == "x"
    with pytest.raises(ValueError, match=r"expects features \[n, 7\]"):
        enc(np.zeros((2, 6), np.float32))


def test_plots_write_pngs(tmp_path):
    out = plot_training_curves({"loss": [-0.5, -0.7, -0.8], "val_loss": [-0.4, -0.5, -0.55],
                                "val_avg2016": [0.3, 0.35, 0.36]}, tmp_path / "curves.png")
    assert out.read_bytes()[:8] == PNG_MAGIC and out.stat().st_size > 5000
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(4, 16))
    emb = np.repeat(centers, 5, axis=0) + 0.05 * rng.normal(size=(20, 16))
    out = plot_tsne(emb, np.repeat(["a", "b", "c", "d"], 5).tolist(), tmp_path / "tsne.png")
    assert out.read_bytes()[:8] == PNG_MAGIC and out.stat().st_size > 5000
    with pytest.raises(ValueError):
        plot_training_curves({}, tmp_path / "x.png")


def test_history_from_tensorboard(tmp_path):
    import tensorflow as tf

    for sub, vals in (("train", [1.0, 0.5]), ("validation", [2.0, 1.5])):
        w = tf.summary.create_file_writer(str(tmp_path / sub))
        with w.as_default():
            for step, v in enumerate(vals):
                tf.summary.scalar("epoch_loss", v, step=step)
        w.close()
    hist = history_from_tensorboard(tmp_path)
    assert hist == {"loss": [1.0, 0.5], "val_loss": [2.0, 1.5]}


def test_markdown_report_labels_supervised_and_contamination():
    sts = {"STS16": {"subsets": {"headlines": {"pearson": 0.5, "spearman": 0.4, "n": 10}},
                     "pearson": {"mean": 0.5, "wmean": 0.5}, "spearman": {"mean": 0.4, "wmean": 0.4}, "n": 10},
           "SICK": {"test": {"pearson": 0.7, "spearman": 0.6, "n": 5}}}
    assert flatten_sts(sts) == {"STS16/headlines": 0.5, "STS16 mean": 0.5, "SICK/test": 0.7}
    report = {"data_dir": "D", "contamination": {"SICK/test": {"n_contaminated": 3, "n_sentences": 10,
                                                              "n_distinct_contaminated": 2, "against": "x"}},
              "encoders": {"m": {"sts": sts, "supervised_sts": {"SICK": {"test": {"pearson": 0.8}}}}}}
    md = format_report_markdown(report)
    assert "| SICK/test | cosine | 3/10 | 70.0 |" in md
    assert "| SICK/test | **supervised** (ridge" in md and "| 80.0 |" in md


def test_markdown_structure_table_prints_the_intervals():
    st = {"mNNO@10": 0.2, "mNNO@10_ci95": [0.15, 0.25], "rho_vis": {"pearson": 0.3, "pearson_ci95": [0.25, 0.35],
                                                                    "spearman": 0.28},
          "C_intra": 0.5, "C_intra_ci95": [0.45, 0.55], "C_inter": 0.1, "C_gap": 0.4, "n_images": 10,
          "n_captions": 50}
    md = format_report_markdown({"data_dir": "D", "encoders": {"m": {"structure": st}}})
    assert "| mNNO@10 | 0.2000 [0.1500, 0.2500] |" in md
    assert "| ρ_vis (Pearson, Bordes §4.3) | 0.3000 [0.2500, 0.3500] |" in md
    assert "| ρ_vis (Spearman) | 0.2800 |" in md  # no interval held: the value alone
    assert "| C_intra | 0.5000 [0.4500, 0.5500] |" in md and "| C_inter | 0.1000 |" in md
