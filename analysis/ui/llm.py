"""wire-ui's model calls of a session recorded with `wire-proxy --llm`: the library code is
analysis/llm_detail.py (wire-show's `--llm-call` shows the same); the page puts the bodies in the
DOM as text."""

from __future__ import annotations

from wire_recorder.analysis.llm_detail import EVENTS, calls, prompt_diff

__all__ = ["EVENTS", "calls", "prompt_diff"]
