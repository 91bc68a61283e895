"""The suite's checks of a model, one function each: tests/test_presets.py and
tests/test_config_values.py run them on every registered builder and preset record, and
tests/test_new_model.py on a toy model added as docs/contributing_models.md says. No check
names a builder: what a record sets is looked for in the built model by the parameter tables.

Where a record's value is looked for (``observed_values``):

* ``model.loss``: the loss layer's class (``grounded_text.config.schema.LOSSES``);
  ``model.loss_params.K``: the loss layer's argument that ``LOSS_PARAMS[loss][K].source`` names;
* ``model.encoder.K``: the argument that ``ENCODER_PARAMS[builder][K].source`` names
  (``module:Class.argument``), in every layer of that class; a parameter whose source is a closed
  set of values (``module:CONSTANT``) is looked for by its key in the registered layers' configs;
* ``model.embedding_dim``: the width of the text tower, or of the space named ``"textual"`` of a
  model with several spaces (``GroundedModel.spaces``);
* any other ``model.K`` / ``text.K``: the key in the registered layers' configs.

A value found nowhere, or a ``None`` the builder turns into a size (its ``Param.note`` says how),
must change the built model when it is changed (``_changes_the_model``): then the builder reads
it, and the layers' own tests check what it does.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import typing

import keras
import numpy as np
import tensorflow as tf

from grounded_text.config.params import ENCODER_PARAMS, LOSS_PARAMS, REQUIRED, TINY_EMBEDDING_DIM, TINY_ENCODERS, Param
from grounded_text.config.schema import LOSSES, ExperimentConfig, ModelConfig, TextConfig
from grounded_text.layers import build_vocabulary
from grounded_text.models import build_model
from grounded_text.models.registry import MODELS, preset_config, resolve_config
from grounded_text.papers.presets import BASELINES, PRESETS, REQUIRED_FIELDS, get_preset, tiny_encoders
from grounded_text.papers.record import Preset, leaves

CAPS = ["A dog runs on the beach .", "A dog jumps .", "Two kids play in the snow", "a cat sleeps",
        "A man rides a bike", "a black dog swims", "two girls on a bench", "a red car"]
PROBE = ["a dog runs on the beach", "", "zebra unicorn", "café 🐶 naïve"]
N = TINY_EMBEDDING_DIM
_MISSING = object()


# ----------------------------------------------------------------------------- which records


def needs_user_values(name: str) -> bool:
    """The record leaves a required encoder value to the user (``None`` where the parameter has no
    default, e.g. a model folder to load), so it cannot be built as it is."""
    record = PRESETS[name]
    table = ENCODER_PARAMS[record.builder]
    encoder = record.config["model"].get("encoder", {})
    return any(encoder.get(k, 0) is None and spec.default == REQUIRED for k, spec in table.items())


def buildable_records() -> list[str]:
    """The records the model checks build: all but those that need the user's values and the
    papers' baselines (``BASELINES``: tests/test_paper_baselines.py checks them)."""
    return sorted(n for n in PRESETS if not needs_user_values(n) and n not in BASELINES)


# ----------------------------------------------------------------------------- the tables


def check_registration(builder: str) -> None:
    """The builder is in the registry, has its parameter table and tiny sizes, and its records
    give exactly its table's keys."""
    assert builder in MODELS and builder in ENCODER_PARAMS and builder in TINY_ENCODERS, builder
    assert set(TINY_ENCODERS[builder]) <= set(ENCODER_PARAMS[builder]), builder
    records = [p for p in PRESETS.values() if p.builder == builder]
    assert records, f"{builder}: no preset record names it"
    for p in records:
        assert set(p.config["model"].get("encoder", {})) == set(ENCODER_PARAMS[builder]), p.name


def _target(source: str):
    module, _, obj = source.partition(":")
    owner, _, arg = obj.partition(".")
    target = getattr(importlib.import_module(module), owner)
    if not arg:
        return target, None
    fn = target.__init__ if inspect.isclass(target) else target
    return target, inspect.signature(fn).parameters[arg]


def check_param_source(spec: Param, what: str) -> None:
    """``spec`` matches the argument (default, type, ``None``) or the closed set of values that
    its ``source`` names."""
    target, param = _target(spec.source)
    if param is None:  # a closed set of values the builder or layer checks
        assert spec.type is str and sorted(spec.choices) == sorted(target), what
        return
    default = param.default
    if default is param.empty:
        assert spec.default == REQUIRED, what
    else:
        assert spec.default == (list(default) if isinstance(default, tuple) else default), what
    if spec.type is list:
        assert isinstance(default, (list, tuple)) and all(type(x) is int for x in default), what
        return
    hints = typing.get_type_hints(target.__init__ if isinstance(target, type) else target)
    hint = hints.get(param.name)
    allowed = set(typing.get_args(hint)) or {hint}
    assert spec.type in allowed, (what, hint)
    if type(None) in allowed and spec.type is not str:
        assert spec.nullable, what


