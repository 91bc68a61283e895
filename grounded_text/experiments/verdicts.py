"""Verdicts that cannot flatter: each of our figures against the paper's on the same test set.
An STS figure is judged by Williams' test of ours against the paper's r on the same pairs, with
the unknown correlation between the two models' similarity scores set to the lowest such
correlation between two of our own models (``model_correlations``; ``r23_fallback`` where only
one was measured), and again at ``CONSERVATIVE_R23``; it is above or below the paper only when
both tests find the difference, "not distinguishable" when only one does, and agrees when
neither does. An R@K or accuracy agrees when the paper's value lies inside our interval;
otherwise the figure is above or below the paper, and the words say whether that is better or
worse (a lower median rank is better). No TensorFlow.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
from scipy import stats as sps

from grounded_text.evaluation.stats import format_p, williams_test
from grounded_text.experiments.comparison import sts_label

#: Williams' r₂₃ where no two of our models of a paper were scored on a subset and no other
#: paper's results give one: the low end of the range expected between two of our models
#: (0.87–0.97). Assumed, not measured; every verdict that uses it says so.
FALLBACK_R23 = 0.87
ALPHA = 0.05
#: The second r₂₃ at which every Williams verdict is tested. The measured r₂₃ comes from two of
#: our own models (same code, data, features and seed: 0.88–0.99), and the paper's model shares
#: none of these with ours, so its similarities are surely less correlated with ours. A high r₂₃
#: makes Williams' test more powerful in both directions, so a difference is only claimed when
#: it holds at this lower value too (a measured r₂₃ below it is used as it is).
CONSERVATIVE_R23 = 0.7
CONSERVATIVE_REASON = ("the paper's model shares neither our code, data order, image features nor seed, so its "
                       "similarities are less correlated with ours than two of our own models' (the measured r₂₃), "
                       "and a high r₂₃ makes the test more powerful in both directions")
NOT_DISTINGUISHABLE = "not distinguishable"
_STS_PREFIXES = ("STS1", "STSBenchmark", "SICK", "supervised")


def _model_name(run: str, space: str, several: bool) -> str:
    return f"{run} ({space})" if several else run


def model_correlations(paper, predictions: dict) -> dict:
    """The lowest correlation between two of our models' similarity scores, per STS subset.

    Williams' test of our r against the paper's needs r₂₃, the correlation between our
    and the paper's similarities on the same pairs, which nobody has; the verdict assumes
    the lowest correlation between the similarities of two of our own models of the paper
    on that subset (two runs, or two spaces of one run).

    Args:
      predictions: ``{run: {space: scoring.predictions(...)}}``.

    Returns:
      ``{subset key: {"pearson": r, "spearman": ρ, "pair": [model, model] (of the lowest
      Pearson), "models": how many models, "n": pairs}}``; a subset scored by fewer than two
      models is left out.
    """

    several = len(paper.protocol.spaces) > 1
    models = [(_model_name(run, space, several), pred.get("sts") or {})
              for run, spaces in predictions.items() for space, pred in spaces.items()]
    out: dict = {}
    for key in sorted({k for _, sts in models for k in sts}):
        have = [(name, np.asarray(sts[key], float)) for name, sts in models if key in sts]
        pairs = []
        for (na, xa), (nb, xb) in itertools.combinations(have, 2):
            if xa.size == xb.size and xa.size >= 4 and min(np.ptp(xa), np.ptp(xb)) > 0:
                pairs.append((float(np.corrcoef(xa, xb)[0, 1]), float(sps.spearmanr(xa, xb)[0]), [na, nb]))
        if pairs:
            low = min(pairs, key=lambda t: t[0])
            out[key] = {"pearson": low[0], "spearman": min(t[1] for t in pairs), "pair": low[2],
                        "models": len(have), "n": int(have[0][1].size)}
    return out


#: How a verdict row's r₂₃ source begins where no two of our models measured it (``r23_fallback``).
FALLBACK = "fallback"


def r23_fallback(own: dict, others: dict | None = None) -> dict:
    """The r₂₃ assumed where a subset has no two of our models: the lowest measured between
    two of our models on any subset of this paper (``own``) or of another paper's results
    (``others``: ``{paper: model_correlations}``), else ``FALLBACK_R23``.

    Returns:
      ``{"pearson": r, "spearman": ρ, "source": text}``.
    """
    found = [(v["pearson"], v.get("spearman", v["pearson"]), name, key, v.get("pair"))
             for name, mc in [("this paper", own), *sorted((others or {}).items())] for key, v in (mc or {}).items()]
    if not found:
        return {"pearson": FALLBACK_R23, "spearman": FALLBACK_R23,
                "source": f"{FALLBACK_R23}, assumed, not measured: no two of our models were scored on the same "
                          "pairs in these results (the low end of the 0.87–0.97 expected between two of our models)"}
    low = min(found)
    return {"pearson": low[0], "spearman": min(f[1] for f in found),
            "source": f"the lowest between two of our models on any subset ({low[2]}, {sts_label(low[3])}, "
                      f"{' vs '.join(low[4] or [])})"}


def _kind(row: dict) -> str:
    key, scale = row.get("key") or "", row["scale"]
    if key.startswith(_STS_PREFIXES) and ("Pearson" in scale or "Spearman" in scale):
        return "correlation"
    if "median rank" in scale:
        return "medr"
    return "interval"


def _williams_row(row: dict, mc: dict, fallback: dict) -> dict:
    """Williams' test of our r against the paper's on the same n pairs, r₂₃ assumed (module doc)."""
    scale = 100.0 if "× 100" in row["scale"] else 1.0
    stat = "spearman" if "Spearman" in row["scale"] else "pearson"
    ours, theirs = row["ours"] / scale, row["paper"] / scale
    measured = mc.get(row["key"])
    if measured is not None:
        r23 = measured[stat]
        how = f"lowest of our {measured['models']} models on it ({' vs '.join(measured['pair'])})"
    else:
        r23 = fallback[stat]
        why = ("no predictions of the regressor kept" if row["key"].startswith("supervised/")
               else "fewer than two of our models scored it")
        how = f"{FALLBACK} ({why})"
    return williams_verdict(ours, theirs, row.get("n"), r23, how)


def _capped(r23: float, ours: float, theirs: float) -> tuple[float, str]:
    """``r23`` within what a correlation matrix with r12 = ``ours`` and r13 = ``theirs`` allows."""
    cap = ours * theirs + float(np.sqrt(max(0.0, (1 - ours ** 2) * (1 - theirs ** 2))))
    if r23 > cap - 1e-9:  # no correlation matrix has r12, r13 and a larger r23
        return cap - 1e-9, f"; capped at {cap:.3f}, the largest compatible with the two r"
    return r23, ""


def williams_verdict(ours: float, theirs: float, n: int | None, r23: float, how: str,
                     conservative: float = CONSERVATIVE_R23) -> dict:
    """Williams' test of our r against the paper's on the same ``n`` pairs, at ``r23`` (measured
    between two of our models) and at ``min(conservative, r23)``. Above or below the paper only
    when both find the difference (two-sided, ``ALPHA``); ``NOT_DISTINGUISHABLE`` when only one
    does; "agrees" when neither does.

    Args:
      ours, theirs: the two Pearson (or Spearman) r, on the -1..1 scale.
      n: the pairs (None: not judged).
      r23: the correlation assumed between our and the paper's similarity scores.
      how: where ``r23`` comes from, printed beside it; one that starts with ``FALLBACK`` is
        called assumed, not measured, in the verdict's reason.

    Returns:
      ``{"test", "r23", "r23_how", "p", "r23_conservative", "p_conservative", "verdict", "why"}``.

    Example:
        >>> v = williams_verdict(0.589, 0.538, 254, 0.953, "measured")
        >>> v["p"] < 0.05 <= v["p_conservative"], v["verdict"]
        (True, 'not distinguishable')
    """
    out = {"test": "Williams' test", "r23": r23, "r23_how": how, "p": None, "r23_conservative": None,
           "p_conservative": None, "why": ""}
    if not n:
        return {**out, "verdict": "not judged", "why": "the number of pairs is not recorded"}
    r23, note = _capped(r23, ours, theirs)
    low, low_note = _capped(min(conservative, r23), ours, theirs)
    out.update(r23=r23, r23_how=how + note, r23_conservative=low)
    out["p"] = williams_test(ours, theirs, r23, int(n))["p_value"]
    out["p_conservative"] = williams_test(ours, theirs, low, int(n))["p_value"]
    found = [p < ALPHA for p in (out["p"], out["p_conservative"])]
    side = "above the paper (better)" if ours > theirs else "below the paper (worse)"
    if all(found):
        return {**out, "verdict": side}
    if not any(found):
        return {**out, "verdict": "agrees"}
    p_text = format_p(out["p"] if found[0] else out["p_conservative"])
    # A fallback r₂₃ is assumed, not measured: the reader is told which.
    first = f"at the assumed r₂₃ = {r23:.2f}" if how.startswith(FALLBACK) else "at the measured r₂₃"
    at = first if found[0] else f"at r₂₃ = {low:.2f}"
    p_text = f"p {p_text}" if p_text.startswith("<") else f"p = {p_text}"
    return {**out, "verdict": NOT_DISTINGUISHABLE, "why": f"{side.split(' (')[0]} only {at}, {p_text}"}


def _interval_row(row: dict) -> dict:
    """The paper's value inside our 95 % interval, or above / below it (medr: lower is better)."""
    out = {"test": "paper inside our 95 % interval", "r23": None, "r23_how": "", "p": None,
           "r23_conservative": None, "p_conservative": None}
    ci = row.get("ours_ci")
    if not ci:
        return {**out, "verdict": "not judged", "why": "no interval of ours"}
    if ci[0] <= row["paper"] <= ci[1]:
        return {**out, "verdict": "agrees"}
    ours_above = row["paper"] < ci[0]
    if _kind(row) == "medr":
        words = ("above the paper (worse: a higher median rank)" if ours_above
                 else "below the paper (better: a lower median rank)")
    else:
        words = "above the paper (better)" if ours_above else "below the paper (worse)"
    return {**out, "verdict": words}


