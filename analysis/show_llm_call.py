"""`wire-show --llm-call N`: one model call of a session recorded with `wire-proxy --llm`, as the
agent sent and received it: the request (headers without secrets, the body pretty-printed), the
answer as it streamed in (each piece with its time since the request), and the prompt diff
against the call before (analysis/llm_detail.py, which wire-ui shows too).

Everything is bounded (a body past `max_body` bytes, pieces past `MAX_PIECES` say how much more
there is) and every recorded character goes through `esc` (recorder/visible.py): a recording
cannot drive the terminal."""

from __future__ import annotations

import base64
from typing import Any

import orjson

from wire_recorder.recorder.errors import InputError
from wire_recorder.recorder.protocols.render import esc, short

# pieces of a streamed answer shown (the first ones); the rest are counted
MAX_PIECES = 60
IND = "    "


def _pretty(text: str) -> str:
    """JSON indented (keys in their order); anything else as it is."""
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONDecodeError:
        return text


def bounded(text: str, max_bytes: int, indent: str = IND) -> list[str]:
    """`text`'s lines up to `max_bytes` bytes (UTF-8), each made safe; past that a line saying
    how many bytes more."""
    data = text.encode("utf-8")
    shown = data[:max_bytes].decode("utf-8", "ignore")  # never half a character
    rest = len(data) - len(shown.encode("utf-8"))
    out = [f"{indent}{esc(line)}" for line in shown.split("\n")]
    if rest:
        out.append(f"{indent}[yellow]… {rest:,} more bytes[/]")
    return out


def _headers(pairs: Any, secret: list[str], indent: str) -> list[str]:
    out = [f"{indent}{esc(k)}: {esc(v)}" for k, v in (pairs or [])
           if isinstance(k, str)]
    if secret:
        out.append(f"{indent}[dim](left out, never stored: {esc(', '.join(secret))})[/]")
    return out


def _body_bytes(text: str | None, b64: bool) -> bytes:
    if text is None:
        return b""
    return base64.b64decode(text) if b64 else text.encode("utf-8")


def pieces(body: bytes, times: list, width: int) -> list[str]:
    """The answer cut where it arrived: per piece its time since the request, its size and its
    bytes on one line."""
    out, at = [], 0
    for i, t in enumerate(times):
        size = int(t[1]) if isinstance(t, list | tuple) and len(t) > 1 else 0
        part = body[at:at + size]
        at += size
        if i == MAX_PIECES:
            left = times[i:]
            more = sum(int(x[1]) for x in left if isinstance(x, list | tuple) and len(x) > 1)
            out.append(f"{IND * 2}[yellow]… {len(left):,} more pieces ({more:,} bytes)[/]")
            break
        ms = t[0] if isinstance(t, list | tuple) and t and isinstance(t[0], int | float) else 0
        out.append(f"{IND * 2}[dim]{ms:>10.3f} ms {size:>7,} B[/] "
                   f"{esc(short(part.decode('utf-8', 'replace'), width))}")
    return out


def _ms(v: Any) -> str:
    return f"{v:.1f} ms" if isinstance(v, int | float) else "?"


def call_lines(detail: dict[str, Any], width: int = 100, max_body: int = 4096) -> list[str]:
    """The lines (rich markup) for one call as `llm_detail.calls(..., call=N)` gives it."""
    c = detail["call"]
    out = [f"[bold]model call {c['call']}[/] (turn {esc(c.get('turn'))}, step "
           f"{esc(c.get('step'))}): {esc(c.get('model') or '?')}, status {esc(c.get('status'))}"
           + (f", {c['retries']} retr{'y' if c['retries'] == 1 else 'ies'}"
              if c.get("retries") else "")]
    for a in detail["attempts"]:
        out.append(f"  [bold]exchange {a['n']}[/]: {esc(a.get('method'))} "
                   f"{esc(a.get('path'))} → {esc(a.get('upstream'))}")
        out.append(f"{IND}[cyan]request headers[/]")
        out += _headers(a.get("request_headers"), a.get("request_secret_headers") or [], IND * 2)
        raw, b64 = a.get("request_body"), bool(a.get("request_base64"))
        body = _body_bytes(raw, b64)
        text = raw if raw is None or b64 else _pretty(raw)
        out.append(f"{IND}[cyan]request body[/] ({len(body):,} bytes"
                   + (", not UTF-8: as base64" if b64 else
                      ", its JSON indented" if text != raw else "") + ")")
        if text is not None:
            out += bounded(text, max_body, IND * 2)
        if a.get("status") is None:
            out.append(f"{IND}[yellow]no answer: {esc(a.get('error') or 'not reached')}[/]")
            continue
        answer = _body_bytes(a.get("response_body"), a.get("response_base64"))
        times = a.get("chunk_times") or []
        out.append(f"{IND}[cyan]response[/] {esc(a['status'])} {esc(a.get('reason') or '')}, "
                   f"{len(answer):,} bytes in {len(times):,} pieces, first byte "
                   f"{_ms(a.get('first_byte_ms'))}, all {_ms(a.get('duration_ms'))}"
                   + (f", [yellow]cut: {esc(a['error'])}[/]" if a.get("error") else ""))
        out += _headers(a.get("response_headers"), a.get("response_secret_headers") or [],
                        IND * 2)
        out.append(f"{IND}[cyan]streamed[/] (time since the request, size, bytes as received)")
        out += pieces(answer, times, width)
    d, prev = detail.get("prompt_diff"), detail.get("previous")
    if d is None:
        out.append("  [cyan]prompt diff[/]: the request has no messages to compare")
    elif prev is None:
        out.append(f"  [cyan]prompt diff[/]: the first call; its {len(d['added'])} messages "
                   "are in the body above")
    else:
        out.append(f"  [cyan]prompt diff against call {prev}[/]: {d['kept']} messages kept, "
                   f"{d['dropped']} changed or dropped, {len(d['added'])} added")
        budget = max_body
        for i, m in enumerate(d["added"]):
            if budget <= 0:
                out.append(f"{IND}[yellow]… {len(d['added']) - i} more messages added[/]")
                break
            lines = bounded(m, budget, IND + "+ ")
            out += [ln.replace(f"{IND}+ ", f"{IND}[green]+[/] ", 1) for ln in lines]
            budget -= len(m.encode("utf-8"))
    return out


def show_calls(ws: Any, sid: str, db_path: str, which: str, emit, width: int = 100,
               max_body: int = 4096) -> None:
    """Emit the lines of call `which` (its number, or `all`) of session `sid`."""
    from .llm_detail import calls, details

    rows = calls(ws, sid, db_path)["calls"]
    numbers = [r["call"] for r in rows]
    if not numbers and which == "all":  # all of none: said, not an error (as a query's 0 rows)
        emit("[dim]no model calls: this session was recorded without its model leg "
             "(wire-proxy --llm)[/]")
        return
    if not numbers:
        raise InputError("this session has no model calls: it was recorded without its model "
                         "leg", "record with wire-proxy --llm to have them")
    if which == "all":
        wanted = numbers
    else:
        try:
            wanted = [int(which)]
        except ValueError:
            wanted = []
        if not wanted or wanted[0] not in numbers:
            raise InputError(f"--llm-call {short(which, 40)}: this session's model calls are "
                             f"1 to {max(numbers)}", "give one of them, or all")
    for detail in details(ws, sid, db_path, wanted, chunk_times=True, rows=rows):
        for line in call_lines(detail, width, max_body):
            emit(line)
