"""``repos.testing.ConformanceSuite`` on our own repositories (DESIGN §1, §4).

Both pass every case; a case a repo is known to fail would be overridden here with
``xfail(strict=True)`` (see the suite's docstring).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from repos import JsonlSessionRepo, MemorySessionRepo
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
