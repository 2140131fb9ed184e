"""The supervisor at the tool boundary: decisions, modes, rule precedence, approve-always,
settings files, path escapes, nesting and the events of every decision."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from permission_requests import request as make_request

from harness import (
    PERMISSION_ENTRY,
    AgentHarness,
    Approve,
    ApproveAlways,
    CustomEntry,
    Deny,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    MessageEntry,
    PermissionMode,
    PermissionRequest,
    PermissionRules,
    SecuritySupervisor,
    Tool,
    ToolResultMessage,
    ToolRun,
    bash_tool,
    edit_tool,
    read_tool,
    tool,
    write_tool,
)

TOOLS = {t.name: t for t in (read_tool(), write_tool(), edit_tool(), bash_tool())}


def request(
    cwd: Path, name: str, approvals: frozenset[str] = frozenset(), **input: Any
) -> PermissionRequest:
    return make_request(cwd, TOOLS[name], approvals, **input)


class Recorder:
    """An approver that answers from a list and records what it was asked."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked: list[PermissionRequest] = []

    async def __call__(self, req: PermissionRequest) -> Any:
        self.asked.append(req)
        return self.answers.pop(0)


def supervisor(**kwargs: Any) -> SecuritySupervisor:
    return SecuritySupervisor(setting_sources=(), **kwargs)


# --- keys ----------------------------------------------------------------------------------


def test_operation_keys_name_the_tool_and_what_it_touches(tmp_path: Path) -> None:
    assert request(tmp_path, "bash", command="git  status --short").operation_key == (
        "bash(git status:*)"
    )
    assert request(tmp_path, "bash", command="ls -la").operation_key == "bash(ls:*)"
    assert request(tmp_path, "bash", command="rm -la").operation_key == "bash(rm -la)"
    key = request(tmp_path, "bash", command="git log --oneline").operation_key
    assert key == "bash(git log --oneline)"
    compound = request(tmp_path, "bash", command="git status && rm -rf /")
    assert compound.operation_key == "bash(git status && rm -rf /)"  # exact, never a prefix
    assert request(tmp_path, "write", path="src/./a.py", content="").operation_key == (
        "write(src/a.py)"
    )
    outside = request(tmp_path, "read", path="../x[1].txt")
    assert outside.leaves_cwd and outside.controlled
    assert outside.operation_key == f"read({tmp_path.parent}/x\\[1\\].txt)"


# --- modes ---------------------------------------------------------------------------------

MODE_TABLE: list[tuple[PermissionMode, dict[str, type]]] = [
    ("default", {"read": Approve, "write": Deny, "bash": Deny, "outside": Deny}),
    ("accept_edits", {"read": Approve, "write": Approve, "bash": Deny, "outside": Deny}),
    ("plan", {"read": Approve, "write": Deny, "bash": Deny, "outside": Deny}),
    ("bypass", {"read": Approve, "write": Approve, "bash": Approve, "outside": Approve}),
    ("dont_ask", {"read": Approve, "write": Deny, "bash": Deny, "outside": Deny}),
]


@pytest.mark.parametrize(("mode", "expected"), MODE_TABLE)
async def test_every_mode_without_an_approver(
    tmp_path: Path, mode: PermissionMode, expected: dict[str, type]
) -> None:
    s = supervisor(mode=mode)
    calls = {
        "read": request(tmp_path, "read", path="a.txt"),
        "write": request(tmp_path, "write", path="a.txt", content="x"),
        "bash": request(tmp_path, "bash", command="make"),
        "outside": request(tmp_path, "write", path="../a.txt", content="x"),
    }
    got = {name: type(await s.decide(req)) for name, req in calls.items()}
    assert got == expected


async def test_plan_mode_denies_even_with_an_approver_and_says_why(tmp_path: Path) -> None:
    approver = Recorder(Approve())
    decision = await supervisor(mode="plan", approver=approver).decide(
        request(tmp_path, "edit", path="a.py", oldText="a", newText="b")
    )
    assert isinstance(decision, Deny) and "plan" in decision.reason
    assert approver.asked == []


async def test_dont_ask_never_asks_but_allow_rules_still_allow(tmp_path: Path) -> None:
    approver = Recorder(Approve())
    s = supervisor(mode="dont_ask", approver=approver, rules={"allow": ["bash(git status:*)"]})
    assert isinstance(await s.decide(request(tmp_path, "bash", command="make")), Deny)
    assert isinstance(await s.decide(request(tmp_path, "bash", command="git status")), Approve)
    assert approver.asked == []


