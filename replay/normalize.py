"""Frames are normalised before they are matched or compared, so that what differs on every run
of an unchanged agent (ids, clocks, scratch paths) does not count as a change.

Two layers, both documented in docs/replay.md:

* value patterns, applied to the raw JSON text of every frame: UUIDs, ISO timestamps, those the
  protocol adapter adds (`Adapter.value_patterns`: Wire's kimi background-task ids), and the
  run's own scratch paths and session id (taken from the agent command, with the adapter's
  `session_flags` and `path_flags`, and the cwd of each side), replaced by placeholders;
  redaction placeholders (`REDACTED:<hex>`, recorder.redact) become one constant `<redacted>`,
  and each side's frames first go through the recorder's redaction rules (built-in, the project
  config of the current directory, secret-looking variables of this environment), so a
  recording made with redaction compares equal to a live run that sent or echoed the secrets;
* ignore rules `[SELECTOR:]PATH` (defaults below, more with `--ignore`): the value at PATH is
  replaced by "<ignored>" in frames that SELECTOR picks (a Wire type such as ApprovalRequest, a
  JSON-RPC method, `response`/`error`, or none = every frame). PATH is dotted; `*` is any one key
  or list index, `**` any depth.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from wire_recorder.recorder import protocols
from wire_recorder.recorder.errors import UsageError
from wire_recorder.recorder.protocols import volatile
from wire_recorder.recorder.protocols.base import Adapter
from wire_recorder.recorder.protocols.volatile import VALUE_PATTERNS  # noqa: F401 (its old home)
from wire_recorder.recorder.redact import Redactor

from .recording import Msg

IGNORED = "<ignored>"


@dataclass(frozen=True)
class IgnoreRule:
    selector: str | None
    path: tuple[str, ...]
    reason: str = ""

    @classmethod
    def parse(cls, text: str, reason: str = "") -> IgnoreRule:
        head, sep, path = text.partition(":")
        if not sep:
            head, path = "", text
        sel = head.strip() if head else None
        segs = tuple(s for s in path.strip().split("."))
        if not path.strip() or any(not s for s in segs):
            raise UsageError(f"--ignore {text!r} is not a path",
                             "use [SELECTOR:]dotted.path, e.g. request:params.payload.id "
                             "(SELECTOR: a type, a method, request, response or error)")
        return cls(sel, segs, reason)

    def __str__(self) -> str:
        p = ".".join(self.path)
        return f"{self.selector}:{p}" if self.selector else p

    def applies(self, m: Msg) -> bool:
        s = self.selector
        return s is None or s == m.msg_type or s == m.method or s == m.kind

    @functools.cached_property
    def literal_key(self) -> bytes | None:
        last = self.path[-1]
        return None if last in ("*", "**") else orjson.dumps(last)


def default_rules(adapter: Adapter) -> tuple[IgnoreRule, ...]:
    """The protocol adapter's ignore rules (recorder/protocols/), parsed."""
    return tuple(IgnoreRule.parse(text, reason) for text, reason in adapter.ignore)


# Sessions whose protocol is not known are read as Wire ones (replay/recording.py).
DEFAULT_ADAPTER = protocols.get(protocols.LEGACY)
DEFAULT_IGNORE: tuple[IgnoreRule, ...] = default_rules(DEFAULT_ADAPTER)

def value_patterns(adapter: Adapter = DEFAULT_ADAPTER) -> tuple[tuple[str, bytes, bytes], ...]:
    return volatile.value_patterns(adapter)


_json_inner = volatile.json_inner


