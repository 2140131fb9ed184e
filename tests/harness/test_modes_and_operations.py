"""Modes ordered by strictness and rules by operation (issue 18, classes 6 and 7).

- A project's settings (trusted or not) can only make the user's mode stricter; ask rules and
  remembered approvals never lift ``plan``.
- ``read(...)`` rules apply to every tool that reads paths, ``write(...)``/``edit(...)`` to
  every tool that writes them.

Decisions are checked on the supervisor directly; the end-to-end cases run real tools through
an ``AgentHarness`` and look at the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from permission_requests import request as make_request

from harness import (
    MODE_STRICTNESS,
    AgentHarness,
    Approve,
    ApproveAlways,
    Deny,
    FauxModel,
    FauxReply,
    FauxToolCall,
    MemorySessionRepo,
    PermissionMode,
    PermissionRequest,
    SecuritySupervisor,
    Tool,
    ToolResultMessage,
    bash_tool,
    edit_tool,
    find_tool,
    grep_tool,
    ls_tool,
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


def request(
    cwd: Path, name: str, approvals: frozenset[str] = frozenset(), **input: Any
) -> PermissionRequest:
    return make_request(cwd, TOOLS[name], approvals, **input)


def settings(folder: Path, **permissions: Any) -> Path:
    path = folder / ".harness" / "settings.json"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(orjson.dumps({"permissions": permissions}))
    return path


def user_settings(folder: Path, **permissions: Any) -> Path:
    path = folder / "user-settings.json"
    path.write_bytes(orjson.dumps({"permissions": permissions}))
    return path


class Yes:
    """An approver that approves everything it is asked, and counts."""

    def __init__(self, answer: Any = None) -> None:
        self.asked = 0
        self.answer = answer or Approve(reason="yes")

    async def __call__(self, req: PermissionRequest) -> Any:
        self.asked += 1
        return self.answer


# --- class 7: plan mode is never lifted ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "input"),
    [
        ("write", {"path": "a.txt", "content": "x"}),
        ("edit", {"path": "a.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
        ("bash", {"command": "touch P"}),
        ("bash", {"command": "git status"}),
        ("write", {"path": "sub/dir/b.txt", "content": "x"}),
        ("bash", {"command": "ls"}),
    ],
)
async def test_an_ask_rule_or_a_remembered_approval_never_lifts_plan(
    tmp_path: Path, name: str, input: dict[str, Any]
) -> None:
    """The issue's case: an ask rule (which an untrusted project may add) used to send a plan
    write to the approver, who approved it, and it ran."""
    settings(tmp_path, ask=[f"{name}", f"{name}(*)"])
    approver = Yes()
    s = SecuritySupervisor(mode="plan", approver=approver, setting_sources=("project",))
    decided = await s.decide(request(tmp_path, name, **input))
    assert isinstance(decided, Deny) and "plan mode" in decided.reason
    key = request(tmp_path, name, **input).operation_key
    remembered = await s.decide(request(tmp_path, name, approvals=frozenset({key}), **input))
    assert isinstance(remembered, Deny) and "plan mode" in remembered.reason
    code_ask = SecuritySupervisor(
        mode="plan", approver=approver, setting_sources=(), rules={"ask": [name]}
    )
    assert isinstance(await code_ask.decide(request(tmp_path, name, **input)), Deny)
    assert approver.asked == 0


async def test_plan_through_a_real_harness_writes_nothing_even_when_approved(
    tmp_path: Path,
) -> None:
    settings(tmp_path, ask=["write"])
    approver = Yes(ApproveAlways())
    session = await MemorySessionRepo().create(str(tmp_path))
    calls = [FauxToolCall(name="write", arguments={"path": "plan.txt", "content": "x"})]
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "ok"]),
        tools=[write_tool()],
        cwd=tmp_path,
        supervisor=SecuritySupervisor(mode="plan", approver=approver),
    )
    await harness.prompt("go")
    assert not (tmp_path / "plan.txt").exists() and approver.asked == 0


# The user's mode (code or user settings) and a project's mode: the result and why.
COMBINATIONS: list[tuple[PermissionMode, PermissionMode, PermissionMode]] = [
    ("plan", "default", "plan"),  # the issue's: a project's default replaced the user's plan
    ("dont_ask", "default", "dont_ask"),  # the second case
    ("plan", "bypass", "plan"),
    ("plan", "accept_edits", "plan"),
    ("dont_ask", "bypass", "dont_ask"),
    ("dont_ask", "accept_edits", "dont_ask"),
    ("default", "bypass", "default"),
    ("default", "accept_edits", "default"),
    ("accept_edits", "bypass", "accept_edits"),
    ("bypass", "accept_edits", "accept_edits"),  # stricter: it holds
    ("bypass", "plan", "plan"),
    ("default", "dont_ask", "dont_ask"),
    ("dont_ask", "plan", "plan"),  # both restrict; plan shows, dont_ask still holds
]


@pytest.mark.parametrize(("user", "project", "expected"), COMBINATIONS)
@pytest.mark.parametrize("trusted", [False, True])
@pytest.mark.parametrize("from_code", [False, True])
def test_a_project_only_makes_the_mode_stricter(
    tmp_path: Path,
    user: PermissionMode,
    project: PermissionMode,
    expected: PermissionMode,
    trusted: bool,
    from_code: bool,
) -> None:
    settings(tmp_path, mode=project)
    s = SecuritySupervisor(
        mode=user if from_code else None,
        user_settings=None if from_code else user_settings(tmp_path, mode=user),
        trust_project=trusted,
    )
    assert s.mode_for(tmp_path) == expected


async def test_plan_with_dont_ask_keeps_both_restrictions(tmp_path: Path) -> None:
    settings(tmp_path, mode="plan")
    approver = Yes()
    s = SecuritySupervisor(mode="dont_ask", approver=approver, rules={"allow": ["bash(ls:*)"]})
    assert isinstance(await s.decide(request(tmp_path, "bash", command="ls")), Deny)  # plan's
    outside = await s.decide(request(tmp_path, "read", path="/etc/hostname"))
    assert isinstance(outside, Deny) and "dont_ask" in outside.reason  # dont_ask's
    assert approver.asked == 0


def test_the_strictness_order_is_documented_and_complete() -> None:
    assert MODE_STRICTNESS == ("bypass", "accept_edits", "default", "dont_ask", "plan")


async def test_a_trusted_projects_allow_rules_still_count(tmp_path: Path) -> None:
    settings(tmp_path, allow=["bash(make:*)"], mode="bypass")
    trusted = SecuritySupervisor(setting_sources=("project",), trust_project=True)
    assert isinstance(await trusted.decide(request(tmp_path, "bash", command="make")), Approve)
    # ... but not its bypass
    assert isinstance(await trusted.decide(request(tmp_path, "bash", command="rm x")), Deny)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    settings(elsewhere, allow=["bash(make:*)"])
    only_here = SecuritySupervisor(setting_sources=("project",), trust_project=tmp_path)
    assert isinstance(await only_here.decide(request(tmp_path, "bash", command="make")), Approve)
    assert isinstance(await only_here.decide(request(elsewhere, "bash", command="make")), Deny)


# --- class 6: rules by operation -------------------------------------------------------------

READS = [
    ("read", {"path": ".env"}),
    ("grep", {"pattern": "KEY", "path": ".env"}),
    ("find", {"pattern": "*", "path": ".env"}),
    ("ls", {"path": ".env"}),
    ("read", {"path": "sub/.env"}),
    ("grep", {"pattern": "KEY", "path": "sub/.env"}),
    ("read", {"path": "./sub/../.env"}),
]


@pytest.mark.parametrize(("name", "input"), READS)
async def test_a_read_rule_binds_every_tool_that_reads(
    tmp_path: Path, name: str, input: dict[str, Any]
) -> None:
    s = SecuritySupervisor(mode="bypass", setting_sources=(), rules={"deny": ["read(**/.env)"]})
    decided = await s.decide(request(tmp_path, name, **input))
    assert isinstance(decided, Deny) and "read(**/.env)" in decided.reason


WRITES = [
    ("write", {"path": "locked/a.txt", "content": "x"}),
    ("edit", {"path": "locked/a.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
    ("edit", {"path": "locked/deep/b.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
    ("write", {"path": "./locked/c.txt", "content": "x"}),
    ("edit", {"path": "other/../locked/a.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
]


@pytest.mark.parametrize("rule", ["write(locked/**)", "edit(locked/**)"])
@pytest.mark.parametrize(("name", "input"), WRITES)
async def test_a_write_rule_binds_every_tool_that_writes(
    tmp_path: Path, rule: str, name: str, input: dict[str, Any]
) -> None:
    s = SecuritySupervisor(mode="bypass", setting_sources=(), rules={"deny": [rule]})
    decided = await s.decide(request(tmp_path, name, **input))
    assert isinstance(decided, Deny) and rule in decided.reason


async def test_operation_rules_do_not_spill_onto_other_operations(tmp_path: Path) -> None:
    s = SecuritySupervisor(
        mode="bypass", setting_sources=(), rules={"deny": ["read(**/.env)", "write(locked/**)"]}
    )
    assert isinstance(await s.decide(request(tmp_path, "write", path=".env", content="")), Approve)
    assert isinstance(await s.decide(request(tmp_path, "read", path="locked/a.txt")), Approve)
    grep_only = SecuritySupervisor(mode="bypass", setting_sources=(), rules={"deny": ["grep"]})
    assert isinstance(await grep_only.decide(request(tmp_path, "read", path="a")), Approve)
    assert isinstance(
        await grep_only.decide(request(tmp_path, "grep", pattern="x", path="a")), Deny
    )


async def test_edit_in_a_locked_folder_does_not_run(tmp_path: Path) -> None:
    """The issue's reproduction, end to end: ``deny write(locked/**)`` used to leave ``edit``
    free to change the file."""
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "a.txt").write_text("original")
    session = await MemorySessionRepo().create(str(tmp_path))
    edits = [{"oldText": "original", "newText": "changed"}]
    calls = [FauxToolCall(name="edit", arguments={"path": "locked/a.txt", "edits": edits})]
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "ok"]),
        tools=[edit_tool()],
        cwd=tmp_path,
        supervisor=SecuritySupervisor(
            mode="bypass", setting_sources=(), rules={"deny": ["write(locked/**)"]}
        ),
    )
    await harness.prompt("go")
    assert (locked / "a.txt").read_text() == "original"


# --- class 6 in walks: a folder a tool walks does not hand out what a read rule denies --------

WALKS = [
    FauxToolCall(name="grep", arguments={"pattern": "KEY"}),  # the issue's: grep over the cwd
    FauxToolCall(name="grep", arguments={"pattern": "KEY", "path": "."}),
    FauxToolCall(name="grep", arguments={"pattern": "KEY", "path": "sub"}),
    FauxToolCall(name="grep", arguments={"pattern": "KEY", "path": "link"}),  # symlinked folder
    FauxToolCall(name="grep", arguments={"pattern": "KEY", "glob": "*.env"}),
    FauxToolCall(name="grep", arguments={"pattern": "KEY", "glob": ".env*"}),
    FauxToolCall(name="find", arguments={"pattern": ".env"}),
    FauxToolCall(name="find", arguments={"pattern": "*", "path": "sub"}),
    FauxToolCall(name="ls", arguments={"path": "sub"}),
    FauxToolCall(name="ls", arguments={"path": "link"}),
]


@pytest.mark.parametrize("rule", ["deny", "ask"])
@pytest.mark.parametrize("call", WALKS, ids=lambda c: f"{c.name}-{c.arguments}")
async def test_a_read_rule_hides_its_files_from_every_walk(
    tmp_path: Path, rule: str, call: FauxToolCall
) -> None:
    (tmp_path / ".env").write_text("KEY=root-secret\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".env").write_text("KEY=sub-secret\n")
    (tmp_path / "sub" / "notes.txt").write_text("KEY is documented here\n")
    (tmp_path / "link").symlink_to("sub")
    session = await MemorySessionRepo().create(str(tmp_path))
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[call]), "ok"]),
        tools=[grep_tool(), find_tool(), ls_tool()],
        cwd=tmp_path,
        supervisor=SecuritySupervisor(
            mode="bypass", setting_sources=(), rules={rule: ["read(**/.env)"]}
        ),
        resources=None,
    )
    await harness.prompt("go")
    [result] = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    assert not result.is_error, result.text
    assert "secret" not in result.text and ".env" not in result.text.split("[")[0]
    if call.name == "grep" and call.arguments.get("glob") is None:
        assert "documented" in result.text  # the rest is still searched


# --- found by a new user: rules as Claude Code spells them, misspelt keys, hints ----------------


@pytest.mark.parametrize(
    ("rule", "name", "input"),
    [
        ("Bash(rm:*)", "bash", {"command": "rm victim"}),
        ("BASH(rm:*)", "bash", {"command": "rm victim"}),
        ("Read(**/.env)", "read", {"path": ".env"}),
        ("Read(**/.env)", "grep", {"pattern": "x", "path": ".env"}),
        ("Edit(locked/**)", "write", {"path": "locked/a", "content": ""}),
        ("Write(locked/**)", "edit", {"path": "locked/a", "edits": []}),
        ("Grep", "grep", {"pattern": "x"}),
        ("LS", "ls", {"path": "."}),
    ],
)
async def test_a_deny_rule_in_claude_codes_spelling_binds(
    tmp_path: Path, rule: str, name: str, input: dict[str, Any]
) -> None:
    """``Bash(rm:*)`` parsed but never matched: the file was deleted in bypass mode."""
    s = SecuritySupervisor(mode="bypass", setting_sources=(), rules={"deny": [rule]})
    assert isinstance(await s.decide(request(tmp_path, name, **input)), Deny)


@pytest.mark.parametrize("key", ["alow", "deni", "Deny", "default_mode", "allowed"])
async def test_an_unknown_permissions_key_denies_instead_of_passing_for_no_rules(
    tmp_path: Path, key: str
) -> None:
    settings(tmp_path, **{key: ["bash(rm:*)"]})
    s = SecuritySupervisor(mode="bypass", setting_sources=("project",))
    decided = await s.decide(request(tmp_path, "bash", command="rm victim"))
    assert isinstance(decided, Deny) and "unknown key" in decided.reason and key in decided.reason


async def test_a_denial_says_when_an_untrusted_project_would_allow_it(tmp_path: Path) -> None:
    settings(tmp_path, allow=["bash(ls:*)"])
    for mode in ("default", "dont_ask"):
        s = SecuritySupervisor(mode=mode, setting_sources=("project",))  # type: ignore[arg-type]
        decided = await s.decide(request(tmp_path, "bash", command="ls"))
        assert isinstance(decided, Deny) and "--trust-project" in decided.reason
        other = await s.decide(request(tmp_path, "bash", command="rm x"))
        assert isinstance(other, Deny) and "--trust-project" not in other.reason


async def test_ls_counts_what_it_leaves_out(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("KEY=1")
    (tmp_path / "notes.txt").write_text("x")
    session = await MemorySessionRepo().create(str(tmp_path))
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[FauxToolCall(name="ls")]), "ok"]),
        tools=[ls_tool()],
        cwd=tmp_path,
        supervisor=SecuritySupervisor(setting_sources=(), rules={"deny": ["read(**/.env)"]}),
        resources=None,
    )
    await harness.prompt("go")
    [result] = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    assert result.text.splitlines()[0] == "notes.txt" and "1 entries left out" in result.text
    assert result.details == {"entries": 1, "truncated": False, "hidden": 1}
