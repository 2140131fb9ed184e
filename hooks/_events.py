"""One frozen class per signal: the data an event carries, and nothing else.

The emitting harness is the blinker *sender*, never a field, so a receiver scoped to one harness
(``sender=h``) needs no filtering. Each class's ``name`` is its signal's name; ``_signals`` maps
the two. Sequences are tuples; only free-form JSON (tool input, ``details``) is a mapping, which
receivers must treat as read-only (change it by returning a result, see ``_results``).

Observers see what happened; hooks (:class:`ToolCallEvent`, :class:`ToolResultEvent`) may change
what happens next by returning a result. ``docs/events.md`` gives the order in which they fire.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar, Literal, TypeAlias

from attrs import field, frozen

from ._messages import AssistantMessage, JSONValue, Message, ToolResultMessage, UserContent

__all__ = [
    "AgentEndEvent",
    "AgentStartEvent",
    "Event",
    "HandlerErrorEvent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "ObserverEvent",
    "ToolCallEvent",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolResultEvent",
    "TurnEndEvent",
    "TurnStartEvent",
]


# Converters with concrete types: mypy's attrs support cannot solve ``converter=tuple``'s TypeVar.
def _messages(value: Iterable[Message]) -> tuple[Message, ...]:
    return tuple(value)


def _tool_results(value: Iterable[ToolResultMessage]) -> tuple[ToolResultMessage, ...]:
    return tuple(value)


def _contents(value: Iterable[UserContent]) -> tuple[UserContent, ...]:
    return tuple(value)


@frozen(kw_only=True)
class AgentStartEvent:
    """A run (one ``prompt()``) starts, after ``before_agent_start``."""

    name: ClassVar[str] = "agent_start"


@frozen(kw_only=True)
class AgentEndEvent:
    """A run ends; ``messages`` are the messages it added, in order."""

    name: ClassVar[str] = "agent_end"

    messages: tuple[Message, ...] = field(converter=_messages)


@frozen(kw_only=True)
class TurnStartEvent:
    """A turn (one model response and its tool calls) starts; ``turn_index`` counts from 0."""

    name: ClassVar[str] = "turn_start"

    turn_index: int


@frozen(kw_only=True)
class TurnEndEvent:
    """A turn ends: its assistant ``message`` and the ``tool_results`` of its calls, in order."""

    name: ClassVar[str] = "turn_end"

    turn_index: int
    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...] = field(converter=_tool_results)


@frozen(kw_only=True)
class MessageStartEvent:
    """A message starts: a prompt message, an assistant reply as it begins streaming, a result."""

    name: ClassVar[str] = "message_start"

    message: Message


@frozen(kw_only=True)
class MessageUpdateEvent:
    """A streamed delta of an assistant reply.

    ``message`` is the reply so far; ``delta`` was appended to block ``content_index`` of it, whose
    kind is ``kind`` (``toolcall`` deltas are raw JSON text of the arguments). Emitters build this
    only when :func:`hooks.has_receivers` says someone listens.
    """

    name: ClassVar[str] = "message_update"

    message: AssistantMessage
    kind: Literal["text", "thinking", "toolcall"]
    content_index: int
    delta: str


@frozen(kw_only=True)
class MessageEndEvent:
    """A message is complete and persisted; ``entry_id`` is its session entry (None: not stored)."""

    name: ClassVar[str] = "message_end"

    message: Message
    entry_id: str | None


@frozen(kw_only=True)
class ToolExecutionStartEvent:
    """A tool call is about to be handled (before the ``tool_call`` hook); ``input`` as called."""

    name: ClassVar[str] = "tool_execution_start"

    tool_call_id: str
    tool_name: str
    input: Mapping[str, JSONValue]


@frozen(kw_only=True)
class ToolExecutionUpdateEvent:
    """Progress of a running tool: ``partial`` is the tool's free-form partial result."""

    name: ClassVar[str] = "tool_execution_update"

    tool_call_id: str
    tool_name: str
    partial: JSONValue


@frozen(kw_only=True)
class ToolExecutionEndEvent:
    """A tool call is done; ``result`` is the final message (after the ``tool_result`` hook)."""

    name: ClassVar[str] = "tool_execution_end"

    tool_call_id: str
    tool_name: str
    result: ToolResultMessage
    is_error: bool


@frozen(kw_only=True)
class ToolCallEvent:
    """Hook, sent before a tool runs. Receivers may return ``Block`` or ``PatchInput``.

    ``input`` is the input as patched by the receivers before this one; the first ``Block`` wins.
    """

    name: ClassVar[str] = "tool_call"

    tool_call_id: str
    tool_name: str
    input: Mapping[str, JSONValue]
    turn_index: int


@frozen(kw_only=True)
class ToolResultEvent:
    """Hook, sent after a tool ran. Receivers may return ``PatchResult``.

    ``input`` is the input the tool ran with; ``content``, ``details`` and ``is_error`` are the
    result as patched by the receivers before this one.
    """

    name: ClassVar[str] = "tool_result"

    tool_call_id: str
    tool_name: str
    input: Mapping[str, JSONValue]
    content: tuple[UserContent, ...] = field(converter=_contents)
    details: JSONValue
    is_error: bool
    turn_index: int


@frozen(kw_only=True)
class HandlerErrorEvent:
    """A receiver of ``event_name`` raised ``error`` (or returned a result of the wrong type).

    ``receiver`` names it (``module.qualname``). Sent by the same sender as the failed event.
    """

    name: ClassVar[str] = "handler_error"

    event_name: str
    receiver: str
    error: BaseException


ObserverEvent: TypeAlias = (
    AgentStartEvent
    | AgentEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent
    | HandlerErrorEvent
)
"""Events sent with :func:`hooks.notify`; receivers' return values are ignored."""

Event: TypeAlias = ObserverEvent | ToolCallEvent | ToolResultEvent
"""Every event class of the bus."""
