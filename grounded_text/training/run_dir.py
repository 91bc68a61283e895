"""Run directories that survive interruptions: protection, resume, divergence, Ctrl-C.

``grounded_text.train`` calls this module in a few places; everything about the state of a
run directory lives here.

* **Protection.** A directory that already holds a run (``run_state.json``,
  ``metrics.json``, ``checkpoints/``, ``export/``, ...) is refused unless ``resume`` (continue
  it) or ``overwrite`` (delete the old run's files first, after the new run's data and
  model were built, so a typo never costs the old run) is given; the error says which
  applies. Files of two runs are therefore never mixed.
* **Resume.** At every epoch end (after the other callbacks, so their results are in the
  logs) ``ResumeCheckpoint`` saves the training model's weights *with the optimizer state*
  (Adam moments and the step counter, hence the learning-rate schedule) and the random
  states of its layers (``keras.random.SeedGenerator``: loss permutations, dropout) to
  ``resume/epoch-NNNN.weights.h5``, copies ``checkpoints/best.weights.h5`` to
  ``resume/best-NNNN.best.weights.h5`` when the epoch is the new best (a new name: the
  committed state's copy stays whole until the next commit), then writes ``run_state.json``
  atomically: the config, the epochs done, the per-epoch history (what ``metrics.json``
  reports), the STS / dev-retrieval callbacks' histories, the snapshots (paths, epochs,
  scores) and the best value and epoch of the selection. That write is the commit point: a
  crash at any moment leaves a state that names files which exist and are complete. A
  resumed run loads the weights and optimizer, restores the callbacks, the best checkpoint
  and ``ModelCheckpoint.best``, and starts ``fit`` at the next epoch; the training data's
  order is a pure function of ``(seed, epoch)`` (``make_dataset(epoch=...)``, set by
  ``DataEpoch``), so a resumed run ends with the same history, best epoch and metrics as
  an uninterrupted one (tests/test_reliability.py checks it after a SIGKILL mid-epoch).
  ``keras.callbacks.BackupAndRestore`` does the weights-and-epoch part, but writes its
  weights file and its epoch file as two non-atomic steps (a crash between them resumes
  the next epoch's weights at the previous epoch's counter) and keeps none of the other
  state, hence this equivalent.
* **Divergence.** ``DivergenceGuard`` stops training as soon as the training loss is NaN
  or Inf (checked after each compiled call of ``steps_per_execution`` steps) with
  ``TrainingDiverged``: the epoch and step, and a lower learning rate to try. An epoch
  whose monitored validation score is not finite is never selected (``select_best_epoch``).
* **Collapse.** A loss can stay finite while the model degenerates (``--learning-rate 1e30``
  maps every sentence to one vector; the in-batch losses are then constant, often 0).
  ``CollapseGuard`` encodes a fixed probe of training captions
  (and their images) every ``check_every`` steps, at each epoch's last step, and at once when
  the training loss stops moving; it stops the run with ``TrainingDiverged`` (status
  ``failed``) when the probe's relative spread falls below a fraction of its value at the
  start of training. A run whose monitored score has no finite epoch is never marked complete.
* **Interruption.** ``interrupted_message`` is the one line the CLI prints on Ctrl-C: where
  the last checkpoint is and the command that resumes.
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
* **Full disk.** ``DiskSpaceCheck`` compares the free space with what an epoch's checkpoints
  (and, at the end, the exports) need before they are written, and ``guard_run`` turns a
  write that fails anyway (``ENOSPC``, ``EDQUOT``, ``EROFS``, from Python, HDF5 or TensorFlow)
  into ``StorageFull``: one ``no space left on ...`` line; ``run_state.json`` keeps the last
  committed epoch, so ``--resume`` continues once space is freed.

Test-only hook: ``GROUNDED_TEXT_TEST_TRAIN_KILL_AT="E:S"`` makes the process SIGKILL itself
after step S (0-based batch index, as Keras counts) of epoch E (1-based), so the resume test
can kill mid-epoch deterministically. ``GROUNDED_TEXT_TEST_TRAIN_ENOSPC_AT="E"`` makes the
resume checkpoint of epoch E fail with ``ENOSPC`` (a full disk without a small file system).
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
import signal
import stat
import time
from pathlib import Path

import keras
import numpy as np

from grounded_text.utils.durable import atomic_save, atomic_write, fsync_dir

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
    return f"an unfinished run ({done} of {total} epochs done)"


def holds_run(out: Path) -> bool:
    return out.is_dir() and any((out / name).exists() for name in RUN_ENTRIES)


def _config_diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    keys = sorted(set(old) | set(new))
    out = []
    for k in keys:
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _config_diff(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: {a!r} → {b!r}")
    return out


def check_run_dir(out: str | Path, config: dict, *, resume: bool, overwrite: bool) -> dict | None:
    """Decides what to do with ``out`` before anything is built; changes nothing on disk
    (except finishing an export swap a crash cut short).

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
        different config (the differing fields are listed).
    """
    from grounded_text.utils.durable import recover_export

    out = Path(out)
    if resume and overwrite:
        raise RunDirError("--resume and --overwrite exclude each other: continue the run, or replace it.")
    if out.exists() and not out.is_dir():
        raise RunDirError(f"--output-dir {str(out)!r} exists and is not a folder.")
    if out.is_dir():
        for old in out.glob(".*.old"):  # an export swap cut short by a crash
            recover_export(out / old.name[1:-len(".old")])
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
    diff = _config_diff(_plain(state["config"]), _plain(config))
    if diff:
        raise RunDirError(f"--resume: the config differs from the interrupted run's ({'; '.join(diff)}); pass the "
                          f"same flags as that run (its config is in {out / RUN_STATE}).")
    return state


# Fields of run_state.json that name files (relative to the run directory).
_PATH_FIELDS = (("checkpoint",), ("best", "checkpoint"), ("snapshots", "paths"), ("snapshots", "image_paths"))


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

_STORAGE_ERRNOS = {errno.ENOSPC: "no space left on", errno.EDQUOT: "disk quota exceeded on",
                   errno.EROFS: "read-only file system for"}
_STORAGE_TEXT = (("No space left on device", errno.ENOSPC), ("errno = 28", errno.ENOSPC),
                 ("Disk quota exceeded", errno.EDQUOT), ("errno = 122", errno.EDQUOT),
                 ("Read-only file system", errno.EROFS), ("errno = 30", errno.EROFS))


def storage_error(e: BaseException) -> tuple[int, str | None, bool] | None:
    """``(errno, path, hdf5)`` when ``e`` (or an exception it was raised from or during, unless
    ``raise ... from None`` hid it) is a write that failed for lack of space or on a read-only
    file system, else None. Finds Python's ``OSError``, h5py's ``OSError``/``RuntimeError``
    (errno in the message) and TensorFlow's errors (``No space left on device`` in the
    message)."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = str(e)
        code = getattr(e, "errno", None) if isinstance(e, OSError) else None
        if code not in _STORAGE_ERRNOS:
            code = next((c for needle, c in _STORAGE_TEXT if needle in text), None)
        if code is not None:
            match = re.search(r"filename = '([^']*)'", text)
            path = match.group(1) if match else getattr(e, "filename", None)
            return code, None if path is None else str(path), bool(match) or "h5py" in type(e).__module__
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return None


