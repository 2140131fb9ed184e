"""The PostgreSQL schema of ``PostgresSessionRepo``: the tables of ``SqliteSessionRepo``.

``entries.line`` is ``BYTEA`` (the stored line, verbatim: a damaged line need not be UTF-8);
``session_backups.lines`` holds the old lines as they were in the file (newline-terminated).
"""

from __future__ import annotations

from typing import Any

import psycopg

__all__ = ["SCHEMA_VERSION", "ensure_schema"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id            TEXT PRIMARY KEY,
    cwd           TEXT NOT NULL,
    name          TEXT,
    parent        TEXT,
    created       BIGINT NOT NULL,           -- header timestamp, Unix ms
    modified      BIGINT NOT NULL,           -- last user/assistant message, else created
    last_activity BIGINT,                    -- that message's time, NULL when none
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
    line       BYTEA NOT NULL,               -- the JSON line, verbatim, without its newline
    UNIQUE (session_id, seq),
    UNIQUE (session_id, id)
);
CREATE TABLE IF NOT EXISTS session_backups (
    session_id TEXT NOT NULL,
    suffix     TEXT NOT NULL,                -- ".v1.bak": the lines before a migration
    header     TEXT NOT NULL,
    lines      BYTEA NOT NULL,               -- the old lines, newline-terminated
    PRIMARY KEY (session_id, suffix)
);
CREATE TABLE IF NOT EXISTS harness_schema (version INTEGER NOT NULL)
"""

# Any constant: every process creating the schema at once takes this lock first.
_SCHEMA_LOCK = 0x68617273


def ensure_schema(conn: psycopg.Connection[Any]) -> None:
    """Create the tables once (safe when several processes start at once). ``conn`` is in
    autocommit mode."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        exists = conn.execute("SELECT to_regclass('harness_schema') IS NOT NULL").fetchone()
        if exists is not None and exists[0]:
            row = conn.execute("SELECT max(version) FROM harness_schema").fetchone()
            version = row[0] if row is not None and row[0] is not None else 0
        else:
            version = 0
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise psycopg.DataError(
                f"the database has schema version {version}; this harness knows {SCHEMA_VERSION}"
            )
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement.encode())
        conn.execute("DELETE FROM harness_schema")
        conn.execute("INSERT INTO harness_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
