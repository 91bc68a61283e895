"""Reproduce a paper: train its configuration(s) with the one trainer, score them with its protocol.

Usage::

    python -m grounded_text.reproduce PAPER [--budget full|cpu|smoke] --output-dir DIR \\
        [--data-dir D] [--only NAME ...] [--from-runs RUNS] [--write-docs docs/reproduction.md]

``PAPER`` is ``vete`` (Kurach et al. 2017), ``bordes`` (Bordes et al., EMNLP 2019),
``kolluru`` (Kolluru's two-branch network), ``merckx_frank`` (Merckx & Frank 2019) or ``all``.

* Training: every run of the paper's plan (``PAPERS``) is a preset record of
  ``grounded_text.presets`` with the budget's overrides (``BUDGETS``) and the run's own
  (an ablation's loss or K), trained by ``grounded_text.train.train`` into
  ``DIR/<paper>/runs/<run>/``. A run folder whose ``metrics.json`` holds the same
  resolved config is reused, so an interrupted reproduction resumes.
* Evaluation: ``grounded_text.evaluation.suite.evaluate_one`` (STS, supervised STS-B/SICK-R,
  retrieval, structure, same-image) and ``grounded_text.evaluation.transfer.evaluate_task``
  on the run's exports — the package's one evaluation path; nothing is re-implemented here.
* ``--from-runs RUNS``: no training; each planned run is looked up under ``RUNS`` (a folder
  named after the run, ``RUNS/<paper>/runs/<run>``, or any folder below whose
  ``metrics.json`` config matches the run) and evaluated. For runs trained with
  ``python -m grounded_text.train``.
* Output: ``DIR/<paper>/results.json`` and ``DIR/<paper>/results.md``; ``--write-docs FILE``
  writes (or updates, paper by paper) the reproduction report: the paper's figures, ours,
  the difference, the command, the budget and what differs in the data.

Budgets (data, ``BUDGETS``): ``full`` = the records as the papers train them; ``cpu`` = what
fits a 2-core machine; ``smoke`` = a 64-image training slice, 1 epoch, tiny encoders, the
paper's main run only, evaluation on a 64-image test slice (seconds per paper).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import re
import shlex
import sys
import time
from pathlib import Path

log = logging.getLogger("grounded_text.reproduce")

# ----------------------------------------------------------------------------- the papers (data)


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One training run of a paper's plan.

    Attributes:
      name: folder name and ``--only`` key.
      preset: a record of ``grounded_text.presets.PRESETS`` (before the budget's mapping).
      overrides: nested overrides ({"model": {...}, ...}) applied after the budget's.
      main: trained by every budget; other runs are ablations (not trained by ``smoke``
        unless named with ``--only``).
      groups: ``(ablation name, setting label)`` pairs: the rows this run gives.
      match: dotted config keys → values that identify the run among ``--from-runs``
        folders (``model.name`` is always checked).
      default_keys: keys of ``match`` that a run may leave unset because the value is
        the preset's own (a run trained without ``--loss-param k=1`` is the K = 1 run).
    """

    name: str
    preset: str
    overrides: dict = dataclasses.field(default_factory=dict)
    main: bool = False
    groups: tuple = ()
    match: dict = dataclasses.field(default_factory=dict)
    default_keys: tuple = ()


@dataclasses.dataclass(frozen=True)
class Protocol:
    """How a paper scores its models.

    Attributes:
      sections: ``evaluate_one`` sections (``grounded_text.evaluation.suite.SECTIONS``).
      spaces: ``(label, export folders tried in order)``: each space is one text encoder.
      transfer: also the SentEval tasks under ``data_dir/senteval``.
      description: one line per measure, for the report.
    """

    sections: tuple
    spaces: tuple = (("text", ("export",)),)
    transfer: bool = False
    description: tuple = ()


@dataclasses.dataclass(frozen=True)
class Figure:
    """A figure the paper reports (never invented: ``None`` where not recorded here)."""

    value: float
    source: str


@dataclasses.dataclass(frozen=True)
class Paper:
    key: str
    title: str
    citation: str
    runs: tuple
    protocol: Protocol
    figures: dict  # headline label → Figure
    data_differences: tuple  # (aspect, the paper, ours; "{features}" etc. filled from the run)
    notes: tuple = ()


STS_ALL = "cosine of the two embeddings vs gold, Pearson r (and Spearman ρ), every STS1x subset found; year mean = unweighted mean over its subsets"
SUPERVISED = "supervised STS-B / SICK-R: ridge on [u, v, |u−v|, u*v] of the frozen embeddings, α by dev Pearson (SentEval style; grounded_text.evaluation.supervised_sts)"
RETRIEVAL = "caption↔image retrieval on the Flickr8k test split (protocol flickr8k_1k: 1,000 images / 5,000 captions), cosine of the text-tower (export/) and image-tower (image_export/) outputs, R@K % (expected over random tie order), medr (pessimistic: ties never count in favour of the ground truth)"
SAME_IMAGE = "VETE §4.3 same-image test on Flickr8k test captions: Pearson r of cosine vs same-image label, N same + N different-image pairs, seed 0"
STRUCTURE = "Bordes §4.3 on Flickr8k test: mNNO@10, ρ_vis (Spearman), C_intra, C_inter; visual vectors = the CNN features"
TRANSFER = "SentEval tasks under data_dir/senteval: logistic regression on frozen embeddings (grounded_text.evaluation.transfer), accuracy %"

MF_TABLE5 = "Merckx & Frank 2019, Table 5, Flickr8k column"
MF_RETRIEVAL = "Merckx & Frank 2019, Flickr8k 1k-test retrieval, ResNet-152 10-crop features (Table 2 per grounded_text/evaluation/retrieval.py)"

