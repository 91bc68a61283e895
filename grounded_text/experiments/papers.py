"""Papers as plans: their records (``Paper``, ``RunSpec``, ``PaperFigure``, ``Budget``) and
their results against the recorded figures: figure rows, ablation tables, what differs in the
data, and the Markdown section of the reproduction report (``grounded_text.reproduce`` holds
the data). The ``runs`` arguments are the ``results.json`` run nodes. No TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from grounded_text.experiments.figures import fmt_figure
from grounded_text.experiments.plans import RunPlan
from grounded_text.experiments.report import markdown_table
from grounded_text.experiments.runner import read_metrics
from grounded_text.experiments.scoring import EvalSettings, Protocol


@dataclasses.dataclass(frozen=True)
class RunSpec(RunPlan):
    """One training run of a paper's plan (a ``RunPlan``: name, preset record, dotted overrides).

    Attributes:
      main: trained by every budget; other runs are ablations (not trained by ``smoke``
        unless named with ``--only``).
      groups: ``(ablation name, setting label)`` pairs: the rows this run gives.
      match: dotted config keys → values that identify the run among ``--from-runs``
        folders (``model.name`` is always checked).
      default_keys: keys of ``match`` that a run may leave unset because the value is
        the preset's own (a run trained without ``--loss-param k=1`` is the K = 1 run).
    """

    main: bool = False
    groups: tuple = ()
    match: dict = dataclasses.field(default_factory=dict)
    default_keys: tuple = ()


@dataclasses.dataclass(frozen=True)
class PaperFigure:
    """A figure the paper reports (never invented: absent where not recorded here)."""

    value: float
    source: str


@dataclasses.dataclass(frozen=True)
class Paper:
    key: str
    title: str
    citation: str
    runs: tuple
    protocol: Protocol
    figures: dict  # headline label → PaperFigure
    data_differences: tuple  # (aspect, the paper, ours; "{features}" etc. filled from the runs)
    notes: tuple = ()


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much of a paper to train.

    Attributes:
      preset_map: preset record → the record trained instead.
      overrides: ``"*"`` (every run) or a preset record (after mapping) → dotted overrides,
        applied in that order, before the run's own.
      ablations: train the ablation runs without ``--only``.
      evaluation: ``EvalSettings``.
      trainer_evaluates: let the trainer score STS into ``metrics.json`` and the model card.
      verbose: Keras ``fit`` verbosity.
    """

    name: str
    description: str
    preset_map: dict
    overrides: dict
    ablations: bool
    evaluation: EvalSettings
    trainer_evaluates: bool = True
    verbose: int = 2


@dataclasses.dataclass
class PlannedRun:
    spec: RunSpec
    preset: str  # after the budget's mapping
    overrides: dict  # dotted: the budget's, then the run's
    selected: bool
    reason: str = ""

    def config(self):
        """The resolved config (``grounded_text.experiments.plans.resolve`` of the mapped record)."""
        return dataclasses.replace(self.spec, preset=self.preset, overrides=self.overrides).config()



_MISSING = object()


def _get(d, dotted: str, default=None):
    for k in dotted.split("."):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def run_matches(spec: RunSpec, run_config: dict, records: set) -> bool:
    """Whether a run folder's ``metrics.json`` config is the planned run (see ``RunSpec.match``)."""
    if _get(run_config, "model.name") not in records:
        return False
    for key, want in spec.match.items():
        got = _get(run_config, key, _MISSING)
        if (got is _MISSING and key not in spec.default_keys) or (got is not _MISSING and got != want):
            return False
    return True


def find_run_dir(root: Path, paper: str, spec: RunSpec, records: set) -> tuple[Path | None, list]:
    """The trained run folder of ``spec`` under ``root``, and every folder that matched.

    ``records``: the preset records the run may have been trained as. Order: ``root/<run>``,
    ``root/<paper>/runs/<run>``, then any folder up to 4 levels down
    with a ``metrics.json`` whose config matches (the newest when several do).
    """
    for cand in (root / spec.name, root / paper / "runs" / spec.name, root):
        metrics = read_metrics(cand) if (cand / "export").is_dir() else None
        cfg = (metrics or {}).get("config", {})
        # A folder named after the run only needs the right model; root itself must match.
        if metrics is not None and ((cand != root and _get(cfg, "model.name") in records)
                                    or run_matches(spec, cfg, records)):
            return cand, [str(cand)]
    found = [m.parent for m in sorted(root.glob("**/metrics.json"))
             if len(m.relative_to(root).parts) <= 5 and (m.parent / "export").is_dir()
             and run_matches(spec, (read_metrics(m.parent) or {}).get("config", {}), records)]
    found.sort(key=lambda p: (p / "metrics.json").stat().st_mtime, reverse=True)
    return (found[0] if found else None), [str(p) for p in found]


