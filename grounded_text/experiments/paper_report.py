"""The Markdown section of the reproduction report for one paper: what was run and on what,
the paper's figures beside ours with both intervals, the published baselines of the same table,
the paired tests, the verdict per figure, the ablations and the training curves. It formats the
results that ``grounded_text.experiments.comparison`` computes. No TensorFlow.
"""

from __future__ import annotations

import re

from grounded_text.experiments.comparison import (
    CURVE_KEYS,
    record_note,
    scale_digits,
)
from grounded_text.experiments.verdicts import r23_fallback, verdict_rows
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
    """The comparison rows with both figures, as ``grounded_text.reporting.charts.forest_plot``
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
    from grounded_text.evaluation.stats import format_p

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


def verdict_lines(results: dict) -> list[str]:
    """The verdict's bullets, then one line per judged figure: ours, the paper's, n, the test,
    the r₂₃ it assumed (per subset) and p."""
    from grounded_text.evaluation.stats import format_p

    lines = results.get("verdict") or []
    if not lines:
        return []
    out = ["", "Verdict:", ""] + [f"* {line}" for line in lines]
    rows = verdict_rows(results)
    if rows:
        several = len({r["space"] for r in rows}) > 1
        body = [[r["measure"] + (f" ({r['space']})" if several else ""), fmt(r["ours"], scale_digits(r["scale"])),
                 fmt(r["paper"], scale_digits(r["scale"])), f"{r['n']:,}" if r["n"] else "–", r["test"],
                 "–" if r["r23"] is None else f"{r['r23']:.3f}: {r['r23_how']}", format_p(r["p"]),
                 r["verdict"] + (f" ({r['why']})" if r.get("why") else "")] for r in rows]
        out += ["", "Verdict per figure (Williams' r₂₃: the correlation assumed between our and the paper's "
                    "similarity scores on that subset; p two-sided):", ""]
        out += markdown_table(["measure", "ours", "paper", "n", "test", "assumed r₂₃", "p", "verdict"], body,
                              ["---", "---:", "---:", "---:", "---", "---", "---:", "---"])
        if any(r["r23_how"].startswith("fallback") for r in rows):
            fallback = results.get("r23_fallback") or r23_fallback(results.get("model_correlations") or {})
            out += ["", f"Fallback r₂₃ (Pearson; Spearman rows use the Spearman analogue): {fallback['source']}."]
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
set to the lowest between two of our own models on that subset, and printed), R@K, medr and
accuracies by whether the paper's value is inside our 95 % interval (R@K and medr: a bootstrap
over images); a figure that does not agree is above or below the paper, and the verdict says
whether that is better or worse (medr: lower is better). Above each section's tables a forest
plot draws the same figures, ours and the paper's, each with its 95 % interval (`--charts-only
--write-docs FILE` redraws the plots from the report's own tables). Budgets:
`full` = the records as the papers train them, `cpu` = what fits 2 CPU cores, `cycle` = 4 epochs
of every run (one cosine cycle; the character model at the paper's n = 1024, with n = 512
beside it), `smoke` = a 64-image plumbing check (its figures mean nothing). Each section names
its own budget. `--from-runs DIR` scores runs trained
separately with `python -m grounded_text.train`. A paper without a section below has not been
put in this report yet.
"""
