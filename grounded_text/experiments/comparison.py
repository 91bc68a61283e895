"""Papers' plans (``grounded_text.papers.reproduction``) against the recorded figures: figure
rows, ablation tables, what differs in the data, and the Markdown section of the reproduction
report. The ``runs`` arguments are the ``results.json`` run nodes. No TensorFlow.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from grounded_text.data.sts import sts_year_dirs
from grounded_text.evaluation.stats import paired_bootstrap, williams_test, wilson_ci
from grounded_text.experiments.runner import read_metrics
from grounded_text.papers.presets import PRESETS
from grounded_text.papers.published import PAPER_SOURCES as SOURCES
from grounded_text.papers.published import figures
from grounded_text.papers.reproduction import RunSpec
from grounded_text.papers.rows import HeadlineFigure, Published
from grounded_text.reporting.figures import dig
from grounded_text.reporting.tables import fmt

_MISSING = object()


def _get(d, dotted: str, default=None):
    for k in dotted.split("."):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def run_matches(spec: RunSpec, run_config: dict, records: set) -> bool:
    """Whether a run folder's ``metrics.json`` config is the planned run (see ``RunSpec.match``)."""
    if _get(run_config, "model.name") not in records:
        return False
    for key, want in spec.match.items():
        got = _get(run_config, key, _MISSING)
        if (got is _MISSING and key not in spec.default_keys) or (got is not _MISSING and got != want):
            return False
    return True


def match_run_dir(root: Path, paper: str, spec: RunSpec, records: set) -> tuple[Path | None, list]:
    """The trained run folder of ``spec`` under ``root``, and every folder that matched.

    ``records``: the preset records the run may have been trained as. Order: ``root/<run>``,
    ``root/<paper>/runs/<run>``, then any folder up to 4 levels down (symbolic links followed)
    with a ``metrics.json`` whose config matches (the newest when several do).
    """
    for cand in (root / spec.name, root / paper / "runs" / spec.name, root):
        metrics = read_metrics(cand) if (cand / "export").is_dir() else None
        cfg = (metrics or {}).get("config", {})
        # A folder named after the run only needs the right model; root itself must match.
        if metrics is not None and ((cand != root and _get(cfg, "model.name") in records)
                                    or run_matches(spec, cfg, records)):
            return cand, [str(cand)]
    found = [d for d in _run_folders(root, depth=4) if (d / "export").is_dir()
             and run_matches(spec, (read_metrics(d) or {}).get("config", {}), records)]
    found.sort(key=lambda p: (p / "metrics.json").stat().st_mtime, reverse=True)
    return (found[0] if found else None), [str(p) for p in found]


def _run_folders(root: Path, depth: int) -> list[Path]:
    """Folders with a ``metrics.json`` under ``root``, at most ``depth`` levels down, following
    symbolic links (run folders linked into one place), in sorted order."""
    out = []
    for folder, dirs, files in os.walk(root, followlinks=True):
        level = len(Path(folder).relative_to(root).parts)
        if level >= depth:
            dirs[:] = []  # also bounds a link that points back up the tree
        dirs.sort()
        if "metrics.json" in files:
            out.append(Path(folder))
    return sorted(out)


def main_run(paper, runs: dict) -> str | None:
    """The run the headline reads: the first main run of ``paper`` that finished (``status``
    ok); where none did (``--only`` named another run), the first run that finished; or None."""
    done = [s for s in paper.runs if runs.get(s.name, {}).get("status") == "ok"]
    return next((s.name for s in done if s.main), done[0].name if done else None)


def scored_run(paper, runs: dict, name: str | None) -> str | None:
    """The run a paper figure reads: ``name``, or, where ``name`` is a main run of ``paper`` that
    was not scored (``--only`` named another run), the run the headline reads (``main_run``)."""
    if name is None or runs.get(name, {}).get("status") == "ok":
        return name
    if any(s.main and s.name == name for s in paper.runs):
        return main_run(paper, runs) or name
    return name


