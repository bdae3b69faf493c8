"""analysis/views.py `catalog_transaction` on a real DuckDB file: on its own it is one
transaction, committed or rolled back; inside a caller's transaction (DuckDB has no savepoints,
and a BEGIN there fails and aborts the caller's) its writes join the caller's, for the caller
to commit or roll back."""

from __future__ import annotations

import duckdb
import pytest

from wire_recorder.analysis import views
from wire_recorder.analysis.stored_views import store_views
from wire_recorder.recorder.store import open_store


@pytest.fixture
def db(tmp_path) -> str:
    path = str(tmp_path / "rec.db")
    with open_store(path):
        pass  # the recording's tables, no views yet
    return path


def _stored(db: str) -> tuple[str | None, list]:
    con = duckdb.connect(db, read_only=True)
    try:
        return views.stored_version(con), con.execute(
            "SELECT key FROM meta WHERE key LIKE 'caller-%' ORDER BY key").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("end", ["COMMIT", "ROLLBACK"])
def test_inside_a_callers_transaction_the_writes_are_the_callers(db, end):
    with open_store(db) as store:
        con = store.con
        assert views.stored_version(con) is None
        con.execute("BEGIN TRANSACTION")
        assert views.in_transaction(con)
        con.execute("INSERT INTO meta VALUES ('caller-1', 'before')")
        assert store_views(con)
        assert views.in_transaction(con)  # not committed (nor aborted) under the caller
        con.execute("INSERT INTO meta VALUES ('caller-2', 'after')")  # still usable
        assert views.stored_version(con) == views.VIEWS_VERSION
        con.execute(end)
        assert not views.in_transaction(con)
    want = (views.VIEWS_VERSION, [("caller-1",), ("caller-2",)]) if end == "COMMIT" else \
        (None, [])
    assert _stored(db) == want


def test_on_its_own_it_commits_or_rolls_back_its_writes(db):
    with open_store(db) as store:
        con = store.con
        assert not views.in_transaction(con)
        with pytest.raises(RuntimeError), views.catalog_transaction(con):
            con.execute("INSERT INTO meta VALUES ('caller-x', 'x')")
            assert views.in_transaction(con)
            raise RuntimeError("a catalog write failed")
        assert not views.in_transaction(con)
        assert views.stored_version(con) is None
        assert store_views(con)
        assert not views.in_transaction(con)
    assert _stored(db) == (views.VIEWS_VERSION, [])


def test_not_wanted_it_adds_no_transaction(db):
    with open_store(db) as store:
        con = store.con
        with views.catalog_transaction(con, wanted=False):
            assert not views.in_transaction(con)
            con.execute("INSERT INTO meta VALUES ('caller-a', 'a')")
    assert _stored(db) == (None, [("caller-a",)])
