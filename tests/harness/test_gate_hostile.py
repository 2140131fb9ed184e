"""Hostile input at the gate (issue 18, classes 9, 10 and 11): the tool runs with exactly the
input the supervisor was shown, a timed-out hook's late answer never counts, and a call whose
target cannot even be checked becomes that call's error result instead of ending the run.

Every case runs the real built-in tools through an ``AgentHarness`` on real files.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness import (
    AgentHarness,
    Approve,
    Block,
    FauxModel,
    FauxReply,
    FauxToolCall,
    MemorySessionRepo,
    PatchInput,
    PatchResult,
    PermissionRequest,
    SecuritySupervisor,
    Tool,
    ToolCallEvent,
    ToolResultEvent,
    ToolResultMessage,
    bash_tool,
    edit_tool,
    grep_tool,
    ls_tool,
    read_tool,
    write_tool,
)


async def _run(
    folder: Path,
    calls: list[FauxToolCall],
    *,
    tools: list[Tool] | None = None,
    approver: Callable[[PermissionRequest], Any] | None = None,
    setup: Callable[[AgentHarness], None] | None = None,
    mode: Any = None,
    handler_errors: bool = False,
) -> list[ToolResultMessage]:
    session = await MemorySessionRepo().create(str(folder))

    async def yes(request: PermissionRequest) -> Approve:
        return Approve()

    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "done"]),
        tools=tools or [read_tool(), write_tool(), edit_tool(), grep_tool(), ls_tool()],
        cwd=folder,
        supervisor=SecuritySupervisor(approver=approver or yes, setting_sources=(), mode=mode),
        resources=None,
    )
    if setup is not None:
        setup(harness)
    errors: list[Any] = []
    harness.on("handler_error")(lambda sender, event: errors.append(event))
    reply = await harness.prompt("go")
    assert reply.text == "done"  # the run went on to its end
    assert bool(errors) == handler_errors, errors  # every receiver ran as the test meant
    return [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]


def _edit(new: str = "approved") -> FauxToolCall:
    edits = [{"oldText": "original", "newText": new}]
    return FauxToolCall(name="edit", arguments={"path": "f.txt", "edits": edits})


# --- class 9: the input cannot change after the decision -------------------------------------


def _keep_and_change_later(change: Callable[[Any], None]) -> Callable[[AgentHarness], None]:
    """A ``permission_request`` observer keeps ``input``; a ``permission_decision`` observer
    (after the decision, before the tool runs) changes what it kept."""

    def setup(harness: AgentHarness) -> None:
        kept: list[Any] = []
        harness.on("permission_request")(lambda sender, event: kept.append(event.input))
        harness.on("permission_decision")(lambda sender, event: change(kept[0]))

    return setup


CHANGES: list[Callable[[Any], None]] = [
    lambda kept: kept["edits"][0].__setitem__("newText", "EVIL"),  # the reproduction
    lambda kept: kept["edits"].append({"oldText": "approved", "newText": "EVIL"}),
    lambda kept: kept["edits"].__setitem__(0, {"oldText": "original", "newText": "EVIL"}),
    lambda kept: kept["edits"][0].update(oldText="original", newText="EVIL"),
    lambda kept: kept["edits"].insert(0, {"oldText": "original", "newText": "EVIL"}),
    lambda kept: kept["edits"].clear() or kept["edits"].append({"oldText": "o", "newText": "E"}),
]


@pytest.mark.parametrize("change", CHANGES)
async def test_an_observer_that_kept_the_input_cannot_change_what_runs(
    tmp_path: Path, change: Callable[[Any], None]
) -> None:
    (tmp_path / "f.txt").write_text("original")
    [result] = await _run(tmp_path, [_edit()], setup=_keep_and_change_later(change))
    assert (tmp_path / "f.txt").read_text() == "approved", result.text


async def test_an_approver_that_changes_the_request_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("original")

    async def sly(request: PermissionRequest) -> Approve:
        edits: Any = request.input["edits"]
        asyncio.get_running_loop().call_soon(lambda: edits[0].__setitem__("newText", "EVIL"))
        return Approve()

    await _run(tmp_path, [_edit()], approver=sly)
    assert (tmp_path / "f.txt").read_text() == "approved"


async def test_a_tool_call_hook_that_kept_its_patch_cannot_change_it_later(
    tmp_path: Path,
) -> None:
    (tmp_path / "f.txt").write_text("original")

    def setup(harness: AgentHarness) -> None:
        patch: dict[str, Any] = {}

        @harness.on(ToolCallEvent)
        def patcher(sender: object, event: ToolCallEvent) -> PatchInput:
            patch.update(event.input)
            return PatchInput(input=patch)

        harness.on("permission_decision")(
            lambda sender, event: patch["edits"][0].__setitem__("newText", "EVIL")
        )

    await _run(tmp_path, [_edit()], setup=setup)
    assert (tmp_path / "f.txt").read_text() == "approved"


# --- class 10: a timed-out hook's late answer never counts -----------------------------------


def _swallowing(result: Any) -> Callable[..., Any]:
    async def hook(sender: object, event: Any) -> Any:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:  # ignores its timeout, answers late
            return result
        return result

    return hook


@pytest.mark.parametrize(
    "late",
    [
        None,  # "no objection": before, the timeout failed open and the call ran
        PatchInput(input={"command": "touch LATE"}),
        PatchInput(input={"command": "echo fine"}),
    ],
)
async def test_a_tool_call_hook_that_swallows_its_timeout_blocks_the_call(
    tmp_path: Path, late: Any
) -> None:
    def setup(harness: AgentHarness) -> None:
        harness.connect(ToolCallEvent, _swallowing(late), timeout_s=0.05)

    call = FauxToolCall(name="bash", arguments={"command": "touch P"})
    [result] = await _run(
        tmp_path, [call], tools=[bash_tool()], setup=setup, mode="bypass", handler_errors=True
    )
    assert result.is_error and "did not return within" in result.text
    assert not (tmp_path / "P").exists() and not (tmp_path / "LATE").exists()


async def test_a_tool_result_hook_that_answers_late_is_not_applied(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("the real content")

    def setup(harness: AgentHarness) -> None:
        late = PatchResult(content="FORGED", is_error=False)
        harness.connect(ToolResultEvent, _swallowing(late), timeout_s=0.05)

    call = FauxToolCall(name="read", arguments={"path": "a.txt"})
    [result] = await _run(tmp_path, [call], setup=setup, handler_errors=True)
    assert result.text == "the real content"


async def test_a_late_block_still_blocks(tmp_path: Path) -> None:
    def setup(harness: AgentHarness) -> None:
        harness.connect(ToolCallEvent, _swallowing(Block(reason="late")), timeout_s=0.05)

    call = FauxToolCall(name="bash", arguments={"command": "touch P"})
    [result] = await _run(
        tmp_path, [call], tools=[bash_tool()], setup=setup, mode="bypass", handler_errors=True
    )
    assert result.is_error and not (tmp_path / "P").exists()


# --- class 11: a call that cannot be checked is an error result, the run goes on ------------

_EDITS = [{"oldText": "a", "newText": "b"}]
BAD_TARGETS = [
    FauxToolCall(name="read", arguments={"path": "a\x00b"}),  # the issue's: a NUL in a path
    FauxToolCall(name="write", arguments={"path": "x\x00/../../etc/passwd", "content": "x"}),
    FauxToolCall(name="edit", arguments={"path": "\x00", "edits": _EDITS}),
    FauxToolCall(name="grep", arguments={"pattern": "x", "path": "sub\x00"}),
    FauxToolCall(name="ls", arguments={"path": "/tmp/\x00"}),
    FauxToolCall(name="read", arguments={"path": "chain/l0"}),  # a symlink chain too long
]  # fmt: skip


@pytest.mark.parametrize("call", BAD_TARGETS, ids=lambda c: f"{c.name}-{c.arguments!r:.30}")
async def test_a_target_that_cannot_be_checked_is_that_calls_error(
    tmp_path: Path, call: FauxToolCall
) -> None:
    chain = tmp_path / "chain"
    chain.mkdir()
    for i in range(3000):  # os.path.realpath recurses once per link
        os.symlink(f"l{i + 1}", chain / f"l{i}")
    (tmp_path / "ok.txt").write_text("fine")
    after = FauxToolCall(name="read", arguments={"path": "ok.txt"})
    bad, good = await _run(tmp_path, [call, after])
    assert bad.is_error
    assert not good.is_error and good.text == "fine"


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for i in range(levels):
        value = {"a": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize("levels", [61, 100, 254, 256, 300, 900])
async def test_tool_arguments_nested_too_deep_cost_the_call_not_the_run(
    tmp_path: Path, levels: int
) -> None:
    """The issue's case: arguments nested past 255 levels made ``prompt()`` raise and lose the
    reply; past the session's nesting cap they could not even be stored."""
    deep = FauxToolCall(name="read", arguments={"path": "ok.txt", "x": _nested(levels)})
    (tmp_path / "ok.txt").write_text("fine")
    after = FauxToolCall(name="read", arguments={"path": "ok.txt"})
    bad, good = await _run(tmp_path, [deep, after])
    assert bad.is_error and "nested deeper than" in bad.text
    assert not good.is_error and good.text == "fine"