def check_encoder_table(builder: str) -> None:
    for key, spec in ENCODER_PARAMS[builder].items():
        check_param_source(spec, f"{builder}.{key}")


def check_record(name: str) -> None:
    """The record round-trips, explains every value, and is what its config resolves to."""
    p = get_preset(name)
    assert Preset.from_dict(p.to_dict()) == p
    cfg = preset_config(name)
    assert ExperimentConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert resolve_config(cfg) == cfg  # resolution is idempotent
    values = leaves(p.config)
    assert set(values) == set(p.sources) | set(p.unsaid), "every leaf in sources or unsaid, nothing else"
    assert not set(p.sources) & set(p.unsaid)
    assert all(isinstance(v, str) and v for v in {**p.sources, **p.unsaid}.values())
    assert [f for f in REQUIRED_FIELDS if f not in values] == []
    flat = leaves(cfg.to_dict())
    for path, value in values.items():
        assert flat[path] == value, path


# ----------------------------------------------------------------------------- the built model


def layers_of(gm) -> list:
    return list(gm.train_model._flatten_layers(include_self=False, recursive=True))


def _registered(layer) -> bool:
    return not isinstance(layer, keras.Model) and ">" in keras.saving.get_registered_name(type(layer))


def _value(layer, key: str):
    config = layer.get_config()
    return config[key] if key in config else getattr(layer, key, _MISSING)


def _agreed(values: list, where: str):
    assert values, f"{where}: not found in the built model"
    assert all(v == values[0] for v in values), f"{where}: the layers disagree: {values}"
    return values[0]


def text_width(gm) -> int:
    """N: the text tower's width, or the ``"textual"`` space's for a model with several spaces."""
    return int(gm.spaces.get("textual", gm.text_tower).output.shape[-1])


def _loss_layer(gm):
    classes = {cls: name for name, (_, cls) in LOSSES.items()}
    # The training model's own layers: a loss made of other losses holds them as sublayers.
    found = [lay for lay in gm.train_model.layers if type(lay).__name__ in classes]
    assert len(found) == 1, f"one loss layer, found {[type(x).__name__ for x in found]}"
    return found[0], classes[type(found[0]).__name__]


def _observe(gm, path: str, builder: str, loss_name: str):
    """The built model's value for the record leaf ``path``, or ``_MISSING``."""
    parts = path.split(".")
    layers = layers_of(gm)
    if path == "model.loss":
        return loss_name
    if path == "model.embedding_dim":
        return text_width(gm)
    if parts[:2] == ["model", "loss_params"]:
        spec = LOSS_PARAMS[loss_name][parts[2]]
        _, _, obj = spec.source.partition(":")
        arg = obj.partition(".")[2] or parts[2]
        return _value(_loss_layer(gm)[0], arg)
    if parts[:2] == ["model", "encoder"]:
        spec = ENCODER_PARAMS[builder][parts[2]]
        target, param = _target(spec.source)
        if param is not None and isinstance(target, type) and issubclass(target, keras.layers.Layer):
            owners = [lay for lay in layers if type(lay).__name__ == target.__name__]
            values = [_value(lay, param.name) for lay in owners]
            return _agreed(values, path) if values else _MISSING
    key = parts[-1]
    values = [lay.get_config()[key] for lay in layers if _registered(lay) and key in lay.get_config()]
    return _agreed(values, path) if values else _MISSING


def _fingerprint(gm) -> str:
    """The configs of the training model's and the text tower's layers, without their names
    (Keras numbers unnamed layers per build)."""
    def configs(model):
        return [(type(lay).__name__, {k: v for k, v in lay.get_config().items() if k != "name"})
                for lay in model._flatten_layers(include_self=False, recursive=True)
                if not isinstance(lay, keras.Model)]

    return json.dumps([configs(gm.train_model), configs(gm.text_tower), sorted(gm.spaces)], sort_keys=True,
                      default=str)


def _another_value(spec: Param, value):
    if spec.type is bool:
        return not value
    if spec.choices:
        return next(c for c in spec.choices if c != value)
    if spec.type is int:
        low = int(spec.minimum or 1)
        return low if value != low else low + 1
    if spec.type is float:
        return 0.5 * (value or 1.0)
    if spec.type is list:
        return [*value, value[-1]]
    raise AssertionError(f"no other value to try for {spec}")


