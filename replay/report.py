"""What a replay found, for people (rich text), for programs (JSON) and for CI (JUnit XML)."""

from __future__ import annotations

import io
import os
from typing import Any

import orjson

from wire_recorder.recorder.visible import json_visible, visible

from .driver import ReplayResult
from .origins import resume_hint

SECTIONS = (
    ("model", ("model",), "the agent's model"),
    ("stream", ("changed", "missing", "extra"), "differences in the agent's frames"),
    ("requests", ("unmatched_request",), "live requests with no recorded answer"),
    ("unused", ("unused_request",), "recorded requests never used"),
    ("client", ("client",), "client behaviour"),
    ("run", ("timeout", "agent_exit", "exit_code", "not_reached", "stopped"), "the run"),
)
MARK = {"model": "!", "changed": "~", "missing": "-", "extra": "+", "unmatched_request": "?",
        "unused_request": "-", "client": "!", "timeout": "!", "agent_exit": "!", "exit_code": "!",
        "not_reached": "·"}


def _role(r: ReplayResult) -> str:
    return r.recording.adapter.agent_role  # "server" for MCP


def title(r: ReplayResult) -> str:
    what = "client" if r.mode == "serve" else _role(r)
    n = len(r.divergences)
    if r.ok:
        verdict = "MATCHES the recording"
    elif n:
        verdict = f"DIVERGED ({n} difference{'s' if n != 1 else ''})"
        first = r.first
        if first is not None and first.kind == "model":  # the cause of all the others
            verdict += f": {first.message}"
    else:
        verdict = "DIVERGED (in a session replayed before it)"
    return visible(f"{r.recording.path} [{r.recording.name}]: the {what} {verdict}")


def first_headline(r: ReplayResult) -> str:
    """The first divergence of the run, or of the first origin session that diverged."""
    if r.first is not None:
        return visible(r.first.headline())
    for o in r.origins:
        if not o.ok:
            return visible(f"in origin session {o.recording.session_id}: {first_headline(o)}")
    return "diverged"


def origin_line(o: ReplayResult) -> str:
    verdict = "matches" if o.ok else f"DIVERGED: {first_headline(o)}"
    return visible(f"replayed first: session {o.recording.session_id} [{o.recording.name}], "
                   f"which created the session this one reopens: {verdict}")


def hints(r: ReplayResult) -> list[str]:
    """Likely causes of a divergence that the run itself can tell: timing, a changed work dir."""
    out = []
    if r.timing_hint:
        out.append(r.timing_hint)
    diffs = r.workdir_differences
    if diffs:
        shown = "; ".join(diffs[:5]) + (f"; … {len(diffs) - 5} more" if len(diffs) > 5 else "")
        out.append(f"the work dir is not as it was when the session was recorded: {shown}")
    out += resume_hint(r)
    return out


def summary_line(r: ReplayResult) -> str:
    s = r.stats
    if r.mode == "serve":
        return (f"client: {s.get('received', 0)} frames received, {s.get('emitted', 0)} {_role(r)} "
                f"frames served, {s.get('answers_checked', 0)} answers checked, "
                f"{r.duration_s:.1f}s")
    return (f"{_role(r)}: {s.get('live_agent_frames', 0)} frames ({s.get('recorded_agent_frames', 0)} "
            f"recorded), {s.get('requests_matched', 0)}/{s.get('recorded_requests', 0)} requests "
            f"matched, exit code {r.agent_exit_code}, {r.duration_s:.1f}s")


def render_text(r: ReplayResult, color: bool = False, width: int = 110,
                max_items: int = 30) -> str:
    """The human report. Rich markup is used for colour only; frame text is never markup."""
    from rich.console import Console
    from rich.text import Text

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=color, no_color=not color, width=width,
                  highlight=False, soft_wrap=True)
    con.print(Text(title(r), style="bold green" if r.ok else "bold red"))
    for o in r.origins:
        con.print(Text(origin_line(o), style="dim" if o.ok else "red"))
    for note in r.notes:
        con.print(Text(visible(f"note: {note}"), style="yellow"))
    first = r.first
    if first is not None:
        t = Text("first divergence: ", style="bold")
        t.append(visible(first.headline()))
        con.print(t)
        for line in first.details:
            con.print(_detail(line))
    shown = 0
    for _, kinds, heading in SECTIONS:
        items = [d for d in r.divergences if d.kind in kinds]
        if not items:
            continue
        con.print(Text(f"{heading}:", style="bold"))
        for d in items:
            if shown >= max_items:
                break
            shown += 1
            t = Text(f"  {MARK.get(d.kind, '!')} ", style=_style(d.kind))
            t.append(visible(d.headline()))
            con.print(t)
            if d is not first:
                for line in d.details[:6]:
                    con.print(_detail(line, indent="      "))
    if shown < len(r.divergences):
        con.print(f"  … and {len(r.divergences) - shown} more (see --json)")
    if r.stopped:
        con.print(Text(visible(f"stopped early: {r.stopped}"), style="yellow"))
    if not r.ok:
        for line in hints(r):
            con.print(Text(visible(f"hint: {line}"), style="yellow"))
        tail = _redacted(r.stderr_tail()) if r.mode != "serve" else []
        if tail:
            con.print(Text(f"the {_role(r)}'s stderr (last {len(tail)} lines):", style="bold"))
            for line in tail:
                con.print(Text(visible(f"  | {line}"), style="dim"))
    con.print(Text(summary_line(r), style="dim"))
    return buf.getvalue()