def verdict_rows(results: dict) -> list[dict]:
    """One verdict per figure of ours on the paper's own test set (``comparison`` rows with a
    difference): STS correlations by Williams' test against the paper's r (two-sided, at
    ``ALPHA``, r₂₃ = ``model_correlations`` of the subset, else ``r23_fallback``); R@K, medr,
    accuracies by whether the paper's value is inside our 95 % interval.

    Returns:
      ``[{"measure", "space", "run", "ours", "paper", "n", "test", "r23", "r23_how", "p",
      "verdict", "why", "table"}]``; a measure named alike in two of the paper's tables is
      suffixed with its table, e.g. ``"SICK (Table 3)"``.
    """
    mc = results.get("model_correlations") or {}
    fallback = results.get("r23_fallback") or r23_fallback(mc)
    out = []
    for row in results.get("comparison", []):
        if row["ours"] is None or row["difference"] is None:
            continue
        judged = _williams_row(row, mc, fallback) if _kind(row) == "correlation" else _interval_row(row)
        out.append({"measure": row["measure"], "space": row["space"], "run": row["run"], "ours": row["ours"],
                    "paper": row["paper"], "scale": row["scale"], "n": row.get("n"), "why": "", **judged,
                    "table": row.get("table")})
    # Two tables of one paper can name different measures alike (Bordes: Table 1's SICK is the
    # relatedness ρ, Table 3's the entailment accuracy), so a repeated name carries its table.
    seen: dict = {}
    for r in out:
        seen.setdefault((r["measure"], r["space"]), set()).add(r["table"])
    for r in out:
        if len(seen[(r["measure"], r["space"])]) > 1 and r["table"]:
            r["measure"] = f"{r['measure']} ({r['table']})"
    return out


