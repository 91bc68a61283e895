"""Score any text-embedding SavedModel on STS (cosine, unsupervised), transfer, and the full suite.

Usage::

    python -m grounded_text.evaluate --model runs/vete_bow/export \\
        [--sts-dir ../shared/data/sts] [--json report.json] [--years STS12 STS16]

``--model`` is any SavedModel mapping string[B] → float[B, N] (ours, or a
downloaded TF Hub text-embedding module). ``--sts-dir`` defaults to
``$GROUNDED_TEXT_DATA/sts``. Every ``STS1x-en-test`` folder found is scored (any
year: 2014/2015 folders in the same layout work unchanged), then STS-B test and
SICK test. Prints a Markdown table; ``--json`` writes the full report.

Transfer (SentEval, see ``docs/transfer.md``)::

    python -m grounded_text.evaluate --model runs/vete_bow/export --baseline glove \\
        --transfer [MR CR SUBJ MPQA SST2 TREC MRPC SICKEntailment SNLI] \\
        [--senteval-dir ../shared/data/senteval] [--report-dir reports/]

``--transfer`` with no task names runs them all. ``--baseline glove`` adds the
GloVe-mean baseline (then ``--model`` is optional; several ``--model`` paths are
allowed). Each model gets one report joining its STS and transfer tables
(``--report-dir``: ``<model>.md`` and ``<model>.json``); a side-by-side transfer
table follows.

The full evaluation suite (see ``docs/evaluation.md``)::

    python -m grounded_text.evaluate --run-dir runs/vete_bow --full --out runs/vete_bow/report

STS + supervised STS-B/SICK-R with contamination lines, retrieval both ways on the
Flickr8k 1k test (needs the run's ``image_export/``), structure (mNNO, ρ_vis, C_intra,
C_inter), same-image tests, GloVe and word2vec baselines, PNG plots. ``--run-dir``
reads ``export/``, ``image_export/`` and ``metrics.json``; ``--model`` scores any SavedModel
the same way, retrieval with ``--image-model`` or else the ``image_export/`` beside its
``export/`` (a shipped model's, a run's). A feature store that records nothing about what made
it (and is not one of the data root's) is refused for retrieval unless
``--accept-unrecorded-features`` is given, which is said on stderr. Choose sections
with ``--sections``; ``--transfer`` adds SentEval transfer to the suite report. Protocol
options (``docs/evaluation.md``, "Protocol options"): ``--same-image-n N`` (pairs per label
of the same-image tests; VETE §4.3 uses 1000) and ``--supervised-model ridge|senteval``
(the supervised STS-B / SICK-R regressor).

Progress: the suite's sections (each encoder's ``sts``, ``supervised_sts``, ``retrieval``...,
``transfer``) and the per-model STS and transfer of ``--transfer`` / ``--baseline`` are shown
on stderr as they run: a bar in a terminal or a notebook, else one line as each section starts
and one with its seconds as it ends (``grounded_text.utils.progress``). ``--no-progress`` turns
that off; stdout and the written reports are the same either way.

Sentence ends (``docs/caption2image_differences.md``): ``--sentence-end
none|space_period|space_period_tokens`` rewrites the end of every sentence a model is given
(STS, STS-B, SICK, transfer, retrieval captions) before it is encoded, as the authors' code of
Merkx & Frank does (``space_period``: ``" ."`` unless the sentence ends in ``.``, their
training captions; ``space_period_tokens``: their SentEval batcher, ``" ."`` unless the last
whitespace token is ``.``). Without the flag a model is scored with the rule it was trained
with (``text.sentence_end`` of its export's ``assets/config.json``; ``none`` if it records
none). Rescoring an existing export that way needs no training, and the report has the same
format::

    python -m grounded_text.evaluate --run-dir RUN --sections sts retrieval --sentence-end space_period_tokens

A run whose model has several sentence spaces (``bordes_cg_pg``: ``export_textual/`` u
and ``export_grounded/`` g(u)) is scored space by space, each under its folder name::

    python -m grounded_text.evaluate --model RUN/export_textual RUN/export_grounded \\
        --sections sts structure
"""

from __future__ import annotations

import argparse
import logging
import sys

from grounded_text.config.flags import positive_int

# The scoring modules (TensorFlow, SciPy) are imported once the flags are parsed and checked,
# so that --help and bad flags answer at once.
from grounded_text.config.schema import SENTENCE_ENDS
from grounded_text.data.paths import DATA_ENV_VAR
from grounded_text.data.provenance import UNRECORDED_FLAG
from grounded_text.evaluation.names import (
    BASELINE_ENCODERS,
    EVALUATION_SECTIONS,
    PAIR_FEATURE_SET_NAMES,
    SENTEVAL_SEED,
    TASKS,
)
from grounded_text.evaluation.preflight import check_flags


