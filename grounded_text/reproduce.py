"""Reproduce a paper: train its configuration(s) with the one trainer, score them with its protocol.

Usage::

    python -m grounded_text.reproduce PAPER [--budget full|cpu|smoke] --output-dir DIR \\
        [--data-dir D] [--only NAME ...] [--from-runs RUNS] [--write-docs docs/reproduction.md] [--no-progress]
    python -m grounded_text.reproduce PAPER --charts-only --write-docs docs/reproduction.md
    python -m grounded_text.reproduce PAPER --verdicts-only --write-docs docs/reproduction.md

``PAPER`` is ``vete`` (Kurach et al. 2017), ``bordes`` (Bordes et al., EMNLP 2019),
``kolluru`` (Kolluru's two-branch network), ``merkx_frank`` (Merkx & Frank 2019) or ``all``.

The plans are data (``PAPERS``, ``BUDGETS``); the work is done by the experiments layer:

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
import logging
import sys
import warnings
from pathlib import Path

from grounded_text.papers.reproduction import (
    BUDGETS,
    DEPRECATED_PAPER_KEYS,
    PAPER_NAMES,
    PAPERS,
    plan_runs,
    valid_only_names,
)
from grounded_text.reporting.tables import public_command
from grounded_text.utils.extras import check_extras
from grounded_text.utils.progress import recorded_args


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
    if not (a.charts_only or a.verdicts_only):
        # scikit-learn (supervised STS, SentEval transfer) is named before TensorFlow loads and the
        # first run trains
        check_extras([("sklearn", f"reproduce {paper} (supervised STS or SentEval transfer)") for paper in a.papers
                      if ("supervised" in PAPERS[paper].protocol.sections or PAPERS[paper].protocol.transfer)
                      and (not a.only or any(r.selected for r in plan_runs(paper, a.budget, a.only,
                                                                                training=not a.from_runs)))])
    from grounded_text.experiments import RunConflict, paper_report, reproduction

    if a.charts_only:
        print(f"wrote {reproduction.redraw_docs_charts(a.write_docs, a.papers)}")
        return 0
    if a.verdicts_only:
        print(f"wrote {reproduction.rerender_docs_verdicts(a.write_docs, a.papers)}")
        return 0
    results = {}
    for paper in a.papers:
        if a.only and not any(r.selected for r in plan_runs(paper, a.budget, a.only, training=not a.from_runs)):
            continue  # `all --only vete_bow`: the other papers have nothing to do
        try:
            results[paper] = reproduction.reproduce_paper(
                paper, a.budget, Path(a.output_dir), a.data_dir, only=a.only,
                from_runs=Path(a.from_runs) if a.from_runs else None, command=command, progress=not a.no_progress)
        except RunConflict as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(paper_report.format_paper_markdown(results[paper]) + "\n", flush=True)
        print(f"wrote {Path(a.output_dir) / paper / 'results.json'}", flush=True)
    if a.write_docs:
        print(f"wrote {reproduction.write_docs(a.write_docs, results)}")
    return 0


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
