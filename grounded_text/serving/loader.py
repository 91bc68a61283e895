"""Loading a text-embedding SavedModel, and its checks: ``load`` and ``model_sentence_end``.

A model is named once (``resolve_model``: a shipped model's name, a SavedModel folder or a TF
Hub handle), found once (the folder it is read from: a URL handle's is the one
``tensorflow_hub`` unpacks it into) and its sentence-end rule decided once, from the config
that folder's export records, here for ``grounded_text.load``, the evaluate command, the
trainer's end-of-run scoring and the experiments. Before TensorFlow reads the export it is
checked against its record (:mod:`grounded_text.serving.integrity`); once loaded it is called on
two probe sentences (``check_text_encoder``). What is loaded is a
:class:`~grounded_text.serving.encoder.TextEncoder`.

Example:
    >>> model_sentence_end("char_gru_attention_flickr8k")   # recorded by the shipped model
    'space_period'
"""

from __future__ import annotations

import os
from pathlib import Path

import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # noqa: F401  (registers the ops the modules use: imported before any is loaded)

from grounded_text import shipped
from grounded_text.config.params import ENCODER_PARAMS
from grounded_text.data.sentence_end import check_sentence_end, rule_from_config
from grounded_text.papers.presets import get_preset
from grounded_text.serving.encoder import CHARACTER_BATCH_CHARS, TextEncoder
from grounded_text.serving.images import image_export_beside
from grounded_text.serving.integrity import DamagedExportError, check_export, read_export_config
from grounded_text.utils.durable import recover_export

__all__ = ["EncoderSignatureError", "check_text_encoder", "describe_signatures", "load", "model_sentence_end",
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
        if isinstance(outputs, dict):
            outs = ", ".join(f"{k}: {_spec_text(v)}" for k, v in outputs.items())
        else:
            outs = _spec_text(outputs)
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
      grounded_text.serving.loader.EncoderSignatureError: 'toy' is not a text-embedding SavedModel ...
      returned float32[3]; ...
    """
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
    if shipped.is_name(path_or_handle) and not Path(path_or_handle).exists():
        return shipped.export_dir(path_or_handle)
    return path_or_handle


def _locate(model) -> tuple[str | None, Path]:
    """``(URL handle or None, folder)``: the one resolution of ``model`` (a shipped model's name,
    a folder or a TF Hub URL handle) into the folder its export is read from; a URL handle's is
    the folder ``tensorflow_hub`` downloads and unpacks it into, once (``hub.load`` reads it)."""
    model = resolve_model(model)
    text = str(os.fspath(model))
    path = Path(text).expanduser()
    if "://" in text and not path.exists():
        return text, Path(hub.resolve(text))
    return None, path


def _recorded_rule(config: dict | None, folder: Path) -> str:
    """The sentence-end rule an export's config records (``"none"`` for none)."""
    return rule_from_config(config, f"export {str(folder)!r}")


def model_sentence_end(model, sentence_end: str | None = None) -> str:
    """The sentence-end rule a model's sentences get: the one function that decides it for
    ``grounded_text.load``, the evaluate command, the trainer's end-of-run scoring and the
    experiments.

    Args:
      model: a loaded ``TextEncoder`` (the rule ``load`` decided), a shipped model's name, a
        SavedModel folder, or a TF Hub URL handle (the rule is read from the folder
        ``tensorflow_hub`` unpacks it into, as ``hub.load`` does).
      sentence_end: a rule given explicitly (``load(sentence_end=...)``, ``--sentence-end``):
        it wins; ``None``: the rule the model was trained with.

    Returns:
      ``sentence_end`` when given; else the encoder's rule, or ``text.sentence_end`` of the
      model's ``assets/config.json`` (``rule_from_config``), ``"none"`` for a SavedModel with no
      such config (a TF Hub module from elsewhere).

    Raises:
      ValueError: an unknown ``sentence_end``; a config that this package's export lists but
        that is missing, unreadable or not JSON (``DamagedExportError``),
        or that records an unknown rule or a misspelt key. Such an export never silently gets
        ``"none"``.

    Example:
      >>> model_sentence_end("char_gru_attention_flickr8k")
      'space_period'
      >>> model_sentence_end("char_gru_attention_flickr8k", "none")
      'none'
      >>> model_sentence_end("vete_bow_flickr8k")
      'none'
    """
    if sentence_end is not None:
        return check_sentence_end(sentence_end)
    if isinstance(model, TextEncoder):
        return model.sentence_end
    _, folder = _locate(model)
    return _recorded_rule(read_export_config(folder), folder)


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
        as its export's ``assets/config.json`` records it (``"none"`` where it records none,
        or for a module with no such config); for a URL handle, the config of the folder
        ``tensorflow_hub`` unpacks it into
        (``model_sentence_end`` decides).
        The rule runs in Python before the module: a raw ``hub.load`` of the same folder
        does not apply it.

    Returns:
      A ``TextEncoder``.

    The export is checked before TensorFlow reads it
    (``grounded_text.serving.integrity.check_export``): against the sizes, SHA-256 digests and
    vocabulary size its config records (exports written before that record are checked for
    the files every SavedModel needs).

    Raises:
      ValueError: an unknown ``sentence_end``; an export whose config records an unknown
        rule or a misspelt ``sentence_end`` key.
      FileNotFoundError: a local folder with no ``saved_model.pb``, or a name that is
        neither a folder nor a shipped model (the message lists the shipped ones).
      DamagedExportError (a ValueError): a damaged export: a recorded file missing, cut
        short or changed, a vocabulary of another size, a config that its SavedModel lists
        but that is missing, unreadable or not JSON, a ``saved_model.pb`` that does not parse,
        or a SavedModel that TensorFlow cannot load. One line naming the file.
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
    rule = None if sentence_end is None else check_sentence_end(sentence_end)
    url, folder = _locate(path_or_handle)
    if url is None:
        folder = folder.resolve()
        recover_export(folder)
        if not (folder / "saved_model.pb").is_file():
            if not folder.exists():
                raise FileNotFoundError(f"{str(folder)!r} is not a SavedModel directory (no saved_model.pb), nor "
                                        f"the name of a shipped model ({', '.join(shipped.names()) or 'none'}).")
            raise FileNotFoundError(f"{str(folder)!r} is not a SavedModel directory (no saved_model.pb).")
    handle = str(folder) if url is None else url
    config = read_export_config(folder)
    check_export(folder, config)
    rule = rule or _recorded_rule(config, folder)
    module = _hub_load(handle)
    dim = check_text_encoder(module, handle)
    image = image_export_beside(handle) if url is None else None
    return TextEncoder(module, handle, dim, batch_size, rule, None if image is None else str(image),
                       max_batch_chars=_batch_char_budget(config), _max_seq_length=_max_seq_length(config))


