"""The config options that mirror the authors' code of Merkx & Frank (2019)
(DannyMerkx/caption2image, ``NLE2019`` code at 8a4dc2c; docs/caption2image_differences.md):
each against a NumPy / plain-Python restatement of their lines, off by default, and
reachable from the train and evaluate commands."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from grounded_text.config.schema import SENTENCE_ENDS
from grounded_text.data.sentence_end import add_sentence_end, apply_sentence_end

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- their lines, restated
def their_training_caption(raw: str) -> str:
    """caption2image 8a4dc2c, preprocessing/text_features.py:28-29."""
    if not raw[-1] == ".":
        raw = raw + " ."
    return raw


def their_senteval_sentence(sentence: str) -> str:
    """SentEval's loaders split at whitespace (senteval/sts.py:42-43, sick.py:51-52), then
    caption2image 8a4dc2c SentEval/evaluate_char.py:58-60 (the batcher)."""
    batch = [sentence.split()]
    batch = [sent if sent != [] else ["."] for sent in batch]
    sents = [" ".join(s) + " ." if s[-1] != "." else " ".join(s) for s in batch]
    return sents[0]


KNOWN = [
    # (text, space_period, space_period_tokens)
    ("A man is playing a flute.", "A man is playing a flute.", "A man is playing a flute. ."),
    ("A dog runs on the beach .", "A dog runs on the beach .", "A dog runs on the beach ."),
    ("A black dog and a spotted dog are fighting", "A black dog and a spotted dog are fighting .",
     "A black dog and a spotted dog are fighting ."),
    ("A  man is dancing.", "A  man is dancing.", "A man is dancing. ."),
    ("  Two kids\tplay .  ", "  Two kids\tplay .   .", "Two kids play ."),
    ("Is it?", "Is it? .", "Is it? ."),
    ("...", "...", "... ."),
    (".", ".", "."),
    ("", ".", "."),
]


@pytest.mark.parametrize("text, period, tokens", KNOWN)
def test_sentence_end_rules_on_known_strings(text, period, tokens):
    assert add_sentence_end(text, "none") == text
    assert add_sentence_end(text, "space_period") == period
    assert add_sentence_end(text, "space_period_tokens") == tokens
    if text:  # their training rule fails on "" (raw[-1])
        assert period == their_training_caption(text)
    assert tokens == their_senteval_sentence(text)
    assert add_sentence_end(text.encode("utf-8"), "space_period_tokens") == tokens


def test_sentence_end_rules_refuse_unknown_names():
    assert SENTENCE_ENDS == ("none", "space_period", "space_period_tokens")
    with pytest.raises(ValueError, match="sentence_end must be one of"):
        apply_sentence_end(["a"], "period")


def test_msrvid_ends_as_their_senteval_script_writes_it(data_dir):
    """MSRvid: 1,496 of 1,500 sentences end in an attached '.'; their SentEval batcher gives
    every one of them " ." (the attached stop is part of the last token), while their
    training rule would leave those 1,496 alone."""
    path = data_dir / "sts" / "STS12-en-test" / "STS.input.MSRvid.txt"
    if not path.is_file():
        pytest.skip("no STS12 MSRvid")
    sentences = [s for line in path.read_text(encoding="utf-8").splitlines() for s in line.split("\t")]
    assert len(sentences) == 1500
    attached = [s for s in sentences if s.endswith(".") and not s.split()[-1] == "."]
    assert len(attached) == 1496
    ours = apply_sentence_end(sentences, "space_period_tokens")
    assert ours == [their_senteval_sentence(s) for s in sentences]
    assert all(s.endswith(" .") for s in ours)
    assert sum(a != b for a, b in zip(apply_sentence_end(sentences, "space_period"), sentences)) == 4


def test_flickr8k_captions_that_their_preprocessing_changes(data_dir):
    """3,896 of the 40,460 Flickr8k captions do not end in '.' (docs/caption2image_differences.md)."""
    from grounded_text.data.pairs import CaptionPairs
    from grounded_text.data.sentence_end import pairs_with_sentence_end

    path = data_dir / "flickr8k" / "Flickr8k_text" / "Flickr8k.token.txt"
    if not path.is_file():
        pytest.skip("no Flickr8k captions")
    captions = [line.split("\t", 1)[1] for line in path.read_text(encoding="utf-8").splitlines()]
    n = len(captions)
    pairs = CaptionPairs(np.array(captions), np.array(["i"] * n), np.zeros(n, np.int64), np.zeros((1, 2), np.float32))
    out = pairs_with_sentence_end(pairs, "space_period")
    assert pairs_with_sentence_end(pairs, "none") is pairs
    changed = sum(a != b for a, b in zip(out.captions.tolist(), captions))
    assert (n, changed) == (40460, 3896)
    assert out.captions.tolist() == [their_training_caption(c) for c in captions]


# --------------------------------------------------------------------------- evaluation-time rule
class Recorder:
    def __init__(self):
        self.seen = []

    def __call__(self, sentences, **kwargs):
        self.seen.append(list(sentences))
        return np.ones((len(sentences), 2), np.float32)


def test_the_evaluation_wrapper_rewrites_what_the_encoder_sees(tmp_path):
    from grounded_text.evaluation.encoders import SentenceEndEncoder, with_sentence_end
    from grounded_text.serving.loader import model_sentence_end

    inner = Recorder()
    assert with_sentence_end(inner, "none") is inner and with_sentence_end(inner, None) is inner
    wrapped = with_sentence_end(inner, "space_period_tokens")
    assert isinstance(wrapped, SentenceEndEncoder) and wrapped.seen is inner.seen  # attributes pass through
    wrapped(["A man is playing a flute.", "A dog runs"])
    wrapped.encode(["x ."])
    assert inner.seen == [["A man is playing a flute. .", "A dog runs ."], ["x ."]]
    # The rule a run recorded in its export, and "none" for an export that records none.
    export = tmp_path / "export"
    (export / "assets").mkdir(parents=True)
    assert model_sentence_end(export) == "none"
    (export / "assets" / "config.json").write_text(json.dumps({"text": {"lowercase": False}}))
    assert model_sentence_end(export) == "none"
    (export / "assets" / "config.json").write_text(json.dumps({"text": {"sentence_end": "space_period"}}))
    assert model_sentence_end(export) == "space_period"


def test_sts_validation_scores_the_rewritten_sentences(tmp_path):
    """The trainer's STS scorer ends the sentences as the training captions do."""
    import tensorflow as tf

    from grounded_text.training.callbacks import STSValidation

    seen = []

    def record(x):
        seen.extend(v.decode() for v in x.numpy())
        return np.ones((len(x.numpy()), 2), np.float32)

    def tower(s, training=False):
        return tf.py_function(record, [s], tf.float32)

    callback = STSValidation(tower, tmp_path, sentence_end="space_period")
    callback.encoder(["A dog runs", "A cat sleeps."])
    assert seen == ["A dog runs .", "A cat sleeps."]