PAPERS: dict[str, Paper] = {
    "vete": Paper(
        key="vete",
        title="VETE (Kurach et al. 2017)",
        citation="Kurach, Gelly, Jastrzebski, Haeusser, Teytaud, Vincent & Bousquet 2017, "
                 "\"Better Text Understanding Through Image-To-Text Transfer\"",
        runs=(
            RunSpec("vete_bow", "vete_bow", main=True, groups=(("encoder", "BOW"), ("loss", "pearson")),
                    match={"model.loss": "pearson"}),
            RunSpec("vete_rnn", "vete_rnn", groups=(("encoder", "RNN"),), match={"model.loss": "pearson"}),
            RunSpec("vete_cnn", "vete_cnn", groups=(("encoder", "CNN"),), match={"model.loss": "pearson"}),
            # The loss ablation (§5.2) on VETE-BOW, the cheapest encoder: our choice of base model.
            RunSpec("vete_bow_covariance", "vete_bow", {"model": {"loss": "covariance"}},
                    groups=(("loss", "covariance"),), match={"model.loss": "covariance"}),
            RunSpec("vete_bow_skt", "vete_bow", {"model": {"loss": "skt"}}, groups=(("loss", "skt"),),
                    match={"model.loss": "skt"}),
            RunSpec("vete_bow_rank", "vete_bow", {"model": {"loss": "rank"}}, groups=(("loss", "rank"),),
                    match={"model.loss": "rank"}),
        ),
        protocol=Protocol(("sts", "same_image"), description=(STS_ALL, SAME_IMAGE)),
        figures={},
        data_differences=(
            ("training data", "MS COCO and larger caption sets", "{dataset}"),
            ("image features", "InceptionV3, 2048-d", "{features}"),
            ("same-image test", "COCO-Test / Pin-Test (§4.3)", "Flickr8k test captions"),
            ("STS years", "held-out STS14/15 reported in the papers' protocol", "{sts_years}"),
        ),
    ),
    "bordes": Paper(
        key="bordes",
        title="Grounded space (Bordes et al. 2019)",
        citation="Bordes, Zablocki, Soulier, Piwowarski & Gallinari, EMNLP 2019, \"Incorporating Visual "
                 "Semantics into Sentence Representations within a Grounded Space\"",
        runs=(RunSpec("bordes_cg_pg", "bordes_cg_pg", main=True),),
        protocol=Protocol(("sts", "structure"),
                          spaces=(("textual", ("export_textual", "export")), ("grounded", ("export_grounded",))),
                          transfer=True, description=(STS_ALL, STRUCTURE, TRANSFER)),
        figures={},
        data_differences=(
            ("training data", "MS COCO (grounding) + BookCorpus (textual loss L_T)",
             "{dataset}; no textual loss (C_g + P_g only)"),
            ("image features", "InceptionV3, 2048-d", "{features}"),
            ("STS years", "held-out STS14/15 reported in the papers' protocol", "{sts_years}"),
        ),
        notes=("The textual space is `export_textual/` (or `export/` for runs that predate it) and the "
               "grounded space `export_grounded/`; a space the run did not export is reported missing.",),
    ),
    "kolluru": Paper(
        key="kolluru",
        title="Two-branch network with K-hard negatives (Kolluru)",
        citation="Kolluru, two-branch network (§3.1, after Wang et al. 2016), K-hardest negative loss (eq. 3)",
        runs=(
            RunSpec("two_branch_khard_k1", "two_branch_khard", {"model": {"loss_params": {"k": 1}}}, main=True,
                    groups=(("K", "K = 1"),), match={"model.loss_params.k": 1},
                    default_keys=("model.loss_params.k",)),
            RunSpec("two_branch_khard_k5", "two_branch_khard", {"model": {"loss_params": {"k": 5}}},
                    groups=(("K", "K = 5"),), match={"model.loss_params.k": 5}),
            RunSpec("two_branch_khard_k10", "two_branch_khard", {"model": {"loss_params": {"k": 10}}},
                    groups=(("K", "K = 10"),), match={"model.loss_params.k": 10}),
        ),
        protocol=Protocol(("retrieval",), description=(RETRIEVAL,)),
        figures={},
        data_differences=(
            ("training data", "not recorded here", "{dataset}"),
            ("image features", "VGG19 / ResNet50 (§4.4.1)", "{features}"),
        ),
        notes=("The preset's K = 1 is the thesis's choice (it finds K = 1 best and K = 10 worse); "
               "its figures are not recorded here.",),
    ),
    "merckx_frank": Paper(
        key="merckx_frank",
        title="Character-level grounding (Merckx & Frank 2019)",
        citation="Merkx & Frank 2019, \"Learning semantic sentence representations from visually grounded "
                 "language without lexical knowledge\", Natural Language Engineering 25",
        runs=(RunSpec("char_gru_attention", "char_gru_attention", main=True),),
        protocol=Protocol(("sts", "supervised", "retrieval"), description=(STS_ALL, SUPERVISED, RETRIEVAL)),
        figures={
            "STS12 MSRvid r": Figure(0.799, MF_TABLE5),
            "STS16 mean r": Figure(0.655, MF_TABLE5),
            "mean of STS12/13/16 means r": Figure(0.589, MF_TABLE5),
            "caption→image R@1": Figure(27.5, MF_RETRIEVAL),
            "caption→image R@10": Figure(70.5, MF_RETRIEVAL),
            "image→caption R@1": Figure(38.5, MF_RETRIEVAL),
            "image→caption R@10": Figure(79.3, MF_RETRIEVAL),
        },
        data_differences=(
            ("training data", "Flickr8k (and MS COCO, not compared here)", "{dataset}"),
            ("image features", "ResNet-152, 2048-d, mean of 10 crops", "{features}"),
            ("STS years", "STS12–16 (Table 5)", "{sts_years}"),
        ),
    ),
}
PAPER_NAMES = tuple(PAPERS)

