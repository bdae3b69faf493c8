"""wire-check: every frame of a recording against its protocol's model; exit 1 on violations."""

from __future__ import annotations

import sys
from typing import Any

import orjson
import typer

from wire_recorder.recorder.edge import entry
from wire_recorder.recorder.helpstyle import help_text, make_app
from wire_recorder.recorder.visible import json_visible, visible

app = make_app()


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
) -> int:
    from wire_recorder.recorder.errors import SessionNotFound

    from .conformance import check_frames, has_model, sessions_of
    from .sources import expand_inputs

    checked: list[dict[str, Any]] = []
    findings = []
    files = expand_inputs(paths)
    for path in files:
        try:
            sessions = list(sessions_of(path, session))
        except SessionNotFound:
            if len(files) == 1:
                raise
            continue  # --session picks among many files
        for row, frames in sessions:
            found = check_frames(row, frames)
            checked.append({"path": path, "session_id": row.get("session_id"),
                            "name": row.get("name"), "protocol": row.get("protocol"),
                            "protocol_version": row.get("protocol_version"),
                            "frames": sum(f.direction in ("c2a", "a2c") for f in frames),
                            "model": has_model(row),
                            "findings": found})
            findings.extend(found)
    if not checked:
        raise SessionNotFound(f"no session matching {session!r} in {len(files)} files")
    bad = sum(v.severity == "violation" for v in findings)
    if as_json:
        for c in checked:
            c["findings"] = [v.as_dict() for v in c["findings"]]
        # names, labels and messages come from recordings: nothing raw reaches the terminal
        sys.stdout.write(json_visible(orjson.dumps(
            {"violations": bad, "unknown": len(findings) - bad, "sessions": checked},
            option=orjson.OPT_INDENT_2)).decode() + "\n")
    else:
        sys.stdout.write(visible("".join(_text(c) for c in checked), lines=True))
        frames = sum(c["frames"] for c in checked)
        sys.stdout.write(f"{bad} violation{'' if bad == 1 else 's'}, "
                         f"{len(findings) - bad} unknown in {len(checked)} "
                         f"session{'' if len(checked) == 1 else 's'} ({frames} frames)\n")
    return 1 if bad else 0


def _text(c: dict[str, Any]) -> str:
    who = f"{c['name']} ({c['session_id']})" if c["name"] else str(c["session_id"])
    lines = [f"{c['path']}: {who}, {c['protocol'] or 'unknown protocol'} "
             f"{c['protocol_version'] or ''}".rstrip() + f", {c['frames']} frames"
             + ("" if c["model"] else " (JSON-RPC only: no model of this protocol)")]
    for v in c["findings"]:
        mark = "" if v.severity == "violation" else " [unknown]"
        lines.append(f"  seq {v.seq} {v.direction} {' '.join(filter(None, (v.kind, v.label)))}"
                     f"{mark}: {v.message}")
    return "\n".join(lines) + "\n"


main = entry(app, "wire-check")
