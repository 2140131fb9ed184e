"""A request read from the context's JSON (issue 24, point 1): the loop's provider messages,
the request check and the Anthropic body are made from the messages' JSON, so a session's first
request builds no typed message. For every message kind and shape (``message_shapes``), from a
stored body or a typed value, they equal what the typed code gave (``typed_request_path``: the
code as it was), and the stored messages stay unbuilt."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
import typed_request_path as typed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from message_shapes import messages_in_a_row
from stress import examples

from harness import LazyMessages, Message, UserMessage, context_size, to_llm_messages
from harness._loop import _to_llm
from harness._providers.anthropic import convert_messages
from harness._validate import request_problems
from repos import decode_entry, normalized
from repos._codec import CodecError, Slot, stored_slot


def _slots(objs: list[dict[str, Any]], stored: bool) -> tuple[list[Message], list[Slot]]:
    """The messages that decode, and their slots as a session's context holds them: the
    checked JSON (``stored``), else the value decoded at read."""
    eager: list[Message] = []
    slots: list[Slot] = []
    for i, obj in enumerate(objs):
        line = {"type": "message", "id": f"abcd{i:04x}", "parentId": None, "timestamp": "t"}
        line = orjson.loads(orjson.dumps({**line, "message": obj}))
        try:
            message = decode_entry(line).message  # type: ignore[union-attr]
        except CodecError:
            continue
        eager.append(message)
        slots.append((stored_slot(line) if stored else None) or Slot(value=message))
    return eager, slots


@settings(
    max_examples=examples(300, 1000), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(messages_in_a_row(), st.booleans(), st.integers(0, 8))
def test_the_request_from_json_is_what_the_typed_path_gave(
    objs: list[dict[str, Any]], stored: bool, prefix: int
) -> None:
    eager, slots = _slots(objs, stored)
    unbuilt = {id(s) for s in slots if not s.built}
    run = SimpleNamespace(converted={})  # the loop's cache of converted messages
    llm = _to_llm(run, normalized(LazyMessages(slots)))  # type: ignore[arg-type]
    # Stored messages that go out unchanged are not built (normalising builds those it changes).
    unchanged = [s for s in llm.slots if id(s) in unbuilt]
    assert all(not s.built for s in unchanged)
    want = to_llm_messages(typed.normalize_messages(eager))
    valid = min(prefix, len(want)) if not typed.request_problems(want[:prefix]) else 0
    body, problems = convert_messages(llm), request_problems(llm, valid_prefix=valid)
    # Converting and checking read the JSON: they build nothing.
    assert all(not s.built for s in unchanged)
    assert body == typed.convert_messages(want)
    assert problems == typed.request_problems(want, valid_prefix=valid)
    assert llm == want
    # Typed input gives the same, too.
    assert convert_messages(want) == typed.convert_messages(want)
    assert request_problems(want) == typed.request_problems(want)
    # The same slots give the same provider messages, but for those normalising makes anew (a
    # request checks only what follows the prefix it shares with the last one).
    again = _to_llm(run, normalized(LazyMessages(slots)))  # type: ignore[arg-type]
    kept = [s for s in llm.slots if s in slots]
    assert (kept and [s for s in again.slots if s in slots] == kept) or not kept


def test_a_session_s_first_request_builds_no_message(tmp_path: Any) -> None:
    from harness import open_session

    header = {"type": "session", "version": 3, "id": "s1", "timestamp": "t", "cwd": "/w"}
    bodies: list[dict[str, Any]] = [{"role": "user", "content": "go", "timestamp": 1}]
    for i in range(50):
        bodies.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "thinkingSignature": "sig"},
                    {"type": "text", "text": f"step {i}"},
                    {"type": "toolCall", "id": f"c{i}", "name": "read", "arguments": {"i": i}},
                ],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude",
                "usage": {"input": 100 + i, "output": 5, "cacheRead": 0, "cacheWrite": 0},
                "stopReason": "toolUse",
                "timestamp": 2 + i,
            }
        )
        bodies.append(
            {
                "role": "toolResult",
                "toolCallId": f"c{i}",
                "toolName": "read",
                "content": [{"type": "text", "text": f"out {i}"}],
                "isError": False,
                "timestamp": 2 + i,
            }
        )
    lines = [header]
    for i, body in enumerate(bodies):
        parent = None if i == 0 else f"{i - 1:08x}"
        lines.append(
            {
                "type": "message",
                "id": f"{i:08x}",
                "parentId": parent,
                "timestamp": "t",
                "message": body,
            }
        )
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    with open_session(path) as session:
        context = session.build_context().messages
        assert isinstance(context, LazyMessages)
        llm = _to_llm(SimpleNamespace(converted={}), context)  # type: ignore[arg-type]
        assert request_problems(llm) == []
        body = convert_messages(llm)
        assert not any(s.built for s in context.slots)
        assert len(body) == 101 and body[1]["content"][2]["input"] == {"i": 0}
        # The automatic compaction's size check reads the last reply's usage and what follows.
        size = context_size(context)
        assert sum(s.built for s in context.slots) == 2
        assert body == typed.convert_messages(tuple(context))
        assert size == context_size(tuple(context))
        # A context hook's list of the context's own messages (now built, as a hook reads
        # them) keeps their slots: their JSON is not made again.
        mine = UserMessage(content="and one more")
        replaced = normalized([*context, mine], reuse=context)
        assert replaced.slots[:-1] == context.slots
        assert replaced[-1] is mine


def test_a_harness_over_a_long_session_builds_no_message_before_its_first_request(
    tmp_path: Any,
) -> None:
    """The approvals the harness remembers are read from the custom entries alone: reading
    every entry at start built every message of the session before its first request."""
    from harness import AgentHarness, FauxModel, open_session

    header = {"type": "session", "version": 3, "id": "s1", "timestamp": "t", "cwd": "/w"}
    lines: list[dict[str, Any]] = [header]
    for i in range(20):
        body = {"role": "user", "content": f"go {i}", "timestamp": 1}
        parent = None if i == 0 else f"{i - 1:08x}"
        lines.append(
            {
                "type": "message",
                "id": f"{i:08x}",
                "parentId": parent,
                "timestamp": "t",
                "message": body,
            }
        )
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    with open_session(path) as session:
        AgentHarness(session=session, model=FauxModel(["hi"]), cwd=tmp_path, resources=None)
        context = session.build_context().messages
        assert isinstance(context, LazyMessages) and len(context) == 20
        # the leaf alone is read (a damaged one is dropped at start, as before)
        assert not any(s.built for s in context.slots[:-1])


def test_a_tool_results_null_is_error_is_sent_as_the_typed_path_sends_it() -> None:
    """Issue 24 attack, F2: `"isError": null` is read as false and kept in the message's extra
    keys, which the JSON of the typed message carries back; the body from JSON said
    `"is_error": null` where the typed path says false."""
    call = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c1", "name": "t", "arguments": {}}],
        "stopReason": "toolUse",
        "timestamp": 1,
    }
    result = {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "t",
        "content": "ok",
        "isError": None,
        "timestamp": 2,
    }
    objs = [{"role": "user", "content": "go", "timestamp": 0}, call, result]
    eager, slots = _slots(objs, stored=True)  # decoded at read: not a slot of the JSON
    llm = _to_llm(SimpleNamespace(converted={}), normalized(LazyMessages(slots)))  # type: ignore[arg-type]
    body = convert_messages(llm)
    assert body[-1]["content"][0]["is_error"] is False
    assert body == typed.convert_messages(to_llm_messages(typed.normalize_messages(eager)))