# ----------------------------------------------------------------------------- budgets (data)


@dataclasses.dataclass(frozen=True)
class EvalSettings:
    """Evaluation sizes of a budget.

    Attributes:
      test_images: score on the first n Flickr8k test images (retrieval protocol ``all``)
        or ``None`` = the whole split (``flickr8k_1k``).
      same_image_n: pairs per label of the same-image test (capped by what the split has).
      transfer_kfold: k of the SentEval cross-validations (SentEval: 10; prototyping: 5).
      transfer_max_examples: cap on every SentEval split (seeded subset), or None.
    """

    test_images: int | None = None
    same_image_n: int = 5000
    transfer_kfold: int = 10
    transfer_max_examples: int | None = None


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much of a paper to train.

    Attributes:
      preset_map: preset record → the record trained instead.
      overrides: ``"*"`` (every run) or a preset record (after mapping) → nested
        overrides, applied in that order, before the run's own.
      ablations: train the ablation runs without ``--only``.
      evaluation: ``EvalSettings``.
      trainer_evaluates: let the trainer score STS into ``metrics.json`` and the model card.
      verbose: Keras ``fit`` verbosity.
    """

    name: str
    description: str
    preset_map: dict
    overrides: dict
    ablations: bool
    evaluation: EvalSettings
    trainer_evaluates: bool = True
    verbose: int = 2


SMOKE_SLICE = {"data": {"max_train_images": 64, "max_dev_images": 64, "batch_size": 32},
               "model": {"embedding_dim": 16},
               "train": {"epochs": 1, "select_on": "val_loss", "cycle_epochs": 1}}
# Tiny encoders (the keys each builder takes; sizes as in tests/test_presets.py).
SMOKE_ENCODERS = {
    "vete_rnn": {"word_dim": 8, "units": 8},
    "vete_cnn": {"word_dim": 8, "filters": 4},
    "bordes_cg_pg": {"word_dim": 8, "units": 8, "grounded_hidden": 8, "grounded_dim": 8},
    "two_branch_khard": {"hidden_units": [16]},
    "char_gru_attention": {"char_dim": 4, "units": 8, "attention_units": 8},
    "char_gru_attention_512": {"char_dim": 4, "units": 8, "attention_units": 8},
}

BUDGETS: dict[str, Budget] = {
    "full": Budget("full", "the preset records as the papers train them (epochs, sizes, schedules)",
                   preset_map={}, overrides={}, ablations=True, evaluation=EvalSettings()),
    "cpu": Budget(
        "cpu",
        "what fits 2 CPU cores: 5 epochs (bordes_cg_pg 8: its grouped epochs are shorter), the character "
        "model as char_gru_attention_512 for 8 epochs = 2 cosine cycles of 4; SentEval 5-fold",
        preset_map={"char_gru_attention": "char_gru_attention_512"},
        overrides={"*": {"train": {"epochs": 5}},
                   "bordes_cg_pg": {"train": {"epochs": 8}},
                   "char_gru_attention_512": {"train": {"epochs": 8, "cycle_epochs": 4}}},
        ablations=True, evaluation=EvalSettings(transfer_kfold=5)),
    "smoke": Budget(
        "smoke",
        "64 training / 64 dev images, 1 epoch, N = 16 and tiny encoders, main run only; scored on the "
        "first 64 Flickr8k test images (retrieval protocol `all`), SentEval capped at 200 examples, 2-fold",
        preset_map={},
        overrides={"*": SMOKE_SLICE, **{p: {"model": {"encoder": e}} for p, e in SMOKE_ENCODERS.items()}},
        ablations=False,
        # 2 folds: TREC's smallest class has 2 of the 200 sampled training questions.
        evaluation=EvalSettings(test_images=64, same_image_n=100, transfer_kfold=2, transfer_max_examples=200),
        trainer_evaluates=False, verbose=0),
}

# ----------------------------------------------------------------------------- preset records


def deep_merge(base: dict, overrides: dict | None) -> dict:
    """``grounded_text.presets.deep_merge`` (dicts merged key by key, anything else replaced)."""
    from grounded_text.presets import deep_merge as merge

    return merge(base, overrides or {})


def preset_config(name: str, overrides: dict | None = None):
    """The resolved config of record ``name`` with ``overrides`` (``grounded_text.models.registry.preset_config``)."""
    from grounded_text.models.registry import preset_config as config_of

    return config_of(name, overrides)


def record_note(name: str | None) -> str:
    """``"record `NAME`"``, with what it is a variant of (a name that is no record is shown as is)."""
    from grounded_text.presets import PRESETS

    record = PRESETS.get(name)
    return f"record `{name}`" + (f" (variant of `{record.variant_of}`)" if record and record.variant_of else "")


@dataclasses.dataclass
class PlannedRun:
    spec: RunSpec
    preset: str  # after the budget's mapping
    overrides: dict
    selected: bool
    reason: str = ""

    def config(self):
        return preset_config(self.preset, self.overrides)


def plan_runs(paper: str, budget: str, only=None, *, training: bool = True) -> list[PlannedRun]:
    """The runs of ``paper`` under ``budget``, with their overrides and whether they are selected.

    ``only``: run names or preset names; when given, exactly the runs named (by run name,
    the record's name or the mapped record's name) are selected, ablations included.
    Without it, a budget without ablations selects the main runs only when ``training``
    (evaluating runs found with ``--from-runs`` costs no training: all are selected).
    """
    b = BUDGETS[budget]
    out = []
    for spec in PAPERS[paper].runs:
        preset = b.preset_map.get(spec.preset, spec.preset)
        overrides = deep_merge(deep_merge(b.overrides.get("*", {}), b.overrides.get(preset, {})), spec.overrides)
        if only:
            selected = bool({spec.name, spec.preset, preset} & set(only))
            reason = "" if selected else "not named by --only"
        else:
            selected = spec.main or b.ablations or not training
            reason = "" if selected else f"ablation run: not trained by the {budget} budget (name it with --only)"
        out.append(PlannedRun(spec, preset, overrides, selected, reason))
    return out


def valid_only_names(papers) -> set:
    names = set()
    for paper in papers:
        for spec in PAPERS[paper].runs:
            names |= {spec.name, spec.preset}
            names |= {b.preset_map.get(spec.preset, spec.preset) for b in BUDGETS.values()}
    return names


# ----------------------------------------------------------------------------- locating runs


def _get(d, dotted: str, default=None):
    node = d
    for k in dotted.split("."):
        if not isinstance(node, dict) or k not in node:
            return default
        node = node[k]
    return node


_MISSING = object()


def record_names(spec: RunSpec) -> set:
    """The records a run of ``spec`` may have been trained as: its own and every budget's stand-in."""
    return {spec.preset} | {b.preset_map.get(spec.preset, spec.preset) for b in BUDGETS.values()}


