"""`wire-diff A B`: what changed between two sessions (or a recording and its replay report).

    from wire_recorder.analysis.diff import diff
    result = diff("before.db", "after.db")      # sessions by file, FILE#SESSION, or name/id
    result.same, [c.headline() for c in result.changes]

The sessions are read through the analysis views and compared by turn, step and order
(analysis/diff_compare.py), their volatile values masked as replay masks them
(analysis/diff_mask.py); a replay report's divergences are taken as they are."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from wire_recorder.recorder.errors import InputError

from .diff_compare import Change, Tolerance, compare
from .diff_inputs import ReplayReport, load_side
from .diff_trace import Trace

# a replay divergence's kind -> what it is called here
REPORT_KINDS = {"changed": "changed", "missing": "missing", "extra": "extra"}


@dataclass
class DiffResult:
    a: dict[str, Any]
    b: dict[str, Any]
    changes: list[Change]
    tolerance: Tolerance
    source: str = "sessions"  # or "replay-report"
    notes: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.changes

    @property
    def exit_code(self) -> int:
        return 0 if self.same else 1

    def to_dict(self) -> dict[str, Any]:
        t = self.tolerance
        return {"same": self.same, "source": self.source, "a": self.a, "b": self.b,
                "differences": [c.to_dict() for c in self.changes],
                "count": len(self.changes),
                "tolerance": {"time_ms": t.time_ms, "time_ratio": t.time_ratio,
                              "tokens": t.tokens},
                "notes": self.notes}


def diff(a: str, b: str, dbs: Sequence[str] = (), tolerance: Tolerance = Tolerance()
         ) -> DiffResult:
    """Compare session a with session b (see analysis/diff_inputs.py for what names one).
    Raises UserError subclasses for bad input."""
    side_a, side_b = load_side(a, list(dbs)), load_side(b, list(dbs))
    if isinstance(side_a, ReplayReport) and isinstance(side_b, ReplayReport):
        raise InputError("two replay reports: give a recording and the report of its replay",
                         "e.g. wire-diff rec.db report.json")
    if isinstance(side_a, ReplayReport) or isinstance(side_b, ReplayReport):
        rec, rep = (side_b, side_a) if isinstance(side_a, ReplayReport) else (side_a, side_b)
        assert isinstance(rec, Trace) and isinstance(rep, ReplayReport)
        return from_report(rec, rep, tolerance)
    assert isinstance(side_a, Trace) and isinstance(side_b, Trace)
    notes = []
    if side_a.protocol != side_b.protocol:
        notes.append(f"the sessions speak different protocols ({side_a.protocol}, "
                     f"{side_b.protocol}): they are compared by what the views share")
    return DiffResult(side_a.describe(), side_b.describe(), compare(side_a, side_b, tolerance),
                      tolerance, notes=notes)


def from_report(rec: Trace, rep: ReplayReport, tolerance: Tolerance) -> DiffResult:
    """The recording against its replay: the differences the replay found."""
    if rep.session_id != rec.session_id:
        raise InputError(f"{rep.path} reports on session {rep.session_id}, not on "
                         f"{rec.session_id} ({rec.path})",
                         "give the recording the report was made from")
    changes = []
    for d in rep.data.get("divergences") or []:
        if not isinstance(d, dict):
            continue
        kind = str(d.get("kind"))
        changes.append(Change(str(d.get("where") or "session"), str(d.get("message") or kind),
                              kind, d.get("expected"), d.get("got"),
                              REPORT_KINDS.get(kind, "changed")))
    if not changes and rep.data.get("ok") is False:
        # a replay that failed in an origin session or stopped, with no divergence of its own
        changes.append(Change("session", "replay verdict", "ok", True, False))
    notes = list(rep.data.get("notes") or [])
    return DiffResult(rec.describe(), rep.describe(), changes, tolerance, "replay-report",
                      [str(n) for n in notes])