def main_run(paper, runs: dict) -> str | None:
    """The first main run of ``paper`` that finished (``status`` ok), or None."""
    return next((s.name for s in paper.runs if s.main and runs.get(s.name, {}).get("status") == "ok"), None)


def figure_rows(paper, runs: dict) -> list[dict]:
    """Paper figure vs ours (the main run): every headline figure, then every recorded figure
    not among them; ``difference`` = ours − paper where both exist."""
    main = main_run(paper, runs)
    ours = runs[main]["headline"] if main else {}
    figs = paper.figures
    rows = []
    for label in list(ours) + [f for f in figs if f not in ours]:
        fig, mine = figs.get(label), ours.get(label)
        rows.append({"measure": label, "paper": fig.value if fig else None, "source": fig.source if fig else None,
                     "ours": mine, "difference": None if fig is None or mine is None else mine - fig.value,
                     "run": main})
    return rows


def ablation_tables(paper, runs: dict) -> dict:
    """``{ablation: [{"setting", "run", "status", "measures"}]}`` from the runs' groups."""
    tables: dict = {}
    for spec in paper.runs:
        for group, setting in spec.groups:
            node = runs.get(spec.name, {})
            tables.setdefault(group, []).append({"setting": setting, "run": spec.name, "status": node.get("status"),
                                                 "measures": node.get("headline", {})})
    return tables


def _distinct(texts) -> str:
    return "; ".join(dict.fromkeys(texts)) or "(no run)"


def features_text(runs: dict) -> str:
    """The image features of the finished runs (``stem, d-d``), each once."""
    out = []
    for node in runs.values():
        t = node.get("training") or {}
        if node.get("status") == "ok" and t.get("feature_file"):
            stem = Path(str(t["feature_file"])).stem
            views = " (whole image resized, 1 view)" if stem.startswith(("efficientnet", "mobilenet")) else ""
            out.append(f"{stem}, {t.get('feature_dim')}-d{views}")
    return _distinct(out)


def dataset_text(runs: dict) -> str:
    """The training data of the finished runs (dataset and image count), each once."""
    out = []
    for node in runs.values():
        if node.get("status") == "ok":
            name = (node.get("config") or {}).get("data", {}).get("dataset", "flickr8k")
            n = (node.get("training") or {}).get("train_images")
            out.append(("Flickr8k train split" if name == "flickr8k" else str(name)) + (f", {n:,} images" if n else ""))
    return _distinct(out)


def data_differences(paper, runs: dict, root: Path) -> list[dict]:
    """``[{"aspect", "paper", "ours"}]``: ``paper.data_differences`` filled from the runs and the data root."""
    from grounded_text.data.sts import sts_year_dirs

    sts_dir = Path(root) / "sts"
    years = sorted(sts_year_dirs(sts_dir)) if sts_dir.is_dir() else []
    extra = [n for n, d in (("STS-B", "STSBenchmark"), ("SICK", "SICK")) if (sts_dir / d).is_dir()]
    fill = {"features": features_text(runs), "dataset": dataset_text(runs),
            "sts_years": ", ".join(years + extra) or "none"}
    return [{"aspect": a, "paper": pv, "ours": ov.format(**fill)} for a, pv, ov in paper.data_differences]


def trained_with(metrics: dict, overrides: dict | None) -> str:
    """What the run trained: its size and length, and the overrides of its record (when we trained it)."""
    cfg = metrics.get("config", {})
    d, m, t = cfg.get("data", {}), cfg.get("model", {}), cfg.get("train", {})
    n_img = metrics.get("data", {}).get("train_images")
    epochs = t.get("epochs")
    parts = [f"{epochs} epoch{'' if epochs == 1 else 's'}", f"{n_img:,} training images" if n_img else
             "training images: ?", f"N = {m.get('embedding_dim')}", f"batch {d.get('batch_size')}"]
    if overrides:
        parts.append("overrides of the record " + json.dumps(overrides, sort_keys=True))
    return ", ".join(parts)


def record_note(name: str | None) -> str:
    """``"record `NAME`"``, with what it is a variant of (a name that is no record is shown as is)."""
    from grounded_text.presets import PRESETS

    record = PRESETS.get(name)
    return f"record `{name}`" + (f" (variant of `{record.variant_of}`)" if record and record.variant_of else "")


# ----------------------------------------------------------------------------- Markdown


