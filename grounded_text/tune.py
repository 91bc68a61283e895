"""Hyperparameter search and ablation (VETE Algorithms 1 and 2) with KerasTuner.

Usage::

    python -m grounded_text.tune --model vete_bow --data-dir ../shared/data \\
        --trials 100 --directory runs/tune [--space vete] [--set train.epochs=5 ...]
    python -m grounded_text.tune ... --ablation embedding_dim [--ablation-value 128]

Algorithm 1 (Kurach et al. 2017, "Better Text Understanding Through Image-To-Text
Transfer", arXiv:1705.08386): ``--trials`` random hyperparameter sets from the
protocol file (``tuner/<space>.toml``), each trained by ``grounded_text.train`` and
scored on the STS 2016 average (avg2016, mean Pearson r over the STS16 subsets, at
the best epoch); the best set is reported on every STS folder present.

Algorithm 2 (``--ablation PARAM``): the same seeded random sets, with PARAM fixed
at each of its values (one KerasTuner project per value, under
``DIR/<project>-ablation-PARAM/PARAM=<value>``), then the table of the best avg2016
and its test figures per value (as VETE Tables 3–4).

Rerunning the same command resumes (KerasTuner ``overwrite=False``): finished trials
are kept, an interrupted trial is run again. With ``KERASTUNER_TUNER_ID``,
``KERASTUNER_ORACLE_IP`` and ``KERASTUNER_ORACLE_PORT`` set, processes share one
search (chief: ``KERASTUNER_TUNER_ID=chief``; workers: ``tuner0``, ``tuner1``, ...);
see ``docs/tuning.md``.

Writes into ``DIR/<project>/``: KerasTuner's state (``oracle.json``, ``trial_*/``,
each with ``run/`` = the trainer's output incl. ``run/export``), ``summary.json``,
``summary.md`` and ``best/`` (``best.json`` and a copy of the best hub ``export/``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

# Reading a space file needs no TensorFlow; the tuner and its reports (KerasTuner, Keras)
# are imported when a search starts, so that --help and bad flags answer at once.
from grounded_text.papers.plans import parse_sets
from grounded_text.tuning.space import SearchSpace, SpaceError, load_space, tuner_dir

log = logging.getLogger("grounded_text.tune")
STATE_FILE = "grounded_tune.json"


def _has_chief() -> bool:
    """KerasTuner's distributed mode is on (``KERASTUNER_ORACLE_IP`` set)."""
    return "KERASTUNER_ORACLE_IP" in os.environ


def _is_chief() -> bool:
    """This process serves the oracle (KerasTuner's rule: ``"chief"`` in ``KERASTUNER_TUNER_ID``)."""
    return _has_chief() and "chief" in os.environ.get("KERASTUNER_TUNER_ID", "")


def _check_same_search(project_dir: Path, state: dict) -> None:
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
    from grounded_text.tuning.report import write_summary
    from grounded_text.tuning.tuner import GroundedHyperModel, GroundedTuner

    project_dir = Path(directory) / project_name
    state = {"model": space.model, "space_files": space.files, "fixed": space.fixed,
             "hyperparameters": [h.__dict__ for h in space.hparams], "seed": seed, "trials": trials}
    if not _has_chief() or _is_chief():
        _check_same_search(project_dir, json.loads(json.dumps(state, default=str)))
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


def _positive_int(s: str) -> int:
    value = int(s)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _all_failed(summary: dict | None) -> bool:
    """Trials ran and none completed (every one raised)."""
    return summary is not None and summary["completed_trials"] == 0 and bool(summary["trials"])


