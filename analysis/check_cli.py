"""wire-check: every frame of a recording against its protocol's model; exit 1 on violations."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
import typer

from wire_recorder.recorder.edge import entry
from wire_recorder.recorder.helpstyle import help_text, make_app
from wire_recorder.recorder.visible import json_visible, visible

app = make_app()

# frames of a session checked by default (the rest are counted and said to be left out): a
# 10^7-frame recording is answered in bounded time
CHECK_MAX = 250_000
# findings listed per session (all are counted): a recording of 10^7 bad frames prints a page
FINDINGS_MAX = 1000


@app.command(help=help_text(
    "Check every frame of recordings against their protocol's model (Wire: wire-recorder's "
    "own; ACP and MCP: the peers' SDKs, from the `check` extra). Violations are listed with "
    "their frame; frames of a method or type the protocol does not know are listed as "
    "unknown. Exit 0: no violations; 1: violations.",
    ["wire-check demo.db", "wire-check 'sessions/*.db' --session multi_step --json"]))
def check_cmd(
    paths: list[str] = typer.Argument(..., metavar="PATH",
                                      help="recordings: .db, transcripts or kimi logs (.jsonl), "
                                           "globs, folders"),
    session: str | None = typer.Option(None, "--session", "-s",
                                       help="only this session: its name, id, or a unique "
                                            "prefix of either"),
    as_json: bool = typer.Option(False, "--json", help="the findings as JSON"),
    max_frames: int = typer.Option(CHECK_MAX, "--max-frames", metavar="N",
                                   help="check the first N frames of each session and say how "
                                        "many were left out (0: all of them)"),
) -> int:
    from wire_recorder.recorder.errors import SessionNotFound

    from .conformance import check_frames, has_model, streamed_sessions
    from .sources import expand_inputs

    checked: list[dict[str, Any]] = []
    bad = unknown = 0
    files = expand_inputs(paths)
    for path in files:
        sessions = streamed_sessions(path, session)
        while True:
            try:
                row, frames = next(sessions)
            except StopIteration:
                break
            except SessionNotFound:
                if len(files) == 1:
                    raise
                break  # --session picks among many files
            # frames are streamed (a 10^7-frame file is read a chunk at a time) and counted
            seen = [0]

            def counted(it: Iterable[Any], seen: list[int] = seen) -> Iterator[Any]:
                for f in it:
                    if max_frames and seen[0] >= max_frames:
                        return  # the rest are left out, and said to be
                    seen[0] += f.direction in ("c2a", "a2c")
                    yield f

            found = check_frames(row, counted(frames))
            checked.append({"path": path, "session_id": row.get("session_id"),
                            "name": row.get("name"), "protocol": row.get("protocol"),
                            "protocol_version": row.get("protocol_version"),
                            "frames": seen[0], "model": has_model(row),
                            "frames_left_out": _left_out(row, seen[0], max_frames),
                            "findings": found[:FINDINGS_MAX],
                            "more": max(0, len(found) - FINDINGS_MAX)})
            bad += sum(v.severity == "violation" for v in found)
            unknown += sum(v.severity != "violation" for v in found)
    if not checked:
        raise SessionNotFound(f"no session matching {session!r} in {len(files)} files")
    if as_json:
        for c in checked:
            c["findings"] = [v.as_dict() for v in c["findings"]]
        # names, labels and messages come from recordings: nothing raw reaches the terminal
        sys.stdout.write(json_visible(orjson.dumps(
            {"violations": bad, "unknown": unknown, "sessions": checked},
            option=orjson.OPT_INDENT_2)).decode() + "\n")
    else:
        sys.stdout.write(visible("".join(_text(c) for c in checked), lines=True))
        frames = sum(c["frames"] for c in checked)
        sys.stdout.write(f"{bad} violation{'' if bad == 1 else 's'}, "
                         f"{unknown} unknown in {len(checked)} "
                         f"session{'' if len(checked) == 1 else 's'} ({frames} frames)\n")
    return 1 if bad else 0


def _left_out(row: dict[str, Any], checked: int, max_frames: int) -> int:
    """Client and agent frames of the session not checked (0 unless the check stopped at
    max_frames); the session's frame_count says how many it has."""
    if not max_frames or checked < max_frames:
        return 0
    total = row.get("frame_count")
    return max(0, total - checked) if isinstance(total, int) else 0


def _text(c: dict[str, Any]) -> str:
    who = f"{c['name']} ({c['session_id']})" if c["name"] else str(c["session_id"])
    lines = [f"{c['path']}: {who}, {c['protocol'] or 'unknown protocol'} "
             f"{c['protocol_version'] or ''}".rstrip() + f", {c['frames']} frames"
             + ("" if c["model"] else " (JSON-RPC only: no model of this protocol)")]
    for v in c["findings"]:
        mark = "" if v.severity == "violation" else " [unknown]"
        lines.append(f"  seq {v.seq} {v.direction} {' '.join(filter(None, (v.kind, v.label)))}"
                     f"{mark}: {v.message}")
    if c["frames_left_out"]:
        lines.append(f"  … {c['frames_left_out']:,} more frames left out: the first "
                     f"{c['frames']:,} were checked (--max-frames 0 checks them all)")
    if c["more"] > 0:
        lines.append(f"  … {c['more']:,} more findings left out (the first {FINDINGS_MAX:,} are "
                     "listed)")
    return "\n".join(lines) + "\n"


main = entry(app, "wire-check")
