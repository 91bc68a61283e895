"""KerasTuner glue: one ``kt.HyperModel`` for every model family, trained by the one trainer.

* ``GroundedHyperModel.build(hp)`` declares the protocol's hyperparameters on ``hp`` and
  maps their values to an ``ExperimentConfig`` (``SearchSpace.to_config``);
  ``fit(hp, config, data_dir=, output_dir=)`` runs ``grounded_text.training.trainer.train`` (data →
  vocabulary → model → fit with STS16 selection → export → STS evaluation) and returns
  ``{"avg2016": ..., <test figures>}``. There is no second training loop.
* ``GroundedTuner`` is KerasTuner's ``RandomSearch`` (VETE Algorithm 1 is random search)
  whose ``run_trial`` calls ``build`` then ``fit`` in the trial's directory — KerasTuner's
  documented pattern for a training path that is not ``model.fit`` — with
  ``kt.Objective("avg2016", "max")``. Resuming (``overwrite=False``), the chief/worker
  mode (``KERASTUNER_*`` variables) and trial bookkeeping are KerasTuner's own.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import time
from pathlib import Path

import keras

from grounded_text.config.schema import ExperimentConfig
from grounded_text.training.trainer import train
from grounded_text.tuning.space import SearchSpace
from grounded_text.utils.extras import require

kt = require("keras_tuner", "grounded-text tune")

OBJECTIVE = kt.Objective("avg2016", direction="max")
RUN_SUBDIR = "run"


def sts_figures(metrics: dict) -> dict[str, float]:
    """Flat figures of a ``metrics.json``: every STS year's mean Pearson r, its subsets, STS-B, SICK."""
    out: dict[str, float] = {}
    sts = metrics.get("evaluation", {}).get("sts", {})
    for key, node in sts.items():
        if "subsets" in node:
            if node["pearson"]["mean"] is not None:
                out[f"{key}/mean"] = float(node["pearson"]["mean"])
            for sub, r in node["subsets"].items():
                if r["pearson"] is not None:
                    out[f"{key}/{sub}"] = float(r["pearson"])
        else:
            for split, r in node.items():
                if r["pearson"] is not None:
                    out[f"{key}/{split}"] = float(r["pearson"])
    return out


class GroundedHyperModel(kt.HyperModel):
    """The protocol's hyperparameters → ``ExperimentConfig`` → ``grounded_text.training.trainer.train``.

    Args:
      space: the loaded protocol (``grounded_text.tuning.space.load_space``).
      evaluate: score each trial's export on every STS folder (needed for the summary's
        test columns; the objective only needs STS16, scored during training).
      verbose: Keras ``fit`` verbosity inside trials.
    """

    def __init__(self, space: SearchSpace, *, evaluate: bool = True, verbose: str | int = 0):
        super().__init__(name=f"grounded_{space.model}", tunable=True)
        self.space = space
        self.evaluate = evaluate
        self.verbose = verbose

    def build(self, hp: kt.HyperParameters) -> ExperimentConfig:
        """Declares the space on ``hp`` → the trial's ``ExperimentConfig`` (not a Keras model:
        the trainer builds the model from it, together with the vocabulary it needs)."""
        return self.space.to_config(self.space.declare(hp))

    def fit(self, hp, config: ExperimentConfig, *, data_dir, output_dir, **kwargs) -> dict[str, float]:
        """Trains ``config`` with ``grounded_text.training.trainer.train`` in ``output_dir``.

        Returns:
          ``{"avg2016": best epoch's STS16 mean Pearson r, "best_epoch": ..., "<set>/<subset>": r}``.

        Raises:
          ValueError: the data has no STS16 folder (no objective to select on).
        """
        if config.train.select_on != "avg2016":
            raise ValueError("Tuning maximises avg2016: train.select_on must be 'avg2016'.")
        metrics = train(config, data_dir, output_dir, evaluate=self.evaluate, verbose=self.verbose)
        if metrics["selection"]["monitor"] != "val_avg2016":
            raise ValueError("No STS16 folder under DATA/sts: avg2016 (the tuning objective) cannot be computed.")
        return {"avg2016": float(metrics["selection"]["best_value"]),
                "best_epoch": float(metrics["selection"]["best_epoch"]),
                **sts_figures(metrics)}


class GroundedTuner(kt.RandomSearch):
    """Random search (VETE Algorithm 1) over a ``GroundedHyperModel``.

    Args:
      hypermodel: a ``GroundedHyperModel``.
      data_dir: data root passed to the trainer.
      max_trials, seed, directory, project_name, overwrite: as ``kt.RandomSearch``
        (``overwrite=False``: an existing project is reloaded and continued).
    """

    def __init__(self, hypermodel: GroundedHyperModel, data_dir, **kwargs):
        kwargs.setdefault("objective", OBJECTIVE)
        kwargs.setdefault("overwrite", False)
        super().__init__(hypermodel=hypermodel, **kwargs)
        self.data_dir = data_dir

    def run_trial(self, trial, *args, **kwargs):
        keras.backend.clear_session()
        gc.collect()
        hp = trial.hyperparameters
        trial_dir = Path(self.get_trial_dir(trial.trial_id))
        run_dir = trial_dir / RUN_SUBDIR
        if run_dir.exists():  # a retried trial (interrupted before it finished) starts clean
            shutil.rmtree(run_dir)
        info = {"trial_id": trial.trial_id, "tuner_id": self.tuner_id, "pid": os.getpid(),
                "host": os.uname().nodename, "started": time.time()}
        (trial_dir / "worker.json").write_text(json.dumps(info))
        config = self.hypermodel.build(hp)
        (trial_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
        t0 = time.perf_counter()
        result = self.hypermodel.fit(hp, config, data_dir=self.data_dir, output_dir=run_dir)
        result["seconds"] = time.perf_counter() - t0
        return result

    # Models are exported by the trainer (``trial_*/run/export``); KerasTuner's own
    # checkpoint reload does not apply to a config-returning HyperModel.
    def load_model(self, trial):
        raise NotImplementedError(
            f"Load the trial's hub export instead: {self.get_trial_dir(trial.trial_id)}/{RUN_SUBDIR}/export "
            "(grounded_text.load)."
        )
