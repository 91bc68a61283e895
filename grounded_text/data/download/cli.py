"""The command line: ``grounded-text data download NAME...`` and ``data list``."""

from __future__ import annotations

import argparse
import os
import sys
import time

from grounded_text.data.download.catalogue import (
    DATASETS,
    GROUPS,
    MIRROR_ENV_VAR,
    SAMPLE_ENV_VAR,
    DownloadError,
    expand_names,
    format_list,
)
from grounded_text.data.download.installing import _sample_from_env, download
from grounded_text.data.paths import DATA_ENV_VAR


def parse_args(argv=None) -> argparse.Namespace:
    """The download CLI (``grounded-text data download``)."""
    p = argparse.ArgumentParser(prog="grounded-text data download",
                                description="Download the public evaluation and caption data into the layout the "
                                            "package reads.",
                                epilog=f"datasets: {', '.join(DATASETS)}; groups: "
                                       + "; ".join(f"{g} = {' '.join(v)}" for g, v in GROUPS.items() if g != "all")
                                       + "; all = every dataset.")
    p.add_argument("names", nargs="*", metavar="NAME", help="datasets or groups to download")
    p.add_argument("--data-dir", default=None,
                   help="data root to fill (default: $GROUNDED_TEXT_DATA)")
    p.add_argument("--mirror", default=None, metavar="URL",
                   help=f"fetch URL/<file name> instead of the official locations (default: ${MIRROR_ENV_VAR}); "
                        "the same checks apply")
    p.add_argument("--force", action="store_true",
                   help="download again and replace datasets that are already there; a new file that passes "
                        "the structure check replaces the checksum recorded for it")
    p.add_argument("--keep-archives", action="store_true", help="keep the archives in DATA/.downloads")
    p.add_argument("--sample", action="store_true", default=None,
                   help="accept a mirror's sample of a release: fewer lines or photos than published "
                        f"(default: ${SAMPLE_ENV_VAR}=1); every other check applies")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bars or progress lines, only the result")
    p.add_argument("--list", action="store_true", help="list the datasets and their sources, then exit")
    return p.parse_args(argv)


def main(argv=None) -> int:
    """The CLI. Exit status: 0 done; 2 bad names, no data directory, or a failed
    download (one ``error: ...`` line)."""
    a = parse_args(argv)
    if a.list:
        print(format_list())
        return 0
    if not a.names:
        print("error: name at least one dataset (or: sts, senteval, all); --list shows them.", file=sys.stderr)
        return 2
    data_dir = a.data_dir or os.environ.get(DATA_ENV_VAR)
    if not data_dir:
        print(f"error: no data directory: pass --data-dir or set {DATA_ENV_VAR}.", file=sys.stderr)
        return 2
    try:
        names = expand_names(a.names)
        sample = _sample_from_env() if a.sample is None else True
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    log = (lambda *args, **kwargs: None) if a.quiet else print
    try:
        done = download(names, data_dir, mirror=a.mirror, force=a.force, keep_archives=a.keep_archives, log=log,
                        progress=False if a.quiet else None, sample=sample)
    except DownloadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # e.g. the data directory cannot be written: name the path that failed
        where = e.filename if e.filename is not None else data_dir
        print(f"error: {where}: {e.strerror or e}.", file=sys.stderr)
        return 2
    print(f"done in {time.perf_counter() - start:.1f} s: "
          + ", ".join(f"{k} {v}" for k, v in done.items()) + f" (data directory {data_dir})")
    return 0
