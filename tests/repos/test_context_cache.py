"""The incremental context equals a full rebuild after every step of random session growth."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from stress import examples

from hooks import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from repos import MemorySessionRepo, build_context
from repos._context import ContextCache, _all_pair_ids, _normalize, slots_of

IDS = ["a", "b", "c", "d"]  # a small pool: duplicates, orphans and crossings happen often

op = st.one_of(
    st.tuples(st.just("user"), st.sampled_from(["hi", "", "  "])),
    st.tuples(
        st.just("assistant"),
        st.lists(st.sampled_from(IDS), max_size=3),
        st.sampled_from(["toolUse", "stop", "length", "aborted"]),
        st.sampled_from(["", "text"]),
    ),
    st.tuples(st.just("result"), st.sampled_from(IDS), st.sampled_from(["out", ""])),
    st.tuples(st.just("custom"), st.just("note")),
    st.tuples(st.just("summary"), st.just("branch")),
    st.tuples(st.just("compaction"), st.integers(min_value=0, max_value=50)),
    st.tuples(st.just("move"), st.integers(min_value=-1, max_value=50)),
    st.tuples(st.just("model"), st.sampled_from(["m1", "m2"])),
)


@settings(max_examples=examples(150, 600), deadline=None)
@given(st.lists(op, max_size=40))
def test_incremental_context_equals_a_full_rebuild(ops: list[tuple[object, ...]]) -> None:
    session = asyncio.run(MemorySessionRepo().create("/w"))
    cache = ContextCache()
    for step in ops:
        kind = step[0]
        ids = session.entry_ids()
        if kind == "user":
            session.append_message(UserMessage(content=str(step[1])))
        elif kind == "assistant":
            calls = [ToolCall(id=str(i), name="t") for i in step[1]]  # type: ignore[union-attr]
            text = [TextContent(text=str(step[3]))]
            session.append_message(
                AssistantMessage(content=[*text, *calls], stop_reason=step[2])  # type: ignore[arg-type]
            )
        elif kind == "result":
            session.append_message(
                ToolResultMessage(tool_call_id=str(step[1]), tool_name="t", content=str(step[2]))
            )
        elif kind == "custom":
            session.append_custom_message("note", "custom text")
        elif kind == "summary" and session.leaf_id is not None:
            session.append_branch_summary(session.leaf_id, "a summary")
        elif kind == "compaction" and ids:
            path = session.path_ids(session.leaf_id)
            if path:
                session.append_compaction("summary", path[int(step[1]) % len(path)], 10)  # type: ignore[call-overload]
        elif kind == "move" and ids:
            index = int(step[1])  # type: ignore[call-overload]
            session.move_to(None if index < 0 else ids[index % len(ids)])
        elif kind == "model":
            session.append_model_change("p", str(step[1]))
        expected = build_context(session.get_branch())
        got = cache.build(session.path_ids(session.leaf_id), session.get_entry)
        assert got == expected
        lazy = ContextCache().build(
            session.path_ids(session.leaf_id), session.get_entry, session.entry_type
        )
        assert lazy == expected  # decoding only what is needed gives the same context
        assert session.build_context() == expected  # build_at, through the session


@settings(max_examples=examples(100, 300), deadline=None)
@given(st.lists(op, max_size=40))
def test_normalising_gathers_the_pair_ids_a_separate_pass_finds(
    ops: list[tuple[object, ...]],
) -> None:
    # The cache's split check relies on these ids: one missed would let an extension reuse a
    # closed segment that shares a call id with the new messages.
    messages: list[Message] = []
    for step in ops:
        if step[0] == "user":
            messages.append(UserMessage(content=str(step[1])))
        elif step[0] == "assistant":
            calls = [ToolCall(id=str(i), name="t") for i in step[1]]  # type: ignore[union-attr]
            messages.append(
                AssistantMessage(
                    content=[TextContent(text=str(step[3])), *calls],
                    stop_reason=step[2],  # type: ignore[arg-type]
                )
            )
        elif step[0] == "result":
            messages.append(
                ToolResultMessage(tool_call_id=str(step[1]), tool_name="t", content=str(step[2]))
            )
    slots = slots_of(messages)
    normalised_slots, ids = _normalize(slots)
    assert ids == _all_pair_ids(slots)
    normalised = [s.message for s in normalised_slots]
    # Every call in the result is answered right after its reply.
    for i, m in enumerate(normalised):
        if isinstance(m, AssistantMessage):
            answers = normalised[i + 1 : i + 1 + len(m.tool_calls)]
            assert [r.tool_call_id for r in answers] == [c.id for c in m.tool_calls]  # type: ignore[union-attr]
