"""Printing query results: a rich table for people, csv / json / markdown for other programs."""

from __future__ import annotations

import csv
import datetime as _dt
import decimal
import io
import sys
from collections.abc import Sequence
from enum import StrEnum
from typing import Any


class OutputFormat(StrEnum):
    """wire-query --format."""

    TABLE = "table"  # rich table, for people
    CSV = "csv"
    JSON = "json"
    MARKDOWN = "markdown"


class SummaryFormat(StrEnum):
    """wire-stats --format."""

    TABLE = "table"
    JSON = "json"


class ExportFormat(StrEnum):
    """wire-export --format."""

    TRANSCRIPT = "transcript"  # the text transcript (.jsonl) wire-replay and wire-import read
    JSONL = "jsonl"  # one frame per line, payload parsed
    PARQUET = "parquet"  # a folder, partitioned by day


FORMATS = tuple(f.value for f in OutputFormat)

# Control characters shown as their Unicode control pictures (ESC as ␛) in table cells.
_CONTROLS = {c: 0x2400 + c for c in range(0x20)} | {0x7F: 0x2421, 0x9B: 0xFFFD}


def console(**kw):
    """A rich Console for our output. rich ends the process with exit 1 when the reader goes
    away (`| head`); this one raises BrokenPipeError, which the CLI ends quietly with exit 0,
    as it does for csv and json output. Emoji codes are off: a recorded `:smile:` is text."""
    from rich.console import Console

    kw.setdefault("emoji", False)

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return _Console(**kw)


def plain(v: Any) -> Any:
    """A JSON-friendly value."""
    if isinstance(v, (_dt.datetime, _dt.date, _dt.time)):
        return v.isoformat()
    if isinstance(v, _dt.timedelta):
        return v.total_seconds()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, int) and abs(v) >= 2**63:
        return str(v)
    return v


def cell(v: Any, width: int | None = None) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        s = f"{v:.3f}".rstrip("0").rstrip(".") if abs(v) < 1e15 else f"{v:g}"
    elif isinstance(v, _dt.datetime):
        s = v.isoformat(sep=" ", timespec="milliseconds")
    else:
        p = plain(v)
        s = p if isinstance(p, str) else str(p)
    s = s.replace("\n", "⏎")
    # a recorded ESC or other control character must not drive the terminal
    s = s.translate(_CONTROLS)
    if width and len(s) > width:
        s = s[: width - 1] + "…"
    return s


def render(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = OutputFormat.TABLE,
           out=None, title: str | None = None, max_cell: int = 80) -> None:
    out = out or sys.stdout
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if v is None else (plain(v) if not isinstance(v, (list, dict)) else
                                             __import__("orjson").dumps(plain(v)).decode())
                        for v in r])
        return
    if fmt == "json":
        import orjson

        data = [dict(zip(columns, (plain(v) for v in r), strict=True)) for r in rows]
        out.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    if fmt == "markdown":
        def esc(s: str) -> str:
            return s.replace("|", "\\|")

        out.write("| " + " | ".join(esc(c) for c in columns) + " |\n")
        out.write("|" + "|".join("---" for _ in columns) + "|\n")
        for r in rows:
            out.write("| " + " | ".join(esc(cell(v)) for v in r) + " |\n")
        return
    from rich.table import Table
    from rich.text import Text

    # Cells, headers and the title are Text, never markup: a recorded `[link=...]` or `[/]` in a
    # value (or an SQL alias) is shown as it is.
    table = Table(title=None if title is None else Text(title), show_lines=False,
                  header_style="bold")
    for i, c in enumerate(columns):
        numeric = any(isinstance(r[i], (int, float, decimal.Decimal)) and not isinstance(r[i], bool)
                      for r in rows[:50])
        table.add_column(Text(cell(c)), justify="right" if numeric else "left", overflow="fold")
    for r in rows:
        table.add_row(*(Text(cell(v, max_cell)) for v in r))
    con = console(file=out, soft_wrap=False)
    if not con.is_terminal:
        con.width = 200  # piped output: do not squeeze columns into 80
    con.print(table)


def to_text(columns, rows, fmt="table", **kw) -> str:
    buf = io.StringIO()
    render(columns, rows, fmt, out=buf, **kw)
    return buf.getvalue()
