"""A number of seconds from an environment variable, for the waits our commands let users stretch
on a slow machine (wire-query's statement limit, wire-replay's start-up wait)."""

from __future__ import annotations

import os

from .errors import UsageError


def env_seconds(name: str, default: float, zero_means_none: bool = False) -> float:
    """$name as seconds, or `default` when it is unset or blank. With `zero_means_none`, 0 is
    allowed (no limit); otherwise the value must be positive. A bad value is a UsageError."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    ok = value >= 0 if zero_means_none else value > 0
    if not ok or value == float("inf"):
        what = "a number of seconds" if zero_means_none else "a positive number of seconds"
        other = "or 0 for no limit" if zero_means_none else "or unset it"
        raise UsageError(f"{name}={text[:40]!r} is not {what}",
                         f"give seconds, e.g. {name}=600, {other}")
    return value
