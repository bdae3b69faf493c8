"""Text transcripts: a session as one JSON line per frame, made to be committed and reviewed.

A frame that is valid UTF-8 JSON on one line is embedded verbatim under "frame" (other frames use
"text" or "b64"), so a diff of two recordings shows what the peers said differently.

Format 2 (written since wire-recorder 0.1): re-recording an unchanged agent gives the same bytes,
so what varies from run to run is written in a normalised form and its real value is left out
(the `.db` keeps it):

- times: none, except `"wait_ms"` on the frames of the protocol's racy methods (Wire cancel and
  steer, ACP session/cancel, MCP notifications/cancelled): their delay after the agent's previous
  frame, rounded to 100 ms, which replay keeps because such a frame acts on whatever the agent is
  doing at that moment. The reader spaces other frames 1 ms apart, so `--speed` only paces the
  racy frames, and a slow tool longer than `--frame-timeout` needs that option;
- session id, start and end times, host, proxy and agent pid, source: left out (the session id
  of a transcript is its file name);
- ids that are UUIDs, 32-digit hex strings, or whole JSON strings of 12 to 40 hex digits with a
  letter (request, tool-call, session, hook ids): `${uuid1}`, `${hex1}`, ... numbered in order
  of first appearance; other string request ids of a minted shape (recorder/minted.py: a clock
  or a random token in them, such as the vendor Node SDK's `N_<epoch ms>`): `${id1}`, ... as
  whole JSON strings; MCP 2026 `requestState` tokens: `${token1}`, ...; redaction
  placeholders, keyed per recording: renumbered in place (`REDACTED:000000000001`, ...);
- paths: the scratch folder of the run (the top-level temp folder holding the work dir)
  `${scratch}`, else the work dir `${workdir}`, HOME `${home}`, the checkout (git top-level of the
  writer's working directory) `${checkout}`, and the folder of the program an interpreter runs as
  the agent (`node /usr/lib/node_modules/@moonshot-ai/kimi-code/dist/main.mjs acp`) `${agent}`
  when none of those holds it;
- process ids in the proxy's events (spawn's `pid`, a signal's `forwarded_to`): left out; the
  exit event: `{"code": N}` or `{"signal": NAME}`;
- order and chunking: the agent's stderr races with its stdout and is read in chunks that vary;
  it is written a line per frame, in one block before the agent's exit. The end-of-stream events
  of the two pipes race with each other and are left out. Kimi's Wire StatusUpdate races with
  the other frames of its step and is written before the next step or turn boundary
  (`_FLOATING`). The `.db` keeps the real order.

Reading expands the placeholders to stand-in values of the same shape (`${uuid1}` ->
`00000000-0000-4000-8000-000000000001`, `${scratch}` -> a folder under the temp dir, `${home}`
and `${checkout}` to the reader's own), which replay maps to the live run like any recorded
value. A frame that itself contains a placeholder-like `${...}` is kept verbatim and marked
`"verbatim":true`. Format 1 (real values and `"t_ms"` on every line) is still read.

Any valid JSON formatting of a line is read (spacing, key order); a frame whose bytes cannot be
sliced out of a re-formatted line is taken as the compact re-serialisation of its value.

The header may hold `"workdir"`: the manifest of the agent's work dir at session start
(recorder/workdir.py): its summary (`source`, `files`, `bytes`, `snapshot`, `cut`, `notes`, ...)
and `"entries"`, one object per file (`path`, `size`, `sha256`, `mode`, `kind`/`link` for a
symlink, `note`, and with a snapshot its bytes as `text`, or `b64` when they are not UTF-8;
redaction placeholders in them numbered like the frames'; a target outside the work dir with
the path placeholders). The dir itself is not written: it is
the one the session's command names. Older transcripts have none; the reader checks only its
shape, and whoever writes files from it checks every path (replay/workdir.py).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import os
import re
import signal
import tempfile
from collections.abc import Iterable
from typing import IO, Any

import orjson

from . import protocols
from .classify import Classifier, Extracted
from .errors import TranscriptError, UserError
from .minted import minted
from .model import SESSION_COLUMNS, Frame, command_argv, frame_row
from .store import Store, open_store
from .workdir import (
    FILES_KEY,
    BadHeader,
    Manifest,
    agent_workdir,
    from_header,
    read_stored,
    session_manifest,
    to_header,
)

FORMAT_VERSION = 2
_FRAME_KEY = b',"frame":'
_T_KEY = b',"t_ms":'

# session fields that differ on every run and say nothing about the conversation
VOLATILE_SESSION_KEYS = frozenset({"session_id", "started_at", "ended_at", "agent_pid",
                                   "proxy_pid", "host", "mono_start_ns", "source"})
# session columns written in the header's own "workdir" object, with the manifest's files
WORKDIR_SESSION_KEYS = frozenset({"workdir", "workdir_manifest"})
_EPOCH = _dt.datetime(2000, 1, 1)
_LINE_GAP_MS = 1.0  # the reader's spacing of frames without a recorded delay
_WAIT_QUANTUM_MS = 100
_UUID_RE = re.compile(rb"(?<![0-9A-Za-z])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                      rb"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![0-9A-Za-z])")
# 32 hex digits anywhere (uuid4().hex), or a whole JSON string of 12 to 40 hex digits with a
# letter in it (kimi's hook request ids are 12)
_HEX_RE = re.compile(rb"(?<![0-9A-Za-z])[0-9a-f]{32}(?![0-9A-Za-z])|"
                     rb'(?<=")(?=[0-9]*[a-f])[0-9a-f]{12,40}(?=\\?")')
# redaction placeholders (recorder/redact.py): keyed per recording, so they differ every run
_REDACTED_RE = re.compile(rb"(?<=REDACTED:)[0-9a-f]{12}(?![0-9a-f])")
# opaque tokens a peer hands out and gets back, new on every run (MCP 2026 requestState)
_TOKEN_RE = re.compile(rb'(?<="requestState":")[^"\\]+(?=")')
_PLACEHOLDER_RE = re.compile(
    rb"\$\{(uuid[0-9]+|hex[0-9]+(?:_[0-9]+)?|token[0-9]+|id[0-9]+|scratch|workdir|home|"
    rb"checkout|agent)\}")
_PATH_NAMES = ("scratch", "workdir", "home", "checkout", "agent")
# interpreters whose first path argument is the agent's program (`node .../dist/main.mjs acp`)
_INTERPRETERS = ("node", "python", "bun", "deno")


def _jsonable(v):
    if isinstance(v, _dt.datetime):
        return v.isoformat()
    return v


def find_checkout(start: str | None = None) -> str:
    """The git top-level holding `start` (default: the working directory), else `start`."""
    here = os.path.abspath(start or os.getcwd())
    d = here
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        up = os.path.dirname(d)
        if up == d:
            return here
        d = up


def _scratch_of(cwd: str, command: Iterable[str] = ()) -> str | None:
    """The run's scratch folder: the shortest folder holding the work dir and an absolute path
    argument of the agent (`-w /tmp/run-x/work --config-file /tmp/run-x/config.toml` ->
    /tmp/run-x), short of the temp dir itself, HOME and the filesystem root."""
    too_wide = {"/", os.path.realpath(tempfile.gettempdir()), tempfile.gettempdir(),
                os.environ.get("HOME") or "/"}
    best = None
    for a in list(command)[1:]:
        a = a.partition("=")[2] if a.startswith("-") else a
        if not a.startswith("/") or len(a) < 2:
            continue
        try:
            common = os.path.commonpath([cwd, a])
        except ValueError:
            continue
        if common in too_wide or any(w.startswith(common + "/") for w in too_wide if w != "/"):
            continue
        if best is None or len(common) < len(best):
            best = common
    return best if best != cwd else None


def _agent_dir(command: Iterable[str]) -> str | None:
    """The folder of the program an interpreter runs as the agent (`node /x/dist/main.mjs acp`
    -> /x/dist): Kimi Code 2.x names its main.mjs in initialize's answer (terminal-auth)."""
    argv = list(command)
    if not argv or not os.path.basename(argv[0]).startswith(_INTERPRETERS):
        return None
    for a in argv[1:]:
        if a.startswith("-"):
            continue
        return os.path.dirname(a) if os.path.isabs(a) and len(os.path.dirname(a)) > 1 else None
    return None