def main(argv=None) -> int:
    """The CLI; bad input (a missing or wrong model, unreadable data, an unwritable
    output path) prints one ``error: ...`` line and returns 2."""
    try:
        return _main(argv)
    except (FileNotFoundError, ValueError) as e:
        # ValueError covers EncoderSignatureError and the data readers' file:line errors.
        print(f"error: {e}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m grounded_text.evaluate", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", nargs="+", default=None,
                   help="SavedModel directory (string[B] -> float[B, N]) or a shipped model's name "
                        "(grounded_text.models(), e.g. vete_bow_flickr8k)")
    p.add_argument("--sts-dir", default=None, help=f"STS root (default: ${DATA_ENV_VAR}/sts)")
    p.add_argument("--json", default=None, help="write the report here")
    p.add_argument("--years", nargs="*", default=None, help="only these years, e.g. STS12 STS16")
    p.add_argument("--batch-size", type=positive_int, default=512, help="sentences per encoder call (>= 1)")
    p.add_argument("--sentence-end", choices=SENTENCE_ENDS, default=None,
                   help="rewrite each sentence's end before a model encodes it: none, space_period (' .' unless "
                        "it ends in '.') or space_period_tokens (caption2image's SentEval rule); default: the "
                        "rule the model was trained with (its export's config), else none")
    p.add_argument("--no-progress", action="store_true",
                   help="no section progress on stderr (by default: a bar in a terminal, else a line as each "
                        "section starts and ends); the reports are the same")
    _add_transfer_args(p)
    _add_suite_args(p)
    return p


def _main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = _parser()
    a = p.parse_args(argv)
    suite = check_flags(p, a)  # the full evaluation suite asked for
    if suite:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # The flags are good: now the TensorFlow side.
    from grounded_text.evaluation import commands

    if suite:
        return commands.run_suite(a, p, argv)
    if a.transfer is not None or a.baseline or len(a.model) > 1 or a.report_dir:
        return commands.run_reports(p, a)  # STS + transfer report per model
    a.model = a.model[0]
    return commands.run_sts(p, a)


def _add_transfer_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("transfer (SentEval)")
    g.add_argument("--transfer", nargs="*", default=None, metavar="TASK",
                   help=f"run SentEval transfer tasks (default all: {' '.join(TASKS)})")
    g.add_argument("--senteval-dir", default=None, help=f"SentEval root (default: ${DATA_ENV_VAR}/senteval)")
    g.add_argument("--baseline", nargs="+", choices=BASELINE_ENCODERS, default=None, help="also score these baselines")
    g.add_argument("--no-sts", action="store_true", help="skip the STS table")
    g.add_argument("--kfold", type=int, default=10, help="k of the (inner) k-fold CVs (SentEval: 10)")
    g.add_argument("--seed", type=int, default=SENTEVAL_SEED)
    g.add_argument("--max-examples", type=int, default=None, help="cap each split (seeded subset; for CI)")
    g.add_argument("--pair-features", choices=sorted(PAIR_FEATURE_SET_NAMES), default="uv_absdiff_prod")
    g.add_argument("--n-jobs", type=int, default=1, help="parallel fits in the C grid searches")
    g.add_argument("--report-dir", default=None, help="write <model>.md and <model>.json per model here")


def _add_suite_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("evaluation suite (docs/evaluation.md)")
    g.add_argument("--run-dir", default=None, help="a training run directory (export/, image_export/, metrics.json)")
    g.add_argument("--image-model", default=None, help="image-tower SavedModel (float32[B, d] -> [B, N]), "
                   "for retrieval with one --model (default: the image tower beside each --model's text tower, "
                   "as a shipped model and a training run have it)")
    g.add_argument("--full", action="store_true", help="all sections, GloVe and word2vec baselines, plots (with --out)")
    g.add_argument("--sections", nargs="+", default=None,
                   choices=list(EVALUATION_SECTIONS))
    g.add_argument("--plots", action="store_true", help="write the PNGs into --out without --full")
    g.add_argument("--out", default=None, help="report directory: report.json, report.md, PNGs")
    g.add_argument("--data-dir", default=None, help=f"data root (default: ${DATA_ENV_VAR})")
    g.add_argument("--features", default=None, help="feature file stem (default: the run's, else efficientnet_lite0)")
    g.add_argument(UNRECORDED_FLAG, dest="accept_unrecorded_features", action="store_true",
                   help="score an image tower on features that record nothing about what made them and are not a "
                        "known data-root store (refused otherwise: a tower fed another network's features scores "
                        "at chance); a warning says it")
    g.add_argument("--coco-captions", nargs="*", default=[], help="COCO captions JSON files for same-image tests")
    g.add_argument("--same-image-n", type=positive_int, default=5000,
                   help="pairs per label in the same-image tests (>= 1; default 5000; VETE §4.3 uses 1000)")
    g.add_argument("--supervised-model", choices=["ridge", "senteval"], default="ridge",
                   help="supervised STS-B / SICK-R regressor: ridge on [u,v,|u-v|,u*v] (default) or SentEval's "
                        "relatedness softmax on [|u-v|,u*v] (Tai et al. 2015 targets, early stopped on dev)")
    g.add_argument("--mnno-k", type=int, nargs="+", default=[10], help="K of mNNO@K")
    g.add_argument("--retrieval-protocol", default="flickr8k_1k", choices=["flickr8k_1k", "all"],
                   help="protocol on the Flickr8k test split")
    g.add_argument("--retrieval-coco", nargs=2, default=None, metavar=("CAPTIONS_JSON", "FEATURES_NPZ"),
                   help="also retrieval on a COCO-format split with its image features (COCO 5k test)")
    g.add_argument("--coco-protocol", nargs="+", default=["coco_5fold_1k", "coco_5k"],
                   choices=["coco_5fold_1k", "coco_5k", "all"])
    g.add_argument("--sample-seed", type=int, default=0,
                   help="seed of the same-image sampling, the word2vec baseline and the t-SNE")


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