def storage_message(out: str | Path, code: int, path: str | None) -> str:
    """The one line for a full disk, a quota or a read-only file system (``error: `` is added by the CLI)."""
    state = None
    with contextlib.suppress(RunDirError, OSError):
        state = read_state(out)
    where = f" ({path})" if path else ""
    remedy = "make it writable or choose another --output-dir" if code == errno.EROFS else "free space"
    if state is not None and state.get("status") not in (None, "complete"):
        saved = (f"{out / RUN_STATE} keeps epoch {state.get('epochs_done', 0)} of {state.get('epochs', '?')}; "
                 f"{remedy}, then continue with --resume")
    else:
        saved = f"nothing of this run was saved; {remedy} and run it again"
    return f"{_STORAGE_ERRNOS[code]} the device of {str(out)!r}{where}: {saved}."


def exit_after_storage_error(e: BaseException, status: int) -> None:
    """Ends the process with ``status`` now (``os._exit``, after flushing stdout/stderr) when
    ``e`` is a ``StorageFull`` from a failed HDF5 write: the HDF5 library would otherwise crash
    the interpreter's exit (signal 11, exit status 139). Returns otherwise."""
    if isinstance(e, StorageFull) and e.hdf5:
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


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
    * A write that fails for lack of space (``storage_error``) becomes ``StorageFull`` (a
      ``RunDirError``: the CLI's one ``error:`` line, exit 2); the state keeps the last
      committed epoch.

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
    try:
        yield
    except TrainingDiverged as e:
        with contextlib.suppress(OSError, RunDirError):
            _mark_failed(out, e)
        raise
    except Exception as e:
        found = storage_error(e)
        if found is None or isinstance(e, StorageFull):
            raise
        code, path, hdf5 = found
        raise StorageFull(storage_message(out, code, path), path, hdf5) from e
    finally:
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


# ---------------------------------------------------------------------------- callbacks


class DataEpoch(keras.callbacks.Callback):
    """Sets the data pipeline's epoch variable (``make_dataset(epoch=...)``) at each epoch's
    start, before Keras creates that epoch's iterator."""

    def __init__(self, variable):
        super().__init__()
        self.variable = variable

    def on_epoch_begin(self, epoch, logs=None):
        self.variable.assign(int(epoch))


class DivergenceGuard(keras.callbacks.Callback):
    """Raises ``TrainingDiverged`` as soon as the running training loss is NaN or Inf.

    Keras reports the loss once per compiled call, so the step is known to within
    ``steps_per_execution`` steps; the message says so.
    """

    def __init__(self, steps_per_epoch: int, steps_per_execution: int, learning_rate: float):
        super().__init__()
        self.steps_per_epoch = int(steps_per_epoch)
        self.steps_per_execution = max(1, int(steps_per_execution))
        self.learning_rate = float(learning_rate)
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch) + 1

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None:
            return
        value = float(np.asarray(loss).reshape(-1)[0])
        if math.isfinite(value):
            return
        step = min(int(batch) + 1, self.steps_per_epoch)
        first = max(1, step - self.steps_per_execution + 1)
        within = "" if first == step else (f" (the loss is checked every {self.steps_per_execution} steps: it "
                                           f"became non-finite in steps {first}-{step})")
        raise TrainingDiverged(
            f"training diverged: the loss became {value} at epoch {self._epoch}, step {step} of "
            f"{self.steps_per_epoch}{within}. Try a lower learning rate, "
            f"{learning_rate_advice(self.learning_rate)}.", self._epoch, step)


