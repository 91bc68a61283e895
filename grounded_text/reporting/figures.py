"""The one figures registry: named figures → where they are in a report, their label and format.

Two kinds of entries:

* ``FIGURES``: one figure each, read by a key path from a report node (``{stat}`` in a
  path is replaced by ``"pearson"`` or ``"spearman"``). The nodes are the suite's
  per-encoder reports (``grounded_text.evaluation.suite.evaluate_one``: ``sts``,
  ``supervised_sts``, ``retrieval``, ``structure``, ``same_image``, ``transfer``) and the
  trainer's ``metrics.json`` (``evaluation.headline``).
* ``FAMILIES``: a row per entry found (every STS year and subset scored, every SentEval
  task run), as ``{label: value}`` in report order.

Every table of the drivers draws its columns from here, and formats them with
``grounded_text.reporting.tables.fmt`` at ``digits_for(label)`` decimals. No TensorFlow.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

from grounded_text.reporting.tables import fmt

_ONE_DECIMAL = re.compile(r"R@|medr|acc|F1|rsum")


def digits_for(label: str) -> int:
    """Decimals of a figure: 1 for percentages and ranks (R@K, medr, rsum, accuracy, F1), else 3."""
    return 1 if _ONE_DECIMAL.search(label) else 3


def fmt_figure(value, label: str, *, signed: bool = False) -> str:
    """A figure's cell: ``value`` at ``digits_for(label)`` decimals (``–`` when missing)."""
    return fmt(value, digits_for(label), signed=signed)


def dig(node, path: Sequence[str]):
    """``node[path[0]][path[1]]...``, or None where a key (or a dict) is missing."""
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


@dataclasses.dataclass(frozen=True)
class Figure:
    """One named figure.

    Attributes:
      label: column header.
      path: keys into the report node; ``"{stat}"`` is replaced by the statistic asked.
      digits: decimals of its cell.
      scale: multiplies the value in tables (100: a correlation shown ×100).
      ci: keys of its 95 % interval ``[lo, hi]`` in the same node (``"{stat}"`` replaced as in
        ``path``); empty where the node carries none (a mean over subsets: no valid interval).
    """

    label: str
    path: tuple
    digits: int = 3
    scale: float = 1.0
    ci: tuple = ()

    def read(self, node: dict, stat: str = "pearson"):
        """The figure's value in ``node`` (None when absent)."""
        return dig(node, [k.replace("{stat}", stat) for k in self.path])

    def cell(self, node: dict, stat: str = "pearson", **kwargs) -> str:
        return fmt(self.read(node, stat), self.digits, scale=self.scale, **kwargs)

    def with_interval(self, node: dict, stat: str = "pearson") -> tuple | None:
        """``(value, lo, hi)`` on the table's scale, ``lo`` and ``hi`` None where ``node``
        carries no interval; None when the value is absent. For the charts."""
        value = self.read(node, stat)
        if value is None:
            return None
        ci = dig(node, [k.replace("{stat}", stat) for k in self.ci]) if self.ci else None
        lo, hi = (ci[0] * self.scale, ci[1] * self.scale) if ci and None not in ci[:2] else (None, None)
        return value * self.scale, lo, hi


def _sts(label, *path):
    # A single set's correlation carries its Fisher-z interval beside it; a year mean does not.
    ci = ("sts",) + path[:-1] + ("{stat}_ci95",) if path[-1] == "{stat}" else ()
    return Figure(label, ("sts",) + path, digits=1, scale=100.0, ci=ci)


def _headline(label, key, *ci):
    """A figure of the trainer's headline; ``ci``: where its interval is in the STS report
    beside it (``evaluation.sts``), none for the STS16 mean."""
    return Figure(label, ("evaluation", "headline", key), ci=("evaluation", "sts") + ci if ci else ())


FIGURES: dict[str, Figure] = {
    # Suite report of one encoder (Pearson r / Spearman ρ ×100): the paper-baselines comparison.
    "sts12_mean": _sts("STS12 mean", "STS12", "{stat}", "mean"),
    "sts13_mean": _sts("STS13 mean", "STS13", "{stat}", "mean"),
    "sts16_mean": _sts("STS16 mean", "STS16", "{stat}", "mean"),
    "sts12_msrvid": _sts("STS12 MSRvid", "STS12", "subsets", "MSRvid", "{stat}"),
    "stsb_test": _sts("STS-B test", "STSBenchmark", "test", "{stat}"),
    "stsb_captions": _sts("STS-B captions", "STSBenchmark", "test/captions", "{stat}"),
    "stsb_news": _sts("STS-B news", "STSBenchmark", "test/news", "{stat}"),
    "stsb_forum": _sts("STS-B forum", "STSBenchmark", "test/forum", "{stat}"),
    "sick_test": _sts("SICK test", "SICK", "test", "{stat}"),
    "same_image_flickr8k": Figure("Flickr8k same-image test", ("same_image", "flickr8k/test", "{stat}"),
                                  digits=1, scale=100.0, ci=("same_image", "flickr8k/test", "{stat}_ci95")),
    # The trainer's metrics.json (grounded_text.evaluate's headline): the ablation tables.
    "trainer_sts12_msrvid": _headline("STS12 MSRvid r", "STS12/MSRvid pearson",
                                      "STS12", "subsets", "MSRvid", "pearson_ci95"),
    "trainer_sts16_mean": _headline("STS16 mean r", "STS16 mean pearson (avg2016)"),
    "trainer_stsb_test": _headline("STS-B test r", "STS-B test pearson", "STSBenchmark", "test", "pearson_ci95"),
    "trainer_sick_test": _headline("SICK test r", "SICK test pearson", "SICK", "test", "pearson_ci95"),
}


