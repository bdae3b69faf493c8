"""`wire-show`: a session as a timeline in the terminal, for Wire, ACP and MCP sessions.

The timeline is built by a small state machine fed one frame at a time, so the same code prints a
finished recording and follows a live one. A session being recorded is locked by its loader
process, so `--follow` reads the spool the proxy appends to (`<db>.<session>.spool`), re-using
the loader's own frame splitting (`recorder.loader.Ingest`), and polls it every 0.2 s until the
proxy writes its end marker or the spool is removed.
"""

from __future__ import annotations

import glob
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import orjson
from rich.markup import escape

from wire_recorder.recorder.errors import UserError
from wire_recorder.recorder.frames import Frame
from wire_recorder.recorder.protocols import get as _adapter

ACP = _adapter("acp")

POLL_S = 0.2


def short(text, width: int) -> str:
    if text is None:
        return ""
    if not isinstance(text, str):
        text = orjson.dumps(text).decode()
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "?"
    if ms < 1:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.2f} s"
    return f"{int(ms // 60_000)} min {ms % 60_000 / 1000:.0f} s"


def _initialized(t: str, method: str, info, protocol, took: str) -> str:
    """The answer to a handshake: who the agent (or server) is and which protocol it speaks."""
    info = info if isinstance(info, dict) else {}
    return (f"{t} [dim]< {method}: {escape(str(info.get('name')))} "
            f"{escape(str(info.get('version')))}, protocol {protocol}{took}[/]")


def _tokens(u: dict | None) -> int:
    if not u:
        return 0
    return sum(int(u.get(k) or 0) for k in ("input_other", "output", "input_cache_read",
                                            "input_cache_creation"))


@dataclass
class Totals:
    turns: int = 0
    steps: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    approvals: int = 0
    approval_wait_ms: float = 0.0
    client_requests: int = 0  # ACP fs/terminal, MCP sampling/roots/elicitation/ping
    client_wait_ms: float = 0.0
    input_rounds: int = 0  # MCP 2026-07-28 input_required rounds
    input_wait_ms: float = 0.0
    anomalies: int = 0
    input_other: int = 0
    output: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    errors: int = 0

    def add_usage(self, u: dict) -> None:
        self.input_other += int(u.get("input_other") or 0)
        self.output += int(u.get("output") or 0)
        self.cache_read += int(u.get("input_cache_read") or 0)
        self.cache_creation += int(u.get("input_cache_creation") or 0)

    @property
    def total(self) -> int:
        return self.input_other + self.output + self.cache_read + self.cache_creation


