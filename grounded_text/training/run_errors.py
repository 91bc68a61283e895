"""The errors of a training run and how the train command reports them.

* ``RunDirError``: the output directory cannot be used as asked (it holds a run, there is
  nothing to resume, ...); ``StorageFull`` (one of them): a write failed for want of space or
  permission (``grounded_text.training.storage_errors``).
* ``TrainingDiverged``: the loss became NaN or Inf, the model collapsed, or no epoch has a
  finite validation score; ``learning_rate_advice`` is the hint its messages give.
* **Bad input.** ``usage_errors`` marks the ``ValueError`` / ``FileNotFoundError`` raised by
  bad flags, data or run directories, and ``is_usage_error`` tells the CLI to print them as one
  ``error: ...`` line (exit 2) without changing their type for library callers.
"""

from __future__ import annotations

import contextlib
import math

# Adam's default step size (Kingma & Ba 2015, Algorithm 1): the advice for absurd rates.
SANE_LEARNING_RATE = 1e-3


class RunDirError(ValueError):
    """The output directory cannot be used as asked (holds a run, nothing to resume, ...)."""


class TrainingDiverged(RuntimeError):
    """Training went wrong: the loss became NaN or Inf (``status`` ``"diverged"``), the model
    collapsed with a finite loss, or no epoch has a finite validation score (``"failed"``).
    ``status`` is what ``run_state.json`` records."""

    def __init__(self, message: str, epoch: int, step: int, status: str = "diverged"):
        super().__init__(message)
        self.epoch, self.step, self.status = epoch, step, status


class StorageFull(RunDirError):
    """A write to the run directory failed for lack of space (or on a read-only file system).

    ``hdf5`` is True when the failed write was an HDF5 file: the HDF5 library is then left in a
    state that crashes the interpreter's exit (a segmentation fault), so the CLI ends the
    process with ``os._exit`` after printing (``exit_after_storage_error``)."""

    def __init__(self, message: str, path: str | None = None, hdf5: bool = False):
        super().__init__(message)
        self.path, self.hdf5 = path, hdf5


def learning_rate_advice(learning_rate: float) -> str:
    """``"e.g. --learning-rate X (now Y)"``: a tenth of a sane rate, and never a non-finite or
    absurd one (a rate above 1, NaN or Inf gets Adam's default 0.001)."""
    lr = float(learning_rate)
    if not math.isfinite(lr) or lr <= 0 or lr > 1:
        return f"e.g. --learning-rate {SANE_LEARNING_RATE:g} (now {lr:g})"
    return f"e.g. --learning-rate {lr / 10:g} (now {lr:g})"


# ---------------------------------------------------------------------------- bad input marking

_USAGE_ATTR = "_grounded_text_usage_error"


@contextlib.contextmanager
def usage_errors():
    """Marks ``ValueError`` / ``FileNotFoundError`` raised inside as bad input (the CLI then
    prints ``error: ...`` and exits 2) without changing their type for library callers."""
    try:
        yield
    except (ValueError, FileNotFoundError) as e:
        setattr(e, _USAGE_ATTR, True)
        raise


def is_usage_error(e: BaseException) -> bool:
    return isinstance(e, RunDirError) or bool(getattr(e, _USAGE_ATTR, False))
