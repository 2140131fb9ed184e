"""A fast start (issue 24, point 6): ``import harness`` and the commands that need none of the
heavy libraries do not import them; each is imported where it is used. ``harness``, ``hooks``
and ``repos`` resolve their public names on first use, and the command line imports a command's
module when the command runs, so ``import harness``, ``harness --help`` and ``harness sessions
list`` build only what they use (never asserted by timing: by the modules imported).

Each check runs in a fresh interpreter, since this test process has imported everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness
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


def _run(
    code: str, args: list[str], tmp_path: Path, env_extra: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``python -c code args`` in a fresh interpreter (HOME and the sessions
    folder under ``tmp_path``); it must succeed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(
        HOME=str(tmp_path),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        HARNESS_SESSIONS_DIR=str(tmp_path / "sessions"),
        PYTHONPATH=str(REPO_ROOT),
    )
    env.update(env_extra)
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def _loaded(code: str, args: list[str], tmp_path: Path) -> list[str]:
    stderr = _run(_REPORT + code, args, tmp_path, {"HEAVY": json.dumps(HEAVY)}).stderr
    report = stderr.rsplit("\nLOADED ", 1)[1]
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


# --- our own modules: each part is built when it is used -------------------------------------

# Prints, when the interpreter exits, which of our modules were loaded.
_OURS = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: sys.stderr.write('\\nOURS ' + json.dumps(sorted("
    "m for m in sys.modules if m.split('.')[0] in ('harness', 'hooks', 'repos')))))\n"
)
_CLI = "from harness.cli import main\nsys.argv[0] = 'harness'\nmain()"


def _ours(
    code: str, args: list[str], tmp_path: Path, env: dict[str, str] | None = None
) -> tuple[set[str], str]:
    """Our modules loaded by ``code`` run with ``args`` in a fresh interpreter, and its stdout."""
    done = _run(_OURS + code, args, tmp_path, env or {})
    return set(json.loads(done.stderr.rsplit("\nOURS ", 1)[1])), done.stdout


def test_import_harness_imports_nothing_else_of_ours(tmp_path: Path) -> None:
    """``harness``'s names are resolved on first use: importing it builds none of the event,
    entry, message, agent or permission classes."""
    assert _ours("import harness", [], tmp_path)[0] == {"harness"}


def test_reading_one_name_imports_only_where_it_is_defined(tmp_path: Path) -> None:
    loaded, _ = _ours("from harness import HarnessError", [], tmp_path)
    assert loaded == {"harness", "hooks", "hooks._errors"}


def test_help_imports_the_command_line_and_no_command(tmp_path: Path) -> None:
    loaded, out = _ours(_CLI, ["--help"], tmp_path)
    assert "sessions " in out and "templates " in out
    assert loaded == {"harness", "harness.cli", "harness.cli._escape", "harness.cli._lazy"}


# What the agent loop, the permissions, checkpoints, compaction, tools, providers, the hook bus,
# the SQLite store and the other commands build: `harness sessions list` needs none of it.
NOT_FOR_LIST = (
    "harness._agents",
    "harness._checkpoints",
    "harness._compaction",
    "harness._harness",
    "harness._mcp",
    "harness._permissions",
    "harness._providers",
    "harness._resources",
    "harness._tools",
    "hooks._bus",
    "hooks._events",
    "repos._sqlite",
    "harness.cli._agent",
    "harness.cli._chat",
    "harness.cli._copy",
    "harness.cli._export",
    "harness.cli._maintenance",
    "harness.cli._rpc",
    "harness.cli._run",
    "harness.cli._stats",
    "harness.cli._tree_ops",
)


async def test_sessions_list_imports_only_what_it_uses(tmp_path: Path) -> None:
    with await JsonlSessionRepo(tmp_path / "sessions").create(str(tmp_path)) as s:
        s.append_message(UserMessage(content="a question"))
    loaded, out = _ours(_CLI, ["sessions", "list"], tmp_path)
    assert "a question" in out  # the listing ran
    assert {"harness.cli._sessions", "repos._jsonl.repo"} <= loaded
    assert sorted(m for m in loaded if m.startswith(NOT_FOR_LIST)) == []


async def test_sessions_list_reading_the_users_store_setting_imports_no_permission_code(
    tmp_path: Path,
) -> None:
    """Without ``--root`` or ``$HARNESS_SESSIONS_DIR`` (the everyday case) a command reads the
    user settings' ``store``: that takes the settings file's path, not the rules, the shell
    parser and the supervisor (they were ~0.2 s of a 0.3 s listing)."""
    with await JsonlSessionRepo(tmp_path / "elsewhere").create(str(tmp_path)) as s:
        s.append_message(UserMessage(content="a question"))
    settings = tmp_path / "config/harness/settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"store": str(tmp_path / "elsewhere")}))
    env = {"HARNESS_SESSIONS_DIR": ""}  # empty: not set
    loaded, out = _ours(_CLI, ["sessions", "list"], tmp_path, env)
    assert "a question" in out  # the listing read the store the setting names
    assert sorted(m for m in loaded if m.startswith(NOT_FOR_LIST)) == [
        "harness._permissions",
        "harness._permissions.folders",
    ]


def test_every_public_name_resolves_on_first_use(tmp_path: Path) -> None:
    """In a fresh interpreter, each name of ``__all__`` of the three packages resolves, its
    class names its package as before, ``dir()`` lists it, and ``from harness import *`` binds
    exactly ``__all__``; each package's table of where a name is defined holds ``__all__``."""
    code = (
        "import harness, hooks, repos\n"
        "for package in (hooks, repos, harness):\n"
        "    names = set(package.__all__)\n"
        "    assert {n for ns in package._EXPORTS.values() for n in ns} == names\n"
        "    assert set(dir(package)) >= names\n"
        "    for name in package.__all__:\n"
        "        obj = getattr(package, name)\n"
        "        home = getattr(obj, '__module__', '') if isinstance(obj, type) else ''\n"
        "        if home.split('.')[0] in ('harness', 'hooks', 'repos'):\n"
        "            assert home in ('harness', 'hooks', 'repos'), (name, home)\n"
        "namespace = {}\n"
        "exec('from harness import *', namespace)\n"
        "assert set(namespace) - {'__builtins__'} == set(harness.__all__)\n"
        "assert namespace['AgentHarness'] is harness.AgentHarness\n"
        "print('resolved', len(namespace) - 1)\n"
    )
    out = _run(code, [], tmp_path, {}).stdout
    assert out.strip() == f"resolved {len(harness.__all__)}"