def run_matches(spec: RunSpec, run_config: dict) -> bool:
    """Whether a run folder's ``metrics.json`` config is the planned run (see ``RunSpec.match``)."""
    if _get(run_config, "model.name") not in record_names(spec):
        return False
    for key, want in spec.match.items():
        got = _get(run_config, key, _MISSING)
        if got is _MISSING:
            if key not in spec.default_keys:
                return False
        elif got != want:
            return False
    return True


def find_run_dir(root: Path, paper: str, spec: RunSpec) -> tuple[Path | None, list]:
    """The trained run folder of ``spec`` under ``root``, and every folder that matched.

    Order: ``root/<run>``, ``root/<paper>/runs/<run>``, then any folder up to 4 levels down
    with a ``metrics.json`` whose config matches (the newest when several do).
    """
    for cand in (root / spec.name, root / paper / "runs" / spec.name, root):
        if (cand / "metrics.json").is_file() and (cand / "export").is_dir():
            cfg = json.loads((cand / "metrics.json").read_text()).get("config", {})
            # A folder named after the run only needs the right model; root itself must match.
            named = cand != root and _get(cfg, "model.name") in record_names(spec)
            if named or run_matches(spec, cfg):
                return cand, [str(cand)]
    found = []
    for metrics in sorted(root.glob("**/metrics.json")):
        if len(metrics.relative_to(root).parts) > 5 or not (metrics.parent / "export").is_dir():
            continue
        try:
            cfg = json.loads(metrics.read_text()).get("config", {})
        except (OSError, json.JSONDecodeError):
            continue
        if run_matches(spec, cfg):
            found.append(metrics.parent)
    found.sort(key=lambda p: (p / "metrics.json").stat().st_mtime, reverse=True)
    return (found[0] if found else None), [str(p) for p in found]


# ----------------------------------------------------------------------------- evaluation


class _Data:
    """Test splits loaded once per (dataset, features)."""

    def __init__(self, root: Path):
        self.root = root
        self.cache: dict = {}

    def test_pairs(self, data_cfg: dict, n_images: int | None):
        from grounded_text.config import DataConfig
        from grounded_text.data.prepared import load_pairs

        key = (data_cfg.get("dataset", "flickr8k"), data_cfg.get("features", "efficientnet_lite0"))
        if key not in self.cache:
            known = {f.name for f in dataclasses.fields(DataConfig)}
            self.cache[key] = load_pairs(DataConfig(**{k: v for k, v in data_cfg.items() if k in known}), self.root)
        pairs = self.cache[key].splits["test"]
        return pairs.first_images(n_images) if n_images else pairs


def _export_dir(run_dir: Path, candidates) -> Path | None:
    for name in candidates:
        if (run_dir / name / "saved_model.pb").is_file():
            return run_dir / name
    return None


def evaluate_run(run_dir: Path, paper: Paper, settings: EvalSettings, data: _Data, metrics: dict) -> dict:
    """Scores every space of a run with the paper's protocol.

    Returns:
      ``{space: evaluate_one(...) (+ "transfer", "export_dir")}``, or ``{space: {"status":
      "missing", "reason"}}`` for a space the run did not export.
    """
    from grounded_text.evaluation.encoders import EncoderSpec, load_encoder, load_image_encoder
    from grounded_text.evaluation.suite import evaluate_one, flickr_captioned

    proto = paper.protocol
    root = data.root
    sts_dir = root / "sts" if (root / "sts").is_dir() else None
    needs_test = bool({"retrieval", "structure", "same_image"} & set(proto.sections))
    test_pairs = data.test_pairs(metrics.get("config", {}).get("data", {}), settings.test_images) if needs_test else None
    image_encoder = None
    if "retrieval" in proto.sections and (run_dir / "image_export" / "saved_model.pb").is_file():
        image_encoder = load_image_encoder(run_dir / "image_export")
    n_images = len(set(test_pairs.image_ids.tolist())) if test_pairs is not None else 0
    retrieval_protocol = "flickr8k_1k" if settings.test_images is None and n_images == 1000 else "all"
    split_name = "flickr8k/test" + (f" (first {settings.test_images} images)" if settings.test_images else "")
    same_sets = [flickr_captioned(test_pairs, split_name)] if "same_image" in proto.sections else []
    out = {}
    for space, candidates in proto.spaces:
        export = _export_dir(run_dir, candidates)
        if export is None:
            out[space] = {"status": "missing", "reason": f"the run has no {' or '.join(c + '/' for c in candidates)}"}
            continue
        t0 = time.perf_counter()
        spec = EncoderSpec(f"{run_dir.name}:{space}", "model", load_encoder(export), image_encoder, str(export))
        res = evaluate_one(spec, sts_dir=sts_dir, test_pairs=test_pairs, same_image_sets=same_sets,
                           sections=proto.sections, same_image_n=settings.same_image_n, seed=0, mnno_ks=(10,),
                           retrieval_protocol=retrieval_protocol)
        if "retrieval" in proto.sections and image_encoder is None:
            res["retrieval"] = {"status": "unavailable", "reason": "the run has no image_export/"}
        if proto.transfer:
            res["transfer"] = _transfer(spec.encoder, root, settings)
        res.update({"status": "ok", "export_dir": str(export), "split": split_name,
                    "seconds_total": round(time.perf_counter() - t0, 2)})
        out[space] = res
    return out