async def test_arguments_at_the_cap_are_kept(tmp_path: Path) -> None:
    # {"path": ..., "x": <57 levels>} is 58 levels: within the 60 a call's arguments may hold
    call = FauxToolCall(name="read", arguments={"path": "ok.txt", "x": _nested(57)})
    (tmp_path / "ok.txt").write_text("fine")
    [result] = await _run(tmp_path, [call])
    assert "nested deeper" not in result.text  # refused by the schema, not dropped


@pytest.mark.parametrize(
    "value", [2**64, -(2**63) - 1, 10**30, [1, {"n": 99999999999999999999}], float("nan")]
)
async def test_tool_arguments_a_session_cannot_store_cost_the_call_not_the_run(
    tmp_path: Path, value: Any
) -> None:
    # Review 5, finding 19: an integer past 64 bits (which a provider's JSON parser keeps) or
    # a NaN made the session refuse the reply, and prompt() raised.
    odd = FauxToolCall(name="read", arguments={"path": "ok.txt", "timeout": value})
    (tmp_path / "ok.txt").write_text("fine")
    after = FauxToolCall(name="read", arguments={"path": "ok.txt"})
    bad, good = await _run(tmp_path, [odd, after])
    assert bad.is_error and "cannot store" in bad.text
    assert not good.is_error and good.text == "fine"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("bash", {"command": "echo hi", "timeout": 1e9}),
        ("grep", {"pattern": "x", "limit": 1_000_000_000}),
        ("grep", {"pattern": "x", "context": 1_000_000}),
        ("ls", {"limit": 10**9}),
    ],
)
async def test_a_models_timeout_and_limits_are_bounded(
    tmp_path: Path, name: str, arguments: dict[str, Any]
) -> None:
    # Review 5, findings 34 and 35: a model's `timeout` ran a command for as long as it liked,
    # and grep's `limit`/`context` made a result as large as the tree.
    call = FauxToolCall(name=name, arguments=arguments)
    [result] = await _run(tmp_path, [call], tools=[bash_tool(), grep_tool(), ls_tool()])
    assert result.is_error and "invalid arguments" in result.text, result.text