def headline_label(key: str, stat: str = "pearson") -> str | None:
    """The headline label (``grounded_text.reporting.figures`` families) of one of our keys
    (``read_ours``), or None where the headline has no such figure."""
    sym = "ρ" if stat == "spearman" else "r"
    parts = key.split("/")
    if parts[0].startswith("STS1") and len(parts) == 2:
        return f"{parts[0]} {parts[1]} {sym}"
    fixed = {"STSBenchmark/test": f"STS-B test {sym} (cosine)", "SICK/test": f"SICK-R test {sym} (cosine)",
             "supervised/STSBenchmark/test": "STS-B test r (supervised)",
             "supervised/SICK/test": "SICK-R test r (supervised)"}
    if key in fixed:
        return fixed[key]
    if parts[0] == "flickr8k_1k":
        return {"caption_to_image": "caption→image", "image_to_caption": "image→caption"}[parts[1]] + " " + parts[2]
    if parts[0] == "transfer":
        return f"{parts[1]} " + ("F1" if parts[2:] == ["f1"] else "acc")
    return None


def published_figures(paper, run: str | None, runs: dict) -> dict:
    """``{headline label: HeadlineFigure}`` of the recorded figures of ``paper.published`` rows that
    ``run`` trains (or reads: ``scored_run`` of ``runs``), on the headline's scale (correlations
    as r), for the headline table. A figure on another test set than ours stands there only where
    its row names it in ``headline_nearest``, with ``same_test=False`` (never differenced)."""
    several = len(paper.protocol.spaces) > 1
    out = {}
    for spec in paper.published:
        if spec.run is None or scored_run(paper, runs, spec.run) != run:
            continue
        for fig in _selected(paper.figures_key, spec):
            key = spec.ours.get(_label(fig, spec), spec.ours.get(fig.column, fig.ours))
            same = key is not None
            if key is None and fig.column in spec.headline_nearest:
                key = spec.nearest[fig.column][0]
            label = headline_label(key, _stat_of(fig)) if key else None
            if label is None:
                continue
            label = (f"{spec.space or paper.protocol.spaces[0][0]}: " if several else "") + label
            source = (f"{SOURCES[paper.figures_key].split(',')[0]}, {fig.table}, row {fig.row or '(unlabelled)'}, "
                      f"{fig.column}" + ("" if same else f"; nearest, not our test set: {spec.nearest[fig.column][1]}"))
            out.setdefault(label, HeadlineFigure(fig.value / _scale_of(fig), source, same))
    return out


def figure_rows(paper, runs: dict) -> list[dict]:
    """Paper figure vs ours (the main run): every headline figure, then every recorded figure
    not among them (``paper.figures``, then the recorded figures of its ``published`` rows);
    ``difference`` = ours − paper where both exist on the same test set (a retrieval figure
    of ours on another protocol than the paper's 1,000-image test is not differenced)."""
    main = main_run(paper, runs)
    ours = runs[main]["headline"] if main else {}
    figs = {**published_figures(paper, main, runs), **paper.figures}
    protocols = {(ev.get("retrieval") or {}).get("protocol") for ev in
                 ((runs.get(main) or {}).get("evaluation") or {}).values() if isinstance(ev, dict)} - {None}
    rows = []
    for label in list(ours) + [f for f in figs if f not in ours]:
        fig, mine = figs.get(label), ours.get(label)
        other_test = (" R@" in label or label.endswith("medr")) and protocols and protocols != {"flickr8k_1k"}
        other_test = other_test or (fig is not None and not getattr(fig, "same_test", True))
        diff = None if fig is None or mine is None or other_test else mine - fig.value
        rows.append({"measure": label, "paper": fig.value if fig else None, "source": fig.source if fig else None,
                     "ours": mine, "difference": diff, "run": main})
    return rows


