"""A fast start (issue 24, point 6): ``import harness`` and the commands that need none of the
heavy libraries do not import them; each is imported where it is used.

Each check runs in a fresh interpreter, since this test process has imported everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import AssistantMessage, JsonlSessionRepo, TextContent, UserMessage

REPO_ROOT = Path(__file__).resolve().parents[2]

HEAVY = (
    "jsonschema",
    "yaml",
    "pathspec",
    "wcmatch",
    "prompt_toolkit",
    "anthropic",
    "openai",
    "mcp",
    "markdown_it",
    "pygments",
    "opentelemetry",
)

# Prints, when the interpreter exits, which heavy packages were loaded (top-level names).
_REPORT = (
    "import atexit, json, os, sys\n"
    "atexit.register(lambda: sys.stderr.write('\\nLOADED ' + json.dumps(sorted("
    "{m.split('.')[0] for m in sys.modules} & set(json.loads(os.environ['HEAVY']))))))\n"
)


def _loaded(code: str, args: list[str], tmp_path: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(
        HOME=str(tmp_path),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        HARNESS_SESSIONS_DIR=str(tmp_path / "sessions"),
        PYTHONPATH=str(REPO_ROOT),
        HEAVY=json.dumps(HEAVY),
    )
    done = subprocess.run(
        [sys.executable, "-c", _REPORT + code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = done.stderr.rsplit("\nLOADED ", 1)[1]
    return list(json.loads(report))


def test_import_harness_imports_no_heavy_library(tmp_path: Path) -> None:
    assert _loaded("import harness", [], tmp_path) == []


@pytest.mark.parametrize("args", [["--help"], ["sessions", "list"]], ids=["help", "list"])
async def test_light_commands_import_no_heavy_library(tmp_path: Path, args: list[str]) -> None:
    with await JsonlSessionRepo(tmp_path / "sessions").create(str(tmp_path)) as s:
        s.append_message(UserMessage(content="a question"))
        s.append_message(AssistantMessage(content=[TextContent(text="an answer")]))
    code = "from harness.cli import main\nsys.argv[0] = 'harness'\nmain()"
    assert _loaded(code, args, tmp_path) == []


def test_the_heavy_libraries_still_load_where_used(tmp_path: Path) -> None:
    """The lazy imports are real: validating a tool's input still reaches ``jsonschema``,
    YAML frontmatter ``yaml`` (and a broken one is still an error)."""
    code = (
        "import harness\n"
        "from harness import tool\n"
        "from harness._tools.base import validate_input\n"
        "from harness._resources.frontmatter import FrontmatterError, split_frontmatter\n"
        "@tool('t', 'a tool', {'type': 'object', 'properties': {'n': {'type': 'integer'}}})\n"
        "async def t(input, run):\n"
        "    return ''\n"
        "assert validate_input(t, {'n': 'x'}) is not None\n"
        "assert split_frontmatter('---\\nname: x\\n---\\nbody') == ({'name': 'x'}, 'body')\n"
        "try:\n"
        "    split_frontmatter('---\\n[\\n---\\n')\n"
        "except FrontmatterError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('bad YAML was accepted')\n"
    )
    assert _loaded(code, [], tmp_path) == ["jsonschema", "yaml"]
