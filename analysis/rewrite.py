"""Redact recordings that already exist: `wire-redact PATH...`.

The redaction rules (recorder/redact.py) run over every frame's bytes, its payload and the
session row (command, cwd, tags, ...) of a `.db` (with its `.blobs` sidecar) or a `.jsonl`
transcript, and the file is rewritten so that the old bytes are gone from it. Editing the file in
place would not do that: DuckDB keeps freed blocks in the file, and a sidecar's old bytes stay
where they are. So a new file is built next to the old one (through `open_store`, which gives it
the current schema and DuckDB 1.4's storage format), synced to the disk, and renamed over the
old one; the sidecar likewise, with the new offsets. Both are their owner's only (0600).

A file a recording loader holds, or with a spool beside it, is refused (DBLocked): its session
is still being written, or waits for `wire-proxy recover`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from wire_recorder.recorder.errors import DBLocked, NotARecording, OutputError
from wire_recorder.recorder.handoff import wait_for_loaders
from wire_recorder.recorder.model import SESSION_COLUMNS, Frame
from wire_recorder.recorder.paths import fsync_dir, fsync_file, open_private
from wire_recorder.recorder.store import Store, blobs_path, is_duckdb_file, open_store
from wire_recorder.recorder.transcript import read_transcript, write_session
from wire_recorder.recorder.workdir import FILES_KEY, read_stored, redact_entries

# JSON columns of `sessions`; the other text columns are redacted as text
_JSON_SESSION_COLUMNS = ("command", "tags")
_TEXT_SESSION_COLUMNS = ("name", "cwd", "host", "db_note")
# the sessions column that lists the rules that ran on a session's frames (schema 4)
RULES_COLUMN = "redaction"


class RedactorLike(Protocol):
    """What a rewrite needs of recorder.redact.Redactor."""

    rules: list[str]

    def redact_bytes(self, raw: bytes) -> bytes: ...

    def redact_json(self, obj: Any) -> Any: ...

    def redact_text(self, text: str) -> str: ...


@dataclass
class SessionChanges:
    session_id: str
    frames: int = 0  # every row of the session (stderr and lifecycle rows too)
    frames_changed: int = 0
    secrets: int = 0  # placeholders written (in the frames' bytes and the session row)
    session_changed: bool = False  # the session row itself (command, cwd, tags, ...)


@dataclass
class FileChanges:
    path: str
    kind: str  # "db" or "transcript"
    sessions: list[SessionChanges] = field(default_factory=list)
    written: bool = False  # False on a dry run

    @property
    def frames(self) -> int:
        return sum(s.frames for s in self.sessions)

    @property
    def frames_changed(self) -> int:
        return sum(s.frames_changed for s in self.sessions)

    @property
    def secrets(self) -> int:
        return sum(s.secrets for s in self.sessions)


def _default_placeholder_re() -> re.Pattern[bytes]:
    from wire_recorder.recorder.redact import PLACEHOLDER_RE

    return PLACEHOLDER_RE


class _Rewriter:
    """Redacts frames and session rows with one redactor, counting what changed."""

    def __init__(self, redactor: RedactorLike, placeholder_re: re.Pattern[bytes] | None):
        self.r = redactor
        self.ph = placeholder_re or _default_placeholder_re()

    def _new_placeholders(self, old: bytes, new: bytes) -> int:
        return max(0, len(self.ph.findall(new)) - len(self.ph.findall(old)))

    def frame(self, f: Frame, counts: SessionChanges) -> Frame:
        counts.frames += 1
        changed = False
        if f.raw is not None:
            raw = bytes(f.raw)
            new_raw = self.r.redact_bytes(raw)
            if new_raw != raw:
                counts.secrets += self._new_placeholders(raw, new_raw)
                f.raw, f.byte_len, changed = new_raw, len(new_raw), True
        if f.payload is not None:
            new_payload = self._json_text(f.payload)
            if new_payload != f.payload:
                f.payload, changed = new_payload, True
        if f.parse_error:
            new_error = self.r.redact_text(f.parse_error)
            if new_error != f.parse_error:
                f.parse_error, changed = new_error, True
        f.blob_offset = None  # the new store puts large frames in its own sidecar
        if changed:
            counts.frames_changed += 1
        return f

    def _json_text(self, text: str) -> str:
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError:
            return self.r.redact_text(text)
        new = self.r.redact_json(obj)
        # unchanged values keep their text as stored (no re-serialisation)
        return text if new == obj else orjson.dumps(new).decode()

    def session(self, session: dict, counts: SessionChanges) -> dict:
        out = dict(session)
        for k in _JSON_SESSION_COLUMNS:
            v = out.get(k)
            if v is None:
                continue
            if isinstance(v, str):
                new_text = self._json_text(v)
                if new_text != v:
                    out[k] = new_text
            else:  # a transcript's header holds them parsed
                out[k] = self.r.redact_json(v)
        for k in _TEXT_SESSION_COLUMNS:
            v = out.get(k)
            if isinstance(v, str):
                out[k] = self.r.redact_text(v)
        for k in (*_JSON_SESSION_COLUMNS, *_TEXT_SESSION_COLUMNS):
            if out.get(k) != session.get(k):
                counts.session_changed = True
                old = orjson.dumps(session.get(k))
                counts.secrets += self._new_placeholders(old, orjson.dumps(out.get(k)))
        return out

    def rules_value(self, old: Any) -> str:
        """What `sessions.redaction` says after the rewrite: the redactor's record (its rules,
        config, notes), with the rules recorded before (on capture, an earlier wire-redact)
        kept in front."""
        describe = getattr(self.r, "describe", None)
        record: dict[str, Any] = {"rules": list(self.r.rules)}
        if callable(describe):
            try:
                described = orjson.loads(describe())
            except orjson.JSONDecodeError:
                described = None
            if isinstance(described, dict):
                record = described
        before: list[str] = []
        if isinstance(old, str) and old not in ("", "off"):
            try:
                parsed = orjson.loads(old)
            except orjson.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict) and isinstance(parsed.get("rules"), list):
                before = [str(x) for x in parsed["rules"]]
        rules = [str(x) for x in record.get("rules") or []]
        record["rules"] = before + [r for r in rules if r not in before]
        record["rewritten_by"] = "wire-redact"
        return orjson.dumps(record).decode()


# -- .db ------------------------------------------------------------------------------------------
def _temp_path(path: str, what: str) -> str:
    folder, base = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{base}.{what}-{os.getpid()}")


def _remove(*paths: str) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def _copy_meta(src: Store, dst: Store) -> bool:
    """Meta rows other than the schema's; True when the source had analysis views stored."""
    rows = src.con.execute("SELECT key, value FROM meta").fetchall()
    views = False
    for key, value in rows:
        if key == "analysis_views":
            views = True  # stored again by views.refresh, views and version together
        elif key != "schema_version":
            dst.con.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", [key, value])
    return views


