"""The files of a photo index (``grounded_text.photos.index``): their format, and how an update
plans and gathers its rows.

``index.npz`` and each part file hold the same members, all plain arrays (no pickles): the
format, the photo folder and the model's fingerprint they were made for, the photos' relative
paths (UTF-8 bytes and end offsets), sizes, modification times and unit embeddings, and the
unreadable files with their sizes, times and reasons. A file is read with
``np.load(allow_pickle=False)`` after its declared sizes are checked
(:func:`grounded_text.data.features.check_npz_members`), and one made for another folder,
model or format is refused.
"""

from __future__ import annotations

import dataclasses
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from grounded_text.data.features import check_npz_members
from grounded_text.vision.folders import PhotoFile
from grounded_text.vision.sinks import atomic_savez

__all__ = ["INDEX_FORMAT", "MEMBERS", "Plan", "Table", "gather", "plan_update", "read_table", "write_table"]

#: The layout of the index files; a file of another format is ignored (and rebuilt).
INDEX_FORMAT = 1
#: Every member of an index or part file (all plain arrays: no pickles).
MEMBERS = ("format", "folder", "fingerprint", "paths_utf8", "path_ends", "sizes", "mtimes_ns", "embeddings",
           "failed_utf8", "failed_ends", "failed_sizes", "failed_mtimes_ns", "reasons_utf8", "reason_ends")


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
class Table:
    """The rows of one index or part file: the photos encoded (path, size, time, unit vector) and
    the files found unreadable (``(rel, size, mtime_ns, reason)``)."""

    rels: list
    sizes: np.ndarray  # int64 [n]
    mtimes: np.ndarray  # int64 [n]
    embeddings: np.ndarray  # float32 [n, N]
    failed: list  # [(rel, size, mtime_ns, reason)]


def write_table(path: Path, folder: Path, fingerprint: str, table: Table) -> None:
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
    atomic_savez(path, **arrays)


def read_tables(merged: Path, parts: list[Path], folder: Path, fingerprint: str,
                discarded: list[str]) -> list[Table | None]:
    """The merged file's table first (``None`` when absent or unreadable), then the readable
    parts' tables in write order (a later row of a path replaces an earlier one). Each
    unreadable file is appended to ``discarded`` as ``"PATH: reason"``."""
    tables = []
    for path in [merged, *parts]:
        table = None
        if path.is_file():
            try:
                table = read_table(path, folder, fingerprint)
            except ValueError as e:
                discarded.append(f"{path}: {e}")
        if table is not None or path == merged:
            tables.append(table)
    return tables


def read_table(path: Path, folder: Path, fingerprint: str) -> Table:
    """Reads an index or part file.

    Raises:
      ValueError: damaged, of another format, or made for another folder or model.
    """
    check_npz_members(path, MEMBERS)  # declared sizes against the data, before anything is allocated
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [m for m in MEMBERS if m not in z.files]
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
    return Table(rels, sizes, mtimes, embeddings, failed)


@dataclasses.dataclass
class Plan:
    """What an update reuses and what it encodes (:func:`plan_update`).

    Attributes:
      keep: the reused rows, path → (table, row).
      known_failed: ``(rel, size, mtime_ns, reason)`` of unreadable files unchanged since they failed.
      todo: the photos to encode.
      resumed: of ``keep``, the rows an interrupted run's parts hold.
      dropped: stored paths left out (gone, or changed and so encoded again).
    """

    keep: dict
    known_failed: list
    todo: list
    resumed: int
    dropped: int


def plan_update(photos: list[PhotoFile], tables: list) -> Plan:
    """Each photo against the newest stored row of its path: reused when its size and time are
    unchanged, skipped when it failed unchanged, encoded otherwise.

    Args:
      photos: the folder's photos now. tables: the stored tables, ``index.npz``'s first (``None``
        when absent), then an interrupted run's parts in write order.
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
    return Plan(keep, known_failed, todo, resumed=sum(1 for rel in keep if rel in from_part),
                dropped=len(latest) - len(keep) - len(known_failed))


def gather(tables: list, keep: dict[str, tuple[int, int]], new_rows: list[PhotoFile], new_vectors: list,
           failed: list, dim: int) -> Table:
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
    return Table([rels[i] for i in order], np.concatenate(sizes)[index], np.concatenate(mtimes)[index],
                 np.concatenate(embeddings).astype(np.float32, copy=False)[index], failed)