# --------------------------------------------------------------------------- the encoder options
def _char_config(**encoder):
    from grounded_text.config.schema import DataConfig, ExperimentConfig, ModelConfig, TextConfig, TrainConfig

    return ExperimentConfig(
        data=DataConfig(batch_size=8),
        text=TextConfig(lowercase=False),
        model=ModelConfig(name="char_gru_attention_512", embedding_dim=8 * encoder.get("attention_heads", 1),
                          encoder={"units": 4, "char_dim": 4, "attention_units": 8, **encoder},
                          loss_params={"reduction": "mean_matrix"}),
        train=TrainConfig(epochs=1, learning_rate=1e-3, schedule="constant", clip_norm_text=0.05,
                          clip_norm_image=0.0025),
    )


CAPTIONS = ["A dog runs on the beach .", "Two kids play in the snow", "A man rides a red bike .",
            "A cat sleeps .", "A brown dog jumps over a log in the park .", "People walk .",
            "A girl in pink .", "A boy swims in a pool ."]


def _model(config, feature_dim=6):
    from grounded_text.models.registry import build_model
    from grounded_text.papers.resolve import resolve_config

    config = resolve_config(config)
    return config, build_model(config.model, config.text, [], feature_dim, seed=0, train_captions=CAPTIONS)


def _batch(feature_dim=6):
    import tensorflow as tf

    rng = np.random.default_rng(1)
    return {"caption": tf.constant(CAPTIONS), "image_features": tf.constant(rng.normal(size=(8, feature_dim)),
                                                                             tf.float32),
            "image_id": tf.range(8, dtype=tf.int64)}


