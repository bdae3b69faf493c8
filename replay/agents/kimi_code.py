"""Kimi Code 2.x (`kimi acp`, the TypeScript successor of kimi-cli, same agent name) with its
model pinned to a recording. Kimi Code has no offline test provider, so every call is served
from a model on loopback (llm_server.py) speaking OpenAI's chat-completions stream, the answers
being what the recording says the model answered (recorder/protocols/acp/llm_calls_kimi_code.py):
text and thought deltas, tool calls with their arguments in the pieces they streamed in, the
usage the agent reported after each prompt.

The model is configured in a scratch HOME's `~/.kimi-code/config.toml`, not with Kimi Code's
`KIMI_MODEL_*` variables: those make an alias of their own (`__kimi_env_model__`), which the
agent shows the client in `session/new`'s configOptions, so a replay would differ from the
recording at its second frame; the config file keeps the recorded aliases and model names. The
user's own Kimi Code config (`$KIMI_CODE_HOME` or `~/.kimi-code/config.toml`) is copied with
only the model swapped, so permission rules, the default mode, hooks and the rest stay the
user's: a replay is red when those changed the agent. Inherited variables that would pick
another model or data dir are dropped. Requests are answered in order and not compared, so
their volatile fields (`prompt_cache_key` = the new session id, the date reminder, wall times
in tool results) do not matter; a request past the recording's answers gets a 400 that says so.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from wire_recorder.recorder.errors import InputError
from wire_recorder.recorder.loopback_env import direct_to_loopback

from .kimi import (
    LIVE_LLM_HINT,
    SERVER_NAMES,
    PathMap,
    _cannot,
    _initialize_result,
    mapped_args,
    to_toml,
)
from .scratch import ScratchPin, write_json

if TYPE_CHECKING:
    from ..recording import Recording
    from .llm_server import LoopbackModel

PART = "llm_calls_kimi_code"  # the ACP adapter's part that reads Kimi Code's answers
PROVIDER = "wire-replay-pinned"
PROVIDER_TYPE = "openai"  # chat completions; type "kimi" would add `thinking` to requests
DEFAULT_ALIAS = "wire-replay"
DEFAULT_CONTEXT = 100_000
SERVED_MODEL = "wire-replay"
EXHAUSTED = "the pinned model has no answer {n}: the recording's model answered fewer calls"
# Inherited variables that would swap the model (KIMI_MODEL_*), move the data dir out of the
# scratch HOME (KIMI_CODE_HOME) or reach a provider the replay did not set up.
DROP_ENV = frozenset({"KIMI_CODE_HOME", "KIMI_API_KEY", "KIMI_BASE_URL", "KIMI_CODE_BASE_URL",
                      "KIMI_CODE_OAUTH_HOST", "KIMI_CODE_CUSTOM_HEADERS", "OPENAI_API_KEY",
                      "OPENAI_BASE_URL", "KIMI_SHARE_DIR"})
DROP_ENV_PREFIXES = ("KIMI_MODEL_",)
# What Kimi Code reads from HOME besides its config and keeps read-only: linked into the
# scratch HOME (its sessions, logs and caches stay in the scratch one)
HOME_LINKS = (".kimi-code/skills", ".kimi-code/plugins", ".kimi-code/agents",
              ".kimi-code/mcp.json", ".agents/skills", ".agents/agents")
# what the user's config says that changes what the agent does without the client asking:
# named in the notes, since a replay that differs because of them shows only the effect
BEHAVIOUR_KEYS = ("default_permission_mode", "yolo", "plan_mode", "default_plan_mode",
                  "permission", "hooks")
# the config keys that start the agent in another mode than `default`: a string names it, true
# means the one given
MODE_KEYS = {"default_permission_mode": "", "yolo": "yolo", "plan_mode": "plan",
             "default_plan_mode": "plan"}
# offline: no telemetry, no update check, no model catalog fetch
OFFLINE_ENV = {"KIMI_DISABLE_TELEMETRY": "1", "KIMI_CODE_NO_AUTO_UPDATE": "1",
               "KIMI_CLI_NO_AUTO_UPDATE": "1", "KIMI_CODE_MODEL_CATALOG_REFRESH_ON_START": "0",
               "KIMI_CODE_MODEL_CATALOG_REFRESH_INTERVAL_MS": "0"}


def recognises(rec: Recording) -> bool:
    """Made by Kimi Code: its initialize answer names the agent kimi-cli also calls itself, at
    a version 2 or later (kimi-cli is 1.x)."""
    result = _initialize_result(rec)
    info = result.get("agentInfo") if result is not None else None
    if not isinstance(info, dict) or info.get("name") not in SERVER_NAMES:
        return False
    major = str(info.get("version") or "").split(".", 1)[0]
    return major.isdigit() and int(major) >= 2


def pin(rec: Recording, argv: Sequence[str], env: Mapping[str, str] | None,
        journal: str | None = None) -> KimiCodePin:
    return KimiCodePin(rec, argv, env, journal)


def derive(rec: Recording) -> dict[str, Any]:
    part = rec.adapter.part(PART)
    if part is None:
        raise InputError(f"{rec.path}: session {rec.session_id} ({rec.protocol}) does not say "
                         f"what Kimi Code's model answered", LIVE_LLM_HINT)
    out: dict[str, Any] = part.llm_calls(rec.msgs, rec.client_requests)
    return out


# -- the answers, as an OpenAI-compatible provider streams them -------------------------------


def _chunk(call: Mapping[str, Any], choices: list[Any], **extra: Any) -> dict[str, Any]:
    return {"id": str(call.get("id") or "chatcmpl-wire-replay"),
            "object": "chat.completion.chunk", "created": 0, "model": SERVED_MODEL,
            "choices": choices, **extra}


def _delta(call: Mapping[str, Any], delta: dict[str, Any],
           finish: str | None = None) -> dict[str, Any]:
    return _chunk(call, [{"index": 0, "delta": delta, "finish_reason": finish}])


def answer_for(rec: Recording, call: Mapping[str, Any], paths: PathMap) -> dict[str, Any]:
    """One call as the loopback model streams it: a role chunk, each recorded delta in its own
    chunk, the finish reason, then the usage the agent reported."""
    if call.get("problem"):
        raise _cannot(rec, call, str(call["problem"]))
    parts = call.get("parts") or []
    args = mapped_args(parts, paths)
    chunks = [_delta(call, {"role": "assistant", "content": ""})]
    index = -1
    for n, p in enumerate(parts):
        ptype = p.get("type")
        if ptype in ("text", "think"):
            value = p.get(ptype)
            if not isinstance(value, str) or not value:
                raise _cannot(rec, call, f"an empty {ptype} part", p)
            key = "content" if ptype == "text" else "reasoning_content"
            chunks.append(_delta(call, {key: paths.plain(value)}))
        elif ptype == "tool_call":
            if not isinstance(p.get("id"), str) or not p.get("name"):
                raise _cannot(rec, call, "a tool call without its id or name", p)
            index += 1
            chunks.append(_delta(call, {"tool_calls": [{
                "index": index, "id": p["id"], "type": "function",
                "function": {"name": p["name"], "arguments": args[n] or ""}}]}))
        elif ptype == "tool_call_part":
            if index < 0 or not args[n]:
                raise _cannot(rec, call, "a tool call's argument part before any call", p)
            chunks.append(_delta(call, {"tool_calls": [{
                "index": index, "function": {"arguments": args[n]}}]}))
        else:
            raise _cannot(rec, call, f"a part of type {ptype!r} the served model cannot say", p)
    if len(chunks) == 1:
        raise _cannot(rec, call, "the model's answer has no parts")
    chunks.append(_delta(call, {}, "tool_calls" if index >= 0 else "stop"))
    usage = call.get("usage")
    if isinstance(usage, dict):
        prompt = int(usage.get("input_other") or 0) + int(usage.get("input_cache_read") or 0)
        out = int(usage.get("output") or 0)
        chunks.append(_chunk(call, [], usage={
            "prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out,
            "prompt_tokens_details": {"cached_tokens": int(usage.get("input_cache_read") or 0)}}))
    return {"where": str(call.get("where")), "stream": chunks}


def answers_for(rec: Recording, calls: Sequence[Mapping[str, Any]],
                paths: PathMap) -> list[dict[str, Any]]:
    return [answer_for(rec, c, paths) for c in calls]


# -- the config -------------------------------------------------------------------------------


def user_config(env: Mapping[str, str]) -> tuple[dict[str, Any], str | None]:
    """The Kimi Code config the agent would load, and where it is (None: none)."""
    data_dir = env.get("KIMI_CODE_HOME") or os.path.join(env.get("HOME") or "~", ".kimi-code")
    path = os.path.join(os.path.expanduser(data_dir), "config.toml")
    if not os.path.isfile(path):
        return {}, None
    try:
        with open(path, encoding="utf-8") as f:
            return tomllib.loads(f.read()), path
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise InputError(f"cannot read the agent's Kimi Code config {path}: {e}",
                         "fix it, or replay with another HOME") from None


def pinned_config(config: Mapping[str, Any], model: Mapping[str, Any],
                  served: tuple[str, str]) -> dict[str, Any]:
    """`config` with only the model swapped: the aliases the recording offered (configOptions),
    each the recorded model name on the loopback provider, with the recorded context size."""
    out = dict(config)
    own = config.get("models") if isinstance(config.get("models"), dict) else {}
    assert isinstance(own, dict)
    size = model.get("max_context_size")
    offered = model.get("models") or [{"id": DEFAULT_ALIAS, "name": SERVED_MODEL}]
    models: dict[str, dict[str, Any]] = {}
    for entry in offered:
        alias = str(entry.get("id"))
        base = own.get(alias)
        models[alias] = {**(dict(base) if isinstance(base, dict) else {}),
                         "provider": PROVIDER, "model": str(entry.get("name") or alias)}
        m = models[alias]
        if isinstance(size, int) and size > 0:
            m["max_context_size"] = size
        elif not isinstance(m.get("max_context_size"), int):
            m["max_context_size"] = DEFAULT_CONTEXT
    current = model.get("current")
    out["default_model"] = current if current in models else next(iter(models))
    out["models"] = models
    out["providers"] = {PROVIDER: {"type": PROVIDER_TYPE, "base_url": served[0],
                                   "api_key": served[1]}}
    out.pop("default_provider", None)
    out["telemetry"] = False
    catalog = out.get("model_catalog")
    out["model_catalog"] = {**(catalog if isinstance(catalog, dict) else {}), "refresh_on_start": False, "refresh_interval_ms": 0}
    return out


def config_mode(config: Mapping[str, Any]) -> tuple[str, str] | None:
    """The permission mode the user's config starts the agent in, and which key says so."""
    for key in MODE_KEYS:
        value = config.get(key)
        mode = value if isinstance(value, str) else MODE_KEYS[key] if value is True else None
        if mode:
            return mode, f"from the user's config ({key})"
    return None


