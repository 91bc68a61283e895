"""The reproduction plans as data: per paper, the runs trained, the protocol they are scored by,
the paper's published rows beside ours and what differs in the data (``PAPERS``), and how much
of each plan a budget trains (``BUDGETS``). Imports no TensorFlow.

``plan_runs`` turns a paper and a budget into the planned runs (preset record, dotted
overrides, selected or not); ``python -m grounded_text.reproduce`` trains and scores them.
"""

from __future__ import annotations

import dataclasses

from grounded_text.config import evaluation as protocols
from grounded_text.config.evaluation import EvalSettings, Protocol
from grounded_text.papers.plans import RunPlan, merge_overrides
from grounded_text.papers.presets import tiny_encoders
from grounded_text.papers.rows import PUBLISHED, mf_headline_figures


@dataclasses.dataclass(frozen=True)
class RunSpec(RunPlan):
    """One training run of a paper's plan (a ``RunPlan``: name, preset record, dotted overrides).

    Attributes:
      main: trained by every budget; other runs are ablations (not trained by ``smoke``
        unless named with ``--only``).
      groups: ``(ablation name, setting label)`` pairs: the rows this run gives.
      match: dotted config keys → values that identify the run among ``--from-runs``
        folders (``model.name`` is always checked).
      default_keys: keys of ``match`` that a run may leave unset because the value is
        the preset's own (a run trained without ``--loss-param k=1`` is the K = 1 run).
    """

    main: bool = False
    groups: tuple = ()
    match: dict = dataclasses.field(default_factory=dict)
    default_keys: tuple = ()


@dataclasses.dataclass(frozen=True)
class Paper:
    key: str
    title: str
    citation: str
    runs: tuple
    protocol: Protocol
    figures: dict  # headline label → HeadlineFigure
    data_differences: tuple  # (aspect, the paper, ours; "{features}" etc. filled from the runs)
    notes: tuple = ()
    figures_key: str = ""  # the paper's key in grounded_text.papers.published
    published: tuple = ()  # Published rows: the paper's tables beside ours
    derived_means: tuple = ()  # (table, column, years): year means of a table's subsets (derived_means)
    baselines: tuple = ()  # (table, "row" | "column"): the table's published systems beside ours (baseline_tables)


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much of a paper to train.

    Attributes:
      preset_map: preset record → the record trained instead.
      overrides: ``"*"`` (every run) or a preset record (after mapping) → dotted overrides,
        applied in that order, before the run's own.
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


@dataclasses.dataclass
class PlannedRun:
    spec: RunSpec
    preset: str  # after the budget's mapping
    overrides: dict  # dotted: the budget's, then the run's
    selected: bool
    reason: str = ""
    twin: str | None = None  # the planned run this one is the same as under the budget

    def config(self):
        """The resolved config (``grounded_text.papers.plans.resolve`` of the mapped record)."""
        return dataclasses.replace(self.spec, preset=self.preset, overrides=self.overrides).config()


_FEATURES = ("image features", "InceptionV3, 2048-d", "{features}")
_STS_YEARS = ("STS years", "held-out STS14/15 reported in the papers' protocol", "{sts_years}")
_K = "model.loss_params.k"