def rewrite_db(path: str, redactor: RedactorLike, dry_run: bool = False,
               placeholder_re: re.Pattern[bytes] | None = None) -> FileChanges:
    """Redact every session of a recording; unless `dry_run`, replace the file (and its
    sidecar) by a new one that holds only the redacted bytes."""
    rw = _Rewriter(redactor, placeholder_re)
    result = FileChanges(path, "db")
    # a session its proxy has handed to a loader still storing it is waited for, as every
    # reader does (`wire-proxy ... && wire-redact` must not fail for the loader's second)
    wait_for_loaders(path)
    _refuse_live(path)
    # A read-only open is refused while a loader writes the file (DBLocked), and keeps writers
    # out until the new file has replaced it. (Its loaders are waited for above.)
    src = open_store(path, read_only=True, wait_for_loader=False)
    tmp = _temp_path(path, "redact")
    tmp_blobs = blobs_path(tmp)
    # DuckDB creates the new file's WAL with the umask's mode while the copy runs
    old_umask = os.umask(0o077)
    try:
        dst = None if dry_run else _new_store(tmp)
        try:
            had_views = _copy_meta(src, dst) if dst is not None else False
            for session in src.sessions():
                counts = SessionChanges(session["session_id"])
                result.sessions.append(counts)
                new_session = rw.session(session, counts)
                if RULES_COLUMN in SESSION_COLUMNS:
                    new_session[RULES_COLUMN] = rw.rules_value(session.get(RULES_COLUMN))
                if dst is not None:
                    dst.upsert_session({k: v for k, v in new_session.items() if v is not None})
                for batch in _frame_batches(src, session["session_id"]):
                    rows = [rw.frame(f, counts).row() for f in batch]
                    if dst is not None:
                        dst.insert_frames(rows)
                workdir = read_stored(src, session)  # the work dir's files, redacted too
                if workdir is not None:
                    counts.session_changed |= bool(redact_entries(workdir.entries, redactor))
                    if dst is not None:
                        dst.insert_workdir_files([e.row(session["session_id"])
                                                  for e in workdir.entries])
        finally:
            if dst is not None:
                dst.close()  # checkpoints: no WAL is left beside the new file
        if dry_run:
            return result
        if had_views:
            from .views import refresh

            refresh(tmp)
        _replace(tmp, tmp_blobs, path)
        result.written = True
        return result
    except BaseException:
        _remove(tmp, tmp + ".wal", tmp_blobs)
        raise
    finally:
        os.umask(old_umask)
        src.close()


