"""Verdicts that cannot flatter: each of our figures against the paper's on the same test set.
An STS figure is judged by Williams' test of ours against the paper's r on the same pairs, with
the unknown correlation between the two models' similarity scores set to the lowest such
correlation between two of our own models (``model_correlations``; ``r23_fallback`` where only
one was measured); an R@K or accuracy agrees when the paper's value lies inside our interval;
otherwise the figure is above or below the paper, and the words say whether that is better or
worse (a lower median rank is better). No TensorFlow.
"""

from __future__ import annotations

from grounded_text.experiments.comparison import sts_label

#: Williams' r₂₃ where no two of our models of a paper were scored on a subset and no other
#: paper's results give one: the low end of the range expected between two of our models
#: (0.87–0.97). Assumed, not measured; every verdict that uses it says so.
FALLBACK_R23 = 0.87
ALPHA = 0.05
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
    import itertools

    import numpy as np
    from scipy import stats as sps

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
    import numpy as np

    from grounded_text.evaluation.stats import williams_test

    scale = 100.0 if "× 100" in row["scale"] else 1.0
    stat = "spearman" if "Spearman" in row["scale"] else "pearson"
    ours, theirs, n = row["ours"] / scale, row["paper"] / scale, row.get("n")
    measured = mc.get(row["key"])
    if measured is not None:
        r23 = measured[stat]
        how = f"lowest of our {measured['models']} models on it ({' vs '.join(measured['pair'])})"
    else:
        r23 = fallback[stat]
        why = ("no predictions of the regressor kept" if row["key"].startswith("supervised/")
               else "fewer than two of our models scored it")
        how = f"fallback ({why})"
    out = {"test": "Williams' test", "r23": r23, "r23_how": how, "p": None}
    if not n:
        return {**out, "verdict": "not judged", "why": "the number of pairs is not recorded"}
    cap = ours * theirs + float(np.sqrt(max(0.0, (1 - ours ** 2) * (1 - theirs ** 2))))
    if r23 > cap - 1e-9:  # no correlation matrix has r12, r13 and a larger r23
        r23, out["r23_how"] = cap - 1e-9, how + f"; capped at {cap:.3f}, the largest compatible with the two r"
        out["r23"] = r23
    out["p"] = williams_test(ours, theirs, r23, int(n))["p_value"]
    if out["p"] >= ALPHA:
        return {**out, "verdict": "agrees"}
    return {**out, "verdict": "above the paper (better)" if ours > theirs else "below the paper (worse)"}


def _interval_row(row: dict) -> dict:
    """The paper's value inside our 95 % interval, or above / below it (medr: lower is better)."""
    out = {"test": "paper inside our 95 % interval", "r23": None, "r23_how": "", "p": None}
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


_VERDICT_ORDER = ("agrees", "above the paper (better)", "below the paper (better: a lower median rank)",
                  "below the paper (worse)", "above the paper (worse: a higher median rank)", "not judged")


def _differences(results: dict, basis: list) -> list[str]:
    diffs = [f"training data (paper: {t}; ours: {results['ours_data']})"
             for t in dict.fromkeys(r["training_data"] for r in basis) if t and t != results["ours_data"]]
    diffs += [f"image features (paper: {f}; ours: {results['ours_features']})"
              for f in dict.fromkeys(r["image_features"] for r in basis) if f and f != results["ours_features"]]
    diffs += [f"{d['aspect']} (paper: {d['paper']}; ours: {d['ours']})" for d in results.get("data_differences") or []
              if d["aspect"] not in ("training data", "image features", "STS years")]
    if results.get("budget") != "full":
        diffs.append(f"training budget (`{results.get('budget')}`: {results.get('budget_description')})")
    return diffs


def verdict(paper, results: dict) -> list[str]:
    """Which same-test-set figures agree with the paper and which are above or below it
    (``verdict_rows``), with the documented differences of data, features, encoder and
    budget (from the records; nothing else is claimed)."""
    every = [r for r in results.get("comparison", []) if r["ours"] is not None]
    rows = verdict_rows(results)
    several = len({r["space"] for r in rows}) > 1
    if rows:
        groups: dict = {}
        for r in rows:
            groups.setdefault(r["verdict"], []).append(r["measure"] + (f" ({r['space']})" if several else ""))
        parts = [f"{v}: {len(groups[v])} ({', '.join(groups[v])})" for v in _VERDICT_ORDER if v in groups]
        lines = [f"{len(rows)} figures on the paper's own test sets. STS correlations are judged by Williams' test "
                 f"of ours against the paper's r on the same pairs (two-sided, {ALPHA}), with the correlation between "
                 "our and the paper's similarity scores set to the lowest between two of our own models on that "
                 "subset (the table below gives it per subset); R@K, medr and accuracies by whether the paper's value "
                 "is inside our 95 % interval (R@K and medr: a bootstrap over images). " + "; ".join(parts) + "."]
    else:
        lines = ["No figure of ours was measured on the paper's own test sets in this run; every figure above is "
                 "the paper's, beside our nearest measure where we have one (not differenced)."]
    diffs = _differences(results, [r for r in every if r["difference"] is not None] or every)
    if diffs:
        lines.append("Documented differences that may account for the gaps: " + "; ".join(diffs) + ".")
    return lines
