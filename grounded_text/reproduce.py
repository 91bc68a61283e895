"""Reproduce a paper: train its configuration(s) with the one trainer, score them with its protocol.

Usage::

    python -m grounded_text.reproduce PAPER [--budget full|cpu|smoke] --output-dir DIR \\
        [--data-dir D] [--only NAME ...] [--from-runs RUNS] [--write-docs docs/reproduction.md] [--no-progress]
    python -m grounded_text.reproduce PAPER --charts-only --write-docs docs/reproduction.md
    python -m grounded_text.reproduce PAPER --verdicts-only --write-docs docs/reproduction.md

``PAPER`` is ``vete`` (Kurach et al. 2017), ``bordes`` (Bordes et al., EMNLP 2019),
``kolluru`` (Kolluru's two-branch network), ``merkx_frank`` (Merkx & Frank 2019) or ``all``.

This module is the plan (data); the work is done by ``grounded_text.experiments``:

* Training: every run of the paper's plan (``PAPERS``) is a preset record with the budget's
  overrides (``BUDGETS``) and the run's own (an ablation's loss or K), dotted
  ``section.field`` keys as ``train --set`` takes them, trained by the experiments runner
  (``grounded_text.training.trainer.train``) into ``DIR/<paper>/runs/<run>/``. A finished run of the
  same resolved config is reused, so an interrupted reproduction resumes; a finished run of
  another config is refused (remove it, or choose another ``--output-dir``).
* Evaluation: the experiments layer's one scoring call (``grounded_text.evaluation.suite``
  and the SentEval transfer tasks) on the run's exports; headline figures from its registry.
* ``--from-runs RUNS``: no training; each planned run is looked up under ``RUNS`` (a folder
  named after the run, ``RUNS/<paper>/runs/<run>``, or any folder below whose
  ``metrics.json`` config matches the run) and evaluated. For runs trained with
  ``python -m grounded_text.train``.
* Progress: each selected run's training (or lookup) and evaluation, as sections on stderr (a
  bar in a terminal, else a line as each starts and ends with its seconds); ``--no-progress``
  turns it off, and the recorded command leaves it out (the results are the same).
* Output: ``DIR/<paper>/results.json``, ``DIR/<paper>/results.md`` and beside it
  ``forest.png`` (the paper's figures and ours with both intervals; needs matplotlib, else
  skipped with one line); ``--write-docs FILE`` writes (or updates, paper by paper) the
  reproduction report: the paper's figures, ours, the difference, the command, the budget and
  what differs in the data, with the forest plot in ``figures/<FILE stem>-<paper>.png`` beside
  it. ``--charts-only --write-docs FILE`` only redraws those plots from the report's own
  tables (no ``--output-dir``, no training, no scoring); ``--verdicts-only --write-docs FILE``
  renders each section's verdict (and its table of what differs) again by the current rules,
  from the section's own tables.

Budgets (``BUDGETS``): ``full`` = the records as the papers train them; ``cpu`` = what fits a
2-core machine; ``cycle`` = 4 epochs of every run (one cosine cycle; the character model at
the paper's n = 1024, with n = 512 beside it); ``smoke`` = a 64-image training slice, 1 epoch,
tiny encoders, the paper's main run only, evaluation on a 64-image test slice (seconds per
paper).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time
import warnings
from pathlib import Path

from grounded_text.experiments import comparison as papers
from grounded_text.experiments import paper_report, scoring, verdicts
from grounded_text.experiments.comparison import Budget, HeadlineFigure, Paper, PlannedRun, Published, RunSpec
from grounded_text.experiments.plans import merge_overrides
from grounded_text.experiments.runner import RunConflict, ensure_run, read_metrics
from grounded_text.experiments.scoring import EvalSettings, Protocol
from grounded_text.reporting.figures import read_families
from grounded_text.reporting.tables import public_command, read_sections, update_sections, write_report
from grounded_text.utils.progress import SectionProgress, recorded_args

__all__ = ["BUDGETS", "PAPERS", "PAPER_NAMES", "Budget", "HeadlineFigure", "Paper", "PlannedRun", "Published",
           "RunSpec", "main", "plan_runs", "reproduce_paper", "write_docs"]

log = logging.getLogger("grounded_text.reproduce")


_FEATURES = ("image features", "InceptionV3, 2048-d", "{features}")
_STS_YEARS = ("STS years", "held-out STS14/15 reported in the papers' protocol", "{sts_years}")
_K = "model.loss_params.k"


PAPERS: dict[str, Paper] = {
    "vete": Paper(
        "vete", "VETE (Kurach et al. 2017)",
        "Kurach, Gelly, Jastrzebski, Haeusser, Teytaud, Vincent & Bousquet 2017, "
        "\"Better Text Understanding Through Image-To-Text Transfer\"",
        runs=(
            RunSpec("vete_bow", "vete_bow", main=True, groups=(("encoder", "BOW"), ("loss", "pearson")),
                    match={"model.loss": "pearson"}),
            RunSpec("vete_rnn", "vete_rnn", groups=(("encoder", "RNN"),), match={"model.loss": "pearson"}),
            RunSpec("vete_cnn", "vete_cnn", groups=(("encoder", "CNN"),), match={"model.loss": "pearson"}),
            # The loss ablation (§5.2) on VETE-BOW, the cheapest encoder: our choice of base model.
            *(RunSpec(f"vete_bow_{loss}", "vete_bow", {"model.loss": loss}, groups=(("loss", loss),),
                      match={"model.loss": loss}) for loss in ("covariance", "skt", "rank")),
        ),
        protocol=Protocol(("sts", "same_image"), description=(scoring.STS_ALL, scoring.SAME_IMAGE),
                          figures=("sts", "same_image"), same_image_n=1000),  # VETE §4.3: 1,000 + 1,000
        figures={},
        figures_key="kurach2017_vete",
        published=papers.PUBLISHED["vete"],
        data_differences=(("training data", "MS COCO and larger caption sets", "{dataset}"), _FEATURES,
                          ("same-image test", "COCO-Test / Pin-Test (§4.3)", "Flickr8k test captions"), _STS_YEARS),
    ),
    "bordes": Paper(
        "bordes", "Grounded space (Bordes et al. 2019)",
        "Bordes, Zablocki, Soulier, Piwowarski & Gallinari, EMNLP 2019, \"Incorporating Visual "
        "Semantics into Sentence Representations within a Grounded Space\"",
        runs=(RunSpec("bordes_cg_pg", "bordes_cg_pg", main=True),),
        protocol=Protocol(("sts", "structure"),
                          spaces=(("textual", ("export_textual", "export")), ("grounded", ("export_grounded",))),
                          transfer=True, description=(scoring.STS_ALL, scoring.STRUCTURE, scoring.TRANSFER),
                          figures=(("sts", {"spearman": True}), "structure", "transfer")),
        figures={},
        figures_key="bordes2019_grounded_space",
        published=papers.PUBLISHED["bordes"],
        data_differences=(("training data", "MS COCO (grounding) + BookCorpus (textual loss L_T)",
                           "{dataset}; no textual loss (C_g + P_g only)"), _FEATURES,
                          ("sentence encoder", "SkipThought's GRU (d_t = 2048, 620-d words, 20K vocabulary with "
                           "vocabulary expansion, §4.4), trained on BookCorpus; the grounded models of Table 1 start "
                           "from it (\"the sentence encoder is initialized with T\", §4.2)",
                           "a GRU over 128-d word embeddings (N = 128), trained from scratch on the Flickr8k captions "
                           "alone: no SkipThought initialisation"),
                          _STS_YEARS),
        baselines=(("Table 1", "row"),),
        notes=("The textual space is `export_textual/` (or `export/` for runs that predate it) and the "
               "grounded space `export_grounded/`; a space the run did not export is reported missing.",),
    ),
    "kolluru": Paper(
        "kolluru", "Two-branch network with K-hard negatives (Kolluru)",
        "Kolluru, two-branch network (§3.1, after Wang et al. 2016), K-hardest negative loss (eq. 3)",
        runs=(
            RunSpec("two_branch_khard_k1", "two_branch_khard", {_K: 1}, main=True, groups=(("K", "K = 1"),),
                    match={_K: 1}, default_keys=(_K,)),
            RunSpec("two_branch_khard_k5", "two_branch_khard", {_K: 5}, groups=(("K", "K = 5"),), match={_K: 5}),
            RunSpec("two_branch_khard_k10", "two_branch_khard", {_K: 10}, groups=(("K", "K = 10"),),
                    match={_K: 10}),
        ),
        protocol=Protocol(("retrieval",), description=(scoring.RETRIEVAL,), figures=("retrieval", "rsum")),
        figures={},
        figures_key="kolluru_two_branch",
        published=papers.PUBLISHED["kolluru"],
        data_differences=(("training data", "Flickr30K train, 29,783 images × 5 captions (Table 1); MSCOCO train, "
                           "about 121,000 images × 5 captions (Table 2) (§4.1)", "{dataset}"),
                          ("image features", "VGG19 (4096-d) / ResNet50 (stated as 512-d), penultimate FC "
                           "(§3.1, §4.4.1)", "{features}")),
        notes=("The preset's K = 1 is the thesis's choice (it finds K = 1 best and K = 10 worse, Tables 1–2); "
               "its figures stand above beside ours, as the nearest measure: its test sets are Flickr30K's and "
               "MSCOCO's 1,000-image tests, ours Flickr8k's.",),
    ),
    "merkx_frank": Paper(
        "merkx_frank", "Character-level grounding (Merkx & Frank 2019)",
        "Merkx & Frank 2019, \"Learning semantic sentence representations from visually grounded "
        "language without lexical knowledge\", Natural Language Engineering 25",
        runs=(RunSpec("char_gru_attention", "char_gru_attention", main=True, groups=(("width", "n = 1024"),)),
              # §3.3 tests n in {512, 1024, 2048}; §4.1 reports n = 1024. The half width is the
              # CPU budget's stand-in, so its difference is measured at the same budget.
              RunSpec("char_gru_attention_512", "char_gru_attention_512", groups=(("width", "n = 512"),),
                      match={"model.encoder.units": 512})),
        protocol=Protocol(("sts", "supervised", "retrieval"), supervised_model="senteval",
                          description=(scoring.STS_ALL, scoring.SUPERVISED, scoring.RETRIEVAL),
                          figures=(("sts", {"subsets": True}), "mean_of_year_means", "supervised", "retrieval")),
        figures=papers.mf_headline_figures(), figures_key="merkx2019_char_grounding",
        published=papers.PUBLISHED["merkx_frank"],
        derived_means=("Table 5", "char-GRU (Flickr8k)", ("STS12", "STS13", "STS16")),
        baselines=(("Table 2", "row"), ("Table 5", "column")),
        data_differences=(("training data", "Flickr8k train, 6,000 images × 5 captions (and MS COCO, not compared "
                                            "here)", "{dataset}"),
                          ("image features", "ResNet-152, 2048-d, mean of 10 crops", "{features}"),
                          ("STS years", "STS12–16 (Table 5)", "{sts_years}"),
                          # §3.3: "For ensembling we use the two snapshots with the highest performance
                          # on the development data"; the budget decides how many snapshots we have.
                          ("model scored", "an ensemble of the 2 best of 8 snapshots (32 epochs, one every 4th; "
                           "§3.3)", "each run's export (a run of one cycle has one snapshot)"),
                          # Their SentEval batcher (evaluate_char.py:58-60) ends every sentence in " .";
                          # score_run applies the rule each run was trained with.
                          ("test-time sentence ends", "\" .\" unless the last token is \".\" (their SentEval "
                           "batcher)", "each run's training rule (the record: \" .\" unless the sentence ends in "
                           "\".\")")),
    ),
}
PAPER_NAMES = tuple(PAPERS)


SMOKE_SLICE = {"data.max_train_images": 64, "data.max_dev_images": 64, "data.batch_size": 32,
               "model.embedding_dim": 16, "train.epochs": 1, "train.select_on": "val_loss", "train.cycle_epochs": 1}
# Tiny encoders (the keys each builder takes; sizes as in tests/test_presets.py).
SMOKE_ENCODERS = {
    "vete_rnn": {"word_dim": 8, "units": 8},
    "vete_cnn": {"word_dim": 8, "filters": 4},
    "bordes_cg_pg": {"word_dim": 8, "units": 8, "grounded_hidden": 8, "grounded_dim": 8},
    "two_branch_khard": {"hidden_units": [16]},
    "char_gru_attention": {"char_dim": 4, "units": 8, "attention_units": 8},
    "char_gru_attention_512": {"char_dim": 4, "units": 8, "attention_units": 8},
}

BUDGETS: dict[str, Budget] = {
    "full": Budget("full", "the preset records as the papers train them (epochs, sizes, schedules)",
                   preset_map={}, overrides={}, ablations=True, evaluation=EvalSettings()),
    "cpu": Budget(
        "cpu",
        "what fits 2 CPU cores: 5 epochs (bordes_cg_pg 8: its grouped epochs are shorter), the character "
        "model as char_gru_attention_512 for 8 epochs = 2 cosine cycles of 4; SentEval 5-fold",
        preset_map={"char_gru_attention": "char_gru_attention_512"},
        overrides={"*": {"train.epochs": 5}, "bordes_cg_pg": {"train.epochs": 8},
                   "char_gru_attention_512": {"train.epochs": 8, "train.cycle_epochs": 4}},
        ablations=True, evaluation=EvalSettings(transfer_kfold=5)),
    "cycle": Budget(
        "cycle",
        "one cosine cycle: 4 epochs of every run (one cycle of §3.3's schedule, where its Figure 4 puts the "
        "semantic peak), the character model at §4.1's n = 1024 with n = 512 beside it; SentEval 5-fold",
        preset_map={}, overrides={"*": {"train.epochs": 4}},
        ablations=True,
        evaluation=EvalSettings(transfer_kfold=5)),
    "smoke": Budget(
        "smoke",
        "64 training / 64 dev images, 1 epoch, N = 16 and tiny encoders, main run only; scored on the "
        "first 64 Flickr8k test images (retrieval protocol `all`), SentEval capped at 200 examples, 2-fold",
        preset_map={},
        overrides={"*": SMOKE_SLICE, **{p: {"model.encoder": e} for p, e in SMOKE_ENCODERS.items()}},
        ablations=False,
        # 2 folds: TREC's smallest class has 2 of the 200 sampled training questions.
        evaluation=EvalSettings(test_images=64, same_image_n=100, transfer_kfold=2, transfer_max_examples=200,
                                supervised_model="ridge"),
        trainer_evaluates=False, verbose=0),
}


def plan_runs(paper: str, budget: str, only=None, *, training: bool = True) -> list[PlannedRun]:
    """The runs of ``paper`` under ``budget``, with their overrides and whether they are selected.

    ``only``: run names or preset names; when given, exactly the runs named (by run name,
    the record's name or the mapped record's name) are selected, ablations included.
    Without it, a budget without ablations selects the main runs only when ``training``
    (evaluating runs found with ``--from-runs`` costs no training: all are selected).
    """
    b = BUDGETS[budget]
    out = []
    for spec in PAPERS[paper].runs:
        preset = b.preset_map.get(spec.preset, spec.preset)
        overrides = merge_overrides(b.overrides.get("*", {}), b.overrides.get(preset, {}), spec.overrides)
        if only:
            selected = bool({spec.name, spec.preset, preset} & set(only))
            reason = "" if selected else "not named by --only"
        else:
            selected = spec.main or b.ablations or not training
            reason = "" if selected else f"ablation run: not trained by the {budget} budget (name it with --only)"
        twin = next((r.spec.name for r in out if (r.preset, r.overrides) == (preset, overrides)), None)
        if twin is not None:  # a budget's stand-in may make an ablation the main run itself
            selected, reason = False, f"the same run as {twin} under the {budget} budget"
        out.append(PlannedRun(spec, preset, overrides, selected, reason, twin))
    return out


def record_names(spec: RunSpec) -> set:
    """The records a run of ``spec`` may have been trained as: its own and every budget's stand-in."""
    return {spec.preset} | {b.preset_map.get(spec.preset, spec.preset) for b in BUDGETS.values()}


