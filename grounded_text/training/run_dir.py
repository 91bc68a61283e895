"""Run directories: their state file, protection, confinement, data fingerprint, lock,
storage errors and the Ctrl-C line.

``grounded_text.train`` calls this module in a few places; the state of a run directory is read
and written here. The resume protocol that commits that state through a fit is
``grounded_text.training.resume``; the training callbacks that stop a bad run (divergence,
collapse, disk space) are ``grounded_text.training.guards``, with the errors they raise
(``TrainingDiverged``, ``StorageFull``) defined here.

* **State.** ``run_state.json`` (``read_state``, ``write_state``: written atomically) holds what
  a resumed run needs; its write is the commit point of the resume protocol.
* **Protection.** A directory that already holds a run (``run_state.json``,
  ``metrics.json``, ``checkpoints/``, ``export/``, ...) is refused unless ``resume`` (continue
  it) or ``overwrite`` (delete the old run's files first, after the new run's data and
  model were built, so a typo never costs the old run) is given; the error says which
  applies (``check_run_dir``). Files of two runs are therefore never mixed: ``clear_run_dir``
  removes the old run's files for ``overwrite``, ``remove_stale_temps`` the staged files a
  crash left, and ``check_links`` refuses symbolic links that would carry the run's writes out of
  its directory.
* **Confinement.** Every path read from ``run_state.json`` (``checkpoint``,
  ``best.checkpoint``, ``snapshots.paths``, ``snapshots.image_paths``) must resolve inside the
  run directory (symlinks followed); otherwise ``--resume`` is refused naming the field, so a
  crafted state can neither load nor delete a file elsewhere.
* **Data fingerprint.** The state records what the run trained on (``data_fingerprint``): the
  feature file's SHA-256 (streamed; files above ``FULL_HASH_LIMIT`` bytes: their size and the
  SHA-256 of ``SAMPLE_BLOCKS`` evenly spaced 1 MiB blocks), the train/dev image ids and
  captions in order, and the vocabulary. ``--resume`` on other data is refused naming what
  differs (``check_data``).
* **One run per directory.** ``guard_run`` holds an advisory lock (``fcntl.flock`` on
  ``.run.lock`` in the run directory, with the holder's pid) for the whole run, taken before
  the directory is checked: a second run into the same directory is refused at once.
* **Full disk.** ``guard_run`` turns a write that fails for want of space or permission
  (``ENOSPC``, ``EDQUOT``, ``EROFS``, from Python, HDF5 or TensorFlow; ``storage_error``) into
  ``StorageFull``: one ``no space left on ...`` line; ``run_state.json`` keeps the last
  committed epoch, so ``--resume`` continues once space is freed. (``DiskSpaceCheck`` checks the
  free space before each write.)
* **Selection.** ``select_best_epoch`` picks the best epoch of the monitored validation score;
  an epoch whose score is not finite is never selected.
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

import contextlib
import errno
import fcntl
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import stat
import sys
import time
from pathlib import Path

import numpy as np

from grounded_text.config.params import check_checkpoint_every  # noqa: F401 (the trainer's name for it)
from grounded_text.config.schema import STORED_NONE_MEANT
from grounded_text.utils.durable import atomic_write, fsync_dir, recover_export

RUN_STATE = "run_state.json"
RESUME_DIR = "resume"
BEST_COPY = "best.weights.h5"
STATE_VERSION = 1
# What a run writes at the top of its directory (a directory holding any of these holds a run).
RUN_ENTRIES = ("run_state.json", "metrics.json", "vocab.txt", "checkpoints", "logs", "snapshots", "resume",
               "export", "image_export")
KILL_ENV = "GROUNDED_TEXT_TEST_TRAIN_KILL_AT"
ENOSPC_ENV = "GROUNDED_TEXT_TEST_TRAIN_ENOSPC_AT"
LOCK_FILE = ".run.lock"
# Feature files up to this size are hashed whole (about 0.1 s for Flickr8k's 41 MB); larger ones
# by their size and SAMPLE_BLOCKS blocks of 1 MiB (a permutation of rows changes them too).
FULL_HASH_LIMIT = 1 << 30
SAMPLE_BLOCKS = 64
# Statuses after which the same flags would fail again (the hint asks for --overwrite).
FAILED_STATUSES = ("diverged", "failed")
#: Seconds between the mid-epoch resume checkpoints by default: an interrupted epoch loses at
#: most this much (an n = 1,024 character-model epoch runs about 90 minutes on one CPU core),
#: for one weights-and-optimizer write (about a second) each time.
CHECKPOINT_EVERY = 600.0


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


# ---------------------------------------------------------------------------- state file


def _plain(value):
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


def _describe(state: dict | None) -> str:
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
    step = _step_of(state)
    within = f", {step['steps']} steps of epoch {step['epoch']}" if step is not None else ""
    return f"an unfinished run ({done} of {total} epochs done{within})"


def _step_of(state: dict) -> dict | None:
    """The state's mid-epoch checkpoint of the epoch after the last committed one, or None."""
    step = state.get("step")
    if isinstance(step, dict) and step.get("checkpoint") and step.get("epoch") == state.get("epochs_done", 0) + 1:
        return step
    return None


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
    ``grounded_text.config.schema.STORED_NONE_MEANT`` where ``new`` holds the value it meant."""
    out = []
    for k in sorted(set(old or {}) | set(new or {})):
        a, b = (old or {}).get(k), (new or {}).get(k)
        path = f"{prefix}{k}"
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_diff(a, b, f"{path}.")
        elif a != b and not (k not in (old or {}) and path in FIELDS_ADDED_AT and b == FIELDS_ADDED_AT[path]) \
                and not (a is None and path in STORED_NONE_MEANT and b == STORED_NONE_MEANT[path]):
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
        raise RunDirError(f"{str(out)!r} already holds {_describe(state)}; {hint} (or choose another --output-dir).")
    if state is None:
        raise RunDirError(f"--resume: {str(out)!r} holds {_describe(state)} with no {RUN_STATE}: nothing to resume "
                          "from; pass --overwrite to train it again.")
    if state.get("version") != STATE_VERSION:
        raise RunDirError(f"--resume: {out / RUN_STATE} has format version {state.get('version')}, this code reads "
                          f"{STATE_VERSION}; pass --overwrite to start over.")
    if state.get("status") == "complete":
        raise RunDirError(f"--resume: {str(out)!r} holds {_describe(state)}: nothing left to do; pass --overwrite "
                          "to train it again.")
    check_state_paths(out, state)
    diff = config_diff(_plain(state["config"]), _plain(config))
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


# ---------------------------------------------------------------------------- data fingerprint


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file (streamed), or, above ``FULL_HASH_LIMIT`` bytes, ``"size:<n>:sample:"``
    and the SHA-256 of ``SAMPLE_BLOCKS`` evenly spaced 1 MiB blocks. A folder (a streaming
    store): the digest of its files' relative names and digests, in sorted order."""
    path = Path(path)
    if path.is_dir():
        h = hashlib.sha256()
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(f"{f.relative_to(path).as_posix()}\0{file_digest(f)}\n".encode("utf-8"))
        return "dir:" + h.hexdigest()
    size = path.stat().st_size
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= FULL_HASH_LIMIT:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
            return h.hexdigest()
        for i in range(SAMPLE_BLOCKS):
            f.seek((size - (1 << 20)) * i // (SAMPLE_BLOCKS - 1))
            h.update(f.read(1 << 20))
    return f"size:{size}:sample:{h.hexdigest()}"


def _strings_digest(values) -> str:
    h = hashlib.sha256()
    for v in values:
        h.update(str(v).encode("utf-8") + b"\0")
    return h.hexdigest()


def data_fingerprint(feature_path, train_pairs, dev_pairs, vocabulary, validation=()) -> dict:
    """What a run trains on, for ``check_data``.

    Args:
      feature_path: the feature file (or store folder); None when the store has no path.
      train_pairs, dev_pairs: ``CaptionPairs`` used (slices applied).
      vocabulary: the word vocabulary (list of str).
      validation: the files or folders the run validates on each epoch (the STS16 folder, the
        SICK validation split...; ``trainer.validation_files``).

    Returns:
      ``{"feature_file": digest or None, "split_ids": sha256, "vocabulary": sha256,
      "validation": sha256}``; ``split_ids`` covers the train and dev image ids and captions,
      in order; ``validation`` every validation file's name (within its folder) and content.
    """
    split = hashlib.sha256()
    for pairs in (train_pairs, dev_pairs):
        split.update(_strings_digest(pairs.image_ids.tolist()).encode())
        split.update(_strings_digest(pairs.captions.tolist()).encode())
    features = None
    if feature_path is not None and Path(feature_path).exists():
        features = file_digest(feature_path)
    checked = _strings_digest(f"{Path(p).name}\0{file_digest(p)}" for p in validation)
    return {"feature_file": features, "split_ids": split.hexdigest(), "vocabulary": _strings_digest(vocabulary),
            "validation": checked}


_FINGERPRINT_NAMES = {"feature_file": "feature file", "split_ids": "split ids (train/dev image ids and captions)",
                      "vocabulary": "vocabulary",
                      "validation": "validation data (the STS or SICK sets scored each epoch, gold scores included)"}


def check_data(resume_state: dict | None, setup, validation=()) -> dict:
    """The data fingerprint of ``setup`` (a ``TrainingSetup``: ``flickr.store.path``,
    ``train_pairs``, ``dev_pairs``, ``vocabulary``) and of the ``validation`` files, checked
    against the interrupted run's.

    Call it before anything is written to the run directory.

    Returns:
      the fingerprint (give it to ``RunTracker(data_fingerprint=...)``).

    Raises:
      RunDirError: ``resume_state`` records another fingerprint; the message names what
        differs (feature file / split ids / vocabulary / validation data). A state written
        before a part was fingerprinted is not checked on that part.
    """
    store = getattr(setup.flickr, "store", None)
    fingerprint = data_fingerprint(getattr(store, "path", None), setup.train_pairs, setup.dev_pairs,
                                   setup.vocabulary, validation)
    old = (resume_state or {}).get("data")
    if old:  # states written before fingerprints have none
        differ = [_FINGERPRINT_NAMES[k] for k in _FINGERPRINT_NAMES if k in old and old[k] != fingerprint[k]]
        if differ:
            raise RunDirError(f"--resume: the data differ from the interrupted run's ({', '.join(differ)}); pass "
                              "the same --data-dir and data flags as that run, or --overwrite to start over.")
    return fingerprint


# ---------------------------------------------------------------------------- lock, failures, full disk

_STORAGE_ERRNOS = {errno.ENOSPC: "no space left on the device of", errno.EDQUOT: "disk quota exceeded on the device of",
                   errno.EROFS: "read-only file system for the device of",
                   errno.EFBIG: "file-size limit (ulimit -f) exceeded writing in",
                   errno.EACCES: "permission denied writing in", errno.EPERM: "operation not permitted writing in"}
# HDF5 and TensorFlow report the errno only in their message.
_STORAGE_TEXT = (("No space left on device", errno.ENOSPC), ("errno = 28", errno.ENOSPC),
                 ("Disk quota exceeded", errno.EDQUOT), ("errno = 122", errno.EDQUOT),
                 ("Read-only file system", errno.EROFS), ("errno = 30", errno.EROFS),
                 ("File too large", errno.EFBIG), ("errno = 27", errno.EFBIG),
                 ("Permission denied", errno.EACCES), ("errno = 13", errno.EACCES),
                 ("Operation not permitted", errno.EPERM))
# Permission errors are a storage failure of the run only where they name a path in the run
# directory: one on the data, a cache or elsewhere keeps its own message.
_PERMISSION_ERRNOS = (errno.EACCES, errno.EPERM)
_REMEDIES = {errno.EROFS: "make it writable or choose another --output-dir",
             errno.EACCES: "make the run directory writable again",
             errno.EPERM: "make the run directory writable again",
             errno.EFBIG: "raise the file-size limit (ulimit -f) or choose another --output-dir"}


def storage_error(e: BaseException, out: str | Path | None = None) -> tuple[int, str | None, bool] | None:
    """``(errno, path, hdf5)`` when ``e`` (or an exception it was raised from or during, unless
    ``raise ... from None`` hid it) is a write that failed for lack of space, over the
    file-size limit (``ulimit -f``) or on a read-only file system, else None. Finds Python's
    ``OSError``, h5py's ``OSError``/``RuntimeError`` (errno in the message) and TensorFlow's
    errors (``No space left on device`` in the message).

    Args:
      e: the exception.
      out: the run directory; given, a permission error (``EACCES``, ``EPERM``) on a path
        inside it counts too (a run directory made unwritable while the run writes).
    """
    inside = None if out is None else Path(out)
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = str(e)
        code = getattr(e, "errno", None) if isinstance(e, OSError) else None
        if code not in _STORAGE_ERRNOS:
            code = next((c for needle, c in _STORAGE_TEXT if needle in text), None)
        if code is not None:
            match = re.search(r"\b(?:file)?name = '([^']*)'", text)
            path = match.group(1) if match else getattr(e, "filename", None)
            if code in _PERMISSION_ERRNOS and not _names_inside(path, text, inside):
                code = None
        if code is not None:
            return code, None if path is None else str(path), bool(match) or "h5py" in type(e).__module__
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return None


def _names_inside(path, text: str, out: Path | None) -> bool:
    """Whether a permission error names a path inside ``out`` (its path, else its message,
    which may give the folder as it was passed, absolute or resolved)."""
    if out is None:
        return False
    if path is not None:
        return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(out))
    return any(str(name) in text for name in (out, os.path.abspath(out), out.resolve()))


