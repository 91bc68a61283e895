"""The full evaluation of one or more encoders on the real data (what ``--full`` runs).

Sections (any subset, see ``EVALUATION_SECTIONS``):

* ``sts``: unsupervised cosine STS (``evaluation.sts.evaluate_sts``);
* ``supervised``: supervised STS-B / SICK-R (``evaluation.supervised_sts``; ``supervised_model``
  ``"ridge"``, the default, or ``"senteval"``, SentEval's relatedness classifier);
* ``retrieval``: caption↔image retrieval on the Flickr8k test split
  (``evaluation.retrieval``; needs an image encoder);
* ``structure``: mNNO@K, ρ_vis, C_intra, C_inter on the Flickr8k test split, visual
  vectors = the CNN features (``evaluation.structure``);
* ``same_image``: VETE §4.3 same-image tests on Flickr8k test and any COCO captions
  JSON given (``evaluation.same_image``), ``same_image_n`` same-image + ``same_image_n``
  different-image pairs: ``SAME_IMAGE_N`` (5,000) by default, ``VETE_SAME_IMAGE_N``
  (1,000, the paper's) for VETE's protocol.

This module is the one orchestrator of the evaluation: ``evaluate_encoders`` (the full
report: the sections above, COCO retrieval, SentEval transfer, plots) and
``model_report`` (one encoder's STS and transfer tables); ``python -m
grounded_text.evaluate`` only parses flags, builds the encoders
(``grounded_text.evaluation.encoders``) and prints what these return.

Contamination (``evaluation.contamination``) of every text set against the Flickr8k
training-split captions is computed once and stored beside the scores.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from grounded_text.data.features import load_npz_features
from grounded_text.data.flickr8k import read_flickr8k
from grounded_text.data.pairs import CaptionPairs, load_flickr8k_pairs
from grounded_text.data.sts import read_sick, read_sts_benchmark, read_sts_year, sts_year_dirs
from grounded_text.evaluation.contamination import ContaminationIndex
from grounded_text.evaluation.encoders import (  # noqa: F401 (re-exported)
    EncoderSpec,
    ImageEncoder,
    cached,
    check_tower_features,
    load_image_encoder,
    run_dir_specs,
)
from grounded_text.evaluation.names import EVALUATION_SECTIONS
from grounded_text.evaluation.plots import load_history, plot_training_curves, plot_tsne
from grounded_text.evaluation.retrieval import evaluate_retrieval, group_by_image, images_of_pairs
from grounded_text.evaluation.same_image import CaptionedImages, evaluate_same_image, read_coco_captioned_images
from grounded_text.evaluation.structure import structural_measures
from grounded_text.evaluation.sts import evaluate_sts, headline_figures
from grounded_text.evaluation.supervised_sts import SUPERVISED_MODELS, evaluate_supervised_sts
from grounded_text.evaluation.transfer import ClassifierConfig, evaluate_transfer
from grounded_text.utils.progress import SectionProgress
from grounded_text.utils.quiet import GroundedTextWarning

log = logging.getLogger("grounded_text.evaluate")

SAME_IMAGE_N = 5000  # pairs per label of the same-image tests (the default)
VETE_SAME_IMAGE_N = 1000  # Kurach et al. 2017, §4.3: 1,000 related + 1,000 non-related caption pairs


def check_protocol_options(same_image_n: int, supervised_model: str) -> None:
    """Raises ValueError for a same-image N below 1 or an unknown supervised STS model."""
    if isinstance(same_image_n, bool) or not isinstance(same_image_n, (int, np.integer)) or same_image_n < 1:
        raise ValueError(f"same_image_n must be an integer >= 1, got {same_image_n!r}.")
    if supervised_model not in SUPERVISED_MODELS:
        raise ValueError(f"supervised_model must be one of {SUPERVISED_MODELS}, got {supervised_model!r}.")


def flickr_captioned(pairs: CaptionPairs, name: str) -> CaptionedImages:
    return CaptionedImages(pairs.captions.tolist(), pairs.image_ids.tolist(), name)


def contamination_report(index: ContaminationIndex, sts_dir: Path | None,
                         caption_sets: dict[str, Sequence[str]] | None = None) -> dict:
    """Contamination of every STS subset (and year), STS-B test, SICK test and caption sets.

    Returns:
      ``{set name: ContaminationIndex.count_pairs(...) or .count(...)}``, keys as in
      the report (``"STS12/MSRvid"``, ``"STS12"``, ``"STSBenchmark/test"``, ``"SICK/test"``, ...).
    """
    out = {}
    if sts_dir is not None and sts_dir.is_dir():
        for year, path in sts_year_dirs(sts_dir).items():
            s1, s2 = [], []
            for sub, pairs in read_sts_year(path).items():
                out[f"{year}/{sub}"] = index.count_pairs(pairs.sentences1, pairs.sentences2)
                s1 += pairs.sentences1
                s2 += pairs.sentences2
            if s1:
                out[year] = index.count_pairs(s1, s2)
        if (sts_dir / "STSBenchmark").is_dir():
            p = read_sts_benchmark(sts_dir, "test")
            out["STSBenchmark/test"] = index.count_pairs(p.sentences1, p.sentences2)
        if (sts_dir / "SICK").is_dir():
            p = read_sick(sts_dir, "test")
            out["SICK/test"] = index.count_pairs(p.sentences1, p.sentences2)
    for name, sentences in (caption_sets or {}).items():
        out[name] = index.count(list(sentences))
    return out


def planned_sections(sections: Sequence[str], *, sts_dir: Path | None, test_pairs: CaptionPairs | None,
                     image_encoder=None, same_image_sets: Sequence[CaptionedImages] = ()) -> list[str]:
    """The sections ``evaluate_one`` runs for these arguments, in order, by their report keys
    (``"supervised"`` runs as ``"supervised_sts"``): a section whose data is absent (no STS
    folder, no test split, no image encoder for retrieval, no same-image set) does not run."""
    runs = {
        "sts": "sts" in sections and sts_dir is not None,
        "supervised_sts": "supervised" in sections and sts_dir is not None,
        "retrieval": "retrieval" in sections and test_pairs is not None and image_encoder is not None,
        "structure": "structure" in sections and test_pairs is not None,
        "same_image": "same_image" in sections and bool(same_image_sets),
    }
    return [key for key, run in runs.items() if run]


def evaluate_one(
    spec: EncoderSpec,
    *,
    sts_dir: Path | None,
    test_pairs: CaptionPairs | None,
    same_image_sets: Sequence[CaptionedImages] = (),
    sections: Sequence[str] = EVALUATION_SECTIONS,
    years: Sequence[str] | None = None,
    same_image_n: int = SAME_IMAGE_N,
    seed: int = 0,
    mnno_ks: Sequence[int] = (10,),
    retrieval_protocol: str = "flickr8k_1k",
    supervised_model: str = "ridge",
    progress: SectionProgress | None = None,
) -> dict:
    """Runs the chosen sections for one encoder (those of ``planned_sections``); see module docstring.

    ``same_image_n`` (pairs per label, >= 1; capped by the same-image pairs a set has, the
    result's ``n_per_label`` says how many were used) and ``supervised_model`` (``"ridge"`` or
    ``"senteval"``) choose the protocols; a bad value raises ValueError. ``progress``: each
    section runs as one of its sections (``grounded_text.utils.progress``), named
    ``"<encoder>: <section>"``.

    Returns:
      ``{"kind", "source", "sts"?, "supervised_sts"?, "retrieval"?, "structure"?,
      "same_image"?, "seconds": {section: float}}``.
    """
    check_protocol_options(same_image_n, supervised_model)
    cache = cached(spec.encoder)
    out: dict = {"kind": spec.kind, "source": spec.source, "seconds": {}}
    plan = planned_sections(sections, sts_dir=sts_dir, test_pairs=test_pairs, image_encoder=spec.image_encoder,
                            same_image_sets=same_image_sets)
    shown = progress if progress is not None else SectionProgress(0, "", enabled=False)

    def timed(section, fn):
        with shown.section(f"{spec.name}: {section}"):
            t = time.perf_counter()
            out[section] = fn()
            out["seconds"][section] = round(time.perf_counter() - t, 2)
        # The progress's own end line says as much when it is shown.
        log.log(logging.DEBUG if shown.enabled else logging.INFO, "%s: %s done in %.1fs", spec.name, section,
                out["seconds"][section])

    if "sts" in plan:
        timed("sts", lambda: evaluate_sts(cache, sts_dir, years=years))
    if "supervised_sts" in plan:
        timed("supervised_sts", lambda: evaluate_supervised_sts(cache, sts_dir, model=supervised_model))
    if "retrieval" in plan or "structure" in plan:
        captions = test_pairs.captions.tolist()
        text = cache(captions)
        _, caption_image, image_features = images_of_pairs(test_pairs)
        if "retrieval" in plan:
            timed("retrieval", lambda: {
                **evaluate_retrieval(text, spec.image_encoder(image_features), caption_image, retrieval_protocol),
                "split": "flickr8k/test",
            })
        if "structure" in plan:
            timed("structure", lambda: {
                **structural_measures(text, test_pairs.image_ids.tolist(), test_pairs.image_features(), ks=mnno_ks),
                "split": "flickr8k/test", "visual": "CNN image features (one caption per image: the first)",
            })
    if "same_image" in plan:
        timed("same_image", lambda: {
            d.name: evaluate_same_image(cache, d, n=min(same_image_n, _max_positive_pairs(d)), seed=seed)
            for d in same_image_sets
        })
    return out


def _max_positive_pairs(data: CaptionedImages) -> int:
    _, counts = np.unique(np.asarray(data.image_ids, dtype=object).astype(str), return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


@dataclasses.dataclass(frozen=True)
class SuiteSettings:
    """What ``evaluate_encoders`` runs and how: every choice of the full report but the encoders
    and the data root.

    Attributes:
      features: feature file stem (the run's, so that retrieval pairs with the image tower it
        was trained with).
      sts_dir: default ``data_dir/sts``.
      sections: subset of ``EVALUATION_SECTIONS``.
      coco_captions: COCO-format captions JSON files for extra same-image sets.
      years, same_image_n, seed, mnno_ks, retrieval_protocol, supervised_model: see the sections
        (``same_image_n``: ``SAME_IMAGE_N``, or ``VETE_SAME_IMAGE_N`` for VETE's protocol).
      retrieval_coco: (captions JSON, features .npz) of a COCO retrieval, one entry per protocol
        of ``coco_protocols``, for every encoder with an image encoder.
      transfer: keyword arguments of ``evaluate_transfer`` (``tasks``, ``senteval_dir``,
        ``sts_dir``, ``config``, ``max_examples``), or None for no SentEval transfer.
      plots_dir: where the plots go (None: no plots); run_dir: whose training curves they draw.
      command: recorded as the report's ``command``.
      progress: show the sections as they run on stderr (``SectionProgress``: a bar in a
        terminal, a line per section start and end elsewhere); the report is the same.
      accept_unrecorded_features: score an image tower on features that record nothing about
        what made them (refused otherwise: ``grounded_text.data.provenance.check_pairing``).
    """

    features: str = "efficientnet_lite0"
    sts_dir: str | Path | None = None
    sections: Sequence[str] = EVALUATION_SECTIONS
    coco_captions: Sequence[str | Path] = ()
    years: Sequence[str] | None = None
    same_image_n: int = SAME_IMAGE_N
    seed: int = 0
    mnno_ks: Sequence[int] = (10,)
    retrieval_protocol: str = "flickr8k_1k"
    supervised_model: str = "ridge"
    retrieval_coco: tuple[str | Path, str | Path] | None = None
    coco_protocols: Sequence[str] = ("coco_5fold_1k", "coco_5k")
    transfer: dict | None = None
    plots_dir: str | Path | None = None
    run_dir: str | Path | None = None
    command: str | None = None
    progress: bool = True
    accept_unrecorded_features: bool = False


def evaluate_encoders(specs: Sequence[EncoderSpec], data_dir: str | Path, settings: SuiteSettings | None = None,
                      **changes) -> dict:
    """The full report of several encoders on the same data (see ``report`` module for its layout).

    After the ``sections``, for every encoder: with an image encoder, the COCO retrieval
    (``retrieval_coco``); the SentEval transfer tasks (``transfer``); then the plots (into
    ``plots_dir``; training curves of ``run_dir``).

    Args:
      specs: encoders to score (all get the same sets).
      data_dir: data root (Flickr8k + ``sts/``).
      settings: the sections and their protocols (``SuiteSettings``; default: its defaults).
      **changes: fields of ``SuiteSettings`` that replace those of ``settings``, e.g.
        ``same_image_n=1000``.

    Returns:
      The report dict; each encoder's node holds its sections and, where run,
      ``retrieval_coco`` and ``transfer``; the report holds ``plots`` and ``command``.

    Raises:
      ValueError: an unknown section name, ``same_image_n`` < 1 or an unknown ``supervised_model``.
      TypeError: a keyword that is not a field of ``SuiteSettings``.
    """
    s = dataclasses.replace(settings or SuiteSettings(), **changes)
    sections, same_image_n, supervised_model, seed = s.sections, s.same_image_n, s.supervised_model, s.seed
    retrieval_coco, transfer, plots_dir, features = s.retrieval_coco, s.transfer, s.plots_dir, s.features
    bad = set(sections) - set(EVALUATION_SECTIONS)
    if bad:
        raise ValueError(f"Unknown section(s) {sorted(bad)}; choose from {EVALUATION_SECTIONS}.")
    check_protocol_options(same_image_n, supervised_model)
    root = Path(data_dir)
    sts_dir, flickr, test_pairs, same_sets = _suite_data(root, features, sections, s.sts_dir, s.coco_captions)
    report: dict = {
        "data_dir": str(root),
        "features": features,
        "sections": list(sections),
        "protocols": _protocols(s.retrieval_protocol, s.mnno_ks, same_image_n, seed, supervised_model),
        "encoders": {},
    }
    # Every section that will run, counted before the first: the bar's total is the sections run.
    total = (flickr is not None) + (plots_dir is not None) + sum(
        len(planned_sections(sections, sts_dir=sts_dir, test_pairs=test_pairs, image_encoder=spec.image_encoder,
                             same_image_sets=same_sets))
        + bool(retrieval_coco and spec.image_encoder is not None) + (transfer is not None) for spec in specs)
    # A tower fed another network's features scores at chance without a word: refused before any work.
    for spec in specs:
        if spec.image_encoder is not None and test_pairs is not None and flickr.store.path:
            check_tower_features(spec.image_encoder, flickr.store.path, s.accept_unrecorded_features)
        if spec.image_encoder is not None and retrieval_coco:
            check_tower_features(spec.image_encoder, retrieval_coco[1], s.accept_unrecorded_features)
    with SectionProgress(total, "evaluate", enabled=s.progress) as shown:
        if flickr is not None:
            with shown.section("contamination"):
                report.update(_contamination(root, flickr, sts_dir, same_sets))
        for spec in specs:
            log.info("evaluating %s (%s)", spec.name, spec.kind)
            report["encoders"][spec.name] = evaluate_one(
                spec, sts_dir=sts_dir, test_pairs=test_pairs, same_image_sets=same_sets, sections=sections,
                years=s.years, same_image_n=same_image_n, seed=seed, mnno_ks=s.mnno_ks,
                retrieval_protocol=s.retrieval_protocol, supervised_model=supervised_model, progress=shown)
            if retrieval_coco and spec.image_encoder is not None:
                with shown.section(f"{spec.name}: retrieval_coco"):
                    report["encoders"][spec.name]["retrieval_coco"] = {
                        proto: coco_retrieval(spec, *retrieval_coco, protocol=proto) for proto in s.coco_protocols}
            if transfer is not None:
                with shown.section(f"{spec.name}: transfer"):
                    report["encoders"][spec.name]["transfer"] = evaluate_transfer(spec.encoder, **transfer)
        if s.command is not None:
            report["command"] = s.command
        if plots_dir is not None:
            with shown.section("plots"):
                report["plots"] = make_plots(report, plots_dir, run_dir=s.run_dir, specs=specs, data_dir=data_dir,
                                             features=features, seed=seed)
    return report


def _suite_data(root: Path, features: str, sections: Sequence[str], sts_dir, coco_captions):
    """(sts_dir, flickr, test_pairs, same_image_sets) of ``evaluate_encoders``: the STS root
    (None when absent), the Flickr8k pairs (None without ``root/flickr8k``), their test split
    where a section needs it, and the same-image sets (its test split, then the COCO files)."""
    sts_dir = Path(sts_dir) if sts_dir is not None else root / "sts"
    if not sts_dir.is_dir():
        sts_dir = None
    need_flickr = bool({"retrieval", "structure", "same_image"} & set(sections))
    flickr = load_flickr8k_pairs(root, features) if (root / "flickr8k").is_dir() else None
    test_pairs = flickr.splits["test"] if flickr is not None and need_flickr else None
    same_sets = []
    if "same_image" in sections:
        if test_pairs is not None:
            same_sets.append(flickr_captioned(test_pairs, "flickr8k/test"))
        same_sets += [read_coco_captioned_images(p) for p in coco_captions]
    return sts_dir, flickr, test_pairs, same_sets


def _protocols(retrieval_protocol: str, mnno_ks, same_image_n: int, seed: int,
               supervised_model: str = "ridge") -> dict:
    """One line per section: how ``evaluate_encoders`` scores it."""
    supervised = ("sklearn Ridge on [u,v,|u-v|,u*v], alpha by dev Pearson (supervised)" if supervised_model == "ridge"
                  else "SentEval relatedness softmax on [|u-v|,u*v], Tai et al. targets, early stop on dev Pearson "
                       "(supervised)")
    return {
        "sts": "cosine of embeddings vs gold, Pearson r / Spearman rho (unsupervised)",
        "supervised_sts": supervised,
        "retrieval": f"{retrieval_protocol}; 1-based ranks, rank = 1 + #strictly better",
        "structure": f"Bordes 2019 s4.3 on flickr8k/test, mNNO@{list(mnno_ks)}, rho_vis = Pearson (Spearman beside)",
        "same_image": f"VETE s4.3, {same_image_n} same + {same_image_n} different-image pairs, seed {seed}",
    }


def _contamination(root: Path, flickr, sts_dir: Path | None, same_sets: Sequence[CaptionedImages]) -> dict:
    """The report's contamination entries: every text set against the Flickr8k train-split
    captions, and against every caption of the release."""
    train_caps = flickr.splits["train"].captions.tolist()
    index = ContaminationIndex(train_caps, name="flickr8k train-split captions")
    # Against every caption of the release (the data README's "334 SICK test sentences").
    everything = ContaminationIndex((c.text for c in read_flickr8k(root)), name="all Flickr8k captions")
    return {"contamination_against": f"the {len(train_caps)} Flickr8k train-split captions",
            "contamination": contamination_report(index, sts_dir, {d.name: d.captions for d in same_sets}),
            "contamination_all_flickr8k": contamination_report(everything, sts_dir)}


def coco_retrieval(spec: EncoderSpec, captions_json: str | Path, features_npz: str | Path,
                   protocol: str = "coco_5fold_1k", n_folds: int | None = None) -> dict:
    """Retrieval on a COCO-format split with precomputed image features (COCO 5-fold 1K / 5K).

    Args:
      spec: encoder with an ``image_encoder``.
      captions_json: COCO captions file (e.g. the Karpathy 5k test split in COCO
        format); image order (hence the contiguous folds) = its ``images`` list.
      features_npz: ``ids`` (COCO ``file_name`` or ``str(image_id)``) and ``features``
        [n, d], read with ``allow_pickle=False``.
      protocol: ``coco_5fold_1k``, ``coco_5k`` or ``all``.

    Returns:
      ``evaluate_retrieval`` result plus ``"split"``, ``"dropped_images"``.

    Raises:
      ValueError: no image encoder; see ``evaluate_retrieval`` for the rest.
    """
    if spec.image_encoder is None:
        raise ValueError(f"{spec.name}: retrieval needs an image encoder (image_export/ or --image-model).")
    data = read_coco_captioned_images(captions_json)
    store = load_npz_features(features_npz)
    row_of = store.index()
    order = [i for i in data.image_order if i in row_of]
    dropped = len(data.image_order) - len(order)
    if dropped:
        warnings.warn(f"{dropped} image(s) of {data.name} have no row in {features_npz}: dropped with their captions.",
                      GroundedTextWarning, stacklevel=2)
    index = {image_id: k for k, image_id in enumerate(order)}
    keep = [k for k, i in enumerate(data.image_ids) if i in index]
    caption_image = np.array([index[data.image_ids[k]] for k in keep], dtype=np.int64)
    text = spec.encoder([data.captions[k] for k in keep])
    images = spec.image_encoder(store.features[[row_of[i] for i in order]])
    out = evaluate_retrieval(text, images, caption_image, protocol, n_folds=n_folds)
    out.update({"split": data.name, "dropped_images": dropped})
    return out


def make_plots(report: dict, out_dir: str | Path, *, run_dir: str | Path | None, specs: Sequence[EncoderSpec],
               data_dir: str | Path, features: str, n_images: int = 20, seed: int = 0) -> list[str]:
    """Training curves of the run (if any) and a t-SNE per encoder of n_images test images' captions.

    Returns:
      The PNG file names written into ``out_dir``.
    """
    out_dir = Path(out_dir)
    written = []
    if run_dir is not None:
        try:
            hist = load_history(run_dir)
            written.append(plot_training_curves(hist, out_dir / "training_curves.png",
                                                f"Training curves: {Path(run_dir).name}").name)
        except FileNotFoundError as e:
            log.warning("no training curves: %s", e)
    flickr = load_flickr8k_pairs(data_dir, features)
    test = flickr.splits["test"]
    images, caption_image = group_by_image(test.image_ids.tolist())
    chosen = np.sort(np.random.default_rng(seed).choice(len(images), size=min(n_images, len(images)), replace=False))
    rows = np.flatnonzero(np.isin(caption_image, chosen))
    captions = test.captions[rows].tolist()
    labels = test.image_ids[rows].tolist()
    for spec in specs:
        safe = "".join(ch if ch.isalnum() else "_" for ch in spec.name).strip("_")
        png = plot_tsne(spec.encoder(captions), labels, out_dir / f"tsne_{safe}.png",
                        title=f"t-SNE of Flickr8k test captions ({len(chosen)} images): {spec.name}", seed=seed)
        written.append(png.name)
    return written


def model_report(
    label: str,
    encoder: Callable,
    *,
    sts_dir: str | Path | None = None,
    sick_dir: str | Path | None = None,
    senteval_dir: str | Path | None = None,
    tasks: Sequence[str] | None = None,
    config: ClassifierConfig = ClassifierConfig(),
    max_examples: int | None = None,
    years: Sequence[str] | None = None,
    log: Callable[[str], None] | None = None,
    progress: SectionProgress | None = None,
) -> dict:
    """Scores one encoder.

    Args:
      label: the model's name in the report (a path or a baseline name).
      encoder: strings → float [n, N].
      sts_dir: STS root; ``None`` skips STS.
      sick_dir: folder holding ``SICK/`` for SICK-E (default ``sts_dir``, else
        ``senteval_dir/../sts``).
      senteval_dir: SentEval root; ``None`` skips transfer.
      tasks, config, max_examples: see ``evaluate_transfer``.
      years: STS years to score (default all found).
      progress: STS and transfer each run as one of its sections, ``"<label>: sts"`` and
        ``"<label>: transfer"`` (``grounded_text.utils.progress``).

    Returns:
      ``{"model", "sts", "headline", "sts_seconds", "transfer", "transfer_config",
      "transfer_seconds"}`` (STS or transfer keys only where run). Seconds are wall time.
    """
    out: dict = {"model": label}
    shown = progress if progress is not None else SectionProgress(0, "", enabled=False)
    if sts_dir is not None:
        with shown.section(f"{label}: sts"):
            t0 = time.perf_counter()
            out["sts_dir"] = str(sts_dir)
            out["sts"] = evaluate_sts(encoder, sts_dir, years=years)
            out["headline"] = headline_figures(out["sts"])
            out["sts_seconds"] = time.perf_counter() - t0
    if senteval_dir is not None:
        with shown.section(f"{label}: transfer"):
            t0 = time.perf_counter()
            out["senteval_dir"] = str(senteval_dir)
            out["transfer_config"] = {**dataclasses.asdict(config), "max_examples": max_examples}
            out["transfer"] = evaluate_transfer(
                encoder, senteval_dir, tasks, sts_dir=sick_dir or sts_dir, config=config, max_examples=max_examples,
                log=log
            )
            out["transfer_seconds"] = time.perf_counter() - t0
    return out