def _transfer(encoder, root: Path, settings: EvalSettings) -> dict:
    """Every SentEval task (``evaluate_task``); a task that cannot run is recorded, not fatal."""
    from grounded_text.evaluation.encoders import EmbeddingCache
    from grounded_text.evaluation.transfer import TASKS, ClassifierConfig, evaluate_task

    senteval = root / "senteval"
    if not senteval.is_dir():
        return {"status": "unavailable", "reason": f"no {senteval}"}
    config = ClassifierConfig(kfold=settings.transfer_kfold)
    emb = EmbeddingCache(encoder)
    out = {}
    for task in TASKS:
        try:
            out[task] = evaluate_task(emb, task, senteval, sts_dir=root / "sts", config=config,
                                      max_examples=settings.transfer_max_examples)
        except (FileNotFoundError, ValueError) as e:  # missing files, or a class too small for k folds
            out[task] = {"task": task, "status": "error", "acc": None, "reason": str(e)}
            log.warning("transfer %s: %s", task, e)
    return out


# ----------------------------------------------------------------------------- headline figures


def _sts_year_means(sts: dict) -> dict:
    return {y: node["pearson"]["mean"] for y, node in sts.items() if isinstance(node, dict) and "subsets" in node}


def mean_of_year_means(sts: dict, years=("STS12", "STS13", "STS16")):
    """Mean over ``years`` of each year's mean Pearson (None unless every year was scored)."""
    means = _sts_year_means(sts)
    vals = [means.get(y) for y in years]
    return None if any(v is None for v in vals) else sum(vals) / len(vals)


def _sts_rows(sts: dict, *, subsets: bool, spearman: bool) -> dict:
    rows = {}
    for year, node in sts.items():
        if "subsets" in node:
            if subsets:
                for sub, r in node["subsets"].items():
                    rows[f"{year} {sub} r"] = r["pearson"]
            rows[f"{year} mean r"] = node["pearson"]["mean"]
            if spearman:
                rows[f"{year} mean ρ"] = node["spearman"]["mean"]
    for key, label in (("STSBenchmark", "STS-B test"), ("SICK", "SICK-R test")):
        if key in sts:
            rows[f"{label} r (cosine)"] = sts[key]["test"]["pearson"]
            if spearman:
                rows[f"{label} ρ (cosine)"] = sts[key]["test"]["spearman"]
    return rows


def _retrieval_rows(ret: dict) -> dict:
    rows = {}
    if not ret or "caption_to_image" not in ret:
        return rows
    for direction, label in (("caption_to_image", "caption→image"), ("image_to_caption", "image→caption")):
        for k in ("R@1", "R@5", "R@10", "medr"):
            rows[f"{label} {k}"] = ret[direction][k]
    return rows


def headline(paper: str, evaluation: dict) -> dict:
    """``{label: value}`` of the paper's measures, from ``evaluate_run``'s output (spaces prefixed
    when the protocol has several)."""
    out = {}
    spaces = PAPERS[paper].protocol.spaces
    for space, _ in spaces:
        ev = evaluation.get(space, {})
        if ev.get("status") != "ok":
            continue
        rows: dict = {}
        sts = ev.get("sts", {})
        if paper == "merckx_frank":
            rows.update(_sts_rows(sts, subsets=True, spearman=False))
            rows["mean of STS12/13/16 means r"] = mean_of_year_means(sts)
            for key, label in (("STSBenchmark", "STS-B test"), ("SICK", "SICK-R test")):
                if key in ev.get("supervised_sts", {}):
                    rows[f"{label} r (supervised)"] = ev["supervised_sts"][key]["test"]["pearson"]
            rows.update(_retrieval_rows(ev.get("retrieval")))
        elif paper == "kolluru":
            rows.update(_retrieval_rows(ev.get("retrieval")))
            if "rsum" in ev.get("retrieval", {}):
                rows["rsum"] = ev["retrieval"]["rsum"]
        elif paper == "vete":
            rows.update(_sts_rows(sts, subsets=False, spearman=False))
            for name, r in ev.get("same_image", {}).items():
                rows["same-image r"] = r["pearson"]
        elif paper == "bordes":
            rows.update(_sts_rows(sts, subsets=False, spearman=True))
            st = ev.get("structure", {})
            if st:
                rows.update({"mNNO@10": st.get("mNNO@10"), "ρ_vis": st["rho_vis"]["spearman"],
                             "C_inter": st["C_inter"], "C_intra": st["C_intra"]})
            for task, r in (ev.get("transfer") or {}).items():
                if isinstance(r, dict) and r.get("status") == "ok":
                    rows[f"{task} acc"] = r["acc"]
                    if "f1" in r:
                        rows[f"{task} F1"] = r["f1"]
        prefix = f"{space}: " if len(spaces) > 1 else ""
        out.update({prefix + k: v for k, v in rows.items()})
    return out


