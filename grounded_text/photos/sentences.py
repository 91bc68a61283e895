"""Each photo's best sentences from a file of sentences: captions, or labels as zero-shot classes.

::

    import grounded_text as gt
    from grounded_text.photos.sentences import SentenceIndex, best_sentences

    enc = gt.load("vete_bow_flickr8k")
    photos = gt.ImageIndex("~/Pictures", enc)            # the photos' unit vectors, cached
    labels = SentenceIndex("labels.txt", enc)            # the sentences' unit vectors, cached
    rows, cosines = best_sentences(photos.embeddings, labels.embeddings, top_k=3)
    labels.sentences[rows[0, 0]]                         # the first photo's best sentence

**The sentence index** keeps the vectors of one file of sentences (one a line, blank lines
left out, UTF-8) for one text tower, in ``ROOT/sentences/<file name>-<digest>.npz``, ROOT being
the photo index's root (:func:`grounded_text.photos.index.default_index_root` or
``index_dir``). The digest covers the file's bytes and the text tower's fingerprint
(:func:`text_fingerprint`), and the file records both: a changed file or another model never
reuses it. It is written atomically and read without pickles; a damaged one is encoded again.
"""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
from pathlib import Path

import numpy as np

from grounded_text.photos.index import default_index_root
from grounded_text.serving import images
from grounded_text.utils.durable import atomic_write

__all__ = ["SentenceIndex", "best_sentences", "encode_photo_files", "read_sentences", "text_fingerprint"]

SENTENCES_DIR = "sentences"
# The text tower's files that decide its vectors (a SavedModel's graph and weights).
_TOWER_FILES = ("saved_model.pb", "variables/variables.index", "variables/variables.data-00000-of-00001")


def read_sentences(data: bytes, what: str = "the sentences file") -> list[str]:
    """The sentences of a file's bytes: one a line, stripped, blank lines left out.

    Args:
      data: the file's bytes (UTF-8; a byte-order mark is dropped).
      what: the file, for messages.

    Returns:
      The sentences (``str``), in file order (repeats kept).

    Raises:
      ValueError: bytes that are not UTF-8, or no sentence.

    Example:
      >>> read_sentences(b"a dog\\n\\n  a cat  \\r\\n")
      ['a dog', 'a cat']
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ValueError(f"{what} is not UTF-8 text (byte 0x{data[e.start]:02x} on line {line}).") from None
    sentences = [line.strip() for line in text.splitlines() if line.strip()]
    if not sentences:
        raise ValueError(f"{what} holds no sentence (one a line).")
    return sentences


def text_fingerprint(encoder) -> str:
    """16 hex digits identifying a text tower: its SavedModel's graph and weights (or its
    handle, for a model not in a local folder), its width and its sentence-end rule.

    Args:
      encoder: a ``TextEncoder`` (``handle``, ``dim``, ``sentence_end``).

    Returns:
      ``str`` of 16 hex digits; equal for two loads of one model.

    Example:
      >>> import grounded_text as gt
      >>> len(text_fingerprint(gt.load("vete_bow_flickr8k")))
      16
    """
    h = hashlib.sha256(f"{getattr(encoder, 'dim', '')}\0{getattr(encoder, 'sentence_end', '')}\0".encode())
    folder = Path(str(encoder.handle))
    files = [folder / name for name in _TOWER_FILES if (folder / name).is_file()] if folder.is_dir() else []
    if not files:
        h.update(str(encoder.handle).encode())
    for path in files:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


class SentenceIndex:
    """The unit vectors of a file of sentences for one text tower, cached on disk.

    Args:
      path: the file: one sentence a line (UTF-8; blank lines left out).
      encoder: a ``TextEncoder`` (its ``encode`` and :func:`text_fingerprint`).
      index_dir: the index root (default: the photo index's,
        :func:`grounded_text.photos.index.default_index_root`); the vectors are kept in its
        ``sentences`` folder.

    Attributes:
      sentences: the file's sentences (``list[str]``), in the order of :attr:`embeddings`.
      file: the cache file. reused: whether the last :attr:`embeddings` came from it.

    Raises:
      OSError: the file cannot be read. ValueError: it is not UTF-8 or holds no sentence.

    Example:
      >>> import shutil, tempfile, grounded_text as gt
      >>> folder = Path(tempfile.mkdtemp())
      >>> _ = (folder / "labels.txt").write_text("a dog\\na beach\\n")
      >>> labels = SentenceIndex(folder / "labels.txt", gt.load("vete_bow_flickr8k"), index_dir=folder / "idx")
      >>> labels.sentences, labels.embeddings.shape, labels.reused
      (['a dog', 'a beach'], (2, 128), False)
      >>> shutil.rmtree(folder)
    """

    def __init__(self, path: str | os.PathLike, encoder, index_dir: str | os.PathLike | None = None):
        self.path = Path(path).expanduser()
        data = self.path.read_bytes()
        self.sentences = read_sentences(data, f"{str(self.path)!r}")
        self.encoder = encoder
        self.digest = hashlib.sha256(data).hexdigest()
        self.fingerprint = text_fingerprint(encoder)
        root = default_index_root() if index_dir is None else Path(index_dir).expanduser()
        key = hashlib.sha256(f"{self.digest}\0{self.fingerprint}".encode()).hexdigest()[:16]
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", self.path.stem)[:40].lstrip(".") or "sentences"
        self.file = root / SENTENCES_DIR / f"{name}-{key}.npz"
        self.reused = False
        self._embeddings: np.ndarray | None = None

    def _read(self) -> np.ndarray | None:
        """The cached vectors, or ``None`` when absent, damaged or made for another file or model."""
        if self.file.is_symlink() or not self.file.is_file():
            return None
        try:
            with np.load(self.file, allow_pickle=False) as z:
                vectors = np.asarray(z["embeddings"], dtype=np.float32)
                ok = (str(z["digest"]) == self.digest and str(z["fingerprint"]) == self.fingerprint
                      and vectors.ndim == 2 and len(vectors) == len(self.sentences))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return None
        return vectors if ok and np.all(np.isfinite(vectors)) else None

    @property
    def embeddings(self) -> np.ndarray:
        """float32 [sentences, N], unit rows: read from the cache, or encoded and cached (a cache
        that cannot be written is not an error: the vectors are returned all the same)."""
        if self._embeddings is None:
            vectors = self._read()
            self.reused = vectors is not None
            if vectors is None:
                vectors = np.asarray(self.encoder.encode(self.sentences, normalize_embeddings=True), np.float32)
                try:
                    self.file.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write(self.file, lambda f: np.savez(f, embeddings=vectors, digest=np.str_(self.digest),
                                                               fingerprint=np.str_(self.fingerprint)))
                except OSError:
                    pass  # a cache only: the vectors are right without it
            self._embeddings = vectors
        return self._embeddings


def best_sentences(photos: np.ndarray, sentences: np.ndarray, top_k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Each photo's ``top_k`` best sentences by cosine, best first (ties: the earlier sentence).

    Args:
      photos: float [P, N] photo vectors. sentences: float [S, N] sentence vectors (any
        length: rows are scaled to unit length here).
      top_k: sentences per photo (>= 1; at most S are returned).

    Returns:
      (int64 [P, k] sentence rows, float32 [P, k] cosines), k = min(top_k, S).

    Raises:
      ValueError: ``top_k`` < 1, or vectors of different widths.

    Example:
      >>> rows, cos = best_sentences(np.eye(2), np.array([[0.0, 1.0], [1.0, 0.1], [1.0, 0.0]]), top_k=2)
      >>> rows.tolist()
      [[2, 1], [0, 1]]
    """
    if int(top_k) < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}.")
    photos, sentences = np.asarray(photos, np.float32), np.asarray(sentences, np.float32)
    if photos.shape[1] != sentences.shape[1]:
        raise ValueError(f"the photos are {photos.shape[1]}-d but the sentences {sentences.shape[1]}-d.")
    unit = lambda m: m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)  # noqa: E731
    scores = unit(photos) @ unit(sentences).T
    k = min(int(top_k), scores.shape[1])
    rows = np.empty((len(scores), k), np.int64)
    for i, row in enumerate(scores):
        candidates = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
        rows[i] = candidates[np.lexsort((candidates, -row[candidates]))]
    return rows, np.take_along_axis(scores, rows, axis=1).astype(np.float32)


