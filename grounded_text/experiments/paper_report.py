"""The Markdown section of the reproduction report for one paper: what was run and on what,
the paper's figures beside ours with both intervals, the published baselines of the same table,
the paired tests, the verdict per figure, the ablations and the training curves. It formats the
results that ``grounded_text.experiments.comparison`` computes. No TensorFlow.
"""

from __future__ import annotations

import re

from scipy.optimize import brentq

from grounded_text.evaluation.stats import format_p, williams_test
from grounded_text.experiments import verdicts
from grounded_text.experiments.comparison import (
    CURVE_KEYS,
    record_note,
    scale_digits,
)
from grounded_text.experiments.verdicts import (
    _VERDICT_ORDER,
    CONSERVATIVE_R23,
    r23_fallback,
    verdict_rows,
    williams_verdict,
)
from grounded_text.reporting.figures import fmt_figure
from grounded_text.reporting.tables import fmt, markdown_table


def _scored_on(results: dict) -> str:
    ev = results["evaluation_settings"]
    scored = (f"Flickr8k test split, first {ev['test_images']} images (retrieval protocol `all`)"
              if ev["test_images"] else "Flickr8k test split, 1,000 images (retrieval protocol `flickr8k_1k`)")
    n = results["protocol"].get("same_image_n") or ev["same_image_n"]  # the protocol's N, where it sets one
    scored += f"; same-image N = {n:,} + {n:,} pairs" if "same_image" in results["protocol"]["sections"] else ""
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
    """The headline figures table: paper, ours, ours − paper, the source of the paper's figure."""
    main = next((r["run"] for r in results["figures"] if r["run"]), None)
    rows = [(r["measure"], fmt_figure(r["paper"], r["measure"]) if r["paper"] is not None else "not in the paper",
             fmt_figure(r["ours"], r["measure"]), fmt_figure(r["difference"], r["measure"], signed=True),
             r["source"] or "–") for r in results["figures"]]
    return [f"Headline figures (ours: run `{main}`; “–” = not measured):", ""] + markdown_table(
        ["measure", "paper", "ours", "ours − paper", "source of the paper's figure"], rows,
        ["---", "---:", "---:", "---:", "---"])


def _ci(ci, digits: int) -> str:
    return "—" if not ci else f"[{fmt(ci[0], digits)}, {fmt(ci[1], digits)}]"


COMPARISON_HEADER = ["paper row", "measure", "paper", "paper 95 % CI", "ours", "our 95 % CI", "ours − paper",
                     "our run", "compared on"]
COMPARISON_INTRO = "The paper's figures beside ours"
FOREST_ALT = "Forest plot: the paper's figures and ours, each with its 95 % interval"


def forest_markdown(link: str) -> str:
    """The image line of a section's forest plot (``link``: relative to the Markdown file)."""
    return f"![{FOREST_ALT}]({link})"


def comparison_lines(results: dict, forest: str | None = None) -> list[str]:
    """One table per paper table: the paper's figure and 95 % interval, ours and ours, the
    difference (same test set only) and what ours is measured on; ``forest``: the link of the
    same rows' forest plot, shown above them."""
    rows = results.get("comparison") or []
    if not rows:
        return []
    lines = [forest_markdown(forest), ""] if forest else []
    lines += [f"{COMPARISON_INTRO} (on the paper's scale; 95 % intervals: the paper's as printed, "
             "ours from the evaluation report: Fisher z for correlations, a bootstrap over images for "
             "caption→image R@K and medr (an image's captions are drawn together), Wilson over the image queries "
             "for image→caption R@K, Wilson over the examples for SentEval accuracies; “—” = no interval "
             "printed / none computed; ours − paper only on the same test set):", ""]
    several = len(results["protocol"].get("spaces") or []) > 1
    for table in dict.fromkeys(r["table"] for r in rows):
        trs = [r for r in rows if r["table"] == table]
        lines += [f"{table} ({trs[0]['scale']}; paper: trained on {trs[0]['training_data']}, features "
                  f"{trs[0]['image_features']}):", ""]
        body = []
        for r in trs:
            d = scale_digits(r["scale"])
            body.append([r["row"] or "(unlabelled row)", r["measure"], fmt(r["paper"], d), _ci(r["paper_ci"], d),
                         fmt(r["ours"], d), _ci(r["ours_ci"], d), fmt(r["difference"], d, signed=True),
                         (f"`{r['run']}`" + (f" ({r['space']})" if several else "")) if r["run"] else "–",
                         r["compared"]])
        lines += markdown_table(COMPARISON_HEADER, body,
                                ["---", "---", "---:", "---:", "---:", "---:", "---:", "---", "---"]) + [""]
    return lines


