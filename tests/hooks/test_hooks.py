"""The hooks beyond tool_call/tool_result: how each combines the results of several receivers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import pytest

from hooks import (
    UNSET,
    AgentStartPatch,
    BeforeAgentStartEvent,
    BeforeProviderPayloadEvent,
    BeforeProviderRequestEvent,
    Block,
    Cancel,
    ContextEvent,
    Event,
    HandlerErrorEvent,
    Message,
    PatchInput,
    PatchResult,
    ReplaceMessages,
    ReplacePayload,
    SessionBeforeCompactEvent,
    SessionBeforeForkEvent,
    SessionBeforeRewindEvent,
    SessionBeforeTreeEvent,
    StreamOptions,
    StreamOptionsPatch,
    SupplyCompaction,
    SupplySummary,
    ToolCallEvent,
    ToolResultEvent,
    TreeOptions,
    UserMessage,
    connect,
    emit_before_agent_start,
    emit_before_provider_payload,
    emit_before_provider_request,
    emit_context,
    emit_session_before_compact,
    emit_session_before_fork,
    emit_session_before_rewind,
    emit_session_before_tree,
    emit_tool_call,
    emit_tool_result,
    signal_for,
)

HI = UserMessage(content="hi", timestamp=1)
NOTE = UserMessage(content="note", timestamp=2)
MORE = UserMessage(content="more", timestamp=3)


class Harness:
    """Stands in for the emitting AgentHarness."""


@contextmanager
def connected(event: str, *receivers: Any, priority: int = 0) -> Iterator[None]:
    """Connect ``receivers`` in order (all senders) for the duration of the block."""
    disconnects = [connect(event, r, priority=priority) for r in receivers]
    try:
        yield
    finally:
        for disconnect in disconnects:
            disconnect()


def start_event() -> BeforeAgentStartEvent:
    return BeforeAgentStartEvent(prompt=[HI], system_prompt="base")


def context_event() -> ContextEvent:
    return ContextEvent(messages=[HI], turn_index=2)


def request_event() -> BeforeProviderRequestEvent:
    options = StreamOptions(timeout_s=10.0, headers={"x-keep": "1"})
    return BeforeProviderRequestEvent(
        provider="faux", model_id="m", session_id="s1", options=options
    )


def payload_event() -> BeforeProviderPayloadEvent:
    return BeforeProviderPayloadEvent(provider="faux", model_id="m", payload={"max_tokens": 10})


def compact_event() -> SessionBeforeCompactEvent:
    return SessionBeforeCompactEvent(
        session_id="s1",
        leaf_id="e9",
        first_kept_entry_id="e5",
        tokens_before=1000,
        custom_instructions=None,
    )


def tree_event() -> SessionBeforeTreeEvent:
    return SessionBeforeTreeEvent(
        session_id="s1",
        target_id="e3",
        old_leaf_id="e9",
        summarize=True,
        custom_instructions="be brief",
        label=None,
    )


def fork_event() -> SessionBeforeForkEvent:
    return SessionBeforeForkEvent(source_id="s1", entry_id="e3", position=None, scope="branch")


def rewind_event() -> SessionBeforeRewindEvent:
    return SessionBeforeRewindEvent(
        session_id="s1", target_id="e3", paths=["a.txt"], conversation=True
    )


# --- every hook: one case each, for the rules all combiners share ---------------------------


@attrs.frozen
class Case:
    """One hook: an event, its combiner, a result it accepts, and how to see it was applied."""

    name: str
    event: Callable[[], Event]
    emit: Callable[[object, Any], Awaitable[Any]]
    good: object
    applied: Callable[[Any], bool]
    untouched: Callable[[Any], bool]


CASES = (
    Case(
        "before_agent_start",
        start_event,
        emit_before_agent_start,
        AgentStartPatch(messages=[NOTE], system_prompt="new"),
        lambda o: o.messages == (NOTE,) and o.system_prompt == "new",
        lambda o: o.messages == () and o.system_prompt == "base",
    ),
    Case(
        "context",
        context_event,
        emit_context,
        ReplaceMessages(messages=[]),
        lambda o: o == (),
        lambda o: o == (HI,),
    ),
    Case(
        "before_provider_request",
        request_event,
        emit_before_provider_request,
        StreamOptionsPatch(max_retries=0),
        lambda o: o.max_retries == 0,
        lambda o: o == request_event().options,
    ),
    Case(
        "before_provider_payload",
        payload_event,
        emit_before_provider_payload,
        ReplacePayload(payload={"max_tokens": 99}),
        lambda o: o == {"max_tokens": 99},
        lambda o: o == {"max_tokens": 10},
    ),
    Case(
        "tool_call",
        lambda: ToolCallEvent(tool_call_id="t1", tool_name="ls", input={}, turn_index=0),
        emit_tool_call,
        PatchInput(input={"path": "/"}),
        lambda o: not o.blocked and o.input == {"path": "/"},
        lambda o: not o.blocked and o.input == {},
    ),
    Case(
        "tool_result",
        lambda: ToolResultEvent(
            tool_call_id="t1",
            tool_name="ls",
            input={},
            content=[],
            details=None,
            is_error=False,
            turn_index=0,
        ),
        emit_tool_result,
        PatchResult(is_error=True),
        lambda o: o.is_error,
        lambda o: not o.is_error,
    ),
    Case(
        "session_before_compact",
        compact_event,
        emit_session_before_compact,
        SupplyCompaction(summary="short"),
        lambda o: not o.cancelled and o.supplied == SupplyCompaction(summary="short"),
        lambda o: (o.cancelled, o.reason, o.supplied) == (False, None, None),
    ),
    Case(
        "session_before_tree",
        tree_event,
        emit_session_before_tree,
        TreeOptions(label="checkpoint"),
        lambda o: not o.cancelled and o.label == "checkpoint",
        lambda o: (
            (o.cancelled, o.reason, o.summary, o.custom_instructions, o.label)
            == (False, None, None, "be brief", None)
        ),
    ),
    Case(
        "session_before_fork",
        fork_event,
        emit_session_before_fork,
        Cancel(reason="read-only"),
        lambda o: o.cancelled and o.reason == "read-only",
        lambda o: (o.cancelled, o.reason) == (False, None),
    ),
    Case(
        "session_before_rewind",
        rewind_event,
        emit_session_before_rewind,
        Cancel(reason="keep my files"),
        lambda o: o.cancelled and o.reason == "keep my files",
        lambda o: (o.cancelled, o.reason) == (False, None),
    ),
)
FAIL_OPEN = tuple(c for c in CASES if c.name != "tool_call")  # tool_call fails closed


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_each_hook_without_receivers_keeps_the_events_values(case: Case) -> None:
    assert case.event().name == case.name
    assert case.untouched(await case.emit(Harness(), case.event()))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_each_hook_runs_receivers_by_priority_then_order_sync_and_async(case: Case) -> None:
    calls: list[str] = []

    def make(label: str, result: object = None, *, is_async: bool = False) -> Any:
        if is_async:

            async def receiver(sender: object, *, event: Event) -> object:
                await asyncio.sleep(0)
                calls.append(label)
                return result

            return receiver

        def sync_receiver(sender: object, event: Event) -> object:
            calls.append(label)
            return result

        return sync_receiver

    disconnects = [
        connect(case.name, make("a")),
        connect(case.name, make("b", is_async=True)),
        connect(case.name, make("first", is_async=True), priority=5),
        connect(case.name, make("last", case.good), priority=-5),
    ]
    try:
        outcome = await case.emit(Harness(), case.event())
    finally:
        for disconnect in disconnects:
            disconnect()

    assert calls == ["first", "a", "b", "last"]
    assert case.applied(outcome)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_each_hook_reaches_only_its_sender_and_not_when_muted(case: Case) -> None:
    mine, other = Harness(), Harness()
    disconnect = connect(case.name, lambda sender, event: case.good, sender=mine)
    try:
        assert case.untouched(await case.emit(other, case.event()))
        with signal_for(case.name).muted():
            assert case.untouched(await case.emit(mine, case.event()))
        assert case.applied(await case.emit(mine, case.event()))
    finally:
        disconnect()


@pytest.mark.parametrize("case", FAIL_OPEN, ids=lambda c: c.name)
async def test_a_raising_or_wrongly_typed_receiver_reports_and_the_chain_goes_on(
    case: Case, errors: list[HandlerErrorEvent]
) -> None:
    def broken(sender: object, event: Event) -> None:
        raise RuntimeError("down")

    async def wrong(sender: object, *, event: Event) -> object:
        return Block(reason="a tool_call result, not this hook's")

    with connected(case.name, broken, wrong, lambda sender, event: case.good):
        outcome = await case.emit(Harness(), case.event())

    assert case.applied(outcome)
    assert [(e.event_name, type(e.error)) for e in errors] == [
        (case.name, RuntimeError),
        (case.name, TypeError),
    ]
    assert errors[0].receiver.endswith("broken")


@pytest.mark.parametrize("case", FAIL_OPEN, ids=lambda c: c.name)
async def test_a_receiver_returning_none_has_no_opinion(case: Case) -> None:
    with connected(case.name, lambda sender, event: None, lambda sender, event: None):
        assert case.untouched(await case.emit(Harness(), case.event()))


# --- before_agent_start ---------------------------------------------------------------------


async def test_before_agent_start_collects_every_receivers_messages_in_order() -> None:
    with connected(
        "before_agent_start",
        lambda sender, event: AgentStartPatch(messages=[NOTE]),
        lambda sender, event: None,
        lambda sender, event: AgentStartPatch(messages=[MORE, NOTE]),
    ):
        outcome = await emit_before_agent_start(Harness(), start_event())

    assert outcome.messages == (NOTE, MORE, NOTE)
    assert outcome.system_prompt == "base"


async def test_before_agent_start_chains_the_system_prompt() -> None:
    seen: list[tuple[str, tuple[Message, ...]]] = []

    def first(sender: object, event: BeforeAgentStartEvent) -> AgentStartPatch:
        return AgentStartPatch(system_prompt=event.system_prompt + " +first")

    async def second(sender: object, *, event: BeforeAgentStartEvent) -> AgentStartPatch:
        seen.append((event.system_prompt, event.prompt))
        return AgentStartPatch(messages=[NOTE])  # system prompt UNSET: kept

    def third(sender: object, event: BeforeAgentStartEvent) -> AgentStartPatch:
        seen.append((event.system_prompt, event.prompt))
        return AgentStartPatch(system_prompt=event.system_prompt + " +third")

    with connected("before_agent_start", first, second, third):
        outcome = await emit_before_agent_start(Harness(), start_event())

    assert seen == [("base +first", (HI,)), ("base +first", (HI,))]
    assert outcome.system_prompt == "base +first +third"
    assert outcome.messages == (NOTE,)


# --- context, before_provider_payload -------------------------------------------------------


async def test_context_replacements_chain() -> None:
    seen: list[tuple[Message, ...]] = []

    def add(sender: object, event: ContextEvent) -> ReplaceMessages:
        return ReplaceMessages(messages=[*event.messages, NOTE])

    async def drop_first(sender: object, *, event: ContextEvent) -> ReplaceMessages:
        seen.append(event.messages)
        return ReplaceMessages(messages=event.messages[1:])

    with connected("context", add, drop_first):
        messages = await emit_context(Harness(), context_event())

    assert seen == [(HI, NOTE)]
    assert messages == (NOTE,)
    assert type(messages) is tuple


async def test_before_provider_payload_replacements_chain() -> None:
    seen: list[dict[str, Any]] = []

    def cap(sender: object, event: BeforeProviderPayloadEvent) -> ReplacePayload:
        return ReplacePayload(payload={**event.payload, "max_tokens": 5})

    def tag(sender: object, event: BeforeProviderPayloadEvent) -> ReplacePayload:
        seen.append(dict(event.payload))
        return ReplacePayload(payload={**event.payload, "metadata": {"user_id": "u"}})

    with connected("before_provider_payload", cap, tag):
        payload = await emit_before_provider_payload(Harness(), payload_event())

    assert seen == [{"max_tokens": 5}]
    assert payload == {"max_tokens": 5, "metadata": {"user_id": "u"}}


# --- before_provider_request ----------------------------------------------------------------


async def test_before_provider_request_patches_chain_through_patched() -> None:
    seen: list[StreamOptions] = []

    def first(sender: object, event: BeforeProviderRequestEvent) -> StreamOptionsPatch:
        return StreamOptionsPatch(timeout_s=None, headers={"x-a": "1"}, metadata={"user_id": "u"})

    def second(sender: object, event: BeforeProviderRequestEvent) -> StreamOptionsPatch:
        seen.append(event.options)
        return StreamOptionsPatch(headers={"x-keep": None}, max_retries=0)

    with connected("before_provider_request", first, second):
        options = await emit_before_provider_request(Harness(), request_event())

    assert seen == [
        StreamOptions(
            timeout_s=None, headers={"x-keep": "1", "x-a": "1"}, metadata={"user_id": "u"}
        )
    ]
    assert options == StreamOptions(
        timeout_s=None, max_retries=0, headers={"x-a": "1"}, metadata={"user_id": "u"}
    )


# --- session_before_compact -----------------------------------------------------------------


async def test_compact_first_cancel_wins_and_stops_the_chain() -> None:
    later: list[str] = []
    with connected(
        "session_before_compact",
        lambda sender, event: Cancel(reason="busy"),
        lambda sender, event: Cancel(reason="also busy"),
        lambda sender, event: later.append("ran"),
    ):
        outcome = await emit_session_before_compact(Harness(), compact_event())

    assert (outcome.cancelled, outcome.reason, outcome.supplied) == (True, "busy", None)
    assert later == []


async def test_compact_first_supply_wins_and_later_receivers_still_run() -> None:
    later: list[str] = []
    first = SupplyCompaction(summary="one", tokens_before=10, details={"by": "first"})
    with connected(
        "session_before_compact",
        lambda sender, event: first,
        lambda sender, event: SupplyCompaction(summary="two"),
        lambda sender, event: later.append("ran"),
    ):
        outcome = await emit_session_before_compact(Harness(), compact_event())

    assert (outcome.cancelled, outcome.reason) == (False, None)
    assert outcome.supplied is first
    assert outcome.supplied.first_kept_entry_id is UNSET
    assert later == ["ran"]


async def test_compact_a_later_cancel_overrides_a_supplied_compaction() -> None:
    with connected(
        "session_before_compact",
        lambda sender, event: SupplyCompaction(summary="one"),
        lambda sender, event: Cancel(reason="policy"),
    ):
        outcome = await emit_session_before_compact(Harness(), compact_event())

    assert (outcome.cancelled, outcome.reason, outcome.supplied) == (True, "policy", None)


# --- session_before_tree --------------------------------------------------------------------


async def test_tree_options_chain_and_each_receiver_sees_them() -> None:
    seen: list[tuple[str | None, str | None]] = []

    def label(sender: object, event: SessionBeforeTreeEvent) -> TreeOptions:
        return TreeOptions(label="checkpoint")

    def clear_instructions(sender: object, event: SessionBeforeTreeEvent) -> TreeOptions:
        seen.append((event.custom_instructions, event.label))
        return TreeOptions(custom_instructions=None)

    def nothing(sender: object, event: SessionBeforeTreeEvent) -> TreeOptions:
        seen.append((event.custom_instructions, event.label))
        return TreeOptions()

    with connected("session_before_tree", label, clear_instructions, nothing):
        outcome = await emit_session_before_tree(Harness(), tree_event())

    assert seen == [("be brief", "checkpoint"), (None, "checkpoint")]
    assert (outcome.custom_instructions, outcome.label) == (None, "checkpoint")
    assert (outcome.cancelled, outcome.summary) == (False, None)


async def test_tree_first_summary_wins_and_options_after_it_still_apply() -> None:
    first = SupplySummary(summary="what happened", details=[1])
    with connected(
        "session_before_tree",
        lambda sender, event: first,
        lambda sender, event: SupplySummary(summary="other"),
        lambda sender, event: TreeOptions(label="after"),
    ):
        outcome = await emit_session_before_tree(Harness(), tree_event())

    assert outcome.summary is first
    assert outcome.label == "after"
    assert not outcome.cancelled


async def test_tree_first_cancel_wins_and_stops_the_chain() -> None:
    later: list[str] = []
    with connected(
        "session_before_tree",
        lambda sender, event: SupplySummary(summary="s"),
        lambda sender, event: Cancel(reason="no"),
        lambda sender, event: Cancel(reason="never"),
        lambda sender, event: later.append("ran"),
    ):
        outcome = await emit_session_before_tree(Harness(), tree_event())

    assert (outcome.cancelled, outcome.reason, outcome.summary) == (True, "no", None)
    assert later == []


# --- session_before_fork --------------------------------------------------------------------


async def test_fork_first_cancel_wins_and_stops_the_chain(
    errors: list[HandlerErrorEvent],
) -> None:
    later: list[str] = []

    def broken(sender: object, event: SessionBeforeForkEvent) -> None:
        raise OSError("disk")

    with connected(
        "session_before_fork",
        lambda sender, event: None,
        broken,
        lambda sender, event: Cancel(reason="first"),
        lambda sender, event: Cancel(reason="second"),
        lambda sender, event: later.append("ran"),
    ):
        outcome = await emit_session_before_fork(Harness(), fork_event())

    assert (outcome.cancelled, outcome.reason) == (True, "first")
    assert later == []
    assert [(e.event_name, type(e.error)) for e in errors] == [("session_before_fork", OSError)]


# --- results --------------------------------------------------------------------------------


def test_results_hold_tuples_and_default_to_unset() -> None:
    patch = AgentStartPatch(messages=[NOTE])
    options = TreeOptions()

    assert type(patch.messages) is tuple
    assert patch.system_prompt is UNSET
    assert AgentStartPatch().messages == ()
    assert type(ReplaceMessages(messages=[HI]).messages) is tuple
    assert (options.custom_instructions, options.label) == (UNSET, UNSET)
    assert SupplyCompaction(summary="s").details is None
    assert SupplySummary(summary="s").details is None
    with pytest.raises(TypeError):
        Cancel()  # type: ignore[call-arg]
