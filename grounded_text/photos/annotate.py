"""CLI: each photo's best sentences from a file of sentences (captions, or labels as zero-shot
classes), with a shipped model or a trained export.

::

    grounded-text annotate --model vete_bow_flickr8k --images DIR_OR_PHOTOS... --sentences FILE \\
        [--top-k 5] [--json] [--index DIR] [--batch-size 32] [--no-progress]

``--images`` is a folder (its photos, recursively, through the photo index of
``grounded-text search``: encoded once, kept, incremental) or one or more photo files (encoded
for this run). ``--sentences`` is a text file, one sentence a line (UTF-8; blank lines left
out); its vectors are kept too, keyed by the file's bytes and the text tower, under the same
root (``--index``). Each photo's ``--top-k`` sentences are those of highest cosine, best
first (ties: the earlier line).

Output: for each photo, its path, then one line a sentence (rank, cosine, sentence); then one
line with the counts and the time. ``--json`` prints a list instead, one object a photo:
``{"photo": PATH, "sentences": [{"sentence": ..., "cosine": ...}, ...]}``, best sentence first
(the last line then goes to stderr).

Exit status: 0 on success; 2 for bad arguments (a missing ``--images`` path, a folder without
photos, a ``--sentences`` file that is missing, not UTF-8 or empty, ``--top-k`` below 1, an
unknown model, a model without image tower, no photo that can be read), always as one
``error: ...`` line; 130 when interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from grounded_text.photos.flags import counts_error, model_and_index_error, no_photos_error
from grounded_text.photos.names import json_path, shown
from grounded_text.utils.progress import NO_PROGRESS_FLAG


def _parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="grounded-text annotate",
        description="Each photo's best sentences from a file of sentences, one a line (captions, or labels as "
                    "zero-shot classes), by cosine in a model's space.",
        epilog="Example: grounded-text annotate --model vete_bow_flickr8k --images photos/ --sentences labels.txt "
               "--top-k 3")
    parser.add_argument("--model", required=True,
                        help="a shipped model's name (e.g. vete_bow_flickr8k) or an export folder with an image tower")
    parser.add_argument("--images", required=True, nargs="+", metavar="DIR_OR_PHOTO",
                        help="a folder of photos (searched recursively, indexed and kept as by search) or photo files")
    parser.add_argument("--sentences", required=True, metavar="FILE", help="the sentences, one a line (UTF-8)")
    parser.add_argument("--top-k", type=int, default=5, help="sentences per photo (default 5)")
    parser.add_argument("--index", metavar="DIR", default=None,
                        help="where the photo and sentence indexes are kept (default: search's, image_index in the "
                             "platform's cache folder)")
    parser.add_argument("--batch-size", type=int, default=32, help="photos per network call")
    parser.add_argument(NO_PROGRESS_FLAG, dest="no_progress", action="store_true",
                        help="no progress while photos are encoded")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON list on stdout: one {photo, sentences: [{sentence, cosine}]} a photo")
    return parser.parse_args(argv)


def _usage_error(args: argparse.Namespace) -> str | None:
    """The first problem of the flags, in one line, or ``None``; checked before TensorFlow is imported."""
    problem = counts_error(args.top_k, args.batch_size)
    if problem:
        return problem
    paths = [Path(p).expanduser() for p in args.images]
    for given, path in zip(args.images, paths):
        if not path.exists():
            return f"--images {given!r} does not exist."
    if len(paths) > 1 and any(p.is_dir() for p in paths):
        return "--images takes one folder, or photo files; not a folder among other paths."
    problem = no_photos_error(args.images[0], paths[0]) if paths[0].is_dir() else None
    if problem:
        return problem
    sentences = Path(args.sentences).expanduser()
    if not sentences.is_file():
        return f"--sentences {args.sentences!r} is not a file."
    return model_and_index_error(args.model, args.index)


def main(argv=None) -> int:
    """``grounded-text annotate``; returns the exit status (see the module docstring)."""
    start = time.perf_counter()
    args = _parse_args(argv)
    problem = _usage_error(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        # TensorFlow loads with these, once the flags are checked: --help and flag errors answer at once.
        import grounded_text as gt  # noqa: PLC0415 (gt.load: the one loader, patched by the tests)
        from grounded_text.photos.index import ImageIndex, IndexBusyError  # noqa: PLC0415 (imports TensorFlow)
        from grounded_text.photos.sentences import (  # noqa: PLC0415 (imports TensorFlow)
            SentenceIndex,
            best_sentences,
            encode_photo_files,
        )

        try:
            encoder = gt.load(args.model)
            folder = Path(args.images[0]).expanduser()
            if folder.is_dir():
                index = ImageIndex(folder, encoder, args.index, batch_size=args.batch_size)
                report = index.update(show_progress_bar=not args.no_progress)
                paths, photos = index.paths, index.embeddings
                failed = report.failed + report.known_failed
                where = f"{report.photos} photos ({report.encoded} encoded, {report.reused} reused)"
            else:
                paths, photos, failed = encode_photo_files(encoder, args.images, args.batch_size)
                where = f"{len(paths)} photos (encoded)"
        except (FileNotFoundError, NotADirectoryError, ValueError, IndexBusyError) as e:
            print(f"error: --model {args.model!r}: {e}" if "tower" in str(e) else f"error: {e}", file=sys.stderr)
            return 2
        except OSError as e:
            print(f"error: cannot write the index ({e}).", file=sys.stderr)
            return 2
        for rel, reason in failed:
            print(f"skipped {shown(rel)}: {reason}", file=sys.stderr)
        if not paths:
            print("error: no readable photos in --images.", file=sys.stderr)
            return 2
        try:
            sentences = SentenceIndex(args.sentences, encoder, args.index)
            rows, cosines = best_sentences(photos, sentences.embeddings, args.top_k)
        except (OSError, ValueError) as e:  # not UTF-8, no sentence, towers of other widths
            print(f"error: --sentences {args.sentences!r}: {e}", file=sys.stderr)
            return 2
        _print(args, paths, sentences.sentences, rows, cosines)
        summary = (f"Annotated {where} with {len(sentences.sentences)} sentences "
                   f"({'reused' if sentences.reused else 'encoded'}) in {time.perf_counter() - start:.1f} s")
        print(summary, file=sys.stderr if args.json else sys.stdout)
    except KeyboardInterrupt:
        print("interrupted: the photos encoded so far are kept; run the same command again to resume.",
              file=sys.stderr)
        return 130
    return 0


def _print(args: argparse.Namespace, paths: list[str], sentences: list[str], rows, cosines) -> None:
    """The results on stdout: the ``--json`` list, or each photo's path and its sentences."""
    if args.json:
        print(json.dumps([{"photo": json_path(path)["path"],
                           "sentences": [{"sentence": sentences[r], "cosine": float(c)} for r, c in zip(row, cos)]}
                          for path, row, cos in zip(paths, rows, cosines)], indent=2))
        return
    for path, row, cos in zip(paths, rows, cosines):
        print(shown(path))
        for rank, (r, c) in enumerate(zip(row, cos), 1):
            print(f"{rank:3d}  {c:.4f}  {sentences[r]}")
    sys.stdout.flush()


if __name__ == "__main__":
    from grounded_text.utils.extras import run_command

    raise SystemExit(run_command(main))
