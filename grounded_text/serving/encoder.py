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
    """A SavedModel that is not a text encoder string[B] → float[B, N]."""


def _spec_text(spec) -> str:
    shape = getattr(spec, "shape", None)
    dtype = getattr(spec, "dtype", None)
    if shape is None or dtype is None:
        return repr(spec)
    dims = "?" if shape.rank is None else ", ".join("None" if d is None else str(d) for d in shape.as_list())
    return f"{dtype.name}[{dims}]"


def describe_signatures(module) -> str:
    """One line naming what a loaded SavedModel offers: its ``__call__`` input specs and
    its signatures (inputs → outputs), for error messages."""
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



def _as_sentences(sentences) -> tuple[list, bool]:
    """``(list of str/bytes, single)``: ``single`` when one sentence was given.

    Raises:
      TypeError: not a str, bytes, sequence, NumPy array or ``tf.Tensor`` of strings;
        or an element that is not a str/bytes (the message gives its index and type).
      ValueError: an array or tensor of rank above 1.
    """
    if isinstance(sentences, (str, bytes)):
        return [sentences], True
    if type(sentences).__module__.startswith("tensorflow"):
        import tensorflow as tf

        if isinstance(sentences, tf.Tensor):
            if sentences.dtype != tf.string:
                raise TypeError(f"encode: a tf.Tensor of dtype string is expected, got {sentences.dtype.name}.")
            sentences = sentences.numpy()
    if isinstance(sentences, np.ndarray):
        if sentences.dtype.kind not in "USO":
            raise TypeError(f"encode: an array of strings is expected, got dtype {sentences.dtype}.")
        if sentences.ndim == 0:
            return [sentences.item()], True
        if sentences.ndim > 1:
            raise ValueError(f"encode: a 1-D batch of sentences is expected, got shape {sentences.shape}.")
        sentences = sentences.tolist()
    if not isinstance(sentences, Iterable):
        raise TypeError(f"encode: a str or a list of str is expected, got {type(sentences).__name__}.")
    out = list(sentences)
    for i, s in enumerate(out):
        if not isinstance(s, (str, bytes)):
            raise TypeError(f"encode: sentence {i} is a {type(s).__name__}, not a str.")
    return out, False


@dataclasses.dataclass
class TextEncoder:
    """A text-embedding SavedModel (string[B] → float[B, N]) loaded for encoding.

    Made by ``load``. ``encode`` (also ``__call__``) maps sentences to vectors with the
    module's own ``__call__`` (its ``serving_default`` computes the same), in batches.

    Attributes:
      module: the object ``tensorflow_hub.load`` returned (callable on ``tf.string`` [B]).
      handle: the absolute path (or TF Hub handle) it was loaded from.
      dim: N, the embedding width.
    """

    module: Any
    handle: str
    dim: int
    batch_size: int = 512

    def encode(self, sentences, *, batch_size: int | None = None, show_progress: bool = False) -> np.ndarray:
        """Embeds sentences.

        Args:
          sentences: one ``str`` (or ``bytes``, UTF-8); or a list/tuple, 1-D NumPy array
            or 1-D ``tf.Tensor`` of strings (B of them; B may be 0).
          batch_size: sentences per call of the module (≥ 1; default: the encoder's
            ``batch_size``, set by ``load``). Each call is padded with
            empty strings to a power of two (8 … ``batch_size``), whose rows are dropped:
            the loaded graph is re-optimised for every new batch shape (about 1.5 s each on
            2 CPU cores), so a few fixed shapes are much faster than arbitrary ones. The
            vectors do not depend on the batch (each row is encoded on its own).
          show_progress: a Keras progress bar over the batches (stderr).

        Returns:
          ``float32`` [N] for one ``str``; ``float32`` [B, N] otherwise.

        Raises:
          TypeError: see ``_as_sentences``; ValueError: a rank-2 input or ``batch_size < 1``.
        """
        batch_size = self.batch_size if batch_size is None else batch_size
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"encode: batch_size must be an int >= 1, got {batch_size!r}.")
        items, single = _as_sentences(sentences)
        if not items:
            return np.zeros((0, self.dim), np.float32)
        import tensorflow as tf

        progress = None
        if show_progress:
            import keras

            progress = keras.utils.Progbar(len(items), unit_name="sentence")
        parts = []
        for start in range(0, len(items), batch_size):
            batch = items[start:start + batch_size]
            n = len(batch)
            size = max(n, min(batch_size, max(8, 1 << (n - 1).bit_length())))
            padded = tf.constant(list(batch) + [""] * (size - n), dtype=tf.string)
            parts.append(np.asarray(self.module(padded), dtype=np.float32)[:n])
            if progress is not None:
                progress.add(n)
        out = np.concatenate(parts, axis=0)
        return out[0] if single else out

    __call__ = encode


def resolve_model(path_or_handle: str | os.PathLike) -> str | os.PathLike:
    """A shipped model's name (``grounded_text.models()``) → its text tower's folder; any
    other value unchanged. A folder of that name in the working directory wins over the
    shipped model. TF-free."""
    from grounded_text import pretrained

    if pretrained.is_name(path_or_handle) and not Path(path_or_handle).exists():
        return pretrained.export_dir(path_or_handle)
    return path_or_handle


def load(path_or_handle: str | os.PathLike, batch_size: int = 512) -> TextEncoder:
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

    Returns:
      A ``TextEncoder``.

    Raises:
      FileNotFoundError: a local folder with no ``saved_model.pb``, or a name that is
        neither a folder nor a shipped model (the message lists the shipped ones).
      EncoderSignatureError (a ValueError): the module does not map string[B] to float[B, N].
    """
    from grounded_text.utils.durable import recover_export

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
    return TextEncoder(module, handle, dim, batch_size)