def _refuse_live(path: str) -> None:
    """A spool beside the file is a session still being recorded (its loader lets go of the DB
    while the session is quiet) or one a killed proxy left: its frames would be added to the
    new file unredacted."""
    import glob

    spools = sorted(glob.glob(glob.escape(path) + ".*.spool"))
    if spools:
        raise DBLocked(f"{path} has a recording in progress or not yet recovered "
                       f"({os.path.basename(spools[0])})",
                       f"wait for it to end, or run wire-proxy recover {path} first")


def _new_store(tmp: str) -> Store:
    _remove(tmp, tmp + ".wal", blobs_path(tmp))  # a run killed before left them
    try:
        return open_store(tmp)
    except OSError as e:
        raise OutputError(f"cannot write {tmp}: {e.strerror}") from None


def _frame_batches(src: Store, session_id: str, size: int = 2000) -> Iterator[list[Frame]]:
    """A session's frames a batch at a time (a session can be GBs), sidecar bytes resolved."""
    from wire_recorder.recorder.store import frame_select, resolve_blobs

    cur = src.con.execute(f"SELECT {frame_select(src.version)} FROM frames WHERE session_id = ? "
                          "ORDER BY seq", [session_id])
    while True:
        rows = cur.fetchmany(size)
        if not rows:
            return
        yield resolve_blobs([Frame(*r) for r in rows], src.path)


def _replace(tmp: str, tmp_blobs: str, path: str) -> None:
    """Put the new file (and sidecar) in place of the old ones: synced first, then renamed, so
    the path holds the old recording or the new one. The old sidecar goes when the new file has
    none (no frame is over the inline limit any more); a WAL left beside the old file by a
    writer killed mid-way goes too: what it held was read into the new file, and DuckDB would
    replay it onto the new one."""
    blobs = blobs_path(path)
    try:
        os.chmod(tmp, 0o600)
        fsync_file(tmp)
        if os.path.exists(tmp_blobs):
            os.chmod(tmp_blobs, 0o600)
            fsync_file(tmp_blobs)
            os.replace(tmp_blobs, blobs)
        else:
            _remove(blobs)
        os.replace(tmp, path)
        _remove(path + ".wal")
        fsync_dir(os.path.dirname(os.path.abspath(path)))
    except OSError as e:
        raise OutputError(f"cannot replace {path}: {e.strerror}") from None