def valid_only_names(papers) -> set:
    return {n for paper in papers for spec in PAPERS[paper].runs for n in record_names(spec) | {spec.name}}


def find_run_dir(root: Path, paper: str, spec: RunSpec) -> tuple[Path | None, list]:
    """The trained run folder of ``spec`` under ``root`` and every folder that matched
    (``grounded_text.experiments.comparison.match_run_dir``, with the records of ``record_names``)."""
    return papers.match_run_dir(root, paper, spec, record_names(spec))


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
                 "trained_with": papers.trained_with(metrics, None if from_runs is not None else planned.overrides),
                 "training": {"best_epoch": sel.get("best_epoch"), "selection": sel.get("monitor"),
                              "exported": metrics.get("exported", {}).get("kind"),
                              "fit_seconds": metrics.get("timing_seconds", {}).get("fit"),
                              "curve": papers.training_curve(metrics),
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
    from grounded_text.data.paths import resolve_data_dir

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
        "runs": runs, "figures": papers.figure_rows(p, runs), "ablations": papers.ablation_tables(p, runs),
        "data_differences": papers.data_differences(p, runs, root), "notes": list(p.notes),
        "comparison": papers.comparison_rows(p, runs), "derived_means": papers.derived_means(p, runs),
        "paired_tests": papers.paired_tests(p, runs, predictions),
        "ours_data": papers.dataset_text(runs), "ours_features": papers.features_text(runs),
        "model_correlations": verdicts.model_correlations(p, predictions),
    }
    results["baselines"] = papers.baseline_tables(p, results["comparison"])
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
    from grounded_text.utils.extras import MissingExtraError

    several = len((results.get("protocol") or {}).get("spaces") or []) > 1
    rows = paper_report.forest_rows(results.get("comparison") or [], spaces=several)
    if not rows:
        print(f"[{results.get('paper', '')}] no forest plot: no figure of the paper has one of ours beside it",
              flush=True)
        return False
    try:
        from grounded_text.reporting.charts import forest_plot

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
    import json

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