def _expansions() -> dict[str, str]:
    """What the reader puts in place of path placeholders."""
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return {"scratch": os.path.join(tempfile.gettempdir(), "wire-recorder-scratch"),
            "workdir": "/wire-recorder-workdir", "home": home, "checkout": find_checkout(),
            "agent": "/wire-recorder-agent"}


class Aliases:
    """Volatile values -> placeholders for one transcript (or several written together, such as a
    session and the one it reopens, so that a value shared by both gets the same alias)."""

    def __init__(self, cwd: str | None = None, command: Iterable[str] = (),
                 home: str | None = None, checkout: str | None = None):
        self.ids: dict[bytes, bytes] = {}
        self.counts = {"uuid": 0, "hex": 0, "token": 0, "redacted": 0, "id": 0}
        self.paths: list[tuple[re.Pattern[bytes], bytes]] = []
        self.set_paths(cwd, command, home, checkout)
        self.minted: set[bytes] = set()  # request ids of a minted shape, as JSON strings
        self._minted_rx: re.Pattern[bytes] | None = None

    def add_minted(self, frames: Iterable[Frame]) -> None:
        """The string request ids of these frames that have a minted shape (recorder/minted.py:
        the vendor SDK's `N_<epoch ms>`, random tokens): aliased `${id1}`, ... wherever they
        appear as a whole JSON string."""
        new = {orjson.dumps(f.rpc_id) for f in frames
               if f.direction in ("c2a", "a2c") and minted(f.rpc_id)} - self.minted
        if new:
            self.minted |= new
            alts = sorted(self.minted, key=lambda v: (-len(v), v))
            self._minted_rx = re.compile(b"|".join(re.escape(v) for v in alts))

    def _minted_id(self, m: re.Match[bytes]) -> bytes:
        v = m.group(0)
        alias = self.ids.get(v)
        if alias is None:
            self.counts["id"] += 1
            alias = self.ids[v] = b'"${id%d}"' % self.counts["id"]
        return alias

    def path_text(self, text: str) -> str:
        """`text` with the path placeholders only (a symlink's target in the header)."""
        raw = text.encode("utf-8", "surrogatepass")
        for rx, ph in self.paths:
            raw = rx.sub(ph, raw)
        return raw.decode("utf-8", "surrogatepass")

    def set_paths(self, cwd: str | None, command: Iterable[str] = (), home: str | None = None,
                  checkout: str | None = None) -> None:
        if home is None:
            home = os.environ.get("HOME")
        if checkout is None:
            checkout = find_checkout()
        found: dict[str, str] = {}
        if cwd and os.path.isabs(cwd):
            scratch = _scratch_of(cwd, command)
            found["scratch" if scratch else "workdir"] = scratch or cwd
        if home:
            found["home"] = home
        if checkout:
            found["checkout"] = checkout
        agent = _agent_dir(command)
        if agent and not any(agent == v.rstrip("/") or agent.startswith(v.rstrip("/") + "/")
                             for v in found.values() if len(v.rstrip("/")) > 1):
            found["agent"] = agent  # a machine path that no other placeholder covers
        pairs = [(v.rstrip("/"), k) for k, v in found.items() if len(v.rstrip("/")) > 1]
        pairs.sort(key=lambda p: -len(p[0]))  # a work dir wins over the HOME that holds it
        self.paths = [(re.compile(rb"(?<![A-Za-z0-9_.\-])" + re.escape(v.encode()) +
                                  rb"(?![A-Za-z0-9_.\-])"), b"${" + k.encode() + b"}")
                      for v, k in pairs]

    def _id(self, kind: str, m: re.Match[bytes]) -> bytes:
        v = m.group(0)
        alias = self.ids.get(v)
        if alias is None:
            self.counts[kind] += 1
            alias = b"${%s%d" % (kind.encode(), self.counts[kind])
            if kind == "hex" and len(v) != 32:  # the length, so that it reads back in shape
                alias += b"_%d" % len(v)
            alias = self.ids[v] = alias + b"}"
        return alias

    def _redacted(self, m: re.Match[bytes]) -> bytes:
        # numbered in place, so that the file still holds placeholders of the engine's shape
        v = m.group(0)
        alias = self.ids.get(b"REDACTED:" + v)
        if alias is None:
            self.counts["redacted"] += 1
            alias = self.ids[b"REDACTED:" + v] = b"%012x" % self.counts["redacted"]
        return alias

    def __call__(self, raw: bytes) -> bytes:
        for rx, ph in self.paths:
            raw = rx.sub(ph, raw)
        raw = _TOKEN_RE.sub(lambda m: self._id("token", m), raw)
        raw = _REDACTED_RE.sub(self._redacted, raw)
        raw = _UUID_RE.sub(lambda m: self._id("uuid", m), raw)
        raw = _HEX_RE.sub(lambda m: self._id("hex", m), raw)
        if self._minted_rx is not None:  # after the UUIDs: a UUID id keeps its ${uuidN}
            raw = self._minted_rx.sub(self._minted_id, raw)
        return raw


