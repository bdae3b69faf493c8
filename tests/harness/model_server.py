"""A streaming model on loopback that behaves like a real OpenAI-compatible provider, for
recording the real kimi-cli against something other than its own `_scripted_echo` model.

kimi-cli 1.51 talks to it through its `openai_legacy` provider type (kosong's OpenAILegacy:
the `openai` client library, chat completions with `stream=True` and
`stream_options.include_usage`, thinking read from `reasoning_content`). The server plays a
script of turns, one per request, the way a real provider streams them: an HTTP/1.1 chunked
`text/event-stream` with each SSE event flushed on its own, a role chunk first, reasoning and
text in several pieces, tool calls as a header (id, name, empty arguments) followed by argument
pieces (cut wherever the script says: mid-path, as real models do), several tool calls in one
answer, `finish_reason` then usage in a last chunk without choices, `data: [DONE]`. A turn can
also be an HTTP error such as a 503 (the client library retries that on its own, as against a
real provider), and the server keeps every request body so a test can see what kimi sent back
(tool results, the retried request).

    model = StreamingModel([answer(text=["Hello"], usage=(120, 5))])
    cfg.write_text(model.config_toml())    # kimi --config-file cfg
    model.start(); ...; model.stop()

With `dialect="anthropic"` the same script is served as Anthropic's Messages API does
(`POST /v1/messages`, the key in `x-api-key`): `event: NAME` + `data:` SSE events message_start
(id, model, input usage), ping, then one content block per reasoning (thinking_delta pieces and
a signature_delta), text (text_delta pieces) and tool call (tool_use with empty input, then
input_json_delta pieces), each content_block_start .. content_block_stop, then message_delta
(stop_reason, output usage) and message_stop; an error is Anthropic's error object. Its
base_url has no `/v1` (the Anthropic clients add `/v1/messages`).

Only the standard library; 127.0.0.1 at a random port, only its own key.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "stream-model-1"
ALIAS = "stream"


def call(call_id: str, name: str, pieces: Sequence[str]) -> dict[str, Any]:
    """One tool call whose JSON arguments stream as `pieces` (joined, they must be JSON)."""
    json.loads("".join(pieces))  # a script error shows here, not as kimi's odd tool error
    return {"id": call_id, "name": name, "pieces": list(pieces)}


def answer(*, think: Sequence[str] = (), text: Sequence[str] = (),
           calls: Sequence[dict[str, Any]] = (), usage: tuple[int, int, int] | None = None,
           message_id: str | None = None) -> dict[str, Any]:
    """One streamed answer: reasoning pieces, then text pieces, then the tool calls in order;
    usage (prompt tokens, completion tokens, cached prompt tokens) in the last chunk."""
    return {"think": list(think), "text": list(text), "calls": list(calls), "usage": usage,
            "id": message_id or "chatcmpl-" + secrets.token_hex(6)}


def failure(status: int, message: str) -> dict[str, Any]:
    """An HTTP error answer, the body OpenAI's error object."""
    return {"status": status, "message": message}


def sse_chunks(turn: dict[str, Any], model: str = MODEL) -> list[dict[str, Any]]:
    """The chat.completion.chunk objects one answer streams, in order."""
    def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {"id": turn["id"], "object": "chat.completion.chunk", "created": 1767225600,
                "model": model, "system_fingerprint": "fp_stream", "choices": choices, **extra}

    def delta(d: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return chunk([{"index": 0, "delta": d, "logprobs": None, "finish_reason": finish}])

    out = [delta({"role": "assistant", "content": ""})]
    out += [delta({"reasoning_content": p}) for p in turn["think"]]
    out += [delta({"content": p}) for p in turn["text"]]
    for i, c in enumerate(turn["calls"]):
        out.append(delta({"tool_calls": [{"index": i, "id": c["id"], "type": "function",
                                          "function": {"name": c["name"], "arguments": ""}}]}))
        out += [delta({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
                for p in c["pieces"]]
    out.append(delta({}, "tool_calls" if turn["calls"] else "stop"))
    if turn["usage"] is not None:
        prompt, completion, cached = turn["usage"]
        out.append(chunk([], usage={"prompt_tokens": prompt, "completion_tokens": completion,
                                    "total_tokens": prompt + completion,
                                    "prompt_tokens_details": {"cached_tokens": cached}}))
    return out


def anthropic_events(turn: dict[str, Any], model: str = MODEL) -> list[tuple[str, dict[str, Any]]]:
    """The (event name, data) pairs one answer streams as Anthropic's Messages API."""
    prompt, completion, cached = turn["usage"] or (0, 0, 0)
    msg_id = turn["id"].replace("chatcmpl-", "msg_")
    out: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": prompt - cached, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": cached, "output_tokens": 1}}}),
        ("ping", {"type": "ping"})]
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if turn["think"]:
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""},
                       [{"type": "thinking_delta", "thinking": p} for p in turn["think"]]
                       + [{"type": "signature_delta", "signature": "sig-" + msg_id}]))
    if turn["text"]:
        blocks.append(({"type": "text", "text": ""},
                       [{"type": "text_delta", "text": p} for p in turn["text"]]))
    for c in turn["calls"]:
        blocks.append(({"type": "tool_use", "id": c["id"], "name": c["name"], "input": {}},
                       [{"type": "input_json_delta", "partial_json": p} for p in c["pieces"]]))
    for i, (start, deltas) in enumerate(blocks):
        out.append(("content_block_start", {"type": "content_block_start", "index": i,
                                             "content_block": start}))
        out += [("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
                for d in deltas]
        out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": "tool_use" if turn["calls"]
                                            else "end_turn", "stop_sequence": None},
                                  "usage": {"output_tokens": completion}}))
    out.append(("message_stop", {"type": "message_stop"}))
    return out


