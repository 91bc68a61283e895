"""The experiments layer under ``reproduce``, ``ablation``, ``benchmarks.paper_baselines`` and ``tune``.

* ``plans``: a run = a preset name + overrides in the one override grammar (dotted
  ``section.field`` keys, as ``train --set`` and the config TOML files), resolved to a config.
* ``runner``: the one runner and its one reuse rule (a finished run is reused only when its
  resolved config equals the plan's).
* ``scoring``: the one scoring call (``score_run`` / ``score_encoder``).
* ``comparison``, ``verdicts``, ``paper_report``: our runs beside the papers' tables, the
  verdict per figure, and the Markdown section of the reproduction report.
* ``charts``: the PNG charts of those reports (forest plot, ablation chart, the benchmark's
  model-choice chart); matplotlib, an optional extra, loads with it.
* ``shipped``: the recipes of the trained models shipped in the package.
* ``studies``, ``reproduction``: the runners of the ablation studies and of the papers'
  reproductions (the studies and the plans are data in ``grounded_text.papers``).

The figures registry and the number formatter, table builder and report writer are in
``grounded_text.reporting`` (re-exported here), below both this layer and the evaluation.
"""

from grounded_text.config.evaluation import EvalSettings, Protocol
from grounded_text.experiments.runner import Decision, RunConflict, decide, ensure_run, finished, run_config
from grounded_text.experiments.scoring import TestData, score_encoder, score_run
from grounded_text.papers.plans import RunPlan, merge_overrides, nest, parse_sets, resolve
from grounded_text.reporting.figures import FAMILIES, FIGURES, Figure, digits_for, fmt_figure, read_families
from grounded_text.reporting.tables import fmt, markdown_table, update_sections, write_report

__all__ = ["FAMILIES", "FIGURES", "Decision", "EvalSettings", "Figure", "Protocol", "RunConflict", "RunPlan",
           "TestData", "decide", "digits_for", "ensure_run", "finished", "fmt", "fmt_figure", "markdown_table",
           "merge_overrides", "nest", "parse_sets", "read_families", "resolve", "run_config", "score_encoder",
           "score_run", "update_sections", "write_report"]