async def test_default_mode_asks_the_approver_for_controlled_calls_only(tmp_path: Path) -> None:
    approver = Recorder(Approve(), Deny(reason="not now"))
    s = supervisor(approver=approver)
    assert isinstance(await s.decide(request(tmp_path, "read", path="a.txt")), Approve)
    assert isinstance(await s.decide(request(tmp_path, "bash", command="make")), Approve)
    denied = await s.decide(request(tmp_path, "write", path="a", content=""))
    assert denied == Deny(reason="not now")
    assert [r.tool_name for r in approver.asked] == ["bash", "write"]


async def test_no_approver_is_a_clear_denial(tmp_path: Path) -> None:
    decision = await supervisor().decide(request(tmp_path, "bash", command="make"))
    assert isinstance(decision, Deny)
    assert "bash(make)" in decision.reason and "approver" in decision.reason


# --- rule precedence: hooks, deny, ask, mode, allow, approver ---------------------------------


async def test_deny_rules_beat_allow_rules_and_bypass(tmp_path: Path) -> None:
    rules = PermissionRules(allow=["bash"], deny=["bash(rm:*)"])
    s = supervisor(mode="bypass", rules=rules)
    assert isinstance(await s.decide(request(tmp_path, "bash", command="rm -rf x")), Deny)
    # a deny rule catches any part of a compound command
    hidden = request(tmp_path, "bash", command="echo hi && rm -rf x")
    assert isinstance(await s.decide(hidden), Deny)
    assert isinstance(await s.decide(request(tmp_path, "bash", command="ls")), Approve)


async def test_ask_rules_beat_the_mode_and_allow_rules(tmp_path: Path) -> None:
    approver = Recorder(Deny(reason="no push today"))
    rules = PermissionRules(allow=["bash"], ask=["bash(git push:*)"])
    s = supervisor(mode="bypass", rules=rules, approver=approver)
    assert await s.decide(request(tmp_path, "bash", command="git push origin")) == Deny(
        reason="no push today"
    )
    assert len(approver.asked) == 1


async def test_the_mode_beats_allow_rules(tmp_path: Path) -> None:
    s = supervisor(mode="plan", rules={"allow": ["write(**)"]})
    assert isinstance(await s.decide(request(tmp_path, "write", path="a", content="")), Deny)


async def test_allow_rules_beat_the_approver(tmp_path: Path) -> None:
    asked = Deny(reason="asked")
    approver = Recorder(asked, asked, asked)
    s = supervisor(approver=approver, rules={"allow": ["write(src/**)", "bash(git status:*)"]})
    assert isinstance(
        await s.decide(request(tmp_path, "write", path="src/a/b.py", content="")), Approve
    )
    assert isinstance(await s.decide(request(tmp_path, "bash", command="git status -s")), Approve)
    assert approver.asked == []
    # every part of a compound command must be allowed; substitution never is by parts
    assert await s.decide(request(tmp_path, "bash", command="git status; rm x")) == asked
    two = supervisor(rules={"allow": ["bash(git status:*)", "bash(git log:*)"]})
    assert isinstance(
        await two.decide(request(tmp_path, "bash", command="git status && git log")), Approve
    )
    assert await s.decide(request(tmp_path, "bash", command="git status $(rm x)")) == asked
    assert await s.decide(request(tmp_path, "write", path="lib/a.py", content="")) == asked


async def test_path_rules_see_through_symlinks(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("SECRET=1")
    (tmp_path / "innocent.txt").symlink_to(tmp_path / ".env")
    s = supervisor(mode="bypass", rules={"deny": ["read(**/.env)"]})
    assert isinstance(await s.decide(request(tmp_path, "read", path=".env")), Deny)
    assert isinstance(await s.decide(request(tmp_path, "read", path="sub/dir/.env")), Deny)
    assert isinstance(await s.decide(request(tmp_path, "read", path="innocent.txt")), Deny)
    assert isinstance(await s.decide(request(tmp_path, "read", path="other.txt")), Approve)


async def test_tool_call_hooks_come_before_the_supervisor(tmp_path: Path) -> None:
    session = await JsonlSessionRepo(tmp_path / "s").create(str(tmp_path))
    approver = Recorder()
    call = FauxToolCall(name="bash", arguments={"command": "make"})
    h = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=[call]), "ok"]),
        tools=[bash_tool()],
        supervisor=supervisor(mode="bypass", approver=approver),
    )
    requests: list[Any] = []
    h.connect("permission_request", lambda s, event: requests.append(event))
    h.connect("tool_call", lambda s, event: __import__("harness").Block(reason="hook says no"))
    await h.prompt("go")
    assert requests == [] and approver.asked == []


