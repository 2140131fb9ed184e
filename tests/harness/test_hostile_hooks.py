"""Hooks that return the wrong things or mutate what they are given never break a run or the
session file (found by an adversarial review)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import (
    AgentHarness,
    AssistantMessage,
    Block,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    MessageEntry,
    PatchInput,
    PatchResult,
    ToolResultMessage,
    ToolRun,
    tool,
)

calls: list[dict[str, Any]] = []


@tool("echo", "echoes", {"type": "object", "properties": {"x": {"type": "string"}}})
async def echo(input: Mapping[str, Any], run: ToolRun) -> Any:
    calls.append(dict(input))
    return f"echo {input.get('x')}"


async def run_one(
    tmp_path: Path, event: str, receiver: Callable[..., Any]
) -> tuple[list[ToolResultMessage], list[Any], Any]:
    calls.clear()
    session = await JsonlSessionRepo(tmp_path).create(str(tmp_path))
    model = FauxModel(
        [FauxReply(tool_calls=[FauxToolCall(name="echo", arguments={"x": "a"})]), "ok"]
    )
    h = AgentHarness(session=session, model=model, tools=[echo])
    errors: list[Any] = []
    h.connect(event, receiver)
    h.connect("handler_error", lambda s, event: errors.append(event))
    reply = await h.prompt("go")
    assert reply.text == "ok"  # the run always finishes
    reopened = await JsonlSessionRepo(tmp_path).open(session.id)
    results = [
        e.message
        for e in reopened.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]
    return results, errors, reopened


@pytest.mark.parametrize(
    "bad",
    [
        lambda: PatchResult(content=[{"type": "text", "text": "dict"}]),  # type: ignore[list-item]
        lambda: PatchResult(details=object()),
        lambda: PatchResult(details={1: 2}),
        lambda: PatchResult(is_error="no"),  # type: ignore[arg-type]
        lambda: PatchResult(terminate="no"),  # type: ignore[arg-type]
    ],
)
async def test_a_badly_typed_tool_result_patch_is_reported_and_ignored(
    tmp_path: Path, bad: Callable[[], PatchResult]
) -> None:
    results, errors, _ = await run_one(tmp_path, "tool_result", lambda s, event: bad())
    assert [r.text for r in results] == ["echo a"] and not results[0].is_error
    assert [e.event_name for e in errors] == ["tool_result"]
    assert isinstance(errors[0].error, TypeError)


async def test_a_plain_string_patch_is_one_text_block(tmp_path: Path) -> None:
    results, errors, _ = await run_one(
        tmp_path, "tool_result", lambda s, event: PatchResult(content="replaced")
    )
    assert [r.text for r in results] == ["replaced"] and errors == []


@pytest.mark.parametrize(
    "bad",
    [
        lambda: PatchInput(input=None),  # type: ignore[arg-type]
        lambda: PatchInput(input="str"),  # type: ignore[arg-type]
        lambda: PatchInput(input={"x": object()}),
        lambda: Block(reason=123),  # type: ignore[arg-type]
        lambda: "not a result",
    ],
)
async def test_a_badly_typed_tool_call_result_fails_closed(
    tmp_path: Path, bad: Callable[[], Any]
) -> None:
    results, errors, _ = await run_one(tmp_path, "tool_call", lambda s, event: bad())
    assert calls == []  # the tool never ran
    assert results[0].is_error
    assert [e.event_name for e in errors] == ["tool_call"]


async def test_mutating_the_input_in_place_is_a_recorded_validated_patch(tmp_path: Path) -> None:
    def mutate(sender: object, event: Any) -> None:
        event.input["x"] = "mutated"

    results, _, session = await run_one(tmp_path, "tool_call", mutate)
    assert calls == [{"x": "mutated"}]
    assert results[0].extra["effectiveInput"] == {"x": "mutated"}
    call = next(
        e.message for e in session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
    )  # fmt: skip
    assert call.tool_calls[0].arguments == {"x": "a"}  # what the model asked for, unchanged

    def break_schema(sender: object, event: Any) -> None:
        event.input["x"] = 12345

    results, _, _ = await run_one(tmp_path / "second", "tool_call", break_schema)
    assert calls == [] and results[0].is_error
    assert "invalid arguments" in results[0].text


async def test_observers_cannot_change_the_tool_input(tmp_path: Path) -> None:
    def meddle(sender: object, event: Any) -> None:
        event.input["x"] = "observer"

    results, _, _ = await run_one(tmp_path, "tool_execution_start", meddle)
    assert calls == [{"x": "a"}] and results[0].text == "echo a"


async def test_a_patched_result_with_a_lone_surrogate_is_stored_replaced(tmp_path: Path) -> None:
    # Once an error result ("could not be stored"); now the writer's rule for lone surrogates
    # applies to a hook's patch as to a tool's output: U+FFFD in their place.
    results, _, _ = await run_one(
        tmp_path, "tool_result", lambda s, event: PatchResult(content="bad \udcff surrogate")
    )  # the results as read back from the session file
    assert not results[0].is_error and results[0].text == "bad \ufffd surrogate"
