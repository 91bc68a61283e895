"""docs/contributing_models.md followed once: a toy model added in its five places (the layer, the
builder, the registry, its parameter and tiny-size tables, the preset record) passes the suite's
own model checks (tests/model_checks.py, the layer harness's registered-layer test), the ones
tests/test_presets.py, tests/test_config_values.py and tests/test_encoders.py run on the shipped
models, with nothing else touched and no test edited; the registration is undone after."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras.src.saving import object_registration
from layer_harness import registered_layers, run_registered_layer_test
from model_checks import (
    buildable_records,
    check_encoder_table,
    check_mixed_float16_train_step,
    check_record,
    check_record_reaches_the_model,
    check_registration,
)

from grounded_text.config.params import ENCODER_PARAMS, TINY_EMBEDDING_DIM, TINY_ENCODERS, Param
from grounded_text.config.schema import ConfigError
from grounded_text.layers import build_vocabulary, examples
from grounded_text.layers.examples import LayerExample
from grounded_text.models import build_model
from grounded_text.models.components import (
    architecture,
    build_affine_image_tower,
    family_loss,
    require_embedding_dim,
    require_params,
    word_tower,
)
from grounded_text.models.grounded_model import assemble
from grounded_text.models.registry import MODELS
from grounded_text.models.tables import architectures_markdown
from grounded_text.papers.presets import PRESETS, records_markdown, tiny_encoders
from grounded_text.papers.record import Preset
from grounded_text.papers.resolve import resolve_config
from grounded_text.train import config_from_args, parse_args

NAME = "toy_mean"
CAPS = ["A dog runs on the beach .", "A dog jumps .", "Two kids play in the snow", "a cat sleeps",
        "A man rides a bike", "a black dog swims", "two girls on a bench", "a red car"]


# 1. The layer: registered (in _register, undone after the test), with get_config and its example.
class ToyMeanEncoder(keras.layers.Layer):
    """Int ids [B, T] → float32[B, N]: the mean of the words' embeddings, a dense map to N, L2."""

    def __init__(self, vocabulary_size: int, word_dim: int = 8, output_dim: int = 16, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size, self.word_dim, self.output_dim = vocabulary_size, word_dim, output_dim
        self.embedding = keras.layers.Embedding(vocabulary_size, word_dim, name="embedding")
        self.dense = keras.layers.Dense(output_dim, name="dense")

    @classmethod
    def example(cls) -> LayerExample:
        return LayerExample({"vocabulary_size": 11, "word_dim": 4, "output_dim": 3}, examples.word_ids())

    def get_config(self):
        return {**super().get_config(), "vocabulary_size": self.vocabulary_size, "word_dim": self.word_dim,
                "output_dim": self.output_dim}

    def call(self, ids):
        # In the compute dtype (float16 under mixed precision); the output is float32, as every encoder's.
        mask = keras.ops.expand_dims(keras.ops.cast(keras.ops.not_equal(ids, 0), self.compute_dtype), -1)
        total = keras.ops.sum(self.embedding(ids) * mask, axis=1)
        x = keras.ops.cast(self.dense(total / keras.ops.maximum(keras.ops.sum(mask, axis=1), 1.0)), "float32")
        return x / keras.ops.sqrt(keras.ops.sum(x * x, -1, keepdims=True) + 1e-12)


# 2. The builder: its keys come from its parameter table; it declares its row of docs/models.md.
@architecture("word mean → dense → L2", "affine W", "Pearson")
def build_toy_mean(model, text, vocabulary, feature_dim, seed=0, **_):
    p = require_params(model, model.encoder, ENCODER_PARAMS[NAME], "encoder")
    n = require_embedding_dim(model)
    tower = word_tower(model, text, vocabulary, ToyMeanEncoder, {"word_dim": p["word_dim"], "output_dim": n},
                       "toy_encoder")
    return assemble(tower, build_affine_image_tower(feature_dim, n), family_loss(model, "pearson", (), seed))


# 4. Its parameter table and tiny sizes. 5. Its preset record.
PARAMS = {"word_dim": Param(int, 8, minimum=1, source=f"{__name__}:ToyMeanEncoder.word_dim")}
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
    # 1. What @keras.saving.register_keras_serializable(package="grounded_text") does, undone after.
    m.setitem(keras.saving.get_custom_objects(), "grounded_text>ToyMeanEncoder", ToyMeanEncoder)
    m.setitem(object_registration.GLOBAL_CUSTOM_NAMES, ToyMeanEncoder, "grounded_text>ToyMeanEncoder")
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
        # The docs tables regenerate with it.
        assert f"| `{NAME}` | {NAME} |" in records_markdown()
        assert f"| `{NAME}` | word mean → dense → L2 | affine W | Pearson |" in architectures_markdown()

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


def test_a_new_model_passes_the_suites_own_model_checks(monkeypatch, tmp_path):
    """The checks that tests/test_presets.py, tests/test_config_values.py and the layer harness run
    on every shipped builder, record and layer, on the toy: what they find in the registries."""
    with monkeypatch.context() as m:
        _register(m)
        assert NAME in buildable_records()  # test_presets builds it
        check_registration(NAME)  # test_presets, test_config_values
        check_encoder_table(NAME)  # test_config_values: each Param against the argument it names
        check_record(NAME)  # test_presets: the record round-trips and explains every value
        check_record_reaches_the_model(NAME)  # test_presets: its values reach the built model
        check_mixed_float16_train_step(NAME)  # test_presets: a mixed-precision step at its tiny sizes
        assert ToyMeanEncoder in registered_layers()  # test_encoders: the harness finds the layer
        run_registered_layer_test(ToyMeanEncoder, tmp_path)
    assert ToyMeanEncoder not in registered_layers() and NAME not in MODELS
