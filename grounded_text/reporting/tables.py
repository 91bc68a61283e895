"""The one number formatter, the one Markdown table builder and the one report writer of
the experiment drivers (reproduce, ablation, paper baselines, tune).

No TensorFlow is imported here.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from grounded_text.utils.durable import atomic_write

MISSING = "–"


def fmt(x, digits: int = 3, *, scale: float = 1.0, signed: bool = False, minus: str = "−",
        missing: str = MISSING, small: int | None = None, exact_ints: bool = False,
        thousands: bool = False) -> str:
    """One table cell of a figure.

    Args:
      x: a number, or None / NaN (→ ``missing``); anything else is shown with ``str``.
      digits: decimals (fixed-point).
      scale: multiplies the value first (100 for percentages of a fraction).
      signed: always show the sign (``+0.012``, ``−0.012``).
      minus: the minus sign (``"−"``, U+2212, in the reports' tables; ``"-"`` in plain ones).
      missing: the text of a missing value.
      small: for 0 < |x| < 0.01, ``small`` significant digits instead (``1.2e-05``).
      exact_ints: integers are shown as they are (no decimals).
      thousands: a thousands separator (``1,234``).

    Returns:
      The text (str).
    """
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    if isinstance(x, bool) or not isinstance(x, (int, float)) or (exact_ints and isinstance(x, int)):
        return str(x)
    x = x * scale
    if signed:
        return ("+" if x >= 0 else minus) + fmt(abs(x), digits, minus=minus, missing=missing, small=small,
                                                 thousands=thousands)
    if small is not None and 0 < abs(x) < 0.01:
        text = f"{x:.{small}g}"
    else:
        text = f"{x:{',' if thousands else ''}.{digits}f}"
    return text.replace("-", minus) if minus != "-" else text


def markdown_table(header: Sequence[str], rows: Iterable[Sequence], align: Sequence[str] | None = None) -> list[str]:
    """Markdown table lines: ``header``, its rule (``align``: one of ``"---"``/``"---:"`` per
    column; default ``"---"``) and one line per row of already formatted cells."""
    rule = align or ["---"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "".join(f"{a}|" for a in rule)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def json_default(x):
    """JSON for NumPy scalars and arrays, paths and anything else (as ``str``)."""
    np = sys.modules.get("numpy")  # a NumPy value exists only once NumPy is loaded: none to import here
    if np is not None and isinstance(x, np.generic):
        return x.item()
    if np is not None and isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def write_text(path: str | Path, text: str) -> Path:
    """Writes ``text`` (UTF-8) atomically: a crash leaves the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    atomic_write(path, lambda f: f.write(data))
    return path


def write_report(data: dict | None, markdown: str | None, *, json_path: str | Path | None = None,
                 markdown_path: str | Path | None = None) -> None:
    """The one report writer: ``data`` as indented JSON to ``json_path`` and ``markdown`` (a
    final newline added) to ``markdown_path``, each written atomically; a path of None is skipped."""
    if json_path is not None:
        write_text(json_path, json.dumps(data, indent=2, default=json_default))
    if markdown_path is not None:
        write_text(markdown_path, markdown.rstrip("\n") + "\n")


def update_sections(path: str | Path, sections: dict[str, str], order: Sequence[str], *, header: str,
                    tag: str) -> Path:
    """Writes or updates the Markdown file ``path``: each ``sections[key]`` between the
    markers ``<!-- TAG:KEY:start -->`` / ``<!-- TAG:KEY:end -->`` (replaced when present,
    else inserted before the first later key of ``order``, else appended). A new file
    starts with ``header``. Other text is kept."""
    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.is_file() else header

    def markers(key):
        return f"<!-- {tag}:{key}:start -->", f"<!-- {tag}:{key}:end -->"

    for key in order:
        if key not in sections:
            continue
        start, end = markers(key)
        section = f"{start}\n{sections[key]}\n{end}"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        if pattern.search(text):
            text = pattern.sub(lambda _: section, text)
            continue
        later = [markers(q)[0] for q in order[order.index(key) + 1:] if markers(q)[0] in text]
        if later:
            i = text.index(later[0])
            text = text[:i] + section + "\n\n" + text[i:]
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
    return write_text(path, text)


def read_sections(text: str, tag: str) -> dict[str, str]:
    """``{KEY: section}`` of every section that ``update_sections`` wrote into ``text`` with
    ``tag`` (the text between its markers, as it was given)."""
    pattern = re.compile(r"<!-- " + re.escape(tag) + r":(?P<key>[^:\s]+):start -->\n(?P<body>.*?)\n<!-- "
                         + re.escape(tag) + r":(?P=key):end -->", re.S)
    return {m["key"]: m["body"] for m in pattern.finditer(text)}


def public_args(argv: list[str]) -> list[str]:
    """The arguments as the docs show them: the data root as ``$GROUNDED_TEXT_DATA`` and paths
    under the working directory relative to it, so a regenerated page names no folder of the
    machine it was made on."""
    data = os.environ.get("GROUNDED_TEXT_DATA")
    cwd = Path.cwd().resolve()
    out = []
    for arg in argv:
        path = Path(arg)
        if data and path.is_absolute() and path.resolve() == Path(data).resolve():
            arg = "$GROUNDED_TEXT_DATA"
        elif path.is_absolute() and path.resolve().is_relative_to(cwd):
            arg = str(path.resolve().relative_to(cwd))
        out.append(arg)
    return out


def public_command(prefix: str, argv: list[str]) -> str:
    """``prefix`` and ``public_args(argv)`` as one shell command line: quoted where needed, with
    ``$GROUNDED_TEXT_DATA`` left for the shell to expand (double quotes, not single)."""
    return f"{prefix} " + shlex.join(public_args(argv)).replace("'$GROUNDED_TEXT_DATA'", '"$GROUNDED_TEXT_DATA"')