# ----------------------------------------------------------------------------- one paper


def _trained_with(metrics: dict, overrides: dict | None) -> str:
    """What the run trained: its size and length, and the overrides of its record (when we trained it)."""
    cfg = metrics.get("config", {})
    d, m, t = cfg.get("data", {}), cfg.get("model", {}), cfg.get("train", {})
    n_img = metrics.get("data", {}).get("train_images")
    images = f"{n_img:,} training images" if n_img else "training images: ?"
    epochs = t.get("epochs")
    parts = [f"{epochs} epoch{'' if epochs == 1 else 's'}", images, f"N = {m.get('embedding_dim')}", f"batch {d.get('batch_size')}"]
    if overrides:
        parts.append("overrides of the record " + json.dumps(overrides, sort_keys=True))
    return ", ".join(parts)


def _config_key(cfg_dict: dict) -> str:
    return json.dumps(cfg_dict, sort_keys=True, default=str)


def reproduce_paper(paper: str, budget: str, output_dir: Path, data_dir=None, *, only=None,
                    from_runs: Path | None = None, command: str = "") -> dict:
    """Trains (or finds) and evaluates every planned run of ``paper``; writes results.json / .md.

    Returns:
      The ``results.json`` content.
    """
    from grounded_text.data.paths import resolve_data_dir

    t_start = time.perf_counter()
    b = BUDGETS[budget]
    p = PAPERS[paper]
    root = resolve_data_dir(data_dir)
    out_dir = Path(output_dir) / paper
    out_dir.mkdir(parents=True, exist_ok=True)
    data = _Data(root)
    runs: dict = {}
    for planned in plan_runs(paper, budget, only, training=from_runs is None):
        spec = planned.spec
        node: dict = {"preset": planned.preset, "main": spec.main,
                      "groups": [list(g) for g in spec.groups], "overrides": planned.overrides}
        runs[spec.name] = node
        if not planned.selected:
            node.update({"status": "skipped", "reason": planned.reason})
            continue
        if from_runs is not None:
            run_dir, candidates = find_run_dir(Path(from_runs), paper, spec)
            node["candidates"] = candidates
            if run_dir is None:
                node.update({"status": "missing", "reason": f"no trained run of {spec.name} under {from_runs}"})
                print(f"[{paper}] {spec.name}: no run found under {from_runs}", flush=True)
                continue
            metrics = json.loads((run_dir / "metrics.json").read_text())
        else:
            config = planned.config()  # resolved (preset_config applies resolve_config)
            resolved = config.to_dict()
            run_dir = out_dir / "runs" / spec.name
            metrics_path = run_dir / "metrics.json"
            previous = json.loads(metrics_path.read_text()) if metrics_path.is_file() else None
            if previous and _config_key(previous.get("config")) == _config_key(resolved) and (run_dir / "export").is_dir():
                metrics = previous
                node["reused"] = True
                print(f"[{paper}] {spec.name}: reusing {run_dir}", flush=True)
            else:
                from grounded_text.train import train

                print(f"[{paper}] {spec.name}: training preset {planned.preset} ({budget} budget) into {run_dir}",
                      flush=True)
                metrics = train(config, root, run_dir, evaluate=b.trainer_evaluates, verbose=b.verbose)
        node.update({
            "status": "ok", "run_dir": str(run_dir), "config": metrics.get("config"),
            "record": (metrics.get("config") or {}).get("model", {}).get("name"),
            "trained_with": _trained_with(metrics, None if from_runs is not None else planned.overrides),
            "training": {"best_epoch": metrics.get("selection", {}).get("best_epoch"),
                         "selection": metrics.get("selection", {}).get("monitor"),
                         "exported": metrics.get("exported", {}).get("kind"),
                         "fit_seconds": metrics.get("timing_seconds", {}).get("fit"),
                         "train_images": metrics.get("data", {}).get("train_images"),
                         "feature_file": metrics.get("data", {}).get("feature_file"),
                         "feature_dim": metrics.get("data", {}).get("feature_dim")},
        })
        print(f"[{paper}] {spec.name}: evaluating ({', '.join(p.protocol.sections)}"
              f"{', transfer' if p.protocol.transfer else ''})", flush=True)
        node["evaluation"] = evaluate_run(run_dir, p, b.evaluation, data, metrics)
        node["headline"] = headline(paper, node["evaluation"])
    results = {
        "paper": paper, "title": p.title, "citation": p.citation,
        "budget": budget, "budget_description": b.description,
        "mode": "from_runs" if from_runs is not None else "train",
        "from_runs": str(from_runs) if from_runs is not None else None,
        "command": command, "data_dir": str(root),
        "evaluation_settings": dataclasses.asdict(b.evaluation),
        "protocol": {"sections": list(p.protocol.sections), "spaces": [s for s, _ in p.protocol.spaces],
                     "transfer": p.protocol.transfer, "description": list(p.protocol.description)},
        "runs": runs,
    }
    results["figures"] = figure_rows(paper, runs)
    results["ablations"] = ablation_tables(paper, runs)
    results["data_differences"] = data_differences(paper, runs, root)
    results["notes"] = list(p.notes)
    results["seconds"] = round(time.perf_counter() - t_start, 1)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, default=_json_default))
    (out_dir / "results.md").write_text(format_paper_markdown(results) + "\n")
    return results


def _json_default(x):
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return x.item()
    except ImportError:
        pass
    return str(x)


def _main_run(paper: str, runs: dict) -> str | None:
    for spec in PAPERS[paper].runs:
        if spec.main and runs.get(spec.name, {}).get("status") == "ok":
            return spec.name
    return None


