"""Command lines: thin typer wrappers over the library functions of this package.

The shared edge (recorder.edge) gives each its `--version`, its one-line errors with the exit
code of their kind, and its quiet ends (closed pipe: 0; Ctrl-C: 130).
"""

from __future__ import annotations

import os
import sys

import typer

from wire_recorder.recorder.edge import entry, say
from wire_recorder.recorder.errors import UsageError
from wire_recorder.recorder.helpstyle import help_text, make_app

from .output import ExportFormat, OutputFormat, SummaryFormat

# each command's name, for its console script and its notes on stderr
QUERY, STATS, SHOW, IMPORT, EXPORT = ("wire-query", "wire-stats", "wire-show", "wire-import",
                                      "wire-export")


SESSION_HELP = "a session's name, id, or a unique prefix of either"


# -- wire-query --------------------------------------------------------------------------------
def _query_help() -> str:
    from .catalog import view_list

    return help_text(
        "Run SQL over recordings (files, globs, folders, transcripts, kimi logs), read-only. "
        "The last argument is the SQL.",
        ["wire-query 'sessions/*.db' \"select * from sessions\" -f line",
         "wire-query x.db \"select turn, total_tokens, status from turns\" -f ndjson",
         "wire-query x.db \"select column_name, comment from duckdb_columns() "
         "where table_name = 'turns'\""],
        "Tables and views (one row per ...; columns: docs/analysis.md, or duckdb_columns()):\n\b\n"
        + "\n".join(f"  {line}" for line in view_list().splitlines()))


query_app = make_app()


@query_app.command(help=_query_help())
def query_cmd(
    args: list[str] = typer.Argument(..., metavar="DB... SQL",
                                     help="recordings (.db, globs, folders, .jsonl), then the SQL"),
    fmt: OutputFormat = typer.Option(OutputFormat.TABLE, "--format", "-f",
                                     help="table, line (a column per line), csv, json, ndjson "
                                          "(a row per line) or markdown"),
    max_cell: int = typer.Option(80, "--max-cell", help="table: shorten cells to this width"),
    max_width: int | None = typer.Option(None, "--max-width", help="table: leave out middle "
                                         "columns past this width (default: the terminal's; "
                                         "piped output keeps them all)"),
    unsafe: bool = typer.Option(False, "--unsafe", help="let the SQL reach files (read_csv, "
                                "COPY TO, ATTACH, extensions): your SQL can then read and write "
                                "any file you can. Without it the recordings are read-only and "
                                "the SQL sees nothing else"),
    timeout: float | None = typer.Option(None, "--timeout", metavar="SECONDS",
                                         help="stop the SQL after this many seconds (default "
                                              "300, or WIRE_QUERY_TIMEOUT; 0: no limit)"),
):
    from .output import Progress, render
    from .query import default_timeout, query

    if timeout is not None and not timeout >= 0:
        raise UsageError(f"--timeout {timeout}: not a number of seconds", "0 for no limit")
    if timeout is None:
        default_timeout()  # a bad WIRE_QUERY_TIMEOUT is said before any file is opened

    if len(args) < 2:
        raise UsageError("give at least one recording and the SQL",
                        'e.g. wire-query "sessions/*.db" "select * from turns"')
    from .views import VIEW_NAMES

    with Progress("querying", total=len(VIEW_NAMES) + 1) as bar:
        cols, rows = query(args[:-1], args[-1], unsafe=unsafe, progress=bar.step,
                           timeout_s=timeout)
    if cols:
        render(cols, rows, fmt, max_cell=max_cell, max_width=max_width)


# -- wire-stats --------------------------------------------------------------------------------
stats_app = make_app()


@stats_app.command(help=help_text(
    "Summary of recordings: sessions, turns, steps, frames, tokens, slowest tools, waits for "
    "the client, errors. History an agent re-sends (Wire replay) is not counted.",
    ["wire-stats ~/.local/share/wire-recorder/sessions",
     "wire-stats demo.db --session multi_step --format json"],
    "Words: frames = messages between client and agent (stderr lines and proxy events apart); "
    "input tokens = uncached + cache read + cache write."))
