"""Run directories: which a run may use, and what ``--overwrite`` clears.

``grounded_text.train`` calls this module in a few places. The rest of a run directory's
handling lives beside it: its state file, the paths it names and the Ctrl-C line
(``grounded_text.training.run_state``), the data fingerprint (``...fingerprint``), the lock
that keeps one run per directory (``...run_lock``), the failed writes of a full disk
(``...storage_errors``) and the errors (``...run_errors``). The resume protocol that commits the
state through a fit is ``grounded_text.training.resume``; the training callbacks that stop a bad
run (divergence, collapse, disk space) are ``grounded_text.training.guards``.

* **Protection.** A directory that already holds a run (``run_state.json``,
  ``metrics.json``, ``checkpoints/``, ``export/``, ...) is refused unless ``resume`` (continue
  it) or ``overwrite`` (delete the old run's files first, after the new run's data and
  model were built, so a typo never costs the old run) is given; the error says which
  applies (``check_run_dir``). Files of two runs are therefore never mixed: ``clear_run_dir``
  removes the old run's files for ``overwrite``, ``remove_stale_temps`` the staged files a
  crash left, and ``check_links`` refuses symbolic links that would carry the run's writes out of
  its directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from pathlib import Path

from grounded_text.config.files import STORED_NONE_MEANT
from grounded_text.training.run_errors import RunDirError
from grounded_text.training.run_state import (
    RESUME_DIR,
    RUN_STATE,
    STATE_VERSION,
    check_state_paths,
    describe,
    plain,
    read_state,
)
from grounded_text.utils.durable import fsync_dir, recover_export

# What a run writes at the top of its directory (a directory holding any of these holds a run).
RUN_ENTRIES = ("run_state.json", "metrics.json", "vocab.txt", "checkpoints", "logs", "snapshots", "resume",
               "export", "image_export")
# Statuses after which the same flags would fail again (the hint asks for --overwrite).
FAILED_STATUSES = ("diverged", "failed")


def holds_run(out: Path) -> bool:
    return out.is_dir() and any((out / name).exists() for name in RUN_ENTRIES)


# Config fields added after runs were made, with the value that every earlier run had: a run
# whose stored config lacks one of them ran with that value, so it is still the same config
# (an interrupted run resumes, a finished one is reused).
FIELDS_ADDED_AT = {"model.encoder.weight_init": "keras", "train.clip_norm_text": 0.0, "train.clip_norm_image": 0.0,
                   "model.encoder.char_ids": "vocabulary"}


def config_diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    """``["section.field: old → new", ...]`` of two config dicts (nested dicts compared key by
    key); a field of ``FIELDS_ADDED_AT`` that ``old`` lacks and ``new`` holds at its value there
    is no difference, nor is a ``None`` in ``old`` of a field of
    ``grounded_text.config.files.STORED_NONE_MEANT`` where ``new`` holds the value it meant."""
    out = []
    for k in sorted(set(old or {}) | set(new or {})):
        a, b = (old or {}).get(k), (new or {}).get(k)
        path = f"{prefix}{k}"
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_diff(a, b, f"{path}.")
        elif (a != b and not (k not in (old or {}) and path in FIELDS_ADDED_AT and b == FIELDS_ADDED_AT[path])
              and not (a is None and path in STORED_NONE_MEANT and b == STORED_NONE_MEANT[path])):
            out.append(f"{path}: {a!r} → {b!r}")
    return out


def check_run_dir(out: str | Path, config: dict, *, resume: bool, overwrite: bool) -> dict | None:
    """Decides what to do with ``out`` before anything is built; changes nothing on disk
    (except finishing an export swap a crash cut short and, on ``resume``, removing the staged
    files of writes an earlier process left unfinished: ``remove_stale_temps``).

    Args:
      out: the run directory.
      config: the resolved config (``ExperimentConfig.to_dict()``).
      resume: continue the run in ``out``.
      overwrite: replace the run in ``out`` (``clear_run_dir``, called later).

    Returns:
      The state to resume from (``resume``), else None.

    Raises:
      RunDirError: both flags; ``out`` holds a run and neither flag is given (the message
        says which flag applies); ``resume`` with nothing to resume, a finished run, or a
        different config (the differing fields are listed); without ``overwrite``, a symlink
        that would carry the run's writes out of ``out`` (``check_links``).
    """
    out = Path(out)
    if resume and overwrite:
        raise RunDirError("--resume and --overwrite exclude each other: continue the run, or replace it.")
    if out.exists() and not out.is_dir():
        raise RunDirError(f"--output-dir {str(out)!r} exists and is not a folder.")
    if out.is_dir():
        for old in out.glob(".*.old"):  # an export swap cut short by a crash
            recover_export(out / old.name[1:-len(".old")])
    if out.is_dir() and not overwrite:  # --overwrite removes such links unfollowed (clear_run_dir)
        check_links(out, "--resume" if resume else "--output-dir")
    state = read_state(out) if out.is_dir() else None
    if not holds_run(out):
        if resume:
            raise RunDirError(f"--resume: {str(out)!r} holds no run to resume.")
        return None
    if overwrite:
        return None
    if not resume:
        status = None if state is None else state.get("status")
        hint = "pass --resume to continue it or --overwrite to replace it"
        if state is None or status == "complete":
            hint = "pass --overwrite to replace it"
        elif status in FAILED_STATUSES:  # resuming with the same flags would fail again
            hint = "pass --overwrite to replace it (e.g. with a lower --learning-rate)"
        raise RunDirError(f"{str(out)!r} already holds {describe(state)}; {hint} (or choose another --output-dir).")
    if state is None:
        raise RunDirError(f"--resume: {str(out)!r} holds {describe(state)} with no {RUN_STATE}: nothing to resume "
                          "from; pass --overwrite to train it again.")
    if state.get("version") != STATE_VERSION:
        raise RunDirError(f"--resume: {out / RUN_STATE} has format version {state.get('version')}, this code reads "
                          f"{STATE_VERSION}; pass --overwrite to start over.")
    if state.get("status") == "complete":
        raise RunDirError(f"--resume: {str(out)!r} holds {describe(state)}: nothing left to do; pass --overwrite "
                          "to train it again.")
    check_state_paths(out, state)
    diff = config_diff(plain(state["config"]), plain(config))
    if diff:
        raise RunDirError(f"--resume: the config differs from the interrupted run's ({'; '.join(diff)}); pass the "
                          f"same flags as that run (its config is in {out / RUN_STATE}).")
    remove_stale_temps(out)
    return state


# The folders a run writes files into in place (not staged and renamed): a symlink in them
# would carry the run's writes elsewhere.
_WRITTEN_IN_PLACE = ("checkpoints", "logs", "snapshots", RESUME_DIR)


def check_links(out: str | Path, flag: str = "--resume") -> None:
    """Refuses symlinks that would carry a run's writes out of its directory: one at the name
    of a run entry (``RUN_ENTRIES``, ``config.toml``) or anywhere under the folders written in
    place (``checkpoints/``, ``logs/``, ``snapshots/``, ``resume/``) whose target (dangling or
    not) lies outside ``out``. Links are never followed while looking.

    Raises:
      RunDirError: such a link; the message names it and its target.
    """
    out = Path(out)
    root = out.resolve()

    def refuse_if_out(path: Path) -> None:
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            raise RunDirError(f"{flag}: {str(path)!r} is a symbolic link to {os.readlink(path)!r}, outside the run "
                              f"directory {str(out)!r}; refusing to write through it (remove the link, or pass "
                              "--overwrite to start over).")

    for name in (*RUN_ENTRIES, "config.toml"):
        refuse_if_out(out / name)
    for name in _WRITTEN_IN_PLACE:
        folder = out / name
        if folder.is_symlink() or not folder.is_dir():
            continue
        for parent, dirs, files in os.walk(folder):  # links to folders are listed in dirs, not entered
            for entry in (*dirs, *files):
                refuse_if_out(Path(parent) / entry)


# ``durable``'s staged files (``.<name>.tmp-<16 hex>[suffix]``).
_STAGED_FILE = re.compile(r"^\..+\.tmp-[0-9a-f]{16}(?:\..*)?$")


def remove_stale_temps(out: str | Path) -> None:
    """Removes the staged files (``.run_state.json.tmp-*``, ``resume/.<name>.tmp-*``) of
    writes an earlier process of the run did not finish (killed, or its folder made unwritable
    before it could clean up). Call it holding the run's lock: no other writer is then at work.
    A link at such a name is removed, never followed."""
    out = Path(out)
    for folder in (out, out / RESUME_DIR, out / "checkpoints"):
        if folder.is_symlink() or not folder.is_dir():
            continue
        for path in folder.iterdir():
            if _STAGED_FILE.match(path.name) and (path.is_symlink() or path.is_file()):
                with contextlib.suppress(OSError):
                    path.unlink()


def _recorded_exports(out: Path) -> set[str]:
    """The ``export_<space>`` folders the previous run recorded: ``run_state.json``'s
    ``exports`` (written before they are) and ``metrics.json``'s ``spaces``."""
    names: set[str] = set()
    with contextlib.suppress(RunDirError, OSError, AttributeError, TypeError):
        names.update(str(n) for n in (read_state(out) or {}).get("exports", []))
    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
        metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
        names.update(f"export_{space}" for space in metrics.get("spaces", {}))
    return {n for n in names if n.startswith("export") and "/" not in n and n not in (".", "..")}


