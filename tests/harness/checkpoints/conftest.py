"""Fixtures of the checkpoint tests: a workspace (a git repository, or a plain folder) and a
session for it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from workspaces import seed

from harness import JsonlSessionRepo, Session


@pytest.fixture(params=["git", "plain"])
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "git" and shutil.which("git") is None:
        pytest.skip("git is not installed")
    return str(request.param)


@pytest.fixture
def ws(tmp_path: Path, kind: str) -> Path:
    return seed(tmp_path / "ws", kind)


@pytest.fixture
def repo(tmp_path: Path) -> JsonlSessionRepo:
    return JsonlSessionRepo(tmp_path / "sessions")


@pytest.fixture
async def session(repo: JsonlSessionRepo, ws: Path) -> Session:
    return await repo.create(str(ws))
