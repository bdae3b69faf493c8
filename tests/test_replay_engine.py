"""The sans-IO replay engine (replay/engine/), driven by scripted events, Playbook style (as
mitmproxy tests its proxy core): no agent process, no threads, no clock; the time is what the
events say. A real recording is read from a transcript written here (the transcript reader is
the real one); the engine's actions are checked one by one.

`pb >> event` hands the engine an event; `pb << action` takes the next action it asked for and
checks it (an Action instance: equal; an Action class: of that class; a callable: true of it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from wire_recorder.replay.engine import actions as A
from wire_recorder.replay.engine import events as E
from wire_recorder.replay.engine.core import HOLD_MAX_S, RACY_DELAY_CAP_S, STOP_GRACE_S, AgentEngine
from wire_recorder.replay.engine.plan import plan_steps
from wire_recorder.replay.engine.scheduler import Scheduler
from wire_recorder.replay.engine.serve_walk import ServeEngine
from wire_recorder.replay.engine.verdict import finish
from wire_recorder.replay.recording import Recording, load
from wire_recorder.replay.settings import ReplayOptions

OUTCOMES = (E.Written, E.SignalResult, E.Killed, E.AgentExited)


class Playbook:
    def __init__(self, engine: AgentEngine):
        self.engine = engine
        self.pending: list[A.Action] = []
        self.now = 0.0

    def __rshift__(self, event: E.Event) -> Playbook:
        # an outcome comes right after its action, before the actions after it are carried out
        if not isinstance(event, OUTCOMES):
            assert not self.pending, f"actions not checked before {event}: {self.pending}"
        self.now = event.now
        self.pending = list(self.engine.handle(event)) + self.pending
        return self

    def __lshift__(self, want: Any) -> Playbook:
        assert self.pending, f"expected {want}, the engine asked for nothing more"
        got = self.pending.pop(0)
        if isinstance(want, type):
            assert isinstance(got, want), f"expected a {want.__name__}, got {got}"
        elif isinstance(want, A.Action):
            assert got == want, f"expected {want}, got {got}"
        else:
            assert want(got), f"unexpected {got}"
        return self

    def __bool__(self) -> bool:
        assert not self.pending, f"actions not checked: {self.pending}"
        return True

    def tick(self, at: float) -> Playbook:
        return self >> E.Tick(at)

    def agent(self, at: float, frame: dict | bytes) -> Playbook:
        raw = frame if isinstance(frame, bytes) else orjson.dumps(frame)
        return self >> E.PeerFrame(at, int(at * 1e9), raw)


# -- recordings ----------------------------------------------------------------------------------
INIT = {"jsonrpc": "2.0", "method": "initialize", "id": "init-1",
        "params": {"protocol_version": "1.10", "client": {"name": "t", "version": "1"}}}
INIT_OK = {"jsonrpc": "2.0", "id": "init-1",
           "result": {"protocol_version": "1.10", "server": {"name": "Kimi Code CLI",
                                                             "version": "1.51.0"}}}


def prompt(n: int, text: str = "hi") -> dict:
    return {"jsonrpc": "2.0", "method": "prompt", "id": f"p-{n}", "params": {"user_input": text}}


def done(n: int) -> dict:
    return {"jsonrpc": "2.0", "id": f"p-{n}", "result": {"status": "finished"}}


def event(kind: str, payload: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "method": "event", "params": {"type": kind, "payload": payload or {}}}


def text(t: str) -> dict:
    return event("ContentPart", {"type": "text", "text": t})


def approval(rid: str, command: str = "echo hello") -> dict:
    return {"jsonrpc": "2.0", "method": "request", "id": rid, "params": {
        "type": "ApprovalRequest", "payload": {
            "id": rid, "tool_call_id": "call-1", "sender": "Shell", "action": "run command",
            "description": f"Run command `{command}`"}}}


def approve(rid: str, answer: str = "approve") -> dict:
    return {"jsonrpc": "2.0", "id": rid, "result": {"request_id": rid, "response": answer}}


def turn(n: int, *middle: dict) -> list[tuple[str, dict]]:
    return [("c2a", prompt(n)), ("a2c", event("TurnBegin", {"user_input": "hi"})),
            *(("a2c", m) for m in middle), ("a2c", event("TurnEnd")), ("a2c", done(n))]


def recording(tmp_path: Path, lines: list[tuple[str, Any]], *, step_ms: float = 10.0,
              exit_code: int = 0, name: str = "s") -> Recording:
    """A Wire recording of `lines` (direction, frame), `step_ms` apart; ("eof", None) is the
    client closing its input, ("signal", NAME) a signal it sent the agent."""
    out = [{"wire_transcript": 1, "session": {
        "session_id": f"engine-{name}", "name": name, "command": ["kimi", "--wire"],
        "cwd": str(tmp_path), "protocol": "wire", "protocol_version": "1.10",
        "exit_code": exit_code, "source": "proxy"}}]
    t = 0.0
    for direction, frame in lines:
        t += step_ms
        if direction == "eof":
            out.append({"dir": "proxy", "event": "client_eof", "data": {}, "t_ms": t})
        elif direction == "signal":
            out.append({"dir": "proxy", "event": "signal", "data": {"signal": frame}, "t_ms": t})
        else:
            out.append({"dir": direction, "frame": frame, "t_ms": t})
    out.append({"dir": "proxy", "event": "exit", "data": {"code": exit_code}, "t_ms": t + 1})
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in out) + b"\n")
    return load(path)


def engine(rec: Recording, tmp_path: Path, **opts: Any) -> Playbook:
    o = ReplayOptions(startup_timeout=opts.pop("startup_timeout", 60.0), **opts).validate()
    eng = AgentEngine(rec, ["kimi", "--wire"], {}, str(tmp_path), o)
    pb = Playbook(eng)
    pb >> E.Started(0.0, 0)
    assert pb
    return pb


def sends(method: str) -> Callable[[A.Action], bool]:
    return lambda a: isinstance(a, A.SendFrame) and orjson.loads(a.raw).get("method") == method


def answers(rid: str, response: str) -> Callable[[A.Action], bool]:
    def check(a: A.Action) -> bool:
        if not isinstance(a, A.Answer):
            return False
        obj = orjson.loads(a.raw)
        return obj["id"] == rid and obj["result"]["response"] == response
    return check


def diverges(kind: str, *words: str) -> Callable[[A.Action], bool]:
    return lambda a: isinstance(a, A.Diverge) and a.divergence.kind == kind and \
        all(w in a.divergence.message for w in words)


# -- causal order --------------------------------------------------------------------------------
def test_client_frames_wait_for_the_agent_frames_recorded_before_them(tmp_path):
    rec = recording(tmp_path, [("c2a", INIT), ("a2c", INIT_OK), *turn(1, text("hello")),
                               ("eof", None)])
    pb = engine(rec, tmp_path)
    assert pb.tick(0.0) << sends("initialize") >> E.Written(0.0, True)
    assert pb.tick(0.1)  # the prompt waits for initialize's answer
    pb.agent(0.2, INIT_OK)
    assert pb
    assert pb.tick(0.2) << sends("prompt") >> E.Written(0.2, True)
    for t, frame in [(0.3, event("TurnBegin", {"user_input": "hi"})),
                     (0.4, text("something else")), (0.5, event("TurnEnd"))]:
        assert pb.agent(t, frame)
    assert pb.tick(0.5)  # the EOF waits for the prompt's response
    assert pb.agent(0.6, done(1)).tick(0.6) << A.CloseInput()
    assert pb >> E.PeerClosed(0.7)
    assert pb.tick(0.7) << A.Done()
    eng = pb.engine
    assert eng.stats["sent"] == 2 and eng.stopped is None
    divs = finish(eng, 0)
    # a changed text is a divergence of the comparison at the end, not of the causal order
    assert [d.kind for d in divs] == ["changed"] and "something else" in str(divs[0].got)


def test_an_unchanged_run_has_no_divergences(tmp_path):
    rec = recording(tmp_path, [("c2a", INIT), ("a2c", INIT_OK), *turn(1, text("hello")),
                               ("eof", None)])
    pb = engine(rec, tmp_path)
    now = 0.0
    for m in rec.msgs:
        now += 0.01
        if m.direction == "c2a":
            assert pb.tick(now) << sends(m.method) >> E.Written(now, True)
        else:
            assert pb.agent(now, m.raw)
    assert pb.tick(now) << A.CloseInput()
    assert pb >> E.PeerClosed(now)
    assert pb.tick(now) << A.Done()
    assert finish(pb.engine, 0) == []


# -- matching ------------------------------------------------------------------------------------
def test_a_matching_agent_request_gets_the_recorded_answer_under_its_live_id(tmp_path):
    lines = [("c2a", INIT), ("a2c", INIT_OK), ("c2a", prompt(1)),
             ("a2c", event("TurnBegin", {"user_input": "hi"})), ("a2c", approval("rec-1")),
             ("c2a", approve("rec-1")), ("a2c", text("done")), ("a2c", event("TurnEnd")),
             ("a2c", done(1)), ("eof", None)]
    rec = recording(tmp_path, lines, name="approval")
    pb = engine(rec, tmp_path)
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb.agent(0.1, INIT_OK).tick(0.1) << sends("prompt") >> E.Written(0.1, True)
    assert pb.agent(0.2, event("TurnBegin", {"user_input": "hi"}))
    # what the recorded client did besides answering (ACP: write a file) is for the runner
    assert pb.agent(0.3, approval("live-7")) << A.ClientEffects  # the answer: scheduled
    assert pb.tick(0.3) << answers("live-7", "approve") >> E.Written(0.3, True)
    assert pb.engine.stats["requests_matched"] == 1


def test_an_unmatched_request_stops_the_replay_by_default(tmp_path):
    lines = [("c2a", INIT), ("a2c", INIT_OK), ("c2a", prompt(1)), ("a2c", approval("rec-1")),
             ("c2a", approve("rec-1")), ("a2c", done(1)), ("eof", None)]
    rec = recording(tmp_path, lines)
    pb = engine(rec, tmp_path)
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb.agent(0.1, INIT_OK).tick(0.1) << sends("prompt") >> E.Written(0.1, True)
    assert pb.agent(0.2, approval("live-1", "rm -rf /")) << \
        diverges("unmatched_request", "ApprovalRequest") << A.Stop << A.CloseInput()
    assert pb.tick(0.3)  # nothing goes out after a stop, and it waits for the agent to exit
    assert pb.tick(0.2 + STOP_GRACE_S) << A.Done()
    assert pb.engine.stopped.startswith("unmatched ApprovalRequest")


def test_an_unmatched_request_is_rejected_and_the_replay_goes_on(tmp_path):
    lines = [("c2a", INIT), ("a2c", INIT_OK), ("c2a", prompt(1)), ("a2c", approval("rec-1")),
             ("c2a", approve("rec-1")), ("a2c", done(1)), ("eof", None)]
    rec = recording(tmp_path, lines)
    pb = engine(rec, tmp_path, on_unmatched="reject")
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb.agent(0.1, INIT_OK).tick(0.1) << sends("prompt") >> E.Written(0.1, True)
    assert pb.agent(0.2, approval("live-1", "rm -rf /")) << diverges("unmatched_request",
                                                                     "a rejection")
    assert pb.tick(0.2) << answers("live-1", "reject") >> E.Written(0.2, True)
    assert pb.engine.stopped is None


# -- scheduling ----------------------------------------------------------------------------------
def test_the_scheduler_is_a_heap_in_time_then_given_order():
    s = Scheduler()
    for when, what in [(3.0, "c"), (1.0, "a"), (2.0, "b1"), (2.0, "b2"), (0.5, "first")]:
        s.add(when, what)
    assert s.next_when() == 0.5
    assert s.pop_due(0.4) is None
    assert [s.pop_due(2.0).what for _ in range(4)] == ["first", "a", "b1", "b2"]
    assert s.pop_due(2.9) is None and len(s) == 1
    s.clear()
    assert s.next_when() is None


def test_speed_one_keeps_the_recorded_gaps(tmp_path):
    rec = recording(tmp_path, [("c2a", INIT), ("a2c", INIT_OK), *turn(1), ("eof", None)],
                    step_ms=500.0)
    pb = engine(rec, tmp_path, speed=1.0)
    assert pb.tick(0.0)  # initialize was recorded 0.5 s in
    assert pb.engine.wait_time(0.0) == pytest.approx(0.25)  # (the runner's longest wait)
    assert pb.tick(0.49)
    assert pb.engine.wait_time(0.49) == pytest.approx(0.01)
    assert pb.tick(0.5) << sends("initialize") >> E.Written(0.5, True)
    assert pb.agent(0.6, INIT_OK).tick(0.6)  # the prompt came 0.5 s after the answer
    assert pb.tick(1.09)
    assert pb.tick(1.1) << sends("prompt") >> E.Written(1.1, True)


def test_a_racy_frame_keeps_its_recorded_delay_even_as_fast_as_possible(tmp_path):
    cancel = {"jsonrpc": "2.0", "method": "cancel", "id": "c-1", "params": {}}
    lines = [("c2a", INIT), ("a2c", INIT_OK), ("c2a", prompt(1)),
             ("a2c", event("TurnBegin", {"user_input": "hi"})), ("c2a", cancel),
             ("a2c", {"jsonrpc": "2.0", "id": "c-1", "result": {}}),
             ("a2c", event("TurnEnd")), ("a2c", done(1)), ("eof", None)]
    rec = recording(tmp_path, lines, step_ms=2000.0)
    pb = engine(rec, tmp_path)
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb.agent(0.1, INIT_OK).tick(0.1) << sends("prompt") >> E.Written(0.1, True)
    assert pb.agent(0.2, event("TurnBegin", {"user_input": "hi"})).tick(0.2)
    # recorded 2 s after the agent's last frame: kept, up to the cap
    assert pb.tick(0.2 + 1.99)
    assert pb.tick(0.2 + min(2.0, RACY_DELAY_CAP_S)) << sends("cancel")


def test_an_answer_waits_for_a_client_frame_recorded_before_it(tmp_path):
    """The recorded client cancelled before it answered the pending request: the answer is held
    until the cancel is out (or HOLD_MAX_S has passed)."""
    cancel = {"jsonrpc": "2.0", "method": "cancel", "id": "c-1", "params": {}}
    lines = [("c2a", INIT), ("a2c", INIT_OK), ("c2a", prompt(1)), ("a2c", approval("rec-1")),
             ("c2a", cancel), ("c2a", approve("rec-1", "reject")),
             ("a2c", {"jsonrpc": "2.0", "id": "c-1", "result": {}}), ("a2c", done(1)),
             ("eof", None)]
    rec = recording(tmp_path, lines, step_ms=1000.0)
    pb = engine(rec, tmp_path)
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb.agent(0.1, INIT_OK).tick(0.1) << sends("prompt") >> E.Written(0.1, True)
    assert pb.agent(0.2, approval("live-1")) << A.ClientEffects
    assert pb.tick(0.2)
    assert pb.engine.held and pb.engine.stats["answers_held"] == 1
    assert pb.engine.wait_time(0.2) == pytest.approx(0.005)  # held: the runner looks often
    # the cancel is racy: it goes 1 s after the agent's frame, and the answer right behind it
    assert pb.tick(1.2) << sends("cancel") >> E.Written(1.2, True) << answers("live-1", "reject")
    assert not pb.engine.held and HOLD_MAX_S > 1.0


# -- timeouts ------------------------------------------------------------------------------------
def test_silence_while_a_frame_is_expected_stops_the_replay(tmp_path):
    rec = recording(tmp_path, [("c2a", INIT), ("a2c", INIT_OK), *turn(1, text("x")),
                               ("eof", None)])
    pb = engine(rec, tmp_path, frame_timeout=3.0)
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb.agent(0.1, INIT_OK).tick(0.1) << sends("prompt") >> E.Written(0.1, True)
    assert pb.tick(3.0)  # 2.9 s of silence: allowed
    assert pb.tick(3.2) << diverges("timeout", "waited 3s", "TurnBegin") << A.Stop << \
        A.CloseInput()
    assert pb.engine.stopped == "no frame from the agent for 3s"
    assert pb.tick(3.2 + STOP_GRACE_S) << A.Done()


def test_start_up_is_allowed_the_startup_timeout_not_the_frame_timeout(tmp_path):
    rec = recording(tmp_path, [("c2a", INIT), ("a2c", INIT_OK), *turn(1), ("eof", None)])
    pb = engine(rec, tmp_path, frame_timeout=3.0, startup_timeout=50.0)
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb.tick(49.9)
    assert pb.tick(50.1) << diverges("timeout", "gave up at start-up", "--startup-timeout") \
        << A.Stop << A.CloseInput()


def test_an_agent_that_does_not_exit_after_its_input_closed(tmp_path):
    rec = recording(tmp_path, [("c2a", INIT), ("a2c", INIT_OK), ("eof", None)])
    pb = engine(rec, tmp_path, frame_timeout=3.0)
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb.agent(0.1, INIT_OK).tick(0.1) << A.CloseInput()
    assert pb.tick(3.2) << diverges("agent_exit", "did not close its output") << A.Stop
    assert pb.tick(3.2 + STOP_GRACE_S) << A.Done()


def test_the_whole_run_timeout_kills_the_agent(tmp_path):
    rec = recording(tmp_path, [("c2a", INIT), ("a2c", INIT_OK), *turn(1), ("eof", None)])
    pb = engine(rec, tmp_path, timeout=10.0, frame_timeout=100.0)
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb.agent(0.1, INIT_OK).tick(0.1) << sends("prompt") >> E.Written(0.1, True)
    assert pb.tick(10.0) << A.Kill() >> E.Killed(10.0, True)
    assert pb.tick(10.1)  # asked once
    assert pb >> E.PeerClosed(10.2)
    assert pb.tick(10.2) << A.ReapAgent(2.0) >> E.AgentExited(10.2, -9) << A.Done()
    divs = finish(pb.engine, -9)
    assert pb.engine.stopped == "whole-run timeout"
    assert any(d.kind == "timeout" and "longer than 10s" in d.message for d in divs)


def test_an_agent_that_exits_before_answering_initialize_failed_its_set_up(tmp_path):
    rec = recording(tmp_path, [("c2a", INIT), ("a2c", INIT_OK), *turn(1), ("eof", None)])
    pb = engine(rec, tmp_path)
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb >> E.PeerClosed(0.5)
    assert pb.tick(0.5) << A.ReapAgent(2.0) >> E.AgentExited(0.5, 1) << \
        diverges("agent_exit", "exited (code 1) before the client sent", "init-1") << A.Done()
    assert pb.engine.setup_failed == "the agent exited (code 1) before answering initialize"


# -- signals -------------------------------------------------------------------------------------
def test_a_recorded_signal_is_sent_after_its_recorded_delay(tmp_path):
    lines = [("c2a", INIT), ("a2c", INIT_OK), *turn(1), ("signal", "SIGTERM")]
    rec = recording(tmp_path, lines, step_ms=1000.0, exit_code=143)
    assert [s.signal for s in plan_steps(rec)] == [None, None, "SIGTERM", None]
    pb = engine(rec, tmp_path)
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb.agent(0.1, INIT_OK).tick(0.1) << sends("prompt") >> E.Written(0.1, True)
    for t, frame in [(0.2, event("TurnBegin", {"user_input": "hi"})), (0.3, event("TurnEnd")),
                     (0.4, done(1))]:
        assert pb.agent(t, frame)
    assert pb.tick(0.4)  # recorded 1 s after the turn's end
    # the tick ends at the signal: what follows depends on whether it was sent
    assert pb.tick(1.4) << A.SendSignal("SIGTERM")
    # sent: the client's EOF, recorded right after it, follows
    assert pb >> E.SignalResult(1.4, "SIGTERM", True) << A.CloseInput()
    assert pb.engine.signals_sent == ["SIGTERM"]
    # the agent ended by the signal: no EOF of the client's is owed
    assert pb >> E.PeerClosed(1.5)
    assert pb.tick(1.5) << A.Done()
    assert finish(pb.engine, -15) == []  # ended by SIGTERM, as recorded (143)
    assert "exited with code 3" in finish(pb.engine, 3)[-1].message


def test_a_signal_that_could_not_be_sent_is_counted(tmp_path):
    lines = [("c2a", INIT), ("a2c", INIT_OK), ("signal", "SIGINT"), ("eof", None)]
    rec = recording(tmp_path, lines, step_ms=1.0)
    pb = engine(rec, tmp_path)
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb.agent(0.1, INIT_OK).tick(0.1)
    assert pb.tick(0.2) << A.SendSignal("SIGINT")
    assert pb >> E.SignalResult(0.2, "SIGINT", False) << A.CloseInput()
    assert pb.engine.stats["signals_not_sent"] == 1 and not pb.engine.signals_sent


# -- --serve: the engine stands in for the agent ---------------------------------------------------
def serve(rec: Recording, tmp_path: Path, **opts: Any) -> ServePlaybook:
    o = ReplayOptions(startup_timeout=60.0, **opts).validate()
    eof_at = rec.eof_at if rec.eof_at is not None else len(rec.msgs)
    return ServePlaybook(ServeEngine(rec, o, str(tmp_path), eof_at))


class ServePlaybook(Playbook):
    def client(self, at: float, frame: dict) -> ServePlaybook:
        self >> E.PeerFrame(at, int(at * 1e9), orjson.dumps(frame))
        return self


def emits(frame: dict) -> Callable[[Any], bool]:
    return lambda a: isinstance(a, A.SendFrame) and orjson.loads(a.raw) == frame


def test_serve_answers_the_client_as_the_recorded_agent_did(tmp_path):
    rec = recording(tmp_path, [("c2a", INIT), ("a2c", INIT_OK), *turn(1, text("hello")),
                               ("eof", None)])
    pb = serve(rec, tmp_path)
    assert pb >> E.Started(0.0, 0) << A.AwaitClient(30.0)
    live_init = dict(INIT, id=7)  # the live client's own id: the response is re-addressed
    assert pb.client(0.1, live_init) << emits(dict(INIT_OK, id=7))
    assert pb >> E.Written(0.1, True) << A.AwaitClient(30.1)
    assert pb.client(0.2, prompt(1)) << emits(event("TurnBegin", {"user_input": "hi"}))
    for frame in (text("hello"), event("TurnEnd"), done(1)):
        assert pb >> E.Written(0.2, True) << emits(frame)
    assert pb >> E.Written(0.2, True) << A.AwaitClient(30.2)  # for the client's EOF
    assert pb >> E.PeerClosed(0.3) << A.Done()
    pb.engine.leftovers()
    assert pb.engine.divs == [] and pb.engine.stats == {"received": 2, "emitted": 5,
                                                        "answers_checked": 0}


def test_serve_reports_a_changed_answer_and_a_client_that_is_late(tmp_path):
    lines = [("c2a", INIT), ("a2c", INIT_OK), ("c2a", prompt(1)), ("a2c", approval("rec-1")),
             ("c2a", approve("rec-1")), ("a2c", done(1)), ("eof", None)]
    rec = recording(tmp_path, lines)
    pb = serve(rec, tmp_path, frame_timeout=5.0)
    assert pb >> E.Started(0.0, 0) << A.AwaitClient(5.0)
    assert pb.client(0.1, INIT) << A.SendFrame >> E.Written(0.1, True) << A.AwaitClient(5.1)
    assert pb.client(0.2, prompt(1)) << emits(approval("rec-1"))
    # (the recording's order, repaired: the recorded answer came in after the prompt's response)
    assert pb >> E.Written(0.2, True) << emits(done(1))
    assert pb >> E.Written(0.2, True) << A.AwaitClient(5.2)
    assert pb.client(0.3, approve("rec-1", "reject")) << \
        diverges("client", "answered", "'reject', recorded 'approve'") << A.AwaitClient(5.3)
    assert pb >> E.Tick(5.3) << diverges("timeout", "waited 5s for the client to close its input") \
        << A.Done()
    assert pb.engine.stopped == "client timeout"


def test_serve_takes_an_ending_signal_as_the_end_of_the_session(tmp_path):
    rec = recording(tmp_path, [("c2a", INIT), ("a2c", INIT_OK), *turn(1), ("eof", None)])
    pb = serve(rec, tmp_path)
    assert pb >> E.Started(0.0, 0) << A.AwaitClient(30.0)
    assert pb.client(0.1, INIT) << A.SendFrame >> E.Written(0.1, True) << A.AwaitClient(30.1)
    assert pb >> E.ClientSignal(0.2, "SIGTERM") << \
        diverges("client", "ended the session (SIGTERM) instead of sending request prompt") \
        << A.Done()
    assert pb.engine.stopped == "client ended the session early (SIGTERM)"
    assert pb.engine.silent  # nothing more goes to a client that has left


def test_serve_hears_how_a_write_to_the_client_went_through_written(tmp_path):
    """--serve's outcome of a SendFrame is the agent replay's Written: left (the client's ending
    signal came while writing) makes the walk silent, not ok stops it."""
    rec = recording(tmp_path, [("c2a", INIT), ("a2c", INIT_OK), *turn(1), ("eof", None)])
    pb = serve(rec, tmp_path)
    assert pb >> E.Started(0.0, 0) << A.AwaitClient(30.0)
    assert pb.client(0.1, INIT) << A.SendFrame >> E.Written(0.1, False, left=True) \
        << A.AwaitClient(30.1)
    assert pb.engine.silent and not pb.engine.stopped and pb.engine.stats["emitted"] == 0
    pb = serve(rec, tmp_path)
    assert pb >> E.Started(0.0, 0) << A.AwaitClient(30.0)
    assert pb.client(0.1, INIT) << A.SendFrame >> E.Written(0.1, False) << A.Done()
    assert pb.engine.stopped == "the client closed its input (our stdout)"


# -- a fork: one recorded answer changed -----------------------------------------------------------
def test_a_fork_gives_the_changed_answer_at_its_request_and_the_recorded_ones_elsewhere(tmp_path):
    from wire_recorder.replay.engine.fork import ForkEngine, changed_answer, fork_point

    lines = [("c2a", INIT), ("a2c", INIT_OK), ("c2a", prompt(1)),
             ("a2c", event("TurnBegin", {"user_input": "hi"})), ("a2c", approval("rec-1")),
             ("c2a", approve("rec-1")), ("a2c", approval("rec-2", "echo bye")),
             ("c2a", approve("rec-2")), ("a2c", event("TurnEnd")), ("a2c", done(1)),
             ("eof", None)]
    rec = recording(tmp_path, lines, step_ms=100.0)
    req = fork_point(rec, "ApprovalRequest#2")
    assert req is fork_point(rec, "2") is fork_point(rec, "rec-2")
    new, change = changed_answer(rec, req, "reject")
    assert change == "response 'approve' → 'reject'"
    merged, what = changed_answer(rec, req, '{"feedback": "no"}')  # fields replace the result's
    assert merged.obj["result"] == {"request_id": "rec-2", "response": "approve",
                                    "feedback": "no"} and what == "feedback (absent) → 'no'"
    eng = ForkEngine(rec, ["kimi", "--wire"], {}, str(tmp_path),
                     ReplayOptions(startup_timeout=60.0).validate(), fork_index=req.index,
                     answer=new)
    pb = Playbook(eng)
    assert pb >> E.Started(0.0, 0)
    assert pb.tick(0) << sends("initialize") >> E.Written(0, True)
    assert pb.agent(0.1, INIT_OK).tick(0.1) << sends("prompt") >> E.Written(0.1, True)
    assert pb.agent(0.15, event("TurnBegin", {"user_input": "hi"}))
    assert pb.agent(0.2, approval("live-1")) << A.ClientEffects
    assert pb.tick(0.2) << answers("live-1", "approve") >> E.Written(0.2, True)
    assert eng.forked_at is None
    assert pb.agent(0.3, approval("live-2", "echo bye")) << A.ClientEffects
    assert pb.tick(0.3) << answers("live-2", "reject") >> E.Written(0.3, True)
    assert eng.forked_at == "turn 1" and eng.stats["forked"] == 1
