"""`wire-stats`: the summary people ask for first, over one session or many, of any protocol.

Every number comes from the analysis views, so `wire-query` can reproduce any of it. Tools and
requests are grouped by protocol too: a Wire `Shell` and an ACP `Shell` are different things.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wire_recorder.recorder import protocols as registry

from .sources import Workspace
from .summary import summary_tables
from .views import MATERIALIZED, install_views

TOP_TURNS = 15
TOP_TOOLS = 15
TOP_ERRORS = 10


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[tuple]
    note: str | None = None


@dataclass
class Summary:
    overview: dict[str, Any]
    tables: list[Table] = field(default_factory=list)

    def as_dict(self) -> dict:
        from .output import plain

        return {"overview": plain(self.overview),
                **{t.title: [dict(zip(t.columns, map(plain, r), strict=True)) for r in t.rows]
                   for t in self.tables}}


def _where(session_ids: list[str] | None) -> tuple[str, list]:
    if not session_ids:
        return "", []
    return f" WHERE session_id IN ({', '.join('?' * len(session_ids))})", list(session_ids)


# the steps summarize reports to its progress callback
STEPS = 7


def _materialize(con) -> None:
    """The views, their shared tables computed once, before sessions without a stored summary
    are read through them (a workspace opened without views, or with plain ones)."""
    if con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'temp' "
                   "AND table_name = 'wr_events'").fetchone()[0]:
        return
    present = {r[0] for r in con.execute("SELECT DISTINCT protocol FROM sessions").fetchall()}
    for name in sorted(MATERIALIZED):  # a view is not replaced by a table of its name
        con.execute(f"DROP VIEW IF EXISTS {name}")
    install_views(con, temp=True, materialize=True, protocols=present)


def summarize(ws: Workspace, session_ids: list[str] | None = None,
              progress: Callable[[str], None] | None = None) -> Summary:
    con = ws.con
    w, p = _where(session_ids)
    step = progress or (lambda _name: None)
    # One row per session, stored at load time (analysis.summary) or computed through the
    # views when a file holds none: lists of the turns, tool calls, requests and errors that
    # the summary reads, unnested here into small temp tables.
    summary_tables(con, session_ids, materialize=lambda: _materialize(con))
    step("summaries")
    con.execute("""
        CREATE OR REPLACE TEMP TABLE st_turns AS
        SELECT t.session_id, n.name, t.* EXCLUDE (session_id)
        FROM (SELECT session_id, unnest(turn_rows, recursive := true) FROM st_sum) t
        LEFT JOIN (SELECT session_id, any_value(name) AS name FROM sessions GROUP BY ALL) n
            ON n.session_id = t.session_id""")
    step("turns")
    con.execute("CREATE OR REPLACE TEMP TABLE st_tools AS "
                "SELECT unnest(tool_rows, recursive := true) FROM st_sum")
    step("tool calls")
    con.execute("CREATE OR REPLACE TEMP TABLE st_requests AS "
                "SELECT unnest(request_rows, recursive := true) FROM st_sum")
    step("requests")
    # (grouped as the errors table shows them: source, code, message, n)
    con.execute("CREATE OR REPLACE TEMP TABLE st_errors AS "
                "SELECT unnest(error_rows, recursive := true) FROM st_sum")
    step("errors")

    sess = con.execute(
        f"SELECT count(*), min(started_at), max(coalesce(ended_at, started_at)), "
        f"sum(frame_count) FROM sessions{w}", p).fetchone()
    tok = con.execute("""
        SELECT count(*), sum(steps), sum(input_other), sum(input_cache_read),
            sum(input_cache_creation), sum(output), sum(total_tokens), sum(subagent_tokens),
            count(*) FILTER (WHERE status <> 'finished')
        FROM st_turns""").fetchone()
    assert sess is not None and tok is not None  # aggregates without GROUP BY: always one row
    n_turns, steps, i_other, i_read, i_create, out, total, sub, unfinished = tok
    inp = (i_other or 0) + (i_read or 0) + (i_create or 0)
    overview = {
        "sessions": sess[0], "first_started": sess[1], "last_ended": sess[2],
        "frames": sess[3] or 0, "turns": n_turns, "steps": steps or 0,
        "input_tokens": inp, "input_other": i_other or 0, "input_cache_read": i_read or 0,
        "input_cache_creation": i_create or 0, "output_tokens": out or 0,
        "total_tokens": total or 0, "subagent_tokens": sub or 0,
        "cache_hit_ratio": round((i_read or 0) / inp, 4) if inp else None,
        "turns_not_finished": unfinished or 0,
    }
    overview["protocols"] = _by_protocol(con, w, p)
    from wire_recorder.recorder.sessions import label

    overview["session_names"] = [label({"session_id": sid, "name": name}) for sid, name in
                                 con.execute(f"SELECT session_id, name FROM sessions{w} "
                                             "ORDER BY started_at, session_id", p).fetchall()]
    s = Summary(overview)

    many = (sess[0] or 0) > 1
    key = "session_id, name, turn" if many else "turn"
    turn_rows = con.execute(f"""
        SELECT {key}, status, steps, input_other + input_cache_read + input_cache_creation,
            input_cache_read, output, total_tokens,
            round(input_cache_read / nullif(input_other + input_cache_read + input_cache_creation, 0), 3),
            left(regexp_replace(coalesce(user_input, ''), '\\s+', ' ', 'g'), 30)
        FROM st_turns ORDER BY total_tokens DESC, {key} LIMIT {TOP_TURNS}""").fetchall()
    cols = (["session", "name", "turn"] if many else ["turn"]) + [
        "status", "steps", "input", "cache_read", "output", "total", "cache_hit", "user_input"]
    if not many:
        turn_rows.sort(key=lambda r: r[0])
    note = None
    if n_turns > TOP_TURNS:
        note = f"the {TOP_TURNS} of {n_turns} turns with most tokens"
    turn_rows.append(tuple(["total"] + (["", ""] if many else []) + [
        "", steps or 0, inp, i_read or 0, out or 0, total or 0, overview["cache_hit_ratio"], ""]))
    s.tables.append(Table("tokens per turn", cols, turn_rows, note))
    _context(con, s, w, p, many)
    step("tables")

    tools = con.execute(f"""
        SELECT protocol, tool_name, count(*) AS calls, count(*) FILTER (WHERE is_error) AS errors,
            count(*) FILTER (WHERE duration_ms IS NULL) AS unfinished,
            round(quantile_cont(duration_ms, 0.5), 1) AS p50_ms,
            round(quantile_cont(duration_ms, 0.95), 1) AS p95_ms,
            round(max(duration_ms), 1) AS max_ms,
            count(*) FILTER (WHERE agent_id IS NOT NULL) AS in_subagents,
            sum(input_rounds) AS input_rounds
        FROM st_tools GROUP BY protocol, tool_name
        ORDER BY p95_ms DESC NULLS LAST, calls DESC, protocol, tool_name LIMIT {TOP_TOOLS}""").fetchall()
    s.tables.append(Table("slowest tools", ["protocol", "tool", "calls", "errors", "unfinished",
                                            "p50_ms", "p95_ms", "max_ms", "in_subagents",
                                            "input_rounds"], tools))

    reqs = con.execute("""
        SELECT protocol, type, via, outcome, resolved_by, count(*) AS n,
            round(quantile_cont(wait_ms, 0.5), 1), round(quantile_cont(wait_ms, 0.95), 1),
            round(max(wait_ms), 1)
        FROM st_requests GROUP BY ALL
        ORDER BY protocol, type, via, n DESC, outcome, resolved_by""").fetchall()
    s.tables.append(Table("approvals and other requests (wait = request to client answer)",
                          ["protocol", "type", "via", "outcome", "by", "count", "p50_wait_ms",
                           "p95_wait_ms", "max_wait_ms"], reqs))

    errs = con.execute(f"""
        SELECT source, code, message AS msg, sum(n)::BIGINT AS n
        FROM st_errors GROUP BY ALL ORDER BY n DESC, source, code, msg
        LIMIT {TOP_ERRORS}""").fetchall()
    counts = con.execute("SELECT source, sum(n)::BIGINT FROM st_errors GROUP BY 1 "
                         "ORDER BY 2 DESC, 1").fetchall()
    overview["errors"] = {k: v for k, v in counts}
    s.tables.append(Table("errors", ["source", "code", "message", "count"], errs))
    step("")
    return s


def _context(con, s: Summary, w: str, p: list, many: bool) -> None:
    """How full the context was after each turn, for protocols that say only that (ACP's
    usage_update: used of size tokens), read from the token_usage view; nothing otherwise, so
    a summary of other protocols costs no view."""
    if not any(getattr(registry.for_session(name), "reports_context", False)
               for name in s.overview.get("protocols", {})):
        return
    _materialize(con)
    key = "session_id, name, turn" if many else "turn"
    rows = con.execute(f"""
        SELECT {key}, arg_max(context_tokens, seq) AS used, arg_max(max_context_tokens, seq) AS size,
            round(arg_max(context_usage, seq), 4) AS usage
        FROM token_usage
        WHERE context_tokens IS NOT NULL AND total IS NULL AND NOT history
            {w.replace(' WHERE ', ' AND ')}
        GROUP BY ALL ORDER BY {key}""", p).fetchall()
    if not rows:
        return
    s.overview["context_tokens"] = rows[-1][-3]
    s.overview["max_context_tokens"] = rows[-1][-2]
    s.tables.append(Table("context per turn (tokens used of the window)",
                          (["session", "name", "turn"] if many else ["turn"])
                          + ["used", "size", "usage"], rows))


def _by_protocol(con, w: str, p: list) -> dict[str, dict]:
    """Per protocol: sessions, turns, tool calls (failed, p50/p95 duration), requests to the
    client (median wait), MCP input_required rounds and the client's time answering them."""
    out: dict[str, dict] = {}
    for proto, n in con.execute(f"SELECT coalesce(protocol, 'unknown'), count(*) FROM sessions{w} "
                                "GROUP BY 1 ORDER BY 1", p).fetchall():
        out[proto] = {"sessions": n, "turns": 0, "tool_calls": 0, "tool_errors": 0,
                      "tool_p50_ms": None, "tool_p95_ms": None, "requests": 0,
                      "request_p50_wait_ms": None, "input_rounds": 0, "input_wait_ms": 0.0}
    for proto, n in con.execute("SELECT protocol, count(*) FROM st_turns GROUP BY 1").fetchall():
        out.setdefault(proto, {})["turns"] = n
    for proto, n, errs, p50, p95, rounds, rwait in con.execute("""
            SELECT protocol, count(*), count(*) FILTER (WHERE is_error),
                round(quantile_cont(duration_ms, 0.5), 1), round(quantile_cont(duration_ms, 0.95), 1),
                coalesce(sum(input_rounds), 0), round(coalesce(sum(input_wait_ms), 0), 1)
            FROM st_tools GROUP BY 1""").fetchall():
        out.setdefault(proto, {}).update(tool_calls=n, tool_errors=errs, tool_p50_ms=p50,
                                         tool_p95_ms=p95, input_rounds=int(rounds),
                                         input_wait_ms=rwait)
    for proto, n, p50 in con.execute("""
            SELECT protocol, count(*), round(quantile_cont(wait_ms, 0.5), 1)
            FROM st_requests GROUP BY 1""").fetchall():
        out.setdefault(proto, {}).update(requests=n, request_p50_wait_ms=p50)
    return out


