"""The flag checks that ``search`` and ``annotate`` share, each returning one line (printed as
``error: ...``, exit 2) or ``None``. They run before TensorFlow is imported, so that ``--help``
and flag errors answer at once. No NumPy, no TensorFlow."""

from __future__ import annotations

from pathlib import Path

from grounded_text import shipped
from grounded_text.utils.durable import check_writable_target
from grounded_text.vision.folders import PHOTO_EXTENSIONS, has_photos

__all__ = ["counts_error", "model_and_index_error", "no_photos_error"]


def counts_error(top_k: int, batch_size: int) -> str | None:
    """``--top-k`` and ``--batch-size`` below 1."""
    if top_k < 1:
        return f"--top-k must be >= 1, got {top_k}."
    if batch_size < 1:
        return f"--batch-size must be >= 1, got {batch_size}."
    return None


def no_photos_error(given: str, folder: Path) -> str | None:
    """An existing ``--images`` folder that holds no photo."""
    if not has_photos(folder):
        return (f"--images {given!r} holds no photos (looked for {' '.join(PHOTO_EXTENSIONS)} files, "
                "recursively, hidden names left out).")
    return None


def model_and_index_error(model: str, index: str | None) -> str | None:
    """A ``--model`` that is neither a shipped model nor an existing folder (or URL), and an
    ``--index`` root that cannot be written."""
    model = str(model)
    if not (shipped.is_name(model) or Path(model).expanduser().exists() or "://" in model):
        return (f"--model {model!r} is neither a shipped model ({', '.join(shipped.names())}) "
                "nor an existing export folder.")
    if index is not None:
        try:
            check_writable_target(Path(index).expanduser(), "--index")
        except OSError as e:
            return str(e)
    return None
