"""What Kimi Code CLI 2.x (`node .../main.mjs acp`, TypeScript) does differently in ACP from
kimi-cli 1.x's `kimi acp`, where Python code needs it (the SQL side is in macros.sql):

- toolCallId is `<turn index>:<model call id>` (kimi-cli: `<turn uuid>/<call id>`);
- the first `tool_call` is titled with the tool's name ("Bash", "Read") and carries empty
  content: the arguments stream in as the text of untitled `tool_call_update`s, then whole as
  `rawInput` in the update that retitles the call ("Running: echo hi");
- after a Read it probes `AGENTS.md` files through fs/read_text_file: "not found" is expected.
"""

from __future__ import annotations

import re
from typing import Any

_PROBE = re.compile(r"(^|/)(AGENTS|agents)\.md$")
_TURN_PREFIX = re.compile(r"^(\d+):(.+)$")


def is_probe(method: str | None, params: Any) -> bool:
    """A read the agent makes only to see whether the file exists (its miss is no error)."""
    path = params.get("path") if isinstance(params, dict) else None
    return method == "fs/read_text_file" and isinstance(path, str) and bool(_PROBE.search(path))


def split_call_id(acp_id: str) -> tuple[str, str] | None:
    """(turn prefix, model call id) of a tool call id: `<uuid>/<id>` (kimi-cli) or
    `<turn index>:<id>` (Kimi Code); None when it has no prefix."""
    prefix, sep, call_id = acp_id.partition("/")
    if sep and call_id:
        return prefix, call_id
    m = _TURN_PREFIX.match(acp_id)
    return (m.group(1), m.group(2)) if m else None
