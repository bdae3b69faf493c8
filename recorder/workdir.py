"""The agent's work dir at session start: a manifest (relative paths, sizes, hashes) and, with
`wire-proxy --snapshot-workdir`, the files themselves, so that a replay can start from the same
state. Stored by the loader when a session's load begins."""

from __future__ import annotations

from typing import Any


def store_workdir(store: Any, meta: dict, redactor: Any) -> None:
    """Store the manifest (and the snapshot when meta["snapshot_workdir"]) of meta["cwd"]."""
    return None
