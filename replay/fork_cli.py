"""`wire-replay SESSION --fork-at REQUEST --answer CHANGE -- AGENT`: the command line of a fork
(replay.fork), printed as a replay is, with a line naming the branch stored."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import orjson

from wire_recorder.recorder.errors import UsageError
from wire_recorder.recorder.handoff import exists_after_loaders
from wire_recorder.recorder.visible import visible

from .driver import ReplayOptions, gc_paused, no_agent_command


def run_fork(session_file: str, opts: ReplayOptions, *, fork_at: str, answer: str,
             agent: Sequence[str], session: str | None, output: str | None, cwd: str | None,
             env: dict[str, str] | None, origin: Sequence[str], report: str | None,
             as_json: bool, quiet: bool) -> int:
    """Fork, store the branch, print; 0 when the branch is stored, 1 when the replay never
    reached the fork point."""
    from . import report as rp
    from .fork import fork_session
    from .recording import load

    for path in origin:
        if not exists_after_loaders(path) or not os.path.isfile(path):
            raise UsageError(f"--origin {path}: no such file", "give a .db or .jsonl recording")
    with gc_paused():
        rec = load(session_file, session)
        if not agent and not opts.recorded_command:
            raise no_agent_command(rec, "--fork-at")
        run_env = None
        if env:
            run_env = dict(os.environ)
            run_env.update(env)
        fork = fork_session(rec, list(agent) or None, fork_at=fork_at, answer=answer,
                            env=run_env, cwd=cwd, options=opts, origin_files=origin,
                            output=output)
    result = fork.result
    if report:
        rp.write_report(report, result)
    summary = visible(fork.summary(), lines=True)
    if as_json:
        d = rp.to_dict(result)
        d["fork"] = {"parent": fork.parent_id, "at": fork.at, "change": fork.change,
                     "applied": fork.applied, "path": fork.path, "session_id": fork.session_id}
        sys.stdout.write(orjson.dumps(d, default=str).decode() + "\n")
    else:
        if not quiet:
            sys.stdout.write(rp.render_text(result, color=sys.stdout.isatty()))
        sys.stdout.write(summary)
    sys.stdout.flush()
    return fork.exit_code
