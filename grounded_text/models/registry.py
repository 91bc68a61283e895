"""Builder name → builder, and config resolution from the preset records.

Every builder has the signature
``(model: ModelConfig, text: TextConfig, vocabulary, feature_dim, seed, train_captions=None) → GroundedModel``
and is trained by the one trainer (``grounded_text.train``). ``MODELS`` holds the
architecture families; the presets (``grounded_text.presets.PRESETS``, one record per
paper configuration) name their builder, so ``char_gru_attention_512`` builds with the
``char_gru_attention`` builder. The records, their values and what the papers leave
unsaid: ``grounded_text.presets`` and docs/models.md.

``None`` fields of the config ("the preset's choice", see ``grounded_text.config``) take
the record's value (``resolve_config``); set them to override.
"""

from __future__ import annotations

from grounded_text.config import SAMPLERS, SCHEDULES, SELECT_ON  # noqa: F401 (re-exported)
from grounded_text.models.bordes import build_bordes_cg_pg
from grounded_text.models.char_level import build_char_gru_attention
from grounded_text.models.components import LOSSES, loss_needs_grouped_batches
from grounded_text.models.pretrained import build_grounded_pretrained
from grounded_text.models.two_branch import build_two_branch_khard
from grounded_text.models.vete import build_vete_bow, build_vete_cnn, build_vete_rnn
from grounded_text.config import ExperimentConfig
from grounded_text.presets import check_overrides, deep_merge, fill_config, fill_model_text, get_preset

MODELS = {
    "vete_bow": build_vete_bow,
    "vete_rnn": build_vete_rnn,
    "vete_cnn": build_vete_cnn,
    "bordes_cg_pg": build_bordes_cg_pg,
    "two_branch_khard": build_two_branch_khard,
    "char_gru_attention": build_char_gru_attention,
    "grounded_pretrained": build_grounded_pretrained,
}


def resolve_config(config):
    """Fills the config's ``None`` choices from its preset record (``grounded_text.presets``)
    and checks the combination.

    Returns:
      A new ``ExperimentConfig``; explicit settings are kept (the record's ``encoder`` and,
      for the record's own loss, ``loss_params`` are merged under the user's). Idempotent.

    Raises:
      ValueError: ``epochs`` or ``steps_per_execution`` < 1, ``learning_rate`` <= 0; unknown
        model, loss, sampler, schedule or ``select_on``; an encoder key
        the preset does not take; a loss that needs grouped batches (cluster, grounding)
        with the random sampler or one caption per image; snapshots without the cyclic
        cosine schedule; ``ensemble_size < 1``; for a cyclic schedule ``cycle_epochs < 1`` or
        not ``0 < lr_min <= learning_rate``; ``captions_per_image < 2`` or not dividing
        ``batch_size`` for the grouped sampler.
    """
    config = fill_config(config)
    model, data, train = config.model, config.data, config.train
    if model.loss not in LOSSES:
        raise ValueError(f"Unknown loss {model.loss!r}; choose one of {sorted(LOSSES)}.")
    if data.sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {data.sampler!r}.")
    if train.schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {train.schedule!r}.")
    if train.select_on not in SELECT_ON:
        raise ValueError(f"select_on must be one of {SELECT_ON}, got {train.select_on!r}.")
    if train.snapshots and train.schedule not in ("cyclic_cosine", "warm_restarts"):
        raise ValueError("snapshots=True needs a cyclic schedule, 'cyclic_cosine' or 'warm_restarts' "
                         "(a snapshot is taken at each cycle's end, where both are at lr_min).")
    if train.ensemble_size is not None and train.ensemble_size < 1:
        raise ValueError(f"ensemble_size must be >= 1 (or None: all snapshots), got {train.ensemble_size}.")
    if train.epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {train.epochs}.")
    if train.steps_per_execution < 1:
        raise ValueError(f"steps_per_execution must be >= 1, got {train.steps_per_execution}.")
    if not train.learning_rate > 0:
        raise ValueError(f"learning_rate must be > 0, got {train.learning_rate}.")
    # lr_min and cycle_epochs only mean something to the cyclic schedules: a constant
    # learning rate below the record's lr_min (e.g. 1e-7) is a valid choice.
    if train.schedule in ("cyclic_cosine", "warm_restarts") and (
            train.cycle_epochs < 1 or not 0 < train.lr_min <= train.learning_rate):
        raise ValueError(f"The {train.schedule} schedule needs cycle_epochs >= 1 and 0 < lr_min <= "
                         f"learning_rate; got cycle_epochs={train.cycle_epochs}, lr_min={train.lr_min}, "
                         f"learning_rate={train.learning_rate}.")
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
    return config


def build_model(model, text, vocabulary, feature_dim: int, seed: int = 0, train_captions=None):
    """Builds preset ``model.name`` with its record's builder.

    Unset (``None``) fields of ``model`` and ``text`` take the record's values first, so
    ``build_model(ModelConfig(name="vete_rnn"), TextConfig(), ...)`` builds the paper's
    VETE-RNN.

    Args:
      model, text: ``ModelConfig``, ``TextConfig``.
      vocabulary: word vocabulary (training captions only).
      feature_dim: d, the image feature size.
      seed: loss seed.
      train_captions: the training captions (character-level models build their
        alphabet from them).

    Raises:
      ValueError: unknown preset name (the message lists the known ones); a missing or
        unknown encoder or loss parameter.
    """
    builder = MODELS[get_preset(model.name).builder]
    model, text = fill_model_text(model, text)
    return builder(model, text, vocabulary, feature_dim, seed=seed, train_captions=train_captions)


def preset_config(name: str, overrides: dict | None = None) -> ExperimentConfig:
    """The resolved ``ExperimentConfig`` of record ``name`` with ``overrides`` (nested like
    ``Preset.config``) deep-merged over it.

    Raises:
      ValueError: unknown preset; an override key that is no config field (named);
        ``model.name`` in the overrides (pick another preset instead); and the checks of
        ``resolve_config``.
    """
    preset = get_preset(name)
    overrides = overrides or {}
    check_overrides(overrides, preset.config)
    if "name" in overrides.get("model", {}):
        raise ValueError("preset_config: model.name is the preset's; choose another preset instead.")
    d = deep_merge(preset.config, overrides)
    d.setdefault("model", {})["name"] = name
    return resolve_config(ExperimentConfig.from_dict(d))
