"""A scripted Wire client: drives any command over stdin/stdout pipes and keeps every frame.

It only speaks bytes over pipes, so the command can be `kimi --wire ...` itself or
`wire-proxy --db X -- kimi --wire ...`. Plain threads and blocking IO:

* a reader thread splits stdout into lines (any size) and queues them,
* a thread collects stderr,
* the calling thread is the driver: it sends `initialize`, then each prompt in turn, answers the
  agent's requests following the plan, fires cancel/steer at their trigger, then closes stdin and
  waits for the exit,
* a watchdog kills the process group at the hard deadline, which unblocks every read and write,
  so `run_client` always returns.

Client ids are deterministic strings: `init-1`, `p-1`, `p-2`, `c-1` (cancel), `s-1` (steer).
Frames are recorded as sent/received (raw bytes without the `\\n`, parsed JSON or None).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CLIENT_INFO = {"name": "wire-recorder-scripted-client", "version": "0.1.0"}

# ---------------------------------------------------------------------------------------------
# The plan


@dataclass(frozen=True)
class Approval:
    """How to answer one ApprovalRequest. response: approve | reject | approve_for_session |
    pending (send nothing: the request stays open, e.g. until a cancel)."""

    response: str = "approve"
    feedback: str | None = None

    @staticmethod
    def approve() -> Approval:
        return Approval("approve")

    @staticmethod
    def reject(feedback: str | None = None) -> Approval:
        return Approval("reject", feedback)

    @staticmethod
    def for_session() -> Approval:
        return Approval("approve_for_session")

    @staticmethod
    def pending() -> Approval:
        return Approval("pending")


@dataclass(frozen=True)
class HookAnswer:
    action: str = "allow"  # allow | block
    reason: str = ""


@dataclass
class Prompt:
    """One `prompt` request. The driver waits for its response before the next prompt.

    cancel_after: send `cancel` this many seconds after the trigger. cancel_on: the trigger, a
    `params.type` of an incoming frame (request or event: "ApprovalRequest", "ToolCall",
    "StepBegin", ...), counted from the prompt; None = from sending the prompt. cancel_nth: which
    occurrence of cancel_on (1-based). steer/steer_on/steer_after/steer_nth: the same for `steer`.
    """

    user_input: str | list[Any]
    cancel_after: float | None = None
    cancel_on: str | None = "ApprovalRequest"
    cancel_nth: int = 1
    steer: str | list[Any] | None = None
    steer_on: str | None = "StepBegin"
    steer_after: float = 0.0
    steer_nth: int = 1


RequestHandler = Callable[[dict[str, Any]], "dict[str, Any] | None"]


@dataclass
class ClientPlan:
    """What the client sends and how it answers the agent.

    approvals: answers to ApprovalRequests in arrival order; once used up, approval_default.
    tool_results: ToolCallRequest answers by tool name: a return_value dict, or a callable
      (request payload -> return_value dict). Unknown tools get a JSON-RPC error.
    question_answers: QuestionRequest answers in arrival order ({question text: label}); once used
      up (or None), the first option of each question is chosen.
    hook_answers: HookRequest answers by hook event name ("PreToolUse", ...): one answer for all,
      or a list used in arrival order; default (and once a list is used up) allow.
    on_request: optional override called first with the whole request frame; returning a dict
      sends it as the answer frame (id is filled in), returning None falls back to the rules.
    """

    prompts: list[Prompt] = field(default_factory=list)
    initialize: bool = True
    protocol_version: str = "1.10"
    client_info: Mapping[str, Any] | None = field(default_factory=lambda: dict(CLIENT_INFO))
    external_tools: list[dict[str, Any]] | None = None
    hooks: list[dict[str, Any]] | None = None
    capabilities: dict[str, Any] | None = None
    approvals: list[Approval] = field(default_factory=list)
    approval_default: Approval = field(default_factory=Approval)
    tool_results: Mapping[str, dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]] = field(
        default_factory=dict
    )
    question_answers: list[dict[str, str]] | None = None
    hook_answers: Mapping[str, HookAnswer | Sequence[HookAnswer]] = field(default_factory=dict)
    on_request: RequestHandler | None = None
    # Bounds, not budgets: a 2-core runner at load 20 starts kimi in about a minute, so each is
    # far beyond what a healthy agent needs there; a test of a timeout sets its own
    init_timeout: float = 300.0
    prompt_timeout: float = 300.0
    exit_timeout: float = 60.0  # after stdin EOF
    # instead of closing stdin at the end, send the agent this signal and leave stdin open (the
    # way the vendor's Node SDK ends a session: SIGTERM)
    end_signal: int | None = None

    def initialize_params(self) -> dict[str, Any]:
        p: dict[str, Any] = {"protocol_version": self.protocol_version}
        if self.client_info is not None:
            p["client"] = dict(self.client_info)
        if self.external_tools is not None:
            p["external_tools"] = self.external_tools
        if self.hooks is not None:
            p["hooks"] = self.hooks
        if self.capabilities is not None:
            p["capabilities"] = self.capabilities
        return p


# ---------------------------------------------------------------------------------------------
# The result


@dataclass
class WireFrame:
    dir: str  # "c2a" (sent by the client) or "a2c" (received)
    raw: bytes  # without the "\n" terminator
    msg: Any  # parsed JSON, None when not JSON
    t: float  # seconds since the process was spawned
    newline: bool = True

    @property
    def method(self) -> str | None:
        return self.msg.get("method") if isinstance(self.msg, dict) else None

    @property
    def id(self) -> Any:
        return self.msg.get("id") if isinstance(self.msg, dict) else None

    @property
    def type(self) -> str | None:
        """Wire `params.type` of events and requests."""
        if isinstance(self.msg, dict) and isinstance(self.msg.get("params"), dict):
            t = self.msg["params"].get("type")
            return t if isinstance(t, str) else None
        return None

    @property
    def payload(self) -> Any:
        if isinstance(self.msg, dict) and isinstance(self.msg.get("params"), dict):
            return self.msg["params"].get("payload")
        return None

    @property
    def is_response(self) -> bool:
        return isinstance(self.msg, dict) and "method" not in self.msg and ("result" in self.msg or "error" in self.msg)

    def label(self) -> str:
        """Short description, e.g. `a2c event:StepBegin`, `c2a prompt#p-1`, `a2c response#p-1`."""
        if not isinstance(self.msg, dict):
            return f"{self.dir} invalid"
        if self.method in ("event", "request"):
            return f"{self.dir} {self.method}:{self.type}"
        if self.method:
            return f"{self.dir} {self.method}#{self.id}"
        return f"{self.dir} {'error' if 'error' in self.msg else 'response'}#{self.id}"


@dataclass
class ClientResult:
    argv: list[str]
    frames: list[WireFrame]
    exit_code: int | None
    stderr: bytes
    timed_out: bool
    duration_s: float
    problems: list[str]  # things that went wrong on the client side (unexpected, not fatal)
    notes: list[str]  # what the driver did (cancel skipped, ...)
    context: dict[str, Any] = field(default_factory=dict)  # filled by callers (scenario, dirs, ...)

    def sent(self) -> list[WireFrame]:
        return [f for f in self.frames if f.dir == "c2a"]

    def received(self) -> list[WireFrame]:
        return [f for f in self.frames if f.dir == "a2c"]

    def events(self, type: str | None = None) -> list[WireFrame]:
        return [f for f in self.received() if f.method == "event" and (type is None or f.type == type)]

    def requests(self, type: str | None = None) -> list[WireFrame]:
        return [f for f in self.received() if f.method == "request" and (type is None or f.type == type)]

    def answers(self) -> list[WireFrame]:
        """The client's answers to agent requests."""
        return [f for f in self.sent() if f.is_response]

    def answer_to(self, request_id: Any) -> WireFrame | None:
        for f in self.sent():
            if f.is_response and f.id == request_id:
                return f
        return None

    def response(self, client_id: str) -> dict[str, Any] | None:
        """The agent's response (whole message) to the client request with this id."""
        for f in self.received():
            if f.is_response and f.id == client_id:
                return f.msg
        return None

    def result_of(self, client_id: str) -> Any:
        r = self.response(client_id)
        return None if r is None else r.get("result")

    def types(self) -> list[str]:
        """Received event/request types in order."""
        return [f.type for f in self.received() if f.type]

    def labels(self) -> list[str]:
        return [f.label() for f in self.frames]

    def invalid(self) -> list[WireFrame]:
        return [f for f in self.frames if not isinstance(f.msg, dict)]

    def summary(self) -> str:
        return "\n".join(self.labels())


