"""The frame and session records, and the one registry of their columns.

Each column is declared once, here: its name, SQL type, the schema version that added it and one
line of documentation. Everything else is made from that: the `CREATE TABLE` statements and the
migration steps (`store.py`), the row tuple the loader appends (`Frame.row`, `COLUMNS`), the
select list that reads older files (`Table.select_list`), and the column tables in
`docs/design.md` (`Table.markdown`; a test keeps them equal).

A frame's columns are the fields of `Frame`, in order: the field's metadata carries the rest.
Adding a column means adding a field here (with `since=` the new schema version), raising
`store.SCHEMA_VERSION`, regenerating the docs (`python -m wire_recorder.recorder.model
docs/design.md`) and adding that version's file to tests/data (make_schema_fixtures.py).
"""

from __future__ import annotations

import datetime as _dt
import operator
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

import orjson

Direction = Literal["c2a", "a2c", "stderr", "proxy"]
Kind = Literal["request", "notification", "response", "error", "invalid", "stderr", "lifecycle"]
DIRECTIONS: tuple[str, ...] = get_args(Direction)
KINDS: tuple[str, ...] = get_args(Kind)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    sql_type: str  # a DuckDB type; constraints go in `constraint`
    doc: str  # one line for the docs table
    since: int = 1  # the schema version that added the column
    constraint: str = ""  # "NOT NULL", "PRIMARY KEY" (only in the table's first schema)

    @property
    def ddl(self) -> str:
        return f"{self.name} {self.sql_type} {self.constraint}".rstrip()


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    since: int = 1  # the schema version that created the table


    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def create_sql(self) -> str:
        """The table as the schema that created it made it. Later columns come from `added_in`
        steps, on new files too, so a new file and a migrated old one have the same schema."""
        cols = ",\n".join(f"    {c.ddl}" for c in self.columns if c.since == self.since)
        return f"\nCREATE TABLE IF NOT EXISTS {self.name} (\n{cols}\n)"

    def create_current(self, name: str, *extra: str) -> str:
        """A table of this shape at the current schema, every column in registry order, under
        another name (`extra`: more column definitions after them)."""
        cols = ", ".join([c.ddl for c in self.columns] + list(extra))
        return f"CREATE TABLE {name} ({cols})"

    def added_in(self, version: int) -> list[str]:
        """The statements that bring this table from schema version-1 to `version`: the table
        itself in the version that created it, else the columns that version added."""
        if version == self.since:
            return [self.create_sql()]
        return [f"ALTER TABLE {self.name} ADD COLUMN IF NOT EXISTS {c.ddl}"
                for c in self.columns if c.since == version > self.since]

    def select_list(self, version: int) -> str:
        """Every column, read from a file of schema `version`: NULL for columns added since."""
        return ", ".join(c.name if c.since <= version else f"NULL::{c.sql_type} AS {c.name}"
                         for c in self.columns)

    def markdown(self) -> str:
        rows = [f"| {c.name} | {c.sql_type} | "
                f"{'' if c.since == self.since else f'schema {c.since}: '}{c.doc} |"
                for c in self.columns]
        return "\n".join(["| column | type | meaning |", "|---|---|---|", *rows])


def _col(sql_type: str, doc: str, since: int = 1, constraint: str = "") -> dict[str, Any]:
    return {"column": (sql_type, doc, since, constraint)}