PAPERS: dict[str, Paper] = {
    "vete": Paper(
        "vete", "VETE (Kurach et al. 2017)",
        "Kurach, Gelly, Jastrzebski, Haeusser, Teytaud, Vincent & Bousquet 2017, "
        "\"Better Text Understanding Through Image-To-Text Transfer\"",
        runs=(
            RunSpec("vete_bow", "vete_bow", main=True, groups=(("encoder", "BOW"), ("loss", "pearson")),
                    match={"model.loss": "pearson"}),
            RunSpec("vete_rnn", "vete_rnn", groups=(("encoder", "RNN"),), match={"model.loss": "pearson"}),
            RunSpec("vete_cnn", "vete_cnn", groups=(("encoder", "CNN"),), match={"model.loss": "pearson"}),
            # The loss ablation (§5.2) on VETE-BOW, the cheapest encoder: our choice of base model.
            *(RunSpec(f"vete_bow_{loss}", "vete_bow", {"model.loss": loss}, groups=(("loss", loss),),
                      match={"model.loss": loss}) for loss in ("covariance", "skt", "rank")),
        ),
        protocol=Protocol(("sts", "same_image"), description=(protocols.STS_ALL, protocols.SAME_IMAGE),
                          figures=("sts", "same_image"), same_image_n=1000),  # VETE §4.3: 1,000 + 1,000
        figures={},
        figures_key="kurach2017_vete",
        published=PUBLISHED["vete"],
        data_differences=(("training data", "MS COCO and larger caption sets", "{dataset}"), _FEATURES,
                          ("same-image test", "COCO-Test / Pin-Test (§4.3)", "Flickr8k test captions"), _STS_YEARS),
    ),
    "bordes": Paper(
        "bordes", "Grounded space (Bordes et al. 2019)",
        "Bordes, Zablocki, Soulier, Piwowarski & Gallinari, EMNLP 2019, \"Incorporating Visual "
        "Semantics into Sentence Representations within a Grounded Space\"",
        runs=(RunSpec("bordes_cg_pg", "bordes_cg_pg", main=True),),
        protocol=Protocol(("sts", "structure"),
                          spaces=(("textual", ("export_textual", "export")), ("grounded", ("export_grounded",))),
                          transfer=True, description=(protocols.STS_ALL, protocols.STRUCTURE, protocols.TRANSFER),
                          figures=(("sts", {"spearman": True}), "structure", "transfer")),
        figures={},
        figures_key="bordes2019_grounded_space",
        published=PUBLISHED["bordes"],
        data_differences=(("training data", "MS COCO (grounding) + BookCorpus (textual loss L_T)",
                           "{dataset}; no textual loss (C_g + P_g only)"), _FEATURES,
                          ("sentence encoder", "SkipThought's GRU (d_t = 2048, 620-d words, 20K vocabulary with "
                           "vocabulary expansion, §4.4), trained on BookCorpus; the grounded models of Table 1 start "
                           "from it (\"the sentence encoder is initialized with T\", §4.2)",
                           "a GRU over 128-d word embeddings (N = 128), trained from scratch on the Flickr8k captions "
                           "alone: no SkipThought initialisation"),
                          _STS_YEARS),
        baselines=(("Table 1", "row"),),
        notes=("The textual space is `export_textual/` (or `export/` for runs that predate it) and the "
               "grounded space `export_grounded/`; a space the run did not export is reported missing.",),
    ),
    "kolluru": Paper(
        "kolluru", "Two-branch network with K-hard negatives (Kolluru)",
        "Kolluru, two-branch network (§3.1, after Wang et al. 2016), K-hardest negative loss (eq. 3)",
        runs=(
            RunSpec("two_branch_khard_k1", "two_branch_khard", {_K: 1}, main=True, groups=(("K", "K = 1"),),
                    match={_K: 1}, default_keys=(_K,)),
            RunSpec("two_branch_khard_k5", "two_branch_khard", {_K: 5}, groups=(("K", "K = 5"),), match={_K: 5}),
            RunSpec("two_branch_khard_k10", "two_branch_khard", {_K: 10}, groups=(("K", "K = 10"),),
                    match={_K: 10}),
        ),
        protocol=Protocol(("retrieval",), description=(protocols.RETRIEVAL,), figures=("retrieval", "rsum")),
        figures={},
        figures_key="kolluru_two_branch",
        published=PUBLISHED["kolluru"],
        data_differences=(("training data", "Flickr30K train, 29,783 images × 5 captions (Table 1); MSCOCO train, "
                           "about 121,000 images × 5 captions (Table 2) (§4.1)", "{dataset}"),
                          ("image features", "VGG19 (4096-d) / ResNet50 (stated as 512-d), penultimate FC "
                           "(§3.1, §4.4.1)", "{features}")),
        notes=("The preset's K = 1 is the thesis's choice (it finds K = 1 best and K = 10 worse, Tables 1–2); "
               "its figures stand above beside ours, as the nearest measure: its test sets are Flickr30K's and "
               "MSCOCO's 1,000-image tests, ours Flickr8k's.",),
    ),
    "merkx_frank": Paper(
        "merkx_frank", "Character-level grounding (Merkx & Frank 2019)",
        "Merkx & Frank 2019, \"Learning semantic sentence representations from visually grounded "
        "language without lexical knowledge\", Natural Language Engineering 25",
        runs=(RunSpec("char_gru_attention", "char_gru_attention", main=True, groups=(("width", "n = 1024"),)),
              # §3.3 tests n in {512, 1024, 2048}; §4.1 reports n = 1024. The half width is the
              # CPU budget's stand-in, so its difference is measured at the same budget.
              RunSpec("char_gru_attention_512", "char_gru_attention_512", groups=(("width", "n = 512"),),
                      match={"model.encoder.units": 512})),
        # Their SentEval batcher (evaluate_char.py:58-60) ends every test sentence in " ." unless
        # its last token is "."; every run is scored with that rule, so Table 5 is compared on
        # their protocol.
        protocol=Protocol(("sts", "supervised", "retrieval"), supervised_model="senteval",
                          sentence_end="space_period_tokens",
                          description=(protocols.STS_ALL, protocols.SUPERVISED, protocols.RETRIEVAL,
                                       protocols.AUTHORS_SENTENCE_ENDS),
                          figures=(("sts", {"subsets": True}), "mean_of_year_means", "supervised", "retrieval")),
        figures=mf_headline_figures(), figures_key="merkx2019_char_grounding",
        published=PUBLISHED["merkx_frank"],
        derived_means=("Table 5", "char-GRU (Flickr8k)", ("STS12", "STS13", "STS16")),
        baselines=(("Table 2", "row"), ("Table 5", "column")),
        data_differences=(("training data", "Flickr8k train, 6,000 images × 5 captions (and MS COCO, not compared "
                                            "here)", "{dataset}"),
                          ("image features", "ResNet-152, 2048-d, mean of 10 crops", "{features}"),
                          ("STS years", "STS12–16 (Table 5)", "{sts_years}"),
                          # §3.3: "For ensembling we use the two snapshots with the highest performance
                          # on the development data"; the budget decides how many snapshots we have.
                          ("model scored", "an ensemble of the 2 best of 8 snapshots (32 epochs, one every 4th; "
                           "§3.3)", "each run's export (the trainer's ensemble of the 2 best snapshots by dev "
                           "rsum; a run of one cycle has one snapshot)")),
    ),
}
PAPER_NAMES = tuple(PAPERS)


