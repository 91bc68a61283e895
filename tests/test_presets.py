"""The named presets: config resolution, mixed precision, and training end to end (issue 9)."""

import dataclasses
import json
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from grounded_text.config import DataConfig, ExperimentConfig, ModelConfig, TextConfig, TrainConfig
from grounded_text.layers import build_vocabulary
from grounded_text.models import build_model
from grounded_text.models.registry import MODELS, PRESET_DEFAULTS, resolve_config
from grounded_text.train import config_from_args, parse_args, train

# grounded_pretrained needs a model folder: covered with a tiny keras-hub preset in
# tests/test_pretrained_encoder.py.
PRESETS = sorted(set(MODELS) - {"grounded_pretrained"})
CAPS = ["A dog runs on the beach .", "A dog jumps .", "Two kids play in the snow", "a cat sleeps",
        "A man rides a bike", "a black dog swims", "two girls on a bench", "a red car"]
PROBE = ["a dog runs on the beach", "", "zebra unicorn", "café 🐶 naïve"]
SMALL = {  # tiny sizes for tests
    "two_branch_khard": {"hidden_units": [16]},
    "vete_rnn": {"word_dim": 8},
    "vete_cnn": {"word_dim": 8, "filters": 4},
    "bordes_cg_pg": {"word_dim": 8, "grounded_hidden": 8, "grounded_dim": 8},
    "char_gru_attention": {"char_dim": 4, "attention_units": 8},
}


def test_every_issue_preset_is_registered():
    assert set(MODELS) == {"vete_bow", "vete_rnn", "vete_cnn", "bordes_cg_pg", "two_branch_khard",
                           "char_gru_attention", "grounded_pretrained"} == set(PRESET_DEFAULTS)


def test_resolve_config_fills_preset_choices_and_keeps_explicit_ones():
    cfg = resolve_config(ExperimentConfig(model=ModelConfig(name="char_gru_attention")))
    assert (cfg.model.loss, cfg.data.sampler, cfg.train.schedule, cfg.train.snapshots) == (
        "triplet", "random", "cyclic_cosine", True)
    cfg = resolve_config(ExperimentConfig(model=ModelConfig(name="bordes_cg_pg")))
    assert (cfg.model.loss, cfg.data.sampler) == ("grounding", "grouped")
    cfg = resolve_config(ExperimentConfig(model=ModelConfig(name="vete_bow", loss="skt", loss_params={"alpha": 2.0}),
                                          train=TrainConfig(schedule="cyclic_cosine", snapshots=False)))
    assert (cfg.model.loss, cfg.train.schedule, cfg.train.snapshots) == ("skt", "cyclic_cosine", False)
    assert resolve_config(ExperimentConfig()).model.loss == "pearson"  # walking-skeleton default unchanged


@pytest.mark.parametrize(
    "cfg, match",
    [
        (ExperimentConfig(model=ModelConfig(name="nope")), "Unknown model"),
        (ExperimentConfig(model=ModelConfig(loss="nope")), "Unknown loss"),
        (ExperimentConfig(model=ModelConfig(name="bordes_cg_pg"), data=DataConfig(sampler="random")), "grouped"),
        (ExperimentConfig(model=ModelConfig(name="bordes_cg_pg"), data=DataConfig(one_caption_per_image=True)),
         "captions"),
        (ExperimentConfig(model=ModelConfig(name="bordes_cg_pg"), data=DataConfig(batch_size=63)), "divide"),
        (ExperimentConfig(train=TrainConfig(snapshots=True)), "cyclic_cosine"),
        (ExperimentConfig(data=DataConfig(sampler="weird")), "sampler"),
    ],
)
def test_resolve_config_rejects_bad_combinations(cfg, match):
    with pytest.raises(ValueError, match=match):
        resolve_config(cfg)


def test_bad_loss_or_encoder_parameter_is_named():
    vocab = build_vocabulary(CAPS)
    with pytest.raises(ValueError, match="no parameter"):
        build_model(ModelConfig(loss="skt", loss_params={"beta": 1}), TextConfig(), vocab, 5)
    with pytest.raises(ValueError, match="no encoder parameter"):
        build_model(ModelConfig(name="vete_rnn", encoder={"layers": 2}), TextConfig(), vocab, 5)
    with pytest.raises(ValueError, match="train_captions"):
        build_model(ModelConfig(name="char_gru_attention"), TextConfig(), vocab, 5)


def test_cli_flags_reach_the_config():
    a = parse_args(["--output-dir", "x", "--model", "two_branch_khard", "--loss", "triplet",
                    "--loss-param", "k=1", "--loss-param", "negatives=hardest", "--encoder-param",
                    "hidden_units=[64]", "--schedule", "cyclic_cosine", "--cycle-epochs", "2",
                    "--snapshots", "true", "--word-vectors", "none"])
    cfg = config_from_args(a)
    assert cfg.model.loss_params == {"k": 1, "negatives": "hardest"}
    assert cfg.model.encoder == {"hidden_units": [64]} and cfg.model.word_vectors == "none"
    assert (cfg.train.schedule, cfg.train.cycle_epochs, cfg.train.snapshots) == ("cyclic_cosine", 2, True)
    default = config_from_args(parse_args(["--output-dir", "x"]))
    assert default == ExperimentConfig(), "the walking-skeleton CLI defaults must not change"


