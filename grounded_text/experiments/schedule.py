"""The paper's whole schedule (Merkx & Frank 2019, §3.3) read from one finished run.

§3.3 trains 32 epochs as 8 cosine cycles of 4 epochs, takes a snapshot at the end of each
cycle and scores "the two snapshots with the highest performance on the development data" as
one ensemble. Given such a run (``grounded-text train`` with a snapshot schedule), this module

* reads its per-epoch curve from ``metrics.json``: dev R@K of both directions, rsum, the
  training loss and the STS figures the callbacks log, cycle ends and chosen snapshots marked
  (``curve``), as a table and a PNG;
* exports two single snapshots as models of their own, the last one and the best one by dev
  rsum (``export_snapshot``), beside the run's own export (the snapshot ensemble);
* measures every model's Flickr8k dev retrieval with one evaluator (``dev_retrieval``): the
  figure that decides which model ships;
* scores every model and a baseline (e.g. the shipped one-cycle model) on one protocol
  (``protocol_rescore.score_with_rule``: STS12/13/16 per subset, STS-B and SICK-R cosine and
  supervised, Flickr8k test retrieval of both directions, each with its 95 % interval) and
  pairs each against the baseline, and the ensemble against the best single snapshot, so that
  the ensemble's own share is measured (Williams' test per STS set, a paired bootstrap over
  test images for R@K).

::

    python -m grounded_text.experiments.schedule runs/char_gru_attention_32ep \\
        --baseline char_gru_attention_flickr8k --data-dir "$GROUNDED_TEXT_DATA" \\
        --output-dir runs/schedule --cache docs/arms/full_schedule \\
        --figure docs/figures/merkx_frank-schedule.png

writes ``OUTPUT_DIR/schedule.json`` and ``OUTPUT_DIR/schedule.md``; each model's scoring is
kept in ``--cache`` (small JSON and NPZ files, plain arrays), so the tables and the paired tests
can be made again without a retrain or a rescoring.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from grounded_text import shipped
from grounded_text.evaluation.encoders import cached, load_image_encoder
from grounded_text.evaluation.retrieval import images_of_pairs, retrieval_metrics
from grounded_text.experiments.arms import paired_cell
from grounded_text.experiments.charts import training_curve_chart
from grounded_text.experiments.protocol_rescore import paired, score_with_rule
from grounded_text.experiments.scoring import TestData
from grounded_text.reporting.tables import markdown_table, write_report
from grounded_text.serving.export import CONFIG_ASSET, IMAGE_EXPORT_DIR, export_image_tower, export_text_tower
from grounded_text.serving.loader import load
from grounded_text.training.callbacks import load_snapshot_towers
from grounded_text.utils.similarity import cosine_matrix

#: The test-time sentence ends of the comparison: the authors' SentEval batcher's.
RULE = "space_period_tokens"
#: ``metrics.json`` history key → the curve's column.
CURVE_COLUMNS = (("val_rsum/t2i_R@1", "t2i_R@1"), ("val_rsum/t2i_R@5", "t2i_R@5"), ("val_rsum/t2i_R@10", "t2i_R@10"),
              ("val_rsum/i2t_R@1", "i2t_R@1"), ("val_rsum/i2t_R@5", "i2t_R@5"), ("val_rsum/i2t_R@10", "i2t_R@10"),
              ("val_rsum", "rsum"), ("loss", "loss"), ("val_avg2016", "sts16"), ("val_avg2012", "sts12"))
#: The figures of the comparison table, in order (labels of ``protocol_rescore.score_with_rule``).
HEADLINE = ("STS12 MSRvid r", "STS-B test r (cosine)", "SICK-R test r (cosine)", "STS-B test r (supervised)",
            "SICK-R test r (supervised)", "caption→image R@1", "caption→image R@5", "caption→image R@10",
            "image→caption R@1", "image→caption R@5", "image→caption R@10")


def curve(metrics: dict) -> list[dict]:
    """The run's per-epoch figures, from its ``metrics.json``.

    Args:
      metrics: a finished run's ``metrics.json`` content (``history``: ``{key: [one value per
        epoch]}``; ``config.train.cycle_epochs``; ``exported.snapshot_epochs`` for a snapshot
        ensemble).

    Returns:
      One dict per epoch: ``{"epoch": 1-based, "cycle_end": bool, "chosen": bool (the epoch's
      snapshot is in the exported ensemble), "t2i_R@1" ... "i2t_R@10" (dev R@K, percent),
      "rsum" (their sum, 0–600), "loss" (training loss), "sts16", "sts12" (mean Pearson r over
      the year's subsets)}``; a figure the run did not log is ``None``.

    Raises:
      ValueError: no per-epoch history.
    """
    history = metrics.get("history") or {}
    epochs = max((len(v) for v in history.values() if isinstance(v, list)), default=0)
    if not epochs:
        raise ValueError("curve: the run's metrics.json has no per-epoch history.")
    cycle = int(((metrics.get("config") or {}).get("train") or {}).get("cycle_epochs") or 0)
    chosen = set((metrics.get("exported") or {}).get("snapshot_epochs") or ())
    rows = []
    for i in range(epochs):
        row = {"epoch": i + 1, "cycle_end": bool(cycle) and (i + 1) % cycle == 0, "chosen": i + 1 in chosen}
        for key, column in CURVE_COLUMNS:
            values = history.get(key) or []
            row[column] = float(values[i]) if i < len(values) and values[i] is not None else None
        rows.append(row)
    return rows


def curve_markdown(rows: list[dict]) -> str:
    """The curve as a Markdown table: one row per epoch, cycle ends and chosen snapshots marked."""
    def cell(v, digits):
        return "–" if v is None else f"{v:.{digits}f}"

    body = []
    for r in rows:
        mark = ("snapshot, **in the ensemble**" if r["chosen"] else "snapshot") if r["cycle_end"] else ""
        body.append([str(r["epoch"]), mark, cell(r["t2i_R@10"], 1), cell(r["i2t_R@10"], 1), cell(r["rsum"], 1),
                     cell(r["loss"], 2), cell(r["sts16"], 3), cell(r["sts12"], 3)])
    return "\n".join(markdown_table(
        ["epoch", "cycle end", "dev caption→image R@10", "dev image→caption R@10", "dev rsum", "training loss",
         "STS16 mean r", "STS12 mean r"], body, ["---:", "---", "---:", "---:", "---:", "---:", "---:", "---:"]))


def curve_chart(rows: list[dict], path: str | Path, title: str | None = None) -> Path:
    """The curve as a PNG (``experiments.charts.training_curve_chart``): dev R@10 of both
    directions, and the STS16 / STS12 means, per epoch, cycle ends and chosen snapshots marked."""
    return training_curve_chart(
        [r["epoch"] for r in rows],
        {"dev caption→image R@10": [r["t2i_R@10"] for r in rows],
         "dev image→caption R@10": [r["i2t_R@10"] for r in rows]},
        {"STS16 mean r × 100": [None if r["sts16"] is None else 100 * r["sts16"] for r in rows],
         "STS12 mean r × 100": [None if r["sts12"] is None else 100 * r["sts12"] for r in rows]},
        path, marks=[r["epoch"] for r in rows if r["cycle_end"]], chosen=[r["epoch"] for r in rows if r["chosen"]],
        title=title)


def model_dirs(model: str | Path) -> tuple[Path, Path]:
    """``(text export, image export)`` of a shipped model's name or of a run-like folder."""
    if shipped.is_name(str(model)):
        return Path(shipped.export_dir(str(model))), Path(shipped.image_export_dir(str(model)))
    return Path(model) / "export", Path(model) / IMAGE_EXPORT_DIR


def export_snapshot(run_dir: str | Path, k: int, out_dir: str | Path) -> Path:
    """Exports the run's k-th snapshot (1-based, ``snapshots/snapshot_{k:02d}.keras`` and its
    image tower) as a model of its own: ``out_dir/export`` and ``out_dir/image_export``, with the
    run's config and image-feature record, as the trainer exports its ensemble.

    Returns:
      ``out_dir`` as a ``Path``.

    Raises:
      FileNotFoundError: the run has no such snapshot or no ``metrics.json``.
    """
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    text_path = run_dir / "snapshots" / f"snapshot_{k:02d}.keras"
    image_path = run_dir / "snapshots" / f"image_snapshot_{k:02d}.keras"
    for path in (text_path, image_path, run_dir / "metrics.json"):
        if not path.is_file():
            raise FileNotFoundError(f"export_snapshot: {path} does not exist.")
    config = json.loads((run_dir / "metrics.json").read_text())["config"]
    image_config = json.loads((run_dir / IMAGE_EXPORT_DIR / "assets" / CONFIG_ASSET).read_text())
    text, image = load_snapshot_towers([text_path, image_path])
    export_text_tower(text, out_dir / "export", config)
    export_image_tower(image, out_dir / IMAGE_EXPORT_DIR, config, image_features=image_config.get("image_features"))
    return out_dir


def dev_retrieval(model: str | Path, data_dir: str | Path) -> dict:
    """Caption↔image retrieval of ``model``'s exported towers on the Flickr8k dev split (the
    1,000 dev images and their 5,000 captions, or the first ``data.max_dev_images`` of its
    config; the features its config names), with the
    sentence ends it was trained with: the trainer's selection figure, by the package's
    evaluator (``evaluation.retrieval.retrieval_metrics``) instead of the trainer's callback.

    Returns:
      ``retrieval_metrics``' dict: ``{"caption_to_image": {"R@1", "R@5", "R@10", ...},
      "image_to_caption": {...}, "rsum": R@1+5+10 of both directions (percent, 0–600)}``.
    """
    text_dir, image_dir = model_dirs(model)
    config = json.loads((text_dir / "assets" / CONFIG_ASSET).read_text())
    data_cfg = config.get("data") or {}
    # The run's own dev split: its first max_dev_images images where it was capped.
    pairs = TestData(Path(data_dir)).split_pairs(data_cfg, "dev", data_cfg.get("max_dev_images"))
    _, caption_image, features = images_of_pairs(pairs)
    text = cached(load(text_dir))
    sims = cosine_matrix(text(pairs.captions.tolist()), load_image_encoder(image_dir)(features))
    return retrieval_metrics(sims, caption_image)


def compare(models: dict, baseline: str, data_dir: str | Path, cache_dir: str | Path, *,
            ensemble: str | None = None, single: str | None = None, rule: str = RULE) -> dict:
    """Scores every model with ``rule`` and pairs each against ``baseline``.

    Args:
      models: ``{row name: shipped name or run-like folder}``, the baseline among them.
      baseline: the row every other one is paired against.
      ensemble, single: two rows also paired with each other (the ensemble's own share).
      cache_dir: each model's scoring (``score_with_rule``'s cache).

    Returns:
      ``{"rule", "baseline", "figures": {row: {label: {"value", "ci", "n"}}}, "paired": {"A − B":
      {label: {"a", "b", "n", "p"}}}, "dev": {row: retrieval_metrics on dev}}``.
    """
    # Two rows may name one model (the best single snapshot can be the last): it is scored once,
    # cached under the first row that names it.
    first_row = {}
    for row, model in models.items():
        first_row.setdefault(str(model), row)
    scores = {model: score_with_rule(model, rule, Path(data_dir), Path(cache_dir), stem=row)
              for model, row in first_row.items()}
    dev = {model: dev_retrieval(model, data_dir) for model in first_row}
    scored = {row: scores[str(model)] for row, model in models.items()}
    pairs = [(row, baseline) for row in models if row != baseline]
    if ensemble and single:
        pairs.append((ensemble, single))
    return {"rule": rule, "baseline": baseline,
            "figures": {row: figures for row, (figures, _) in scored.items()},
            "paired": {f"{a} − {b}": paired(scored[a][1], scored[b][1]) for a, b in pairs},
            "dev": {row: dev[str(model)] for row, model in models.items()}}


def _digits(label: str) -> int:
    return 1 if " R@" in label else 3


def compare_markdown(result: dict) -> str:
    """Three tables: dev retrieval per model (the shipping figure), the test figures with their
    95 % intervals, and each paired difference with its p."""
    rows = list(result["figures"])
    dev = [[f"`{row}`"] + [f"{d[direction][k]:.1f}" for direction in ("caption_to_image", "image_to_caption")
                           for k in ("R@1", "R@5", "R@10")] + [f"{d['rsum']:.1f}"]
           for row, d in result["dev"].items()]
    out = markdown_table(["model (Flickr8k dev, 1,000 images)"] + [f"{w} {k}" for w in ("caption→image",
                                                                                         "image→caption")
                                                                   for k in ("R@1", "R@5", "R@10")] + ["rsum"],
                         dev)
    labels = [label for label in result["figures"][rows[0]] if label not in HEADLINE] + list(HEADLINE)
    body = []
    for label in labels:
        line = [label]
        for row in rows:
            fig = result["figures"][row].get(label) or {}
            d = _digits(label)
            ci = fig.get("ci")
            line.append("–" if fig.get("value") is None else
                        f"{fig['value']:.{d}f}" + (f" [{ci[0]:.{d}f}, {ci[1]:.{d}f}]" if ci else ""))
        body.append(line)
    out += [""] + markdown_table(["measure (test)"] + [f"`{row}` [95 % CI]" for row in rows], body)
    head = ["measure"] + [f"`{pair}`" for pair in result["paired"]]
    body = []
    for label in labels:
        body.append([label] + [paired_cell(tests.get(label), _digits(label)) for tests in result["paired"].values()])
    out += [""] + markdown_table(head, body)
    return "\n".join(out)


def run(run_dir: str | Path, baseline: str, data_dir: str | Path, output_dir: str | Path, cache_dir: str | Path,
        figure: str | Path | None = None) -> dict:
    """The whole study of one finished snapshot run (module docstring); returns what it writes
    to ``OUTPUT_DIR/schedule.json``. Rows: ``baseline``, ``ensemble`` (the run's export),
    ``best_single`` (the snapshot with the highest dev rsum), ``last`` (the last snapshot)."""
    run_dir, output_dir = Path(run_dir), Path(output_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    rows = curve(metrics)
    snaps = (metrics.get("exported") or {}).get("all_snapshots") or []
    if not snaps:
        raise ValueError(f"{run_dir} exported no snapshot ensemble (metrics.json: exported.all_snapshots).")
    scores = [s["val_rsum"] if s["val_rsum"] is not None and np.isfinite(s["val_rsum"]) else -np.inf for s in snaps]
    singles = {"best_single": int(np.argmax(scores)) + 1, "last": len(snaps)}
    models = {"baseline": baseline, "ensemble": str(run_dir)}
    for row, k in singles.items():
        models[row] = str(output_dir / f"snapshot_{k:02d}")
        if not (Path(models[row]) / "export" / "saved_model.pb").is_file():
            export_snapshot(run_dir, k, models[row])
    result = compare(models, "baseline", data_dir, cache_dir, ensemble="ensemble", single="best_single")
    result.update({"run": str(run_dir), "models": models,
                   "single_epochs": {row: snaps[k - 1]["epoch"] for row, k in singles.items()},
                   "curve": rows, "snapshots": snaps,
                   "chosen": (metrics.get("exported") or {}).get("snapshot_epochs"),
                   "timing_seconds": metrics.get("timing_seconds"), "load_average": metrics.get("load_average")})
    md = curve_markdown(rows) + "\n\n" + compare_markdown(result)
    write_report(result, md, json_path=output_dir / "schedule.json", markdown_path=output_dir / "schedule.md")
    if figure:
        curve_chart(rows, figure, title="Merkx & Frank's schedule at n = 512: 8 cycles of 4 epochs (Flickr8k dev)")
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grounded_text.experiments.schedule",
                                description="A finished snapshot run's curve, ensemble, last and best single "
                                            "snapshot, scored beside a baseline model with paired tests.")
    p.add_argument("run", help="a finished run folder trained with snapshots (metrics.json, snapshots/, export/)")
    p.add_argument("--baseline", required=True, help="a shipped model's name or a run folder to pair against")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--cache", required=True, help="folder of each model's scored figures and predictions")
    p.add_argument("--figure", help="write the curve's PNG here")
    a = p.parse_args(argv)
    result = run(a.run, a.baseline, a.data_dir, a.output_dir, a.cache, a.figure)
    print((Path(a.output_dir) / "schedule.md").read_text())
    print("dev rsum: " + ", ".join(f"{row} {d['rsum']:.1f}" for row, d in result["dev"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
