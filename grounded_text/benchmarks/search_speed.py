"""``python -m grounded_text.benchmark --search``: the photo index against the ``features`` command,
a second model's index from stored features, a cold query, and an index of 100,000 photos.

Each group runs in a fresh subprocess (``python -m grounded_text.benchmarks.search_speed PHASE
JSON_ARGS``, one JSON line out), the load average recorded before and after it:

* ``index_speed``: the first ``photos`` photos of a folder (links in a temporary folder), the
  shipped Lite0 network built once and shared. Each repeat runs, in alternating order, the
  ``features`` pipeline (``extract_features`` into a fresh store) and ``ImageIndex.update`` with the
  first model into a fresh index root, then the second model on the same root (its network features
  reused: the tower alone). Photos/s of each, their ratio per repeat, and the median.
* ``cold_query``: a fresh interpreter that imports ``grounded_text``, loads the model, opens the
  index the first phase left complete, and searches it once; each step timed, and whether an image
  network or tower was built.
* ``scale``: ``scale`` photos as links to the folder's photos (``d000/00000_name.jpg``, ...); an
  index of them written with random unit vectors through the index's own file code, then opened
  by ``ImageIndex.update`` (which lists the folder, finds every photo unchanged and loads the
  matrix) and searched: bytes on disk, resident memory, load and query time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import grounded_text as gt
from grounded_text.benchmarks.throughput import machine_info, rss_mib, run_phase_subprocess, summary
from grounded_text.data.paths import resolve_data_dir
from grounded_text.photos.index import INDEX_FILE, ImageIndex, index_folder
from grounded_text.photos.table import Table, write_table
from grounded_text.vision.extractor import extract_features, image_folder_dataset
from grounded_text.vision.folders import scan_photos
from grounded_text.vision.sinks import NpzFeatureSink

MODULE = "grounded_text.benchmarks.search_speed"
FIRST, SECOND = "vete_bow_flickr8k", "char_gru_attention_flickr8k"
QUERY = "a dog runs on the grass"

COLD_QUERY = """
import json, sys, time
t0 = time.perf_counter()
import grounded_text as gt
from grounded_text.photos.index import ImageIndex
import tensorflow
t1 = time.perf_counter()
enc = gt.load(sys.argv[1])
t2 = time.perf_counter()
index = ImageIndex(sys.argv[2], enc, sys.argv[3])
report = index.update(show_progress_bar=False)
t3 = time.perf_counter()
hits = index.search(sys.argv[4], top_k=5)
t4 = time.perf_counter()
side = enc._image_side()
print(json.dumps({"import": t1 - t0, "model_load": t2 - t1, "index_load": t3 - t2, "search": t4 - t3,
                  "photos": report.photos, "encoded": report.encoded,
                  "network_built": side._network is not None, "tower_loaded": side._tower is not None}))