def _expand(raw: bytes, paths: dict[str, str]) -> bytes:
    def one(m: re.Match[bytes]) -> bytes:
        name = m.group(1).decode()
        if name.startswith("uuid"):
            return b"00000000-0000-4000-8000-%012x" % int(name[4:])
        if name.startswith("token"):
            return b"wire-recorder-token-%d" % int(name[5:])
        if name.startswith("id"):  # a minted shape again (a clock-like run): --update aliases it
            return b"wire-recorder-id-%010d" % int(name[2:])
        if name.startswith("hex"):
            n, _, width = name[3:].partition("_")
            if not width:
                return b"%032x" % int(n)
            return b"f%0*x" % (int(width) - 1, int(n))  # a letter, so that it is an id again
        return paths[name].rstrip("/").encode()

    return _PLACEHOLDER_RE.sub(one, raw)


def _adapter_racy(protocol: str | None) -> frozenset[str]:
    from . import protocols

    try:
        return protocols.get(protocol).racy_methods if protocol else frozenset()
    except Exception:  # an unknown protocol: no frame is racy
        return frozenset()


def session_header(session: dict, aliases: Aliases | None = None,
                   workdir: Manifest | None = None) -> bytes:
    """The header line; `workdir` (default: what the session dict carries) goes in its
    `"workdir"` object: the dir, the manifest's summary, and the files (with their contents when
    snapshotted: text, or base64 for bytes that are not UTF-8)."""
    s = {k: _jsonable(session.get(k)) for k in SESSION_COLUMNS
         if session.get(k) is not None and k not in VOLATILE_SESSION_KEYS
         and k not in WORKDIR_SESSION_KEYS}
    for k in ("command", "tags"):
        if isinstance(s.get(k), str):
            s[k] = orjson.loads(s[k])
    body = orjson.dumps(s)
    if aliases is not None:
        body = aliases(body)
    head = b'{"wire_transcript":%d,"session":' % FORMAT_VERSION + body
    if workdir is None:
        workdir = session_manifest(session)
    if workdir is not None:
        al = aliases

        def content(data: bytes) -> bytes:
            # placeholders numbered like the frames' (their key differs every recording)
            return data if al is None else _REDACTED_RE.sub(al._redacted, data)

        link = (lambda t: t) if al is None else al.path_text
        head += b',"workdir":' + orjson.dumps(to_header(workdir, content, link))
    return head + b"}"