def test_the_defaults_are_todays():
    from grounded_text.papers.presets import get_preset

    record = get_preset("char_gru_attention").config
    encoder = record["model"]["encoder"]
    assert (encoder["attention_heads"], encoder["attention_include_padding"], encoder["attention_diversity_margin"],
            encoder["char_embedding_init"], encoder["weight_init"]) == (1, False, None, "normal", "keras")
    # The two rules of the authors' code the record took after measuring them (the caption gap's
    # char_init_normal and sentence_end_train arms).
    assert record["text"]["sentence_end"] == "space_period"
    config, gm = _model(_char_config())
    assert config.text.sentence_end == "space_period"
    enc = gm.text_tower.get_layer("char_encoder")
    assert (enc.attention_heads, enc.attention_include_padding, enc.attention_diversity_margin) == (1, False, None)
    w = enc.embedding.embeddings.numpy()
    assert np.abs(w).max() > 0.5 and 0.5 < w[1:].std() < 1.5  # N(0, 1), not Keras' U(-0.05, 0.05)
    _, gm_keras = _model(_char_config(char_embedding_init="uniform"))
    assert np.abs(gm_keras.text_tower.get_layer("char_encoder").embedding.embeddings.numpy()).max() <= 0.05
    gm.train_model(_batch(), training=True)
    assert len(gm.train_model.losses) == 1  # the hinge only


def test_the_encoder_options_reach_the_layer_and_round_trip():
    from grounded_text.layers.char_encoder import CharacterEncoder

    config, gm = _model(_char_config(attention_heads=2, attention_include_padding=True,
                                     attention_diversity_margin=1.0, char_embedding_init="normal",
                                     weight_init="torch"))
    enc = gm.text_tower.get_layer("char_encoder")
    assert (enc.attention_heads, enc.attention_include_padding, enc.attention_diversity_margin,
            enc.char_embedding_init, enc.weight_init) == (2, True, 1.0, "normal", "torch")
    image = gm.image_tower.get_layer("image_projection")
    bias = image.dense.bias.numpy()  # nn.Linear's U(±1/√d), not Keras' zeros
    assert image.torch_bias and 0 < np.abs(bias).max() <= 1 / np.sqrt(image.dense.kernel.shape[0])
    for head in enc.heads:
        assert head.weight_init == "torch" and np.abs(head.hidden.bias.numpy()).max() > 0
    assert gm.text_tower.output.shape[-1] == gm.image_tower.output.shape[-1] == 16  # 4 units × 2 × 2 heads
    w = enc.embedding.embeddings.numpy()
    assert 0.6 < w.std() < 1.4 and np.abs(w).max() > 0.5  # N(0, 1), their nn.Embedding default
    again = CharacterEncoder.from_config(enc.get_config())
    assert again.get_config() == enc.get_config() and again.char_embedding_init == "normal"
    assert again.weight_init == "torch" and type(image).from_config(image.get_config()).torch_bias
    assert gm.train_model.losses is not None and config.model.loss_params["reduction"] == "mean_matrix"


def test_the_diversity_loss_is_part_of_the_training_loss():
    """With 2 heads and a margin the encoder's attention loss is added to the hinge in the
    loss Keras minimises (their char_net.py:117 / trainer.py:116-117)."""
    import keras

    _, gm = _model(_char_config(attention_heads=2, attention_include_padding=True, attention_diversity_margin=1.0))
    enc = gm.text_tower.get_layer("char_encoder")
    batch = _batch()
    gm.train_model(batch, training=True)
    losses = [float(x) for x in gm.train_model.losses]
    diversity = float(enc.losses[0])
    assert len(losses) == 2 and diversity > 0.1 and any(abs(x - diversity) < 1e-6 for x in losses)
    gm.train_model.compile(optimizer=keras.optimizers.SGD(0.0))
    total = gm.train_model.test_on_batch(batch, return_dict=True)["loss"]
    assert abs(float(total) - sum(losses)) < 1e-5


