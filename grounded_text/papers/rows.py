"""The papers' tables as rows to set beside ours: per paper, which published rows stand beside
which of our runs (``PUBLISHED``), the nearest measure of ours where the paper's test set is not
ours, and the headline figures (``mf_headline_figures``). Data only: no TensorFlow, and nothing
above ``grounded_text.papers``. The comparison itself is ``grounded_text.experiments.comparison``.
"""

from __future__ import annotations

import dataclasses

from grounded_text.papers.published import figures


@dataclasses.dataclass(frozen=True)
class HeadlineFigure:
    """A figure the paper reports (never invented: absent where not recorded here)."""

    value: float
    source: str
    same_test: bool = True  # False: the paper's test set is not ours (a nearest figure, never differenced)


@dataclasses.dataclass(frozen=True)
class Published:
    """One row of a paper's table (``grounded_text.papers.published``) and what of ours stands beside it.

    Attributes:
      table: ``"Table 2"``.
      row: the row label as recorded, or ``"*"``: every row of ``columns``.
      run: the run of ours that trained the same model, or None (none of ours does).
      block: restricts to the table's sub-block (``"1k results"``), or None.
      columns: restricts to these columns; ``()``: every column of the row.
      space: our space (``""``: the protocol's first).
      ours: ``{column or "block row": our key}``: our figure on the same test set where the
        record names none (e.g. Merkx & Frank's supervised STS-B/SICK-R).
      nearest: ``{column: (our key, text)}``: our nearest measure where the paper's test set is
        not ours (``text`` says on what ours is measured); never differenced.
      unmatched: ``{column: text}``: why no figure of ours stands beside the column (e.g. an
        out-of-domain test of the paper, where ours is in domain).
      headline_nearest: columns whose nearest figure may stand, labelled as such, in the
        headline table.
    """

    table: str
    row: str
    run: str | None
    block: str | None = None
    columns: tuple = ()
    space: str = ""
    ours: dict = dataclasses.field(default_factory=dict)
    nearest: dict = dataclasses.field(default_factory=dict)
    unmatched: dict = dataclasses.field(default_factory=dict)
    headline_nearest: tuple = ()


# ----------------------------------------------------------------------------- the plans' published rows

MF_TABLE5 = "Merkx & Frank 2019, Table 5, Flickr8k column"
MF_RETRIEVAL = "Merkx & Frank 2019, Table 2, Flickr8k 1k-test retrieval, ResNet-152 10-crop features"


def mf_table5(label: str, keys) -> HeadlineFigure:
    """A headline figure of Merkx & Frank's Table 5 (char-GRU, Flickr8k) as Pearson r: one subset's
    figure / 100, or the unweighted mean of several (the paper prints no year mean)."""
    vals = [f.value for f in figures("merkx2019_char_grounding", "Table 5") if f.column == "char-GRU (Flickr8k)"
            and (f"{f.block} {f.row}" in keys or f.ours in keys)]
    if len(vals) != len(keys):
        raise AssertionError(f"{label}: {len(vals)} of {len(keys)} Table 5 figures found")
    source = MF_TABLE5 + ("" if len(keys) == 1 else f" (mean of its {len(keys)} subset figures)")
    return HeadlineFigure(round(sum(vals) / len(vals) / 100, 3), source)


def mf_table2(column: str) -> HeadlineFigure:
    (fig,) = [f for f in figures("merkx2019_char_grounding", "Table 2") if f.row == "char-GRU" and f.column == column]
    return HeadlineFigure(fig.value, MF_RETRIEVAL)


_MF_STS12 = ("STS12/MSRpar", "STS12/MSRvid", "STS12/SMTeuroparl", "STS12/surprise.OnWN", "STS12/surprise.SMTnews")
_MF_STS13 = ("STS13/FNWN", "STS13/headlines", "STS13/OnWN")
_MF_STS16 = ("STS16/answer-answer", "STS16/headlines", "STS16/plagiarism", "STS16/postediting",
             "STS16/question-question")
_VETE_NEAREST = {
    "images2014": ("STSBenchmark/test/captions", "ours on STS-B test, captions genre (STS 2014 is not in our data)"),
    "images2015": ("STSBenchmark/test/captions", "ours on STS-B test, captions genre (STS 2015 is not in our data)"),
    "COCO-Test": ("same_image/*", "ours on the same kind of test built from Flickr8k test captions (§4.3): "
                                 "both in domain (trained and tested on one caption set's captions)"),
}
# Pin-Test is out of domain for the paper's model (trained on MS COCO, tested on Pinterest
# captions); ours is in domain (Flickr8k train → Flickr8k test): not set side by side.
_VETE_UNMATCHED = {"Pin-Test": "none: Pin-Test is out of domain for the paper's model (MS COCO → Pinterest "
                               "captions); our same-image test is in domain (Flickr8k → Flickr8k), so it stands "
                               "beside COCO-Test only"}
_BORDES_NEAREST = {m: (f"structure/{k}", f"ours{extra} on Flickr8k test (paper: MS COCO val, 5K images)")
                   for m, k, extra in (("mNNO", "mNNO@10", ": mNNO@10"),
                                       ("ρ_vis", "rho_vis", ": ρ_vis (Pearson, §4.3)"),
                                       ("C_inter", "C_inter", ""), ("C_intra", "C_intra", ""))}