class DiskSpaceCheck(keras.callbacks.Callback):
    """Stops training with ``StorageFull`` before a write the disk cannot hold.

    Before training, at each epoch's end (placed first: before the checkpoints are written)
    and at the end (before the exports), compares ``shutil.disk_usage(out).free`` with an
    estimate of what is written next, from the bytes of the model's weights ``W`` and of the
    optimizer's variables ``O``: an epoch writes ``checkpoints/best`` and ``last`` (``W`` each),
    the resume checkpoint (``W + O``, staged beside the previous one) and the copy of a new best
    (``W``), and snapshots (``2 W``) when ``snapshots``; each HDF5 file adds 10 % and
    ``H5_FILE_BYTES`` + ``H5_VARIABLE_BYTES`` per variable (measured: a 121 kB, 3-variable
    model makes a 406 kB file). ``checkpoints/best`` and ``last`` are rewritten in place, so
    their current sizes count as free. The exports need at least ``3 W`` (their graphs vary by
    model, so they are not counted: the estimate stays a lower bound there). ``MARGIN`` covers
    the state, metrics and TensorBoard events. A write that fails anyway (another process
    filling the disk, an export graph larger than the space left) is caught by ``guard_run``.
    """

    MARGIN = 256 << 10
    H5_FILE_BYTES = 128 << 10
    REWRITTEN = ("checkpoints/best.weights.h5", "checkpoints/last.weights.h5")
    H5_VARIABLE_BYTES = 64 << 10

    def __init__(self, out, train_model, *, snapshots: bool = False):
        super().__init__()
        self.out = Path(out)

        def size(variables) -> tuple[int, int]:
            variables = list(variables)
            return sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in variables), len(variables)

        def h5(nbytes: int, count: int) -> int:
            return int(1.1 * nbytes) + self.H5_FILE_BYTES + self.H5_VARIABLE_BYTES * count

        weights, n = size(train_model.weights)
        optimizer = getattr(train_model, "optimizer", None)
        extra, m = size(optimizer.variables) if optimizer is not None and optimizer.built else (2 * weights, 2 * n + 2)
        files = 3 + 2 * bool(snapshots)  # best, last, best copy (+ text and image snapshots)
        self.weights_file = h5(weights, n)
        self.epoch_bytes = files * self.weights_file + h5(weights + extra, n + m) + self.MARGIN
        self.export_bytes = 3 * weights + self.MARGIN

    def _check(self, needed: int, what: str) -> None:
        free = shutil.disk_usage(self.out).free
        if free < needed:
            message = storage_message(self.out, errno.ENOSPC, None)
            raise StorageFull(f"{message[:-1]} ({free / 1e6:.1f} MB free, {what} need about "
                              f"{needed / 1e6:.1f} MB).", str(self.out))

    def on_train_begin(self, logs=None):
        self._check(self.epoch_bytes, "an epoch's checkpoints")

    def on_epoch_end(self, epoch, logs=None):
        reused = sum(min((self.out / name).stat().st_size, self.weights_file) for name in self.REWRITTEN
                     if (self.out / name).is_file())
        self._check(self.epoch_bytes - reused, f"epoch {int(epoch) + 1}'s checkpoints")

    def on_train_end(self, logs=None):
        self._check(self.export_bytes, "the exports")