def figure_rows(paper: str, runs: dict) -> list[dict]:
    """Paper figure vs ours (the main run), every headline measure plus every recorded figure."""
    main = _main_run(paper, runs)
    ours = runs[main]["headline"] if main else {}
    figs = PAPERS[paper].figures
    rows = []
    for label in list(ours) + [f for f in figs if f not in ours]:
        fig = figs.get(label)
        mine = ours.get(label)
        diff = None if fig is None or mine is None else mine - fig.value
        rows.append({"measure": label, "paper": fig.value if fig else None,
                     "source": fig.source if fig else None, "ours": mine, "difference": diff, "run": main})
    return rows


def ablation_tables(paper: str, runs: dict) -> dict:
    """``{ablation: [{"setting", "run", "status", measures...}]}`` from the runs' groups."""
    tables: dict = {}
    for spec in PAPERS[paper].runs:
        for group, setting in spec.groups:
            node = runs.get(spec.name, {})
            tables.setdefault(group, []).append({"setting": setting, "run": spec.name,
                                                 "status": node.get("status"),
                                                 "measures": node.get("headline", {})})
    return tables


def _features_text(runs: dict) -> str:
    seen = []
    for node in runs.values():
        t = node.get("training") or {}
        if node.get("status") == "ok" and t.get("feature_file"):
            stem = Path(str(t["feature_file"])).stem
            views = " (whole image resized, 1 view)" if stem.startswith(("efficientnet", "mobilenet")) else ""
            text = f"{stem}, {t.get('feature_dim')}-d{views}"
            if text not in seen:
                seen.append(text)
    return "; ".join(seen) or "(no run)"


def _dataset_text(runs: dict) -> str:
    seen = []
    for node in runs.values():
        if node.get("status") != "ok":
            continue
        d = (node.get("config") or {}).get("data", {})
        name = d.get("dataset", "flickr8k")
        n = (node.get("training") or {}).get("train_images")
        text = ("Flickr8k train split" if name == "flickr8k" else str(name)) + (f", {n:,} images" if n else "")
        if text not in seen:
            seen.append(text)
    return "; ".join(seen) or "(no run)"


def data_differences(paper: str, runs: dict, root: Path) -> list[dict]:
    from grounded_text.data.sts import sts_year_dirs

    sts_dir = root / "sts"
    years = sorted(sts_year_dirs(sts_dir)) if sts_dir.is_dir() else []
    extra = [n for n, d in (("STS-B", "STSBenchmark"), ("SICK", "SICK")) if (sts_dir / d).is_dir()]
    fill = {"features": _features_text(runs), "dataset": _dataset_text(runs),
            "sts_years": ", ".join(years + extra) or "none"}
    return [{"aspect": a, "paper": pv, "ours": ov.format(**fill)} for a, pv, ov in PAPERS[paper].data_differences]


# ----------------------------------------------------------------------------- Markdown