class WorkDirRewrite:
    """Rewrites the recorded work dir to the live one in frames the replay sends (the recorded
    client's frames, recorded answers, a stand-in agent's frames): as a whole JSON string and as
    the prefix of a path inside any string. No-op when the two are the same directory."""

    def __init__(self, recorded: str | None, live: str | None):
        self.old = self.new = b""
        if recorded and live and os.path.isabs(recorded) and \
                os.path.realpath(recorded) != os.path.realpath(live):
            self.old = _json_inner(recorded.rstrip("/"))
            self.new = _json_inner(os.path.abspath(live).rstrip("/"))

    def __call__(self, raw: bytes) -> bytes:
        if self.old and self.old in raw:
            # (and single-quoted, as in the shell line Kimi Code sends: cd '<dir>' && ...)
            raw = raw.replace(self.old + b'"', self.new + b'"') \
                .replace(self.old + b"/", self.new + b"/").replace(self.old + b"'", self.new + b"'")
        return raw


def rerooted_command(command: Sequence[str], recorded_cwd: str | None,
                     live_cwd: str) -> list[str]:
    """The recorded `command` as if started from `live_cwd`: each absolute-path argument that
    shares more than `/` with `recorded_cwd` moves along with it (`/tmp/a/work` becoming
    `/tmp/b/work` takes `--repository /tmp/a/repo` to `/tmp/b/repo`). What a stand-in
    (`--serve`) masks on the live side, where the client's own command is not known: the
    unchanged client, run from a dir laid out as the recorded one, names the same things."""
    if not recorded_cwd or not os.path.isabs(recorded_cwd):
        return list(command)
    rec = os.path.normpath(recorded_cwd)

    def move(p: str) -> str:
        if not os.path.isabs(p) or os.path.commonpath([rec, os.path.normpath(p)]) == os.sep:
            return p
        return os.path.normpath(os.path.join(live_cwd, os.path.relpath(p, rec)))

    out = list(command[:1])
    for a in command[1:]:
        flag, eq, val = a.partition("=")
        out.append(f"{flag}={move(val)}" if eq and not a.startswith("/") else move(a))
    return out


def environment_values(command: Sequence[str], cwd: str | None,
                       env: dict[str, str] | None = None,
                       adapter: Adapter = DEFAULT_ADAPTER) -> list[tuple[bytes, bytes]]:
    """recorder.protocols.volatile.environment_values, with Wire as the default adapter."""
    return volatile.environment_values(command, cwd, env, adapter)


