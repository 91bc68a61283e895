"""Every section, table, equation and algorithm a preset record cites exists in that paper.

The records' ``paper``, ``sources``, ``unsaid`` and ``notes`` cite their paper as "§4.2",
"Table 3", "eq. 3", "Algorithm 1". Each citation is looked up in the paper's Markdown copy
(``$GROUNDED_TEXT_DATA/../papers``): a numbered heading, a table caption, a numbered
equation, an algorithm. A citation whose clause names another of the four papers' authors is
looked up in that paper; one whose clause names an outside work first (Kim 2014, Kiela et al.
2018, ...) is not checked. Without the papers the test skips, except under CI=true.
"""

from __future__ import annotations

import re

import pytest

from grounded_text.papers.presets import PRESETS

PAPER_FILES = {"Kurach": "kurach2017_vete", "Bordes": "bordes2019_grounded_space",
               "Merkx": "merkx2019_char_grounding",
               "Kolluru": "kolluru_two_branch"}
OUTSIDE = ("Kim", "Kiela", "Mao", "Wang", "Collell", "Faghri", "Schroff", "Kiros", "Lazaridou", "Karpathy")
CITATION = re.compile(r"§\s?(\d+(?:\.\d+)*)(?:\s?-\s?(\d+(?:\.\d+)*))?|Tables? (\d+)(?:\s?[-–]\s?(\d+))?"
                      r"|eqs?\. (\d+)(?:\s?-\s?(\d+))?|Algorithm (\d+)")


@pytest.fixture(scope="module")
def papers(papers_dir) -> dict[str, dict]:
    root = papers_dir
    out = {}
    for name in set(PAPER_FILES.values()):
        text = (root / f"{name}.md").read_text(encoding="utf-8")
        lines = text.split("\n")
        sections = {m.group(1) for line in lines
                    if (m := re.match(r"^(?:#+\s*)?(?:\*\*)?(\d+(?:\.\d+)*)\s+[A-Z*]", line.strip()))}
        tables = set(re.findall(r"Table (\d+):", text))
        # Equation numbers: \tag{N} inside a $$ block, or (N) on the block's line or the line after it.
        equations = set()
        for i, line in enumerate(lines):
            if "$$" in line or "\\tag" in line:
                for probe in lines[i:i + 2]:
                    equations.update(re.findall(r"\\tag\{(\d+)\}|\((\d+)\)\s*(?:\$\$)?\s*$", probe))
        equations = {a or b for a, b in equations}
        algorithms = set(re.findall(r"Algorithm (\d+)", text))
        out[name] = {"§": sections, "Table": tables, "eq": equations, "Algorithm": algorithms}
    return out


def record_paper(preset) -> str:
    return next(f for author, f in PAPER_FILES.items() if preset.paper.startswith(author))


def citations(text: str, default: str):
    """``(paper file or None, kind, number)`` for every citation in ``text``."""
    for clause in re.split(r";|\. (?=[A-Z])", text):
        for m in CITATION.finditer(clause):
            before = clause[:m.start()]
            named = [(before.rfind(n), PAPER_FILES.get(n)) for n in (*PAPER_FILES, *OUTSIDE) if n in before]
            paper = max(named)[1] if named else default
            if paper is None:
                continue  # an outside work's section
            sec, sec_to, tab, tab_to, eq, eq_to, alg = m.groups()
            # One alternative of CITATION matched: its first number, and a range's last.
            for kind, first, last in (("§", sec, sec_to), ("Table", tab, tab_to), ("eq", eq, eq_to),
                                      ("Algorithm", alg, None)):
                if first:
                    yield paper, kind, first
                    if last:
                        yield paper, kind, last
                    break


def test_every_cited_section_table_and_equation_exists(papers):
    missing, checked = [], 0
    for preset in PRESETS.values():
        default = record_paper(preset)
        texts = {"paper": preset.paper, "notes": preset.notes,
                 **{f"sources[{k}]": v for k, v in preset.sources.items()},
                 **{f"unsaid[{k}]": v for k, v in preset.unsaid.items()}}
        for where, text in texts.items():
            for paper, kind, number in citations(text, default):
                checked += 1
                if number not in papers[paper][kind]:
                    missing.append(f"{preset.name} {where}: {kind} {number} is not in {paper}")
    assert checked > 100
    assert not missing, "\n".join(missing)


def test_citation_parser():
    got = list(citations("§3.1.2 and §3.3: x; Kim (2014) §3.1; Tables 1-2; eqs. 2-3; Bordes et al. §4.4",
                         "merkx2019_char_grounding"))
    assert got == [("merkx2019_char_grounding", "§", "3.1.2"), ("merkx2019_char_grounding", "§", "3.3"),
                   ("merkx2019_char_grounding", "Table", "1"), ("merkx2019_char_grounding", "Table", "2"),
                   ("merkx2019_char_grounding", "eq", "2"), ("merkx2019_char_grounding", "eq", "3"),
                   ("bordes2019_grounded_space", "§", "4.4")]


def test_the_papers_have_what_the_lookup_needs(papers):
    """The lookup can fail: sections and tables that are not in a paper are not found."""
    vete = papers["kurach2017_vete"]
    assert {"3", "4.1", "4.2", "5.4"} <= vete["§"] and "3.3" not in vete["§"] and "Algorithm" in vete
    assert {"1", "2", "3", "4", "5", "6"} <= vete["Table"] and "7" not in vete["Table"]
    assert {"3.1.1", "3.1.2", "3.3"} <= papers["merkx2019_char_grounding"]["§"]
    assert {"2", "3", "4"} <= papers["bordes2019_grounded_space"]["eq"]
    assert {"4.4.1", "4.4.2"} <= papers["kolluru_two_branch"]["§"] and "3" in papers["kolluru_two_branch"]["eq"]
