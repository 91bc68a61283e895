"""CLI: search a folder of photos by a sentence, with a shipped model or a trained export.

::

    grounded-text search --model vete_bow_flickr8k --images DIR "a dog runs on the grass" \\
        [--top-k 5] [--save grid.png] [--index DIR] [--batch-size 32] [--no-progress] [--json]

The first run encodes every photo of ``DIR`` (recursively; .jpg .jpeg .png .gif .bmp .webp .tif .tiff)
into the model's space through its image tower and keeps them in an index, one per (folder,
model), under ``image_index`` in the platform's cache folder (``~/.cache/grounded_text`` on
Linux, or ``$XDG_CACHE_HOME/grounded_text``; ``~/Library/Caches/grounded_text`` on macOS;
``%LOCALAPPDATA%/grounded_text/Cache`` on Windows; ``--index`` chooses another root). Later runs encode
only new or changed photos and drop removed ones. Interrupted (Ctrl-C, a kill), the photos
encoded so far are kept and the next run resumes. Files that cannot be decoded are listed on
stderr and skipped (tried again only once they change). The search is exact (cosine with every
photo). See :mod:`grounded_text.photos.index` and docs/search.md.

Output: the top ``--top-k`` photos, best first, one per line (rank, cosine, path), then one
line with the photos indexed (encoded, reused) and the time. ``--json`` prints one JSON object
instead (``query``, ``model``, ``images``, ``results``: ``[{"path", "cosine"}]``, ``index``:
the counts, ``features_reused`` among them: photos encoded by the image tower alone, from network
features another model of the same network stored). ``--save GRID.png`` also writes a contact
sheet of the results (thumbnails, cosine under each, the query as title); it needs Pillow.

Exit status: 0 on success; 2 for bad arguments (an empty query, a missing ``--images``
folder or one without photos, an unknown model, a model without image tower, an index folder
or ``--save`` path that cannot be written, Pillow missing for ``--save``); 130 when
interrupted (the index keeps what was encoded).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from grounded_text import shipped
from grounded_text.utils.durable import check_writable_target
from grounded_text.utils.progress import NO_PROGRESS_FLAG
from grounded_text.vision.folders import PHOTO_EXTENSIONS, has_photos


def _parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="grounded-text search",
        description="Search a folder of photos by a sentence: the photos closest to it in a model's space "
                    "(exact cosine). The photos are indexed once and the index is kept (incremental, resumable).",
        epilog="Example: grounded-text search --model vete_bow_flickr8k --images photos/ \"a dog runs on the grass\"")
    parser.add_argument("query", nargs="+", help="the sentence (words after the flags are joined by spaces)")
    parser.add_argument("--model", required=True,
                        help="a shipped model's name (e.g. vete_bow_flickr8k) or an export folder with an image tower")
    parser.add_argument("--images", required=True, help="the folder of photos (searched recursively)")
    parser.add_argument("--top-k", type=int, default=5, help="photos to show (default 5)")
    parser.add_argument("--save", metavar="GRID.png", default=None,
                        help="also write a contact sheet of the results (needs Pillow)")
    parser.add_argument("--index", metavar="DIR", default=None,
                        help="where indexes are kept (default: image_index in the platform's cache folder: "
                             "~/.cache/grounded_text/image_index on Linux, or under $XDG_CACHE_HOME; "
                             "~/Library/Caches/grounded_text/image_index on macOS; "
                             "%%LOCALAPPDATA%%\\grounded_text\\Cache\\image_index on Windows)")
    parser.add_argument("--batch-size", type=int, default=32, help="photos per network call and per index part")
    parser.add_argument(NO_PROGRESS_FLAG, dest="no_progress", action="store_true",
                        help="no progress while photos are encoded")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return parser.parse_args(argv)


def _save_error(path: str) -> str | None:
    """Why ``--save`` cannot be written (Pillow missing, an extension it cannot write, a folder
    that cannot be written), or ``None``."""
    try:
        from PIL import Image  # noqa: PLC0415 (Pillow is an optional extra: its absence is the answer)
    except ImportError:
        return "--save needs Pillow, which is not installed: pip install 'grounded_text[eval]' (or pillow)"
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in Image.registered_extensions():
        return f"--save {path!r}: give an image file name such as grid.png (Pillow cannot write {suffix or 'it'!r})."
    if target.is_dir():
        return f"--save {path!r} is a folder; give a file name such as grid.png."
    try:
        check_writable_target(target.absolute().parent, "--save folder")
    except OSError as e:
        return str(e)
    return None


def _usage_error(args: argparse.Namespace) -> str | None:
    """The first problem of the flags, in one line (``main`` prints it as ``error: ...`` and exits
    2), or ``None``; checked before TensorFlow is imported."""
    query = " ".join(args.query).strip()
    images = Path(args.images).expanduser()
    if not query:
        return "the query is empty; give a sentence, e.g. \"a dog runs on the grass\"."
    if args.top_k < 1:
        return f"--top-k must be >= 1, got {args.top_k}."
    if args.batch_size < 1:
        return f"--batch-size must be >= 1, got {args.batch_size}."
    if not images.exists():
        return f"--images {args.images!r} does not exist."
    if not images.is_dir():
        return f"--images {args.images!r} is not a folder."
    if not has_photos(images):
        return (f"--images {args.images!r} holds no photos (looked for {' '.join(PHOTO_EXTENSIONS)} files, "
                "recursively, hidden names left out).")
    model = str(args.model)
    if not (shipped.is_name(model) or Path(model).expanduser().exists() or "://" in model):
        return (f"--model {model!r} is neither a shipped model ({', '.join(shipped.names())}) "
                "nor an existing export folder.")
    if args.index is not None:
        try:
            check_writable_target(Path(args.index).expanduser(), "--index")
        except OSError as e:
            return str(e)
    if args.save is not None:
        return _save_error(args.save)
    return None


def main(argv=None) -> int:
    """``grounded-text search``; returns the exit status (see the module docstring)."""
    start = time.perf_counter()
    args = _parse_args(argv)
    problem = _usage_error(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    query = " ".join(args.query).strip()
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
        except OSError as e:  # the index cannot be written (a full disk, permissions): finished batches stay
            print(f"error: cannot write the index {str(index_dir)!r} ({e}).", file=sys.stderr)
            return 2
        for entry in report.discarded:
            print(f"warning: ignored an unreadable index file, its photos encoded again: {entry}", file=sys.stderr)
        for rel, reason in report.failed:
            print(f"skipped {rel}: {reason}", file=sys.stderr)
        for rel, reason in report.known_failed:
            print(f"skipped {rel} (unreadable when last tried, unchanged since): {reason}", file=sys.stderr)
        if report.photos == 0:
            print(f"error: no readable photos in {args.images!r}.", file=sys.stderr)
            return 2
        t_search = time.perf_counter()
        hits = index.search(query, top_k=args.top_k)
        t_search = time.perf_counter() - t_search
        grid = None
        if args.save is not None:
            try:
                grid = save_grid(hits, query, args.save)
            except OSError as e:
                print(f"error: --save {args.save!r}: {e}", file=sys.stderr)
                return 2
    except KeyboardInterrupt:
        where = f" in {str(index_dir)!r}" if index_dir is not None else ""
        print(f"interrupted: the photos encoded so far are kept{where}; run the same command again to resume.",
              file=sys.stderr)
        return 130
    total = time.perf_counter() - start
    line = f"{report.summary()}; search {t_search:.2f} s; {total:.1f} s in all"
    if args.json:
        print(json.dumps({
            "query": query, "model": args.model, "images": str(index.folder),
            "results": [{"path": h.path, "cosine": h.cosine} for h in hits],
            "index": {"dir": str(report.index_dir), "photos": report.photos, "encoded": report.encoded,
                      "reused": report.reused, "features_reused": report.features_reused, "dropped": report.dropped,
                      "skipped": [{"path": p, "reason": r} for p, r in report.failed + report.known_failed],
                      "seconds": round(report.seconds, 3)},
            "grid": None if grid is None else str(grid), "seconds": round(total, 3)}, indent=2))
        print(line, file=sys.stderr)
        return 0
    print(f"Top {len(hits)} of {report.photos} photos for \"{query}\" ({args.model}):")
    for rank, hit in enumerate(hits, 1):
        print(f"{rank:3d}  {hit.cosine:.4f}  {hit.path}")
    if grid is not None:
        print(f"Grid: {grid}")
    print(line)
    return 0


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
