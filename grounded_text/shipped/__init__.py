"""What ships inside the package, and the index of its trained encoders: ``gt.load(NAME)``
works offline, at once.

This folder holds the weights of the image network the shipped models' image towers read
(``efficientnet_lite0_imagenet.weights.h5``, ``grounded_text.vision.lite0``) and one folder
``<name>/`` per shipped model, holding

* ``export/``: the TF Hub text tower (``saved_model.pb``, ``variables/``, ``assets/``) with its
  ``model_card.md`` (figures with 95% intervals, the training command and data, the data's
  terms);
* ``image_export/``: the image tower (image features → the same space), for retrieval;
* ``model.json``: what ``models()`` reports (name, dims, figures, sizes, the command).

``python -m grounded_text.experiments.shipped NAME --data-dir DATA`` (re)makes one from the
recipe in ``grounded_text/experiments/shipped.py``. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["SHIPPED_DIR", "MODEL_FILE", "TERMS", "names", "export_dir", "image_export_dir", "models", "is_name"]

SHIPPED_DIR = Path(__file__).resolve().parent
MODEL_FILE = "model.json"
#: A shipped model's terms in short, for a record that gives none of its own (its ``licence``
#: gives them in full, as its card does). Every shipped model is trained on Flickr8k, which is
#: distributed for research use only; the package's Apache-2.0 licence covers its code, not
#: these weights (the NOTICE file beside the licence lists both).
TERMS = "research use only (Flickr8k's terms, which bind these weights; not the code's Apache-2.0)"


def names() -> list[str]:
    """The shipped models' names, sorted."""
    return sorted(p.parent.name for p in SHIPPED_DIR.glob(f"*/{MODEL_FILE}"))


def is_name(value) -> bool:
    """Whether ``value`` is the name of a shipped model (a plain ``str``, no path separator)."""
    return isinstance(value, str) and "/" not in value and "\\" not in value and value in names()


def _folder(name: str) -> Path:
    if not is_name(name):
        raise KeyError(f"no shipped model {name!r}; shipped: {', '.join(names()) or 'none'}.")
    return SHIPPED_DIR / name


def export_dir(name: str) -> Path:
    """The text tower (a SavedModel folder) of a shipped model.

    Raises:
      KeyError: not a shipped name (the message lists them).
    """
    return _folder(name) / "export"


def image_export_dir(name: str) -> Path | None:
    """The image tower of a shipped model, or ``None`` when it has none."""
    path = _folder(name) / "image_export"
    return path if (path / "saved_model.pb").is_file() else None


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def models() -> list[dict]:
    """One dict per shipped model (TF-free): ``name``, ``description``, ``dims`` (embedding
    width), ``image_dims`` (the image features its image tower takes, or ``None``),
    ``figures`` (``{figure: {"value", "ci95": [lo, hi], "n"}}``, unsupervised cosine Pearson r),
    ``size_bytes`` (on disk, both towers), ``weights_dtype``, ``command`` (how it was trained),
    ``data``, ``licence`` (the training data's terms, in full), ``terms`` (the same in short:
    ``TERMS`` unless the record gives its own) and ``path`` (the text tower, for ``gt.load``)."""
    out = []
    for name in names():
        folder = SHIPPED_DIR / name
        record = json.loads((folder / MODEL_FILE).read_text(encoding="utf-8"))
        record["name"] = name
        record.setdefault("terms", TERMS)
        record["size_bytes"] = _bytes(folder / "export") + _bytes(folder / "image_export")
        record["path"] = str(folder / "export")
        out.append(record)
    return out