def _build(cfg, encoder=None):
    model = cfg.model if encoder is None else dataclasses.replace(cfg.model, encoder=encoder)
    return build_model(model, cfg.text, build_vocabulary(CAPS), feature_dim=6, seed=0, train_captions=CAPS)


def _changes_the_model(cfg, builder: str, key: str) -> bool:
    """Building with another value of the encoder parameter ``key`` gives another model (and
    building twice with the same values gives the same one, so that the comparison means something)."""
    spec = ENCODER_PARAMS[builder][key]
    same = _fingerprint(_build(cfg))
    assert same == _fingerprint(_build(cfg)), "two builds of one config differ: the comparison means nothing"
    other = _build(cfg, {**cfg.model.encoder, key: _another_value(spec, cfg.model.encoder[key])})
    return _fingerprint(other) != same


def observed_values(name: str, gm) -> dict:
    """What the built model ``gm`` of record ``name`` holds for each of the record's model and
    text leaves (``_MISSING`` where it holds none)."""
    record = PRESETS[name]
    _, loss_name = _loss_layer(gm)
    return {path: _observe(gm, path, record.builder, loss_name)
            for path in leaves(record.config) if path.startswith(("model.", "text."))}


def check_record_reaches_the_model(name: str) -> None:
    """Built at the record's own sizes (cheap to build; nothing is trained), the model holds every
    model and text value of the record."""
    record = PRESETS[name]
    cfg = preset_config(name)
    gm = _build(cfg)
    seen = observed_values(name, gm)
    expected = {k: v for k, v in leaves(record.config).items() if k in seen}
    # A rule on the training captions, not a model value: it reaches the resolved config here,
    # and test_caption2image_options checks that the trainer's captions get it.
    if "text.sentence_end" in expected:
        assert cfg.text.sentence_end == expected.pop("text.sentence_end")
    vectors = expected.pop("model.word_vectors", None)
    for path, want in expected.items():
        got = seen[path]
        if path.startswith("model.encoder.") and (got is _MISSING or (want is None and got is not None)):
            key = path.rsplit(".", 1)[1]
            assert _changes_the_model(cfg, record.builder, key), f"{name}: {path} is not read by the builder"
            continue
        assert got is not _MISSING, f"{name}: {path} not found in the built model"
        assert got == want, f"{name}: {path} = {got!r} in the built model, {want!r} in the record"
    if vectors and str(vectors).lower() != "none":  # the record's word vectors were loaded
        from grounded_text.layers.word_vectors import pretrained_matrix_for

        pre = next(lay for lay in layers_of(gm) if type(lay).__name__ == "TextPreprocessor")
        matrix, _ = pretrained_matrix_for(pre.vocabulary, pre.num_oov_buckets, vectors)
        tables = [lay.embeddings.numpy() for lay in layers_of(gm) if isinstance(lay, keras.layers.Embedding)]
        assert any(t.shape == matrix.shape and np.allclose(t, matrix) for t in tables), f"{name}: {vectors}"


def check_mixed_float16_train_step(name: str) -> None:
    """At its builder's tiny sizes, under ``mixed_float16``: a training step changes the text
    tower, whose outputs (and the loss) stay float32."""
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model_cfg = resolve_config(ExperimentConfig(model=ModelConfig(
            name=name, embedding_dim=N, encoder=tiny_encoders().get(name, {})))).model
        gm = build_model(model_cfg, TextConfig(), build_vocabulary(CAPS), feature_dim=6, seed=0, train_captions=CAPS)
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
        assert text_width(gm) == N
        assert out.dtype == tf.float32 and tuple(out.shape) == (len(PROBE), int(gm.text_tower.output.shape[-1]))
        assert np.isfinite(out.numpy()).all()
        assert gm.image_tower(x["image_features"]).dtype == tf.float32
        # The loss is float32 too (the training model's output and the added loss): a float16 loss
        # would lose the small differences that dynamic loss scaling relies on.
        loss = gm.train_model(x, training=False)
        assert loss.dtype == tf.float32 and loss.shape == () and np.isfinite(loss.numpy())
        assert all(loss.dtype == tf.float32 for loss in gm.train_model.losses)
        assert gm.train_model.optimizer.__class__.__name__ == "LossScaleOptimizer"  # dynamic loss scaling
    finally:
        keras.mixed_precision.set_global_policy("float32")