def ablation_tables(paper, runs: dict) -> dict:
    """``{ablation: [{"setting", "run", "status", "measures"}]}`` from the runs' groups; an
    ablation with a run that the budget made the same run as another (``twin``) is left out:
    its settings' labels no longer say what was trained."""
    tables: dict = {}
    twins = {g for spec in paper.runs if runs.get(spec.name, {}).get("twin") for g, _ in spec.groups}
    for spec in paper.runs:
        for group, setting in spec.groups:
            if group in twins:
                continue
            node = runs.get(spec.name, {})
            tables.setdefault(group, []).append({"setting": setting, "run": spec.name, "status": node.get("status"),
                                                 "measures": node.get("headline", {})})
    return tables


def _distinct(texts) -> str:
    return "; ".join(dict.fromkeys(texts)) or "(no run)"


def features_text(runs: dict) -> str:
    """The image features of the finished runs (``stem, d-d``), each once."""
    out = []
    for node in runs.values():
        t = node.get("training") or {}
        if node.get("status") == "ok" and t.get("feature_file"):
            stem = Path(str(t["feature_file"])).stem
            views = " (whole image resized, 1 view)" if stem.startswith(("efficientnet", "mobilenet")) else ""
            out.append(f"{stem}, {t.get('feature_dim')}-d{views}")
    return _distinct(out)


def dataset_text(runs: dict) -> str:
    """The training data of the finished runs (dataset and image count), each once."""
    out = []
    for node in runs.values():
        if node.get("status") == "ok":
            name = (node.get("config") or {}).get("data", {}).get("dataset", "flickr8k")
            n = (node.get("training") or {}).get("train_images")
            out.append(("Flickr8k train split" if name == "flickr8k" else str(name)) + (f", {n:,} images" if n else ""))
    return _distinct(out)


def data_differences(paper, runs: dict, root: Path) -> list[dict]:
    """``[{"aspect", "paper", "ours"}]``: ``paper.data_differences`` filled from the runs and the data root."""
    sts_dir = Path(root) / "sts"
    years = sorted(sts_year_dirs(sts_dir)) if sts_dir.is_dir() else []
    extra = [n for n, d in (("STS-B", "STSBenchmark"), ("SICK", "SICK")) if (sts_dir / d).is_dir()]
    fill = {"features": features_text(runs), "dataset": dataset_text(runs),
            "sts_years": ", ".join(years + extra) or "none"}
    return [{"aspect": a, "paper": pv, "ours": ov.format(**fill)} for a, pv, ov in paper.data_differences]


def trained_with(metrics: dict, overrides: dict | None) -> str:
    """What the run trained: its size and length, and the overrides of its record (when we trained it)."""
    cfg = metrics.get("config", {})
    d, m, t = cfg.get("data", {}), cfg.get("model", {}), cfg.get("train", {})
    n_img = metrics.get("data", {}).get("train_images")
    epochs = t.get("epochs")
    parts = [f"{epochs} epoch{'' if epochs == 1 else 's'}", f"{n_img:,} training images" if n_img else
             "training images: ?", f"N = {m.get('embedding_dim')}", f"batch {d.get('batch_size')}"]
    if overrides:
        parts.append("overrides of the record " + json.dumps(overrides, sort_keys=True))
    return ", ".join(parts)


def record_note(name: str | None) -> str:
    """``"record `NAME`"``, with what it is a variant of (a name that is no record is shown as is)."""
    record = PRESETS.get(name)
    return f"record `{name}`" + (f" (variant of `{record.variant_of}`)" if record and record.variant_of else "")


def scale_digits(scale: str) -> int:
    """3 decimals for a correlation or cosine as printed (0.861), 1 for ×100, percentages and ranks."""
    return 1 if any(t in scale for t in ("× 100", "%", "rank")) else 3


CURVE_KEYS = {"val_rsum": "dev R@1+5+10 (both directions)", "val_avg2016": "STS16 mean r",
              "val_avg2012/MSRvid": "STS12 MSRvid r", "val_avg2012": "STS12 mean r", "val_sick": "SICK val r"}


def training_curve(metrics: dict) -> dict:
    """``{log key: [value per epoch]}`` of the validation figures a run logged each epoch
    (``CURVE_KEYS``, from ``metrics.json``'s history); empty when it logged none."""
    history = metrics.get("history") or {}
    return {k: list(history[k]) for k in CURVE_KEYS if history.get(k)}


