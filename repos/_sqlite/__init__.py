"""``SqliteSessionRepo``: many sessions in one SQLite file (WAL), for one machine and many
processes."""

from .repo import SqliteSessionRepo

__all__ = ["SqliteSessionRepo"]
