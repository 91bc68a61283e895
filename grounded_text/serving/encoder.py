"""The one client of a text-embedding SavedModel: ``load`` and ``TextEncoder``.

Users (``grounded_text.load``), the evaluation (``grounded-text evaluate``, the trainer's
end-of-run scoring, the experiments) and the tuner all encode through this one path: the
export is restored if a crash left it half-swapped, checked on two probe sentences, and
called in power-of-two padded batches.

Example:
    >>> import grounded_text as gt                               # doctest: +SKIP
    >>> enc = gt.load("runs/vete_bow/export")                    # doctest: +SKIP
    >>> enc.encode(["a dog runs", "a cat sleeps"]).shape         # doctest: +SKIP
    (2, 128)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["EncoderSignatureError", "TextEncoder", "check_text_encoder", "describe_signatures", "load",
           "resolve_model"]


class EncoderSignatureError(ValueError):
    """A SavedModel that is not a text encoder string[B] → float[B, N].

    Example:
      >>> issubclass(EncoderSignatureError, ValueError)
      True
    """


def _spec_text(spec) -> str:
    shape = getattr(spec, "shape", None)
    dtype = getattr(spec, "dtype", None)
    if shape is None or dtype is None:
        return repr(spec)
    dims = "?" if shape.rank is None else ", ".join("None" if d is None else str(d) for d in shape.as_list())
    return f"{dtype.name}[{dims}]"


def describe_signatures(module) -> str:
    """One line naming what a loaded SavedModel offers: its ``__call__`` input specs and
    its signatures (inputs → outputs), for error messages.

    Example:
      >>> describe_signatures(object())
      'no __call__ and no signatures'
    """
    parts = []
    for concrete in getattr(getattr(module, "__call__", None), "concrete_functions", []) or []:
        args, kwargs = concrete.structured_input_signature
        items = [_spec_text(a) for a in args] + [f"{k}={_spec_text(v)}" for k, v in kwargs.items()]
        parts.append(f"__call__({', '.join(items)})")
    for name, fn in getattr(module, "signatures", {}).items():
        _, kwargs = fn.structured_input_signature
        outputs = fn.structured_outputs
        outs = ", ".join(f"{k}: {_spec_text(v)}" for k, v in outputs.items()) if isinstance(outputs, dict) \
            else _spec_text(outputs)
        parts.append(f"signature {name}({', '.join(f'{k}: {_spec_text(v)}' for k, v in kwargs.items())}) -> {outs}")
    return "; ".join(dict.fromkeys(parts)) or "no __call__ and no signatures"


def check_text_encoder(module, path) -> int:
    """Calls a loaded SavedModel on two probe sentences; returns N.

    Raises:
      EncoderSignatureError: it is not callable, the call fails, or the output is not a
        float [2, N] tensor. The message is one line naming what the model offers (its
        TF error, which can print every input sentence, is not repeated).

    Example:
      >>> import tensorflow as tf
      >>> check_text_encoder(lambda s: tf.zeros([tf.shape(s)[0], 4]), "toy")
      4
      >>> check_text_encoder(lambda s: tf.zeros([3]), "toy")
      Traceback (most recent call last):
        ...
      grounded_text.serving.encoder.EncoderSignatureError: 'toy' is not a text-embedding SavedModel ...
      returned float32[3]; ...
    """
    import tensorflow as tf

    what = f"{str(path)!r} is not a text-embedding SavedModel (string[B] -> float[B, N])"
    if not callable(module):
        raise EncoderSignatureError(f"{what}: it has no __call__; it offers {describe_signatures(module)}.")
    try:
        out = module(tf.constant(["a probe sentence", ""], dtype=tf.string))
    except Exception as e:  # any TF/Python failure means "wrong kind of model"
        raise EncoderSignatureError(f"{what}: calling it on a string[2] batch failed ({type(e).__name__}); "
                                    f"it offers {describe_signatures(module)}.") from None
    shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
    if shape is None or dtype is None or not dtype.is_floating or shape.rank != 2 or shape[0] != 2:
        got = type(out).__name__ if shape is None else _spec_text(out)
        if isinstance(out, dict):
            got = "{" + ", ".join(f"{k}: {_spec_text(v)}" for k, v in out.items()) + "}"
        raise EncoderSignatureError(f"{what}: on a string[2] batch it returned {got}; "
                                    f"it offers {describe_signatures(module)}.")
    return int(shape[1])



def _tensor_to_numpy(sentences):
    """A ``tf.Tensor`` of strings as NumPy (a 0-d one as ``bytes``); anything else unchanged."""
    if type(sentences).__module__.startswith("tensorflow"):
        import tensorflow as tf

        if isinstance(sentences, tf.Tensor):
            if sentences.dtype != tf.string:
                raise TypeError(f"encode: a tf.Tensor of dtype string is expected, got {sentences.dtype.name}.")
            return sentences.numpy()  # a 0-d string tensor gives bytes: one sentence
    return sentences


def _as_sentences(sentences) -> tuple[list, bool]:
    """``(list of str/bytes, single)``: ``single`` when one sentence was given.

    Raises:
      TypeError: not a str, bytes, sequence, NumPy array or ``tf.Tensor`` of strings;
        or an element that is not a str/bytes (the message gives its index and type).
      ValueError: an array or tensor of rank above 1.
    """
    batch, single = _as_input(sentences)
    out = list(batch)
    _check_items(out, 0)
    return out, single


def _as_input(sentences) -> tuple[Iterable, bool]:
    """``(iterable of sentences, single)`` without materialising an iterator or generator.

    Raises:
      TypeError, ValueError: see ``_as_sentences`` (elements are checked as they are read).
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
    return sentences, False


