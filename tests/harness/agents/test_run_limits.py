"""Run limits: max_turns, max_tokens and max_cost_usd, per harness and per prompt; the stop
reason on the reply and in the session, the limit_reached event, and prices required."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_helpers import PRICE_PER_TOKEN_USD, customs, note, note_call, priced_registry

from harness import (
    RUN_STOP_TYPE,
    AgentHarness,
    FauxModel,
    LimitReachedEvent,
    MemorySessionRepo,
    MessageEntry,
    PriceUnknownError,
    Reply,
    Session,
)


def looping_model(turns: int = 10) -> FauxModel:
    """A model that calls ``note`` every turn, ``turns`` times, then says done."""
    return FauxModel([*(note_call(f"w{i}") for i in range(turns)), "done"])


def limit_events(h: AgentHarness) -> list[LimitReachedEvent]:
    seen: list[LimitReachedEvent] = []
    h.on("limit_reached")(lambda sender, event: seen.append(event))
    return seen


async def test_max_turns_ends_the_run_after_the_turn_that_reaches_it(session: Session) -> None:
    model = looping_model()
    h = AgentHarness(session=session, model=model, tools=[note], resources=None, max_turns=3)
    events = limit_events(h)

    reply = await h.prompt("note words")

    assert isinstance(reply, Reply)
    assert reply.stop_reason == "max_turns"
    assert reply.message.stop_reason == "toolUse" and reply.text == "noting w2"
    assert len(model.requests) == 3
    # The third turn's tool call ran: the run ends after the turn, never inside it.
    results = [
        e.message.text
        for e in session.entries()
        if isinstance(e, MessageEntry) and e.message.role == "toolResult"
    ]
    assert results == ["noted w0", "noted w1", "noted w2"]
    (stop,) = customs(session, RUN_STOP_TYPE)
    assert stop["stopReason"] == "max_turns" and stop["limit"] == 3 and stop["turns"] == 3
    assert [(e.stop_reason, e.limit, e.used, e.depth) for e in events] == [("max_turns", 3, 3, 0)]
    # The stop entry is the last line: after the run's last message.
    assert list(session.entries())[-1].type == "custom"


async def test_a_prompts_limit_overrides_the_harnesss_for_that_run_only(session: Session) -> None:
    model = looping_model(6)
    h = AgentHarness(session=session, model=model, tools=[note], resources=None, max_turns=2)

    first = await h.prompt("go", max_turns=1)
    second = await h.prompt("again")

    assert (first.stop_reason, second.stop_reason) == ("max_turns", "max_turns")
    assert len(model.requests) == 3  # 1, then 2


async def test_a_run_the_model_ends_within_its_limits_keeps_its_own_stop_reason(
    session: Session,
) -> None:
    h = AgentHarness(
        session=session, model=looping_model(1), tools=[note], resources=None, max_turns=2
    )
    reply = await h.prompt("go")
    assert reply.stop_reason == "stop" and reply.text == "done"
    assert customs(session, RUN_STOP_TYPE) == []


async def test_max_tokens_counts_input_and_output_of_every_reply(session: Session) -> None:
    model = looping_model()
    h = AgentHarness(session=session, model=model, tools=[note], resources=None, max_tokens=60)
    events = limit_events(h)

    reply = await h.prompt("note words")

    used = sum(
        e.message.usage.total
        for e in session.entries()
        if isinstance(e, MessageEntry) and e.message.role == "assistant"
    )
    assert reply.stop_reason == "max_tokens"
    (event,) = events
    assert event.used == used >= 60 and event.limit == 60
    # One turn fewer would have stayed under the limit.
    last = [
        e.message.usage.total
        for e in session.entries()
        if isinstance(e, MessageEntry) and e.message.role == "assistant"
    ][-1]
    assert used - last < 60
    (stop,) = customs(session, RUN_STOP_TYPE)
    assert stop["stopReason"] == "max_tokens" and stop["tokens"] == used


async def test_max_cost_prices_replies_from_the_registry(session: Session) -> None:
    model = looping_model()
    h = AgentHarness(
        session=session,
        model=model,
        tools=[note],
        resources=None,
        registry=priced_registry(),
        max_cost_usd=0.05,
    )
    events = limit_events(h)

    reply = await h.prompt("note words")

    tokens = sum(
        e.message.usage.total
        for e in session.entries()
        if isinstance(e, MessageEntry) and e.message.role == "assistant"
    )
    assert reply.stop_reason == "max_cost"
    (event,) = events
    assert event.used == pytest.approx(tokens * PRICE_PER_TOKEN_USD)
    assert event.used >= 0.05
    (stop,) = customs(session, RUN_STOP_TYPE)
    assert stop["stopReason"] == "max_cost" and stop["costUsd"] == pytest.approx(event.used)


async def test_a_cost_limit_without_a_known_price_is_refused_before_anything_runs(
    session: Session,
) -> None:
    with pytest.raises(PriceUnknownError) as refused:
        AgentHarness(session=session, model=FauxModel(["x"]), resources=None, max_cost_usd=1.0)
    assert refused.value.code == "price_unknown" and refused.value.model == "faux/faux-1"
    # In a prompt: the same, and nothing is written.
    h = AgentHarness(session=session, model=FauxModel(["x"]), resources=None)
    with pytest.raises(PriceUnknownError):
        await h.prompt("go", max_cost_usd=1.0)
    with pytest.raises(PriceUnknownError):
        await AgentHarness(
            session=session, model=FauxModel(["x"]), registry=priced_registry(), resources=None
        ).prompt("go", model=FauxModel(["x"], model_id="unpriced"), max_cost_usd=1.0)
    assert list(session.entries()) == []


@pytest.mark.parametrize(
    "limits",
    [{"max_turns": 0}, {"max_tokens": -1}, {"max_cost_usd": 0}, {"max_turns": True}],
)
async def test_bad_limits_are_refused(tmp_path: Path, limits: dict[str, object]) -> None:
    session = await MemorySessionRepo().create(str(tmp_path))
    with pytest.raises(ValueError):
        AgentHarness(session=session, resources=None, **limits)  # type: ignore[arg-type]
    h = AgentHarness(session=session, resources=None)
    with pytest.raises(ValueError):
        await h.prompt("go", **limits)  # type: ignore[arg-type]
    assert list(session.entries()) == []
