"""Train a grounded sentence encoder, export its text tower and evaluate it.

Usage::

    python -m grounded_text.train --data-dir ../shared/data --output-dir runs/vete_bow \\
        [--model vete_bow] [--epochs 20] [--one-caption-per-image] ...
    python -m grounded_text.train --model char_gru_attention --output-dir runs/char \\
        [--loss triplet --loss-param negatives=hardest --loss-param k=1] \\
        [--encoder-param units=256] [--schedule cyclic_cosine --cycle-epochs 2] ...

Every preset of ``grounded_text.papers.presets`` trains here: the preset fixes the
loss, the sampler (random pairs, or several captions per image for the cluster
loss), the learning-rate schedule (constant, or cyclic cosine with snapshot
ensembling) unless the config/flags set them (see ``grounded_text.papers.resolve``).

This module is the command: it parses the flags, resolves the config once (no TensorFlow
is loaded before a bad combination is refused) and calls the library trainer,
``grounded_text.training.trainer.train`` (the Python API's ``grounded_text.train``).

Writes to ``--output-dir``:
  * ``config.toml``: the resolved config (every preset choice filled in);
    ``--config RUN/config.toml`` replays the run;
  * ``vocab.txt``: the vocabulary (training captions only);
  * ``checkpoints/best.weights.h5`` (best epoch by ``--select-on``) and
    ``checkpoints/last.weights.h5``;
  * ``logs/``: TensorBoard logs;
  * ``export/``: the TF Hub text tower of the best epoch (see ``grounded_text.serving.export``),
    or, with snapshots, the snapshot ensemble (``snapshots/`` holds the snapshots);
  * ``export_<name>/``: each named sentence space of the model (best epoch), e.g.
    ``export_textual/`` (u) and ``export_grounded/`` (g(u)) for ``bordes_cg_pg``;
  * ``image_export/``: the best epoch's image tower (float32 [B, d] → [B, N]), for
    retrieval (for ``bordes_cg_pg`` it is the identity on the CNN features: that model
    has no image branch, and its text space is not aligned with them);
  * ``metrics.json``: config, data counts, per-epoch history, best epoch, timings
    and the STS report of the export (``grounded_text.evaluate``); ``spaces`` maps each
    space to its folder, ``evaluation.spaces`` to its STS headline figures;
  * ``run_state.json`` and, while the run is unfinished, ``resume/``: what ``--resume``
    continues from (``grounded_text.training.run_state``).

A directory that already holds a run is refused unless ``--resume`` (continue an
interrupted run from its last checkpoint, with the same flags: the last completed epoch, or
the last mid-epoch checkpoint of the epoch it was in, written every ``--checkpoint-every``
seconds) or ``--overwrite``
(replace it) is given. A NaN/Inf training loss stops the run at once (exit 1, with the
epoch, step and a lower learning rate to try); Ctrl-C prints where the last checkpoint is
and the command that resumes (exit 130); bad flags or data print ``error: ...`` (exit 2).
See docs/reliability.md.

Model selection never uses a test set: ``avg2016`` (mean Pearson over the STS 2016
subsets, VETE's signal) or ``val_loss`` (Flickr8k dev). Note that STS16 is then
not an unseen test: the papers report on the held-out STS 2014/2015 years.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

# TensorFlow is imported by the trainer, once the flags and their combination are good, so that
# --help and bad flags or configs answer in well under a second.
from grounded_text.config.flags import parse_train_args
from grounded_text.config.schema import ExperimentConfig
from grounded_text.papers.presets import PRESETS
from grounded_text.papers.resolve import config_from_flags, resolve_config
from grounded_text.training.extras import needed_extras
from grounded_text.utils.extras import check_extras


def parse_args(argv=None) -> argparse.Namespace:
    """The train CLI's flags (``grounded_text.config.flags.train_parser``); ``--model`` is one
    of the preset records (``grounded_text.papers.presets``)."""
    return parse_train_args(argv, sorted(PRESETS))


def config_from_args(a: argparse.Namespace) -> ExperimentConfig:
    """The flags as an ``ExperimentConfig`` (``grounded_text.papers.resolve.config_from_flags``);
    fields left unset stay ``None`` (the preset's choice, filled by ``resolve_config``)."""
    return config_from_flags(a)


def main(argv=None) -> int:
    """The CLI. Exit status: 0 done; 2 bad flags, config, data, a run directory in use or
    holding another run, or a full disk (one ``error: ...`` line); 1 training diverged (a
    NaN/Inf loss) or collapsed (the text tower maps a probe batch to nearly one vector; the
    run is marked ``failed``); 130 interrupted (Ctrl-C: one line with the last checkpoint and
    the command that resumes, or, while TensorFlow loads, that nothing was written)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        # Resolved once, here: the flags' combination is checked before TensorFlow loads, and
        # the trainer uses the resolved config as it is.
        config = resolve_config(config_from_args(args))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    check_extras(needed_extras(config))  # before TensorFlow loads and any feature is read
    # The flags are good: now the TensorFlow side (Ctrl-C while it loads: one line, exit 130).
    try:
        from grounded_text.training import run_errors, run_state, storage_errors
        from grounded_text.training.trainer import train
    except KeyboardInterrupt:
        print("interrupted while starting (loading TensorFlow): nothing was written.", file=sys.stderr)
        return 130

    try:
        metrics = train(config, args.data_dir, args.output_dir, evaluate=args.evaluate, verbose=args.verbose,
                        resume=args.resume, overwrite=args.overwrite, checkpoint_every=args.checkpoint_every)
    except run_errors.TrainingDiverged as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(run_state.interrupted_message(args.output_dir, argv), file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError) as e:
        if not run_errors.is_usage_error(e):
            raise
        print(f"error: {e}", file=sys.stderr)
        storage_errors.exit_after_storage_error(e, 2)  # a failed HDF5 write would otherwise crash the exit (rc 139)
        return 2
    print(json.dumps({"best_epoch": metrics["selection"]["best_epoch"],
                      "headline": metrics.get("evaluation", {}).get("headline"),
                      "total_seconds": round(metrics["timing_seconds"]["total"], 1),
                      "export_dir": metrics["export_dir"]}, indent=2))
    return 0


def _exit(status: int) -> None:
    """Ends ``python -m grounded_text.train`` with ``status``.

    A Ctrl-C that reached Python through TensorFlow's native code (which runs Python with
    ``PyRun_String``) leaves CPython's "unhandled KeyboardInterrupt" flag set although ``main``
    caught it, and ``python -m`` then ends the process by SIGINT (exit status -2) instead of 130.
    For 130, the process ends here, after flushing what it printed.
    """
    if status == 130:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    raise SystemExit(status)


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    _exit(run_command(main))
