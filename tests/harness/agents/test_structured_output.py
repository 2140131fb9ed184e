"""prompt(output_schema=...): the final answer validated, corrected, retried, converted; through
the respond tool with a model that has no structured output (FauxModel), and through the
provider's own feature with the real Anthropic and OpenAI SDKs against the replay server."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Any, Literal, TypedDict

import anthropic
import anthropic_streams as streams
import attrs
import openai_streams
import pytest
from agent_helpers import custom_messages
from replay_server import ReplayServer, SseReply

from harness import (
    OUTPUT_CORRECTION_TYPE,
    RESPOND_TOOL_NAME,
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    MessageEntry,
    OutputValidationError,
    Session,
    SettledEvent,
    StreamOptions,
    ToolResultMessage,
    schema_of,
)
from harness._providers.anthropic import AnthropicModel

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
}


def respond(**arguments: Any) -> FauxReply:
    return FauxReply(tool_calls=[FauxToolCall(name=RESPOND_TOOL_NAME, arguments=arguments)])


def tool_results(session: Session) -> list[ToolResultMessage]:
    return [
        e.message
        for e in session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]


# --- through the respond tool (a model without structured output) ---------------------------


async def test_a_schema_met_on_the_first_try(session: Session) -> None:
    model = FauxModel([respond(city="Paris", population=2_100_000)])
    h = AgentHarness(session=session, model=model, resources=None)

    reply = await h.prompt("Biggest city of France?", output_schema=CITY)

    assert reply.output == {"city": "Paris", "population": 2_100_000}
    assert reply.stop_reason == "stop" and reply.message.stop_reason == "toolUse"
    (offered,) = [t for t in model.requests[0].tools if t.name == RESPOND_TOOL_NAME]
    assert offered.parameters == CITY
    assert model.requests[0].output_schema is None  # the faux model has no native feature
    assert [r.is_error for r in tool_results(session)] == [False]
    assert custom_messages(session, OUTPUT_CORRECTION_TYPE) == []


async def test_a_schema_met_after_one_correction(session: Session) -> None:
    model = FauxModel(
        [respond(city="Paris", population="many"), respond(city="Paris", population=2_100_000)]
    )
    h = AgentHarness(session=session, model=model, resources=None)

    reply = await h.prompt("Biggest city of France?", output_schema=CITY)

    assert reply.output == {"city": "Paris", "population": 2_100_000}
    first, second = tool_results(session)
    # The correction is in the session: the failed call's error result names the problem.
    assert first.is_error and "population" in first.text and "integer" in first.text
    assert not second.is_error
    assert len(model.requests) == 2


async def test_a_model_that_ends_without_respond_is_told_to_call_it(session: Session) -> None:
    model = FauxModel(["Paris, about two million.", respond(city="Paris", population=2)])
    h = AgentHarness(session=session, model=model, resources=None)

    reply = await h.prompt("Biggest city?", output_schema=CITY)

    assert reply.output == {"city": "Paris", "population": 2}
    (correction,) = custom_messages(session, OUTPUT_CORRECTION_TYPE)
    assert RESPOND_TOOL_NAME in correction
    # The model saw it as the next message.
    assert model.requests[1].messages[-1].text == correction


async def test_a_schema_never_met_raises_with_the_last_errors(session: Session) -> None:
    model = FauxModel([respond(city=1, population=2), respond(city="x", population="y")])
    h = AgentHarness(session=session, model=model, resources=None)
    settled: list[SettledEvent] = []
    h.on("settled")(lambda sender, event: settled.append(event))

    with pytest.raises(OutputValidationError) as failed:
        await h.prompt("Biggest city?", output_schema=CITY, output_retries=1)

    assert failed.value.code == "output_invalid"
    assert failed.value.attempts == 2
    assert any("population" in e for e in failed.value.errors)
    assert failed.value.reply.tool_calls[0].arguments == {"city": "x", "population": "y"}
    assert len(settled) == 1 and not h.busy
    assert [r.is_error for r in tool_results(session)] == [True, True]


async def test_a_tool_of_the_harness_named_respond_is_refused(session: Session) -> None:
    from agent_helpers import note

    clash = attrs.evolve(note, name=RESPOND_TOOL_NAME)
    h = AgentHarness(session=session, model=FauxModel([]), tools=[clash], resources=None)
    with pytest.raises(ValueError):
        await h.prompt("x", output_schema=CITY)
    with pytest.raises(ValueError):  # not a JSON Schema
        await h.prompt("x", output_schema={"type": 12})
    assert list(session.entries()) == []


# --- types turned into schemas and back -----------------------------------------------------


class Size(enum.Enum):
    SMALL = "small"
    LARGE = "large"


@attrs.frozen
class Street:
    name: str
    length_m: float


@dataclasses.dataclass
class City:
    name: str
    size: Size
    streets: list[Street]
    mayor: str | None = None


class Point(TypedDict):
    x: int
    y: int


def test_types_become_closed_object_schemas() -> None:
    schema = schema_of(City)
    assert schema["required"] == ["name", "size", "streets"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert isinstance(props, dict)
    assert props["size"] == {"enum": ["small", "large"]}
    assert props["mayor"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    street = props["streets"]["items"]  # type: ignore[index, call-overload]
    assert street["required"] == ["name", "length_m"]
    assert street["properties"]["length_m"] == {"type": "number"}
    assert schema_of(tuple[int, str])["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert schema_of(Literal["a", "b"]) == {"enum": ["a", "b"]}
    with pytest.raises(TypeError):
        schema_of(set[int])
    with pytest.raises(TypeError):
        schema_of(dict[int, str])


async def test_a_type_is_converted_back(session: Session) -> None:
    answer = {
        "name": "Lyon",
        "size": "large",
        "streets": [{"name": "Rue de la République", "length_m": 700}],
    }
    model = FauxModel([respond(**answer), respond(x=1, y=2), respond(value=["a", "b"])])
    h = AgentHarness(session=session, model=model, resources=None)

    city = (await h.prompt("A city", output_schema=City)).output
    point = (await h.prompt("A point", output_schema=Point)).output
    words = (await h.prompt("Two words", output_schema=list[str])).output

    assert city == City(
        name="Lyon", size=Size.LARGE, streets=[Street(name="Rue de la République", length_m=700.0)]
    )
    assert isinstance(city.streets[0].length_m, float)
    assert point == {"x": 1, "y": 2}
    # A schema whose root is no object is wrapped for the tool, and unwrapped on the reply.
    offered = next(t for t in model.requests[2].tools if t.name == RESPOND_TOOL_NAME)
    assert offered.parameters["required"] == ["value"]
    assert words == ["a", "b"]


# --- through the provider's own structured output -------------------------------------------


async def _anthropic_harness(tmp_path: Path, client: anthropic.AsyncAnthropic) -> AgentHarness:
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(tmp_path))
    return AgentHarness(
        session=session,
        cwd=tmp_path,
        model=AnthropicModel("claude-sonnet-4-5", client=client),
        resources=None,
        stream_options=StreamOptions(cache_retention="none"),
    )


async def test_anthropic_gets_the_schema_and_its_text_is_the_answer(
    tmp_path: Path, replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(
        SseReply(body=streams.text(['{"city": "Paris", ', '"population": 2100000}']))
    )
    h = await _anthropic_harness(tmp_path, anthropic_client)

    reply = await h.prompt("Biggest city of France?", output_schema=CITY)

    assert reply.output == {"city": "Paris", "population": 2100000}
    (sent,) = replay_server.requests
    fmt = sent.body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    # The SDK's transform_schema closes objects for the API; the properties are ours.
    assert fmt["schema"]["properties"] == CITY["properties"]
    assert fmt["schema"]["additionalProperties"] is False
    assert "tools" not in sent.body  # no respond tool with a native schema


async def test_anthropic_answer_met_after_one_correction_in_the_session(
    tmp_path: Path, replay_server: ReplayServer, anthropic_client: anthropic.AsyncAnthropic
) -> None:
    replay_server.enqueue(
        SseReply(body=streams.text(['{"city": "Paris"}'])),
        SseReply(body=streams.text(['{"city": "Paris", "population": 2100000}'])),
    )
    h = await _anthropic_harness(tmp_path, anthropic_client)

    reply = await h.prompt("Biggest city of France?", output_schema=CITY)

    assert reply.output == {"city": "Paris", "population": 2100000}
    (correction,) = custom_messages(h.session, OUTPUT_CORRECTION_TYPE)
    assert "population" in correction and "required" in correction
    last = replay_server.requests[1].body["messages"][-1]
    assert last == {"role": "user", "content": correction}


async def test_openai_responses_gets_the_schema_as_text_format(
    tmp_path: Path, replay_server: ReplayServer, openai_client: Any
) -> None:
    from harness._providers.openai import OpenAIModel

    replay_server.enqueue(
        SseReply(body=openai_streams.responses_text('{"city": "Rome", "population": 2800000}'))
    )
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(tmp_path))
    h = AgentHarness(
        session=session,
        cwd=tmp_path,
        model=OpenAIModel("gpt-4.1", client=openai_client),
        resources=None,
    )

    reply = await h.prompt("Biggest city of Italy?", output_schema=CITY)

    assert reply.output == {"city": "Rome", "population": 2800000}
    fmt = replay_server.requests[0].body["text"]["format"]
    assert (fmt["type"], fmt["name"], fmt["strict"]) == ("json_schema", "output", False)
    assert fmt["schema"] == CITY
