"""The text client of a text-embedding SavedModel: ``TextEncoder``, made by
``grounded_text.load`` (:mod:`grounded_text.serving.loader`).

Users (``grounded_text.load``), the evaluation (``grounded-text evaluate``, the trainer's
end-of-run scoring, the experiments) and the tuner all encode through this one path: sentences
are checked, ended by the model's sentence-end rule and passed to the module in power-of-two
padded batches, within a character budget for a character-level model. Photos go to the
model's image side (:mod:`grounded_text.serving.images`), cosines are
:mod:`grounded_text.utils.similarity`'s, and MTEB's additions are in
:mod:`grounded_text.serving.mteb_glue`.

Example:
    >>> import grounded_text as gt                               # doctest: +SKIP
    >>> enc = gt.load("runs/vete_bow/export")                    # doctest: +SKIP
    >>> enc.encode(["a dog runs", "a cat sleeps"]).shape         # doctest: +SKIP
    (2, 128)
"""

from __future__ import annotations

import dataclasses
import io
import unicodedata
from collections.abc import Iterable
from typing import Any

import numpy as np
import tensorflow as tf

from grounded_text.data.sentence_end import apply_sentence_end
from grounded_text.serving import mteb_glue, quantize
from grounded_text.serving.devices import device_scope
from grounded_text.serving.images import ImageSide
from grounded_text.utils.progress import CountProgress
from grounded_text.utils.similarity import cos_sim, normalize_rows, pairwise_cos_sim

__all__ = ["CHARACTER_BATCH_CHARS", "OUTPUT_PRECISIONS", "TextEncoder"]


def _tensor_to_numpy(sentences):
    """A ``tf.Tensor`` of strings as NumPy (a 0-d one as ``bytes``); anything else unchanged."""
    if isinstance(sentences, tf.Tensor):
        if sentences.dtype != tf.string:
            raise TypeError(f"encode: a tf.Tensor of dtype string is expected, got {sentences.dtype.name}.")
        return sentences.numpy()  # a 0-d string tensor gives bytes: one sentence
    return sentences


def _as_input(sentences) -> tuple[Iterable, bool]:
    """``(iterable of sentences, single)`` without materialising an iterator or generator.

    Raises:
      TypeError: not a str, bytes, sequence, NumPy array or ``tf.Tensor`` of strings;
        or an element that is not a str/bytes (the message gives its index and type;
        elements are checked as they are read).
      ValueError: an array or tensor of rank above 1.
    """
    sentences = _tensor_to_numpy(sentences)
    if isinstance(sentences, (str, bytes)):
        return [sentences], True
    if isinstance(sentences, np.ndarray):
        if sentences.dtype.kind not in "USO":
            raise TypeError(f"encode: an array of strings is expected, got dtype {sentences.dtype}.")
        if sentences.ndim == 0:
            return [sentences.item()], True
        if sentences.ndim > 1:
            raise ValueError(f"encode: a 1-D batch of sentences is expected, got shape {sentences.shape}.")
        return sentences.tolist(), False
    if isinstance(sentences, dict) or not isinstance(sentences, Iterable):
        raise TypeError(f"encode: a str or a list of str is expected, got {type(sentences).__name__}.")
    if isinstance(sentences, io.IOBase):
        return _file_lines(sentences), False
    return sentences, False


def _file_lines(f):
    """The lines of an open file without their terminators (``\\n``, ``\\r\\n``, ``\\r``): a
    character model would embed the newline as a character of the sentence."""
    for line in f:
        if isinstance(line, bytes):
            yield line[:-2] if line.endswith(b"\r\n") else line[:-1] if line.endswith((b"\n", b"\r")) else line
        else:
            yield line[:-2] if line.endswith("\r\n") else line[:-1] if line.endswith(("\n", "\r")) else line


def _length_order(items) -> np.ndarray:
    """Indices of ``items`` from the longest to the shortest (stable among equal lengths)."""
    return np.argsort([-len(s) for s in items], kind="stable")


