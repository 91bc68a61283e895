"""Every module of the package stays small enough to read as one piece: at most 600 lines.

A module that grows past the cap is split by job (as ``training/run_dir.py`` was into its state,
fingerprint, lock and storage errors), not given an exception here."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "grounded_text"
MAX_ROOM_LINES = 600


def _line_count(path: Path) -> int:
    """Lines as ``wc -l`` counts them (a last line without a newline counts too)."""
    return len(path.read_text(encoding="utf-8").splitlines())


def oversized(package: Path = PACKAGE, limit: int = MAX_ROOM_LINES) -> dict[str, int]:
    """``{path relative to the package's parent: lines}`` of the modules over ``limit`` lines."""
    return {str(p.relative_to(package.parent)): n for p in sorted(package.rglob("*.py"))
            if (n := _line_count(p)) > limit}


def test_a_planted_long_module_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "sub" / "long.py").write_text("x = 1\n" * (MAX_ROOM_LINES + 1))
    (pkg / "short.py").write_text("x = 1\n" * MAX_ROOM_LINES)
    assert oversized(pkg) == {"pkg/sub/long.py": MAX_ROOM_LINES + 1}


def test_no_module_in_the_package_is_over_600_lines():
    assert oversized() == {}, f"split these by job (at most {MAX_ROOM_LINES} lines each)"