def _embeddable(raw: bytes) -> bool:
    if b"\n" in raw or b"\r" in raw or not raw.strip():
        return False
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


def frame_line(f: Frame, aliases: Aliases, wait_ms: int | None = None) -> bytes:
    """One frame as a format-2 line (volatile values replaced through `aliases`)."""
    nl = b'' if f.newline in (True, None) else b',"nl":false'
    wait = b'' if wait_ms is None else b',"wait_ms":%d' % wait_ms
    if f.direction == "proxy":
        data = orjson.loads(f.payload) if f.payload else {}
        if isinstance(data, dict):
            for k in _PID_KEYS:
                data.pop(k, None)
        if f.method == "exit" and isinstance(data, dict):
            data = _exit_data(data)
        return b'{"dir":"proxy","event":' + orjson.dumps(f.method) + b',"data":' + \
            aliases(orjson.dumps(data)) + b'}'
    head = b'{"dir":"' + f.direction.encode() + b'"'
    raw = f.raw or b""
    verbatim = _PLACEHOLDER_RE.search(raw) is not None
    mark = b',"verbatim":true' if verbatim else b''
    sub = (lambda b: b) if verbatim else aliases
    if f.direction != "stderr" and _embeddable(raw):
        return head + _FRAME_KEY + sub(raw) + nl + wait + mark + b'}'
    try:
        body = b',"text":' + sub(orjson.dumps(raw.decode("utf-8")))
    except UnicodeDecodeError:
        body = b',"b64":"' + base64.b64encode(raw) + b'"'
    return head + body + nl + wait + mark + b'}'


