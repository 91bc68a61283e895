"""The three Keras models every model family builds."""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

from grounded_text.data.keys import CAPTION_KEY, FEATURES_KEY, IMAGE_ID_KEY
from grounded_text.utils.compat import distribute_strategy, in_multi_worker_mode, symbolic_build


def _rank1(logs):
    return {k: tf.reshape(v, [1]) if getattr(v, "shape", None) == () else v for k, v in logs.items()}


@keras.saving.register_keras_serializable(package="grounded_text")
class TrainModel(keras.Model):
    """A functional training model whose ``image_id`` input may be left out.

    Keras' optional inputs must still be present (as ``None``) in a dict; this
    model fills a missing ``"image_id"`` key with ``None``, so batches of
    ``{"caption", "image_features"}`` alone keep working.
    """

    def __call__(self, inputs, *args, **kwargs):
        if isinstance(inputs, dict) and IMAGE_ID_KEY not in inputs:
            inputs = {**inputs, IMAGE_ID_KEY: None}
        return super().__call__(inputs, *args, **kwargs)

    def _multi_worker(self) -> bool:
        strategy = distribute_strategy(self)
        return bool(strategy is not None and in_multi_worker_mode(strategy))

    def train_step(self, data):
        """Under ``MultiWorkerMirroredStrategy`` Keras 3 reduces the step's
        logs with ``strategy.reduce("MEAN", v, axis=0)``, which fails on scalars
        (tensorflow/tensorflow#72388); the logs are given shape [1] there, so the
        reduction yields the scalar mean over the replicas."""
        logs = super().train_step(data)
        return _rank1(logs) if self._multi_worker() else logs

    def test_step(self, data):
        logs = super().test_step(data)
        return _rank1(logs) if self._multi_worker() else logs

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        """Keras 3 (TF backend) builds a model created under a
        ``tf.distribute`` strategy from the replicas' first batch averaged with
        ``strategy.reduce("MEAN")``, which fails on the ``tf.string`` captions.
        Only the batch's specs matter for that build, so the first replica's
        local batch is used instead."""
        strategy = distribute_strategy(self)
        if strategy is None or iterator is None:
            return symbolic_build(TrainModel, self, iterator=iterator, data_batch=data_batch)
        for _, _, it in iterator:
            batch = next(it)
            data_batch = tf.nest.map_structure(
                lambda x: strategy.experimental_local_results(x)[0]
                if isinstance(x, tf.distribute.DistributedValues) else x, batch)
            break
        return symbolic_build(TrainModel, self, data_batch=data_batch)


@dataclasses.dataclass
class GroundedModel:
    """A grounded sentence encoder.

    Attributes:
      text_tower: ``keras.Model`` string[B] → float32[B, N] (what is exported).
      image_tower: ``keras.Model`` float[B, d] → float32[B, N].
      train_model: ``keras.Model`` on ``{"caption", "image_features"[, "image_id"]}`` whose
        output is the scalar training loss (added with ``add_loss``); compile it
        with an optimizer only.
      spaces: named sentence spaces of a model that has several, ``{name: keras.Model
        string[B] → float32[B, N_name]}`` sharing the trained weights (e.g. Bordes et
        al.'s ``"textual"`` u and ``"grounded"`` g(u)); ``text_tower`` is one of them.
        The trainer exports each to ``export_<name>/`` beside ``export/``. Empty (the
        default) for single-space models.
      refit: ``None``, or a callable ``refit(train_captions: list[str]) -> None`` that
        re-estimates statistics the text tower holds but gradient descent does not train
        (SEQ's PCA, Bordes et al. 2019 §4.2). The trainer calls it at the end of every
        epoch, before model selection scores the tower, and again after restoring the
        selected epoch's weights, before the export.
    """

    text_tower: keras.Model
    image_tower: keras.Model
    train_model: keras.Model
    spaces: dict[str, keras.Model] = dataclasses.field(default_factory=dict)
    refit: object = None


def assemble(text_tower: keras.Model, image_tower: keras.Model, loss_layer) -> GroundedModel:
    """Wires towers and a loss layer into a ``GroundedModel``.

    The training model's inputs are ``caption`` string[B], ``image_features``
    float[B, d] and the optional ``image_id`` int64[B] (``make_dataset`` and
    ``make_grouped_dataset`` always provide it); the loss layer is called as
    ``loss_layer(text, image, image_ids=image_id)`` (``image_ids=None`` when the
    batch has no ids).
    """
    caption = keras.Input(shape=(), dtype="string", name=CAPTION_KEY)
    features = keras.Input(shape=image_tower.input_shape[1:], dtype="float32", name=FEATURES_KEY)
    image_id = keras.Input(shape=(), dtype="int64", name=IMAGE_ID_KEY, optional=True)
    loss = loss_layer(text_tower(caption), image_tower(features), image_ids=image_id)
    train_model = TrainModel(
        {CAPTION_KEY: caption, FEATURES_KEY: features, IMAGE_ID_KEY: image_id}, loss, name="train_model"
    )
    return GroundedModel(text_tower, image_tower, train_model)
