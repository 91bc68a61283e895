"""The image network's features of a folder's photos, kept for every model that shares the network.

Both shipped models put photos into their space through the same EfficientNet-Lite0 features,
then their own image tower. The network is nearly all of the cost (milliseconds a photo on a CPU);
a tower is a matrix product. So the photo index (:mod:`grounded_text.photos.index`) keeps the
network's pooled features of each photo it encodes, here, in one cache per (photo folder, network
fingerprint): ``ImageSide.network_fingerprint``, the tower's record of the network, its weights,
crops, image size and preprocessing, and how photos are read. A second model whose tower records
the same network then indexes the folder by running its tower alone.

The cache is an index of its own, in the same files (:mod:`grounded_text.photos.table`: plain
arrays, read with ``np.load(allow_pickle=False)`` after their sizes are checked, each recording the
folder and the fingerprint): ``features.npz`` and the ``parts/part-NNNNNN.npz`` of a run not yet
merged, under ``ROOT/features/<folder name>-<digest>`` beside the models' indexes. A row is the
photo's relative path, its size and modification time (a changed photo's row is never used) and
its features as float32 (d = 1280 for Lite0: 5,120 bytes a photo), exactly as the network gave
them: a model that reuses them gets the vectors it would have computed itself, so an index does not
depend on which model indexed the folder first.

One process at a time writes it (a ``filelock`` on its ``lock`` file, not waited for): another
process indexing the same folder meanwhile, with a model of the same network, reads it but does
not write it, and computes the features it lacks itself.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import filelock
import numpy as np

from grounded_text.photos.table import Table, gather, plan_update, read_tables, write_table
from grounded_text.vision.folders import PhotoFile
from grounded_text.vision.sinks import PartFiles

__all__ = ["FEATURES_DIR", "FEATURES_FILE", "FeatureCache"]

#: The folder of the feature caches under the index root.
FEATURES_DIR = "features"
#: The merged file of one cache.
FEATURES_FILE = "features.npz"
LOCK_FILE = "lock"


class FeatureCache:
    """The stored network features of one folder's photos, for one network.

    Use it as a context manager around one index update: entering reads what is stored and takes
    the write lock if it is free; :meth:`add` writes each batch of new features as a part;
    :meth:`merge` folds the parts into ``features.npz`` and drops the rows of photos that are gone.

    Args:
      cache_dir: the cache's folder (created when written).
      folder: the photo folder (absolute), recorded in every file.
      fingerprint: the network's fingerprint (``ImageSide.network_fingerprint``), recorded too.

    Attributes:
      writable: whether this process holds the lock (and so writes).
      discarded: ``"path: reason"`` of stored files that could not be read (ignored; replaced at
        the next merge).
    """

    def __init__(self, cache_dir: Path, folder: Path, fingerprint: str):
        self.dir, self.folder, self.fingerprint = Path(cache_dir), Path(folder), str(fingerprint)
        self.writable = False
        self.discarded: list[str] = []
        self._lock: filelock.FileLock | None = None
        self._tables: list[Table | None] = []
        self._new_rows: list[PhotoFile] = []
        self._new_features: list[np.ndarray] = []
        self._next_part = 0

    @property
    def _parts(self) -> PartFiles:
        return PartFiles(self.dir / "parts")

    def _planted(self) -> bool:
        """Whether a name the cache writes, removes or locks is a link (or ``lock`` is not a plain file
        with one link): writing through it would change files outside the cache, and the lock opens
        and truncates what its name leads to. Such a cache is neither read nor written."""
        parts = self.dir / "parts"
        names = [self.dir, parts, self.dir / FEATURES_FILE]
        if parts.is_dir() and not parts.is_symlink():
            names += list(parts.iterdir())
        if any(p.is_symlink() for p in names):
            return True
        try:
            st = os.lstat(self.dir / LOCK_FILE)
        except FileNotFoundError:
            return False
        return not stat.S_ISREG(st.st_mode) or st.st_nlink != 1

    def __enter__(self) -> FeatureCache:
        self._tables = []
        if self._planted():
            self.discarded.append(f"{self.dir}: holds a link; the stored network features are not used")
            self.writable = False
            return self
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            lock = filelock.FileLock(self.dir / LOCK_FILE, timeout=0)
            lock.acquire()
            self._lock, self.writable = lock, True
        except (OSError, filelock.Timeout):  # busy, or a folder that cannot be written: read only
            self.writable = False
        self._tables.extend(read_tables(self.dir / FEATURES_FILE, self._parts.paths(), self.folder,
                                        self.fingerprint, self.discarded))
        self._next_part = self._parts.next_number()
        return self

    def __exit__(self, *exc) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        self.writable = False

    def lookup(self, photos: list[PhotoFile]) -> tuple[list[PhotoFile], np.ndarray, list[PhotoFile]]:
        """The stored features of ``photos`` (same path, size and modification time).

        Returns:
          (the photos found, their float32 [found, d] features, the photos not found).
        """
        plan = plan_update(photos, self._tables)
        found = [p for p in photos if p.rel in plan.keep]
        rows = [self._tables[t].embeddings[i] for t, i in (plan.keep[p.rel] for p in found)]
        features = np.asarray(rows, np.float32) if rows else np.zeros((0, 0), np.float32)
        return found, features, [p for p in photos if p.rel not in plan.keep]

    def add(self, photos: list[PhotoFile], features: np.ndarray) -> None:
        """Keeps the features (float [len(photos), d]) of photos just computed: written at once as a
        part file (when writable), so that a run killed later still keeps them.

        Raises:
          OSError: the part cannot be written (a full disk, permissions).
        """
        if not self.writable or not photos:
            return
        rows = np.asarray(features, np.float32)
        table = Table([p.rel for p in photos], np.array([p.size for p in photos], np.int64),
                      np.array([p.mtime_ns for p in photos], np.int64), rows, [])
        write_table(self._parts.path(self._next_part), self.folder, self.fingerprint, table)
        self._next_part += 1
        self._new_rows.extend(photos)
        self._new_features.append(rows)

    def merge(self, photos: list[PhotoFile]) -> None:
        """Writes ``features.npz``: the stored rows of ``photos`` (the folder's photos now) and the
        rows added by this run; then removes the parts. Nothing is written when nothing changed, or
        when this process does not hold the lock.

        Raises:
          OSError: the file cannot be written (the parts stay, and are read next time).
        """
        if not self.writable:
            return
        plan = plan_update(photos, self._tables)
        stored = sum(len(t.rels) for t in self._tables[:1] if t is not None)
        parts = self._parts.paths()
        if not (self._new_rows or parts or self.discarded or len(plan.keep) != stored):
            return
        dims = [f.shape[1] for f in self._new_features] + [t.embeddings.shape[1] for t in self._tables
                                                           if t is not None and len(t.rels)]
        if not dims:
            return
        new_rels = {p.rel for p in self._new_rows}
        keep = {rel: where for rel, where in plan.keep.items() if rel not in new_rels}
        merged = gather(self._tables, keep, self._new_rows, self._new_features, [], dims[0])
        write_table(self.dir / FEATURES_FILE, self.folder, self.fingerprint, merged)
        self._parts.remove()