"""


def _link_photos(sources: list[Path], folder: Path, total: int) -> None:
    """``total`` links under ``folder``, to the sources in turn (1,000 links a subfolder)."""
    for n in range(total):
        sub = folder / f"d{n // 1000:03d}"
        if n % 1000 == 0:
            sub.mkdir(parents=True, exist_ok=True)
        src = sources[n % len(sources)]
        os.symlink(src, sub / f"{n // len(sources):03d}_{src.name}")


def _sources(a: dict) -> list[Path]:
    return [p for p in sorted(Path(a["images_dir"]).iterdir()) if p.suffix.lower() == ".jpg"][:int(a["photos"])]


def index_speed_phase(a: dict) -> dict:
    """The index vs the ``features`` pipeline, and the second model from stored features."""
    work = Path(a["work_dir"])
    photos = work / "photos"
    if photos.exists():
        shutil.rmtree(photos)
    photos.mkdir(parents=True)
    for src in _sources(a):
        os.symlink(src, photos / src.name)
    n, batch = len(list(photos.iterdir())), int(a["batch_size"])
    first, second = gt.load(FIRST), gt.load(SECOND)
    network = first._image_side().network()  # built once, before the timing: shared with the features runs
    first._image_side().tower(), second._image_side().tower()
    warm = work / "warm"
    warm.mkdir(exist_ok=True)
    for src in sorted(photos.iterdir())[:batch]:
        os.symlink(src.resolve(), warm / src.name)
    ImageIndex(warm, first, work / "warm_index").update(show_progress_bar=False)  # traces the pipeline
    ids = [p.name for p in sorted(photos.iterdir())]
    before = list(os.getloadavg())
    runs = {"features": [], "features_wall": [], "index": [], "second_model_seconds": [], "first_model_seconds": []}
    for r in range(int(a["repeats"])):
        def features():
            with tempfile.TemporaryDirectory(dir=work) as tmp:
                sink = NpzFeatureSink(Path(tmp) / "features.npz")
                t0 = time.perf_counter()
                report = extract_features(image_folder_dataset(photos, ids=ids), sink, cnn="efficientnet_lite0",
                                          crops=1, batch_size=batch, progress=False, network=network)
                wall = time.perf_counter() - t0
                sink.close()
            runs["features"].append(report.images_per_second)
            runs["features_wall"].append(report.written / wall)

        def index():
            root = work / f"index_{r}"
            one = ImageIndex(photos, first, root, batch_size=batch).update(show_progress_bar=False)
            two = ImageIndex(photos, second, root, batch_size=batch).update(show_progress_bar=False)
            assert one.encoded == n and two.features_reused == n, (one.summary(), two.summary())
            runs["index"].append(n / one.seconds)
            runs["first_model_seconds"].append(one.seconds)
            runs["second_model_seconds"].append(two.seconds)

        for step in ((features, index) if r % 2 == 0 else (index, features)):
            step()
    ratios = [i / f for i, f in zip(runs["index"], runs["features"])]
    out = {"photos": n, "batch_size": batch, "repeats": int(a["repeats"]),
           "features_photos_per_second": summary(runs["features"]),
           "features_wall_photos_per_second": summary(runs["features_wall"]),
           "index_photos_per_second": summary(runs["index"]),
           "index_over_features": summary(ratios),
           "first_model_seconds": summary(runs["first_model_seconds"]),
           "second_model_seconds": summary(runs["second_model_seconds"]),
           "second_over_first": summary([s / f for s, f in zip(runs["second_model_seconds"],
                                                               runs["first_model_seconds"])]),
           "index_root": str(work / "index_0"), "photos_dir": str(photos)}
    return {**out, "loadavg": {"before": before, "after": list(os.getloadavg())}}


def scale_phase(a: dict) -> dict:
    """An index of ``scale`` photos (links), random unit vectors, opened and searched."""
    work = Path(a["work_dir"]) / "scale"
    shutil.rmtree(work, ignore_errors=True)
    folder = work / "photos"
    scale = int(a["scale"])
    sources = _sources({**a, "photos": min(1000, scale)})
    t0 = time.perf_counter()
    _link_photos(sources, folder, scale)
    link_s = time.perf_counter() - t0
    before = list(os.getloadavg())
    enc = gt.load(FIRST)
    photos = scan_photos(folder)
    vectors = np.random.default_rng(0).standard_normal((len(photos), enc.dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index_dir = index_folder(folder, enc.image_fingerprint, work / "idx")
    index_dir.mkdir(parents=True)
    table = Table([p.rel for p in photos], np.array([p.size for p in photos], np.int64),
                  np.array([p.mtime_ns for p in photos], np.int64), vectors, [])
    write_table(index_dir / INDEX_FILE, folder.resolve(), enc.image_fingerprint, table)
    del vectors, table
    enc.encode([QUERY])  # the text tower's first call (tracing) is not the index's cost
    rss_before = _rss_now()
    t0 = time.perf_counter()
    index = ImageIndex(folder, enc, work / "idx")
    report = index.update(show_progress_bar=False)
    load_s = time.perf_counter() - t0
    assert (report.photos, report.encoded) == (len(photos), 0), report.summary()
    rss_after = _rss_now()
    query_s = []
    for _ in range(5):
        t0 = time.perf_counter()
        index.search(QUERY, top_k=10)
        query_s.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    scan_photos(folder)
    scan_s = time.perf_counter() - t0
    size = (index_dir / INDEX_FILE).stat().st_size
    out = {"photos": len(photos), "dim": enc.dim, "index_bytes": size, "bytes_per_photo": size / len(photos),
           "link_seconds": link_s, "open_seconds": load_s, "scan_seconds": scan_s,
           "rss_mib_before_open": rss_before, "rss_mib_after_open": rss_after, "peak_rss_mib": rss_mib(),
           "query_seconds": summary(query_s)}
    shutil.rmtree(work, ignore_errors=True)
    return {**out, "loadavg": {"before": before, "after": list(os.getloadavg())}}


def _rss_now() -> float:
    """Resident memory of this process now (``VmRSS``), MiB; 0 where ``/proc`` is not readable."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cold_query(model: str, photos: str, index_root: str) -> dict:
    """One query in a fresh interpreter on a complete index, each step timed (seconds)."""
    before = list(os.getloadavg())
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", COLD_QUERY, model, photos, index_root, QUERY],
                          capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"cold query failed:\n{proc.stderr[-4000:]}")
    out = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    return {**out, "process_seconds": wall, "loadavg": {"before": before, "after": list(os.getloadavg())}}


