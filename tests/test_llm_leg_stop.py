"""The model leg's end (recorder/llm_leg.py `stop`, as a library, no agent): an exchange still
open when the proxy ends is stored before the spool closes, never left out. An answer the model
finishes meanwhile is stored whole; one it is still streaming when the bound is over is stored
as cut, and its handler's own end, later, is not stored a second time."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.harness.llm_leg import library_leg
from tests.harness.proxy import wait_until
from wire_recorder.recorder.llm_leg import ModelLeg

FIRST = b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
REST = b'data: {"choices":[{"delta":{"content":"lo"}}]}\n\ndata: [DONE]\n\n'


@pytest.fixture()
def held_model():
    """A model that streams its first event, then holds the rest until `release` is set."""
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # noqa: A002 - the base's name
            pass

        def do_POST(self):  # noqa: N802 - http.server's naming
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (FIRST, None, REST):
                if part is None:
                    release.wait(600)
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield release, f"http://127.0.0.1:{server.server_address[1]}/v1"
    release.set()
    server.shutdown()
    server.server_close()


def _ask(leg: ModelLeg) -> http.client.HTTPConnection:
    """An agent's request through the leg, read up to the first event (the agent may then go)."""
    conn = http.client.HTTPConnection("127.0.0.1", leg.port, timeout=600)
    conn.request("POST", f"/{leg.token}/chat/completions", body=b'{"stream":true}',
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.read1(len(FIRST)) == FIRST
    return conn



def _responses(events: list) -> list[dict]:
    return [data for name, data in events if name == "llm_response"]


def test_an_answer_finished_while_stopping_is_stored_whole(held_model):
    release, url = held_model
    leg, events = library_leg(url)
    conn = _ask(leg)
    stopper = threading.Thread(target=leg.stop, kwargs={"streaming_s": 600})
    stopper.start()
    release.set()
    stopper.join()
    # stored by the time stop returns (the spool closes right after it)
    (resp,) = _responses(events)
    assert resp["status"] == 200 and resp["error"] is None and not resp.get("cut")
    assert resp["response_body"].encode() == FIRST + REST
    assert leg.cut == 0 and leg.late == 0
    conn.close()


def test_an_answer_still_streaming_at_the_bound_is_stored_as_cut_once(held_model):
    release, url = held_model
    leg, events = library_leg(url)
    conn = _ask(leg)
    conn.close()  # the agent is gone; the model goes on streaming
    leg.stop(streaming_s=0)
    (resp,) = _responses(events)
    assert resp["n"] == 1 and resp["status"] is None and resp["cut"] is True
    assert "still streaming" in resp["error"]
    assert leg.cut == 1
    release.set()  # the handler's own end comes later: left out, counted
    assert wait_until(lambda: leg.late == 1, 600)
    assert len(_responses(events)) == 1
