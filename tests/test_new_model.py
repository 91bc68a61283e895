"""docs/contributing_models.md followed once: a toy model added in its five places (the layer, the
builder, the registry, its parameter and tiny-size tables, the preset record) builds, trains and
is checked like the shipped ones, with nothing else touched; the registration is undone after."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from grounded_text.config.params import ENCODER_PARAMS, TINY_EMBEDDING_DIM, TINY_ENCODERS, Param
from grounded_text.config.schema import ConfigError
from grounded_text.layers import build_vocabulary
from grounded_text.models import build_model
from grounded_text.models.components import (
    build_affine_image_tower,
    family_loss,
    require_embedding_dim,
    require_params,
    word_tower,
)
from grounded_text.models.grounded_model import assemble
from grounded_text.models.registry import MODELS
from grounded_text.papers.presets import PRESETS, records_markdown, tiny_encoders
from grounded_text.papers.record import Preset
from grounded_text.papers.resolve import resolve_config
from grounded_text.train import config_from_args, parse_args

NAME = "toy_mean"
CAPS = ["A dog runs on the beach .", "A dog jumps .", "Two kids play in the snow", "a cat sleeps",
        "A man rides a bike", "a black dog swims", "two girls on a bench", "a red car"]


# 1. The layer.
class ToyMeanEncoder(keras.layers.Layer):
    """Int ids [B, T] → float32[B, N]: the mean of the words' embeddings, a dense map to N, L2."""

    def __init__(self, vocabulary_size: int, word_dim: int = 8, output_dim: int = 16, **kwargs):
        super().__init__(**kwargs)
        self.embedding = keras.layers.Embedding(vocabulary_size, word_dim, name="embedding")
        self.dense = keras.layers.Dense(output_dim, name="dense")

    def call(self, ids):
        mask = keras.ops.expand_dims(keras.ops.cast(keras.ops.not_equal(ids, 0), "float32"), -1)
        total = keras.ops.sum(self.embedding(ids) * mask, axis=1)
        x = self.dense(total / keras.ops.maximum(keras.ops.sum(mask, axis=1), 1.0))
        return keras.ops.cast(x / keras.ops.sqrt(keras.ops.sum(x * x, -1, keepdims=True) + 1e-12), "float32")


# 2. The builder: its keys come from its parameter table.
def build_toy_mean(model, text, vocabulary, feature_dim, seed=0, **_):
    p = require_params(model, model.encoder, ENCODER_PARAMS[NAME], "encoder")
    n = require_embedding_dim(model)
    tower = word_tower(model, text, vocabulary, ToyMeanEncoder, {"word_dim": p["word_dim"], "output_dim": n},
                       "toy_encoder")
    return assemble(tower, build_affine_image_tower(feature_dim, n), family_loss(model, "pearson", (), seed))


# 4. Its parameter table and tiny sizes. 5. Its preset record.
PARAMS = {"word_dim": Param(int, 8, minimum=1, source="tests.test_new_model:ToyMeanEncoder.word_dim")}
TINY = {"word_dim": 4}
RECORD = Preset(
    name=NAME, builder=NAME, paper="a toy (no paper)",
    config={"data": {"one_caption_per_image": False, "batch_size": 8, "sampler": "random"},
            "text": {"lowercase": True},
            "model": {"embedding_dim": 32, "loss": "pearson", "encoder": {"word_dim": 16}},
            "train": {"epochs": 1, "learning_rate": 1e-2, "select_on": "last", "schedule": "constant",
                      "snapshots": False}},
    sources={}, unsaid={p: "a toy" for p in ("data.one_caption_per_image", "data.batch_size", "data.sampler",
                                             "text.lowercase", "model.embedding_dim", "model.loss",
                                             "model.encoder.word_dim", "train.epochs", "train.learning_rate",
                                             "train.select_on", "train.schedule", "train.snapshots")})


def _register(m: pytest.MonkeyPatch) -> None:
    m.setitem(MODELS, NAME, build_toy_mean)  # 3. The registry.
    m.setitem(ENCODER_PARAMS, NAME, PARAMS)
    m.setitem(TINY_ENCODERS, NAME, TINY)
    m.setitem(PRESETS, NAME, RECORD)


def test_a_new_model_needs_its_five_places_and_nothing_else(monkeypatch):
    with monkeypatch.context() as m:
        _register(m)
        # What the tests and the smoke runs derive from the registry now covers it.
        assert set(MODELS) == set(ENCODER_PARAMS) == set(TINY_ENCODERS)
        assert {p.builder for p in PRESETS.values()} == set(MODELS)
        assert tiny_encoders()[NAME] == TINY
        assert f"| `{NAME}` | {NAME} |" in records_markdown()  # the docs table regenerates with it

        # The command line takes it, its parameters are typed and checked before TensorFlow is needed.
        cfg = config_from_args(parse_args(["--output-dir", "x", "--model", NAME, "--encoder-param", "word_dim=4",
                                           "--embedding-dim", str(TINY_EMBEDDING_DIM)]))
        assert cfg.model.encoder == {"word_dim": 4}
        for bad, match in ((["--encoder-param", "word_dim=0"], r"model\.encoder\.word_dim = '?0'? is not an int"),
                           (["--encoder-param", "units=4"], "has no parameter 'units'")):
            with pytest.raises(ConfigError, match=match):
                config_from_args(parse_args(["--output-dir", "x", "--model", NAME, *bad]))

        # It resolves from its record, builds and trains one step.
        cfg = resolve_config(cfg)
        assert (cfg.data.batch_size, cfg.train.learning_rate, cfg.model.loss) == (8, 1e-2, "pearson")
        gm = build_model(cfg.model, cfg.text, build_vocabulary(CAPS), feature_dim=6, seed=0)
        assert any(isinstance(lay, ToyMeanEncoder) for lay in gm.text_tower.layers)
        gm.train_model.compile(optimizer=keras.optimizers.Adam(cfg.train.learning_rate))
        x = {"caption": tf.constant(CAPS), "image_features": tf.random.stateless_normal([8, 6], seed=[1, 2]),
             "image_id": tf.constant(np.arange(8), tf.int64)}
        before = [w.numpy().copy() for w in gm.text_tower.trainable_weights]
        logs = gm.train_model.train_on_batch(x, return_dict=True)
        assert np.isfinite(logs["loss"])
        assert any(not np.allclose(b, a.numpy()) for b, a in zip(before, gm.text_tower.trainable_weights))
        out = gm.text_tower(tf.constant(["a dog", ""])).numpy()
        assert out.shape == (2, TINY_EMBEDDING_DIM) and np.isfinite(out).all()
    # The registration is undone: the shipped tables are as they were.
    assert NAME not in MODELS and NAME not in ENCODER_PARAMS and NAME not in TINY_ENCODERS and NAME not in PRESETS