# ---------------------------------------------------------------------------------------------
# The driver


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


_EOF = object()


class _Driver:
    def __init__(
        self,
        argv: Sequence[str],
        plan: ClientPlan,
        *,
        env: Mapping[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        timeout: float,
    ) -> None:
        self.argv = [str(a) for a in argv]
        self.plan = plan
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.timeout = timeout
        self.frames: list[WireFrame] = []
        self.frames_lock = threading.Lock()
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.stderr_chunks: list[bytes] = []
        self.timed_out = False
        self.stdin_closed = False
        self.eof = False
        self.approval_i = 0
        self.question_i = 0
        self.hook_i: dict[str, int] = {}
        self.counters: dict[str, int] = {}
        self.responses_seen: set[str] = set()
        # per-prompt trigger state
        self.type_counts: dict[str, int] = {}
        self.scheduled: list[tuple[float, str, Any]] = []  # (when, kind, payload)

    # -- io ---------------------------------------------------------------------------------
    def _record(self, dir: str, raw: bytes, msg: Any, newline: bool = True) -> WireFrame:
        f = WireFrame(dir, raw, msg, time.monotonic() - self.t0, newline)
        with self.frames_lock:
            self.frames.append(f)
        return f

    def _read_stdout(self) -> None:
        out = self.proc.stdout
        assert out is not None
        try:
            while True:
                line = out.readline()
                if not line:
                    break
                newline = line.endswith(b"\n")
                raw = line[:-1] if newline else line
                try:
                    msg = json.loads(raw)
                except ValueError:
                    msg = None
                f = self._record("a2c", raw, msg, newline)
                self.inbox.put(f)
        except (OSError, ValueError):
            pass
        finally:
            self.inbox.put(_EOF)

    def _read_stderr(self) -> None:
        err = self.proc.stderr
        assert err is not None
        try:
            while True:
                chunk = err.read1(65536) if hasattr(err, "read1") else err.read(65536)
                if not chunk:
                    break
                self.stderr_chunks.append(chunk)
        except (OSError, ValueError):
            pass

    def _send(self, obj: dict[str, Any]) -> bool:
        if self.stdin_closed:
            self.notes.append(f"not sent (stdin closed): {obj.get('method') or obj.get('id')}")
            return False
        raw = _dumps(obj)
        self._record("c2a", raw, obj)
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(raw + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError) as e:
            self.problems.append(f"write failed ({type(e).__name__}) for {obj.get('method') or obj.get('id')}")
            self.stdin_closed = True
            return False

    def _next_id(self, prefix: str) -> str:
        n = self.counters.get(prefix, 0) + 1
        self.counters[prefix] = n
        return f"{prefix}-{n}"

    def _close_stdin(self) -> None:
        if not self.stdin_closed:
            self.stdin_closed = True
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except (OSError, ValueError):
                pass

    def _kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            try:
                self.proc.kill()
            except OSError:
                pass

    def _watchdog(self) -> None:
        if self.proc.poll() is None:
            self.timed_out = True
            self._kill()

    # -- answering ----------------------------------------------------------------------------
    def _answer(self, f: WireFrame) -> None:
        req = f.msg
        rid = req.get("id")
        if self.plan.on_request is not None:
            custom = self.plan.on_request(req)
            if custom is not None:
                rest = {k: v for k, v in custom.items() if k not in ("jsonrpc", "id")}
                self._send({"jsonrpc": "2.0", "id": rid, **rest})
                return
        t = f.type
        p = f.payload if isinstance(f.payload, dict) else {}
        result: dict[str, Any] | None
        if t == "ApprovalRequest":
            if self.approval_i < len(self.plan.approvals):
                a = self.plan.approvals[self.approval_i]
            else:
                a = self.plan.approval_default
            self.approval_i += 1
            if a.response == "pending":
                self.notes.append(f"approval {rid} left pending")
                return
            result = {"request_id": p.get("id", rid), "response": a.response}
            if a.feedback is not None:
                result["feedback"] = a.feedback
        elif t == "ToolCallRequest":
            name = p.get("name")
            h = self.plan.tool_results.get(name) if isinstance(name, str) else None
            if h is None:
                self.problems.append(f"no tool result for external tool {name!r}")
                self._send(
                    {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": f"no handler for {name}"}}
                )
                return
            rv = h(p) if callable(h) else h
            result = {"tool_call_id": p.get("id", rid), "return_value": rv}
        elif t == "QuestionRequest":
            qa = self.plan.question_answers
            if qa is not None and self.question_i < len(qa):
                answers = qa[self.question_i]
            else:
                answers = {}
                for q in p.get("questions") or []:
                    opts = q.get("options") or []
                    if opts:
                        answers[q.get("question", "")] = opts[0].get("label", "")
            self.question_i += 1
            result = {"request_id": p.get("id", rid), "answers": answers}
        elif t == "HookRequest":
            event = str(p.get("event", ""))
            planned = self.plan.hook_answers.get(event, HookAnswer())
            if isinstance(planned, HookAnswer):
                answer = planned
            else:
                i = self.hook_i.get(event, 0)
                self.hook_i[event] = i + 1
                answer = planned[i] if i < len(planned) else HookAnswer()
            result = {"request_id": p.get("id", rid), "action": answer.action, "reason": answer.reason}
        else:
            self.problems.append(f"unknown request type {t!r}")
            self._send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"unsupported {t}"}})
            return
        self._send({"jsonrpc": "2.0", "id": rid, "result": result})

    # -- main loop ------------------------------------------------------------------------------
    def _handle(self, f: WireFrame) -> None:
        """React to one received frame (answers, triggers)."""
        if not isinstance(f.msg, dict):
            self.problems.append(f"invalid frame from agent: {f.raw[:80]!r}")
            return
        t = f.type
        if t:
            self.type_counts[t] = self.type_counts.get(t, 0) + 1
            for trig in self.triggers:
                kind, on, nth, after, arg = trig
                if on == t and self.type_counts[t] == nth and id(trig) not in self.fired:
                    self.fired.add(id(trig))
                    self.scheduled.append((time.monotonic() + after, kind, arg))
        if f.is_response and isinstance(f.id, str):
            self.responses_seen.add(f.id)
        if f.method == "request":
            self._answer(f)

    def _fire(self, kind: str, arg: Any) -> None:
        if kind == "cancel":
            self._send({"jsonrpc": "2.0", "method": "cancel", "id": self._next_id("c"), "params": {}})
        elif kind == "steer":
            self._send(
                {"jsonrpc": "2.0", "method": "steer", "id": self._next_id("s"), "params": {"user_input": arg}}
            )

    def _pump(self, until: Callable[[], bool], deadline: float) -> bool:
        """Process incoming frames and scheduled actions until `until()` or EOF or deadline."""
        while True:
            if until():
                return True
            now = time.monotonic()
            if self.scheduled:
                self.scheduled.sort(key=lambda x: x[0])
                when, kind, arg = self.scheduled[0]
                if when <= now:
                    self.scheduled.pop(0)
                    self._fire(kind, arg)
                    continue
                wait = min(when, deadline) - now
            else:
                wait = deadline - now
            if now >= deadline:
                return False
            if self.eof:
                return False
            try:
                item = self.inbox.get(timeout=max(0.001, min(wait, 0.5)))
            except queue.Empty:
                continue
            if item is _EOF:
                self.eof = True
                continue
            self._handle(item)

    def _has_response(self, rid: str) -> Callable[[], bool]:
        return lambda: rid in self.responses_seen

    def run(self) -> ClientResult:
        self.t0 = time.monotonic()
        hard_deadline = self.t0 + self.timeout
        self.triggers: list[tuple[str, str | None, int, float, Any]] = []
        self.fired: set[int] = set()
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,  # the watchdog kills the whole group (proxy, kimi, workers)
        )
        watchdog = threading.Timer(self.timeout, self._watchdog)
        watchdog.daemon = True
        watchdog.start()
        readers = [
            threading.Thread(target=self._read_stdout, name="wire-client-stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name="wire-client-stderr", daemon=True),
        ]
        for th in readers:
            th.start()
        try:
            self._drive(hard_deadline)
            if self.plan.end_signal is None:
                self._close_stdin()
            elif self.proc.poll() is None:
                self.proc.send_signal(self.plan.end_signal)
            # drain until EOF (the agent's last frames, e.g. ApprovalResponse after EOF)
            exit_deadline = min(hard_deadline, time.monotonic() + self.plan.exit_timeout)
            self.scheduled.clear()
            self._pump(lambda: False, exit_deadline)
            try:
                self.proc.wait(timeout=max(0.0, exit_deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                if exit_deadline >= hard_deadline:
                    self.timed_out = True  # reported below
                else:
                    self.problems.append(f"agent did not exit within {self.plan.exit_timeout}s after stdin EOF; killed")
                self._kill()
        finally:
            if self.proc.poll() is None:
                self._kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.problems.append("agent still alive after SIGKILL")
            watchdog.cancel()
            for th in readers:
                th.join(timeout=5)
            self._close_stdin()
            for s in (self.proc.stdout, self.proc.stderr):
                try:
                    if s is not None:
                        s.close()
                except OSError:
                    pass
        if self.timed_out:
            self.problems.append(f"hard timeout ({self.timeout}s): agent killed")
        return ClientResult(
            argv=self.argv,
            frames=list(self.frames),
            exit_code=self.proc.returncode,
            stderr=b"".join(self.stderr_chunks),
            timed_out=self.timed_out,
            duration_s=time.monotonic() - self.t0,
            problems=self.problems,
            notes=self.notes,
        )

    def _drive(self, hard_deadline: float) -> None:
        plan = self.plan
        if plan.initialize:
            rid = self._next_id("init")
            self._send({"jsonrpc": "2.0", "method": "initialize", "id": rid, "params": plan.initialize_params()})
            start = time.monotonic()
            ok = self._pump(self._has_response(rid), min(hard_deadline, start + plan.init_timeout))
            if not ok:
                why = "agent closed stdout" if self.eof else "gave up"
                self.problems.append(f"no response to initialize ({why} after {time.monotonic() - start:.1f}s)")
                return
        for pr in plan.prompts:
            rid = self._next_id("p")
            self.type_counts = {}
            self.triggers = []
            self.fired = set()
            self.scheduled = []
            start = time.monotonic()
            if pr.cancel_after is not None:
                if pr.cancel_on is None:
                    self.scheduled.append((start + pr.cancel_after, "cancel", None))
                else:
                    self.triggers.append(("cancel", pr.cancel_on, pr.cancel_nth, pr.cancel_after, None))
            if pr.steer is not None:
                if pr.steer_on is None:
                    self.scheduled.append((start + pr.steer_after, "steer", pr.steer))
                else:
                    self.triggers.append(("steer", pr.steer_on, pr.steer_nth, pr.steer_after, pr.steer))
            if not self._send({"jsonrpc": "2.0", "method": "prompt", "id": rid, "params": {"user_input": pr.user_input}}):
                return
            timeout = plan.prompt_timeout + (plan.init_timeout if not plan.initialize and rid == "p-1" else 0)
            ok = self._pump(self._has_response(rid), min(hard_deadline, time.monotonic() + timeout))
            for _when, kind, _ in self.scheduled:
                self.notes.append(f"{kind} for {rid} not sent: the prompt ended first")
            self.scheduled = []
            for trig in self.triggers:
                if id(trig) not in self.fired:
                    self.notes.append(f"{trig[0]} trigger {trig[1]}#{trig[2]} for {rid} never seen")
            if not ok:
                why = "agent closed stdout" if self.eof else "gave up"
                self.problems.append(f"no response to {rid} ({why} after {time.monotonic() - start:.1f}s)")
                return


def run_client(
    argv: Sequence[str],
    plan: ClientPlan,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 900.0,
) -> ClientResult:
    """Spawn `argv`, drive it through `plan` over its stdin/stdout, return every frame.

    Never takes (much) longer than `timeout` seconds: the process group is killed at the deadline.
    """
    return _Driver(argv, plan, env=env, cwd=cwd, timeout=timeout).run()