def _length_order(items) -> np.ndarray:
    """Indices of ``items`` from the longest to the shortest (stable among equal lengths)."""
    return np.argsort([-len(s) for s in items], kind="stable")


def _check_items(items: list, offset: int) -> None:
    for i, s in enumerate(items):
        if not isinstance(s, (str, bytes)):
            raise TypeError(f"encode: sentence {offset + i} is a {type(s).__name__}, not a str.")


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
OUTPUT_PRECISIONS = {"float32": np.float32, "float16": np.float16}


def _check_batch_size(batch_size) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"encode: batch_size must be an int >= 1, got {batch_size!r}.")
    return int(batch_size)


def _normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32); an all-zero row stays zero."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)


def _as_matrix(x, name: str) -> np.ndarray:
    """An embedding or a batch of them (NumPy, ``tf.Tensor``, list) as float32 [rows, N]."""
    if type(x).__module__.startswith("tensorflow"):
        x = x.numpy()
    x = np.asarray(x)
    if x.dtype.kind not in "fiu":
        raise TypeError(f"similarity: {name} must be embeddings (a float array or tensor), got dtype {x.dtype}; "
                        "encode the sentences first.")
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        raise ValueError(f"similarity: {name} must be [N] or [rows, N], got shape {x.shape}.")
    return x.astype(np.float32, copy=False)


