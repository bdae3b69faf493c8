"""What the commands accept as inputs: files, globs and folders, turned into a list of paths.

One expander for every command; each says what a folder holds for it (recordings for
wire-query, transcripts and kimi logs for wire-import).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable

from wire_recorder.recorder.errors import NoRecordings, NotARecording
from wire_recorder.recorder.handoff import exists_after_loaders

GLOB_CHARS = set("*?[")


def expand(specs: list[str], in_folder: Callable[[str], list[str]], empty_folder: str,
           keep: Callable[[str], bool] = lambda _path: True) -> list[str]:
    """Each spec to the paths it names, in order and without repeats: a glob to its matches
    (those `keep` accepts), a folder to `in_folder(folder)`, a file to itself. Every spec must
    name something: a glob or folder that gives nothing raises NoRecordings (`empty_folder` is
    the message for a folder, with `{}` for its name), a missing file NotARecording."""
    out: list[str] = []
    for spec in specs:
        spec = os.path.expanduser(spec)
        if GLOB_CHARS & set(spec):
            hits = sorted(glob.glob(spec, recursive=True))
            if not hits:
                raise NoRecordings(f"no files match {spec}")
            out.extend(h for h in hits if keep(h))
        elif os.path.isdir(spec):
            hits = in_folder(spec)
            if not hits:
                raise NoRecordings(empty_folder.format(spec))
            out.extend(hits)
        elif not exists_after_loaders(spec):  # (a loader may be creating it)
            raise NotARecording(f"{spec}: no such file")
        else:
            out.append(spec)
    seen: set[str] = set()
    unique = []
    for p in out:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def files_below(folder: str, pattern: str) -> list[str]:
    return sorted(glob.glob(os.path.join(folder, "**", pattern), recursive=True))
