"""kimi-cli with its LLM pinned to a recording: the offline `_scripted_echo` provider kimi ships
answers each LLM call with the next script of a JSON list (kimi's parser:
`kosong/chat_provider/echo/dsl.py`), and the scripts are what the recording says the model
answered (recorder/protocols/<p>/llm_calls.py). That language is line based: a recording whose
model said a line break (as real models do in nearly every answer), or a call it cannot say
otherwise, is served instead from a model on loopback (llm_server.py) to kimi's own "kimi"
provider type (OpenAI chat-completions, thinking as `reasoning_content`), the same calls
streamed as the recorded parts.

The agent keeps its own configuration: the config the user's command names (`--config-file`,
`--config`) or the one in its HOME (`$HOME/.kimi/config.toml`) is copied into a scratch HOME
with only the model swapped (every model alias points at the offline provider, with the
context size the recording reports; for ACP the models the recording offered), so tools,
limits, hooks, MCP servers and everything else stay the user's. The user's skills, plugins and
MCP file are linked into the scratch HOME; kimi's sessions and logs go to the scratch HOME.
Inherited variables that change kimi's model or where it keeps its files are dropped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wire_recorder.recorder import kimi_config
from wire_recorder.recorder.errors import InputError
from wire_recorder.recorder.loopback_env import direct_to_loopback
from wire_recorder.recorder.toml_text import dumps as to_toml

from ..normalize import WorkDirRewrite
from .scratch import ScratchPin, write_json

if TYPE_CHECKING:
    from ..recording import Recording
    from .llm_server import LoopbackModel

SERVER_NAMES = frozenset({"Kimi Code CLI"})
PROGRAMS = frozenset({"kimi", "kimi-cli"})
PROVIDER = "wire-replay-pinned"
DEFAULT_ALIAS = "echo"
DEFAULT_CONTEXT = 100_000
SCRIPTS_ENV = "KIMI_SCRIPTED_ECHO_SCRIPTS"
# Inherited variables that would change the model kimi uses (or its parameters), move its
# files out of the scratch HOME (KIMI_SHARE_DIR), or print the offline model's trace to stdout.
DROP_ENV = frozenset({"KIMI_SHARE_DIR", "KIMI_SCRIPTED_ECHO_TRACE", "KIMI_BASE_URL",
                      "KIMI_API_KEY", "KIMI_OAUTH_HOST", "OPENAI_API_KEY", "OPENAI_BASE_URL"})
DROP_ENV_PREFIXES = ("KIMI_MODEL_", "KIMI_CODE_")
# What kimi reads from HOME besides its config and keeps read-only: linked into the scratch HOME
HOME_LINKS = (".kimi/skills", ".kimi/plugins", ".kimi/mcp.json", ".config/agents/skills",
              ".agents/skills", ".claude/skills", ".codex/skills")
# `kimi acp` refuses session/new without a login; it only checks that a token exists and has
# not expired (2100-01-01), and the offline provider never uses it
CREDENTIALS = {"access_token": "wire-replay-offline", "refresh_token": "wire-replay-offline",
               "expires_at": 4102444800, "scope": "", "token_type": "Bearer", "expires_in": 0}
# str.splitlines() breaks at these, and kimi's script parser reads line by line
LINE_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
COMPACTION_STAND_IN = "(the compaction summary is not in the recording)"
EXHAUSTED = "ScriptedEchoChatProvider exhausted at turn {n}."  # what kimi's echo model says
SERVED_TYPE = "kimi"  # the provider type the loopback model speaks to
SERVED_MODEL = "wire-replay"
LIVE_LLM_HINT = "replay with --live-llm to use the agent's own model instead"


# -- which recordings ------------------------------------------------------------------------


def _initialize_result(rec: Recording) -> dict[str, Any] | None:
    for m in rec.msgs:
        if m.direction == "a2c" and m.kind == "response" and \
                rec.client_requests.get(m.id_key or b"") == "initialize":
            result = m.obj.get("result") if isinstance(m.obj, dict) else None
            return result if isinstance(result, dict) else None
    return None


def recognises(rec: Recording) -> bool:
    """Made by kimi: its initialize answer says so (Wire `server`, ACP `agentInfo`), or, without
    one, the recorded command runs a program named kimi."""
    result = _initialize_result(rec)
    if result is not None:
        for key in ("server", "agentInfo"):
            info = result.get(key)
            if isinstance(info, dict) and info.get("name") in SERVER_NAMES:
                return True
        return False
    cmd = rec.command
    return bool(cmd) and os.path.basename(cmd[0]) in PROGRAMS


def pin(rec: Recording, argv: Sequence[str], env: Mapping[str, str] | None) -> KimiPin:
    return KimiPin(rec, argv, env)


# -- the model's answers ----------------------------------------------------------------------


def derive(rec: Recording) -> dict[str, Any]:
    """The recording's LLM calls (its adapter's `llm_calls` part)."""
    part = rec.adapter.part("llm_calls")
    if part is None:
        raise InputError(f"{rec.path}: session {rec.session_id} ({rec.protocol}) does not say "
                         f"what a model answered", LIVE_LLM_HINT)
    out: dict[str, Any] = part.llm_calls(rec.msgs, rec.client_requests)
    return out


def _cannot(rec: Recording, call: Mapping[str, Any], why: str,
            part: Mapping[str, Any] | None = None) -> InputError:
    frame = (part or {}).get("frame") or call.get("frame")
    what = f"{call.get('where')} (recorded frame {frame}): {why}"
    error = InputError(f"{rec.path}: cannot pin the LLM of session {rec.session_id} to the "
                       f"recording: {what}", LIVE_LLM_HINT)
    error.what = what
    return error


def _one_line(rec: Recording, call: Mapping[str, Any], what: str, value: str,
              part: Mapping[str, Any] | None = None) -> str:
    if LINE_BREAKS.search(value):
        raise _cannot(rec, call, f"the model's {what} has a line break, which kimi's offline "
                                 f"model (its scripts are read line by line) cannot say", part)
    return value


def _quoted(value: str) -> str:
    # the parser strips the line and then one pair of matching quotes: quoting keeps the
    # spaces around a value and quotes of its own
    if not value or value != value.strip() or \
            (len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'"):
        return f'"{value}"'
    return value


def _json(v: Any) -> str:
    return json.dumps(v, ensure_ascii=True)  # no raw line breaks (U+2028 …) in the line


class PathMap:
    """Recorded work dir -> live work dir, in what the model said."""

    def __init__(self, recorded: str | None, live: str | None):
        self.json = WorkDirRewrite(recorded, live)
        self.text: tuple[re.Pattern[str], str] | None = None
        if self.json.old:
            old = os.path.normpath(str(recorded))
            self.text = (re.compile(re.escape(old) + r"(?=/|$|[^\w.\-])"),
                         os.path.normpath(os.path.abspath(str(live))))

    def pieces(self, pieces: Sequence[str | None]) -> list[str | None]:
        """One tool call's arguments as the model streamed them (the call's own, then its
        parts), mapped as a whole: a real model cuts a path anywhere, so the recorded work dir
        is looked for in the assembled arguments, and the result is cut again into as many
        pieces. A boundary keeps its place in the text around it; one that fell inside the
        recorded work dir falls inside the live one (as far in, at most one short of its end),
        so the agent sees the path split as the recording shows it; no piece that had text
        loses it."""
        if not self.json.old:
            return list(pieces)
        whole = "".join(p or "" for p in pieces)
        old, new = self.json.old.decode("utf-8"), self.json.new.decode("utf-8")
        # as WorkDirRewrite: the dir itself (a JSON string's end) or a path under it
        starts = [m.start() for m in re.finditer(re.escape(old) + r'(?=["/])', whole)]
        if not starts:
            return list(pieces)
        out, last = [], 0
        for s in starts:
            out += [whole[last:s], new]
            last = s + len(old)
        mapped = "".join(out) + whole[last:]

        def moved(k: int) -> int:
            shift = 0
            for s in starts:
                if k <= s:
                    break
                if k < s + len(old):
                    return s + shift + max(1, min(k - s, len(new) - 1))
                shift += len(new) - len(old)
            return k + shift

        sizes = [len(p or "") for p in pieces]
        bounds = [0]
        for size in sizes:
            bounds.append(bounds[-1] + size)
        cuts = [0] + [moved(b) for b in bounds[1:-1]] + [len(mapped)]
        for i in range(1, len(cuts)):  # a piece that had text keeps some
            cuts[i] = max(cuts[i], cuts[i - 1] + (sizes[i - 1] > 0))
        for i in range(len(cuts) - 2, 0, -1):
            cuts[i] = min(cuts[i], cuts[i + 1] - (sizes[i] > 0))
        return [None if p is None and cuts[i] == cuts[i + 1] else mapped[cuts[i]:cuts[i + 1]]
                for i, p in enumerate(pieces)]

    def plain(self, s: str) -> str:
        if self.text is None:
            return s
        pattern, new = self.text
        return pattern.sub(lambda _m: new, s)


def mapped_args(parts: Sequence[Mapping[str, Any]], paths: PathMap) -> dict[int, Any]:
    """The arguments of each tool call and tool-call part of one answer (by the part's index),
    mapped per tool call: a call and the parts after it, up to the next call, as one text."""
    out: dict[int, Any] = {}
    group: list[int] = []

    def arg(i: int) -> Any:
        p = parts[i]
        return p.get("arguments" if p.get("type") == "tool_call" else "arguments_part")

    def flush() -> None:
        values = [arg(i) for i in group]
        if all(v is None or isinstance(v, str) for v in values):
            values = paths.pieces(values)
        out.update(zip(group, values, strict=True))
        group.clear()

    for i, p in enumerate(parts):
        if p.get("type") == "tool_call":
            flush()
            group.append(i)
        elif p.get("type") == "tool_call_part":
            if not group:  # a part before any call: a recording the answer refuses anyway
                out[i] = arg(i)
                continue
            group.append(i)
    flush()
    return out


def script_for(rec: Recording, call: Mapping[str, Any], paths: PathMap) -> str:
    """One call as a script in kimi's echo language."""
    if call.get("problem"):
        raise _cannot(rec, call, str(call["problem"]))
    error = call.get("error")
    if error and call.get("parts"):
        raise _cannot(rec, call, "the answer broke off mid-stream with a provider error; the "
                                 "offline model fails only before answering")
    if call.get("kind") == "error" or error:
        return _error_line(rec, call, error or {})
    lines: list[str] = []
    if call.get("id") is not None:
        lines.append("id: " + _quoted(_one_line(rec, call, "message id", str(call["id"]))))
    usage = call.get("usage")
    if isinstance(usage, dict):
        lines.append("usage: " + _json({k: int(usage.get(k) or 0) for k in (
            "input_other", "output", "input_cache_read", "input_cache_creation")}))
    parts = call.get("parts") or []
    args = mapped_args(parts, paths)
    for n, p in enumerate(parts):
        ptype = p.get("type")
        if ptype in ("text", "think"):
            value = _text_of(rec, call, p)
            lines.append(f"{ptype}: " + _quoted(paths.plain(_one_line(rec, call, ptype, value,
                                                                        p))))
        elif ptype == "tool_call":
            if not isinstance(p.get("id"), str) or not isinstance(p.get("name"), str):
                raise _cannot(rec, call, "a tool call without its id or name", p)
            body: dict[str, Any] = {"id": p["id"], "name": p["name"],
                                    "arguments": args[n]}
            if p.get("extras") is not None:
                body["extras"] = p["extras"]
            lines.append("tool_call: " + _json(body))
        elif ptype == "tool_call_part":
            lines.append("tool_call_part: " + _json({"arguments_part": args[n]}))
        elif ptype in ("image_url", "audio_url", "video_url"):
            lines.append(f"{ptype}: " + _json({"url": p.get("url"), "id": p.get("id")}))
        else:
            raise _cannot(rec, call, f"a part of type {ptype!r} the offline model cannot say", p)
    stand_in = _stand_in(call)
    if stand_in is not None:
        lines.append("text: " + _quoted(stand_in))
    if not any(not ln.startswith(("id:", "usage:")) for ln in lines):
        raise _cannot(rec, call, "the model's answer has no parts")
    return "\n".join(lines)


def _stand_in(call: Mapping[str, Any]) -> str | None:
    """A compaction's summary never reaches the client: a stand-in of its length (kimi's
    estimate of the context after the compaction, which the client sees, counts its
    characters)."""
    if call.get("kind") != "compaction" or call.get("parts"):
        return None
    length = call.get("summary_length")
    text = COMPACTION_STAND_IN
    if isinstance(length, int) and length > 0:
        text = (text + "." * length)[:length]
    return text


def _error_line(rec: Recording, call: Mapping[str, Any], error: Mapping[str, Any]) -> str:
    kind = error.get("kind")
    message = error.get("message")
    text = "" if message is None else " " + _one_line(rec, call, "error message", str(message))
    if kind in ("connection", "timeout"):
        return f"error: {kind}{text}"
    code = error.get("status_code")
    if kind == "status" and isinstance(code, int):
        return f"error: {code}{text}"
    raise _cannot(rec, call, f"a provider error the offline model cannot make ({dict(error)})")


def scripts_for(rec: Recording, calls: Sequence[Mapping[str, Any]], paths: PathMap) -> list[str]:
    out: list[str] = []
    for call in calls:
        if call.get("kind") == "exhausted":
            break  # the recorded model had no answer left: nor has the pinned one
        out.append(script_for(rec, call, paths))
    return out


# -- the same calls, served from loopback to kimi's "kimi" provider type ----------------------
# (kosong/chat_provider/kimi.py reads the stream: one part per chunk, `reasoning_content` a
# think part, `content` a text part, a tool call with a name a call and without one a part of
# its arguments; the chunk id the message id; usage from the chunk that has it, `cached_tokens`
# the cache reads. Errors are HTTP statuses whose plain-text body is the message kimi reports.)


def _chunk(call: Mapping[str, Any], **body: Any) -> dict[str, Any]:
    return {"id": str(call.get("id") or ""), "object": "chat.completion.chunk", "created": 0,
            "model": SERVED_MODEL, **body}


def _delta(call: Mapping[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    return _chunk(call, choices=[{"index": 0, "delta": delta, "finish_reason": None}])


def answer_for(rec: Recording, call: Mapping[str, Any], paths: PathMap) -> dict[str, Any]:
    """One call as the loopback model serves it (see llm_server.py)."""
    if call.get("problem"):
        raise _cannot(rec, call, str(call["problem"]))
    where = str(call.get("where"))
    error = call.get("error")
    if error and call.get("parts"):  # broke off mid-stream: kimi words it "Error: <message>"
        message = str(error.get("message") or "")
        if not message.startswith("Error: "):
            raise _cannot(rec, call, "the answer broke off mid-stream with a provider error "
                                     f"the served model cannot make ({message!r})")
        answer = _stream(rec, call, paths, with_usage=False)
        answer["stream_error"] = message[len("Error: "):]
        return answer
    if call.get("kind") == "error" or error:
        return _status(rec, call, error or {}, where)
    return _stream(rec, call, paths)


def _status(rec: Recording, call: Mapping[str, Any], error: Mapping[str, Any],
            where: str) -> dict[str, Any]:
    code = error.get("status_code")
    if error.get("kind") != "status" or not isinstance(code, int) or not 400 <= code <= 599:
        # kimi reconnects once on its own after a connection error or timeout of its "kimi"
        # provider, so the recorded attempts would not line up
        raise _cannot(rec, call, f"a provider error the served model cannot make "
                                 f"({dict(error)})")
    message = "" if error.get("message") is None else str(error["message"])
    if message != message.strip() or _is_json(message):
        # the client library strips the body, and words a JSON body its own way
        raise _cannot(rec, call, f"a provider error message the served model cannot make "
                                 f"({message!r})")
    return {"where": where, "status": code, "message": message}


def _is_json(s: str) -> bool:
    try:
        json.loads(s)
    except ValueError:
        return False
    return True


def _text_of(rec: Recording, call: Mapping[str, Any], part: Mapping[str, Any]) -> str:
    """A text or think part's text (both ways of answering need one)."""
    value = part.get(str(part.get("type")))
    if not isinstance(value, str):
        raise _cannot(rec, call, f"a {part.get('type')} part without text", part)
    return value


def _stream(rec: Recording, call: Mapping[str, Any], paths: PathMap,
            with_usage: bool = True) -> dict[str, Any]:
    chunks: list[dict[str, Any]] = []
    index = -1
    parts = call.get("parts") or []
    args = mapped_args(parts, paths)
    for n, p in enumerate(parts):
        ptype = p.get("type")
        if ptype in ("text", "think"):
            value = _text_of(rec, call, p)
            if ptype == "text" and not value:
                raise _cannot(rec, call, "an empty text part, which kimi's provider drops", p)
            key = "content" if ptype == "text" else "reasoning_content"
            chunks.append(_delta(call, {key: paths.plain(value)}))
        elif ptype == "tool_call":
            if not isinstance(p.get("id"), str) or not isinstance(p.get("name"), str) or \
                    not p["name"]:
                raise _cannot(rec, call, "a tool call without its id or name", p)
            if p.get("extras") is not None:
                raise _cannot(rec, call, "a tool call with extras, which kimi's provider "
                                         "does not read", p)
            index += 1
            chunks.append(_delta(call, {"tool_calls": [{
                "index": index, "id": p["id"], "type": "function",
                "function": {"name": p["name"], "arguments": args[n]}}]}))
        elif ptype == "tool_call_part":
            part = p.get("arguments_part")
            if not isinstance(part, str) or not part or index < 0:
                raise _cannot(rec, call, "a tool call's argument part kimi's provider would "
                                         "drop", p)
            chunks.append(_delta(call, {"tool_calls": [{
                "index": index, "function": {"arguments": args[n]}}]}))
        else:
            raise _cannot(rec, call, f"a part of type {ptype!r} the served model cannot say", p)
    stand_in = _stand_in(call)
    if stand_in is not None:
        chunks.append(_delta(call, {"content": stand_in}))
    if not chunks:
        raise _cannot(rec, call, "the model's answer has no parts")
    usage = call.get("usage")
    if with_usage and isinstance(usage, dict):
        u = {k: int(usage.get(k) or 0) for k in ("input_other", "output", "input_cache_read",
                                                  "input_cache_creation")}
        if u["input_cache_creation"]:
            raise _cannot(rec, call, "token usage with cache creation, which kimi's provider "
                                     "does not read")
        prompt = u["input_other"] + u["input_cache_read"]
        chunks.append(_chunk(call, choices=[], usage={
            "prompt_tokens": prompt, "completion_tokens": u["output"],
            "total_tokens": prompt + u["output"], "cached_tokens": u["input_cache_read"]}))
    return {"where": str(call.get("where")), "stream": chunks}


def answers_for(rec: Recording, calls: Sequence[Mapping[str, Any]],
                paths: PathMap) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for call in calls:
        if call.get("kind") == "exhausted":
            break  # past the answers, the served model says what kimi's echo model says
        out.append(answer_for(rec, call, paths))
    return out


def pinned_answers(rec: Recording, calls: Sequence[Mapping[str, Any]],
                   paths: PathMap) -> tuple[str, list[Any], str | None]:
    """("echo", scripts, None) when kimi's offline model can say every call, else ("served",
    answers, the first call it cannot say and why) for the loopback model. Raises the
    InputError of the served model (it says more) when neither can."""
    try:
        return "echo", scripts_for(rec, calls, paths), None
    except InputError as echo:
        try:
            return "served", answers_for(rec, calls, paths), getattr(echo, "what", None)
        except InputError as served:
            said = getattr(echo, "what", None)
            if said and said != getattr(served, "what", None):
                served.message += f"; nor can kimi's offline model say {said}"
                served.args = (served.message,)
            raise served from None


# -- the config -------------------------------------------------------------------------------


def _flag(argv: Sequence[str], names: Sequence[str]) -> tuple[int, int, str] | None:
    """(index, number of items, value) of the last `--flag VALUE` / `--flag=VALUE`."""
    found = None
    for i, a in enumerate(argv[1:], start=1):
        for name in names:
            if a == name and i + 1 < len(argv):
                found = (i, 2, argv[i + 1])
            elif a.startswith(name + "=") and name.startswith("--"):
                found = (i, 1, a[len(name) + 1:])
    return found


def user_config(argv: Sequence[str], env: Mapping[str, str]) -> tuple[dict[str, Any], str | None]:
    """The kimi config the user's command would load, and where it is (None: none)."""
    try:
        config, source = kimi_config.load(argv, env)
    except kimi_config.KimiConfigError as e:
        raise InputError(str(e), "fix it, or give another with --config-file") from None
    return (config, source) if config is not None else ({}, None)


def _model_key(acp_id: str) -> tuple[str, bool]:
    key, _, variant = acp_id.partition(",")
    return key, variant == "thinking"


def pinned_config(config: Mapping[str, Any], model_info: Mapping[str, Any],
                  scripts_path: str, argv: Sequence[str] = (),
                  served: tuple[str, str] | None = None) -> dict[str, Any]:
    """`config` with only the model swapped: every model alias on the offline provider (for
    ACP, the aliases the recording offered), with the context size the recording reports.
    `served` (base URL, key): the loopback model instead, through kimi's "kimi" provider."""
    out = dict(config)
    own = config.get("models") if isinstance(config.get("models"), dict) else {}
    assert isinstance(own, dict)
    context = model_info.get("max_context_size")
    models: dict[str, dict[str, Any]] = {}
    offered = model_info.get("models")
    if isinstance(offered, list) and offered:
        thinking_variants: set[str] = set()
        for entry in offered:
            key, thinking = _model_key(str(entry.get("id")))
            name = str(entry.get("name") or key).removesuffix(" (thinking)")
            if thinking:
                thinking_variants.add(key)
            if key not in models:
                base = own.get(key)
                base = dict(base) if isinstance(base, dict) else {}
                models[key] = {**base, "model": str(base.get("model") or name)}
        for key in thinking_variants:
            m = models[key]
            lowered = str(m["model"]).lower()
            if "thinking" not in lowered and "reason" not in lowered:
                caps = m.get("capabilities")
                m["capabilities"] = sorted({*(caps if isinstance(caps, list) else []),
                                            "thinking"})
        current = model_info.get("current")
        if isinstance(current, str):
            key, thinking = _model_key(current)
            if key in models:
                out["default_model"] = key
                out["default_thinking"] = thinking
    elif own:
        models = {k: dict(v) for k, v in own.items() if isinstance(v, dict)}
    if not models:
        models = {DEFAULT_ALIAS: {"model": DEFAULT_ALIAS}}
    for m in models.values():
        m["provider"] = PROVIDER
        if isinstance(context, int) and context > 0:
            m["max_context_size"] = context
        elif not isinstance(m.get("max_context_size"), int):
            m["max_context_size"] = DEFAULT_CONTEXT
    chosen = _flag(argv, ("-m", "--model"))
    if chosen is not None and chosen[2] not in models:  # the command picks an alias: keep it
        models[chosen[2]] = dict(next(iter(models.values())))
    if out.get("default_model") not in models:
        out["default_model"] = next(iter(models))
    out["models"] = models
    if served is not None:
        out["providers"] = {PROVIDER: {"type": SERVED_TYPE, "base_url": served[0],
                                       "api_key": served[1]}}
    else:
        out["providers"] = {PROVIDER: {"type": "_scripted_echo", "base_url": "", "api_key": "",
                                       "env": {SCRIPTS_ENV: scripts_path}}}
    return out


# -- the pin ----------------------------------------------------------------------------------


def agent_env(env: Mapping[str, str] | None, home: str, scripts_path: str) -> dict[str, str]:
    out = {k: v for k, v in (os.environ if env is None else env).items()
           if k not in DROP_ENV and not k.startswith(DROP_ENV_PREFIXES)}
    out["HOME"] = home
    out[SCRIPTS_ENV] = scripts_path
    direct_to_loopback(out)
    return out


def _work_dir(argv: Sequence[str], base: str | None) -> str | None:
    """kimi's work dir: its -w/--work-dir (relative to where it runs), else where it runs."""
    w = _flag(argv, ("-w", "--work-dir"))
    if w is None:
        return base
    if os.path.isabs(w[2]):
        return w[2]
    return os.path.join(base or os.getcwd(), w[2])


class KimiPin(ScratchPin):
    def __init__(self, rec: Recording, argv: Sequence[str], env: Mapping[str, str] | None):
        self.main = rec
        self.calls = derive(rec)
        # the session's own calls are checked before anything runs
        mode, _, why = pinned_answers(rec, self.calls["calls"], PathMap(None, None))
        self.mode = mode
        self.server: LoopbackModel | None = None
        self._answers: list[dict[str, Any]] = []
        base_env = os.environ if env is None else env
        config, source = user_config(argv, base_env)
        self._user_config = config
        self._user_argv = list(argv)
        self.root = tempfile.mkdtemp(prefix="wire-replay-llm-")
        try:
            self.home = os.path.join(self.root, "home")
            kimi_dir = os.path.join(self.home, ".kimi")
            os.makedirs(os.path.join(kimi_dir, "credentials"))
            self.scripts_path = os.path.join(self.root, "scripts.json")
            self.config_path = os.path.join(kimi_dir, "config.toml")
            self._write_config(config, argv)
            cred = os.path.join(kimi_dir, "credentials", "kimi-code.json")
            fd = os.open(cred, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(CREDENTIALS, f)
            linked = self._link_home(base_env.get("HOME"))
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.argv = self._argv(argv)
        self.env = agent_env(env, self.home, self.scripts_path)
        self._scripts: list[str] = []
        n = sum(1 for c in self.calls["calls"] if c.get("kind") != "exhausted")
        by = ("kimi's offline model" if mode == "echo" else
              "a model on loopback (127.0.0.1) through kimi's own \"kimi\" provider type "
              f"(the first call kimi's offline model cannot say: {why or 'unknown'})")
        self.notes = [f"LLM pinned to the recording: {n} model call(s) of session "
                      f"{rec.session_id} answered by {by} (--live-llm uses the agent's own)",
                      f"agent config: {source or 'none found'}, with only the model swapped"
                      + (f"; linked from HOME: {', '.join(linked)}" if linked else "")]

    def _write_config(self, config: Mapping[str, Any], argv: Sequence[str],
                      served: tuple[str, str] | None = None) -> None:
        info = dict(self.calls.get("model") or {})
        try:
            text = to_toml(pinned_config(config, info, self.scripts_path, argv, served))
        except TypeError as e:
            raise InputError(f"cannot copy the agent's kimi config: {e}") from None
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.write(text)

    def _link_home(self, home: str | None) -> list[str]:
        if not home or not os.path.isdir(home):
            return []
        linked = []
        for rel in HOME_LINKS:
            src = os.path.join(home, rel)
            if os.path.exists(src):
                dest = os.path.join(self.home, rel)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                os.symlink(src, dest)
                linked.append("~/" + rel)
        return linked

    def _argv(self, argv: Sequence[str]) -> list[str]:
        out = list(argv)
        for names in (("--config",), ("--config-file",)):
            while (found := _flag(out, names)) is not None and \
                    not (names == ("--config-file",) and found[2] == self.config_path):
                i, n, _ = found
                out[i:i + n] = ["--config-file", self.config_path]
        return out

    def use(self, rec: Recording, rec_workdir: str | None, live_workdir: str | None) -> None:
        calls = self.calls if rec is self.main else derive(rec)
        recorded = _work_dir(rec.command, rec_workdir) if rec.command else rec_workdir
        paths = PathMap(recorded, _work_dir(self.argv, live_workdir))
        mode, said, _ = pinned_answers(rec, calls["calls"], paths)
        served: tuple[str, str] | None = None
        if mode == "echo":
            self._scripts, self._answers = said, []
        else:
            self._scripts, self._answers = [], said
            if self.server is None:
                # http.server, imported here: every replay of a Wire session imports this
                # module to ask `recognises`, most of them never serve a model
                from .llm_server import LoopbackModel

                self.server = LoopbackModel(lambda n: EXHAUSTED.format(n=n))
            served = (self.server.start(), self.server.key)
            self.server.serve(self._answers)
        self.mode = mode
        # the config names the model of this run (a chain may mix the two)
        self._write_config(self._user_config, self._user_argv, served)
        with open(self.scripts_path, "w", encoding="utf-8") as f:
            json.dump(self._scripts, f, ensure_ascii=False, indent=1)

    def scripts(self) -> list[str]:
        """The echo scripts last written ([] when the loopback model serves the run)."""
        return list(self._scripts)

    def answers(self) -> list[dict[str, Any]]:
        """What the loopback model serves the run ([] when kimi's offline model answers)."""
        return json.loads(json.dumps(self._answers))

    def write_scripts(self, path: str) -> None:
        write_json(path, self._scripts if self.mode == "echo" else self._answers, "scripts")