def _plain(text: str) -> str:
    """A paper's row label without its TeX (``$+{\\bf P}_a$`` → ``+P_a``), for a chart."""
    return re.sub(r"\\(?:mathbf|mathrm|bf|rm)\s*|[${}]", "", text).strip()


def _short_rows(rows: list[str]) -> dict[str, str]:
    """Each of a table's row labels without the words that all of them begin or end with
    ("Our model with VGG19 image encoder and K = 1 hard negative" → "VGG19 image encoder and
    K = 1"): what tells them apart, short enough for a chart's axis."""
    words = [r.split() for r in rows]
    head = tail = 0
    while all(len(w) > head + tail + 1 for w in words) and len({w[head] for w in words}) == 1:
        head += 1
    while all(len(w) > head + tail + 1 for w in words) and len({w[-1 - tail] for w in words}) == 1:
        tail += 1
    return {r: " ".join(w[head:len(w) - tail]) for r, w in zip(rows, words)}


def forest_rows(comparison: list[dict], *, spaces: bool = False) -> list[dict]:
    """The comparison rows with both figures, as ``grounded_text.experiments.charts.forest_plot``
    rows: one group per paper table and unit (a median rank is not on its table's % scale);
    a label ends in ``≈`` where ours is the nearest measure, not on the paper's test set;
    ``spaces``: name the space of each row (a protocol that scores several)."""
    out = []
    drawn = [r for r in comparison if r.get("paper") is not None and r.get("ours") is not None]
    short = {}
    for table in dict.fromkeys(r["table"] for r in drawn):
        # The paper's row is named only where its table has several (systems, ablations).
        rows = list(dict.fromkeys(_plain(r.get("row") or "") for r in drawn if r["table"] == table))
        short[table] = _short_rows(rows) if len(rows) > 1 else {}
    for r in drawn:
        measure, row = r["measure"], short[r["table"]].get(_plain(r.get("row") or ""), "")
        label = measure + (f" ({r['space']})" if spaces and r.get("space") else "")
        label += (" ≈" if str(r.get("compared", "")).startswith("nearest") else "")
        label += f" — {row}" if row and row not in measure else ""
        unit = "median rank" if measure.endswith("medr") else r["scale"]
        out.append({"label": label, "group": f"{r['table']} ({unit})",
                    "ours": (r["ours"], *(r.get("ours_ci") or (None, None))),
                    "paper": (r["paper"], *(r.get("paper_ci") or (None, None)))})
    return out


_TABLE_HEAD = re.compile(r"^(?P<table>.+?) \((?P<scale>.+?); paper: trained on ")
_RUN_CELL = re.compile(r"^`(?P<run>[^`]+)`(?: \((?P<space>[^)]+)\))?$")
_CI_CELL = re.compile(r"^\[(?P<lo>[^,]+), (?P<hi>[^\]]+)\]$")


def _cell_number(text: str) -> float | None:
    text = text.strip()
    return None if text in ("", "–", "—") else float(text.replace("−", "-").replace(",", ""))


def _cell_ci(text: str) -> list | None:
    m = _CI_CELL.match(text.strip())
    return None if m is None else [_cell_number(m["lo"]), _cell_number(m["hi"])]