def _hub_load(handle: str):
    """``tensorflow_hub.load(handle)``; a SavedModel TensorFlow cannot read raises one line.

    Raises:
      DamagedExportError: any failure of ``hub.load`` (its TensorFlow error, which runs to
        many lines, is cut to its first).
    """
    try:
        return hub.load(handle)
    except Exception as e:  # TF raises many kinds; each means "this SavedModel cannot be used"
        first = (str(e).strip().splitlines() or [""])[0][:300]
        message = f"{handle!r} cannot be loaded as a SavedModel ({type(e).__name__}: {first})."
        raise DamagedExportError(message) from None


def _batch_char_budget(config: dict | None) -> int | None:
    """``TextEncoder.max_batch_chars`` of the model an export's config describes:
    ``CHARACTER_BATCH_CHARS`` for a character-level model (its encoder has a ``char_dim``, in
    the config or among its builder's parameters), else ``None``."""
    model = (config or {}).get("model")
    if not isinstance(model, dict):
        return None
    encoder = model.get("encoder")
    if isinstance(encoder, dict) and "char_dim" in encoder:
        return CHARACTER_BATCH_CHARS
    try:
        builder = get_preset(model.get("name")).builder
    except Exception:  # an unknown or foreign name: not one of ours, no budget
        return None
    return CHARACTER_BATCH_CHARS if "char_dim" in ENCODER_PARAMS.get(builder, {}) else None


def _max_seq_length(config: dict | None) -> int | None:
    """``TextEncoder.max_seq_length`` of the model an export's config describes: the characters of
    one sentence its module reads, i.e. the export's cut (``input_limits.max_bytes``), or a
    character model's ``model.encoder.max_chars`` where that is smaller; ``None`` where the config
    records neither."""
    config = config if isinstance(config, dict) else {}
    limits = config.get("input_limits")
    model = config.get("model")
    encoder = model.get("encoder") if isinstance(model, dict) else None
    cuts = [limits.get("max_bytes") if isinstance(limits, dict) else None,
            encoder.get("max_chars") if isinstance(encoder, dict) else None]
    cuts = [int(c) for c in cuts if isinstance(c, int) and not isinstance(c, bool) and c > 0]
    return min(cuts) if cuts else None
