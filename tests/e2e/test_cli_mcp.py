"""``harness mcp list|add|remove`` and ``run`` with MCP servers, for real in subprocesses, with
the test suite's stdio MCP server (``tests/harness/mcp/mcp_servers.py``, written with the
``mcp`` SDK). The user's settings live in a ``$XDG_CONFIG_HOME`` under ``tmp_path``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_in_process import needs_process, run_cli

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER = REPO_ROOT / "tests" / "harness" / "mcp" / "mcp_servers.py"

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def config_home(tmp_path: Path) -> Path:
    return tmp_path / "config"


@pytest.fixture
def harness(tmp_path: Path, work: Path, config_home: Path) -> Run:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    base.update(
        HARNESS_SESSIONS_DIR=str(tmp_path / "sessions"),
        PYTHONIOENCODING="utf-8",
        PYTHONPATH=str(REPO_ROOT),
        XDG_CONFIG_HOME=str(config_home),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )

    def run(
        *args: str | Path, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        if not needs_process(args):  # the same entry point, in-process (``cli_in_process``)
            return run_cli(args, env={**base, **(env or {})}, cwd=work)
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", *map(str, args)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env={**base, **(env or {})},
            cwd=work,
            timeout=120,
            check=False,
        )

    return run


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def user_settings(config_home: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((config_home / "harness" / "settings.json").read_text())
    return data


def test_add_list_and_remove_a_stdio_server(harness: Run, config_home: Path) -> None:
    ok(
        harness(
            "mcp", "add", "probe", "-e", "GREETING=${USER:-someone}", "--", sys.executable, SERVER
        )
    )
    entry = user_settings(config_home)["mcpServers"]
    assert entry == {
        "probe": {
            "command": sys.executable,
            "args": [str(SERVER)],
            "env": {"GREETING": "${USER:-someone}"},  # expanded when it starts, not here
        }
    }
    listed = json.loads(ok(harness("mcp", "list", "--json")).stdout)
    (probe,) = listed
    assert probe["state"] == "ready" and probe["transport"] == "stdio"
    assert "mcp__probe__echo" in probe["tools"]
    text = ok(harness("mcp", "list")).stdout
    assert "probe: connected" in text and "  mcp__probe__danger" in text
    ok(harness("mcp", "remove", "probe"))
    assert user_settings(config_home)["mcpServers"] == {}
    gone = harness("mcp", "remove", "probe")
    assert gone.returncode == 1 and "error[mcp_config]" in gone.stderr


def test_add_an_http_server_with_headers_to_the_project(harness: Run, work: Path) -> None:
    ok(
        harness(
            "mcp",
            "add",
            "docs",
            "--url",
            "http://127.0.0.1:9/mcp",
            "-H",
            "Authorization: Bearer ${T}",
            "--scope",
            "project",
        )
    )
    written = json.loads((work / ".mcp.json").read_text())
    assert written == {
        "mcpServers": {
            "docs": {
                "type": "http",
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": "Bearer ${T}"},
            }
        }
    }
    bad = harness("mcp", "add", "bad__name", "--", "true")
    assert bad.returncode == 1 and "error[mcp_config]" in bad.stderr


def test_add_takes_claude_codes_options(harness: Run, work: Path, config_home: Path) -> None:
    # As Claude Code's docs spell them: -t, a URL after the name, -s local|project|user.
    ok(harness("mcp", "add", "-t", "http", "notion", "http://127.0.0.1:9/mcp", "-s", "user"))
    ok(harness("mcp", "add", "--transport", "sse", "-s", "project", "asana", "http://127.0.0.1:9/sse",
               "-H", "X-Key: ${K}"))  # fmt: skip
    ok(harness("mcp", "add", "-t", "stdio", "-s", "local", "airtable", "-e", "KEY=v", "--",
               sys.executable, SERVER, "--flag"))  # fmt: skip
    settings = user_settings(config_home)
    assert settings["mcpServers"] == {"notion": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}
    assert settings["projects"] == {
        str(work.resolve()): {
            "mcpServers": {
                "airtable": {
                    "command": sys.executable,
                    "args": [str(SERVER), "--flag"],
                    "env": {"KEY": "v"},
                }
            }
        }
    }
    assert json.loads((work / ".mcp.json").read_text())["mcpServers"] == {
        "asana": {"type": "sse", "url": "http://127.0.0.1:9/sse", "headers": {"X-Key": "${K}"}}
    }
    # The local server is this folder's only; list shows where it came from.
    listed = json.loads(ok(harness("mcp", "list", "--json")).stdout)
    sources = {entry["name"]: entry["source"] for entry in listed}
    assert sources["airtable"].endswith(f"(local: {work.resolve()})")
    elsewhere = work / "sub"
    elsewhere.mkdir()
    listed = ok(harness("mcp", "list", "--json", "--cwd", elsewhere)).stdout
    assert "airtable" not in listed
    ok(harness("mcp", "remove", "airtable", "-s", "local"))
    assert user_settings(config_home)["projects"] == {str(work.resolve()): {"mcpServers": {}}}


def test_an_untrusted_projects_servers_start_nothing_and_list_says_why(
    harness: Run, work: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    script = f"open({str(marker)!r}, 'w').close()"
    (work / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"evil": {"command": sys.executable, "args": ["-c", script]}}})
    )
    listed = ok(harness("mcp", "list")).stdout
    assert "evil: skipped" in listed and "not trusted" in listed and "--trust-project" in listed
    ran = ok(harness("run", "--offline", "-p", "hello"))
    assert "does not start" in ran.stderr and "not trusted" in ran.stderr
    assert not marker.exists()  # nothing ran
    trusted = harness("mcp", "list", "--trust-project")
    assert marker.exists()  # trusted: the command ran (and failed to speak MCP)
    assert "evil: failed" in trusted.stdout


def test_list_json_is_one_array_with_the_same_keys_for_every_server(
    harness: Run, work: Path
) -> None:
    ok(harness("mcp", "add", "probe", "--", sys.executable, SERVER))
    (work / ".mcp.json").write_text(json.dumps({"mcpServers": {"theirs": {"command": "true"}}}))
    rows = json.loads(ok(harness("mcp", "list", "--json")).stdout)
    assert [(r["name"], r["state"]) for r in rows] == [("probe", "ready"), ("theirs", "skipped")]
    assert rows[0].keys() == rows[1].keys()
    assert rows[1]["tools"] == [] and "not trusted" in rows[1]["reason"]


def test_run_offline_calls_an_mcp_tool_allowed_by_a_rule(harness: Run, config_home: Path) -> None:
    ok(harness("mcp", "add", "probe", "--", sys.executable, SERVER))
    denied = ok(
        harness("run", "--offline", "--output", "json", "-p", '@mcp__probe__danger {"path": "x"}')
    )
    reply = json.loads(denied.stdout)["result"]
    assert "mcp__probe__danger failed" in reply
    assert "'mcp__probe__danger'" in reply  # the rule that would allow it
    read_only = ok(harness("run", "--offline", "-p", '@mcp__probe__echo {"text": "hi there"}'))
    assert "mcp__probe__echo returned: hi there" in read_only.stdout
    settings = user_settings(config_home)
    settings["permissions"] = {"allow": ["mcp__probe__danger"]}
    (config_home / "harness" / "settings.json").write_text(json.dumps(settings))
    allowed = ok(harness("run", "--offline", "-p", '@mcp__probe__danger {"path": "x"}'))
    assert "mcp__probe__danger returned: deleted x" in allowed.stdout


def test_a_server_that_fails_to_start_is_named_and_the_run_goes_on(
    harness: Run, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-server"
    ok(harness("mcp", "add", "broken", "--", missing))
    ran = ok(harness("run", "--offline", "-p", "hello"))
    assert "(offline) You said: hello" in ran.stdout
    assert "'broken'" in ran.stderr and str(missing) in ran.stderr
    listed = ok(harness("mcp", "list")).stdout
    assert "broken: failed" in listed and str(missing) in listed


def test_without_the_mcp_extra_run_goes_on_and_warns_once_naming_it(
    tmp_path: Path, config_home: Path
) -> None:
    settings = config_home / "harness" / "settings.json"
    settings.parent.mkdir(parents=True)
    servers = {"probe": {"command": "true"}, "docs": {"type": "http", "url": "http://x/mcp"}}
    settings.write_text(json.dumps({"mcpServers": servers}))
    code = (
        "import sys; sys.modules['mcp'] = None\n"  # as if the extra were not installed
        "from harness.cli import main; main()"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(
        XDG_CONFIG_HOME=str(config_home),
        HARNESS_SESSIONS_DIR=str(tmp_path / "sessions"),
        PYTHONPATH=str(REPO_ROOT),
    )

    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )

    done = harness("run", "--offline", "-p", "hi")
    assert done.returncode == 0, done.stderr
    assert "(offline) You said: hi" in done.stdout
    assert done.stderr.count("pip install 'jsonl-harness[mcp]'") == 1
    assert "Traceback" not in done.stderr and "docs, probe" in done.stderr
    chat = harness("chat", "--offline", "--no-session")
    assert chat.returncode == 0, chat.stderr
    assert chat.stderr.count("pip install 'jsonl-harness[mcp]'") == 1
    # The command that is about the servers says so as an error (it cannot do its job).
    listed = harness("mcp", "list")
    assert listed.returncode == 1 and "error[mcp_not_installed]" in listed.stderr
    assert "Traceback" not in listed.stderr


def test_chat_lists_its_mcp_servers(harness: Run, tmp_path: Path) -> None:
    ok(harness("mcp", "add", "probe", "--", sys.executable, SERVER))
    chat = subprocess.run(
        [sys.executable, "-m", "harness.cli", "chat", "--offline"],
        input="/mcp\n/exit\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")},
            "HARNESS_SESSIONS_DIR": str(tmp_path / "sessions"),
            "HARNESS_CHAT_HISTORY": str(tmp_path / "history"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "PYTHONPATH": str(REPO_ROOT),
        },
        cwd=tmp_path / "work",
        timeout=120,
        check=False,
    )
    assert chat.returncode == 0, chat.stdout + chat.stderr
    assert "probe: ready (stdio " in chat.stdout  # /mcp starts what is not up, to show it
    assert "  mcp__probe__echo" in chat.stdout


@pytest.mark.parametrize("trusted", [False, True])
def test_the_users_server_never_starts_in_an_untrusted_project(
    harness: Run, work: Path, config_home: Path, tmp_path: Path, trusted: bool
) -> None:
    """Review 10, finding 2: the user's stdio servers started with the working folder (a
    cloned repository) as their folder, and launchers take code from there: ``python -m``
    imported the project's module of that name (``npx`` runs a project ``.npmrc``'s
    ``script-shell``). In a project that is not trusted they start in an empty private
    folder of the harness's (not the user's config folder, whose files a file server read by
    their bare names: review 13, findings 20, 21); ``HARNESS_PROJECT_DIR`` says where the
    project is."""
    marker = tmp_path / "ran.txt"
    (work / "probe_mod").mkdir()
    (work / "probe_mod" / "__init__.py").write_text("")
    (work / "probe_mod" / "__main__.py").write_text(
        f"open({str(marker)!r}, 'w').write('the project ran')\n"
    )
    where = tmp_path / "where.txt"
    probe = tmp_path / "probe_mod" / "__main__.py"
    probe.parent.mkdir()
    (probe.parent / "__init__.py").write_text("")
    probe.write_text(
        "import os\n"
        f"open({str(where)!r}, 'w').write(os.getcwd() + '|' + "
        "os.environ.get('HARNESS_PROJECT_DIR', ''))\n"
    )
    settings = {
        "mcpServers": {
            "probe": {
                "command": sys.executable,
                "args": ["-m", "probe_mod"],
                "env": {"PYTHONPATH": str(tmp_path)},
            }
        }
    }
    (config_home / "harness").mkdir(parents=True)
    (config_home / "harness" / "settings.json").write_text(json.dumps(settings))
    harness("mcp", "list", *(["--trust-project"] if trusted else []))
    if trusted:  # the user vouched for the folder: the server starts there, as before
        assert marker.read_text() == "the project ran"
        return
    assert not marker.exists()
    cwd, project = where.read_text().split("|")
    assert Path(cwd).parent == (tmp_path / "state" / "harness" / "mcp-servers").resolve()
    assert os.listdir(cwd) == []
    assert Path(project) == work.resolve()
