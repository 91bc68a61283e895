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
import sys
from pathlib import Path

# Reading a space file needs no TensorFlow; the tuner and its reports (KerasTuner, Keras)
# are imported when a search starts, so that --help and bad flags answer at once.
from grounded_text.config.flags import positive_int
from grounded_text.papers.plans import parse_sets
from grounded_text.tuning.space import SpaceError, load_space, tuner_dir
from grounded_text.utils.extras import check_extras


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
    p.add_argument("--trials", type=positive_int, default=None, help="random sets (default: the protocol's)")
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
    from grounded_text.tuning.search import all_failed, run_ablation, run_search

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
        if all_failed(summary):
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

    return run_ablation(a, space, project, common)


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