# process ids in the proxy's events (spawn's pid, the agent a signal was forwarded to): new
# on every run, and no use to a replay
_PID_KEYS = ("pid", "forwarded_to")

# the ends of the agent's two pipes: no data, an order that races, and not recorded by a replay
_LEFT_OUT_EVENTS = frozenset({"agent_stderr_eof", "agent_stdout_eof"})


def _exit_data(data: dict) -> dict:
    """The agent's exit as `{"code": N}` or `{"signal": NAME}`, whichever tool recorded it (the
    proxy also writes exit_status and signum, a replay a negative code for a signal)."""
    code, sig = data.get("code"), data.get("signal")
    if isinstance(code, int) and code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = str(-code)
    return {"signal": sig} if sig is not None else {"code": code}


def _stderr_lines(chunks: list[Frame]) -> list[Frame]:
    """The agent's stderr as one frame per line (without its newline), however it was read: the
    proxy stores a line per frame, a replay the chunks a read returned."""
    if not chunks:
        return []
    data = b"".join((f.raw or b"") + (b"\n" if f.newline in (True, None) else b"")
                    for f in chunks)
    pieces = data.split(b"\n")
    last = pieces.pop()  # after the final newline: empty, or an unterminated last line
    like = chunks[0]
    out = [dataclasses.replace(like, raw=p, newline=True) for p in pieces]
    if last:
        out.append(dataclasses.replace(like, raw=last, newline=False))
    return out


def _settle_floating(frames: list[Frame], protocol: str | None) -> list[Frame]:
    """The protocol's floating type (`Adapter.floating_type`) moved to just before the next
    frame that ends its float."""
    adapter = protocols.get(protocol)
    floating, anchors = adapter.floating_type, adapter.floating_until
    if floating is None:
        return frames
    out: list[Frame] = []
    waiting: list[Frame] = []
    for f in frames:
        if f.direction == "a2c" and f.kind == "notification" and f.msg_type == floating:
            waiting.append(f)
            continue
        if waiting and (f.direction == "proxy" or
                        (f.direction == "a2c" and (f.msg_type in anchors or f.kind != "notification"
                                                   and f.kind != "request"))):
            out.extend(waiting)
            waiting = []
        out.append(f)
    return out + waiting


def _review_order(frames: list[Frame], protocol: str | None = None) -> list[Frame]:
    """The frames in an order that does not depend on how the agent's stdout and stderr raced
    (stderr moves, in its own order, to just before the exit), nor on the agent's own races
    (`Adapter.floating_type`)."""
    frames = [f for f in frames if not (f.direction == "proxy" and f.method in _LEFT_OUT_EVENTS)]
    frames = _settle_floating(frames, protocol)
    late = _stderr_lines([f for f in frames if f.direction == "stderr"])
    if not late:
        return frames
    rest = [f for f in frames if f.direction != "stderr"]
    at = next((i for i, f in enumerate(rest) if f.direction == "proxy" and f.method == "exit"),
              len(rest))
    return rest[:at] + late + rest[at:]