def _protocol_line(protos: dict[str, dict]) -> str:
    from wire_recorder.recorder.protocols.render import esc

    parts = []
    for name, f in protos.items():
        bits = [f"{f.get('sessions', 0)} session(s)"]
        if f.get("turns") or registry.for_session(name).turn_methods:
            bits.append(f"{f.get('turns', 0)} turns")
        tools = f"{f.get('tool_calls', 0)} tool calls"
        if f.get("tool_calls"):
            tools += f" ({f.get('tool_errors', 0)} failed, p50 {f.get('tool_p50_ms')} ms)"
        bits.append(tools)
        if f.get("requests"):
            bits.append(f"{f['requests']} requests to the client (p50 wait "
                        f"{f.get('request_p50_wait_ms')} ms)")
        if f.get("input_rounds"):
            bits.append(f"{f['input_rounds']} input_required rounds (client "
                        f"{f.get('input_wait_ms')} ms)")
        parts.append(f"[bold]{esc(name)}[/] " + esc(", ".join(bits)))
    return "protocols: " + "; ".join(parts)


def _sessions_title(o: dict) -> str:
    names = o.get("session_names") or []
    if o["sessions"] == 1 and names:
        return f"session {names[0]}"
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return f"{o['sessions']} sessions" + (f" ({shown})" if shown else "")


