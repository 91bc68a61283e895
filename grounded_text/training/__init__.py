"""Training utilities: callbacks and learning-rate schedules shared by every model family."""

from grounded_text.utils.lazy import lazy_getattr

# Lazy: `training.run_errors` and `training.run_state` serve the train CLI before TensorFlow is imported.
_EXPORTS = {
    "SnapshotSaver": "callbacks", "STSValidation": "callbacks", "load_snapshot_towers": "callbacks",
    "CYCLIC_SCHEDULES": "schedules", "CyclicCosineSchedule": "schedules",
    "WarmRestartCosineSchedule": "schedules", "cycle_steps": "schedules",
}
__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)