def comparison_from_markdown(section: str) -> list[dict]:
    """The comparison rows of a section that ``comparison_lines`` wrote, read back from its
    tables: ``table``, ``scale``, ``row``, ``measure``, ``paper``, ``paper_ci``, ``ours``,
    ``ours_ci``, ``run``, ``space``, ``compared`` (figures as printed, so rounded). For
    redrawing a report's charts from the report alone (``reproduce --charts-only``)."""
    rows, table, scale, inside = [], None, None, False
    header = markdown_table(COMPARISON_HEADER, [])[0]
    for line in section.splitlines():
        head = _TABLE_HEAD.match(line)
        if head:
            table, scale = head["table"], head["scale"]
        elif line.strip() == header:
            inside = True
        elif inside and line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if len(cells) != len(COMPARISON_HEADER):
                raise ValueError(f"comparison table row of {len(cells)} cells, not {len(COMPARISON_HEADER)}: {line}")
            run = _RUN_CELL.match(cells[7])
            rows.append({"table": table, "scale": scale, "row": "" if cells[0] == "(unlabelled row)" else cells[0],
                         "measure": cells[1], "paper": _cell_number(cells[2]), "paper_ci": _cell_ci(cells[3]),
                         "ours": _cell_number(cells[4]), "ours_ci": _cell_ci(cells[5]),
                         "run": run["run"] if run else None, "space": run["space"] if run else None,
                         "compared": cells[8]})
        elif not line.startswith("|---"):
            inside = False
    return rows


def with_forest_link(section: str, link: str | None) -> str:
    """``section`` with its forest plot's image line (``link``; None: none), where
    ``comparison_lines`` puts it: above the comparison tables. A section without them is
    returned without an image line."""
    text = re.sub(r"(?m)^!\[" + re.escape(FOREST_ALT) + r"\]\([^)]*\)\n\n", "", section)
    i = text.find("\n" + COMPARISON_INTRO)
    if link is None or i < 0:
        return text
    return text[: i + 1] + forest_markdown(link) + "\n\n" + text[i + 1:]


def baseline_lines(results: dict) -> list[str]:
    lines = []
    for t in results.get("baselines") or []:
        lines += [f"{t['table']} as the paper prints it, every system of it, with ours added where measured on the "
                  "same test set (“–”: not in the paper, or ours not measured on that test set):", ""]
        lines += markdown_table(t["header"], t["rows"], ["---"] + ["---:"] * (len(t["header"]) - 1)) + [""]
    return lines


def derived_lines(results: dict) -> list[str]:
    rows = results.get("derived_means") or []
    if not rows:
        return []
    body = [[r["measure"], fmt(r["paper"], 1), fmt(r["ours"], 1), "—", fmt(r["difference"], 1, signed=True)]
            for r in rows]
    return ["Year means (Pearson r × 100): the paper prints none, so its figure here is the unweighted mean of its "
            "printed subset figures, and ours the unweighted mean of our subset figures. No interval (“—”): the "
            "subsets differ in size and difficulty, so neither a bootstrap over subsets nor a pooled Fisher z "
            "would be a valid 95 % interval for this mean.", ""] + markdown_table(
        ["measure", "paper (derived)", "ours", "our 95 % CI", "ours − paper"], body,
        ["---", "---:", "---:", "---:", "---:"]) + [""]


def paired_lines(results: dict) -> list[str]:
    """The paired tests: Williams' test for STS correlations, paired bootstrap for R@K."""
    lines = []
    for comp in results.get("paired_tests") or []:
        body = []
        for label, t in comp["tests"].items():
            is_r = " R@" not in label
            test = ("Williams (Steiger's T₂)" if is_r else "paired bootstrap (1,000)"
                    + (", over images" if t.get("unit") == "images" else ""))
            body.append([label, fmt(t["a"], 3 if is_r else 1), fmt(t["b"], 3 if is_r else 1), f"{t['n']:,}",
                         format_p(t["p"]), test])
        lines += ["", f"Paired test, {comp['comparison']} (`{comp['a']}` vs `{comp['b']}`, the same pairs / "
                      "queries):", ""]
        lines += markdown_table(["measure", comp["a"], comp["b"], "n", "p (two-sided)", "test"], body,
                                ["---", "---:", "---:", "---:", "---:", "---"])
    return lines


