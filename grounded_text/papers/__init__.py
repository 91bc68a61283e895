"""What the four papers say, as data: the preset records (one per model of a paper, with its
ablations and baselines), the papers' published figures, how a config is resolved from a
record, and the reproduction plans that set our runs beside the papers' tables. Imports no
TensorFlow.

* ``presets``: the preset records (``PRESETS``, ``get_preset``);
* ``resolve``: filling a config's unset fields from its record;
* ``published``: every figure of the papers' tables, with its table, row and interval;
* ``reproduction``: per paper, the runs and the rows that compare ours with the paper.

Adding a model or a paper: see ``docs/contributing_models.md``.
"""
