"""Reproducing a paper: every planned run of ``grounded_text.papers.reproduction`` trained (or
reused, or found under ``--from-runs``) by the experiments runner and scored by the paper's
protocol; ``results.json``, ``results.md`` and the forest plot written per paper, and the
reproduction report's sections written, redrawn or rendered again.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from grounded_text.data.paths import resolve_data_dir
from grounded_text.experiments import comparison, paper_report, scoring, verdicts
from grounded_text.experiments.charts import forest_plot
from grounded_text.experiments.runner import ensure_run, read_metrics
from grounded_text.papers.reproduction import BUDGETS, PAPER_NAMES, PAPERS, PlannedRun, RunSpec, plan_runs, record_names
from grounded_text.reporting.figures import read_families
from grounded_text.reporting.tables import read_sections, update_sections, write_report
from grounded_text.utils.extras import MissingExtraError
from grounded_text.utils.progress import SectionProgress


def find_run_dir(root: Path, paper: str, spec: RunSpec) -> tuple[Path | None, list]:
    """The trained run folder of ``spec`` under ``root`` and every folder that matched
    (``grounded_text.experiments.comparison.match_run_dir``, with the records of ``record_names``)."""
    return comparison.match_run_dir(root, paper, spec, record_names(spec))


def headline(paper: str, evaluation: dict) -> dict:
    """``{label: value}`` of the paper's figures (``Protocol.figures``, read by the figures
    registry) from ``score_run``'s output; spaces prefixed when the protocol has several."""
    proto = PAPERS[paper].protocol
    out = {}
    for space, _ in proto.spaces:
        ev = evaluation.get(space, {})
        if ev.get("status") == "ok":
            prefix = f"{space}: " if len(proto.spaces) > 1 else ""
            out.update({prefix + k: v for k, v in read_families(ev, proto.figures).items()})
    return out


def _find(planned: PlannedRun, paper: str, from_runs: Path, node: dict) -> tuple[Path | None, dict | None]:
    run_dir, node["candidates"] = find_run_dir(from_runs, paper, planned.spec)
    if run_dir is None:
        node.update({"status": "missing", "reason": f"no trained run of {planned.spec.name} under {from_runs}"})
        print(f"[{paper}] {planned.spec.name}: no run found under {from_runs}", flush=True)
        return None, None
    return run_dir, read_metrics(run_dir)


def _train(planned: PlannedRun, paper: str, budget: str, root: Path, out_dir: Path, node: dict):
    b = BUDGETS[budget]
    run_dir = out_dir / "runs" / planned.spec.name
    result = ensure_run(planned.config(), run_dir, root, evaluate=b.trainer_evaluates, verbose=b.verbose,
                        echo=lambda line: print(f"[{paper}] preset {planned.preset} ({budget} budget), {line}",
                                                flush=True))
    node["reused"] = result.reused
    return run_dir, result.metrics


def _run_node(planned: PlannedRun, paper: str, budget: str, root: Path, out_dir: Path, data, from_runs,
              predictions: dict | None = None, progress: SectionProgress | None = None) -> dict:
    """One run's ``results.json`` node: trained (or reused, or found) and scored; with
    ``predictions`` (a dict), ``predictions[run]`` receives the per-space predictions of the
    paired tests (``scoring.predictions``). ``progress``: a selected run's two sections
    (``_sections``), ``"<run>: train"`` (or ``find``) and ``"<run>: evaluate"``."""
    spec, p = planned.spec, PAPERS[paper]
    node: dict = {"preset": planned.preset, "main": spec.main, "groups": [list(g) for g in spec.groups],
                  "overrides": planned.overrides}
    if not planned.selected:
        return {**node, "status": "skipped", "reason": planned.reason, "twin": planned.twin}
    shown = progress if progress is not None else SectionProgress(0, "", enabled=False)
    if from_runs is not None:
        with shown.section(f"{spec.name}: find"):
            run_dir, metrics = _find(planned, paper, from_runs, node)
        if run_dir is None:
            shown.skip(f"{spec.name}: evaluate", "no run found")
            return node
    else:
        with shown.section(f"{spec.name}: train"):
            run_dir, metrics = _train(planned, paper, budget, root, out_dir, node)
    sel = metrics.get("selection", {})
    node.update({"status": "ok", "run_dir": str(run_dir), "config": metrics.get("config"),
                 "record": (metrics.get("config") or {}).get("model", {}).get("name"),
                 "trained_with": comparison.trained_with(metrics, None if from_runs is not None else planned.overrides),
                 "training": {"best_epoch": sel.get("best_epoch"), "selection": sel.get("monitor"),
                              "exported": metrics.get("exported", {}).get("kind"),
                              "fit_seconds": metrics.get("timing_seconds", {}).get("fit"),
                              "curve": comparison.training_curve(metrics),
                              **{k: metrics.get("data", {}).get(k)
                                 for k in ("train_images", "feature_file", "feature_dim")}}})
    print(f"[{paper}] {spec.name}: evaluating ({', '.join(p.protocol.sections)}"
          f"{', transfer' if p.protocol.transfer else ''})", flush=True)
    keep: dict | None = {} if predictions is not None else None
    with shown.section(f"{spec.name}: evaluate"):
        node["evaluation"] = scoring.score_run(run_dir, p.protocol, BUDGETS[budget].evaluation, data, metrics,
                                               keep=keep)
    if keep:
        predictions[spec.name] = keep
    node["headline"] = headline(paper, node["evaluation"])
    return node


