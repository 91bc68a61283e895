"""What a training run is built from, before anything is written: the data (pairs, splits,
sentence ends, the image-feature check), the pipelines, the model and its compile with the
learning-rate schedule (``prepare_training`` → ``TrainingSetup``; ``compile_for_training``).
The trainer's steps (``grounded_text.training.trainer``) take it from here.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from grounded_text.config.schema import DataConfig, ExperimentConfig, TrainConfig
from grounded_text.data.pairs import make_dataset
from grounded_text.data.paths import resolve_data_dir
from grounded_text.data.prepared import load_pairs
from grounded_text.data.sampler import make_caption_pass_dataset, make_grouped_dataset
from grounded_text.data.sentence_end import pairs_with_sentence_end
from grounded_text.layers.text_preprocessor import build_vocabulary
from grounded_text.models.registry import build_model
from grounded_text.papers.resolve import ensure_resolved
from grounded_text.training.clipping import make_optimizer
from grounded_text.training.distribute import apply_mixed_precision, make_strategy, shard_by_data
from grounded_text.training.schedules import CYCLIC_SCHEDULES, cycle_steps

log = logging.getLogger("grounded_text.train")


@dataclasses.dataclass
class TrainingSetup:
    """What ``prepare_training`` builds: everything ``fit`` needs (shared by
    ``train`` and ``grounded_text.benchmark``, so the benchmark measures the real path).

    Attributes:
      config: the resolved ``ExperimentConfig``.
      root: the data root.
      flickr: ``SplitPairs`` (all splits, feature store).
      train_pairs, dev_pairs: the ``CaptionPairs`` used (slices applied).
      train_ds, dev_ds: the ``tf.data`` pipelines (dicts of caption string[B],
        image_features float32[B, d], image_id int64[B]).
      steps_per_epoch: full training batches per epoch.
      vocabulary: the word vocabulary (training captions only).
      model: the ``GroundedModel``; ``train_model`` is compiled (Adam).
      strategy: the ``tf.distribute.Strategy`` the model was built under.
      precision: the Keras dtype policy name in force (``"float32"``, ``"mixed_float16"``...).
      data_epoch: int64 ``tf.Variable`` the training pipeline reads its epoch from (each
        epoch's order is a function of the seed and it; ``guards.DataEpoch`` sets it).
    """

    config: ExperimentConfig
    root: Path
    flickr: object
    train_pairs: object
    dev_pairs: object
    train_ds: tf.data.Dataset
    dev_ds: tf.data.Dataset
    steps_per_epoch: int
    vocabulary: list
    model: object
    strategy: tf.distribute.Strategy
    precision: str
    data_epoch: tf.Variable | None = None


def prepare_training(config: ExperimentConfig, data_dir: str | Path | None, *, strategy=None) -> TrainingSetup:
    """Data → vocabulary → model built and compiled inside ``strategy.scope()``.

    Sets the global Keras dtype policy from ``config.train.mixed_precision`` (see
    ``grounded_text.training.distribute.resolve_mixed_precision``); the caller restores it.

    Args:
      config: the experiment; a resolved config (``grounded_text.papers.resolve.resolve_config``)
        is used as it is, another one is resolved first.
      data_dir: data root (``None``: ``$GROUNDED_TEXT_DATA``).
      strategy: a ``tf.distribute.Strategy`` (``None``: ``make_strategy(config.train.strategy)``).

    Raises:
      ValueError: see ``train``.
    """
    config = ensure_resolved(config)
    if config.data.batch_size < 2:
        raise ValueError(f"batch_size must be >= 2 for in-batch losses, got {config.data.batch_size}.")
    strategy = strategy if strategy is not None else make_strategy(config.train.strategy)
    precision = apply_mixed_precision(config.train.mixed_precision)
    root = resolve_data_dir(data_dir)
    keras.utils.set_random_seed(config.train.seed)
    flickr, train_pairs, dev_pairs, data_epoch, train_ds, dev_ds, steps = _data(config.data, root,
                                                                                 config.text.sentence_end)
    vocabulary, model = _model(config, flickr.store.dim, train_pairs, strategy, steps)
    return TrainingSetup(config, root, flickr, train_pairs, dev_pairs, train_ds, dev_ds, steps,
                         vocabulary, model, strategy, precision, data_epoch)


def _data(data: DataConfig, root: Path, sentence_end: str = "none"):
    """(flickr, train_pairs, dev_pairs, data_epoch, train_ds, dev_ds, steps_per_epoch): the
    pairs (slices applied; ``TextConfig.sentence_end`` applied to their captions) and their
    pipelines, sharded across replicas by data."""
    flickr = load_pairs(data, root)  # flickr8k, a prepared folder or a TFDS export
    train_pairs = flickr.splits["train"]
    if data.max_train_images:
        train_pairs = train_pairs.first_images(data.max_train_images)
    if data.one_caption_per_image:
        train_pairs = train_pairs.one_caption_per_image(data.seed)
    dev_pairs = flickr.splits["dev"]
    if data.max_dev_images:
        dev_pairs = dev_pairs.first_images(data.max_dev_images)
    if len(train_pairs) == 0:
        raise ValueError(f"No training pairs: {flickr.describe_split('train')}.")
    train_pairs = pairs_with_sentence_end(train_pairs, sentence_end)
    dev_pairs = pairs_with_sentence_end(dev_pairs, sentence_end)
    if len(train_pairs) < data.batch_size:
        raise ValueError(f"Only {len(train_pairs)} training pairs for batch_size {data.batch_size}: "
                         f"{flickr.describe_split('train')}; lower --batch-size or use more images.")
    if len(dev_pairs) == 0:
        raise ValueError(f"No dev (validation) pairs: {flickr.describe_split('dev')}.")
    check_image_features(train_pairs, flickr.store.path)
    check_image_features(dev_pairs, flickr.store.path, "dev")
    data_epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_epoch")
    train_ds, dev_ds, steps = _datasets(data, train_pairs, dev_pairs, epoch=data_epoch)
    return flickr, train_pairs, dev_pairs, data_epoch, shard_by_data(train_ds), shard_by_data(dev_ds), steps


#: The largest feature magnitude accepted for training. Image networks' pooled features stay
#: below about 1e3; float32 arithmetic on values near 1e19 and above overflows (a row's squared
#: norm), which the trainer would report as divergence.
MAX_FEATURE_MAGNITUDE = 1e8


def check_image_features(pairs, where=None, split: str = "training") -> None:
    """Refuses training image features that carry no signal or cannot be computed with:
    non-finite values, values beyond ``MAX_FEATURE_MAGNITUDE`` in magnitude, every row zero,
    or every row the same (a failed extraction, a placeholder store, a damaged file). The model
    would otherwise diverge, or train towards one vector and stop as "collapsed", with advice
    about the learning rate that cannot help.

    Args:
      pairs: the training ``CaptionPairs`` (float32 [n, d] features in memory; a streamed
        store is checked on its first 256 rows).
      where: the feature file, for the message.
      split: the split's name in the message (``"training"``, ``"dev"``); the dev split is
        checked for non-finite and overflowing values only (its scores would be NaN), and
        only in memory (a streamed store's training check is its one pass).

    Raises:
      ValueError: one line naming the file and what is wrong.
    """
    if pairs.streamed and split != "training":
        return  # gathering rows of a streamed store is a pass over it: the training check makes one
    rows = np.unique(np.asarray(pairs.feature_rows))
    if pairs.streamed:
        rows = rows[:256]
    try:
        x = np.asarray(pairs.features[rows], dtype=np.float32)
    except (TypeError, IndexError, ValueError):  # a store that cannot gather rows: not checked
        return
    if x.size == 0:
        return
    source = f"the image features in {where}" if where else "the image features"
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():
        raise ValueError(f"{source}: {int(bad.sum())} of the {len(x)} {split} images have NaN or Inf features; "
                         "the feature file is damaged: extract the features again.")
    huge = (np.abs(x) > MAX_FEATURE_MAGNITUDE).any(axis=1)
    if huge.any():
        raise ValueError(f"{source}: {int(huge.sum())} of the {len(x)} {split} images have features of magnitude "
                         f"up to {float(np.abs(x).max()):.3g}, beyond {MAX_FEATURE_MAGNITUDE:.0e} (image networks' "
                         "features stay below about 1e3; float32 arithmetic overflows on them): a data problem, not a "
                         "training one; the feature file is damaged or not image features: extract them again.")
    if split == "training" and len(x) > 1 and not (x != x[:1]).any():
        what = "all zero" if not x.any() else "the same for every image"
        raise ValueError(f"{source} are {what} ({len(x)} training images, width {x.shape[1]}): a data problem "
                         "(a failed or placeholder extraction), not a training one; extract the features again.")


def _model(config: ExperimentConfig, feature_dim: int, train_pairs, strategy, steps_per_epoch: int):
    """(vocabulary, model): the vocabulary of the training captions, and the model built and
    compiled under ``strategy`` (global batch = batch_size)."""
    vocabulary = build_vocabulary(
        train_pairs.captions.tolist(),
        max_size=config.text.max_vocab_size,
        min_count=config.text.min_count,
        lowercase=config.text.lowercase,
        boundary_tokens=config.text.boundary_tokens,
    )
    # No compiled call longer than the epoch (the same steps run either way).
    steps_per_execution = min(config.train.steps_per_execution, steps_per_epoch)
    if strategy.num_replicas_in_sync > 1 and steps_per_execution > 1:
        # Keras 3.15's multi-step loop fails on distributed string batches ("while/cond/Placeholder").
        log.info("steps_per_execution=%d → 1 under %d replicas.", steps_per_execution, strategy.num_replicas_in_sync)
        steps_per_execution = 1
    with strategy.scope():
        model = build_model(config.model, config.text, vocabulary, feature_dim, seed=config.train.seed,
                            train_captions=train_pairs.captions.tolist())
        compile_for_training(model.train_model, config.train, steps_per_epoch, steps_per_execution,
                             towers=(model.text_tower, model.image_tower))
    return vocabulary, model


def compile_for_training(train_model: keras.Model, train_cfg: TrainConfig, steps_per_epoch: int,
                         steps_per_execution: int | None = None, towers=(None, None)) -> None:
    """The one ``compile`` of the package: Adam under the config's learning-rate schedule.

    Every model that trains (the trainer's, and the benchmarks' variants of it) is compiled
    here, so that a figure measured on one is measured under the trainer's settings.

    Args:
      train_model: a Keras model whose loss is ``add_loss``-ed (``GroundedModel.train_model``).
      train_cfg: a resolved ``TrainConfig`` (learning rate, schedule, ``steps_per_execution``).
      steps_per_epoch: optimizer steps per epoch (the cyclic schedules' period unit).
      steps_per_execution: overrides ``train_cfg.steps_per_execution`` (the trainer caps it
        at ``steps_per_epoch``).
      towers: (text tower, image tower) whose gradient norms ``train_cfg.clip_norm_text`` /
        ``clip_norm_image`` clip (``grounded_text.training.clipping``).
    """
    train_model.compile(
        optimizer=make_optimizer(_learning_rate(train_cfg, steps_per_epoch), train_cfg.clip_norm_text,
                                 train_cfg.clip_norm_image, *towers),
        steps_per_execution=steps_per_execution or train_cfg.steps_per_execution,
    )


def _datasets(data: DataConfig, train_pairs, dev_pairs, epoch=None):
    """(train_ds, dev_ds, steps_per_epoch) for the configured sampler (``epoch``: the
    variable the training order is seeded with, see ``make_dataset``)."""
    if data.sampler == "grouped":
        per_batch = data.batch_size // data.captions_per_image
        train_ds = make_grouped_dataset(train_pairs, per_batch, data.captions_per_image, seed=data.seed, epoch=epoch)
        dev_ds = make_grouped_dataset(dev_pairs, per_batch, data.captions_per_image, seed=data.seed, shuffle=False)
    elif data.sampler == "distinct_images":
        train_ds = make_caption_pass_dataset(train_pairs, data.batch_size, seed=data.seed, epoch=epoch)
        dev_ds = make_dataset(dev_pairs, data.batch_size, shuffle=False)
    else:
        train_ds = make_dataset(train_pairs, data.batch_size, shuffle=True, seed=data.seed,
                                bucket_by_length=data.bucket_by_length, epoch=epoch)
        dev_ds = make_dataset(dev_pairs, data.batch_size, shuffle=False)
    steps = int(train_ds.cardinality())
    if steps < 0:  # unknown cardinality: count once
        steps = sum(1 for _ in train_ds)
    if steps < 1:
        raise ValueError(f"The {data.sampler} sampler yields no full training batch of {data.batch_size}.")
    return train_ds, dev_ds, steps


def _learning_rate(train_cfg: TrainConfig, steps_per_epoch: int):
    """A float (constant), or a cyclic cosine schedule: ``CyclicCosineSchedule``
    (Merkx & Frank §3.3, min → max → min) or ``WarmRestartCosineSchedule`` (SGDR)."""
    if train_cfg.schedule in CYCLIC_SCHEDULES:
        return CYCLIC_SCHEDULES[train_cfg.schedule](train_cfg.lr_min, train_cfg.learning_rate,
                                                    cycle_steps(train_cfg.cycle_epochs, steps_per_epoch))
    return train_cfg.learning_rate


