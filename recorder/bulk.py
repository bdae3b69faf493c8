"""The loader's bulk path: a read of spool records stored by DuckDB, without a Python object per
frame (issue 27).

Python works per spool record (a chunk of up to 64 KiB): it cuts each chunk at its last newline
(the rest waits for the next chunk, as in `Ingest.data`), checks the batch's bytes at once (UTF-8,
the redaction screen), and hands DuckDB one string per chunk with its stream, time and first seq.
DuckDB splits the lines, classifies them with the rule table's SQL (recorder/rules.py) into a
staging table, and appends them to `frames`: `raw` is the line's own bytes (`encode`), the
payload the JSON text DuckDB extracts. Python then looks only at the frames that carry an id
(the pending-request anomaly needs the session's history, kept in the same `Classifier`) and at
the distinct methods (foreign methods).

A read goes frame by frame instead (`Ingest.feed`, as before) when any of this does not hold:
only client and agent data records (no lifecycle event, gap marker, stderr, late client bytes);
the session's protocol has a rule table and is past detection; no gap or resumed load pending;
the bytes are UTF-8 without an escaped surrogate or `initialize`; no redaction rule can match
(`redact_screen`), in the frames nor in the joined text of streamed pieces (with those of a message
the stream join holds open from the read before); every frame is a
well-formed JSON-RPC 2.0 object of at most BLOCK_SIZE bytes without a number DuckDB reads
differently (20+ digits).

While redacting, the last TAIL_CHARS characters of a message still streaming at a read's end go
frame by frame (from the piece where they begin, or an earlier one, so that a run without
whitespace that goes on into them is held whole): the stream join holds those pieces over to
the next read, whose pieces join them, so that a secret split across the two reads is masked
in every piece as the frame-by-frame path masks it. While the spool holds more, those frames go
in front of the next read instead (`HOLD_BYTES`), where they are screened with its pieces as
the join would screen them. Rows buffered before a bulk batch go in with it, in the same write
(a resumed load skips up to the highest seq stored).
"""

from __future__ import annotations

import os
import time

from .classify import VERSION_WINDOW
from .model import COLUMNS, wall_ts
from .protocols import foreign as foreign_of
from .protocols import get as adapter_of
from .redact_screen import may_change
from .redact_stream import _MARKERS as PIECE_MARKERS
from .rules import (
    NESTED_MARKERS,
    PIECE_PATHS,
    RULES,
    _lit,
    more_strings_at,
    sql_columns,
    sql_extract,
    sql_members,
)
from .spool import A2C, C2A, STREAM_NAMES, SpoolRecord
from .store import BLOCK_SIZE

# What DuckDB's JSON reader takes otherwise than Python's: numbers of 20 digits or more (a double
# in DuckDB, exact in Python), exponents of 3 digits (infinity: not JSON to Python), NaN and
# Infinity, trailing commas (DuckDB accepts them). Frames that hold one (and the few whose
# strings merely look so) are classified in Python. Not caught: a member given twice (DuckDB
# reads the first, Python the last), which no peer sends.
ODD_JSON = r"[0-9][eE][+-]?[0-9]{3}|[0-9]{20}|,\s*[\]}]|(?i:[:,\[]\s*-?(?:inf|nan))"

# characters of a message streaming at a read's end that go frame by frame, held over to the
# next read, from a piece holding whitespace on (longer secrets start with a marker the screen
# finds, a PEM block's header, or are one run without whitespace, held whole: a JWT)
TAIL_CHARS = 4096
# ...and go, while the spool holds more, in front of the next read instead, up to this many bytes
# (1M small frames: ~3% of them went frame by frame, ~15% of the loader's CPU)
HOLD_BYTES = 512 << 10

_SQL: dict[tuple[str, bool], str] = {}
# CPU seconds of this process in each step (for profiling in-process: ingest_spool, then these)
TIMES = {"stage": 0.0, "checks": 0.0, "insert": 0.0}


