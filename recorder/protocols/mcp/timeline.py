"""MCP sessions in wire-show's timeline: the handshake or discovery, tool calls with their
input_required rounds (2026-07-28) and the client's answers to server requests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..render import RpcRenderer, esc, fmt_ms, initialized, short
from . import PV_META, labels

if TYPE_CHECKING:
    from ...model import Frame

# requests that name what they act on and may ask for input on the way (2026-07-28)
NAMED = ("tools/call", "prompts/get", "resources/read")


class McpTimeline(RpcRenderer):
    cancel_methods = frozenset({"notifications/cancelled"})
    notable_methods = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})

    def __init__(self, ctx, adapter):
        super().__init__(ctx, adapter)
        self.rounds: dict = {}  # requestState -> (name, root mono, round, mono)


    def client_request(self, f: Frame, t: str, p: dict) -> list[str]:
        if f.method == "initialize":
            return [f"{t} [dim]> initialize (MCP protocol {esc(p.get('protocolVersion'))})[/]"]
        if f.method == "server/discover":
            pv = (p.get("_meta") or {}).get(PV_META)
            return [f"{t} [dim]> server/discover (protocol {esc(pv)})[/]"]
        if f.method in NAMED:
            name = p.get("name") or p.get("uri")
            state = p.get("requestState")
            if state is not None and state in self.rounds or p.get("inputResponses") is not None:
                prev = self.rounds.pop(state, None) if state is not None else None
                if prev is None:  # no requestState: the latest round of this tool
                    for k, v in list(self.rounds.items())[::-1]:
                        if v[0] == name:
                            prev = self.rounds.pop(k)
                            break
                if prev is not None:
                    _, root_mono, rnd, asked = prev
                    wait = max(f.mono_ns - asked, 0) / 1e6
                    self.totals.input_wait_ms += wait
                    self.client_reqs[f.rpc_id][-1] = (f.method, root_mono, p, name, rnd + 1)
                    answers = ", ".join(str(k) for k in (p.get("inputResponses") or {}))
                    return [f"{t}      [cyan]↻ retry {esc(name)}[/] [dim]#{esc(f.rpc_id)}[/] "
                            f"with inputResponses ({esc(short(answers, 60))}): the client answered "
                            f"after [bold]{fmt_ms(wait)}[/]"]
            self.client_reqs[f.rpc_id][-1] = (f.method, f.mono_ns, p, name, 0)
            if f.method != "tools/call":
                return [f"{t} > {esc(f.method)} {esc(name)}"]
            self.totals.tool_calls += 1
            return [f"{t}      [cyan]tool {esc(name)}[/] [dim]#{esc(f.rpc_id)}[/] "
                    f"{esc(short(p.get('arguments'), self.width // 2))}"]
        if f.method == "ping":
            return [f"{t} [dim]> ping[/]"]
        shown = {k: v for k, v in p.items() if k != "_meta"}
        return [f"{t} > {esc(f.method)}" + (f" {esc(short(shown, self.width // 2))}" if shown else "")]

    def response(self, f: Frame, t: str, p: dict, req: Any, took: str) -> list[str]:
        method = req[0] if req else "?"
        if method in NAMED and req and len(req) > 3:
            _, root_mono, _, name, rnd = req
            dur = fmt_ms((f.mono_ns - root_mono) / 1e6)
            if p.get("resultType") == "input_required":
                self.totals.input_rounds += 1
                state = p.get("requestState")
                self.rounds[state if state is not None else f"#{f.rpc_id}"] = (name, root_mono, rnd, f.mono_ns)
                asks = []
                for r in (p.get("inputRequests") or {}).values():
                    r = r if isinstance(r, dict) else {}
                    asks.append(f"{r.get('method')} {labels.ask(r.get('method'), r.get('params'))}".strip())
                return [f"{t}      [yellow]input required[/] by {esc(name)} (round {rnd + 1}): "
                        f"{esc(short('; '.join(asks), self.width))}"]
            rounds = f" ({rnd} input round{'s' if rnd != 1 else ''})" if rnd else ""
            text = " ".join(str(c.get("text")) for c in p.get("content") or []
                            if isinstance(c, dict) and c.get("type") == "text")
            if method != "tools/call":
                return [f"{t} [dim]< {esc(method)} {esc(name)}{took}{rounds}[/]"]
            if p.get("isError"):
                self.totals.tool_errors += 1
                return [self.ended(t, name, f"{dur}{rounds}", True, text)]
            return [self.ended(t, name, f"{dur}{rounds}", False, text or p.get("structuredContent"))]
        if method == "initialize":
            return [initialized(t, "initialize", p.get("serverInfo"), p.get("protocolVersion"), took)]
        if method == "server/discover":
            info = (p.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo") or {}
            return [f"{t} [dim]< server/discover: {esc(info.get('name'))} "
                    f"{esc(info.get('version'))}, versions {esc(p.get('supportedVersions'))}{took}[/]"]
        if method == "tools/list":
            names = [str(x.get("name")) for x in p.get("tools") or [] if isinstance(x, dict)]
            return [f"{t} [dim]< tools/list: {len(names)} tools ({esc(short(', '.join(names), 60))}){took}[/]"]
        shown = {k: v for k, v in p.items() if k not in ("_meta", "resultType")}
        return [f"{t} [dim]< {esc(method)} {esc(short(shown, 60))}{took}[/]"]

    def notification(self, f: Frame, t: str, p: dict) -> list[str]:
        if f.method == "notifications/progress":
            return [f"{t}      [dim]progress {esc(p.get('progress'))}/{esc(p.get('total'))} "
                    f"{esc(short(p.get('message'), 60))}[/]"]
        if f.method == "notifications/message":
            return [f"{t}      [dim]log {esc(p.get('level'))}: "
                    f"{esc(short(p.get('data'), self.width))}[/]"]
        return super().notification(f, t, p)

    def summary(self) -> list[str]:
        s = self.totals
        odd = f", {s.anomalies} anomalies" if s.anomalies else ""
        return [f"[bold]total[/]: {s.tool_calls} tool calls ({s.tool_errors} failed), "
                f"{s.input_rounds} input_required rounds (client time {fmt_ms(s.input_wait_ms)}), "
                f"{s.client_requests} server requests (client wait {fmt_ms(s.client_wait_ms)}), "
                f"{s.errors} errors{odd}"]


# the name the adapter looks for (Adapter.timeline)
Timeline = McpTimeline