#: Paper keys kept for one release after a rename: old key → new key (a warning names the new one
#: and the release that removes the old).
DEPRECATED_PAPER_KEYS = {"merckx_frank": "merkx_frank"}  # Merkx was misspelt in 0.1.0; removed in 0.3.0


def parse_args(argv=None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(argv):
        if arg in DEPRECATED_PAPER_KEYS:
            warnings.warn(f"reproduce {arg!r} is deprecated and will be removed in 0.3.0; use "
                          f"{DEPRECATED_PAPER_KEYS[arg]!r}", FutureWarning, stacklevel=2)
            argv[i] = DEPRECATED_PAPER_KEYS[arg]
    p = argparse.ArgumentParser(prog="python -m grounded_text.reproduce", description=__doc__.split("\n\n")[0])
    p.add_argument("paper", metavar="PAPER", choices=PAPER_NAMES + ("all",),
                   help="one of " + ", ".join(PAPER_NAMES) + " or all")
    p.add_argument("--budget", default="full", choices=sorted(BUDGETS),
                   help="full (the paper's records), cpu (fits 2 cores), cycle (4 epochs: one cosine cycle), smoke "
                        "(64-image plumbing check)")
    p.add_argument("--output-dir", default=None,
                   help="writes OUTPUT_DIR/<paper>/{results.json,results.md,forest.png,runs/} (required unless "
                        "--charts-only)")
    p.add_argument("--data-dir", default=None, help="data root (default: $GROUNDED_TEXT_DATA)")
    p.add_argument("--only", nargs="+", default=None, metavar="NAME",
                   help="train/evaluate only these runs (run names or preset names), ablations included")
    p.add_argument("--from-runs", default=None, metavar="DIR",
                   help="evaluate already-trained run folders under DIR instead of training")
    p.add_argument("--write-docs", default=None, metavar="FILE", help="write/update this Markdown report")
    p.add_argument("--charts-only", action="store_true",
                   help="only redraw the forest plots of the --write-docs report from its own tables (no training, "
                        "no scoring)")
    p.add_argument("--verdicts-only", action="store_true",
                   help="only render the verdicts (and what differs) of the --write-docs report again from its own "
                        "tables (no training, no scoring)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress of the runs' training and evaluation on stderr (by default: a bar in a "
                        "terminal, else a line as each starts and ends); the results are the same")
    a = p.parse_args(argv)
    if a.charts_only and not a.write_docs:
        p.error("--charts-only redraws the charts of the --write-docs FILE report: name it")
    if a.verdicts_only and not a.write_docs:
        p.error("--verdicts-only renders the verdicts of the --write-docs FILE report: name it")
    if not (a.charts_only or a.verdicts_only) and a.output_dir is None:
        p.error("the following arguments are required: --output-dir")
    a.papers = list(PAPER_NAMES) if a.paper == "all" else [a.paper]
    bad = sorted(set(a.only or ()) - valid_only_names(a.papers))
    if bad:
        p.error(f"--only {' '.join(bad)}: no such run or preset in {a.paper}; choose from "
                f"{sorted(valid_only_names(a.papers))}")
    if a.from_runs is not None and not Path(a.from_runs).is_dir():
        p.error(f"--from-runs {a.from_runs}: not a directory")
    return a


def main(argv=None) -> int:
    """The CLI: exit status 0, or 2 with ``error: ...`` for bad arguments or a run folder that
    holds a finished run of another config."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parse_args(argv)
    command = public_command("python -m grounded_text.reproduce", recorded_args(argv))
    if a.charts_only:
        print(f"wrote {redraw_docs_charts(a.write_docs, a.papers)}")
        return 0
    if a.verdicts_only:
        print(f"wrote {rerender_docs_verdicts(a.write_docs, a.papers)}")
        return 0
    from grounded_text.utils.extras import check_extras

    # scikit-learn (supervised STS, SentEval transfer) is named before the first run trains
    check_extras([("sklearn", f"reproduce {paper} (supervised STS or SentEval transfer)") for paper in a.papers
                  if ("supervised" in PAPERS[paper].protocol.sections or PAPERS[paper].protocol.transfer)
                  and (not a.only or any(r.selected for r in plan_runs(paper, a.budget, a.only,
                                                                            training=not a.from_runs)))])
    results = {}
    for paper in a.papers:
        if a.only and not any(r.selected for r in plan_runs(paper, a.budget, a.only, training=not a.from_runs)):
            continue  # `all --only vete_bow`: the other papers have nothing to do
        try:
            results[paper] = reproduce_paper(paper, a.budget, Path(a.output_dir), a.data_dir, only=a.only,
                                             from_runs=Path(a.from_runs) if a.from_runs else None, command=command,
                                             progress=not a.no_progress)
        except RunConflict as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(paper_report.format_paper_markdown(results[paper]) + "\n", flush=True)
        print(f"wrote {Path(a.output_dir) / paper / 'results.json'}", flush=True)
    if a.write_docs:
        print(f"wrote {write_docs(a.write_docs, results)}")
    return 0


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
