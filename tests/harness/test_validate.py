"""The request validator: what it refuses, and that real pi sessions never produce a bad request."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import (
    AssistantMessage,
    InvalidRequestError,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    build_context,
    open_session,
    to_llm_messages,
)
from harness._validate import check_request, request_problems


def call(cid: str) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=cid, name="read")], stop_reason="toolUse")


def result(cid: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=cid, tool_name="read", content="r")


U = UserMessage(content="u")


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([U, result("x")], "has no open call"),
        ([U, call("a"), U], "calls without results"),
        ([U, call("a")], "calls without results"),
        ([U, call("a"), result("a"), result("a")], "has no open call"),
        ([U, AssistantMessage(content=[])], "empty assistant message"),
        ([U, AssistantMessage(content=[TextContent(text=" ")])], "empty text block"),
        ([UserMessage(content="")], "empty user message"),
    ],
)
def test_each_rule_is_enforced(messages: list, fragment: str) -> None:  # type: ignore[type-arg]
    problems = request_problems(messages)
    assert any(fragment in p for p in problems), problems
    with pytest.raises(InvalidRequestError) as info:
        check_request(messages)
    assert info.value.code == "invalid_request" and info.value.problems == problems


def test_a_valid_exchange_passes() -> None:
    two = AssistantMessage(content=[ToolCall(id="a", name="r"), ToolCall(id="b", name="r")])
    assert request_problems([U, two, result("b"), result("a"), U]) == []


@pytest.mark.parametrize("name", ["before-compaction.jsonl", "large-session.jsonl"])
def test_no_leaf_of_a_pi_fixture_yields_an_invalid_request(fixtures_dir: Path, name: str) -> None:
    with open_session(fixtures_dir / "pi" / name) as session:
        ids = session.entry_ids()
        for leaf in ids[::3] + ids[-1:]:
            messages = to_llm_messages(build_context(session.get_branch(leaf)).messages)
            assert request_problems(messages) == [], f"leaf {leaf}"
