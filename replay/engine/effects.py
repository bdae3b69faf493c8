"""What the recorded client did besides answering a request (ACP: write the file it was asked
to), repeated by the runner for the engine's ClientEffects, never outside the work dir."""

from __future__ import annotations

import os
from collections import Counter

from ..recording import Msg


def apply_effects(adapter, live: Msg, cwd: str | None) -> Counter[str]:
    """Do the effects of live request `live` inside `cwd`; what was done, counted for stats."""
    done: Counter[str] = Counter()
    params = live.obj.get("params") if isinstance(live.obj, dict) else None
    root = os.path.realpath(cwd or os.getcwd())
    for what, path, content in adapter.client_effects(live.method, params):
        target = os.path.realpath(path if os.path.isabs(path) else os.path.join(root, path))
        if what != "write_file" or os.path.commonpath([root, target]) != root:
            done["effects_skipped"] += 1
            continue
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as f:
                f.write(content)
            done["files_written"] += 1
        except OSError:
            done["effects_failed"] += 1
    return done
