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

from .output import ExportFormat, OutputFormat, SummaryFormat

# each command's name, for its console script and its notes on stderr
QUERY, STATS, SHOW, IMPORT, EXPORT = ("wire-query", "wire-stats", "wire-show", "wire-import",
                                      "wire-export")


def _app(help_text: str) -> typer.Typer:
    return typer.Typer(add_completion=False, help=help_text, no_args_is_help=False,
                       pretty_exceptions_enable=False,
                       context_settings={"help_option_names": ["-h", "--help"]})


# -- wire-query --------------------------------------------------------------------------------
query_app = _app("Run SQL over recordings (files, globs, folders). The last argument is the SQL.")


@query_app.command()
def query_cmd(
    args: list[str] = typer.Argument(..., metavar="DB... SQL",
                                     help="recordings (.db, globs, folders, .jsonl), then the SQL"),
    fmt: OutputFormat = typer.Option(OutputFormat.TABLE, "--format", "-f",
                                     help="table, csv, json or markdown"),
    max_cell: int = typer.Option(80, "--max-cell", help="shorten table cells to this width"),
    unsafe: bool = typer.Option(False, "--unsafe", help="let the SQL reach files (read_csv, "
                                "COPY TO, ATTACH, extensions): your SQL can then read and write "
                                "any file you can. Without it the recordings are read-only and "
                                "the SQL sees nothing else"),
):
    from .output import render
    from .query import query

    if len(args) < 2:
        raise UsageError("give at least one recording and the SQL",
                        'e.g. wire-query "sessions/*.db" "select * from turns"')
    cols, rows = query(args[:-1], args[-1], unsafe=unsafe)
    if cols:
        render(cols, rows, fmt, max_cell=max_cell)


# -- wire-stats --------------------------------------------------------------------------------
stats_app = _app("Summary of recordings: tokens, slowest tools, approval waits, errors.")


@stats_app.command()
def stats_cmd(
    dbs: list[str] = typer.Argument(..., metavar="DB...", help="recordings (.db, globs, folders)"),
    session: list[str] | None = typer.Option(None, "--session", "-s",
                                                help="only this session (id or prefix); repeatable"),
    fmt: SummaryFormat = typer.Option(SummaryFormat.TABLE, "--format", "-f",
                                      help="table or json"),
):
    from .sources import open_workspace
    from .stats import render_summary, summarize

    with open_workspace(dbs) as ws:
        ids = [ws.resolve_session(s) for s in session] if session else None
        summary = summarize(ws, ids)
    if fmt is SummaryFormat.JSON:
        import orjson

        sys.stdout.write(orjson.dumps(summary.as_dict(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        render_summary(summary)


query_main = entry(query_app, QUERY)
stats_main = entry(stats_app, STATS)


# -- wire-show ---------------------------------------------------------------------------------
show_app = _app("A session as a timeline: turns, steps, text, tool calls, approvals, tokens.")


@show_app.command()
def show_cmd(
    db: str = typer.Argument(..., metavar="DB", help="a recording (.db) or a transcript (.jsonl)"),
    session: str | None = typer.Option(None, "--session", "-s", help="session id or prefix"),
    follow: bool = typer.Option(False, "--follow", "-F",
                                help="tail a session that is still being recorded"),
    html_out: str | None = typer.Option(None, "--html", help="write a self-contained HTML "
                                           "report (timeline and token chart) to this file"),
    width: int = typer.Option(100, "--width", help="shorten text, arguments and outputs to this"),
    no_text: bool = typer.Option(False, "--no-text", help="hide text and thinking"),
    wait: float = typer.Option(0.0, "--wait", help="with --follow: wait this many seconds for "
                               "a recording to start"),
):
    from .output import console as make_console
    from .show import follow as follow_live
    from .show import show_frames

    console = make_console(highlight=False, soft_wrap=True)
    emit = console.print
    if follow:
        how = follow_live(db, session, emit, width=width, show_text=not no_text, wait_s=wait)
        if how != "not live":
            return
        console.print("[dim](no live recording found; showing the file as it is)[/]")
    from .sources import open_workspace

    with open_workspace([db], materialize=html_out is not None) as ws:
        sid = ws.resolve_session(session)
        if html_out:
            from .html_report import write_html

            size = write_html(ws, sid, html_out)
            say(SHOW, f"wrote {html_out} ({size:,} bytes)")
            return
        from .export import _frames, _session_row

        show_frames(_session_row(ws, sid), _frames(ws, sid), emit, width=width,
                    show_text=not no_text)


# -- wire-import -------------------------------------------------------------------------------
import_app = _app("Import transcripts (.jsonl) and kimi session logs (wire.jsonl) into a DB.")


@import_app.command()
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
    if quiet or len(paths) < 2 and total < (8 << 20):
        results = import_files(paths, db, replace=replace)
    else:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        with Progress(TextColumn("importing"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                      TextColumn("{task.fields[name]}", markup=False), transient=True) as bar:
            task = bar.add_task("import", total=total, name="")
            results = import_files(paths, db, replace=replace,
                                   progress=lambda p, n: bar.update(task, advance=n,
                                                                    name=os.path.basename(p)))
    if not quiet:
        frames = sum(r["frames"] for r in results)
        say(IMPORT, f"{len(results)} session(s), {frames:,} frames into {db}")


# -- wire-export -------------------------------------------------------------------------------
export_app = _app("Export sessions: text transcript, JSONL, or Parquet partitioned by day.")


@export_app.command()
def export_cmd(
    dbs: list[str] = typer.Argument(..., metavar="DB...", help="recordings (.db, globs, folders)"),
    fmt: ExportFormat = typer.Option(ExportFormat.TRANSCRIPT, "--format", "-f",
                                     help="transcript (default), jsonl or parquet"),
    out: str | None = typer.Option(None, "--out", "-o", help="output file (transcript, "
                                      "jsonl; default stdout) or folder (parquet, required)"),
    session: list[str] | None = typer.Option(None, "--session", "-s", help="session id or "
                                                "prefix; repeatable (parquet: default all)"),
):
    from .export import export_file, export_parquet, write_jsonl, write_transcript
    from .sources import open_workspace

    # the workspace is locked like wire-query's: Parquet goes to --out, and nowhere else
    with open_workspace(dbs, materialize=False, out_dir=out if fmt is ExportFormat.PARQUET
                        else None) as ws:
        if fmt is ExportFormat.PARQUET:
            if not out:
                raise UsageError("--format parquet needs --out FOLDER")
            ids = [ws.resolve_session(s) for s in session] if session else ws.session_ids()
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            with Progress(TextColumn("exporting"), BarColumn(), MofNCompleteColumn(),
                          transient=True, disable=len(ids) < 5) as bar:
                task = bar.add_task("export", total=len(ids))
                files = export_parquet(ws, out, ids, progress=lambda _: bar.advance(task))
            say(EXPORT, f"{len(files)} session(s) into {out}/frames and {out}/sessions "
                        "(partitioned by day)")
            return
        if session and len(session) > 1:
            raise UsageError(f"--format {fmt.value} writes one session", "give one --session")
        sid = ws.resolve_session(session[0] if session else None)
        writer = write_transcript if fmt is ExportFormat.TRANSCRIPT else write_jsonl
        if out and out != "-":
            n = export_file(writer, ws, sid, out)
            say(EXPORT, f"session {sid}, {n:,} frames into {out}")
        else:
            writer(ws, sid, sys.stdout.buffer)
            sys.stdout.flush()


show_main = entry(show_app, SHOW)
import_main = entry(import_app, IMPORT)
export_main = entry(export_app, EXPORT)
