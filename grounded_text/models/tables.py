"""The tables of docs/models.md, written from the preset records and the builders.

``python -m grounded_text.models.tables`` prints them; ``--write docs/models.md`` puts each
between its markers (``<!-- models-table:NAME:start -->`` … ``<!-- models-table:NAME:end -->``),
and a test checks that the file holds what this module writes. The tables:

* ``records``: one row per preset record (``grounded_text.papers.presets.records_markdown``);
* ``architectures``: one row per builder of ``grounded_text.models.registry.MODELS``, its
  cells declared on the builder with ``@architecture`` (``grounded_text.models.components``),
  listing the builder's records that are not variants.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from grounded_text.models.registry import MODELS
from grounded_text.papers.presets import PRESETS, records_markdown

START = "<!-- models-table:{name}:start -->"
END = "<!-- models-table:{name}:end -->"


def architectures_markdown() -> str:
    """One row per registered builder: its records, text tower, image branch and loss.

    Returns:
      A Markdown table (no trailing newline).

    Raises:
      ValueError: a builder that declares no ``architecture`` (``@architecture``).

    Example:
      >>> architectures_markdown().splitlines()[2].startswith("| `vete_bow` | BOW mean/sum")
      True
    """
    rows = ["| preset | text tower | image branch | loss |", "|---|---|---|---|"]
    for builder, build in MODELS.items():
        cells = getattr(build, "architecture", None)
        if cells is None:
            raise ValueError(f"builder {builder!r} declares no architecture: decorate it with "
                             "@architecture(text_tower, image_branch, loss) (grounded_text.models.components).")
        names = ", ".join(f"`{p.name}`" for p in PRESETS.values() if p.builder == builder and p.variant_of is None)
        rows.append("| " + " | ".join((names, *cells)) + " |")
    return "\n".join(rows)


def tables() -> dict[str, str]:
    """Table name → its Markdown, in the order of docs/models.md.

    Example:
      >>> list(tables())
      ['records', 'architectures']
    """
    return {"records": records_markdown(), "architectures": architectures_markdown()}


def splice(text: str, generated: dict[str, str] | None = None) -> str:
    """``text`` with each table of ``generated`` (default: ``tables()``) put between its markers.

    Raises:
      ValueError: a table's start or end marker is missing from ``text``.

    Example:
      >>> doc = "intro\\n<!-- models-table:t:start -->\\nold\\n<!-- models-table:t:end -->\\n"
      >>> splice(doc, {"t": "| new |"})
      'intro\\n<!-- models-table:t:start -->\\n| new |\\n<!-- models-table:t:end -->\\n'
    """
    for name, table in (tables() if generated is None else generated).items():
        start, end = START.format(name=name), END.format(name=name)
        pattern = re.compile(re.escape(start) + r"\n.*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise ValueError(f"no {start} … {end} block to write table {name!r} into.")
        text = pattern.sub(lambda _: f"{start}\n{table}\n{end}", text, count=1)
    return text


def main(argv=None) -> int:
    """Prints the tables, or writes them into a Markdown file (exit 0)."""
    parser = argparse.ArgumentParser(prog="python -m grounded_text.models.tables", description=__doc__.split("\n")[0])
    parser.add_argument("--write", type=Path, metavar="FILE",
                        help="put each table between its markers in FILE (docs/models.md) instead of printing")
    args = parser.parse_args(argv)
    if args.write is None:
        print("\n\n".join(tables().values()))
        return 0
    text = args.write.read_text(encoding="utf-8")
    args.write.write_text(splice(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
