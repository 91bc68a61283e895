"""The paper configurations, as data: one ``Preset`` record per configuration.

A record names its builder (``grounded_text.models.registry.MODELS``, the architecture
family), the paper, and the nested ``ExperimentConfig`` values of that configuration
(``{"data": …, "text": …, "model": …, "train": …}``). Every leaf of ``config`` is
explained: in ``sources`` (where the paper gives the value) or in ``unsaid`` (the value
is not taken from the paper — the paper leaves it open, or we deviate — and why ours).
The builders hide no defaults: they read every encoder and loss parameter from
``ModelConfig.encoder`` / ``ModelConfig.loss_params``, which the record fills.

``ExperimentConfig(model=ModelConfig(name="vete_rnn"))`` still works: its ``None`` fields
are "the preset's choice", and ``grounded_text.models.registry.resolve_config`` fills them
from the record (``fill_config``: a value set by the user wins; the record's
``encoder`` / ``loss_params`` are merged under the user's). ``grounded_text.models.registry.preset_config(name,
overrides)`` gives the resolved config of a record directly.

The records are data, one module per paper in ``grounded_text.papers.records`` (the ``Preset``
dataclass and the helpers that build records: ``grounded_text.papers.record``); this module is
their registry (``PRESETS``) and what is read from it.

Section numbers follow the papers as cited in docs/models.md and docs/losses.md.
"""

from __future__ import annotations

import copy

from grounded_text.config.params import TINY_ENCODERS
from grounded_text.config.schema import ExperimentConfig, ModelConfig
from grounded_text.papers.record import Preset, deep_merge
from grounded_text.papers.records import baselines, bordes, kolluru, merkx, vete

# Dict-valued fields whose keys are the builder's parameters (merged key by key).
DICT_FIELDS = ("model.encoder", "model.loss_params")
# Fields every record sets (a test checks it): the choices that differ between papers.
REQUIRED_FIELDS = (
    "data.one_caption_per_image", "data.batch_size", "data.sampler", "text.lowercase", "model.loss",
    "train.epochs", "train.learning_rate", "train.select_on", "train.schedule", "train.snapshots",
)
# Fields that only matter with a setting some records make (the grouped sampler, BOW
# pooling, a cyclic schedule, snapshots, bucketing, word vectors): the value used when a
# record leaves them out. These are inert for the records that do not set them.
OPTIONAL_FIELDS = {
    "data.captions_per_image": 2,
    "data.bucket_by_length": False,
    "model.embedding_dim": None,  # grounded_pretrained: the backbone's width, not N
    "model.pooling": "mean",
    "model.word_vectors": None,
    "train.lr_min": 1e-6,
    "train.cycle_epochs": 1,
    "train.ensemble_size": None,
    "text.sentence_end": "none",
    "train.clip_norm_text": 0.0,
    "train.clip_norm_image": 0.0,
}
# Every field whose ``None`` means "the preset's choice".
PRESET_FIELDS = REQUIRED_FIELDS + tuple(OPTIONAL_FIELDS)

# The records, in the order of docs/models.md's table (the papers' baselines last).
PRESETS: dict[str, Preset] = {p.name: p for p in (
    *vete.RECORDS, bordes.CG_PG, kolluru.TWO_BRANCH_KHARD, merkx.CHAR_GRU_ATTENTION, bordes.GROUNDED_PRETRAINED,
    merkx.CHAR_GRU_ATTENTION_512, *baselines.RECORDS)}
# The papers' baselines (grounded_text.models.paper_baselines), in the comparison's order.
BASELINES = ("pure_text_rnn", "pin_model_a", "vete_bow_word", "seq", "gs_img", "gs_cap", "gs_both")


# ----------------------------------------------------------------------------- API


