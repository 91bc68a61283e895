"""Peak memory and throughput of ``TextEncoder.encode_iter`` on a generator of sentences.

Usage (one fresh process per count, so each peak RSS is its own)::

    python tests/bench_streaming_encode.py EXPORT_DIR COUNT [--batch-size 512]

Prints one JSON line: ``{"sentences", "batch_size", "seconds", "sentences_per_second",
"peak_rss_mib", "rss_before_mib", "dim", "checksum"}``. Sentences are generated on the fly
(``"a dog number <i> runs on the beach"``), never held in a list; the vectors of each batch
are reduced to a running sum and dropped, as a consumer writing them to disk would.
``tests/test_encoder_api.py::test_streaming_a_million_sentences_keeps_memory_flat`` runs it
for 10,000 and 1,000,000 sentences and compares the peaks.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("export")
    p.add_argument("count", type=int)
    p.add_argument("--batch-size", type=int, default=512)
    a = p.parse_args(argv)
    import numpy as np

    from grounded_text.serving.loader import load

    enc = load(a.export, batch_size=a.batch_size)
    enc.encode(["warm up"] * a.batch_size)  # the batch shape is traced before the clock starts
    before = _rss_mib()
    sentences = (f"a dog number {i} runs on the beach" for i in range(a.count))
    total = np.zeros(enc.dim, np.float64)
    start = time.perf_counter()
    n = 0
    for part in enc.encode_iter(sentences):
        total += part.sum(axis=0)
        n += len(part)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"sentences": n, "batch_size": a.batch_size, "seconds": round(seconds, 2),
                      "sentences_per_second": round(n / seconds, 1), "peak_rss_mib": round(peak, 1),
                      "rss_before_mib": round(before, 1), "dim": enc.dim, "checksum": float(total.sum())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
