"""The LLM pinned to a recorded model leg (a session recorded with `wire-proxy --llm`): the agent
runs with its own config, HOME and command, pointed the way the proxy pointed it (the same
environment variable, recorder/llm_upstream.py) at a loopback model that answers each request
with the recorded answer, as streamed (llm_leg_server.py); each request the agent makes is
compared with the recorded one (llm_request_diff.py), and a difference is a divergence of the
replay that names the part of the request that changed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wire_recorder.recorder.errors import InputError
from wire_recorder.recorder.llm_upstream import NoLeg, find

from . import LlmPin
from .llm_request_diff import request_diffs
from .scratch import write_json

if TYPE_CHECKING:
    from ..compare import Divergence
    from ..recording import Recording
    from .llm_leg_server import RecordedModel

EVENTS = ("llm_leg", "llm_request", "llm_response")
EXHAUSTED = "wire-replay: the recording has no model call {n} (its model leg ends before)"


def exchanges_of(rec: Recording) -> list[dict[str, Any]] | None:
    """The recorded model leg of `rec`: [{n, request, response}], None when it has none (not
    recorded with --llm, or not a .db)."""
    path = rec.path
    if not path or not os.path.isfile(path) or path.endswith((".jsonl", ".json")):
        return None
    from wire_recorder.recorder.store import open_store

    try:
        with open_store(path, read_only=True) as store:
            frames = store.frames(rec.session_id, directions=("proxy",))
    except Exception:  # noqa: BLE001 - not a store this can read: no leg (the replay says more)
        return None
    leg = False
    out: dict[int, dict[str, Any]] = {}
    for f in frames:
        if f.method not in EVENTS:
            continue
        leg = True
        try:
            ev = json.loads(bytes(f.raw or b"{}"))
        except ValueError:
            continue
        if f.method == "llm_leg" or not isinstance(ev.get("n"), int):
            continue
        side = "request" if f.method == "llm_request" else "response"
        out.setdefault(ev["n"], {"n": ev["n"]})[side] = ev
    return [out[k] for k in sorted(out)] if leg else None


def pin(rec: Recording, argv: Sequence[str], env: Mapping[str, str] | None,
        exchanges: list[dict[str, Any]]) -> LegPin:
    return LegPin(rec, argv, env, exchanges)


class LegPin(LlmPin):
    def __init__(self, rec: Recording, argv: Sequence[str], env: Mapping[str, str] | None,
                 exchanges: list[dict[str, Any]]):
        base = dict(os.environ if env is None else env)
        from .llm_leg_kimi_cli import KimiCliLeg
        from .llm_leg_kimi_code import KimiCodeLeg

        # a scratch HOME (Kimi Code) or share dir (kimi-cli's anthropic), any user HOME
        self._kimi_code: KimiCodeLeg | KimiCliLeg | None = \
            KimiCodeLeg.of(rec, argv, base) or KimiCliLeg.of(rec, argv, base)
        try:
            self.upstream = find(argv, base) if self._kimi_code is None else None
        except NoLeg as e:
            raise InputError(f"{rec.path}: session {rec.session_id} has its model leg recorded, "
                             f"but the agent cannot be pointed at it: {e}",
                             "give the agent its config as when it was recorded, or replay "
                             "with --live-llm") from None
        from .llm_leg_server import RecordedModel

        self.main = rec
        self.server: RecordedModel | None = RecordedModel(lambda n: EXHAUSTED.format(n=n))
        stand_in = self.server.start()
        self.argv = list(argv)
        self.env = (self._kimi_code.env(stand_in) if self._kimi_code is not None
                    else self.upstream.agent_env(base, stand_in))  # type: ignore[union-attr]
        self.home = base.get("HOME") or ""
        self._exchanges: dict[int, list[dict[str, Any]]] = {}
        self._served: list[dict[str, Any]] = []
        self._paths: tuple[str, str] | None = None
        answers = sum(1 for e in exchanges if (e.get("response") or {}).get("status") == 200)
        self.notes = [f"LLM pinned to the recorded model leg: {len(exchanges)} exchange(s) "
                      f"({answers} answered) of session {rec.session_id} served as recorded "
                      f"from 127.0.0.1 ({self._how()}), each request compared with "
                      "the recorded one (--live-llm uses the agent's own model)"]
        self._first = exchanges

    def _how(self) -> str:
        if self._kimi_code is not None:
            return self._kimi_code.note()
        assert self.upstream is not None
        return self.upstream.env_var

    def use(self, rec: Recording, rec_workdir: str | None, live_workdir: str | None) -> None:
        exchanges = self._first if rec is self.main else (exchanges_of(rec) or [])
        self._served = exchanges
        old = os.path.normpath(rec_workdir) if rec_workdir else None
        new = os.path.normpath(os.path.abspath(live_workdir)) if live_workdir else None
        self._paths = (old, new) if old and new and old != new else None
        assert self.server is not None
        if self._paths is not None:
            from ..normalize import WorkDirRewrite
            from .kimi import PathMap
            from .llm_leg_map import mapped_chunks

            rewrite, paths = WorkDirRewrite(*self._paths), PathMap(*self._paths)
            self.server.map_body = rewrite
            self.server.map_chunks = lambda chunks: mapped_chunks(chunks, paths)
        else:
            self.server.map_body = lambda body: body
            self.server.map_chunks = lambda chunks: chunks
        self.server.serve(exchanges)

    def _map(self, text: str) -> str:
        if self._paths is None:
            return text
        a, b = (json.dumps(p)[1:-1] for p in self._paths)
        return text.replace(a, b)

    def divergences(self) -> list[Divergence]:
        """What the agent asked its model that it did not ask in the recording, per call."""
        from ..compare import Divergence

        if self.server is None:
            return []
        out: list[Divergence] = []
        live = self.server.live
        for i, ex in enumerate(self._served):
            req = ex.get("request") or {}
            where = f"llm call {i + 1}"
            if i >= len(live):
                if i == len(live):
                    out.append(Divergence("model", where, f"the agent did not make it (it made "
                                          f"{len(live)} of the {len(self._served)} recorded)"))
                break
            got = live[i]
            if got["path"] != req.get("path") or got["method"] != req.get("method"):
                out.append(Divergence("model", where, f"asked {got['method']} {got['path']}, "
                                      f"recorded {req.get('method')} {req.get('path')}"))
                continue
            try:
                recorded = json.loads(req.get("request_body") or "null")
                now = json.loads(got["body"] or b"null")
            except ValueError:
                if (req.get("request_body") or "").encode() != got["body"]:
                    out.append(Divergence("model", where, "the request body changed"))
                continue
            if not isinstance(recorded, dict) or not isinstance(now, dict):
                if recorded != now:
                    out.append(Divergence("model", where, "the request body changed"))
                continue
            diffs = request_diffs(recorded, now, self._map)
            if diffs:
                out.append(Divergence("model", where, "; ".join(diffs), details=diffs))
        if len(live) > len(self._served):
            out.append(Divergence("model", f"llm call {len(self._served) + 1}",
                                  f"the agent made {len(live)} model calls, the recording "
                                  f"{len(self._served)}"))
        return out

    def scripts(self) -> list[str]:
        return []

    def write_scripts(self, path: str) -> None:
        write_json(path, self._served, "exchanges")

    def cleanup(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self._kimi_code is not None:
            self._kimi_code.cleanup()
        done = getattr(self.upstream, "cleanup", None)  # a Kimi Code upstream's scratch HOME
        if done is not None:
            done()