_VERDICT_ORDER = ("agrees", NOT_DISTINGUISHABLE, "above the paper (better)",
                  "below the paper (better: a lower median rank)", "below the paper (worse)",
                  "above the paper (worse: a higher median rank)", "not judged")


def same_training_data(paper: str, ours: str) -> bool:
    """Whether the paper's training data and ours, in words, name the same data set and the
    same number of training images ("Flickr8k train, 6,000 images × 5 captions (Karpathy
    split)" and "Flickr8k train split, 6,000 images"): then it is no difference.

    Example:
        >>> same_training_data("Flickr8k train, 6,000 images × 5 captions", "Flickr8k train split, 6,000 images")
        True
        >>> same_training_data("Flickr30K train, 29,783 images × 5 captions", "Flickr8k train split, 6,000 images")
        False
    """
    def key(text):
        count = re.search(r"([\d,]+) images", text or "")
        return ((text or "").split(" ")[0].lower(), count[1] if count else None)

    (name_a, count_a), (name_b, count_b) = key(paper), key(ours)
    return bool(name_a) and name_a == name_b and count_a is not None and count_a == count_b


def _differences(results: dict, basis: list) -> list[str]:
    diffs = [f"training data (paper: {t}; ours: {results['ours_data']})"
             for t in dict.fromkeys(r["training_data"] for r in basis)
             if t and t != results["ours_data"] and not same_training_data(t, results["ours_data"])]
    diffs += [f"image features (paper: {f}; ours: {results['ours_features']})"
              for f in dict.fromkeys(r["image_features"] for r in basis) if f and f != results["ours_features"]]
    diffs += [f"{d['aspect']} (paper: {d['paper']}; ours: {d['ours']})" for d in results.get("data_differences") or []
              if d["aspect"] not in ("training data", "image features", "STS years")]
    if results.get("budget") != "full":
        diffs.append(f"training budget (`{results.get('budget')}`: {results.get('budget_description')})")
    return diffs