@pytest.mark.parametrize("name", PRESETS)
def test_mixed_float16_train_step_keeps_float32_outputs(name):
    keras.mixed_precision.set_global_policy("mixed_float16")
    vocab = build_vocabulary(CAPS)
    model_cfg = resolve_config(ExperimentConfig(model=ModelConfig(name=name, embedding_dim=8,
                                                                  encoder=SMALL.get(name, {})))).model
    gm = build_model(model_cfg, TextConfig(), vocab, feature_dim=6, seed=0, train_captions=CAPS)
    gm.train_model.compile(optimizer=keras.optimizers.Adam(1e-2), run_eagerly=True)
    x = {"caption": tf.constant(CAPS), "image_features": tf.random.stateless_normal([8, 6], seed=[1, 2]),
         "image_id": tf.constant([0, 0, 1, 1, 2, 2, 3, 3], tf.int64)}
    before = [w.numpy().copy() for w in gm.text_tower.trainable_weights]
    changed = False
    for _ in range(40):  # dynamic loss scaling skips steps (halving the scale) until grads fit float16
        logs = gm.train_model.train_on_batch(x, return_dict=True)
        assert np.isfinite(logs["loss"])
        changed = any(not np.allclose(b, a.numpy()) for b, a in zip(before, gm.text_tower.trainable_weights))
        if changed:
            break
    assert changed
    out = gm.text_tower(tf.constant(PROBE))
    assert out.dtype == tf.float32 and out.shape == (len(PROBE), 8)
    assert np.isfinite(out.numpy()).all()
    assert gm.image_tower(x["image_features"]).dtype == tf.float32
    # issue 7: the loss is float32 too (the training model's output and the added loss).
    loss = gm.train_model(x, training=False)
    assert loss.dtype == tf.float32 and loss.shape == () and np.isfinite(loss.numpy())
    assert all(l.dtype == tf.float32 for l in gm.train_model.losses)
    assert gm.train_model.optimizer.__class__.__name__ == "LossScaleOptimizer"  # dynamic loss scaling


@pytest.mark.slow
def test_every_preset_trains_on_real_slice_and_exports_a_loadable_hub_module(data_dir, tmp_path):
    exports, in_process = {}, {}
    for name in PRESETS:
        cfg = ExperimentConfig(
            data=DataConfig(max_train_images=64, max_dev_images=16, batch_size=32),
            model=ModelConfig(name=name, embedding_dim=16, encoder=SMALL.get(name, {})),
            train=TrainConfig(epochs=2 if name == "char_gru_attention" else 1, learning_rate=3e-3,
                              select_on="val_loss", cycle_epochs=1),
        )
        metrics = train(cfg, data_dir, tmp_path / name, evaluate=False, verbose=0)
        assert metrics["data"]["train_images"] == 64 and metrics["data"]["dev_pairs"] == 80
        assert metrics["config"]["model"]["loss"] == PRESET_DEFAULTS[name]["loss"]
        assert all(np.isfinite(metrics["history"]["loss"]))
        assert metrics["parameters"]["text_tower"] > 0
        if name == "char_gru_attention":  # two cycles -> two snapshots, exported as their ensemble
            assert metrics["exported"]["kind"] == "snapshot_ensemble"
            assert len(metrics["exported"]["snapshots"]) == 2
        else:
            assert metrics["exported"]["kind"] == "best_epoch"
        exports[name] = str(tmp_path / name / "export")
        in_process[name] = tf.saved_model.load(exports[name])(tf.constant(PROBE)).numpy()

    script = textwrap.dedent(
        f"""
        import json, numpy as np, tensorflow as tf, tensorflow_text, tensorflow_hub as hub
        out = {{}}
        for name, path in {exports!r}.items():
            m = hub.load(path)
            e = m(tf.constant({PROBE!r}))
            out[name] = {{"dtype": e.dtype.name, "values": e.numpy().tolist()}}
        print(json.dumps(out))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in PRESETS:
        values = np.array(got[name]["values"], dtype=np.float32)
        # bordes_cg_pg exports its grounded space g(u), whose width is grounded_dim.
        dim = SMALL[name]["grounded_dim"] if name == "bordes_cg_pg" else 16
        assert got[name]["dtype"] == "float32" and values.shape == (len(PROBE), dim), name
        np.testing.assert_allclose(values, in_process[name], atol=1e-5, err_msg=name)
        norms = np.linalg.norm(values, axis=1)
        assert np.isfinite(values).all(), name
        # Unit norm, except the documented all-zero vector of the empty string (character level).
        assert np.all((np.abs(norms - 1) < 1e-4) | (norms == 0)), (name, norms)


def test_zoo_table_reads_metrics(tmp_path):
    from grounded_text import zoo_table

    m = {"config": {"model": {"loss": "pearson"}, "train": {"epochs": 5}}, "data": {"feature_dim": 768},
         "selection": {"best_epoch": 4}, "timing_seconds": {"fit": 12.4},
         "parameters": {"text_tower": 1234, "train_model": 5678},
         "evaluation": {"headline": {"STS12/MSRvid pearson": 0.71234, "STS-B test pearson": 0.5,
                                     "SICK test pearson": None, "STS16 mean pearson (avg2016)": 0.4}}}
    run = ("vete_bow@mobilenet_v1_075", "vete_bow", "mobilenet_v1_075", 5, [])
    (tmp_path / "vete_bow__mobilenet_v1_075").mkdir()
    (tmp_path / "vete_bow__mobilenet_v1_075" / "metrics.json").write_text(json.dumps(m))
    md = zoo_table.table(tmp_path, [run, ("vete_rnn", "vete_rnn", "efficientnet_lite0", 2, [])]).splitlines()
    assert md[2] == ("| vete_bow@mobilenet_v1_075 | vete_bow | pearson | mobilenet_v1_075 (768) | 5 | epoch 4 | 0.712 | "
                     "0.500 | – | 0.400 | 12 | 1,234 | 5,678 |")
    assert "(not run)" in md[3] and md[3].count("|") == md[2].count("|")
