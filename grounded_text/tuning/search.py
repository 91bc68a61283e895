"""One random search (VETE Algorithm 1) and an ablation (Algorithm 2) over a ``SearchSpace``,
with KerasTuner: what ``python -m grounded_text.tune`` runs once its flags are parsed.

A project records its search (``STATE_FILE``: space, overrides, seed, model) so that rerunning
the same command resumes it and another search is refused in its folder.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from grounded_text.papers.plans import parse_sets
from grounded_text.tuning.report import write_ablation_table, write_summary
from grounded_text.tuning.space import SearchSpace, SpaceError
from grounded_text.tuning.tuner import GroundedHyperModel, GroundedTuner

log = logging.getLogger("grounded_text.tune")
STATE_FILE = "grounded_tune.json"


def _has_chief() -> bool:
    """KerasTuner's distributed mode is on (``KERASTUNER_ORACLE_IP`` set)."""
    return "KERASTUNER_ORACLE_IP" in os.environ


def _is_chief() -> bool:
    """This process serves the oracle (KerasTuner's rule: ``"chief"`` in ``KERASTUNER_TUNER_ID``)."""
    return _has_chief() and "chief" in os.environ.get("KERASTUNER_TUNER_ID", "")


def check_same_search(project_dir: Path, state: dict) -> None:
    """A resumed project must be the same search (space, overrides, seed, model)."""
    path = project_dir / STATE_FILE
    if path.is_file():
        old = json.loads(path.read_text())
        # --trials may change (extend a finished search, or stop earlier); nothing else may.
        diff = sorted(k for k in set(old) | set(state) if k != "trials" and old.get(k) != state.get(k))
        if diff:
            raise SpaceError(
                f"{project_dir} holds a different search ({', '.join(diff)} differ). Use another "
                "--directory/--project-name, or the same arguments to resume."
            )
        path.write_text(json.dumps(state, indent=2))
    else:
        project_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state, indent=2))


def run_search(space: SearchSpace, *, data_dir, directory, project_name, trials: int, seed: int,
               evaluate: bool = True, verbose: int | str = 0, summarise: bool = True) -> dict | None:
    """Runs (or resumes, or joins as a worker) one random search → the summary (chief/single)."""
    project_dir = Path(directory) / project_name
    state = {"model": space.model, "space_files": space.files, "fixed": space.fixed,
             "hyperparameters": [h.__dict__ for h in space.hparams], "seed": seed, "trials": trials}
    if not _has_chief() or _is_chief():
        check_same_search(project_dir, json.loads(json.dumps(state, default=str)))
    tuner = GroundedTuner(
        GroundedHyperModel(space, evaluate=evaluate, verbose=verbose),
        data_dir,
        max_trials=trials,
        seed=seed,
        directory=str(directory),
        project_name=project_name,
        overwrite=False,
    )
    tuner.search()
    if _has_chief() and not _is_chief():
        log.info("Worker %s: the search is finished.", os.environ.get("KERASTUNER_TUNER_ID"))
        return None
    return write_summary(tuner, space) if summarise else None


def all_failed(summary: dict | None) -> bool:
    """Trials ran and none completed (every one raised)."""
    return summary is not None and summary["completed_trials"] == 0 and bool(summary["trials"])


def _value_tag(v) -> str:
    return str(v).replace("/", "_")


def run_ablation(a: argparse.Namespace, space: SearchSpace, project: str, common: dict) -> int:
    """Algorithm 2 (``--ablation PARAM``): one search per value of PARAM, then the table → exit status."""
    trials, seed = common["trials"], common["seed"]
    try:
        hparam = space.get(a.ablation)
        values = hparam.candidates()
    except SpaceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.ablation_value is not None:
        wanted = [parse_sets([f"v={v}"], error=SpaceError)["v"] for v in a.ablation_value]
        bad = [v for v in wanted if v not in values]
        if bad:
            print(f"error: --ablation-value {bad} not among {a.ablation}'s values {values}", file=sys.stderr)
            return 2
        run_values = wanted
    else:
        run_values = values
    abl_dir = Path(a.directory) / f"{project}-ablation-{a.ablation}"
    per_value = []
    for v in values:
        sub = space.with_overrides({a.ablation: v})
        name = f"{a.ablation}={_value_tag(v)}"
        if v in run_values:
            log.info("Ablation %s = %r: %d random sets (seed %d).", a.ablation, v, trials, seed)
            try:
                summ = run_search(sub, directory=abl_dir, project_name=name, **common)
            except SpaceError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
            if summ is None:  # worker
                continue
            if all_failed(summ):
                print(f"error: all {len(summ['trials'])} trial(s) of {name} failed; see {abl_dir / name}.",
                      file=sys.stderr)
                return 1
            per_value.append((v, summ))
        elif (abl_dir / name / "summary.json").is_file():
            per_value.append((v, json.loads((abl_dir / name / "summary.json").read_text())))
    if per_value:
        write_ablation_table(a.ablation, per_value, abl_dir)
        print((abl_dir / "ablation.md").read_text())
    return 0