# --- settings files ------------------------------------------------------------------------


async def test_rules_and_mode_come_from_project_and_user_settings(tmp_path: Path) -> None:
    user = tmp_path / "user.json"
    user.write_bytes(orjson.dumps({"permissions": {"deny": ["bash(curl:*)"], "mode": "plan"}}))
    project = tmp_path / ".harness" / "settings.json"
    project.parent.mkdir()
    project.write_bytes(
        orjson.dumps({"permissions": {"allow": ["bash(make:*)"], "mode": "dont_ask"}})
    )
    s = SecuritySupervisor(user_settings=user, trust_project=True)
    # The project's dont_ask adds to the user's plan; it cannot lift it (test_modes.py).
    assert s.mode_for(tmp_path) == "plan"
    made = await s.decide(request(tmp_path, "bash", command="make test"))
    assert isinstance(made, Deny) and "plan mode" in made.reason  # plan beats allow rules
    denied = await s.decide(request(tmp_path, "bash", command="curl x"))
    assert isinstance(denied, Deny) and str(user) in denied.reason
    user.write_bytes(orjson.dumps({"permissions": {"deny": ["bash(curl:*)"]}}))
    assert s.mode_for(tmp_path) == "dont_ask"  # stricter than the user's default: it holds
    assert isinstance(await s.decide(request(tmp_path, "bash", command="make test")), Approve)
    assert isinstance(await s.decide(request(tmp_path, "bash", command="ls")), Deny)


async def test_an_untrusted_project_file_may_restrict_but_never_widen(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = tmp_path / ".harness" / "settings.json"
    project.parent.mkdir()
    project.write_bytes(
        orjson.dumps(
            {"permissions": {"allow": ["bash(*)"], "deny": ["read(*.env)"], "mode": "bypass"}}
        )
    )
    s = SecuritySupervisor(setting_sources=("project",))  # as a cloned repository would have it
    assert s.mode_for(tmp_path) == "default"  # bypass from the project is ignored
    assert isinstance(await s.decide(request(tmp_path, "bash", command="rm -rf x")), Deny)
    assert isinstance(await s.decide(request(tmp_path, "read", path="a.env")), Deny)  # deny kept
    assert "not trusted" in caplog.text
    trusted = SecuritySupervisor(setting_sources=("project",), trust_project=True)
    assert isinstance(await trusted.decide(request(tmp_path, "bash", command="rm -rf x")), Approve)


async def test_a_broken_settings_file_denies_everything(tmp_path: Path) -> None:
    project = tmp_path / ".harness" / "settings.json"
    project.parent.mkdir()
    project.write_text("{not json")
    s = SecuritySupervisor(mode="bypass", setting_sources=("project",))
    decision = await s.decide(request(tmp_path, "read", path="a.txt"))
    assert isinstance(decision, Deny) and str(project) in decision.reason


def test_bad_rules_and_modes_from_code_are_refused() -> None:
    with pytest.raises(ValueError):
        PermissionRules(allow=["bash(unclosed"])
    with pytest.raises(ValueError):
        SecuritySupervisor(mode="yolo")  # type: ignore[arg-type]


# --- through the harness: approve, deny, approve-always, escapes, events, nesting ------------


def tool_results(session: Any) -> list[ToolResultMessage]:
    return [
        e.message
        for e in session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]


async def run(
    tmp_path: Path, calls: list[FauxToolCall], sup: Any, tools: list[Tool] | None = None, **kw: Any
) -> tuple[AgentHarness, list[Any]]:
    repo = JsonlSessionRepo(tmp_path / "sessions")
    session = kw.pop("session", None) or await repo.create(str(tmp_path))
    h = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "done"]),
        tools=tools or list(TOOLS.values()),
        supervisor=sup,
        cwd=tmp_path,
        **kw,
    )
    events: list[Any] = []
    h.connect("permission_request", lambda s, event: events.append(event))
    h.connect("permission_decision", lambda s, event: events.append(event))
    await h.prompt("go")
    return h, events


