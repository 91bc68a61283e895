"""The STS, STS-B and SICK release archives, repacked from the shared data's reference copies
in their published layouts: served by the download tests' local mirrors."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path


def pack_sts_archives(data: Path, out: Path) -> None:
    """Writes ``STS20{12,13,16}-en-test.zip``, ``Stsbenchmark.tar.gz`` and ``sick_{train,trial,
    test_annotated}.zip`` under ``out`` from ``data/sts``."""
    for year in (12, 13, 16):
        with zipfile.ZipFile(out / f"STS20{year}-en-test.zip", "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted((data / "sts" / f"STS{year}-en-test").iterdir()):
                z.write(f, f"test-gold/{f.name}")
    with tarfile.open(out / "Stsbenchmark.tar.gz", "w:gz") as t:
        for f in sorted((data / "sts" / "STSBenchmark").iterdir()):
            t.add(f, f"stsbenchmark/{f.name}")
    for split in ("train", "trial", "test_annotated"):
        with zipfile.ZipFile(out / f"sick_{split}.zip", "w", zipfile.ZIP_DEFLATED) as z:
            z.write(data / "sts" / "SICK" / f"SICK_{split}.txt", f"SICK_{split}.txt")
