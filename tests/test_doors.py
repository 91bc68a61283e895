"""The package's shape: the top-level command modules ("doors") parse their flags and call the
library, and no library module ("room", any module in a subfolder) leans on a door."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import grounded_text

PACKAGE = Path(__file__).resolve().parent.parent / "grounded_text"
MAX_DOOR_LINES = 200
#: The library's face and the package's entry, not commands.
NOT_DOORS = {"api.py", "__init__.py"}
#: Doors still being thinned; empty this once they are.
NOT_YET_THIN: set[str] = set()
DOORS = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in NOT_DOORS)
DOOR_MODULES = {f"grounded_text.{name[:-3]}" for name in DOORS}


def _imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` or ``from ... import`` of ``path`` names, at any depth (inside
    functions too); ``from grounded_text import X`` names ``grounded_text.X`` as well, unless X is
    one of the API's functions (``grounded_text.train``, ``.evaluate``), which that import gives."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against the module's own package
                base = ".".join(parts[:len(parts) - node.level])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names
                         if module != "grounded_text" or alias.name not in grounded_text._API)
    return names


@pytest.mark.parametrize("name", DOORS)
def test_door_is_thin(name):
    if name in NOT_YET_THIN:
        pytest.skip(f"{name} is still being thinned")
    lines = len((PACKAGE / name).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_DOOR_LINES, (f"grounded_text/{name} has {lines} lines (at most {MAX_DOOR_LINES}): move "
                                     "what is not flag parsing into the library")


def test_doors_found():
    assert {"train.py", "evaluate.py", "cli.py"} <= set(DOORS)


def test_no_room_imports_a_door():
    rooms = sorted(p for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE)
    assert rooms
    leaning = {str(p.relative_to(PACKAGE.parent)): sorted(_imported_modules(p) & DOOR_MODULES) for p in rooms}
    assert not {k: v for k, v in leaning.items() if v}, "library modules import a command module"
