"""Training utilities: callbacks and learning-rate schedules shared by every model family."""

from grounded_text.training.callbacks import SnapshotSaver, STSValidation, load_snapshot_towers
from grounded_text.training.schedules import CYCLIC_SCHEDULES, CyclicCosineSchedule, WarmRestartCosineSchedule, cycle_steps

__all__ = ["CYCLIC_SCHEDULES", "CyclicCosineSchedule", "WarmRestartCosineSchedule", "STSValidation", "SnapshotSaver", "cycle_steps", "load_snapshot_towers"]
