"""The bus's signals: one private blinker namespace, one named signal per event class.

The namespace is ours, never blinker's ``default_namespace``, so another library's ``"tool_call"``
signal cannot collide with this one. This module is the only place that maps event classes to
signals (by each class's ``name``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from blinker import NamedSignal, Namespace

from ._events import (
    AgentEndEvent,
    AgentStartEvent,
    Event,
    HandlerErrorEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolCallEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
)

__all__ = ["EVENT_CLASSES", "NAMESPACE", "signal_for"]

NAMESPACE: Final = Namespace()
"""Every signal of the bus, by name. Not exported: reach a signal through :func:`signal_for`."""

# (event class, signal doc), in the order the events first fire during one prompt (DESIGN §6).
_SIGNALS: Final[tuple[tuple[type[Event], str], ...]] = (
    (AgentStartEvent, "Observer: a run starts, after before_agent_start."),
    (TurnStartEvent, "Observer: a turn starts."),
    (MessageStartEvent, "Observer: a message starts (prompt, assistant reply, tool result)."),
    (MessageUpdateEvent, "Observer: a streamed delta of the assistant reply."),
    (MessageEndEvent, "Observer: a message is complete and persisted."),
    (ToolExecutionStartEvent, "Observer: a tool call is about to be handled."),
    (ToolCallEvent, "Hook: before a tool runs; may Block or PatchInput. First Block wins."),
    (ToolExecutionUpdateEvent, "Observer: progress of a running tool."),
    (ToolResultEvent, "Hook: after a tool ran; may PatchResult. Patches chain field-wise."),
    (ToolExecutionEndEvent, "Observer: a tool call is done, with its final result."),
    (TurnEndEvent, "Observer: a turn ends, with its reply and tool results."),
    (AgentEndEvent, "Observer: a run ends, with the messages it added."),
    (HandlerErrorEvent, "Observer: a receiver of another signal raised."),
)

EVENT_CLASSES: Final[Mapping[str, type[Event]]] = MappingProxyType(
    {cls.name: cls for cls, _ in _SIGNALS}
)
"""Signal name -> event class, for every signal of the bus (read-only)."""

_BY_CLASS: Final[Mapping[type[Event], NamedSignal]] = {
    cls: NAMESPACE.signal(cls.name, doc=doc) for cls, doc in _SIGNALS
}


def signal_for(event: str | type[Event]) -> NamedSignal:
    """The blinker signal of an event, for connecting to it directly.

    Args:
        event: a signal name (``"tool_call"``) or an event class (``ToolCallEvent``).

    Returns:
        The one :class:`blinker.NamedSignal` of that event in the bus's private namespace.

    Raises:
        LookupError: no signal has that name or event class.
    """
    found = NAMESPACE.get(event) if isinstance(event, str) else _BY_CLASS.get(event)
    if found is None:
        raise LookupError(f"no signal for {event!r}; known signals: {', '.join(EVENT_CLASSES)}")
    return found
