"""The bus with real blinker signals: order, scoping, sync/async, combination, errors."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest

from hooks import (
    ANY,
    AgentStartEvent,
    Block,
    HandlerErrorEvent,
    PatchInput,
    PatchResult,
    TextContent,
    ToolCallEvent,
    ToolResultEvent,
    TurnStartEvent,
    connect,
    emit_tool_call,
    emit_tool_result,
    has_receivers,
    link_sender,
    notify,
    on,
    signal_for,
)
from hooks._bus import _LEDGERS


class Harness:
    """Stands in for the emitting AgentHarness: any object can be a sender."""


def call_event(**input: Any) -> ToolCallEvent:
    return ToolCallEvent(tool_call_id="t1", tool_name="bash", input=input, turn_index=0)


def result_event() -> ToolResultEvent:
    return ToolResultEvent(
        tool_call_id="t1",
        tool_name="bash",
        input={"command": "ls"},
        content=[TextContent(text="out")],
        details={"exit": 0},
        is_error=False,
        turn_index=0,
    )


def logged_errors(caplog: pytest.LogCaptureFixture) -> list[tuple[Any, ...]]:
    """The args of each exception logged at ERROR or above."""
    return [
        r.exc_info[1].args
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.exc_info and r.exc_info[1]
    ]


# --- order ----------------------------------------------------------------------------------


async def test_order_is_priority_then_registration_across_ways_of_connecting() -> None:
    h = Harness()
    calls: list[str] = []
    signal = signal_for(AgentStartEvent)

    def make(label: str) -> Any:
        def receiver(sender: object, event: AgentStartEvent) -> None:
            calls.append(label)

        return receiver

    a, b, c, d, e = (make(x) for x in "abcde")
    disconnect_a = connect("agent_start", a)
    signal.connect(b, weak=False)  # blinker directly
    disconnect_c = connect(AgentStartEvent, c, priority=10)
    disconnect_e = connect("agent_start", e, sender=h, priority=-1)
    try:
        with signal.connected_to(d, sender=h):
            await notify(h, AgentStartEvent())
    finally:
        signal.disconnect(b)
        for disconnect in (disconnect_a, disconnect_c, disconnect_e):
            disconnect()

    assert calls == ["c", "a", "b", "d", "e"]


async def test_many_receivers_run_in_registration_order_not_set_order() -> None:
    # blinker keeps receivers in sets; with 40 of them, set order and connection order differ.
    calls: list[int] = []
    receivers = []
    for i in range(40):

        def receiver(sender: object, event: AgentStartEvent, i: int = i) -> None:
            calls.append(i)

        receivers.append(receiver)
    disconnects = [connect("agent_start", r) for r in reversed(receivers)]
    try:
        await notify(Harness(), AgentStartEvent())
    finally:
        for disconnect in disconnects:
            disconnect()

    assert calls == list(reversed(range(40)))


async def test_reconnecting_after_a_full_disconnect_moves_a_receiver_last() -> None:
    calls: list[str] = []

    def first(sender: object, event: AgentStartEvent) -> None:
        calls.append("first")

    def second(sender: object, event: AgentStartEvent) -> None:
        calls.append("second")

    connect("agent_start", first)()
    disconnect_second = connect("agent_start", second)
    disconnect_first = connect("agent_start", first)
    try:
        await notify(Harness(), AgentStartEvent())
    finally:
        disconnect_first()
        disconnect_second()

    assert calls == ["second", "first"]


def test_a_collected_weak_receiver_gives_up_its_place() -> None:
    # blinker drops a collected weak receiver silently; a stale place would pass to any later
    # receiver that happens to reuse its id().
    signal = signal_for("agent_start")
    ledger = _LEDGERS["agent_start"]

    def receiver(sender: object, event: AgentStartEvent) -> None: ...

    signal.connect(receiver)  # weak, blinker's default
    rid = id(receiver)
    assert rid in ledger.order
    del receiver
    gc.collect()

    assert rid not in ledger.order
    assert rid not in signal.receivers


# --- sender scoping, sync and async ---------------------------------------------------------


async def test_a_sender_scoped_receiver_sees_only_its_sender_and_any_sees_all() -> None:
    one, other = Harness(), object()
    scoped: list[object] = []
    everyone: list[object] = []
    disconnects = [
        connect("turn_start", lambda sender, event: scoped.append(sender), sender=one),
        connect("turn_start", lambda sender, event: everyone.append(sender), sender=ANY),
    ]
    try:
        await notify(one, TurnStartEvent(turn_index=0))
        await notify(other, TurnStartEvent(turn_index=1))
    finally:
        for disconnect in disconnects:
            disconnect()

    assert scoped == [one]
    assert everyone == [one, other]


async def test_sync_and_async_receivers_mix_in_order_and_all_see_the_event() -> None:
    h = Harness()
    seen: list[tuple[str, int]] = []

    async def slow(sender: object, *, event: TurnStartEvent) -> None:
        await asyncio.sleep(0)
        seen.append(("async", event.turn_index))

    def quick(sender: object, event: TurnStartEvent) -> None:
        seen.append(("sync", event.turn_index))

    disconnects = [connect("turn_start", slow, priority=1), connect("turn_start", quick)]
    try:
        await notify(h, TurnStartEvent(turn_index=3))
    finally:
        for disconnect in disconnects:
            disconnect()

    assert seen == [("async", 3), ("sync", 3)]


async def test_on_connects_and_returns_the_function_unchanged() -> None:
    h = Harness()
    seen: list[int] = []

    def receiver(sender: object, event: TurnStartEvent) -> None:
        seen.append(event.turn_index)

    decorated = on(TurnStartEvent, sender=h)(receiver)
    try:
        await notify(h, TurnStartEvent(turn_index=7))
    finally:
        signal_for(TurnStartEvent).disconnect(receiver)

    assert decorated is receiver
    assert seen == [7]


# --- subscription management ----------------------------------------------------------------


async def test_disconnect_function_stops_delivery_and_frees_the_receiver() -> None:
    h = Harness()
    seen: list[int] = []
    signal = signal_for("turn_start")

    def receiver(sender: object, event: TurnStartEvent) -> None:
        seen.append(event.turn_index)

    disconnect = connect("turn_start", receiver, sender=h)
    await notify(h, TurnStartEvent(turn_index=1))
    disconnect()
    await notify(h, TurnStartEvent(turn_index=2))

    assert seen == [1]
    # blinker alone would keep a sender-less strong receiver
    assert id(receiver) not in signal.receivers


async def test_disconnecting_one_sender_keeps_the_receivers_other_senders() -> None:
    one, two = Harness(), Harness()
    seen: list[object] = []

    def receiver(sender: object, event: TurnStartEvent) -> None:
        seen.append(sender)

    disconnect_one = connect("turn_start", receiver, sender=one)
    disconnect_two = connect("turn_start", receiver, sender=two)
    disconnect_one()
    try:
        await notify(one, TurnStartEvent(turn_index=0))
        await notify(two, TurnStartEvent(turn_index=0))
    finally:
        disconnect_two()

    assert seen == [two]


async def test_has_receivers_follows_sender_scope_and_muting() -> None:
    one, other = Harness(), Harness()
    signal = signal_for("message_update")
    assert not has_receivers("message_update", one)

    disconnect = connect("message_update", lambda sender, event: None, sender=one)
    try:
        assert has_receivers("message_update", one)
        assert not has_receivers("message_update", other)
        with signal.muted():
            assert not has_receivers("message_update", one)
    finally:
        disconnect()


async def test_a_muted_signal_calls_no_receiver() -> None:
    h = Harness()
    seen: list[object] = []
    disconnects = [
        connect("agent_start", lambda sender, event: seen.append(event)),
        connect("tool_call", lambda sender, event: Block(reason="no")),
    ]
    try:
        with signal_for("agent_start").muted(), signal_for("tool_call").muted():
            await notify(h, AgentStartEvent())
            outcome = await emit_tool_call(h, call_event(command="ls"))
    finally:
        for disconnect in disconnects:
            disconnect()

    assert seen == []
    assert not outcome.blocked
    assert outcome.input == {"command": "ls"}


def test_signal_for_accepts_names_and_classes_and_rejects_strangers() -> None:
    import blinker

    assert signal_for("tool_call") is signal_for(ToolCallEvent)
    assert signal_for("tool_call") is not blinker.signal("tool_call")
    with pytest.raises(LookupError):
        signal_for("no_such_event")
    with pytest.raises(LookupError):
        connect(TextContent, lambda sender, event: None)  # type: ignore[arg-type]


async def test_notify_refuses_hook_events() -> None:
    with pytest.raises(TypeError):
        await notify(Harness(), call_event())  # type: ignore[arg-type]


# --- tool_call ------------------------------------------------------------------------------


async def test_tool_call_without_receivers_runs_with_the_original_input() -> None:
    outcome = await emit_tool_call(Harness(), call_event(command="ls"))

    assert (outcome.blocked, outcome.reason, outcome.input) == (False, None, {"command": "ls"})


async def test_tool_call_first_block_wins_and_stops_the_chain() -> None:
    h = Harness()
    later_called = False

    def first(sender: object, event: ToolCallEvent) -> Block:
        return Block(reason="first")

    def second(sender: object, event: ToolCallEvent) -> Block:
        return Block(reason="second")

    def later(sender: object, event: ToolCallEvent) -> None:
        nonlocal later_called
        later_called = True

    disconnects = [
        connect("tool_call", first),
        connect("tool_call", second),
        connect("tool_call", later, priority=-5),
    ]
    try:
        outcome = await emit_tool_call(h, call_event(command="rm -rf /"))
    finally:
        for disconnect in disconnects:
            disconnect()

    assert outcome.blocked
    assert outcome.reason == "first"
    assert not later_called


async def test_tool_call_input_patches_chain() -> None:
    h = Harness()
    seen_by_second: list[Any] = []

    async def add_timeout(sender: object, event: ToolCallEvent) -> PatchInput:
        return PatchInput(input={**event.input, "timeout_s": 5})

    def quote(sender: object, event: ToolCallEvent) -> PatchInput:
        seen_by_second.append(dict(event.input))
        return PatchInput(input={**event.input, "command": "ls -la"})

    disconnects = [connect("tool_call", add_timeout), connect("tool_call", quote)]
    try:
        outcome = await emit_tool_call(h, call_event(command="ls"))
    finally:
        for disconnect in disconnects:
            disconnect()

    assert seen_by_second == [{"command": "ls", "timeout_s": 5}]
    assert not outcome.blocked
    assert outcome.input == {"command": "ls -la", "timeout_s": 5}


async def test_a_raising_tool_call_receiver_fails_closed_and_reports(
    errors: list[HandlerErrorEvent],
) -> None:
    h = Harness()
    later_called = False

    def broken(sender: object, event: ToolCallEvent) -> None:
        raise RuntimeError("policy store down")

    def later(sender: object, event: ToolCallEvent) -> None:
        nonlocal later_called
        later_called = True

    disconnects = [connect("tool_call", broken), connect("tool_call", later)]
    try:
        outcome = await emit_tool_call(h, call_event(command="ls"))
    finally:
        for disconnect in disconnects:
            disconnect()

    assert outcome.blocked
    assert outcome.reason is not None and "broken" in outcome.reason
    assert not later_called
    assert [(e.event_name, type(e.error)) for e in errors] == [("tool_call", RuntimeError)]
    assert errors[0].receiver.endswith("broken")


async def test_a_tool_call_receiver_returning_a_stranger_fails_closed(
    errors: list[HandlerErrorEvent],
) -> None:
    disconnect = connect("tool_call", lambda sender, event: "yes please")
    try:
        outcome = await emit_tool_call(Harness(), call_event(command="ls"))
    finally:
        disconnect()

    assert outcome.blocked
    assert [(e.event_name, type(e.error)) for e in errors] == [("tool_call", TypeError)]


# --- tool_result ----------------------------------------------------------------------------


async def test_tool_result_without_receivers_keeps_the_result() -> None:
    outcome = await emit_tool_result(Harness(), result_event())

    assert outcome.content == (TextContent(text="out"),)
    assert (outcome.details, outcome.is_error, outcome.terminate) == ({"exit": 0}, False, False)


async def test_tool_result_patches_chain_field_wise() -> None:
    h = Harness()
    seen_by_second: list[tuple[Any, ...]] = []

    def redact(sender: object, event: ToolResultEvent) -> PatchResult:
        return PatchResult(content=[TextContent(text="[redacted]")], details=None, terminate=True)

    async def fail(sender: object, event: ToolResultEvent) -> PatchResult:
        seen_by_second.append((event.content, event.details, event.is_error))
        return PatchResult(is_error=True)

    def keep_going(sender: object, event: ToolResultEvent) -> PatchResult:
        return PatchResult(terminate=False)

    disconnects = [
        connect("tool_result", redact),
        connect("tool_result", fail),
        connect("tool_result", keep_going),
    ]
    try:
        outcome = await emit_tool_result(h, result_event())
    finally:
        for disconnect in disconnects:
            disconnect()

    assert seen_by_second == [((TextContent(text="[redacted]"),), None, False)]
    assert outcome.content == (TextContent(text="[redacted]"),)
    assert outcome.details is None
    assert outcome.is_error is True
    assert outcome.terminate is False  # the last receiver that set it decides


async def test_tool_result_terminate_set_once_stays_set() -> None:
    disconnects = [
        connect("tool_result", lambda sender, event: PatchResult(terminate=True)),
        connect("tool_result", lambda sender, event: PatchResult(is_error=True)),
    ]
    try:
        outcome = await emit_tool_result(Harness(), result_event())
    finally:
        for disconnect in disconnects:
            disconnect()

    assert outcome.terminate is True
    assert outcome.details == {"exit": 0}


async def test_a_raising_tool_result_receiver_reports_and_the_chain_goes_on(
    errors: list[HandlerErrorEvent],
) -> None:
    def broken(sender: object, event: ToolResultEvent) -> None:
        raise ValueError("bad")

    disconnects = [
        connect("tool_result", broken),
        connect("tool_result", lambda sender, event: Block(reason="wrong hook")),
        connect("tool_result", lambda sender, event: PatchResult(is_error=True)),
    ]
    try:
        outcome = await emit_tool_result(Harness(), result_event())
    finally:
        for disconnect in disconnects:
            disconnect()

    assert outcome.is_error is True
    assert [(e.event_name, type(e.error)) for e in errors] == [
        ("tool_result", ValueError),
        ("tool_result", TypeError),
    ]


# --- observers and handler_error ------------------------------------------------------------


async def test_a_raising_observer_reports_and_the_next_receiver_still_runs(
    errors: list[HandlerErrorEvent],
) -> None:
    h = Harness()
    error_senders: list[object] = []
    after: list[int] = []

    async def broken(sender: object, event: TurnStartEvent) -> None:
        raise KeyError("missing")

    def record_sender(sender: object, event: HandlerErrorEvent) -> None:
        error_senders.append(sender)

    disconnects = [
        connect("turn_start", broken),
        connect("turn_start", lambda sender, event: after.append(event.turn_index)),
        connect("handler_error", record_sender, sender=h),
    ]
    try:
        await notify(h, TurnStartEvent(turn_index=4))
    finally:
        for disconnect in disconnects:
            disconnect()

    assert after == [4]
    assert [(e.event_name, type(e.error)) for e in errors] == [("turn_start", KeyError)]
    assert error_senders == [h]  # handler_error comes from the failed event's sender


async def test_a_raising_handler_error_receiver_is_logged_not_reported_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []

    def broken_observer(sender: object, event: AgentStartEvent) -> None:
        raise RuntimeError("observer")

    def broken_reporter(sender: object, event: HandlerErrorEvent) -> None:
        calls.append(event.event_name)
        raise RuntimeError("reporter")

    def other_reporter(sender: object, event: HandlerErrorEvent) -> None:
        calls.append("other")

    disconnects = [
        connect("agent_start", broken_observer),
        connect("handler_error", broken_reporter, priority=1),
        connect("handler_error", other_reporter),
    ]
    try:
        with caplog.at_level(logging.ERROR, logger="hooks"):
            await notify(Harness(), AgentStartEvent())
    finally:
        for disconnect in disconnects:
            disconnect()

    assert calls == ["agent_start", "other"]
    assert logged_errors(caplog) == [("reporter",)]


async def test_an_error_nobody_receives_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    def broken(sender: object, event: AgentStartEvent) -> None:
        raise RuntimeError("unheard")

    disconnect = connect("agent_start", broken)
    try:
        with caplog.at_level(logging.ERROR, logger="hooks"):
            await notify(Harness(), AgentStartEvent())
    finally:
        disconnect()

    assert logged_errors(caplog) == [("unheard",)]


async def test_cancellation_is_not_swallowed_as_a_handler_error(
    errors: list[HandlerErrorEvent],
) -> None:
    def cancelled(sender: object, event: AgentStartEvent) -> None:
        raise asyncio.CancelledError

    disconnect = connect("agent_start", cancelled)
    try:
        with pytest.raises(asyncio.CancelledError):
            await notify(Harness(), AgentStartEvent())
    finally:
        disconnect()

    assert errors == []


# --- the sorted-receiver cache (receivers sorted at connection, not per event) --------------


async def test_a_weak_receiver_is_not_kept_alive_by_having_received_an_event() -> None:
    signal = signal_for("turn_start")
    sender = Harness()
    seen: list[int] = []

    def receiver(s: object, event: TurnStartEvent) -> None:
        seen.append(event.turn_index)

    signal.connect(receiver, sender=sender)  # weak, blinker's default
    await notify(sender, TurnStartEvent(turn_index=1))
    await notify(sender, TurnStartEvent(turn_index=2))
    rid = id(receiver)
    del receiver
    gc.collect()
    await notify(sender, TurnStartEvent(turn_index=3))

    assert seen == [1, 2]
    assert rid not in signal.receivers


async def test_a_new_sender_at_a_dead_senders_address_gets_none_of_its_receivers() -> None:
    # The cache is keyed by id(sender); a new object may reuse a collected one's id().
    seen: list[int] = []

    def receiver(s: object, event: TurnStartEvent) -> None:
        seen.append(event.turn_index)

    signal, first = signal_for("turn_start"), Harness()
    signal.connect(receiver, sender=first, weak=False)  # blinker holds senders weakly
    try:
        await notify(first, TurnStartEvent(turn_index=0))  # cached for `first`
        address = id(first)
        del first
        gc.collect()
        candidates = []
        for _ in range(10_000):
            candidate = Harness()
            if id(candidate) == address:
                break
            candidates.append(candidate)  # keep it, so the next one gets another address
        else:
            pytest.fail("no new object reused the address (the test needs one)")
        await notify(candidate, TurnStartEvent(turn_index=1))
    finally:
        signal.disconnect(receiver)

    assert seen == [0]  # the event to the newcomer reached nobody


async def test_reconnecting_with_another_priority_reorders_after_events_were_sent() -> None:
    h, calls = Harness(), []

    def first(sender: object, event: TurnStartEvent) -> None:
        calls.append("first")

    def second(sender: object, event: TurnStartEvent) -> None:
        calls.append("second")

    disconnects = [connect("turn_start", first, sender=h), connect("turn_start", second, sender=h)]
    try:
        await notify(h, TurnStartEvent(turn_index=0))
        disconnects.append(connect("turn_start", second, sender=h, priority=5))
        await notify(h, TurnStartEvent(turn_index=1))
    finally:
        for disconnect in disconnects:
            disconnect()

    assert calls == ["first", "second", "second", "first"]


def test_a_receiver_that_cannot_take_event_by_name_is_refused_at_connection() -> None:
    def misnamed(sender: object, ev: TurnStartEvent) -> None: ...

    with pytest.raises(TypeError, match="name its second parameter `event`"):
        connect("turn_start", misnamed)
    assert not signal_for("turn_start").receivers_for(ANY) or all(
        r is not misnamed for r in signal_for("turn_start").receivers_for(ANY)
    )


@pytest.mark.parametrize(
    "make_receiver",
    [
        lambda seen: lambda sender, event: seen.append(event),
        lambda seen: lambda sender, **kwargs: seen.append(kwargs["event"]),
        lambda seen: lambda *args, **kwargs: seen.append(kwargs["event"]),
        lambda seen: lambda sender, *, event: seen.append(event),
        lambda seen: lambda sender, event, extra=1: seen.append(event),
    ],
)
async def test_receivers_callable_with_event_by_name_are_accepted(make_receiver: Any) -> None:
    h, seen = Harness(), []
    receiver = make_receiver(seen)
    disconnect = connect("turn_start", receiver, sender=h)
    event = TurnStartEvent(turn_index=4)
    try:
        await notify(h, event)
    finally:
        disconnect()
    await notify(h, TurnStartEvent(turn_index=5))
    # Accepted means called, with the event by name; and gone once disconnected.
    assert seen == [event]


# --- linked senders (a sub-agent's harness and its parent) ----------------------------------


async def test_a_linked_childs_events_reach_the_parents_receivers_once_as_the_child() -> None:
    grandparent, parent, child, stranger = Harness(), Harness(), Harness(), Harness()
    calls: list[tuple[str, object]] = []

    def make(label: str) -> Any:
        def receiver(sender: object, event: AgentStartEvent) -> None:
            calls.append((label, sender))

        return receiver

    on_parent, on_child, on_any, on_top = make("parent"), make("child"), make("any"), make("top")
    undo = [
        connect("agent_start", on_parent, sender=parent),
        connect("agent_start", on_child, sender=child, priority=-1),
        connect("agent_start", on_any),
        connect("agent_start", on_top, sender=grandparent, priority=5),
        # The same receiver on two senders of the chain still runs once.
        connect("agent_start", on_parent, sender=child),
    ]
    unlink_parent = link_sender(parent, grandparent)
    unlink = link_sender(child, parent)
    try:
        assert has_receivers("agent_start", child)
        await notify(child, AgentStartEvent())
        assert calls == [("top", child), ("parent", child), ("any", child), ("child", child)]
        calls.clear()
        await notify(stranger, AgentStartEvent())
        assert calls == [("any", stranger)]
        calls.clear()
        await notify(parent, AgentStartEvent())  # links go up, never down
        assert [label for label, _ in calls] == ["top", "parent", "any"]
        calls.clear()
        unlink()
        await notify(child, AgentStartEvent())
        assert [label for label, _ in calls] == ["parent", "any", "child"]
    finally:
        unlink()
        unlink_parent()
        for disconnect in undo:
            disconnect()


async def test_a_linked_childs_tool_call_is_blocked_by_the_parents_hook() -> None:
    parent, child = Harness(), Harness()
    undo = connect("tool_call", lambda sender, event: Block(reason="not here"), sender=parent)
    unlink = link_sender(child, parent)
    try:
        outcome = await emit_tool_call(child, call_event(command="rm -rf /"))
        assert outcome.blocked and outcome.reason == "not here"
    finally:
        unlink()
        undo()
    assert not (await emit_tool_call(child, call_event(command="ls"))).blocked


async def test_a_link_that_would_make_a_cycle_is_refused() -> None:
    a, b = Harness(), Harness()
    unlink = link_sender(b, a)
    seen: list[object] = []
    undo = connect("agent_start", lambda sender, event: seen.append(sender))
    try:
        with pytest.raises(ValueError):
            link_sender(a, b)
        with pytest.raises(ValueError):
            link_sender(a, a)
        # A sender that cannot be linked (no weak reference) is dispatched as before.
        await notify("a str sender", AgentStartEvent())
        assert seen == ["a str sender"]
    finally:
        unlink()
        undo()
