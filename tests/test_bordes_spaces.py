"""bordes_cg_pg keeps two sentence spaces: textual u = F_t(s) and grounded g(u) (Bordes et al. 2019).

The main text tower (``export/``) is g(u) by default (the paper's Table 1 scores its
grounding-only models there), u with ``export_space="textual"``; the trainer exports
both spaces to ``export_textual/`` and ``export_grounded/``.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TextConfig, TrainConfig
from grounded_text.layers import build_vocabulary
from grounded_text.models import build_model
from grounded_text.models.registry import resolve_config
from grounded_text.training.trainer import train

CAPS = ["A dog runs on the beach .", "A dog jumps .", "Two kids play in the snow", "a cat sleeps",
        "A man rides a bike", "a black dog swims", "two girls on a bench", "a red car"]
PROBE = ["a dog runs on the beach", "two kids play", "zebra unicorn", ""]
N, HIDDEN, N_G = 8, 6, 5  # distinct sizes, so that a wrong space shows in the shape too


def _build(**encoder):
    keras.utils.set_random_seed(0)  # build_model's seed is the loss's; the weights draw from the global seed
    cfg = resolve_config(ExperimentConfig(model=ModelConfig(
        name="bordes_cg_pg", embedding_dim=N,
        encoder={"word_dim": 8, "grounded_hidden": HIDDEN, "grounded_dim": N_G, **encoder})))
    return build_model(cfg.model, TextConfig(), build_vocabulary(CAPS), feature_dim=7, seed=0)


def _g_numpy(gm, u):
    """g(u) = W_2 ReLU(W_1 u + b_1) + b_2 (Bordes §3.2, 2-layer MLP) from g's Dense weights."""
    g = gm.train_model.get_layer("grounded_text_tower").get_layer("grounded_projection")
    w1, b1 = (w.numpy() for w in g.fc1.weights)
    w2, b2 = (w.numpy() for w in g.fc2.weights)
    assert w1.shape == (N, HIDDEN) and w2.shape == (HIDDEN, N_G)
    return np.maximum(u @ w1 + b1, 0.0) @ w2 + b2


def _l2(x):
    """Rows / max(||row||, 1e-6), as tf.math.l2_normalize (epsilon 1e-12 on the squared norm): an
    all-zero row, which g's ReLU can give, stays zero instead of becoming NaN."""
    return x / np.sqrt(np.maximum(np.sum(x * x, axis=1, keepdims=True), 1e-12))


def test_default_tower_is_the_grounded_space_g_of_u():
    gm = _build()
    assert set(gm.spaces) == {"textual", "grounded"}
    assert gm.text_tower is gm.spaces["grounded"]
    u = gm.spaces["textual"](tf.constant(PROBE)).numpy()
    out = gm.text_tower(tf.constant(PROBE)).numpy()
    assert u.shape == (len(PROBE), N) and out.shape == (len(PROBE), N_G) and out.dtype == np.float32
    # Exports are L2-normalised rows: the tower is g(u) / ||g(u)|| (same cosines as g(u)).
    np.testing.assert_allclose(out, _l2(_g_numpy(gm, u)), rtol=1e-5, atol=1e-6)
    # ... and the training loss sees g(u) itself.
    raw = gm.train_model.get_layer("grounded_text_tower")(tf.constant(PROBE)).numpy()
    np.testing.assert_allclose(raw, _g_numpy(gm, u), rtol=1e-5, atol=1e-6)


def test_export_space_textual_gives_u_and_the_spaces_differ():
    gm = _build(export_space="textual")
    assert gm.text_tower is gm.spaces["textual"]
    u = gm.text_tower(tf.constant(PROBE)).numpy()
    assert u.shape == (len(PROBE), N)
    np.testing.assert_allclose(np.linalg.norm(u, axis=1), 1.0, atol=1e-5)  # the GRU's L2 output
    # u is the encoder's output under g: g applied to it (NumPy) gives the grounded space.
    gu = gm.spaces["grounded"](tf.constant(PROBE)).numpy()
    np.testing.assert_allclose(gu, _l2(_g_numpy(gm, u)), rtol=1e-5, atol=1e-6)
    cos = lambda x: _l2(x) @ _l2(x).T  # noqa: E731
    assert np.abs(cos(u) - cos(gu)).max() > 1e-3  # another geometry, not just another width
    with pytest.raises(ValueError, match="export_space"):
        _build(export_space="both")


@pytest.mark.slow
def test_train_exports_both_spaces(data_dir, tmp_path):
    cfg = ExperimentConfig(
        data=DataConfig(max_train_images=64, max_dev_images=16, batch_size=32),
        model=ModelConfig(name="bordes_cg_pg", embedding_dim=16, encoder={"word_dim": 8, "grounded_hidden": 8,
                                                                         "grounded_dim": 12}),
        train=TrainConfig(epochs=1, learning_rate=3e-3, select_on="val_loss"),
    )
    # The real Flickr8k data with one small STS year, so that scoring each space stays quick.
    root = tmp_path / "data"
    (root / "sts").mkdir(parents=True)
    (root / "flickr8k").symlink_to(data_dir / "flickr8k")
    (root / "sts" / "STS16-en-test").symlink_to(data_dir / "sts" / "STS16-en-test")
    out = tmp_path / "run"
    metrics = train(cfg, root, out, evaluate=True, verbose=0)
    assert metrics["spaces"] == {"textual": str(out / "export_textual"), "grounded": str(out / "export_grounded")}
    # STS of each space; the grounded one is export/ itself.
    spaces = metrics["evaluation"]["spaces"]
    assert set(spaces) == {"textual", "grounded"} and spaces["grounded"] == metrics["evaluation"]["headline"]
    assert set(spaces["textual"]) == set(spaces["grounded"]) and spaces["textual"] != spaces["grounded"]
    assert spaces["textual"]["STS16 mean pearson (avg2016)"] is not None
    probe = tf.constant(PROBE)
    got = {}
    for folder, dim in (("export", 12), ("export_grounded", 12), ("export_textual", 16)):
        e = tf.saved_model.load(str(out / folder))(probe).numpy()
        assert e.dtype == np.float32 and e.shape == (len(PROBE), dim), folder
        np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-4)
        got[folder] = e
    np.testing.assert_allclose(got["export"], got["export_grounded"], atol=1e-6)
    assert json.loads((out / "metrics.json").read_text())["spaces"] == metrics["spaces"]

    # Both spaces through the evaluate CLI: the structural measures on the Flickr8k test split.
    from grounded_text.evaluate import main

    report = tmp_path / "report.json"
    assert main(["--model", str(out / "export_textual"), str(out / "export_grounded"),
                 "--sections", "structure", "--data-dir", str(root), "--json", str(report)]) == 0
    encoders = json.loads(report.read_text())["encoders"]
    assert set(encoders) == {"export_textual", "export_grounded"}
    for node in encoders.values():
        assert 0.0 <= node["structure"]["mNNO@10"] <= 1.0 and "C_gap" in node["structure"]
    assert encoders["export_textual"]["structure"] != encoders["export_grounded"]["structure"]
