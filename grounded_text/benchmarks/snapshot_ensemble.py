"""Snapshot ensemble benchmark (Merckx & Frank 2019, §3.3): cyclic cosine LR, M snapshots.

Trains VETE-BOW with the Pearson loss on Flickr8k train under ``CyclicCosineSchedule``
(cycles of ``--cycle-epochs`` epochs), saves a snapshot at each cycle end
(``SnapshotSaver``), and scores on STS12 MSRvid / STS16 mean / STS-B test / SICK test
(Pearson r of cosines): every snapshot and the snapshot ensemble (mean, re-normalised).
The ensemble is exported with ``export_text_tower`` to ``OUT/export``.

    GROUNDED_TEXT_DATA=/path/to/shared/data python -m grounded_text.benchmarks.snapshot_ensemble \
        --cycles 3 --cycle-epochs 2 --out runs/snapshot_ensemble
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import keras
import tensorflow as tf

from grounded_text.config import ModelConfig, TextConfig
from grounded_text.data import load_flickr8k_pairs, make_dataset, resolve_data_dir
from grounded_text.evaluation.sts import batched, evaluate_sts, headline_figures
from grounded_text.export import export_text_tower
from grounded_text.layers import build_vocabulary
from grounded_text.models.ensemble import build_snapshot_ensemble
from grounded_text.models import build_model
from grounded_text.training import CyclicCosineSchedule, SnapshotSaver, cycle_steps, load_snapshot_towers


def score(tower, root):
    forward = tf.function(lambda s: tower(s, training=False), input_signature=[tf.TensorSpec([None], tf.string)])
    return headline_figures(evaluate_sts(batched(lambda b: forward(tf.constant(b, dtype=tf.string)).numpy(), 1024), root / "sts"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--cycle-epochs", type=int, default=2)
    parser.add_argument("--lr-min", type=float, default=1e-5)
    parser.add_argument("--lr-max", type=float, default=3e-3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/snapshot_ensemble")
    args = parser.parse_args()
    root = resolve_data_dir(args.data_dir)
    out = Path(args.out)
    keras.utils.set_random_seed(args.seed)
    pairs = load_flickr8k_pairs(root).splits["train"]
    vocab = build_vocabulary(pairs.captions.tolist(), max_size=20000)
    gm = build_model(ModelConfig(name="vete_bow", embedding_dim=128), TextConfig(), vocab, pairs.features.shape[1], seed=args.seed)
    ds = make_dataset(pairs, args.batch_size, seed=args.seed)
    steps_per_epoch = len(pairs) // args.batch_size
    schedule = CyclicCosineSchedule(args.lr_min, args.lr_max, cycle_steps(args.cycle_epochs, steps_per_epoch))
    gm.train_model.compile(optimizer=keras.optimizers.Adam(schedule), jit_compile=False)
    saver = SnapshotSaver(gm.text_tower, out / "snapshots", cycle_epochs=args.cycle_epochs)
    t0 = time.perf_counter()
    gm.train_model.fit(ds, epochs=args.cycles * args.cycle_epochs, callbacks=[saver], verbose=0)
    seconds = time.perf_counter() - t0
    towers = load_snapshot_towers(saver.paths)
    rows = [{"model": f"snapshot {k + 1} (epoch {(k + 1) * args.cycle_epochs})", **score(t, root)} for k, t in enumerate(towers)]
    ensemble = build_snapshot_ensemble(towers)
    rows.append({"model": f"ensemble of {len(towers)} (mean, re-normalised)", **score(ensemble, root)})
    export_text_tower(ensemble, out / "export", {"benchmark": "snapshot_ensemble", **vars(args)})
    (out / "results.json").write_text(json.dumps({"args": vars(args), "train_seconds": seconds, "rows": rows}, indent=2))
    keys = ["STS12/MSRvid pearson", "STS16 mean pearson (avg2016)", "STS-B test pearson", "SICK test pearson"]
    print(f"\nVETE-BOW + Pearson, Flickr8k train, {args.cycles} cycles × {args.cycle_epochs} epochs, "
          f"lr {args.lr_max}→{args.lr_min}, B={args.batch_size}, seed {args.seed}; fit {seconds:.0f} s\n")
    print("| model | STS12 MSRvid | STS16 mean | STS-B test | SICK test |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | " + " | ".join("n/a" if r[k] is None else f"{r[k]:.4f}" for k in keys) + " |")


if __name__ == "__main__":
    main()