class Normalizer:
    """Normalises frames of one side (recorded or live). Both sides share the rules; each has its
    own environment values."""

    def __init__(self, rules: Iterable[IgnoreRule] = DEFAULT_IGNORE,
                 values: Sequence[tuple[bytes, bytes]] = (),
                 adapter: Adapter = DEFAULT_ADAPTER,
                 redactor: Redactor | None = None):
        self.rules = tuple(rules)
        # The same rules on both sides: a live secret becomes a placeholder like the recorded one
        # (and a recording made with --no-redact is compared the same way).
        self.redactor = redactor if redactor is not None else _shared_redactor()
        self.values = tuple(values)
        patterns = value_patterns(adapter)
        # one regex pass per frame: the environment literals (longest first) then the patterns
        lits = [re.escape(lit) for lit, _ in self.values]
        self._placeholders = [ph for _, ph in self.values] + [ph for _, _, ph in patterns]
        # compiled on the first frame that holds something to replace (~5 ms a side)
        self._source = b"|".join([b"(" + x + b")" for x in lits] +
                                 [b"(" + p + b")" for _, p, _ in patterns])
        self._compiled: re.Pattern[bytes] | None = None
        # Whether the combined regex matches at all, asked of each alternative alone: each one
        # compiled alone gets re's own prefix and charset skips (the combined alternation is
        # tried at every byte), so a frame with nothing to replace, most of a session's
        # streamed text, costs a third. The same alternatives: a frame passes exactly when the
        # combined regex would find something.
        self._literals = tuple(lit for lit, _ in self.values)
        self._probes = tuple((_required_bytes(p), re.compile(p).search) for _, p, _ in patterns)
        self._by_selector: dict[str | None, list[IgnoreRule]] = {}
        for r in self.rules:
            self._by_selector.setdefault(r.selector, []).append(r)
        self._rules_of: dict[tuple, tuple[IgnoreRule, ...]] = {}

    @property
    def _pattern(self) -> re.Pattern[bytes]:
        if self._compiled is None:
            self._compiled = re.compile(self._source)
        return self._compiled

    def _sub(self, m: re.Match) -> bytes:
        return self._placeholders[(m.lastindex or 1) - 1]  # every alternative is a group

    def text(self, raw: bytes) -> bytes:
        raw = self.redactor.redact_bytes(raw)
        for lit in self._literals:
            if lit in raw:
                return self._pattern.sub(self._sub, raw)
        for needs, probe in self._probes:
            # a pattern whose bytes are not all there cannot match: a memchr-fast look first
            if (needs is None or needs in raw) and probe(raw) is not None:
                return self._pattern.sub(self._sub, raw)
        return raw

    def _rules_for(self, m: Msg) -> tuple[IgnoreRule, ...]:
        sel = (m.msg_type, m.method, m.kind)
        out = self._rules_of.get(sel)
        if out is None:  # a handful of (type, method, kind) per session: worked out once each
            get = self._by_selector.get
            rules = list(get(None, ()))
            for key in dict.fromkeys(sel):
                if key is not None:
                    rules.extend(get(key, ()))
            out = self._rules_of[sel] = tuple(rules)
        return out

    def value(self, m: Msg) -> Any:
        """The normalised message: a JSON value, or {"invalid": text} for non-JSON frames."""
        raw = self.text(m.raw)
        if m.obj is None:
            return {"invalid": raw.decode("utf-8", "replace"), "newline": m.newline}
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:  # a placeholder cannot break JSON, but never crash on it
            obj = orjson.loads(m.raw)
        for r in self._rules_for(m):
            k = r.literal_key
            if k is None or k in raw:
                obj = _blank(obj, r.path, 0)
        return obj

    def payload(self, m: Msg) -> Any:
        """The normalised payload (the adapter's view of params, or the result/error)."""
        v = self.value(m)
        if not isinstance(v, dict):
            return v
        if "method" in v:
            return m.adapter.payload(m.method, v.get("params"))
        return v.get("result", v.get("error"))


@functools.cache
def _required_bytes(pattern: bytes) -> bytes | None:
    """The longest run of plain bytes that every match of `pattern` holds (its top-level
    literals: `-` of a UUID, `REDACTED:`), or None when there is none or it cannot be told."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        tree = _parser.parse(pattern)
        if tree.state.flags & (re.IGNORECASE | re.VERBOSE):
            return None
        best, run = b"", bytearray()
        for op, av in tree.data:
            if op is _parser.LITERAL:
                run.append(av)
                continue
            best, run = max(best, bytes(run), key=len), bytearray()
        best = max(best, bytes(run), key=len)
    except Exception:  # a private module: without it every pattern is only searched
        return None
    return best or None


@functools.cache
def _shared_redactor() -> Redactor:
    return Redactor.from_config(os.getcwd())


def _blank(node: Any, path: tuple[str, ...], i: int) -> Any:
    if i == len(path):
        return IGNORED
    seg = path[i]
    if seg == "**":
        node = _blank(node, path, i + 1)  # zero levels
        if isinstance(node, dict):
            for k in list(node):
                node[k] = _blank(node[k], path, i)
        elif isinstance(node, list):
            for j in range(len(node)):
                node[j] = _blank(node[j], path, i)
        return node
    if isinstance(node, dict):
        if seg == "*":
            for k in list(node):
                node[k] = _blank(node[k], path, i + 1)
        elif seg in node:
            node[seg] = _blank(node[seg], path, i + 1)
    elif isinstance(node, list):
        if seg == "*":
            for j in range(len(node)):
                node[j] = _blank(node[j], path, i + 1)
        elif seg.isdigit() and int(seg) < len(node):
            j = int(seg)
            node[j] = _blank(node[j], path, i + 1)
    return node


def canonical(v: Any) -> bytes:
    """Key-order independent JSON, the identity of a normalised value."""
    return orjson.dumps(v, option=orjson.OPT_SORT_KEYS)
