"""Text from a recording made safe to show: on a terminal, in a pytest report, in HTML, in wire-ui.

A recording is untrusted input. Its control characters would reach a terminal as they are: an
ESC starts a cursor move, a colour, a screen clear or an OSC-8 hyperlink; a C1 CSI (U+009B) does
the same on terminals that honour 8-bit controls; BEL rings. Bidirectional controls (U+202E
RIGHT-TO-LEFT OVERRIDE and its kin) make text read differently from what it holds (a file name
`txt.exe` shown as `exe.txt`). Every output that shows recorded text goes through `visible`:

* C0 controls and DEL become their Unicode control pictures (ESC as ␛, BEL as ␇);
* C1 controls and the bidi controls become U+FFFD (there are no pictures for them).

Nothing else changes, so ordinary text (any script, emoji) is shown as it is.
"""

from __future__ import annotations

import re

REPLACEMENT = 0xFFFD

# the bidi embedding/override/isolate controls and the invisible direction marks
BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)

_TABLE: dict[int, int] = (
    {c: 0x2400 + c for c in range(0x20)} | {0x7F: 0x2421}
    | dict.fromkeys(range(0x80, 0xA0), REPLACEMENT) | dict.fromkeys(BIDI, REPLACEMENT)
)
# multi-line text (a report, a pytest failure): line breaks kept, every other control shown
_TABLE_LINES = {k: v for k, v in _TABLE.items() if k != 0x0A}

# every character `visible` replaces: what a test looks for in output that must have none
UNSAFE = frozenset(chr(c) for c in _TABLE)


def visible(text: object, lines: bool = False) -> str:
    """`text` (str() of anything else) with every control and bidi character made visible, so
    that a recording cannot drive the terminal or reorder what is shown. `lines`: keep line
    breaks (text of several lines, each made safe)."""
    s = text if isinstance(text, str) else str(text)
    return s.translate(_TABLE_LINES if lines else _TABLE)


# the UTF-8 forms of DEL, the C1 controls and the bidi controls (C0 controls never appear raw in
# JSON text: encoders write them as \u escapes already)
_JSON_UNSAFE = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]"
                          rb"|\xe2\x81[\xa6-\xa9]")


def _u_escape(m: re.Match) -> bytes:
    return b"\\u%04x" % ord(m.group().decode("utf-8"))


def json_visible(data: bytes) -> bytes:
    """JSON text (UTF-8) with the characters `visible` replaces written as \\u escapes instead:
    the same JSON values, nothing raw on a terminal. (Outside strings JSON holds only ASCII, so
    every match is inside a string, where any character may be escaped.)"""
    return _JSON_UNSAFE.sub(_u_escape, data)