def reproduce_paper(paper: str, budget: str, output_dir: Path, data_dir=None, *, only=None,
                    from_runs: Path | None = None, command: str = "", progress: bool = True) -> dict:
    """Trains (or reuses, or finds) and scores every planned run of ``paper``; writes results.json / .md.

    ``progress``: show each selected run's training (or lookup) and evaluation as sections on
    stderr (``grounded_text.utils.progress.SectionProgress``); the results are the same.

    Returns:
      The ``results.json`` content.

    Raises:
      RunConflict: a run folder holds a finished run of another config.
    """
    t_start = time.perf_counter()
    b, p = BUDGETS[budget], PAPERS[paper]
    root = resolve_data_dir(data_dir)
    out_dir = Path(output_dir) / paper
    out_dir.mkdir(parents=True, exist_ok=True)
    data = scoring.TestData(root)
    predictions: dict = {}
    plan = plan_runs(paper, budget, only, training=from_runs is None)
    with SectionProgress(2 * sum(r.selected for r in plan), f"reproduce {paper}", enabled=progress) as shown:
        runs = {planned.spec.name: _run_node(planned, paper, budget, root, out_dir, data, from_runs, predictions,
                                             shown) for planned in plan}
    results = {
        "paper": paper, "title": p.title, "citation": p.citation, "budget": budget,
        "budget_description": b.description, "mode": "from_runs" if from_runs is not None else "train",
        "from_runs": str(from_runs) if from_runs is not None else None, "command": command, "data_dir": str(root),
        "evaluation_settings": dataclasses.asdict(b.evaluation),
        "protocol": {"sections": list(p.protocol.sections), "spaces": [s for s, _ in p.protocol.spaces],
                     "same_image_n": p.protocol.same_image_pairs(b.evaluation),
                     "transfer": p.protocol.transfer, "description": list(p.protocol.description)},
        "runs": runs, "figures": comparison.figure_rows(p, runs), "ablations": comparison.ablation_tables(p, runs),
        "data_differences": comparison.data_differences(p, runs, root), "notes": list(p.notes),
        "comparison": comparison.comparison_rows(p, runs), "derived_means": comparison.derived_means(p, runs),
        "paired_tests": comparison.paired_tests(p, runs, predictions),
        "ours_data": comparison.dataset_text(runs), "ours_features": comparison.features_text(runs),
        "model_correlations": verdicts.model_correlations(p, predictions),
    }
    results["baselines"] = comparison.baseline_tables(p, results["comparison"])
    results["r23_fallback"] = verdicts.r23_fallback(results["model_correlations"],
                                                  other_papers_correlations(Path(output_dir), paper))
    results["verdict"] = verdicts.verdict(p, results)
    results["seconds"] = round(time.perf_counter() - t_start, 1)
    forest = "forest.png" if forest_chart(results, out_dir / "forest.png") else None
    write_report(results, paper_report.format_paper_markdown(results, forest), json_path=out_dir / "results.json",
                 markdown_path=out_dir / "results.md")
    return results