def stage_sql(protocol: str, pieces: bool) -> str:
    """The statement that fills `wr_stage` from the chunks ($1 texts, $2 first seq, $3 direction,
    $4 mono ns, $5 ts, $6 wall ns); `pieces`: also the text of streamed pieces (for the redaction screen).
    Each step names its values once (DuckDB evaluates an expression again where it is used)."""
    key = (protocol, pieces)
    if key in _SQL:
        return _SQL[key]
    r = RULES[protocol]
    c = sql_columns(r)
    at = more_strings_at(r)
    piece = ("CASE WHEN dir = 'a2c' THEN concat("
             + ", ".join(f"s[{at + i}]" for i in range(len(PIECE_PATHS))) + ") END"
             if pieces else "NULL::VARCHAR")
    sql = f"""
CREATE OR REPLACE TEMP TABLE wr_stage AS
WITH s AS (SELECT unnest($1::VARCHAR[]) AS t, unnest($2::BIGINT[]) AS first,
                  unnest($3::VARCHAR[]) AS dir, unnest($4::BIGINT[]) AS mono,
                  unnest($5::TIMESTAMP[]) AS ts, unnest($6::BIGINT[]) AS wall),
p AS (SELECT first, dir, mono, ts, wall, string_split(t, chr(10)) AS parts FROM s),
l AS (SELECT first, dir, mono, ts, wall, unnest(parts) AS line,
             unnest(range(len(parts))) AS i FROM p),
y AS (SELECT first + i AS seq, dir, mono, ts, wall, line,
             {sql_extract(r, more=PIECE_PATHS if pieces else ())} FROM l),
z AS (SELECT seq, dir, mono, ts, wall, line, t, s, {sql_members(r)} FROM y)
SELECT seq, dir, mono, ts, wall, line,
       coalesce({c['ok']} AND strlen(line) <= {BLOCK_SIZE}
                AND NOT regexp_matches(line, '{ODD_JSON}'), false) AS ok,
       {c['kind']} AS kind, {c['method']} AS method, {c['rpc_id']} AS rpc_id,
       {c['id_is_str']} AS id_is_str, {c['msg_type']} AS msg_type,
       {c['payload']} AS payload, {c['known']} AS known, NULL::VARCHAR AS anomaly,
       {piece} AS piece
FROM z
"""
    _SQL[key] = sql
    return sql


INSERT = (f"INSERT INTO frames ({', '.join(COLUMNS)}) SELECT "
          + ", ".join({
              "session_id": "$1", "seq": "seq", "ts": "ts", "mono_ns": "mono",
              "direction": "dir", "raw": "encode(line)", "newline": "true",
              "byte_len": "strlen(line)", "kind": "kind", "method": "method",
              "rpc_id": "rpc_id", "msg_type": "msg_type", "payload": "payload",
              "parse_error": "NULL", "known": "known", "blob_offset": "NULL",
              "anomaly": "anomaly"}[c] for c in COLUMNS)
          + " FROM wr_stage")


