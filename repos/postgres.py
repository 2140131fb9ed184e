"""``from repos.postgres import PostgresSessionRepo``: the PostgreSQL store, kept out of
``repos`` itself so that ``import repos`` never needs the optional ``postgres`` extra
(``pip install 'jsonl-harness[postgres]'``)."""

from ._postgres import Changes, PostgresSessionRepo, SessionWatch

__all__ = ["Changes", "PostgresSessionRepo", "SessionWatch"]
