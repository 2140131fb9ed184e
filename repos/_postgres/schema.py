"""The PostgreSQL schema of ``PostgresSessionRepo``: the tables of ``SqliteSessionRepo``.

``entries.line`` is ``BYTEA`` (the stored line, verbatim: a damaged line need not be UTF-8);
``session_backups.lines`` holds the old lines as they were in the file (newline-terminated).
"""

from __future__ import annotations

from typing import Any

import psycopg

from .._sql import Dialect

__all__ = ["POSTGRES", "SCHEMA_VERSION", "ensure_schema"]

SCHEMA_VERSION = 1


def _text(value: str | None) -> str | None:
    """PostgreSQL ``TEXT`` holds no NUL character (a message may: ``"\\u0000"`` in JSON)."""
    return value.replace("\x00", "") if value is not None else None


POSTGRES = Dialect(
    mark="%s",
    contains="strpos",
    id_order='id COLLATE "C"',
    no_limit=None,
    int64="BIGINT",
    blob="BYTEA",
    backup_lines="BYTEA",
    text=_text,
)
"""How PostgreSQL spells the shared SQL (``repos/_sql.py``)."""

_SCHEMA = (
    POSTGRES.schema() + ";\nCREATE TABLE IF NOT EXISTS harness_schema (version INTEGER NOT NULL)"
)

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