class Bulk:
    """The bulk path of one `Ingest`."""

    def __init__(self, ing):
        self.ing = ing
        # WIRE_RECORDER_BULK=0: every read frame by frame (bench/bench_loader.py compares)
        self.enabled = os.environ.get("WIRE_RECORDER_BULK", "1") != "0"
        self.batches = self.fallbacks = 0
        self.may_hold = False  # the next read follows at once (`Ingest.feed_read`)

    def eligible(self) -> bool:
        ing = self.ing
        cl = ing.classifier
        return (cl.protocol in RULES and (cl.version is not None or cl.n >= VERSION_WINDOW)
                and not cl._offers and ing.seq >= ing.skip_until
                and not (ing.after_gap or ing.before_gap or ing.mid_gap)
                and ing.store is not None)

    def detecting(self) -> bool:
        """The session's frames go frame by frame only because its protocol's version is still
        looked for (its first VERSION_WINDOW frames)."""
        cl = self.ing.classifier
        return self.enabled and cl.version is None and cl.n < VERSION_WINDOW

    def feed(self, records) -> bool:
        """Store `records` in bulk; False (nothing changed) when the read must go frame by
        frame. While redacting, the pieces of a message still streaming at the read's end (its
        last TAIL_CHARS characters, from a piece on) go frame by frame: the stream join holds
        them over to the next read, whose pieces join them (recorder/redact_stream.py), so that
        a secret split across the two reads is masked in every piece."""
        if not records or not self.enabled or not self.eligible():
            return False
        ing = self.ing
        first_seq = ing.seq
        cut = _chunks(records, {s: list(ing.partial[s]) for s in (C2A, A2C)}, first_seq)
        if cut is None:
            return False
        chunks, firsts, dirs, monos, tss, _, last_seq = cut
        if not chunks:
            return False
        if any(_long_line(c) for c in chunks):
            return False
        batch = b"\n".join(chunks)
        if b"initialize" in batch or b"\\ud" in batch or b"\\uD" in batch or \
                any(m in batch for m in NESTED_MARKERS):
            return False
        redactor = ing.redactor
        if redactor.enabled and may_change(redactor, batch):
            return False
        try:
            texts = [c.decode("utf-8") for c in chunks]
        except UnicodeDecodeError:
            return False
        # only the texts from here on, and not after they are staged: the loader's peak memory
        # is reached while a checkpoint runs beside the next read
        del batch, chunks, cut
        joiner = ing.joiner
        state: dict = {}

        def stage(st) -> None:
            c0 = time.process_time()
            con = st.con
            con.execute(stage_sql(ing.classifier.protocol, redactor.enabled),
                        [texts, firsts, dirs, monos, [_ts(w) for w in tss], tss])
            texts.clear()
            c1 = time.process_time()
            TIMES["stage"] += c1 - c0
            if joiner is not None:
                # the text of every piece, and where the read's last message streaming at its
                # end begins to hold its last TAIL_CHARS characters and the whole run without
                # whitespace that goes on into them (a secret is such a run, or starts with a
                # marker the screen finds: a JWT's anchor may come after 4 KiB of its header).
                # A frame from the agent without a piece's marker ends any message;
                # materialized, each step runs once, where inlined `a` ran for each use
                marked = _marked(RULES[ing.classifier.protocol])
                state["pieces"], state["full"], state["first"], state["other"] = con.execute(
                    f"""WITH a AS MATERIALIZED (SELECT seq, piece, {marked} AS marked
                                                FROM wr_stage WHERE dir = 'a2c'),
                    e AS (SELECT coalesce(max(seq) FILTER (WHERE NOT marked), -1) AS other
                          FROM a),
                    r AS MATERIALIZED (
                        SELECT seq, piece, sum(length(coalesce(piece, '')))
                               OVER (ORDER BY seq DESC) AS after FROM a, e WHERE seq > other)
                    SELECT (SELECT string_agg(piece, '' ORDER BY seq) FILTER (WHERE piece <> '')
                            FROM a),
                           (SELECT max(seq) FROM r WHERE after >= {TAIL_CHARS}
                                                   AND regexp_matches(piece, '\\s')),
                           (SELECT min(seq) FROM r), (SELECT other FROM e)""").fetchall()[0]
            TIMES["checks"] += time.process_time() - c1

        if not ing.store.write(stage):
            return False
        tail_start = last_seq + 1
        if joiner is not None:
            # a secret split between pieces of the read (and the message it continues) is
            # found on their joined text: the read goes frame by frame
            held = "".join(p.text for p in joiner.pieces)
            if may_change(redactor, (held + (state["pieces"] or "")).encode(
                    "utf-8", "surrogatepass")):
                self.fallbacks += 1
                return False
            if state["full"] is not None:
                tail_start = state["full"]
            elif joiner.open and state["other"] < 0:
                # the message the join holds goes on through the read, whose pieces hold fewer
                # than TAIL_CHARS characters: all of them are held over, with the join's
                return False
            elif state["first"] is not None:
                tail_start = state["first"]
            if tail_start <= first_seq + 1:
                return False  # the whole read is the end of a streaming message
            # the message the join holds ends here: it had no secret with what follows
            joiner.settle()
        mid, tail = _split(records, first_seq, tail_start - 1)
        if not self._store(mid, first_seq, tail_start - 1):
            self.fallbacks += 1
            ing.feed(mid)
            self.may_hold = False
        if tail and self.may_hold and sum(len(r.data) for r in tail) <= HOLD_BYTES:
            # the next read follows at once: the tail goes in front of it, and its pieces are
            # screened with that read's as the stream join would screen them
            ing.held = tail
        elif tail:
            ing.feed(tail)
        return True

    def _store(self, records, first_seq: int, last_seq: int) -> bool:
        """Frames first_seq+1 .. last_seq (which `records` complete), staged in `wr_stage` with
        the others of the read, stored in bulk; False (nothing changed) when they must go frame
        by frame."""
        ing = self.ing
        partial = {s: list(ing.partial[s]) for s in (C2A, A2C)}
        cut = _chunks(records, partial, first_seq)
        assert cut is not None and cut[-1] == last_seq
        spooled = cut[5]
        del cut
        seq = last_seq
        store = ing.store
        state: dict = {}

        def checks(st) -> None:
            c0 = time.process_time()
            con = st.con
            con.execute("DELETE FROM wr_stage WHERE seq > ?", [seq])
            odd, methods, nrows, nbytes = con.execute(
                "SELECT count(*) FILTER (WHERE NOT ok), "
                "list(DISTINCT method) FILTER (WHERE method IS NOT NULL), count(*), "
                "sum(strlen(line) + coalesce(strlen(payload::VARCHAR), 0)) "
                "FROM wr_stage").fetchone()
            state["methods"] = methods or []
            state["counts"] = (nrows, nbytes)
            TIMES["checks"] += time.process_time() - c0
            if odd > 0.1 * nrows:
                con.execute("DROP TABLE wr_stage")
                state["bad"] = True
                return
            # frames with an id (pending requests), and those left to the Python classifier
            state["ids"] = con.execute(
                "SELECT seq, dir, kind, rpc_id, id_is_str, method, ok, mono, wall, "
                "CASE WHEN NOT ok THEN encode(line) END FROM wr_stage "
                "WHERE rpc_id IS NOT NULL OR NOT ok ORDER BY seq").fetchall()
            state["odd"] = odd
            if odd:
                con.execute("DELETE FROM wr_stage WHERE NOT ok")

        if not store.write(checks) or state.get("bad"):
            return False
        nrows, nbytes = state["counts"]
        odd = state["odd"]
        before = self._snapshot()
        foreign, anomalies = self._anomalies(state["ids"], state["methods"], nrows - odd, seq)
        if ing.joiner is not None and ing.joiner.open:
            ing.joiner.settle()  # (a piece classified in Python: the read's text is clean)
        # rows buffered before (an earlier read's, the ones classified in Python) go in with
        # these, in the same write: a resumed load skips up to the highest seq stored
        rows, large = ing.rows, ing.large

        def insert(st) -> None:
            c0 = time.process_time()
            con = st.con
            if rows:
                ing.insert_rows(st, rows, large)
            for m, text in foreign:
                con.execute("UPDATE wr_stage SET anomaly = ? WHERE method = ?", [text, m])
            if anomalies:
                con.executemany("UPDATE wr_stage SET anomaly = ? WHERE seq = ?",
                                [(a, q) for q, a in anomalies])
            if foreign or anomalies:
                (state["anomalies"],) = con.execute(
                    "SELECT count(*) FROM wr_stage WHERE anomaly IS NOT NULL").fetchone()
            con.execute(INSERT, [ing.sid])
            con.execute("DROP TABLE wr_stage")
            ing._fit_limit(st)
            TIMES["insert"] += time.process_time() - c0

        if rows:
            ing.before_rows()
        if not store.write(insert):
            # (the disk filled up since the staging): the frames go again frame by frame, from
            # the session's state before them, which waits for room as before
            self._restore(before)
            return False
        # committed: the session's state moves on as `Ingest.data` would have moved it
        self.batches += 1
        for s in (C2A, A2C):
            ing.partial[s] = partial[s]
            ing.spooled[s][0] += spooled[s][0]
            ing.spooled[s][1] += spooled[s][1]
        ing.seq = seq
        ing.frame_count += nrows - odd  # (the odd ones were counted by `_frame`)
        ing.anomalies += state.get("anomalies", 0)
        if records:
            ing.last_wall_ns = records[-1].wall_ns
            ing.last_mono_ns = records[-1].mono_ns
        ing.large_session |= large
        nbytes = int(nbytes or 0) + ing.row_bytes
        nrows += len(rows)
        ing.rows, ing.row_bytes, ing.large = [], 0, False
        ing.stored_in_bulk(nrows - odd, nbytes)
        return True

    def _snapshot(self) -> tuple:
        """What `_anomalies` changes in the session's state (the frames it classifies in Python
        are buffered as rows), to put back when the batch does not go in after all."""
        ing = self.ing
        cl = ing.classifier
        return (ing.seq, len(ing.rows), ing.row_bytes, ing.large, ing.largest, ing.frame_count,
                ing.invalid, ing.anomalies, cl.n, dict(cl.pending), cl.protocol, cl.version,
                dict(cl._offers), None if ing.joiner is None else
                (list(ing.joiner.pieces), ing.joiner.group, ing.joiner.size))

    def _restore(self, snap: tuple) -> None:
        ing = self.ing
        cl = ing.classifier
        (ing.seq, nrows, ing.row_bytes, ing.large, ing.largest, ing.frame_count, ing.invalid,
         ing.anomalies, cl.n, cl.pending, cl.protocol, cl.version, cl._offers, joined) = snap
        del ing.rows[nrows:]
        if joined is not None:
            ing.joiner.pieces, ing.joiner.group, ing.joiner.size = joined

    def _anomalies(self, ids: list[tuple], methods: list[str], nrows: int, last: int
                   ) -> tuple[list[tuple[str, str]], list[tuple[int, str]]]:
        """The batch's anomalies as `Classifier.__call__` finds them, its pending requests kept
        up to date: (method, text) of foreign methods, (seq, text) of frames with an id. The
        frames SQL left to Python (`ids` rows with `ok` false) are classified here, in order,
        and buffered as rows of their own (`Ingest._frame`). `last`: the batch's last seq."""
        ing = self.ing
        cl = ing.classifier
        cl.n += nrows
        foreign: dict[str, str | None] = {}
        session = adapter_of(cl.protocol)
        for m in methods:
            try:
                foreign[m] = cl._foreign[m]
            except KeyError:
                other = foreign_of(m, session)
                foreign[m] = cl._foreign[m] = None if other is None else \
                    f"{m} is a {other.name} method, in a {cl.protocol} session"
        out: dict[int, str] = {}
        pending = cl.pending
        for seq, direction, kind, rpc_id, id_is_str, method, ok, mono, wall, raw in ids:
            if not ok:
                ing.seq = seq - 1
                ing._frame(C2A if direction == "c2a" else A2C, raw, True, mono, wall)
                continue
            text = foreign.get(method) if method is not None else None
            if kind == "request":
                key = (direction, rpc_id, id_is_str)
                if key in pending:
                    more = (f"request id {rpc_id} reused while an earlier {direction} request "
                            f"with that id is unanswered")
                    text = f"{text}; {more}" if text else more
                pending[key] = cl.n
            elif kind in ("response", "error"):
                pending.pop(("a2c" if direction == "c2a" else "c2a", rpc_id, id_is_str), None)
            if text:
                out[seq] = text
        ing.seq = last
        return [(m, a) for m, a in foreign.items() if a], sorted(out.items())