def encode_session(session: dict, frames: list[Frame], aliases: Aliases | None = None,
                   workdir: Manifest | None = None) -> bytes:
    """A session row and its frames (in seq order) as the bytes of a format-2 transcript;
    `workdir`: its work dir manifest (default: what the session dict carries)."""
    if aliases is None:
        aliases = Aliases()
    cwd = session.get("cwd")
    aliases.set_paths(cwd if isinstance(cwd, str) else None,
                      command_argv(session.get("command")) or ())
    racy = _adapter_racy(session.get("protocol"))
    aliases.add_minted(frames)
    out = [session_header(session, aliases, workdir)]
    last_agent: int | None = None
    for f in _review_order(list(frames), session.get("protocol")):
        wait = None
        if f.direction == "c2a" and f.method in racy and f.mono_ns is not None:
            gap = (f.mono_ns - last_agent) / 1e6 if last_agent is not None else 0.0
            wait = int(round(max(gap, 0.0) / _WAIT_QUANTUM_MS)) * _WAIT_QUANTUM_MS
        elif f.direction == "a2c" and f.mono_ns is not None:
            last_agent = f.mono_ns
        out.append(frame_line(f, aliases, wait))
    return b"\n".join(out) + b"\n"


def write_transcript(store: Store, session_id: str, out: IO[bytes],
                     aliases: Aliases | None = None) -> int:
    session = store.session(session_id)
    return write_session(session, store.frames(session["session_id"]), out, aliases,
                         read_stored(store, session))


def write_session(session: dict, frames: list[Frame], out: IO[bytes],
                  aliases: Aliases | None = None, workdir: Manifest | None = None) -> int:
    """Write a session as a transcript; returns the frame count."""
    frames = list(frames)
    out.write(encode_session(session, frames, aliases, workdir))
    return len(frames)


