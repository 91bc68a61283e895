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

``GROUNDED_TEXT_VERBOSE=1`` (or ``grounded-text --verbose ...``) keeps everything.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile
import warnings

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
        with filtered_stderr():
            self.loader.exec_module(module)

    def __getattr__(self, name):  # get_resource_reader, is_package, ... of the real loader
        return getattr(self.loader, name)


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Finds ``tensorflow`` once, as the other finders do, and wraps its loader."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)  # once: later lookups go straight to the real finders
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader)
        return spec


def quiet_startup() -> None:
    """Hides TensorFlow's start-up noise and the ``pkg_resources`` warning for this process,
    unless ``GROUNDED_TEXT_VERBOSE`` is set (see the module docstring). Idempotent."""
    if verbose():
        return
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