VERDICT_TABLE_INTRO = ("Verdict per figure (Williams' r₂₃: the correlation assumed between our and the paper's "
                       "similarity scores on that subset, first as measured between two of our models, then at "
                       "the conservative r₂₃ = {r23}; p two-sided):")
VERDICT_HEADER = ["measure", "ours", "paper", "n", "test", "r₂₃ from our models", "p", "p at r₂₃ = {r23}", "verdict"]


def verdict_table_lines(rows: list[dict], fallback_source: str | None = None) -> list[str]:
    """The verdict per figure (``verdicts.verdict_rows``' rows, or rows read back from a report):
    ours, the paper's, n, the test, the measured r₂₃ and its p, the p at the conservative r₂₃,
    the verdict; ``fallback_source``: where a fallback r₂₃ came from, printed under the table."""
    several = len({r.get("space") for r in rows}) > 1
    body = [[r["measure"] + (f" ({r['space']})" if several and r.get("space") else ""),
             fmt(r["ours"], scale_digits(r["scale"])), fmt(r["paper"], scale_digits(r["scale"])),
             f"{r['n']:,}" if r["n"] else "–", r["test"],
             "–" if r["r23"] is None else f"{r['r23']:.3f}: {r['r23_how']}", format_p(r["p"]),
             ("–" if r.get("p_conservative") is None
              else format_p(r["p_conservative"]) + (f" (r₂₃ = {r['r23_conservative']:.3f})"
                                                    if abs(r["r23_conservative"] - CONSERVATIVE_R23) > 5e-4 else "")),
             r["verdict"] + (f" ({r['why']})" if r.get("why") else "")] for r in rows]
    head = [h.format(r23=CONSERVATIVE_R23) for h in VERDICT_HEADER]
    out = ["", VERDICT_TABLE_INTRO.format(r23=CONSERVATIVE_R23), ""]
    out += markdown_table(head, body, ["---", "---:", "---:", "---:", "---", "---", "---:", "---:", "---"])
    if fallback_source and any(r["r23_how"].startswith("fallback") for r in rows):
        out += ["", f"Fallback r₂₃ (Pearson; Spearman rows use the Spearman analogue): {fallback_source}."]
    return out


def verdict_lines(results: dict) -> list[str]:
    """The verdict's bullets, then one line per judged figure: ours, the paper's, n, the test,
    the r₂₃ it assumed (per subset, and the conservative one) and both p."""
    lines = results.get("verdict") or []
    if not lines:
        return []
    out = ["", "Verdict:", ""] + [f"* {line}" for line in lines]
    rows = verdict_rows(results)
    if rows:
        fallback = results.get("r23_fallback") or r23_fallback(results.get("model_correlations") or {})
        out += verdict_table_lines(rows, fallback["source"])
    return out


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


def curve_lines(results: dict) -> list[str]:
    """Per run, the validation figures logged at each epoch's end (the training curve)."""
    lines = []
    for name, node in results["runs"].items():
        curve = (node.get("training") or {}).get("curve") or {}
        if node.get("status") != "ok" or not curve:
            continue
        epochs = max(len(v) for v in curve.values())
        body = [[str(e + 1)] + [fmt(v[e], 1 if k == "val_rsum" else 3) if e < len(v) else "–"
                                for k, v in curve.items()] for e in range(epochs)]
        lines += ["", f"Per epoch, run `{name}` (logged at each epoch's end; the selection reads "
                      f"{node['training']['selection']}):", ""]
        lines += markdown_table(["epoch"] + [CURVE_KEYS[k] for k in curve], body, ["---:"] * (len(curve) + 1))
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


