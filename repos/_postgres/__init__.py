"""``PostgresSessionRepo``: many sessions in one PostgreSQL database, for many machines.

Needs the ``postgres`` extra (``psycopg[binary]``, ``psycopg-pool``); importing this package
without them raises ``ImportError``.
"""

from .repo import PostgresSessionRepo
from .watch import Changes, SessionWatch

__all__ = ["Changes", "PostgresSessionRepo", "SessionWatch"]
