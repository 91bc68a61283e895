"""Memory and throughput of the streaming feature store vs the in-memory ``.npz`` path.

For each row count n: writes a synthetic store (n rows of ``--dim`` features, seeded
Gaussian, ``--dtype`` on disk) with ``TFRecordFeatureSink`` and, for n up to
``--npz-max-rows``, the same rows as an ``.npz``; then, each in a FRESH subprocess,
trains VETE-BOW (Kurach et al. 2017: mean of word embeddings, affine image
branch, Pearson loss; the ``vete_bow`` preset via ``build_model``, N=128) for one
epoch on one synthetic caption per image (8 words from a 1000-word vocabulary),
through ``grounded_text.data.pairs.make_dataset`` — the trainer's input path
(streamed: the captions in the store's records, ``make_caption_store_dataset``, or with
``--captions-joined`` a plain store joined to host-side captions, ``make_streaming_dataset``;
shuffle buffer 10000 pairs). The child
reports its peak RSS (``VmHWM`` of ``/proc/self/status``; see ``throughput.rss_mib``) and
pairs/s over the epoch after its first step (the first step compiles the graph). Stores are deleted
afterwards unless ``--keep``.

    python -m grounded_text.benchmarks.streaming_store [--rows 10000 100000 1000000] \\
        [--dim 2048] [--dtype float16] [--json FILE] [--workdir /tmp]
    python -m grounded_text.benchmarks.streaming_store --compare-formats [--dim 2048]

Peak RSS of the streaming path with captions in the records holds nothing per row
(only the manifest's shard list grows); with ``--captions-joined`` it grows with what is
held per row outside the features (the captions, ids and the join's 16 B/row of int
arrays); neither grows with the features; the ``.npz`` path holds all features as float32 (and one copy in the
graph). Timings on a shared machine are upper bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from grounded_text.benchmarks.throughput import rss_mib
from grounded_text.config.schema import ModelConfig, TextConfig, TrainConfig
from grounded_text.data.features import open_feature_store
from grounded_text.data.pairs import CaptionPairs, make_dataset
from grounded_text.data.store_writer import TFRecordFeatureSink
from grounded_text.data.streaming import make_caption_store_dataset
from grounded_text.layers import build_vocabulary
from grounded_text.models import build_model
from grounded_text.training.preparation import compile_for_training

VOCAB = 1000
WORDS = 8


def _synthetic_features(n: int, dim: int, seed: int, chunk: int = 8192):
    rng = np.random.default_rng(seed)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        yield start, rng.standard_normal((m, dim), dtype=np.float32)


def _ids(start: int, m: int) -> np.ndarray:
    return np.array([f"{i:08d}.jpg" for i in range(start, start + m)])


def _captions(n: int, seed: int) -> np.ndarray:
    """[n] bytes (``S``) captions: 1 B/char, so the caption side stays small next to the features."""
    words = [f"w{i}" for i in range(VOCAB)]
    rng = np.random.default_rng(seed + 1)
    out = np.empty(n, dtype=f"S{WORDS * 5}")
    for start in range(0, n, 65536):
        idx = rng.integers(0, VOCAB, size=(min(65536, n - start), WORDS)).tolist()
        out[start:start + len(idx)] = [" ".join(words[i] for i in r).encode() for r in idx]
    return out


def write_synthetic(workdir: Path, n: int, dim: int, dtype: str, npz: bool, seed: int = 0,
                    captions_in_records: bool = True) -> dict:
    """Writes STORE (and the .npz when ``npz``); returns paths, sizes and write seconds. With
    ``captions_in_records`` the store is a caption store (each record carries its image's
    caption, the same ``_captions`` the other paths join)."""
    store = workdir / f"store_{n}"
    t = time.perf_counter()
    sink = TFRecordFeatureSink(store, dim, dtype=dtype, captions=captions_in_records)
    captions = _captions(n, seed) if captions_in_records else None
    for start, x in _synthetic_features(n, dim, seed):
        sink.append(_ids(start, len(x)), x,
                    None if captions is None else [[c] for c in captions[start:start + len(x)].tolist()])
    del captions
    sink.close()
    out = {"store": str(store), "store_write_s": time.perf_counter() - t,
           "store_bytes": sum(f.stat().st_size for f in store.iterdir())}
    if npz:
        feats = np.empty((n, dim), dtype=dtype)
        for start, x in _synthetic_features(n, dim, seed):
            feats[start:start + len(x)] = x
        path = workdir / f"features_{n}.npz"
        np.savez(path, ids=_ids(0, n), features=feats)
        del feats
        out.update(npz=str(path), npz_bytes=path.stat().st_size)
    return out


def _child(path: str, batch_size: int, seed: int) -> dict:
    """One epoch of VETE-BOW from ``path`` (a store dir or .npz); runs in a fresh process."""
    keras.utils.set_random_seed(seed)
    rss0 = rss_mib()
    t = time.perf_counter()
    store = open_feature_store(path)
    if getattr(store, "has_captions", False):
        # Captions read from the records: no ids, captions or join arrays on the host.
        n, kind = store.num_rows, "stream, captions in records"
        ds = make_caption_store_dataset(store, batch_size, shuffle=True, seed=seed)
    else:
        n = len(store.ids)
        kind = "stream, captions joined" if Path(path).is_dir() else "npz"
        pairs = CaptionPairs(_captions(n, seed), store.ids, np.arange(n, dtype=np.int64), store.features)
        ds = make_dataset(pairs, batch_size, shuffle=True, seed=seed)
    load_s = time.perf_counter() - t
    vocab = build_vocabulary([" ".join(f"w{i}" for i in range(VOCAB))], max_size=None)
    gm = build_model(ModelConfig(name="vete_bow", embedding_dim=128), TextConfig(), vocab, store.dim, seed=seed)
    # The trainer's compile (Adam 1e-3, constant); one step per execution so that the clock
    # below marks the end of the first (graph-building) step.
    compile_for_training(gm.train_model, TrainConfig(learning_rate=1e-3, schedule="constant", steps_per_execution=1),
                         max(1, n // batch_size))
    marks = {}

    class _Clock(keras.callbacks.Callback):  # steady-state rate: after the first (compiling) step
        def on_train_batch_end(self, batch, logs=None):
            marks.setdefault("first", time.perf_counter())

    t = time.perf_counter()
    hist = gm.train_model.fit(ds, epochs=1, verbose=0, callbacks=[_Clock()])
    fit_s = time.perf_counter() - t
    steady_s = time.perf_counter() - marks["first"]
    steps = n // batch_size
    return {"rows": n, "dim": store.dim, "kind": kind,
            "peak_rss_mib": rss_mib(), "peak_rss_after_imports_mib": rss0, "load_s": load_s, "fit_s": fit_s,
            "pairs_per_s": (steps - 1) * batch_size / steady_s, "loss": float(hist.history["loss"][-1])}


def _run_child(path: str, batch_size: int, seed: int) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "grounded_text.benchmarks.streaming_store", "--child", path,
         "--batch-size", str(batch_size), "--seed", str(seed)],
        capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child on {path} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_store_benchmark(rows: list[int], dim: int = 2048, dtype: str = "float16", *, batch_size: int = 256,
        npz_max_rows: int = 100_000, workdir: str | None = None, keep: bool = False, seed: int = 0,
        captions_in_records: bool = True) -> list[dict]:
    """Runs the benchmark; returns one dict per (rows, kind) with peak RSS (MiB) and pairs/s.

    Args:
      rows: row counts (e.g. ``[10000, 100000, 1000000]``).
      dim: features per row.
      dtype: on-disk dtype of the store (and of the ``.npz``).
      batch_size: B.
      npz_max_rows: also run the in-memory ``.npz`` path up to this many rows.
      workdir: where stores are written (default: a temp dir under ``$TMPDIR``).
      keep: keep the stores.
      seed: data and training seed.
      captions_in_records: stream the captions from the records (a caption store,
        ``make_caption_store_dataset``); False: a plain store joined to host-side
        captions (``make_streaming_dataset``), the earlier layout.

    Raises:
      RuntimeError: a child failed (its stderr tail in the message).
    """
    base = Path(tempfile.mkdtemp(prefix="gt_stream_bench_", dir=workdir))
    results = []
    try:
        for n in rows:
            info = write_synthetic(base, n, dim, dtype, npz=n <= npz_max_rows, seed=seed,
                                   captions_in_records=captions_in_records)
            r = _run_child(info["store"], batch_size, seed)
            r.update(dtype=dtype, disk_mib=info["store_bytes"] / 2**20, write_s=info["store_write_s"])
            results.append(r)
            print(json.dumps(r), flush=True)
            if "npz" in info:
                r = _run_child(info["npz"], batch_size, seed)
                r.update(dtype=dtype, disk_mib=info["npz_bytes"] / 2**20, write_s=None)
                results.append(r)
                print(json.dumps(r), flush=True)
            if not keep:
                shutil.rmtree(info["store"], ignore_errors=True)
                if "npz" in info:
                    os.unlink(info["npz"])
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    return results


def compare_record_formats(rows: int = 8192, dim: int = 2048, seed: int = 0) -> list[dict]:
    """Raw float16 / float32 bytes (``decode_raw``, the store's format) vs a float32 ``float_list``.

    Returns per format: file MiB, Python serialisation rows/s, and read +
    ``parse_example`` (+ ``decode_raw`` + cast) rows/s (best of 3 passes, batches of 256).
    """
    x = np.random.default_rng(seed).standard_normal((rows, dim), dtype=np.float32)
    spec_raw = {"id": tf.io.FixedLenFeature([], tf.string), "features": tf.io.FixedLenFeature([], tf.string)}
    spec_fl = {"id": tf.io.FixedLenFeature([], tf.string), "features": tf.io.FixedLenFeature([dim], tf.float32)}
    formats = {
        "raw_float16": (lambda r: tf.train.Feature(
                            bytes_list=tf.train.BytesList(value=[r.astype(np.float16).tobytes()])),
                        lambda s: tf.cast(tf.io.decode_raw(tf.io.parse_example(s, spec_raw)["features"], tf.float16),
                                          tf.float32)),
        "raw_float32": (lambda r: tf.train.Feature(bytes_list=tf.train.BytesList(value=[r.tobytes()])),
                        lambda s: tf.io.decode_raw(tf.io.parse_example(s, spec_raw)["features"], tf.float32)),
        "float_list_float32": (lambda r: tf.train.Feature(float_list=tf.train.FloatList(value=r)),
                               lambda s: tf.io.parse_example(s, spec_fl)["features"]),
    }
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (feature, parse) in formats.items():
            t = time.perf_counter()
            recs = [tf.train.Example(features=tf.train.Features(feature={
                "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"%d" % i])),
                "features": feature(x[i])})).SerializeToString() for i in range(rows)]
            write_rate = rows / (time.perf_counter() - t)
            path = os.path.join(tmp, name + ".tfrecord")
            with tf.io.TFRecordWriter(path) as w:
                for r in recs:
                    w.write(r)
            ds = tf.data.TFRecordDataset(path).batch(256).map(parse)
            best = float("inf")
            for _ in range(4):  # first pass warms the graph and the page cache
                t = time.perf_counter()
                for _ in ds:
                    pass
                best = min(best, time.perf_counter() - t)
            out.append({"format": name, "mib": os.path.getsize(path) / 2**20, "serialize_rows_per_s": write_rate,
                        "read_parse_rows_per_s": rows / best})
    return out


def format_table(results: list[dict]) -> str:
    lines = ["| rows | path | dim | dtype on disk | disk MiB | peak RSS MiB | pairs/s (1 epoch, after step 1) "
             "| epoch s |",
             "|---:|---|---:|---|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['rows']:,} | {r['kind']} | {r['dim']} | {r['dtype']} | {r['disk_mib']:.0f} | "
                     f"{r['peak_rss_mib']:.0f} | {r['pairs_per_s']:.0f} | {r['fit_s']:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grounded_text.benchmarks.streaming_store",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--dim", type=int, default=2048)
    p.add_argument("--dtype", default="float16", choices=["float16", "float32"])
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--npz-max-rows", type=int, default=100_000)
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--captions-joined", action="store_true",
                   help="plain store + host-side caption join (the earlier layout) instead of captions in the records")
    p.add_argument("--compare-formats", action="store_true",
                   help="only compare record formats (raw float16 bytes vs float_list) on --dim")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.compare_formats:
        for r in compare_record_formats(dim=a.dim, seed=a.seed):
            print(json.dumps(r))
        return 0
    if a.child:
        print(json.dumps(_child(a.child, a.batch_size, a.seed)))
        return 0
    need = max(a.rows) * a.dim * np.dtype(a.dtype).itemsize * 1.1
    if a.workdir:
        Path(a.workdir).mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(a.workdir or tempfile.gettempdir()).free
    if need > free:
        raise SystemExit(f"Need ~{need / 2**30:.1f} GiB free for {max(a.rows)} rows, have {free / 2**30:.1f} GiB.")
    results = run_store_benchmark(a.rows, a.dim, a.dtype, batch_size=a.batch_size, npz_max_rows=a.npz_max_rows,
                  workdir=a.workdir, keep=a.keep, seed=a.seed, captions_in_records=not a.captions_joined)
    print(format_table(results))
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
