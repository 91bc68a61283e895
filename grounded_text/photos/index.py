"""Search a folder of photos by a sentence: a cached, incremental index of the photos' embeddings.

::

    import grounded_text as gt

    enc = gt.load("vete_bow_flickr8k")
    index = gt.ImageIndex("~/Pictures", enc)
    report = index.update()                      # encodes new or changed photos only
    for path, cosine in index.search("a dog runs on the grass", top_k=5):
        print(f"{cosine:.3f}  {path}")

**What is indexed.** The files under the folder, recursively, whose extension is one of
``PHOTO_EXTENSIONS`` (any case): :func:`grounded_text.vision.folders.scan_photos`, the scanner
of the feature extractor too. Names starting with ``.`` (hidden files and folders) are
left out, and links to folders are not followed (a link to a file is indexed as that file).
Each photo is keyed by its path relative to the folder, its size and its modification time
(``st_mtime_ns``): a photo whose size or time changed is encoded again, a photo that is gone
is dropped, an unchanged one is reused without being read (a rewrite that keeps both the size and
the time is not seen, as with rsync's quick check). A file that cannot be decoded is
reported, skipped and remembered with its size and time: it is tried again only once it
changes.

**Where the index lives.** One folder per (photo folder, model) pair under the index root
(default ``image_index`` in the platform's cache folder for ``grounded_text``, platformdirs'
``user_cache_dir``: ``~/.cache/grounded_text`` on Linux, or ``$XDG_CACHE_HOME/grounded_text``,
``~/Library/Caches/grounded_text`` on macOS, ``%LOCALAPPDATA%\\grounded_text\\Cache`` on
Windows; ``index_dir`` or ``--index DIR`` chooses another), named
after the photo folder and a digest of its absolute path and of the model's
``image_fingerprint``. An index made with another model (another image tower or image
network), or before photos were turned upright by their EXIF orientation, therefore never answers
for this one; every file also records the folder and the
fingerprint, and one that records others is ignored.

**How photos are encoded.** Through the ``features`` command's input pipeline
(:mod:`grounded_text.photos.encoding`): files read, headers probed, photos decoded and resized in a
parallel ``tf.data`` map, batched and prefetched while the network runs, then the model's image
tower. The network's pooled features of each photo are kept in a cache per (photo folder, network)
beside the indexes (:mod:`grounded_text.photos.feature_cache`, ``ROOT/features/``: 4 bytes per
feature, 5,120 bytes a photo for Lite0): another model whose tower records the same network (both
shipped models do) indexes the folder by running its tower alone (``features_reused`` in the
report), with the vectors it would have computed itself. An index that is complete is searched
without building the image network or loading the image tower.

**Durability.** Each batch of photos is written as its own part file
(``parts/part-NNNNNN.npz``, ``grounded_text.vision.sinks.PartFiles``, the feature store's
resumable parts too) with an atomic rename once it is encoded, so a run killed at any
point (Ctrl-C, SIGKILL, a power cut) keeps every batch it finished and the next run resumes
from there. At the end of a run the parts are merged into ``index.npz`` (again an atomic
rename), then removed. Files are read with ``np.load(allow_pickle=False)`` after their
declared sizes are checked (:mod:`grounded_text.photos.table`): an index file never runs code.
One process at a time updates an index (filelock's ``FileLock`` on its ``lock`` file: ``flock``
on POSIX, ``msvcrt.locking`` on Windows; another gets :class:`IndexBusyError`).

**Size.** Per photo: N float32 (the embedding: 512 bytes for the 128-d shipped models), plus
two int64 (size and time, 16 bytes), plus an int64 end offset and the UTF-8 bytes of its
relative path (about 8 + 30 bytes): 565 bytes per photo measured on the 1,000 Flickr8k test
photos with a 128-d model, about 0.57 GB for a million photos. The whole matrix is held in
memory to search.

**Search** is exact: one float32 matrix product of the query's unit vector with every
photo's unit vector (so the score is the cosine, the same as
``enc.similarity(enc.encode(query), enc.encode_images(paths))``), then the top k; ties are
ordered by path. No approximation: a million 128-d photos take about a tenth of a second.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import filelock
import numpy as np
import platformdirs

from grounded_text.photos.encoding import network_features
from grounded_text.photos.feature_cache import FEATURES_DIR, FeatureCache
from grounded_text.photos.queries import as_queries, embed_queries, kept_rows
from grounded_text.photos.table import Table, gather, plan_update, read_tables, write_table
from grounded_text.serving import images
from grounded_text.utils.progress import CountProgress, interactive
from grounded_text.vision.folders import PhotoFile, scan_photos
from grounded_text.vision.sinks import PartFiles

__all__ = ["INDEX_FILE", "ImageIndex", "IndexBusyError", "IndexLinkError", "IndexReport", "SearchHit",
           "default_index_root", "index_folder"]

INDEX_FILE = "index.npz"
PARTS_DIR = "parts"
LOCK_FILE = "lock"
#: Photos per tower call (and per part file) when their network features are reused: the tower is a
#: matrix product, so large batches; small enough that a part stays a few MB.
REUSED_BATCH = 4096


class IndexBusyError(RuntimeError):
    """Another process is updating the same index (it holds its lock file).

    Example:
      >>> issubclass(IndexBusyError, RuntimeError)
      True
    """


class IndexLinkError(ValueError):
    """The index folder holds a link where the index keeps its files (``parts``, ``lock``,
    ``index.npz``), or a part file that is a link: writing or removing through it would change
    files outside the index. Nothing is written or removed.

    Example:
      >>> issubclass(IndexLinkError, ValueError)
      True
    """


class SearchHit(NamedTuple):
    """One result of :meth:`ImageIndex.search` (a tuple: ``path, cosine = hit``).

    Attributes:
      path: the photo's absolute path (``str``).
      cosine: its cosine similarity with the query (``float``, in [-1, 1]).

    Example:
      >>> path, cosine = SearchHit("/photos/dog.jpg", 0.41)
      >>> cosine
      0.41
    """

    path: str
    cosine: float


@dataclasses.dataclass
class IndexReport:
    """What :meth:`ImageIndex.update` did.

    Attributes:
      folder: the photo folder (absolute).
      index_dir: the folder holding this (photo folder, model) index.
      photos: photos in the index now, the ones a search ranks.
      encoded: photos encoded by this run (new or changed).
      features_reused: of ``encoded``, photos whose image-network features were stored already (by
        any model of the same network, :mod:`grounded_text.photos.feature_cache`): only the image
        tower ran for them.
      reused: photos taken from the stored index without being read (unchanged).
      resumed: of ``reused``, photos that an interrupted run had encoded.
      dropped: stored photos left out because they are gone or changed (a changed one is
        also counted in ``encoded``).
      failed: ``(relative path, reason)`` of files found unreadable by this run; skipped.
      known_failed: ``(relative path, reason)`` of files found unreadable by an earlier run and
        unchanged since; skipped without being read again.
      discarded: stored index files that could not be read (damaged, another format, folder or
        model); ignored, and their photos encoded again.
      seconds: the run's wall time.

    Example:
      >>> IndexReport(Path("photos"), Path("idx"), photos=3, encoded=1, reused=2, seconds=0.5).summary()
      'Index: 3 photos (1 encoded, 2 reused) in 0.5 s; idx'
    """

    folder: Path
    index_dir: Path
    photos: int = 0
    encoded: int = 0
    features_reused: int = 0
    reused: int = 0
    resumed: int = 0
    dropped: int = 0
    failed: list = dataclasses.field(default_factory=list)
    known_failed: list = dataclasses.field(default_factory=list)
    discarded: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        """One line: photos indexed, encoded, reused, dropped, skipped, and the time."""
        skipped = len(self.failed) + len(self.known_failed)
        parts = [f"{self.encoded} encoded", f"{self.reused} reused"]
        if self.features_reused:
            parts.insert(1, f"{self.features_reused} features reused")
        if self.resumed:
            parts[-1] += f" ({self.resumed} from an interrupted run)"
        if self.dropped:
            parts.append(f"{self.dropped} dropped (removed or changed)")
        if skipped:
            parts.append(f"{skipped} unreadable skipped")
        return f"Index: {self.photos} photos ({', '.join(parts)}) in {self.seconds:.1f} s; {self.index_dir}"


def default_index_root() -> Path:
    """``image_index`` in the user's cache folder for ``grounded_text``
    (``platformdirs.user_cache_dir``): ``$XDG_CACHE_HOME/grounded_text`` (an absolute
    ``XDG_CACHE_HOME`` only, as the XDG specification says) or ``~/.cache/grounded_text`` on
    Linux, ``~/Library/Caches/grounded_text`` on macOS, ``%LOCALAPPDATA%\\grounded_text\\Cache``
    on Windows.

    Example:
      >>> default_index_root().name
      'image_index'
    """
    # appauthor=False: no publisher folder above the application's on Windows.
    return Path(platformdirs.user_cache_dir("grounded_text", appauthor=False)) / "image_index"


def index_folder(folder: str | os.PathLike, fingerprint: str, index_dir: str | os.PathLike | None = None) -> Path:
    """The folder holding the index of ``folder``'s photos for a model of ``fingerprint``.

    Args:
      folder: the photo folder (resolved to its absolute path).
      fingerprint: the model's ``image_fingerprint``.
      index_dir: the index root (default :func:`default_index_root`).

    Returns:
      ``ROOT/<folder name>-<16 hex digits of SHA-256(absolute folder, fingerprint)>``.

    Example:
      >>> index_folder("/photos/Summer 2024", "db39509ff269b1c7", "/cache").name
      'Summer_2024-...'
      >>> a = index_folder("/photos/Summer 2024", "db39509ff269b1c7", "/cache")
      >>> a == index_folder("/photos/Summer 2024", "0123456789abcdef", "/cache")   # another model
      False
    """
    folder = Path(folder).expanduser().resolve()
    root = default_index_root() if index_dir is None else Path(index_dir).expanduser()
    digest = hashlib.sha256(f"{folder}\0{fingerprint}".encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", folder.name)[:40].lstrip(".") or "root"
    return root / f"{name}-{digest}"


class ImageIndex:
    """The photos of a folder in a model's space, cached on disk, searched by sentences.

    Build it, call :meth:`update` (new photos encoded, removed or changed ones dropped,
    unchanged ones reused), then :meth:`search` as often as needed; :meth:`search` runs
    :meth:`update` first if it has not run. See the module's docstring for what is indexed,
    where the index lives, its size per photo (N float32 plus about 60 bytes) and its
    durability.

    Args:
      folder: the photo folder (searched recursively).
      encoder: a ``TextEncoder`` with an image tower (``gt.load(...)``): its ``encode``,
        ``image_fingerprint`` and image side (network, tower) are used.
      index_dir: the index root (default :func:`default_index_root`); each (folder, model)
        pair gets its own folder in it (:func:`index_folder`).
      batch_size: photos per network call, and per part file written.

    Raises:
      FileNotFoundError: ``folder`` does not exist. NotADirectoryError: it is not a folder.
      NoImageTowerError (a ValueError): the model has no image tower
        (``grounded_text.serving.images``).
      ValueError: ``batch_size`` < 1.

    Example:
      >>> import tempfile
      >>> import numpy as np, tensorflow as tf
      >>> import grounded_text as gt
      >>> folder = Path(tempfile.mkdtemp())
      >>> for name, colour in [("red.png", (220, 30, 30)), ("green.png", (30, 200, 40))]:
      ...     _ = tf.io.write_file(str(folder / name), tf.io.encode_png(np.full((64, 64, 3), colour, np.uint8)))
      >>> index = ImageIndex(folder, gt.load("vete_bow_flickr8k"), index_dir=folder / ".index")
      >>> index.update(show_progress_bar=False).encoded
      2
      >>> hits = index.search("a red wall", top_k=2)
      >>> sorted(Path(h.path).name for h in hits), hits[0].cosine >= hits[1].cosine
      (['green.png', 'red.png'], True)
      >>> index.update(show_progress_bar=False).reused      # unchanged photos: nothing encoded
      2
      >>> import shutil; shutil.rmtree(folder)
    """

    def __init__(self, folder: str | os.PathLike, encoder, index_dir: str | os.PathLike | None = None,
                 *, batch_size: int = 32):
        folder = Path(folder).expanduser()
        if not folder.exists():
            raise FileNotFoundError(f"{str(folder)!r} does not exist.")
        if not folder.is_dir():
            raise NotADirectoryError(f"{str(folder)!r} is not a folder.")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        self.folder = folder.resolve()
        self.encoder = encoder
        self.batch_size = int(batch_size)
        self.fingerprint = str(encoder.image_fingerprint)
        self.index_dir = index_folder(self.folder, self.fingerprint, index_dir)
        self._rels: list[str] | None = None
        self._embeddings: np.ndarray | None = None

    # -- what is searched

    def __len__(self) -> int:
        return 0 if self._rels is None else len(self._rels)

    @property
    def paths(self) -> list[str]:
        """The indexed photos' absolute paths, in the order of :attr:`embeddings` (sorted)."""
        self._ensure_loaded()
        return [str(self.folder / rel) for rel in self._rels]

    @property
    def embeddings(self) -> np.ndarray:
        """float32 [photos, N], unit rows, in the order of :attr:`paths`."""
        self._ensure_loaded()
        return self._embeddings

    def _ensure_loaded(self) -> None:
        if self._rels is None:
            self.update()

    # -- building

    def _refuse_links(self) -> None:
        """Refuses links where the index writes and removes files: a ``parts`` link would take the
        new parts, and the merge's removal of every ``part-NNNNNN.npz``, to the folder it names; a
        ``lock`` link (even dangling) would create its target; an ``index.npz`` link would be read.

        Raises:
          IndexLinkError: one line naming the link and where it points.
        """
        parts = self.index_dir / PARTS_DIR
        names = [parts, self.index_dir / LOCK_FILE, self.index_dir / INDEX_FILE]
        if parts.is_dir() and not parts.is_symlink():
            names += [p for p in parts.iterdir() if PartFiles.PATTERN.match(p.name)]
        for path in names:
            if path.is_symlink():
                raise IndexLinkError(
                    f"the index folder {str(self.index_dir)!r} holds a symbolic link {path.name!r} (to "
                    f"{os.readlink(path)!r}); an index writes and removes files only inside its own folder: remove "
                    "the link and run again.")

    @contextlib.contextmanager
    def _lock(self):
        """Holds ``lock`` in the index folder for one update (``filelock.FileLock``, not waiting:
        a lock held elsewhere is :class:`IndexBusyError`). The operating system releases it when
        the process ends, however it ends. The name must hold nothing or a plain file with one link:
        the lock opens (and truncates) whatever the name leads to."""
        path = self.index_dir / LOCK_FILE
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None and (not stat.S_ISREG(st.st_mode) or st.st_nlink != 1):
            raise IndexLinkError(f"the index folder {str(self.index_dir)!r}: {LOCK_FILE!r} is not a plain file (a "
                                 "symbolic link, a hard link or not a regular file); remove it and run again.")
        lock = filelock.FileLock(path, timeout=0)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise IndexBusyError(f"another process is updating the index {str(self.index_dir)!r}; wait for it "
                                 "to finish, or give another index folder.") from None
        try:
            yield
        finally:
            lock.release()

    @property
    def _parts(self) -> PartFiles:
        return PartFiles(self.index_dir / PARTS_DIR)

    def _read_stored(self, report: IndexReport) -> tuple[list[Table | None], list[Path]]:
        """The stored tables, ``index.npz`` first (``None`` when absent or unreadable) then the
        parts in write order (a later row of a path replaces an earlier one), and the part files.
        Unreadable files are listed in ``report.discarded``."""
        parts = self._parts.paths()
        return read_tables(self.index_dir / INDEX_FILE, parts, self.folder, self.fingerprint, report.discarded), parts

    def update(self, show_progress_bar: bool | None = None) -> IndexReport:
        """Brings the index up to date with the folder, and loads it for :meth:`search`.

        New and changed photos are encoded, batch by batch, each batch written to disk as it
        is done; photos that are gone are dropped; unchanged ones are reused unread.
        Interrupted (``KeyboardInterrupt``, a kill), it keeps every finished batch, and the
        next call resumes from there.

        Args:
          show_progress_bar: progress on stderr while photos are encoded; ``None`` (default):
            in a terminal or a notebook only.

        Returns:
          An :class:`IndexReport`.

        Raises:
          FileNotFoundError / NotADirectoryError: the folder is gone.
          IndexBusyError: another process is updating this index.
          IndexLinkError (a ValueError): a link in the index folder (``parts``, ``lock``,
            ``index.npz`` or a part file); nothing is written or removed.
          OSError: the index folder cannot be written (permissions, a full disk); the batches
            written so far stay.
          KeyboardInterrupt: passed on, after the finished batches are on disk.
        """
        start = time.perf_counter()
        report = IndexReport(self.folder, self.index_dir)
        photos = scan_photos(self.folder)
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self._refuse_links()
        with self._lock():
            self._refuse_links()  # again under the lock: another process may have changed the folder
            tables, parts = self._read_stored(report)
            plan = plan_update(photos, tables)
            report.reused, report.resumed, report.dropped = len(plan.keep), plan.resumed, plan.dropped
            report.known_failed = [(f[0], f[3]) for f in plan.known_failed]
            keep, known_failed, todo = plan.keep, plan.known_failed, plan.todo
            next_part = self._parts.next_number()
            new_rows, new_vectors, new_failed = self._encode_all(todo, next_part, show_progress_bar, photos, report)
            report.encoded = len(new_rows)
            report.failed = [(f[0], f[3]) for f in new_failed]
            dim = self._dim(np.concatenate(new_vectors) if new_vectors else None, tables)
            merged = gather(tables, keep, new_rows, new_vectors, sorted(known_failed + new_failed), dim)
            if (report.encoded or report.failed or report.dropped or report.discarded or parts
                    or not (self.index_dir / INDEX_FILE).is_file()):
                write_table(self.index_dir / INDEX_FILE, self.folder, self.fingerprint, merged)
                self._parts.remove()  # oldest first: a kill meanwhile leaves parts the merged file holds
        self._rels, self._embeddings = merged.rels, merged.embeddings
        report.photos = len(merged.rels)
        report.seconds = time.perf_counter() - start
        return report

    def _encode_all(self, todo: list[PhotoFile], next_part: int, show_progress_bar: bool | None,
                    photos: list[PhotoFile], report: IndexReport) -> tuple[list[PhotoFile], list, list[tuple]]:
        """Encodes ``todo``, each batch written as part ``next_part``, ``next_part + 1``, ... as it is done.

        Photos whose network features are stored (:class:`~grounded_text.photos.feature_cache.FeatureCache`
        of this folder and the model's network) go through the image tower alone (counted in
        ``report.features_reused``); the others through the network's input pipeline
        (:func:`~grounded_text.photos.encoding.network_features`), their features stored for the
        next model. Nothing is built or read when ``todo`` is empty. An encoder without a model's
        image side (any object with ``encode_images``) gets the photos, read here, batch by batch.

        Returns:
          (the photos encoded, their float32 [b, N] batches, ``(rel, size, mtime_ns, reason)`` of
          the unreadable ones).
        """
        new_rows: list[PhotoFile] = []
        new_vectors: list[np.ndarray] = []
        if not todo:
            return new_rows, new_vectors, []
        number = [next_part]
        progress = CountProgress(len(todo), "index", "photo",
                                 enabled=interactive() if show_progress_bar is None else bool(show_progress_bar))

        def write(batch: list[PhotoFile], vectors: np.ndarray) -> None:
            table = Table([p.rel for p in batch], np.array([p.size for p in batch], np.int64),
                          np.array([p.mtime_ns for p in batch], np.int64), vectors, [])
            write_table(self._parts.path(number[0]), self.folder, self.fingerprint, table)
            number[0] += 1
            new_rows.extend(batch)
            new_vectors.append(vectors)
            progress.add(len(batch))

        try:
            if hasattr(self.encoder, "_image_side"):
                failed = self._through_network(todo, photos, write, report)
            else:
                failed = self._through_encode_images(todo, write, progress)
        finally:
            progress.close()
        by_rel = {p.rel: p for p in todo}
        return new_rows, new_vectors, [(rel, by_rel[rel].size, by_rel[rel].mtime_ns, reason) for rel, reason in failed]

    def _through_network(self, todo: list[PhotoFile], photos: list[PhotoFile], write, report: IndexReport) -> list:
        """``todo`` through the stored network features or the network's input pipeline, then the
        tower; returns ``(rel, reason)`` of the unreadable photos."""
        side = self.encoder._image_side()

        def computed(batch: list[PhotoFile], features: np.ndarray) -> None:
            cache.add(batch, features)
            write(batch, side.embed_features(features))

        fingerprint = side.network_fingerprint
        cache = FeatureCache(index_folder(self.folder, fingerprint, self.index_dir.parent / FEATURES_DIR),
                             self.folder, fingerprint)
        with cache:
            found, features, missing = cache.lookup(todo)
            for b in range(0, len(found), REUSED_BATCH):
                write(found[b:b + REUSED_BATCH], side.embed_features(features[b:b + REUSED_BATCH]))
            report.features_reused = len(found)
            failed = network_features(side, self.folder, missing, self.batch_size, computed)  # write() counts
            cache.merge(photos)
        return failed

    def _through_encode_images(self, todo: list[PhotoFile], write, progress) -> list:
        """``todo`` read here (``read_image``) and handed to the encoder's ``encode_images`` batch by
        batch; returns ``(rel, reason)`` of the unreadable photos."""
        failed = []
        for b in range(0, len(todo), self.batch_size):
            good, arrays = [], []
            for photo in todo[b:b + self.batch_size]:
                try:
                    arrays.append(images.read_image(self.folder / photo.rel))
                    good.append(photo)
                except images.ImageReadError as e:
                    failed.append((photo.rel, " ".join(e.reason.split())[:300]))
                    progress.add(1)
            if good:
                write(good, np.asarray(self.encoder.encode_images(arrays, batch_size=self.batch_size,
                                                                  show_progress_bar=False, normalize_embeddings=True),
                                       dtype=np.float32))
        return failed

    def _dim(self, vectors: np.ndarray | None, tables: list) -> int:
        """N: from encoded vectors, else a stored table, else the encoder's ``dim``."""
        if vectors is not None and vectors.ndim == 2 and len(vectors):
            return int(vectors.shape[1])
        for table in tables:
            if table is not None and len(table.rels):
                return int(table.embeddings.shape[1])
        return int(getattr(self.encoder, "dim", 0) or 0)

    # -- searching

    def search(self, query, top_k: int = 5, *, exclude: Sequence[str] = ()) -> list[SearchHit] | list[list[SearchHit]]:
        """The photos closest to a query (or to each of several), best first.

        Args:
          query: one query: a sentence (``str``), a photo (a ``pathlib.Path``, bytes, a PIL
            image, a uint8 array [H, W, 3]; a ``str`` is always a sentence), a float vector [N],
            a :class:`~grounded_text.photos.queries.Query` or a list of ``(term, weight)`` pairs
            (a mix, weights negative too: the renormalised weighted sum of the terms' unit
            vectors); or several: a list of such queries, a float array [Q, N].
          top_k: photos per query (>= 1); fewer when the index holds fewer.
          exclude: glob patterns (``fnmatch``, ``*`` matching ``/`` too) matched against each
            photo's path relative to the folder: matching photos are left out of the results
            (they stay in the index).

        Returns:
          For one query, a list of up to ``top_k`` :class:`SearchHit` ``(path, cosine)``,
          cosine descending (ties by path); for several, one such list per query.

        Raises:
          ValueError: an empty sentence, an empty list, ``top_k`` < 1, a model whose text
            and image embeddings differ in width, terms that cancel out, a photo that cannot be
            read (ImageReadError).
          TypeError: a query of none of these kinds.
        """
        queries, single = as_queries(query)
        if int(top_k) < 1:
            raise ValueError(f"search: top_k must be >= 1, got {top_k}.")
        self._ensure_loaded()
        q = embed_queries(self.encoder, queries, self.batch_size)
        out = []
        if len(self._rels) and q.shape[1] != self._embeddings.shape[1]:
            raise ValueError(f"search: the model's sentences are {q.shape[1]}-d but its photos "
                             f"{self._embeddings.shape[1]}-d.")
        rows = kept_rows(self._rels, exclude)
        scores = q @ self._embeddings[rows].T if len(rows) else np.zeros((len(q), 0), np.float32)
        k = min(int(top_k), scores.shape[1])
        for row in scores:
            if k == 0:
                out.append([])
                continue
            candidates = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
            # Among the k returned, equal cosines are ordered by path (an exact tie at the k-th
            # place may keep either photo).
            best = candidates[np.lexsort((candidates, -row[candidates]))]
            out.append([SearchHit(str(self.folder / self._rels[rows[i]]), float(row[i])) for i in best])
        return out[0] if single else out
