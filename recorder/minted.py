"""Request ids a session mints afresh on every run, whatever their shape: transcripts alias them
(`${id1}`, ...) and replay masks them, as they do UUIDs.

A JSON-RPC string id is taken as minted when it holds a clock or a random token: a run of 10 or
more digits (epoch seconds, milliseconds, nanoseconds: the vendor Node SDK's `N_<epoch ms>`), or
a run of 8 or more letters and digits that has both (nanoid, base-36 and similar random ids).
Ids that a client counts or names (`1`, `"init-1"`, `"p-2"`, `"call-w1"`) stay as they are, so a
transcript still reads as the session did. Numeric ids are never aliased (an alias is a string).
"""

from __future__ import annotations

import re

_CLOCK = re.compile(r"[0-9]{10,}")
_TOKEN = re.compile(r"[0-9A-Za-z]{8,}")
_LETTER = re.compile(r"[A-Za-z]")
_DIGIT = re.compile(r"[0-9]")

# For replay's value masks (replay/normalize.py): a whole JSON string made of a short prefix and
# an epoch in milliseconds (2001-09-09 to 2286), the SDK's request ids as they appear in payloads
EPOCH_ID_PATTERN = rb'(?<=")[0-9A-Za-z]{1,12}[_-][1-9][0-9]{12}(?=")'


def minted(value: object) -> bool:
    """Whether `value` (a JSON-RPC id) is a string id of a minted shape (module doc)."""
    if not isinstance(value, str) or not value or len(value) > 200:
        return False
    if _CLOCK.search(value):
        return True
    return any(_LETTER.search(t) and _DIGIT.search(t) for t in _TOKEN.findall(value))