def agent_env(env: Mapping[str, str] | None, home: str) -> dict[str, str]:
    out = {k: v for k, v in (os.environ if env is None else env).items()
           if k not in DROP_ENV and not k.startswith(DROP_ENV_PREFIXES)}
    out.update(OFFLINE_ENV)
    out["HOME"] = home
    direct_to_loopback(out)
    return out


class KimiCodePin(ScratchPin):
    def __init__(self, rec: Recording, argv: Sequence[str], env: Mapping[str, str] | None,
                 journal: str | None = None):
        self.main = rec
        self.calls = derive(rec)
        from_journal = None
        if journal is not None:
            from .kimi_code_journal import journal_calls

            self.calls, from_journal = journal_calls(rec, self.calls, journal)
        answers_for(rec, self.calls["calls"], PathMap(None, None))  # refuse before any run
        self.server: LoopbackModel | None = None
        self._answers: list[dict[str, Any]] = []
        base_env = os.environ if env is None else env
        self._user_config, source = user_config(base_env)
        self.root = tempfile.mkdtemp(prefix="wire-replay-llm-")
        self.home = os.path.join(self.root, "home")
        self.config_path = os.path.join(self.home, ".kimi-code", "config.toml")
        try:
            os.makedirs(os.path.dirname(self.config_path))
            linked = self._link_home(base_env.get("KIMI_CODE_HOME"), base_env.get("HOME"))
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.argv = list(argv)
        self.env = agent_env(env, self.home)
        n = len(self.calls["calls"])
        self.notes = [f"LLM pinned to the recording: {n} model call(s) of session "
                      f"{rec.session_id} answered by a model on loopback (127.0.0.1) through "
                      f"Kimi Code's \"{PROVIDER_TYPE}\" provider type (--live-llm uses the "
                      f"agent's own)",
                      f"agent config: {source or 'none found'}, with only the model swapped"
                      + "".join(f"; keeps {k} = {json.dumps(v)}" for k, v in
                                self._user_config.items() if k in BEHAVIOUR_KEYS)
                      + (f"; linked from HOME: {', '.join(linked)}" if linked else "")]
        if from_journal:
            self.notes.append(from_journal)

    def _link_home(self, data_dir: str | None, home: str | None) -> list[str]:
        linked = []
        for rel in HOME_LINKS:
            tail = rel.split("/", 1)[1]
            if rel.startswith(".kimi-code/") and data_dir:
                src, shown = os.path.join(data_dir, tail), f"$KIMI_CODE_HOME/{tail}"
            elif home:
                src, shown = os.path.join(home, rel), f"~/{rel}"
            else:
                continue
            src = os.path.abspath(os.path.expanduser(src))
            if os.path.exists(src):
                dest = os.path.join(self.home, rel)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                os.symlink(src, dest)
                linked.append(shown)
        return linked

    def use(self, rec: Recording, rec_workdir: str | None, live_workdir: str | None) -> None:
        calls = self.calls if rec is self.main else derive(rec)
        self._answers = answers_for(rec, calls["calls"], PathMap(rec_workdir, live_workdir))
        if self.server is None:
            from .llm_server import LoopbackModel

            self.server = LoopbackModel(lambda n: EXHAUSTED.format(n=n))
        served = (self.server.start(), self.server.key)
        self.server.serve(self._answers)
        try:
            text = to_toml(pinned_config(self._user_config, calls.get("model") or {}, served))
        except TypeError as e:
            raise InputError(f"cannot copy the agent's Kimi Code config: {e}") from None
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.write(text)

    def scripts(self) -> list[str]:
        return []  # every answer is served from loopback

    def agent_mode(self) -> tuple[str, str] | None:
        return config_mode(self._user_config)

    def answers(self) -> list[dict[str, Any]]:
        return json.loads(json.dumps(self._answers))

    def write_scripts(self, path: str) -> None:
        write_json(path, self._answers, "answers")
