"""PNG charts of the report tables: where a reader would rather look than read numbers.

* ``forest_plot``: the papers' figures beside ours, each with its 95 % interval (the
  reproduction report).
* ``model_choice_chart``: quality against encode throughput, one labelled point per model
  (the benchmark).
* ``ablation_chart``: each run of a study, each figure with its 95 % interval, the
  baseline marked (the ablation studies).
* ``training_curve_chart``: figures per epoch in two panels, cycle ends and chosen snapshots
  marked (a long run's curve, as Merkx & Frank's Figure 4).

Each takes plain numbers, writes one PNG (100 dpi, parent folders created) and returns its
path. A figure with its interval is ``(value, lo, hi)``; ``lo`` and ``hi`` are both None
where no interval is known, and a bare number means the same. matplotlib (the ``eval``
extra) runs with the Agg backend; without it a chart raises ``MissingExtraError``, which the
commands that draw report instead of the chart. No TensorFlow.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from grounded_text.utils.extras import assert_installed

try:
    import matplotlib
    import matplotlib.pyplot as plt
    from PIL import Image  # a dependency of matplotlib
except ImportError:  # the eval extra: _pyplot names it before a chart is drawn
    matplotlib = plt = Image = None

DPI = 100
COLORS = 64
_OURS, _PAPER, _BASE = "tab:blue", "tab:red", "tab:orange"
_MAX_LABEL = 64  # characters: longer row labels are cut so that the panels keep their width


def _pyplot():
    """pyplot on the Agg backend (chosen before the first figure: importing pyplot picks none)."""
    assert_installed(matplotlib, "matplotlib", "The report charts").use("Agg", force=True)
    return plt


def _number(x, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"{what}: expected a finite number, got {x!r}")
    return float(x)


def interval(x, what: str) -> tuple[float, float | None, float | None]:
    """``x`` as ``(value, lo, hi)``: a number, or a sequence of 3 (lo and hi both None or both
    numbers, lo ≤ hi).

    Raises:
      ValueError: anything else (``what`` names the figure in the message).
    """
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return _number(x, what), None, None
    if isinstance(x, (str, bytes)) or not isinstance(x, Sequence) or len(x) != 3:
        raise ValueError(f"{what}: expected a number or (value, lo, hi), got {x!r}")
    value = _number(x[0], what)
    if x[1] is None and x[2] is None:
        return value, None, None
    lo, hi = _number(x[1], f"{what} (lower bound)"), _number(x[2], f"{what} (upper bound)")
    if lo > hi:
        raise ValueError(f"{what}: interval lower bound {lo} above its upper bound {hi}")
    return value, lo, hi


def _label(text, what: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{what}: expected a non-empty label, got {text!r}")
    text = text if len(text) <= _MAX_LABEL else text[: _MAX_LABEL - 1] + "…"
    return text.replace("$", r"\$")  # a label is text, not mathtext


def _mark(
    ax, value: float, lo, hi, y: float, *, color: str, marker: str, filled: bool = True, horizontal: bool = True
) -> None:
    """One point with its interval (a line from lo to hi; none when lo is None)."""
    if lo is not None:
        (ax.hlines if horizontal else ax.vlines)(y, lo, hi, color=color, lw=1.6)
    xy = (value, y) if horizontal else (y, value)
    ax.plot(*xy, marker=marker, ms=6, color=color, mfc=color if filled else "white", mew=1.4, ls="none")


def _save(fig, path, rect=(0, 0, 1, 1)) -> Path:
    """Lays out, writes ``path`` and closes ``fig``. The PNG is reduced to an adaptive palette of
    ``COLORS`` colours: a chart has a handful, and the docs keep their PNGs in the repository
    (a third of the size of the full-colour file, with no visible change)."""
    plt = _pyplot()
    fig.tight_layout(rect=rect)
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=DPI, format="png")
    plt.close(fig)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer.seek(0)
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(colors=COLORS, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    return path


def forest_plot(
    rows: Sequence[Mapping],
    path: str | Path,
    *,
    title: str | None = None,
    ours_label: str = "ours",
    paper_label: str = "paper",
) -> Path:
    """A horizontal forest plot: per row, our figure and the paper's, each with its interval.

    Rows are grouped by ``group`` (first-seen order), one panel per group with its own x axis
    (a paper's tables may be on different scales: Pearson r × 100, R@K %, ranks).

    Args:
      rows: ``[{"label": str, "ours": (value, lo, hi), "paper": (value, lo or None, hi or None),
        "group": str (optional)}]``, top to bottom; values on the group's scale.
      path: the PNG to write.
      title: the figure's title.
      ours_label, paper_label: the legend's names of the two marks.

    Returns:
      ``path`` as a ``Path``.

    Raises:
      ValueError: no rows, a row without a label, a figure that is not a finite number or an
        interval whose lower bound is above its upper bound.
      MissingExtraError: matplotlib is not installed.
    """
    if not rows:
        raise ValueError("forest_plot: no rows to draw")
    checked = []
    for i, row in enumerate(rows):
        label = _label(row.get("label"), f"forest_plot row {i}")
        checked.append(
            (
                str(row.get("group") or ""),
                label,
                interval(row.get("ours"), f"{label}: ours"),
                interval(row.get("paper"), f"{label}: paper"),
            )
        )
    groups = list(dict.fromkeys(g for g, *_ in checked))
    sizes = [sum(g == group for g, *_ in checked) for group in groups]
    plt = _pyplot()
    fig, axes = plt.subplots(
        len(groups),
        1,
        figsize=(8.5, 0.8 + sum(0.24 * n + 0.55 for n in sizes)),
        gridspec_kw={"height_ratios": [n + 1.5 for n in sizes]},
        squeeze=False,
    )
    for ax, group in zip(axes[:, 0], groups):
        mine = [r for r in checked if r[0] == group]
        for i, (_, _, ours, paper) in enumerate(mine):
            y = len(mine) - 1 - i
            _mark(ax, *ours, y + 0.17, color=_OURS, marker="o")
            _mark(ax, *paper, y - 0.17, color=_PAPER, marker="D", filled=False)
        ax.set_yticks(range(len(mine)), [r[1] for r in reversed(mine)], fontsize=7)
        ax.set_ylim(-0.7, len(mine) - 0.3)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
        if group:
            ax.set_title(_label(group, "forest_plot group"), fontsize=8, loc="left")
    handles = [
        plt.Line2D([], [], color=_OURS, marker="o", label=f"{ours_label} (95 % interval)"),
        plt.Line2D([], [], color=_PAPER, marker="D", mfc="white", label=f"{paper_label} (95 % interval where printed)"),
    ]
    height = fig.get_figheight()
    if title:
        fig.suptitle(title, fontsize=9, x=0.01, y=1 - 0.08 / height, ha="left", va="top")
    # The legend on its own line under the title, so that a long title never runs into it.
    fig.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(0.005, 1 - 0.3 / height), fontsize=7, ncol=2, frameon=False
    )
    return _save(fig, path, rect=(0, 0, 1, 1 - 0.55 / height))


def model_choice_chart(
    points: Sequence[Mapping], path: str | Path, *, quality_label: str = "quality", title: str | None = None
) -> Path:
    """Quality (y, with its interval) against encode throughput (x, sentences/s, log scale).

    Args:
      points: ``[{"label": str, "throughput": sentences/s or (median, min, max) over repeats,
        "quality": (value, lo, hi)}]``, one per model; throughput > 0.
      path: the PNG to write.
      quality_label: the y axis (e.g. ``"STS-B test Pearson r"``).
      title: the figure's title.

    Returns:
      ``path`` as a ``Path``.

    Raises:
      ValueError: no points, a point without a label, a throughput that is not a positive
        finite number, or an interval whose lower bound is above its upper bound.
      MissingExtraError: matplotlib is not installed.
    """
    if not points:
        raise ValueError("model_choice_chart: no points to draw")
    checked = []
    for i, p in enumerate(points):
        label = _label(p.get("label"), f"model_choice_chart point {i}")
        speed = interval(p.get("throughput"), f"{label}: throughput")
        if min(x for x in speed if x is not None) <= 0:
            raise ValueError(f"{label}: throughput must be positive (sentences/s), got {p.get('throughput')!r}")
        checked.append((label, speed, interval(p.get("quality"), f"{label}: quality")))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    colors = plt.get_cmap("tab10")
    xs = [x for _, speed, _ in checked for x in speed if x is not None]
    middle = math.sqrt(min(xs) * max(xs))  # on the log axis
    for i, (label, (x, x_lo, x_hi), (y, lo, hi)) in enumerate(checked):
        color = colors(i % 10)
        if x_lo is not None:  # the spread of the throughput over the repeats
            ax.hlines(y, x_lo, x_hi, color=color, lw=1.0, alpha=0.6)
        _mark(ax, y, lo, hi, x, color=color, marker="o", horizontal=False)
        right = x <= middle  # each label on the side with room, so that none leaves the axes
        ax.annotate(
            label,
            (x, y),
            xytext=(7 if right else -7, 6),
            textcoords="offset points",
            fontsize=8,
            color=color,
            ha="left" if right else "right",
        )
    ax.set_xscale("log")
    ax.set_xlim(min(xs) / 3, max(xs) * 3)
    ax.set_xlabel("encode throughput, sentences/s (log scale)", fontsize=8)
    ax.set_ylabel(quality_label, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3, which="both")
    if title:
        ax.set_title(title, fontsize=9)
    return _save(fig, path)


def ablation_chart(
    rows: Sequence[Mapping],
    path: str | Path,
    metrics: Sequence[str],
    *,
    baseline: str | None = None,
    title: str | None = None,
) -> Path:
    """Per run, each metric with its interval (one panel per metric); the baseline run is drawn
    in its own colour, with its value as a dashed line and its interval as a band, so that a
    reader sees at once which runs' intervals leave it.

    Args:
      rows: ``[{"run": str, "metrics": {metric: (value, lo, hi), or None where not measured}}]``,
        top to bottom.
      path: the PNG to write.
      metrics: the metric names to draw, one panel each, left to right.
      baseline: the run the others are read against (default: the first row).
      title: the figure's title.

    Returns:
      ``path`` as a ``Path``.

    Raises:
      ValueError: no rows, no metrics, a run without a name, a baseline that is no row, no
        value of any metric in any row, a value that is not a finite number or an interval
        whose lower bound is above its upper bound.
      MissingExtraError: matplotlib is not installed.
    """
    if not rows:
        raise ValueError("ablation_chart: no rows to draw")
    if not metrics:
        raise ValueError("ablation_chart: no metrics to draw")
    runs = [_label(r.get("run"), f"ablation_chart row {i}") for i, r in enumerate(rows)]
    baseline = runs[0] if baseline is None else _label(baseline, "ablation_chart baseline")
    if baseline not in runs:
        raise ValueError(f"ablation_chart: baseline {baseline!r} is not one of the runs {runs}")
    values = {
        (run, m): interval(v, f"{run}: {m}")
        for run, r in zip(runs, rows)
        for m in metrics
        if (v := (r.get("metrics") or {}).get(m)) is not None
    }
    if not values:
        raise ValueError(f"ablation_chart: no run has a value of {list(metrics)}")
    plt = _pyplot()
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(1.6 + 2.6 * len(metrics), 1.2 + 0.3 * len(runs)), sharey=True, squeeze=False
    )
    for ax, metric in zip(axes[0], metrics):
        base = values.get((baseline, metric))
        if base is not None:
            ax.axvline(base[0], color=_BASE, ls="--", lw=1)
            if base[1] is not None:
                ax.axvspan(base[1], base[2], color=_BASE, alpha=0.12, lw=0)
        for i, run in enumerate(runs):
            if (run, metric) in values:
                _mark(
                    ax,
                    *values[(run, metric)],
                    len(runs) - 1 - i,
                    color=_BASE if run == baseline else _OURS,
                    marker="s" if run == baseline else "o",
                )
        ax.set_title(_label(metric, "ablation_chart metric"), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(range(len(runs)), [f"{r} (baseline)" if r == baseline else r for r in reversed(runs)])
    axes[0][0].set_ylim(-0.7, len(runs) - 0.3)
    if title:
        fig.suptitle(title, fontsize=9)
    return _save(fig, path)


def training_curve_chart(
    epochs: Sequence[int],
    left: Mapping[str, Sequence],
    right: Mapping[str, Sequence],
    path: str | Path,
    *,
    marks: Sequence[int] = (),
    chosen: Sequence[int] = (),
    title: str | None = None,
) -> Path:
    """Figures per epoch in two panels (e.g. the training task's dev R@10 on the left, the
    semantic task's STS means on the right, as Merkx & Frank's Figure 4), with the epochs in
    ``marks`` (cycle ends) as dotted lines and those in ``chosen`` (the ensemble's snapshots)
    ringed on every line.

    Args:
      epochs: the x values (1-based epochs), one per point.
      left, right: ``{line label: one value per epoch, or None where not logged}``.
      path: the PNG to write.
      marks, chosen: epochs to mark (dotted line) and to ring.
      title: the figure's title.

    Returns:
      ``path`` as a ``Path``.

    Raises:
      ValueError: no epochs, a line whose length is not that of ``epochs``, a line with no
        value, or a value that is not a finite number.
      MissingExtraError: matplotlib is not installed.
    """
    xs = [int(_number(e, "training_curve_chart epoch")) for e in epochs]
    if not xs:
        raise ValueError("training_curve_chart: no epochs to draw")
    panels = []
    for side, lines in (("left", left), ("right", right)):
        checked = {}
        for label, values in lines.items():
            if len(values) != len(xs):
                raise ValueError(f"training_curve_chart: {side} line {label!r} has {len(values)} values for "
                                 f"{len(xs)} epochs")
            points = [(x, _number(v, f"training_curve_chart {label} at epoch {x}")) for x, v in zip(xs, values)
                      if v is not None]
            if not points:
                raise ValueError(f"training_curve_chart: {side} line {label!r} has no value")
            checked[_label(label, "training_curve_chart line")] = points
        panels.append(checked)
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), squeeze=False)
    ringed = set(int(c) for c in chosen)
    for ax, lines in zip(axes[0], panels):
        for m in marks:
            ax.axvline(int(m), color="0.75", ls=":", lw=1)
        for label, points in lines.items():
            (line,) = ax.plot([x for x, _ in points], [y for _, y in points], marker=".", ms=4, lw=1.2, label=label)
            rings = [(x, y) for x, y in points if x in ringed]
            if rings:
                ax.plot([x for x, _ in rings], [y for _, y in rings], ls="none", marker="o", ms=10, mfc="none",
                        mec=line.get_color(), mew=1.4)
        ax.set_xlabel("epoch", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    if title:
        fig.suptitle(title, fontsize=9)
    return _save(fig, path)
