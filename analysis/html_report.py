"""`wire-show --html out.html`: one self-contained page per session.

Inline CSS and SVG only (no script, no fonts, no network): the page opens from a mail attachment
or a bucket. Numbers come from the analysis views, the same ones `wire-query` reads.
"""

from __future__ import annotations

import datetime as _dt
import html
import math
from typing import Any

from wire_recorder.recorder import protocols
from wire_recorder.recorder.errors import OutputError
from wire_recorder.recorder.paths import open_private
from wire_recorder.recorder.protocols.base import Adapter

from .sources import Workspace

COLORS = {"input_other": "#4e79a7", "input_cache_read": "#59a14f",
          "input_cache_creation": "#edc948", "output": "#e15759"}
# no orange or red: those mean "waiting for the client" and "error"
TOOL_PALETTE = ["#4e79a7", "#76b7b2", "#59a14f", "#b07aa1", "#9c755f", "#bab0ac", "#edc948",
                "#86bcb6", "#8cd17d"]
STATUS_COLORS = {"finished": "#59a14f", "cancelled": "#f28e2b", "error": "#e15759",
                 "max_steps_reached": "#edc948", "incomplete": "#bab0ac"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px}
.meta{color:#666;font-size:12px} .cards{display:flex;gap:12px;flex-wrap:wrap;margin:14px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:110px}
.card b{display:block;font-size:18px} .card span{color:#666;font-size:12px}
table{border-collapse:collapse;font-size:12px} td,th{border-bottom:1px solid #eee;padding:3px 8px;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums} th{background:#f6f6f6}
svg text{font:11px system-ui,sans-serif} .legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.scroll{overflow-x:auto;border:1px solid #eee}
"""


def _esc(s) -> str:
    return html.escape("" if s is None else str(s), quote=True)


def _one(ws: Workspace, sql: str, params) -> Any:
    """The first column of the first row (an aggregate)."""
    row = ws.con.execute(sql, params).fetchone()
    return row[0] if row else None


def _rows(ws: Workspace, sql: str, params) -> list[dict]:
    cur = ws.con.execute(sql, params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _ms(v) -> str:
    if v is None:
        return "–"
    return f"{v:.0f} ms" if v < 10_000 else f"{v / 1000:.1f} s"


def _nice_step(span_ms: float, target: int = 10) -> float:
    raw = max(span_ms / target, 1e-3)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def timeline_svg(ws: Workspace, sid: str, t0_ns: int, width: int = 1100,
                 adapter: Adapter | None = None) -> tuple[str, int]:
    """Turns, steps, tool calls as bars on one time axis; approval waits drawn inside tool bars.
    `adapter` (the session's protocol's) says which requests are approvals."""
    approvals = (adapter or protocols.for_session(None)).approval_types
    turns = _rows(ws, """
        SELECT t.turn, t.status, t.user_input, t.total_tokens,
            (f.mono_ns - ?) / 1e6 AS start_ms, coalesce(t.duration_ms, t.response_ms, 0) AS dur
        FROM turns t JOIN frames f ON f.session_id = t.session_id AND f.seq = t.seq
        WHERE t.session_id = ? ORDER BY t.turn""", [t0_ns, sid])
    steps = _rows(ws, """
        SELECT s.turn, s.step, (f.mono_ns - ?) / 1e6 AS start_ms, coalesce(s.duration_ms, 0) AS dur,
            s.total_tokens, s.interrupted, s.retries
        FROM steps s JOIN frames f ON f.session_id = s.session_id AND f.seq = s.seq
        WHERE s.session_id = ? ORDER BY s.seq""", [t0_ns, sid])
    tools = _rows(ws, """
        SELECT c.tool_name, c.tool_call_id, c.duration_ms, c.is_error, c.agent_id,
            (f.mono_ns - ?) / 1e6 AS start_ms, c.approval, c.approval_wait_ms, c.external_wait_ms,
            c.arguments
        FROM tool_calls c JOIN frames f ON f.session_id = c.session_id AND f.seq = c.seq
        WHERE c.session_id = ? ORDER BY c.seq""", [t0_ns, sid])
    appr = _rows(ws, """
        SELECT r.type, r.tool_call_id, r.subject, r.outcome, r.wait_ms, r.resolved_by,
            r.agent_resolved_ms, (f.mono_ns - ?) / 1e6 AS start_ms
        FROM requests r JOIN frames f ON f.session_id = r.session_id AND f.seq = r.seq
        WHERE r.session_id = ? ORDER BY r.seq""", [t0_ns, sid])
    end_ms = max([t["start_ms"] + (t["dur"] or 0) for t in turns] +
                 [(c["start_ms"] or 0) + (c["duration_ms"] or 0) for c in tools] +
                 [(a["start_ms"] or 0) + (a["wait_ms"] or a["agent_resolved_ms"] or 0) for a in appr] + [1.0])
    left, right = 90, 20
    plot_w = width - left - right
    x = lambda ms: left + plot_w * max(0.0, ms) / end_ms  # noqa: E731
    w = lambda ms: max(1.5, plot_w * max(0.0, ms or 0) / end_ms)  # noqa: E731

    # tool calls packed into lanes so overlapping calls (parallel, subagents) stay visible
    lanes: list[float] = []
    placed = []
    for c in tools:
        s = c["start_ms"] or 0
        e = s + (c["duration_ms"] or 0)
        for i, free_at in enumerate(lanes):
            if free_at <= s:
                lanes[i] = e + end_ms * 0.004
                placed.append((i, c))
                break
        else:
            lanes.append(e + end_ms * 0.004)
            placed.append((len(lanes) - 1, c))
    names = sorted({c["tool_name"] or "?" for c in tools})
    color = {n: TOOL_PALETTE[i % len(TOOL_PALETTE)] for i, n in enumerate(names)}

    row_h, gap = 22, 6
    y_turn, y_step = 24, 24 + row_h + gap
    y_req = y_step + row_h + gap
    y_tool0 = y_req + row_h + gap
    height = y_tool0 + max(1, len(lanes)) * (row_h - 4 + 3) + 34
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="session timeline">']
    for label, y in (("turns", y_turn), ("steps", y_step), ("requests", y_req), ("tool calls", y_tool0)):
        parts.append(f'<text x="6" y="{y + 15}" fill="#444">{label}</text>')
    # axis
    step = _nice_step(end_ms)
    axis_y = height - 22
    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{width - right}" y2="{axis_y}" stroke="#999"/>')
    k = 0
    while k * step <= end_ms * 1.0001:
        xx = x(k * step)
        lab = f"{k * step / 1000:g} s" if step >= 100 else f"{k * step:g} ms"
        parts.append(f'<line x1="{xx:.1f}" y1="16" x2="{xx:.1f}" y2="{axis_y + 4}" stroke="#eee"/>'
                     f'<text x="{xx:.1f}" y="{axis_y + 16}" text-anchor="middle" fill="#666">{lab}</text>')
        k += 1
    for t in turns:
        fill = STATUS_COLORS.get(t["status"], "#bab0ac")
        tokens = "no token counts" if t["total_tokens"] is None else f"{t['total_tokens']:,} tokens"
        tip = (f"turn {t['turn']} ({t['status']}): {_ms(t['dur'])}, {tokens}\n"
               f"{(t['user_input'] or '')[:200]}")
        parts.append(f'<rect class="turn" x="{x(t["start_ms"]):.1f}" y="{y_turn}" width="{w(t["dur"]):.1f}" '
                     f'height="{row_h}" rx="3" fill="{fill}" fill-opacity="0.85"><title>{_esc(tip)}</title></rect>')
        if w(t["dur"]) > 40:
            parts.append(f'<text x="{x(t["start_ms"]) + 4:.1f}" y="{y_turn + 15}" fill="#fff">turn {t["turn"]}</text>')
    for i, s in enumerate(steps):
        fill = "#e15759" if s["interrupted"] else ("#9ecae9" if i % 2 else "#6baed6")
        tip = f"turn {s['turn']} step {s['step']}: {_ms(s['dur'])}, {s['total_tokens']:,} tokens" + \
            (f", {s['retries']} retries" if s["retries"] else "") + (", interrupted" if s["interrupted"] else "")
        parts.append(f'<rect class="step" x="{x(s["start_ms"]):.1f}" y="{y_step}" width="{w(s["dur"]):.1f}" '
                     f'height="{row_h}" fill="{fill}"><title>{_esc(tip)}</title></rect>')
    for a in appr:
        wait = a["wait_ms"] if a["wait_ms"] is not None else a["agent_resolved_ms"]
        fill = "#f28e2b" if a["type"] in approvals else "#b07aa1"
        tip = (f"{a['type']} {a['subject'] or ''}: {a['outcome']} by {a['resolved_by'] or '?'} "
               f"after {_ms(wait)}")
        parts.append(f'<rect class="wait" x="{x(a["start_ms"]):.1f}" y="{y_req}" width="{w(wait):.1f}" '
                     f'height="{row_h}" fill="{fill}" fill-opacity="0.9"><title>{_esc(tip)}</title></rect>')
        if w(wait) > 60:
            parts.append(f'<text x="{x(a["start_ms"]) + 3:.1f}" y="{y_req + 15}" fill="#fff">'
                         f'{_esc(a["outcome"])} {_esc(_ms(wait))}</text>')
    for lane, c in placed:
        y = y_tool0 + lane * (row_h - 1)
        dur = c["duration_ms"]
        fill = "#e15759" if c["is_error"] else color[c["tool_name"] or "?"]
        unfinished = dur is None
        tip = (f"{c['tool_name']} {c['tool_call_id']}: {_ms(dur) if not unfinished else 'no result'}"
               + (" (error)" if c["is_error"] else "")
               + (f"\napproval {c['approval']} after {_ms(c['approval_wait_ms'])}" if c["approval"] else "")
               + (f"\nsubagent {c['agent_id']}" if c["agent_id"] else "")
               + f"\n{(c['arguments'] or '')[:200]}")
        bw = w(dur if not unfinished else end_ms - (c["start_ms"] or 0))
        style = 'fill-opacity="0.35" stroke="#999" stroke-dasharray="3 2"' if unfinished else ""
        parts.append(f'<rect class="tool" x="{x(c["start_ms"]):.1f}" y="{y}" width="{bw:.1f}" height="{row_h - 4}" '
                     f'rx="2" fill="{fill}" {style}><title>{_esc(tip)}</title></rect>')
        wait = c["approval_wait_ms"] or c["external_wait_ms"]
        if wait:
            parts.append(f'<rect class="approval" x="{x(c["start_ms"]):.1f}" y="{y + 3}" width="{w(wait):.1f}" '
                         f'height="{row_h - 10}" fill="#f28e2b"><title>{_esc("waiting for the client: " + _ms(wait))}</title></rect>')
        if bw > 50:
            parts.append(f'<text x="{x(c["start_ms"]) + 3:.1f}" y="{y + 13}" fill="#fff">{_esc(c["tool_name"])}</text>')
    parts.append("</svg>")
    legend = "".join(f'<span><i style="background:{color[n]}"></i>{_esc(n)}</span>' for n in names)
    legend += ('<span><i style="background:#f28e2b"></i>approval wait</span>'
               '<span><i style="background:#e15759"></i>error / interrupted</span>')
    return f'<div class="scroll">{"".join(parts)}</div><div class="legend">{legend}</div>', len(tools)


def tokens_svg(ws: Workspace, sid: str, width: int = 1100) -> str:
    steps = _rows(ws, """SELECT turn, step, input_other, input_cache_read, input_cache_creation,
                            output, total_tokens + subagent_tokens AS t, subagent_tokens
                         FROM steps WHERE session_id = ? ORDER BY seq""", [sid])
    if not steps:
        return "<p>No steps recorded.</p>"
    top = max(s["t"] for s in steps) or 1
    left, bottom, h = 70, 40, 240
    n = len(steps)
    bw = max(4.0, min(40.0, (width - left - 20) / n * 0.8))
    slot = (width - left - 20) / n
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h + bottom + 10}" '
             f'role="img" aria-label="tokens per step">']
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        y = 10 + h * (1 - frac)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - 20}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#666">{int(top * frac):,}</text>')
    for i, s in enumerate(steps):
        xx = left + i * slot + (slot - bw) / 2
        y = 10 + h
        tip_parts = []
        for key in ("input_other", "input_cache_read", "input_cache_creation", "output"):
            v = s[key] or 0
            bh = h * v / top
            y -= bh
            tip_parts.append(f"{key} {v:,}")
            if bh > 0:
                parts.append(f'<rect class="tok" x="{xx:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{bh:.1f}" '
                             f'fill="{COLORS[key]}"><title>turn {s["turn"]} step {s["step"]}: {key} {v:,}</title></rect>')
        if s["subagent_tokens"]:
            bh = h * s["subagent_tokens"] / top
            y -= bh
            parts.append(f'<rect x="{xx:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{bh:.1f}" fill="#b07aa1">'
                         f'<title>subagents {s["subagent_tokens"]:,}</title></rect>')
        if n <= 40 or i % max(1, n // 40) == 0:
            parts.append(f'<text x="{xx + bw / 2:.1f}" y="{h + 26}" text-anchor="middle" fill="#666">'
                         f'{s["turn"]}.{s["step"]}</text>')
    parts.append(f'<text x="{left}" y="{h + 42}" fill="#666">turn.step</text></svg>')
    legend = "".join(f'<span><i style="background:{c}"></i>{k}</span>' for k, c in COLORS.items())
    legend += '<span><i style="background:#b07aa1"></i>subagents</span>'
    return f'<div class="scroll">{"".join(parts)}</div><div class="legend">{legend}</div>'


def _table(rows: list[dict], cols: list[tuple[str, str]]) -> str:
    if not rows:
        return "<p>none</p>"
    head = "".join(f"<th>{_esc(label)}</th>" for _, label in cols)
    body = []
    for r in rows:
        tds = []
        for key, _ in cols:
            v = r.get(key)
            num = isinstance(v, (int, float)) and not isinstance(v, bool)
            if isinstance(v, float):
                v = f"{v:,.1f}"
            elif isinstance(v, int) and not isinstance(v, bool):
                v = f"{v:,}"
            elif isinstance(v, str) and len(v) > 80:
                v = v[:79] + "…"
            tds.append(f'<td{" class=n" if num else ""}>{_esc(v)}</td>')
        body.append("<tr>" + "".join(tds) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def render_html(ws: Workspace, sid: str) -> str:
    s = _rows(ws, "SELECT * FROM sessions WHERE session_id = ?", [sid])[0]
    # The axis starts at the first prompt (or turn): the agent's start-up would otherwise take
    # a good part of a short session's width. The protocol's adapter says what starts a turn.
    adapter = protocols.for_session(s.get("protocol"))
    t0 = _one(ws, """SELECT min(mono_ns) FROM wr_events WHERE session_id = ?
                     AND (list_contains(?::VARCHAR[], type) OR list_contains(?::VARCHAR[], method))""",
              [sid, sorted(adapter.turn_begin_types), sorted(adapter.turn_methods)])
    if t0 is None:
        t0 = _one(ws, "SELECT min(mono_ns) FROM frames WHERE session_id = ?", [sid]) or 0
    tot = _rows(ws, """SELECT count(*) AS turns, sum(steps) AS steps, sum(total_tokens) AS tokens,
                           sum(input_cache_read) AS cr,
                           sum(input_other + input_cache_read + input_cache_creation) AS inp,
                           sum(output) AS out FROM turns WHERE session_id = ?""", [sid])[0]
    tc = _rows(ws, """SELECT count(*) AS n, count(*) FILTER (WHERE is_error) AS err,
                          count(*) FILTER (WHERE approval_requested) AS appr,
                          sum(approval_wait_ms) AS wait FROM tool_calls
                       WHERE session_id = ? AND NOT history""", [sid])[0]
    # the same rows as the errors table below (stderr lines count only when they say a failure)
    nerr = _one(ws, "SELECT count(*) FROM errors WHERE session_id = ?", [sid])
    ratio = f"{(tot['cr'] or 0) / tot['inp']:.1%}" if tot["inp"] else "n/a"
    cards = [("turns", tot["turns"]), ("steps", tot["steps"] or 0), ("tokens", f"{tot['tokens'] or 0:,}"),
             ("cache hit", ratio), ("output tokens", f"{tot['out'] or 0:,}"), ("tool calls", tc["n"]),
             ("failed tools", tc["err"]), ("approvals", tc["appr"]),
             ("human wait", _ms(tc["wait"]) if tc["wait"] else "–"), ("errors", nerr)]
    timeline, _ = timeline_svg(ws, sid, t0, adapter=adapter)
    turns = _rows(ws, """SELECT turn, status, steps, tool_calls, total_tokens, input_cache_read,
                            output, duration_ms, user_input FROM turns WHERE session_id = ? ORDER BY turn""", [sid])
    slow = _rows(ws, """SELECT tool_name, tool_call_id, duration_ms, is_error, approval,
                           approval_wait_ms, agent_id, arguments FROM tool_calls
                        WHERE session_id = ? ORDER BY duration_ms DESC NULLS FIRST LIMIT 20""", [sid])
    reqs = _rows(ws, """SELECT type, subject, outcome, resolved_by, wait_ms, agent_resolved_ms
                        FROM requests WHERE session_id = ? ORDER BY seq""", [sid])
    errs = _rows(ws, """SELECT source, code, message, related FROM errors WHERE session_id = ?
                        ORDER BY seq LIMIT 50""", [sid])
    started = s.get("started_at")
    started = started.isoformat(sep=" ", timespec="seconds") if isinstance(started, _dt.datetime) else started
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>wire session {_esc(sid)}</title><style>{CSS}</style></head><body>
<h1>Session {_esc(sid)}</h1>
<div class="meta">started {_esc(started)} UTC · {_esc(s.get('source'))} · protocol {_esc(s.get('protocol'))}
{_esc(s.get('protocol_version') or '')} · {_esc(s.get('frame_count'))} frames · {_esc(s.get('end_reason') or '')}</div>
<div class="cards">{''.join(f'<div class="card"><b>{_esc(v)}</b><span>{_esc(k)}</span></div>' for k, v in cards)}</div>
<h2>Timeline</h2>
<p class="meta">Time since the first prompt. Hover a bar for details. Orange: time the agent waited for the client (approvals,
external tools, questions); dashed: a tool call without a result.</p>
{timeline}
<h2>Tokens per step</h2>
{tokens_svg(ws, sid)}
<h2>Turns</h2>
{_table(turns, [("turn", "turn"), ("status", "status"), ("steps", "steps"), ("tool_calls", "tools"),
                ("total_tokens", "tokens"), ("input_cache_read", "cache read"), ("output", "output"),
                ("duration_ms", "ms"), ("user_input", "user input")])}
<h2>Slowest tool calls</h2>
{_table(slow, [("tool_name", "tool"), ("tool_call_id", "id"), ("duration_ms", "ms"), ("is_error", "error"),
               ("approval", "approval"), ("approval_wait_ms", "wait ms"), ("agent_id", "subagent"),
               ("arguments", "arguments")])}
<h2>Requests to the client</h2>
{_table(reqs, [("type", "type"), ("subject", "subject"), ("outcome", "outcome"), ("resolved_by", "by"),
               ("wait_ms", "wait ms"), ("agent_resolved_ms", "agent resolved ms")])}
<h2>Errors</h2>
{_table(errs, [("source", "source"), ("code", "code"), ("message", "message"), ("related", "related")])}
<p class="meta">Generated by wire-show from the analysis views (docs/analysis.md).</p>
</body></html>
"""


def write_html(ws: Workspace, sid: str, path: str) -> int:
    """The session's page into `path`, a file only its owner reads (the page quotes the
    recording); returns its size in characters."""
    page = render_html(ws, sid)
    try:
        with open_private(path, "w") as f:
            f.write(page)
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror}") from None
    return len(page)
