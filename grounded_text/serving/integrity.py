"""An export's record of its own files, written when it is exported and checked when it is loaded.

A text export made by this package records, in ``assets/config.json`` under ``"integrity"``,
the size in bytes and the SHA-256 digest of every file of the SavedModel except
``assets/config.json`` itself and ``model_card.md`` (rewritten after training with the
figures): ``saved_model.pb``, ``fingerprint.pb``, ``variables/*`` and the other assets, and
the number of lines of ``assets/vocab.txt`` (``vocab_size``; ``None`` for a model with no
word vocabulary)::

    "integrity": {"vocab_size": 16032,
                  "files": {"saved_model.pb": {"bytes": 677066, "sha256": "9f…"}, …}}

An image tower (``image_export/``) carries the same record, plus a copy of its feature record
(``"image_features"``: the network, weights, crops, image size and preprocessing its training
features were made with), which must equal the config's own ``image_features``: an edited
config (``crops`` turned to 10) would otherwise change what photos become without a word.

``check_export`` compares the folder with that record before TensorFlow reads it, so a
damaged export (a truncated, emptied or altered file, a missing ``variables/`` or
``vocab.txt``, a vocabulary cut short) is refused with one line naming the file, instead of
a raw TensorFlow error, a crash, or, for a shortened vocabulary, wrong vectors for rare words.
Hashing reads every file once (about 20 ms for the shipped models).

An export written before the record existed (or by another tool) is checked for what a
SavedModel must hold: a ``saved_model.pb`` that parses, the assets it lists, and
``variables/variables.index`` when it has variables.

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> (d / "assets").mkdir()
    >>> _ = (d / "assets" / "vocab.txt").write_text("dog\\ncat\\n")
    >>> record = export_record(d)
    >>> record["vocab_size"], sorted(record["files"])
    (2, ['assets/vocab.txt'])
    >>> _ = (d / "assets" / "vocab.txt").write_text("dog\\n")
    >>> verify_record(d, record)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    grounded_text.serving.integrity.DamagedExportError: ... assets/vocab.txt has 1 lines; the export recorded 2 ...
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from google.protobuf.message import DecodeError
from tensorflow.core.protobuf import saved_model_pb2

from grounded_text.utils.durable import atomic_write, file_sha256

__all__ = ["CONFIG_FILE", "DamagedExportError", "FEATURE_RECORD_KEY", "INTEGRITY_KEY", "check_export",
           "export_record", "read_export_config", "record_integrity", "verify_record"]

#: Where an export keeps its training config (and the record), relative to its folder.
CONFIG_FILE = "assets/config.json"
VOCAB_FILE = "assets/vocab.txt"
INTEGRITY_KEY = "integrity"
#: An image tower's feature record (a key of its config, copied into its integrity record).
FEATURE_RECORD_KEY = "image_features"
# Not recorded: the config holds the record, and the model card is rewritten after export.
_UNRECORDED = {CONFIG_FILE, "model_card.md"}


class DamagedExportError(ValueError):
    """A SavedModel folder that cannot be used as it is: a file missing, unreadable, cut short
    or changed since it was exported. The message is one line naming the file.

    Example:
      >>> issubclass(DamagedExportError, ValueError)
      True
    """


def _line_count(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def export_record(export_dir: str | os.PathLike) -> dict:
    """The record of ``export_dir``'s files (module docstring).

    Returns:
      ``{"vocab_size": int | None, "files": {relative path: {"bytes": int, "sha256": str}}}``,
      paths with ``/`` separators, sorted.
    """
    root = Path(export_dir)
    files = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel in _UNRECORDED or any(part.startswith(".") for part in Path(rel).parts):
            continue
        files[rel] = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
    vocab = root / VOCAB_FILE
    return {"vocab_size": _line_count(vocab) if vocab.is_file() else None, "files": files}


def record_integrity(export_dir: str | os.PathLike) -> dict:
    """Adds ``export_record(export_dir)`` to its ``assets/config.json`` (replaced atomically),
    with a copy of the config's ``image_features`` for an image tower.

    Call it once the SavedModel is complete: it describes the files as they are now. It is also
    how an export re-saved on purpose (``tf.saved_model.save`` of a loaded export, which copies
    the old record with the config) is recorded again.

    Returns:
      The record written.

    Raises:
      FileNotFoundError: the export has no ``assets/config.json``.
    """
    root = Path(export_dir)
    path = root / CONFIG_FILE
    config = json.loads(path.read_text(encoding="utf-8"))
    config[INTEGRITY_KEY] = record = export_record(root)
    if FEATURE_RECORD_KEY in config:
        record[FEATURE_RECORD_KEY] = config[FEATURE_RECORD_KEY]
    text = json.dumps(config, indent=2, default=str).encode("utf-8")
    atomic_write(path, lambda f: f.write(text))
    return record


def _declares_config(root: Path) -> bool:
    """Whether the SavedModel lists ``config.json`` among its assets (the file names of its
    assets are plain strings in ``saved_model.pb``): every export of this package does."""
    try:
        return b"config.json" in (root / "saved_model.pb").read_bytes()
    except OSError:
        return False


def read_export_config(export_dir: str | os.PathLike) -> dict | None:
    """The training config an export records (``assets/config.json``), or ``None`` for a
    SavedModel that has none (a TF Hub module from elsewhere, a bare folder).

    Raises:
      DamagedExportError: the SavedModel lists ``config.json`` as an asset but the file is
        missing (deleted or renamed); the file cannot be read, is not JSON, or is not a JSON
        object. The message names the file.
    """
    root = Path(export_dir)
    path = root / CONFIG_FILE
    if not path.exists():
        if _declares_config(root):
            raise DamagedExportError(f"export {str(root)!r} is damaged: {CONFIG_FILE} is missing (its SavedModel "
                                     "lists it as an asset; it holds the model's training config and sentence-end "
                                     "rule). Restore the file or re-export the model.")
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise DamagedExportError(f"export {str(root)!r}: {CONFIG_FILE} cannot be read "
                                 f"({e.strerror or type(e).__name__}).") from None
    except UnicodeDecodeError as e:
        raise DamagedExportError(f"export {str(root)!r}: {CONFIG_FILE} is not UTF-8 text "
                                 f"(byte {e.start}).") from None
    try:
        config = json.loads(text)
    except ValueError as e:
        raise DamagedExportError(f"export {str(root)!r}: {CONFIG_FILE} is not valid JSON ({e}).") from None
    if not isinstance(config, dict):
        raise DamagedExportError(f"export {str(root)!r}: {CONFIG_FILE} holds a JSON {type(config).__name__}, "
                                 "not an object.")
    return config


def _differs(root: Path, rel: str, what: str) -> DamagedExportError:
    """A file that is not the one recorded: cut short, altered or replaced, or the whole export
    re-saved by ``tf.saved_model.save`` (which copies the old record with the config)."""
    return DamagedExportError(
        f"export {str(root)!r} does not match its record: {rel} {what}. Its files are not the ones exported (cut "
        "short, altered, or re-saved: tf.saved_model.save of a loaded export writes new files but keeps the old "
        "record); restore the exported files, or if it was re-saved on purpose record its files again with "
        f"grounded_text.serving.integrity.record_integrity({str(root)!r}).")


def verify_record(export_dir: str | os.PathLike, record: dict, config: dict | None = None) -> None:
    """Compares ``export_dir``'s files with ``record`` (``export_record``'s format), and the
    config's ``image_features`` with the record's copy where the record has one.

    Args:
      export_dir: the SavedModel folder. record: its ``"integrity"`` record.
      config: its ``assets/config.json`` (``read_export_config``), for the feature record.

    Raises:
      DamagedExportError: a recorded file that is missing, unreadable, of another size or
        another digest; a vocabulary of another number of lines; a feature record that differs
        from the one recorded; a malformed record. The message names the first such file.
    """
    root = Path(export_dir)
    where = f"export {str(root)!r} is damaged:"
    files = record.get("files") if isinstance(record, dict) else None
    if not isinstance(files, dict):
        raise DamagedExportError(f"export {str(root)!r}: {CONFIG_FILE} has a malformed {INTEGRITY_KEY!r} record.")
    vocab_size = record.get("vocab_size")
    if vocab_size is not None:
        vocab = root / VOCAB_FILE
        if not vocab.is_file():
            raise DamagedExportError(f"{where} {VOCAB_FILE} is missing (the export recorded {vocab_size} words).")
        lines = _line_count(vocab)
        if lines != vocab_size:
            raise DamagedExportError(f"{where} {VOCAB_FILE} has {lines} lines; the export recorded {vocab_size} "
                                     "(a vocabulary cut or extended gives wrong vectors to the words it moves).")
    if FEATURE_RECORD_KEY in record and (config or {}).get(FEATURE_RECORD_KEY) != record[FEATURE_RECORD_KEY]:
        now, then = (config or {}).get(FEATURE_RECORD_KEY) or {}, record[FEATURE_RECORD_KEY] or {}
        differ = sorted(k for k in set(now) | set(then) if now.get(k) != then.get(k)) or ["the record"]
        raise DamagedExportError(
            f"{where} {CONFIG_FILE} says its training features were made with "
            f"{', '.join(f'{k}={now.get(k)!r}' for k in differ)}, but the export recorded "
            f"{', '.join(f'{k}={then.get(k)!r}' for k in differ)} (edited after export: photos would be turned into "
            "features another way than the tower was trained on). Restore the file or re-export the tower.")
    for rel, want in files.items():
        path = root / rel
        if not path.is_file():
            parent = next((p for p in reversed(Path(rel).parents) if str(p) != "." and not (root / p).is_dir()),
                          None)
            missing = f"{parent.as_posix()}/" if parent is not None else rel
            raise DamagedExportError(f"{where} {missing} is missing.")
        try:
            size = path.stat().st_size
            if size != want.get("bytes"):
                raise _differs(root, rel, f"has {size} bytes; the export recorded {want.get('bytes')}")
            if file_sha256(path) != want.get("sha256"):
                raise _differs(root, rel, "has another SHA-256 digest than the export recorded")
        except OSError as e:
            raise DamagedExportError(f"{where} {rel} cannot be read ({e.strerror or type(e).__name__}).") from None


def _check_structure(root: Path) -> None:
    """The checks for an export without a record: ``saved_model.pb`` parses; the assets it
    lists exist; ``variables/variables.index`` exists when it has variables."""
    where = f"export {str(root)!r} is damaged:"
    pb = root / "saved_model.pb"
    try:
        data = pb.read_bytes()
    except OSError as e:
        raise DamagedExportError(f"{where} saved_model.pb cannot be read ({e.strerror}).") from None
    if not data:
        raise DamagedExportError(f"{where} saved_model.pb is empty.")
    saved = saved_model_pb2.SavedModel()
    try:
        saved.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError):
        raise DamagedExportError(f"{where} saved_model.pb cannot be parsed (truncated or altered).") from None
    if not saved.meta_graphs:
        raise DamagedExportError(f"{where} saved_model.pb holds no graph (truncated or altered).")
    graph = saved.meta_graphs[0]
    for asset in graph.asset_file_def:
        if asset.filename and not (root / "assets" / asset.filename).is_file():
            raise DamagedExportError(f"{where} assets/{asset.filename} is missing (its SavedModel lists it).")
    has_variables = any(node.WhichOneof("kind") == "variable" for node in graph.object_graph_def.nodes)
    if has_variables:
        if not (root / "variables").is_dir():
            raise DamagedExportError(f"{where} variables/ is missing (the model has variables).")
        if not (root / "variables" / "variables.index").is_file():
            raise DamagedExportError(f"{where} variables/variables.index is missing.")


def check_export(export_dir: str | os.PathLike, config: dict | None = None) -> None:
    """Checks a local SavedModel folder before it is loaded: against its record when its
    config has one (``verify_record``), else for what every SavedModel holds.

    Args:
      export_dir: the SavedModel folder.
      config: its ``read_export_config`` (read here when ``None``).

    Raises:
      DamagedExportError: see ``read_export_config``, ``verify_record``; for an export without
        a record, a ``saved_model.pb`` that is empty or does not parse, a listed asset that is
        missing, or missing variables.
    """
    root = Path(export_dir)
    if config is None:
        config = read_export_config(root)
    if config is not None and INTEGRITY_KEY in config:
        verify_record(root, config[INTEGRITY_KEY], config)
    _check_structure(root)