def summary_line(rows: list[dict], several: bool = False) -> str:
    """The verdict's first bullet: how figures are judged, then each verdict with its figures."""
    groups: dict = {}
    for r in rows:
        groups.setdefault(r["verdict"], []).append(r["measure"] + (f" ({r['space']})" if several else ""))
    parts = [f"{v}: {len(groups[v])} ({', '.join(groups[v])})" for v in _VERDICT_ORDER if v in groups]
    return (f"{len(rows)} figures on the paper's own test sets. STS correlations are judged by Williams' test of ours "
            f"against the paper's r on the same pairs (two-sided, {ALPHA}), twice: with the correlation between our "
            "and the paper's similarity scores (r₂₃) set to the lowest between two of our own models on that subset "
            f"(the table below gives it per subset), and at r₂₃ = {CONSERVATIVE_R23} ({CONSERVATIVE_REASON}); a "
            f"figure is above or below the paper only when both tests say so, \"{NOT_DISTINGUISHABLE}\" when only "
            "one does, and agrees when neither does. R@K, medr and accuracies by whether the paper's value is inside "
            "our 95 % interval (R@K and medr: a bootstrap over images). " + "; ".join(parts) + ".")


def verdict(paper, results: dict) -> list[str]:
    """Which same-test-set figures agree with the paper and which are above or below it
    (``verdict_rows``), with the documented differences of data, features, encoder and
    budget (from the records; nothing else is claimed)."""
    every = [r for r in results.get("comparison", []) if r["ours"] is not None]
    rows = verdict_rows(results)
    if rows:
        lines = [summary_line(rows, several=len({r["space"] for r in rows}) > 1)]
    else:
        lines = ["No figure of ours was measured on the paper's own test sets in this run; every figure above is "
                 "the paper's, beside our nearest measure where we have one (not differenced)."]
    diffs = _differences(results, [r for r in every if r["difference"] is not None] or every)
    if diffs:
        lines.append("Documented differences that may account for the gaps: " + "; ".join(diffs) + ".")
    return lines
