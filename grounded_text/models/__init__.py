"""Model builders, selectable by preset name (``python -m grounded_text.train --model NAME``)."""

from grounded_text.models.grounded_model import GroundedModel
from grounded_text.models.registry import MODELS, build_model, resolve_config
from grounded_text.papers.presets import PRESETS

__all__ = ["GroundedModel", "MODELS", "PRESETS", "build_model", "resolve_config"]
