"""The papers' figures (grounded_text.papers.published) against the papers' own text.

Every transcribed cell must be the cell printed in that table's row and column of the
paper's Markdown copy (found through the table's caption or header). The papers live in
``$GROUNDED_TEXT_DATA/../papers``; without them these tests skip, except under CI=true.
"""

from __future__ import annotations

import re

import pytest

from grounded_text.papers import published as pf


@pytest.fixture(scope="module")
def papers(papers_dir) -> dict[str, list[str]]:
    root = papers_dir
    return {p: (root / f"{p}.md").read_text(encoding="utf-8").split("\n") for p in pf.PAPER_SOURCES}


def table_lines(lines: list[str], spec: pf.TableSpec) -> list[str]:
    """The lines strictly between the table's ``begin`` line and its ``end`` line."""
    first = next(i for i, line in enumerate(lines) if spec.begin in line)
    if spec.end:
        end = next(i for i in range(first + 1, len(lines)) if spec.end in lines[i])
    else:
        end = len(lines)
    begin = max(i for i in range(first, end) if spec.begin in lines[i])
    return lines[begin + 1:end]


def cells(line: str, sep: str) -> list[str]:
    return [c.strip() for c in line.split(sep)]


def test_every_figure_is_printed_in_its_row_and_column(papers):
    checked = 0
    for (paper, table), spec in pf.TABLES.items():
        block_lines = table_lines(papers[paper], spec)
        assert block_lines, f"{paper} {table}: table not found"
        for f in pf.figures(paper, table):
            lines = block_lines
            if f.block is not None:
                start = next(i for i, line in enumerate(lines) if f.block in line)
                lines = lines[start:]
            rows = [cells(line, spec.sep) for line in lines]
            row = next((r for r in rows if len(r) > spec.label_cell and r[spec.label_cell] == f.row), None)
            assert row is not None, f"{paper} {table}: no row {f.row!r} (block {f.block!r})"
            column = re.sub(r" \((acc|F1)\)$", "", f.column)
            at = spec.first_cell + spec.columns.index(column)
            assert row[at] == f.printed, f"{paper} {table} {f.row!r} {f.column!r}: paper prints {row[at]!r}"
            numbers = [float(x) for x in re.findall(r"\d+(?:\.\d*)?", f.printed)]
            assert f.value in numbers
            for half in (f.plus, f.minus):
                assert half is None or half in numbers
            checked += 1
    assert checked == len(pf.PUBLISHED_FIGURES)


def test_records_are_unique_and_complete():
    keys = [(f.paper, f.table, f.block, f.row, f.column) for f in pf.PUBLISHED_FIGURES]
    assert len(keys) == len(set(keys))
    assert pf.counts() == {
        "kurach2017_vete Table 1": 36, "kurach2017_vete Table 2": 34, "kurach2017_vete Table 3": 16,
        "kurach2017_vete Table 4": 6, "kurach2017_vete Table 5": 12, "kurach2017_vete Table 6": 8,
        "bordes2019_grounded_space Table 1": 80, "bordes2019_grounded_space Table 3": 128,
        "merkx2019_char_grounding Table 2": 41, "merkx2019_char_grounding Table 3": 82,
        "merkx2019_char_grounding Table 5": 104, "kolluru_two_branch Table 1": 36, "kolluru_two_branch Table 2": 36,
    }
    for f in pf.PUBLISHED_FIGURES:
        assert f.scale and f.training_data and f.image_features, f


def test_merkx_frank_table5_sts_subsets_with_intervals():
    ours = {f.ours: f for f in pf.figures("merkx2019_char_grounding", "Table 5")
            if f.column == "char-GRU (Flickr8k)" and f.ours and f.ours.split("/")[0] in ("STS12", "STS13", "STS16")}
    assert len(ours) == 13
    assert all(f.plus is not None and f.minus is not None for f in ours.values())
    msrvid = ours["STS12/MSRvid"]
    assert (msrvid.value, msrvid.plus, msrvid.minus) == (79.9, 2.4, 2.7)
    assert msrvid.ci95 == pytest.approx((77.2, 82.3))
    assert pf.figures("merkx2019_char_grounding", "Table 5", ours="STS16/headlines")[2].value == 70.0


def test_ours_keys_name_our_sts_subsets(data_dir):
    """The STS keys name subsets our loader reads (STS 2014/15 are held out of the data)."""
    from grounded_text.data.sts import read_sts_year, sts_year_dirs

    available = {f"{year}/{name}" for year, path in sts_year_dirs(data_dir / "sts").items()
                 for name in read_sts_year(path)}
    wanted = {f.ours for f in pf.PUBLISHED_FIGURES if f.ours and f.ours.split("/")[0] in ("STS12", "STS13", "STS16")}
    assert wanted and wanted <= available


def test_parse_cell():
    assert pf.parse_cell("27.5±2.8") == [(27.5, 2.8, 2.8)]
    assert pf.parse_cell("79.9 <sup>+2.4</sup> <sub>-2.7</sub>") == [(79.9, 2.4, 2.7)]
    assert pf.parse_cell("$72.7*$") == [(72.7, None, None)]
    assert pf.parse_cell("72.9/80.6") == [(72.9, None, None), (80.6, None, None)]
    assert pf.parse_cell("55.") == [(55.0, None, None)]
    with pytest.raises(ValueError):
        pf.parse_cell("N/A")
    with pytest.raises(ValueError):
        pf.figures("nope")
