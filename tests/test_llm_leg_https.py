"""The model leg in front of an HTTPS model (recorder/llm_leg.py as a library, no agent): the
answer streamed back byte for byte and chunk for chunk over TLS, the exchange stored without
the key, and a model that cannot be reached a closed connection (as the agent would see it)."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import ssl
import subprocess
import threading
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from tests.harness.llm_leg import library_leg
from tests.harness.model_server import StreamingModel, _Handler, answer, sse_chunks
from tests.harness.proxy import wait_until


@pytest.fixture()
def tls_model(tmp_path, monkeypatch):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    # the leg verifies the model's certificate the standard way: this CA is the one trusted
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    turn = answer(think=["Thinking ", "it over."], text=["Hello", ", world"], usage=(120, 5, 20))
    model = StreamingModel([turn])

    class Handler(_Handler):
        pass

    Handler.model = model
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(cert), str(key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield model, turn, f"https://localhost:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()



def test_an_https_model_streams_through_the_leg_chunk_for_chunk(tls_model):
    model, turn, base = tls_model
    leg, events = library_leg(base)
    try:
        u = urlsplit(leg.stand_in)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        body = json.dumps({"model": model.model, "stream": True,
                           "messages": [{"role": "user", "content": "hi"}]})
        conn.request("POST", u.path + "/chat/completions", body=body,
                     headers={"Authorization": f"Bearer {model.key}",
                              "Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("Transfer-Encoding") == "chunked"
        got = []
        while data := resp.read1(1 << 16):
            while resp.chunk_left:
                data += resp.read1(resp.chunk_left)
            got.append(data)
        conn.close()
        # the leg logs the exchange once its last byte is sent on: the client may have it first
        assert wait_until(lambda: len(events) >= 3, timeout=60), events
    finally:
        leg.stop()
    sent = [b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\n\n"
            for c in sse_chunks(turn, model.model)] + [b"data: [DONE]\n\n"]
    assert got == sent  # chunk for chunk
    names = [n for n, _ in events]
    assert names == ["llm_leg", "llm_request", "llm_response"]
    assert events[0][1]["upstream"] == base
    req, res = events[1][1], events[2][1]
    assert req["secret_headers"] == ["Authorization"] and model.key not in json.dumps(events)
    assert json.loads(req["request_body"]) == json.loads(body)
    assert res["response_body"].encode() == b"".join(sent)
    assert res["summary"]["usage"] == {"input_other": 100, "output": 5, "input_cache_read": 20,
                                       "input_cache_creation": 0}
    assert res["summary"]["finish_reason"] == "stop"


def test_an_unreachable_model_is_a_closed_connection_and_stored_as_such():
    with socket.socket() as held:  # bound, never listening: connecting is refused
        held.bind(("127.0.0.1", 0))
        leg, events = library_leg(f"http://127.0.0.1:{held.getsockname()[1]}/v1")
        try:
            u = urlsplit(leg.stand_in)
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            conn.request("POST", u.path + "/chat/completions", body=b"{}")
            with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
                conn.getresponse()
            conn.close()
            # a path outside the token is never forwarded
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            conn.request("POST", "/v1/chat/completions", body=b"{}")
            assert conn.getresponse().status == 404
            conn.close()
        finally:
            leg.stop()
    res = [d for n, d in events if n == "llm_response"]
    assert len(res) == 1 and res[0]["status"] is None and "Connection" in res[0]["error"]
