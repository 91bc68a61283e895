"""One report per encoder joining the STS table and the SentEval transfer table.

Rendering only: ``grounded_text.evaluation.suite`` runs the evaluations (``model_report``
for ``--transfer`` / ``--baseline``, ``evaluate_encoders`` for the full suite); every encoder
(our hub exports, any TF Hub text module, the GloVe-mean baseline) is scored by the same code:
``grounded_text.evaluation.sts.evaluate_sts`` (cosine, unsupervised) and
``grounded_text.evaluation.transfer.evaluate_transfer``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from grounded_text.evaluation.encoders import BASELINE_ENCODERS, BASELINE_LABELS, baseline_encoder  # noqa: F401 (re-exported)
from grounded_text.evaluation.retrieval import RECALL_KS
from grounded_text.evaluation.sts import format_markdown
from grounded_text.evaluation.supervised_sts import MODEL_LABELS
from grounded_text.evaluation.transfer import (
    format_comparison_markdown,
    format_transfer_markdown,
)
from grounded_text.reporting.figures import dig
from grounded_text.reporting.tables import fmt
from grounded_text.reporting.tables import write_report as write_report_files


def report_markdown(report: dict) -> str:
    """The Markdown of one ``model_report``: STS table, then transfer table, with timings."""
    parts = [f"## {report['model']}"]
    if "sts" in report:
        parts.append(format_markdown(report["sts"], f"STS (cosine, unsupervised) — {report['sts_seconds']:.0f} s"))
    if "transfer" in report:
        cfg = report["transfer_config"]
        cap = "" if cfg["max_examples"] is None else f", at most {cfg['max_examples']} examples per split"
        parts.append(format_transfer_markdown(
            report["transfer"],
            f"SentEval transfer (logistic regression, k={cfg['kfold']}, seed {cfg['seed']}{cap}) — "
            f"{report['transfer_seconds']:.0f} s",
        ))
    return "\n\n".join(parts) + "\n"


def comparison_markdown(reports: Sequence[dict]) -> str:
    """Side-by-side transfer accuracies of several ``model_report``s, with each one's time."""
    with_transfer = [r for r in reports if "transfer" in r]
    if not with_transfer:
        return ""
    table = format_comparison_markdown({r["model"]: r["transfer"] for r in with_transfer})
    times = ", ".join(f"{r['model']}: {r['transfer_seconds']:.0f} s" for r in with_transfer)
    return f"### SentEval transfer, test accuracy % (MRPC acc/F1)\n\n{table}\n\nWall time (transfer): {times}\n"


