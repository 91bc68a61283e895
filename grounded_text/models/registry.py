"""Builder name → builder.

Every builder has the signature
``(model: ModelConfig, text: TextConfig, vocabulary, feature_dim, seed, train_captions=None) → GroundedModel``
and is trained by the one trainer (``grounded_text.training.trainer``). ``MODELS`` holds the
architecture families; the presets (``grounded_text.papers.presets.PRESETS``, one record per
paper configuration) name their builder, so ``char_gru_attention_512`` builds with the
``char_gru_attention`` builder. The records, their values and what the papers leave
unsaid: ``grounded_text.papers.presets`` and docs/models.md.

``None`` fields of the config ("the preset's choice", see ``grounded_text.config.schema``) take
the record's value in ``grounded_text.papers.resolve`` (``resolve_config``, ``preset_config``,
re-exported here); set them to override. The builders read the resolved config as it is.
"""

from __future__ import annotations

from grounded_text.config.schema import SAMPLERS, SCHEDULES, SELECT_ON  # noqa: F401 (re-exported)
from grounded_text.models.backbone import build_grounded_pretrained
from grounded_text.models.bordes import build_bordes_cg_pg
from grounded_text.models.char_level import build_char_gru_attention
from grounded_text.models.paper_baselines import (
    build_ground_sent,
    build_pin_model_a,
    build_pure_text_rnn,
    build_seq,
    build_vete_bow_word,
)
from grounded_text.models.two_branch import build_two_branch_khard
from grounded_text.models.vete import build_vete_bow, build_vete_cnn, build_vete_rnn
from grounded_text.papers.presets import get_preset
from grounded_text.papers.resolve import fill_model_text, preset_config, resolve_config  # noqa: F401 (re-exported)

MODELS = {
    "vete_bow": build_vete_bow,
    "vete_rnn": build_vete_rnn,
    "vete_cnn": build_vete_cnn,
    "bordes_cg_pg": build_bordes_cg_pg,
    "two_branch_khard": build_two_branch_khard,
    "char_gru_attention": build_char_gru_attention,
    "grounded_pretrained": build_grounded_pretrained,
    # The papers' baselines (grounded_text.models.paper_baselines).
    "pure_text_rnn": build_pure_text_rnn,
    "pin_model_a": build_pin_model_a,
    "vete_bow_word": build_vete_bow_word,
    "seq": build_seq,
    "ground_sent": build_ground_sent,
}


def build_model(model, text, vocabulary, feature_dim: int, seed: int = 0, train_captions=None):
    """Builds preset ``model.name`` with its record's builder.

    The sections of a resolved config (``grounded_text.papers.resolve.resolve_config``) go to the
    builder as they are; otherwise unset (``None``) fields of ``model`` and ``text`` take the
    record's values first (``grounded_text.papers.resolve.fill_model_text``), so
    ``build_model(ModelConfig(name="vete_rnn"), TextConfig(), ...)`` builds the paper's
    VETE-RNN.

    Args:
      model, text: ``ModelConfig``, ``TextConfig``.
      vocabulary: word vocabulary (training captions only).
      feature_dim: d, the image feature size.
      seed: loss seed.
      train_captions: the training captions (character-level models build their
        alphabet from them).

    Returns:
      A ``GroundedModel``.

    Raises:
      ValueError: unknown preset name (the message lists the known ones); a missing or
        unknown encoder or loss parameter.

    Example:
      >>> import tensorflow as tf
      >>> from grounded_text.config import ModelConfig, TextConfig
      >>> from grounded_text.layers import build_vocabulary
      >>> vocabulary = build_vocabulary(["a dog runs", "a cat sleeps"])
      >>> gm = build_model(ModelConfig(name="vete_bow", embedding_dim=8), TextConfig(), vocabulary, feature_dim=4)
      >>> tuple(gm.text_tower(tf.constant(["a dog", "a zebra"])).shape)  # string[B] → float32[B, N]
      (2, 8)
      >>> tuple(gm.image_tower(tf.zeros([3, 4])).shape)  # float[B, d] → float32[B, N]
      (3, 8)
    """
    builder = MODELS[get_preset(model.name).builder]
    model, text = fill_model_text(model, text)
    return builder(model, text, vocabulary, feature_dim, seed=seed, train_captions=train_captions)
