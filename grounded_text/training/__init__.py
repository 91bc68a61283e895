"""Training utilities: callbacks and learning-rate schedules shared by every model family."""

import importlib

# Lazy: `training.run_dir` serves the train CLI before TensorFlow is imported.
_EXPORTS = {
    "SnapshotSaver": "callbacks", "STSValidation": "callbacks", "load_snapshot_towers": "callbacks",
    "CYCLIC_SCHEDULES": "schedules", "CyclicCosineSchedule": "schedules",
    "WarmRestartCosineSchedule": "schedules", "cycle_steps": "schedules",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"grounded_text.training.{_EXPORTS[name]}"), name)
    try:  # a submodule the eager imports used to load as a side effect
        return importlib.import_module(f"grounded_text.training.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"grounded_text.training.{name}":
            raise
    raise AttributeError(f"module 'grounded_text.training' has no attribute {name!r}")
