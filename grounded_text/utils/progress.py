"""Progress of a command's long sections on stderr, on by default (``--no-progress`` turns it off).

One rule for every command: in a terminal or a notebook kernel (``interactive``) a
``tqdm.auto`` bar (a widget in a notebook); anywhere else (a log file, CI) plain lines,
which a log keeps readable: no carriage returns or redraws. While a bar is drawn, console log
records go through ``tqdm.write``, above it (a command's warnings too:
``grounded_text.utils.quiet.one_line_warnings``). The download's byte bars
(``grounded_text.data.download.fetching.progress_bar``) follow the same rule.

``SectionProgress`` counts a known list of sections (the evaluation suite's sections of each
encoder, the runs of a reproduction): the bar's total is the number of sections, its text
the one running; in a log, a line as each section starts and one with its seconds as it
ends. Reports go to stdout and files, never here: with or without progress they are the same.
"""

from __future__ import annotations

import contextlib
import sys
import time

from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

#: The commands' flag that turns progress off.
NO_PROGRESS_FLAG = "--no-progress"


def recorded_args(argv) -> list[str]:
    """``argv`` as a report records its command: without ``--no-progress``, which changes what
    is shown, not what is computed (the same run gives the same report either way)."""
    return [arg for arg in argv if arg != NO_PROGRESS_FLAG]


def _in_notebook_kernel() -> bool:
    """Whether this process is a running Jupyter kernel. Importing ``ipykernel`` is not enough
    (a test process or a library may import it), so this asks IPython, as ``tqdm.autonotebook``
    does, whether the running shell belongs to a kernel application."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # an IPython too old or half-imported: not a kernel we can draw in
        return False
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def interactive(stream=None) -> bool:
    """Whether progress may redraw: ``stream`` (default ``sys.stderr``) is a terminal, or this
    is a notebook kernel (``tqdm.auto`` draws a widget there)."""
    if _in_notebook_kernel():
        return True
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _redirect_logging(bar):
    """Sends console log records through ``tqdm.write`` while ``bar`` is drawn, so that a log line
    (a section's end, a data note) is printed above the bar instead of through it. Returns the
    context to exit when the bar closes."""
    redirect = logging_redirect_tqdm(tqdm_class=type(bar))
    redirect.__enter__()
    return redirect


class _Shown:
    """What both progress kinds share: the stream (``sys.stderr`` at each write unless one was
    given), the context-manager protocol, and the end of a drawn bar."""

    _file = None
    _bar = None

    @property
    def file(self):
        return sys.stderr if self._file is None else self._file

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _end_bar(self) -> bool:
        """Closes the drawn bar and its log redirect; whether there was one."""
        if self._bar is None:
            return False
        self._logging.__exit__(None, None, None)
        self._bar.close()
        self._bar = None
        return True


class SectionProgress(_Shown):
    """Progress over ``total`` named sections, run one after another.

    Use as a context manager; each section in ``with progress.section(name): ...``. A section
    that raises is not counted, and no end line is written for it (the error says why).

    Args:
      total: the sections that will run (the bar's total).
      desc: what runs them (``"evaluate"``, ``"reproduce vete"``), at the start of each line.
      enabled: False: nothing is shown (``--no-progress``).
      file: where to write (default ``sys.stderr`` at each write).
    """

    def __init__(self, total: int, desc: str, *, enabled: bool = True, file=None):
        self.total, self.desc, self.enabled, self._file = int(total), desc, bool(enabled), file
        self.done = 0
        self._bar = None
        if self.enabled and self.total > 0 and interactive(self.file):
            self._bar = tqdm(total=self.total, desc=desc, unit="section", file=self.file, leave=True,
                             dynamic_ncols=True)
            self._logging = _redirect_logging(self._bar)

    def close(self) -> None:
        self._end_bar()

    def _line(self, text: str) -> None:
        print(f"{self.desc} [{self.done + 1}/{self.total}] {text}", file=self.file, flush=True)

    @contextlib.contextmanager
    def section(self, name: str):
        """Runs the block as the next section ``name``."""
        if not self.enabled:
            yield
            return
        t = time.perf_counter()
        if self._bar is not None:
            self._bar.set_postfix_str(name)
        else:
            self._line(f"{name} ...")
        yield
        if self._bar is not None:
            self._bar.update(1)
        else:
            self._line(f"{name} done in {time.perf_counter() - t:.1f} s")
        self.done += 1

    def skip(self, name: str, why: str) -> None:
        """Counts the section ``name`` as done without running it (``why``: one phrase)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(1)
        else:
            self._line(f"{name} skipped: {why}")
        self.done += 1


class CountProgress(_Shown):
    """Progress over a count of items (sentences, photos, images), on stderr.

    The one rule of this module: a ``tqdm.auto`` bar in a terminal or a notebook; anywhere else
    a plain line as it starts, every ``every`` seconds and at the end, so that a log file holds
    no carriage returns, backspaces or colour codes (Keras' own bar writes all three whenever
    the platform is POSIX, a terminal or not, and on stdout).

    Use as a context manager, or call ``close``.

    Args:
      total: the items to come, or ``None`` when unknown (a generator).
      desc: what is counted, at the start of each line (``"encode"``).
      unit: the item's name (``"sentence"``), for the bar and the lines.
      enabled: False: nothing is shown.
      every: seconds between two plain lines.
      file: where to write (default ``sys.stderr`` at each write).

    Example:
      >>> import io
      >>> log = io.StringIO()
      >>> with CountProgress(3, "encode", "sentence", file=log) as progress:
      ...     progress.add(2)
      ...     progress.add(1)
      >>> print(log.getvalue(), end="")
      encode: 3 sentences ...
      encode: 3/3 sentences
    """

    def __init__(self, total: int | None, desc: str, unit: str = "item", *, enabled: bool = True,
                 every: float = 10.0, file=None):
        self.total, self.desc, self.unit, self._file = total, desc, unit, file
        self.enabled = bool(enabled) and total != 0
        self.done, self._every, self._bar = 0, float(every), None
        self._last = time.perf_counter()
        if not self.enabled:
            return
        if interactive(self.file):
            self._bar = tqdm(total=total, desc=desc, unit=unit, file=self.file, dynamic_ncols=True)
            self._logging = _redirect_logging(self._bar)
        else:
            count = f"{total} {unit}s" if total is not None else f"{unit}s"
            print(f"{desc}: {count} ...", file=self.file, flush=True)

    def add(self, n: int) -> None:
        """Counts ``n`` more items done."""
        self.done += int(n)
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(int(n))
            return
        finished = self.total is not None and self.done >= self.total
        if finished or time.perf_counter() - self._last >= self._every:
            self._last = time.perf_counter()
            of = f"/{self.total}" if self.total is not None else ""
            print(f"{self.desc}: {self.done}{of} {self.unit}s", file=self.file, flush=True)

    def close(self) -> None:
        """Ends the bar (a count of unknown total gets its last line here)."""
        if self._end_bar():
            return
        if self.enabled and self.total is None:
            print(f"{self.desc}: {self.done} {self.unit}s", file=self.file, flush=True)
            self.enabled = False
