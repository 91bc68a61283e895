"""What ``python -m grounded_text.benchmark`` runs once its flags are parsed: the default
training and encoding figures (``run``), ``--char-speed`` (``run_char_speed``), ``--floors``
(``run_floors``) and the model-choice chart (``chart_node``, ``draw_chart``). Each phase runs
in a fresh subprocess (``grounded_text.benchmarks.throughput``, ``grounded_text.benchmarks.floors``);
this module starts them, prints their figures as tables and writes the ``--json`` report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grounded_text.benchmarks.floors import GEMM_SIZE as GEMM
from grounded_text.benchmarks.throughput import machine_info, run_phase_subprocess
from grounded_text.data.paths import resolve_data_dir
from grounded_text.data.sts import read_sick, read_sts_benchmark
from grounded_text.evaluation.stats import pearson_ci
from grounded_text.experiments.charts import model_choice_chart
from grounded_text.experiments.runner import read_metrics
from grounded_text.reporting.figures import FIGURES

FLOORS = "grounded_text.benchmarks.floors"  # the module that runs the floor phases


def benchmark_sentences(sts_dir: str | Path) -> list[str]:
    """Every sentence of STS-B (train, dev, test) and SICK (train, trial, test), in file
    order, both sides of each pair, duplicates kept.

    Raises:
      FileNotFoundError: neither STS-B nor SICK under ``sts_dir``.
    """
    sentences: list[str] = []
    for reader, splits in ((read_sts_benchmark, ("train", "dev", "test")), (read_sick, ("train", "trial", "test"))):
        for split in splits:
            try:
                pairs = reader(sts_dir, split)
            except (FileNotFoundError, ValueError, KeyError):
                continue
            sentences += list(pairs.sentences1) + list(pairs.sentences2)
    if not sentences:
        raise FileNotFoundError(f"No STS-B or SICK sentences under {sts_dir}.")
    return sentences


def _fmt(s: dict, digits: int = 0) -> str:
    return f"{s['median']:,.{digits}f} ({s['min']:,.{digits}f}–{s['max']:,.{digits}f})"


def run(args) -> dict:
    root = resolve_data_dir(args.data_dir)
    work = Path(tempfile.mkdtemp(prefix="grounded_text_bench_"))
    sentences = benchmark_sentences(root / "sts")
    sentences_file = work / "sentences.json"
    sentences_file.write_text(json.dumps(sentences))
    report: dict = {"command": " ".join(["python -m grounded_text.benchmark"] + sys.argv[1:]),
                    "machine": machine_info(), "uptime": _uptime(), "repeats": args.repeats,
                    "sentence_list": {"source": "STS-B train/dev/test + SICK train/trial/test, both sides",
                                      "count": len(sentences)}}
    timeout = args.phase_timeout
    # (1) training + export of the trained text tower.
    export_dir = args.export or str(work / "export")
    fit_args = {"model": args.model, "batch_size": args.batch_size or 128, "repeats": args.repeats,
                "data_dir": str(root), "mixed_precision": args.mixed_precision, "strategy": args.strategy,
                "steps_per_execution": args.steps_per_execution, "max_train_images": args.max_train_images,
                "export_dir": None if args.export else export_dir,
                "tokenize_in_pipeline": args.tokenize_in_pipeline}
    if not args.skip_fit:
        report["fit"] = run_phase_subprocess("fit", fit_args, timeout)
        _print_fit(report["fit"])
    elif not args.export:
        raise SystemExit("--skip-fit needs --export DIR (an exported hub module to time)")
    # (2) encoding.
    enc_args = {"sentences_file": str(sentences_file), "batch_sizes": list(args.batch_sizes),
                "repeats": args.repeats, "min_seconds": args.min_seconds}
    # The export and its own tokenisation alone, side by side in one process (the floor).
    report["encode"] = run_phase_subprocess("encode", {**enc_args, "export_dir": export_dir,
                                                       "tokenizer_floor": True,
                                                       "compare_dir": args.compare_export}, timeout)
    _print_floor(report)
    if args.reference_preset:
        ref_dir = work / "reference_export"
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "grounded_text.export", "--preset", args.reference_preset,
                               "--output-dir", str(ref_dir), "--sequence-length", str(args.reference_sequence_length)],
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"exporting the reference preset failed:\n{proc.stderr[-4000:]}")
        ref_args = {**enc_args, "export_dir": str(ref_dir), "repeats": args.reference_repeats or args.repeats}
        report["reference"] = run_phase_subprocess("encode", ref_args, timeout)
        report["reference"]["encoder"] = (f"all-MiniLM-L6-v2-style keras-hub tower from {args.reference_preset} "
                                          f"(sequence_length {args.reference_sequence_length}), exported hub module")
        report["reference"]["export_seconds"] = time.perf_counter() - t0
    else:
        report["reference"] = run_phase_subprocess("textvectorization", enc_args, timeout)
    ours, ref = report["encode"]["sentences_per_second"], report["reference"]["sentences_per_second"]
    report["speedup_vs_reference"] = {bs: ours[bs]["median"] / ref[bs]["median"] for bs in ours if bs in ref}
    for name, export in _named_exports(args.chart_export):
        report.setdefault("chart_exports", {})[name] = run_phase_subprocess("encode", {**enc_args,
                                                                                       "export_dir": export}, timeout)
    report["uptime_end"] = _uptime()
    _print_encode(report)
    if args.chart:
        report["chart"] = chart_node(report, args, root)
        draw_chart(report["chart"], args.chart)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    return report


# ----------------------------------------------------------------------------- the model-choice chart

#: The chart's quality: STS-B test is held out for every model (the trainer selects epochs on
#: STS16), and its Fisher-z interval is in every run's metrics.json and shipped model's card.
CHART_FIGURE = "STS-B test Pearson r"


def _named_exports(items) -> list[tuple[str, str]]:
    """``NAME=DIR`` → ``(NAME, DIR)``.

    Raises:
      SystemExit: an item without ``=``.
    """
    out = []
    for item in items or ():
        name, sep, folder = item.partition("=")
        if not sep or not name or not folder:
            raise SystemExit(f"--chart-export {item!r}: expected NAME=EXPORT_DIR")
        out.append((name, folder))
    return out


def export_figure(export_dir: str | Path) -> tuple[tuple, str] | None:
    """The STS-B test Pearson r of an export with its 95 % interval, ``((value, lo, hi), source)``:
    from the shipped model's ``model.json`` beside the export, else from the training run's
    ``metrics.json`` (``RUN/export`` → ``RUN/metrics.json``); None when neither holds it."""
    folder = Path(export_dir).resolve().parent
    model = folder / "model.json"
    if model.is_file():
        fig = (json.loads(model.read_text(encoding="utf-8")).get("figures") or {}).get("STS-B test") or {}
        if fig.get("value") is not None:
            return (fig["value"], *(fig.get("ci95") or (None, None))), f"{folder.name}/model.json"
    metrics = read_metrics(folder)
    value = FIGURES["trainer_stsb_test"].with_interval(metrics) if metrics else None
    return (value, f"{folder.name}/metrics.json") if value else None


def chart_node(report: dict, args, root: Path) -> dict:
    """The points of the model-choice chart: every encoder timed in this run (``--export`` or the
    fitted one, each ``--chart-export``, the reference) at ``--chart-batch``, with its STS-B
    figure (``export_figure``; the reference's from ``--reference-figure``, its interval by
    Fisher z over the STS-B test pairs). An encoder without a figure is listed as left out."""
    batch = str(args.chart_batch)
    ours = Path(args.export).resolve().parent.name if args.export else f"{args.model} (fitted here, not scored)"
    timed = [(ours, report["encode"], export_figure(report["encode"]["export_dir"]))]
    timed += [(name, r, export_figure(r["export_dir"])) for name, r in report.get("chart_exports", {}).items()]
    ref_figure = None
    if args.reference_figure is not None:
        n = len(read_sts_benchmark(root / "sts", "test").scores)
        ref_figure = ((args.reference_figure, *pearson_ci(args.reference_figure, n)),
                      f"--reference-figure, Fisher z over {n} pairs")
    ref_name = Path(args.reference_preset).parent.name if args.reference_preset else "TextVectorization"
    timed.append((f"reference: {ref_name}", report["reference"], ref_figure))
    points, left_out = [], []
    for label, r, figure in timed:
        rate = r["sentences_per_second"].get(batch)
        if figure is None or rate is None:
            left_out.append({"label": label, "why": f"batch {batch} not timed" if rate is None else
                             f"no {CHART_FIGURE} (a shipped model.json or a run's metrics.json beside the export)"})
            continue
        points.append({"label": label, "sentences_per_second": [rate["median"], rate["min"], rate["max"]],
                       "quality": list(figure[0]), "quality_source": figure[1]})
    return {"figure": CHART_FIGURE, "batch": int(batch), "points": points, "left_out": left_out}


def draw_chart(node: dict, path: str | Path) -> Path | None:
    """Draws a ``chart_node`` (a fresh one, or the ``chart`` of a saved ``--json`` report) to
    ``path`` → its path; None after one printed line when no point has both figures."""
    for p in node.get("left_out", []):
        print(f"chart: {p['label']} left out: {p['why']}")
    if not node["points"]:
        print("chart: not drawn, no encoder has both a throughput and a quality figure")
        return None
    points = [{"label": p["label"], "throughput": tuple(p["sentences_per_second"]), "quality": tuple(p["quality"])}
              for p in node["points"]]
    out = model_choice_chart(points, path, quality_label=f"{node['figure']} (95 % interval)",
                             title=f"Quality against encode speed, batch {node['batch']} (median and min–max of "
                                   "the repeats)")
    print(f"wrote {out}")
    return out


def run_char_speed(args) -> dict:
    """The ``--char-speed`` mode (see the module docstring)."""
    root = resolve_data_dir(args.data_dir)
    batch = args.batch_size or 32
    report: dict = {"command": " ".join(["python -m grounded_text.benchmark"] + sys.argv[1:]),
                    "date": time.strftime("%Y-%m-%d %H:%M %Z"), "machine": machine_info(), "uptime": _uptime(),
                    "batch_size": batch, "steps": args.steps, "warmup_steps": args.warmup, "runs": []}
    m = report["machine"]
    print(f"machine: {m['device']}; {m['cpu_count']} CPU(s) ({m['cpu_affinity']} usable); "
          f"TF {m['tensorflow']}, Keras {m['keras']}; GPUs: {m['gpus'] or 'none'}")
    print(f"load at start: {report['uptime']}")
    for units in args.units:
        for bucket in (False, True):
            phase_args = {"units": units, "bucket_by_length": bucket, "batch_size": batch, "steps": args.steps,
                          "warmup": args.warmup, "data_dir": str(root)}
            r = run_phase_subprocess("char_speed", phase_args, args.phase_timeout)
            report["runs"].append(r)
            print(f"  units {units}, bucketing {'on' if bucket else 'off'}: {r['pairs_per_second']:,.1f} pairs/s "
                  f"(load {r['process']['loadavg_before'][0]:.2f}→{r['process']['loadavg_after'][0]:.2f}, "
                  f"{r['process']['wall_seconds']:.0f} s)", flush=True)
    report["ratios"] = char_speed_ratios(report["runs"])
    report["uptime_end"] = _uptime()
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    print(f"load at end: {report['uptime_end']}\n")
    print(char_speed_table(report))
    print()
    for units in args.units:
        r = next(x for x in report["runs"] if x["units"] == units)
        for row in r["cudnn"]:
            print(f"cuDNN, units {units}: {row['layer']}: {'eligible' if row['eligible'] else 'NOT eligible'}"
                  f"{' (' + ', '.join(row['reasons']) + ')' if row['reasons'] else ''}; on this machine: "
                  f"{'yes' if row['on_this_machine'] else 'no (no GPU)' if not row['gpu_available'] else 'no'}")
    pads = [x["padding"] for x in report["runs"]]
    print(f"char preprocessor padding right-padded (ids 0 after the last character) in every measured batch: "
          f"{all(p['right_padded'] for p in pads)}; fully padded rows: {sum(p['fully_masked_rows'] for p in pads)}; "
          f"empty train captions: {report['runs'][0]['empty_train_captions']}")
    print(f"GPU (tf.config.list_physical_devices('GPU')): {report['runs'][0]['gpus'] or 'none'}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    return report


def run_floors(args) -> dict:
    """The ``--floors`` mode (see the module docstring)."""
    root = resolve_data_dir(args.data_dir)
    cores = os.cpu_count() or 1
    report: dict = {"command": " ".join(["python -m grounded_text.benchmark"] + sys.argv[1:]),
                    "date": time.strftime("%Y-%m-%d %H:%M %Z"), "machine": machine_info(),
                    "loadavg_start": list(os.getloadavg()), "cores": cores}
    m = report["machine"]
    print(f"machine: {m['device']}; {m['cpu_count']} CPU(s); TF {m['tensorflow']}; load {report['loadavg_start']}")

    def tag(r):
        return "PROVISIONAL (load above the core count)" if r["provisional"] else "final"

    def load(r):
        return f"load {r['loadavg']['before'][0]:.2f}→{r['loadavg']['after'][0]:.2f}"

    report["char"] = []
    for units in args.units:
        r = run_phase_subprocess("char_floor", {"units": units, "steps": args.steps, "warmup": min(args.warmup, 2),
                                                "batch_size": args.batch_size or 32, "data_dir": str(root)},
                                 args.phase_timeout, module=FLOORS)
        report["char"].append(r)
        print(f"\n## char_gru_attention train step, n = {units}, batch {r['batch_size']}, bucketed "
              f"({r['mean_true_length']:.1f} true / {r['mean_padded_length']:.1f} padded chars; "
              f"{r['gflop_per_caption']:.3f} useful GFLOP per caption fwd+bwd)  [{load(r)}; {tag(r)}]")
        print(f"GEMM float32 {GEMM}²: {r['gemm_gflops']['median']:.1f} GFLOP/s (median of {r['gemm_gflops']['n']})")
        for k, v in r["variants"].items():
            print(f"  {k:10s} {v['captions_per_second']:7.1f} captions/s  {v['useful_gflops']:6.1f} useful GFLOP/s  "
                  f"= {v['fraction_of_gemm']:.2f} of GEMM")
        if "fused_over_keras_loop" in r:
            print(f"  fused / Keras loop: {r['fused_over_keras_loop']:.2f}×")
    images_dir = root / "flickr8k" / "images"
    if images_dir.is_dir() and not args.skip_features:
        r = run_phase_subprocess("features_floor", {"images_dir": str(images_dir), "images": args.images,
                                                    "batch_size": 32, "weights": "none"}, args.phase_timeout,
                                 module=FLOORS)
        report["features"] = r
        print(f"\n## Feature extraction ({r['cnn']}, weights {r['weights']}, {r['photos']} real photos, batch "
              f"{r['batch_size']})  [{load(r)}; {tag(r)}]")
        print(f"pipeline {r['pipeline_photos_per_second']:.1f} photos/s, bare network "
              f"{r['bare_network_photos_per_second']:.1f} photos/s: {r['pipeline_over_bare']:.2f} of the network")
        print("stage alone, ms/photo: " + ", ".join(f"{k} {1000 * v:.1f} ({100 * r['stage_share'][k]:.0f} %)"
                                                    for k, v in r["stage_seconds_per_photo"].items()))
    if not args.skip_export:
        work = Path(tempfile.mkdtemp(prefix="grounded_text_floors_"))
        sentences_file = work / "sentences.json"
        sentences_file.write_text(json.dumps(benchmark_sentences(root / "sts")))
        r = run_phase_subprocess("export_floor", {"work_dir": str(work), "sentences_file": str(sentences_file),
                                                  "batch_sizes": list(args.batch_sizes), "repeats": args.repeats,
                                                  "min_seconds": args.min_seconds, "data_dir": str(root)},
                                 args.phase_timeout, module=FLOORS)
        report["export"] = r
        print(f"\n## Export ({r['model']}) vs its tokeniser, sentences/s  [{load(r)}; {tag(r)}]")
        print("| batch | export | tokeniser | export / tokeniser (medians) | per-repeat ratio |\n"
              "|---:|---:|---:|---:|---:|")
        for bs, v in r["sentences_per_second"].items():
            per = r["export_over_tokenizer_per_repeat"][bs]
            print(f"| {bs} | {_fmt(v)} | {_fmt(r['tokenizer_sentences_per_second'][bs])} | "
                  f"**{r['export_over_tokenizer'][bs]:.2f}** | {_fmt(per, 2)} |")
    report["loadavg_end"] = list(os.getloadavg())
    figures = [*report["char"], *(x for x in (report.get("features"), report.get("export")) if x)]
    report["provisional"] = any(f["provisional"] for f in figures) or max(report["loadavg_end"][0],
                                                                           report["loadavg_start"][0]) > cores
    print(f"\nload at end: {report['loadavg_end']}; figures "
          f"{'PROVISIONAL: the load exceeded the ' + str(cores) + ' cores' if report['provisional'] else 'final'}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    return report


def char_speed_ratios(runs: list[dict]) -> dict:
    """{units: {"pairs_per_second", "mean_padded_length"}: bucketed / unbucketed}, for each
    ``units`` measured both ways."""
    out = {}
    for units in dict.fromkeys(r["units"] for r in runs):
        off = next((r for r in runs if r["units"] == units and not r["bucket_by_length"]), None)
        on = next((r for r in runs if r["units"] == units and r["bucket_by_length"]), None)
        if off and on:
            out[str(units)] = {"pairs_per_second": on["pairs_per_second"] / off["pairs_per_second"],
                               "mean_padded_length": on["padding"]["mean_padded_length"]
                               / off["padding"]["mean_padded_length"]}
    return out


def char_speed_table(report: dict) -> str:
    """The markdown table of a ``--char-speed`` report."""
    lines = ["| units / direction (N) | batches | pairs/s | s/step, median (min–max) | mean padded length "
             "| mean true length | padding | bucketed / unbucketed | load 1-min |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in report["runs"]:
        p, s = r["padding"], r["seconds_per_step"]
        ratio = report["ratios"].get(str(r["units"]), {}).get("pairs_per_second")
        lines.append(
            f"| {r['units']} ({r['embedding_dim']}) | {'bucketed' if r['bucket_by_length'] else 'shuffled'} "
            f"| {r['pairs_per_second']:,.1f} | {s['median']:.3f} ({s['min']:.3f}–{s['max']:.3f}) "
            f"| {p['mean_padded_length']:.1f} | {p['mean_true_length']:.1f} | {100 * p['padding_fraction']:.1f} % "
            f"| {f'{ratio:.2f}×' if r['bucket_by_length'] and ratio else '–'} "
            f"| {r['loadavg_timing']['before'][0]:.2f}→{r['loadavg_timing']['after'][0]:.2f} |")
    return "\n".join(lines)


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"loadavg {os.getloadavg()}"


def _print_fit(f: dict) -> None:
    print(f"\n## Training: {f['model']} ({f['precision']}, strategy {f['strategy']}, {f['replicas']} replica(s), "
          f"batch {f['batch_size']}, {f['pairs_per_epoch']:,} pairs/epoch)   [median (min–max) of "
          f"{f['epoch_seconds']['n']}; load {f['process']['loadavg_before'][0]:.2f}→"
          f"{f['process']['loadavg_after'][0]:.2f}]")
    print(f"fit (real input pipeline)   pairs/s  {_fmt(f['fit_pairs_per_second'])}")
    print(f"bare compiled train step    pairs/s  {_fmt(f['bare_step_pairs_per_second'])}")
    print(f"input-pipeline efficiency   {f['input_pipeline_efficiency']:.3f}  (fit / bare, medians); "
          f"per repeat {_fmt(f['input_pipeline_efficiency_per_repeat'], 3)}")
    print(f"one epoch over the train pairs, s    {_fmt(f['epoch_seconds'], 2)}  (warm-up epoch "
          f"{f['warmup_epoch_seconds']:.2f} s, excluded)")
    print(f"peak RSS, MiB                {f['rss_mib']['peak']:,.0f}  "
          f"(after imports {f['rss_mib']['after_imports']:,.0f})")
    v = f.get("tokenize_in_pipeline")
    if v and "fit_pairs_per_second" in v:
        print(f"fit, tokenising in tf.data  pairs/s  {_fmt(v['fit_pairs_per_second'])}; epoch s "
              f"{_fmt(v['epoch_seconds'], 2)}")
    elif v:
        print(f"fit, tokenising in tf.data: {v['skipped']}")
    if f.get("gpu_utilization"):
        print(f"GPU utilisation, %           mean {f['gpu_utilization']['mean_percent']:.0f}, "
              f"max {f['gpu_utilization']['max_percent']:.0f}")


def _print_floor(r: dict) -> None:
    e = r["encode"]
    if "tokenizer_sentences_per_second" not in e:
        return
    print(f"\n## Export vs its tokeniser alone (floor), side by side in one process: sentences/s on "
          f"{r['sentence_list']['count']:,} STS-B + SICK sentences  [median (min–max) of {r['repeats']}; load "
          f"{e['process']['loadavg_before'][0]:.2f}→{e['process']['loadavg_after'][0]:.2f}]")
    print(f"export: {e['export_dir']}; __call__ concrete functions: {e['concrete_functions']}")
    print("tokeniser = invalid UTF-8 → U+FFFD, case folding (NFKC_Casefold) or NFKC, UnicodeScriptTokenizer "
          "(tensorflow-text) on every row, in a tf.function; ASCII shortcut = the export's own tokenisation "
          "(Unicode work on non-ASCII rows only, same tokens)")
    print(f"timing: {e.get('timing', '')}")
    print("| batch | export | tokeniser (floor) | export / tokeniser (medians) | per-repeat ratio, median (min–max) "
          "| tokeniser, ASCII shortcut |\n|---:|---:|---:|---:|---:|---:|")
    for bs, s in e["sentences_per_second"].items():
        per = e.get("export_over_tokenizer_per_repeat", {}).get(bs)
        print(f"| {bs} | {_fmt(s)} | {_fmt(e['tokenizer_sentences_per_second'][bs])} | "
              f"**{e['export_over_tokenizer'][bs]:.2f}** | {_fmt(per, 2) if per else '–'} | "
              f"{_fmt(e['tokenizer_ascii_shortcut_sentences_per_second'][bs])} |")
    c = e.get("compare")
    if c:
        print(f"\ncompared export, in the same interleaving: {c['export_dir']}")
        print("| batch | compared export | compared / tokeniser (medians) | per-repeat ratio, median (min–max) "
              "| export / compared, per repeat |\n|---:|---:|---:|---:|---:|")
        for bs, s in c["sentences_per_second"].items():
            print(f"| {bs} | {_fmt(s)} | **{c['compare_over_tokenizer'][bs]:.2f}** | "
                  f"{_fmt(c['compare_over_tokenizer_per_repeat'][bs], 2)} | "
                  f"{_fmt(c['export_over_compare_per_repeat'][bs], 2)} |")


def _print_encode(r: dict) -> None:
    e, ref = r["encode"], r["reference"]
    print(f"\n## Encoding: sentences/s on {r['sentence_list']['count']:,} STS-B + SICK sentences  "
          f"[median (min–max) of {r['repeats']}]")
    print(f"ours: {e['export_dir']} ({e['embedding_dim']}-d); peak RSS {e['rss_mib']['peak']:,.0f} MiB; load "
          f"{e['process']['loadavg_before'][0]:.2f}→{e['process']['loadavg_after'][0]:.2f}")
    print(f"reference: {ref.get('encoder', ref.get('export_dir'))}; peak RSS {ref['rss_mib']['peak']:,.0f} MiB; load "
          f"{ref['process']['loadavg_before'][0]:.2f}→{ref['process']['loadavg_after'][0]:.2f}")
    print("| batch | ours | reference | ratio |\n|---:|---:|---:|---:|")
    for bs, s in e["sentences_per_second"].items():
        rs = ref["sentences_per_second"].get(bs)
        print(f"| {bs} | {_fmt(s)} | {_fmt(rs, 1) if rs else '–'} | "
              f"{r['speedup_vs_reference'].get(bs, float('nan')):,.1f}× |")