def test_the_diversity_loss_reads_the_longest_caption():
    """Their attention loss reads the first caption of a batch sorted longest first
    (trainer.py:164-166); ours reads the longest, so the batch order does not matter."""
    import tensorflow as tf

    _, gm = _model(_char_config(attention_heads=2, attention_include_padding=True, attention_diversity_margin=1.0))
    enc = gm.text_tower.get_layer("char_encoder")
    pre = gm.text_tower.get_layer("char_preprocessor")
    by_length = sorted(CAPTIONS, key=len, reverse=True)
    values = []
    for order in (CAPTIONS, by_length, by_length[::-1]):
        enc(pre(tf.constant(order)), training=True)
        values.append(float(enc.losses[-1]))
    np.testing.assert_allclose(values, values[1], rtol=0, atol=1e-6)


# --------------------------------------------------------------------------- per-tower clipping
def _numpy_clip(grads: dict, towers: dict) -> dict:
    """torch.nn.utils.clip_grad_norm per tower: total norm over the tower's gradients,
    scaled by max_norm / (norm + 1e-6) when that is below 1 (their trainer.py:123-125)."""
    out = dict(grads)
    for names, max_norm in towers.values():
        norm = math.sqrt(sum(float(np.sum(np.square(grads[n], dtype=np.float64))) for n in names))
        scale = min(1.0, max_norm / (norm + 1e-6))
        out.update({n: grads[n] * scale for n in names})
    return out


def test_per_tower_clipping_matches_a_numpy_reference_on_a_fixed_batch():
    import keras
    import tensorflow as tf

    from grounded_text.training.clipping import TowerClippedAdam, clip_tower_gradients
    from grounded_text.training.preparation import compile_for_training

    config, gm = _model(_char_config())
    batch = _batch()
    variables = gm.train_model.trainable_variables
    with tf.GradientTape() as tape:
        gm.train_model(batch, training=True)
        loss = tf.add_n(gm.train_model.losses)
    grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
    text = [v.path for v in gm.text_tower.trainable_variables]
    image = [v.path for v in gm.image_tower.trainable_variables]
    assert set(text) | set(image) == {v.path for v in variables} and not set(text) & set(image)
    raw = {v.path: g.numpy() for v, g in zip(variables, grads)}
    want = _numpy_clip(raw, {"text": (text, 0.05), "image": (image, 0.0025)})
    norms = {k: math.sqrt(sum(float(np.sum(raw[n] ** 2)) for n in names)) for k, names in (("t", text), ("i", image))}
    assert norms["t"] > 0.05 and norms["i"] > 0.0025, norms  # both towers are really clipped on this batch
    got = clip_tower_gradients(grads, variables, [(gm.text_tower.trainable_variables, 0.05),
                                                  (gm.image_tower.trainable_variables, 0.0025)])
    for v, g in zip(variables, got):
        np.testing.assert_allclose(g.numpy(), want[v.path], rtol=1e-5, atol=1e-9, err_msg=v.path)

    # The trainer's compile: one Adam step with the clipped gradients == plain Adam on NumPy's.
    compile_for_training(gm.train_model, config.train, steps_per_epoch=10,
                         towers=(gm.text_tower, gm.image_tower))
    optimizer = gm.train_model.optimizer
    assert isinstance(optimizer, TowerClippedAdam)
    start = [v.numpy().copy() for v in variables]
    optimizer.apply(grads, variables)
    ours = [v.numpy().copy() for v in variables]
    for v, w in zip(variables, start):
        v.assign(w)
    plain = keras.optimizers.Adam(config.train.learning_rate)
    plain.apply([tf.constant(want[v.path]) for v in variables], variables)
    for v, o in zip(variables, ours):
        np.testing.assert_allclose(o, v.numpy(), rtol=0, atol=1e-7, err_msg=v.path)


def test_no_clip_norm_is_keras_adam():
    import keras

    from grounded_text.training.clipping import TowerClippedAdam, make_optimizer

    assert type(make_optimizer(1e-3)) is keras.optimizers.Adam
    assert type(make_optimizer(1e-3, clip_norm_text=0.0, clip_norm_image=0.0)) is keras.optimizers.Adam
    assert isinstance(make_optimizer(1e-3, clip_norm_text=1.0, text_tower=keras.Sequential([])), TowerClippedAdam)
    with pytest.raises(ValueError, match="no image tower"):
        make_optimizer(1e-3, clip_norm_image=1.0)


