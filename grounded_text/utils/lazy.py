"""Lazy package namespaces (PEP 562): a package's names load their module on first use.

The command lines answer ``--help`` and flag errors before TensorFlow is imported, so a
package ``__init__`` whose modules import TensorFlow must not import them eagerly.
"""

from __future__ import annotations

import importlib


def lazy_getattr(package: str, exports: dict[str, str]):
    """A module-level ``__getattr__`` for ``package``.

    Args:
      package: the package's ``__name__``.
      exports: ``{name: submodule}``: ``package.name`` is ``package.submodule.name``.

    Returns:
      ``__getattr__(name)``: an exported name from its submodule, else the submodule
      ``package.name`` itself (what eager imports used to load as a side effect).

    Raises (when called):
      AttributeError: neither an exported name nor a submodule.
    """

    def __getattr__(name: str):
        if name in exports:
            return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{package}.{name}":
                raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