@dataclasses.dataclass
class TextEncoder:
    """A text-embedding SavedModel (string[B] → float[B, N]) loaded for encoding.

    Made by ``load``. ``encode`` (also ``__call__``) maps sentences to vectors with the
    module's own ``__call__`` (its ``serving_default`` computes the same), in batches, with
    the arguments of sentence-transformers' ``encode``; ``encode_iter`` streams any number of
    sentences in bounded memory; ``similarity`` is the cosine of two sets of vectors.

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
    """

    module: Any
    handle: str
    dim: int
    batch_size: int = 512
    sentence_end: str = "none"

    def _embed(self, batch: list, batch_size: int) -> np.ndarray:
        """float32 [len(batch), N]: one call of the module, padded with empty strings to a
        power of two (8 … ``batch_size``), whose rows are dropped."""
        import tensorflow as tf

        n = len(batch)
        if self.sentence_end != "none":
            from grounded_text.data.sentence_end import apply_sentence_end

            batch = apply_sentence_end(batch, self.sentence_end)
        size = max(n, min(batch_size, max(8, 1 << (n - 1).bit_length())))
        padded = tf.constant(list(batch) + [""] * (size - n), dtype=tf.string)
        return np.asarray(self.module(padded), dtype=np.float32)[:n]

    def encode_iter(self, sentences, *, batch_size: int | None = None, normalize_embeddings: bool = False,
                    precision: str = "float32"):
        """Embeds sentences batch by batch, reading them lazily: memory stays bounded by one
        batch, however many sentences a generator yields.

        Args:
          sentences: any iterable of ``str``/``bytes`` (a generator, a file object's lines, a
            list, a 1-D array or ``tf.Tensor``), or one ``str``.
          batch_size, normalize_embeddings, precision: see ``encode``.

        Yields:
          ``precision`` [b, N] arrays, b <= ``batch_size``, in input order.

        Raises:
          TypeError: an element that is not a str/bytes (its index is given); ValueError: a
            bad ``batch_size`` or ``precision``, an input of rank above 1.
        """
        batch_size = _check_batch_size(self.batch_size if batch_size is None else batch_size)
        if precision not in OUTPUT_PRECISIONS:
            raise ValueError(f"encode: precision must be one of {list(OUTPUT_PRECISIONS)}, got {precision!r}.")
        items, _ = _as_input(sentences)
        for chunk in _chunks(items, batch_size):
            out = self._embed(chunk, batch_size)
            if normalize_embeddings:
                out = _normalize(out)
            yield out.astype(OUTPUT_PRECISIONS[precision], copy=False)

    def encode(self, sentences, *, batch_size: int | None = None, show_progress_bar: bool | None = None,
               normalize_embeddings: bool = False, convert_to_numpy: bool = True, convert_to_tensor: bool = False,
               precision: str = "float32", show_progress: bool = False):
        """Embeds sentences (the arguments of sentence-transformers' ``encode``).

        Args:
          sentences: one ``str`` (or ``bytes``, UTF-8; or a 0-d string array or tensor); or a
            list/tuple, 1-D NumPy array, 1-D ``tf.Tensor`` of strings, or any iterable of them
            (a generator is read batch by batch, never held whole; B may be 0).
          batch_size: sentences per call of the module (≥ 1; default: the encoder's
            ``batch_size``, set by ``load``). Each call is padded with
            empty strings to a power of two (8 … ``batch_size``), whose rows are dropped:
            the loaded graph is re-optimised for every new batch shape (about 1.5 s each on
            2 CPU cores), so a few fixed shapes are much faster than arbitrary ones. The
            vectors do not depend on the batch (each row is encoded on its own). A list
            longer than one batch is encoded longest sentence first and returned in its
            own order (batches of like length pad little).
          show_progress_bar: a Keras progress bar over the sentences (stderr);
            ``show_progress`` is its older name.
          normalize_embeddings: scale each vector to unit L2 norm (a zero vector stays zero),
            so a dot product is the cosine.
          convert_to_numpy: return a NumPy array (default); ``False`` (and no tensor): a list
            of [N] arrays, as sentence-transformers does.
          convert_to_tensor: return a ``tf.Tensor`` (overrides ``convert_to_numpy``).
          precision: ``"float32"`` (default) or ``"float16"`` (half the memory; computed in
            float32, then rounded).

        Returns:
          ``precision`` [N] for one sentence, [B, N] otherwise: a NumPy array, a
          ``tf.Tensor`` (``convert_to_tensor``) or a list of B [N] arrays.

        Raises:
          TypeError: not a str or an iterable of str, or an element that is not a str/bytes
            (its index and type are given); a non-string array or tensor.
          ValueError: a rank-2 input, ``batch_size < 1``, an unknown ``precision``.
        """
        show = show_progress if show_progress_bar is None else show_progress_bar
        batch_size = _check_batch_size(self.batch_size if batch_size is None else batch_size)
        items, single = _as_input(sentences)
        total = len(items) if isinstance(items, (list, tuple)) else None
        if total is not None:
            _check_items(items, 0)  # a bad element of a list is refused before any work
        progress = None
        if show:
            import keras

            progress = keras.utils.Progbar(total, unit_name="sentence")
        # A list is encoded longest first, as sentence-transformers does: a batch of sentences of
        # like length pads little (a character model's cost grows with the longest of its batch),
        # and each row is encoded on its own, so the order changes no vector.
        order = _length_order(items) if total is not None and total > batch_size else None
        parts = []
        for part in self.encode_iter(items if order is None else [items[i] for i in order], batch_size=batch_size,
                                     normalize_embeddings=normalize_embeddings, precision=precision):
            parts.append(part)
            if progress is not None:
                progress.add(len(part))
        out = np.concatenate(parts, axis=0) if parts else np.zeros((0, self.dim), OUTPUT_PRECISIONS[precision])
        if order is not None:
            out = out[np.argsort(order, kind="stable")]
        if single:
            out = out[0]
        if convert_to_tensor:
            import tensorflow as tf

            return tf.constant(out)
        if not convert_to_numpy:
            return [row for row in out] if not single else out
        return out

    __call__ = encode

    @staticmethod
    def similarity(a, b):
        """Cosine similarity of every row of ``a`` with every row of ``b``.

        Args:
          a: float [A, N] or [N] (NumPy, ``tf.Tensor`` or a list), e.g. ``encode``'s output.
          b: float [B, N] or [N].

        Returns:
          float32 [A, B] (a 1-D input counts as one row): a ``tf.Tensor`` when ``a`` or ``b``
          is one, else a NumPy array. A zero vector has similarity 0 with everything.

        Raises:
          TypeError: an input that is not numeric (e.g. sentences: encode them first).
          ValueError: an input of rank above 2, or widths that differ.
        """
        tensor = any(type(x).__module__.startswith("tensorflow") for x in (a, b))
        x, y = _as_matrix(a, "a"), _as_matrix(b, "b")
        if x.shape[1] != y.shape[1]:
            raise ValueError(f"similarity: widths differ: a is [.., {x.shape[1]}], b is [.., {y.shape[1]}].")
        out = (_normalize(x) @ _normalize(y).T).astype(np.float32)
        if tensor:
            import tensorflow as tf

            return tf.constant(out)
        return out