def _long_line(chunk: bytes) -> bool:
    """Whether a frame of the chunk may be longer than BLOCK_SIZE (a stretch that long without a
    newline; every frame of twice that is found). Such frames go frame by frame (their values
    to the sidecar): staged in SQL, a read of 2 MiB frames took several copies of each and
    failed the loader's memory limit."""
    find = chunk.find
    for i in range(0, len(chunk) - BLOCK_SIZE + 1, BLOCK_SIZE):
        if find(b"\n", i, i + BLOCK_SIZE) < 0:
            return True
    return False


def _marked(r) -> str:
    """SQL: the frame may be a streamed piece (`redact_stream.piece_of`): its finer type, where
    the table gives one, is a piece marker's; else its line holds one of the markers."""
    types = sorted(m.decode().strip('"') for m in PIECE_MARKERS)
    anywhere = " OR ".join(f"contains(line, {_lit(m.decode())})" for m in PIECE_MARKERS)
    typed = sorted(r.typed)
    if not typed:
        return f"({anywhere})"
    return (f"(CASE WHEN msg_type IS NOT NULL AND method IN ({', '.join(map(_lit, typed))}) "
            f"THEN msg_type IN ({', '.join(map(_lit, types))}) ELSE ({anywhere}) END)")


def _chunks(records, partial: dict[int, list[bytes]], seq: int) -> tuple | None:
    """Each record's complete frames as one chunk (the bytes up to its last newline, with the
    stream's partial frame before them): (chunks, first seqs, directions, mono ns, wall ns,
    spooled [bytes, newlines] per stream, the last seq). `partial` (per stream) is moved on.
    None: a record of another stream."""
    chunks: list[bytes] = []
    firsts, dirs, monos, tss = [], [], [], []
    spooled = {C2A: [0, 0], A2C: [0, 0]}
    for r in records:
        s = r.stream
        if s not in (C2A, A2C):
            return None
        data = r.data
        spooled[s][0] += len(data)
        nl = data.rfind(b"\n")
        parts = partial[s]
        if nl < 0:
            parts.append(data)
            continue
        if parts:
            parts.append(data[:nl])
            complete = b"".join(parts)
            parts.clear()
        else:
            complete = data[:nl]
        if nl + 1 < len(data):
            parts.append(data[nl + 1:])
        n = complete.count(b"\n") + 1
        spooled[s][1] += n
        chunks.append(complete)
        firsts.append(seq + 1)
        seq += n
        dirs.append(STREAM_NAMES[s])
        monos.append(r.mono_ns)
        tss.append(r.wall_ns)
    return chunks, firsts, dirs, monos, tss, spooled, seq


