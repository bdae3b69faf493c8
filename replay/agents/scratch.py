"""What the pins that answer from a scratch HOME share: writing what answers a run to
`--write-llm-script`'s file, and removing the scratch folder with its loopback model."""

from __future__ import annotations

import json
import shutil
from typing import Any

from wire_recorder.recorder.errors import OutputError

from . import LlmPin


def write_json(path: str, what: Any, noun: str) -> None:
    """`what` as indented JSON at `path`; an OutputError naming the `noun` written if not."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(what, f, ensure_ascii=False, indent=1)
            f.write("\n")
    except OSError as e:
        raise OutputError(f"cannot write the LLM {noun} to {path}: {e.strerror or e}") from None


class ScratchPin(LlmPin):
    """A pin with its own scratch folder (`root`, the HOME inside it) and maybe a loopback model
    (`server`), both gone at cleanup."""

    root: str
    server: Any = None

    def cleanup(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        shutil.rmtree(self.root, ignore_errors=True)
