"""The request validator: what it refuses, and that pi-shaped sessions never produce a bad request
(generated ones here; the real files: tests/corpus)."""

from __future__ import annotations

from collections.abc import Callable

import pi_sessions
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stress import examples

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


@pytest.mark.parametrize("kind", sorted(pi_sessions.KINDS))
def test_no_leaf_of_a_pi_session_yields_an_invalid_request(
    pi_file: Callable[..., pi_sessions.PiSession], kind: str
) -> None:
    record = pi_file(kind)
    assert record.path is not None
    # v3 opens with entries that are not messages: a leaf there has nothing to send.
    first_message = next(i for i, o in enumerate(record.entries) if o["type"] == "message")
    with open_session(record.path) as session:
        ids = session.entry_ids()
        assert len(ids) == len(record.entries)
        for leaf in ids[::3] + ids[-1:] + ids[:first_message]:
            messages = to_llm_messages(build_context(session.get_branch(leaf)).messages)
            want = ["no messages to send"] if ids.index(leaf) < first_message else []
            assert request_problems(messages) == want, f"leaf {leaf}"


_message = st.one_of(
    st.builds(lambda t: UserMessage(content=t), st.sampled_from(["u", "", " "])),
    st.builds(
        lambda ids, t: AssistantMessage(
            content=[
                *([TextContent(text=t)] if t is not None else []),
                *(ToolCall(id=i, name="r") for i in ids),
            ]
        ),
        st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
        st.sampled_from(["x", "", None]),
    ),
    st.builds(
        lambda i: ToolResultMessage(tool_call_id=i, tool_name="r", content="r"),
        st.sampled_from(["a", "b", "c"]),
    ),
)


@settings(max_examples=examples(150, 500), deadline=None)
@given(st.lists(_message, max_size=12), st.integers(min_value=0, max_value=12))
def test_checking_after_a_valid_prefix_finds_the_same_problems(
    messages: list,
    split: int,  # type: ignore[type-arg]
) -> None:
    split = min(split, len(messages))
    if not messages[:split] or request_problems(messages[:split]):
        return  # only a valid prefix may be skipped
    assert request_problems(messages, valid_prefix=split) == request_problems(messages)