def _split(records, seq: int, upto: int) -> tuple[list, list]:
    """`records` (whose first complete frame is seq+1) cut right after the newline that ends
    frame `upto`: (the records up to there, the rest)."""
    if upto <= seq:
        return [], list(records)
    for i, r in enumerate(records):
        n = r.data.count(b"\n")
        if seq + n < upto:
            seq += n
            continue
        pos = -1
        for _ in range(upto - seq):
            pos = r.data.find(b"\n", pos + 1)
        at = pos + 1
        before = [*records[:i], SpoolRecord(r.stream, r.mono_ns, r.wall_ns, r.data[:at])]
        after = ([SpoolRecord(r.stream, r.mono_ns, r.wall_ns, r.data[at:])]
                 if at < len(r.data) else [])
        return before, after + list(records[i + 1:])
    return list(records), []

def _ts(wall: int):
    return wall_ts(wall)


def sql_classify(con, protocol: str, frames: list[tuple[bytes, str]]) -> list[dict | None]:
    """Each frame (raw, direction) as the bulk path's SQL classifies it on its own (None where
    the bulk path would leave it to Python: not UTF-8, or not a frame it classifies). For tests
    that hold the SQL and the Python compile of the rule table side by side."""
    texts, firsts, dirs, index = [], [], [], []
    for i, (raw, direction) in enumerate(frames):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if "\n" in text:
            continue
        texts.append(text)
        firsts.append(i)
        dirs.append(direction)
        index.append(i)
    out: list[dict | None] = [None] * len(frames)
    if not texts:
        return out
    con.execute(stage_sql(protocol, True), [texts, firsts, dirs, [0] * len(texts),
                                            [wall_ts(0)] * len(texts), [0] * len(texts)])
    cols = ["seq", "ok", "kind", "method", "rpc_id", "id_is_str", "msg_type", "payload", "known",
            "piece"]
    for row in con.execute(f"SELECT {', '.join(cols)} FROM wr_stage").fetchall():
        d = dict(zip(cols, row, strict=True))
        if d["ok"]:
            out[d["seq"]] = d
    con.execute("DROP TABLE wr_stage")
    return out