# Bordes' STS (§4.3: "STS (Cer et al., 2017)") names no split: ours is STS-B test, the nearest.
# SICK (§4.3: "SICK (Marelli et al., 2014a)") names none either; tuning on SICK's validation set
# (§4.4) makes its test set likely, not stated, so it is the nearest too, never differenced.
_BORDES_STS = {"STS/All": ("STSBenchmark/test", ""), "STS/Cap": ("STSBenchmark/test/captions", ", captions genre"),
               "STS/News": ("STSBenchmark/test/news", ", news genre"),
               "STS/Forum": ("STSBenchmark/test/forum", ", forum genre")}
_BORDES_NEAREST.update({c: (k, f"ours on STS-B test{g} (the paper states no split of STS)")
                        for c, (k, g) in _BORDES_STS.items()})
BORDES_SICK_NEAREST = ("ours on SICK-R test (the paper states no split of SICK; it tunes on SICK's validation set, "
                       "§4.4)")
_BORDES_NEAREST["SICK"] = ("SICK/test", BORDES_SICK_NEAREST)
_BORDES_OURS = {c: None for c in (*_BORDES_STS, "SICK")}
_RET = {"image→sentence": "image_to_caption", "sentence→image": "caption_to_image",
        "caption→image": "caption_to_image", "image→caption": "image_to_caption"}


def retrieval_nearest(columns, text: str) -> dict:
    return {c: (f"flickr8k_1k/{_RET[c.split(' ')[0]]}/{c.split(' ')[1]}", text) for c in columns}


_KOLLURU_COLS = tuple(f"{d} R@{k}" for d in ("image→sentence", "sentence→image") for k in (1, 5, 10))
_MF_RET_COLS = tuple(f"{d} {m}" for d in ("caption→image", "image→caption") for m in ("R@1", "R@5", "R@10", "medr"))


def kolluru_rows():
    out = []
    for table, data in (("Table 1", "Flickr30K"), ("Table 2", "MSCOCO")):
        near = retrieval_nearest(_KOLLURU_COLS, f"ours on Flickr8k test retrieval (paper: {data} 1,000-image test)")
        for net in ("VGG19", "ResNet50"):
            for k, run in ((1, "two_branch_khard_k1"), (10, "two_branch_khard_k10")):
                out.append(Published(table, f"Our model with {net} image encoder and $K = {k}$ hard negative", run,
                                     nearest=near))
    return tuple(out)


def mf_headline_figures() -> dict:
    """Merkx & Frank's figures for the headline table (Pearson r; R@K %, medr)."""
    return {"STS12 MSRvid r": mf_table5("STS12 MSRvid r", ("STS12/MSRvid",)),
            "STS12 mean r": mf_table5("STS12 mean r", _MF_STS12),
            "STS13 mean r": mf_table5("STS13 mean r", _MF_STS13),
            "STS16 mean r": mf_table5("STS16 mean r", _MF_STS16),
            "mean of STS12/13/16 means r": HeadlineFigure(0.589, MF_TABLE5 + " (mean of its three year means)"),
            "STS-B test r (supervised)": mf_table5("STS-B", ("STS-B STS 12-16",)),
            "SICK-R test r (supervised)": mf_table5("SICK-R", ("SICK Relatedness",)),
            **{c: mf_table2(c) for c in _MF_RET_COLS}}


# Table 1 of Bordes et al. is grounding only (no textual loss), as our run: C_g + P_g is printed as '+P_a'.
PUBLISHED = {
    "vete": (
        *(Published("Table 1", row, run, nearest=_VETE_NEAREST, unmatched=_VETE_UNMATCHED)
          for row, run in (("VETE-BOW", "vete_bow"), ("VETE-RNN", "vete_rnn"), ("VETE-CNN", "vete_cnn"))),
        *(Published("Table 4", row, run) for row, run in (("Pearson", "vete_bow"),
                                                           ("Covariance", "vete_bow_covariance"),
                                                           ("Rank loss", "vete_bow_rank"))),
    ),
    "bordes": (
        *(Published("Table 1", "$+{\\bf P}_a$", "bordes_cg_pg", space=space, ours=_BORDES_OURS, nearest=_BORDES_NEAREST,
                    headline_nearest=("STS/All", "SICK")) for space in ("textual", "grounded")),
        Published("Table 1", "${\\bf P}_g$", None),
        Published("Table 1", "$\\mathbf{C}_g$", None),
        # Table 3 (SentEval): the scenario row closest to ours, C_q + P_q (with the paper's
        # textual loss T, which ours lacks), beside both of our spaces.
        *(Published("Table 3", "$\\mathbf{T} + \\mathbf{C}_a + \\mathbf{P}_a$", "bordes_cg_pg", space=space,
                    unmatched={"SNLI": "none: SNLI's training set is not in our data",
                               "AVG": "none: the paper's average includes SNLI, which we lack"})
          for space in ("textual", "grounded")),
    ),
    "kolluru": kolluru_rows(),
    "merkx_frank": (
        Published("Table 5", "*", "char_gru_attention", columns=("char-GRU (Flickr8k)",),
                  ours={"STS-B STS 12-16": "supervised/STSBenchmark/test",
                        "SICK Relatedness": "supervised/SICK/test"}),
        Published("Table 2", "char-GRU", "char_gru_attention"),
        *(Published("Table 3", "char-GRU", "char_gru_attention", block=b, nearest=retrieval_nearest(
            _MF_RET_COLS, f"ours on Flickr8k test retrieval (paper: MSCOCO, {b})"))
          for b in ("1k results", "5k results")),
    ),
}
