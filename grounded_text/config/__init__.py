"""The configuration system: typed dataclass configs, their value rules, the builders'
parameter tables and the command-line flags generated from them. It names no paper (the
presets live in ``grounded_text.papers``) and imports no TensorFlow.

* ``schema``: ``ExperimentConfig`` and its sections, value rules, overrides;
* ``files``: its TOML form (``--config FILE.toml``, a run's ``config.toml``);
* ``params``: each builder's and loss's typed parameters;
* ``flags``: the trainer's flags, ``--config`` and ``--set``;
* ``choices``: closed sets of names that commands offer before anything heavy loads.

Example:
    >>> from grounded_text.config import ExperimentConfig
    >>> cfg = ExperimentConfig()
    >>> cfg.model.name
    'vete_bow'
"""

from grounded_text.config.files import UNSET_KEY, config_toml, read_config_dict, read_config_file
from grounded_text.config.schema import (
    BASELINE_OBJECTIVES,
    LOSSES,
    MIXED_PRECISION,
    POOLINGS,
    RULES,
    SAMPLERS,
    SCHEDULES,
    SECTIONS,
    SELECT_ON,
    STRATEGIES,
    ConfigError,
    DataConfig,
    ExperimentConfig,
    ModelConfig,
    TextConfig,
    TrainConfig,
    apply_override,
    check_config_dict,
    check_field,
    config_fields,
    parse_override,
    rule_value,
)

__all__ = ["BASELINE_OBJECTIVES", "LOSSES", "MIXED_PRECISION", "POOLINGS", "RULES", "SAMPLERS", "SCHEDULES",
           "SECTIONS", "SELECT_ON", "STRATEGIES", "UNSET_KEY", "ConfigError", "DataConfig", "ExperimentConfig",
           "ModelConfig", "TextConfig", "TrainConfig", "apply_override", "check_config_dict", "check_field",
           "config_fields", "config_toml", "parse_override", "read_config_dict", "read_config_file", "rule_value"]
