"""Real folder trees for the resources tests: a project (a git repository) and the user's
config folder (the autouse ``$XDG_CONFIG_HOME`` of tests/conftest.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from harness import JsonlSessionRepo

_spec = importlib.util.spec_from_file_location(
    "resource_trees", Path(__file__).parent / "resource_trees.py"
)
assert _spec is not None and _spec.loader is not None
if "resource_trees" not in sys.modules:
    sys.modules["resource_trees"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["resource_trees"])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository root (holds ``.git``) with a working folder ``app/`` inside it."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "app").mkdir()
    return root


@pytest.fixture
def user_config() -> Path:
    """``platformdirs.user_config_path("harness")`` for this test (empty at first)."""
    return Path(os.environ["XDG_CONFIG_HOME"]) / "harness"


@pytest.fixture
def repo(tmp_path: Path) -> JsonlSessionRepo:
    return JsonlSessionRepo(tmp_path / "sessions")
