"""Ablation studies as config tables, every run trained by the one trainer.

Usage::

    python -m grounded_text.ablation STUDY --data-dir ../shared/data --output-dir runs/STUDY \\
        [--only RUN ...] [--epochs-scale 1.0] [--table-only]

A study (``STUDIES``) is a base config and a list of rows, each a name and the config
fields it changes (``"section.field"`` or ``"model.loss_params.key"``, the keys of
``--set``): a plan of ``grounded_text.experiments`` runs on the trainer's flags
(``RunPlan(base="flags")``). Each row is run by the experiments runner in its own process,
``python -m grounded_text.train --config OUTPUT_DIR/<run>.toml`` (output in
``OUTPUT_DIR/<run>/``, log in ``OUTPUT_DIR/<run>.log``), so the figures are what ``train``
does: its compile settings, its data pipeline, its model selection and its evaluation
(``grounded_text.evaluate``'s STS report in ``metrics.json``). A finished row of the same
resolved config is not retrained, so the command resumes; a finished row of another config
(e.g. another ``--epochs-scale``) is refused with exit status 2: remove it or choose
another ``--output-dir``. The table (``OUTPUT_DIR/<study>.md``, also printed) reads each
run's ``metrics.json``; its figure columns come from the experiments figures registry. Beside
it, ``OUTPUT_DIR/<study>.png`` charts the same figures with their 95 % intervals, the study's
first run as the baseline (skipped, with one line, without matplotlib).

Studies:
  * ``losses``: VETE-BOW (N = 128) with every loss of the package (docs/losses.md).
  * ``snapshot_ensemble``: a cyclic cosine schedule exported at its last epoch against
    the ensemble of its snapshots (Merkx & Frank §3.3; docs/losses.md).
  * ``zoo``: every preset, and VETE-BOW on every feature file (docs/models.md).
  * ``caption_gap``: the character model at n = 512, one cycle, with one difference from the
    authors' code per arm and three seeds of the baseline (docs/reproduction.md).
  * ``caption_gap_record``: the record at the paper's n = 1024, one cycle, with the causes the
    caption gap found (docs/reproduction.md).
  * ``caption_gap_on_record``: the record at n = 512, one cycle, before it took the clipping, with
    one of the authors' remaining differences per arm (docs/reproduction.md).
  * ``caption_gap_on_clipped``: the same on top of the record as it trains now, with its
    clipping (docs/reproduction.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grounded_text.papers.studies import STUDIES


def main(argv=None) -> int:
    """The CLI: trains the study's missing runs, then prints and writes its table.
    Exit status 0, or 2 with ``error: ...`` for an unknown run name, a row that does not fit,
    or a run folder that holds a finished run of another config; 130 after Ctrl-C or ``SIGINT``
    (one line: the training child was stopped and the same command continues the study)."""
    p = argparse.ArgumentParser(prog="python -m grounded_text.ablation", description=__doc__.split("\n\n")[0])
    p.add_argument("study", choices=sorted(STUDIES))
    p.add_argument("--data-dir", default=None, help="data root (default: $GROUNDED_TEXT_DATA)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--only", nargs="*", default=None, help="run names to (re)consider")
    p.add_argument("--epochs-scale", type=float, default=1.0, help="multiply every run's epochs (>= 1 epoch)")
    p.add_argument("--table-only", action="store_true", help="do not train, only tabulate")
    p.add_argument("--paired", action="store_true",
                   help="also score every finished run on STS and Flickr8k test retrieval, with 95%% intervals and "
                        "paired tests against the study's first run (OUTPUT_DIR/<study>_arms.md and .json)")
    a = p.parse_args(argv)
    study = STUDIES[a.study]
    names = [r for r, _ in study.rows]
    unknown = sorted(set(a.only or []) - set(names))
    if unknown:
        print(f"error: --only: unknown run(s) {unknown} in study {a.study!r}; its runs are {names}", file=sys.stderr)
        return 2
    rows = [r for r in study.rows if a.only is None or r[0] in a.only]
    from grounded_text.experiments import studies

    out = Path(a.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not a.table_only:
        try:
            status = studies.run_study(a.study, rows, out, studies.data_dir_of(a.data_dir), a.epochs_scale)
        except KeyboardInterrupt:  # the training child has ended (utils.children.run_child)
            print(f"interrupted: the study stopped; the same command continues it (finished runs in {str(out)!r} "
                  "are reused, the interrupted one resumes from its last checkpoint).", file=sys.stderr)
            return 130
        if status:
            return status
    print(studies.write_table(a.study, out, rows))
    if a.paired:
        print(studies.paired_report(a.study, study, out, rows, studies.data_dir_of(a.data_dir)))
    return 0


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