def resolve_model(path_or_handle: str | os.PathLike) -> str | os.PathLike:
    """A shipped model's name (``grounded_text.models()``) → its text tower's folder; any
    other value unchanged. A folder of that name in the working directory wins over the
    shipped model. TF-free.

    Example:
      >>> resolve_model("vete_bow_flickr8k").name
      'export'
      >>> resolve_model("runs/my_run/export")
      'runs/my_run/export'
    """
    from grounded_text import pretrained

    if pretrained.is_name(path_or_handle) and not Path(path_or_handle).exists():
        return pretrained.export_dir(path_or_handle)
    return path_or_handle


def load(path_or_handle: str | os.PathLike, batch_size: int = 512, *, sentence_end: str | None = None) -> TextEncoder:
    """Loads a text-embedding SavedModel: a shipped model by name, a grounded_text export or
    any TF Hub text module.

    ``tensorflow_text`` is imported first, so modules that use its ops load. A SavedModel's
    graph is code: load only models you trust. A local export left half-swapped by a crash
    is restored first.

    Args:
      path_or_handle: the name of a model shipped in the package (``grounded_text.models()``
        lists them, e.g. ``"vete_bow_flickr8k"``: offline, nothing downloaded), a SavedModel
        folder (a relative path is resolved against the working directory now; a folder
        wins over a shipped model of the same name), or a TF Hub handle that
        ``tensorflow_hub`` resolves.
      batch_size: the encoder's default sentences per call (``TextEncoder.encode``).
      sentence_end: the sentence-end rule applied to every sentence
        (``grounded_text.data.sentence_end``: ``"none"``, ``"space_period"``,
        ``"space_period_tokens"``); ``None`` (default): the rule the model was trained with,
        as its export's ``assets/config.json`` records it (``"none"`` where it records none).
        The rule runs in Python before the module: a raw ``hub.load`` of the same folder
        does not apply it.

    Returns:
      A ``TextEncoder``.

    Raises:
      ValueError: an unknown ``sentence_end``.
      FileNotFoundError: a local folder with no ``saved_model.pb``, or a name that is
        neither a folder nor a shipped model (the message lists the shipped ones).
      EncoderSignatureError (a ValueError): the module does not map string[B] to float[B, N].

    Example:
      >>> enc = load("vete_bow_flickr8k")
      >>> enc.encode(["a dog runs"]).shape
      (1, 128)
      >>> load("runs/missing/export")  # doctest: +ELLIPSIS
      Traceback (most recent call last):
        ...
      FileNotFoundError: '...runs/missing/export' is not a SavedModel directory (no saved_model.pb), nor ...
    """
    from grounded_text.data.sentence_end import check_sentence_end, recorded_sentence_end
    from grounded_text.utils.durable import recover_export

    if sentence_end is not None:
        check_sentence_end(sentence_end)
    path_or_handle = resolve_model(path_or_handle)
    path = Path(os.fspath(path_or_handle)).expanduser()
    if path.exists() or "://" not in str(path_or_handle):
        path = path.resolve()
        recover_export(path)
        if not (path / "saved_model.pb").is_file():
            if not path.exists():
                from grounded_text import pretrained

                raise FileNotFoundError(f"{str(path)!r} is not a SavedModel directory (no saved_model.pb), nor "
                                        f"the name of a shipped model ({', '.join(pretrained.names()) or 'none'}).")
            raise FileNotFoundError(f"{str(path)!r} is not a SavedModel directory (no saved_model.pb).")
        handle = str(path)
    else:
        handle = str(path_or_handle)
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401  (registers the ops the module uses)

    module = hub.load(handle)
    dim = check_text_encoder(module, handle)
    rule = sentence_end if sentence_end is not None else (
        recorded_sentence_end(handle) if "://" not in handle else "none")
    return TextEncoder(module, handle, dim, batch_size, rule)
