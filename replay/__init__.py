"""wire-replay: deterministic replay of recorded Wire sessions, in both directions.

    from wire_recorder.replay import replay_session, serve_session, ReplayOptions
    result = replay_session("s.db", ["kimi", "--wire"], env=env, cwd=workdir)
    if not result.ok:
        print(render_text(result))        # first divergence, diff, unused requests …

See docs/replay.md.
"""

from importlib import import_module
from typing import Any

# Imported on first use: the pytest plugin (replay.pytest_plugin, loaded by every pytest run in an
# environment that has wire-recorder) imports this package, and must not pay for duckdb and the
# replay engine until a test uses it.
_EXPORTS = {
    "Divergence": ".compare",
    "ReplayOptions": ".driver", "ReplayResult": ".driver", "replay_session": ".driver",
    "AgentStartError": ".errors", "ReplayInputError": ".errors", "AgentSetupError": ".driver",
    "Mode": ".options", "OnUnmatched": ".options", "RecordMode": ".options",
    "DEFAULT_MATCH_ON": ".matchers", "MATCHERS": ".matchers", "matcher": ".matchers",
    "DEFAULT_IGNORE": ".normalize", "IgnoreRule": ".normalize",
    "Recording": ".recording", "load": ".recording",
    "render_json": ".report", "render_junit": ".report", "render_text": ".report",
    "to_dict": ".report", "write_report": ".report",
    "serve_session": ".serve",
    "change_summary": ".update", "write_update": ".update",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "DEFAULT_IGNORE", "DEFAULT_MATCH_ON", "MATCHERS", "AgentSetupError", "AgentStartError",
    "Divergence",
    "IgnoreRule", "Mode", "OnUnmatched", "RecordMode", "Recording", "ReplayInputError",
    "ReplayOptions", "ReplayResult", "change_summary",
    "load", "matcher", "render_json", "render_junit", "render_text", "replay_session",
    "serve_session", "to_dict", "write_report", "write_update",
]