def encode_photo_files(encoder, files: list[str | os.PathLike], batch_size: int = 32
                       ) -> tuple[list[str], np.ndarray, list[tuple[str, str]]]:
    """Photo files in a model's space (not cached); files that cannot be read are set aside.

    Args:
      encoder: a ``TextEncoder`` with an image tower. files: photo paths.
      batch_size: photos per ``encode_images`` call.

    Returns:
      (the absolute paths read, float32 [P, N] unit rows in their order, ``(path, reason)`` of
      the files that could not be read).

    Raises:
      NoImageTowerError (a ValueError): the model has no image tower.

    Example:
      >>> import shutil, tempfile, grounded_text as gt
      >>> from PIL import Image
      >>> folder = Path(tempfile.mkdtemp())
      >>> Image.new("RGB", (64, 64), (220, 30, 30)).save(folder / "red.png")
      >>> _ = (folder / "broken.jpg").write_bytes(b"not a photo")
      >>> paths, vectors, failed = encode_photo_files(gt.load("vete_bow_flickr8k"),
      ...                                             [folder / "red.png", folder / "broken.jpg"])
      >>> [Path(p).name for p in paths], vectors.shape, [Path(p).name for p, _ in failed]
      (['red.png'], (1, 128), ['broken.jpg'])
      >>> shutil.rmtree(folder)
    """
    good, arrays, failed = [], [], []
    for name in files:
        path = str(Path(name).expanduser().absolute())
        try:
            arrays.append(images.read_image(path))
            good.append(path)
        except images.ImageReadError as e:
            failed.append((path, str(e)))
    if not good:
        return [], np.zeros((0, 0), np.float32), failed
    vectors = encoder.encode_images(arrays, batch_size=batch_size, show_progress_bar=False, normalize_embeddings=True)
    return good, np.asarray(vectors, np.float32), failed