def format_paper_markdown(results: dict, forest: str | None = None) -> str:
    """The paper's section: setup, the paper's tables beside ours (with 95 % intervals; above
    them the image ``forest``, a link relative to the Markdown file, when given), derived
    year means, headline figures, ablations, paired tests, training curves, the verdict, gaps, notes."""
    lines = (setup_lines(results) + comparison_lines(results, forest) + baseline_lines(results)
             + derived_lines(results)
             + figure_lines(results)
             + ablation_lines(results) + paired_lines(results) + curve_lines(results) + verdict_lines(results)
             + gap_lines(results))
    for note in results.get("notes", []):
        lines += ["", note]
    return "\n".join(lines)


DOCS_HEADER = """# Reproducing the papers

Written by `python -m grounded_text.reproduce PAPER --budget BUDGET --output-dir DIR --write-docs
docs/reproduction.md` (one section per paper, replaced when that paper is run again). Each run is a
preset record (`grounded_text.papers.presets`) trained by `grounded_text.training.trainer.train` and scored by the
package's evaluation code (`grounded_text.evaluation`). Each section sets the paper's figures
(`grounded_text.papers.published`: every cell of the papers' tables, with its table, row, 95 %
interval where printed, training data and image features) beside ours with its 95 % interval and
the difference, wherever the test set is the same; where the paper measured on data we lack, its
figure stands beside our nearest measure, labelled as such and not differenced. Paired tests
(Williams' test for STS correlations, a paired bootstrap for R@K, over images for caption→image
queries) compare encoders scored on the same pairs. A verdict per paper judges each figure of ours
on the paper's own test set: an STS correlation by Williams' test of ours against the paper's r on
the same pairs (the correlation between our and the paper's similarity scores, which nobody has,
set to the lowest between two of our own models on that subset, and printed), and again at the
conservative r₂₃ = 0.7 (the paper's model shares neither our code, data order, features nor
seed, so it is surely less correlated with ours, and a high r₂₃ makes the test more powerful in
both directions): such a figure is above or below the paper only when both tests say so, and
"not distinguishable" when only one does; R@K, medr and accuracies by whether the paper's value
is inside our 95 % interval (R@K and medr: a bootstrap over images); a figure that does not
agree is above or below the paper, and the verdict says whether that is better or worse (medr:
lower is better). Above each section's tables a forest plot draws the same figures, ours and
the paper's, each with its 95 % interval (`--charts-only --write-docs FILE` redraws the plots
from the report's own tables; `--verdicts-only --write-docs FILE` renders the verdicts again
from them). Budgets:
`full` = the records as the papers train them, `cpu` = what fits 2 CPU cores, `cycle` = 4 epochs
of every run (one cosine cycle; the character model at the paper's n = 1024, with n = 512
beside it), `smoke` = a 64-image plumbing check (its figures mean nothing). Each section names
its own budget. `--from-runs DIR` scores runs trained
separately with `python -m grounded_text.train`. A paper without a section below has not been
put in this report yet.
"""


_VERDICT_CELL = re.compile(r"^(?P<verdict>.+?)(?: \((?P<why>[^()]*(?:\([^()]*\)[^()]*)*)\))?$")


def _verdict_cell(text: str) -> tuple[str, str]:
    """``(verdict, why)`` of a printed verdict cell ("not judged (no interval of ours)")."""
    for v in sorted(_VERDICT_ORDER, key=len, reverse=True):
        if text == v:
            return v, ""
        if text.startswith(v + " (") and text.endswith(")"):
            return v, text[len(v) + 2:-1]
    return text, ""


