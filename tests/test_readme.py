"""The README reads top-down, and every figure it prints is one the docs' tables print.

**Start.** Within its first 50 lines the README says how to get the code and build a wheel, and
gives the install command, a first encode with a shipped model, a first photo search and one
training command.

**Set-up.** The README's install line installs what its test line needs, and CI runs both as they
are written: ``.ci/run`` reads them from the README's ``<!-- install`` and ``<!-- test`` markers
(``.ci/readme_command``), so the two cannot drift apart.

**Figures.** A figure of the README is checked when it is, outside code:

- a decimal number (``0.761``, ``14.8``, ``−0.005``, ``1.1`` of "1.1 GB"): it must be printed, as
  the README prints it, in a row of a Markdown table (a line that starts with ``|``) of some
  ``docs/*.md`` file. A sign is part of the figure; ``−`` (U+2212) and ``-`` are the same sign, a
  leading ``+`` is dropped;
- a percentage (``52%``, ``3.5 %``): the same, spaces before ``%`` ignored;
- an interval ``[a, b]`` (``[0.729, 0.789]``): the whole interval must be printed in one table
  row of ``docs/``, spaces after the comma ignored.

Not checked, by rule:

- code: fenced blocks and inline code spans (commands, flags such as ``--epochs 20``, file and
  model names, snippets' comments), which are not figures;
- version numbers: any number with two or more dots (``2.21.1``), and numbers after a version
  word (``Python``, ``TensorFlow``, ``Keras``, ``tensorflow-text``, ``tf-keras``,
  ``tensorboard``, ``mteb``, ``version``), with the list that follows it (``Python 3.11 to
  3.13``, ``2.20 or 2.21``);
- whole numbers without ``%``: counts and sizes in prose (``2 CPU cores``, ``1,024-d``, ``n =
  512``, ``20 epochs``), years and dates (``2019``, ``2026-11-22``) and names (``STS12``,
  ``R@10``);
- section numbers of a paper (``§4.1``).

So a figure moved into the README from a measurement must come with a docs table that holds it,
and a figure changed in the docs tables but not in the README (or the other way) fails here.
"""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.S | re.M)
_INLINE = re.compile(r"`[^`\n]*`")
_NUM = r"\d+(?:\.\d+)+"
_VERSION_WORDS = r"(?:Python|TensorFlow|Keras|tensorflow-text|tf-keras|tensorboard|mteb|version)"
_JOIN = r"(?:\s*,\s*|\s+or\s+|\s+and\s+|\s+to\s+|\s*[–-]\s*)"
_VERSION = re.compile(rf"\b{_VERSION_WORDS}\s+(?:>=\s*|==\s*)?{_NUM}(?:{_JOIN}{_NUM})*", re.I)
_DOTTED = re.compile(r"(?<![\w.])\d+(?:\.\d+){2,}(?![\w.])")
_SECTION = re.compile(r"§\s*\d+(?:\.\d+)*")
_INTERVAL = re.compile(r"\[\s*([+−-]?\d+(?:\.\d+)?)\s*,\s*([+−-]?\d+(?:\.\d+)?)\s*\]")
_PERCENT = re.compile(r"(?<![\w.])[+−-]?\d+(?:\.\d+)?\s*%")
_DECIMAL = re.compile(r"(?<![\w.])[+−-]?\d+\.\d+(?![\w%]|\.\d|\s*%)")


def _norm(figure: str) -> str:
    figure = re.sub(r"\s+", "", figure).replace("−", "-").replace(",", ", ")
    return figure[1:] if figure.startswith("+") else figure


def prose(markdown: str) -> str:
    """The text that can hold figures: code blocks, inline code, version and section numbers
    removed."""
    text = _FENCE.sub("", markdown)
    text = _INLINE.sub("", text)
    text = _VERSION.sub("", text)
    text = _SECTION.sub("", text)
    return _DOTTED.sub("", text)


