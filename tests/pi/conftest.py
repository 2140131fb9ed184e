"""The ``pi`` test group: pi's own ``SessionManager`` (npm, run by node) reads our files.

The ``pi`` fixture installs ``@mariozechner/pi-coding-agent`` (pinned in ``pi_oracle``) once
into ``$HARNESS_PI_DIR`` or ``~/.cache/jsonl-harness-tests/pi-<version>``; without node and npm,
or when the install fails, every test of the group is skipped with one reason, reported once at
the end of the run.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

if "pi_oracle" not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        "pi_oracle", Path(__file__).resolve().parent / "pi_oracle.py"
    )
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["pi_oracle"] = _module
    _spec.loader.exec_module(_module)

from pi_oracle import PiReader, PiUnavailable, install_pi

_skip_reason: list[str] = []
_skipped = 0


def pytest_configure(config: pytest.Config) -> None:
    # pyproject registers the marker; should it not, it is registered here, never unknown.
    if not any(str(line).startswith("pi:") for line in config.getini("markers")):
        config.addinivalue_line(
            "markers", "pi: checks our files with pi's own SessionManager (needs node and npm)"
        )


@pytest.fixture(scope="session")
def pi_install() -> PiReader | str:
    try:
        return PiReader(*install_pi())
    except PiUnavailable as exc:
        return str(exc)


@pytest.fixture
def pi(pi_install: PiReader | str) -> PiReader:
    """pi's reader; skips (one reason for the whole group) when pi cannot run here."""
    global _skipped
    if isinstance(pi_install, str):
        if not _skip_reason:
            _skip_reason.append(pi_install)
        _skipped += 1
        pytest.skip(pi_install)
    return pi_install


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _skip_reason:
        terminalreporter.write_line(f"{_skip_reason[0]} ({_skipped} tests skipped)")
