"""CLI: search a folder of photos by a sentence, a photo or a weighted mix of them, with a shipped
model or a trained export.

::

    grounded-text search --model vete_bow_flickr8k --images DIR "a dog runs on the grass" \\
        [--top-k 5] [--save grid.png] [--index DIR] [--batch-size 32] [--no-progress] [--json]
    grounded-text search --model M --images DIR --like DIR/x.jpg                 # photos like this one
    grounded-text search --model M --images DIR --query "a beach" --query -0.5:people --like sunset.jpg
    grounded-text search --model M --images DIR "a dog" --then --query "a red car"    # two queries in turn
    grounded-text search --model M --images DIR --interactive --paths < queries.txt  # one query a line

**Queries.** The positional words (one sentence), ``--query [WEIGHT:]SENTENCE`` and ``--like
[WEIGHT:]PHOTO`` are the terms of one query; its vector is the renormalised weighted sum of
the terms' unit vectors (weight 1 by default; negative pushes away;
:mod:`grounded_text.photos.queries`). ``--then`` ends a query and starts the next; the
queries are answered in turn. ``--interactive`` then reads standard input, one query a line
(terms separated by ``|``, a photo written ``like:PATH``), each answered as it arrives; the
model and the index load once. ``--exclude GLOB`` (repeatable) leaves the photos whose path
relative to the folder matches out of the results (``fnmatch``; they stay in the index).
``--paths`` prints only the paths, one a line, their exact bytes.

The first run encodes every photo of ``DIR`` (recursively; .jpg .jpeg .png .gif .bmp .webp .tif .tiff)
into the model's space through its image tower and keeps them in an index, one per (folder,
model), under ``image_index`` in the platform's cache folder (``~/.cache/grounded_text`` on
Linux, or ``$XDG_CACHE_HOME/grounded_text``; ``~/Library/Caches/grounded_text`` on macOS;
``%LOCALAPPDATA%/grounded_text/Cache`` on Windows; ``--index`` chooses another root). Later runs encode
only new or changed photos and drop removed ones. Interrupted (Ctrl-C, a kill), the photos
encoded so far are kept and the next run resumes. Files that cannot be decoded are listed on
stderr and skipped (tried again only once they change). The search is exact (cosine with every
photo). See :mod:`grounded_text.photos.index` and docs/search.md.

Output: for each query, a header and its top ``--top-k`` photos, best first, one per line
(rank, cosine, path), then one line with the photos indexed (encoded, reused) and the time.
``--json`` prints one JSON object instead (``query``, ``model``, ``images``, ``results``:
``[{"path", "cosine"}]``, ``index``: the counts, ``features_reused`` among them: photos encoded
by the image tower alone, from network features another model of the same network stored); with
several queries or ``--interactive``, one object a line. With ``--json`` or ``--paths`` the last
line goes to stderr. ``--save GRID.png`` also writes a contact sheet of one query's results
(thumbnails, cosine under each, the query as title); it needs Pillow.

File names that are not printable UTF-8 (a byte that is not UTF-8, a newline) are shown
quoted, with ``\\xNN`` for such bytes and ``\\n`` for a newline, so each result stays one line;
in ``--json`` such a ``path`` is valid Unicode and ``path_hex`` gives the name's exact bytes.
The results are printed before the contact sheet is written (missing folders on its way are
created), so a sheet that cannot be written loses none of them.

Exit status: 0 on success; 2 for bad arguments (an empty query or one that is not UTF-8, a
``--like`` that is not a file, a ``--then`` with no term on a side, a query whose terms cancel
out, a missing ``--images`` folder or one without photos, an unknown model, a model without image
tower, a damaged image tower or image network, text and image towers of other widths, an
index folder holding a link or one that cannot be written, a ``--save`` path that cannot be
written, Pillow missing for ``--save``), always as one ``error: ...`` line; 130 when
interrupted (the index keeps what was encoded). A refused ``--interactive`` line is one
``error: ...`` line too; the next lines are answered, and the status is then 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from grounded_text.photos.flags import counts_error, model_and_index_error, no_photos_error
from grounded_text.photos.names import json_path as _json_path
from grounded_text.photos.names import shown
from grounded_text.photos.queries import Query, Term, parse_line, parse_term
from grounded_text.utils.durable import check_writable_target
from grounded_text.utils.progress import NO_PROGRESS_FLAG


class _Terms(argparse.Action):
    """``--query``, ``--like`` and ``--then`` in the order given: ``(flag, value)`` in ``terms``."""

    def __call__(self, parser, namespace, values, option_string=None):
        terms = list(getattr(namespace, self.dest, None) or [])
        terms.append((option_string, values))
        setattr(namespace, self.dest, terms)


def _glued(argv: list[str]) -> list[str]:
    """``--query -0.5:people`` as ``--query=-0.5:people``: argparse would take a value starting
    with ``-`` for a flag."""
    out, argv = [], list(argv)
    i = 0
    while i < len(argv):
        if argv[i] in ("--query", "--like") and i + 1 < len(argv) and argv[i + 1].startswith("-") \
                and not argv[i + 1].startswith("--"):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def _parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="grounded-text search",
        description="Search a folder of photos by a sentence, a photo, or a weighted mix of them: the photos "
                    "closest in a model's space (exact cosine). The photos are indexed once and the index is kept "
                    "(incremental, resumable).",
        epilog="Examples: grounded-text search --model vete_bow_flickr8k --images photos/ \"a dog runs on the grass\"; "
               "... --query \"a beach\" --query -0.5:people --like sunset.jpg; "
               "... --like photos/x.jpg --then --query \"a red car\"; ... --interactive --paths < queries.txt")
    parser.add_argument("query", nargs="*",
                        help="a sentence (words after the flags are joined by spaces): a term of the first query")
    parser.add_argument("--query", dest="terms", metavar="[WEIGHT:]SENTENCE", action=_Terms,
                        help="a sentence term, weighted (default 1; negative pushes away), e.g. -0.5:people; "
                             "repeatable: the terms make one query (the renormalised weighted sum of their unit "
                             "vectors)")
    parser.add_argument("--like", dest="terms", metavar="[WEIGHT:]PHOTO", action=_Terms,
                        help="a photo term: photos like this one (a file; repeatable, weighted as --query)")
    parser.add_argument("--then", dest="terms", nargs=0, action=_Terms,
                        help="ends a query: the terms after it make the next one (queries answered in turn)")
    parser.add_argument("--interactive", action="store_true",
                        help="then read queries from standard input, one a line, each answered as it arrives "
                             "(terms separated by |, a photo as like:PATH); the model and the index load once")
    parser.add_argument("--paths", action="store_true", help="print only the photos' paths, one a line (for pipes)")
    parser.add_argument("--exclude", metavar="GLOB", action="append", default=[],
                        help="leave out of the results the photos whose path relative to the folder matches GLOB "
                             "(* also matches /; they stay in the index); repeatable")
    parser.add_argument("--model", required=True,
                        help="a shipped model's name (e.g. vete_bow_flickr8k) or an export folder with an image tower")
    parser.add_argument("--images", required=True, help="the folder of photos (searched recursively)")
    parser.add_argument("--top-k", type=int, default=5, help="photos to show (default 5)")
    parser.add_argument("--save", metavar="GRID.png", default=None,
                        help="also write a contact sheet of the results of one query (needs Pillow)")
    parser.add_argument("--index", metavar="DIR", default=None,
                        help="where indexes are kept (default: image_index in the platform's cache folder: "
                             "~/.cache/grounded_text/image_index on Linux, or under $XDG_CACHE_HOME; "
                             "~/Library/Caches/grounded_text/image_index on macOS; "
                             "%%LOCALAPPDATA%%\\grounded_text\\Cache\\image_index on Windows)")
    parser.add_argument("--batch-size", type=int, default=32, help="photos per network call and per index part")
    parser.add_argument(NO_PROGRESS_FLAG, dest="no_progress", action="store_true",
                        help="no progress while photos are encoded")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object on stdout (several queries: one object a line)")
    args = parser.parse_intermixed_args(_glued(argv if argv is not None else sys.argv[1:]))
    args.terms = args.terms or []
    return args


def _save_error(path: str) -> str | None:
    """Why ``--save`` cannot be written (Pillow missing, a folder, an extension it cannot write,
    a folder that cannot be written), or ``None``. Missing folders on the way are created when
    the sheet is written."""
    try:
        from PIL import Image  # noqa: PLC0415 (Pillow is an optional extra: its absence is the answer)
    except ImportError:
        return "--save needs Pillow, which is not installed: pip install 'grounded_text[eval]' (or pillow)"
    target = Path(path).expanduser()
    if target.is_dir() or path.endswith(("/", os.sep)):
        return f"--save {path!r} is a folder; give a file name such as grid.png."
    suffix = target.suffix.lower()
    if suffix not in Image.registered_extensions():
        return (f"--save {path!r}: give an image file name such as grid.png "
                f"(Pillow cannot write {repr(suffix) if suffix else 'a name without an extension'}).")
    try:
        check_writable_target(target.absolute().parent, "--save folder")
    except OSError as e:
        return str(e)
    return None


def _query_error(query: str) -> str | None:
    """Why the query cannot be a sentence (a byte that is not UTF-8), or ``None``."""
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = ord(query[e.start])
        what = f"byte 0x{bad - 0xDC00:02x}" if 0xDC80 <= bad <= 0xDCFF else f"U+{bad:04X}"
        return (f"the query is not valid UTF-8 text ({what} at position {e.start}); give the sentence in UTF-8, "
                "e.g. \"a dog runs on the grass\".")
    return None


def _queries(args: argparse.Namespace) -> list[Query]:
    """The command line's queries: the positional sentence and the ``--query`` / ``--like`` terms
    up to the first ``--then`` make the first, each ``--then`` starts the next.

    Raises:
      ValueError: an empty sentence, a term that is not UTF-8, a ``--like`` that is not a file,
        a ``--then`` with no term on one side (one line, for ``error:``).
    """
    groups: list[list[Term]] = [[]]
    sentence = " ".join(args.query).strip()
    if args.query and not sentence:
        raise ValueError("the query is empty; give a sentence, e.g. \"a dog runs on the grass\".")
    if sentence:
        groups[0].append(Term(sentence))
    for flag, value in args.terms:
        if flag == "--then":
            groups.append([])
            continue
        if flag == "--query" and _query_error(value):
            raise ValueError(_query_error(value))
        groups[-1].append(parse_term(value, photo=flag == "--like"))
    if len(groups) > 1 and not all(groups):
        raise ValueError("--then separates two queries: give a sentence, --query or --like on each side of it.")
    return [Query(g) for g in groups if g]


def _usage_error(args: argparse.Namespace) -> str | None:
    """The first problem of the flags, in one line (``main`` prints it as ``error: ...`` and exits
    2), or ``None``; checked before TensorFlow is imported. Sets ``args.queries``."""
    query = " ".join(args.query).strip()
    images = Path(args.images).expanduser()
    if query and _query_error(query):
        return _query_error(query)
    try:
        args.queries = _queries(args)
    except ValueError as e:
        return str(e)
    if not args.queries and not args.interactive:
        return ("the query is empty; give a sentence, e.g. \"a dog runs on the grass\" (or --query, --like, "
                "--interactive).")
    if args.paths and args.json:
        return "--paths and --json both choose the output; give one."
    if args.save is not None and (args.interactive or len(args.queries) > 1):
        return "--save writes the contact sheet of one query; give one query without --interactive."
    problem = counts_error(args.top_k, args.batch_size)
    if problem:
        return problem
    if not images.exists():
        return f"--images {args.images!r} does not exist."
    if not images.is_dir():
        return f"--images {args.images!r} is not a folder."
    problem = no_photos_error(args.images, images) or model_and_index_error(args.model, args.index)
    if problem:
        return problem
    if args.save is not None:
        return _save_error(args.save)
    return None


def _stdin_queries():
    """``("line N", Query or the ValueError refusing it)`` for each non-blank line of standard
    input, read as it arrives."""
    for number, line in enumerate(iter(sys.stdin.readline, ""), 1):
        if not line.strip():
            continue
        try:
            if _query_error(line):
                raise ValueError(_query_error(line))
            yield f"line {number}", parse_line(line)
        except ValueError as e:
            yield f"line {number}", e


def main(argv=None) -> int:
    """``grounded-text search``; returns the exit status (see the module docstring)."""
    start = time.perf_counter()
    args = _parse_args(argv)
    problem = _usage_error(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    index_dir = None
    try:
        import grounded_text as gt
        from grounded_text.photos.contact_sheet import save_grid
        from grounded_text.photos.index import ImageIndex, IndexBusyError

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
                grid = save_grid(hits, args.queries[0].describe(), Path(args.save).expanduser())
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


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
