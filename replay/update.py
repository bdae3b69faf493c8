"""`--update`: keep what the current agent did as the new recording (snapshot testing).

The replay's own view of the run (every frame sent and received, the agent's stderr, spawn and
exit) is written in the recording's format: a `.jsonl` transcript is rewritten (so the change
shows in a diff of the text file), a `.db` gets the session replaced. The session id and name
stay, so the new recording replaces the old one.

Nothing is written when nothing beyond volatile fields changed: when the replay accepted the run
(no divergence), neither a `.db` nor a format-2 transcript is touched, whatever the agent's own
measurements (kimi's hook `duration_ms`), its races (a StatusUpdate on either side of a tool
result) or its stderr did; a format-1 transcript is brought to format 2. After a divergence the
file is rewritten, and format 2 (no times, pids, run-specific ids or paths) makes the diff show
only what changed.
"""

from __future__ import annotations

import signal
import time

import orjson

from wire_recorder.recorder.classify import Classifier, Extracted
from wire_recorder.recorder.errors import OutputError
from wire_recorder.recorder.model import Frame, frame_row, wall_ts
from wire_recorder.recorder.store import open_store
from wire_recorder.recorder.transcript import encode_session, store_session, write_cassette

from .driver import ReplayResult


def live_session(result: ReplayResult) -> tuple[dict, list[Frame]]:
    rec = result.recording
    sid = rec.session_id
    frames: list[Frame] = []
    classify = Classifier(rec.session.get("protocol") or None)
    ordered = sorted(result.frames, key=lambda f: f.mono_ns)  # stamped by several threads
    given = result.command or result.argv
    for lf in ordered:
        if lf.direction == "proxy":
            data = lf.data or {}
            if lf.event == "spawn" and given and "argv" in data:
                # the command as given, as in the session's: the set-up around it (a pinned
                # LLM's scratch config, a new temp folder on every run) is not the recording's
                data = dict(data, argv=list(given))
            ex = Extracted("lifecycle", method=lf.event, payload=orjson.dumps(data).decode())
            raw = orjson.dumps(dict(data, event=lf.event))
        elif lf.direction == "stderr":
            ex, raw = Extracted("stderr"), lf.raw
        else:
            ex, raw = classify(lf.raw, lf.direction), lf.raw
        # a stderr chunk is the bytes a read returned, its newlines included (the proxy stores
        # a line per frame with the newline left off); the transcript writer splits it in lines
        nl = False if lf.direction == "stderr" else lf.newline
        frames.append(Frame(*frame_row(sid, len(frames) + 1, wall_ts(lf.wall_ns), lf.mono_ns,
                                       lf.direction, raw, nl, ex)))
    session = {k: v for k, v in rec.session.items() if v is not None}
    start = ordered[0] if ordered else None
    session.update(
        started_at=wall_ts(start.wall_ns if start else time.time_ns()),
        ended_at=wall_ts(ordered[-1].wall_ns) if ordered else None,
        # the command as given (resume flags included), not the set-up replay made around it
        # (a pinned LLM's scratch config, removed after the run)
        command=orjson.dumps(result.command or result.argv).decode(),
        exit_code=_exit_status(result.agent_exit_code),
        end_reason="agent_exit",
        source="wire-replay",
        mono_start_ns=start.mono_ns if start else 0,
        frame_count=sum(1 for f in frames if f.direction in ("c2a", "a2c")),
        lost_frames=0,
        lost_bytes=0,
    )
    for f in result.frames:
        if f.event == "spawn" and f.data:
            session["cwd"] = f.data.get("cwd", session.get("cwd"))
            session["agent_pid"] = f.data.get("pid")
    for k in ("exit_signal", "proxy_pid", "db_note"):
        session.pop(k, None)
    code = result.agent_exit_code
    if code is not None and code < 0:  # as wire-proxy records it: 128 + N and the name
        try:
            session["exit_signal"] = signal.Signals(-code).name
        except ValueError:
            pass
    return session, frames


def _exit_status(code: int | None) -> int | None:
    return 128 - code if code is not None and code < 0 else code


def _is_format2(data: bytes) -> bool:
    return data.startswith(b'{"wire_transcript":2,')


def update_recording(result: ReplayResult, output: str | None = None) -> tuple[str, bool]:
    """Write the live run as the new recording when it differs beyond volatile fields; returns
    the path and whether it was written. A transcript is written 0600."""
    path = output or result.recording.path
    session, frames = live_session(result)
    try:
        if path.endswith(".jsonl"):
            data = encode_session(session, frames)
            try:
                with open(path, "rb") as f:
                    old = f.read()
            except FileNotFoundError:
                old = None
            if old == data or (old is not None and result.ok and _is_format2(old)):
                return path, False
            write_cassette(path, data)  # 0600, whatever the file's mode was
        else:
            if result.ok and output is None:
                return path, False
            with open_store(path) as store:
                store_session(store, session, frames, "wire-replay", replace=True)
    except OSError as e:
        raise OutputError(f"cannot write the updated recording {path}: {e.strerror}") from None
    return path, True


def write_update(result: ReplayResult, output: str | None = None) -> str:
    """Write the live run as the new recording (when it changed); returns the path."""
    return update_recording(result, output)[0]


def change_summary(result: ReplayResult, path: str, limit: int = 20,
                   written: bool = True) -> str:
    s = result.stats
    if not written:
        return (f"unchanged {path} [{result.recording.name}]: {s.get('live_agent_frames', 0)} "
                f"agent frames, no change beyond volatile fields (ids, times, paths); "
                f"not rewritten\n")
    head = (f"updated {path} [{result.recording.name}]: {s.get('live_agent_frames', 0)} agent "
            f"frames (was {s.get('recorded_agent_frames', 0)})")
    if result.ok:
        return head + (", the replay saw no change beyond volatile fields; the file differed "
                       "in its format (brought to transcript format 2)\n")
    lines = [head + f", {len(result.divergences)} change(s):"]
    for d in result.divergences[:limit]:
        lines.append(f"  {d.kind}: {d.headline()}")
        lines.extend(f"      {x}" for x in d.details[:3])
    if len(result.divergences) > limit:
        lines.append(f"  … and {len(result.divergences) - limit} more")
    return "\n".join(lines) + "\n"