def _median(d: dict) -> float:
    return d["median"]


def run_search(args) -> dict:
    """The ``--search`` mode: prints the figures (and writes ``--json``)."""
    images_dir = (resolve_data_dir(args.data_dir) / "flickr8k" / "images" if args.search_images is None
                  else Path(args.search_images).expanduser())
    work = Path(tempfile.mkdtemp(prefix="grounded_text_search_"))
    report: dict = {"command": " ".join(["python -m grounded_text.benchmark"] + sys.argv[1:]),
                    "date": time.strftime("%Y-%m-%d %H:%M %Z"), "machine": machine_info(),
                    "cores": os.cpu_count(), "loadavg_start": list(os.getloadavg())}
    m = report["machine"]
    print(f"machine: {m['device']}; {m['cpu_count']} CPU(s); TF {m['tensorflow']}; load {report['loadavg_start']}")
    common = {"images_dir": str(images_dir), "photos": args.search_photos, "work_dir": str(work),
              "batch_size": args.batch_size or 32}
    try:
        r = run_phase_subprocess("index_speed", {**common, "repeats": args.repeats}, args.phase_timeout, module=MODULE)
        report["index_speed"] = r
        load = f"load {r['loadavg']['before'][0]:.2f}→{r['loadavg']['after'][0]:.2f}"
        print(f"\n## Indexing {r['photos']} photos, {FIRST} (Lite0, batch {r['batch_size']}), median (min–max) of "
              f"{r['repeats']}  [{load}]")
        for key, label in [("features_photos_per_second", "features (its loop), photos/s"),
                           ("features_wall_photos_per_second", "features (wall), photos/s"),
                           ("index_photos_per_second", "search index (wall of update), photos/s"),
                           ("index_over_features", "index / features (per repeat)")]:
            v = r[key]
            print(f"  {label:42s} {v['median']:8.2f} ({v['min']:.2f}–{v['max']:.2f})")
        print(f"  {SECOND} on the same folder (features reused): {_median(r['second_model_seconds']):.2f} s vs "
              f"{_median(r['first_model_seconds']):.2f} s for the first model = "
              f"{_median(r['second_over_first']):.3f} of it")
        q = cold_query(FIRST, r["photos_dir"], r["index_root"])
        report["cold_query"] = q
        print(f"\n## A cold query on the complete index ({q['photos']} photos; fresh interpreter)  "
              f"[load {q['loadavg']['before'][0]:.2f}]")
        print(f"  import {q['import']:.2f} s, model load {q['model_load']:.2f} s, index load {q['index_load']:.3f} s, "
              f"search {q['search']:.3f} s; process {q['process_seconds']:.2f} s; image network built: "
              f"{q['network_built']}, image tower loaded: {q['tower_loaded']}")
        if args.search_scale:
            s = run_phase_subprocess("scale", {**common, "scale": args.search_scale}, args.phase_timeout,
                                     module=MODULE)
            report["scale"] = s
            build = s["photos"] / _median(r["index_photos_per_second"])
            print(f"\n## An index of {s['photos']:,} photos (links; random unit vectors written through the index "
                  f"code)  [load {s['loadavg']['before'][0]:.2f}→{s['loadavg']['after'][0]:.2f}]")
            print(f"  index.npz {s['index_bytes'] / 2 ** 20:.1f} MiB ({s['bytes_per_photo']:.0f} bytes a photo); "
                  f"open (list, compare, load) {s['open_seconds']:.2f} s, of which listing {s['scan_seconds']:.2f} s;"
                  f" memory {s['rss_mib_after_open'] - s['rss_mib_before_open']:+.0f} MiB resident")
            print(f"  query {s['query_seconds']['median'] * 1000:.1f} ms (median of 5); building it at the rate "
                  f"above: {build / 60:.1f} min ({1000 / _median(r['index_photos_per_second']):.1f} ms a photo)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["loadavg_end"] = list(os.getloadavg())
    print(f"\nload at end: {report['loadavg_end']} ({report['cores']} cores)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    return report


PHASES = {"index_speed": index_speed_phase, "scale": scale_phase}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    print(json.dumps(PHASES[argv[0]](json.loads(argv[1]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