def relative_spread(embeddings) -> float:
    """How far a batch of embeddings is from one shared vector: the root-mean-square distance
    of the rows to their mean over their root-mean-square norm, ``sqrt(1 - ||mean||² /
    mean ||e_i||²)``, in [0, 1] (float64 arithmetic). 0 when every row is the same vector,
    the zero vector included; scale-free, so it means the same for normalised and raw towers.

    Args:
      embeddings: float[B, N].

    Returns:
      float in [0, 1]; NaN when an entry is NaN or Inf.
    """
    e = np.asarray(embeddings, dtype=np.float64).reshape(len(embeddings), -1)
    if not np.isfinite(e).all():
        return float("nan")
    norm = np.sqrt(np.mean(np.sum(e * e, axis=1)))
    if norm == 0.0:
        return 0.0
    centred = e - e.mean(axis=0, keepdims=True)
    return float(np.sqrt(np.mean(np.sum(centred * centred, axis=1))) / norm)


class CollapseGuard(keras.callbacks.Callback):
    """Stops training when the encoders collapse although the loss stays finite.

    A learning rate far too high (``--learning-rate 1e30``) can map every input to one vector
    (often zero) within a step; the in-batch losses are then constant (often 0) and finite, so
    ``DivergenceGuard`` sees nothing and a ``val_loss`` selection even prefers the dead model.
    This guard encodes a fixed probe, the first ``probe_size`` distinct training captions with
    the text tower (and their images' features with the image tower), and compares the probe's
    ``relative_spread`` with its value when training starts. It raises ``TrainingDiverged``
    (status ``"failed"``) when, for either tower,

        spread < max(min_ratio * spread_at_start, min_spread)

    i.e. the embeddings of different sentences (images) have become one vector up to a factor
    ``min_ratio`` (default 1e-3) of the initial spread. Healthy training spreads embeddings out
    or keeps their spread within a small factor (contrastive losses push negatives apart);
    ``tests/test_run_dir.py`` checks that healthy runs stay far above the limit.

    The probe runs every ``check_every`` optimizer steps, at each epoch's last step (before the
    validation and the checkpoints), and at once when the training loss stops moving: the
    per-report loss (recovered from Keras' running mean) equal to relative ``loss_rtol`` over
    ``loss_patience`` consecutive reports (different batches giving the same loss means the
    model's output no longer depends on its input; the probe confirms, so a loss that is
    legitimately flat never stops a run on its own). A probe of 32 captions costs one small
    forward pass of each tower.

    Args:
      text_tower: Keras model string[B] → float[B, N].
      captions: the probe captions (list of str, at least 2 distinct).
      image_tower, image_features: Keras model float[B, d] → float[B, N] and the probe's
        float32[P, d] features (None: text tower only, e.g. a streamed feature store).
      steps_per_epoch, steps_per_execution, learning_rate: for the message.
      check_every: optimizer steps between probes.
      min_ratio, min_spread: the limit above.
      loss_patience, loss_rtol: when the loss counts as stopped.
    """

    def __init__(self, text_tower, captions, image_tower=None, image_features=None, *, steps_per_epoch: int,
                 steps_per_execution: int = 1, learning_rate: float = 1e-3, check_every: int = 100,
                 min_ratio: float = 1e-3, min_spread: float = 1e-6, loss_patience: int = 3,
                 loss_rtol: float = 1e-4):
        super().__init__()
        import tensorflow as tf

        self.captions = tf.constant(list(captions), dtype=tf.string)
        self._text = tf.function(lambda s: text_tower(s, training=False), reduce_retracing=True)
        self._image = None
        if image_tower is not None and image_features is not None and len(image_features) >= 2:
            self.image_features = tf.constant(np.asarray(image_features, dtype=np.float32))
            self._image = tf.function(lambda x: image_tower(x, training=False), reduce_retracing=True)
        self.steps_per_epoch = int(steps_per_epoch)
        self.steps_per_execution = max(1, int(steps_per_execution))
        self.learning_rate = float(learning_rate)
        self.check_every = max(1, int(check_every))
        self.min_ratio, self.min_spread = float(min_ratio), float(min_spread)
        self.loss_patience, self.loss_rtol = max(2, int(loss_patience)), float(loss_rtol)
        self.start: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.lowest: dict[str, float] = {}
        self.checks = 0
        self._epoch, self._seen, self._checked = 0, 0, 0
        self._mean, self._step, self._last_step, self._losses = None, 0, 0, []

    @classmethod
    def from_setup(cls, setup, probe_size: int = 32, **kwargs) -> "CollapseGuard":
        """The guard for a ``TrainingSetup``: its towers and the first ``probe_size`` distinct
        training captions (with their images' features unless the store is streamed)."""
        pairs = setup.train_pairs
        captions = pairs.captions.tolist()
        first = {}
        for i, caption in enumerate(captions):
            first.setdefault(caption, i)
            if len(first) == probe_size:
                break
        index = list(first.values())
        features = None
        if not pairs.streamed:
            rows = list(dict.fromkeys(np.asarray(pairs.feature_rows)[index].tolist()))
            features = np.asarray(pairs.features)[rows]
        return cls(setup.model.text_tower, [captions[i] for i in index], setup.model.image_tower, features,
                   **kwargs)

    def spreads(self) -> dict[str, float]:
        """``relative_spread`` of the probe through each tower now."""
        out = {"text tower": relative_spread(np.asarray(self._text(self.captions)))}
        if self._image is not None:
            out["image tower"] = relative_spread(np.asarray(self._image(self.image_features)))
        self.checks += 1
        for tower, value in out.items():
            self.lowest[tower] = min(self.lowest.get(tower, np.inf), value)
        return out

    def on_train_begin(self, logs=None):
        self.start = self.last = self.spreads()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch) + 1
        self._mean, self._step, self._last_step, self._losses = None, 0, 0, []

    def on_train_batch_end(self, batch, logs=None):
        step = min(int(batch) + 1, self.steps_per_epoch)
        self._seen += max(1, step - self._last_step)
        self._last_step = step
        stuck = self._loss_stuck((logs or {}).get("loss"), step)
        due = self._seen - self._checked >= self.check_every or step >= self.steps_per_epoch
        if stuck or due:
            self._checked = self._seen
            self._losses = []
            self._check(step)

    def _loss_stuck(self, loss, step: int) -> bool:
        if loss is None:
            return False
        mean = float(np.asarray(loss).reshape(-1)[0])
        if not math.isfinite(mean):
            return False  # DivergenceGuard's case
        if self._mean is None:
            value = mean
        else:  # Keras logs the epoch's running mean: undo it to get this report's loss
            value = (mean * step - self._mean * self._step) / max(1, step - self._step)
        self._mean, self._step = mean, step
        self._losses = (self._losses + [value])[-self.loss_patience:]
        if len(self._losses) < self.loss_patience:
            return False
        return max(self._losses) - min(self._losses) <= self.loss_rtol * max(abs(v) for v in self._losses)

    def _check(self, step: int) -> None:
        self.last = now = self.spreads()
        for tower, spread in now.items():
            start = self.start.get(tower, float("nan"))
            limit = max(self.min_ratio * start if math.isfinite(start) else 0.0, self.min_spread)
            if math.isfinite(spread) and spread >= limit:
                continue
            size = f"{self.captions.shape[0]} probe captions" if tower == "text tower" else \
                f"{self.image_features.shape[0]} probe images"
            what = "non-finite embeddings" if not math.isfinite(spread) else \
                f"relative spread {spread:.3g}, {start:.3g} at the start; limit {limit:.3g}"
            raise TrainingDiverged(
                f"training collapsed: the {tower} maps the {size} to nearly one vector ({what}) at "
                f"epoch {self._epoch}, step {step} of {self.steps_per_epoch}, although the loss is finite. Try a "
                f"lower learning rate, {learning_rate_advice(self.learning_rate)}.", self._epoch, step,
                status="failed")