# ----------------------------------------------------------------------------- the papers' tables beside ours


def read_ours(ev: dict, key: str | None, stat: str = "pearson") -> dict:
    """Our figure ``key`` (the ``ours`` keys of ``grounded_text.papers.published``, plus
    ``supervised/...``, ``structure/...``, ``same_image/...``) from one space's evaluation.

    Returns:
      ``{"value": float|None, "ci": [lo, hi]|None, "n": int|None, "protocol": str|None}`` on
      our scale (correlations as r, R@K in %, medr in ranks). Year means have no interval: an
      unweighted mean of correlations over subsets of different sizes has no standard error
      we can state honestly, so ``ci`` is None there.
    """
    out = {"value": None, "ci": None, "n": None, "protocol": None}
    if not key or not isinstance(ev, dict):
        return out
    parts = key.split("/")
    node = None
    if parts[0].startswith("STS1") and len(parts) == 2:
        year = (ev.get("sts") or {}).get(parts[0]) or {}
        if parts[1] == "mean":
            out["value"] = dig(year, [stat, "mean"])
            return out
        node = dig(year, ["subsets", parts[1]])
    elif parts[0] in ("STSBenchmark", "SICK"):
        node = dig(ev.get("sts"), [parts[0], "/".join(parts[1:])])
    elif parts[0] == "supervised":
        node = dig(ev.get("supervised_sts"), [parts[1], "/".join(parts[2:])])
        out["protocol"] = dig(ev.get("supervised_sts"), [parts[1], "model"]) or "ridge"  # the regressor
    elif parts[0] in ("flickr8k_1k", "all"):
        ret = ev.get("retrieval") or {}
        metric = parts[2]
        out.update(value=dig(ret, [parts[1], metric]), ci=dig(ret, [parts[1], f"{metric}_ci95"]),
                   protocol=ret.get("protocol"), n=ret.get("n_images"))
        return out
    elif parts[0] == "structure":
        st = ev.get("structure") or {}
        if parts[1] == "rho_vis":  # Pearson, as Bordes §4.3 defines it
            out.update(value=dig(st, ["rho_vis", "pearson"]), ci=dig(st, ["rho_vis", "pearson_ci95"]))
        else:  # mNNO@K, C_intra, C_inter: a bootstrap over images (structure_ci)
            out.update(value=st.get(parts[1]), ci=st.get(f"{parts[1]}_ci95"))
        return out
    elif parts[0] == "same_image":  # "same_image/*": the one split scored (its name says how many images)
        sets = ev.get("same_image") or {}
        node = next(iter(sets.values()), None) if parts[1] == "*" else sets.get("/".join(parts[1:]))
    elif parts[0] == "transfer":  # accuracy (or F1) in %; the accuracy's Wilson interval over the n examples
        node = (ev.get("transfer") or {}).get(parts[1]) or {}
        f1 = parts[2:] == ["f1"]
        out.update(value=node.get("f1" if f1 else "acc"), n=node.get("n"), protocol="senteval")
        if not f1 and out["value"] is not None and node.get("n"):
            out["ci"] = [100.0 * c for c in wilson_ci(min(1.0, max(0.0, out["value"] / 100.0)), int(node["n"]))]
        return out
    if isinstance(node, dict):
        out.update(value=node.get(stat), ci=node.get(f"{stat}_ci95"), n=node.get("n"))
    return out


def _scale_of(fig) -> float:
    return 100.0 if "× 100" in fig.scale else 1.0


def _stat_of(fig) -> str:
    return "spearman" if "Spearman" in fig.scale else "pearson"


def _label(fig, spec: Published) -> str:
    if spec.row == "*":
        return f"{fig.block} {fig.row}".strip() if fig.block else fig.row
    return f"{fig.block}: {fig.column}" if fig.block else fig.column