def _check_items(items: list, offset: int) -> None:
    """Every element is a str or UTF-8 bytes that UTF-8 can carry to the module.

    Raises:
      TypeError: an element that is not a str/bytes (its index and type are given).
      ValueError: bytes that are not UTF-8, or a str holding a lone surrogate (U+D800 to
        U+DFFF, which no UTF-8 string can hold); the message gives the sentence's index.
    """
    for i, s in enumerate(items):
        if not isinstance(s, (str, bytes)):
            raise TypeError(f"encode: sentence {offset + i} is a {type(s).__name__}, not a str.")
        if s.isascii():
            continue
        try:
            s.decode("utf-8") if isinstance(s, bytes) else s.encode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"encode: sentence {offset + i} is not valid UTF-8 (byte 0x{s[e.start]:02x} at "
                             f"position {e.start}); decode it first, e.g. with errors='replace'.") from None
        except UnicodeEncodeError as e:
            raise ValueError(f"encode: sentence {offset + i} holds a lone surrogate (U+{ord(s[e.start]):04X} at "
                             f"position {e.start}), which UTF-8 cannot encode; was it decoded with "
                             "errors='surrogateescape'?") from None


#: ``TextEncoder.max_batch_chars`` of a character-level model (``load`` sets it from the
#: export's config): the characters one call of the module may hold, rows times the longest
#: row (padding included). The character model's recurrent layers keep about 35 KB per
#: character of a padded batch, so 32,768 characters stay under about 1.2 GB above the loaded
#: model (about 1 GB): its largest input, one sentence at the 16,384-byte cap, goes alone.
CHARACTER_BATCH_CHARS = 32768