SMOKE_SLICE = {"data.max_train_images": 64, "data.max_dev_images": 64, "data.batch_size": 32,
               "model.embedding_dim": 16, "train.epochs": 1, "train.select_on": "val_loss", "train.cycle_epochs": 1}
# Tiny encoders (the keys each builder takes; sizes as in tests/test_presets.py).
SMOKE_ENCODERS = tiny_encoders()

BUDGETS: dict[str, Budget] = {
    "full": Budget("full", "the preset records as the papers train them (epochs, sizes, schedules)",
                   preset_map={}, overrides={}, ablations=True, evaluation=EvalSettings()),
    "cpu": Budget(
        "cpu",
        "what fits 2 CPU cores: 5 epochs (bordes_cg_pg 8: its grouped epochs are shorter), the character "
        "model as char_gru_attention_512 for 8 epochs = 2 cosine cycles of 4; SentEval 5-fold",
        preset_map={"char_gru_attention": "char_gru_attention_512"},
        overrides={"*": {"train.epochs": 5}, "bordes_cg_pg": {"train.epochs": 8},
                   "char_gru_attention_512": {"train.epochs": 8, "train.cycle_epochs": 4}},
        ablations=True, evaluation=EvalSettings(transfer_kfold=5)),
    "cycle": Budget(
        "cycle",
        "one cosine cycle: 4 epochs of every run (one cycle of §3.3's schedule, where its Figure 4 puts the "
        "semantic peak), the character model at §4.1's n = 1024 with n = 512 beside it; SentEval 5-fold",
        preset_map={}, overrides={"*": {"train.epochs": 4}},
        ablations=True,
        evaluation=EvalSettings(transfer_kfold=5)),
    "smoke": Budget(
        "smoke",
        "64 training / 64 dev images, 1 epoch, N = 16 and tiny encoders, main run only; scored on the "
        "first 64 Flickr8k test images (retrieval protocol `all`), SentEval capped at 200 examples, 2-fold",
        preset_map={},
        overrides={"*": SMOKE_SLICE, **{p: {"model.encoder": e} for p, e in SMOKE_ENCODERS.items()}},
        ablations=False,
        # 2 folds: TREC's smallest class has 2 of the 200 sampled training questions.
        evaluation=EvalSettings(test_images=64, same_image_n=100, transfer_kfold=2, transfer_max_examples=200,
                                supervised_model="ridge"),
        trainer_evaluates=False, verbose=0),
}


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
        overrides = merge_overrides(b.overrides.get("*", {}), b.overrides.get(preset, {}), spec.overrides)
        if only:
            selected = bool({spec.name, spec.preset, preset} & set(only))
            reason = "" if selected else "not named by --only"
        else:
            selected = spec.main or b.ablations or not training
            reason = "" if selected else f"ablation run: not trained by the {budget} budget (name it with --only)"
        twin = next((r.spec.name for r in out if (r.preset, r.overrides) == (preset, overrides)), None)
        if twin is not None:  # a budget's stand-in may make an ablation the main run itself
            selected, reason = False, f"the same run as {twin} under the {budget} budget"
        out.append(PlannedRun(spec, preset, overrides, selected, reason, twin))
    return out


def record_names(spec: RunSpec) -> set:
    """The records a run of ``spec`` may have been trained as: its own and every budget's stand-in."""
    return {spec.preset} | {b.preset_map.get(spec.preset, spec.preset) for b in BUDGETS.values()}


def valid_only_names(papers) -> set:
    return {n for paper in papers for spec in PAPERS[paper].runs for n in record_names(spec) | {spec.name}}


#: Paper keys kept for one release after a rename: old key → new key (a warning names the new one
#: and the release that removes the old).
DEPRECATED_PAPER_KEYS = {"merckx_frank": "merkx_frank"}  # Merkx was misspelt in 0.1.0; removed in 0.3.0