def sse_events(turn: dict[str, Any], model: str = MODEL, dialect: str = "openai") -> list[bytes]:
    """The SSE events the server streams for `turn`, each sent as one HTTP chunk."""
    def js(data: Any) -> bytes:
        return json.dumps(data, ensure_ascii=False).encode()

    if dialect == "anthropic":
        return [f"event: {name}\ndata: ".encode() + js(data) + b"\n\n"
                for name, data in anthropic_events(turn, model)]
    return [b"data: " + js(c) + b"\n\n" for c in sse_chunks(turn, model)] + [b"data: [DONE]\n\n"]


class StreamingModel:
    """Serves `turns` to the requests in the order they come; a request past the script gets a
    400 that names it (kimi fails the prompt with it), never a hang."""

    def __init__(self, turns: Sequence[dict[str, Any]], model: str = MODEL,
                 dialect: str = "openai"):
        assert dialect in ("openai", "anthropic"), dialect
        self.turns = list(turns)
        self.model = model
        self.dialect = dialect
        self.key = "sk-stream-" + secrets.token_hex(12)
        self.requests: list[dict[str, Any]] = []  # every chat request body, parsed
        self.headers: list[dict[str, str]] = []  # and its headers
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() first"
        root = f"http://127.0.0.1:{self._server.server_address[1]}"
        return root if self.dialect == "anthropic" else root + "/v1"

    def start(self) -> str:
        if self._server is None:
            owner = self

            class Handler(_Handler):
                model = owner

            self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            self._server.daemon_threads = True
            self._thread = threading.Thread(target=self._server.serve_forever,
                                            name="stream-model", daemon=True)
            self._thread.start()
        return self.base_url

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> StreamingModel:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def config_toml(self, max_context_size: int = 128000) -> str:
        """A kimi config whose only model is this server, through `openai_legacy`."""
        return (f'default_model = "{ALIAS}"\ntelemetry = false\n\n'
                f'[models.{ALIAS}]\nprovider = "{ALIAS}"\nmodel = "{self.model}"\n'
                f"max_context_size = {int(max_context_size)}\n\n"
                f'[providers.{ALIAS}]\ntype = "openai_legacy"\nbase_url = "{self.base_url}"\n'
                f'api_key = "{self.key}"\n')

    def _take(self, body: dict[str, Any],
              headers: dict[str, str]) -> tuple[int, dict[str, Any] | None]:
        with self._lock:
            n = len(self.requests)
            self.requests.append(body)
            self.headers.append(headers)
            return n, (self.turns[n] if n < len(self.turns) else None)


class _Handler(BaseHTTPRequestHandler):
    model: StreamingModel
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        anthropic = self.model.dialect == "anthropic"
        route = "/v1/messages" if anthropic else "/v1/chat/completions"
        if self.path.split("?", 1)[0] != route:
            self._error(404, f"no route {self.path}")
            return
        if (self.headers.get("x-api-key") != self.model.key if anthropic else
                self.headers.get("Authorization") != f"Bearer {self.model.key}"):
            self._error(401, "Incorrect API key provided")
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._error(400, "the body is not JSON")
            return
        n, turn = self.model._take(body, dict(self.headers.items()))
        if turn is None:
            self._error(400, f"the model's script has no turn {n + 1}")
        elif "status" in turn:
            self._error(int(turn["status"]), str(turn["message"]))
        elif not body.get("stream"):
            self._error(400, "this model only streams")
        else:
            self._stream(sse_events(turn, self.model.model, self.model.dialect))

    def _error(self, status: int, message: str) -> None:
        if self.model.dialect == "anthropic":
            kind = {401: "authentication_error", 404: "not_found_error",
                    529: "overloaded_error", 503: "overloaded_error"}.get(status, "api_error")
            body = json.dumps({"type": "error",
                               "error": {"type": kind, "message": message}}).encode()
        else:
            body = json.dumps({"error": {"message": message, "type": "server_error",
                                         "code": str(status)}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, events: list[bytes]) -> None:
        # one writer for both dialects: they differ only in how an SSE event is spelt
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                self._chunk(event)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        # one HTTP chunk per SSE event, flushed: the client sees them one at a time
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()
