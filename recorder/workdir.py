"""The agent's work dir at session start: a manifest (relative paths, sizes, hashes, modes) and,
with `wire-proxy --snapshot-workdir`, the files themselves, so that a replay can start from the
same state (replay/workdir.py) or say how the dir it runs in differs.

Taken in a thread of the loader process from when a session's load begins (`Taking`: the
relay never waits for it, nor does the loader's storing of frames), stored once taken or when the
session ends, in `sessions.workdir`, `sessions.workdir_manifest` and one `workdir_files` row per
file (docs/design.md, "Store").

Which dir: the agent command's `-w DIR` / `--work-dir DIR` when the agent is kimi (its flag for
the work dir; resolved against the proxy's cwd), else the proxy's cwd, which the agent inherits.

Which files: in a git work tree, what `git ls-files -co --exclude-standard` lists (tracked and
untracked, not ignored); elsewhere a walk that leaves out `.git` and the folders in `SKIP_DIRS`.
Both leave out what recording and running the session make there, so that recording an
unchanged session twice in the same folder gives the same manifest (`Own`): the recording's own
files (DuckDB files and every file named after one, `X.wal`, `X.blobs`, `X.<id>.spool`; spools;
transcripts, found by their first bytes), the folders of HOME, the XDG and wire-recorder data
folders and the running Python when they are inside, venvs (a `pyvenv.cfg`) and caches (a
`CACHEDIR.TAG`). Symlinks are listed with their target as written (never followed, never
resolved); an absolute target inside the work dir is written relative to the link's folder, so
the manifest does not name the folder it was taken in. Other special files are left out.

Bounds (`Limits`, each reached one is a note and `cut` in the summary): at most 10,000 names
listed, 128 MiB hashed, 5 s spent, and 64 KiB of manifest text (paths, hashes, link targets: a
DuckDB file of a 2-frame session from a folder of 10k files stays under 256 KB, docs/design.md);
files are taken shallowest first, so a cut manifest keeps the top of the tree. The snapshot keeps
files up to 1 MiB each, 32 MiB in all.
Contents go through the recording's redaction: a file in which a rule found a secret is stored
with placeholders, and its sha256 is left out (`note` "redacted"): a hash of a short file with a
secret would let anyone test guesses of the secret. Files over 1 MiB are hashed without a scan.

A load that begins long after the session started (`wire-proxy recover` of a killed proxy and
loader) would see the work dir as the agent left it, not as it found it: no manifest is taken
then, and the summary says why.

Everything read back from a recording (a `.db` or a transcript header) is untrusted: paths are
checked by `safe_relpath` before anything is written (replay/workdir.py).
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".cache"})
# a folder holding one of these is a venv or a cache (https://bford.info/cachedir/), whatever
# its name: left out in both listings
MARKER_FILES = frozenset({"pyvenv.cfg", "CACHEDIR.TAG"})
# the first bytes of the files the recorder writes: a DuckDB file (bytes 8..12), a spool, a
# transcript (a cassette)
_DUCKDB_MAGIC = b"DUCK"
_OWN_PREFIXES = (b"WIRESPOOL", b'{"wire_transcript":')
_TEMP_PREFIXES = (".wire-replay-",)  # wire-replay --update's file before it is renamed
# folders of the environment that hold what the agent and the recorder make, left out when they
# are inside the work dir (a HOME made in the run's folder)
_ENV_DIRS = ("HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME",
             "WIRE_RECORDER_HOME", "VIRTUAL_ENV", "KIMI_SHARE_DIR")
WORKDIR_FLAGS = ("-w", "--work-dir")
RECOVERED_AFTER_S = 120.0  # a load that begins later than this sees a dir the agent has used
_MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    max_files: int = 10_000
    max_hash_bytes: int = 128 * _MiB
    max_seconds: float = 5.0
    max_text: int = 64 * 1024  # paths, hashes and link targets, as the store keeps them
    file_max: int = 1 * _MiB  # read, scanned for secrets and snapshotted up to this size
    snapshot_max_bytes: int = 32 * _MiB


@dataclass
class Entry:
    path: str  # relative, "/"-separated
    kind: str = "file"  # file | symlink
    size: int | None = None
    sha256: str | None = None
    mode: int | None = None
    link: str | None = None
    content: bytes | None = None
    note: str | None = None

    def row(self, session_id: str) -> tuple:
        return (session_id, self.path, self.kind, self.size, self.sha256, self.mode, self.link,
                self.content, self.note)


@dataclass
class Manifest:
    workdir: str | None
    entries: list[Entry] = field(default_factory=list)
    source: str | None = None  # git | walk
    snapshot: bool = False  # taken with --snapshot-workdir
    cut: bool = False  # a bound was reached: not every file is listed or hashed
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        snap = [e for e in self.entries if e.content is not None]
        out: dict[str, Any] = {
            "source": self.source, "files": len(self.entries),
            "bytes": sum(e.size or 0 for e in self.entries if e.kind == "file"),
            "snapshot": self.snapshot}
        if self.snapshot:
            out["snapshot_files"] = len(snap)
            out["snapshot_bytes"] = sum(len(e.content or b"") for e in snap)
        out["cut"] = self.cut
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def by_path(self) -> dict[str, Entry]:
        return {e.path: e for e in self.entries}


# -- which dir, which files -----------------------------------------------------------------------
def agent_workdir(command: list[str] | None, cwd: str | None) -> str | None:
    """The dir the agent works in: kimi's `-w`/`--work-dir` argument, else `cwd`."""
    argv = [str(a) for a in command or []]
    if argv and os.path.basename(argv[0]).startswith("kimi"):
        for i, a in enumerate(argv[1:], 1):
            d = None
            if a in WORKDIR_FLAGS and i + 1 < len(argv):
                d = argv[i + 1]
            elif a.startswith("--work-dir="):
                d = a.partition("=")[2]
            if d:
                return os.path.normpath(os.path.join(cwd or os.getcwd(), os.path.expanduser(d)))
            if a == "--":
                break
    return cwd


