"""``repos.testing.ConformanceSuite`` on our own repositories (DESIGN §1, §4).

Both pass every case; a case a repo is known to fail would be overridden here with
``xfail(strict=True)`` (see the suite's docstring).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from repos import JsonlSessionRepo, MemorySessionRepo, SqliteSessionRepo
from repos.testing import ConformanceSuite


class TestMemorySessionRepo(ConformanceSuite):
    supports_paths = False

    @pytest.fixture
    def session_repo(self) -> MemorySessionRepo:
        return MemorySessionRepo()


class TestJsonlSessionRepo(ConformanceSuite):
    @pytest.fixture
    def session_repo(self, tmp_path: Path) -> JsonlSessionRepo:
        return JsonlSessionRepo(tmp_path / "sessions")


class TestSqliteSessionRepo(ConformanceSuite):
    supports_paths = False

    @pytest.fixture
    def session_repo(self, tmp_path: Path) -> SqliteSessionRepo:
        return SqliteSessionRepo(tmp_path / "sessions.db")


@pytest.mark.postgres
class TestPostgresSessionRepo(ConformanceSuite):
    """Against a throwaway server (``tests/postgres_server.py``), a fresh database per case."""

    supports_paths = False

    @pytest.fixture
    def session_repo(self, postgres_url: str) -> Iterator[object]:
        from repos.postgres import PostgresSessionRepo

        repo = PostgresSessionRepo(postgres_url, max_size=4)
        yield repo
        repo.close()
