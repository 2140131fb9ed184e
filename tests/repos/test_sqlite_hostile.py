"""A hostile SQLite store file (``sqlite:`` pointing at a downloaded ``.db``) runs nothing and
is refused with a clear error (adversarial review after issue 18).

Reproduction: a database with our schema plus ``CREATE TRIGGER t AFTER INSERT ON entries BEGIN
INSERT INTO loot VALUES (new.line); UPDATE sessions SET cwd = '/etc/cron.d'; END`` was opened,
and the first append copied the line into ``loot`` and rewrote every session's ``cwd``; a
database whose ``sessions`` was a view, or another program's tables, failed later with a bare
``sqlite3.OperationalError``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from repos import SqliteSessionRepo, StorageError
from repos._sqlite.schema import _SCHEMA


def make(path: Path, extra: str, *, schema: str = _SCHEMA, version: int = 1) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(schema)
    conn.executescript(extra)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()
    return path


HOSTILE = {
    "trigger_on_insert": (
        "CREATE TABLE loot (x); CREATE TRIGGER t AFTER INSERT ON entries BEGIN "
        "INSERT INTO loot VALUES (new.line); UPDATE sessions SET cwd = '/etc/cron.d'; END;",
        _SCHEMA,
        1,
    ),
    "trigger_on_update": (
        "CREATE TRIGGER t AFTER UPDATE ON sessions BEGIN DELETE FROM entries; END;",
        _SCHEMA,
        1,
    ),
    "extra_view": ("CREATE VIEW v AS SELECT * FROM entries;", _SCHEMA, 1),
    "views_for_tables": (
        "",
        "CREATE TABLE real (x); CREATE VIEW sessions AS SELECT 1 AS id; "
        "CREATE VIEW entries AS SELECT 1 AS line;",
        1,
    ),
    "another_programs_tables": ("", "CREATE TABLE sessions (a); CREATE TABLE entries (b);", 1),
    "another_program_unversioned": ("", "CREATE TABLE sessions (a); CREATE TABLE x (y);", 0),
    "a_column_more": (
        "ALTER TABLE entries ADD COLUMN evil TEXT DEFAULT 'x';",
        _SCHEMA,
        1,
    ),
}


def triggers_and_tables(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        return sorted(conn.execute("SELECT type, name FROM sqlite_master").fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize(("extra", "schema", "version"), HOSTILE.values(), ids=HOSTILE.keys())
async def test_a_database_we_did_not_write_is_refused_unchanged(
    tmp_path: Path, extra: str, schema: str, version: int
) -> None:
    db = make(tmp_path / "downloaded.db", extra, schema=schema, version=version)
    before = db.read_bytes()
    objects = triggers_and_tables(db)
    with pytest.raises(StorageError, match="not a session store this harness wrote"):
        SqliteSessionRepo(db)
    assert triggers_and_tables(db) == objects
    assert db.read_bytes() == before  # not even switched to WAL


async def test_our_own_database_still_opens(tmp_path: Path) -> None:
    repo = SqliteSessionRepo(tmp_path / "s.db")
    session = await repo.create(str(tmp_path))
    session.append_custom("x", {"a": 1})
    session.close()
    repo.close()
    again = SqliteSessionRepo(tmp_path / "s.db")
    assert [i.id for i in await again.list()] == [session.id]
    again.close()


# The tables as version 1 wrote them (the text SQLite keeps in ``sqlite_master``), before the
# schema was shared with PostgreSQL (``repos/_sql.py``): a database written then still opens.
_V1_TABLES = """
CREATE TABLE IF NOT EXISTS sessions (
    id            TEXT PRIMARY KEY,
    cwd           TEXT NOT NULL,
    name          TEXT,
    parent        TEXT,
    created       INTEGER NOT NULL,          -- header timestamp, Unix ms
    modified      INTEGER NOT NULL,          -- last user/assistant message, else created
    last_activity INTEGER,                   -- that message's time, NULL when none
    message_count INTEGER NOT NULL DEFAULT 0,
    first_message TEXT NOT NULL DEFAULT '',
    header        TEXT NOT NULL,             -- line 1 of the file, verbatim (JSON)
    incarnation   TEXT NOT NULL              -- changes when an id is deleted and reused
);
CREATE INDEX IF NOT EXISTS sessions_cwd ON sessions (cwd, modified);
CREATE INDEX IF NOT EXISTS sessions_modified ON sessions (modified);
CREATE TABLE IF NOT EXISTS entries (
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,             -- the line number in the file (header = 1)
    id         TEXT,                         -- NULL for lines without an id of their own
    line       BLOB NOT NULL,                -- the JSON line, verbatim, without its newline
    UNIQUE (session_id, seq),
    UNIQUE (session_id, id)
);
CREATE TABLE IF NOT EXISTS session_backups (
    session_id TEXT NOT NULL,
    suffix     TEXT NOT NULL,                -- ".v1.bak": the lines before a migration
    header     TEXT NOT NULL,
    lines      TEXT NOT NULL,                -- JSON array of the old lines
    PRIMARY KEY (session_id, suffix)
);
"""


async def test_a_database_written_by_schema_version_1_still_opens(tmp_path: Path) -> None:
    db = make(tmp_path / "v1.db", "", schema=_V1_TABLES)
    conn = sqlite3.connect(db)
    conn.execute(
        "INSERT INTO sessions (id, cwd, created, modified, header, incarnation)"
        " VALUES ('s1', '/w', 0, 0, ?, 'i')",
        (
            '{"type":"session","version":3,"id":"s1","timestamp":"1970-01-01T00:00:00.000Z",'
            '"cwd":"/w"}',
        ),
    )
    conn.commit()
    conn.close()
    repo = SqliteSessionRepo(db)
    assert [i.id for i in await repo.list()] == ["s1"]
    with await repo.open("s1") as session:
        session.append_custom("x", {"a": 1})
    repo.close()


def test_a_path_that_is_no_regular_file_is_refused_before_sqlite_opens_it(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "store.db"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(StorageError, match="not a regular file"):
            SqliteSessionRepo(path)


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all\n" * 100)
    with pytest.raises(StorageError, match="cannot open the database"):
        SqliteSessionRepo(junk)
    assert junk.read_bytes() == b"not sqlite at all\n" * 100


# Columns holding what this harness never writes there, in a database of our exact schema.
BAD_COLUMNS = {
    "created_out_of_range": "UPDATE sessions SET created = 9223372036854775807",
    "modified_text": "UPDATE sessions SET modified = 'yesterday'",
    "first_message_blob": "UPDATE sessions SET first_message = x'ff00fe'",
    "count_text": "UPDATE sessions SET message_count = 'lots'",
    "parent_blob": "UPDATE sessions SET parent = x'00'",
}


@pytest.mark.parametrize("sql", BAD_COLUMNS.values(), ids=BAD_COLUMNS.keys())
async def test_a_row_with_columns_we_never_write_is_left_out_of_the_list(
    tmp_path: Path, sql: str
) -> None:
    db = tmp_path / "s.db"
    repo = SqliteSessionRepo(db)
    bad = await repo.create(str(tmp_path))
    good = await repo.create(str(tmp_path))
    bad.close()
    good.close()
    conn = sqlite3.connect(db)
    conn.execute(f"{sql} WHERE id = ?", (bad.id,))
    conn.commit()
    conn.close()
    assert [i.id for i in await repo.list()] == [good.id]  # raised ValueError/TypeError before
    repo.close()


@pytest.mark.parametrize("value", ["'not a line'", "42", "x'00'"])
async def test_a_line_of_another_type_is_a_damaged_line(tmp_path: Path, value: str) -> None:
    db = tmp_path / "s.db"
    repo = SqliteSessionRepo(db)
    session = await repo.create(str(tmp_path))
    session.append_custom("x", {"a": 1})
    session.append_custom("y", {"b": 2})
    session.close()
    conn = sqlite3.connect(db)
    conn.execute(f"UPDATE entries SET line = {value} WHERE seq = 2")
    conn.commit()
    conn.close()
    again = await repo.open(session.id)  # TypeError for text before
    assert [e.custom_type for e in again.entries()] == ["y"]  # type: ignore[attr-defined]
    assert "corrupt_line" in [d.code for d in again.diagnostics]
    again.close()
    repo.close()