def _table_rows(lines: list[str], start: int) -> tuple[list[dict], int]:
    """The Markdown table whose header is ``lines[start]``, as dicts by header cell; the index
    after it."""
    head = [c.strip() for c in lines[start].strip().strip("|").split(" | ")]
    rows, i = [], start + 2
    while i < len(lines) and lines[i].startswith("|"):
        rows.append(dict(zip(head, (c.strip() for c in lines[i].strip().strip("|").split(" | ")))))
        i += 1
    return rows, i


def _unrounded(ours: float, paper: float, n: int | None, r23: float, p_cell: str, step: float,
               factor: float) -> tuple[float, float]:
    """``(ours, r23)`` to more digits than printed: the values within the printed digits'
    rounding (``ours`` ± ``step`` / 2, ``r23`` ± 0.0005) at which Williams' test gives the
    printed p (``p_cell``); a p printed as "< 0.001", or no such values, leaves both as printed.
    At r₂₃ near 1 the test is sensitive enough that the printed digit alone moves p (MSRvid:
    0.38 from the unrounded r, 0.32 from the printed one)."""

    lo, hi = ours - step / 2, ours + step / 2
    if not n or not p_cell or p_cell.startswith(("<", "–")) or lo <= paper <= hi:
        return ours, r23
    target = float(p_cell)
    for r in (r23, r23 - 5e-4, r23 + 5e-4):
        def gap(x, r=r):
            return williams_test(x / factor, paper / factor, r, int(n))["p_value"] - target
        try:
            if gap(lo) * gap(hi) < 0:
                return float(brentq(gap, lo, hi)), r
        except ValueError:  # r₂₃ not compatible with a value in the interval
            continue
    return ours, r23


def verdict_rows_from_markdown(table: list[dict]) -> list[dict]:
    """The verdict table of a section (either layout: one r₂₃, or the measured and the
    conservative one) judged again by ``verdicts.williams_verdict`` from the figures as printed
    (the paper's r and r₂₃ as printed, ours refined by ``_unrounded``); a figure judged by our
    interval keeps its printed verdict (no interval is printed in this table)."""
    out = []
    for cells in table:
        r23_cell = cells.get("r₂₃ from our models", cells.get("assumed r₂₃", "–"))
        digits = len(cells["ours"].partition(".")[2])
        ours, paper = _cell_number(cells["ours"]), _cell_number(cells["paper"])
        n = None if cells["n"] in ("–", "") else int(cells["n"].replace(",", ""))
        scale = "× 100" if digits == 1 else "r"
        row = {"measure": cells["measure"], "space": None, "ours": ours, "paper": paper, "n": n, "scale": scale}
        if cells["test"] == "Williams' test" and r23_cell != "–":
            value, _, how = r23_cell.partition(": ")
            how = re.sub(r"; capped at [0-9.]+, the largest compatible with the two r$", "", how)
            factor = 100.0 if abs(ours) > 1 or abs(paper) > 1 else 1.0
            ours, r23 = _unrounded(ours, paper, n, float(value), cells["p"], 10.0 ** -digits, factor)
            row.update(williams_verdict(ours / factor, paper / factor, n, r23, how))
            row["ours"] = round(ours, digits)
        else:
            verdict, why = _verdict_cell(cells["verdict"])
            row.update(test=cells["test"], r23=None, r23_how="", p=None, r23_conservative=None, p_conservative=None,
                       verdict=verdict, why=why)
        out.append(row)
    return out


def verdict_table(section: str) -> list[dict]:
    """The rows of a section's verdict-per-figure table, as dicts by its header cells (``[]``
    where it has none)."""
    lines = section.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("Verdict per figure") and i + 2 < len(lines):
            return _table_rows(lines, i + 2)[0]
    return []


