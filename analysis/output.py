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

from wire_recorder.recorder.visible import json_visible, visible


class OutputFormat(StrEnum):
    """wire-query --format."""

    TABLE = "table"  # rich table, for people; wide tables keep the columns that fit
    LINE = "line"  # one `column = value` line per column, rows apart (duckdb's .mode line)
    CSV = "csv"
    JSON = "json"
    NDJSON = "ndjson"  # one JSON object per row and line
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
    # a recorded ESC, other control or bidi character must not drive the terminal
    s = visible(s)
    if width and len(s) > width:
        s = s[: width - 1] + "…"
    return s


def render(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = OutputFormat.TABLE,
           out=None, title: str | None = None, max_cell: int = 80,
           max_width: int | None = None) -> None:
    """rows in `fmt`. Table: cells shortened to `max_cell`; when the columns do not fit in
    `max_width` (default: the terminal's width; unbounded when piped) the ones in the middle are
    left out, as the duckdb CLI does, and a last line says so."""
    out = out or sys.stdout
    if fmt == "line":
        _render_lines(columns, rows, out)
        return
    if fmt == "ndjson":
        import orjson

        for r in rows:
            out.write(json_visible(orjson.dumps(dict(zip(columns, (plain(v) for v in r), strict=True)),
                                   option=orjson.OPT_NON_STR_KEYS)).decode() + "\n")
        return
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        # values keep their line breaks (quoted), every other control is shown, not obeyed
        w.writerow([visible(c, lines=True) for c in columns])
        for r in rows:
            w.writerow(["" if v is None else visible(
                plain(v) if not isinstance(v, (list, dict)) else
                __import__("orjson").dumps(plain(v)).decode(), lines=True) for v in r])
        return
    if fmt == "json":
        import orjson

        data = [dict(zip(columns, (plain(v) for v in r), strict=True)) for r in rows]
        out.write(json_visible(orjson.dumps(data, option=orjson.OPT_INDENT_2)).decode() + "\n")
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

    con = console(file=out, soft_wrap=False)
    texts = [[cell(v, max_cell) for v in r] for r in rows]
    width = max_width or (con.width if con.is_terminal else None)
    keep = _columns_that_fit(columns, texts, width) if width else list(range(len(columns)))
    # Cells, headers and the title are Text, never markup: a recorded `[link=...]` or `[/]` in a
    # value (or an SQL alias) is shown as it is.
    table = Table(title=None if title is None else Text(visible(title)), show_lines=False,
                  header_style="bold")
    shown: list[int | None] = list(keep)
    if len(keep) < len(columns):  # the left-out middle, as one narrow column
        half = (len(keep) + 1) // 2
        shown = [*keep[:half], None, *keep[half:]]
    for i in shown:
        if i is None:
            table.add_column("…", no_wrap=True)
            continue
        numeric = any(isinstance(r[i], (int, float, decimal.Decimal)) and not isinstance(r[i], bool)
                      for r in rows[:50])
        # each value on one line: a wide value is cut (max_cell), never folded over lines
        table.add_column(Text(cell(columns[i])), justify="right" if numeric else "left",
                         no_wrap=True, overflow="ellipsis")
    for t in texts:
        table.add_row(*(Text("…") if i is None else Text(t[i]) for i in shown))
    if width:
        con.width = width
    elif not con.is_terminal:
        con.width = max(200, _table_width(columns, texts, range(len(columns))))
    con.print(table)
    if len(keep) < len(columns):
        con.print(Text(f"{len(rows)} rows, {len(columns)} columns ({len(keep)} shown); "
                       "--format line shows every column"), style="dim")


def _table_width(columns: Sequence[str], texts: list[list[str]], which) -> int:
    """Characters a rich table of these columns takes (borders and padding included)."""
    total = 1
    for i in which:
        total += max([len(cell(columns[i]))] + [len(t[i]) for t in texts]) + 3
    return total


def _columns_that_fit(columns: Sequence[str], texts: list[list[str]], width: int) -> list[int]:
    """The columns shown in `width` characters: all when they fit, else as many as fit taken
    from both ends (the first ones are usually the keys), the rest left out."""
    n = len(columns)
    if _table_width(columns, texts, range(n)) <= width or n <= 2:
        return list(range(n))
    room = width - 1 - 4  # the "…" column
    left: list[int] = []
    right: list[int] = []
    lo, hi = 0, n - 1
    while lo <= hi:
        for side in (0, 1):
            i = lo if side == 0 else hi
            if lo > hi:
                break
            need = _table_width(columns, texts, [i]) - 1
            if need > room:
                return sorted(left + right) or [0]
            room -= need
            if side == 0:
                left.append(i)
                lo += 1
            else:
                right.append(i)
                hi -= 1
    return sorted(left + right)


def _render_lines(columns: Sequence[str], rows: Sequence[Sequence[Any]], out) -> None:
    """duckdb's `.mode line`: `column = value`, names right-aligned, a blank line between rows."""
    pad = max((len(c) for c in columns), default=0)
    for n, r in enumerate(rows):
        if n:
            out.write("\n")
        for c, v in zip(columns, r, strict=True):
            out.write(f"{c:>{pad}} = {cell(v)}\n")


def to_text(columns, rows, fmt="table", **kw) -> str:
    buf = io.StringIO()
    render(columns, rows, fmt, out=buf, **kw)
    return buf.getvalue()


class Progress:
    """Progress of slow work on stderr (a rich bar), on a terminal only, and only once the work
    has taken `after` seconds: quick runs print nothing, pipes and files get nothing.

        with Progress("summarizing", total=8) as p:
            p.step("turns")  # one unit done; the label says what runs next
    """

    def __init__(self, what: str, total: int | None = None, after: float = 2.0):
        self.what, self.total, self.after = what, total, after
        self._bar: Any = None
        self._task: Any = None
        self._timer: Any = None
        self._started = False

    def __enter__(self) -> Progress:
        if sys.stderr.isatty():
            import threading

            from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(SpinnerColumn(), TextColumn(self.what), BarColumn(),
                            MofNCompleteColumn(), TextColumn("{task.fields[name]}", markup=False),
                            console=console(stderr=True), transient=True)
            self._task = self._bar.add_task(self.what, total=self.total, name="")
            self._timer = threading.Timer(self.after, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self

    def _show(self) -> None:
        self._started = True
        self._bar.start()

    def step(self, name: str = "", n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=n, name=name)

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._started:
            self._bar.stop()