def _style(kind: str) -> str:
    return {"extra": "green", "missing": "red", "changed": "yellow"}.get(kind, "red")


def _detail(line: str, indent: str = "    "):
    from rich.text import Text

    t = Text(indent)
    line = visible(line)
    if " → " in line and ": " in line:
        path, _, rest = line.partition(": ")
        old, _, new = rest.partition(" → ")
        t.append(path + ": ")
        t.append(old, style="red")
        t.append(" → ")
        t.append(new, style="green")
    else:
        t.append(line)
    return t


def to_dict(r: ReplayResult) -> dict[str, Any]:
    first = r.first
    return {
        "ok": r.ok,
        "exit_code": r.exit_code,
        "mode": r.mode,
        "recording": r.recording.path,
        "session_id": r.recording.session_id,
        "name": r.recording.name,
        "argv": _redacted(r.argv),  # the live run's: a key on its command line stays out
        "command": _redacted(r.command),
        "first_divergence": first.to_dict() if first else None,
        "divergences": [d.to_dict() for d in r.divergences],
        "unused_requests": [d.to_dict() for d in r.of_kind("unused_request")],
        "unrecorded_frames": [d.to_dict() for d in r.of_kind("extra")],
        "stopped": r.stopped,
        "agent_exit_code": r.agent_exit_code,
        "duration_s": round(r.duration_s, 3),
        "stats": r.stats,
        "origins": [to_dict(o) for o in r.origins],
        "notes": r.notes,
        "hints": hints(r) if not r.ok else [],
        "workdir_differences": r.workdir_differences,
        "stderr_tail": _redacted(r.stderr_tail()) if r.mode != "serve" else [],
    }


def _redacted(lines: Any) -> Any:
    """The live agent's argv or stderr lines through the recording rules, as its frames are
    (a report is kept and shared like the recording)."""
    from .normalize import _shared_redactor

    if not isinstance(lines, list):
        return lines
    return [_shared_redactor().redact_text(x) if isinstance(x, str) else x for x in lines]


def render_json(r: ReplayResult) -> bytes:
    # the same values with no raw control or bidi character (it may be printed on a terminal)
    return json_visible(orjson.dumps(to_dict(r),
                                     option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))


def render_junit(results: list[ReplayResult]) -> bytes:
    import xml.etree.ElementTree as ET  # only for a JUnit report

    suite = ET.Element("testsuite", name="wire-replay", tests=str(len(results)),
                       failures=str(sum(not r.ok for r in results)), errors="0",
                       time=f"{sum(r.duration_s for r in results):.3f}")
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"wire-replay.{r.mode}",
                             name=visible(f"{os.path.basename(r.recording.path)}::"
                                          f"{r.recording.name}"),
                             time=f"{r.duration_s:.3f}")
        if not r.ok:
            f = ET.SubElement(case, "failure", message=first_headline(r), type="divergence")
            f.text = render_text(r)
        out = ET.SubElement(case, "system-out")
        out.text = summary_line(r)
    return ET.tostring(suite, encoding="utf-8", xml_declaration=True)


def write_report(path: str, r: ReplayResult) -> None:
    """`.xml`: JUnit; `.json`: JSON; anything else: the text report."""
    if path.endswith(".xml"):
        data = render_junit([r])
    elif path.endswith(".json"):
        data = render_json(r)
    else:
        data = render_text(r).encode()
    from wire_recorder.recorder.paths import open_private  # 0600: the report quotes frames

    try:
        with open_private(path) as f:
            f.write(data)
    except OSError as e:
        from wire_recorder.recorder.errors import OutputError

        raise OutputError(f"cannot write the report {path}: {e.strerror}") from None