def write_cassette(path: str, data: bytes) -> bool:
    """Put `data` at `path` as a transcript only its owner reads (0600, also over a file that
    was 0644: it holds what the recording holds), whole or not at all (a file beside it renamed
    over it). False when the file already held those bytes (then untouched)."""
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(prefix=".wire-replay-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def export_transcript(db: str, out_path: str, session_id: str | None = None) -> int:
    with open_store(db, read_only=True) as store:
        sid = store.session(session_id)["session_id"]
        from .paths import open_private  # 0600: a transcript holds what the recording holds

        with open_private(out_path) as out:
            return write_transcript(store, sid, out)


class _Bad(Exception):
    pass


def _value_span(line: bytes, key: bytes, value: Any) -> bytes | None:
    """The bytes of `key`'s value as they stand in the line, when they can be found."""
    import json

    text = line.decode("utf-8")
    dec = json.JSONDecoder()
    for m in re.finditer(r'"' + re.escape(key.decode()) + r'"\s*:\s*', text):
        try:
            v, end = dec.raw_decode(text, m.end())
        except ValueError:
            continue
        if v == value:
            piece = text[m.end():end].encode("utf-8")
            if orjson.loads(piece) == value:
                return piece
    return None


def _frame_bytes(line: bytes, obj: dict, nl: bool) -> bytes:
    start = line.find(_FRAME_KEY)
    if start >= 0:  # the layout the writer uses: slice
        start += len(_FRAME_KEY)
        for end_key in (b',"nl":false', b',"wait_ms":', b',"verbatim":', _T_KEY, b'}'):
            end = line.rfind(end_key)
            if end > start:
                piece = line[start:end]
                try:
                    if orjson.loads(piece) == obj["frame"]:
                        return piece
                except orjson.JSONDecodeError:
                    pass
    found = _value_span(line, b"frame", obj["frame"])  # re-formatted: find the value
    if found is not None:
        return found.strip()
    return orjson.dumps(obj["frame"])


def _parse_frame_line(line: bytes) -> tuple[str, bytes, bool, float | None, float | None, dict]:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as e:  # its "line 1" would be the line's own
        raise _Bad(f"not valid JSON at column {e.colno}: {e.msg}") from None
    if not isinstance(obj, dict) or obj.get("dir") not in ("c2a", "a2c", "stderr", "proxy"):
        raise _Bad('not a transcript frame (needs "dir": c2a, a2c, stderr or proxy)')
    t = obj.get("t_ms")
    if t is not None and (not isinstance(t, (int, float)) or isinstance(t, bool)):
        raise _Bad('"t_ms" is not a number')
    wait = obj.get("wait_ms")
    if wait is not None and (not isinstance(wait, (int, float)) or isinstance(wait, bool)):
        raise _Bad('"wait_ms" is not a number')
    nl = obj.get("nl", True) is not False
    d = obj["dir"]
    if d == "proxy":
        if not isinstance(obj.get("event"), str):
            raise _Bad('a proxy line needs "event"')
        if not isinstance(obj.get("data", {}), dict):
            raise _Bad('"data" is not an object')
        return d, b"", True, t, wait, obj
    if "frame" in obj:
        raw = _frame_bytes(line, obj, nl)
    elif "text" in obj and isinstance(obj["text"], str):
        raw = obj["text"].encode("utf-8")
    elif "b64" in obj and isinstance(obj["b64"], str):
        try:
            raw = base64.b64decode(obj["b64"], validate=True)
        except ValueError:
            raise _Bad('"b64" is not valid base64') from None
    else:
        raise _Bad('a frame line needs "frame", "text" or "b64"')
    return d, raw, nl, t, wait, obj


def _where(path: str, lineno: int) -> str:
    return f"{path}:{lineno}"


def read_transcript(path: str) -> tuple[dict, list[Frame]]:
    """The session and its frames. Raises TranscriptError (`FILE:LINE: what`) on a bad line."""
    try:
        with open(path, "rb") as fh:
            lines = fh.read().split(b"\n")
    except OSError as e:
        raise TranscriptError(f"cannot read {path}: {e.strerror}") from None
    if lines and lines[-1] == b"":
        lines.pop()
    if not any(x.strip() for x in lines):
        raise TranscriptError(f"{path} is empty", "a transcript starts with a session line")
    first = next(i for i, x in enumerate(lines) if x.strip())
    try:
        head = orjson.loads(lines[first])
    except orjson.JSONDecodeError:
        head = None
    version = head.get("wire_transcript") if isinstance(head, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise TranscriptError(f"{_where(path, first + 1)}: not a wire-recorder transcript header",
                              'it must start with {"wire_transcript":2,"session":{...}}')
    if version > FORMAT_VERSION:
        raise TranscriptError(f"{_where(path, first + 1)}: transcript format {version}; this "
                              f"wire-recorder reads up to {FORMAT_VERSION}", "upgrade wire-recorder")
    assert isinstance(head, dict)
    if not isinstance(head.get("session"), dict):
        raise TranscriptError(f"{_where(path, first + 1)}: \"session\" is missing or not an "
                              "object", 'the header is {"wire_transcript":2,"session":{...}}')
    paths = _expansions()
    session_raw = orjson.dumps(head.get("session") or {})
    if version >= 2:
        session_raw = _expand(session_raw, paths)
    session = orjson.loads(session_raw)
    sid = session.get("session_id") or os.path.splitext(os.path.basename(path))[0]
    session["session_id"] = sid
    started = session.get("started_at")
    try:
        started_dt = _dt.datetime.fromisoformat(started) if isinstance(started, str) else _EPOCH
        if isinstance(session.get("ended_at"), str):
            session["ended_at"] = _dt.datetime.fromisoformat(session["ended_at"])
    except ValueError as e:
        raise TranscriptError(f"{_where(path, first + 1)}: bad time in the header ({e})") from None
    session["started_at"] = started_dt
    mono0 = session.get("mono_start_ns") or 0
    if not isinstance(mono0, int) or isinstance(mono0, bool) or not 0 <= mono0 < 2**63:
        raise TranscriptError(f"{_where(path, first + 1)}: \"mono_start_ns\" is not a whole "
                              "number of nanoseconds", "fix or remove it in the header")
    session["mono_start_ns"] = mono0
    for k in WORKDIR_SESSION_KEYS:  # only from the header's own "workdir" object
        session.pop(k, None)
    if head.get("workdir") is not None:
        try:
            summary, entries = from_header(head["workdir"])
        except BadHeader as e:
            raise TranscriptError(f"{_where(path, first + 1)}: {e}") from None
        if version >= 2:  # a target outside the work dir may name HOME or the checkout
            for entry in entries:
                link = entry.link
                if link is not None and "${" in link:
                    entry.link = _expand(link.encode("utf-8", "surrogatepass"), paths) \
                        .decode("utf-8", "surrogatepass")
        # not written: it is where the session's command worked (a replay's too, --update)
        cwd = session.get("cwd")
        session["workdir"] = agent_workdir(command_argv(session.get("command")), cwd) \
            if isinstance(cwd, str) else None
        session["workdir_manifest"] = orjson.dumps(summary).decode()
        session[FILES_KEY] = entries
    classify = Classifier(session.get("protocol") or None)
    frames: list[Frame] = []
    t_prev = 0.0
    t_agent: float | None = None
    for i, line in enumerate(lines[first + 1:], start=first + 2):
        if not line.strip():
            continue
        try:
            d, raw, nl, t, wait, obj = _parse_frame_line(line)
        except _Bad as e:
            raise TranscriptError(f"{_where(path, i)}: {e}",
                                  "fix or remove that line (one JSON object per line)") from None
        except UnicodeDecodeError:
            raise TranscriptError(f"{_where(path, i)}: not UTF-8",
                                  "fix or remove that line (one JSON object per line)") from None
        if version >= 2:
            if not obj.get("verbatim"):
                raw = _expand(raw, paths)
            t = t_prev + _LINE_GAP_MS if frames else 0.0
            if wait is not None:
                t = max(t, (t_agent if t_agent is not None else 0.0) + float(wait))
        elif t is None:
            t = 0.0
        t_prev = float(t)
        if d == "a2c":
            t_agent = t_prev
        mono = mono0 + int(round(t_prev * 1e6))
        ts = started_dt + _dt.timedelta(milliseconds=t_prev)
        if d == "proxy":
            data = obj.get("data") or {}
            if version >= 2:
                data = orjson.loads(_expand(orjson.dumps(data), paths))
            raw = orjson.dumps(dict(data, event=obj.get("event")))
            ex = Extracted("lifecycle", method=obj.get("event"), payload=orjson.dumps(data).decode())
        elif d == "stderr":
            ex = Extracted("stderr")
        else:
            ex = classify(raw, d)
        frames.append(Frame(*frame_row(sid, len(frames) + 1, ts, mono, d, raw, nl, ex)))
    if not session.get("protocol") and classify.protocol:
        session["protocol"], session["protocol_version"] = classify.protocol, classify.version
    return session, frames


def store_session(store: Store, session: dict, frames: Iterable[Frame], source: str,
                  replace: bool = False) -> str:
    """Write an already-parsed session into a store (used by transcript and log imports)."""
    sid = session["session_id"]
    exists = store.con.execute("SELECT 1 FROM sessions WHERE session_id = ?", [sid]).fetchone()
    if exists:
        if not replace:
            raise UserError(f"session {sid} is already in {store.path}",
                            "use --replace to overwrite it, or import into another file")
        store.con.execute("DELETE FROM frames WHERE session_id = ?", [sid])
        store.con.execute("DELETE FROM sessions WHERE session_id = ?", [sid])
        if FILES_KEY in session:  # else the stored manifest stays (wire-replay --update)
            store.con.execute("DELETE FROM workdir_files WHERE session_id = ?", [sid])
    frames = list(frames)
    values = {k: session.get(k) for k in SESSION_COLUMNS if session.get(k) is not None}
    for k in ("command", "tags"):
        if k in values and not isinstance(values[k], str):
            values[k] = orjson.dumps(values[k]).decode()
    values.setdefault("source", source)
    values["frame_count"] = sum(1 for f in frames if f.direction in ("c2a", "a2c"))
    store.upsert_session(values)
    store.insert_frames([f.row() for f in frames])
    if session.get(FILES_KEY):
        store.insert_workdir_files([e.row(sid) for e in session[FILES_KEY]])
    return sid


def import_transcript(path: str, db: str, replace: bool = False) -> str:
    session, frames = read_transcript(path)
    with open_store(db) as store:
        return store_session(store, session, frames, "transcript", replace=replace)


def load_recording(path: str, session_id: str | None = None) -> tuple[dict, list[Frame]]:
    """A session from a .db or a .jsonl transcript: what replay and analysis start from."""
    if path.endswith(".jsonl"):
        session, frames = read_transcript(path)
        if session_id:
            from .sessions import pick_session

            pick_session([session], session_id, path)  # the same rule as a .db's sessions
        return session, frames
    with open_store(path, read_only=True) as store:
        session = store.session(session_id)
        return session, store.frames(session["session_id"])