def _first_step_gradients(golden, fx, reduction="mean_matrix"):
    """Our towers built from the fixture's weights, and the gradients of hinge (``reduction``)
    + attention loss on its first batch: ``(enc, img, variables, {path: variable}, paths,
    grads)``."""
    import tensorflow as tf

    pre, enc, img, variables = golden.build_ours(fx)
    unique = {v.path: v for v, _, _ in variables.values()}
    paths = list(unique)
    with tf.GradientTape() as tape:
        _, _, _, hinge, att = golden.forward(fx, 0, pre, enc, img, reduction=reduction)
        loss = hinge + att
    return enc, img, variables, unique, paths, tape.gradient(loss, [unique[p] for p in paths])


def test_their_clipped_step_on_the_golden_fixture():
    """Our optimizer's per-tower clipping before Adam gives the parameters their PyTorch step
    gave (fixture char_gru_2heads: their clipping, char_net.py:124-125, then Adam at lr_max)."""
    import keras

    sys.path.insert(0, str(REPO / "tests"))
    import test_golden_caption2image as golden

    from grounded_text.training.clipping import TowerClippedAdam

    fx = golden.load("char_gru_2heads")
    enc, img, variables, unique, paths, grads = _first_step_gradients(golden, fx)
    beta_1, beta_2 = (float(x) for x in fx["adam.betas"])
    adam = TowerClippedAdam(learning_rate=float(fx["adam.lr_max"]), beta_1=beta_1, beta_2=beta_2,
                            epsilon=float(fx["adam.eps"]) * math.sqrt(1.0 - beta_2))
    adam.set_towers([(enc.trainable_variables, float(fx["clip.cap_max_norm"])),
                     (img.trainable_variables, float(fx["clip.img_max_norm"]))])
    adam.apply(grads, [unique[p] for p in paths])
    after = golden.to_theirs(variables, {p: unique[p].numpy() for p in paths})
    for name, ours in after.items():
        theirs = fx[f"after_lr_max.{name}"]
        if name.endswith(".out.bias"):  # float32 noise on both sides (see the golden test)
            continue
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=golden.PARAM_TOL, err_msg=name)
    # Without the clipping the step is far from theirs.
    enc, img, variables, unique, paths, grads = _first_step_gradients(golden, fx)
    keras.optimizers.Adam(learning_rate=float(fx["adam.lr_max"]), beta_1=beta_1, beta_2=beta_2,
                          epsilon=float(fx["adam.eps"]) * math.sqrt(1.0 - beta_2)).apply(
        grads, [unique[p] for p in paths])
    after = golden.to_theirs(variables, {p: unique[p].numpy() for p in paths})
    worst = max(np.abs(after[n] - fx[f"after_lr_max.{n}"]).max() for n in after if not n.endswith(".out.bias"))
    assert worst > 100 * golden.PARAM_TOL


