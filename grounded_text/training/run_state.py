"""A run directory's state file, the paths it names, and the Ctrl-C line.

* **State.** ``run_state.json`` (``read_state``, ``write_state``: written atomically) holds what
  a resumed run needs; its write is the commit point of the resume protocol
  (``grounded_text.training.resume``).
* **Confinement.** Every path read from ``run_state.json`` (``checkpoint``,
  ``best.checkpoint``, ``snapshots.paths``, ``snapshots.image_paths``) must resolve inside the
  run directory (symlinks followed); otherwise ``--resume`` is refused naming the field, so a
  crafted state can neither load nor delete a file elsewhere (``check_state_paths``).
* **Interruption.** ``interrupted_message`` is the one line the CLI prints on Ctrl-C: where
  the last checkpoint is and the command that resumes.

Test-only hooks: ``GROUNDED_TEXT_TEST_TRAIN_KILL_AT="E:S"`` (``KILL_ENV``) makes the process
SIGKILL itself after step S (0-based batch index, as Keras counts) of epoch E (1-based), so the
resume test can kill mid-epoch deterministically; ``GROUNDED_TEXT_TEST_TRAIN_ENOSPC_AT="E"``
(``ENOSPC_ENV``) makes the resume checkpoint of epoch E fail with ``ENOSPC`` (a full disk without
a small file system). The callbacks that read them are in ``grounded_text.training.guards``.
Never set them in use.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np

from grounded_text.training.run_errors import RunDirError
from grounded_text.utils.durable import atomic_write

RUN_STATE = "run_state.json"
RESUME_DIR = "resume"
BEST_COPY = "best.weights.h5"
STATE_VERSION = 1
KILL_ENV = "GROUNDED_TEXT_TEST_TRAIN_KILL_AT"
ENOSPC_ENV = "GROUNDED_TEXT_TEST_TRAIN_ENOSPC_AT"
#: Seconds between the mid-epoch resume checkpoints by default: an interrupted epoch loses at
#: most this much (an n = 1,024 character-model epoch runs about 90 minutes on one CPU core),
#: for one weights-and-optimizer write (about a second) each time.
CHECKPOINT_EVERY = 600.0


def plain(value):
    """JSON round trip (tuples → lists, numpy scalars → floats), for comparisons and writes."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def read_state(out: str | Path) -> dict | None:
    """``run_state.json`` of a run directory, or None when absent."""
    path = Path(out) / RUN_STATE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:  # written atomically: only a foreign file gets here
        raise RunDirError(f"{path} is not a readable run state ({e}); pass --overwrite to start over.") from None


def write_state(out: str | Path, state: dict) -> None:
    """Replaces ``run_state.json`` atomically (``durable.atomic_write``); a failed write (a
    full disk) leaves the previous state and no temporary file."""
    data = json.dumps(state, indent=1, default=_json_default).encode("utf-8")
    atomic_write(Path(out) / RUN_STATE, lambda f: f.write(data))


def describe(state: dict | None) -> str:
    """What a run directory holds, in words, for the refusal messages (``"a finished run (3
    epochs)"``, ``"an unfinished run (1 of 3 epochs done)"``, ...); ``state`` None: a run without
    a state file."""
    if state is None:
        return "a run (made before resumable runs, or not by grounded_text.train)"
    done, total = state.get("epochs_done", 0), state.get("epochs", "?")
    status = state.get("status")
    if status == "complete":
        return f"a finished run ({done} epochs)"
    if status == "diverged":
        return f"a run that diverged after {done} of {total} epochs"
    if status == "failed":
        return f"a run that failed after {done} of {total} epochs"
    step = step_of(state)
    within = f", {step['steps']} steps of epoch {step['epoch']}" if step is not None else ""
    return f"an unfinished run ({done} of {total} epochs done{within})"


def step_of(state: dict) -> dict | None:
    """The state's mid-epoch checkpoint of the epoch after the last committed one, or None."""
    step = state.get("step")
    if isinstance(step, dict) and step.get("checkpoint") and step.get("epoch") == state.get("epochs_done", 0) + 1:
        return step
    return None


# Fields of run_state.json that name files (relative to the run directory).
_PATH_FIELDS = (("checkpoint",), ("step", "checkpoint"), ("best", "checkpoint"), ("snapshots", "paths"),
                ("snapshots", "image_paths"))


def confined_path(out: str | Path, relative, field: str) -> Path:
    """``out / relative`` when it resolves (symlinks followed) inside ``out``.

    Raises:
      RunDirError: ``relative`` is not a relative path string, or leaves ``out`` (absolute,
        ``..``, a symlink out); the message names ``field``.
    """
    out = Path(out)
    if not isinstance(relative, str) or not relative:
        raise RunDirError(f"--resume: {out / RUN_STATE}: {field} must be a path inside the run directory, got "
                          f"{relative!r}; pass --overwrite to start over.")
    path = out / relative
    if Path(relative).is_absolute() or not path.resolve().is_relative_to(out.resolve()):
        raise RunDirError(f"--resume: {out / RUN_STATE}: {field} {relative!r} is outside the run directory "
                          f"{str(out)!r}; refusing to load or delete it (pass --overwrite to start over).")
    return path


def check_state_paths(out: str | Path, state: dict) -> None:
    """Checks every path ``run_state.json`` names (``_PATH_FIELDS``) with ``confined_path``.

    Raises:
      RunDirError: a path leaves the run directory, or a field has the wrong type.
    """
    for keys in _PATH_FIELDS:
        value, field = state, ".".join(keys)
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            continue
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            confined_path(out, item, f"{field}[{i}]" if isinstance(value, list) else field)


def interrupted_message(out: str | Path, argv: list[str] | None) -> str:
    """The one line printed when ``train`` is interrupted: where the last checkpoint is and
    how to resume."""
    state = None
    try:
        state = read_state(out)
    except RunDirError:
        pass
    if state is None or state.get("status") == "complete":  # this run wrote nothing yet (or an old run's state)
        again = shlex.join(["python", "-m", "grounded_text.train", *(argv or [])])
        return f"interrupted before training started: nothing of this run was saved; run `{again}` again."
    args = [a for a in (argv or []) if a not in ("--overwrite", "--resume")]
    command = shlex.join(["python", "-m", "grounded_text.train", *args, "--resume"])
    step = step_of(state)
    if step is not None:
        return (f"interrupted: the last checkpoint is {Path(out) / step['checkpoint']} (epoch {step['epoch']} of "
                f"{state['epochs']}, after {step['steps']} steps); continue with `{command}`.")
    if not state.get("checkpoint"):
        return (f"interrupted before the first epoch ended: no checkpoint in {out} yet; `{command}` starts the "
                "run again from epoch 1.")
    return (f"interrupted: the last checkpoint is {Path(out) / state['checkpoint']} (epoch {state['epochs_done']} "
            f"of {state['epochs']}); continue with `{command}`.")
