"""Claude Code's permission rules and modes, as spelled there, bind here (issue 21, part 3).

Modes ``acceptEdits``/``bypassPermissions``/``dontAsk`` in code and settings (with
``permissions.defaultMode``); path rules ``./src/**``, ``//abs/**`` and ``/src/**``; tool names
``Bash``, ``Read``, ``Glob``; ``WebFetch(domain:...)`` and ``mcp__server__tool`` kept; a rule
that does not parse named by file and key; and ``Bash(git status:*)`` never widened by shell
syntax (the parse in ``_permissions/shell.py`` decides, as for our own spelling).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from permission_requests import request as make_request

from harness import (
    CLAUDE_CODE_MODES,
    Approve,
    Deny,
    PermissionRequest,
    PermissionRules,
    SecuritySupervisor,
    Tool,
    bash_tool,
    edit_tool,
    find_tool,
    grep_tool,
    ls_tool,
    permission_mode,
    read_tool,
    write_tool,
)

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        read_tool(),
        write_tool(),
        edit_tool(),
        bash_tool(),
        grep_tool(),
        find_tool(),
        ls_tool(),
    )
}


def request(cwd: Path, name: str, **input: Any) -> PermissionRequest:
    return make_request(cwd, TOOLS[name], **input)


def settings(folder: Path, permissions: Any) -> Path:
    path = folder / ".harness" / "settings.json"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(orjson.dumps({"permissions": permissions}))
    return path


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        ("default", "default"),
        ("acceptEdits", "accept_edits"),
        ("plan", "plan"),
        ("bypassPermissions", "bypass"),
        ("dontAsk", "dont_ask"),
    ],
)
async def test_claude_code_mode_names_are_our_modes(tmp_path: Path, theirs: str, ours: str) -> None:
    assert CLAUDE_CODE_MODES[theirs] == ours == permission_mode(theirs) == permission_mode(ours)
    in_code = SecuritySupervisor(mode=theirs, setting_sources=())  # type: ignore[arg-type]
    assert in_code.mode_for(tmp_path) == ours
    in_code.set_mode("plan")
    in_code.set_mode(theirs)  # type: ignore[arg-type]
    assert in_code.mode_for(tmp_path) == ours
    for key in ("mode", "defaultMode"):
        user = tmp_path / f"user-{key}.json"
        user.write_bytes(orjson.dumps({"permissions": {key: theirs}}))
        from_file = SecuritySupervisor(user_settings=user, setting_sources=("user",))
        assert from_file.mode_for(tmp_path) == ours


def test_an_unknown_mode_is_refused_in_either_spelling() -> None:
    with pytest.raises(ValueError, match="acceptEdits"):
        SecuritySupervisor(mode="accept-edits")  # type: ignore[arg-type]


async def test_accept_edits_from_default_mode_approves_an_edit(tmp_path: Path) -> None:
    user = tmp_path / "user.json"
    user.write_bytes(orjson.dumps({"permissions": {"defaultMode": "acceptEdits"}}))
    s = SecuritySupervisor(user_settings=user, setting_sources=("user",))
    decided = await s.decide(request(tmp_path, "write", path="a.txt", content="x"))
    assert isinstance(decided, Approve) and "accept_edits" in (decided.reason or "")


async def test_mode_and_default_mode_must_agree(tmp_path: Path) -> None:
    settings(tmp_path, {"mode": "plan", "defaultMode": "plan"})
    agreeing = SecuritySupervisor(setting_sources=("project",), trust_project=True)
    assert agreeing.mode_for(tmp_path) == "plan"

    settings(tmp_path, {"mode": "plan", "defaultMode": "bypassPermissions"})
    s = SecuritySupervisor(mode="bypass", setting_sources=("project",))
    decided = await s.decide(request(tmp_path, "read", path="a.txt"))
    assert isinstance(decided, Deny)
    assert "permissions.mode" in decided.reason and "permissions.defaultMode" in decided.reason


@pytest.mark.parametrize(
    ("rule", "key"),
    [
        ("Bash(git status", "permissions.deny[1]"),
        ("Bash git status", "permissions.deny[1]"),
        ("", "permissions.deny[1]"),
    ],
)
async def test_a_rule_that_does_not_parse_names_file_and_key(
    tmp_path: Path, rule: str, key: str
) -> None:
    path = settings(tmp_path, {"deny": ["Read(./.env)", rule]})
    s = SecuritySupervisor(mode="bypass", setting_sources=("project",))
    decided = await s.decide(request(tmp_path, "read", path="notes.md"))
    assert isinstance(decided, Deny)  # never silently ignored: nothing runs
    assert str(path) in decided.reason and key in decided.reason


async def deny(tmp_path: Path, rules: dict[str, list[str]], name: str, **input: Any) -> bool:
    s = SecuritySupervisor(mode="bypass", setting_sources=(), rules=rules)
    return isinstance(await s.decide(request(tmp_path, name, **input)), Deny)


async def test_path_rules_in_claude_code_spelling(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "secrets").mkdir()
    # "./src/**": relative to the working folder, as "src/**".
    assert await deny(tmp_path, {"deny": ["Read(./src/**)"]}, "read", path="src/a.py")
    assert await deny(tmp_path, {"deny": ["Edit(./src/**)"]}, "write", path="src/a.py", content="")
    assert not await deny(tmp_path, {"deny": ["Read(./src/**)"]}, "read", path="docs/a.md")
    # "//abs/**": an absolute path.
    absolute = f"/{tmp_path}/secrets/**"
    assert await deny(tmp_path, {"deny": [f"Read({absolute})"]}, "read", path="secrets/k")
    assert not await deny(tmp_path, {"deny": ["Read(//other/**)"]}, "read", path="secrets/k")
    # "/secrets/**": Claude Code reads it relative to the project; a deny rule catches that
    # reading here too, and still the absolute one.
    assert await deny(tmp_path, {"deny": ["Read(/secrets/**)"]}, "read", path="secrets/k")
    assert await deny(tmp_path, {"deny": ["Read(/etc/**)"]}, "read", path="/etc/hostname")


async def test_an_allow_rule_with_a_leading_slash_is_only_absolute(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    s = SecuritySupervisor(mode="dont_ask", setting_sources=(), rules={"allow": ["Edit(/src/**)"]})
    inside = await s.decide(request(tmp_path, "write", path="src/a.py", content=""))
    assert isinstance(inside, Deny)  # never wider than written: /src/** is not <cwd>/src/**
    relative = SecuritySupervisor(
        mode="dont_ask", setting_sources=(), rules={"allow": ["Edit(./src/**)"]}
    )
    assert isinstance(
        await relative.decide(request(tmp_path, "write", path="src/a.py", content="")), Approve
    )


async def test_claude_code_tool_names_bind_our_tools(tmp_path: Path) -> None:
    assert await deny(tmp_path, {"deny": ["Glob"]}, "find", pattern="*.py")
    assert await deny(tmp_path, {"deny": ["Grep"]}, "grep", pattern="x")
    assert await deny(tmp_path, {"deny": ["LS"]}, "ls", path=".")
    assert await deny(tmp_path, {"deny": ["MultiEdit(**)"]}, "write", path="a", content="")
    assert not await deny(tmp_path, {"deny": ["Glob"]}, "ls", path=".")


def test_rules_for_tools_we_do_not_have_are_kept() -> None:
    rules = PermissionRules(
        allow=["WebFetch(domain:docs.python.org)", "mcp__github__get_issue", "WebSearch"]
    )
    assert [(r.tool, r.spec) for r in rules.allow] == [
        ("WebFetch", "domain:docs.python.org"),
        ("mcp__github__get_issue", None),
        ("WebSearch", None),
    ]


async def test_web_fetch_rules_bind_no_built_in_tool(tmp_path: Path) -> None:
    for name, input in (("bash", {"command": "curl x"}), ("read", {"path": "a"})):
        assert not await deny(
            tmp_path, {"deny": ["WebFetch", "WebFetch(domain:x.com)"]}, name, **input
        )


@pytest.mark.parametrize(
    "command",
    [
        "git status; rm -rf x",
        "git status && rm -rf x",
        "git status || rm -rf x",
        "git status $(rm -rf x)",
        "git status `rm -rf x`",
        "git status | sh",
        "git status > out.txt",
        "git status < /etc/passwd",
        "git status & rm -rf x",
        "git status\nrm -rf x",
    ],
)
async def test_a_claude_code_prefix_rule_is_not_widened_by_shell_syntax(
    tmp_path: Path, command: str
) -> None:
    s = SecuritySupervisor(
        mode="dontAsk", setting_sources=(), rules={"allow": ["Bash(git status:*)"]}
    )
    decided = await s.decide(request(tmp_path, "bash", command=command))
    assert isinstance(decided, Deny), command
    plain = await s.decide(request(tmp_path, "bash", command="git status --short"))
    assert isinstance(plain, Approve)
