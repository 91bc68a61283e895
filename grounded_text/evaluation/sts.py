"""Unsupervised STS evaluation: cosine similarity of embeddings vs gold scores.

Conventions (SentEval, Conneau & Kiela 2018): per subset Pearson r and Spearman ρ
(``scipy.stats``) between the cosine similarity of the two sentence embeddings and
the gold score; per year ``mean`` = unweighted average over subsets and ``wmean``
= average weighted by each subset's number of scored pairs. STS-B test and SICK
test (SICK-R) are scored the same way, *without* training a regressor (that is
SentEval's supervised protocol, which these numbers are not).

An encoder is any callable mapping a list of n strings to a float array [n, N]:
an in-memory Keras text tower, or any SavedModel loaded by ``grounded_text.load`` (ours
or a downloaded TF Hub text-embedding module).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy import stats

from grounded_text.data.sts import (
    SentencePairs,
    read_sick,
    read_sts_benchmark,
    read_sts_year,
    sts_year_dirs,
)
from grounded_text.evaluation.encoders import (  # noqa: F401 (re-exported: the STS API takes encoders)
    EmbeddingCache,
    Encoder,
    batched,
    cached,
)
from grounded_text.evaluation.stats import pearson_ci, spearman_ci
from grounded_text.utils.quiet import GroundedTextWarning
from grounded_text.utils.similarity import cosine_rows


def correlations(predicted: np.ndarray, gold: np.ndarray) -> dict:
    """Pearson r and Spearman ρ (scipy.stats) of predictions vs gold.

    Returns:
      ``{"pearson": float|None, "spearman": float|None, "n": int}``; ``None`` (with
      a warning) where undefined: fewer than 2 pairs or constant predictions. From 4 pairs
      on, also ``"pearson_ci95"`` and ``"spearman_ci95"``: ``[lo, hi]`` 95% confidence
      intervals by Fisher z (``grounded_text.evaluation.stats``; as Merkx & Frank 2019,
      Table 5; Spearman with the Bonett–Wright variance).

    Example:
      >>> r = correlations([0.1, 0.4, 0.35, 0.8], [0.0, 1.0, 2.0, 3.0])
      >>> round(r["pearson"], 4), round(r["spearman"], 4), r["n"]
      (0.9134, 0.8, 4)
      >>> [round(x, 2) for x in r["pearson_ci95"]]  # 4 pairs: a wide interval
      [-0.39, 1.0]
    """
    predicted = np.asarray(predicted, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    n = int(predicted.shape[0])
    if n < 2 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        warnings.warn(f"correlation undefined (n={n}, constant predictions or gold).", GroundedTextWarning,
                      stacklevel=2)
        return {"pearson": None, "spearman": None, "n": n}
    out = {
        "pearson": float(stats.pearsonr(predicted, gold)[0]),
        "spearman": float(stats.spearmanr(predicted, gold)[0]),
        "n": n,
    }
    if n >= 4:
        out["pearson_ci95"] = list(pearson_ci(out["pearson"], n))
        out["spearman_ci95"] = list(spearman_ci(out["spearman"], n))
    return out


def score_pairs(encoder: Encoder, pairs: SentencePairs) -> dict:
    """Cosine-vs-gold correlations of one set of pairs (see ``correlations``).

    Example:
      >>> def encoder(sentences):  # counts of "dog" and "cat", and a constant
      ...     return np.array([[s.count("dog"), s.count("cat"), 1.0] for s in sentences])
      >>> pairs = SentencePairs(["a dog", "a cat", "a dog", "a dog"], ["the dog", "a dog", "a cat", "a cat dog"],
      ...                       scores=np.array([5.0, 1.0, 0.5, 3.0]))
      >>> r = score_pairs(encoder, pairs)
      >>> round(r["pearson"], 4), round(r["spearman"], 4), r["n"]
      (0.9898, 0.9487, 4)
    """
    cache = cached(encoder)
    cache.add(list(pairs.sentences1) + list(pairs.sentences2))
    sims = cosine_rows(cache(pairs.sentences1), cache(pairs.sentences2))
    return correlations(sims, pairs.scores)


def _aggregate(subsets: dict) -> dict:
    out = {}
    for key in ("pearson", "spearman"):
        vals = [(r[key], r["n"]) for r in subsets.values() if r[key] is not None]
        if not vals:
            out[key] = {"mean": None, "wmean": None}
            continue
        v = np.array([x for x, _ in vals])
        w = np.array([n for _, n in vals], dtype=np.float64)
        out[key] = {"mean": float(v.mean()), "wmean": float((v * w).sum() / w.sum())}
    return out


def score_sts_year(encoder: Encoder, year_dir: str | Path) -> dict:
    r"""Scores every subset of one ``STS1x-en-test`` folder.

    Returns:
      ``{"subsets": {name: {"pearson", "spearman", "n"}}, "pearson": {"mean", "wmean"},
      "spearman": {"mean", "wmean"}, "n": total pairs}``, plus ``"skipped": {name: reason}``
      when subsets without a scored pair were left out (with a warning; see
      :func:`grounded_text.data.sts.read_sts_year`).

    Raises:
      ValueError: a malformed subset (see :func:`grounded_text.data.sts.read_sts_subset`).

    Example:
      >>> import tempfile
      >>> tmp = tempfile.TemporaryDirectory()
      >>> year = Path(tmp.name) / "STS16-en-test"
      >>> year.mkdir()
      >>> _ = (year / "STS2016.input.toy.txt").write_text("a dog\tthe dog\na cat\ta dog\na dog\ta cat dog\n")
      >>> _ = (year / "STS2016.gs.toy.txt").write_text("5\n1\n3\n")
      >>> def encoder(sentences):  # counts of "dog" and "cat", and a constant
      ...     return np.array([[s.count("dog"), s.count("cat"), 1.0] for s in sentences])
      >>> report = score_sts_year(encoder, year)
      >>> list(report["subsets"]), round(report["pearson"]["mean"], 4), report["n"]
      (['toy'], 0.9884, 3)
      >>> tmp.cleanup()
    """
    cache = cached(encoder)
    skipped: dict = {}
    subsets = {name: score_pairs(cache, pairs) for name, pairs in read_sts_year(year_dir, skipped).items()}
    out = {"subsets": subsets, **_aggregate(subsets), "n": sum(r["n"] for r in subsets.values())}
    if skipped:
        out["skipped"] = skipped
    return out


def evaluate_sts(
    encoder: Encoder,
    sts_dir: str | Path,
    *,
    years: Sequence[str] | None = None,
    sts_benchmark: bool = True,
    sick: bool = True,
) -> dict:
    r"""The unsupervised STS report of an encoder.

    Args:
      encoder: strings → float [n, N].
      sts_dir: folder holding ``STS1x-en-test/`` folders (any years), and
        optionally ``STSBenchmark/`` and ``SICK/``.
      years: restrict to these year keys (e.g. ``["STS16"]``); default all found.
      sts_benchmark, sick: also score STS-B test and SICK test (cosine).

    Returns:
      ``{"STS12": score_sts_year(...), ..., "STSBenchmark": {"test": {...}, "test/captions": {...},
      "test/news": {...}, "test/forum": {...}}, "SICK": {"test": {...}}}`` (STS-B/SICK only where their folders exist).

    Raises:
      FileNotFoundError: ``sts_dir`` does not exist or holds nothing to score.

    Example:
      >>> import tempfile
      >>> tmp = tempfile.TemporaryDirectory()
      >>> year = Path(tmp.name) / "STS16-en-test"
      >>> year.mkdir()
      >>> _ = (year / "STS2016.input.toy.txt").write_text("a dog\tthe dog\na cat\ta dog\na dog\ta cat dog\n")
      >>> _ = (year / "STS2016.gs.toy.txt").write_text("5\n1\n3\n")
      >>> def encoder(sentences):  # counts of "dog" and "cat", and a constant
      ...     return np.array([[s.count("dog"), s.count("cat"), 1.0] for s in sentences])
      >>> report = evaluate_sts(encoder, tmp.name)
      >>> list(report), round(report["STS16"]["pearson"]["mean"], 4)
      (['STS16'], 0.9884)
      >>> tmp.cleanup()
      >>> import grounded_text as gt  # doctest: +SKIP
      >>> report = evaluate_sts(gt.load("runs/vete_bow/export").encode, "data/sts", years=["STS16"])  # doctest: +SKIP
      >>> sorted(report)  # doctest: +SKIP
      ['SICK', 'STS16', 'STSBenchmark']
    """
    sts_dir = Path(sts_dir)
    if not sts_dir.is_dir():
        raise FileNotFoundError(f"STS directory {str(sts_dir)!r} does not exist.")
    cache = EmbeddingCache(encoder)
    report: dict = {}
    for year, path in sts_year_dirs(sts_dir).items():
        if years is None or year in years:
            report[year] = score_sts_year(cache, path)
    if sts_benchmark and (sts_dir / "STSBenchmark").is_dir():
        test = read_sts_benchmark(sts_dir, "test")
        # Bordes et al. (2019, Table 1) report STS-B by genre as well as whole.
        report["STSBenchmark"] = {"test": score_pairs(cache, test),
                                  **{f"test/{g}": score_pairs(cache, part) for g, part in test.by_genre().items()}}
    if sick and (sts_dir / "SICK").is_dir():
        report["SICK"] = {"test": score_pairs(cache, read_sick(sts_dir, "test"))}
    if not report:
        raise FileNotFoundError(f"Nothing to score under {str(sts_dir)!r} (no STS1x-en-test, STSBenchmark or SICK).")
    return report


def headline_figures(report: dict) -> dict:
    """The figures quoted in the README: STS12 MSRvid, STS16 mean, STS-B and SICK Pearson.

    Example:
      >>> headline_figures({"STS16": {"pearson": {"mean": 0.61}}, "SICK": {"test": {"pearson": 0.7}}})
      {'STS12/MSRvid pearson': None, 'STS16 mean pearson (avg2016)': 0.61, 'STS-B test pearson': None,
       'SICK test pearson': 0.7}
    """
    def get(*keys):
        node = report
        for k in keys:
            if not isinstance(node, dict) or k not in node:
                return None
            node = node[k]
        return node

    return {
        "STS12/MSRvid pearson": get("STS12", "subsets", "MSRvid", "pearson"),
        "STS16 mean pearson (avg2016)": get("STS16", "pearson", "mean"),
        "STS-B test pearson": get("STSBenchmark", "test", "pearson"),
        "SICK test pearson": get("SICK", "test", "pearson"),
    }


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def format_markdown(report: dict, title: str = "STS (cosine, unsupervised)") -> str:
    """A Markdown table of a report from ``evaluate_sts``.

    Example:
      >>> print(format_markdown({"SICK": {"test": {"pearson": 0.7, "spearman": 0.65, "n": 4927}}}))
      ### STS (cosine, unsupervised)
      <BLANKLINE>
      | set | subset | n | Pearson r | Spearman ρ |
      |---|---|---:|---:|---:|
      | SICK | test | 4927 | 0.7000 | 0.6500 |
    """
    lines = [f"### {title}", "", "| set | subset | n | Pearson r | Spearman ρ |", "|---|---|---:|---:|---:|"]
    for key, node in report.items():
        if "subsets" in node:
            for name, r in node["subsets"].items():
                lines.append(f"| {key} | {name} | {r['n']} | {_fmt(r['pearson'])} | {_fmt(r['spearman'])} |")
            for agg in ("mean", "wmean"):
                lines.append(f"| {key} | **{agg}** | {node['n']} | {_fmt(node['pearson'][agg])} | "
                             f"{_fmt(node['spearman'][agg])} |")
            for name, reason in node.get("skipped", {}).items():
                lines.append(f"| {key} | {name} | 0 | skipped | {reason} |")
        else:
            for split, r in node.items():
                lines.append(f"| {key} | {split} | {r['n']} | {_fmt(r['pearson'])} | {_fmt(r['spearman'])} |")
    return "\n".join(lines)