def test_star_import_in_a_fresh_interpreter(tmp_path: Path) -> None:
    code = (
        "from harness import *\n"
        "assert AgentHarness.__module__ == 'harness'\n"
        "assert JsonlSessionRepo.__module__ == 'repos'\n"
        "assert UserMessage(content='x').role == 'user'\n"
    )
    _run(code, [], tmp_path, {})


def test_a_missing_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        harness.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        exec("from repos import no_such_name", {})


def test_help_lists_each_command_as_its_own_help_does(tmp_path: Path) -> None:
    """``--help`` lists a command not yet imported by its summary; the text is the same, at
    every width, as once every command is imported."""
    code = (
        "import click\n"
        "from click.testing import CliRunner\n"
        "from harness.cli import main\n"
        "def helps():\n"
        "    return [\n"
        "        CliRunner().invoke(main, [*path, '--help'], terminal_width=w).output\n"
        "        for path in ([], ['sessions'], ['sessions', 'list'])\n"
        "        for w in (50, 64, 80)\n"
        "    ]\n"
        "lazy = helps()\n"
        "def load(group):\n"
        "    for name, command in group.commands.items():\n"
        "        assert command.name == name, (name, command.name)\n"
        "        if isinstance(command, click.Group):\n"
        "            load(command)\n"
        "load(main)\n"
        "assert 'harness.cli._tree_ops' in sys.modules  # every command is imported now\n"
        "assert helps() == lazy, (helps(), lazy)\n"
        "print(lazy[2])\n"
    )
    out = _run("import sys\n" + code, [], tmp_path, {}).stdout
    assert "Commands:" in out and "approvals" in out


def test_version_is_looked_up_when_asked_for(tmp_path: Path) -> None:
    """``--version`` prints what click's version option printed; ``--help`` does not import
    ``importlib.metadata`` to find it."""
    out = _run("import sys\n" + _CLI, ["--version"], tmp_path, {}).stdout
    assert out.startswith("harness, version ") and out.count("\n") == 1
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(\n"
        "    'META', 'importlib.metadata' in sys.modules, file=sys.stderr))\n"
    )
    code += _CLI
    assert "META False" in _run(code, ["--help"], tmp_path, {}).stderr