def _value_tag(v) -> str:
    return str(v).replace("/", "_")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m grounded_text.tune", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=f"Protocol files are looked up in {tuner_dir()} "
                                       "(or $GROUNDED_TEXT_TUNER_DIR).")
    p.add_argument("--model", default="vete_bow", help="model family (a [models.NAME] table of the space)")
    p.add_argument("--space", default="vete", help="protocol name in tuner/ or a path to a .toml file")
    p.add_argument("--data-dir", default=None, help="data root (default: $GROUNDED_TEXT_DATA)")
    p.add_argument("--directory", default=None,
                   help="KerasTuner directory (projects live under it); required unless --show-space")
    p.add_argument("--project-name", default=None, help="default: <model>-<space>")
    p.add_argument("--trials", type=_positive_int, default=None, help="random sets (default: the protocol's)")
    p.add_argument("--seed", type=int, default=None, help="random-search seed (default: the protocol's)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="fix a config field or hyperparameter, e.g. train.epochs=1, data.max_train_images=200")
    p.add_argument("--ablation", default=None, metavar="PARAM", help="Algorithm 2: ablate this hyperparameter")
    p.add_argument("--ablation-value", action="append", default=None, metavar="V",
                   help="with --ablation: run only these values (e.g. one per machine); the table covers all "
                        "values whose projects exist")
    p.add_argument("--no-evaluate", dest="evaluate", action="store_false", default=True,
                   help="skip the full STS report of each trial (avg2016 is still computed)")
    p.add_argument("--verbose", default="0", help="Keras fit verbosity inside trials: auto, 0, 1, 2")
    p.add_argument("--show-space", action="store_true", help="print the resolved space and exit")
    a = p.parse_args(argv)
    if a.directory is None and not a.show_space:
        p.error("the following arguments are required: --directory (unless --show-space)")
    return a


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    a = parse_args(argv)
    if not a.show_space:  # the search needs KerasTuner: said before TensorFlow loads, not after
        from grounded_text.utils.extras import check_extras

        check_extras([("keras_tuner", "grounded-text tune")])
    try:
        space = load_space(a.space, a.model)
        space = space.with_overrides(parse_sets(a.overrides, error=SpaceError))
    except (SpaceError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from grounded_text.models.registry import MODELS

    if space.model not in MODELS:
        print(f"error: model {space.model!r} is not in grounded_text.models.registry ({sorted(MODELS)}).",
              file=sys.stderr)
        return 2
    # Only an absent --trials takes the protocol's count (0 is refused by the parser).
    trials = a.trials if a.trials is not None else int(space.protocol.get("trials", 100))
    seed = a.seed if a.seed is not None else int(space.protocol.get("seed", 0))
    if trials < 1:
        print("error: --trials must be >= 1", file=sys.stderr)
        return 2
    verbose = a.verbose if a.verbose == "auto" else int(a.verbose)
    project = a.project_name or f"{a.model}-{Path(a.space).stem}"
    if a.show_space:
        print(json.dumps({"files": space.files, "model": space.model, "fixed": space.fixed,
                          "hyperparameters": [h.__dict__ for h in space.hparams],
                          "trials": trials, "seed": seed, "project": project}, indent=2, default=str))
        return 0
    common = dict(data_dir=a.data_dir, trials=trials, seed=seed, evaluate=a.evaluate, verbose=verbose)

    if a.ablation is None:
        try:
            summary = run_search(space, directory=a.directory, project_name=project, **common)
        except SpaceError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except RuntimeError as e:  # KerasTuner stops after too many consecutive failed trials
            print(f"error: the search stopped: {str(e).splitlines()[0]} See the trials under "
                  f"{Path(a.directory, project)}.", file=sys.stderr)
            return 1
        if _all_failed(summary):
            print(f"error: all {len(summary['trials'])} trial(s) failed; nothing to report. Each trial's "
                  f"error is logged above and in {Path(a.directory, project)}/trial_*/trial.json.",
                  file=sys.stderr)
            return 1
        if summary is not None:
            best = summary["best"]
            print(Path(a.directory, project, "summary.md").read_text())
            print(json.dumps({"completed_trials": summary["completed_trials"],
                              "best_trial": best and best["trial_id"],
                              "best_avg2016": best and best["avg2016"],
                              "best_hyperparameters": best and best["hyperparameters"],
                              "best_export_dir": best and best["best_export_dir"],
                              "summary": str(Path(a.directory, project, "summary.md"))}, indent=2))
        return 0

    return _ablation(a, space, project, common)


def _ablation(a: argparse.Namespace, space: SearchSpace, project: str, common: dict) -> int:
    """Algorithm 2 (``--ablation PARAM``): one search per value of PARAM, then the table → exit status."""
    from grounded_text.tuning.report import write_ablation_table

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
            if _all_failed(summ):
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


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