def _selected(paper_key: str, spec: Published) -> list:
    return [f for f in figures(paper_key, spec.table) if (spec.row == "*" or f.row == spec.row)
            and (spec.block is None or f.block == spec.block) and (not spec.columns or f.column in spec.columns)]


def comparison_rows(paper, runs: dict) -> list[dict]:
    """Every recorded paper figure of ``paper.published`` beside ours, on the paper's scale.

    Each row: ``table``, ``row`` (as recorded), ``measure`` (our label), ``column``, ``scale``,
    ``paper``, ``paper_ci`` (the paper's printed 95 % interval or None), ``ours``, ``ours_ci``
    (ours × the paper's scale factor), ``difference`` (ours − paper, only on the same test set),
    ``compared`` (``"same test set"``, ``"nearest: ..."``, or why there is no figure of ours),
    ``run``, ``space``, ``training_data``, ``image_features`` (the paper's, from the record).
    """
    rows = []
    first_space = paper.protocol.spaces[0][0]
    for spec in paper.published:
        space = spec.space or first_space
        run = scored_run(paper, runs, spec.run)
        node = runs.get(run, {}) if run else {}
        ok = node.get("status") == "ok"
        ev = (node.get("evaluation") or {}).get(space, {}) if ok else {}
        for fig in _selected(paper.figures_key, spec):
            label = _label(fig, spec)
            scale, stat = _scale_of(fig), _stat_of(fig)
            key = spec.ours.get(label, spec.ours.get(fig.column, fig.ours))
            nearest = None if key else spec.nearest.get(fig.column)
            mine = read_ours(ev, key, stat) if key else {"value": None}
            if key and mine["value"] is None and spec.nearest.get(fig.column):  # e.g. STS14 not in our data
                nearest, key = spec.nearest[fig.column], None
            if not key:
                mine = read_ours(ev, nearest[0] if nearest else None, stat)
            if key and key.split("/")[0] == "flickr8k_1k" and mine["protocol"] not in (None, "flickr8k_1k"):
                nearest, key = (key, f"ours on retrieval protocol `{mine['protocol']}` ({mine['n']} images), "
                                     "not the paper's 1,000-image test"), None
            if run is None:
                compared = "none of our runs trains this model"
            elif fig.column in spec.unmatched:
                compared, mine, key, nearest = spec.unmatched[fig.column], {"value": None, "ci": None}, None, None
            elif not ok:
                compared = f"run `{run}` not scored ({node.get('status', 'not planned')})"
            elif key and key.startswith("supervised/"):
                compared = (("same test set, the paper's regressor (SentEval's classifier)"
                             if mine["protocol"] == "senteval" else
                             "same test set; regressor: ours ridge on [u, v, |u−v|, u*v], the paper's SentEval's")
                            if mine["value"] is not None else "ours: supervised STS not measured")
            elif key:
                compared = ("same test set" if mine["value"] is not None
                            else f"ours: `{key}` not measured (not in our data or not in this run)")
            elif nearest:
                compared = f"nearest: {nearest[1]}"
            else:
                compared = "no measure of ours on this test set"
            value = None if mine["value"] is None else mine["value"] * scale
            ci = None if not mine["ci"] else [c * scale for c in mine["ci"]]
            same = compared.startswith("same test set")
            rows.append({"table": fig.table, "row": fig.row, "block": fig.block, "column": fig.column,
                         "measure": label, "scale": fig.scale, "paper": fig.value,
                         "paper_ci": list(fig.ci95) if fig.ci95 else None, "ours": value, "ours_ci": ci,
                         "difference": value - fig.value if same and value is not None else None,
                         "compared": compared, "run": run, "space": space, "key": key,
                         "n": mine.get("n"), "training_data": fig.training_data,
                         "image_features": fig.image_features})
    return rows


