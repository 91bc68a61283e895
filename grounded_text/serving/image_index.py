"""Search a folder of photos by a sentence: a cached, incremental index of the photos' embeddings.

::

    import grounded_text as gt
    from grounded_text.serving.image_index import ImageIndex

    enc = gt.load("vete_bow_flickr8k")
    index = ImageIndex("~/Pictures", enc)
    report = index.update()                      # encodes new or changed photos only
    for path, cosine in index.search("a dog runs on the grass", top_k=5):
        print(f"{cosine:.3f}  {path}")

**What is indexed.** The files under the folder, recursively, whose extension is one of
:data:`PHOTO_EXTENSIONS` (any case). Names starting with ``.`` (hidden files and folders) are
left out, and links to folders are not followed (a link to a file is indexed as that file).
Each photo is keyed by its path relative to the folder, its size and its modification time
(``st_mtime_ns``): a photo whose size or time changed is encoded again, a photo that is gone
is dropped, an unchanged one is reused without being read (a rewrite that keeps both the size and
the time is not seen, as with rsync's quick check). A file that cannot be decoded is
reported, skipped and remembered with its size and time: it is tried again only once it
changes.

**Where the index lives.** One folder per (photo folder, model) pair under the index root
(default ``$XDG_CACHE_HOME/grounded_text/image_index``, else
``~/.cache/grounded_text/image_index``; ``index_dir`` or ``--index DIR`` chooses another), named
after the photo folder and a digest of its absolute path and of the model's
``image_fingerprint``. An index made with another model (another image tower or image
network) therefore never answers for this one; every file also records the folder and the
fingerprint, and one that records others is ignored.

**Durability.** Each batch of photos is written as its own part file
(``parts/part-NNNNNN.npz``) with an atomic rename once it is encoded, so a run killed at any
point (Ctrl-C, SIGKILL, a power cut) keeps every batch it finished and the next run resumes
from there. At the end of a run the parts are merged into ``index.npz`` (again an atomic
rename), then removed. Files are read with ``np.load(allow_pickle=False)`` after their
declared sizes are checked (:func:`grounded_text.data.features.check_npz_members`): an index
file never runs code. One process at a time updates an index (a POSIX ``flock`` on its ``lock`` file;
another gets :class:`IndexBusyError`; no lock is taken where ``fcntl`` is missing, on Windows).

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
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from grounded_text.data.features import check_npz_members
from grounded_text.utils.durable import atomic_write
from grounded_text.utils.progress import CountProgress, interactive

__all__ = ["PHOTO_EXTENSIONS", "ImageIndex", "IndexBusyError", "IndexReport", "PhotoFile", "SearchHit",
           "default_index_root", "has_photos", "index_folder", "scan_photos"]

#: The file extensions indexed (compared in lower case).
PHOTO_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp")
#: The layout of the index files; a file of another format is ignored (and rebuilt).
INDEX_FORMAT = 1
INDEX_FILE = "index.npz"
PARTS_DIR = "parts"
LOCK_FILE = "lock"
_PART = re.compile(r"^part-(\d{6})\.npz$")
#: Every member of an index or part file (all plain arrays: no pickles).
_MEMBERS = ("format", "folder", "fingerprint", "paths_utf8", "path_ends", "sizes", "mtimes_ns", "embeddings",
            "failed_utf8", "failed_ends", "failed_sizes", "failed_mtimes_ns", "reasons_utf8", "reason_ends")


class IndexBusyError(RuntimeError):
    """Another process is updating the same index (it holds its lock file).

    Example:
      >>> issubclass(IndexBusyError, RuntimeError)
      True
    """


class PhotoFile(NamedTuple):
    """One photo of the folder, as the index keys it.

    Attributes:
      rel: the path relative to the folder, with ``/`` separators.
      size: ``st_size`` in bytes.
      mtime_ns: ``st_mtime_ns``.

    Example:
      >>> PhotoFile("holiday/beach.jpg", 48213, 1733300000000000000).rel
      'holiday/beach.jpg'
    """

    rel: str
    size: int
    mtime_ns: int


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
        if self.resumed:
            parts[-1] += f" ({self.resumed} from an interrupted run)"
        if self.dropped:
            parts.append(f"{self.dropped} dropped (removed or changed)")
        if skipped:
            parts.append(f"{skipped} unreadable skipped")
        return f"Index: {self.photos} photos ({', '.join(parts)}) in {self.seconds:.1f} s; {self.index_dir}"


def default_index_root() -> Path:
    """``$XDG_CACHE_HOME/grounded_text/image_index`` (an absolute ``XDG_CACHE_HOME`` only, as
    the XDG specification says), else ``~/.cache/grounded_text/image_index``.

    Example:
      >>> default_index_root().parts[-2:]
      ('grounded_text', 'image_index')
    """
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path("~/.cache").expanduser()
    return root / "grounded_text" / "image_index"


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


def _is_photo(name: str) -> bool:
    return not name.startswith(".") and os.path.splitext(name)[1].lower() in PHOTO_EXTENSIONS


def scan_photos(folder: str | os.PathLike) -> list[PhotoFile]:
    """The photos under ``folder`` (recursively; hidden names left out, folder links not
    followed), sorted by relative path.

    Raises:
      FileNotFoundError: ``folder`` does not exist. NotADirectoryError: it is not a folder.

    Example:
      >>> import tempfile
      >>> folder = Path(tempfile.mkdtemp())
      >>> for name in ["a.jpg", "sub/b.PNG", ".hidden/c.jpg", "notes.txt"]:
      ...     (folder / name).parent.mkdir(parents=True, exist_ok=True)
      ...     _ = (folder / name).write_bytes(b"not decoded here")
      >>> [p.rel for p in scan_photos(folder)]
      ['a.jpg', 'sub/b.PNG']
      >>> has_photos(folder), has_photos(folder / "sub"), has_photos(folder / "missing")
      (True, True, False)
      >>> import shutil; shutil.rmtree(folder)
    """
    folder = Path(folder).expanduser()
    if not folder.exists():
        raise FileNotFoundError(f"{str(folder)!r} does not exist.")
    if not folder.is_dir():
        raise NotADirectoryError(f"{str(folder)!r} is not a folder.")
    out = []
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not _is_photo(name):
                continue
            path = os.path.join(top, name)
            try:
                st = os.stat(path)  # a link to a file counts as that file
            except OSError:  # a dangling link, or removed while we walk
                continue
            if not os.path.isfile(path):
                continue
            out.append(PhotoFile(Path(os.path.relpath(path, folder)).as_posix(), int(st.st_size), int(st.st_mtime_ns)))
    out.sort(key=lambda p: p.rel)
    return out


def has_photos(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds at least one photo (:func:`scan_photos`' rule); stops at the first.

    Example:
      >>> import tempfile
      >>> has_photos(tempfile.mkdtemp())
      False
    """
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if any(_is_photo(name) and os.path.isfile(os.path.join(top, name)) for name in files):
            return True
    return False