def render_summary(s: Summary, out=None) -> None:
    from wire_recorder.recorder.protocols.render import esc

    from .output import console as make_console
    from .output import render

    console = make_console(file=out or sys.stdout, soft_wrap=False)
    if not console.is_terminal:
        console.width = 160
    o = s.overview
    ratio = f"{o['cache_hit_ratio']:.1%}" if o["cache_hit_ratio"] is not None else "n/a"
    errors = esc(", ".join(f"{k} {v}" for k, v in o.get("errors", {}).items()) or "none")
    # no token line when no session's protocol could have any (ACP and MCP carry none)
    tokens = o["total_tokens"] or any(registry.for_session(p).reports_tokens
                                      for p in o.get("protocols", {None: 1}))
    console.print(
        f"[bold]{esc(_sessions_title(o))}[/], {o['turns']} turns, {o['steps']} steps, "
        f"{o['frames']:,} frames\n"
        + (f"tokens: [bold]{o['total_tokens']:,}[/] = input {o['input_tokens']:,} "
           f"(uncached {o['input_other']:,}, cache read {o['input_cache_read']:,}, "
           f"cache write {o['input_cache_creation']:,}) + output {o['output_tokens']:,}; "
           f"cache hit ratio [bold]{ratio}[/]"
           + (f"; subagents {o['subagent_tokens']:,}" if o["subagent_tokens"] else "") + "\n"
           if tokens else "")
        + (f"context: [bold]{o['context_tokens']:,}[/] of {o['max_context_tokens']:,} tokens "
           "after the last turn\n" if o.get("context_tokens") is not None
           and o.get("max_context_tokens") is not None else "")
        + f"errors: {errors}"
        + ("\n" + _protocol_line(o["protocols"]) if o.get("protocols") else ""))
    for t in s.tables:
        if t.title == "tokens per turn" and not o["turns"]:
            continue  # only the total row (MCP has no turns)
        if not t.rows:
            console.print(f"[dim]{esc(t.title)}: none[/]")
            continue
        render(t.columns, t.rows, "table", out=console.file,
               title=t.title + (f" ({t.note})" if t.note else ""))