def stats_cmd(
    dbs: list[str] = typer.Argument(..., metavar="DB...", help="recordings (.db, globs, folders)"),
    session: list[str] | None = typer.Option(None, "--session", "-s",
                                             help=f"only this session: {SESSION_HELP}; "
                                                  "repeatable"),
    fmt: SummaryFormat = typer.Option(SummaryFormat.TABLE, "--format", "-f",
                                      help="table or json"),
):
    from .output import Progress
    from .sources import open_workspace
    from .stats import STEPS, render_summary, summarize

    with Progress("summarizing", total=STEPS) as bar:
        # no views: sessions with a stored summary never read them (stats installs them for
        # sessions without)
        with open_workspace(dbs, views=False, progress=bar.step) as ws:
            ids = [ws.resolve_session(s) for s in session] if session else None
            summary = summarize(ws, ids, progress=bar.step)
    if fmt is SummaryFormat.JSON:
        import orjson

        from wire_recorder.recorder.visible import json_visible

        sys.stdout.write(json_visible(orjson.dumps(summary.as_dict(), option=orjson.OPT_INDENT_2))
                         .decode() + "\n")
    else:
        render_summary(summary)


query_main = entry(query_app, QUERY)
stats_main = entry(stats_app, STATS)


# -- wire-show ---------------------------------------------------------------------------------
show_app = make_app()


@show_app.command(help=help_text(
    "A session as a timeline: turns, steps, text, tool calls, approvals, tokens, errors; "
    "or followed live while it is recorded; or an HTML report.",
    ["wire-show demo.db --session multi_step",
     "wire-show demo.db --follow --wait 30",
     "wire-show demo.db --html report.html",
     "wire-show s.db --llm-call 2"]))
def show_cmd(
    db: str = typer.Argument(..., metavar="DB", help="a recording (.db) or a transcript (.jsonl)"),
    session: str | None = typer.Option(None, "--session", "-s", help=SESSION_HELP),
    follow: bool = typer.Option(False, "--follow", "-F",
                                help="tail a session that is still being recorded"),
    html_out: str | None = typer.Option(None, "--html", help="write the session view as one "
                                        "self-contained HTML file (every session of the file "
                                        "without --session, on an index page)"),
    width: int = typer.Option(100, "--width", help="shorten text, arguments and outputs to this"),
    no_text: bool = typer.Option(False, "--no-text", help="hide text and thinking"),
    wait: float = typer.Option(0.0, "--wait", help="with --follow: wait this many seconds for "
                               "a recording to start"),
    llm_call: str | None = typer.Option(None, "--llm-call", metavar="N|all", help="a session "
                                        "recorded with wire-proxy --llm: model call N (or all) "
                                        "as sent and streamed, with its prompt diff"),
    max_body: int = typer.Option(4096, "--max-body", help="with --llm-call: show this many "
                                 "bytes of a body or prompt diff at most"),
):
    if llm_call is not None and (follow or html_out):
        raise UsageError("--llm-call shows a finished recording: not with --follow or --html")
    from .output import Progress
    from .output import console as make_console
    from .show import follow as follow_live
    from .show import show_frames

    console = make_console(highlight=False, soft_wrap=True)
    held: list[str] = []

    def emit(line: str) -> None:
        # lines printed a batch at a time: rich's cost is per print call (about half of it)
        held.append(line)
        if len(held) >= 256:
            flush()

    def flush() -> None:
        if held:
            console.print("\n".join(held))
            held.clear()
    if follow:
        how = follow_live(db, session, console.print, width=width, show_text=not no_text,
                          wait_s=wait)
        if how != "not live":
            return
        console.print("[dim](no live recording found; showing the file as it is)[/]")
    from .sources import open_workspace
    from .views import VIEW_NAMES

    with Progress("reading", total=len(VIEW_NAMES) + 1) as bar, \
            open_workspace([db], materialize=html_out is not None, progress=bar.step) as ws:
        if html_out:
            from .html_report import write_html

            # without --session: every session of the file (several open on an index page)
            ids = [ws.resolve_session(session)] if session else ws.session_ids()
            if not ids:
                ws.resolve_session(None)  # says the file holds no sessions
            bar.step("writing the report")
            size = write_html(ws, ids[0] if len(ids) == 1 else ids, html_out)
            say(SHOW, f"wrote {html_out} ({size:,} bytes)")
            return
        sid = ws.resolve_session(session)
        from .export import _frames, _session_row
        if llm_call is not None:  # printed once the progress bar is gone
            from .export import _source_file
            from .show import header
            from .show_llm_call import show_calls

            held.append(header(_session_row(ws, sid)))
            show_calls(ws, sid, _source_file(ws, sid), llm_call, held.append, width=width,
                       max_body=max_body)
        else:
            from .show import SHOW_MAX, left_out

            # a big recording (10^7 frames) is shown up to SHOW_MAX frames, and says so: memory
            # and time stay bounded whatever the file holds
            row, frames = _session_row(ws, sid), _frames(ws, sid, limit=SHOW_MAX)
            total = len(frames) if len(frames) < SHOW_MAX else ws.con.execute(
                "SELECT count(*) FROM frames WHERE session_id = ?", [sid]).fetchall()[0][0]
    if llm_call is not None:
        flush()
        return
    show_frames(row, frames, emit, width=width, show_text=not no_text)
    if total > len(frames):
        emit(left_out(len(frames), total))
    flush()


