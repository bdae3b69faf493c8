"""ACP sessions in wire-show's timeline: a turn per session/prompt, streamed chunks as text
lines, tool calls from their session/update kinds, permissions and the client's fs/terminal
work, and a reopened session's history marked as such."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..render import RpcRenderer, esc, fmt_ms, initialized, short
from ..text import as_dict
from . import labels
from .kimi_code import is_probe

if TYPE_CHECKING:
    from ...model import Frame

TEXT_KINDS = {"agent_message_chunk": "text", "agent_thought_chunk": "think",
              "user_message_chunk": "user"}


class AcpTimeline(RpcRenderer):
    cancel_methods = frozenset({"session/cancel"})
    approval_methods = frozenset({"session/request_permission"})
    notable_methods = frozenset({"elicitation/create"})
    loading = False  # between session/load and its answer: the session's history

    def text_piece(self, f: Frame, p: dict) -> tuple[str, str] | None:
        if f.method != "session/update":
            return None
        kind = TEXT_KINDS.get(f.msg_type or "")
        if kind is None:
            return None
        update = as_dict(p.get("update"))
        content = as_dict(update.get("content"))
        piece = content.get("text")
        if piece is None:
            piece = f"[{content.get('type')}]"
        return kind, piece


    def client_answer(self, f: Frame, t: str, p: dict) -> list[str]:
        pending = self.agent_reqs.get(f.rpc_id) or []
        req = pending[-1] if pending else None
        if f.kind == "error" and req is not None and is_probe(req[0], req[2]):
            super().client_answer(f, t, p)  # its wait counts, its error line is not one
            return [f"{t}      [dim]< client answered {esc(req[0])}: not found "
                    f"(expected: the agent only looks whether it exists)[/]"]
        return super().client_answer(f, t, p)

    def client_request(self, f: Frame, t: str, p: dict) -> list[str]:
        if f.method == "session/prompt":
            blocks = [b for b in p.get("prompt") or [] if isinstance(b, dict)]
            text = "\n".join(str(b.get("text")) if b.get("type") == "text" else f"[{b.get('type')}]"
                             for b in blocks)
            self.totals.turns += 1
            self.turn = {"n": self.totals.turns, "mono": f.mono_ns, "tools": 0}
            return [f"{t} [bold]── turn {self.totals.turns}[/] [bold cyan]> prompt[/] "
                    f"{esc(short(text, self.width))}"]
        if f.method == "initialize":
            return [f"{t} [dim]> initialize (ACP protocol {esc(p.get('protocolVersion'))})[/]"]
        if f.method == "session/load":  # the agent replays the session's history before answering
            self.loading = True
            return [f"{t} [dim]> session/load {esc(p.get('sessionId'))} (its history "
                    f"follows, marked history)[/]"]
        if f.method == "session/new":
            return [f"{t} [dim]> {esc(f.method)} {esc(p.get('cwd'))}[/]"]
        return [f"{t} > {esc(f.method)} {esc(short(p, self.width // 2))}"]

    def response(self, f: Frame, t: str, p: dict, req: Any, took: str) -> list[str]:
        method = req[0] if req else "?"
        if method == "session/prompt":
            stop = p.get("stopReason")
            color = "green" if stop == "end_turn" else "yellow"
            turn = self.turn
            return [f"{t} [bold]── turn {turn.get('n', '?')} ended[/]: [{color}]{esc(stop)}[/]"
                    f"{took}, {turn.get('tools', 0)} tool calls"]
        if method == "initialize":
            return [initialized(t, "initialize", p.get("agentInfo"), p.get("protocolVersion"), took)]
        if method == "session/load":
            self.loading = False
            return [f"{t} [dim]< session/load: history replayed{took}[/]"]
        if method == "session/new":
            return [f"{t} [dim]< {esc(method)}: session {esc(p.get('sessionId'))}{took}[/]"]
        return super().response(f, t, p, req, took)

    def permission(self, f: Frame, t: str, p: dict) -> list[str]:
        tc = as_dict(p.get("toolCall"))
        opts = ", ".join(str(o.get("optionId")) for o in p.get("options") or [] if isinstance(o, dict))
        return [f"{t}      [yellow]permission requested[/]: {esc(short(tc.get('title'), self.width))} "
                f"[dim]({esc(opts)})[/]"]

    def permission_answer(self, t: str, p: dict, rp: dict, wait: float) -> list[str]:
        outcome = as_dict(p.get("outcome"))
        chosen = outcome.get("optionId") if outcome.get("outcome") == "selected" else outcome.get("outcome")
        kinds = {o.get("optionId"): o.get("kind") for o in rp.get("options") or [] if isinstance(o, dict)}
        color = "green" if str(kinds.get(chosen, "")).startswith("allow") else "red"
        return [f"{t}      [{color}]permission: {esc(chosen)}[/] after [bold]{fmt_ms(wait)}[/]"]

    def notification(self, f: Frame, t: str, p: dict) -> list[str]:
        if f.method != "session/update":
            return super().notification(f, t, p)
        u = as_dict(p.get("update"))
        if self.loading:
            # what an earlier session did, replayed by session/load: shown, not counted (its
            # text chunks never get here: they are gathered into text lines like any others)
            label = labels.describe("notification", "session/update", f.msg_type, {"update": u})
            return [f"{t}   [dim]history {esc(label or str(f.msg_type))}[/]"]
        mt = f.msg_type
        if mt == "tool_call":
            call_id = u.get("toolCallId")
            title = u.get("title") or call_id
            self.calls[call_id] = (title, f.mono_ns, u.get("status"))
            self.totals.tool_calls += 1
            if self.turn:
                self.turn["tools"] = self.turn.get("tools", 0) + 1
            args = u.get("rawInput")
            if args is None:
                args = "".join(str((c.get("content") or {}).get("text") or "")
                               for c in u.get("content") or [] if isinstance(c, dict))
            return [f"{t}      [cyan]tool {esc(title)}[/] "
                    f"[dim]{esc(str(call_id).rsplit('/', 1)[-1])}[/] {esc(short(args, self.width // 2))}"]
        if mt == "tool_call_update":
            key = u.get("toolCallId")
            call = self.calls.get(key)
            status = u.get("status")
            if call is None or status is None or status == call[2]:
                return []  # content only (a terminal, a diff), or a call already ended
            title, mono, _ = call
            dur = fmt_ms((f.mono_ns - mono) / 1e6)
            text = "".join(str((c.get("content") or {}).get("text") or "")
                           for c in u.get("content") or [] if isinstance(c, dict))
            if status in ("completed", "failed"):
                self.calls.pop(key, None)
                if status == "failed":
                    self.totals.tool_errors += 1
                return [self.ended(t, title, dur, status == "failed", text, always=False)]
            self.calls[key] = (title, mono, status)
            return [f"{t}      [dim]{esc(title)}: {esc(status)}[/]"]
        if mt == "plan":
            entries = u.get("entries") or []
            return [f"{t}   [dim]plan: " + esc(short("; ".join(
                f"{e.get('status')}: {e.get('content')}" for e in entries if isinstance(e, dict)),
                self.width)) + "[/]"]
        if mt == "available_commands_update":
            return [f"{t}   [dim]available commands: {len(u.get('availableCommands') or [])}[/]"]
        if mt == "current_mode_update":
            return [f"{t}   [dim]mode {esc(u.get('currentModeId'))}[/]"]
        if mt == "usage_update":  # Kimi Code 2.x: how full the context is, after each prompt
            return [f"{t}   [dim]context: {esc(u.get('used'))} of {esc(u.get('size'))} tokens used[/]"]
        if mt == "session_info_update":
            return [f"{t}   [dim]session title: {esc(short(u.get('title'), self.width))}[/]"]
        return [f"{t}   [dim]session/update {esc(mt)}[/]"]

    def summary(self) -> list[str]:
        s = self.totals
        odd = f", {s.anomalies} anomalies" if s.anomalies else ""
        return [f"[bold]total[/]: {s.turns} turns, {s.tool_calls} tool calls ({s.tool_errors} failed), "
                f"{s.approvals} permission requests (client wait {fmt_ms(s.approval_wait_ms)}), "
                f"{s.client_requests} other client requests (wait {fmt_ms(s.client_wait_ms)}), "
                f"{s.errors} errors{odd}"]


# the name the adapter looks for (Adapter.timeline)
Timeline = AcpTimeline
