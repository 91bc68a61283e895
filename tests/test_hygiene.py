"""Codebase hygiene that a refactor could silently undo: no import cycles inside the
package, and comments that give reasons rather than issue numbers."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "grounded_text"


def _module_name(path: Path, repo: Path = REPO) -> str:
    name = ".".join(path.relative_to(repo).with_suffix("").parts)
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: package modules it imports}``, function-level imports included (a lazy
    import still ties the two modules together)."""
    paths = {_module_name(p, package.parent): p for p in package.rglob("*.py")}
    graph = {m: set() for m in paths}
    for mod, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module in paths:
                    graph[mod].add(node.module)
                graph[mod].update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in paths)
            elif isinstance(node, ast.Import):
                graph[mod].update(a.name for a in node.names if a.name in paths)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the components with more than one module (the cycles)."""
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package():
    graph = import_graph()
    assert "grounded_text.data.pairs" in graph and graph["grounded_text.data.pairs"]
    assert strongly_connected(graph) == []


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed to the package's top-level units: each folder (``pkg.data``,
    with everything below it) and each top-level module (the commands and faces)."""
    def unit(module: str) -> str:
        return ".".join(module.split(".")[:2])

    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        out.setdefault(unit(module), set()).update(unit(d) for d in deps if unit(d) != unit(module))
    for deps in list(out.values()):
        for d in deps:
            out.setdefault(d, set())
    return out


def test_a_planted_folder_cycle_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    for folder in ("vision", "data"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "vision" / "sinks.py").write_text("from pkg.data.readers import read\n")
    (pkg / "data" / "readers.py").write_text("def read():\n    from pkg.vision.networks import NAMES\n")
    (pkg / "vision" / "networks.py").write_text("NAMES = ()\n")
    graph = import_graph(pkg)
    assert strongly_connected(graph) == []  # no module-level cycle ...
    assert strongly_connected(folder_graph(graph)) == [["pkg.data", "pkg.vision"]]  # ... but a folder-level one


def test_no_import_cycle_between_the_package_folders():
    """Folders are layers (utils < config < papers < the library < training < experiments <
    the commands): a folder that reaches back up makes two folders one."""
    assert strongly_connected(folder_graph(import_graph())) == []


def test_no_function_in_the_package_is_over_100_lines():
    long = [f"{p.relative_to(REPO)}:{node.name}" for p in PACKAGE.rglob("*.py")
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 100]
    assert long == []


def test_comments_give_reasons_not_issue_numbers():
    pattern = re.compile(r"\bissue\s+[0-9]+", re.IGNORECASE)
    files = [*PACKAGE.rglob("*.py"), REPO / "setup.cfg", *(REPO / "tests").rglob("*.py")]
    hits = [f"{p.relative_to(REPO)}:{n}" for p in files if p.is_file()
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert hits == []


@pytest.mark.xdist_group("hygiene")
def test_xdist_loadgroup_keeps_marked_tests_together(request):
    # Tests that share a module-scoped fixture (a trained run, an export, a wheel) carry an
    # xdist_group mark so that one worker builds it once. pytest 9.2 with pytest-xdist 3.8 drops
    # the group silently (pytest-dev/pytest-xdist#1386) and each fixture is built once per worker.
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not running under pytest-xdist --dist loadgroup")
    assert request.node.nodeid.endswith("@hygiene"), (
        f"{request.node.nodeid}: --dist loadgroup is not grouping with pytest {pytest.__version__}; install the "
        "versions of constraints.txt")


def test_the_commands_and_faces_import_no_tensorflow():
    """The doors at the top import only TensorFlow-free code at module level (their ``main``
    imports the library), so ``--help`` and argument errors answer at once."""
    import subprocess

    doors = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    code = ("import sys\n" + "".join(f"import grounded_text.{d}\n" for d in doors)
            + "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))\n"
              "print(heavy[:5])\nraise SystemExit(1 if heavy else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(doors) <= 12, doors  # __init__, api, cli and the commands: nothing else on top
