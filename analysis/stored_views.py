"""The analysis views stored in each recording when its loader closes a session, so that a
plain DuckDB (>= 1.4, no wire-recorder) opening the file read-only answers `select * from
token_usage` or `tool_calls`. The `wire_recorder.after_load` hook (recorder/after_load.py): the
recorder imports nothing from analysis, it calls what this package declares.

The set is versioned (`meta.analysis_views` = views.VIEWS_VERSION): a file that has the current
set is left alone (one check per session), one of another version gets it replaced. Readers of
this package never use the stored ones: they install their own in TEMP over read-only files
(analysis/sources.py), so a file written by an older wire-recorder reads the same."""

from __future__ import annotations

from typing import Any

from .views import store_views


def after_load(store: Any, session_id: str) -> None:
    """The loader has stored all of this session: make sure the file holds the current views."""
    store_views(store.con)