def get_preset(name: str) -> Preset:
    """The record ``name``.

    Raises:
      ValueError: unknown name (the message lists the known ones).
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"Unknown model {name!r}; choose one of {sorted(PRESETS)}.") from None


def record_config(name: str) -> ExperimentConfig:
    """The record ``name`` as a complete ``ExperimentConfig``: its values, over the
    ``OPTIONAL_FIELDS`` values it leaves out, over the dataclass defaults (the fields no
    record sets). Not validated: ``grounded_text.papers.resolve.resolve_config`` lays a user's
    config over it and checks the combination.

    Raises:
      ValueError: unknown name.
    """
    preset = get_preset(name)
    base = ExperimentConfig(model=ModelConfig(name=preset.name)).to_dict()
    for path, value in OPTIONAL_FIELDS.items():
        section, field = path.split(".")
        base[section][field] = copy.deepcopy(value)
    return ExperimentConfig.from_dict(deep_merge(base, preset.config))


def tiny_encoders() -> dict[str, dict]:
    """Preset name → its builder's tiny encoder sizes (``grounded_text.config.params.TINY_ENCODERS``,
    for N = ``TINY_EMBEDDING_DIM``), for the presets whose builder has any: the
    ``model.encoder`` overrides of tests and smoke runs."""
    return {name: dict(TINY_ENCODERS[p.builder]) for name, p in PRESETS.items() if TINY_ENCODERS.get(p.builder)}


def _fmt(v) -> str:
    return str(v)


def _short(path: str) -> str:
    """``"model.encoder.units"`` → ``"encoder.units"``, ``"train.epochs"`` → ``"epochs"``."""
    section, rest = path.split(".", 1)
    return {"model.embedding_dim": "N"}.get(path, rest if section != "model" or "." in rest else rest)


def records_markdown() -> str:
    """The records as a Markdown table (docs/models.md holds it; ``python -m grounded_text.papers.presets``
    prints it)."""
    rows = ["| preset | builder | paper | data | model | loss | training | not from the paper (ours; see `unsaid`) |",
            "|---|---|---|---|---|---|---|---|"]
    for p in PRESETS.values():
        c = record_config(p.name)
        data = (f"B = {c.data.batch_size}, " + ("one caption/image" if c.data.one_caption_per_image
                                                else "all captions") + f", {c.data.sampler}"
                + (f" ({c.data.captions_per_image}/image)" if c.data.sampler == "grouped" else "")
                + (", length buckets" if c.data.bucket_by_length else "")
                + (", lowercase" if c.text.lowercase else ", case kept"))
        enc = ", ".join(f"{k}={_fmt(v)}" for k, v in c.model.encoder.items())
        model = ((f"N = {c.model.embedding_dim}; " if c.model.embedding_dim is not None else "")
                 + enc + (f"; pooling={c.model.pooling}" if p.builder == "vete_bow" else "")
                 + (f"; word vectors {c.model.word_vectors}" if c.model.word_vectors else ""))
        loss = c.model.loss + (" (" + ", ".join(f"{k}={v}" for k, v in c.model.loss_params.items()) + ")"
                               if c.model.loss_params else "")
        t = c.train
        train = f"{t.epochs} epochs, Adam {t.learning_rate:g}, {t.schedule}"
        if t.schedule != "constant":
            train += f" ({t.lr_min:g} to {t.learning_rate:g}, {t.cycle_epochs}-epoch cycles)"
        if t.snapshots:
            train += ", snapshots" + (f", ensemble of the {t.ensemble_size} best" if t.ensemble_size else "")
        if t.clip_norm_text or t.clip_norm_image:
            train += (f", gradient norm clipped per tower (text {t.clip_norm_text or 'none'}, "
                      f"image {t.clip_norm_image or 'none'})")
        train += f", selection: {t.select_on}"
        ours = ", ".join(_short(k) for k in p.unsaid)
        name = f"`{p.name}`" + (f" (variant of `{p.variant_of}`)" if p.variant_of else "")
        paper = p.paper.split(",")[0].split(" (")[0]
        rows.append(f"| {name} | {p.builder} | {paper} | {data} | {model} | {loss} | {train} | {ours} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(records_markdown())
