"""Fixtures for end-to-end tests: the local replay server and a real SDK client pointed at it."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anthropic
import pytest


def _load_replay_server() -> None:
    """Make ``tests/replay_server.py`` importable as ``replay_server``.

    Loaded by path into ``sys.modules``: putting ``tests/`` on ``sys.path`` instead would let
    test folders such as ``tests/hooks`` shadow the real packages.
    """
    if "replay_server" in sys.modules:
        return
    path = Path(__file__).resolve().parents[1] / "replay_server.py"
    spec = importlib.util.spec_from_file_location("replay_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["replay_server"] = module
    spec.loader.exec_module(module)


_load_replay_server()

from replay_server import ReplayServer  # noqa: E402


@pytest.fixture
def replay_server() -> Iterator[ReplayServer]:
    """A running replay server; on teardown, every request must have found a scripted reply."""
    with ReplayServer() as server:
        yield server
        assert server.unexpected == [], "requests reached the replay server with no reply queued"


@pytest.fixture
async def anthropic_client(replay_server: ReplayServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    """The real SDK client against the replay server, with SDK retries off (max_retries=0)."""
    client = anthropic.AsyncAnthropic(api_key="test", base_url=replay_server.url, max_retries=0)
    try:
        yield client
    finally:
        await client.close()