# -- wire-import -------------------------------------------------------------------------------
import_app = make_app()


@import_app.command(help=help_text(
    "Import transcripts (.jsonl) and kimi's own session logs (wire.jsonl) into a DB, with the "
    "analysis views stored in it (and described: duckdb_columns() has a comment per column).",
    ["wire-import ~/.kimi/sessions --db kimi.db",
     "wire-import sample.jsonl"]))
def import_cmd(
    inputs: list[str] = typer.Argument(..., metavar="FILE...", help="transcripts, kimi wire.jsonl "
                                       "files, kimi session folders, globs"),
    db: str | None = typer.Option(None, "--db", help="the DB to write (default: FILE.db for "
                                     "a single FILE)"),
    replace: bool = typer.Option(False, "--replace", help="overwrite sessions already in the DB"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar or summary"),
):
    from .importers import expand_import_inputs, import_files

    paths = expand_import_inputs(inputs)
    if db is None:
        if len(paths) != 1:
            raise UsageError(f"{len(paths)} files to import: say where with --db X.db")
        db = os.path.splitext(paths[0])[0] + ".db"
    total = sum(os.path.getsize(p) for p in paths)
    if quiet or len(paths) < 2 and total < (8 << 20) or not sys.stderr.isatty():
        results = import_files(paths, db, replace=replace)
    else:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        from .output import console as make_console

        with Progress(TextColumn("importing"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                      TextColumn("{task.fields[name]}", markup=False), transient=True,
                      console=make_console(stderr=True)) as bar:
            task = bar.add_task("import", total=total, name="")
            results = import_files(paths, db, replace=replace,
                                   progress=lambda p, n: bar.update(task, advance=n,
                                                                    name=os.path.basename(p)))
    if not quiet:
        frames = sum(r["frames"] for r in results)
        other = sum(r["other_rows"] for r in results)
        say(IMPORT, f"{len(results)} session(s), {frames:,} frames"
                    + (f" (and {other:,} stderr lines and proxy events)" if other else "")
                    + f" into {db}")


# -- wire-export -------------------------------------------------------------------------------
export_app = make_app()


@export_app.command(help=help_text(
    "Export sessions: the text transcript (what wire-replay and wire-import read), JSONL (a "
    "frame per line, payload parsed), or Parquet partitioned by day. Several sessions (all of "
    "the file's by default) go to a folder, one file each, named after the session.",
    ["wire-export demo.db --session multi_step -o multi_step.jsonl",
     "wire-export demo.db -o transcripts/",
     "wire-export 'sessions/**/*.db' --format parquet --out mirror/wire"]))
def export_cmd(
    dbs: list[str] = typer.Argument(..., metavar="DB...", help="recordings (.db, globs, folders)"),
    fmt: ExportFormat = typer.Option(ExportFormat.TRANSCRIPT, "--format", "-f",
                                     help="transcript (default), jsonl or parquet"),
    out: str | None = typer.Option(None, "--out", "-o", help="output file (one session; default "
                                   "stdout), or folder (several sessions, a folder that exists, "
                                   "a path ending in /; parquet: required)"),
    session: list[str] | None = typer.Option(None, "--session", "-s",
                                             help=f"{SESSION_HELP}; repeatable (default: all)"),
):
    from .export import export_file, export_parquet, export_sessions, write_jsonl, write_transcript
    from .output import Progress
    from .sources import open_workspace

    # the workspace is locked like wire-query's: Parquet goes to --out, and nowhere else
    with open_workspace(dbs, materialize=False, out_dir=out if fmt is ExportFormat.PARQUET
                        else None) as ws:
        ids = [ws.resolve_session(s) for s in session] if session else ws.session_ids()
        if not ids:
            raise UsageError(f"{ws.where()}: no sessions recorded")
        if fmt is ExportFormat.PARQUET:
            if not out:
                raise UsageError("--format parquet needs --out FOLDER")
            with Progress("exporting", total=len(ids)) as bar:
                files = export_parquet(ws, out, ids, progress=bar.step)
            say(EXPORT, f"{len(files)} session(s) into {out}/frames and {out}/sessions "
                        "(partitioned by day)")
            return
        writer = write_transcript if fmt is ExportFormat.TRANSCRIPT else write_jsonl
        to_folder = bool(out) and (os.path.isdir(str(out)) or str(out).endswith(os.sep))
        if len(ids) > 1 and not to_folder:
            if fmt is ExportFormat.JSONL and (not out or out == "-"):
                pass  # JSONL lines carry their session: one stream holds them all
            else:
                raise UsageError(f"{len(ids)} sessions to export: give -o FOLDER/ (a file each)"
                                 " or one --session NAME")
        if to_folder:
            suffix = ".jsonl" if fmt is ExportFormat.TRANSCRIPT else ".frames.jsonl"
            with Progress("exporting", total=len(ids)) as bar:
                done = export_sessions(writer, ws, ids, str(out), suffix, progress=bar.step)
            say(EXPORT, f"{len(done)} session(s), {sum(n for _, _, n in done):,} rows into {out}")
        elif out and out != "-":
            n = export_file(writer, ws, ids[0], out)
            say(EXPORT, f"session {ids[0]}, {n:,} rows into {out}")
        else:
            # on stdout (a terminal, often) the JSON is written with no raw control or bidi
            # character: escaped (\u202e), the same values; files keep the recorded bytes
            out_visible = _JsonVisible(sys.stdout.buffer)
            for sid in ids:
                writer(ws, sid, out_visible)
            sys.stdout.flush()


class _JsonVisible:
    """A binary stream that writes JSON lines through `json_visible` (whole lines per write, as
    the exporters write them)."""

    def __init__(self, out):
        from wire_recorder.recorder.visible import json_visible

        self.out, self._fix = out, json_visible

    def write(self, data: bytes) -> int:
        self.out.write(self._fix(bytes(data)))
        return len(data)

    def flush(self) -> None:
        self.out.flush()


show_main = entry(show_app, SHOW)
import_main = entry(import_app, IMPORT)
export_main = entry(export_app, EXPORT)
