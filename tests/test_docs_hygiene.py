"""User docs (README, docs/, export/, colab/) speak to a user: no absolute paths of the
development machines, no tracker numbers, no session or branch language.

Every Markdown file under those folders and every cell of the Colab notebooks is checked on its
own (one test per file), so a failure names the file, the line and the rule. Upstream references
in the ``owner/repo#N`` form (e.g. a TensorFlow or pytest-xdist issue) are allowed: they tell a
user where a workaround comes from.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# (what is wrong, pattern). Case-insensitive; each is matched line by line.
RULES: list[tuple[str, re.Pattern]] = [
    # /work/..., /root/..., /home/..., /tmp/...: folders of the machines the docs were written on.
    # A relative path that merely contains such a folder name (runs/tmp/x) is not flagged.
    ("absolute path of a development machine", re.compile(r"(?<![\w.~$}/-])/(?:work|root|home|tmp)/", re.I)),
    # "issue" and a number: "issue N", "(issue N)", "issueN_run", "issueN-models", "issues N and M", "issue #N"
    ("tracker issue number", re.compile(r"(?<![A-Za-z])issues?[ _-]?#?\d+", re.I)),
    ("tracker reference in the issue's words", re.compile(r"\b(?:the|this|that) issue's\b", re.I)),
    ("task number", re.compile(r"\btasks?[ _-]?#?\d+", re.I)),
    # "#12" alone is our tracker; "tensorflow/tensorflow#72388" (owner/repo#N) is upstream and allowed.
    ("tracker reference #N (write owner/repo#N for upstream ones)", re.compile(r"(?<![\w/#&])#\d+\b")),
    ("session language", re.compile(r"\b(?:this|that|our|my|the previous|an earlier|a later) session\b", re.I)),
    ("session language", re.compile(r"\bthis task\b|\bthe lead\b|\bdevice tool\b", re.I)),
    ("stop number", re.compile(r"\bstop[ _-]?\d+\b", re.I)),
    ("branch name", re.compile(r"\b(?:on|this|that|our|my|feature|git|development|dev)\s+branch(?:es)?\b", re.I)),
    ("branch name", re.compile(r"\bbranch(?:es)?\s+(?:[`'\"]|named\b|called\b)", re.I)),
]


def violations(text: str) -> list[tuple[int, str, str]]:
    """``[(line number, rule, line)]`` for every rule a line breaks (1-based line numbers)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for what, pattern in RULES:
            if pattern.search(line):
                out.append((n, what, line.strip()))
    return out


def notebook_text(path: Path) -> list[tuple[str, str]]:
    """``[(cell label, source)]`` of every cell, markdown and code."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(f"cell {i} ({c['cell_type']})", "".join(c["source"]) if isinstance(c["source"], list) else c["source"])
            for i, c in enumerate(cells)]


def user_doc_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "CHANGELOG.md"]
    for folder in ("docs", "export", "colab"):
        files += sorted((REPO / folder).rglob("*.md")) + sorted((REPO / folder).rglob("*.ipynb"))
    return [f for f in files if f.is_file() and ".ipynb_checkpoints" not in f.parts]


def _report(path: Path) -> list[str]:
    rel = path.relative_to(REPO).as_posix()
    if path.suffix == ".ipynb":
        return [f"{rel} {label} line {n}: {what}: {line}" for label, text in notebook_text(path)
                for n, what, line in violations(text)]
    return [f"{rel}:{n}: {what}: {line}" for n, what, line in violations(path.read_text(encoding="utf-8"))]


# Built from parts so that this file passes tests/test_hygiene.py's own issue-number check.
_ISSUE = "issue"

BAD = [
    "python -m grounded_text.train --output-dir /tmp/x",
    "--data-dir /work/shared/data",
    "see /home/user/runs and /root/.cache/x",
    f"Performance ({_ISSUE} 7)",
    f"vete_bow ({_ISSUE}3_run)",
    f"Measured on branch `{_ISSUE}9-models`",
    f"as the {_ISSUE}'s earlier figure said",
    "fixed in #12",
    "no GPU was available to this session",
    "see stop 21",
    "done in task 4",
    "the lead re-measures",
]
GOOD = [
    "python -m grounded_text.train --data-dir $GROUNDED_TEXT_DATA --output-dir runs/vete_bow",
    "worked around (tensorflow/tensorflow#72388), see pytest-dev/pytest-xdist#1386",
    "the affine image branch; the two-branch network; no training branch in the graph",
    "keeps it across sessions; a disconnected session resumes",
    "runs/tmp/x and ~/grounded_data and /content/data and /usr/bin/time and /proc/cpuinfo",
    "## 1. Install", "# 1 or 10 (ten-crop average)", "colour #1f77b4",
    "the SentEval transfer tasks; MR, CR, SUBJ",
]


@pytest.mark.parametrize("line", BAD)
def test_the_rules_catch_internal_references(line):
    assert violations(line), line


@pytest.mark.parametrize("line", GOOD)
def test_the_rules_let_user_text_through(line):
    assert violations(line) == [], violations(line)


def test_notebook_cells_are_scanned(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "source": ["ok\n", "see /work/runs\n"]},
                    {"cell_type": "code", "source": "x = 1  # ok"}], "metadata": {}, "nbformat": 4}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert [label for label, text in notebook_text(path) if violations(text)] == ["cell 0 (markdown)"]


def test_every_user_doc_folder_is_scanned():
    names = {p.relative_to(REPO).as_posix() for p in user_doc_files()}
    assert {"README.md", "export/README.md", "colab/README.md", "colab/grounded_text_colab.ipynb"} <= names
    assert any(n.startswith("docs/") for n in names)


@pytest.mark.parametrize("path", user_doc_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_user_docs_name_no_internal_paths_issues_or_branches(path):
    found = _report(path)
    assert found == [], "\n".join(found)


def test_the_changelog_opens_with_this_version_and_dates_each_removal():
    import grounded_text

    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", text, re.M)
    assert versions and versions[0] == grounded_text.__version__, versions
    # Each name this release deprecates says the release that removes it, a later one.
    latest = re.split(r"^## \[", text, flags=re.M)[1]
    for section in re.findall(r"^### Deprecated\n(.*?)(?=^##|\Z)", latest, re.M | re.S):
        for item in re.split(r"^- ", section, flags=re.M)[1:]:
            removal = re.search(r"removed in (\d+)\.(\d+)\.(\d+)", item)
            assert removal, item
            current = tuple(int(x) for x in grounded_text.__version__.split("."))
            assert tuple(int(x) for x in removal.groups()) > current, item
