"""wire-replay: deterministic replay of recorded Wire sessions, in both directions.

    from wire_recorder.replay import replay_session, serve_session, ReplayOptions
    result = replay_session("s.db", ["kimi", "--wire"], env=env, cwd=workdir)
    if not result.ok:
        print(render_text(result))        # first divergence, diff, unused requests …

See docs/replay.md.
"""

from .compare import Divergence
from .driver import ReplayOptions, ReplayResult, replay_session
from .errors import AgentStartError, ReplayInputError
from .matchers import DEFAULT_MATCH_ON, MATCHERS, matcher
from .normalize import DEFAULT_IGNORE, IgnoreRule
from .recording import Recording, load
from .report import render_json, render_junit, render_text, to_dict, write_report
from .serve import serve_session
from .update import change_summary, write_update

__all__ = [
    "DEFAULT_IGNORE", "DEFAULT_MATCH_ON", "MATCHERS", "AgentStartError", "Divergence",
    "IgnoreRule", "Recording", "ReplayInputError", "ReplayOptions", "ReplayResult", "change_summary",
    "load", "matcher", "render_json", "render_junit", "render_text", "replay_session",
    "serve_session", "to_dict", "write_report", "write_update",
]
