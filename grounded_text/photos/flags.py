"""The flag checks of ``search`` and ``annotate``, each returning one line (printed as
``error: ...``, exit 2) or ``None``, and the command line's queries (``command_queries``). They
run before TensorFlow is imported, so that ``--help`` and flag errors answer at once. No
TensorFlow."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from grounded_text import shipped
from grounded_text.photos.queries import Query, Term, parse_term
from grounded_text.utils.durable import check_writable_target
from grounded_text.vision.folders import PHOTO_EXTENSIONS, has_photos

__all__ = ["command_queries", "counts_error", "model_and_index_error", "no_photos_error", "query_error",
           "save_error", "search_usage_error"]


def counts_error(top_k: int, batch_size: int) -> str | None:
    """``--top-k`` and ``--batch-size`` below 1."""
    if top_k < 1:
        return f"--top-k must be >= 1, got {top_k}."
    if batch_size < 1:
        return f"--batch-size must be >= 1, got {batch_size}."
    return None


def no_photos_error(given: str, folder: Path) -> str | None:
    """An existing ``--images`` folder that holds no photo."""
    if not has_photos(folder):
        return (f"--images {given!r} holds no photos (looked for {' '.join(PHOTO_EXTENSIONS)} files, "
                "recursively, hidden names left out).")
    return None


def model_and_index_error(model: str, index: str | None) -> str | None:
    """A ``--model`` that is neither a shipped model nor an existing folder (or URL), and an
    ``--index`` root that cannot be written."""
    model = str(model)
    if not (shipped.is_name(model) or Path(model).expanduser().exists() or "://" in model):
        return (f"--model {model!r} is neither a shipped model ({', '.join(shipped.names())}) "
                "nor an existing export folder.")
    if index is not None:
        try:
            check_writable_target(Path(index).expanduser(), "--index")
        except OSError as e:
            return str(e)
    return None


def save_error(path: str) -> str | None:
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


def query_error(query: str) -> str | None:
    """Why the query cannot be a sentence (a byte that is not UTF-8), or ``None``."""
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as e:
        bad = ord(query[e.start])
        what = f"byte 0x{bad - 0xDC00:02x}" if 0xDC80 <= bad <= 0xDCFF else f"U+{bad:04X}"
        return (f"the query is not valid UTF-8 text ({what} at position {e.start}); give the sentence in UTF-8, "
                "e.g. \"a dog runs on the grass\".")
    return None


def command_queries(args: argparse.Namespace) -> list[Query]:
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
        if flag == "--query" and query_error(value):
            raise ValueError(query_error(value))
        groups[-1].append(parse_term(value, photo=flag == "--like"))
    if len(groups) > 1 and not all(groups):
        raise ValueError("--then separates two queries: give a sentence, --query or --like on each side of it.")
    return [Query(g) for g in groups if g]


def search_usage_error(args: argparse.Namespace) -> str | None:
    """The first problem of the flags, in one line (the command prints it as ``error: ...`` and
    exits 2), or ``None``; checked before TensorFlow is imported. Sets ``args.queries``."""
    query = " ".join(args.query).strip()
    images = Path(args.images).expanduser()
    if query and query_error(query):
        return query_error(query)
    try:
        args.queries = command_queries(args)
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
        return save_error(args.save)
    return None