@dataclass(slots=True)
class Frame:
    """One row of `frames`: a frame of either direction, a stderr chunk or a proxy lifecycle
    event. The field order is the column order of the table and of `row()`."""

    session_id: str = field(metadata=_col(
        "VARCHAR", "the session (uuid4 hex string)", constraint="NOT NULL"))
    seq: int = field(metadata=_col(
        "BIGINT", "1-based, per session, across all directions, in the order the proxy saw "
        "frames complete", constraint="NOT NULL"))
    ts: _dt.datetime = field(metadata=_col(
        "TIMESTAMP", "wall clock (UTC) when the frame was complete"))
    mono_ns: int = field(metadata=_col(
        "BIGINT", "CLOCK_MONOTONIC ns when the frame was complete (compare with "
        "`sessions.mono_start_ns`)"))
    direction: str = field(metadata=_col(
        "VARCHAR", "`c2a` client→agent, `a2c` agent→client, `stderr` agent stderr chunk, "
        "`proxy` lifecycle", constraint="NOT NULL"))
    raw: bytes = field(metadata=_col(
        "BLOB", "the exact bytes, without the `\\n` terminator (a `\\r` before it stays); NULL "
        "for frames over 256 KiB, whose bytes are in the sidecar (`blob_offset`)"))
    newline: bool = field(metadata=_col(
        "BOOLEAN", "whether the frame ended with `\\n` (false for a final unterminated frame)"))
    byte_len: int = field(metadata=_col(
        "BIGINT", "length of the frame's bytes (`octet_length(raw)` when raw is inline)"))
    kind: str = field(metadata=_col(
        "VARCHAR", "`request`, `notification`, `response`, `error`, `invalid`; `stderr`; "
        "`lifecycle`"))
    method: str | None = field(metadata=_col(
        "VARCHAR", "JSON-RPC method; for lifecycle rows the event (`spawn`, `exit`, "
        "`client_eof`, `proxy_error`, `recording_gap`, ...)"))
    rpc_id: str | None = field(metadata=_col(
        "VARCHAR", "JSON-RPC id as text (string ids as is, numbers in decimal), NULL when absent "
        "or null"))
    msg_type: str | None = field(metadata=_col(
        "VARCHAR", "the protocol adapter's finer type: Wire `params.type` (`TurnBegin`, "
        "`ApprovalRequest`, ...), ACP `params.update.sessionUpdate` (`tool_call`, "
        "`agent_message_chunk`, ...), MCP none"))
    payload: str | None = field(metadata=_col(
        "JSON", "Wire event/request: `params.payload`; response: `result`; error: `error`; "
        "other requests/notifications (all of ACP and MCP): `params`; lifecycle: details. NULL "
        "for frames over 1 MiB (DuckDB stores MB-sized strings slowly) and for values nested "
        "deeper than 512 levels (`parse_error` says so); the bytes are always kept, in `raw` or "
        "the sidecar"))
    parse_error: str | None = field(metadata=_col(
        "VARCHAR", "why the frame is `invalid` (not UTF-8, not JSON, not JSON-RPC, `jsonrpc` not "
        "`\"2.0\"`, batch)"))
    known: bool | None = field(metadata=_col(
        "BOOLEAN", "the session's protocol knows this method / type (false = stored as is, "
        "flagged; NULL before the protocol is known)"))
    # Set when raw lives in the sidecar file (raw is NULL in the DB); readers resolve it.
    blob_offset: int | None = field(default=None, metadata=_col(
        "BIGINT", "where the bytes of a frame over 256 KiB start in the sidecar (`byte_len` "
        "bytes); NULL when raw holds them", since=2))
    anomaly: str | None = field(default=None, metadata=_col(
        "VARCHAR", "what breaks the protocol in a frame that parsed: a request id reused while a "
        "request with that id is unanswered in the same direction, a method of another protocol "
        "than the session's ([protocols.md](protocols.md))", since=3))

    def row(self) -> tuple:
        """The frame as a row of `frames`, in column order."""
        return _row_of(self)

    def message(self) -> Any:
        """The parsed JSON message, or None for frames that are not JSON."""
        if self.direction not in ("c2a", "a2c"):
            return None
        try:
            return orjson.loads(self.raw)
        except orjson.JSONDecodeError:
            return None