async def test_approve_and_deny_through_the_harness_with_events_for_every_decision(
    tmp_path: Path,
) -> None:
    calls = [
        FauxToolCall(name="bash", arguments={"command": "echo approved"}),
        FauxToolCall(name="write", arguments={"path": "denied.txt", "content": "x"}),
        FauxToolCall(name="read", arguments={"path": "missing.txt"}),
    ]
    approver = Recorder(Approve(reason="user said yes"), Deny(reason="user said no"))
    h, events = await run(tmp_path, calls, supervisor(approver=approver))
    results = tool_results(h.session)
    assert results[0].text.strip() == "approved" and not results[0].is_error
    assert results[1].is_error and results[1].text == "user said no"
    assert not (tmp_path / "denied.txt").exists()
    assert [(e.name, e.tool_call_id) for e in events] == [
        (name, c.id)
        for c in h.session.build_context().messages[1].tool_calls  # type: ignore[union-attr]
        for name in ("permission_request", "permission_decision")
    ]
    decisions = [e for e in events if e.name == "permission_decision"]
    assert [d.decision for d in decisions] == ["approve", "deny", "approve"]
    assert decisions[0].reason == "user said yes"
    assert events[0].operation_key == "bash(echo approved)" and events[0].depth == 0


async def test_approve_always_survives_a_reopen_and_shows_in_the_session(tmp_path: Path) -> None:
    approver = Recorder(ApproveAlways())
    calls = [FauxToolCall(name="bash", arguments={"command": "git --version"})]
    h, events = await run(tmp_path, calls, supervisor(approver=approver))
    assert events[-1].decision == "approve_always" and events[-1].remembered == "session"
    assert h.approvals == {"bash(git --version)"}

    repo = JsonlSessionRepo(tmp_path / "sessions")
    reopened = await repo.open(h.session.id)
    (entry,) = [e for e in reopened.entries() if isinstance(e, CustomEntry)]
    assert entry.custom_type == PERMISSION_ENTRY
    assert entry.data == {
        "operationKey": "bash(git --version)",
        "decision": "approve_always",
        "toolName": "bash",
        "scope": "session",
        "depth": 0,
        "signature": entry.data["signature"],  # with this user's secret (test_signed_approvals)
    }
    assert len(str(entry.data["signature"])) == 64
    again = [FauxToolCall(name="bash", arguments={"command": "git --version"})]
    h2, events2 = await run(tmp_path, again, supervisor(approver=approver), session=reopened)
    assert len(approver.asked) == 1  # not asked again
    assert not tool_results(h2.session)[-1].is_error
    assert events2[-1].decision == "approve"


async def test_approve_always_for_the_project_writes_an_allow_rule(tmp_path: Path) -> None:
    approver = Recorder(ApproveAlways(scope="project"))
    calls = [FauxToolCall(name="bash", arguments={"command": "make test"})]
    _, events = await run(tmp_path, calls, supervisor(approver=approver))
    assert events[-1].remembered == "project"
    settings = orjson.loads((tmp_path / ".harness" / "settings.json").read_bytes())
    # exact: make runs whatever the Makefile says, so "make test -k" is asked again
    assert settings == {"permissions": {"allow": ["bash(make test)"]}}
    # a new session in the project (trusted: the user said "always" there) needs no asking
    fresh = SecuritySupervisor(setting_sources=("project",), trust_project=True)
    assert isinstance(await fresh.decide(request(tmp_path, "bash", command="make test")), Approve)
    assert isinstance(await fresh.decide(request(tmp_path, "bash", command="make all")), Deny)


