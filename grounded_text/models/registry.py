"""Name → builder. Every builder has the signature
``(model: ModelConfig, text: TextConfig, vocabulary, feature_dim, seed, train_captions=None) → GroundedModel``
and is trained by the one trainer (``grounded_text.train``).

Presets (issue 9; each builder's docstring gives the paper configuration):

==================== ========================================= ============= ========= ==========
name                 model                                     loss          sampler   schedule
==================== ========================================= ============= ========= ==========
``vete_bow``         VETE-BOW (Kurach et al. 2017)             pearson       random    constant
``vete_rnn``         VETE-RNN, GRU                             pearson       random    constant
``vete_cnn``         VETE-CNN, Kim (2014)                      pearson       random    constant
``bordes_cg_pg``     C_g + P_g grounded space (Bordes 2019)    grounding     grouped   constant
``two_branch_khard`` two-branch MLPs over GloVe (Kolluru)      triplet, K=1  random    constant
``char_gru_attention`` char bi-GRU + attention (Merckx & Frank) triplet, all  random    cyclic + snapshots
==================== ========================================= ============= ========= ==========

``None`` fields of the config (``ModelConfig.loss``, ``DataConfig.sampler``,
``TrainConfig.schedule``, ``TrainConfig.snapshots``) take the preset's value
(``resolve_config``); set them to override.
"""

from __future__ import annotations

import dataclasses

from grounded_text.models.bordes import build_bordes_cg_pg
from grounded_text.models.char_level import build_char_gru_attention
from grounded_text.models.components import LOSSES, loss_needs_grouped_batches
from grounded_text.models.pretrained import build_grounded_pretrained
from grounded_text.models.two_branch import build_two_branch_khard
from grounded_text.models.vete import build_vete_bow, build_vete_cnn, build_vete_rnn

MODELS = {
    "vete_bow": build_vete_bow,
    "vete_rnn": build_vete_rnn,
    "vete_cnn": build_vete_cnn,
    "bordes_cg_pg": build_bordes_cg_pg,
    "two_branch_khard": build_two_branch_khard,
    "char_gru_attention": build_char_gru_attention,
    "grounded_pretrained": build_grounded_pretrained,
}

# The presets' choices for the config fields left at None.
PRESET_DEFAULTS = {
    "vete_bow": {"loss": "pearson", "sampler": "random", "schedule": "constant", "snapshots": False},
    "vete_rnn": {"loss": "pearson", "sampler": "random", "schedule": "constant", "snapshots": False},
    "vete_cnn": {"loss": "pearson", "sampler": "random", "schedule": "constant", "snapshots": False},
    "bordes_cg_pg": {"loss": "grounding", "sampler": "grouped", "schedule": "constant", "snapshots": False},
    "two_branch_khard": {"loss": "triplet", "sampler": "random", "schedule": "constant", "snapshots": False},
    "char_gru_attention": {"loss": "triplet", "sampler": "random", "schedule": "cyclic_cosine",
                           "snapshots": True},
    "grounded_pretrained": {"loss": "grounding", "sampler": "grouped", "schedule": "constant",
                            "snapshots": False},
}
SAMPLERS = ("random", "grouped")
SCHEDULES = ("constant", "cyclic_cosine", "warm_restarts")


def resolve_config(config):
    """Fills the config's ``None`` choices with the preset's (see module docstring).

    Returns:
      A new ``ExperimentConfig``; explicit settings are kept.

    Raises:
      ValueError: unknown model, loss, sampler or schedule; a loss that needs
        grouped batches (cluster, grounding) with the random sampler or one caption
        per image; snapshots without the cyclic schedule; ``captions_per_image < 2``
        or not dividing ``batch_size`` for the grouped sampler.
    """
    name = config.model.name
    if name not in MODELS:
        raise ValueError(f"Unknown model {name!r}; choose one of {sorted(MODELS)}.")
    d = PRESET_DEFAULTS[name]
    model = config.model if config.model.loss is not None else dataclasses.replace(config.model, loss=d["loss"])
    if model.loss not in LOSSES:
        raise ValueError(f"Unknown loss {model.loss!r}; choose one of {sorted(LOSSES)}.")
    data = config.data if config.data.sampler is not None else dataclasses.replace(config.data, sampler=d["sampler"])
    train = config.train
    if train.schedule is None:
        train = dataclasses.replace(train, schedule=d["schedule"])
    if train.snapshots is None:
        train = dataclasses.replace(train, snapshots=d["snapshots"] and train.schedule in ("cyclic_cosine", "warm_restarts"))
    if data.sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {data.sampler!r}.")
    if train.schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {train.schedule!r}.")
    if train.snapshots and train.schedule not in ("cyclic_cosine", "warm_restarts"):
        raise ValueError("snapshots=True needs schedule='cyclic_cosine' (a snapshot is taken at each cycle's end).")
    if train.cycle_epochs < 1 or not 0 < train.lr_min <= train.learning_rate:
        raise ValueError("cycle_epochs must be >= 1 and 0 < lr_min <= learning_rate.")
    if loss_needs_grouped_batches(model.loss, model.loss_params):
        if data.sampler != "grouped" or data.one_caption_per_image:
            raise ValueError(f"Loss {model.loss!r} needs several captions per image in a batch: use "
                             f"sampler='grouped' and all captions (not one_caption_per_image).")
    if data.sampler == "grouped":
        if data.one_caption_per_image:
            raise ValueError("sampler='grouped' needs all captions (one_caption_per_image=False).")
        if data.captions_per_image < 2 or data.batch_size % data.captions_per_image:
            raise ValueError(f"grouped sampler: captions_per_image ({data.captions_per_image}) must be >= 2 and "
                             f"divide batch_size ({data.batch_size}).")
    return dataclasses.replace(config, model=model, data=data, train=train)


def build_model(model, text, vocabulary, feature_dim: int, seed: int = 0, train_captions=None):
    """Builds ``model.name`` from ``MODELS``.

    Args:
      model, text: ``ModelConfig``, ``TextConfig``.
      vocabulary: word vocabulary (training captions only).
      feature_dim: d, the image feature size.
      seed: loss seed.
      train_captions: the training captions (character-level models build their
        alphabet from them).

    Raises:
      ValueError: unknown model name (the message lists the known ones).
    """
    try:
        builder = MODELS[model.name]
    except KeyError:
        raise ValueError(f"Unknown model {model.name!r}; choose one of {sorted(MODELS)}.") from None
    return builder(model, text, vocabulary, feature_dim, seed=seed, train_captions=train_captions)