FRAMES = Table("frames", tuple(Column(f.name, *f.metadata["column"]) for f in fields(Frame)))
COLUMNS: tuple[str, ...] = FRAMES.names
_row_of = operator.attrgetter(*COLUMNS)  # one C call builds the whole tuple

# What the frame's context gives a row; every other column is the classifier's field of the same
# name (`classify.Extracted`), and byte_len is len(raw).
ROW_ARGS = ("session_id", "seq", "ts", "mono_ns", "direction", "raw", "newline", "blob_offset")


def _row_builder() -> Callable[..., tuple]:
    # Made from the registry, as dataclasses make __init__: the loader builds 100k+ rows a
    # second, and a plain tuple display costs a tenth of building a Frame.
    parts = [c if c in ROW_ARGS else "len(raw)" if c == "byte_len" else f"ex.{c}"
             for c in COLUMNS]
    src = (f"def frame_row({', '.join(a for a in ROW_ARGS if a != 'blob_offset')}, ex, "
           f"blob_offset=None):\n    return ({', '.join(parts)},)\n")
    ns: dict[str, Any] = {}
    exec(src, ns)
    fn = ns["frame_row"]
    fn.__doc__ = ("A row of `frames` in column order: the frame's context, and what the "
                  "classifier extracted (`ex`, a `classify.Extracted`).")
    return fn


frame_row = _row_builder()

SESSIONS = Table("sessions", (
    Column("session_id", "VARCHAR", "the session (uuid4 hex string)", constraint="PRIMARY KEY"),
    Column("name", "VARCHAR", "the name given with `wire-proxy --name`"),
    Column("started_at", "TIMESTAMP", "wall clock (UTC) when the proxy started"),
    Column("ended_at", "TIMESTAMP", "wall clock (UTC) of the session's last frame; NULL while "
           "it runs"),
    Column("command", "JSON", "the agent's command line (JSON array)"),
    Column("cwd", "VARCHAR", "the proxy's working directory"),
    Column("protocol", "VARCHAR", "`wire`, `acp`, `mcp` (given or detected), or `unknown`"),
    Column("protocol_version", "VARCHAR", "the version the session negotiated (the agent's answer; [protocols.md]"
           "(protocols.md))"),
    Column("agent_pid", "INTEGER", "the agent's process id"),
    Column("exit_code", "INTEGER", "the agent's exit status (128 + N when signal N ended it)"),
    Column("exit_signal", "VARCHAR", "the signal that ended the agent (`SIGTERM`, ...), if one "
           "did"),
    Column("end_reason", "VARCHAR", "`agent_exit`, `proxy_killed` (its loader finished the "
           "recording), `recovered` (by `wire-proxy recover`)"),
    Column("proxy_version", "VARCHAR", "the wire-recorder version that recorded it"),
    Column("tags", "JSON", "`--tag KEY=VALUE` pairs (JSON object)"),
    Column("frame_count", "BIGINT", "client and agent frames recorded (stderr and lifecycle rows "
           "not counted)"),
    Column("lost_frames", "BIGINT", "frames relayed but dropped from the recording (slow disk; "
           "see `recording_gap` rows)"),
    Column("lost_bytes", "BIGINT", "bytes of those frames"),
    Column("source", "VARCHAR", "`proxy`, `transcript`, `kimi-wire-jsonl` (how it got here)"),
    Column("host", "VARCHAR", "the host name of the machine that recorded it"),
    Column("proxy_pid", "INTEGER", "the proxy's process id"),
    Column("mono_start_ns", "BIGINT", "CLOCK_MONOTONIC ns at the proxy's start (`frames.mono_ns`"
           " counts from the same clock)"),
    Column("db_note", "VARCHAR", "why the session is in this file and not the one named (a "
           "sibling file when that one was busy)"),
    Column("redaction", "VARCHAR", "`off` (recorded with `--no-redact`), or a JSON object: the "
           "`rules` that ran, the project `config` file, `notes` (a config that could not be "
           "used); NULL for sessions stored before redaction existed", since=4),
    Column("workdir", "VARCHAR", "the agent's work dir whose manifest `workdir_files` holds "
           "(kimi's `-w`/`--work-dir` when given, else `cwd`)", since=5),
    Column("workdir_manifest", "JSON", "what was taken of the work dir at session start: "
           "`source` (`git` or `walk`), `files`, `bytes`, `snapshot` (files stored too), "
           "`snapshot_files`, `snapshot_bytes`, `cut` (a bound was reached), `notes`; NULL for "
           "sessions stored before schema 5", since=5),
))
SESSION_COLUMNS: tuple[str, ...] = SESSIONS.names

