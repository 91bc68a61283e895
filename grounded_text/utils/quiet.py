"""Quiet by default: TensorFlow's C++ start-up lines and the ``pkg_resources`` warning are left out.

On a machine without a GPU (or without its driver) importing TensorFlow prints lines such as
``failed call to cuInit``, ``Could not find cuda drivers``, ``All log messages before
absl::InitializeLog() ...`` and CPU-instruction notices, and ``tensorflow_hub`` warns that
``pkg_resources is deprecated``: none of them is actionable. ``quiet_startup`` (run by ``import
grounded_text``) hides them:

* ``TF_CPP_MIN_LOG_LEVEL=3`` (only when unset and TensorFlow is not imported yet): TensorFlow's
  own C++ log lines, including ``cuInit``, are not printed;
* the lines the C++ runtime prints while ``tensorflow`` is imported, before its logging reads
  that variable, are filtered out of the process's stderr (file descriptor 2) during that import
  only; any other line written meanwhile is passed on unchanged;
* the ``pkg_resources is deprecated`` warning is ignored.

The same goes for two log records of TensorFlow's SavedModel writer that name internal steps,
not results (``demote_internal_logs``): ``Assets written to: <the export's staging folder>`` and
absl's ``Function `serve` contains input name(s) ... with unsupported characters`` (the names
of captured lookup tables, which TensorFlow renames; the export's own input is ``sentences``).
They are logged at DEBUG instead of INFO.

The commands also print each warning as one line, ``warning: <message>``, without the source
line Python echoes under it or the file's absolute path, and through ``tqdm.write`` so that a
progress bar on the terminal stays whole (``one_line_warnings``). In a program that imports the
package (the Python API, a notebook), the package's own warnings (``GroundedTextWarning``) are
printed as that one line too (``one_line_package_warnings``); other packages' warnings keep the
program's format.

``GROUNDED_TEXT_VERBOSE=1`` (or ``grounded-text --verbose ...``) keeps everything.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import logging
import os
import re
import sys
import tempfile
import warnings

import wrapt

VERBOSE_ENV = "GROUNDED_TEXT_VERBOSE"
_set_log_level = False  # whether quiet_startup set TF_CPP_MIN_LOG_LEVEL (keep_startup_messages undoes only that)

#: C++ start-up lines of TensorFlow / XLA / absl that say nothing a user can act on.
NOISE = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called"
    r"|cudart_stub\.cc|Could not find cuda drivers"
    r"|cpu_feature_guard\.cc|This TensorFlow binary is optimized|To enable the following instructions"
    r"|failed call to cuInit|cuda_platform\.cc|cuda_executor\.cc"
    r"|Unable to register cu(?:DNN|FFT|BLAS) factory|computation placer already registered"
    r"|oneDNN custom operations are on|TF-TRT Warning")


def verbose() -> bool:
    """Whether ``GROUNDED_TEXT_VERBOSE`` asks for everything."""
    return os.environ.get(VERBOSE_ENV, "").strip() not in ("", "0")


@contextlib.contextmanager
def filtered_stderr(pattern: re.Pattern = NOISE):
    """Runs the block with file descriptor 2 going to a temporary file, then writes its lines that
    do not match ``pattern`` to the real stderr (also when the block raises)."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 at all
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = [line for line in tmp.read().splitlines(keepends=True)
                    if not pattern.search(line.decode("utf-8", "replace"))]
            if kept:
                os.write(2, b"".join(kept))


class _Loader(importlib.abc.Loader):
    """Delegates to TensorFlow's own loader, running its module code inside ``filtered_stderr``."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        # TensorFlow is being imported: the finder's work is done, whatever happens next.
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _QuietTensorFlowImport)]
        with filtered_stderr():
            self.loader.exec_module(module)

    def __getattr__(self, name):  # get_resource_reader, is_package, ... of the real loader
        return getattr(self.loader, name)


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Finds ``tensorflow`` as the other finders do, and wraps its loader; it leaves
    ``sys.meta_path`` once TensorFlow's code runs. A mere look-up (``importlib.util.find_spec``, as
    transformers and sentence-transformers probe for TensorFlow) gets the same spec and keeps it."""

    def __init__(self):
        self.busy = False  # inside its own look-up, which asks every finder again (this one included)

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow" or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader)
        return spec


#: Log records of TensorFlow's SavedModel writer that name internal steps: DEBUG, not INFO.
INTERNAL_LOGS = re.compile(r"^Assets written to: "
                           r"|^Function `\w+` contains input name\(s\) .* with unsupported characters")


