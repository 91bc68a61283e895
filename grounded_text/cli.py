"""``grounded-text``: one command for every tool of the package.

::

    grounded-text train --data-dir DATA --output-dir runs/vete_bow [...]
    grounded-text evaluate --model runs/vete_bow/export
    grounded-text tune --space vete --show-space
    grounded-text search --model vete_bow_flickr8k --images DIR "a dog runs on the grass"
    grounded-text annotate --model vete_bow_flickr8k --images DIR --sentences labels.txt
    grounded-text data download sts sick --data-dir DATA
    grounded-text SUBCOMMAND --help
    grounded-text --verbose SUBCOMMAND ...    # keep TensorFlow's C++ start-up lines

Each subcommand is the ``main(argv)`` of one module, which also runs as
``python -m grounded_text.MODULE``; the arguments after the subcommand go to it
unchanged, so both forms take the same flags and exit with the same status. Nothing
here imports TensorFlow: a subcommand's module imports it once its flags are parsed.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from grounded_text import __version__
from grounded_text.utils.extras import run_command
from grounded_text.utils.quiet import keep_startup_messages

#: subcommand → (module whose ``main(argv)`` it runs, one line of help).
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "train": ("grounded_text.train", "train a grounded sentence encoder, export and evaluate it"),
    "evaluate": ("grounded_text.evaluate", "score exported encoders: STS, SentEval transfer, the full suite"),
    "tune": ("grounded_text.tune", "hyperparameter search over a tuner/*.toml space (KerasTuner)"),
    "features": ("grounded_text.features", "CNN image features of a folder of images (.npz store)"),
    "search": ("grounded_text.search", "search a folder of photos by a sentence (cached, incremental index)"),
    "annotate": ("grounded_text.photos.annotate", "each photo's best sentences from a file of captions or labels"),
    "prepare": ("grounded_text.prepare", "captions + features of COCO/Flickr30k/Karpathy into a training folder"),
    "export": ("grounded_text.export", "export a pretrained keras-hub text tower as a hub module"),
    "benchmark": ("grounded_text.benchmark", "training and serving throughput on this machine"),
    "reproduce": ("grounded_text.reproduce", "the papers' tables: train and score each configuration"),
    "ablation": ("grounded_text.ablation", "ablation studies as config tables, each run trained by train"),
    "data": ("grounded_text.data.download", "download the evaluation and caption data: data download NAME..."),
}
DATA_ACTIONS = ("download", "list")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="grounded-text", description="Visually grounded sentence embeddings: train, evaluate, tune, export.",
        epilog="Run 'grounded-text SUBCOMMAND --help' for its flags; 'python -m grounded_text.MODULE' is the same.")
    p.add_argument("--version", action="version", version=f"grounded_text {__version__}")
    p.add_argument("--verbose", action="store_true",
                   help="keep TensorFlow's C++ start-up lines (cuInit, CPU notices) and library warnings, which are "
                        "left out by default (also: GROUNDED_TEXT_VERBOSE=1)")
    sub = p.add_subparsers(dest="command", metavar="SUBCOMMAND")
    for name, (_, help_line) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_line, add_help=False)
    return p


def _data(argv: list[str]) -> int:
    """``data download NAME... [flags]`` / ``data list`` → ``grounded_text.data.download.main``."""
    from grounded_text.data import download

    if not argv or argv[0] in ("-h", "--help"):
        print("usage: grounded-text data {download,list} ...\n\n"
              "  download NAME... --data-dir DIR   fetch, check and unpack datasets; --mirror URL, --force,\n"
              "                                    --quiet, --keep-archives, --sample (download --help)\n"
              "  list                              the datasets, their sources, sizes and how each is checked")
        return 0
    action, rest = argv[0], argv[1:]
    if action == "list":
        return download.main(["--list", *rest])
    if action != "download":
        print(f"error: unknown data action {action!r}; choose from {', '.join(DATA_ACTIONS)}.", file=sys.stderr)
        return 2
    return download.main(rest)


def main(argv=None) -> int:
    """The ``grounded-text`` console script.

    Args:
      argv: the arguments after the program name (default ``sys.argv[1:]``).

    Returns:
      The subcommand's exit status (2: an unknown subcommand or bad flags).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--verbose":
        keep_startup_messages()
        argv = argv[1:]
    if not argv or argv[0] in ("-h", "--help", "--version"):
        parser = _parser()
        if not argv:
            parser.print_help()
            return 2
        parser.parse_args(argv)  # prints help or the version, and exits
        return 0
    command, rest = argv[0], argv[1:]
    if command not in SUBCOMMANDS:
        _parser().parse_args([command])  # "invalid choice" with the list of subcommands; exits 2
        return 2
    if command == "data":
        return _data(rest)
    # A missing extra: one "error:" line with the pip command (grounded_text/utils/extras.py).
    return run_command(lambda args: importlib.import_module(SUBCOMMANDS[command][0]).main(args), rest)


if __name__ == "__main__":
    raise SystemExit(main())
