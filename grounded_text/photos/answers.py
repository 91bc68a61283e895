"""The ``search`` command once its flags are checked: the folder's photo index brought up to
date, each query answered in turn (the command line's, then standard input's with
``--interactive``), the results printed (lines, ``--paths`` or ``--json``), the contact sheet
written, the summary line. The command module (``grounded_text.search``) parses and checks the
flags; this is what it calls. Exit statuses and outputs: that module's docstring."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import grounded_text as gt  # gt.load: the one loader (the tests replace it there)
from grounded_text.photos import contact_sheet  # read at call time: a sheet's writer can be replaced
from grounded_text.photos.flags import query_error
from grounded_text.photos.index import ImageIndex, IndexBusyError
from grounded_text.photos.names import json_path as _json_path
from grounded_text.photos.names import shown
from grounded_text.photos.queries import parse_line

__all__ = ["answer"]


def answer(args: argparse.Namespace, start: float) -> int:
    """Runs a search whose flags ``grounded_text.photos.flags.search_usage_error`` passed
    (``args.queries`` set); ``start``: ``time.perf_counter()`` when the command began, for the
    times it prints. Returns the exit status: 0, 2 (one ``error: ...`` line on stderr per
    problem) or 130 (interrupted; the photos encoded so far are kept)."""
    index_dir = None
    try:
        try:
            encoder = gt.load(args.model)
            index = ImageIndex(args.images, encoder, args.index, batch_size=args.batch_size)
        except (FileNotFoundError, NotADirectoryError, ValueError) as e:  # NoImageTowerError is a ValueError
            print(f"error: --model {args.model!r}: {e}", file=sys.stderr)
            return 2
        index_dir = index.index_dir
        try:
            report = index.update(show_progress_bar=not args.no_progress)
        except IndexBusyError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except ValueError as e:  # a link in the index folder, a damaged image tower or network, other widths
            print(f"error: {e}", file=sys.stderr)
            return 2
        except OSError as e:  # the index cannot be written (a full disk, permissions): finished batches stay
            print(f"error: cannot write the index {str(index_dir)!r} ({e}).", file=sys.stderr)
            return 2
        for entry in report.discarded:
            print(f"warning: ignored an unreadable index file, its photos encoded again: {entry}", file=sys.stderr)
        for rel, reason in report.failed:
            print(f"skipped {shown(rel)}: {reason}", file=sys.stderr)
        for rel, reason in report.known_failed:
            print(f"skipped {shown(rel)} (unreadable when last tried, unchanged since): {reason}", file=sys.stderr)
        if report.photos == 0:
            print(f"error: no readable photos in {args.images!r}.", file=sys.stderr)
            return 2
        status, t_search, hits = 0, 0.0, None
        # One object per query, a line each, once there may be several.
        args.json_lines = args.interactive or len(args.queries) > 1
        answered = 0
        for text, query in _all_queries(args):
            if isinstance(query, ValueError):
                print(f"error: {text}: {query}", file=sys.stderr)
                status = 2
                continue
            t0 = time.perf_counter()
            try:
                hits = index.search(query, top_k=args.top_k, exclude=args.exclude)
            except (ValueError, TypeError) as e:  # towers' widths differ, an unreadable photo, terms that cancel
                if text is None:
                    print(f"error: --model {args.model!r}: {e}", file=sys.stderr)
                    return 2
                print(f"error: {text}: {e}", file=sys.stderr)
                status = 2
                continue
            t_search += time.perf_counter() - t0
            answered += 1
            _print_results(args, query.describe(), index, report, hits, start)
        summary = f"{report.summary()}; {answered} quer{'y' if answered == 1 else 'ies'} searched in {t_search:.2f} s; "
        summary += f"{time.perf_counter() - start:.1f} s in all"
        quiet = args.json or args.paths  # stdout holds only the results
        if args.save is not None and hits is not None:
            # The results are printed before the sheet is written: a failed write loses none of them.
            try:
                Path(args.save).expanduser().absolute().parent.mkdir(parents=True, exist_ok=True)
                grid = contact_sheet.save_grid(hits, args.queries[0].describe(), Path(args.save).expanduser())
            except OSError as e:
                print(summary, file=sys.stderr if quiet else sys.stdout)
                print(f"error: --save {args.save!r}: {e.strerror or e}; the results above are complete.",
                      file=sys.stderr)
                return 2
            print(f"Grid: {grid}", file=sys.stderr if quiet else sys.stdout)
        print(summary, file=sys.stderr if quiet else sys.stdout)
    except KeyboardInterrupt:
        where = f" in {str(index_dir)!r}" if index_dir is not None else ""
        print(f"interrupted: the photos encoded so far are kept{where}; run the same command again to resume.",
              file=sys.stderr)
        return 130
    return status


def _all_queries(args: argparse.Namespace):
    """``(None, Query)`` for the command line's queries, then ``(line, Query or ValueError)`` for
    standard input's lines with ``--interactive``."""
    for query in args.queries:
        yield None, query
    if args.interactive:
        yield from _stdin_queries()


def _stdin_queries():
    """``("line N", Query or the ValueError refusing it)`` for each non-blank line of standard
    input, read as it arrives."""
    for number, line in enumerate(iter(sys.stdin.readline, ""), 1):
        if not line.strip():
            continue
        try:
            if query_error(line):
                raise ValueError(query_error(line))
            yield f"line {number}", parse_line(line)
        except ValueError as e:
            yield f"line {number}", e


def _write_path(path: str) -> None:
    """One path a line on stdout, its exact bytes (a name that is not UTF-8 included)."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        print(path)
        return
    sys.stdout.flush()
    buffer.write(os.fsencode(path) + b"\n")
    buffer.flush()


def _print_results(args: argparse.Namespace, query: str, index, report, hits, start: float) -> None:
    """Prints one query's results on stdout: paths only (``--paths``), the ``--json`` object
    (indented for one query, one line each for several), or a header and one line a photo."""
    if args.paths:
        for hit in hits:
            _write_path(hit.path)
        return
    if args.json:
        print(json.dumps({
            "query": query, "model": args.model, "images": str(index.folder),
            "results": [{**_json_path(h.path), "cosine": h.cosine} for h in hits],
            "index": {"dir": str(report.index_dir), "photos": report.photos, "encoded": report.encoded,
                      "reused": report.reused, "features_reused": report.features_reused,
                      "dropped": report.dropped,
                      "skipped": [{**_json_path(p), "reason": r} for p, r in report.failed + report.known_failed],
                      "seconds": round(report.seconds, 3)},
            "grid": None if args.save is None else str(Path(args.save).expanduser()),
            "seconds": round(time.perf_counter() - start, 3)},
            indent=None if args.json_lines else 2))
    else:
        print(f"Top {len(hits)} of {report.photos} photos for \"{query}\" ({args.model}):")
        for rank, hit in enumerate(hits, 1):
            print(f"{rank:3d}  {hit.cosine:.4f}  {shown(hit.path)}")
    sys.stdout.flush()
