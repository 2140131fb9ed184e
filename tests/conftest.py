"""Shared test fixtures. Real inputs are read in place from ``../shared/fixtures`` (beside the
repository root), never copied into the project."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

SHARED_FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"


@pytest.fixture
def fixtures_dir() -> Path:
    """``../shared/fixtures``; the tests that need it fail loudly if it is missing."""
    assert SHARED_FIXTURES.is_dir(), f"shared fixtures not found at {SHARED_FIXTURES}"
    return SHARED_FIXTURES


@pytest.fixture
def pi_copy(fixtures_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A function copying a pi fixture into ``tmp_path`` (for tests that write to it)."""

    def copy(name: str) -> Path:
        target = tmp_path / "copies" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(fixtures_dir / "pi" / name, target)
        return target

    return copy