class _TestKill(keras.callbacks.Callback):
    """Test-only (module docstring): SIGKILL after step S of epoch E."""

    def __init__(self, spec: str):
        super().__init__()
        epoch, step = spec.split(":")
        self.epoch, self.step = int(epoch), int(step)
        self._current = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._current = int(epoch) + 1

    def on_train_batch_end(self, batch, logs=None):
        if self._current == self.epoch and int(batch) >= self.step:
            os.kill(os.getpid(), signal.SIGKILL)


class _TestENOSPC(keras.callbacks.Callback):
    """Test-only (module docstring): the resume checkpoint of epoch E fails with ENOSPC."""

    def __init__(self, tracker: "RunTracker", spec: str):
        super().__init__()
        self.tracker, self.epoch = tracker, int(spec)

    def on_epoch_end(self, epoch, logs=None):  # placed before ResumeCheckpoint
        if int(epoch) + 1 == self.epoch:
            self.tracker.fail_next_save = True


class RunTracker:
    """The resumable state of one training run (module docstring).

    Args:
      out: the run directory.
      config: the resolved config dict (stored; a resume must match it).
      train_model: the compiled Keras training model (weights + optimizer are checkpointed).
      epochs: the run's total epochs.
      monitor, mode: the selection metric and ``"max"``/``"min"``.
      best_checkpoint: the ``ModelCheckpoint`` of the best epoch (None for ``select_on="last"``).
      best_path: its file.
      sts_cb, retrieval_cb, snapshot_cb: the callbacks whose state carries over (or None).
      resume_state: ``check_run_dir``'s result (None: a fresh run).
      data_fingerprint: ``check_data``'s result, recorded in a fresh run's state.
    """

    def __init__(self, out, config: dict, train_model, *, epochs: int, monitor: str, mode: str,
                 best_checkpoint=None, best_path=None, sts_cb=None, retrieval_cb=None, snapshot_cb=None,
                 resume_state: dict | None = None, data_fingerprint: dict | None = None):
        self.out = Path(out)
        self.fail_next_save = False
        self.collapse_guard = None  # set by callbacks(setup=...); its margin goes into metrics.json
        self.resume_dir = self.out / RESUME_DIR
        self.model = train_model
        self.best_checkpoint, self.best_path = best_checkpoint, Path(best_path) if best_path else None
        self.sts_cb, self.retrieval_cb, self.snapshot_cb = sts_cb, retrieval_cb, snapshot_cb
        self.resumed = resume_state is not None
        self.state = resume_state or {
            "version": STATE_VERSION, "status": "running", "config": _plain(config), "epochs": int(epochs),
            "epochs_done": 0, "checkpoint": None, "random_state": [], "history": {}, "sts_history": [],
            "retrieval_history": [], "snapshots": None,
            "best": {"monitor": monitor, "mode": mode, "value": None, "epoch": None, "checkpoint": None},
        }
        if data_fingerprint is not None and not self.resumed:
            self.state["data"] = dict(data_fingerprint)

    # -- state ------------------------------------------------------------------------------
    @property
    def epochs_done(self) -> int:
        return int(self.state["epochs_done"])

    @property
    def history(self) -> dict:
        """Per-epoch logs of every epoch so far (resumed ones included), as ``History`` has them."""
        return {k: list(v) for k, v in self.state["history"].items()}

    def last_checkpoint(self) -> Path | None:
        ckpt = self.state.get("checkpoint")
        return confined_path(self.out, ckpt, "checkpoint") if ckpt else None

    def mark(self, status: str) -> None:
        """Records ``status`` (``"interrupted"``, ``"diverged"``...) in the state file."""
        self.state["status"] = status
        self.state["updated"] = time.time()
        write_state(self.out, self.state)

    def record_exports(self, names: list[str]) -> None:
        """Records the export folders the run is about to write (``exports`` in the state), so
        that ``--overwrite`` later deletes those and no other ``export_*`` of the folder."""
        self.state["exports"] = list(names)
        self.state["updated"] = time.time()
        write_state(self.out, self.state)

    def _random_states(self) -> list:
        """The layers' random-generator states (``SeedGenerator``), which ``save_weights`` skips."""
        weights = {id(w) for w in self.model.weights}
        return [v for v in self.model.variables if id(v) not in weights]

    # -- start ------------------------------------------------------------------------------
    def start(self) -> int:
        """Writes the initial state (fresh run) or restores everything (resume); returns the
        epoch ``fit`` starts at."""
        self.out.mkdir(parents=True, exist_ok=True)
        if not self.resumed:
            self.mark("running")
            return 0
        state = self.state
        check_state_paths(self.out, state)
        ckpt = self.last_checkpoint()
        if ckpt is not None:
            optimizer = self.model.optimizer
            if optimizer is not None and not optimizer.built:
                optimizer.build(self.model.trainable_variables)  # its variables must exist to be loaded
            self.model.load_weights(str(ckpt))
            saved = state.get("random_state", [])
            variables = self._random_states()
            if len(saved) != len(variables):
                raise RunDirError(f"--resume: {len(saved)} random states saved, the model has {len(variables)}.")
            for v, s in zip(variables, saved):
                v.assign(np.asarray(s["value"], dtype=v.dtype))
        best = state["best"]
        if self.best_checkpoint is not None and best.get("value") is not None:
            self.best_checkpoint.best = float(best["value"])
            if best.get("checkpoint"):
                _copy_atomic(self.out / best["checkpoint"], self.best_path)
        if self.sts_cb is not None:
            self.sts_cb.history = list(state.get("sts_history", []))
        if self.retrieval_cb is not None:
            self.retrieval_cb.history = list(state.get("retrieval_history", []))
        snaps = state.get("snapshots")
        if self.snapshot_cb is not None and snaps:
            self.snapshot_cb.paths = [self.out / p for p in snaps["paths"]]
            self.snapshot_cb.image_paths = [self.out / p for p in snaps["image_paths"]]
            self.snapshot_cb.epochs = list(snaps["epochs"])
            self.snapshot_cb.scores = list(snaps["scores"])
        self.mark("running")
        return self.epochs_done

    def callbacks(self, callbacks: list, *, data_epoch=None, steps_per_epoch: int, steps_per_execution: int,
                  learning_rate: float, setup=None, snapshots: bool = False) -> list:
        """``callbacks`` with the data-epoch setter, the divergence guard, the free-space check
        and (given ``setup``) the collapse guard first, and the resume checkpoint last (after
        the callbacks whose results it records).

        Args:
          setup: a ``TrainingSetup`` (``model.text_tower``, ``model.image_tower``,
            ``train_pairs``): the collapse guard's towers and probe (None: no collapse guard).
          snapshots: the run saves snapshots (the free-space estimate counts them).
        """
        first = [DivergenceGuard(steps_per_epoch, steps_per_execution, learning_rate),
                 DiskSpaceCheck(self.out, self.model, snapshots=snapshots)]
        if setup is not None:
            self.collapse_guard = CollapseGuard.from_setup(setup, steps_per_epoch=steps_per_epoch,
                                                           steps_per_execution=steps_per_execution,
                                                           learning_rate=learning_rate)
            first.append(self.collapse_guard)
        if data_epoch is not None:
            first.insert(0, DataEpoch(data_epoch))
        last = [ResumeCheckpoint(self)]
        if os.environ.get(ENOSPC_ENV):
            last.insert(0, _TestENOSPC(self, os.environ[ENOSPC_ENV]))
        if os.environ.get(KILL_ENV):
            last.append(_TestKill(os.environ[KILL_ENV]))
        return first + list(callbacks) + last

    # -- epoch end --------------------------------------------------------------------------
    def commit_epoch(self, epoch: int, logs: dict) -> None:
        """Checkpoints epoch ``epoch`` (1-based) and writes the state (the commit point)."""
        self.resume_dir.mkdir(parents=True, exist_ok=True)
        name = f"epoch-{epoch:04d}.weights.h5"

        def save(staged: Path) -> None:
            if self.fail_next_save:  # test hook (module docstring)
                self.fail_next_save = False
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(staged))
            self.model.save_weights(str(staged))

        # Staged beside the target and removed on failure: never a torn file (the state does not name it).
        atomic_save(self.resume_dir / name, save, ".weights.h5")  # Keras wants the suffix
        state = self.state
        best = state["best"]
        previous_best = best.get("checkpoint")
        if self.best_checkpoint is not None:
            value = self.best_checkpoint.best
            value = None if value is None or not math.isfinite(float(value)) else float(value)
            if value is not None and value != best.get("value"):
                # This epoch is the new best: keep its checkpoint with the committed state, under
                # a new name, so the committed state's copy stays intact until the next commit.
                copy = f"best-{epoch:04d}.{BEST_COPY}"
                _copy_atomic(self.best_path, self.resume_dir / copy)
                best.update(value=value, epoch=epoch, checkpoint=f"{RESUME_DIR}/{copy}")
        for key, value in (logs or {}).items():
            state["history"].setdefault(key, []).append(_to_float(value))
        if self.sts_cb is not None:
            state["sts_history"] = _plain(self.sts_cb.history)
        if self.retrieval_cb is not None:
            state["retrieval_history"] = _plain(self.retrieval_cb.history)
        if self.snapshot_cb is not None:
            rel = lambda p: str(Path(p).relative_to(self.out))  # noqa: E731
            state["snapshots"] = {"paths": [rel(p) for p in self.snapshot_cb.paths],
                                  "image_paths": [rel(p) for p in self.snapshot_cb.image_paths],
                                  "epochs": list(self.snapshot_cb.epochs), "scores": list(self.snapshot_cb.scores)}
        state["random_state"] = [{"path": v.path, "value": np.asarray(v.numpy()).tolist()}
                                 for v in self._random_states()]
        previous = self.last_checkpoint()
        state["epochs_done"] = int(epoch)
        state["checkpoint"] = f"{RESUME_DIR}/{name}"
        state["status"] = "running"
        state["updated"] = time.time()
        write_state(self.out, state)
        if previous is not None and previous.name != name:
            previous.unlink(missing_ok=True)
        if previous_best and previous_best != best.get("checkpoint"):
            confined_path(self.out, previous_best, "best.checkpoint").unlink(missing_ok=True)

    # -- end --------------------------------------------------------------------------------
    def finish(self) -> None:
        """Marks the run complete and removes the resume checkpoints (weights with optimizer
        state: three times the model's size).

        Raises:
          TrainingDiverged: (status ``failed``, recorded) the monitored score has no finite
            epoch: such a run is never marked complete.
        """
        monitor = self.state["best"].get("monitor")
        scores = np.asarray(self.state["history"].get(monitor, []), dtype=np.float64)
        if scores.size and not np.isfinite(scores).any():
            error = TrainingDiverged(f"no epoch has a finite {monitor} ({scores.tolist()}): the run is not marked "
                                     "complete. Try a lower --learning-rate.", len(scores), 0, status="failed")
            self.state["error"] = str(error)
            self.mark("failed")
            raise error
        self.state["checkpoint"] = None
        self.state["best"]["checkpoint"] = None
        self.mark("complete")
        shutil.rmtree(self.resume_dir, ignore_errors=True)


class ResumeCheckpoint(keras.callbacks.Callback):
    """Calls ``RunTracker.commit_epoch`` at each epoch end (place it last)."""

    def __init__(self, tracker: RunTracker):
        super().__init__()
        self.tracker = tracker

    def on_epoch_end(self, epoch, logs=None):
        self.tracker.commit_epoch(int(epoch) + 1, logs or {})


def _to_float(value) -> float:
    return float(np.asarray(value).reshape(-1)[0])


def _copy_atomic(src: Path, dst: Path) -> None:
    with open(src, "rb") as f:
        atomic_write(dst, lambda out: shutil.copyfileobj(f, out))


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
    if not state.get("checkpoint"):
        return (f"interrupted before the first epoch ended: no checkpoint in {out} yet; `{command}` starts the "
                "run again from epoch 1.")
    return (f"interrupted: the last checkpoint is {Path(out) / state['checkpoint']} (epoch {state['epochs_done']} "
            f"of {state['epochs']}); continue with `{command}`.")
