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
import sys
import time

from grounded_text.photos.flags import search_usage_error
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


def main(argv=None) -> int:
    """``grounded-text search``; returns the exit status (see the module docstring)."""
    start = time.perf_counter()
    args = _parse_args(argv)
    problem = search_usage_error(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:  # TensorFlow loads here, once the flags are checked: --help and flag errors answer at once
        from grounded_text.photos.answers import answer
    except KeyboardInterrupt:
        print("interrupted before any photo was encoded.", file=sys.stderr)
        return 130
    return answer(args, start)


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
