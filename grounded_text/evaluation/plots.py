"""PNG figures of a run: training curves and a t-SNE of caption embeddings.

* ``plot_training_curves``: loss and validation metrics per epoch, from the run's
  ``metrics.json`` ``history`` (Keras ``History``) or, when that is missing, from
  the TensorBoard event files under ``RUN_DIR/logs`` (``epoch_*`` scalars).
* ``plot_tsne``: a 2-D t-SNE (``sklearn.manifold.TSNE``, van der Maaten & Hinton
  2008) of caption embeddings coloured by image, as Bordes et al. 2019 Fig. 3:
  a grounded space should put the captions of one image close together.

matplotlib runs with the non-interactive Agg backend (no display needed).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from grounded_text.utils.extras import assert_installed

# matplotlib and scikit-learn are the eval extra: _pyplot and plot_tsne name them where needed.
try:
    import matplotlib
    import matplotlib.pyplot as plt
except ImportError:
    matplotlib = plt = None
try:
    import sklearn.manifold
except ImportError:
    sklearn = None


def _pyplot():
    """pyplot on the Agg backend (chosen before the first figure: importing pyplot picks none)."""
    assert_installed(matplotlib, "matplotlib", "The evaluation plots").use("Agg", force=True)
    return plt


def history_from_tensorboard(log_dir: str | Path) -> dict[str, list[float]]:
    """Per-epoch scalars from Keras TensorBoard logs (``logs/train``, ``logs/validation``).

    Keras writes ``epoch_<metric>`` scalars; validation ones are returned as
    ``val_<metric>``. Returns ``{name: [value per epoch, in step order]}`` (empty
    if no event file is found).
    """
    out: dict[str, dict[int, float]] = {}
    for event_file in sorted(Path(log_dir).rglob("*tfevents*")):
        prefix = "val_" if "validation" in event_file.parent.name else ""
        for event in tf.compat.v1.train.summary_iterator(str(event_file)):
            for value in event.summary.value:
                if not value.tag.startswith("epoch_"):
                    continue
                if value.HasField("simple_value"):
                    x = float(value.simple_value)
                else:
                    x = float(tf.make_ndarray(value.tensor))
                name = value.tag[len("epoch_"):]
                if prefix and name.startswith("val_"):
                    name = name[len("val_"):]
                out.setdefault(prefix + name, {})[int(event.step)] = x
    return {k: [v[s] for s in sorted(v)] for k, v in out.items()}


def load_history(run_dir: str | Path) -> dict[str, list[float]]:
    """The run's per-epoch history: ``metrics.json`` ``history``, else the TensorBoard logs.

    Raises:
      FileNotFoundError: neither is found.
    """
    run_dir = Path(run_dir)
    metrics = run_dir / "metrics.json"
    if metrics.is_file():
        hist = json.loads(metrics.read_text()).get("history")
        if hist:
            return hist
    if (run_dir / "logs").is_dir():
        hist = history_from_tensorboard(run_dir / "logs")
        if hist:
            return hist
    raise FileNotFoundError(f"No training history in {str(run_dir)!r} (metrics.json history or logs/).")


def plot_training_curves(history: dict[str, Sequence[float]], out_png: str | Path, title: str = "Training") -> Path:
    """Loss panel (``loss``, ``val_loss``) and one panel of the other validation metrics.

    Args:
      history: ``{name: per-epoch values}`` (Keras ``History.history``).
      out_png: file to write.
      title: figure title.

    Returns:
      ``out_png`` as a ``Path``.

    Raises:
      ValueError: empty history.
    """
    if not history:
        raise ValueError("plot_training_curves: empty history.")
    plt = _pyplot()
    loss_keys = [k for k in ("loss", "val_loss") if k in history]
    other = [k for k in history if k not in loss_keys and "/" not in k]
    panels = [loss_keys] + ([other] if other else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for ax, keys in zip(axes[0], panels):
        for k in keys:
            ys = np.asarray(history[k], dtype=np.float64)
            ax.plot(np.arange(1, ys.size + 1), ys, marker="o", ms=3, label=k)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0][0].set_ylabel("loss")
    if len(panels) > 1:
        axes[0][1].set_ylabel("validation metric")
    fig.suptitle(title)
    return _save(fig, out_png)


def plot_tsne(embeddings: np.ndarray, labels: Sequence, out_png: str | Path, *, title: str = "t-SNE",
              seed: int = 0, perplexity: float = 10.0) -> Path:
    """t-SNE (cosine metric, PCA init, seeded) of embeddings [n, N], one colour per label.

    Args:
      embeddings: float [n, N], n ≥ 5.
      labels: [n] group of each point (e.g. image id); up to 20 groups get
        distinct colours (tab20).
      out_png: file to write.
      perplexity: clipped to ``(n − 1) / 3``.

    Returns:
      ``out_png`` as a ``Path``.
    """
    TSNE = assert_installed(sklearn, "sklearn", "The t-SNE plot").manifold.TSNE

    x = np.asarray(embeddings, dtype=np.float64)
    labels = list(labels)
    if x.ndim != 2 or x.shape[0] != len(labels) or x.shape[0] < 5:
        raise ValueError(f"plot_tsne: need [n>=5, N] embeddings with n labels, got {x.shape}, {len(labels)} labels.")
    perplexity = min(perplexity, (x.shape[0] - 1) / 3)
    xy = TSNE(n_components=2, perplexity=perplexity, metric="cosine", init="pca", random_state=seed).fit_transform(x)
    groups = list(dict.fromkeys(labels))
    plt = _pyplot()
    cmap = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(7, 6))
    for g_i, g in enumerate(groups):
        idx = [i for i, lab in enumerate(labels) if lab == g]
        ax.scatter(xy[idx, 0], xy[idx, 1], s=30, color=cmap(g_i % 20), label=str(g)[:18])
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=9)
    if len(groups) <= 20:
        ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5), title="image")
    return _save(fig, out_png)


def _save(fig, out_png) -> Path:
    """Lays out, writes ``out_png`` (110 dpi, parent folders created) and closes ``fig``."""
    plt = _pyplot()
    fig.tight_layout()
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png
