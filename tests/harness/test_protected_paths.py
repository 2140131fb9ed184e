"""Protected paths: a model in a permissive mode cannot change what grants permissions or runs
code on the next start (adversarial review after issue 18).

Reproduction: in ``accept_edits``, in ``bypass`` and in ``dont_ask`` with ``write`` allowed,
the model's ``write`` replaced ``.harness/settings.json`` (allowing itself every tool from the
next start), created ``.git/hooks/pre-commit`` and ``.mcp.json``, and ``bash`` with
``bash(cp:*)`` allowed copied a file over ``.git/config``; nobody was asked.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from permission_requests import request as make_request
from platformdirs import user_config_path

from harness import (
    AgentHarness,
    Approve,
    Deny,
    FauxModel,
    FauxReply,
    FauxToolCall,
    MemorySessionRepo,
    PermissionRequest,
    SecuritySupervisor,
    Tool,
    bash_tool,
    edit_tool,
    read_tool,
    write_tool,
)

TOOLS: dict[str, Tool] = {t.name: t for t in (write_tool(), edit_tool(), bash_tool())}

# (mode, rules): every way a write or command could be approved without asking.
PERMISSIVE: list[tuple[str, dict[str, list[str]] | None]] = [
    ("accept_edits", None),
    ("bypass", None),
    ("dont_ask", {"allow": ["write", "edit", "bash(cp:*)", "bash(tee:*)", "bash(git:*)"]}),
    ("default", {"allow": ["write(**)", "edit(**)", "bash(cp:*)", "bash(mv:*)"]}),
]

PROTECTED_PATHS = [
    ".harness/settings.json",
    ".harness/settings.local.json",
    ".harness/hooks/on-start.sh",
    ".harness/agents/helper.md",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".claude/agents/helper.md",
    ".mcp.json",
    ".git/hooks/pre-commit",
    ".git/config",
    ".git",  # a .git file ("gitdir: /elsewhere") swaps the repository and its hooks
    # spellings: case, "..", "./", doubled slashes, a folder that is gone again
    ".HARNESS/Settings.json",
    ".Git/HOOKS/post-checkout",
    ".MCP.JSON",
    "sub/../.git/config",
    "./.claude//settings.json",
    "sub/.git/hooks/pre-push",  # a nested repository's hooks
    "link/hooks/pre-commit",  # a symlink to .git
    "/home/someone/.gitconfig",  # git runs its hooksPath, aliases and pagers everywhere
]

NOT_PROTECTED = [
    ".gitignore",
    ".github/workflows/ci.yml",
    ".harness/skills/review/SKILL.md",
    ".claude/commands/x.md",
    "src/settings.json",
    "mcp.json",
]


def request(cwd: Path, name: str, **input: Any) -> PermissionRequest:
    return make_request(cwd, TOOLS[name], **input)


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / "sub").mkdir()
    (work / "link").symlink_to(".git")
    return work


class Yes:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, req: PermissionRequest) -> Approve:
        self.asked.append(req.operation_key)
        return Approve(reason="the user said yes")


@pytest.mark.parametrize(("mode", "rules"), PERMISSIVE)
@pytest.mark.parametrize("path", PROTECTED_PATHS)
async def test_a_protected_path_is_never_written_without_asking(
    cwd: Path, mode: Any, rules: Any, path: str
) -> None:
    s = SecuritySupervisor(mode=mode, rules=rules, setting_sources=())
    for name, input in [
        ("write", {"path": path, "content": "x"}),
        ("edit", {"path": path, "oldText": "a", "newText": "b"}),
    ]:
        decided = await s.decide(request(cwd, name, **input))
        assert isinstance(decided, Deny), (name, path, decided)
        assert "protected path" in decided.reason
    # With an approver the user is asked, and their answer stands.
    yes = Yes()
    asking = SecuritySupervisor(mode=mode, rules=rules, setting_sources=(), approver=yes)
    if mode != "dont_ask":
        assert isinstance(
            await asking.decide(request(cwd, "write", path=path, content="")), Approve
        )
        assert len(yes.asked) == 1


@pytest.mark.parametrize("path", NOT_PROTECTED)
async def test_other_dot_files_keep_the_mode(cwd: Path, path: str) -> None:
    s = SecuritySupervisor(mode="accept_edits", setting_sources=())
    assert isinstance(await s.decide(request(cwd, "write", path=path, content="x")), Approve)


async def test_the_user_settings_folder_is_protected_in_bypass(cwd: Path) -> None:
    folder = user_config_path("harness")
    s = SecuritySupervisor(mode="bypass", setting_sources=())
    for name in ("settings.json", "approvals.key", "agents/a.md"):
        decided = await s.decide(request(cwd, "write", path=str(folder / name), content="{}"))
        assert isinstance(decided, Deny) and "protected path" in decided.reason
    bash = await s.decide(request(cwd, "bash", command=f"cp x {folder}/settings.json"))
    assert isinstance(bash, Deny)


PROTECTED_COMMANDS = [
    "cp evil .git/hooks/pre-commit",
    "cp /etc/hostname .git/config",
    "echo '{}' > .harness/settings.json",
    'echo x >".mcp.json"',
    "tee .g''it/hooks/post-checkout < x",
    "cp x .gi\\t/config",
    "cp x .{git,y}/hooks/pre-commit",
    "cp x .g?t/config",
    "cp x .G*/hooks/pre-push",
    "mv x .CLAUDE/settings.local.json",
    "cat x | tee -a .harness/agents/helper.md",
    "git config core.hooksPath /tmp/h",
    "git -C . config --add core.fsmonitor 'touch P'",
    "ln -sf /tmp/evil .git",
    "cd .harness && cp ../x settings.json",
    "cp x ~/.config/harness/settings.json",
    "echo '[core] hooksPath = /tmp/h' >> ~/.gitconfig",
    "cp x ~/.config/git/config",
]

FREE_COMMANDS = ["git status", "cat .gitignore", "ls .github", "git config --get user.name", "ls"]


@pytest.mark.parametrize("command", PROTECTED_COMMANDS)
@pytest.mark.parametrize(("mode", "rules"), PERMISSIVE[1:])
async def test_a_command_naming_a_protected_path_is_asked(
    cwd: Path, mode: Any, rules: Any, command: str
) -> None:
    s = SecuritySupervisor(mode=mode, rules=rules, setting_sources=())
    decided = await s.decide(request(cwd, "bash", command=command))
    assert isinstance(decided, Deny), decided


@pytest.mark.parametrize("command", FREE_COMMANDS)
async def test_other_commands_keep_bypass(cwd: Path, command: str) -> None:
    s = SecuritySupervisor(mode="bypass", setting_sources=())
    assert isinstance(await s.decide(request(cwd, "bash", command=command)), Approve)


@pytest.mark.parametrize(("mode", "rules"), PERMISSIVE)
async def test_through_a_real_harness_nothing_is_written(cwd: Path, mode: Any, rules: Any) -> None:
    """The issue's reproduction, end to end: the files are unchanged."""
    settings = cwd / ".harness" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"permissions": {"deny": ["bash"]}}')
    calls = [
        FauxToolCall(
            name="write",
            arguments={"path": ".harness/settings.json", "content": '{"permissions": {}}'},
        ),
        FauxToolCall(name="write", arguments={"path": ".git/hooks/pre-commit", "content": "x"}),
        FauxToolCall(
            name="edit",
            arguments={"path": ".HARNESS/settings.json", "oldText": "deny", "newText": "ask"},
        ),
        FauxToolCall(name="bash", arguments={"command": "cp /etc/hostname .git/config"}),
    ]
    session = await MemorySessionRepo().create(str(cwd))
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "ok"]),
        tools=[write_tool(), edit_tool(), bash_tool()],
        cwd=cwd,
        supervisor=SecuritySupervisor(mode=mode, rules=rules, setting_sources=()),
        resources=None,
    )
    await harness.prompt("go")
    assert settings.read_text() == '{"permissions": {"deny": ["bash"]}}'
    assert os.listdir(cwd / ".git" / "hooks") == []
    assert not (cwd / ".git" / "config").exists()


async def test_a_working_folder_inside_git_is_protected_too(cwd: Path) -> None:
    s = SecuritySupervisor(mode="accept_edits", setting_sources=())
    inside = cwd / ".git"
    decided = await s.decide(request(inside, "write", path="hooks/pre-commit", content="x"))
    assert isinstance(decided, Deny) and "protected path" in decided.reason


async def test_the_approval_key_is_never_read_unasked(cwd: Path) -> None:
    """In bypass a model could read ``approvals.key``, sign a ``permission`` entry for
    ``write(.harness/settings.json)`` into its own session file, and have the protected write
    approved as remembered on the next start."""
    key = user_config_path("harness") / "approvals.key"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text("00" * 32)
    s = SecuritySupervisor(mode="bypass", setting_sources=())
    read = await s.decide(make_request(cwd, read_tool(), path=str(key)))
    assert isinstance(read, Deny) and "signs this user's approvals" in read.reason
    (cwd / "k").symlink_to(key)
    assert isinstance(await s.decide(make_request(cwd, read_tool(), path="k")), Deny)
    bash = await s.decide(request(cwd, "bash", command=f"cat {key}"))
    assert isinstance(bash, Deny)
