"""Wire sessions in wire-show's timeline: turns and steps from their events, tool calls with
their streamed arguments and results, the client's answers to approvals, questions, hooks and
external tools with the time it took, subagents indented, and the token counts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..render import Renderer, Totals, count, esc, fmt_ms, initialized, short
from ..text import as_dict

if TYPE_CHECKING:
    from ...model import Frame


def _tokens(u: dict | None) -> int:
    if not u:
        return 0
    return sum(count(u.get(k)) for k in ("input_other", "output", "input_cache_read",
                                         "input_cache_creation"))


def _num(v: Any) -> float:
    """A number from a recording for a format spec; anything else (a hostile string) is 0."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


class WireTimeline(Renderer):
    def __init__(self, ctx, adapter):
        super().__init__(ctx, adapter)
        self._client_reqs: dict = {}  # rpc id -> (method, mono)
        self._agent_reqs: dict = {}  # rpc id -> (type, mono, payload)
        self._calls: dict = {}  # (scope, id) -> (name, mono)
        self._turn: dict = {}
        self._pending_call: tuple[str, list[str]] | None = None
        # `replay`: kimi re-sends the session's history, then answers. While it does, what the
        # agent sends on its own (and the client's answers) is history: shown dimmed, counted
        # apart (its own Totals), so the summary counts this run only, as the views do.
        self._replay_id: Any = None
        self._history: Totals | None = None
        self._turn_open = False  # kimi refuses a replay while a turn runs (-32000): no history

    def flush(self) -> list[str]:
        """A tool call's line waits for its streamed ToolCallParts, so it shows whole arguments."""
        call, self._pending_call = self._pending_call, None
        if call is None:
            return []
        head, args = call
        return [head + esc(short("".join(args), self.width // 2))]

    def frame(self, f: Frame, msg: Any) -> list[str]:
        if self._replay_id is None or not self._is_history(f):
            out = self._frame(f, msg)
            if f.direction == "a2c" and f.kind in ("response", "error") \
                    and self._replay_id is not None and f.rpc_id == self._replay_id:
                self._replay_id = self._history = None
                out.append(f"{self.ctx.stamp(f)} [dim]── end of history[/]")
            return out
        out = []
        if self._history is None:
            self._history = Totals()
            out.append(f"{self.ctx.stamp(f)} [dim]── history re-sent by replay (counted apart)[/]")
        live, self.ctx.totals = self.ctx.totals, self._history
        try:
            return out + [f"[dim]{line}[/dim]" for line in self._frame(f, msg)]
        finally:
            self.ctx.totals = live

    @staticmethod
    def _is_history(f: Frame) -> bool:
        return (f.direction == "a2c" and f.kind in ("request", "notification")) or \
            (f.direction == "c2a" and f.kind in ("response", "error"))

    def _frame(self, f: Frame, msg: Any) -> list[str]:
        if f.msg_type == "ToolCallPart" and self._pending_call:
            part = msg.get("arguments_part") if isinstance(msg, dict) else None
            self._pending_call[1].append(part or "")
            return []
        out: list[str] = self.flush()
        if f.msg_type == "ContentPart" and isinstance(msg, dict):
            kind = msg.get("type")
            piece = msg.get("text") if kind == "text" else msg.get("think") if kind == "think" else None
            if piece is not None:
                return out + self.ctx.gather(str(kind), piece)
        if f.msg_type == "ToolCallPart":
            return out
        out += self.ctx.flush_text()
        t = self.ctx.stamp(f)
        p = msg if isinstance(msg, dict) else {}
        if f.direction == "c2a":
            return out + self._client(f, t, p)
        return out + self._agent(f, t, p)

    # -- client -> agent -------------------------------------------------------------------------
    def _client(self, f: Frame, t: str, p: dict) -> list[str]:
        if f.kind == "request":
            self._client_reqs[f.rpc_id] = (f.method, f.mono_ns)
            if f.method == "prompt":
                return [f"{t} [bold cyan]> prompt[/] {esc(short(p.get('user_input'), self.width))}"]
            if f.method == "replay" and not self._turn_open:
                self._replay_id = f.rpc_id
            if f.method in ("cancel", "steer", "set_plan_mode", "replay"):
                return [f"{t} [bold cyan]> {esc(f.method)}[/] {esc(short(p, self.width // 2))}"]
            if f.method == "initialize":
                return [f"{t} [dim]> initialize (protocol {esc(p.get('protocol_version'))})[/]"]
            return [f"{t} > {esc(f.method)}"]
        if f.kind in ("response", "error"):
            req = self._agent_reqs.pop(f.rpc_id, None)
            if req is None:
                return [f"{t} [dim]> answer to unknown request {esc(f.rpc_id)}[/]"]
            rtype, mono, rp = req
            wait = (f.mono_ns - mono) / 1e6
            if f.kind == "error":
                return [f"{t}      [red]< client answered {esc(rtype)} with an error after {fmt_ms(wait)}: "
                        f"{esc(short(p.get('message'), 60))}[/]"]
            if rtype == "ApprovalRequest":
                self.totals.approval_wait_ms += wait
                resp = p.get("response")
                color = "green" if str(resp).startswith("approve") else "red"
                fb = f" — {esc(short(p.get('feedback'), 50))}" if p.get("feedback") else ""
                return [f"{t}      [{color}]approval: {esc(resp)}[/] after [bold]{fmt_ms(wait)}[/]{fb}"]
            if rtype == "ToolCallRequest":
                rv = as_dict(p.get("return_value"))
                return [f"{t}      external tool answered after [bold]{fmt_ms(wait)}[/]"
                        + (" [red](error)[/]" if rv.get("is_error") else "")]
            if rtype == "QuestionRequest":
                return [f"{t}      question answered after [bold]{fmt_ms(wait)}[/]: "
                        f"{esc(short(p.get('answers'), 60))}"]
            if rtype == "HookRequest":
                return [f"{t}      hook {esc(p.get('action', 'allow'))} after {fmt_ms(wait)}"]
            return [f"{t}      {esc(rtype)} answered after {fmt_ms(wait)}"]
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
                return [f"{t} [red]< {esc(method)} error {esc(p.get('code'))}: "
                        f"{esc(short(p.get('message'), self.width))}[/]{took}"]
            if method == "prompt":
                status = p.get("status")
                color = "green" if status == "finished" else "yellow"
                return [f"{t} [{color}]< prompt {esc(status)}[/]{took}"]
            if method == "initialize":
                return [initialized(t, "initialize", p.get("server"), p.get("protocol_version"), took)]
            return [f"{t} [dim]< {esc(method)} {esc(short(p, 60))}{took}[/]"]
        if f.method == "request":
            self._agent_reqs[f.rpc_id] = (mt, f.mono_ns, p)
            if mt == "ApprovalRequest":
                self.totals.approvals += 1
                who = f" (subagent {esc(p.get('agent_id'))})" if p.get("agent_id") else ""
                return [f"{t}      [yellow]approval requested[/]{who}: "
                        f"{esc(short(p.get('description'), self.width))}"]
            if mt == "ToolCallRequest":
                return [f"{t}      [yellow]external tool request[/] {esc(p.get('name'))}"]
            if mt == "QuestionRequest":
                raw_qs = p.get("questions")
                qs = [as_dict(q) for q in raw_qs] if isinstance(raw_qs, list) else []
                qs = qs or [{}]
                return [f"{t}      [yellow]question[/]: {esc(short(qs[0].get('question'), self.width))}"]
            if mt == "HookRequest":
                return [f"{t}      [dim]hook request {esc(p.get('event'))} {esc(p.get('target'))}[/]"]
            return [f"{t}      request {esc(mt)}"]
        return self._event(f, t, mt, p)

    def _event(self, f: Frame, t: str, mt: str | None, p: dict, indent: str = "",
               scope: str = "") -> list[str]:
        if mt == "TurnBegin" and not scope:
            self._turn_open = self._history is None
            self.totals.turns += 1
            self._turn = {"n": self.totals.turns, "mono": f.mono_ns, "tokens": 0, "steps": 0}
            what = "history turn" if self._history is not None else "turn"
            return [f"{t} [bold]── {what} {self.totals.turns}[/] "
                    f"{esc(short(p.get('user_input'), self.width))}"]
        if mt == "TurnEnd" and not scope:
            self._turn_open = False
            turn = self._turn
            dur = (f.mono_ns - turn["mono"]) / 1e6 if turn else None
            return [f"{t} [bold]── turn {turn.get('n', '?')} ended[/] after {fmt_ms(dur)}: "
                    f"{turn.get('steps', 0)} steps, {turn.get('tokens', 0):,} tokens"]
        if mt == "StepBegin":
            if scope:
                return [f"{t}   {indent}[dim]step {esc(p.get('n'))}[/]"]
            self.totals.steps += 1
            if self._turn:
                self._turn["steps"] = self._turn.get("steps", 0) + 1
            return [f"{t}   [bold blue]step {esc(p.get('n'))}[/]"]
        if mt == "StepInterrupted":
            return [f"{t}   {indent}[red]step interrupted[/]"]
        if mt == "StepRetry":
            return [f"{t}   {indent}[yellow]retry {esc(p.get('next_attempt'))}/{esc(p.get('max_attempts'))} "
                    f"after {esc(p.get('error_type'))} {esc(p.get('status_code') or '')} "
                    f"(waits {_num(p.get('wait_s')):.2f} s)[/]"]
        if mt == "ToolCall":
            fn = as_dict(p.get("function"))
            self._calls[(scope, p.get("id"))] = (fn.get("name"), f.mono_ns)
            if not scope:
                self.totals.tool_calls += 1
            self._pending_call = (f"{t}      {indent}[cyan]tool {esc(fn.get('name'))}[/] "
                                  f"[dim]{esc(p.get('id'))}[/] ",
                                  [fn.get("arguments") or ""])
            return []
        if mt == "ToolResult":
            call = self._calls.pop((scope, p.get("tool_call_id")), None)
            rv = as_dict(p.get("return_value"))
            name = call[0] if call else "?"
            dur = fmt_ms((f.mono_ns - call[1]) / 1e6) if call else "?"
            if rv.get("is_error"):
                if not scope:
                    self.totals.tool_errors += 1
                return [self.ended(t, name, dur, True, rv.get("message") or rv.get("output"),
                                    indent)]
            return [self.ended(t, name, dur, False, rv.get("output"), indent)]
        if mt == "StatusUpdate":
            u = p.get("token_usage")
            if not u:
                return [] if p.get("plan_mode") is None else [f"{t}   [dim]plan mode {esc(p.get('plan_mode'))}[/]"]
            n = _tokens(u)
            self.totals.add_usage(u)
            if self._turn:
                self._turn["tokens"] = self._turn.get("tokens", 0) + n
            ctx = p.get("context_usage")
            other, read = count(u.get("input_other")), count(u.get("input_cache_read"))
            write = count(u.get("input_cache_creation"))
            # the words of wire-stats and the docs: input = uncached + cache read + cache write
            return [f"{t}      {indent}[dim]tokens {n:,}: input {other + read + write:,} "
                    f"(uncached {other:,}, cache read {read:,}, cache write {write:,}), "
                    f"output {count(u.get('output')):,}"
                    + (f"; context {_num(ctx):.1%}" if ctx is not None else "") + "[/]"]
        if mt == "ApprovalResponse":
            req = self._agent_reqs.get(p.get("request_id"))
            if req is None:  # answered by the client: already shown with its wait
                return []
            self._agent_reqs.pop(p.get("request_id"), None)
            return [f"{t}      [yellow]approval {esc(p.get('response'))} by the agent itself after "
                    f"{fmt_ms((f.mono_ns - req[1]) / 1e6)}[/]"]
        if mt == "SubagentEvent":
            ev = as_dict(p.get("event"))
            sub_scope = str(p.get("agent_id"))
            et, ep = ev.get("type"), as_dict(ev.get("payload"))
            if et == "ContentPart":
                return []
            if et in ("TurnBegin", "TurnEnd"):
                what = "starts" if et == "TurnBegin" else "ends"
                return [f"{t}      [magenta]subagent {esc(sub_scope)} ({esc(p.get('subagent_type'))}) {what}[/]"]
            return self._event(f, t, et, ep, indent="  │ ", scope=sub_scope)
        if mt in ("SteerInput",):
            return [f"{t}   [cyan]steer[/] {esc(short(p.get('user_input'), self.width))}"]
        if mt in ("CompactionBegin", "CompactionEnd", "MCPLoadingBegin", "MCPLoadingEnd"):
            return [f"{t}   [dim]{esc(mt)}[/]"]
        if mt == "HookResolved":
            return [f"{t}   {indent}[dim]hook {esc(p.get('event'))} {esc(p.get('target'))}: {esc(p.get('action'))}[/]"]
        if mt == "Notification":
            return [f"{t}   [dim]notification {esc(short(p.get('title'), 60))}[/]"]
        if mt in ("HookTriggered", "ToolCallPart"):
            return []
        return [f"{t}   [dim]{esc(mt)}[/]"]

    def summary(self) -> list[str]:
        s = self.totals
        odd = f", {s.anomalies} anomalies" if s.anomalies else ""
        inp = s.input_other + s.cache_read + s.cache_creation
        ratio = f"{s.cache_read / inp:.1%}" if inp else "n/a"
        return [f"[bold]total[/]: {s.turns} turns, {s.steps} steps, {s.tool_calls} tool calls "
                f"({s.tool_errors} failed), {s.approvals} approvals (human wait {fmt_ms(s.approval_wait_ms)}), "
                f"{s.errors} errors{odd}",
                f"[bold]tokens[/]: {s.total:,} = input {inp:,} (uncached {s.input_other:,}, "
                f"cache read {s.cache_read:,}, cache write {s.cache_creation:,}) + output "
                f"{s.output:,}; cache hit ratio {ratio}"]


# the name the adapter looks for (Adapter.timeline)
Timeline = WireTimeline