# --- index files ---------------------------------------------------------------------------------


def _pack(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings → (uint8 [total UTF-8 bytes], int64 [n] end offsets): a compact, pickle-free form."""
    encoded = [s.encode("utf-8", "surrogateescape") for s in strings]
    ends = np.cumsum([len(b) for b in encoded], dtype=np.int64) if encoded else np.zeros(0, np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), ends


def _unpack(data: np.ndarray, ends: np.ndarray) -> list[str]:
    raw = data.tobytes()
    if ends.ndim != 1 or (len(ends) and (ends[-1] != len(raw) or np.any(np.diff(ends) < 0) or ends[0] < 0)):
        raise ValueError("string offsets do not match the string data")
    starts = np.concatenate([[0], ends[:-1]]) if len(ends) else ends
    return [raw[s:e].decode("utf-8", "surrogateescape") for s, e in zip(starts.tolist(), ends.tolist())]


@dataclasses.dataclass
class _Table:
    """The rows of one index or part file."""

    rels: list
    sizes: np.ndarray  # int64 [n]
    mtimes: np.ndarray  # int64 [n]
    embeddings: np.ndarray  # float32 [n, N]
    failed: list  # [(rel, size, mtime_ns, reason)]


def _write_table(path: Path, folder: Path, fingerprint: str, table: _Table) -> None:
    """Writes ``table`` to ``path`` atomically (temp file, fsync, rename)."""
    paths_utf8, path_ends = _pack(table.rels)
    failed_utf8, failed_ends = _pack([f[0] for f in table.failed])
    reasons_utf8, reason_ends = _pack([f[3] for f in table.failed])
    arrays = {
        "format": np.int64(INDEX_FORMAT), "folder": np.array(str(folder)), "fingerprint": np.array(fingerprint),
        "paths_utf8": paths_utf8, "path_ends": path_ends,
        "sizes": np.asarray(table.sizes, np.int64), "mtimes_ns": np.asarray(table.mtimes, np.int64),
        "embeddings": np.asarray(table.embeddings, np.float32),
        "failed_utf8": failed_utf8, "failed_ends": failed_ends,
        "failed_sizes": np.array([f[1] for f in table.failed], np.int64),
        "failed_mtimes_ns": np.array([f[2] for f in table.failed], np.int64),
        "reasons_utf8": reasons_utf8, "reason_ends": reason_ends,
    }
    atomic_write(path, lambda f: np.savez(f, **arrays))


def _read_table(path: Path, folder: Path, fingerprint: str) -> _Table:
    """Reads an index or part file.

    Raises:
      ValueError: damaged, of another format, or made for another folder or model.
    """
    check_npz_members(path, _MEMBERS)  # declared sizes against the data, before anything is allocated
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [m for m in _MEMBERS if m not in z.files]
            if missing:
                raise ValueError(f"members {missing} are missing")
            if int(z["format"]) != INDEX_FORMAT:
                raise ValueError(f"index format {int(z['format'])}, this version reads {INDEX_FORMAT}")
            if str(z["fingerprint"]) != fingerprint or str(z["folder"]) != str(folder):
                raise ValueError(f"made for {str(z['folder'])!r} with model {str(z['fingerprint'])}")
            rels = _unpack(z["paths_utf8"], z["path_ends"])
            sizes, mtimes = z["sizes"].astype(np.int64), z["mtimes_ns"].astype(np.int64)
            embeddings = z["embeddings"].astype(np.float32, copy=False)
            failed = list(zip(_unpack(z["failed_utf8"], z["failed_ends"]), z["failed_sizes"].tolist(),
                              z["failed_mtimes_ns"].tolist(), _unpack(z["reasons_utf8"], z["reason_ends"])))
    except (OSError, KeyError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"not a readable index file ({e})") from None
    if embeddings.ndim != 2 or not (len(rels) == len(sizes) == len(mtimes) == len(embeddings)):
        raise ValueError(f"rows disagree: {len(rels)} paths, embeddings {embeddings.shape}")
    if not np.isfinite(embeddings).all():
        raise ValueError("non-finite embeddings")
    return _Table(rels, sizes, mtimes, embeddings, failed)


def _reason(error: Exception, path: Path) -> str:
    """Why a file could not be read, in one short line: the path (the report names it already) and
    TensorFlow's op decoration (``{{function_node ...}}``, ``[Op:DecodeImage]``) left out."""
    text = str(error)
    for prefix in (f"{str(path)!r}: ", f"{str(path)}: "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    text = re.sub(r"\{\{[^}]*\}\}\s*|\s*\[Op:[^\]]*\]( name:)?", "", text)
    return " ".join(text.split())[:300]


def _plan(photos: list[PhotoFile], tables: list, report: IndexReport) -> tuple[dict, list, list]:
    """What to reuse and what to encode: each photo against the newest stored row of its path.

    Fills ``report``'s ``reused``, ``resumed``, ``known_failed`` and ``dropped``.

    Returns:
      (the reused rows, path → (table, row); ``(rel, size, mtime_ns, reason)`` of unreadable
      files unchanged since they failed; the photos to encode).
    """
    # The newest stored row of each path: ("ok", table, row) or ("failed", size, mtime, reason).
    latest: dict[str, tuple] = {}
    from_part: set[str] = set()
    for t, table in enumerate(tables):
        if table is None:
            continue
        for i, rel in enumerate(table.rels):
            latest[rel] = ("ok", t, i)
            if t > 0:  # tables[0] is index.npz; the others are an interrupted run's parts
                from_part.add(rel)
            else:
                from_part.discard(rel)
        for rel, size, mtime, reason in table.failed:
            latest[rel] = ("failed", size, mtime, reason)
            from_part.discard(rel)
    keep: dict[str, tuple[int, int]] = {}
    known_failed: list[tuple] = []
    todo: list[PhotoFile] = []
    for photo in photos:
        entry = latest.get(photo.rel)
        if entry is not None and entry[0] == "ok":
            table = tables[entry[1]]
            if (int(table.sizes[entry[2]]), int(table.mtimes[entry[2]])) == (photo.size, photo.mtime_ns):
                keep[photo.rel] = (entry[1], entry[2])
                continue
        elif entry is not None and (entry[1], entry[2]) == (photo.size, photo.mtime_ns):
            known_failed.append((photo.rel, photo.size, photo.mtime_ns, entry[3]))
            continue
        todo.append(photo)
    report.reused = len(keep)
    report.resumed = sum(1 for rel in keep if rel in from_part)
    report.known_failed = [(f[0], f[3]) for f in known_failed]
    report.dropped = len(latest) - len(keep) - len(known_failed)
    return keep, known_failed, todo


def _gather(tables: list, keep: dict[str, tuple[int, int]], new_rows: list[PhotoFile], new_vectors: list,
            failed: list, dim: int) -> _Table:
    """The live index: the reused rows (``keep``: path → (table, row)), gathered table by table,
    and the new ones, sorted by path.

    Args:
      tables: the stored tables. keep: the reused rows. new_rows, new_vectors: the photos encoded
        now and their float32 [b, N] batches. failed: ``(rel, size, mtime_ns, reason)`` of the
        unreadable files. dim: N.
    """
    rels, embeddings = [], [np.zeros((0, dim), np.float32)]
    sizes, mtimes = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    by_table: dict[int, list[int]] = {}
    for t, i in keep.values():
        by_table.setdefault(t, []).append(i)
    for t, rows in by_table.items():
        index = np.asarray(rows, np.int64)
        embeddings.append(tables[t].embeddings[index])
        sizes.append(tables[t].sizes[index])
        mtimes.append(tables[t].mtimes[index])
        rels.extend(tables[t].rels[i] for i in rows)
    embeddings.extend(v for v in new_vectors if len(v))
    sizes.append(np.array([p.size for p in new_rows], np.int64))
    mtimes.append(np.array([p.mtime_ns for p in new_rows], np.int64))
    rels.extend(p.rel for p in new_rows)
    order = sorted(range(len(rels)), key=rels.__getitem__)
    index = np.asarray(order, np.int64)
    return _Table([rels[i] for i in order], np.concatenate(sizes)[index], np.concatenate(mtimes)[index],
                  np.concatenate(embeddings).astype(np.float32, copy=False)[index], failed)


# --- the index -----------------------------------------------------------------------------------


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
        ``encode_images`` and ``image_fingerprint`` are used.
      index_dir: the index root (default :func:`default_index_root`); each (folder, model)
        pair gets its own folder in it (:func:`index_folder`).
      batch_size: photos per ``encode_images`` call, and per part file written.

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

    @contextlib.contextmanager
    def _lock(self):
        """Holds ``lock`` in the index folder for one update (POSIX ``flock``; elsewhere none)."""
        try:
            import fcntl  # noqa: PLC0415 (POSIX only)
        except ImportError:  # Windows: no advisory locks in the standard library
            yield
            return
        fd = os.open(self.index_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise IndexBusyError(f"another process is updating the index {str(self.index_dir)!r}; wait for it "
                                     "to finish, or give another index folder.") from None
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _part_files(self) -> list[Path]:
        parts = self.index_dir / PARTS_DIR
        if not parts.is_dir():
            return []
        return sorted(p for p in parts.iterdir() if _PART.match(p.name))

    def _read_stored(self, report: IndexReport) -> tuple[list[_Table | None], list[Path]]:
        """The stored tables, ``index.npz`` first (``None`` when absent or unreadable) then the
        parts in write order (a later row of a path replaces an earlier one), and the part files.
        Unreadable files are listed in ``report.discarded``."""
        tables, parts = [], self._part_files()
        for path in [self.index_dir / INDEX_FILE, *parts]:
            table = None
            if path.is_file():
                try:
                    table = _read_table(path, self.folder, self.fingerprint)
                except ValueError as e:
                    report.discarded.append(f"{path}: {e}")
            if table is not None or path.name == INDEX_FILE:
                tables.append(table)
        return tables, parts

    def _encode(self, batch: list[PhotoFile]) -> tuple[list[PhotoFile], np.ndarray, list[tuple]]:
        """Reads and encodes one batch; unreadable files are set aside with their reason.

        Returns:
          (the photos encoded, float32 [len, N] unit rows, [(rel, size, mtime_ns, reason)]).
        """
        from grounded_text.serving.images import ImageReadError, read_image  # noqa: PLC0415

        good, arrays, failed = [], [], []
        for photo in batch:
            try:
                arrays.append(read_image(self.folder / photo.rel))
                good.append(photo)
            except ImageReadError as e:
                failed.append((photo.rel, photo.size, photo.mtime_ns, _reason(e, self.folder / photo.rel)))
        if not good:
            return [], np.zeros((0, 0), np.float32), failed
        vectors = np.asarray(self.encoder.encode_images(arrays, batch_size=self.batch_size, show_progress_bar=False,
                                                        normalize_embeddings=True), dtype=np.float32)
        return good, vectors, failed

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
          OSError: the index folder cannot be written (permissions, a full disk); the batches
            written so far stay.
          KeyboardInterrupt: passed on, after the finished batches are on disk.
        """
        start = time.perf_counter()
        report = IndexReport(self.folder, self.index_dir)
        photos = scan_photos(self.folder)
        self.index_dir.mkdir(parents=True, exist_ok=True)
        with self._lock():
            tables, parts = self._read_stored(report)
            keep, known_failed, todo = _plan(photos, tables, report)
            next_part = max((int(_PART.match(p.name).group(1)) + 1 for p in parts), default=0)
            new_rows, new_vectors, new_failed = self._encode_all(todo, tables, next_part, show_progress_bar)
            report.encoded = len(new_rows)
            report.failed = [(f[0], f[3]) for f in new_failed]
            dim = self._dim(np.concatenate(new_vectors) if new_vectors else None, tables)
            merged = _gather(tables, keep, new_rows, new_vectors, sorted(known_failed + new_failed), dim)
            if (report.encoded or report.failed or report.dropped or report.discarded or parts
                    or not (self.index_dir / INDEX_FILE).is_file()):
                _write_table(self.index_dir / INDEX_FILE, self.folder, self.fingerprint, merged)
                # Oldest first: a run killed while removing them keeps only parts newer than the rest,
                # whose rows the merged file holds as well.
                for part in self._part_files():
                    part.unlink()
                with contextlib.suppress(OSError):
                    (self.index_dir / PARTS_DIR).rmdir()
        self._rels, self._embeddings = merged.rels, merged.embeddings
        report.photos = len(merged.rels)
        report.seconds = time.perf_counter() - start
        return report

    def _encode_all(self, todo: list[PhotoFile], tables: list, next_part: int,
                    show_progress_bar: bool | None) -> tuple[list[PhotoFile], list[np.ndarray], list[tuple]]:
        """Encodes ``todo`` batch by batch, each batch written as part ``next_part``, ``next_part + 1``, ...
        before the next one starts.

        Returns:
          (the photos encoded, their float32 [b, N] batches, ``(rel, size, mtime_ns, reason)`` of
          the unreadable ones).
        """
        new_rows, new_vectors, new_failed = [], [], []
        progress = CountProgress(len(todo), "index", "photo",
                                 enabled=interactive() if show_progress_bar is None else bool(show_progress_bar))
        try:
            for b in range(0, len(todo), self.batch_size):
                batch = todo[b:b + self.batch_size]
                good, vectors, failed = self._encode(batch)
                if not good:
                    vectors = np.zeros((0, self._dim(None, tables)), np.float32)
                table = _Table([p.rel for p in good], np.array([p.size for p in good], np.int64),
                               np.array([p.mtime_ns for p in good], np.int64), vectors, failed)
                (self.index_dir / PARTS_DIR).mkdir(exist_ok=True)
                _write_table(self.index_dir / PARTS_DIR / f"part-{next_part + b // self.batch_size:06d}.npz",
                             self.folder, self.fingerprint, table)
                new_rows.extend(good)
                new_vectors.append(vectors)
                new_failed.extend(failed)
                progress.add(len(batch))
        finally:
            progress.close()
        return new_rows, new_vectors, new_failed

    def _dim(self, vectors: np.ndarray | None, tables: list) -> int:
        """N: from encoded vectors, else a stored table, else the encoder's ``dim``."""
        if vectors is not None and vectors.ndim == 2 and len(vectors):
            return int(vectors.shape[1])
        for table in tables:
            if table is not None and len(table.rels):
                return int(table.embeddings.shape[1])
        return int(getattr(self.encoder, "dim", 0) or 0)

    # -- searching

    def search(self, query: str | Sequence[str], top_k: int = 5) -> list[SearchHit] | list[list[SearchHit]]:
        """The photos closest to a sentence (or to each of several), best first.

        Args:
          query: one sentence, or a list of them.
          top_k: photos per sentence (>= 1); fewer when the index holds fewer.

        Returns:
          For one sentence, a list of up to ``top_k`` :class:`SearchHit` ``(path, cosine)``,
          cosine descending (ties by path); for a list, one such list per sentence.

        Raises:
          ValueError: an empty sentence, an empty list, ``top_k`` < 1, or a model whose text
            and image embeddings differ in width.
          TypeError: a query that is not a str or a list of str.
        """
        single = isinstance(query, str)
        queries = [query] if single else list(query) if isinstance(query, (list, tuple)) else None
        if queries is None or not all(isinstance(q, str) for q in queries):
            raise TypeError(f"search: query must be a str or a list of str, got {type(query).__name__}.")
        if not queries:
            raise ValueError("search: the list of queries is empty.")
        if any(not q.strip() for q in queries):
            raise ValueError("search: the query is empty; give a sentence such as 'a dog runs on the grass'.")
        if int(top_k) < 1:
            raise ValueError(f"search: top_k must be >= 1, got {top_k}.")
        self._ensure_loaded()
        q = np.asarray(self.encoder.encode(queries, normalize_embeddings=True), dtype=np.float32)
        out = []
        if len(self._rels) and q.shape[1] != self._embeddings.shape[1]:
            raise ValueError(f"search: the model's sentences are {q.shape[1]}-d but its photos "
                             f"{self._embeddings.shape[1]}-d.")
        scores = q @ self._embeddings.T if len(self._rels) else np.zeros((len(q), 0), np.float32)
        k = min(int(top_k), scores.shape[1])
        for row in scores:
            if k == 0:
                out.append([])
                continue
            candidates = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
            # Among the k returned, equal cosines are ordered by path (an exact tie at the k-th
            # place may keep either photo).
            best = candidates[np.lexsort((candidates, -row[candidates]))]
            out.append([SearchHit(str(self.folder / self._rels[i]), float(row[i])) for i in best])
        return out[0] if single else out
