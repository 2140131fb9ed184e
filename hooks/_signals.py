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
    AbortEvent,
    AfterProviderResponseEvent,
    AgentEndEvent,
    AgentStartEvent,
    BeforeAgentStartEvent,
    BeforeProviderPayloadEvent,
    BeforeProviderRequestEvent,
    ContextEvent,
    Event,
    HandlerErrorEvent,
    LimitReachedEvent,
    McpServerErrorEvent,
    McpServerStartEvent,
    McpServerStopEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ModelFallbackEvent,
    ModelUpdateEvent,
    NotificationEvent,
    PermissionDecisionEvent,
    PermissionRequestEvent,
    QueueUpdateEvent,
    ResourcesUpdateEvent,
    RetryEvent,
    SavePointEvent,
    SessionBeforeCompactEvent,
    SessionBeforeForkEvent,
    SessionBeforeRewindEvent,
    SessionBeforeTreeEvent,
    SessionCompactEvent,
    SessionCreatedEvent,
    SessionDeletedEvent,
    SessionEndEvent,
    SessionForkEvent,
    SessionRewindEvent,
    SessionStartEvent,
    SessionTreeEvent,
    SettledEvent,
    StopEvent,
    SubagentStopEvent,
    SystemMessageEvent,
    ThinkingLevelUpdateEvent,
    ToolCallEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolResultEvent,
    ToolsUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserPromptSubmitEvent,
)

__all__ = ["EVENT_CLASSES", "NAMESPACE", "signal_for"]

NAMESPACE: Final = Namespace()
"""Every signal of the bus, by name. Not exported: reach a signal through :func:`signal_for`."""

# (event class, signal doc): first in the order the events first fire during one prompt
# (DESIGN §6), then session, settings and other events. docs/events.md has the same rows.
_SIGNALS: Final[tuple[tuple[type[Event], str], ...]] = (
    (
        BeforeAgentStartEvent,
        "Hook: before a run; may AgentStartPatch. Messages collected, system prompt chained.",
    ),
    (AgentStartEvent, "Observer: a run starts, after before_agent_start."),
    (TurnStartEvent, "Observer: a turn starts."),
    (MessageStartEvent, "Observer: a message starts (prompt, assistant reply, tool result)."),
    (MessageEndEvent, "Observer: a message is complete and persisted."),
    (ContextEvent, "Hook: before each request; may ReplaceMessages (not persisted). Chained."),
    (BeforeProviderRequestEvent, "Hook: before each request; may StreamOptionsPatch. Chained."),
    (BeforeProviderPayloadEvent, "Hook: with the request body; may ReplacePayload. Chained."),
    (AfterProviderResponseEvent, "Observer: the provider answered (HTTP status and headers)."),
    (MessageUpdateEvent, "Observer: a streamed delta of the assistant reply."),
    (ToolExecutionStartEvent, "Observer: a tool call is about to be handled."),
    (ToolCallEvent, "Hook: before a tool runs; may Block or PatchInput. First Block wins."),
    (PermissionRequestEvent, "Observer: a tool call reached the supervisor."),
    (PermissionDecisionEvent, "Observer: the supervisor approved or denied a tool call."),
    (ToolExecutionUpdateEvent, "Observer: progress of a running tool."),
    (ToolResultEvent, "Hook: after a tool ran; may PatchResult. Patches chain field-wise."),
    (ToolExecutionEndEvent, "Observer: a tool call is done, with its final result."),
    (TurnEndEvent, "Observer: a turn ends, with its reply and tool results."),
    (SavePointEvent, "Observer: pending session writes were flushed after turn_end."),
    (QueueUpdateEvent, "Observer: the steering, follow-up or next-turn queue changed."),
    (AgentEndEvent, "Observer: a run ends, with the messages it added."),
    (SettledEvent, "Observer: the harness is idle after agent_end."),
    (
        SessionBeforeCompactEvent,
        "Hook: before a compaction; may Cancel or SupplyCompaction. First of each wins.",
    ),
    (SessionCompactEvent, "Observer: a compaction entry was appended."),
    (
        SessionBeforeTreeEvent,
        "Hook: before moving the leaf; may Cancel, SupplySummary or TreeOptions (chained).",
    ),
    (SessionTreeEvent, "Observer: the leaf moved, maybe with a branch summary."),
    (SessionBeforeForkEvent, "Hook: before a fork; may Cancel. First Cancel wins."),
    (SessionForkEvent, "Observer: a session was forked into a new one."),
    (SessionBeforeRewindEvent, "Hook: before files are rewound; may Cancel. First Cancel wins."),
    (SessionRewindEvent, "Observer: files were put back as they were at an entry."),
    (SessionCreatedEvent, "Observer: a session was created."),
    (SessionDeletedEvent, "Observer: a session was deleted."),
    (ModelUpdateEvent, "Observer: the model changed (set or restored)."),
    (ThinkingLevelUpdateEvent, "Observer: the thinking level changed (set or restored)."),
    (ToolsUpdateEvent, "Observer: the known or active tools changed (set or restored)."),
    (ResourcesUpdateEvent, "Observer: skills, templates or context files changed."),
    (McpServerStartEvent, "Observer: an MCP server connected and listed its tools."),
    (McpServerErrorEvent, "Observer: an MCP server failed to start, crashed or timed out."),
    (McpServerStopEvent, "Observer: an MCP server was stopped (shutdown or restart)."),
    (AbortEvent, "Observer: a run was aborted; with the queued texts it dropped."),
    (RetryEvent, "Observer: a retryable failure; the next attempt starts after a delay."),
    (ModelFallbackEvent, "Observer: the primary model failed for good; the fallback answers."),
    (LimitReachedEvent, "Observer: a run limit was reached; the run ends after this turn."),
    (HandlerErrorEvent, "Observer: a receiver of another signal raised."),
    # Claude Code's lifecycle hook points (docs/hooks.md maps its event names onto these).
    (
        SessionStartEvent,
        "Hook: before a harness's first prompt, or after a compaction; may AddContext.",
    ),
    (
        UserPromptSubmitEvent,
        "Hook: a prompt, before anything is written; may Block or AddContext. Fails closed.",
    ),
    (StopEvent, "Hook: the model ends a run; may Continue (another turn). First Continue wins."),
    (SubagentStopEvent, "Hook: a nested run's model ends it; may Continue, as for stop."),
    (SessionEndEvent, "Observer: the harness stops working in its session (shutdown)."),
    (NotificationEvent, "Observer: the harness waits for a person (an approval, input)."),
    (SystemMessageEvent, "Observer: a hook's message for the user (not the model)."),
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