# Staged or swapped-out siblings of what a run writes (``durable``'s ``.<name>.tmp-<hex>[suffix]``
# and ``staging_dir``'s ``.<name>.tmp-<pid>``; ``install_dir``'s ``.<name>.old``).
_SIBLING = re.compile(r"^\.(?P<name>.+?)\.(?:tmp-[0-9a-f]+(?:\..*)?|old)$")


def clear_run_dir(out: str | Path, spaces=()) -> None:
    """Deletes a previous run's files from ``out`` (``--overwrite``); other files stay.

    Deleted: the entries of ``RUN_ENTRIES`` and ``config.toml``; the ``export_<space>``
    folders the previous run recorded (``_recorded_exports``) or the new run writes
    (``spaces``: its space names); their staging and swap leftovers (``.<name>.tmp-*``,
    ``.<name>.old``). A user's own ``export_plan.md`` or ``export_backup/`` stays.
    """
    out = Path(out)
    if not out.is_dir():
        return
    ours = set(RUN_ENTRIES) | {"config.toml"} | _recorded_exports(out) | {f"export_{name}" for name in spaces}
    names = {name for name in RUN_ENTRIES} | {name for name in ours - {"config.toml"} if (out / name).is_dir()}
    for p in out.iterdir():
        m = _SIBLING.match(p.name)
        if m and m.group("name") in ours:
            names.add(p.name)
    for name in sorted(names):
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    fsync_dir(out)
