"""The test and sample harness: everything that drives the real peers and that the product itself
never runs, kept out of the installed packages.

    peers.py           where the real peers are (kimi, the ACP SDK venv, the MCP venvs);
                       PeerMissing, and `need()`: skip a test when a peer is missing, fail on CI
    kimi_peer.py       a scratch HOME/config/scripts for one offline `kimi` run, and the
                       `_scripted_echo` script language
    model_server.py    a model that streams like a real OpenAI-compatible provider, for kimi's
                       `openai_legacy` provider type (the alternative to `_scripted_echo`)
    scripted_client.py a scripted Wire client over pipes
    wire.py acp.py mcp.py   scenario types, runners and generic checks per protocol (the named
                       scenarios themselves are data in sample_sessions/)
    recording.py       record a named scenario through wire-proxy (sample_sessions/record.py)
    kimi_recordings.py the real kimi sessions several test modules read, recorded once per run
    proxy.py replay.py analysis.py   helpers of the proxy, replay and analysis tests
    sdk/               clients and a demo server built on the peers' SDKs; they run under the
                       peer venvs' interpreters, never imported by the project's Python

Imported as `tests.harness` with the repository root on sys.path (tests/conftest.py and
sample_sessions/record.py put it there).
"""
