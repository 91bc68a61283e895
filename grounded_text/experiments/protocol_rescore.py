"""One model's export scored twice, with two sentence-end rules at test time, and the two
scorings compared on the same sentence pairs and queries. Nothing is trained.

The character model of Merkx & Frank (2019) is trained on captions ending in " ." (our
``space_period``); the authors' SentEval batcher gives every test sentence " ." unless its
last token is "." (``space_period_tokens``, ``SentEval/evaluate_char.py:58-60`` at
``DannyMerkx/caption2image`` ``8a4dc2c``). The paper's Table 5 was scored with theirs, so a
comparison with the paper is on their protocol only when our figures are scored with it too.

::

    python -m grounded_text.experiments.protocol_rescore char_gru_attention_flickr8k \\
        --data-dir "$GROUNDED_TEXT_DATA" --output-dir runs/protocol_rescore

writes ``OUTPUT_DIR/<model>.json`` (every figure with its 95 % interval per rule, and the paired
tests) and ``OUTPUT_DIR/<model>.md`` (the table). Figures: cosine Pearson r per STS12/13/16
subset found and on the STS-B and SICK-R test sets (Fisher z intervals), supervised STS-B and
SICK-R with SentEval's relatedness classifier (the paper's regressor; Fisher z intervals), and
caption↔image retrieval on the Flickr8k test split (1,000 images; bootstrap intervals over
images). Paired tests, rule A against rule B: Williams' test per STS set (on the cosines; for
the supervised sets on the classifier's test predictions, each rule's classifier trained on its
own embeddings) and a paired bootstrap over images for R@K (``comparison.paired_sts``,
``comparison.paired_retrieval``). Each rule's scoring is cached beside the outputs (it takes
minutes on a CPU).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from grounded_text import shipped
from grounded_text.config.evaluation import EvalSettings, Protocol
from grounded_text.data.sts import read_sick, read_sts_benchmark
from grounded_text.evaluation.encoders import cached, load_image_encoder
from grounded_text.evaluation.stats import format_p
from grounded_text.evaluation.supervised_sts import evaluate_supervised_sts
from grounded_text.experiments import paper_report
from grounded_text.experiments.comparison import paired_retrieval, paired_sts, read_ours, sts_label
from grounded_text.experiments.scoring import TestData, score_encoder
from grounded_text.experiments.verdicts import CONSERVATIVE_R23, williams_verdict
from grounded_text.papers.published import figures
from grounded_text.reporting.tables import markdown_table, read_sections
from grounded_text.serving.loader import load

#: The two rules compared: the authors' SentEval rule first (the paper's protocol), then ours.
RULES = ("space_period_tokens", "space_period")
RULE_WORDS = {"space_period_tokens": "the authors' SentEval sentence ends (\" .\" unless the last token is \".\")",
              "space_period": "our rule (\" .\" unless the sentence ends in \".\", as the training captions)",
              "none": "sentences as they are"}
SUPERVISED = {"STSBenchmark": "STS-B test r (supervised)", "SICK": "SICK-R test r (supervised)"}


def score_with_rule(model: str, rule: str, data_dir: Path, cache_dir: Path, *,
                    stem: str | None = None) -> tuple[dict, dict]:
    """``(figures, predictions)`` of ``model`` with the test-time sentence-end ``rule``, from
    the cache when it holds them.

    Args:
      model: a shipped model's name, or a run folder (``export/``, ``image_export/``).
      rule: a sentence-end rule (``grounded_text.data.sentence_end.SENTENCE_ENDS``).
      data_dir: the data root; cache_dir: where ``STEM.RULE.json`` / ``.npz`` are kept.
      stem: the cache files' stem (default: the model's folder or shipped name).

    Returns:
      ``figures``: ``{label: {"value", "ci", "n"}}`` (every STS subset found, STS-B and SICK-R
      cosine and supervised with SentEval's classifier, caption→image and image→caption R@1/5/10
      on the Flickr8k test split); ``predictions``: ``scoring.predictions``' dict, plus the
      supervised test predictions, for the paired tests.
    """
    stem = f"{stem or Path(model).name}.{rule}"
    js, npz = cache_dir / f"{stem}.json", cache_dir / f"{stem}.npz"
    if js.is_file() and npz.is_file():
        figures = json.loads(js.read_text())
        pred: dict = {"sts": {}, "gold": {}, "ranks": {}, "groups": {}}
        with np.load(npz, allow_pickle=False) as z:
            for flat in z.files:
                part, _, key = flat.partition("|")
                pred[part][key] = z[flat]
        return figures, pred


    export = shipped.export_dir(model) if shipped.is_name(model) else Path(model) / "export"
    image_dir = shipped.image_export_dir(model) if shipped.is_name(model) else Path(model) / "image_export"
    config = json.loads((export / "assets" / "config.json").read_text()) if (
        export / "assets" / "config.json").is_file() else {}
    text = cached(load(export, sentence_end=rule))
    image = load_image_encoder(image_dir) if image_dir else None
    keep: dict = {}
    res = score_encoder(f"{model}:{rule}", text, Protocol(sections=("sts", "retrieval")), EvalSettings(),
                        TestData(data_dir), data_cfg=(config.get("data") or {}), image_encoder=image, keep=keep)
    pred = keep["predictions"]
    figures: dict = {}
    for key in pred["sts"]:
        fig = read_ours(res, key)
        figures[sts_label(key)] = {"value": fig["value"], "ci": fig["ci"], "n": int(len(pred["sts"][key]))}
    for direction, words in (("caption_to_image", "caption→image"), ("image_to_caption", "image→caption")):
        for k in ("R@1", "R@5", "R@10"):
            fig = read_ours(res, f"flickr8k_1k/{direction}/{k}")
            figures[f"{words} {k}"] = {"value": fig["value"], "ci": fig["ci"], "n": fig["n"]}
    sup = evaluate_supervised_sts(text, data_dir / "sts", model="senteval", keep_predictions=True)
    for task, label in SUPERVISED.items():
        if task in sup:
            test = sup[task]["test"]
            figures[label] = {"value": test["pearson"], "ci": test.get("pearson_ci95"), "n": test["n"]}
            pred["sts"][f"supervised/{task}"] = np.asarray(sup[task]["test_predictions"], np.float32)
            pred["gold"][f"supervised/{task}"] = _supervised_gold(data_dir / "sts", task)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.savez(npz, **{f"{part}|{key}": np.asarray(v) for part, d in pred.items() for key, v in d.items()})
    js.write_text(json.dumps(figures, indent=1))
    return figures, pred


def _supervised_gold(sts_dir: Path, task: str):

    pairs = read_sts_benchmark(sts_dir, "test") if task == "STSBenchmark" else read_sick(sts_dir, "test")
    return np.asarray(pairs.scores, np.float32)


def paired(a: dict, b: dict) -> dict:
    """Williams' test per STS set (cosine and supervised) and the paired bootstrap of R@K,
    rule A (``a``) against rule B (``b``): ``{label: {"a", "b", "n", "p"}}``."""
    names = {sts_label(f"supervised/{task}"): label for task, label in SUPERVISED.items()}
    out = {names.get(label, label): test for label, test in paired_sts(a, b).items()}
    return {**out, **paired_retrieval(a, b)}


def rescore(model: str, data_dir: str | Path, output_dir: str | Path, rules=RULES) -> dict:
    """Scores ``model`` (a shipped name, or a run folder with ``export/`` and ``image_export/``)
    with each of ``rules`` and compares the first with the second.

    Returns:
      ``{"model", "rules", "figures": {rule: {label: {"value", "ci", "n"}}}, "paired": {label:
      {"a", "b", "n", "p"}}}`` (a = ``rules[0]``), also written to ``OUTPUT_DIR/<model>.json``.
    """
    out_dir = Path(output_dir)
    name = Path(model).name
    scored = {rule: score_with_rule(model, rule, Path(data_dir), out_dir / "cache") for rule in rules}
    result = {"model": model, "rules": list(rules), "figures": {r: f for r, (f, _) in scored.items()},
              "paired": paired(scored[rules[0]][1], scored[rules[1]][1])}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(result, indent=1))
    (out_dir / f"{name}.md").write_text(markdown(result) + "\n")
    return result


def markdown(result: dict) -> str:
    """The table: each figure under each rule with its 95 % interval, the difference and its p."""
    a, b = result["rules"]
    fa, fb = result["figures"][a], result["figures"][b]

    def cell(fig, digits):
        if not fig or fig.get("value") is None:
            return "–"
        ci = fig.get("ci")
        return f"{fig['value']:.{digits}f}" + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "")

    body = []
    for label in fa:
        digits = 1 if " R@" in label else 3
        test = result["paired"].get(label)
        diff = "–" if not test else f"{test['a'] - test['b']:+.{digits}f}"
        body.append([label, f"{fa[label]['n']:,}" if fa[label].get("n") else "–", cell(fa[label], digits),
                     cell(fb.get(label), digits), diff, format_p(test["p"]) if test else "–",
                     "–" if not test else ("paired bootstrap over images" if " R@" in label else "Williams' test")])
    return "\n".join(markdown_table(["measure", "n", f"`{a}` [95 % CI]", f"`{b}` [95 % CI]", f"`{a}` − `{b}`",
                                     "p (two-sided)", "paired test"], body,
                                    ["---", "---:", "---", "---", "---:", "---:", "---"]))


#: Merkx & Frank's Table 5 rows with no STS subset key: the supervised figures (SentEval's classifier).
_SUPERVISED_ROWS = {"STS-B STS 12-16": "STS-B test r (supervised)", "SICK Relatedness": "SICK-R test r (supervised)"}


def beside_paper(result: dict, report: str | Path) -> list[dict]:
    """Each rule's figures beside Merkx & Frank's Table 5 (char-GRU, Flickr8k), judged by
    ``verdicts.williams_verdict`` at the r₂₃ that the report's Merkx & Frank section measured
    between two of our models on that set (its verdict table) and at the conservative r₂₃.

    Returns:
      ``[{"measure", "label", "paper", "paper_ci", "n", "r23", "r23_how", rule: {"value", "ci",
      "verdict": williams_verdict(...)}}]`` in Table 5's order, for the sets both hold.
    """
    section = read_sections(Path(report).read_text(encoding="utf-8"), "reproduce")["merkx_frank"]
    measured = {r["measure"]: r for r in paper_report.verdict_rows_from_markdown(paper_report.verdict_table(section))}
    out = []
    for fig in figures("merkx2019_char_grounding", "Table 5"):
        measure = f"{fig.block} {fig.row}"
        label = sts_label(fig.ours) if fig.ours else _SUPERVISED_ROWS.get(measure)
        ours = {rule: result["figures"][rule].get(label) for rule in result["rules"]}
        if fig.column != "char-GRU (Flickr8k)" or measure not in measured or None in ours.values():
            continue
        m = measured[measure]
        row = {"measure": measure, "label": label, "paper": fig.value / 100, "paper_ci": [c / 100 for c in fig.ci95],
               "n": ours[result["rules"][0]]["n"], "r23": m["r23"], "r23_how": m["r23_how"]}
        for rule, fig_ in ours.items():
            row[rule] = {**fig_, "verdict": williams_verdict(fig_["value"], fig.value / 100, fig_["n"], m["r23"],
                                                             m["r23_how"])}
        out.append(row)
    return out


def beside_paper_markdown(result: dict, rows: list[dict]) -> str:
    """The table of ``beside_paper``: the paper's figure, then each rule's with its verdict."""
    def cell(fig):
        return f"{fig['value']:.3f} [{fig['ci'][0]:.3f}, {fig['ci'][1]:.3f}]"

    def judged(v):
        return f"{v['verdict']} (p = {format_p(v['p'])} / {format_p(v['p_conservative'])})".replace("= <", "<")

    rules = result["rules"]
    head = ["Table 5 (char-GRU, Flickr8k)", "n", "paper [95 % CI]"]
    for rule in rules:
        head += [f"ours, `{rule}` [95 % CI]", f"verdict, `{rule}` (p at the measured r₂₃ / at {CONSERVATIVE_R23})"]
    head.append("measured r₂₃")
    body = []
    for r in rows:
        line = [r["measure"], f"{r['n']:,}", cell({"value": r["paper"], "ci": r["paper_ci"]})]
        for rule in rules:
            line += [cell(r[rule]), judged(r[rule]["verdict"])]
        body.append(line + [f"{r['r23']:.3f}"])
    return "\n".join(markdown_table(head, body))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grounded_text.experiments.protocol_rescore",
                                description="Score one model with two test-time sentence-end rules, paired.")
    p.add_argument("model", help="a shipped model's name, or a run folder (export/, image_export/)")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--rules", nargs=2, default=list(RULES), metavar="RULE")
    p.add_argument("--beside-paper", metavar="REPORT",
                   help="also judge each rule's figures against Merkx & Frank's Table 5 at the r₂₃ measured in "
                        "REPORT's Merkx & Frank section (e.g. docs/reproduction.md) and at the conservative one")
    a = p.parse_args(argv)
    result = rescore(a.model, a.data_dir, a.output_dir, tuple(a.rules))
    print(markdown(result))
    if a.beside_paper:
        md = beside_paper_markdown(result, beside_paper(result, a.beside_paper))
        (Path(a.output_dir) / f"{Path(a.model).name}.paper.md").write_text(md + "\n")
        print("\n" + md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
