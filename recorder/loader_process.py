"""The loader process's entry point (`python -m wire_recorder.recorder.loader_process SPOOL`,
started by the proxy).

Its first act is the parent-watch thread (recorder/cpu_share.py): the proxy lowers the loader's
CPU share while its relay is busy only once that thread is there, and the loader's imports
(DuckDB: about a third of a second of CPU) come after it, so they no longer compete at full
weight with a relay that is busy from its first frame (docs/design.md, "Relay hot path").
"""

import os
import sys

from .cpu_share import watch_parent

if __name__ == "__main__":
    watch_parent(os.getppid())
    try:
        from .loader import main
    except BaseException as e:  # noqa: BLE001 - a broken install: said, never silent
        from .edge import PROXY, say

        spool = sys.argv[1] if len(sys.argv) > 1 else "(no spool given)"
        say(PROXY, f"recording failed (the recorder cannot start: {type(e).__name__}: {e}); the "
                   f"session stays in {spool}: run `{PROXY} recover {spool}` later")
        sys.exit(2)

    sys.exit(main(sys.argv[1:]))
