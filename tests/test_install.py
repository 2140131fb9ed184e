"""A user's script type-checks against the installed package under ``mypy --strict``.

The first test uses the environment the tests run in (made by the README's own command, an
editable install). The second makes a fresh virtualenv with the README's command and needs the
package index, so it runs only when ``HARNESS_TEST_INSTALL=1`` (``.ci/run`` sets it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

USER_SCRIPT = """\
import asyncio

from harness import AgentHarness, AssistantMessage, FauxModel, MemorySessionRepo


async def main() -> AssistantMessage:
    session = await MemorySessionRepo().create()
    return await AgentHarness(session=session, model=FauxModel(["hi"])).prompt("x")


reply: AssistantMessage = asyncio.run(main())
print(reply.text)
"""

# A deliberate type error: proves mypy really sees harness's types (an untyped or missing module
# would make this pass silently under a lax setting, and fail with "cannot find" under --strict).
BROKEN_SCRIPT = """\
from harness import AgentHarness

count: int = AgentHarness.prompt
"""


def _mypy(python: Path | str, folder: Path, *files: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYPY")}
    return subprocess.run(
        [str(python), "-m", "mypy", "--strict", "--no-incremental", *(files or ["script.py"])],
        cwd=folder,  # not the repository: harness must come from the installation
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.py").write_text(text)
    return folder


def test_a_user_script_type_checks_in_the_test_environment(tmp_path: Path) -> None:
    # Both scripts in one mypy run: checking harness's own modules is most of the time.
    folder = _write(tmp_path / "scripts", USER_SCRIPT)
    (folder / "broken.py").write_text(BROKEN_SCRIPT)
    both = _mypy(sys.executable, folder, "script.py", "broken.py")
    assert both.returncode == 1, both.stdout + both.stderr
    assert [line for line in both.stdout.splitlines() if line.startswith("script.py")] == []
    assert "broken.py:3: error: Incompatible types in assignment" in both.stdout
    assert "Cannot find implementation" not in both.stdout


@pytest.mark.install
@pytest.mark.skipif(
    os.environ.get("HARNESS_TEST_INSTALL") != "1",
    reason="needs the package index: set HARNESS_TEST_INSTALL=1 to make a fresh virtualenv",
)
def test_a_user_script_type_checks_after_the_readmes_editable_install(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # The README's install, `pip install -q -e .`, run from the repository, plus mypy itself.
    for args in (["-e", "."], ["mypy"]):
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *args],
            cwd=ROOT,
            check=True,
            timeout=600,
        )
    ok = _mypy(python, _write(tmp_path / "ok", USER_SCRIPT))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    run = subprocess.run(
        [str(python), "script.py"], cwd=tmp_path / "ok", capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout.strip() == "hi", run.stderr