def _section_inputs(lines: list[str]) -> dict:
    """What ``verdicts._differences`` reads, from a section's own tables: the budget, the
    data differences, our data and features, and the paper's training data and features of
    each comparison table with a figure on the same test set."""
    out: dict = {"data_differences": [], "comparison": []}
    heads: dict = {}
    for i, line in enumerate(lines):
        m = re.match(r"^\| budget \| `(?P<budget>[^`]+)`: (?P<desc>.*) \|$", line)
        if m:
            out.update(budget=m["budget"], budget_description=m["desc"])
        if line == "| aspect | paper | ours |":
            rows, _ = _table_rows(lines, i)
            out["data_differences"] = [{"aspect": r["aspect"], "paper": r["paper"], "ours": r["ours"]} for r in rows]
        head = _TABLE_HEAD.match(line)
        if head:
            rest = line[head.end():].rstrip()
            rest = rest[:-2] if rest.endswith("):") else rest
            data, _, features = rest.rpartition(", features ")
            heads[head["table"]] = (data, features)
    # An aspect's "ours" can add to the data set's name ("…, 6,000 images; no textual loss"): the
    # training data compared with the paper's is the name alone.
    aspects = {d["aspect"]: d["ours"].split("; ")[0] for d in out["data_differences"]}
    out["ours_data"], out["ours_features"] = aspects.get("training data", ""), aspects.get("image features", "")
    rows = comparison_from_markdown("\n".join(lines))
    for r in rows:
        data, features = heads.get(r["table"], ("", ""))
        same = str(r["compared"]).startswith("same test set")
        out["comparison"].append({**r, "training_data": data, "image_features": features,
                                  "difference": 0.0 if same and r["ours"] is not None else None})
    return out


RENDERED_AGAIN = ("(Verdicts rendered again from this section's own tables: the paper's r as printed; r₂₃ and our r "
                  "to the printed digits, our r refined within its printed digit's rounding (and r₂₃ within its own) "
                  "to the value at which the measured r₂₃'s test gives the p printed before, where one does.)")


def rerender_verdicts(section: str, paper=None) -> str:
    """``section`` (as ``format_paper_markdown`` wrote it) with its data-differences table and
    its verdict (bullets, the table per figure) rendered again by the current rules, from the
    section's own tables: no results file, no scoring. ``paper``: its ``Paper`` plan, whose
    ``data_differences`` give the aspects (the section's own values fill their placeholders)."""
    lines = section.split("\n")
    if paper is not None and "| aspect | paper | ours |" in lines:
        i = lines.index("| aspect | paper | ours |")
        old, end = _table_rows(lines, i)
        printed = {r["aspect"]: r["ours"] for r in old}
        body = [(a, p, printed.get(a, o) if "{" in o else o) for a, p, o in paper.data_differences]
        lines[i:end] = markdown_table(["aspect", "paper", "ours"], body)
    if "Verdict:" not in lines:
        return "\n".join(lines)
    start = lines.index("Verdict:")
    i = start + 2
    bullets = []
    while i < len(lines) and lines[i].startswith("* "):
        bullets.append(lines[i][2:])
        i += 1
    end, rows, fallback = i, [], None
    if i + 1 < len(lines) and lines[i + 1].startswith("Verdict per figure"):
        table, end = _table_rows(lines, i + 3)
        rows = verdict_rows_from_markdown(table)
        if end + 1 < len(lines) and lines[end + 1].startswith("Fallback r₂₃"):
            fallback = lines[end + 1].partition(": ")[2].rstrip(".")
            end += 2
        if end + 1 < len(lines) and lines[end + 1].startswith(RENDERED_AGAIN[:40]):
            end += 2
    inputs = _section_inputs(lines[:start])
    first = verdicts.summary_line(rows) if rows else bullets[0]
    every = [r for r in inputs["comparison"] if r["ours"] is not None]
    diffs = verdicts._differences(inputs, [r for r in every if r["difference"] is not None] or every)
    new = ["Verdict:", "", f"* {first}"]
    if diffs:
        new.append("* Documented differences that may account for the gaps: " + "; ".join(diffs) + ".")
    if rows:
        new += verdict_table_lines(rows, fallback)
        new += ["", RENDERED_AGAIN]
    return "\n".join(lines[:start] + new + lines[end:])