async def test_a_path_escape_by_dotdot_or_symlink_is_denied(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("top secret")
    (work / "sub" / "link").symlink_to(tmp_path)
    calls = [
        FauxToolCall(name="read", arguments={"path": "../secret.txt"}),
        FauxToolCall(name="read", arguments={"path": "sub/link/secret.txt"}),
        FauxToolCall(name="read", arguments={"path": str(tmp_path / "secret.txt")}),
    ]
    h, events = await run(work, calls, supervisor(), tools=[read_tool()])
    results = tool_results(h.session)
    assert [r.is_error for r in results] == [True, True, True]
    assert all("top secret" not in r.text for r in results)
    requests = [e for e in events if e.name == "permission_request"]
    assert [r.leaves_cwd for r in requests] == [True, True, True]


async def test_a_supervisor_that_raises_or_returns_junk_denies(tmp_path: Path) -> None:
    class Broken:
        def __init__(self, result: Any) -> None:
            self.result = result

        async def decide(self, req: PermissionRequest) -> Any:
            if isinstance(self.result, Exception):
                raise self.result
            return self.result

    for sup in (Broken(RuntimeError("bug")), Broken("yes")):
        calls = [FauxToolCall(name="read", arguments={"path": "a.txt"})]
        (tmp_path / "a.txt").write_text("content")
        h, events = await run(tmp_path / type(sup.result).__name__, calls, sup, tools=[read_tool()])
        assert tool_results(h.session)[0].is_error
        assert events[-1].decision == "deny"


@tool("noted", "records its run", {"type": "object"}, controlled=True)
async def noted(input: Mapping[str, Any], run: ToolRun) -> str:
    return "ran"


async def test_a_nested_run_uses_the_parents_supervisor_depth_and_approvals(tmp_path: Path) -> None:
    approver = Recorder(ApproveAlways(), Approve())
    shared = supervisor(approver=approver)
    parent, _ = await run(
        tmp_path, [FauxToolCall(name="noted", arguments={})], shared, tools=[noted]
    )
    assert parent.supervisor is shared and parent.depth == 0

    repo = JsonlSessionRepo(tmp_path / "sessions")
    child_session = await repo.create(str(tmp_path))
    child = AgentHarness(
        session=child_session,
        model=FauxModel([FauxReply(tool_calls=[FauxToolCall(name="noted", arguments={})]), "ok"]),
        tools=[noted],
        supervisor=parent.supervisor,
        depth=parent.depth + 1,
        approvals=parent.approvals,
    )
    seen: list[Any] = []
    child.connect("permission_request", lambda s, event: seen.append(event))
    await child.prompt("nested")
    assert child.supervisor is shared and seen[0].depth == 1
    assert len(approver.asked) == 1  # the parent's approve-always reached the child
    assert not tool_results(child_session)[0].is_error


async def test_sessions_show_and_tree_list_the_remembered_approvals(tmp_path: Path) -> None:
    approver = Recorder(ApproveAlways())
    calls = [FauxToolCall(name="bash", arguments={"command": "echo hi"})]
    h, _ = await run(tmp_path, calls, supervisor(approver=approver))
    root = tmp_path / "sessions"
    for command, expected in (
        ("show", "approved always: bash(echo hi)"),
        ("tree", "permission: approve_always bash(echo hi)"),
    ):
        args = [sys.executable, "-m", "harness.cli", "sessions", command, "--root", str(root)]
        done = await asyncio.to_thread(
            subprocess.run, [*args, h.session.id], capture_output=True, text=True, check=True
        )
        assert expected in done.stdout


async def test_an_approved_write_outside_the_folder_lands_there(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    calls = [FauxToolCall(name="write", arguments={"path": "../out/file.txt", "content": "x"})]
    h, events = await run(work, calls, supervisor(mode="bypass"), tools=[write_tool()])
    assert events[0].leaves_cwd and events[-1].decision == "approve"
    assert (tmp_path / "out" / "file.txt").read_text() == "x"
    assert not tool_results(h.session)[0].is_error


@pytest.mark.parametrize(
    ("rule", "tool", "path"),
    [
        ("read(**)", "read", "~/.ssh/id_ed25519"),
        ("read(**)", "read", "../home/.ssh/id_ed25519"),
        ("read(./**)", "read", "/etc/hostname"),
        ("write(**/*.py)", "write", "~/.ipython/profile_default/startup/00-x.py"),
        ("write(**)", "write", "~/.bash_aliases"),
        ("edit(**/*.py)", "edit", "../lib/setup.py"),
    ],
)
async def test_a_relative_allow_rule_never_approves_a_path_outside_the_working_folder(
    tmp_path: Path, rule: str, tool: str, path: str
) -> None:
    """Review 14, finding 5: `read(**)` and `write(**/*.py)` matched an outside path without
    its leading `/`, so the model read `~/.ssh` and wrote an IPython startup file unasked in
    `default` (and `dont_ask`). A relative allow rule is about the working folder; the path
    outside is asked (denied: no approver), and the same rule still approves inside."""
    work = tmp_path / "work"
    work.mkdir()
    for mode in ("default", "dont_ask"):
        s = SecuritySupervisor(mode=mode, rules={"allow": [rule]}, setting_sources=())
        args = {"path": path, "content": "x"} if tool == "write" else {"path": path}
        if tool == "edit":
            args = {"path": path, "oldText": "a", "newText": "b"}
        decided = await s.decide(request(work, tool, **args))
        assert isinstance(decided, Deny), (mode, decided)
        inside = dict(args, path="src/x.py")
        assert isinstance(await s.decide(request(work, tool, **inside)), Approve), mode
