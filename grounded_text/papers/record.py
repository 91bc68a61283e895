"""One preset record: the ``Preset`` dataclass and the helpers that build records
(``deep_merge``, ``leaves``, ``variant``). The records themselves are data, one module per paper
in ``grounded_text.papers.records``; ``grounded_text.papers.presets`` is their registry."""

from __future__ import annotations

import copy
import dataclasses


@dataclasses.dataclass(frozen=True)
class Preset:
    """One paper configuration.

    Attributes:
      name: the preset's name (``ModelConfig.name``, ``--model``).
      builder: key of ``grounded_text.models.registry.MODELS`` (the architecture family).
      paper: the paper (and section) the configuration comes from.
      config: nested ``ExperimentConfig`` values: ``{"data": {...}, "text": {...},
        "model": {...}, "train": {...}}``.
      sources: dotted field → where the paper gives the value.
      unsaid: dotted field → why our value (the paper leaves it unsaid, or we deviate).
      variant_of: the preset this one varies (e.g. a CPU-size variant), or None.
      notes: free text.
    """

    name: str
    builder: str
    paper: str
    config: dict
    sources: dict
    unsaid: dict
    variant_of: str | None = None
    notes: str = ""

    def to_dict(self) -> dict:
        return copy.deepcopy(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, d: dict) -> "Preset":
        return cls(**copy.deepcopy(d))


def leaves(d: dict, prefix: str = "") -> dict:
    """Nested dict → ``{"a.b.c": value}``; lists and scalars are leaves, empty dicts have none."""
    out = {}
    for k, v in d.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(leaves(v, path + "."))
        else:
            out[path] = v
    return out


def deep_merge(base: dict, over: dict) -> dict:
    """``over`` merged into a copy of ``base``: dicts key by key, anything else replaced."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def variant(parent: "Preset", name: str, config: dict, unsaid: dict, notes: str) -> "Preset":
    """A self-contained record: the parent's config with ``config`` merged in; the changed
    fields move from the parent's ``sources`` to ``unsaid`` (they are ours now)."""
    changed = set(leaves(config))
    return Preset(
        name=name, builder=parent.builder, paper=parent.paper, config=deep_merge(parent.config, config),
        sources={k: v for k, v in parent.sources.items() if k not in changed},
        unsaid={**{k: v for k, v in parent.unsaid.items() if k not in changed}, **unsaid},
        variant_of=parent.name, notes=notes,
    )