def _scored_on(results: dict) -> str:
    ev = results["evaluation_settings"]
    scored = (f"Flickr8k test split, first {ev['test_images']} images (retrieval protocol `all`)"
              if ev["test_images"] else "Flickr8k test split, 1,000 images (retrieval protocol `flickr8k_1k`)")
    scored += f"; same-image N = {ev['same_image_n']}" if "same_image" in results["protocol"]["sections"] else ""
    if results["protocol"]["transfer"]:
        scored += (f"; SentEval {ev['transfer_kfold']}-fold"
                   + (f", at most {ev['transfer_max_examples']} examples per split" if ev["transfer_max_examples"]
                      else ", all examples"))
    return scored


def setup_lines(results: dict) -> list[str]:
    """Title, citation, the command / budget / scoring table, the runs, the data differences, the protocol."""
    mode = ("evaluates already-trained runs found under its `--from-runs` folder"
            if results["mode"] == "from_runs" else "trains and evaluates")
    lines = [f"## {results['title']}", "", f"*{results['citation']}*", "", "| | |", "|---|---|",
             f"| command | `{results['command']}` ({mode}) |",
             f"| budget | `{results['budget']}`: {results['budget_description']} |",
             f"| scored on | {_scored_on(results)} |"]
    for name, node in results["runs"].items():
        if node.get("status") == "ok":
            lines.append(f"| run `{name}` | {record_note(node.get('record'))}: {node['trained_with']}; best epoch "
                         f"{node['training']['best_epoch']} by {node['training']['selection']}, exported "
                         f"{node['training']['exported']} |")
    lines += ["", "What differs from the paper's data:", ""]
    lines += markdown_table(["aspect", "paper", "ours"], [(d["aspect"], d["paper"], d["ours"])
                                                          for d in results["data_differences"]])
    return lines + ["", "Protocol: " + "; ".join(results["protocol"]["description"]) + ".", ""]


def figure_lines(results: dict) -> list[str]:
    """The figures table: paper, ours, ours − paper, the source of the paper's figure."""
    main = next((r["run"] for r in results["figures"] if r["run"]), None)
    rows = [(r["measure"], fmt_figure(r["paper"], r["measure"]) if r["paper"] is not None else "not reported here",
             fmt_figure(r["ours"], r["measure"]), fmt_figure(r["difference"], r["measure"], signed=True),
             r["source"] or "–") for r in results["figures"]]
    return [f"Figures (ours: run `{main}`; “–” = not reported here / not measured):", ""] + markdown_table(
        ["measure", "paper", "ours", "ours − paper", "source of the paper's figure"], rows,
        ["---", "---:", "---:", "---:", "---"])


def ablation_lines(results: dict) -> list[str]:
    """One table per ablation of at least two settings, the columns = every figure of its runs."""
    lines = []
    for group, rows in results["ablations"].items():
        if len(rows) < 2:
            continue
        cols = list(dict.fromkeys(c for r in rows for c in r["measures"]))
        body = []
        for r in rows:
            if r["status"] == "ok":
                cells = [fmt_figure(r["measures"].get(c), c) for c in cols]
            else:
                cells = [f"({r['status']})"] + ["" for _ in cols[1:]] if cols else []
            body.append([r["setting"], f"`{r['run']}`"] + cells)
        lines += ["", f"Ablation: {group}", ""] + markdown_table(["setting", "run"] + cols, body,
                                                                 ["---", "---"] + ["---:"] * len(cols))
    return lines


def gap_lines(results: dict) -> list[str]:
    """Runs not scored, spaces missing, retrieval unavailable, SentEval tasks that did not run."""
    gaps = []
    for name, node in results["runs"].items():
        if node.get("status") != "ok":
            gaps.append(f"* `{name}`: {node['status']} — {node.get('reason', '')}")
            continue
        for space, ev in node.get("evaluation", {}).items():
            if ev.get("status") != "ok":
                gaps.append(f"* `{name}`, {space} space: {ev.get('status')} — {ev.get('reason', '')}")
                continue
            if isinstance(ev.get("retrieval"), dict) and ev["retrieval"].get("status") == "unavailable":
                gaps.append(f"* `{name}`, retrieval: unavailable — {ev['retrieval']['reason']}")
            for task, r in (ev.get("transfer") or {}).items():
                if isinstance(r, dict) and r.get("status") not in (None, "ok"):
                    gaps.append(f"* `{name}`, {space} space, SentEval {task}: {r['status']} — {r.get('reason', '')}")
    return [""] + gaps if gaps else []


def format_paper_markdown(results: dict) -> str:
    """The paper's section: setup, figures (paper, ours, difference), ablations, gaps, notes."""
    lines = setup_lines(results) + figure_lines(results) + ablation_lines(results) + gap_lines(results)
    for note in results.get("notes", []):
        lines += ["", note]
    return "\n".join(lines)