def test_their_thresholds_times_b_squared_on_the_summed_hinge_give_their_step():
    """Clipping our summed hinge at their thresholds × B² (the clip_per_tower arm) binds exactly
    when theirs does: their hinge is the sum ÷ B² (``cost.mean()``). The clipped gradient is then
    B² times theirs, and Adam's step m / (√v + ε) does not depend on that scale except through
    ε: with ε × B² too it is their step. With Keras' ε unchanged the step differs where a
    gradient is near their ε (their tiny clipped gradients are damped by it; ours are not).
    Their thresholds themselves on our sum give their step wherever both clip (a clipped
    gradient has the threshold's norm whatever the loss's scale), but clip where theirs would
    not. One-head fixture (no attention loss, which the B² would not scale), Adam at lr_max."""
    sys.path.insert(0, str(REPO / "tests"))
    import test_golden_caption2image as golden

    from grounded_text.training.clipping import TowerClippedAdam

    fx = golden.load("char_gru_1head")
    b = len(fx["batch0.captions"])
    beta_1, beta_2 = (float(x) for x in fx["adam.betas"])
    their_eps = float(fx["adam.eps"]) * math.sqrt(1.0 - beta_2)  # Keras' ε at step 1 (golden test)

    assert int(fx["heads"]) == 1  # no attention loss

    def worst(reduction, clip_scale, eps_scale):
        enc, img, variables, unique, paths, grads = _first_step_gradients(golden, fx, reduction)
        adam = TowerClippedAdam(learning_rate=float(fx["adam.lr_max"]), beta_1=beta_1, beta_2=beta_2,
                                epsilon=their_eps * eps_scale)
        adam.set_towers([(enc.trainable_variables, float(fx["clip.cap_max_norm"]) * clip_scale),
                         (img.trainable_variables, float(fx["clip.img_max_norm"]) * clip_scale)])
        adam.apply(grads, [unique[p] for p in paths])
        after = golden.to_theirs(variables, {p: unique[p].numpy() for p in paths})
        return max(np.abs(after[n] - fx[f"after_lr_max.{n}"]).max() for n in after if not n.endswith(".out.bias"))

    assert worst("mean_matrix", 1.0, 1.0) < golden.PARAM_TOL  # their loss, their thresholds
    assert worst("sum", b * b, b * b) < golden.PARAM_TOL
    assert worst("sum", b * b, 1.0) > 10 * golden.PARAM_TOL  # ε: the one thing the scale changes
    # Their thresholds on our sum: where both towers' clipping binds (here, and whenever their
    # norms exceed them), the clipped gradient is theirs, ε included.
    assert worst("sum", 1.0, 1.0) < golden.PARAM_TOL