def _git_env() -> dict[str, str]:
    # GIT_DIR and friends from the proxy's environment would list another repository
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def _git_paths(root: str, timeout: float) -> tuple[list[str] | None, str | None]:
    """Paths git lists under root (None: not a git work tree, or git failed, with why)."""
    try:
        res = subprocess.run(
            # fsmonitor would run a command named in the repository's config
            ["git", "-c", "core.fsmonitor=false", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=root, capture_output=True, timeout=timeout, env=_git_env(),
            stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        return None, None if isinstance(e, FileNotFoundError) else f"git ls-files failed: {e}"
    if res.returncode != 0:
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        if err and "not a git repository" in err[0]:
            return None, None
        why = err[0][:200] if err else f"exit {res.returncode}"
        return None, f"git ls-files failed ({why})"
    return sorted({os.fsdecode(p) for p in res.stdout.split(b"\0") if p}), None


@dataclass
class Own:
    """What the recording and the run make in the work dir, left out of its manifest: files by
    absolute path (the DB, its spool) and folders (HOME, caches) given by the loader; the rest
    is found in the listing (`_marked_dirs`, `_is_own`)."""
    files: frozenset[str] = frozenset()
    dirs: frozenset[str] = frozenset()

    @classmethod
    def of_session(cls, meta: dict, env: Mapping[str, str] | None = None) -> Own:
        """From a spool's meta and the environment the agent inherited (the loader's)."""
        if env is None:
            env = os.environ
        files = set()
        for k in ("db", "spool"):
            if isinstance(meta.get(k), str):
                files.add(os.path.abspath(meta[k]))
        dirs = {env[k] for k in _ENV_DIRS if env.get(k)}
        dirs.add(sys.prefix)
        return cls(frozenset(files), frozenset(os.path.abspath(d) for d in dirs))

    def relative(self, root: str) -> tuple[set[str], list[str]]:
        """(files, folders) of this under root, as paths relative to it (both spellings of
        root: as given and resolved)."""
        bases = {os.path.abspath(root), os.path.realpath(root)}

        def inside(paths: frozenset[str]) -> set[str]:
            return {cand[len(b) + 1:] for p in paths for cand in (p, os.path.realpath(p))
                    for b in bases if cand.startswith(b + "/")}
        return inside(self.files), sorted(inside(self.dirs))


def _under(rel: str, dirs: Sequence[str] | set[str]) -> bool:
    return any(rel == d or rel.startswith(d + "/") for d in dirs)


def _walk_paths(root: str, limits: Limits, deadline: float,
                skip: Sequence[str] = ()) -> tuple[list[str], bool]:
    """Files under root, breadth first; True when a bound cut the walk short. Stays on root's
    file system (a work dir of `/` would otherwise read /proc and /sys); leaves out the folders
    in `skip` (relative) and those holding a MARKER_FILES file."""
    out: list[str] = []
    queue = [""]
    dev = os.stat(root).st_dev
    i = 0
    while i < len(queue):
        if time.monotonic() > deadline:
            return out, True
        rel = queue[i]
        i += 1
        try:
            with os.scandir(os.path.join(root, rel) if rel else root) as it:
                items = sorted(it, key=lambda d: d.name)
        except OSError:
            continue
        if rel and any(d.name in MARKER_FILES for d in items):
            continue  # a venv or a cache
        for d in items:
            p = f"{rel}/{d.name}" if rel else d.name
            try:
                is_dir = d.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                try:
                    same_fs = d.stat(follow_symlinks=False).st_dev == dev
                except OSError:
                    continue
                if d.name not in SKIP_DIRS and same_fs and not _under(p, skip):
                    queue.append(p)
                continue
            out.append(p)
            if len(out) > limits.max_files or time.monotonic() > deadline:
                return out, True
    return out, False


def _marked_dirs(paths: list[str]) -> set[str]:
    """Folders of a listing that hold a MARKER_FILES file (venvs, caches)."""
    out = set()
    for p in paths:
        folder, _, name = p.rpartition("/")
        if name in MARKER_FILES and folder:
            out.add(folder)
    return out


def _shallow_first(p: str) -> tuple[int, str]:
    return p.count("/"), p


def _is_own(head: bytes) -> bool:
    """The first bytes of a file the recorder writes (a DuckDB file, a spool, a transcript)."""
    return head[8:12] == _DUCKDB_MAGIC or head.startswith(_OWN_PREFIXES)


def _head(path: str, st: os.stat_result) -> bytes:
    try:
        return _read_regular(path, st, 32) or b""
    except OSError:
        return b""


def _link_text(root: str, rel: str, target: str) -> str:
    """A symlink's target as the manifest keeps it: as written, except an absolute one inside
    root, which is made relative to the link's folder (the same link in any copy of the dir)."""
    if not os.path.isabs(target):
        return target
    norm = os.path.normpath(target)
    here = os.path.dirname(rel)
    for base in dict.fromkeys((os.path.abspath(root), os.path.realpath(root))):
        if norm == base or norm.startswith(base + "/"):
            inside = norm[len(base) + 1:] if norm != base else ""
            return os.path.relpath(os.path.join("/r", inside), os.path.join("/r", here))
    return target


def _read_regular(path: str, st: os.stat_result, limit: int | None) -> bytes | None:
    """The bytes of a regular file, read without following a symlink swapped in since lstat
    and without blocking on a FIFO; None when it is no longer that file."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
            return None
        chunks = []
        left = now.st_size if limit is None else min(now.st_size, limit)
        while left > 0:
            b = os.read(fd, min(left, _MiB))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _hash_file(path: str, st: os.stat_result) -> str | None:
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
            return None
        while b := os.read(fd, _MiB):
            h.update(b)
    finally:
        os.close(fd)
    return h.hexdigest()


def _utf8(p: str) -> bool:
    try:
        p.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _named_after(rel: str, own: set[str]) -> bool:
    """`X.wal`, `X.blobs`, `X.<id>.spool`, ... beside an own file X."""
    folder, _, name = rel.rpartition("/")
    at = name.find(".")
    while at > 0:
        stem = name[:at]
        if (f"{folder}/{stem}" if folder else stem) in own:
            return True
        at = name.find(".", at + 1)
    return False


def take_manifest(root: str, redactor: Any = None, snapshot: bool = False,
                  limits: Limits = Limits(), listed: str | None = None,
                  own: Own = Own()) -> Manifest:
    """The manifest of root now (and its files when `snapshot`), redacted by `redactor` (a
    recorder.redact.Redactor, or None). `listed`: "git" or "walk" to force how files are found;
    `own`: what the recording made, left out with what is found to be its own."""
    started = time.monotonic()
    deadline = started + limits.max_seconds
    redact_text: Callable[[str], str] = getattr(redactor, "redact_text", lambda s: s)
    m = Manifest(redact_text(root), snapshot=snapshot)
    if not os.path.isdir(root):
        m.notes.append("the work dir does not exist or is not a folder")
        return m
    own_files, skip = own.relative(root)
    paths: list[str] | None = None
    if listed != "walk":
        paths, why = _git_paths(root, limits.max_seconds)
        if why:
            m.notes.append(f"{why}; listed by a walk instead")
    if paths is not None:
        m.source = "git"
        if len(paths) > limits.max_files:
            m.cut = True
        skip += sorted(_marked_dirs(paths))
        paths = [p for p in paths if not _under(p, skip)]
    else:
        m.source = "walk"
        paths, m.cut = _walk_paths(root, limits, deadline, skip)
    paths.sort(key=_shallow_first)
    if m.cut:
        m.notes.append(f"more than {limits.max_files} files (or more than "
                       f"{limits.max_seconds:g} s to list them): the manifest lists the first")
    hashed = snap_bytes = text = 0
    skipped = {"special": 0, "name": 0}
    unhashed = unsnapped = 0
    for rel in paths:
        if len(m.entries) >= limits.max_files:
            m.cut = True
            break
        if time.monotonic() > deadline:
            m.cut = True
            m.notes.append(f"stopped after {limits.max_seconds:g} s: "
                           f"{len(paths) - len(m.entries)} files not listed")
            break
        if not _utf8(rel) or not safe_relpath(rel):
            skipped["name"] += 1
            continue
        if rel in own_files or _named_after(rel, own_files) or \
                rel.rpartition("/")[2].startswith(_TEMP_PREFIXES):
            own_files.add(rel)
            continue
        # what the row will hold (a hash, a size, a mode): the bound on what is stored
        cost = len(rel.encode()) + 80
        if text + cost > limits.max_text:
            m.cut = True
            m.notes.append(f"more than {limits.max_text // 1024} KiB of manifest: the "
                           f"{len(m.entries)} files nearest the top are listed")
            break
        full = os.path.join(root, rel)
        try:
            st = os.lstat(full)
        except OSError:
            continue  # tracked by git but deleted, or gone since the listing
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(full)
            except OSError:
                continue
            link = redact_text(_link_text(root, rel, target))
            m.entries.append(Entry(rel, "symlink", len(os.fsencode(target)), link=link))
            text += len(rel.encode()) + len(link.encode()) + 16
            continue
        if not stat.S_ISREG(st.st_mode):
            skipped["special"] += int(not stat.S_ISDIR(st.st_mode))  # a dir: a git submodule
            continue
        unreadable: OSError | None = None
        over_budget = hashed + st.st_size > limits.max_hash_bytes
        whole = st.st_size <= limits.file_max and not over_budget  # else only its first bytes
        try:
            data = _read_regular(full, st, None) if whole else None
        except OSError as err:
            data, unreadable = None, err
        if _is_own(data[:32] if data is not None else _head(full, st)):
            own_files.add(rel)
            continue
        text += cost
        e = Entry(rel, "file", st.st_size, mode=stat.S_IMODE(st.st_mode))
        m.entries.append(e)
        if over_budget:
            e.note = f"not hashed: over the {limits.max_hash_bytes // _MiB} MiB hashing budget"
            unhashed += 1
            m.cut = True
            continue
        if unreadable is not None:
            e.note = f"unreadable: {unreadable.strerror}"
            continue
        try:
            if data is None and whole:
                e.note = "changed while read"
                continue
            e.sha256 = hashlib.sha256(data).hexdigest() if data is not None else \
                _hash_file(full, st)
        except OSError as err:
            e.note = f"unreadable: {err.strerror}"
            continue
        hashed += st.st_size
        if data is not None and redactor is not None and getattr(redactor, "enabled", False):
            red = redactor.redact_bytes(data)
            if red != data:
                e.sha256, e.note, data = None, "redacted", red
        if not snapshot:
            continue
        if data is None:
            e.note = f"not in the snapshot: over {limits.file_max // 1024} KiB"
            unsnapped += 1
        elif snap_bytes + len(data) > limits.snapshot_max_bytes:
            e.note = (e.note + "; " if e.note else "") + \
                f"not in the snapshot: over its {limits.snapshot_max_bytes // _MiB} MiB"
            unsnapped += 1
            m.cut = True
        else:
            e.content = data
            snap_bytes += len(data)
    if skipped["name"]:
        m.notes.append(f"{skipped['name']} files whose names are not UTF-8 left out")
    if skipped["special"]:
        m.notes.append(f"{skipped['special']} special files (FIFOs, sockets, devices) left out")
    if unhashed:
        m.notes.append(f"{unhashed} files not hashed (over the "
                       f"{limits.max_hash_bytes // _MiB} MiB hashing budget)")
    if unsnapped:
        m.notes.append(f"{unsnapped} files not in the snapshot (over {limits.file_max // 1024} "
                       f"KiB each or {limits.snapshot_max_bytes // _MiB} MiB in all)")
    m.entries.sort(key=lambda e: e.path)
    return m


def redact_entries(entries: list[Entry], redactor: Any) -> int:
    """Redact stored contents and link targets again (`wire-redact` with new rules), in place;
    returns how many entries changed. A file whose bytes change loses its hash."""
    changed = 0
    for e in entries:
        before = (e.content, e.link)
        if e.content is not None:
            red = redactor.redact_bytes(e.content)
            if red != e.content:
                e.content, e.sha256 = red, None
                e.note = "redacted" if not e.note or e.note == "redacted" else \
                    e.note + "; redacted"
        if e.link is not None:
            e.link = redactor.redact_text(e.link)
        changed += (e.content, e.link) != before
    return changed


# -- storing and reading back ---------------------------------------------------------------------
def save_manifest(store: Any, session_id: str, m: Manifest) -> None:
    """Write a manifest into a writable recorder.store.Store (session row and files)."""
    store.upsert_session({"session_id": session_id, "workdir": m.workdir,
                          "workdir_manifest": orjson.dumps(m.summary()).decode()})
    store.insert_workdir_files([e.row(session_id) for e in m.entries])


def manifest_for(meta: dict, redactor: Any, own: Own | None = None,
                 limits: Limits = Limits()) -> Manifest | None:
    """The manifest of a session's work dir (from its spool's meta), or None when it has no
    session id or dir; one saying why none was taken when the load began late (recovered)."""
    root = agent_workdir(meta.get("command"), meta.get("cwd"))
    if not meta.get("session_id") or not root:
        return None
    started = meta.get("started_wall_ns")
    late = (time.time_ns() - started) / 1e9 if isinstance(started, int) else 0.0
    if late > RECOVERED_AFTER_S:
        m = Manifest(getattr(redactor, "redact_text", lambda s: s)(root),
                     snapshot=bool(meta.get("snapshot_workdir")))
        m.notes.append(f"not taken: the recording was loaded {late:.0f} s after the session "
                       "started (recovered), when the work dir no longer showed its start")
        return m
    return take_manifest(root, redactor, bool(meta.get("snapshot_workdir")), limits,
                         own=own if own is not None else Own.of_session(meta))


def _not_stored(sid: Any, why: Any) -> None:
    sys.stderr.write(f"wire-proxy: session {sid}: work dir manifest not stored: {why}\n")


def store_workdir(store: Any, meta: dict, redactor: Any) -> None:
    """Take and store the manifest (and the snapshot when meta["snapshot_workdir"]) of the
    agent's work dir now. Never raises: a manifest that cannot be taken or stored costs the
    session nothing."""
    sid = meta.get("session_id")
    try:
        m = manifest_for(meta, redactor)
        if m is not None:
            save_manifest(store, str(sid), m)
    except Exception as e:  # noqa: BLE001 - the session's frames matter more
        _not_stored(sid, e)


class Taking:
    """The manifest of a session's work dir, taken in a thread of the loader from when its load
    begins, so that the frames are stored meanwhile (a folder of ~11k files took 36% of a
    2-frame session's load in line). `save(write)` stores it: at once when it is taken
    (`ready`), else waits for it within its time bound. Never raises."""

    def __init__(self, meta: dict, redactor: Any, spool: str | None = None,
                 limits: Limits = Limits()):
        self.sid = str(meta.get("session_id"))
        self.limits = limits
        self.manifest: Manifest | None = None
        self.error: BaseException | None = None
        self.done = False  # stored, or given up on
        own = Own.of_session(dict(meta, spool=spool))
        self._thread = threading.Thread(target=self._take, args=(meta, redactor, own),
                                        name="wire-workdir", daemon=True)
        self._thread.start()

    def _take(self, meta: dict, redactor: Any, own: Own) -> None:
        try:  # behind the loader's own work when both want a core
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + 5))
        except (AttributeError, OSError):
            pass
        try:
            self.manifest = manifest_for(meta, redactor, own, self.limits)
        except Exception as e:  # noqa: BLE001 - reported where it is stored
            self.error = e

    def ready(self) -> bool:
        return not self.done and not self._thread.is_alive()

    def save(self, write: Callable[[Callable[[Any], None]], bool], wait: bool = True) -> None:
        """Store it through `write(fn)` (the loader's DB handle: False when the DB is not to
        be had now, then again at the next call); `wait`: for the thread, within its bound."""
        if self.done:
            return
        if wait:
            self._thread.join(self.limits.max_seconds + 5.0)
        if self._thread.is_alive():
            if wait:
                self.done = True
                _not_stored(self.sid, f"still being taken after {self.limits.max_seconds:g} s")
            return
        if self.error is not None or self.manifest is None:
            self.done = True
            if self.error is not None:
                _not_stored(self.sid, self.error)
            return
        m = self.manifest
        # at the end, a reader holding the DB a moment is waited out (within a bound)
        give_up = time.monotonic() + (2 * self.limits.max_seconds if wait else 0.0)
        try:
            while not write(lambda store: save_manifest(store, self.sid, m)):
                if time.monotonic() >= give_up:
                    if wait:
                        self.done = True
                        _not_stored(self.sid, "the DB stayed in use or full")
                    return
                time.sleep(0.1)
            self.done = True
        except Exception as e:  # noqa: BLE001 - the session's frames matter more
            self.done = True
            _not_stored(self.sid, e)


def _summary(value: Any) -> dict | None:
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value if isinstance(value, dict) else None


def manifest_of(session: dict, rows: list[tuple] | None) -> Manifest | None:
    """A manifest from a session row (its workdir columns) and its `workdir_files` rows; None
    when the session has none (recorded before schema 5, or imported without one)."""
    summary = _summary(session.get("workdir_manifest"))
    if summary is None and not rows:
        return None
    summary = summary or {}
    m = Manifest(session.get("workdir") if isinstance(session.get("workdir"), str) else None,
                 source=summary.get("source") if isinstance(summary.get("source"), str) else None,
                 snapshot=summary.get("snapshot") is True, cut=summary.get("cut") is True,
                 notes=[str(n) for n in summary.get("notes") or [] if isinstance(n, str)])
    for r in rows or []:
        _, path, kind, size, sha, mode, link, content, note = r
        m.entries.append(Entry(path, kind or "file", size, sha, mode, link,
                               bytes(content) if content is not None else None, note))
    return m


def read_stored(store: Any, session: dict) -> Manifest | None:
    """A session's manifest from an open store (read-only is fine)."""
    return manifest_of(session, store.workdir_files(session["session_id"]))


def read_manifest(path: str, session_id: str | None = None) -> Manifest | None:
    """The manifest of a session in a .db (opened read-only) or a .jsonl transcript."""
    if path.endswith(".jsonl"):
        from .transcript import read_transcript

        session, _ = read_transcript(path)
        return session_manifest(session)
    from .store import open_store

    with open_store(path, read_only=True) as store:
        return read_stored(store, store.session(session_id))


# -- in a transcript header -----------------------------------------------------------------------
FILES_KEY = "workdir_files"  # where a session dict read from a transcript carries the entries


def session_manifest(session: dict) -> Manifest | None:
    """The manifest a session dict carries (read from a transcript: FILES_KEY holds the
    entries), or that its columns describe."""
    entries = session.get(FILES_KEY)
    m = manifest_of(session, None)
    if m is None and not entries:
        return None
    if m is None:
        m = Manifest(session.get("workdir") if isinstance(session.get("workdir"), str) else None)
    m.entries = list(entries or [])
    return m


def to_header(m: Manifest, content_filter: Callable[[bytes], bytes],
              link_filter: Callable[[str], str] = lambda t: t) -> dict[str, Any]:
    """The `"workdir"` object of a transcript header. The dir itself is left out: it is the one
    the session's command names (`agent_workdir`), which the reader works out again.
    `link_filter`: what a symlink's target goes through (the transcript's path placeholders)."""
    files = []
    for e in m.entries:
        d: dict[str, Any] = {"path": e.path}
        if e.kind != "file":
            d["kind"] = e.kind
        for k in ("size", "sha256", "mode", "link", "note"):
            v = getattr(e, k)
            if v is not None:
                d[k] = link_filter(v) if k == "link" else v
        if e.content is not None:
            data = content_filter(e.content)
            try:
                d["text"] = data.decode("utf-8")
            except UnicodeDecodeError:
                d["b64"] = base64.b64encode(data).decode("ascii")
        files.append(d)
    return {**m.summary(), "entries": files}


class BadHeader(ValueError):
    pass


def _typed(d: dict, key: str, types: tuple[type, ...], where: str) -> Any:
    v = d.get(key)
    if v is not None and (not isinstance(v, types) or isinstance(v, bool) and bool not in types):
        raise BadHeader(f"{where}: \"{key}\" has the wrong type")
    return v


def from_header(obj: Any) -> tuple[dict, list[Entry]]:
    """(summary, entries) from a transcript header's `"workdir"` object. Checks shapes only
    (BadHeader); paths are checked where files are written (`safe_relpath`)."""
    if not isinstance(obj, dict):
        raise BadHeader('"workdir" is not an object')
    files = obj.get("entries")
    files = [] if files is None else files
    if not isinstance(files, list):
        raise BadHeader('"workdir.entries" is not a list')
    entries = []
    for i, f in enumerate(files):
        where = f"workdir.entries[{i}]"
        if not isinstance(f, dict) or not isinstance(f.get("path"), str):
            raise BadHeader(f'{where} needs a "path" string')
        content = None
        if isinstance(f.get("text"), str):
            content = f["text"].encode("utf-8", "surrogatepass")
        elif f.get("b64") is not None:
            try:
                content = base64.b64decode(_typed(f, "b64", (str,), where), validate=True)
            except ValueError:
                raise BadHeader(f'{where}: "b64" is not valid base64') from None
        kind = _typed(f, "kind", (str,), where) or "file"
        if kind not in ("file", "symlink"):
            raise BadHeader(f"{where}: unknown kind {kind[:20]!r}")
        entries.append(Entry(f["path"], kind, _typed(f, "size", (int,), where),
                             _typed(f, "sha256", (str,), where), _typed(f, "mode", (int,), where),
                             _typed(f, "link", (str,), where), content,
                             _typed(f, "note", (str,), where)))
    summary = {k: v for k, v in obj.items() if k != "entries"}
    return summary, entries


# -- untrusted paths ------------------------------------------------------------------------------
def safe_relpath(path: Any) -> bool:
    """A relative path that stays inside the dir it is joined to: no absolute path, no `..`,
    `.` or empty parts, no NUL, within the usual length limits."""
    if not isinstance(path, str) or not path or "\0" in path or len(path) > 4096:
        return False
    if path.startswith("/"):
        return False
    parts = path.split("/")
    return all(p not in ("", ".", "..") and len(p.encode("utf-8", "surrogatepass")) <= 255
               for p in parts)
