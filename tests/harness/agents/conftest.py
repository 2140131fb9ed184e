"""Fixtures of the sub-agent, run limit, structured output and approval tests; helpers in
``agent_helpers.py`` (loaded by path into ``sys.modules``, as the other test folders do)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from harness import JsonlSessionRepo, Session

if "agent_helpers" not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        "agent_helpers", Path(__file__).with_name("agent_helpers.py")
    )
    assert _spec is not None and _spec.loader is not None
    sys.modules["agent_helpers"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["agent_helpers"])


@pytest.fixture
def repo(tmp_path: Path) -> JsonlSessionRepo:
    return JsonlSessionRepo(tmp_path / "sessions")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The working folder (untrusted unless a test trusts it)."""
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
async def session(repo: JsonlSessionRepo, project: Path) -> Session:
    return await repo.create(str(project))
