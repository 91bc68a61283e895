"""The pretrained-transformer text tower on a tiny randomly initialised keras-hub BERT preset."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

keras_hub = pytest.importorskip("keras_hub")

from grounded_text.layers.backbone_encoder import PretrainedTextEncoder, build_pretrained_text_tower  # noqa: E402
from grounded_text.serving.export import export_text_tower  # noqa: E402  (after the keras_hub skip)

# Its tests share a module-scoped fixture: one pytest-xdist worker builds it once (setup.cfg).
pytestmark = pytest.mark.xdist_group("test_backbone_encoder")

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "dog", "runs", "on", "the", "beach", "cat", "."]


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny_bert")
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCAB), num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
        max_sequence_length=32,
    )
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=16)
    backbone.save_to_preset(str(d))
    preprocessor.save_to_preset(str(d))
    return str(d), backbone, preprocessor


def test_mean_pooling_matches_numpy(tiny_preset):
    path, backbone, preprocessor = tiny_preset
    layer = PretrainedTextEncoder(path, sequence_length=16)
    texts = ["a dog runs on the beach .", "", "cat"]
    got = layer(tf.constant(texts)).numpy()
    x = preprocessor(tf.constant(texts))
    seq = backbone(x)["sequence_output"].numpy()
    mask = x["padding_mask"].numpy().astype(np.float64)
    ref = (seq * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    np.testing.assert_allclose(got, ref, atol=1e-5)
    assert got.dtype == np.float32 and np.isfinite(got).all()


def test_frozen_and_trainable(tiny_preset):
    path, _, _ = tiny_preset
    assert build_pretrained_text_tower(path, 16, trainable_backbone=False).trainable_weights == []
    assert len(build_pretrained_text_tower(path, 16, trainable_backbone=True).trainable_weights) > 0


def test_missing_preset_is_refused():
    with pytest.raises(FileNotFoundError, match="not a local directory"):
        PretrainedTextEncoder("sentence-transformers/all-MiniLM-L6-v2")


# Exports, then reloads in a fresh TensorFlow process.
@pytest.mark.slow
def test_export_reload_equal(tiny_preset, tmp_path):
    path, _, _ = tiny_preset
    tower = build_pretrained_text_tower(path, 16, trainable_backbone=True)
    texts = ["a dog runs on the beach .", "", "unknown words here", "🐶"]
    expected = tower(tf.constant(texts)).numpy()
    export = export_text_tower(tower, tmp_path / "export", {"model": {"name": "pretrained"}})
    np.save(tmp_path / "expected.npy", expected)
    script = textwrap.dedent(f"""
        import json, numpy as np, tensorflow as tf, tensorflow_text, tensorflow_hub as hub
        m = hub.load({str(export)!r})
        got = m(tf.constant({texts!r})).numpy()
        exp = np.load({str(tmp_path / "expected.npy")!r})
        print(json.dumps({{"diff": float(np.abs(got - exp).max()), "trainable": len(m.trainable_variables)}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["diff"] <= 1e-6 and info["trainable"] > 0


# Trains and exports (an export alone is about 26 s).
@pytest.mark.slow
def test_grounded_pretrained_preset_trains_and_exports(tiny_preset, data_dir, tmp_path):
    from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TrainConfig
    from grounded_text.models.backbone import build_grounded_pretrained
    from grounded_text.training.trainer import train

    path, _, _ = tiny_preset
    with pytest.raises(ValueError, match="preset"):
        build_grounded_pretrained(ModelConfig(name="grounded_pretrained"), None, [], 8)
    cfg = ExperimentConfig(
        data=DataConfig(max_train_images=48, batch_size=16, captions_per_image=2, max_dev_images=16),
        model=ModelConfig(name="grounded_pretrained",
                          encoder={"preset": path, "sequence_length": 16, "grounded_hidden": 16,
                                   "grounded_dim": 8, "anchor_weight": 0.5}),
        train=TrainConfig(epochs=1, learning_rate=1e-3, select_on="val_loss"),
    )
    metrics = train(cfg, data_dir, tmp_path / "run", evaluate=False, verbose=0)
    assert metrics["data"]["train_images"] == 48
    assert np.isfinite(metrics["history"]["loss"]).all()
    from grounded_text.serving.loader import load as load_encoder
    emb = load_encoder(tmp_path / "run" / "export")(["a dog runs", ""])
    assert emb.shape == (2, 8) and np.isfinite(emb).all()
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    # Both spaces are exported, as for Bordes' model: u (export/ and export_textual/) and g(u).
    textual = load_encoder(tmp_path / "run" / "export_textual")(["a dog runs", ""])
    np.testing.assert_allclose(textual, emb, atol=1e-5)
    grounded = load_encoder(tmp_path / "run" / "export_grounded")(["a dog runs", "the cat"])
    assert grounded.shape == (2, 8) and np.isfinite(grounded).all()
    np.testing.assert_allclose(np.linalg.norm(grounded, axis=1), 1.0, atol=1e-5)
    assert metrics["spaces"].keys() == {"textual", "grounded"}


def test_grounded_space_is_g_of_u(tiny_preset):
    from grounded_text.config.schema import ModelConfig, TextConfig
    from grounded_text.models import build_model

    path, _, _ = tiny_preset
    gm = build_model(ModelConfig(name="grounded_pretrained", encoder={"preset": path, "sequence_length": 16,
                                                                      "grounded_hidden": 8, "grounded_dim": 4}),
                     TextConfig(), [], feature_dim=6)
    assert gm.spaces["textual"] is gm.text_tower
    x = tf.constant(["a dog runs", "the cat"])
    g = [lay for lay in gm.train_model.layers if lay.name == "grounded_projection"]
    g = g[0] if g else next(lay for lay in gm.spaces["grounded"].layers if lay.name == "grounded_projection")
    want = tf.math.l2_normalize(g(gm.text_tower(x)), -1).numpy()
    np.testing.assert_allclose(gm.spaces["grounded"](x).numpy(), want, atol=1e-5)


def test_grounded_pretrained_mixed_float16_step_keeps_float32(tiny_preset):
    import keras

    from grounded_text.config.schema import ModelConfig, TextConfig
    from grounded_text.models import build_model

    path, _, _ = tiny_preset
    keras.mixed_precision.set_global_policy("mixed_float16")
    # build_model fills the other encoder and loss parameters from the grounded_pretrained record.
    gm = build_model(
        ModelConfig(name="grounded_pretrained", encoder={"preset": path, "sequence_length": 16,
                                                          "grounded_hidden": 8, "grounded_dim": 8}),
        TextConfig(), [], feature_dim=6)
    gm.train_model.compile(optimizer=keras.optimizers.Adam(1e-3))
    x = {"caption": tf.constant(["a dog", "a dog runs", "the cat", "a cat ."]),
         "image_features": tf.random.stateless_normal([4, 6], seed=[0, 1]),
         "image_id": tf.constant([0, 0, 1, 1], tf.int64)}
    logs = gm.train_model.train_on_batch(x, return_dict=True)
    assert np.isfinite(logs["loss"])
    assert gm.text_tower(x["caption"]).dtype == tf.float32