# The agent's work dir at session start (recorder/workdir.py): one row per file or symlink.
WORKDIR_FILES = Table("workdir_files", (
    Column("session_id", "VARCHAR", "the session", since=5, constraint="NOT NULL"),
    Column("path", "VARCHAR", "relative to `sessions.workdir`, `/`-separated", since=5,
           constraint="NOT NULL"),
    Column("kind", "VARCHAR", "`file` or `symlink`", since=5),
    Column("size", "BIGINT", "bytes (a symlink: its target's length)", since=5),
    Column("sha256", "VARCHAR", "hex digest of the file's bytes; NULL when not hashed "
           "(`note` says why: over the hashing budget, unreadable, or a secret was found in it)",
           since=5),
    Column("mode", "INTEGER", "permission bits (`st_mode & 0o7777`)", since=5),
    Column("link", "VARCHAR", "a symlink's target (redacted)", since=5),
    Column("content", "BLOB", "the file's bytes with secrets redacted (`wire-proxy "
           "--snapshot-workdir`); NULL when not snapshotted", since=5),
    Column("note", "VARCHAR", "why the hash or content is missing, or `redacted`", since=5),
), since=5)
WORKDIR_COLUMNS: tuple[str, ...] = WORKDIR_FILES.names
TABLES = (SESSIONS, FRAMES, WORKDIR_FILES)


def command_argv(command: Any) -> list[str] | None:
    """A session's `command` as a list of strings: stored as a JSON array in text, handed around
    as a list; None when it is neither."""
    if isinstance(command, str):
        try:
            command = orjson.loads(command)
        except orjson.JSONDecodeError:
            return None
    return [str(a) for a in command] if isinstance(command, list) else None


def wall_ts(wall_ns: int) -> _dt.datetime:
    """Naive UTC: TIMESTAMPTZ would make every reader depend on pytz."""
    return _dt.datetime.fromtimestamp(wall_ns / 1e9, _dt.UTC).replace(tzinfo=None)


# -- the docs tables ------------------------------------------------------------------------------
DOC_TABLES = (FRAMES, SESSIONS, WORKDIR_FILES)


def _markers(table: Table) -> tuple[str, str]:
    return (f"<!-- columns of {table.name}: generated from recorder/model.py -->",
            f"<!-- end of {table.name} columns -->")


def docs_block(table: Table) -> str:
    """The table as docs/design.md holds it, between markers that `write_docs` finds again."""
    start, end = _markers(table)
    return f"{start}\n{table.markdown()}\n{end}"


def write_docs(text: str) -> str:
    """`text` (docs/design.md) with every column table regenerated."""
    for table in DOC_TABLES:
        start, end = _markers(table)
        i, j = text.index(start), text.index(end) + len(end)
        text = text[:i] + docs_block(table) + text[j:]
    return text


def main(argv: list[str]) -> int:
    """Regenerate the column tables of a design.md: `python -m wire_recorder.recorder.model
    docs/design.md`."""
    if len(argv) != 1:
        sys.stderr.write("usage: python -m wire_recorder.recorder.model docs/design.md\n")
        return 2
    path = os.fspath(argv[0])
    with open(path, encoding="utf-8") as f:
        old = f.read()
    new = write_docs(old)
    if new != old:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
