"""Real MCP servers for the tests (``mcp_servers.py``, loaded by path as ``mcp_servers``):
in-process, stdio subprocesses, and streamable HTTP on 127.0.0.1 in a subprocess of its own."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness import HttpServer, SseServer

SCRIPT = Path(__file__).resolve().parent / "mcp_servers.py"
if "mcp_servers" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("mcp_servers", SCRIPT)
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["mcp_servers"] = _module
    _spec.loader.exec_module(_module)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    """The probe server over streamable HTTP on 127.0.0.1, for one test."""
    port = _free_port()
    with _serving("--http", port):
        yield HttpServer(f"http://127.0.0.1:{port}/mcp")


@pytest.fixture
def sse_server() -> Iterator[SseServer]:
    """The probe server over HTTP+SSE on 127.0.0.1, for one test."""
    port = _free_port()
    with _serving("--sse", port):
        yield SseServer(f"http://127.0.0.1:{port}/sse")


@contextmanager
def _serving(flag: str, port: int) -> Iterator[None]:
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), flag, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP MCP server did not start") from None
                time.sleep(0.05)
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)