@dataclass
class Timeline:
    """Turns frames into timeline lines (rich markup). feed() returns the lines a frame adds."""

    width: int = 100
    show_text: bool = True
    start_ns: int | None = None
    protocol: str | None = None  # 'wire' (also None), 'acp' or 'mcp'
    totals: Totals = field(default_factory=Totals)
    _text: list[str] = field(default_factory=list)
    _text_kind: str | None = None
    _client_reqs: dict = field(default_factory=dict)  # rpc id -> (method, mono)
    _agent_reqs: dict = field(default_factory=dict)  # rpc id -> (type, mono, payload)
    _calls: dict = field(default_factory=dict)  # (scope, id) -> (name, mono)
    _turn: dict = field(default_factory=dict)
    _step_tokens: int = 0
    _rounds: dict = field(default_factory=dict)  # MCP requestState -> (name, root mono, round, mono)
    _loading: bool = False  # ACP: between session/load and its answer (the session's history)

    def _t(self, f: Frame) -> str:
        if self.start_ns is None:
            self.start_ns = f.mono_ns
        return f"[dim]{(f.mono_ns - self.start_ns) / 1e9:9.3f}s[/]"

    def _flush_text(self) -> list[str]:
        if not self._text:
            return []
        text = "".join(self._text)
        kind = self._text_kind
        self._text, self._text_kind = [], None
        if not self.show_text:
            return []
        label = {"think": "[magenta]thinking[/]", "user": "[cyan]user[/]"}.get(kind, "[white]text[/]")
        return [f"{' ' * 11}      {label} {escape(short(text, self.width))}"]

    def _flush_call(self) -> list[str]:
        """A tool call's line waits for its streamed ToolCallParts, so it shows whole arguments."""
        call, self._pending_call = getattr(self, "_pending_call", None), None
        if call is None:
            return []
        head, args = call
        return [head + escape(short("".join(args), self.width // 2))]

    def _ended(self, t: str, name, dur: str, failed: bool, detail, indent: str = "",
               always: bool = True) -> str:
        """A tool call's last line, whatever the protocol: ✓ name and time, or ✗ name failed
        after time; then `detail` after a colon (`always=False`: only when there is some)."""
        tail = f": {escape(short(detail, self.width // 2))}" if always or detail else ""
        if failed:
            return f"{t}      {indent}[red]✗ {escape(str(name))} failed after {dur}{tail}[/]"
        return f"{t}      {indent}[green]✓ {escape(str(name))}[/] {dur}{tail}"

    def flush(self) -> list[str]:
        return self._flush_call() + self._flush_text()

    def feed(self, f: Frame) -> list[str]:
        out = self._feed(f)
        if f.anomaly:
            self.totals.anomalies += 1
            out.append(f"{self._t(f)} [red]anomaly ({f.direction} {escape(str(f.method or f.kind))}): "
                       f"{escape(f.anomaly)}[/]")
        return out

    def _feed(self, f: Frame) -> list[str]:
        msg = None
        if f.payload is not None:
            try:
                msg = orjson.loads(f.payload)
            except orjson.JSONDecodeError:
                msg = None
        if self.protocol in ("acp", "mcp") and f.direction in ("c2a", "a2c") and f.kind != "invalid":
            return self._rpc(f, msg)
        if f.msg_type == "ToolCallPart" and getattr(self, "_pending_call", None):
            part = msg.get("arguments_part") if isinstance(msg, dict) else None
            self._pending_call[1].append(part or "")
            return []
        out: list[str] = self._flush_call()
        t = self._t(f)
        if f.msg_type == "ContentPart" and isinstance(msg, dict):
            kind = msg.get("type")
            piece = msg.get("text") if kind == "text" else msg.get("think") if kind == "think" else None
            if piece is not None:
                if self._text_kind not in (None, kind):
                    out += self._flush_text()
                self._text_kind = kind
                self._text.append(piece)
                return out
        if f.msg_type == "ToolCallPart":
            return out
        out += self._flush_text()
        p = msg if isinstance(msg, dict) else {}
        if f.direction == "proxy":
            if f.method in ("spawn", "exit", "client_eof", "signal", "proxy_error",
                            "recording_gap", "client_hangup", "spawn_failed"):
                extra, bad = "", False
                if f.method == "exit":
                    code = p.get("exit_status")
                    extra = f" status {code}" + (f" ({p.get('signal')})" if p.get("signal") else "")
                    bad = bool(code)
                elif f.method not in ("spawn", "client_eof", "signal"):
                    bad = True
                    extra = " " + escape(short(p, self.width))
                if bad:
                    self.totals.errors += 1
                out.append(f"{t} [{'red' if bad else 'dim'}]proxy {f.method}{extra}[/]")
            return out
        if f.direction == "stderr":
            text = bytes(f.raw).decode("utf-8", "replace").strip()
            if text:
                out.append(f"{t} [yellow]stderr[/] {escape(short(text, self.width))}")
            return out
        if f.kind == "invalid":
            self.totals.errors += 1
            out.append(f"{t} [red]invalid {f.direction} frame: {escape(f.parse_error or '')}[/]")
            return out
        if f.direction == "c2a":
            return out + self._client(f, t, p)
        return out + self._agent(f, t, p)

    # -- client -> agent -------------------------------------------------------------------------
    def _client(self, f: Frame, t: str, p: dict) -> list[str]:
        if f.kind == "request":
            self._client_reqs[f.rpc_id] = (f.method, f.mono_ns)
            if f.method == "prompt":
                return [f"{t} [bold cyan]> prompt[/] {escape(short(p.get('user_input'), self.width))}"]
            if f.method in ("cancel", "steer", "set_plan_mode", "replay"):
                return [f"{t} [bold cyan]> {f.method}[/] {escape(short(p, self.width // 2))}"]
            if f.method == "initialize":
                return [f"{t} [dim]> initialize (protocol {escape(str(p.get('protocol_version')))})[/]"]
            return [f"{t} > {escape(str(f.method))}"]
        if f.kind in ("response", "error"):
            req = self._agent_reqs.pop(f.rpc_id, None)
            if req is None:
                return [f"{t} [dim]> answer to unknown request {escape(str(f.rpc_id))}[/]"]
            rtype, mono, rp = req
            wait = (f.mono_ns - mono) / 1e6
            if f.kind == "error":
                return [f"{t}      [red]< client answered {rtype} with an error after {fmt_ms(wait)}: "
                        f"{escape(short(p.get('message'), 60))}[/]"]
            if rtype == "ApprovalRequest":
                self.totals.approval_wait_ms += wait
                resp = p.get("response")
                color = "green" if str(resp).startswith("approve") else "red"
                fb = f" — {escape(short(p.get('feedback'), 50))}" if p.get("feedback") else ""
                return [f"{t}      [{color}]approval: {resp}[/] after [bold]{fmt_ms(wait)}[/]{fb}"]
            if rtype == "ToolCallRequest":
                rv = p.get("return_value") or {}
                return [f"{t}      external tool answered after [bold]{fmt_ms(wait)}[/]"
                        + (" [red](error)[/]" if rv.get("is_error") else "")]
            if rtype == "QuestionRequest":
                return [f"{t}      question answered after [bold]{fmt_ms(wait)}[/]: "
                        f"{escape(short(p.get('answers'), 60))}"]
            if rtype == "HookRequest":
                return [f"{t}      hook {p.get('action', 'allow')} after {fmt_ms(wait)}"]
            return [f"{t}      {rtype} answered after {fmt_ms(wait)}"]
        return []

    # -- agent -> client -------------------------------------------------------------------------
    def _agent(self, f: Frame, t: str, p: dict) -> list[str]:
        mt = f.msg_type
        if f.kind in ("response", "error"):
            req = self._client_reqs.pop(f.rpc_id, None)
            method = req[0] if req else "?"
            took = f" after {fmt_ms((f.mono_ns - req[1]) / 1e6)}" if req else ""
            if f.kind == "error":
                self.totals.errors += 1
                return [f"{t} [red]< {method} error {p.get('code')}: "
                        f"{escape(short(p.get('message'), self.width))}[/]{took}"]
            if method == "prompt":
                status = p.get("status")
                color = "green" if status == "finished" else "yellow"
                return [f"{t} [{color}]< prompt {status}[/]{took}"]
            if method == "initialize":
                return [_initialized(t, "initialize", p.get("server"), p.get("protocol_version"), took)]
            return [f"{t} [dim]< {method} {escape(short(p, 60))}{took}[/]"]
        if f.method == "request":
            self._agent_reqs[f.rpc_id] = (mt, f.mono_ns, p)
            if mt == "ApprovalRequest":
                self.totals.approvals += 1
                who = f" (subagent {p.get('agent_id')})" if p.get("agent_id") else ""
                return [f"{t}      [yellow]approval requested[/]{who}: "
                        f"{escape(short(p.get('description'), self.width))}"]
            if mt == "ToolCallRequest":
                return [f"{t}      [yellow]external tool request[/] {escape(str(p.get('name')))}"]
            if mt == "QuestionRequest":
                qs = p.get("questions") or [{}]
                return [f"{t}      [yellow]question[/]: {escape(short(qs[0].get('question'), self.width))}"]
            if mt == "HookRequest":
                return [f"{t}      [dim]hook request {p.get('event')} {p.get('target')}[/]"]
            return [f"{t}      request {escape(str(mt))}"]
        return self._event(f, t, mt, p)

    def _event(self, f: Frame, t: str, mt: str | None, p: dict, indent: str = "",
               scope: str = "") -> list[str]:
        if mt == "TurnBegin" and not scope:
            self.totals.turns += 1
            self._turn = {"n": self.totals.turns, "mono": f.mono_ns, "tokens": 0, "steps": 0}
            return [f"{t} [bold]── turn {self.totals.turns}[/] {escape(short(p.get('user_input'), self.width))}"]
        if mt == "TurnEnd" and not scope:
            turn = self._turn
            dur = (f.mono_ns - turn["mono"]) / 1e6 if turn else None
            return [f"{t} [bold]── turn {turn.get('n', '?')} ended[/] after {fmt_ms(dur)}: "
                    f"{turn.get('steps', 0)} steps, {turn.get('tokens', 0):,} tokens"]
        if mt == "StepBegin":
            if scope:
                return [f"{t}   {indent}[dim]step {p.get('n')}[/]"]
            self.totals.steps += 1
            if self._turn:
                self._turn["steps"] = self._turn.get("steps", 0) + 1
            return [f"{t}   [bold blue]step {p.get('n')}[/]"]
        if mt == "StepInterrupted":
            return [f"{t}   {indent}[red]step interrupted[/]"]
        if mt == "StepRetry":
            return [f"{t}   {indent}[yellow]retry {p.get('next_attempt')}/{p.get('max_attempts')} "
                    f"after {p.get('error_type')} {p.get('status_code') or ''} "
                    f"(waits {p.get('wait_s', 0):.2f} s)[/]"]
        if mt == "ToolCall":
            fn = p.get("function") or {}
            self._calls[(scope, p.get("id"))] = (fn.get("name"), f.mono_ns)
            if not scope:
                self.totals.tool_calls += 1
            self._pending_call = (f"{t}      {indent}[cyan]tool {escape(str(fn.get('name')))}[/] "
                                  f"[dim]{escape(str(p.get('id')))}[/] ",
                                  [fn.get("arguments") or ""])
            return []
        if mt == "ToolResult":
            call = self._calls.pop((scope, p.get("tool_call_id")), None)
            rv = p.get("return_value") or {}
            name = call[0] if call else "?"
            dur = fmt_ms((f.mono_ns - call[1]) / 1e6) if call else "?"
            if rv.get("is_error"):
                if not scope:
                    self.totals.tool_errors += 1
                return [self._ended(t, name, dur, True, rv.get("message") or rv.get("output"),
                                    indent)]
            return [self._ended(t, name, dur, False, rv.get("output"), indent)]
        if mt == "StatusUpdate":
            u = p.get("token_usage")
            if not u:
                return [] if p.get("plan_mode") is None else [f"{t}   [dim]plan mode {p.get('plan_mode')}[/]"]
            n = _tokens(u)
            self.totals.add_usage(u)
            if self._turn:
                self._turn["tokens"] = self._turn.get("tokens", 0) + n
            ctx = p.get("context_usage")
            return [f"{t}      {indent}[dim]tokens {n:,}: input {u.get('input_other', 0):,}, cache read "
                    f"{u.get('input_cache_read', 0):,}, cache write {u.get('input_cache_creation', 0):,}, "
                    f"output {u.get('output', 0):,}" + (f"; context {ctx:.1%}" if ctx is not None else "") + "[/]"]
        if mt == "ApprovalResponse":
            req = self._agent_reqs.get(p.get("request_id"))
            if req is None:  # answered by the client: already shown with its wait
                return []
            self._agent_reqs.pop(p.get("request_id"), None)
            return [f"{t}      [yellow]approval {p.get('response')} by the agent itself after "
                    f"{fmt_ms((f.mono_ns - req[1]) / 1e6)}[/]"]
        if mt == "SubagentEvent":
            ev = p.get("event") or {}
            sub_scope = str(p.get("agent_id"))
            et, ep = ev.get("type"), ev.get("payload") if isinstance(ev.get("payload"), dict) else {}
            if et == "ContentPart":
                return []
            if et in ("TurnBegin", "TurnEnd"):
                what = "starts" if et == "TurnBegin" else "ends"
                return [f"{t}      [magenta]subagent {sub_scope} ({p.get('subagent_type')}) {what}[/]"]
            return self._event(f, t, et, ep, indent="  │ ", scope=sub_scope)
        if mt in ("SteerInput",):
            return [f"{t}   [cyan]steer[/] {escape(short(p.get('user_input'), self.width))}"]
        if mt in ("CompactionBegin", "CompactionEnd", "MCPLoadingBegin", "MCPLoadingEnd"):
            return [f"{t}   [dim]{mt}[/]"]
        if mt == "HookResolved":
            return [f"{t}   {indent}[dim]hook {p.get('event')} {p.get('target')}: {p.get('action')}[/]"]
        if mt == "Notification":
            return [f"{t}   [dim]notification {escape(short(p.get('title'), 60))}[/]"]
        if mt in ("HookTriggered", "ToolCallPart"):
            return []
        return [f"{t}   [dim]{escape(str(mt))}[/]"]

    # -- ACP and MCP -----------------------------------------------------------------------------
    # Requests are kept per direction (ids count separately per direction in both protocols):
    # _client_reqs holds the client's requests (answered by the agent), _agent_reqs the agent's
    # (MCP: the server's), answered by the client; per id a stack, so that an id reused while
    # pending (an anomaly) gives each answer to the latest request still open, as the views do.
    def _rpc(self, f: Frame, msg) -> list[str]:
        p = msg if isinstance(msg, dict) else {}
        if self.protocol == "acp" and f.method == "session/update":
            update = p.get("update") if isinstance(p.get("update"), dict) else {}
            kind = {"agent_message_chunk": "text", "agent_thought_chunk": "think",
                    "user_message_chunk": "user"}.get(f.msg_type or "")
            if kind is not None:
                content = update.get("content") if isinstance(update.get("content"), dict) else {}
                piece = content.get("text")
                if piece is None:
                    piece = f"[{content.get('type')}]"
                out = self._flush_text() if self._text_kind not in (None, kind) else []
                self._text_kind = kind
                self._text.append(piece)
                return out
        out = self._flush_text()
        t = self._t(f)
        if f.kind == "request":
            reqs = self._client_reqs if f.direction == "c2a" else self._agent_reqs
            reqs.setdefault(f.rpc_id, []).append((f.method, f.mono_ns, p))
        if f.direction == "c2a":
            if f.kind in ("response", "error"):
                return out + self._client_answer(f, t, p)
            if f.kind == "request":
                return out + (self._acp_client_request(f, t, p) if self.protocol == "acp"
                              else self._mcp_client_request(f, t, p))
            bold = "bold cyan" if f.method in ("session/cancel", "notifications/cancelled") else "dim"
            return out + [f"{t} [{bold}]> {escape(str(f.method))}[/]"
                          + (f" {escape(short(p, self.width // 2))}" if bold != "dim" else "")]
        if f.kind in ("response", "error"):
            req = _pop(self._client_reqs, f.rpc_id)
            method = req[0] if req else "?"
            took = f" after {fmt_ms((f.mono_ns - req[1]) / 1e6)}" if req else ""
            if f.kind == "error":
                self.totals.errors += 1
                return out + [f"{t} [red]< {escape(str(method))} error {p.get('code')}: "
                              f"{escape(short(p.get('message'), self.width))}[/]{took}"]
            return out + (self._acp_response(f, t, p, req, took) if self.protocol == "acp"
                          else self._mcp_response(f, t, p, req, took))
        if f.kind == "request":
            return out + self._agent_request(f, t, p)
        if self.protocol == "acp" and f.method == "session/update":
            return out + self._acp_update(f, t, p.get("update") if isinstance(p.get("update"), dict) else {})
        if f.method == "notifications/progress":
            return out + [f"{t}      [dim]progress {p.get('progress')}/{p.get('total')} "
                          f"{escape(short(p.get('message'), 60))}[/]"]
        if f.method == "notifications/message":
            return out + [f"{t}      [dim]log {escape(str(p.get('level')))}: "
                          f"{escape(short(p.get('data'), self.width))}[/]"]
        return out + [f"{t}   [dim]{escape(str(f.method))} {escape(short(p, 60))}[/]"]

    def _turn_begin(self, f: Frame, t: str, text) -> list[str]:
        self.totals.turns += 1
        self._turn = {"n": self.totals.turns, "mono": f.mono_ns, "tools": 0}
        return [f"{t} [bold]── turn {self.totals.turns}[/] [bold cyan]> prompt[/] "
                f"{escape(short(text, self.width))}"]

    def _acp_client_request(self, f: Frame, t: str, p: dict) -> list[str]:
        if f.method == "session/prompt":
            blocks = [b for b in p.get("prompt") or [] if isinstance(b, dict)]
            text = "\n".join(str(b.get("text")) if b.get("type") == "text" else f"[{b.get('type')}]"
                             for b in blocks)
            return self._turn_begin(f, t, text)
        if f.method == "initialize":
            return [f"{t} [dim]> initialize (ACP protocol {escape(str(p.get('protocolVersion')))})[/]"]
        if f.method == "session/load":  # the agent replays the session's history before answering
            self._loading = True
            return [f"{t} [dim]> session/load {escape(str(p.get('sessionId')))} (its history "
                    f"follows, marked history)[/]"]
        if f.method == "session/new":
            return [f"{t} [dim]> {f.method} {escape(str(p.get('cwd')))}[/]"]
        return [f"{t} > {escape(str(f.method))} {escape(short(p, self.width // 2))}"]

    def _acp_response(self, f: Frame, t: str, p: dict, req, took: str) -> list[str]:
        method = req[0] if req else "?"
        if method == "session/prompt":
            stop = p.get("stopReason")
            color = "green" if stop == "end_turn" else "yellow"
            turn = self._turn
            return [f"{t} [bold]── turn {turn.get('n', '?')} ended[/]: [{color}]{escape(str(stop))}[/]"
                    f"{took}, {turn.get('tools', 0)} tool calls"]
        if method == "initialize":
            return [_initialized(t, "initialize", p.get("agentInfo"), p.get("protocolVersion"), took)]
        if method == "session/load":
            self._loading = False
            return [f"{t} [dim]< session/load: history replayed{took}[/]"]
        if method == "session/new":
            return [f"{t} [dim]< {method}: session {escape(str(p.get('sessionId')))}{took}[/]"]
        return [f"{t} [dim]< {escape(str(method))} {escape(short(p, 60))}{took}[/]"]

    def _acp_update(self, f: Frame, t: str, u: dict) -> list[str]:
        if self._loading:
            # what an earlier session did, replayed by session/load: shown, not counted (its
            # text chunks never get here: they are gathered into text lines like any others)
            label = ACP.describe("notification", "session/update", f.msg_type, {"update": u})
            return [f"{t}   [dim]history {escape(label or str(f.msg_type))}[/]"]
        mt = f.msg_type
        if mt == "tool_call":
            call_id = u.get("toolCallId")
            title = u.get("title") or call_id
            self._calls[("", call_id)] = (title, f.mono_ns, u.get("status"))
            self.totals.tool_calls += 1
            if self._turn:
                self._turn["tools"] = self._turn.get("tools", 0) + 1
            args = u.get("rawInput")
            if args is None:
                args = "".join(str((c.get("content") or {}).get("text") or "")
                               for c in u.get("content") or [] if isinstance(c, dict))
            return [f"{t}      [cyan]tool {escape(str(title))}[/] "
                    f"[dim]{escape(str(call_id).rsplit('/', 1)[-1])}[/] {escape(short(args, self.width // 2))}"]
        if mt == "tool_call_update":
            key = ("", u.get("toolCallId"))
            call = self._calls.get(key)
            status = u.get("status")
            if call is None or status is None or status == call[2]:
                return []  # content only (a terminal, a diff), or a call already ended
            title, mono, _ = call
            dur = fmt_ms((f.mono_ns - mono) / 1e6)
            text = "".join(str((c.get("content") or {}).get("text") or "")
                           for c in u.get("content") or [] if isinstance(c, dict))
            if status in ("completed", "failed"):
                self._calls.pop(key, None)
                if status == "failed":
                    self.totals.tool_errors += 1
                return [self._ended(t, title, dur, status == "failed", text, always=False)]
            self._calls[key] = (title, mono, status)
            return [f"{t}      [dim]{escape(str(title))}: {escape(str(status))}[/]"]
        if mt == "plan":
            entries = u.get("entries") or []
            return [f"{t}   [dim]plan: " + escape(short("; ".join(
                f"{e.get('status')}: {e.get('content')}" for e in entries if isinstance(e, dict)),
                self.width)) + "[/]"]
        if mt == "available_commands_update":
            return [f"{t}   [dim]available commands: {len(u.get('availableCommands') or [])}[/]"]
        if mt == "current_mode_update":
            return [f"{t}   [dim]mode {escape(str(u.get('currentModeId')))}[/]"]
        return [f"{t}   [dim]session/update {escape(str(mt))}[/]"]

    def _mcp_client_request(self, f: Frame, t: str, p: dict) -> list[str]:
        if f.method == "initialize":
            return [f"{t} [dim]> initialize (MCP protocol {escape(str(p.get('protocolVersion')))})[/]"]
        if f.method == "server/discover":
            pv = (p.get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion")
            return [f"{t} [dim]> server/discover (protocol {escape(str(pv))})[/]"]
        if f.method in ("tools/call", "prompts/get", "resources/read"):
            name = p.get("name") or p.get("uri")
            state = p.get("requestState")
            if state is not None and state in self._rounds or p.get("inputResponses") is not None:
                prev = self._rounds.pop(state, None) if state is not None else None
                if prev is None:  # no requestState: the latest round of this tool
                    for k, v in list(self._rounds.items())[::-1]:
                        if v[0] == name:
                            prev = self._rounds.pop(k)
                            break
                if prev is not None:
                    _, root_mono, rnd, asked = prev
                    wait = max(f.mono_ns - asked, 0) / 1e6
                    self.totals.input_wait_ms += wait
                    self._client_reqs[f.rpc_id][-1] = (f.method, root_mono, p, name, rnd + 1)
                    answers = ", ".join(str(k) for k in (p.get("inputResponses") or {}))
                    return [f"{t}      [cyan]↻ retry {escape(str(name))}[/] [dim]#{escape(str(f.rpc_id))}[/] "
                            f"with inputResponses ({escape(short(answers, 60))}): the client answered "
                            f"after [bold]{fmt_ms(wait)}[/]"]
            self._client_reqs[f.rpc_id][-1] = (f.method, f.mono_ns, p, name, 0)
            if f.method != "tools/call":
                return [f"{t} > {f.method} {escape(str(name))}"]
            self.totals.tool_calls += 1
            return [f"{t}      [cyan]tool {escape(str(name))}[/] [dim]#{escape(str(f.rpc_id))}[/] "
                    f"{escape(short(p.get('arguments'), self.width // 2))}"]
        if f.method == "ping":
            return [f"{t} [dim]> ping[/]"]
        shown = {k: v for k, v in p.items() if k != "_meta"}
        return [f"{t} > {escape(str(f.method))}" + (f" {escape(short(shown, self.width // 2))}" if shown else "")]

    def _mcp_response(self, f: Frame, t: str, p: dict, req, took: str) -> list[str]:
        method = req[0] if req else "?"
        if method in ("tools/call", "prompts/get", "resources/read") and req and len(req) > 3:
            _, root_mono, _, name, rnd = req
            dur = fmt_ms((f.mono_ns - root_mono) / 1e6)
            if p.get("resultType") == "input_required":
                self.totals.input_rounds += 1
                state = p.get("requestState")
                self._rounds[state if state is not None else f"#{f.rpc_id}"] = (name, root_mono, rnd, f.mono_ns)
                asks = []
                for key, r in (p.get("inputRequests") or {}).items():
                    r = r if isinstance(r, dict) else {}
                    asks.append(f"{r.get('method')} {_ask(r.get('method'), r.get('params'))}".strip())
                return [f"{t}      [yellow]input required[/] by {escape(str(name))} (round {rnd + 1}): "
                        f"{escape(short('; '.join(asks), self.width))}"]
            rounds = f" ({rnd} input round{'s' if rnd != 1 else ''})" if rnd else ""
            text = " ".join(str(c.get("text")) for c in p.get("content") or []
                            if isinstance(c, dict) and c.get("type") == "text")
            if method != "tools/call":
                return [f"{t} [dim]< {method} {escape(str(name))}{took}{rounds}[/]"]
            if p.get("isError"):
                self.totals.tool_errors += 1
                return [self._ended(t, name, f"{dur}{rounds}", True, text)]
            return [self._ended(t, name, f"{dur}{rounds}", False,
                                text or p.get("structuredContent"))]
        if method == "initialize":
            return [_initialized(t, "initialize", p.get("serverInfo"), p.get("protocolVersion"), took)]
        if method == "server/discover":
            info = (p.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
            return [f"{t} [dim]< server/discover: {escape(str(info.get('name')))} "
                    f"{escape(str(info.get('version')))}, versions {p.get('supportedVersions')}{took}[/]"]
        if method == "tools/list":
            names = [str(x.get("name")) for x in p.get("tools") or [] if isinstance(x, dict)]
            return [f"{t} [dim]< tools/list: {len(names)} tools ({escape(short(', '.join(names), 60))}){took}[/]"]
        shown = {k: v for k, v in p.items() if k not in ("_meta", "resultType")}
        return [f"{t} [dim]< {escape(str(method))} {escape(short(shown, 60))}{took}[/]"]

    def _agent_request(self, f: Frame, t: str, p: dict) -> list[str]:
        m = f.method
        if m == "session/request_permission":
            self.totals.approvals += 1
            tc = p.get("toolCall") or {}
            opts = ", ".join(str(o.get("optionId")) for o in p.get("options") or [] if isinstance(o, dict))
            return [f"{t}      [yellow]permission requested[/]: {escape(short(tc.get('title'), self.width))} "
                    f"[dim]({escape(opts)})[/]"]
        self.totals.client_requests += 1
        what = short(_ask(m, p), self.width)
        if m in ("sampling/createMessage", "elicitation/create", "roots/list"):
            return [f"{t}      [yellow]{escape(m)}[/]" + (f" {escape(what)}" if what else "")]
        return [f"{t}      [dim]{escape(str(m))}" + (f" {escape(what)}" if what else "") + "[/]"]

    def _client_answer(self, f: Frame, t: str, p: dict) -> list[str]:
        req = _pop(self._agent_reqs, f.rpc_id)
        if req is None:
            return [f"{t} [dim]> answer to unknown request {escape(str(f.rpc_id))}[/]"]
        method, mono, rp = req
        wait = max(f.mono_ns - mono, 0) / 1e6
        if method == "session/request_permission":
            self.totals.approval_wait_ms += wait
        else:
            self.totals.client_wait_ms += wait
        if f.kind == "error":
            return [f"{t}      [red]< client answered {escape(str(method))} with an error after "
                    f"{fmt_ms(wait)}: {escape(short(p.get('message'), 60))}[/]"]
        if method == "session/request_permission":
            outcome = p.get("outcome") or {}
            chosen = outcome.get("optionId") if outcome.get("outcome") == "selected" else outcome.get("outcome")
            kinds = {o.get("optionId"): o.get("kind") for o in rp.get("options") or [] if isinstance(o, dict)}
            color = "green" if str(kinds.get(chosen, "")).startswith("allow") else "red"
            return [f"{t}      [{color}]permission: {escape(str(chosen))}[/] after [bold]{fmt_ms(wait)}[/]"]
        said = short(_answer(method, p), self.width // 2)
        return [f"{t}      [dim]client answered {escape(str(method))} after {fmt_ms(wait)}"
                + (f": {escape(said)}" if said else "") + "[/]"]

    def summary(self) -> list[str]:
        s = self.totals
        odd = f", {s.anomalies} anomalies" if s.anomalies else ""
        if self.protocol == "acp":
            return [f"[bold]total[/]: {s.turns} turns, {s.tool_calls} tool calls ({s.tool_errors} failed), "
                    f"{s.approvals} permission requests (client wait {fmt_ms(s.approval_wait_ms)}), "
                    f"{s.client_requests} other client requests (wait {fmt_ms(s.client_wait_ms)}), "
                    f"{s.errors} errors{odd}"]
        if self.protocol == "mcp":
            return [f"[bold]total[/]: {s.tool_calls} tool calls ({s.tool_errors} failed), "
                    f"{s.input_rounds} input_required rounds (client time {fmt_ms(s.input_wait_ms)}), "
                    f"{s.client_requests} server requests (client wait {fmt_ms(s.client_wait_ms)}), "
                    f"{s.errors} errors{odd}"]
        inp = s.input_other + s.cache_read + s.cache_creation
        ratio = f"{s.cache_read / inp:.1%}" if inp else "n/a"
        return [f"[bold]total[/]: {s.turns} turns, {s.steps} steps, {s.tool_calls} tool calls "
                f"({s.tool_errors} failed), {s.approvals} approvals (human wait {fmt_ms(s.approval_wait_ms)}), "
                f"{s.errors} errors{odd}",
                f"[bold]tokens[/]: {s.total:,} = input {s.input_other:,} + cache read {s.cache_read:,} "
                f"+ cache write {s.cache_creation:,} + output {s.output:,}; cache hit ratio {ratio}"]


def _pop(reqs: dict, rpc_id):
    """The latest open request with this id (ACP/MCP keep a stack per id), or None."""
    stack = reqs.get(rpc_id)
    if not stack:
        return None
    entry = stack.pop()
    if not stack:
        del reqs[rpc_id]
    return entry


def _ask(method, params) -> str:
    """What a request to the client asks, in a few words (ACP and MCP)."""
    p = params if isinstance(params, dict) else {}
    if method in ("fs/read_text_file", "fs/write_text_file"):
        return str(p.get("path"))
    if method == "terminal/create":
        return " ".join([str(p.get("command"))] + [str(a) for a in p.get("args") or []])
    if method and method.startswith("terminal/"):
        return str(p.get("terminalId"))
    if method == "sampling/createMessage":
        msgs = p.get("messages") or []
        last = msgs[-1] if msgs and isinstance(msgs[-1], dict) else {}
        content = last.get("content") if isinstance(last.get("content"), dict) else {}
        return '"' + str(content.get("text")) + '"'
    if method == "elicitation/create":
        return '"' + str(p.get("message")) + '"'
    return ""


def _answer(method, result) -> str:
    r = result if isinstance(result, dict) else {}
    if method == "sampling/createMessage":
        content = r.get("content") if isinstance(r.get("content"), dict) else {}
        return f"{content.get('text')} ({r.get('model')})"
    if method == "elicitation/create":
        content = r.get("content")
        return " ".join([str(r.get("action"))] + ([orjson.dumps(content).decode()] if content else []))
    if method == "roots/list":
        return ", ".join(str(x.get("uri")) for x in r.get("roots") or [] if isinstance(x, dict))
    if method == "fs/read_text_file":
        return f"{len(str(r.get('content') or ''))} chars"
    if method == "terminal/output":
        return str(r.get("output"))
    if method == "terminal/wait_for_exit":
        return f"exit {r.get('exitCode')}" if r.get("signal") is None else f"signal {r.get('signal')}"
    return "" if not r else orjson.dumps(r).decode()


def header(session: dict) -> str:
    cmd = session.get("command")
    if isinstance(cmd, str):
        try:
            cmd = " ".join(orjson.loads(cmd))
        except (orjson.JSONDecodeError, TypeError):
            pass
    return (f"[bold]session {escape(str(session.get('session_id')))}[/] "
            f"started {session.get('started_at')} ({session.get('source') or '?'}, "
            f"protocol {session.get('protocol') or '?'} {session.get('protocol_version') or ''})"
            + (f"\n[dim]{escape(short(cmd, 120))}[/]" if cmd else ""))


def show_frames(session: dict, frames: Iterable[Frame], emit: Callable[[str], None],
                width: int = 100, show_text: bool = True) -> Timeline:
    tl = Timeline(width=width, show_text=show_text, start_ns=session.get("mono_start_ns"),
                  protocol=session.get("protocol"))
    from .conformance import summary_line

    frames = list(frames)
    emit(header(session))
    emit(escape(summary_line(session, frames)))
    for f in frames:
        for line in tl.feed(f):
            emit(line)
    for line in tl.flush() + tl.summary():
        emit(line)
    return tl


# -- following a live recording -----------------------------------------------------------------
def find_spools(db: str, session: str | None) -> list[str]:
    spools = sorted(glob.glob(glob.escape(db) + ".*.spool"), key=os.path.getmtime)
    if session:
        spools = [s for s in spools if s[len(db) + 1:-len(".spool")].startswith(session)]
    return spools


def follow(db: str, session: str | None, emit: Callable[[str], None], width: int = 100,
           show_text: bool = True, wait_s: float = 0.0, stop: Callable[[], bool] | None = None) -> str:
    """Tail a session being recorded. Returns how it ended: 'ended', 'spool removed', or
    'not live' (no spool: the caller shows the finished DB instead)."""
    from wire_recorder.recorder.loader import Ingest
    from wire_recorder.recorder.spool import SpoolError, SpoolReader

    deadline = time.monotonic() + wait_s
    spools = find_spools(db, session)
    while not spools and time.monotonic() < deadline:  # the recording may not have begun yet
        time.sleep(POLL_S)
        spools = find_spools(db, session)
    if not spools:
        return "not live"
    path = spools[-1]
    try:
        reader = SpoolReader(path)
    except (OSError, SpoolError) as e:
        raise UserError(f"cannot follow {path}: {e}") from None
    meta = reader.meta
    ing = Ingest(None, meta)  # used only to split and classify; it never touches a store here
    tl = Timeline(width=width, show_text=show_text, start_ns=meta.get("mono_start_ns"),
                  protocol=meta.get("protocol"))
    emit(header({"session_id": meta.get("session_id"), "started_at": "(live)",
                 "command": orjson.dumps(meta.get("command") or []).decode(),
                 "source": "live spool", "protocol": meta.get("protocol")}))
    how = "ended"
    idle = 0
    try:
        while True:
            records = reader.read_available()
            if records:
                idle = 0
                ing.feed(records)
                tl.protocol = tl.protocol or ing.classifier.protocol  # detected from the frames
                # take the parsed rows straight from the loader's buffer; nothing is written
                new, ing.rows = ing.rows, []
                for r in new:
                    for line in tl.feed(Frame(*r)):
                        emit(line)
                if ing.ended:
                    break
                continue
            idle += 1
            if idle == 3:  # a pause in streamed text: show what came so far
                for line in tl.flush():
                    emit(line)
            if not os.path.exists(path):
                how = "spool removed"
                break
            if stop and stop():
                how = "stopped"
                break
            time.sleep(POLL_S)
    finally:
        reader.close()
    for line in tl.flush() + tl.summary():
        emit(line)
    return how