def storage_message(out: str | Path, code: int, path: str | None) -> str:
    """The one line for a full disk, a quota, a file-size limit, a read-only file system or a run
    directory made unwritable (``error: `` is added by the CLI)."""
    state = None
    with contextlib.suppress(RunDirError, OSError):
        state = read_state(out)
    where = f" ({path})" if path else ""
    remedy = _REMEDIES.get(code, "free space")
    if state is not None and state.get("status") not in (None, "complete"):
        saved = (f"{out / RUN_STATE} keeps epoch {state.get('epochs_done', 0)} of {state.get('epochs', '?')}; "
                 f"{remedy}, then continue with --resume")
    else:
        saved = f"nothing of this run was saved; {remedy} and run it again"
    return f"{_STORAGE_ERRNOS[code]} {str(out)!r}{where}: {saved}."


def exit_after_storage_error(e: BaseException, status: int) -> None:
    """Ends the process with ``status`` now (``os._exit``, after flushing stdout/stderr) when
    ``e`` is a ``StorageFull`` from a failed HDF5 write: the HDF5 library would otherwise crash
    the interpreter's exit (signal 11, exit status 139). Returns otherwise."""
    if isinstance(e, StorageFull) and e.hdf5:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _h5py_storage_echo(exc, tb, out: Path, where=None) -> bool:
    """Whether ``exc`` is a storage failure (``storage_error``) raised in h5py's code (its
    traceback or ``where``, the object an unraisable exception was ignored in, names h5py)."""
    if exc is None or storage_error(exc, out) is None:
        return False
    if "h5py" in repr(where):
        return True
    while tb is not None:
        if "h5py" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def _open_lock(path: Path) -> int:
    """Opens (creates) the lock file without following a link: a symlink planted at its name
    is refused (``O_NOFOLLOW``), and so is anything but a regular file with one link (a hard
    link to a file elsewhere), before a byte is written.

    Raises:
      RunDirError: the name holds a symlink, a hard link or something not a regular file.
    """
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    refused = (f"{str(path)!r} is not a plain lock file (a symlink, a hard link or not a regular file); "
               "remove it and run again.")
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP or path.is_symlink():
            raise RunDirError(refused) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise RunDirError(refused)
    return fd


