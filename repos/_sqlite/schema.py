"""The SQLite schema and connection settings of ``SqliteSessionRepo``.

A database file is untrusted (one downloaded with a bug report, a path a typo reached): it may
hold triggers that would fire on our inserts and change other rows, views standing in for our
tables, another program's schema, or values too large to hold. So a database is used only if its
schema is exactly the one this module writes (no trigger, view or other object), with
``trusted_schema`` off and values capped at :data:`MAX_VALUE_BYTES`; a path that is not a
regular file is refused before SQLite opens it.
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
from functools import cache
from pathlib import Path

from .._session import FsyncPolicy
from .._sql import Dialect

__all__ = [
    "MAX_VALUE_BYTES",
    "SCHEMA_VERSION",
    "SQLITE",
    "SchemaError",
    "connect",
    "ensure_schema",
]

MAX_VALUE_BYTES = 256 * 1024 * 1024
"""The largest string or blob read or written (SQLite's ``SQLITE_LIMIT_LENGTH``): a larger
value in a hostile file is an error (``string or blob too big``), not a read of gigabytes."""


class SchemaError(sqlite3.DatabaseError):
    """The database holds objects this harness did not write, or is no regular file."""


SCHEMA_VERSION = 1

SQLITE = Dialect(
    mark="?",
    contains="instr",
    id_order="id",
    no_limit=-1,
    int64="INTEGER",
    blob="BLOB",
    backup_lines="TEXT",
)
"""How SQLite spells the shared SQL (``repos/_sql.py``)."""

_SCHEMA = SQLITE.schema()


def connect(path: Path, *, fsync: FsyncPolicy, timeout: float) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), usable from any thread
    (callers serialise their own use), waiting up to ``timeout`` s for another writer."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise SchemaError(f"{path} is not a regular file (a FIFO, device or folder)")
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    # Functions with side effects never run from a schema's triggers or views (belt and
    # braces: ensure_schema refuses any trigger or view).
    conn.execute("PRAGMA trusted_schema = OFF")
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    conn.execute("PRAGMA synchronous = " + ("FULL" if fsync == "always" else "NORMAL"))
    return conn


def ensure_schema(conn: sqlite3.Connection) -> None:
    """WAL mode and the tables, created once (safe when several processes start at once).

    Raises:
        SchemaError: the database holds anything but this schema (a trigger, a view, another
            table, a table of another shape), before anything is written to it.
        sqlite3.OperationalError: a newer schema version, or no WAL.
    """
    # The schema is checked before anything is written, the journal mode included.
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    found = _objects(conn)
    if found and found != _expected() and version <= SCHEMA_VERSION:
        raise SchemaError(_unexpected(found))
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if mode is None or str(mode[0]).lower() != "wal":
        raise sqlite3.OperationalError(f"cannot switch to WAL (journal_mode is {mode})")
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


_COMMENT = re.compile(r"--[^\n]*")
_SPACE = re.compile(r"\s+")


def _objects(conn: sqlite3.Connection) -> frozenset[tuple[str, str, str, str | None]]:
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    return frozenset(
        (str(t), str(n), str(tb), None if q is None else _SPACE.sub(" ", _COMMENT.sub("", q)))
        for t, n, tb, q in rows
    )


@cache
def _expected() -> frozenset[tuple[str, str, str, str | None]]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(_SCHEMA)
        return _objects(conn)
    finally:
        conn.close()


def _unexpected(found: frozenset[tuple[str, str, str, str | None]]) -> str:
    expected = _expected()
    extra = sorted(f"{t} {n!r}" for t, n, _tb, _q in found - expected)
    missing = sorted(f"{t} {n!r}" for t, n, _tb, _q in expected - found)
    said = "; ".join(
        part
        for part in (
            f"objects it did not write: {', '.join(extra)}" if extra else "",
            f"missing or different: {', '.join(missing)}" if missing else "",
        )
        if part
    )
    return f"not a session store this harness wrote ({said}); refused, nothing was run"
