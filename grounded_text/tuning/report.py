"""Summaries of a finished (or partly finished) search: all trials, the best one, ablation tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from grounded_text.evaluation.sts import format_markdown
from grounded_text.reporting.tables import fmt
from grounded_text.tuning.tuner import RUN_SUBDIR

#: Columns of the Markdown tables besides the hyperparameters (when present).
HEADLINE = ["STS12/MSRvid", "STSBenchmark/test", "SICK/test"]


def _cell(v) -> str:
    """A trial table's cell: floats at 4 decimals (3 significant digits below 0.01), the rest as is."""
    return fmt(v, 4, small=3, exact_ints=True, minus="-")


def trial_rows(tuner) -> list[dict]:
    """One dict per trial of ``tuner.oracle``: id, status, tuner id, hyperparameters, figures."""
    rows = []
    for tid, trial in sorted(tuner.oracle.trials.items()):
        tdir = Path(tuner.project_dir) / f"trial_{tid}"
        worker = {}
        if (tdir / "worker.json").is_file():
            worker = json.loads((tdir / "worker.json").read_text())
        figures = {}
        for name in trial.metrics.metrics:
            v = trial.metrics.get_last_value(name)
            if v is not None:
                figures[name] = float(v)
        rows.append({
            "trial_id": tid,
            "status": str(trial.status),
            "tuner_id": worker.get("tuner_id"),
            "hyperparameters": dict(trial.hyperparameters.values),
            "avg2016": figures.pop("avg2016", None),
            "best_epoch": int(figures.pop("best_epoch")) if "best_epoch" in figures else None,
            "seconds": figures.pop("seconds", None),
            "figures": figures,
            "export_dir": str(tdir / RUN_SUBDIR / "export"),
        })
    return rows


def _year_means(figures: dict) -> list[str]:
    return sorted(k for k in figures if k.endswith("/mean"))


def markdown_trials(rows: list[dict], hp_names: list[str], title: str) -> str:
    figs = sorted({k for r in rows for k in _year_means(r["figures"])}) + [
        k for k in HEADLINE if any(k in r["figures"] for r in rows)]
    head = ["trial", "status", "tuner"] + hp_names + ["avg2016", "best epoch"] + figs + ["s"]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in sorted(rows, key=lambda r: (r["avg2016"] is None, -(r["avg2016"] or 0))):
        cells = [r["trial_id"], r["status"], r["tuner_id"]] + [r["hyperparameters"].get(h) for h in hp_names]
        cells += [r["avg2016"], r["best_epoch"]] + [r["figures"].get(k) for k in figs]
        cells += [None if r["seconds"] is None else round(r["seconds"])]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def write_summary(tuner, space, out_dir: str | Path | None = None) -> dict:
    """Writes ``summary.json``, ``summary.md`` and ``best/`` (hyperparameters, STS report,
    copy of the best trial's hub export) into the project directory → the summary dict.

    Best = highest avg2016 among completed trials (``tuner.oracle.get_best_trials``).
    """
    out = Path(out_dir or tuner.project_dir)
    rows = trial_rows(tuner)
    done = [r for r in rows if r["status"] == "COMPLETED" and r["avg2016"] is not None]
    summary = {
        "protocol": space.protocol, "space_files": space.files, "model": space.model,
        "fixed": space.fixed, "objective": "avg2016 (STS16 mean Pearson r, max)",
        "hyperparameters": space.names, "completed_trials": len(done), "trials": rows, "best": None,
    }
    md = [markdown_trials(rows, space.names, f"{space.model}: {len(done)} completed trials "
                          f"(protocol {space.protocol.get('name', '?')}, sorted by avg2016)")]
    if done:
        best = max(done, key=lambda r: r["avg2016"])
        best_dir = out / "best"
        best_dir.mkdir(parents=True, exist_ok=True)
        src = Path(best["export_dir"])
        metrics_path = src.parent / "metrics.json"
        metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else {}
        if src.is_dir():
            if (best_dir / "export").exists():
                shutil.rmtree(best_dir / "export")
            shutil.copytree(src, best_dir / "export")
        best = {**best, "best_export_dir": str(best_dir / "export"), "config": metrics.get("config"),
                "sts": metrics.get("evaluation", {}).get("sts")}
        (best_dir / "best.json").write_text(json.dumps(best, indent=2))
        summary["best"] = best
        md += ["", f"### Best trial {best['trial_id']}: avg2016 = {best['avg2016']:.4f}", "",
               "```json", json.dumps(best["hyperparameters"], indent=2), "```",
               f"Hub export: `{best['best_export_dir']}`", ""]
        if best["sts"]:
            md.append(format_markdown(best["sts"], f"Best trial {best['trial_id']}: STS (cosine, unsupervised)"))
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "summary.md").write_text("\n".join(md) + "\n")
    return summary


def write_ablation_table(param: str, per_value: list[tuple[object, dict]], out_dir: str | Path) -> dict:
    """VETE Algorithm 2 table (as its Tables 3–4): per value of ``param``, the best avg2016
    over the random sets and that trial's test figures. Writes ``ablation.md``/``ablation.json``."""
    out = Path(out_dir)
    rows = []
    for value, summ in per_value:
        best = summ.get("best") or {}
        rows.append({"value": value, "completed_trials": summ["completed_trials"],
                     "best_trial": best.get("trial_id"), "avg2016": best.get("avg2016"),
                     "figures": best.get("figures", {})})
    figs = sorted({k for r in rows for k in _year_means(r["figures"])}) + [
        k for k in HEADLINE if any(k in r["figures"] for r in rows)]
    head = [param, "trials", "best trial", "best avg2016"] + figs
    lines = [f"### Ablation of {param} (VETE Algorithm 2: the same seeded random sets, {param} fixed)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["value"], r["completed_trials"], r["best_trial"], r["avg2016"]] + [r["figures"].get(k) for k in figs]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    table = {"param": param, "rows": rows}
    (out / "ablation.json").write_text(json.dumps(table, indent=2))
    (out / "ablation.md").write_text("\n".join(lines) + "\n")
    return table