def _fmt(x, label: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    text = f"{x:.1f}" if re.search(r"R@|medr|acc|F1|rsum", label) else f"{x:.3f}"
    return text.replace("-", "−")


def _signed(x, label: str) -> str:
    if x is None:
        return "–"
    s = _fmt(abs(x), label)
    return ("+" if x >= 0 else "−") + s


def format_paper_markdown(results: dict) -> str:
    """The paper's section: setup, figures (paper, ours, difference), ablations, skipped runs."""
    lines = [f"## {results['title']}", "", f"*{results['citation']}*", ""]
    mode = ("evaluates already-trained runs found under `" + str(results["from_runs"]) + "`"
            if results["mode"] == "from_runs" else "trains and evaluates")
    ev = results["evaluation_settings"]
    scored = (f"Flickr8k test split, first {ev['test_images']} images (retrieval protocol `all`)"
              if ev["test_images"] else "Flickr8k test split, 1,000 images (retrieval protocol `flickr8k_1k`)")
    scored += f"; same-image N = {ev['same_image_n']}" if "same_image" in results["protocol"]["sections"] else ""
    if results["protocol"]["transfer"]:
        scored += (f"; SentEval {ev['transfer_kfold']}-fold"
                   + (f", at most {ev['transfer_max_examples']} examples per split" if ev["transfer_max_examples"]
                      else ", all examples"))
    lines += ["| | |", "|---|---|",
              f"| command | `{results['command']}` ({mode}) |",
              f"| budget | `{results['budget']}`: {results['budget_description']} |",
              f"| scored on | {scored} |"]
    for name, node in results["runs"].items():
        if node.get("status") == "ok":
            lines.append(f"| run `{name}` | {record_note(node.get('record'))}: {node['trained_with']}; best epoch "
                         f"{node['training']['best_epoch']} by {node['training']['selection']}, exported "
                         f"{node['training']['exported']} |")
    lines += ["", "What differs from the paper's data:", "", "| aspect | paper | ours |", "|---|---|---|"]
    lines += [f"| {d['aspect']} | {d['paper']} | {d['ours']} |" for d in results["data_differences"]]
    lines += ["", "Protocol: " + "; ".join(results["protocol"]["description"]) + ".", ""]
    main = next((r["run"] for r in results["figures"] if r["run"]), None)
    lines += [f"Figures (ours: run `{main}`; “–” = not reported here / not measured):", "",
              "| measure | paper | ours | ours − paper | source of the paper's figure |",
              "|---|---:|---:|---:|---|"]
    for r in results["figures"]:
        paper_cell = _fmt(r["paper"], r["measure"]) if r["paper"] is not None else "not reported here"
        lines.append(f"| {r['measure']} | {paper_cell} | {_fmt(r['ours'], r['measure'])} | "
                     f"{_signed(r['difference'], r['measure'])} | {r['source'] or '–'} |")
    for group, rows in results["ablations"].items():
        if len(rows) < 2:
            continue
        cols = []
        for r in rows:
            cols += [c for c in r["measures"] if c not in cols]
        lines += ["", f"Ablation: {group}", "", "| setting | run | " + " | ".join(cols) + " |",
                  "|---|---|" + "---:|" * len(cols)]
        for r in rows:
            if r["status"] == "ok":
                cells = [_fmt(r["measures"].get(c), c) for c in cols]
            else:
                cells = [f"({r['status']})"] + ["" for _ in cols[1:]] if cols else []
            lines.append(f"| {r['setting']} | `{r['run']}` | " + " | ".join(cells) + " |")
    gaps = []
    for name, node in results["runs"].items():
        if node.get("status") != "ok":
            gaps.append(f"* `{name}`: {node['status']} — {node.get('reason', '')}")
            continue
        for space, ev in node.get("evaluation", {}).items():
            if ev.get("status") != "ok":
                gaps.append(f"* `{name}`, {space} space: {ev.get('status')} — {ev.get('reason', '')}")
                continue
            for section in ("retrieval",):
                if isinstance(ev.get(section), dict) and ev[section].get("status") == "unavailable":
                    gaps.append(f"* `{name}`, {section}: unavailable — {ev[section]['reason']}")
            for task, r in (ev.get("transfer") or {}).items():
                if isinstance(r, dict) and r.get("status") not in (None, "ok"):
                    gaps.append(f"* `{name}`, {space} space, SentEval {task}: {r['status']} — {r.get('reason', '')}")
    if gaps:
        lines += [""] + gaps
    for note in results.get("notes", []):
        lines += ["", note]
    return "\n".join(lines)


DOCS_HEADER = """# Reproducing the papers

Written by `python -m grounded_text.reproduce PAPER --budget BUDGET --output-dir DIR --write-docs
docs/reproduction.md` (one section per paper, replaced when that paper is run again). Each run is a
preset record (`grounded_text.presets`) trained by `grounded_text.train.train` and scored by the
package's evaluation code (`grounded_text.evaluation`); the papers' figures are data in
`grounded_text/reproduce.py` with their table citations, and "not reported here" where this
repository does not record them. Budgets: `full` = the records as the papers train them, `cpu` =
what fits 2 CPU cores, `smoke` = a 64-image plumbing check (its figures mean nothing).
`--from-runs DIR` scores runs trained separately with `python -m grounded_text.train`. A paper
without a section below has not been put in this report yet.
"""


def _markers(paper: str) -> tuple[str, str]:
    return f"<!-- reproduce:{paper}:start -->", f"<!-- reproduce:{paper}:end -->"


def write_docs(path: str | Path, results_by_paper: dict) -> Path:
    """Writes or updates ``path``: each paper's section between its markers, in ``PAPERS`` order."""
    path = Path(path)
    text = path.read_text() if path.is_file() else DOCS_HEADER
    for paper in PAPER_NAMES:
        if paper not in results_by_paper:
            continue
        start, end = _markers(paper)
        section = f"{start}\n{format_paper_markdown(results_by_paper[paper])}\n{end}"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        if pattern.search(text):
            text = pattern.sub(lambda _: section, text)
        else:
            # Keep PAPERS order: insert before the first later paper's section, else append.
            later = [_markers(q)[0] for q in PAPER_NAMES[PAPER_NAMES.index(paper) + 1:] if _markers(q)[0] in text]
            if later:
                i = text.index(later[0])
                text = text[:i] + section + "\n\n" + text[i:]
            else:
                text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- CLI


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m grounded_text.reproduce", description=__doc__.split("\n\n")[0])
    p.add_argument("paper", metavar="PAPER", choices=PAPER_NAMES + ("all",),
                   help="one of " + ", ".join(PAPER_NAMES) + " or all")
    p.add_argument("--budget", default="full", choices=sorted(BUDGETS),
                   help="full (the paper's records), cpu (fits 2 cores), smoke (64-image plumbing check)")
    p.add_argument("--output-dir", required=True, help="writes OUTPUT_DIR/<paper>/{results.json,results.md,runs/}")
    p.add_argument("--data-dir", default=None, help="data root (default: $GROUNDED_TEXT_DATA)")
    p.add_argument("--only", nargs="+", default=None, metavar="NAME",
                   help="train/evaluate only these runs (run names or preset names), ablations included")
    p.add_argument("--from-runs", default=None, metavar="DIR",
                   help="evaluate already-trained run folders under DIR instead of training")
    p.add_argument("--write-docs", default=None, metavar="FILE", help="write/update this Markdown report")
    a = p.parse_args(argv)
    papers = list(PAPER_NAMES) if a.paper == "all" else [a.paper]
    if a.only:
        valid = valid_only_names(papers)
        bad = sorted(set(a.only) - valid)
        if bad:
            p.error(f"--only {' '.join(bad)}: no such run or preset in {a.paper}; choose from {sorted(valid)}")
    if a.from_runs is not None and not Path(a.from_runs).is_dir():
        p.error(f"--from-runs {a.from_runs}: not a directory")
    a.papers = papers
    return a


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parse_args(argv)
    command = "python -m grounded_text.reproduce " + shlex.join(argv)
    results = {}
    for paper in a.papers:
        if a.only and not any(r.selected for r in plan_runs(paper, a.budget, a.only, training=not a.from_runs)):
            continue  # `all --only vete_bow`: the other papers have nothing to do
        results[paper] = reproduce_paper(paper, a.budget, Path(a.output_dir), a.data_dir, only=a.only,
                                         from_runs=Path(a.from_runs) if a.from_runs else None, command=command)
        print(format_paper_markdown(results[paper]) + "\n", flush=True)
        print(f"wrote {Path(a.output_dir) / paper / 'results.json'}", flush=True)
    if a.write_docs:
        print(f"wrote {write_docs(a.write_docs, results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
