"""What differs on every run of an unchanged agent, as data: the value patterns every protocol
masks (UUIDs, clocks, redaction placeholders, minted ids), plus each adapter's own
(`Adapter.value_patterns`), and the scratch paths and session id a run's command line and cwd
name. Replay's normaliser (replay/normalize.py) and `wire-diff` (analysis/diff*.py) mask with
the same data, so that what one calls a change the other does too."""

from __future__ import annotations

import os
from collections.abc import Sequence

import orjson

from ..minted import EPOCH_ID_PATTERN
from ..redact import PLACEHOLDER_RE
from .base import Adapter

# (name, pattern, placeholder) for every protocol; the adapter's own come after these. One
# combined regex runs over each frame's raw bytes.
VALUE_PATTERNS: tuple[tuple[str, bytes, bytes], ...] = (
    ("uuid", rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", b"<uuid>"),
    ("hex32", rb"(?<![0-9a-fA-F])[0-9a-f]{32}(?![0-9a-fA-F])", b"<hex>"),
    ("timestamp", rb"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?", b"<time>"),
    # placeholders differ per recording (a per-recording key): all of them are one value here
    ("redacted", PLACEHOLDER_RE.pattern, b"<redacted>"),
    # request ids minted from a clock (the vendor Node SDK's `N_<epoch ms>`), where they are
    # echoed; the JSON-RPC id itself is matched, not compared
    ("minted_id", EPOCH_ID_PATTERN, b"<id>"),
)


def value_patterns(adapter: Adapter) -> tuple[tuple[str, bytes, bytes], ...]:
    return VALUE_PATTERNS + tuple(adapter.value_patterns)


def json_inner(s: str) -> bytes:
    """How `s` appears inside a JSON string literal (as kimi writes it: raw UTF-8)."""
    return orjson.dumps(s)[1:-1]


def environment_values(command: Sequence[str], cwd: str | None,
                       env: dict[str, str] | None, adapter: Adapter) -> list[tuple[bytes, bytes]]:
    """(literal, placeholder) pairs for one side's run: its scratch paths and session id (the
    value of one of the adapter's `session_flags`).

    Paths come from the cwd, HOME (when given), and absolute-path arguments of the command; a
    file argument contributes its folder, so `--config-file /tmp/run-x/config.toml` also covers
    `/tmp/run-x/home`. Longest first, so a work dir wins over its parent.
    """
    paths: set[str] = set()
    session_ids: set[str] = set()
    if cwd:
        paths.add(cwd)
    if env and env.get("HOME") and env.get("HOME") != os.environ.get("HOME"):
        paths.add(env["HOME"])
    args = list(command[1:])
    for i, a in enumerate(args):
        flag, eq, val = a.partition("=")
        if flag in adapter.session_flags:
            v = val if eq else (args[i + 1] if i + 1 < len(args) else "")
            if len(v) >= 4:
                session_ids.add(v)
        if a.startswith("/") and len(a) > 1:
            paths.add(a)
            if os.path.splitext(a)[1]:
                paths.add(os.path.dirname(a))
        elif eq and val.startswith("/") and flag in adapter.path_flags:
            paths.add(val)
    pairs = [(json_inner(p.rstrip("/")), b"<path>") for p in paths if len(p.rstrip("/")) > 1]
    pairs += [(json_inner(s), b"<kimi-session>") for s in session_ids]
    pairs.sort(key=lambda x: -len(x[0]))
    return pairs