# --------------------------------------------------------------------------- the commands
def _cli(module, args, timeout=900):
    from train_cli import env_for_subprocess

    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env_for_subprocess(),
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    (["--encoder-param", "attention_heads=0"], "model.encoder.attention_heads = 0 is not an int >= 1"),
    (["--encoder-param", "attention_heads=2"], "must equal units × directions × attention heads"),
    (["--encoder-param", "attention_heads=2", "--encoder-param", "pooling=max", "--encoder-param", "units=none"],
     "needs an attention pooling"),
    (["--encoder-param", "attention_diversity_margin=-1"], "attention_diversity_margin = -1 is not a finite float > 0"),
    (["--encoder-param", "attention_include_padding=perhaps"], "is not a boolean"),
    (["--encoder-param", "char_embedding_init=gauss"], "is not one of ['uniform', 'normal']"),
    (["--encoder-param", "weight_init=jax"], "is not one of ['keras', 'torch']"),
    (["--loss-param", "reduction=mean_rows"], "is not one of ['sum', 'mean', 'mean_matrix']"),
    (["--set", "text.sentence_end=period"], "is not one of ['none', 'space_period', 'space_period_tokens']"),
    (["--set", "train.clip_norm_text=-1"], "train.clip_norm_text must be a finite number >= 0"),
])
def test_bad_values_are_one_error_line_before_tensorflow(tmp_path, args, message):
    import io
    from contextlib import redirect_stderr

    from grounded_text.train import main

    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["--model", "char_gru_attention_512", "--output-dir", str(tmp_path / "out"), *args])
    text = err.getvalue()
    assert code == 2 and text.startswith("error: ") and text.count("\n") == 1 and message in text, text
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_train_with_every_option_then_rescore_the_export(data_dir, tmp_path):
    """The train command takes every option (tiny budget); the run records them; the evaluate
    command scores its export with the rule it was trained with by default, and with another
    on request, in the same report format."""
    out = tmp_path / "run"
    r = _cli("grounded_text.train", [
        "--data-dir", str(data_dir), "--model", "char_gru_attention_512", "--output-dir", str(out),
        "--encoder-param", "attention_heads=2", "--encoder-param", "units=4", "--encoder-param", "char_dim=4",
        "--encoder-param", "attention_units=8", "--encoder-param", "attention_include_padding=true",
        "--encoder-param", "attention_diversity_margin=1.0", "--encoder-param", "char_embedding_init=normal",
        "--embedding-dim", "16", "--loss-param", "reduction=mean_matrix", "--set", "data.max_train_images=64",
        "--max-dev-images", "32", "--epochs", "1", "--batch-size", "32", "--sentence-end", "space_period",
        "--clip-norm-text", "0.05", "--clip-norm-image", "0.0025", "--steps-per-execution", "2",
        "--no-evaluate", "--verbose", "0"])
    assert r.returncode == 0, r.stderr[-3000:]
    config = (out / "config.toml").read_text()
    for line in ('sentence_end = "space_period"', 'reduction = "mean_matrix"', "attention_heads = 2",
                 "attention_include_padding = true", "attention_diversity_margin = 1.0",
                 'char_embedding_init = "normal"', "clip_norm_text = 0.05", "clip_norm_image = 0.0025"):
        assert line in config, line
    metrics = json.loads((out / "metrics.json").read_text())
    assert np.isfinite(metrics["history"]["loss"]).all()
    assert json.loads((out / "export" / "assets" / "config.json").read_text())["text"]["sentence_end"] == \
        "space_period"

    sts = tmp_path / "sts"
    (sts / "STS12-en-test").mkdir(parents=True)
    for name in ("STS.input.MSRvid.txt", "STS.gs.MSRvid.txt"):
        (sts / "STS12-en-test" / name).write_bytes((data_dir / "sts" / "STS12-en-test" / name).read_bytes())
    reports = {}
    for label, extra in (("recorded", []), ("none", ["--sentence-end", "none"]),
                         ("tokens", ["--sentence-end", "space_period_tokens"])):
        r = _cli("grounded_text.evaluate", ["--model", str(out / "export"), "--sts-dir", str(sts),
                                            "--json", str(tmp_path / f"{label}.json"), *extra])
        assert r.returncode == 0, r.stderr[-3000:]
        reports[label] = (r.stdout, json.loads((tmp_path / f"{label}.json").read_text()), r.stderr)
    assert "sentence ends of" in reports["recorded"][2] and "space_period" in reports["recorded"][2]
    assert f"sentence ends of {out / 'export'}: none (as given" in reports["none"][2]  # said, even when none
    assert "space_period_tokens" in reports["tokens"][2]

    # gt.load applies the recorded rule too; an explicit rule replaces it.
    from grounded_text.serving.loader import load

    recorded, plain = load(out / "export"), load(out / "export", sentence_end="none")
    assert (recorded.sentence_end, plain.sentence_end) == ("space_period", "none")
    np.testing.assert_array_equal(recorded.encode(["A dog runs", "A cat."]),
                                  plain.encode(["A dog runs .", "A cat."]))
    assert not np.allclose(recorded.encode("A dog runs"), plain.encode("A dog runs"))

    def shape(text):  # the report's lines without the figures
        return [line.split("|")[1] if line.startswith("|") else line.split(":")[0] for line in text.splitlines()]

    assert shape(reports["recorded"][0]) == shape(reports["none"][0]) == shape(reports["tokens"][0])
    assert reports["recorded"][1].keys() == reports["none"][1].keys() == reports["tokens"][1].keys()
    figures = [r[1]["sts"]["STS12"]["subsets"]["MSRvid"]["pearson"] for r in reports.values()]
    assert len(set(figures)) == 3, figures  # the three rules give three different inputs


def test_a_loaded_encoder_ends_each_sentence_by_its_rule_before_the_module():
    """``TextEncoder`` hands the module the sentences as its rule writes them (padding rows
    stay empty), and ``"none"`` hands them as given."""
    import tensorflow as tf

    from grounded_text.serving.encoder import TextEncoder

    seen = []

    def module(batch):
        seen.append([s.decode("utf-8") for s in batch.numpy()])
        return tf.zeros([int(tf.shape(batch)[0]), 2])

    TextEncoder(module, "fake", 2, sentence_end="space_period_tokens").encode(["A man  plays a flute.", ""])
    assert seen[-1][:2] == ["A man plays a flute. .", "."] and set(seen[-1][2:]) == {""}
    TextEncoder(module, "fake", 2).encode(["A man  plays a flute."])
    assert seen[-1][0] == "A man  plays a flute."


