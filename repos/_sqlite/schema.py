"""The SQLite schema and connection settings of ``SqliteSessionRepo``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .._session import FsyncPolicy

__all__ = ["SCHEMA_VERSION", "connect", "ensure_schema"]

SCHEMA_VERSION = 1

_SCHEMA = """
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


def connect(path: Path, *, fsync: FsyncPolicy, timeout: float) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), usable from any thread
    (callers serialise their own use), waiting up to ``timeout`` s for another writer."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    conn.execute("PRAGMA synchronous = " + ("FULL" if fsync == "always" else "NORMAL"))
    return conn


def ensure_schema(conn: sqlite3.Connection) -> None:
    """WAL mode and the tables, created once (safe when several processes start at once)."""
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if mode is None or str(mode[0]).lower() != "wal":
        raise sqlite3.OperationalError(f"cannot switch to WAL (journal_mode is {mode})")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise sqlite3.OperationalError(
            f"the database has schema version {version}; this harness knows {SCHEMA_VERSION}"
        )
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
