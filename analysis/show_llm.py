"""wire-show's line for one exchange of the model leg (`wire-proxy --llm`): the `llm_response`
lifecycle row, whose payload has the status, timing and the summary of the answer (the bodies
are in the raw row: `wire-query` `llm_calls`, or the row itself, for them)."""

from __future__ import annotations

from typing import Any


def llm_line(p: dict[str, Any]) -> tuple[str, bool]:
    """(the text, whether it is a failure)."""
    n = p.get("n")
    status = p.get("status")
    summary = p.get("summary")
    s: dict[str, Any] = summary if isinstance(summary, dict) else {}
    if status is None:
        return f"model exchange {n}: not reached ({p.get('error') or 'no answer'})", True
    parts = [f"model exchange {n}: {status}"]
    if s.get("model"):
        parts.append(str(s["model"]))
    if s.get("finish_reason"):
        parts.append(str(s["finish_reason"]))
    timing = []
    if isinstance(s.get("first_token_ms"), int | float):
        timing.append(f"first token {s['first_token_ms']:.1f} ms")
    if isinstance(p.get("duration_ms"), int | float):
        timing.append(f"{p['duration_ms']:.1f} ms")
    u = s.get("usage")
    if isinstance(u, dict):
        timing.append(f"tokens in {u.get('input_other', 0) + u.get('input_cache_read', 0)} "
                      f"(cache read {u.get('input_cache_read', 0)}) out {u.get('output', 0)}")
    if p.get("error"):
        timing.append(f"cut: {p['error']}")
    text = " ".join(parts) + (", " + ", ".join(timing) if timing else "")
    return text, status >= 400 or bool(p.get("error"))