def test_the_record_clips_and_zero_switches_it_off():
    """The character record clips at the authors' thresholds × B² (their averaged hinge against
    our summed one, at its batch size); ``0`` from any source is no clipping, and every other
    record does not clip."""
    from grounded_text.models.registry import preset_config, resolve_config
    from grounded_text.papers.presets import PRESETS
    from grounded_text.train import config_from_args, parse_args

    for name in ("char_gru_attention", "char_gru_attention_512"):
        c = preset_config(name)
        b2 = c.data.batch_size ** 2
        assert (c.train.clip_norm_text, c.train.clip_norm_image) == (0.05 * b2, 0.0025 * b2) == (51.2, 2.56)
    assert {(preset_config(n).train.clip_norm_text, preset_config(n).train.clip_norm_image)
            for n in PRESETS if not n.startswith("char_gru_attention")} == {(0.0, 0.0)}
    for flags in (["--clip-norm-text", "0", "--clip-norm-image", "0"],
                  ["--set", "train.clip_norm_text=0", "--set", "train.clip_norm_image=0.0"]):
        c = resolve_config(config_from_args(parse_args(["--output-dir", "x", "--model", "char_gru_attention_512",
                                                        *flags])))
        assert (c.train.clip_norm_text, c.train.clip_norm_image) == (0.0, 0.0)
    c = resolve_config(config_from_args(parse_args(["--output-dir", "x", "--model", "char_gru_attention_512",
                                                    "--clip-norm-text", "0.05"])))
    assert (c.train.clip_norm_text, c.train.clip_norm_image) == (0.05, 2.56)


def test_printable_char_ids_follow_the_authors_find_index():
    """``char_ids="printable"``: every character in ``string.printable`` gets its own id in
    their order, and ``'0'`` and characters outside it share the zero row (their
    ``prep_text.py:21-35`` / ``evaluate_char.py:33-50`` at caption2image 8a4dc2c, restated
    here): each id is their ``string.printable.find(c)`` + 1 (our padding id 0 comes first),
    with their id 0 and -1 both on our id 1."""
    import string

    import tensorflow as tf

    from grounded_text.config.schema import TextConfig
    from grounded_text.models.components import character_preprocessor

    pre = character_preprocessor(TextConfig(lowercase=False), ["unused"], None, "printable")
    text = "A zebra 0 é\tZ9~"
    ids = pre(tf.constant([text])).numpy()[0].tolist()

    def theirs(c):
        i = string.printable.find(c)
        return 1 if i <= 0 else i + 1  # '0' (their padding id) and unknown: the zero row

    assert ids == [theirs(c) for c in text]
    assert pre.vocabulary_size == 101


def test_zero_ids_read_zeros_and_get_no_gradient():
    """A zero id reads a zero vector (unlike padding it is not masked: the sentence still
    changes) and its embedding row gets no gradient, as PyTorch's ``padding_idx``."""
    import numpy as np
    import tensorflow as tf

    from grounded_text.layers.char_encoder import CharacterEncoder

    enc = CharacterEncoder(8, char_dim=4, units=3, attention_units=5, zero_ids=(1,), char_embedding_init="normal")
    ids = tf.constant([[2, 1, 3], [2, 3, 0]])
    with tf.GradientTape() as tape:
        e = enc(ids)
        loss = tf.reduce_sum(e * tf.constant(np.random.default_rng(0).normal(size=e.shape), tf.float32))
    grad = tf.convert_to_tensor(tape.gradient(loss, enc.embedding.embeddings)).numpy()
    assert np.all(grad[1] == 0) and np.abs(grad[2]).sum() > 0
    assert not np.allclose(e.numpy()[0], e.numpy()[1])  # the zero step was read, not masked
    h, _ = enc.sequence(tf.constant([[1]]))
    plain = CharacterEncoder.from_config({**enc.get_config(), "zero_ids": []})
    plain.build((None, None))
    plain.set_weights(enc.get_weights())
    zeroed = enc.embedding.embeddings.numpy().copy()
    zeroed[1] = 0
    plain.embedding.embeddings.assign(zeroed)
    np.testing.assert_allclose(enc(ids).numpy(), plain(ids).numpy(), atol=1e-6)
    assert CharacterEncoder.from_config(enc.get_config()).zero_ids == (1,)