# -- transcripts ----------------------------------------------------------------------------------
def rewrite_transcript(path: str, redactor: RedactorLike, dry_run: bool = False,
                       placeholder_re: re.Pattern[bytes] | None = None) -> FileChanges:
    """Redact a `.jsonl` transcript; unless `dry_run` or nothing changed, write it anew (in the
    format the transcript writer writes) and rename it over the old one."""
    rw = _Rewriter(redactor, placeholder_re)
    session, frames = read_transcript(path)
    counts = SessionChanges(session["session_id"])
    result = FileChanges(path, "transcript", [counts])
    new_session = rw.session(session, counts)
    if RULES_COLUMN in SESSION_COLUMNS:
        new_session[RULES_COLUMN] = rw.rules_value(session.get(RULES_COLUMN))
    new_frames = [rw.frame(f, counts) for f in frames]
    counts.session_changed |= bool(redact_entries(new_session.get(FILES_KEY) or [], redactor))
    if dry_run or not (counts.frames_changed or counts.session_changed):
        # A transcript holds no freed bytes: one without secrets is left as it is, so that its
        # diff in review stays empty.
        return result
    tmp = _temp_path(path, "redact")
    try:
        with open_private(tmp) as out:
            write_session(new_session, new_frames, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        fsync_dir(os.path.dirname(os.path.abspath(path)))
    except OSError as e:
        _remove(tmp)
        raise OutputError(f"cannot rewrite {path}: {e.strerror}") from None
    except BaseException:
        _remove(tmp)
        raise
    result.written = True
    return result


# -- either ---------------------------------------------------------------------------------------
def is_transcript_path(path: str) -> bool:
    return path.endswith(".jsonl")


def origin_of(path: str) -> str | None:
    """NAME.origin.jsonl beside NAME.jsonl: the session a reopened ACP session replays first,
    part of the same recording."""
    if not path.endswith(".jsonl") or path.endswith(".origin.jsonl"):
        return None
    origin = path[:-len(".jsonl")] + ".origin.jsonl"
    return origin if os.path.isfile(origin) else None


def rewrite(path: str, redactor: RedactorLike, dry_run: bool = False,
            placeholder_re: re.Pattern[bytes] | None = None) -> FileChanges:
    """A `.jsonl` transcript or a `.db` recording, by its name and first bytes."""
    if os.path.isdir(path):
        raise NotARecording(f"{path} is a directory", "give .db recordings or .jsonl transcripts")
    if not os.path.exists(path):
        raise NotARecording(f"{path}: no such file")
    if is_transcript_path(path):
        result = rewrite_transcript(path, redactor, dry_run, placeholder_re)
    else:
        if os.path.getsize(path) and not is_duckdb_file(path):
            raise NotARecording(f"{path} is neither a DuckDB file nor a .jsonl transcript",
                                "give .db recordings or .jsonl transcripts")
        result = rewrite_db(path, redactor, dry_run, placeholder_re)
    if result.written:
        # derived copies follow the file: wire-ui's index cache held its search text (the
        # summaries stored in a .db are not copied: readers compute them from the new file)
        from .ui.coldindex import forget_files

        forget_files([path])
    return result


def make_redactor(path: str, config_file: str | None = None) -> RedactorLike:
    """The rules for one recording, with a fresh placeholder key: the built-in ones, the
    project's config (found from the file's folder upwards), the secret-looking values of this
    process's environment, and the `redact` table of `config_file` (a wire-recorder.toml, or a
    pyproject.toml with [tool.wire-recorder]) added to them. A config that cannot be used is an
    error here (a user asked for these rules), not a note."""
    from wire_recorder.recorder.redact import Redactor

    folder = os.path.dirname(os.path.abspath(path))
    if config_file is None:
        return Redactor.from_config(project_dir=folder, strict=True)
    from wire_recorder.recorder.config import find_config
    from wire_recorder.recorder.redact import (
        MIN_CONFIG_ENV_VALUE,
        parse_redact_table,
        secret_env_names,
    )

    project = find_config(folder)
    rules = parse_redact_table(project.table.get("redact", {}), project.path or "config")
    extra = parse_redact_table(_redact_table_of(config_file), config_file)
    for k, v in extra.items():
        rules[k] = rules.get(k, []) + [x for x in v if x not in rules.get(k, [])]
    env = os.environ
    env_values = {n: env[n] for n in secret_env_names(env)}
    for name in rules.get("env", []):
        value = env.get(name)
        if value is not None and len(value) >= MIN_CONFIG_ENV_VALUE:
            env_values[name] = value
    return Redactor(env_values=env_values, patterns=rules.get("patterns"),
                    json_paths=rules.get("json_paths"), keys=rules.get("keys"),
                    config_env=rules.get("env"),
                    config_path=", ".join(p for p in (project.path, config_file) if p))


def _redact_table_of(config_file: str) -> Any:
    import tomllib

    from wire_recorder.recorder.config import ConfigError

    try:
        with open(config_file, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"--config {config_file}: cannot read ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"--config {config_file}: not valid TOML ({e})") from None
    tool = data.get("tool")
    if isinstance(tool, dict) and isinstance(tool.get("wire-recorder"), dict):
        data = tool["wire-recorder"]
    return data.get("redact", {})


def rewrite_all(paths: list[str], make_redactor: Callable[[str], RedactorLike],
                dry_run: bool = False,
                on_error: Callable[[str, Exception], None] | None = None) -> list[FileChanges]:
    """Each path (and the origin transcript beside a transcript), one redactor per recording:
    a transcript and its origin share one, so a secret in both gets one placeholder.
    `make_redactor(path)` makes it; `on_error(path, error)` hears of a UserError and the
    next file goes on (without it, the error is raised)."""
    from wire_recorder.recorder.errors import UserError

    seen: set[str] = set()
    results: list[FileChanges] = []
    for path in paths:
        group = [path]
        origin = origin_of(path)
        if origin:
            group.append(origin)
        redactor: RedactorLike | None = None
        for p in group:
            key = os.path.realpath(p)
            if key in seen:
                continue
            seen.add(key)
            try:
                if redactor is None:
                    redactor = make_redactor(p)
                results.append(rewrite(p, redactor, dry_run))
            except UserError as e:
                if on_error is None:
                    raise
                on_error(p, e)
    return results


__all__ = ["FileChanges", "RedactorLike", "SessionChanges", "make_redactor", "rewrite",
           "rewrite_all", "rewrite_db", "rewrite_transcript"]
