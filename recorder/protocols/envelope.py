"""The JSON-RPC envelope check that the conformance parts backed by a peer's SDK share.

Imports pydantic: only conformance parts import this module, never an adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from .base import Verdict, errors_line


def message_kind(obj: dict[str, Any]) -> str:
    """request, notification, result or error, by the members JSON-RPC 2.0 gives each."""
    if obj.get("method") is None:
        return "error" if "error" in obj else "result"
    return "request" if "id" in obj else "notification"


def check_envelope(envelopes: Mapping[str, Any], obj: dict[str, Any]) -> tuple[str, Verdict]:
    """The message's kind, and a violation when the SDK's envelope model of that kind
    (`envelopes[kind]`, a pydantic model) rejects it."""
    what = message_kind(obj)
    try:
        envelopes[what].model_validate(obj)
    except ValidationError as e:
        return what, ("violation", errors_line(e.errors()))
    return what, None