def baseline_tables(paper, comparison: list) -> list[dict]:
    """A paper table with every published system of it (its baselines too) and ours beside
    them, for ``paper.baselines``: so a reader sees where our model sits among them. Ours
    only where measured on the table's own test set (a comparison row with a difference).

    Returns:
      ``[{"table", "header": [str], "rows": [[str]]}]`` (formatted cells).
    """
    out = []
    several = len(paper.protocol.spaces) > 1
    for table, by in paper.baselines:
        figs = [f for f in figures(paper.figures_key, table) if by == "column" or f.block is None]
        if by == "row":  # systems are the rows, measures the columns
            systems = list(dict.fromkeys(f.row for f in figs))
            measures = list(dict.fromkeys(f.column for f in figs))
            cell = {(f.row, f.column): f for f in figs}
        else:  # systems are the columns, measures the (block, row) lines
            systems = list(dict.fromkeys(f.column for f in figs))
            measures = list(dict.fromkeys(f"{f.block} {f.row}".strip() for f in figs))
            cell = {(f.column, f"{f.block} {f.row}".strip()): f for f in figs}
        scale = {m: next(f.scale for (_, mm), f in cell.items() if mm == m) for m in measures}
        ours: dict = {}
        for r in comparison:
            if r["table"] == table and r["ours"] is not None and r["difference"] is not None:
                name = f"ours: `{r['run']}`" + (f" ({r['space']})" if several else "")
                ours.setdefault(name, {})[r["measure"]] = r["ours"]

        def paper_cell(system, m):
            f = cell.get((system, m))
            return fmt(f.value, scale_digits(scale[m])) if f else "–"

        if by == "row":
            header = ["system"] + measures
            rows = [[s or "(unlabelled row)"] + [paper_cell(s, m) for m in measures] for s in systems]
            rows += [[name] + [fmt(v.get(m), scale_digits(scale[m])) for m in measures] for name, v in ours.items()]
        else:
            header = ["measure"] + systems + list(ours)
            rows = [[m] + [paper_cell(s, m) for s in systems] + [fmt(v.get(m), scale_digits(scale[m]))
                                                                  for v in ours.values()] for m in measures]
        out.append({"table": table, "header": header, "rows": rows})
    return out


def derived_means(paper, runs: dict) -> list[dict]:
    """Year means of Merkx & Frank's Table 5 (the unweighted mean of its printed subset
    figures; the paper prints no year mean) beside ours, for ``paper.derived_means``:
    ``[{"measure", "paper", "ours", "difference", "run"}]`` (Pearson r × 100, no interval)."""
    if not paper.derived_means:
        return []
    table, column, years = paper.derived_means
    run = main_run(paper, runs)
    ev = (runs.get(run, {}).get("evaluation") or {}).get(paper.protocol.spaces[0][0], {}) if run else {}
    recs = [f for f in figures(paper.figures_key, table) if f.column == column and f.ours]
    theirs, mine = {}, {}
    for y in years:
        vals = [f.value for f in recs if f.ours.startswith(y + "/")]
        theirs[y] = sum(vals) / len(vals) if vals else None
        ours = read_ours(ev, f"{y}/mean")["value"]
        mine[y] = None if ours is None else 100 * ours
    label_all = "mean of " + "/".join(years).replace("/STS", "/") + " means"
    out = [(f"{y} mean", theirs[y], mine[y]) for y in years]
    all_t = None if any(theirs[y] is None for y in years) else sum(theirs.values()) / len(years)
    all_m = None if any(mine[y] is None for y in years) else sum(mine.values()) / len(years)
    out.append((label_all, all_t, all_m))
    return [{"measure": m, "paper": t, "ours": o, "difference": None if t is None or o is None else o - t,
             "run": run} for m, t, o in out]


# ----------------------------------------------------------------------------- paired tests


def sts_label(key: str) -> str:
    year, _, sub = key.partition("/")
    return {"STSBenchmark/test": "STS-B test r (cosine)", "SICK/test": "SICK-R test r (cosine)"}.get(
        key, f"{year} {sub} r")


