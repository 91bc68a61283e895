"""The ablation studies' runner (``grounded_text.papers.studies`` holds the studies): each row
trained by the experiments runner in its own process, ``python -m grounded_text.train --config
OUTPUT_DIR/<run>.toml`` (output in ``OUTPUT_DIR/<run>/``, log in ``OUTPUT_DIR/<run>.log``), so
the figures are what ``train`` does. A finished row of the same resolved config is not
retrained; a finished row of another config is refused. The table (``OUTPUT_DIR/<study>.md``)
reads each run's ``metrics.json``, its figure columns from the figures registry; beside it,
``OUTPUT_DIR/<study>.png`` charts the same figures with their 95 % intervals, the study's first
run as the baseline.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from grounded_text.config.schema import ConfigError
from grounded_text.experiments.arms import paired_against, score_arms, write_arms_report
from grounded_text.experiments.charts import ablation_chart
from grounded_text.experiments.runner import RunConflict, ensure_run, read_metrics
from grounded_text.papers.studies import STUDIES, Study
from grounded_text.reporting.figures import FIGURES
from grounded_text.reporting.tables import fmt, markdown_table, write_report
from grounded_text.utils.extras import MissingExtraError


def run_dir_name(run: str) -> str:
    """A run's folder name (``@`` and ``+`` are kept out of paths)."""
    return run.replace("@", "__").replace("+", "_and_")


def _exported(m: dict) -> str:
    exported = m.get("exported", {})
    if exported.get("kind") == "snapshot_ensemble" and len(exported["snapshots"]) > 1:
        return f"ensemble of {len(exported['snapshots'])} snapshots"
    if exported.get("kind") == "snapshot_ensemble":  # one cycle: its one snapshot
        return f"snapshot of epoch {exported['snapshot_epochs'][0]}"
    return f"epoch {m['selection']['best_epoch']}"


def table(study: Study, output_dir: Path, rows=None) -> str:
    """The Markdown table of ``study``'s runs under ``output_dir`` (a run without
    ``metrics.json`` is listed as ``(not run)``)."""
    columns = [FIGURES[c] for c in study.columns]
    head = ["run", "model", "loss", "features (d)", "epochs", "exported"] + [c.label for c in columns] + [
        "fit time (s)", "params text tower"]
    body = []
    for run, _ in rows or study.rows:
        m = read_metrics(Path(output_dir) / run_dir_name(run))
        if m is None:
            body.append([run, "(not run)"] + [""] * (len(head) - 2))
            continue
        cfg = m["config"]
        body.append([run, cfg["model"]["name"], str(cfg["model"]["loss"]),
                     f"{cfg['data']['features']} ({m['data']['feature_dim']})", str(cfg["train"]["epochs"]),
                     _exported(m), *[c.cell(m, minus="-") for c in columns], fmt(m["timing_seconds"]["fit"], 0),
                     fmt(m["parameters"]["text_tower"], 0, thousands=True)])
    return "\n".join(markdown_table(head, body))


def chart_rows(study: Study, output_dir: Path, rows=None) -> list[dict]:
    """The runs of ``table`` that finished, for ``grounded_text.experiments.charts.ablation_chart``:
    ``[{"run", "metrics": {column label: (value, lo, hi)}}]``, each figure with the 95 % interval
    its ``metrics.json`` carries (Fisher z of one set of pairs; none for the STS16 mean)."""
    columns = [FIGURES[c] for c in study.columns]
    out = []
    for run, _ in rows or study.rows:
        m = read_metrics(Path(output_dir) / run_dir_name(run))
        if m is not None:
            out.append({"run": run, "metrics": {c.label: c.with_interval(m) for c in columns}})
    return out


