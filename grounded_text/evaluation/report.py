"""One report per encoder joining the STS table and the SentEval transfer table.

Used by ``python -m grounded_text.evaluate`` (``--transfer``, ``--baseline glove``);
every encoder (our hub exports, any TF Hub text module, the GloVe-mean baseline) is
scored by the same code: ``grounded_text.evaluation.sts.evaluate_sts`` (cosine,
unsupervised) and ``grounded_text.evaluation.transfer.evaluate_transfer``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from grounded_text.evaluation.retrieval import RECALL_KS
from grounded_text.evaluation.sts import evaluate_sts, format_markdown, headline_figures
from grounded_text.evaluation.transfer import (
    ClassifierConfig,
    evaluate_transfer,
    format_comparison_markdown,
    format_transfer_markdown,
)

BASELINES = ("glove", "word2vec")  # word2vec: issue 3
BASELINE_LABELS = {"glove": "GloVe-mean (6B, 50d)", "word2vec": "word2vec-mean (Flickr8k train)"}


def baseline_encoder(name: str, batch_size: int = 4096):
    """The named baseline encoder (``"glove"``: ``grounded_text.baselines.glove_mean_encoder``;
    ``"word2vec"``: ``grounded_text.baselines.word2vec_mean_encoder`` on ``$GROUNDED_TEXT_DATA``).

    Raises:
      ValueError: unknown name.
    """
    if name == "glove":
        from grounded_text.baselines.glove import glove_mean_encoder

        return glove_mean_encoder(batch_size=batch_size)
    if name == "word2vec":  # issue 3: trained on the Flickr8k train captions ($GROUNDED_TEXT_DATA)
        from grounded_text.baselines.word2vec import word2vec_mean_encoder

        return word2vec_mean_encoder()
    raise ValueError(f"Unknown baseline {name!r}; choose from {list(BASELINES)}.")


def model_report(
    label: str,
    encoder: Callable,
    *,
    sts_dir: str | Path | None = None,
    sick_dir: str | Path | None = None,
    senteval_dir: str | Path | None = None,
    tasks: Sequence[str] | None = None,
    config: ClassifierConfig = ClassifierConfig(),
    max_examples: int | None = None,
    years: Sequence[str] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """Scores one encoder.

    Args:
      label: the model's name in the report (a path or a baseline name).
      encoder: strings → float [n, N].
      sts_dir: STS root; ``None`` skips STS.
      sick_dir: folder holding ``SICK/`` for SICK-E (default ``sts_dir``, else
        ``senteval_dir/../sts``).
      senteval_dir: SentEval root; ``None`` skips transfer.
      tasks, config, max_examples: see ``evaluate_transfer``.
      years: STS years to score (default all found).

    Returns:
      ``{"model", "sts", "headline", "sts_seconds", "transfer", "transfer_config",
      "transfer_seconds"}`` (STS or transfer keys only where run). Seconds are wall time.
    """
    out: dict = {"model": label}
    if sts_dir is not None:
        t0 = time.perf_counter()
        out["sts_dir"] = str(sts_dir)
        out["sts"] = evaluate_sts(encoder, sts_dir, years=years)
        out["headline"] = headline_figures(out["sts"])
        out["sts_seconds"] = time.perf_counter() - t0
    if senteval_dir is not None:
        t0 = time.perf_counter()
        out["senteval_dir"] = str(senteval_dir)
        out["transfer_config"] = {**dataclasses.asdict(config), "max_examples": max_examples}
        out["transfer"] = evaluate_transfer(
            encoder, senteval_dir, tasks, sts_dir=sick_dir or sts_dir, config=config, max_examples=max_examples, log=log
        )
        out["transfer_seconds"] = time.perf_counter() - t0
    return out


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


# --- issue 3: the full evaluation report (suite) -------------------------------------------
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
    return "n/a" if x is None else f"{x:.{digits}f}"


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
            vals = []
            for n in names:
                node = (report["encoders"][n].get("supervised_sts") or {}).get(task)
                vals.append(None if not node else node["test"]["pearson"] * 100)
            if any(v is not None for v in vals):
                key = f"{task}/test"
                lines.append(f"| {key} | **supervised** (ridge on [u,v,\\|u−v\\|,u*v]) | {_contam(report, key)} | "
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
        lines += [f"### Structure (Bordes §4.3) on {st0.get('split', 'held-out split')} "
                  f"({st0['n_images']} images, {st0['n_captions']} captions; visual = {st0.get('visual', 'image features')})",
                  "", "| measure | " + " | ".join(structs) + " |", "|---|" + "---:|" * len(structs)]
        rows = [(k, lambda s, k=k: s[k]) for k in mkeys] + [
            ("ρ_vis (Spearman)", lambda s: s["rho_vis"]["spearman"]),
            ("ρ_vis (Pearson)", lambda s: s["rho_vis"]["pearson"]),
            ("C_intra", lambda s: s["C_intra"]), ("C_inter", lambda s: s["C_inter"]),
            ("C_intra − C_inter", lambda s: s["C_gap"]),
        ]
        for label, get in rows:
            lines.append(f"| {label} | " + " | ".join(_f(get(report["encoders"][n]["structure"])) for n in structs) + " |")
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
                  "| set | sentences | seen (train split) | distinct seen | pairs with a seen side | seen (all Flickr8k) |",
                  "|---|---:|---:|---:|---:|---:|"]
        for key, c in report["contamination"].items():
            e = every.get(key)
            lines.append(f"| {key} | {c['n_sentences']} | {c['n_contaminated']} | {c['n_distinct_contaminated']} | "
                         f"{c.get('pairs_any_side', '')} | {'' if e is None else e['n_contaminated']} |")
        lines.append("")
    if report.get("plots"):
        lines += ["### Figures", ""] + [f"![{p}]({p})" for p in report["plots"]] + [""]
    return "\n".join(lines)


def write_report(report: dict, out_dir: str | Path, title: str = "Evaluation report") -> dict:
    """Writes ``report.json`` and ``report.md`` into ``out_dir`` (created).

    Returns:
      ``{"json": path, "markdown": path}``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(report, indent=2, default=float))
    (out_dir / "report.md").write_text(format_report_markdown(report, title))
    return {"json": str(out_dir / "report.json"), "markdown": str(out_dir / "report.md")}