def paired_sts(a: dict, b: dict) -> dict:
    """Williams' test (``grounded_text.evaluation.stats.williams_test``) of Pearson r(gold, a)
    = r(gold, b) on every STS set both prediction dicts hold (``scoring.predictions``).

    Returns:
      ``{label: {"a": r, "b": r, "n": n, "p": p}}``; a set with constant predictions is left out.
    """

    out = {}
    sa, sb = a.get("sts") or {}, b.get("sts") or {}
    for key in sa:
        if key not in sb or len(sa[key]) != len(sb[key]):
            continue
        x, y, gold = np.asarray(sa[key], float), np.asarray(sb[key], float), np.asarray(a["gold"][key], float)
        if len(gold) < 4 or min(np.ptp(x), np.ptp(y), np.ptp(gold)) == 0:
            continue
        r12, r13, r23 = (float(np.corrcoef(u, v)[0, 1]) for u, v in ((gold, x), (gold, y), (x, y)))
        clip = [min(1.0, max(-1.0, r)) for r in (r12, r13, r23)]
        p = williams_test(*clip, len(gold))["p_value"]
        out[sts_label(key)] = {"a": r12, "b": r13, "n": int(len(gold)), "p": p}
    return out


def paired_retrieval(a: dict, b: dict, ks=(1, 5, 10)) -> dict:
    """Paired bootstrap (``stats.paired_bootstrap``, 1,000 resamples, seed 0) of R@K between
    two encoders on the same queries, from their per-query ranks (pessimistic ranks: a tie
    never counts for the ground truth, so these R@K can sit below the report's expected R@K).
    Caption→image queries are resampled by image (all captions of a drawn image) where the
    predictions hold ``groups`` (``scoring.predictions``); image→caption has one query per image.

    Returns:
      ``{"caption→image R@1": {"a": %, "b": %, "n": queries, "p": p, "unit": "images" | "queries"}, ...}``.
    """

    out = {}
    for direction, label in (("caption_to_image", "caption→image"), ("image_to_caption", "image→caption")):
        ra, rb = (np.asarray((p.get("ranks") or {}).get(direction, ()), float) for p in (a, b))
        if ra.size < 2 or ra.size != rb.size:
            continue
        groups = (a.get("groups") or {}).get(direction)  # the caption queries' images: drawn together
        groups = None if groups is None or len(groups) != ra.size else np.asarray(groups)
        for k in ks:
            ha, hb = (ra <= k).astype(float), (rb <= k).astype(float)
            res = paired_bootstrap(ha, hb, np.mean, groups=groups)
            out[f"{label} R@{k}"] = {"a": 100 * ha.mean(), "b": 100 * hb.mean(), "n": int(ra.size),
                                     "p": res["p_value"], "unit": "images" if groups is not None else "queries"}
    return out


def paired_tests(paper, runs: dict, predictions: dict) -> list[dict]:
    """The paired tests of ``paper``'s comparisons on the same pairs / queries.

    ``predictions``: ``{run: {space: scoring.predictions(...)}}``. Compared: every ablation
    setting against the ablation's first setting (same space), and, where the protocol scores
    several spaces, every other space against the first within each run.

    Returns:
      ``[{"comparison", "a", "b", "tests": {label: {"a", "b", "n", "p"}}, "test"}]``.
    """
    out = []
    space0 = paper.protocol.spaces[0][0]

    def add(title, a_name, b_name, pa, pb):
        tests = {**paired_sts(pa, pb), **paired_retrieval(pa, pb)}
        if tests:
            out.append({"comparison": title, "a": a_name, "b": b_name, "tests": tests})

    for group, rows in ablation_tables(paper, runs).items():
        ok = [r for r in rows if r["status"] == "ok" and space0 in predictions.get(r["run"], {})]
        for r in ok[1:]:
            add(f"{group}: {r['setting']} vs {ok[0]['setting']}", r["run"], ok[0]["run"],
                predictions[r["run"]][space0], predictions[ok[0]["run"]][space0])
    for run, spaces in predictions.items():
        names = [s for s, _ in paper.protocol.spaces if s in spaces]
        for other in names[1:]:
            add(f"`{run}`: {other} vs {names[0]} space", f"{run}:{other}", f"{run}:{names[0]}", spaces[other],
                spaces[names[0]])
    return out