def _lock(out: Path) -> int:
    """Takes the run directory's lock; returns its file descriptor.

    Raises:
      RunDirError: another run holds it, or its name holds a link (``_open_lock``).
    """
    path = out / LOCK_FILE
    while True:
        fd = _open_lock(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise RunDirError(f"{str(out)!r} is in use by another run (pid {holder}); wait for it to end or choose "
                              "another --output-dir.") from None
        try:  # the previous holder may have removed the file between our open and our lock
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode("ascii"))
            return fd
        os.close(fd)


def _mark_failed(out: Path, e: TrainingDiverged) -> None:
    """Records a failure in a state that still says ``running``/``diverged`` (never
    ``complete``), so the refusal that follows does not advise ``--resume``."""
    state = read_state(out)
    if state is not None and state.get("status") not in ("complete", "interrupted"):
        state["status"] = e.status
        state["error"] = str(e)
        state["updated"] = time.time()
        write_state(out, state)


@contextlib.contextmanager
def guard_run(out: str | Path, *, enabled: bool = True):
    """Around a whole run into ``out``: one run per directory, failures recorded, full disks
    reported.

    * Takes an advisory lock (``fcntl.flock`` on ``out/.run.lock``, which holds the pid; the
      folder is created for it) before anything else, held until the run ends, then removed
      (with ``out`` when the run created it and left it empty).
    * ``TrainingDiverged``: the state's status becomes the error's (``diverged``/``failed``)
      with the message, so it never stays ``running``.
    * A write that fails for lack of space, over the file-size limit, on a read-only file
      system or in the run directory made unwritable (``storage_error``) becomes
      ``StorageFull`` (a ``RunDirError``: the CLI's one ``error:`` line, exit 2); the state
      keeps the last committed epoch. The echoes of such a failure from h5py's destructors
      (printed by Python with tracebacks) are dropped while the run is guarded, and after a
      storage failure for the rest of the process.

    Args:
      out: the run directory.
      enabled: False for the non-chief workers of a multi-worker run (they write elsewhere).

    Raises:
      RunDirError: another run holds the lock (the message names its pid); ``out`` or its lock
        file cannot be created (permissions).
      StorageFull: see above.
    """
    out = Path(out)
    if not enabled or (out.exists() and not out.is_dir()):  # check_run_dir reports a file
        yield
        return
    created = []
    for parent in (out, *out.parents):
        if parent.exists():
            break
        created.append(parent)
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = _lock(out)
    except OSError as e:
        found = storage_error(e)
        if found is not None:
            raise StorageFull(storage_message(out, found[0], found[1]), found[1]) from None
        raise RunDirError(f"--output-dir {str(out)!r}: cannot create it or its lock file ({e.strerror or e}).") \
            from None
    # A failed HDF5 write fails again in h5py's destructors, which print it with a traceback
    # (sys.excepthook, then "Exception ignored in ..." through sys.unraisablehook); the one
    # storage line says it all, so those echoes are dropped (any other error is printed).
    previous_hook, previous_excepthook = sys.unraisablehook, sys.excepthook

    def quiet_unraisable(unraisable) -> None:
        if not _h5py_storage_echo(unraisable.exc_value, unraisable.exc_traceback, out, unraisable.object):
            previous_hook(unraisable)

    def quiet_excepthook(kind, value, tb) -> None:
        if not _h5py_storage_echo(value, tb, out):
            previous_excepthook(kind, value, tb)

    sys.unraisablehook, sys.excepthook = quiet_unraisable, quiet_excepthook
    storage_failed = False
    try:
        yield
    except TrainingDiverged as e:
        with contextlib.suppress(OSError, RunDirError):
            _mark_failed(out, e)
        raise
    except Exception as e:
        found = storage_error(e, out)
        storage_failed = found is not None
        if found is None or isinstance(e, StorageFull):
            raise
        code, path, hdf5 = found
        raise StorageFull(storage_message(out, code, path), path, hdf5) from e
    finally:
        if not storage_failed:  # after one, h5py's objects may be freed later still: the filters stay
            if sys.unraisablehook is quiet_unraisable:
                sys.unraisablehook = previous_hook
            if sys.excepthook is quiet_excepthook:
                sys.excepthook = previous_excepthook
        with contextlib.suppress(OSError):
            (out / LOCK_FILE).unlink()  # while still locked: a waiting opener sees another inode
        os.close(fd)
        for folder in created:  # a run that failed before writing anything leaves no folder
            with contextlib.suppress(OSError):
                folder.rmdir()


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


