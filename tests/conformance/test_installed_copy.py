"""``repos.testing`` ships in the wheel and works from an installed copy: a third party's test
module, in a folder of its own with pytest-asyncio in strict mode, subclasses the suite and
passes.

Building the wheel runs pip's isolated build, which fetches hatchling from the package index
(or pip's cache); when that cannot be reached, the test is skipped with pip's message.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

THIRD_PARTY_TESTS = """\
import os
from pathlib import Path

import pytest
import pytest_asyncio

import repos.testing
from repos import JsonlSessionRepo, MemorySessionRepo
from repos.testing import ConformanceSuite


def test_the_suite_comes_from_the_installed_copy():
    here = Path(repos.testing.__file__).resolve()
    assert here.is_relative_to(Path(os.environ["INSTALLED_SITE"]).resolve()), here


class TestWithAPlainFixture(ConformanceSuite):
    supports_paths = False

    @pytest.fixture
    def session_repo(self):
        return MemorySessionRepo()


class TestWithAnAsyncFixture(ConformanceSuite):
    supports_paths = False

    @pytest_asyncio.fixture
    async def session_repo(self):
        yield MemorySessionRepo()


class TestJsonlSessionRepo(ConformanceSuite):
    @pytest.fixture
    def session_repo(self, tmp_path):
        return JsonlSessionRepo(tmp_path / "sessions")
"""

PYTEST_INI = """\
[pytest]
asyncio_mode = strict
asyncio_default_fixture_loop_scope = function
filterwarnings = error
"""

PIP_INSTALL = (sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index")
NO_INDEX = ("No matching distribution", "Could not find a version", "NewConnectionError")


def _build_wheel(out: Path) -> Path:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if built.returncode != 0:
        if any(marker in built.stderr + built.stdout for marker in NO_INDEX):
            pytest.skip(f"cannot fetch the build backend: {built.stderr.strip()[-300:]}")
        pytest.fail(f"pip wheel failed:\n{built.stdout}\n{built.stderr}")
    [wheel] = out.glob("jsonl_harness-*.whl")
    return wheel


def test_a_third_party_runs_the_suite_from_an_installed_wheel(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for module in ("__init__", "_suite", "_helpers"):
        assert f"repos/testing/{module}.py" in names

    site = tmp_path / "site"
    installed = subprocess.run(
        [*PIP_INSTALL, "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    # The installed distribution's own file list holds the suite.
    [dist] = [
        d
        for d in importlib.metadata.distributions(path=[str(site)])
        if d.metadata["Name"] == "jsonl-harness"
    ]
    files = {str(f) for f in dist.files or ()}
    assert "repos/testing/__init__.py" in files and "repos/testing/_suite.py" in files
    assert Path(str(dist.locate_file("repos/testing/__init__.py"))).is_file()

    project = tmp_path / "third_party"
    project.mkdir()
    (project / "pytest.ini").write_text(PYTEST_INI)
    (project / "test_their_repo.py").write_text(THIRD_PARTY_TESTS)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHON"))},
        "PYTHONPATH": str(site),  # ahead of the editable install in site-packages
        "INSTALLED_SITE": str(site),
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", "."],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    summary = out.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed is not None, out
    assert int(passed.group(1)) > 20, summary
    assert not re.search(r"\d+ (failed|errors?)\b", summary), summary
    assert "xfailed" not in summary, summary
