"""The work dir a replay runs the agent in, from what the recording says about the recorded one
(recorder/workdir.py).

One rule (docs/replay.md, "Work dir"): the agent runs in the dir given (`--cwd`); without one,
in a fresh temporary copy of the recorded snapshot when there is one (made here, removed by
`WorkdirPlan.cleanup()`), else in the current dir. That live dir stands for the recorded work dir
(`recorded_workdir`: the cwd of an ACP client's `session/new`, else the recorded cwd) in what is
sent to the agent and in the pinned model's paths; the recorded dir need not exist here.

- A dir that is not a fresh copy is compared with the recorded manifest first; `differences`
  names what is missing, extra or changed, for the report of a replay that diverges.
- A recording with neither manifest nor snapshot (before schema 5, or imported without one):
  nothing to compare.

The manifest comes from a recording, which may come from anyone: a path is written only when it
is relative and stays inside the copy (`safe_relpath`: no absolute path, no `..`), files are
created with O_EXCL|O_NOFOLLOW in folders made here, symlinks last (so no file is written
through one) and only when they resolve inside the copy; modes keep the owner's and the exec
bits, never set-id bits. Nothing from the recording is run.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from wire_recorder.recorder.errors import UserError
from wire_recorder.recorder.workdir import (
    FILES_KEY,
    Entry,
    Manifest,
    read_stored,
    safe_relpath,
    session_manifest,
    take_manifest,
)

if TYPE_CHECKING:
    from .recording import Recording

MAX_DIFFERENCES = 50


@dataclass
class WorkdirPlan:
    cwd: str | None  # where the agent runs: a fresh temp copy of the snapshot, or the given cwd
    snapshot: bool  # True when cwd is a temp copy made from the recording
    differences: list[str]  # manifest vs the given dir (no snapshot); empty when same/no manifest
    notes: list[str]
    _tmp: str | None = field(default=None, repr=False)

    def cleanup(self) -> None:
        """Remove the temporary copy (nothing to do for a dir that was given)."""
        tmp, self._tmp = self._tmp, None
        if tmp is None:
            return
        # the agent may have left folders without write permission
        for d, dirs, _ in os.walk(tmp):
            for name in dirs:
                p = os.path.join(d, name)
                try:
                    if not os.path.islink(p):
                        os.chmod(p, 0o700)
                except OSError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)


def load_manifest(rec: Recording) -> Manifest | None:
    """The recorded work dir's manifest: from the transcript's header (read with the
    recording) or the .db (opened read-only); None when the recording has none."""
    session = rec.session
    if rec.manifest_read:
        return rec.manifest
    if FILES_KEY in session or str(rec.path).endswith(".jsonl"):
        return session_manifest(session)
    from wire_recorder.recorder.store import open_store

    try:
        with open_store(rec.path, read_only=True) as store:
            return read_stored(store, session)
    except UserError:
        return None


def recorded_workdir(rec: Recording) -> str | None:
    """The work dir the recorded agent worked in, which the live one stands for: the one the
    client's first request that names one names (an ACP client's `session/new`, by its
    protocol adapter), else the recorded cwd."""
    for m in rec.msgs:
        if m.direction == "c2a" and m.kind == "request" and m.method:
            params = m.obj.get("params") if isinstance(m.obj, dict) else None
            cwd = m.adapter.session_workdir(m.method, params)
            if cwd is None:
                continue
            if os.path.isabs(cwd):
                return cwd
            break
    return rec.cwd


def prepare_workdir(rec: Recording, cwd: str | None, *,
                    copy_snapshot: bool | None = None) -> WorkdirPlan:
    """Where to run the agent for this recording, and what the report should know about it.
    `cwd` is the dir asked for (None: the current dir); a recorded snapshot is copied only when
    none was asked for (`copy_snapshot` says so where `cwd` is a default, like the recorded cwd
    of --recorded-command)."""
    if copy_snapshot is None:
        copy_snapshot = cwd is None
    m = load_manifest(rec)
    if m is None or m.source is None:  # none, or one that could not be taken
        notes = [f"the recorded work dir's manifest: {n}" for n in (m.notes if m else [])]
        return WorkdirPlan(cwd, False, [], notes)
    notes = []
    if m.snapshot and copy_snapshot:
        tmp = os.path.realpath(tempfile.mkdtemp(prefix="wire-replay-work-"))
        plan = WorkdirPlan(tmp, True, [], [], _tmp=tmp)
        try:
            plan.notes = materialize(m, tmp)
        except BaseException:
            plan.cleanup()
            raise
        kept = sum(len(files) for _, _, files in os.walk(tmp))
        plan.notes.insert(0, f"the agent runs in a fresh copy of the recorded work dir ({kept} "
                             f"files from its snapshot); --cwd DIR runs it in DIR instead")
        return plan
    target = cwd or os.getcwd()
    if m.snapshot:
        notes.append(f"the agent runs in {_printable(target)}, not in a fresh copy of the "
                     f"recorded work dir's snapshot (that is where it runs without --cwd)")
    if m.cut:
        notes.append("the recorded manifest was cut short (too many files): files it does not "
                     "list are not reported as extra")
    return WorkdirPlan(cwd, False, compare(m, target), notes)


# -- the copy -------------------------------------------------------------------------------------
def _mode(mode: int | None) -> int:
    return ((mode & 0o755) if isinstance(mode, int) else 0o644) | 0o600


def _parents(root: str, rel: str) -> bool:
    """Make the folders of rel under root; False when one of them is not a plain folder."""
    parts = rel.split("/")[:-1]
    d = root
    for p in parts:
        d = os.path.join(d, p)
        try:
            os.mkdir(d, 0o755)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(d).st_mode):
                return False
    return True


def _inside(root: str, path: str) -> bool:
    real = os.path.realpath(path)
    return real == root or real.startswith(root + os.sep)


def _show(p: list[str], limit: int = 8) -> str:
    return ", ".join(p[:limit]) + (f" and {len(p) - limit} more" if len(p) > limit else "")


def materialize(m: Manifest, root: str) -> list[str]:
    """Write the snapshot's files under root (a new, empty folder); returns notes on what was
    left out."""
    root = os.path.realpath(root)
    unsafe: list[str] = []
    absent: list[str] = []
    conflict: list[str] = []
    seen: set[str] = set()
    files = [e for e in m.entries if e.kind == "file"]
    links = [e for e in m.entries if e.kind == "symlink"]
    for e in files:
        if not safe_relpath(e.path) or e.path in seen:
            unsafe.append(repr(e.path)[:80])
            continue
        seen.add(e.path)
        if e.content is None:
            absent.append(e.path)
            continue
        if not _parents(root, e.path):
            conflict.append(e.path)
            continue
        try:
            fd = os.open(os.path.join(root, e.path),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600)
        except OSError:
            conflict.append(e.path)
            continue
        try:
            view = memoryview(e.content)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, _mode(e.mode))
        finally:
            os.close(fd)
    made: list[Entry] = []
    for e in links:
        target = e.link
        if not safe_relpath(e.path) or e.path in seen or not isinstance(target, str) or \
                not target or "\0" in target or os.path.isabs(target) or \
                os.path.normpath(os.path.join(os.path.dirname(e.path), target)).startswith(".."):
            unsafe.append(repr(e.path)[:80])
            continue
        seen.add(e.path)
        if not _parents(root, e.path):
            conflict.append(e.path)
            continue
        try:
            os.symlink(target, os.path.join(root, e.path))
        except OSError:
            conflict.append(e.path)
            continue
        made.append(e)
    # one link can lead another out (`d -> .` makes `x -> d/../y` leave the copy): every link
    # made must still resolve inside once all are there
    changed = True
    while changed:
        changed = False
        for e in list(made):
            full = os.path.join(root, e.path)
            if not _inside(root, full):
                os.unlink(full)
                made.remove(e)
                unsafe.append(repr(e.path)[:80])
                changed = True
    notes = []
    if unsafe:
        notes.append(f"{len(unsafe)} paths of the recorded work dir were not written (outside "
                     f"the work dir, or repeated): {_show(unsafe)}")
    if absent:
        notes.append(f"{len(absent)} files of the recorded work dir are not in its snapshot "
                     f"(too big, unreadable or over its bounds): {_show(absent)}")
    if conflict:
        notes.append(f"{len(conflict)} files of the recorded work dir could not be written "
                     f"(a file or folder is in the way): {_show(conflict)}")
    if m.cut:
        notes.append("the recorded manifest was cut short: the copy may lack files")
    return notes


# -- the comparison -------------------------------------------------------------------------------
def _printable(p: str) -> str:
    return p if p.isprintable() else repr(p)


def compare(m: Manifest, target: str) -> list[str]:
    """What differs between the recorded manifest and the dir `target` now."""
    if not os.path.isdir(target):
        return [f"the work dir {_printable(target)} does not exist"]
    live = take_manifest(target, None, False,
                         listed=m.source if m.source in ("git", "walk") else None)
    now = live.by_path()
    out: list[str] = []
    for e in sorted(m.entries, key=lambda e: e.path):
        if not safe_relpath(e.path):
            continue
        p = _printable(e.path)
        cur = now.get(e.path)
        if cur is None:
            out.append(f"missing {p}")
        elif cur.kind != e.kind:
            out.append(f"changed {p} ({e.kind} -> {cur.kind})")
        elif e.kind == "symlink":
            if e.link is not None and cur.link != e.link:
                out.append(f"changed {p} (target {_printable(e.link)} -> "
                           f"{_printable(cur.link or '')})")
        elif e.size is not None and cur.size != e.size:
            out.append(f"changed {p} (size {e.size} -> {cur.size})")
        elif e.sha256 and cur.sha256 and cur.sha256 != e.sha256:
            out.append(f"changed {p} (content)")
        elif isinstance(e.mode, int) and isinstance(cur.mode, int) and \
                (e.mode & 0o111 != 0) != (cur.mode & 0o111 != 0):
            out.append(f"changed {p} (mode {e.mode & 0o777:o} -> {cur.mode & 0o777:o})")
    if not m.cut and not live.cut:
        recorded = {e.path for e in m.entries}
        out += [f"extra {_printable(p)}" for p in sorted(now) if p not in recorded]
    if len(out) > MAX_DIFFERENCES:
        out = out[:MAX_DIFFERENCES] + [f"... and {len(out) - MAX_DIFFERENCES} more differences"]
    return out
