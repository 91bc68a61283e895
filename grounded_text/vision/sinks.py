"""Writers of image-feature stores (Contract 1 of the project's feature pipeline).

A sink has three methods::

    sink.existing_ids() -> set[str]        # ids already stored (a resumed run skips them)
    sink.append(ids, features) -> None     # ids str [n], features float32 [n, d]; durable on return
    sink.close() -> pathlib.Path           # finalise; the path the trainer reads

:class:`NpzFeatureSink` writes the ``.npz`` format read by
:func:`grounded_text.data.features.load_npz_features` (``ids`` [n] str, ``features``
[n, d] float32). :class:`PartFiles` is its resumable store of batches, one atomic part file
each, which the photo index (``grounded_text.photos.index``) keeps its batches in too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np

from grounded_text.data.features import check_npz_members
from grounded_text.data.provenance import PROVENANCE_KEY, check_provenance, read_npz_provenance
from grounded_text.utils.durable import atomic_write, check_writable_target


def atomic_savez(path: Path, **arrays) -> None:
    """Writes the arrays to ``path`` (``np.savez``) atomically: after a crash, even SIGKILL, the
    file is the old one or the whole new one (``grounded_text.utils.durable.atomic_write``).

    Example:
      >>> import tempfile
      >>> path = Path(tempfile.mkdtemp()) / "a.npz"
      >>> atomic_savez(path, x=np.arange(3))
      >>> np.load(path)["x"].tolist()
      [0, 1, 2]
    """
    atomic_write(path, lambda f: np.savez(f, **arrays))


class PartFiles:
    """The numbered part files ``part-NNNNNN.npz`` of a resumable store, in one folder: each batch
    is written to its own part, atomically, so a run killed at any point keeps every batch it
    finished and the next one resumes after the last; once merged, the parts are removed.

    Args:
      folder: the folder of the parts (created by the first write).

    Example:
      >>> import tempfile
      >>> parts = PartFiles(Path(tempfile.mkdtemp()) / "parts")
      >>> parts.paths(), parts.next_number()
      ([], 0)
      >>> atomic_savez(parts.path(0), x=np.zeros(2))
      >>> [p.name for p in parts.paths()], parts.next_number()
      (['part-000000.npz'], 1)
      >>> parts.remove(); parts.folder.exists()
      False
    """

    PATTERN = re.compile(r"^part-(\d{6})\.npz$")

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)

    def paths(self) -> list[Path]:
        """The parts, in the order they were written (their numbers)."""
        if not self.folder.is_dir():
            return []
        return sorted(p for p in self.folder.iterdir() if self.PATTERN.match(p.name))

    def next_number(self) -> int:
        """The number of the part after the last one there (0 when there is none)."""
        return max((int(self.PATTERN.match(p.name).group(1)) + 1 for p in self.paths()), default=0)

    def _refuse_link(self) -> None:
        # A link at the folder's name would take the writes, and the removal of every part file
        # in the folder it names, outside the store.
        if self.folder.is_symlink():
            raise ValueError(f"{str(self.folder)!r} is a symbolic link; part files are written and removed only in a "
                             "plain folder: remove the link and run again.")

    def path(self, number: int) -> Path:
        """Where part ``number`` is written (its folder is created).

        Raises:
          ValueError: the folder is a symbolic link.
        """
        self._refuse_link()
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder / f"part-{int(number):06d}.npz"

    def remove(self) -> None:
        """Removes the parts, oldest first (a run killed meanwhile keeps only the newest, whose
        rows the merged file holds as well), then their folder.

        Raises:
          OSError: a part cannot be removed. ValueError: the folder is a symbolic link.
        """
        self._refuse_link()
        for part in self.paths():
            part.unlink()
        shutil.rmtree(self.folder, ignore_errors=True)


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
        (checked at construction, before any work, where its parts go:
        ``grounded_text.utils.durable.check_writable_target``); ``STORE.parts``
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
        if self.path.is_dir():
            raise ValueError(f"--out {str(self.path)!r} is a folder; give an .npz file path.")
        self.parts_dir = self.path.with_name(self.path.name + ".parts")
        if self.parts_dir.is_symlink() or (self.parts_dir.exists() and not self.parts_dir.is_dir()):
            # A link planted there would carry every batch, and the merge's removal, elsewhere.
            raise ValueError(f"--out {str(self.path)!r}: {str(self.parts_dir)!r} is a symbolic link or not a folder; "
                             "the store's parts are written only into a plain folder beside it: remove it and run "
                             "again.")
        try:  # now, before any image is decoded: where the parts and then the store will be written
            check_writable_target(self.parts_dir, "its parts folder")
        except OSError as e:
            raise ValueError(f"--out {str(self.path)!r}: {e}") from None
        self._parts = PartFiles(self.parts_dir)
        self._ids: set[str] = set()
        self._dim: int | None = None
        self._next = self._parts.next_number()
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
        if self.provenance is None:
            self.provenance = self.recorded  # rows added without settings keep the store's record

    def _record(self) -> dict:
        """The provenance member of a written part or store (absent when unknown)."""
        return {} if self.provenance is None else {PROVENANCE_KEY: np.array(json.dumps(self.provenance,
                                                                                      sort_keys=True))}

    def _part_files(self) -> list[Path]:
        return self._parts.paths()

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
        atomic_savez(self._parts.path(self._next), ids=ids, features=features, **self._record())
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
        atomic_savez(self.path, ids=ids, features=feats, **self._record())
        self._parts.remove()
        return self.path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # Only finalise on success; after an error the parts stay for a resume.
        if exc[0] is None:
            self.close()
        return False