def figures(markdown: str) -> list[str]:
    """The README's checked figures, normalised (see the module docstring), in order."""
    text = prose(markdown)
    out = [_norm(f"[{a}, {b}]") for a, b in _INTERVAL.findall(text)]
    text = _INTERVAL.sub(" ", text)
    out += [_norm(m.group()) for m in _PERCENT.finditer(text)]
    out += [_norm(m.group()) for m in _DECIMAL.finditer(text)]
    return out


def table_rows(folder: Path = REPO / "docs") -> list[str]:
    """Every Markdown table row (a line starting with ``|``) of ``folder/*.md``."""
    return [line for path in sorted(folder.glob("*.md"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.lstrip().startswith("|")]


def _norm_row(row: str) -> str:
    """A table row written as figures are normalised: ``-`` signs, no space before ``%``,
    intervals as ``[a, b]``."""
    row = re.sub(r"\s+%", "%", row.replace("−", "-"))
    return re.sub(r"\[\s*([^,\]]+?)\s*,\s*([^\]]+?)\s*\]", r"[\1, \2]", row)


def _found(figure: str, rows: list[str]) -> bool:
    if figure.startswith("["):
        return any(figure in row for row in rows)
    # the same digits, not part of a longer number, with the same sign (none: not after a "-")
    before = r"(?<![\d.])-" if figure.startswith("-") else r"(?<![\d.-])"
    pattern = re.compile(before + re.escape(figure.lstrip("-")) + r"(?!\d|\.\d)")
    return any(pattern.search(row) for row in rows)


def missing_figures(markdown: str, rows: list[str]) -> list[str]:
    """The figures of ``markdown`` that no row of ``rows`` prints."""
    rows = [_norm_row(row) for row in rows]
    return [f for f in dict.fromkeys(figures(markdown)) if not _found(f, rows)]


# ----------------------------------------------------------------------------- the rule itself

ROWS = ["| vete | 0.761 [0.729, 0.789] | 52 % | −0.005 | 14.8 / 40.5 |", "| size | about 1.1 GB |"]


@pytest.mark.parametrize("text, want", [
    ("STS-B 0.761 and R@10 14.8", ["0.761", "14.8"]),
    ("an interval [0.729,0.789] and 52%", ["[0.729, 0.789]", "52%"]),
    ("a loss of −0.005, a gain of +0.018", ["-0.005", "0.018"]),
    ("Python 3.11 to 3.13, TensorFlow 2.20 or 2.21, keras 3.15.1", []),
    ("`--clip-norm-text 51.2` and\n```bash\ngrounded-text x --lr 0.3\n```\n", []),
    ("2 CPU cores, 20 epochs, n = 1,024, 2026-11-22, STS12, R@10, VETE §4.1, 1.1 GB", ["1.1"]),
])
def test_the_figures_of_a_text(text, want):
    assert figures(text) == want


def test_a_figure_no_docs_table_prints_is_caught():
    assert missing_figures("MSRvid 0.761 [0.729, 0.789], 52 %, −0.005, 1.1 GB", ROWS) == []
    # a planted figure, a changed digit, a changed interval, a wrong sign, a prefix of a figure
    text = "0.7612 and 0.762 and [0.729, 0.788] and 0.005 and 14.8 and 4.8"
    assert sorted(missing_figures(text, ROWS)) == sorted(["0.7612", "0.762", "[0.729, 0.788]", "0.005", "4.8"])


def test_only_table_rows_of_the_docs_count(tmp_path):
    (tmp_path / "a.md").write_text("The figure 0.5 in a sentence.\n\n| x | 0.6 |\n|---|---:|\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("| 0.7 |\n", encoding="utf-8")
    rows = table_rows(tmp_path)
    assert missing_figures("0.5, 0.6 and 0.7", rows) == ["0.5", "0.7"]


# ----------------------------------------------------------------------------- the README


def test_every_readme_figure_is_printed_in_a_docs_table():
    text = README.read_text(encoding="utf-8")
    found = figures(text)
    assert len(found) >= 20, found  # the results tables are read: the check is not empty
    missing = missing_figures(text, table_rows())
    assert missing == [], f"README figures that no docs/*.md table row prints: {missing}"


def test_the_readme_starts_with_install_encode_search_and_train():
    first = "\n".join(README.read_text(encoding="utf-8").splitlines()[:50])
    for what, needle in (("the code", "git clone"), ("install", "pip install"), ("a wheel", "pip wheel"),
                         ("first encode", 'gt.load("vete_bow_flickr8k")'),
                         ("encode", ".encode("), ("photos", ".encode_images("),
                         ("photo search", "grounded-text search --model vete_bow_flickr8k"),
                         ("training", "grounded-text train --data-dir")):
        assert needle in first, f"the README's first 50 lines have no {what} ({needle!r})"
    # and says which of "preset" and "shipped model" is which
    assert "gt.presets()" in first and "gt.models()" in first


# ----------------------------------------------------------------------------- the set-up CI runs

CI_RUN = REPO / ".ci" / "run"
README_COMMAND = REPO / ".ci" / "readme_command"


def marked_line(markdown: str, name: str) -> str:
    """The one line of the fenced block right after ``<!-- name`` (``<!-- name -->`` or
    ``<!-- name: a comment -->``), as ``.ci/readme_command`` reads it.

    Raises:
      AssertionError: no such marker, or its block is not one line.
    """
    m = re.search(rf"^<!-- {re.escape(name)}[: ][^\n]*\n(?:[ \t]*\n)*```[^\n]*\n(.*?)^```", markdown, re.S | re.M)
    assert m, f"README.md has no fenced block after a '<!-- {name}' marker"
    lines = m.group(1).splitlines()
    assert len(lines) == 1, f"the '{name}' block holds {len(lines)} lines, not one: {lines}"
    return lines[0]


def test_the_install_line_installs_what_the_test_line_needs():
    text = README.read_text(encoding="utf-8")
    install, tests = marked_line(text, "install"), marked_line(text, "test")
    assert tests == "python -m pytest -q"
    assert re.search(r"""pip install .*-e ["']?\.\[test\]["']?$""", install), install
    # the test extra holds pytest (and, through [all], every extra the suite imports)
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg", encoding="utf-8")
    test_extra = [line.strip() for line in cfg["options.extras_require"]["test"].splitlines()]
    assert any(re.match(r"pytest\b(?!-)", line) for line in test_extra), test_extra
    assert "grounded_text[all]" in test_extra


@pytest.mark.skipif(shutil.which("bash") is None, reason="CI's scripts are bash")
def test_ci_runs_the_readmes_own_install_and_test_lines():
    text = README.read_text(encoding="utf-8")
    for name in ("install", "test"):
        out = subprocess.run(["bash", str(README_COMMAND), name], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout == marked_line(text, name) + "\n"
    missing = subprocess.run(["bash", str(README_COMMAND), "no-such-marker"], capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 2 and "no one-line block" in missing.stderr
    # py311 runs the two lines it reads, as they are (no copy of them in the script)
    job = re.search(r"^py311\(\) \{\n(.*?)^\}", CI_RUN.read_text(encoding="utf-8"), re.S | re.M)
    assert job, ".ci/run has no py311 job"
    body = job.group(1)
    assert "install=$(.ci/readme_command install)" in body and 'eval "$install"' in body
    assert "tests=$(.ci/readme_command test)" in body and 'eval "$tests"' in body
    assert body.index('eval "$install"') < body.index('eval "$tests"')
    assert "pip install -c constraints.txt -e" not in body and "python -m pytest -q\n" not in body


def test_the_readme_defines_the_data_root_before_it_uses_it():
    lines = README.read_text(encoding="utf-8").splitlines()
    uses = [n for n, line in enumerate(lines) if re.search(r"\$\{?GROUNDED_TEXT_DATA\b", line)]
    assert uses, "the README never uses $GROUNDED_TEXT_DATA"
    assert re.match(r"\s*export GROUNDED_TEXT_DATA=", lines[uses[0]]), (uses[0] + 1, lines[uses[0]])
