"""Text of a recorded model request against a live one: the stored copy is redacted
(recorder/redact.py puts `REDACTED:<12 hex>` where it saw a secret, keyed per recording), so a
recorded string matches a live one when the live one is the same with anything non-empty at
each placeholder."""

from __future__ import annotations

from wire_recorder.recorder.redact import PLACEHOLDER_TEXT_RE


def aligned(recorded: str, live: str) -> str:
    """`live` as the recording would hold it: each stretch of `live` that stands where
    `recorded` has a placeholder (the text around it the same) is replaced by the placeholder,
    from the start up to the first real difference; what follows is `live` as it is, so a
    difference is shown where it is, not at a placeholder before it."""
    if recorded == live or not PLACEHOLDER_TEXT_RE.search(recorded):
        return live
    parts = PLACEHOLDER_TEXT_RE.split(recorded)
    holders = PLACEHOLDER_TEXT_RE.findall(recorded)
    if not live.startswith(parts[0]):
        return live
    out = [parts[0]]
    pos = len(parts[0])
    last = len(holders) - 1
    for i, (holder, after) in enumerate(zip(holders, parts[1:], strict=True)):
        out.append(holder)
        if after == "":
            if i == last:  # the text ends with the secret
                return "".join(out)
            continue
        # the secret is one character or more; the literal after it (its start found first)
        end = live.find(after[:16], pos + 1)
        if end < 0:
            end = live.find(after[:4], pos + 1)
        if end < 0:
            out[-1] = live[pos:]
            return "".join(out)
        pos = end
        if not live.startswith(after, pos):
            out.append(live[pos:])
            return "".join(out)
        out.append(after)
        pos += len(after)
    out.append(live[pos:])
    return "".join(out)


def first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