def forest_chart(results: dict, png: Path) -> bool:
    """Draws the forest plot of a paper's comparison rows (``results``: its ``results.json``
    content, or at least ``title``, ``comparison`` and ``protocol``) to ``png`` → True; False
    after one printed line when no row has both figures or matplotlib (the ``eval`` extra) is
    missing: the report does not depend on its chart."""
    several = len((results.get("protocol") or {}).get("spaces") or []) > 1
    rows = paper_report.forest_rows(results.get("comparison") or [], spaces=several)
    if not rows:
        print(f"[{results.get('paper', '')}] no forest plot: no figure of the paper has one of ours beside it",
              flush=True)
        return False
    try:
        forest_plot(rows, png, title=f"{results['title']}: ours against the paper (≈: ours on the nearest test "
                                     "set, not the paper's)")
    except MissingExtraError as e:
        print(f"[{results.get('paper', '')}] no forest plot: {e}", flush=True)
        return False
    return True


def docs_chart(path: str | Path, paper: str) -> tuple[Path, str]:
    """Where a report's forest plot of ``paper`` goes: ``figures/<report>-<paper>.png`` beside
    the report → (the file, its link from the report)."""
    link = f"figures/{Path(path).stem}-{paper}.png"
    return Path(path).parent / link, link


def other_papers_correlations(output_dir: Path, paper: str) -> dict:
    """``{paper: model_correlations}`` from the other papers' ``results.json`` under
    ``output_dir`` (written by earlier reproductions into the same folder), for the verdict's
    fallback r₂₃ (``comparison.r23_fallback``)."""
    out = {}
    for other in PAPER_NAMES:
        path = Path(output_dir) / other / "results.json"
        if other == paper or not path.is_file():
            continue
        try:
            mc = json.loads(path.read_text(encoding="utf-8")).get("model_correlations")
        except (OSError, ValueError):
            continue
        if mc:
            out[other] = mc
    return out


def write_docs(path: str | Path, results_by_paper: dict) -> Path:
    """Writes or updates ``path``: each paper's section between its markers, in ``PAPERS`` order,
    each with its forest plot (``docs_chart``)."""
    sections = {}
    for k, r in results_by_paper.items():
        png, link = docs_chart(path, k)
        sections[k] = paper_report.format_paper_markdown(r, link if forest_chart(r, png) else None)
    return update_sections(path, sections, PAPER_NAMES, header=paper_report.DOCS_HEADER, tag="reproduce")


def redraw_docs_charts(path: str | Path, papers) -> Path:
    """``--charts-only``: redraws the forest plot of each of ``papers`` that has a section in the
    report ``path``, from the figures of that section's own tables (no training, no scoring),
    and puts its image line in the section.

    Raises:
      FileNotFoundError: no report at ``path``.
    """
    text = Path(path).read_text(encoding="utf-8")
    sections = read_sections(text, "reproduce")
    updated = {}
    for paper in papers:
        if paper not in sections:
            print(f"[{paper}] no section in {path}: nothing to draw", flush=True)
            continue
        section = sections[paper]
        title = next((ln[3:] for ln in section.splitlines() if ln.startswith("## ")), PAPERS[paper].title)
        rows = paper_report.comparison_from_markdown(section)
        spaces = sorted({r["space"] for r in rows if r["space"]})
        png, link = docs_chart(path, paper)
        drawn = forest_chart({"paper": paper, "title": title, "comparison": rows, "protocol": {"spaces": spaces}},
                             png)
        updated[paper] = paper_report.with_forest_link(section, link if drawn else None)
        if drawn:
            print(f"wrote {png}", flush=True)
    return update_sections(path, updated, PAPER_NAMES, header=paper_report.DOCS_HEADER, tag="reproduce")


def rerender_docs_verdicts(path: str | Path, papers) -> Path:
    """``--verdicts-only``: renders again, by the current rules, the data-differences table and
    the verdict of each of ``papers`` that has a section in the report ``path``, from that
    section's own tables (``paper_report.rerender_verdicts``: no training, no scoring).

    Raises:
      FileNotFoundError: no report at ``path``.
    """
    text = Path(path).read_text(encoding="utf-8")
    sections = read_sections(text, "reproduce")
    updated = {p: paper_report.rerender_verdicts(sections[p], PAPERS[p]) for p in papers if p in sections}
    for paper in sorted(set(papers) - set(updated)):
        print(f"[{paper}] no section in {path}: no verdict to render", flush=True)
    return update_sections(path, updated, PAPER_NAMES, header=paper_report.DOCS_HEADER, tag="reproduce")
