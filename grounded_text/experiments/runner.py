"""The one runner: trains a planned run, or reuses the finished run of the same config.

The reuse rule (``decide``), for a plan's resolved config C and its run folder D:

* D holds no run → ``train`` (a fresh run in D).
* D holds a *finished* run (``metrics.json`` written and ``run_state.json`` marked
  ``complete`` by ``grounded_text.train``; a run from before resumable runs has
  ``metrics.json`` and no state file) whose resolved config (D's ``config.toml``, else
  ``metrics.json``'s ``config``) equals C → ``reuse``: nothing is trained.
* D holds a finished run of another config → refused (``RunConflict``, naming the fields
  that differ): a finished run is never overwritten, and never reused for another plan.
  Remove the folder or choose another output folder.
* D holds an unfinished run (interrupted) of config C with a resumable state → ``resume``;
  an unfinished run of another config, or without a state to resume from → ``overwrite``
  (it holds no result; the trainer replaces its files).

Training is ``grounded_text.training.trainer.train`` in this process, or with ``log`` given, the
trainer's CLI in its own process (``python -m grounded_text.train --config D.toml``) with its
output in ``log``.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

from grounded_text.config.files import config_toml, read_config_file
from grounded_text.config.schema import ConfigError, ExperimentConfig
from grounded_text.reporting.tables import json_default
from grounded_text.training.run_dir import RUN_ENTRIES, config_diff
from grounded_text.training.run_state import RUN_STATE
from grounded_text.training.trainer import train
from grounded_text.utils.children import run_child


class RunConflict(ValueError):
    """A run folder holds a finished run whose config is not the plan's."""


def plain(value):
    """JSON round trip (tuples → lists, NumPy scalars → numbers), so configs compare as stored."""
    return json.loads(json.dumps(value, default=json_default))


def _read_json(path: Path) -> dict | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def read_metrics(run_dir: str | Path) -> dict | None:
    """``metrics.json`` of a run folder, or None (absent or unreadable)."""
    return _read_json(Path(run_dir) / "metrics.json")


def finished(run_dir: str | Path) -> bool:
    """``run_dir`` holds a finished run (module docstring)."""
    run_dir = Path(run_dir)
    if read_metrics(run_dir) is None:
        return False
    if not (run_dir / RUN_STATE).exists():
        return True  # a run from before resumable runs: metrics.json is its last file
    state = _read_json(run_dir / RUN_STATE)
    return state is not None and state.get("status") == "complete"


def run_config(run_dir: str | Path) -> dict | None:
    """The resolved config a run folder was trained with: its ``config.toml`` (the replay
    file), else ``metrics.json``'s ``config``; None when neither is readable."""
    run_dir = Path(run_dir)
    if (run_dir / "config.toml").is_file():
        try:
            return plain(read_config_file(run_dir / "config.toml").to_dict())
        except ConfigError:
            pass
    metrics = read_metrics(run_dir) or {}
    return plain(metrics["config"]) if isinstance(metrics.get("config"), dict) else None


@dataclasses.dataclass(frozen=True)
class Decision:
    """What ``ensure_run`` does with a run folder: ``action`` is ``"train"``, ``"reuse"``,
    ``"resume"`` or ``"overwrite"``; ``reason`` says why."""

    action: str
    reason: str


def decide(config: ExperimentConfig | dict, run_dir: str | Path) -> Decision:
    """The reuse rule (module docstring) for resolved ``config`` and ``run_dir``.

    Raises:
      RunConflict: ``run_dir`` holds a finished run of another config.
    """
    run_dir = Path(run_dir)
    want = plain(config.to_dict() if isinstance(config, ExperimentConfig) else config)
    if not (run_dir.is_dir() and any((run_dir / e).exists() for e in RUN_ENTRIES)):
        return Decision("train", f"{run_dir} holds no run")
    if finished(run_dir):
        diff = config_diff(run_config(run_dir) or {}, want)
        if not diff:
            return Decision("reuse", f"{run_dir} holds a finished run of the same config")
        raise RunConflict(f"{run_dir} holds a finished run of another config ({'; '.join(diff[:8])}"
                          f"{'; ...' if len(diff) > 8 else ''}); it is neither reused nor overwritten: remove "
                          "it or choose another output folder.")
    state = _read_json(run_dir / RUN_STATE) or {}
    if state.get("status") in ("running", "interrupted") and not config_diff(plain(state.get("config") or {}), want):
        return Decision("resume", f"{run_dir} holds an interrupted run of the same config")
    return Decision("overwrite", f"{run_dir} holds an unfinished run ({state.get('status', 'no state')})")


def train_command(data_dir, config_file: Path, out: Path, action: str) -> list:
    """The trainer's command line for one run (its config file holds every field)."""
    cmd = [sys.executable, "-m", "grounded_text.train", "--data-dir", str(data_dir), "--config", str(config_file),
           "--output-dir", str(out), "--verbose", "2"]
    return cmd + {"resume": ["--resume"], "overwrite": ["--overwrite"]}.get(action, [])


@dataclasses.dataclass
class RunResult:
    """``ensure_run``'s answer: the run folder, the decision, ``metrics.json`` (None when a
    separate trainer process failed) and that process's exit status."""

    run_dir: Path
    decision: Decision
    metrics: dict | None
    returncode: int = 0

    @property
    def reused(self) -> bool:
        return self.decision.action == "reuse"


def ensure_run(config: ExperimentConfig, run_dir: str | Path, data_dir, *, evaluate: bool = True,
               verbose: int | str = 2, log: str | Path | None = None, echo=None) -> RunResult:
    """Makes ``run_dir`` hold the finished run of resolved ``config`` (``decide``'s rule).

    Args:
      config: the plan's resolved config.
      run_dir: the run folder.
      data_dir: the data root.
      evaluate, verbose: the trainer's (in-process training).
      log: train in a separate ``python -m grounded_text.train`` process, its output here
        (its config is written beside it as ``<log stem>.toml``); a resumed run appends to it
        after a "--- resumed ... ---" line, a new or overwritten run starts it afresh.
      echo: called with one progress line per decision (e.g. ``print``), or None.

    Returns:
      ``RunResult``.

    Raises:
      RunConflict: see ``decide``; and what ``grounded_text.training.trainer.train`` raises.
    """
    run_dir = Path(run_dir)
    decision = decide(config, run_dir)
    if echo is not None:
        echo(f"{run_dir.name}: {decision.action} ({decision.reason})")
    if decision.action == "reuse":
        return RunResult(run_dir, decision, read_metrics(run_dir))
    if log is None:
        metrics = train(config, data_dir, run_dir, evaluate=evaluate, verbose=verbose,
                        resume=decision.action == "resume", overwrite=decision.action == "overwrite")
        return RunResult(run_dir, decision, metrics)
    log = Path(log)
    config_file = log.with_suffix(".toml")
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text(config_toml(config), encoding="utf-8")
    cmd = train_command(data_dir, config_file, run_dir, decision.action)

    # The child's output (progress, warnings, errors) is kept only here: a resumed run appends to it.
    resuming = decision.action == "resume"
    with open(log, "a" if resuming else "w", encoding="utf-8") as f:  # stopping this command stops the training too
        if resuming:
            f.write(f"--- resumed {time.strftime('%Y-%m-%d %H:%M:%S %Z')}: {decision.reason} ---\n")
            f.flush()
        rc = run_child(cmd, stdout=f, stderr=subprocess.STDOUT)
    return RunResult(run_dir, decision, read_metrics(run_dir) if rc == 0 else None, rc)