def _char_cost(text) -> int:
    """The characters a character model reads from ``text`` (an upper bound): NFKC may expand
    a character (U+FB01 is two), and the model adds a start and an end token."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return (len(text) if text.isascii() else len(unicodedata.normalize("NFKC", text))) + 2


def _padded_size(n: int, rows: int) -> int:
    """Rows of a call of ``n`` sentences: a power of two (8 … ``rows``), at least ``n``."""
    return max(n, min(rows, max(8, 1 << (n - 1).bit_length())))


def _budget_groups(texts: list, batch_size: int, budget: int):
    """``(indices, padded rows)`` of the calls that encode ``texts`` with at most ``budget``
    characters each (rows times the longest, padding rows included), longest first; a
    sentence longer than ``budget`` goes alone. Within the budget: one call, as without it."""
    cost = np.array([_char_cost(t) for t in texts], dtype=np.int64)
    order = np.argsort(-cost, kind="stable")
    pos = 0
    while pos < len(order):
        fit = max(1, budget // int(cost[order[pos]]))
        rows = min(batch_size, 1 << (fit.bit_length() - 1))  # a power of two: few distinct shapes
        group = order[pos:pos + rows]
        yield group, _padded_size(len(group), rows)
        pos += len(group)


def _chunks(sentences: Iterable, size: int):
    """Lists of at most ``size`` sentences, read lazily from ``sentences`` (checked)."""
    chunk: list = []
    done = 0
    for s in sentences:
        chunk.append(s)
        if len(chunk) == size:
            _check_items(chunk, done)
            yield chunk
            done += len(chunk)
            chunk = []
    if chunk:
        _check_items(chunk, done)
        yield chunk


#: ``encode(precision=...)``: the dtype of the returned vectors (computed in float32).
OUTPUT_PRECISIONS = quantize.PRECISIONS


def _check_batch_size(batch_size) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"encode: batch_size must be an int >= 1, got {batch_size!r}.")
    return int(batch_size)


def _is_tensor(*values) -> bool:
    """Whether any of ``values`` is a TensorFlow object (then a result is given back as a ``tf.Tensor``)."""
    return any(type(x).__module__.startswith("tensorflow") for x in values)


@dataclasses.dataclass
class TextEncoder:
    """A text-embedding SavedModel (string[B] → float[B, N]) loaded for encoding.

    Made by ``load``. ``encode`` (also ``__call__``) maps sentences to vectors with the
    module's own ``__call__`` (its ``serving_default`` computes the same), in batches, with
    the arguments of sentence-transformers' ``encode``; ``encode_iter`` streams any number of
    sentences in bounded memory; ``similarity`` is the cosine of two sets of vectors, and
    ``similarity_pairwise`` that of their rows in pairs. With ``mteb_model_meta`` these make
    MTEB's encoder protocol: ``mteb.evaluate`` takes the encoder as it is (``[mteb]`` extra).

    sentence-transformers' names work too: ``get_sentence_embedding_dimension()`` (N, as
    ``dim``), ``max_seq_length`` (the characters of one sentence the model reads, or ``None``),
    ``similarity_fn_name`` (``"cosine"``) and ``encode_query`` / ``encode_document`` (``encode``
    itself: these models were trained without prompts, so a query and a document get the same
    vector).

    One encoder may be used from several threads at once (the module's function is called
    concurrently; nothing else is shared), and one export may be loaded by several processes
    at once (loading only reads it).

    Attributes:
      module: the object ``tensorflow_hub.load`` returned (callable on ``tf.string`` [B]).
      handle: the absolute path (or TF Hub handle) it was loaded from.
      dim: N, the embedding width.
      batch_size: the default sentences per call.
      sentence_end: the rule applied to every sentence before the module sees it
        (``grounded_text.data.sentence_end``): by default the one the model was trained with,
        which its export records, so that sentences end as its training captions did
        (Merkx & Frank's code appends " ." to captions, ``text_features.py:28-29``);
        ``"none"`` for exports that record none.
      image_export: the model's image tower (``image_export/`` beside the text tower: a shipped
        model's and a training run's layout), or ``None``; ``encode_images`` puts photos into
        the same space through it.
      max_batch_chars: at most this many characters per call of the module (rows times the
        longest row, padding included; ``_char_cost``): a batch over it is split, longest
        sentences first, and a sentence over it goes alone. ``None``: no limit (a
        bag-of-words module's cost grows with its words, not with the padded batch).
        ``load`` sets ``CHARACTER_BATCH_CHARS`` for a character-level model, bounding its
        memory by the input's longest sentence (docs/performance.md).

    Example:
      >>> import grounded_text as gt
      >>> enc = gt.load("vete_bow_flickr8k")          # shipped with the package: offline
      >>> enc.dim
      128
      >>> enc.encode("a dog runs on the beach").shape
      (128,)
      >>> vectors = enc.encode(["a dog runs", "a puppy is running", "a man cooks"],
      ...                      normalize_embeddings=True)
      >>> vectors.shape, vectors.dtype
      ((3, 128), dtype('float32'))
      >>> sims = enc.similarity(vectors[:1], vectors[1:])
      >>> sims.shape, bool(sims[0, 0] > sims[0, 1])    # the puppy is closer than the cook
      ((1, 2), True)
      >>> sum(len(b) for b in enc.encode_iter(f"caption {i}" for i in range(1000)))
      1000
      >>> enc.get_sentence_embedding_dimension(), enc.similarity_fn_name, enc.max_seq_length
      (128, 'cosine', 16384)
      >>> bool((enc.encode_query(["a dog runs"]) == enc.encode_document(["a dog runs"])).all())
      True
    """

    module: Any
    handle: str
    dim: int
    batch_size: int = 512
    sentence_end: str = "none"
    image_export: str | None = None
    _images: Any = dataclasses.field(default=None, init=False, repr=False, compare=False)
    max_batch_chars: int | None = None
    # what max_seq_length reports: load reads it from the export's config (loader._max_seq_length)
    _max_seq_length: int | None = dataclasses.field(default=None, repr=False)

    def get_sentence_embedding_dimension(self) -> int:
        """N, the width of the vectors ``encode`` returns (``dim``), under sentence-transformers' name.

        Returns:
          int: N (``encode`` gives float32 [B, N]).

        Example:
          >>> import grounded_text as gt                         # doctest: +SKIP
          >>> gt.load("vete_bow_flickr8k").get_sentence_embedding_dimension()   # doctest: +SKIP
          128
        """
        return int(self.dim)

    @property
    def max_seq_length(self) -> int | None:
        """The most characters of one sentence the model reads (sentence-transformers' name): a
        longer sentence is cut inside the export and its rest changes nothing.

        These models read raw strings, not a tokenizer's tokens, so the unit is the character:
        precisely, the UTF-8 byte (one per ASCII character, two to four for others), counted
        after the model's sentence-end rule adds its ending (``" ."``: 2). It is the cut every
        export of this package records (``"input_limits"`` of ``assets/config.json``:
        ``max_bytes``, 16,384), or a character model's own ``max_chars`` where that is smaller.
        The export also keeps at most ``max_words`` (512) whitespace-separated words of a
        sentence. ``None``: the module records no cut (a TF Hub module not made by this package,
        or an export older than the cut). Read-only: the cut is inside the SavedModel, so to
        read less, cut the sentences before ``encode``.

        Returns:
          int (characters) or ``None``.

        Example:
          >>> import grounded_text as gt                         # doctest: +SKIP
          >>> gt.load("vete_bow_flickr8k").max_seq_length        # doctest: +SKIP
          16384
        """
        return self._max_seq_length

    @property
    def similarity_fn_name(self) -> str:
        """``"cosine"``: ``similarity`` and ``similarity_pairwise`` are the cosine (the models are
        scored with it). sentence-transformers' name; read-only.

        Example:
          >>> import grounded_text as gt                         # doctest: +SKIP
          >>> gt.load("vete_bow_flickr8k").similarity_fn_name    # doctest: +SKIP
          'cosine'
        """
        return "cosine"

    def _call(self, texts: list, size: int) -> np.ndarray:
        """float32 [len(texts), N]: one call of the module on ``texts`` padded with empty
        strings to ``size`` rows, whose rows are dropped."""
        padded = tf.constant(list(texts) + [""] * (size - len(texts)), dtype=tf.string)
        return np.asarray(self.module(padded), dtype=np.float32)[:len(texts)]

    def _embed(self, batch: list, batch_size: int) -> np.ndarray:
        """float32 [len(batch), N]: one call of the module, padded with empty strings to a
        power of two (8 … ``batch_size``); or, over ``max_batch_chars``, several calls."""
        n = len(batch)
        if self.sentence_end != "none":
            batch = apply_sentence_end(batch, self.sentence_end)
        if not self.max_batch_chars:
            return self._call(batch, _padded_size(n, batch_size))
        parts = [(group, self._call([batch[i] for i in group], size))
                 for group, size in _budget_groups(batch, batch_size, self.max_batch_chars)]
        out = np.empty((n, parts[0][1].shape[1]), np.float32)
        for group, vectors in parts:
            out[group] = vectors
        return out

    def encode_iter(self, sentences, *, batch_size: int | None = None, normalize_embeddings: bool = False,
                    precision: str = "float32", ranges=None, calibration_embeddings=None):
        """Embeds sentences batch by batch, reading them lazily: memory stays bounded by one
        batch, however many sentences a generator yields.

        Args:
          sentences: any iterable of ``str``/``bytes`` (a generator, a file object's lines, a
            list, a 1-D array or ``tf.Tensor``), or one ``str``. The lines of an open file
            (``open(path)``, text or binary) are embedded without their terminator
            (``\\n``, ``\\r\\n``, ``\\r``), as the same sentences given as a list.
          batch_size, normalize_embeddings, precision, ranges, calibration_embeddings: see
            ``encode`` (``"int8"`` / ``"uint8"`` need ``ranges`` or ``calibration_embeddings``).

        Yields:
          ``precision`` [b, N] arrays ([b, N / 8] packed), b <= ``batch_size``, in input order.

        Raises:
          TypeError: an element that is not a str/bytes (its index is given); ValueError: a
            bad ``batch_size``, ``precision``, ``ranges`` or ``calibration_embeddings``, an input
            of rank above 1, bytes that are not UTF-8 or a str with a lone surrogate (its index
            is given).
        """
        batch_size = _check_batch_size(self.batch_size if batch_size is None else batch_size)
        ranges = quantize.check(precision, self.dim, ranges, calibration_embeddings)
        if not quantize.per_batch(precision, ranges):
            raise ValueError(f"encode_iter: precision={precision!r} needs ranges= or calibration_embeddings=.")
        items, _ = _as_input(sentences)
        for out in self._batches(_chunks(items, batch_size), batch_size, normalize_embeddings):
            yield quantize.convert(out, precision, ranges)

    def _batches(self, chunks, batch_size: int, normalize_embeddings: bool):
        """float32 [b, N] for each list of sentences of ``chunks`` (already checked)."""
        for chunk in chunks:
            out = self._embed(chunk, batch_size)
            yield normalize_rows(out, np.float32) if normalize_embeddings else out

    def encode(self, sentences, *, batch_size: int | None = None, show_progress_bar: bool | None = None,
               normalize_embeddings: bool = False, convert_to_numpy: bool = True, convert_to_tensor: bool = False,
               precision: str = "float32", device: str | None = None, prompt: str | None = None,
               prompt_name: str | None = None, task_name: str | None = None, prompt_type: Any = None,
               task_metadata: Any = None, hf_split: str | None = None, hf_subset: str | None = None,
               ranges=None, calibration_embeddings=None):
        """Embeds sentences (the arguments of sentence-transformers' ``encode``, and MTEB's).

        The keywords accepted are exactly those below; any other raises ``TypeError``. MTEB's
        encoder protocol passes no others (its ``**kwargs`` are ``batch_size``,
        ``show_progress_bar`` and ``precision``), so a misspelt keyword is an error rather than
        silently ignored.

        Args:
          sentences: one ``str`` (or ``bytes``, UTF-8; or a 0-d string array or tensor); or a
            list/tuple, 1-D NumPy array, 1-D ``tf.Tensor`` of strings, or any iterable of them
            (a generator is read batch by batch, never held whole; B may be 0). An open file
            gives its lines without their terminators (``\\n``, ``\\r\\n``).
          batch_size: sentences per call of the module (≥ 1; default: the encoder's
            ``batch_size``, set by ``load``). Each call is padded with
            empty strings to a power of two (8 … ``batch_size``), whose rows are dropped:
            the loaded graph is re-optimised for every new batch shape (about 1.5 s each on
            2 CPU cores), so a few fixed shapes are much faster than arbitrary ones. Rows are
            encoded on their own: another batch moves a value by float32 rounding only. A list
            longer than one batch is encoded longest sentence first and returned in its
            own order (batches of like length pad little).
          show_progress_bar: progress over the sentences on stderr: a bar in a terminal or a
            notebook, else a plain line every 10 s (a log file gets no escape codes).
          normalize_embeddings: scale each vector to unit L2 norm (a zero vector stays zero),
            so a dot product is the cosine.
          convert_to_numpy: return a NumPy array (default); ``False`` (and no tensor): a list
            of [N] arrays, as sentence-transformers does.
          convert_to_tensor: return a ``tf.Tensor`` (overrides ``convert_to_numpy``).
          precision: ``"float32"`` (default), ``"float16"``, or as sentence-transformers'
            ``quantize_embeddings`` makes them from the float32 vectors: ``"int8"`` / ``"uint8"``
            [B, N] (each dimension's range cut into 256 codes), ``"binary"`` (int8) /
            ``"ubinary"`` (uint8) [B, N / 8] (sign bits, packed eight to a byte).
          ranges, calibration_embeddings: the ranges of ``"int8"`` / ``"uint8"``: float [2, N]
            (minima, maxima), else those of float [M, N] calibration vectors, else those of the
            vectors encoded (two or more; under 100 warn): same ranges, comparable codes.
          device: where the model runs: ``"cpu"``, ``"gpu"``, ``"gpu:1"``, or the PyTorch names
            ``"cuda"`` and ``"cuda:1"`` (TensorFlow's GPU of that index); case is ignored, and a
            ``torch.device`` is read by its name. ``None`` (default): TensorFlow's own choice
            (the first GPU when there is one).
          prompt, prompt_name, task_name, prompt_type: accepted for sentence-transformers and
            MTEB, and without effect: these models were trained without instructions or
            prompts, so every task gets the same vectors.
          task_metadata, hf_split, hf_subset: passed by MTEB (2.x) with each call; without
            effect, as above.

        MTEB (2.x) calls ``encode`` with a PyTorch ``DataLoader`` of batches
        (``{"text": [...]}``) instead of a list: its texts are encoded in order, so that
        ``mteb.evaluate(encoder, tasks)`` runs (``mteb_model_meta`` names the model).

        Returns:
          ``precision`` [N] for one sentence, [B, N] otherwise ([B, N / 8] packed): a NumPy
          array, a ``tf.Tensor`` (``convert_to_tensor``) or a list of B [N] arrays.

        Raises:
          TypeError: not a str or an iterable of str, or an element that is not a str/bytes
            (its index and type are given); a non-string array or tensor; a keyword not
            listed above.
          ValueError: a rank-2 input, ``batch_size < 1``, an unknown ``precision``, bad
            ``ranges`` / ``calibration_embeddings`` (or none for an int8 of one sentence), a
            ``device`` not of the forms above, or a GPU index this machine does not have.

        Example:
          >>> import grounded_text as gt
          >>> enc = gt.load("vete_bow_flickr8k")
          >>> enc.encode(["a dog runs"], device="cpu", prompt_name=None, task_name="STSBenchmark").shape
          (1, 128)
          >>> enc.encode(["a dog runs"], device="tpu")
          Traceback (most recent call last):
            ...
          ValueError: encode: unknown device 'tpu'; expected 'cpu', 'gpu', 'gpu:N', 'cuda' or 'cuda:N'.
        """
        placement = device_scope(device)
        batch_size = _check_batch_size(self.batch_size if batch_size is None else batch_size)
        with placement:
            out, single = self._encode_all(mteb_glue.dataloader_texts(sentences), batch_size,
                                           bool(show_progress_bar), normalize_embeddings, precision,
                                           (ranges, calibration_embeddings))
        if convert_to_tensor:
            return tf.constant(out)
        if not convert_to_numpy:
            return [row for row in out] if not single else out
        return out

    def _encode_all(self, sentences, batch_size: int, show: bool, normalize_embeddings: bool,
                    precision: str, calibration: tuple = (None, None)) -> tuple[np.ndarray, bool]:
        """``(precision [B, N] or [N], single)``: ``encode``'s vectors as one array, in input order.
        The input is coerced and its sentences checked once: a list before any work, an iterable
        as it is read."""
        items, single = _as_input(sentences)
        total = len(items) if isinstance(items, (list, tuple)) else None
        if total is not None:
            _check_items(items, 0)  # a bad element of a list is refused before any work
        ranges = quantize.check(precision, self.dim, *calibration)
        batchwise = quantize.per_batch(precision, ranges)
        if total is None:
            chunks = _chunks(items, batch_size)
            order = None
        else:
            # A list is encoded longest first, as sentence-transformers does: a batch of sentences of
            # like length pads little (a character model's cost grows with the longest of its batch),
            # and each row is encoded on its own, so the order changes no vector.
            order = _length_order(items) if total > batch_size else None
            ordered = items if order is None else [items[i] for i in order]
            chunks = (list(ordered[i:i + batch_size]) for i in range(0, total, batch_size))
        parts = []
        with CountProgress(total, "encode", "sentence", enabled=show) as progress:
            for part in self._batches(chunks, batch_size, normalize_embeddings):
                parts.append(quantize.convert(part, precision, ranges) if batchwise else part)
                progress.add(len(part))
        out = np.concatenate(parts, axis=0) if parts else quantize.empty(precision, self.dim)
        if parts and not batchwise:  # int8/uint8 cut by the ranges of every vector of the call
            out = quantize.convert(out, precision)
        if order is not None:
            out = out[np.argsort(order, kind="stable")]
        return (out[0] if single else out), single

    __call__ = encode
    # sentence-transformers' names for encoding a query and a document: the same method (same
    # arguments, same vectors), as these models were trained without prompts or instructions.
    encode_query = encode
    encode_document = encode

    def _image_side(self) -> ImageSide:
        if self._images is None:
            self._images = ImageSide.open(self.image_export, repr(self.handle), self.dim)
        return self._images

    @property
    def image_fingerprint(self) -> str:
        """16 hex digits identifying the image side (the tower's weights, its feature network, and photos
        read upright by their EXIF orientation): an index of photos made for one value is valid for no other.

        Raises:
          NoImageTowerError (a ValueError): the model has no image tower.
        """
        return self._image_side().fingerprint

    def encode_images(self, images, batch_size: int = 32, show_progress_bar: bool | None = None,
                      normalize_embeddings: bool = True, convert_to_tensor: bool = False):
        """Embeds photos into the same space as ``encode``: the network the image tower was
        trained on (for the shipped models Google's EfficientNet-Lite0, shipped in the package:
        offline), with its own preprocessing (the whole photo resized to 224 × 224, bilinear with
        antialiasing, aspect ratio not kept; (x - 127) / 128), then the tower.

        Args:
          images: a file path (``str``, ``os.PathLike``), a file's bytes, a PIL image, a uint8 array [H, W, 3]
            (or tensor), a list of these, or a uint8 array [B, H, W, 3]. Files: JPEG, PNG, GIF (first frame),
            BMP, WebP, made RGB (alpha dropped); files, bytes, PIL images turned upright by their EXIF orientation.
          batch_size: photos per call of the network (≥ 1).
          show_progress_bar: progress over the photos on stderr, as ``encode``'s.
          normalize_embeddings: unit L2 rows (default, so ``similarity`` and a dot product agree
            with the cosine; Recall@K is the same either way).
          convert_to_tensor: return a ``tf.Tensor``.

        Returns:
          float32 [B, N] (B may be 0), N = ``dim``; [N] for a single path, bytes or image.

        Raises:
          NoImageTowerError (a ValueError): the model has no image tower, or its tower records a
            network this package cannot build.
          ImageReadError (a ValueError): a file or bytes not decodable or refused from the header (JPEG XL, over
            40 million pixels), or an array not uint8 [H, W, 3]; the message names it (``images[i]`` in memory).
          TypeError: ``images`` is none of the above. ValueError: ``batch_size < 1``.

        Example:
          >>> import numpy as np, grounded_text as gt
          >>> enc = gt.load("vete_bow_flickr8k")
          >>> photo = np.full((240, 320, 3), 128, np.uint8)       # or a path, or a PIL image
          >>> v = enc.encode_images([photo])
          >>> v.shape, v.dtype, round(float(np.linalg.norm(v[0])), 4)
          ((1, 128), dtype('float32'), 1.0)
          >>> enc.similarity(enc.encode(["a dog runs"]), v).shape
          (1, 1)
        """
        return self._image_side().encode(images, batch_size, show_progress_bar, normalize_embeddings, convert_to_tensor)

    @staticmethod
    def similarity(a, b):
        """Cosine similarity of every row of ``a`` with every row of ``b``.

        Args:
          a: float [A, N] or [N] (NumPy, ``tf.Tensor`` or a list), e.g. ``encode``'s output.
          b: float [B, N] or [N].

        Returns:
          float32 [A, B] (a 1-D input counts as one row): a ``tf.Tensor`` when ``a`` or ``b``
          is one, else a NumPy array. A zero vector has similarity 0 with everything. int8 / uint8
          codes are compared as numbers, as sentence-transformers does; packed binary ones are not
          coordinates (compare their bits by Hamming distance).

        Raises:
          TypeError: an input that is not numeric (e.g. sentences: encode them first).
          ValueError: an input of rank above 2, or widths that differ.
        """
        out = cos_sim(a, b)
        return tf.constant(out) if _is_tensor(a, b) else out

    @staticmethod
    def similarity_pairwise(a, b):
        """Cosine similarity of each row of ``a`` with the same row of ``b``.

        Args:
          a: float [A, N] or [N] (NumPy, ``tf.Tensor``, a list, or a CPU PyTorch tensor).
          b: float [A, N] or [N]: as many rows as ``a``.

        Returns:
          float32 [A] (a 1-D input counts as one row): a ``tf.Tensor`` when ``a`` or ``b`` is
          one, else a NumPy array. A zero vector has similarity 0 with everything.

        Raises:
          TypeError: an input that is not numeric (e.g. sentences: encode them first).
          ValueError: an input of rank above 2, widths that differ, or row counts that differ.

        Example:
          >>> sims = TextEncoder.similarity_pairwise([[1.0, 0.0], [1.0, 1.0]], [[2.0, 0.0], [0.0, 1.0]])
          >>> sims.shape, [round(float(x), 4) for x in sims]
          ((2,), [1.0, 0.7071])
        """
        out = pairwise_cos_sim(a, b)
        return tf.constant(out) if _is_tensor(a, b) else out

    @property
    def mteb_model_meta(self):
        """MTEB's description of this model (``mteb.models.ModelMeta``): the name
        ``grounded_text/<model>``, the package version as revision, the width, cosine
        similarity. With ``encode`` and ``similarity_pairwise`` it makes the encoder one that
        ``mteb.evaluate`` accepts as it is.

        Raises:
          MissingExtraError (an ImportError): mteb is not installed
            (``pip install 'grounded_text[mteb]'``).
        """
        return mteb_glue.model_meta(self)