def slug(label: str) -> str:
    """A file-name-safe version of a model label (for ``--report-dir``)."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", label.strip("/")).strip("_")
    return s or "model"


# --- The full evaluation report (suite) ---------------------------------------------------
# The evaluation report: one JSON document and its Markdown rendering.
#
# A report (``grounded_text.evaluation.suite.evaluate_encoders``) is a dict::
#
#     {"data_dir": ..., "protocols": {...},           # what was run, how
#      "contamination": {set name: ContaminationIndex.count_pairs / count},
#      "encoders": {name: {"kind": "model"|"baseline"|"hub",
#                          "sts": evaluate_sts(...),              # cosine, unsupervised
#                          "supervised_sts": {...},               # ridge, supervised
#                          "retrieval": {...}, "structure": {...},
#                          "same_image": {set name: {...}}}},
#      "plots": [png file names]}
#
# ``format_report_markdown`` turns it into tables in which every score row carries
# its protocol and, for text sets, its contamination count.


def _f(x, digits: int = 4) -> str:
    """A report cell (``grounded_text.reporting.tables.fmt``; ``n/a`` when missing)."""
    return fmt(x, digits, minus="-", missing="n/a")


def _with_ci(node: dict, value_key: tuple, ci_key: tuple | None) -> str:
    """The value at ``value_key`` (a key path into ``node``), followed by its 95 % interval
    ``[lo, hi]`` at ``ci_key`` where the node holds one."""
    ci = dig(node, ci_key) if ci_key else None
    return _f(dig(node, value_key)) + (f" [{_f(ci[0])}, {_f(ci[1])}]" if ci else "")


def _contam(report: dict, key: str) -> str:
    c = report.get("contamination", {}).get(key)
    if not c:
        return ""
    return f"{c['n_contaminated']}/{c['n_sentences']}"


def flatten_sts(sts: dict) -> dict:
    """``evaluate_sts`` report → ``{label: Pearson r}`` with labels ``"STS12/MSRvid"``,
    ``"STS12 mean"`` (unweighted subset mean), ``"STSBenchmark/test"``, ``"SICK/test"``."""
    out = {}
    for key, node in (sts or {}).items():
        if "subsets" in node:
            for sub, r in node["subsets"].items():
                out[f"{key}/{sub}"] = r["pearson"]
            out[f"{key} mean"] = node["pearson"]["mean"]
        else:
            for split, r in node.items():
                out[f"{key}/{split}"] = r["pearson"]
    return out


def _sts_rows(report: dict, names: list[str]) -> list[str]:
    """One row per STS set: Pearson r ×100 per encoder, unsupervised cosine."""
    flat = {n: flatten_sts(report["encoders"][n].get("sts")) for n in names}
    labels = list(dict.fromkeys(label for n in names for label in flat[n]))
    rows = []
    for label in labels:
        vals = [flat[n].get(label) for n in names]
        contam_key = label[: -len(" mean")] if label.endswith(" mean") else label
        rows.append(f"| {label} | cosine | {_contam(report, contam_key)} | "
                    + " | ".join(_f(None if v is None else 100 * v, 1) for v in vals) + " |")
    return rows


def format_report_markdown(report: dict, title: str = "Evaluation report") -> str:
    """Markdown: STS (cosine and supervised, with contamination), retrieval, structure, same-image."""
    names = list(report["encoders"])
    head = "| set | protocol | seen in training captions | " + " | ".join(names) + " |"
    sep = "|---|---|---:|" + "---:|" * len(names)
    lines = [f"## {title}", ""]
    if report.get("command"):
        lines += [f"Command: `{report['command']}`", ""]
    lines += [f"Data: `{report.get('data_dir')}`. Contamination = sentence occurrences found among "
              f"{report.get('contamination_against', 'the training captions')} after lowercasing, punctuation "
              "removal and whitespace normalisation.", ""]

    # STS.
    if any(report["encoders"][n].get("sts") for n in names):
        lines += ["### STS — Pearson r × 100", "", head, sep]
        lines += _sts_rows(report, names)
        for task in ("STSBenchmark", "SICK"):
            vals, model = [], "ridge"
            for n in names:
                node = (report["encoders"][n].get("supervised_sts") or {}).get(task)
                vals.append(None if not node else node["test"]["pearson"] * 100)
                model = (node or {}).get("model", model)
            if any(v is not None for v in vals):
                key = f"{task}/test"
                how = MODEL_LABELS.get(model, model).replace("|", "\\|")
                lines.append(f"| {key} | **supervised** ({how}) | {_contam(report, key)} | "
                             + " | ".join(_f(v, 1) for v in vals) + " |")
        lines.append("")

    # Same-image.
    sets = sorted({s for n in names for s in (report["encoders"][n].get("same_image") or {})})
    if sets:
        lines += ["### Same-image similarity (VETE §4.3) — Pearson r × 100 of cosine vs same-image label", "",
                  head, sep]
        for s in sets:
            vals = [((report["encoders"][n].get("same_image") or {}).get(s) or {}).get("pearson") for n in names]
            any_node = next(report["encoders"][n]["same_image"][s] for n in names
                            if s in (report["encoders"][n].get("same_image") or {}))
            proto = f"{any_node['n_per_label']}+{any_node['n_per_label']} pairs, seed {any_node['seed']}"
            lines.append(f"| {s} | {proto} | {_contam(report, s)} | "
                         + " | ".join(_f(None if v is None else 100 * v, 1) for v in vals) + " |")
        lines.append("")

    # Structure.
    structs = [n for n in names if report["encoders"][n].get("structure")]
    if structs:
        st0 = report["encoders"][structs[0]]["structure"]
        mkeys = [k for k in st0 if k.startswith("mNNO@")]
        visual = st0.get("visual", "image features")
        lines += [f"### Structure (Bordes §4.3) on {st0.get('split', 'held-out split')} "
                  f"({st0['n_images']} images, {st0['n_captions']} captions; visual = {visual})",
                  "", "| measure | " + " | ".join(structs) + " |", "|---|" + "---:|" * len(structs)]
        rows = [(k, (k,), (f"{k}_ci95",)) for k in mkeys] + [
            ("ρ_vis (Pearson, Bordes §4.3)", ("rho_vis", "pearson"), ("rho_vis", "pearson_ci95")),
            ("ρ_vis (Spearman)", ("rho_vis", "spearman"), ("rho_vis", "spearman_ci95")),
            ("C_intra", ("C_intra",), ("C_intra_ci95",)), ("C_inter", ("C_inter",), ("C_inter_ci95",)),
            ("C_intra − C_inter", ("C_gap",), None),
        ]
        for label, value_key, ci_key in rows:
            cells = [_with_ci(report["encoders"][n]["structure"], value_key, ci_key) for n in structs]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")

    # Retrieval.
    for n, r in ((n, r) for n in names for r in [report["encoders"][n].get("retrieval"),
                                                 *(report["encoders"][n].get("retrieval_coco") or {}).values()]):
        if not r:
            continue
        lines += [f"### Retrieval — {n} — {r.get('split', '')} protocol `{r['protocol']}` ({r['n_images']} images, "
                  f"{r['n_captions']} captions, {r['n_folds']} fold(s); pessimistic 1-based ranks, "
                  "R@K expected over random tie order)", "",
                  "| direction | " + " | ".join(f"R@{k}" for k in RECALL_KS) + " | medr | meanr |",
                  "|---|" + "---:|" * (len(RECALL_KS) + 2)]
        for d, label in (("caption_to_image", "caption→image"), ("image_to_caption", "image→caption")):
            m = r[d]
            lines.append(f"| {label} | " + " | ".join(f"{m[f'R@{k}']:.1f}" for k in RECALL_KS)
                         + f" | {m['medr']:.1f} | {m['meanr']:.1f} |")
        lines += [f"| rsum (0–600) | {r['rsum']:.1f} | | | | |", ""]

    # Contamination detail.
    if report.get("contamination"):
        every = report.get("contamination_all_flickr8k", {})
        lines += ["### Contamination detail", "",
                  "Seen = sentence occurrences (a pair has two) found among the Flickr8k train-split captions; "
                  "last column: among all 40,460 captions of the release.", "",
                  "| set | sentences | seen (train split) | distinct seen | pairs with a seen side "
                  "| seen (all Flickr8k) |",
                  "|---|---:|---:|---:|---:|---:|"]
        for key, c in report["contamination"].items():
            e = every.get(key)
            lines.append(f"| {key} | {c['n_sentences']} | {c['n_contaminated']} | {c['n_distinct_contaminated']} | "
                         f"{c.get('pairs_any_side', '')} | {'' if e is None else e['n_contaminated']} |")
        lines.append("")
    if report.get("plots"):
        lines += ["### Figures", ""] + [f"![{p}]({p})" for p in report["plots"]] + [""]
    transfer = {n: report["encoders"][n]["transfer"] for n in names if "transfer" in report["encoders"][n]}
    if transfer:
        lines += ["### SentEval transfer, test accuracy % (MRPC acc/F1)", "", format_comparison_markdown(transfer)]
    return "\n".join(lines)


def write_evaluation_report(report: dict, out_dir: str | Path, title: str = "Evaluation report") -> dict:
    """Writes ``report.json`` and ``report.md`` into ``out_dir`` (created).

    Returns:
      ``{"json": path, "markdown": path}``.
    """
    out_dir = Path(out_dir)
    write_report_files(report, format_report_markdown(report, title), json_path=out_dir / "report.json",
                       markdown_path=out_dir / "report.md")
    return {"json": str(out_dir / "report.json"), "markdown": str(out_dir / "report.md")}
