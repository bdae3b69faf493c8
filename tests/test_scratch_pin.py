"""The scratch-HOME pins share one writer of `--write-llm-script`'s file and one cleanup
(replay/agents/scratch.py): kimi-cli's pin and Kimi Code's, from their samples, no agent run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wire_recorder.recorder.errors import OutputError
from wire_recorder.replay.agents import pin_llm
from wire_recorder.replay.agents.kimi import KimiPin
from wire_recorder.replay.agents.kimi_code import KimiCodePin
from wire_recorder.replay.recording import load

SAMPLES = Path(__file__).resolve().parent.parent / "sample_sessions"


@pytest.mark.parametrize("sample, argv, cls, noun", [
    ("multi_step.jsonl", ["kimi", "--wire"], KimiPin, "scripts"),
    ("kimicode_tools.jsonl", ["kimi", "acp"], KimiCodePin, "answers")])
def test_a_pin_writes_what_answers_the_run_and_leaves_nothing_behind(tmp_path, sample, argv,
                                                                     cls, noun):
    home = tmp_path / "home"
    home.mkdir()
    rec = load(SAMPLES / sample)
    pin = pin_llm(rec, argv, {"HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert isinstance(pin, cls)
    try:
        pin.use(rec, rec.cwd, str(tmp_path))
        out = tmp_path / "served.json"
        pin.write_scripts(str(out))
        written = json.loads(out.read_text(encoding="utf-8"))
        assert isinstance(written, list) and written  # one entry a model call
        with pytest.raises(OutputError) as e:
            pin.write_scripts(str(tmp_path))  # a folder: one line naming what and where
        assert e.value.message.startswith(f"cannot write the LLM {noun} to {tmp_path}: ")
        assert "\n" not in e.value.message
    finally:
        pin.cleanup()
    assert not Path(pin.root).exists() and pin.server is None
    pin.cleanup()  # twice: nothing left to do, no error
