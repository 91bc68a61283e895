"""The ``Example:`` sections of the public docstrings run, and every public class and function
of the covered modules has one.

Examples run with ``doctest`` (``ELLIPSIS | NORMALIZE_WHITESPACE``) in the module's namespace;
lines that need data or a trained model are marked ``# doctest: +SKIP`` and are read, not run.
Add a module to ``MODULES`` once each of its public classes and functions has an example.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import re
import types
from pathlib import Path

import pytest

import grounded_text

MODULES = [
    "grounded_text.serving.encoder",
    "grounded_text.serving.loader",
    "grounded_text.serving.quantize",
    "grounded_text.utils.similarity",
    "grounded_text.photos.index",
    "grounded_text.photos.names",
    "grounded_text.photos.queries",
    "grounded_text.photos.sentences",
    "grounded_text.api",
    "grounded_text.evaluation.retrieval",
    "grounded_text.evaluation.sts",
    "grounded_text.layers.bow_encoder",
    "grounded_text.layers.branches",
    "grounded_text.layers.char_encoder",
    "grounded_text.layers.cnn_encoder",
    "grounded_text.layers.fused_rnn",
    "grounded_text.layers.hub_text_embedding",
    "grounded_text.layers.language_model",
    "grounded_text.layers.pooling",
    "grounded_text.layers.backbone_encoder",
    "grounded_text.layers.rnn_encoder",
    "grounded_text.layers.text_preprocessor",
    "grounded_text.layers.word_vectors",
    "grounded_text.losses.baselines",
    "grounded_text.losses.common",
    "grounded_text.losses.correlation",
    "grounded_text.losses.grounding",
    "grounded_text.losses.ranking",
]

# Modules to move into MODULES once their docstrings carry examples.
PENDING: list[str] = []

OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
EXAMPLE_SECTION = re.compile(r"^\s*Examples?:\s*$", re.MULTILINE)


def run_doctests(module: types.ModuleType) -> tuple[doctest.TestResults, str]:
    """Runs every docstring example of ``module`` (and of the classes, methods and functions
    defined in it); returns the results and the runner's report of the failures."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    report: list[str] = []
    for test in finder.find(module, module.__name__):
        runner.run(test, out=report.append)
    return runner.summarize(verbose=False), "".join(report)


def public_objects(module: types.ModuleType) -> dict[str, object]:
    """The classes and functions defined in ``module`` (not imported) whose names do not
    start with ``_``."""
    return {name: obj for name, obj in vars(module).items()
            if not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj))
            and obj.__module__ == module.__name__}


def missing_examples(module: types.ModuleType) -> list[str]:
    return sorted(name for name, obj in public_objects(module).items()
                  if not EXAMPLE_SECTION.search(inspect.getdoc(obj) or ""))


def modules_with_examples(root: Path | None = None, package: str = "grounded_text") -> list[str]:
    """Every module under ``root`` (the package's folder) whose source holds a ``>>>`` line, by
    dotted name: the ones outside ``MODULES`` have examples too, and those must run even before
    the module documents every public object."""
    root = Path(root or Path(grounded_text.__file__).parent)
    names = []
    for path in sorted(root.rglob("*.py")):
        if not re.search(r"^\s*>>> ", path.read_text(encoding="utf-8"), re.MULTILINE):
            continue
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_the_package_walk_finds_modules_outside_the_list(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text('"""\n  >>> 1 + 1\n  2\n"""\n')
    (tmp_path / "sub" / "plain.py").write_text('"""No example; the text >>> in prose is not one."""\n')
    (tmp_path / "top.py").write_text('def f():\n    """\n    >>> f()\n    """\n')
    assert modules_with_examples(tmp_path, "pkg") == ["pkg.sub", "pkg.top"]
    found = modules_with_examples()
    assert set(MODULES) <= set(found) and "grounded_text.experiments.arms" in found


# Also the modules outside MODULES whose source has examples: those run before the module
# documents every public object.
@pytest.mark.parametrize("name", sorted(set(MODULES) | set(modules_with_examples())))
def test_docstring_examples_run(name):
    results, report = run_doctests(importlib.import_module(name))
    assert results.attempted > 0, f"{name}: its >>> lines were not found by doctest"
    assert results.failed == 0, f"{name}: {results.failed} of {results.attempted} examples failed\n{report}"


@pytest.mark.parametrize("name", MODULES)
def test_every_public_class_and_function_has_an_example(name):
    module = importlib.import_module(name)
    assert public_objects(module), f"{name} defines no public class or function"
    assert missing_examples(module) == [], f"{name}: no `Example:` section in these docstrings"


def _planted_module() -> types.ModuleType:
    module = types.ModuleType("planted_docstring_examples")
    source = '''
def double(x):
    """Twice ``x``.

    Example:
      >>> double(2)
      5
    """
    return 2 * x


def undocumented(x):
    """No example here."""
    return x
'''
    exec(compile(source, module.__name__, "exec"), module.__dict__)
    for obj in vars(module).values():
        if inspect.isfunction(obj):
            obj.__module__ = module.__name__
    return module


def test_a_wrong_example_and_a_missing_one_are_reported():
    module = _planted_module()
    results, report = run_doctests(module)
    assert results == (1, 1)
    assert "double(2)" in report and "Expected:\n    5\nGot:\n    4" in report
    assert missing_examples(module) == ["undocumented"]
