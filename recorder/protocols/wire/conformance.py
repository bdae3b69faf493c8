"""Wire frames against the Wire 1.10 models in model.py (what kimi-cli 1.51.0 sends and accepts).

Imported by `Adapter.conformance()` only: it pulls in pydantic, which the loader never needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..base import Verdict
from . import model


def check(direction: str, obj: dict[str, Any],
          answers: tuple[str, str | None] | None) -> Verdict:
    reply_to = None
    if answers is not None and "result" in obj:
        method, msg_type = answers
        # an agent request's answer is typed by the request type, a client request's by method
        reply_to = msg_type if method == "request" else method
    msg = model.parse_message(obj, reply_to=reply_to)
    if msg.known:
        return None
    return ("violation", getattr(msg, "reason", "does not fit the Wire model"))


def checker(version: str | None) -> Callable[..., Verdict]:
    """Wire 1.10 is the only version the model knows; the check is the same for any."""
    return check