# ---------------------------------------------------------------------------- selection


def select_best_epoch(scores, mode: str) -> int:
    """1-based best epoch of per-epoch ``scores`` (``"max"`` or ``"min"``) among the finite
    ones: an epoch scored NaN or ±Inf is never selected.

    Raises:
      TrainingDiverged: no epoch has a finite score.
    """
    scores = np.asarray(scores, dtype=np.float64)
    finite = np.isfinite(scores)
    if not finite.any():
        raise TrainingDiverged(f"no epoch has a finite validation score ({scores.tolist()}): nothing to select. "
                               "Training probably diverged; try a lower --learning-rate.", len(scores), 0,
                               status="failed")
    masked = np.where(finite, scores, -np.inf if mode == "max" else np.inf)
    return int(np.argmax(masked) if mode == "max" else np.argmin(masked)) + 1


# ---------------------------------------------------------------------------- Ctrl-C


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
    step = _step_of(state)
    if step is not None:
        return (f"interrupted: the last checkpoint is {Path(out) / step['checkpoint']} (epoch {step['epoch']} of "
                f"{state['epochs']}, after {step['steps']} steps); continue with `{command}`.")
    if not state.get("checkpoint"):
        return (f"interrupted before the first epoch ended: no checkpoint in {out} yet; `{command}` starts the "
                "run again from epoch 1.")
    return (f"interrupted: the last checkpoint is {Path(out) / state['checkpoint']} (epoch {state['epochs_done']} "
            f"of {state['epochs']}); continue with `{command}`.")