def write_chart(study_name: str, output_dir: Path, rows=None) -> Path | None:
    """Writes ``OUTPUT_DIR/<study>.png`` (the ablation chart of the finished runs, the first one
    the baseline: each study lists its baseline first) → its path, or None after one printed
    line when no run has finished or matplotlib (the ``eval`` extra) is missing: the table
    does not depend on the chart."""
    study = STUDIES[study_name]
    points = chart_rows(study, output_dir, rows)
    if not points:
        print(f"[{study_name}] no chart: no run has finished", flush=True)
        return None
    try:
        return ablation_chart(points, Path(output_dir) / f"{study_name}.png", [FIGURES[c].label for c in study.columns],
                              title=f"{study_name}: Pearson r of cosines, 95 % intervals (none for a mean over "
                                    "subsets); dashed: the baseline")
    except MissingExtraError as e:
        print(f"[{study_name}] no chart: {e}", flush=True)
        return None


def run_study(study_name: str, rows, out: Path, data_dir, epochs_scale: float = 1.0) -> int:
    """Trains the rows not finished (the experiments runner's reuse rule) → 0, or 2 after an
    ``error:`` line for a row that does not fit or a run folder of another config."""
    for run, _ in rows:
        run_out = out / run_dir_name(run)
        try:
            config = STUDIES[study_name].plan(run, epochs_scale).config()
            result = ensure_run(config, run_out, data_dir, log=out / f"{run_dir_name(run)}.log",
                                echo=lambda line: print(f"[{study_name}] {line}", flush=True))
        except (ConfigError, RunConflict) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except ValueError as e:  # the trainer's checks of the combination (resolve_config)
            print(f"error: study row {run!r}: {e}", file=sys.stderr)
            return 2
        if not result.reused:
            print(f"[{study_name}] {run}: exit {result.returncode} (log {out / (run_dir_name(run) + '.log')})",
                  flush=True)
    return 0


def write_table(study_name: str, out: Path, rows) -> str:
    """Writes ``out/<study>.md`` (the study's title, its table and, when drawn, the link to its
    chart ``write_chart``) → the Markdown."""
    study = STUDIES[study_name]
    md = f"{study.title}\n\n" + table(study, out, rows)
    chart = write_chart(study_name, out, rows)
    if chart is not None:
        md += f"\n\n![{study_name}: each run's figures with their 95 % intervals]({chart.name})"
    write_report(None, md, markdown_path=out / f"{study_name}.md")
    return md


def data_dir_of(flag: str | None) -> str:
    """The data root: the flag, else ``$GROUNDED_TEXT_DATA``, else ``../shared/data``."""
    return flag or os.environ.get("GROUNDED_TEXT_DATA") or "../shared/data"


def paired_report(name: str, study: Study, out: Path, rows, data_dir) -> str:
    """Scores the study's finished runs (and its rescored arms) with 95 % intervals and paired
    tests against its first run (``grounded_text.experiments.arms``); writes
    ``out/<name>_arms.md`` and ``.json`` and returns the Markdown."""
    names = [run_dir_name(r) for r, _ in rows]
    rescored = [r for r in study.rescored if r.run in names]
    arms, predictions = score_arms(out, names, data_dir, rescored)
    # The tables name each arm as its study does (a folder name keeps "+" out of paths).
    row_of = {run_dir_name(r): r for r, _ in rows}
    arms = {row_of.get(k, k): v for k, v in arms.items()}
    predictions = {row_of.get(k, k): v for k, v in predictions.items()}
    baseline = study.rows[0][0]
    title = (f"{study.title}. Test: STS (cosine, Pearson r, Fisher-z 95 % intervals) and Flickr8k test retrieval "
             "(1,000 images, 5,000 captions; R@K % with 95 % intervals by a bootstrap over images). Paired tests "
             f"against `{baseline}` on the same pairs: Williams' test per STS set, a paired bootstrap over images "
             "for R@K (pessimistic ranks: ties never count for the ground truth).")
    return write_arms_report(out, f"{name}_arms", arms, paired_against(baseline, arms, predictions), baseline,
                             study.what(), title)
