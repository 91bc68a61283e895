"""Writers of image-feature stores (Contract 1 of the project's feature pipeline).

A sink has three methods::

    sink.existing_ids() -> set[str]        # ids already stored (a resumed run skips them)
    sink.append(ids, features) -> None     # ids str [n], features float32 [n, d]; durable on return
    sink.close() -> pathlib.Path           # finalise; the path the trainer reads

:class:`NpzFeatureSink` writes the ``.npz`` format read by
:func:`grounded_text.data.features.load_npz_features` (``ids`` [n] str, ``features``
[n, d] float32).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from grounded_text.data.features import check_npz_members
from grounded_text.data.provenance import PROVENANCE_KEY, check_provenance, read_npz_provenance
from grounded_text.utils.durable import atomic_write

_PART = re.compile(r"^part-(\d{6})\.npz$")


def _atomic_savez(path: Path, **arrays) -> None:
    """Writes ``path`` atomically (see ``grounded_text.utils.durable.atomic_write``)."""
    atomic_write(path, lambda f: np.savez(f, **arrays))


def check_writable(path: Path, what: str = "--out") -> None:
    """Fails now, before any image is decoded, when ``path`` could not be written later:
    ``path`` is a folder, or the nearest existing folder above it (where the missing ones
    would be created) refuses a file (permissions, a read-only file system; tried with a
    real temporary file, so it holds for root too).

    Raises:
      ValueError: naming ``path`` and the folder, with the system's reason.
    """
    if path.is_dir():
        raise ValueError(f"{what} {str(path)!r} is a folder; give an .npz file path.")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(f"{what} {str(path)!r}: {str(folder)!r} is not a folder.")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as e:
        raise ValueError(f"{what} {str(path)!r}: cannot write in {str(folder)!r} ({e.strerror}).") from None


def _read_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    check_npz_members(path)  # declared shapes against the data, before np.load allocates them
    try:
        with np.load(path, allow_pickle=False) as archive:
            ids = archive["ids"].astype(str)
            features = archive["features"]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: not a readable feature file ({e}).") from e
    if features.ndim != 2 or ids.ndim != 1 or len(ids) != len(features):
        raise ValueError(f"{path}: bad shapes ids {ids.shape}, features {features.shape}.")
    return ids, features


class NpzFeatureSink:
    """Resumable writer of one ``.npz`` feature file.

    Every :meth:`append` writes a new part file ``STORE.parts/part-NNNNNN.npz``
    atomically (temp file + fsync + ``os.replace``), so after a crash, even SIGKILL,
    every appended batch is on disk and :meth:`existing_ids` sees it. :meth:`close`
    merges the existing ``STORE`` (if any, e.g. from an earlier finished run) and the
    parts into ``STORE`` (atomically), then removes ``STORE.parts/``. A later run with
    the same ``STORE`` appends to it (resume / add images).

    The store records what made its rows (``provenance``: network, weights, crops, image size,
    preprocessing; ``grounded_text.vision.networks.feature_provenance``) in every part and in
    the merged file, and a sink given another provenance refuses to resume or append to it.

    Args:
      path: the ``.npz`` file to write (parent folders are created).
      provenance: what the new rows are made with (a JSON-able dict), or ``None`` (not
        recorded, not checked: a store of features made elsewhere).

    Raises:
      ValueError: ``path`` does not end in ``.npz``, is a folder or cannot be written
        (checked at construction, before any work: :func:`check_writable`); ``STORE.parts``
        is a symbolic link or not a folder; an existing store or part is unreadable or
        records another ``provenance`` (the message names both:
        ``grounded_text.data.provenance.check_provenance``); on :meth:`append`: ragged shapes,
        non-finite values, a feature dimension different from what is stored,
        duplicate ids or ids already stored.
    """

    def __init__(self, path: str | os.PathLike, provenance: dict | None = None):
        self.path = Path(path)
        if self.path.suffix != ".npz":
            raise ValueError(f"--out {str(self.path)!r}: an npz feature store must end in .npz.")
        check_writable(self.path)
        self.parts_dir = self.path.with_name(self.path.name + ".parts")
        if self.parts_dir.is_symlink() or (self.parts_dir.exists() and not self.parts_dir.is_dir()):
            # A link planted there would carry every batch, and the merge's removal, elsewhere.
            raise ValueError(f"--out {str(self.path)!r}: {str(self.parts_dir)!r} is a symbolic link or not a folder; "
                             "the store's parts are written only into a plain folder beside it: remove it and run "
                             "again.")
        self._ids: set[str] = set()
        self._dim: int | None = None
        self._next = 0
        self.provenance = None if provenance is None else dict(provenance)
        self.recorded: dict | None = None  # what the store and its parts record
        if self.path.is_file():
            ids, feats = _read_npz(self.path)
            self.recorded = read_npz_provenance(self.path)
            check_provenance(self.recorded, self.provenance, self.path)
            self._ids.update(ids.tolist())
            self._dim = int(feats.shape[1])
        for part in self._part_files():
            ids, feats = _read_npz(part)
            recorded = read_npz_provenance(part)
            check_provenance(self.recorded, recorded, part)  # parts of two settings: refused as well
            check_provenance(recorded, self.provenance, self.path)
            self.recorded = self.recorded or recorded
            self._check_dim(int(feats.shape[1]), part)
            self._ids.update(ids.tolist())
            self._next = max(self._next, int(_PART.match(part.name).group(1)) + 1)
        if self.provenance is None:
            self.provenance = self.recorded  # rows added without settings keep the store's record

    def _record(self) -> dict:
        """The provenance member of a written part or store (absent when unknown)."""
        return {} if self.provenance is None else {PROVENANCE_KEY: np.array(json.dumps(self.provenance,
                                                                                      sort_keys=True))}

    def _part_files(self) -> list[Path]:
        if not self.parts_dir.is_dir():
            return []
        return sorted(p for p in self.parts_dir.iterdir() if _PART.match(p.name))

    def _check_dim(self, dim: int, where) -> None:
        if self._dim is None:
            self._dim = dim
        elif dim != self._dim:
            raise ValueError(
                f"{where}: feature dimension {dim} differs from the store's {self._dim} "
                f"({self.path}); a different --cnn? Write to a new --out."
            )

    @property
    def dim(self) -> int | None:
        """Feature dimension of what is stored, or ``None`` while empty."""
        return self._dim

    def existing_ids(self) -> set[str]:
        """Ids in the store and its part files (a copy)."""
        return set(self._ids)

    def append(self, ids, features) -> None:
        """Stores ``features[i]`` for ``ids[i]``; the batch is on disk when this returns.

        Args:
          ids: [n] str (array or list).
          features: [n, d] float (stored as float32).
        """
        ids = np.asarray(ids).astype(str)
        features = np.asarray(features, dtype=np.float32)
        if ids.ndim != 1 or features.ndim != 2 or len(ids) != len(features):
            raise ValueError(
                f"append: ids must be [n] and features [n, d]; got {ids.shape}, {features.shape}."
            )
        if len(ids) == 0:
            return
        if not np.isfinite(features).all():
            raise ValueError(f"append: non-finite features for ids {ids[:3].tolist()}...")
        self._check_dim(int(features.shape[1]), "append")
        if len(set(ids.tolist())) != len(ids):
            raise ValueError("append: duplicate ids in one batch.")
        again = self._ids.intersection(ids.tolist())
        if again:
            raise ValueError(f"append: ids already stored in {self.path}: {sorted(again)[:5]}.")
        self.parts_dir.mkdir(parents=True, exist_ok=True)
        _atomic_savez(self.parts_dir / f"part-{self._next:06d}.npz", ids=ids, features=features, **self._record())
        self._next += 1
        self._ids.update(ids.tolist())

    def close(self) -> Path:
        """Merges the parts into ``path`` (rows: old store first, then parts in append
        order) and removes the parts folder.

        Returns:
          ``path``.

        Raises:
          ValueError: nothing was ever stored (no file to return).
        """
        parts = self._part_files()
        if not parts:
            if self.path.is_file():
                return self.path
            raise ValueError(f"{self.path}: nothing was written (no image features).")
        all_ids, all_feats = [], []
        if self.path.is_file():
            ids, feats = _read_npz(self.path)
            all_ids.append(ids)
            all_feats.append(feats.astype(np.float32, copy=False))
        for part in parts:
            ids, feats = _read_npz(part)
            all_ids.append(ids)
            all_feats.append(feats.astype(np.float32, copy=False))
        ids = np.concatenate(all_ids).astype(str)
        feats = np.concatenate(all_feats).astype(np.float32, copy=False)
        # A crash between writing the merged file and removing the parts leaves rows
        # twice; keep the first copy of each id.
        _, first = np.unique(ids, return_index=True)
        if len(first) != len(ids):
            keep = np.sort(first)
            ids, feats = ids[keep], feats[keep]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_savez(self.path, ids=ids, features=feats, **self._record())
        shutil.rmtree(self.parts_dir)
        return self.path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # Only finalise on success; after an error the parts stay for a resume.
        if exc[0] is None:
            self.close()
        return False