def figure(name: str) -> Figure:
    """``FIGURES[name]``.

    Raises:
      KeyError: no such figure (the message lists the known ones).
    """
    try:
        return FIGURES[name]
    except KeyError:
        raise KeyError(f"no figure {name!r}; known: {sorted(FIGURES)}") from None


# ----------------------------------------------------------------------------- families


def sts_rows(node: dict, *, subsets: bool = False, spearman: bool = False) -> dict:
    """Every STS year scored: its subsets' r (``subsets``), its mean r (and ρ), then STS-B
    and SICK-R test (cosine)."""
    sts = node.get("sts") or {}
    rows = {}
    for year, y in sts.items():
        if "subsets" in y:
            if subsets:
                rows.update({f"{year} {sub} r": r["pearson"] for sub, r in y["subsets"].items()})
            rows[f"{year} mean r"] = y["pearson"]["mean"]
            if spearman:
                rows[f"{year} mean ρ"] = y["spearman"]["mean"]
    for key, label in (("STSBenchmark", "STS-B test"), ("SICK", "SICK-R test")):
        if key in sts:
            rows[f"{label} r (cosine)"] = sts[key]["test"]["pearson"]
            if spearman:
                rows[f"{label} ρ (cosine)"] = sts[key]["test"]["spearman"]
    return rows


def mean_of_year_means(node: dict, years=("STS12", "STS13", "STS16")) -> dict:
    """Mean over ``years`` of each year's mean Pearson r (None unless every year was scored)."""
    means = {y: n["pearson"]["mean"] for y, n in (node.get("sts") or {}).items()
             if isinstance(n, dict) and "subsets" in n}
    vals = [means.get(y) for y in years]
    label = "mean of " + "/".join(years).replace("/STS", "/") + " means r"
    return {label: None if any(v is None for v in vals) else sum(vals) / len(vals)}


def supervised_rows(node: dict) -> dict:
    sup = node.get("supervised_sts") or {}
    return {f"{label} r (supervised)": sup[key]["test"]["pearson"]
            for key, label in (("STSBenchmark", "STS-B test"), ("SICK", "SICK-R test")) if key in sup}


def retrieval_rows(node: dict) -> dict:
    ret = node.get("retrieval") or {}
    if "caption_to_image" not in ret:
        return {}
    return {f"{label} {k}": ret[d][k] for d, label in (("caption_to_image", "caption→image"),
                                                        ("image_to_caption", "image→caption"))
            for k in ("R@1", "R@5", "R@10", "medr")}


def rsum_rows(node: dict) -> dict:
    ret = node.get("retrieval") or {}
    return {"rsum": ret["rsum"]} if "rsum" in ret else {}


def same_image_rows(node: dict) -> dict:
    rows = {}
    for r in (node.get("same_image") or {}).values():
        rows["same-image r"] = r["pearson"]
    return rows


def structure_rows(node: dict) -> dict:
    st = node.get("structure") or {}
    if not st:
        return {}
    return {"mNNO@10": st.get("mNNO@10"), "ρ_vis": st["rho_vis"]["pearson"], "C_inter": st["C_inter"],
            "C_intra": st["C_intra"], "ρ_vis (Spearman)": st["rho_vis"]["spearman"]}


def transfer_rows(node: dict) -> dict:
    rows = {}
    for task, r in (node.get("transfer") or {}).items():
        if isinstance(r, dict) and r.get("status") == "ok":
            rows[f"{task} acc"] = r["acc"]
            if "f1" in r:
                rows[f"{task} F1"] = r["f1"]
    return rows


FAMILIES: dict[str, Callable[..., dict]] = {
    "sts": sts_rows, "mean_of_year_means": mean_of_year_means, "supervised": supervised_rows,
    "retrieval": retrieval_rows, "rsum": rsum_rows, "same_image": same_image_rows,
    "structure": structure_rows, "transfer": transfer_rows,
}


def read_families(node: dict, families: Sequence) -> dict:
    """``{label: value}`` of ``families`` (names of ``FAMILIES``, or ``(name, keyword
    arguments)``) read from ``node``, in that order."""
    out: dict = {}
    for fam in families:
        name, kwargs = (fam, {}) if isinstance(fam, str) else fam
        out.update(FAMILIES[name](node, **kwargs))
    return out
