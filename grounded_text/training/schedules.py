"""Learning-rate schedules for snapshot ensembles.

Two cosine schedules with a period of T optimizer steps (``cycle_steps``):

* ``CyclicCosineSchedule`` — Merkx & Frank (2019, §3.3): each cycle starts at
  lr_min, rises to lr_max at mid-cycle and returns to lr_min at its end. With
  mb the 0-based step and ``step`` = T,

      lr(mb) = lr_min + ½ (lr_max − lr_min) (1 + cos(π (1 + 2 · (mb mod T) / T))).

  On Flickr8k the paper uses lr_max = 1e-3, lr_min = 1e-6 and cycles of 4 epochs,
  with a snapshot at each cycle's end (the lowest learning rate).
* ``WarmRestartCosineSchedule`` — SGDR (Loshchilov & Hutter 2017) as used by
  Huang et al. (2017, "Snapshot Ensembles", eq. 2): each cycle starts at lr_max
  and falls along a half cosine to lr_min, then restarts,

      lr(t) = lr_min + ½ (lr_max − lr_min) (1 + cos(π (t mod T) / T)).

  This is Keras' ``keras.optimizers.schedules.CosineDecayRestarts`` with
  initial_learning_rate = lr_max, first_decay_steps = T, t_mul = m_mul = 1 and
  alpha = lr_min / lr_max; the subclass only keeps this module's arguments
  (lr_min, lr_max, steps_per_cycle), its config and ``cycle``.

Both end each cycle near lr_min, where ``SnapshotSaver`` takes its snapshot.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf


def cycle_steps(cycle_epochs: int, steps_per_epoch: int) -> int:
    """Steps in one cycle of ``cycle_epochs`` epochs of ``steps_per_epoch`` steps.

    Raises:
      ValueError: either argument < 1 or not an integer.
    """
    for name, value in (("cycle_epochs", cycle_epochs), ("steps_per_epoch", steps_per_epoch)):
        if int(value) != value or value < 1:
            raise ValueError(f"cycle_steps: {name} must be an integer >= 1, got {value}.")
    return int(cycle_epochs) * int(steps_per_epoch)


def _check_cycle_arguments(cls: str, lr_min: float, lr_max: float, steps_per_cycle: int) -> None:
    """Raises ValueError unless 0 <= lr_min <= lr_max and steps_per_cycle is an integer >= 1."""
    if not (0 <= lr_min <= lr_max):
        raise ValueError(f"{cls}: need 0 <= lr_min <= lr_max, got {lr_min}, {lr_max}.")
    if int(steps_per_cycle) != steps_per_cycle or steps_per_cycle < 1:
        raise ValueError(f"{cls}: steps_per_cycle must be an integer >= 1, got {steps_per_cycle}.")


class _CosineCycle(keras.optimizers.schedules.LearningRateSchedule):
    """Arguments and checks of ``CyclicCosineSchedule``."""

    def __init__(self, lr_min: float, lr_max: float, steps_per_cycle: int, name: str):
        _check_cycle_arguments(type(self).__name__, lr_min, lr_max, steps_per_cycle)
        self.lr_min = float(lr_min)
        self.lr_max = float(lr_max)
        self.steps_per_cycle = int(steps_per_cycle)
        self.name = name

    def _phase(self, step):
        """(step mod T) / T as float32 in [0, 1)."""
        step = tf.cast(step, tf.int64)
        return tf.cast(step % self.steps_per_cycle, tf.float32) / float(self.steps_per_cycle)

    def cycle(self, step) -> int:
        """0-based cycle index of optimizer step ``step``."""
        return int(step) // self.steps_per_cycle

    def get_config(self):
        return {"lr_min": self.lr_min, "lr_max": self.lr_max, "steps_per_cycle": self.steps_per_cycle,
                "name": self.name}


@keras.saving.register_keras_serializable(package="grounded_text")
class CyclicCosineSchedule(_CosineCycle):
    """Cyclic cosine learning rate of Merkx & Frank (2019, §3.3): min → max → min.

    ``lr(mb) = lr_min + ½ (lr_max − lr_min)(1 + cos(π (1 + 2 (mb mod T) / T)))`` with
    mb the optimizer step (0-based) and T = ``steps_per_cycle`` (``cycle_steps``):
    lr_min at each cycle's start and end, lr_max at its middle (mb mod T = T / 2).

    Args:
      lr_min: learning rate at the start and end of each cycle, >= 0 (paper: 1e-6).
      lr_max: learning rate at mid-cycle, >= lr_min (paper, Flickr8k: 1e-3).
      steps_per_cycle: T >= 1 optimizer steps (paper: 4 epochs).

    Returns (call):
      ``float32`` scalar learning rate.

    Raises:
      ValueError: bad bounds or cycle length.
    """

    def __init__(self, lr_min: float, lr_max: float, steps_per_cycle: int, name: str = "cyclic_cosine"):
        super().__init__(lr_min, lr_max, steps_per_cycle, name)

    def __call__(self, step):
        cosine = 0.5 * (1.0 + tf.cos(math.pi * (1.0 + 2.0 * self._phase(step))))
        return self.lr_min + (self.lr_max - self.lr_min) * cosine


@keras.saving.register_keras_serializable(package="grounded_text")
class WarmRestartCosineSchedule(keras.optimizers.schedules.CosineDecayRestarts):
    """Cosine annealing with warm restarts (SGDR; Huang et al. 2017, eq. 2): max → min, restart.

    ``lr(t) = lr_min + ½ (lr_max − lr_min)(1 + cos(π (t mod T) / T))`` with t the
    optimizer step (0-based) and T = ``steps_per_cycle``: lr_max at each cycle's
    start, falling to lr_min at its end. Keras' ``CosineDecayRestarts`` computes it
    (initial_learning_rate = lr_max, first_decay_steps = T, t_mul = m_mul = 1,
    alpha = lr_min / lr_max); this subclass keeps the (lr_min, lr_max,
    steps_per_cycle) arguments, a config in those terms (checkpoints written before
    the switch still load) and ``cycle``.

    Args:
      lr_min: learning rate at the end of each cycle, >= 0.
      lr_max: learning rate at the start of each cycle, >= lr_min.
      steps_per_cycle: T >= 1 optimizer steps.

    Returns (call):
      ``float32`` scalar learning rate.

    Raises:
      ValueError: bad bounds or cycle length.
    """

    def __init__(self, lr_min: float, lr_max: float, steps_per_cycle: int, name: str = "warm_restarts"):
        _check_cycle_arguments(type(self).__name__, lr_min, lr_max, steps_per_cycle)
        self.lr_min = float(lr_min)
        self.lr_max = float(lr_max)
        self.steps_per_cycle = int(steps_per_cycle)
        super().__init__(initial_learning_rate=self.lr_max, first_decay_steps=self.steps_per_cycle,
                         t_mul=1.0, m_mul=1.0, alpha=self.lr_min / self.lr_max if self.lr_max > 0 else 0.0,
                         name=name)

    def cycle(self, step) -> int:
        """0-based cycle index of optimizer step ``step``."""
        return int(step) // self.steps_per_cycle

    def get_config(self):
        return {"lr_min": self.lr_min, "lr_max": self.lr_max, "steps_per_cycle": self.steps_per_cycle,
                "name": self.name}


# Config name (``TrainConfig.schedule``) → schedule class.
CYCLIC_SCHEDULES = {"cyclic_cosine": CyclicCosineSchedule, "warm_restarts": WarmRestartCosineSchedule}
