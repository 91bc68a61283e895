"""A study's arms on one protocol: each arm's figures with 95 % intervals, and paired tests
of every arm against the study's baseline arm on the same sentence pairs and queries.

An arm is a finished run folder (``metrics.json``, ``export/``, ``image_export/``) or a
*rescored* arm: a finished run's export scored again with another sentence-end rule at test
time (``grounded_text.data.sentence_end``), nothing retrained. Every arm is scored by
``scoring.score_encoder`` (the package's evaluation: STS cosine Pearson r with Fisher-z
intervals, Flickr8k test caption↔image retrieval on 1,000 images with R@K intervals by a
bootstrap over images), and the paired tests are ``comparison.paired_sts`` (Williams' test of
two dependent correlations with the gold scores, per STS set) and ``comparison.paired_retrieval``
(a paired bootstrap over test images of R@K). A year mean (STS16) has no interval and no
paired test: it is an unweighted mean of correlations over subsets of different sizes.
Beside the test split, each arm's caption→image retrieval on its first ``TRAIN_IMAGES``
training images (``train_retrieval``) tells a generalisation gap from a fit not reached.

Example:
    >>> [label for _, label, _ in ARM_FIGURES][:4]
    ['MSRvid r', 'STS16 mean r', 'STS-B test r', 'SICK-R test r']
    >>> paired_cell({"a": 0.70, "b": 0.68, "p": 0.0004})
    '+0.020 (p < 0.001)'
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from scipy import stats

from grounded_text.config.evaluation import EvalSettings, Protocol
from grounded_text.evaluation.encoders import load_image_encoder
from grounded_text.evaluation.retrieval import caption_to_image_ranks, images_of_pairs
from grounded_text.evaluation.stats import cluster_bootstrap_ci
from grounded_text.experiments.comparison import paired_retrieval, paired_sts, read_ours
from grounded_text.experiments.runner import read_metrics
from grounded_text.experiments.scoring import TestData, score_encoder
from grounded_text.reporting.tables import json_default, markdown_table, write_report, write_text
from grounded_text.serving.loader import load, model_sentence_end
from grounded_text.utils.durable import atomic_write
from grounded_text.utils.similarity import cosine_matrix

#: (figure key of ``comparison.read_ours``, column label, paired-test label of ``comparison``)
ARM_FIGURES = (
    ("STS12/MSRvid", "MSRvid r", "STS12 MSRvid r"),
    ("STS16/mean", "STS16 mean r", None),
    ("STSBenchmark/test", "STS-B test r", "STS-B test r (cosine)"),
    ("SICK/test", "SICK-R test r", "SICK-R test r (cosine)"),
    ("flickr8k_1k/caption_to_image/R@1", "caption→image R@1", "caption→image R@1"),
    ("flickr8k_1k/caption_to_image/R@5", "caption→image R@5", "caption→image R@5"),
    ("flickr8k_1k/caption_to_image/R@10", "caption→image R@10", "caption→image R@10"),
)


#: Training images whose caption→image retrieval is scored beside the test split's: the model
#: has seen them, so a test figure far below this one is a generalisation gap, and a low figure
#: here too is a fit the training has not reached.
TRAIN_IMAGES = 1000


def train_retrieval(encoder, image_encoder, pairs) -> dict:
    """Caption→image R@1/5/10 on ``pairs`` (e.g. the first ``TRAIN_IMAGES`` training images).

    Args:
      encoder: ``list[str] → float [m, N]``; image_encoder: ``float [n, d] → float [n, N]``.
      pairs: ``CaptionPairs`` whose images are the gallery and whose captions the queries.

    Returns:
      ``{"R@1": {"value": %, "ci": [lo, hi]}, "R@5": …, "R@10": …, "images": n, "captions": m}``:
      pessimistic ranks (``grounded_text.evaluation.retrieval``), 95 % intervals by a bootstrap
      over images (``stats.cluster_bootstrap_ci``: an image's captions are drawn together).
    """
    images, groups, features = images_of_pairs(pairs)
    ranks = caption_to_image_ranks(cosine_matrix(encoder(pairs.captions.tolist()), image_encoder(features)), groups)
    return {"images": len(images), "captions": int(len(ranks)), **recalls_with_intervals(ranks, groups)}


def recalls_with_intervals(ranks, groups, ks=(1, 5, 10)) -> dict:
    """``{"R@k": {"value": %, "ci": [lo, hi]}}`` of 1-based caption→image ``ranks`` [m], the 95 %
    intervals by a bootstrap over the captions' images ``groups`` [m]
    (``stats.cluster_bootstrap_ci``: an image's captions are drawn together)."""

    out = {}
    for k in ks:
        hits = 100.0 * (np.asarray(ranks) <= k)
        lo, hi = cluster_bootstrap_ci(hits, groups)
        out[f"R@{k}"] = {"value": float(hits.mean()), "ci": [float(lo), float(hi)]}
    return out


def _fmt(value, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def figure_cell(fig: dict, digits: int) -> str:
    """``value [lo, hi]`` of a ``read_ours`` figure (``–`` where there is none)."""
    if fig.get("value") is None:
        return "–"
    ci = fig.get("ci")
    return _fmt(fig["value"], digits) + (f" [{_fmt(ci[0], digits)}, {_fmt(ci[1], digits)}]" if ci else "")


def p_text(p: float) -> str:
    """A p-value as printed in the reports: ``< 0.001`` below it, never ``0.000``."""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def paired_cell(test: dict | None, digits: int = 3) -> str:
    """``Δ (p …)`` of one paired test (``{"a": arm, "b": baseline, "p": p}``), Δ = arm − baseline.

    Example:
        >>> paired_cell({"a": 41.0, "b": 38.5, "p": 0.21}, digits=1)
        '+2.5 (p = 0.210)'
    """
    if not test:
        return "–"
    p = p_text(test["p"])
    return f"{test['a'] - test['b']:+.{digits}f} (p {p if p.startswith('<') else '= ' + p})"


def seed_prediction_test(value: float, seeds) -> dict:
    """One arm's figure against the seed-to-seed spread of the baseline: is ``value`` a likely
    draw of one more seed of the baseline? The two-sided p-value of
    ``t = (value − mean) / (sd · √(1 + 1/k))`` with Student's t of ``k − 1`` degrees of freedom
    (``scipy.stats.t``), i.e. ``value`` against the 95 % prediction interval of one new
    observation from a normal sample of ``k`` seeds (``mean ± t(0.975, k − 1) · sd · √(1 + 1/k)``).
    The paired tests (``paired_against``) measure the test sentences' sampling error between
    two fixed models; this one measures training noise, which they do not see.

    Args:
      value: the arm's figure (one seed).
      seeds: the baseline's figure for each of its k >= 2 seeds.

    Returns:
      ``{"a": value, "b": mean, "sd", "half_width", "k", "p"}`` (floats; ``half_width``: of the
      95 % prediction interval; seeds that agree exactly, sd 0: ``p`` 1.0 where ``value`` equals
      them, else 0.0).

    Raises:
      ValueError: fewer than 2 seeds, or a non-finite figure.

    Example:
        >>> round(seed_prediction_test(5.0, [1.0, 2.0, 3.0])["p"], 4)  # t = 3 / √(4/3), 2 df
        0.1217
    """
    x = np.asarray(list(seeds), dtype=np.float64)
    if x.size < 2 or not np.isfinite(x).all() or not np.isfinite(value):
        raise ValueError(f"seed_prediction_test: needs >= 2 finite seed figures and a finite value, got "
                         f"{x.tolist()} and {value!r}.")
    k, mean, sd = x.size, float(x.mean()), float(x.std(ddof=1))
    scale = sd * np.sqrt(1.0 + 1.0 / k)
    if scale == 0.0:
        p = 1.0 if value == mean else 0.0
    else:
        p = float(2.0 * stats.t.sf(abs(value - mean) / scale, k - 1))
    return {"a": float(value), "b": mean, "sd": sd, "half_width": float(stats.t.ppf(0.975, k - 1) * scale),
            "k": int(k), "p": p}


def _baseline_seeds(arms: dict, what: dict) -> list:
    return [name for name in arms if what.get(name) == "baseline"]


def seed_spread(arms: dict, what: dict) -> dict:
    """``{arm: {column label: seed_prediction_test(...)}}`` for every arm that is not one of the
    baseline's seeds (``what[name] == "baseline"``), on every figure of ``ARM_FIGURES``; ``{}``
    with fewer than 2 baseline seeds."""
    seeds = _baseline_seeds(arms, what)
    if len(seeds) < 2:
        return {}
    out = {}
    for name, arm in arms.items():
        if name in seeds:
            continue
        tests = {}
        for key, label, _ in ARM_FIGURES:
            values = [arms[s]["figures"].get(key, {}).get("value") for s in seeds]
            value = arm["figures"].get(key, {}).get("value")
            if value is not None and None not in values:
                tests[label] = seed_prediction_test(value, values)
        out[name] = tests
    return out


def score_arms(out_dir: str | Path, runs, data_dir: str | Path, rescored=()) -> tuple[dict, dict]:
    """Scores every finished run among ``runs`` (folder names under ``out_dir``) and every
    ``Rescored`` arm whose run is finished.

    Returns:
      ``(arms, predictions)``: ``arms[name] = {"figures": {key: read_ours(...)}, "run", "seed",
      "sentence_end", "dev_rsum": [per epoch], "fit_seconds", "load_average", "train_retrieval":
      train_retrieval(...)}`` and
      ``predictions[name]`` (``scoring.predictions``, for ``paired_tests``). Runs without
      ``metrics.json`` are left out.
    """
    protocol, settings, data = Protocol(sections=("sts", "retrieval")), EvalSettings(), TestData(data_dir)
    jobs = [(run, run, None) for run in runs] + [(r.name, r.run, r.sentence_end) for r in rescored]
    arms, predictions = {}, {}
    for name, run, rule in jobs:
        run_dir = Path(out_dir) / run
        metrics = read_metrics(run_dir)
        if metrics is None:
            continue
        config = metrics.get("config") or {}
        if rule is None:  # the rule its export records; a run whose export is gone: its config's
            rule = (model_sentence_end(run_dir / "export") if (run_dir / "export").is_dir()
                    else (config.get("text") or {}).get("sentence_end", "none"))
        cache = _Cache(Path(out_dir) / f"{name}.arm", run_dir / "metrics.json", rule)
        if cache.valid():
            arms[name], predictions[name] = cache.read()
            if "train_retrieval" in arms[name]:
                continue
        text, image = load(run_dir / "export", sentence_end=rule), load_image_encoder(run_dir / "image_export")
        if name not in arms:
            keep: dict = {}
            res = score_encoder(name, text, protocol, settings, data, data_cfg=config.get("data", {}),
                                image_encoder=image, source=str(run_dir / "export"), keep=keep)
            predictions[name] = keep["predictions"]
            arms[name] = {
                "run": run, "seed": (config.get("train") or {}).get("seed"), "sentence_end": rule,
                "figures": {key: read_ours(res, key) for key, _, _ in ARM_FIGURES},
                # A rescored arm trained nothing: its training figures are its run's, not repeated.
                "dev_rsum": [] if name != run else [round(float(v), 2)
                                                    for v in (metrics.get("history") or {}).get("val_rsum", [])],
                "fit_seconds": None if name != run else (metrics.get("timing_seconds") or {}).get("fit"),
                "load_average": None if name != run else metrics.get("load_average"),
            }
        # Also added to an arm cached before this figure existed.
        arms[name]["train_retrieval"] = train_retrieval(
            text, image, data.split_pairs(config.get("data", {}), "train", TRAIN_IMAGES))
        cache.write(arms[name], predictions[name])
    return arms, predictions


class _Cache:
    """One arm's scores (``PATH.json``) and predictions (``PATH.npz``, plain arrays: no pickle),
    valid while the run's ``metrics.json`` (size and time) and the sentence-end rule are those
    they were computed from: scoring a character model takes minutes on a CPU."""

    def __init__(self, path: Path, metrics_file: Path, rule: str):
        stat = metrics_file.stat()
        path = Path(path)
        self.json, self.npz = path.with_name(path.name + ".json"), path.with_name(path.name + ".npz")
        self.path, self.key = path, {"metrics_size": stat.st_size, "metrics_mtime_ns": stat.st_mtime_ns, "rule": rule}

    def valid(self) -> bool:
        try:
            stored = json.loads(self.json.read_text())
        except (OSError, ValueError):
            return False
        return stored.get("key") == self.key and self.npz.is_file()

    def read(self) -> tuple[dict, dict]:
        arm = json.loads(self.json.read_text())["arm"]
        prediction: dict = {"sts": {}, "gold": {}, "ranks": {}, "groups": {}}
        with np.load(self.npz, allow_pickle=False) as z:
            for flat in z.files:
                part, _, key = flat.partition("|")
                prediction[part][key] = z[flat]
        return arm, prediction

    def write(self, arm: dict, prediction: dict) -> None:


        buffer = io.BytesIO()
        np.savez(buffer, **{f"{part}|{key}": np.asarray(v) for part, d in prediction.items() for key, v in d.items()})
        atomic_write(self.npz, lambda f: f.write(buffer.getvalue()))
        write_text(self.json, json.dumps({"key": self.key, "arm": arm}, default=json_default))


def paired_against(baseline: str, arms: dict, predictions: dict) -> dict:
    """``{arm: {test label: {"a", "b", "n", "p"}}}``: every arm against ``baseline`` (a = arm)."""
    if baseline not in predictions:
        return {}
    base = predictions[baseline]
    return {name: {**paired_sts(pred, base), **paired_retrieval(pred, base)}
            for name, pred in predictions.items() if name != baseline}


def arms_markdown(arms: dict, paired: dict, baseline: str, what: dict) -> str:
    """Two Markdown tables: the arms' figures with their 95 % intervals, then each arm's
    difference from ``baseline`` with its paired p-value. ``what``: one line per arm."""
    def digits(key):
        return 1 if "R@" in key else 3

    head = ["arm", "what differs from the baseline", "seed"] + [label for _, label, _ in ARM_FIGURES] + [
        f"caption→image R@10, {TRAIN_IMAGES:,} training images", "dev rsum per epoch", "fit (s)",
        "load (1-min, start → end)"]
    body = []
    for name, arm in arms.items():
        load = arm.get("load_average") or {}
        ends = [f"{load[k][0]:.1f}" if load.get(k) else "not recorded" for k in ("start", "end")]
        load_text = " → ".join(ends) if load.get("start") or load.get("end") else "not recorded"
        body.append([f"`{name}`", what.get(name, ""), str(arm["seed"])]
                    + [figure_cell(arm["figures"][key], digits(key)) for key, _, _ in ARM_FIGURES]
                    + [figure_cell((arm.get("train_retrieval") or {}).get("R@10", {}), 1)]
                    + [", ".join(f"{v:.1f}" for v in arm["dev_rsum"]) or "–",
                       _fmt(arm["fit_seconds"], 0), load_text])
    figures = markdown_table(head, body)
    head2 = ["arm − `" + baseline + "`"] + [label for _, label, test in ARM_FIGURES if test]
    body2 = [[f"`{name}`"] + [paired_cell(tests.get(test), digits(key)) for key, _, test in ARM_FIGURES if test]
             for name, tests in paired.items()]
    md = "\n".join(figures) + "\n\n" + "\n".join(markdown_table(head2, body2))
    spread = seed_spread(arms, what)
    if spread:
        seeds = _baseline_seeds(arms, what)
        head3 = [f"arm − mean of the {len(seeds)} baseline seeds"] + [label for _, label, _ in ARM_FIGURES]
        body3 = [[f"`{name}`"] + [paired_cell(tests.get(label), digits(key)) for key, label, _ in ARM_FIGURES]
                 for name, tests in spread.items()]
        first = next(iter(spread.values()), {})
        bounds = ", ".join(f"{label} ±{_fmt(first[label]['half_width'], digits(key))}"
                           for key, label, _ in ARM_FIGURES if label in first)
        md += ("\n\n" + "\n".join(markdown_table(head3, body3)) + "\n\n" +
               f"(Against training noise: p of one arm's figure as one more seed of the baseline, Student's t "
               f"with {len(seeds) - 1} degrees of freedom on the seeds' mean and sd; the 95 % prediction "
               f"intervals: {bounds}.)")
    return md


def write_arms_report(out_dir: str | Path, stem: str, arms: dict, paired: dict, baseline: str, what: dict,
                      title: str) -> str:
    """Writes ``out_dir/<stem>.md`` and ``.json`` (atomically); returns the Markdown."""
    md = f"{title}\n\n" + arms_markdown(arms, paired, baseline, what)
    write_report({"baseline": baseline, "arms": arms, "paired": paired, "what": what,
                  "seed_spread": seed_spread(arms, what)}, md,
                 json_path=Path(out_dir) / f"{stem}.json", markdown_path=Path(out_dir) / f"{stem}.md")
    return md