class _DemoteInternal(logging.Filter):
    """Lowers the records ``INTERNAL_LOGS`` matches to DEBUG: kept only where DEBUG is logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the handler's business, not ours
            return True
        if record.levelno > logging.INFO or not INTERNAL_LOGS.search(message):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def _add_demotion(logger_name: str) -> None:
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, _DemoteInternal) for f in logger.filters):
        logger.addFilter(_DemoteInternal())


def demote_internal_logs() -> None:
    """Logs ``INTERNAL_LOGS``'s records (TensorFlow's ``tensorflow`` and ``absl`` loggers) at
    DEBUG. Idempotent; imports neither: absl's logger gets its filter once absl.logging is
    imported (absl must create that logger itself, of its own class)."""
    _add_demotion("tensorflow")
    if "absl.logging" in sys.modules:
        _add_demotion("absl")
    else:
        wrapt.register_post_import_hook(lambda _module: _add_demotion("absl"), "absl.logging")


def _recording() -> bool:
    """Whether a ``warnings.catch_warnings(record=True)`` block (pytest's, ``pytest.warns``) is
    collecting warnings now: they are its, not the console's."""
    impl = getattr(warnings, "_showwarnmsg_impl", None)
    return impl is not None and not (getattr(impl, "__module__", None) == "warnings"
                                     and getattr(impl, "__name__", None) == "_showwarnmsg_impl")


class GroundedTextWarning(UserWarning):
    """A warning of this package (a ``UserWarning``): printed as one line, ``warning: <message>``,
    once the package is imported (``warnings.filterwarnings("ignore", category=...)`` silences them).

    Example:
      >>> issubclass(GroundedTextWarning, UserWarning)
      True
    """


def format_warning(message, category) -> str:
    """The one line a command prints for a warning.

    Example:
      >>> format_warning(UserWarning("STS13: skipping subset 'SMT'."), UserWarning)
      "warning: STS13: skipping subset 'SMT'."
      >>> format_warning(RuntimeWarning("overflow"), RuntimeWarning)
      'warning: RuntimeWarning: overflow'
    """
    text = " ".join(str(message).split("\n"))
    plain = category is UserWarning or category is GroundedTextWarning
    return f"warning: {text}" if plain else f"warning: {category.__name__}: {text}"


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if _recording():
        warnings._showwarnmsg_impl(warnings.WarningMessage(message, category, filename, lineno, file, line))
        return
    target = sys.stderr if file is None else file
    # A progress bar exists only once tqdm is loaded: without it, there is none to clear.
    tqdm = sys.modules.get("tqdm")
    try:
        if tqdm is None:
            target.write(format_warning(message, category) + "\n")
        else:
            tqdm.tqdm.write(format_warning(message, category), file=target)  # clears and redraws any bar
    except Exception:  # no stream to write to: a warning is never worth a crash
        with contextlib.suppress(Exception):
            target.write(format_warning(message, category) + "\n")


@contextlib.contextmanager
def one_line_warnings():
    """Runs the block with warnings printed as one line each (``format_warning``): no echoed
    source line, no absolute path, written with ``tqdm.write`` so that bars stay whole. A
    ``catch_warnings(record=True)`` inside the block still records them. Kept as Python prints
    them when ``GROUNDED_TEXT_VERBOSE`` is set."""
    if verbose():
        yield
        return
    saved = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        yield
    finally:
        warnings.showwarning = saved


def one_line_package_warnings() -> None:
    """Formats this package's warnings (``GroundedTextWarning``) as ``format_warning``'s one line
    wherever Python prints them (its own ``showwarning``, ``logging.captureWarnings``, a notebook),
    and hands every other warning to the formatter that was there. Idempotent."""
    previous = warnings.formatwarning
    if getattr(previous, "_grounded_text", False):
        return

    def formatwarning(message, category, filename, lineno, line=None):
        if isinstance(category, type) and issubclass(category, GroundedTextWarning):
            return format_warning(message, category) + "\n"
        return previous(message, category, filename, lineno, line)

    formatwarning._grounded_text = True
    warnings.formatwarning = formatwarning


def quiet_startup() -> None:
    """Hides TensorFlow's start-up noise and the ``pkg_resources`` warning for this process,
    unless ``GROUNDED_TEXT_VERBOSE`` is set (see the module docstring). Idempotent."""
    if verbose():
        return
    demote_internal_logs()
    one_line_package_warnings()
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    if "tensorflow" in sys.modules:
        return
    global _set_log_level
    if "TF_CPP_MIN_LOG_LEVEL" not in os.environ:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        _set_log_level = True
    if not any(isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowImport())


def keep_startup_messages() -> None:
    """Undoes ``quiet_startup`` before TensorFlow is imported (``--verbose``)."""
    os.environ[VERBOSE_ENV] = "1"
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _QuietTensorFlowImport)]
    global _set_log_level
    if _set_log_level and "tensorflow" not in sys.modules:
        os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        _set_log_level = False
    warnings.filterwarnings("default", message="pkg_resources is deprecated", category=UserWarning)
