"""Events as JSON objects: one shape for every program that reads them (``harness run
--verbose``, ``harness rpc``, ``examples/log_events.py``; docs/events.md).

The shape is pi's RPC event shape (``AgentSessionEvent`` in pi's ``rpc-types``, the events
``harness rpc`` streams): ``type`` is the event's name, fields are camelCase, messages are as in
session files (``encode_message``). Where pi has the event its field names are pi's
(``message_update`` carries ``assistantMessageEvent``, ``tool_execution_start`` ``args``,
``queue_update`` ``steering``/``followUp``); our ``retry`` is pi's ``auto_retry_start``,
``thinking_level_update`` pi's ``thinking_level_changed``, ``session_before_compact`` and
``session_compact`` pi's ``compaction_start`` and ``compaction_end``. Every other event keeps
its name, with its fields in camelCase; fields pi lacks are added in the same style.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, get_args

import attrs

from hooks import (
    AgentEndEvent,
    AssistantMessage,
    Event,
    HarnessError,
    ImageContent,
    Message,
    MessageEndEvent,
    MessageUpdateEvent,
    QueueUpdateEvent,
    RetryEvent,
    SessionBeforeCompactEvent,
    SessionCompactEvent,
    TextContent,
    ThinkingContent,
    ThinkingLevelUpdateEvent,
    ToolCall,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolResultMessage,
    TurnEndEvent,
    UnknownContent,
)
from repos import CompactionEntry, Session, encode_message

__all__ = ["EventEncoder", "camel_case", "json_value"]

_MESSAGE_TYPES: tuple[type, ...] = get_args(Message)
_BLOCK_TYPES = (TextContent, ThinkingContent, ToolCall, UnknownContent)
_WORD = re.compile(r"_([a-z0-9])")


def camel_case(name: str) -> str:
    """``tool_call_id`` -> ``toolCallId``."""
    return _WORD.sub(lambda m: m.group(1).upper(), name)


def json_value(value: object) -> Any:
    """Any event field as JSON: messages as in session files, content blocks as in messages,
    an exception as ``{"type", "message"}``, attrs values as objects of their fields (their
    names as written), anything else unknown as its ``repr``."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, _MESSAGE_TYPES):
        return encode_message(value)  # type: ignore[arg-type]
    if isinstance(value, ImageContent):
        return {"type": "image", "data": value.data, "mimeType": value.mime_type}
    if isinstance(value, _BLOCK_TYPES):
        return encode_message(AssistantMessage(content=(value,)))["content"][0]
    if isinstance(value, BaseException):
        return {"type": type(value).__name__, "message": str(value)}
    if attrs.has(type(value)):
        names = [f.name for f in attrs.fields(type(value))]  # type: ignore[arg-type]
        return {name: json_value(getattr(value, name)) for name in names}
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    # any sequence: the context's messages are a lazily built one (`LazyMessages`)
    if isinstance(value, Sequence | set | frozenset) and not isinstance(value, bytes | bytearray):
        return [json_value(v) for v in value]
    return repr(value)


def _fields(event: Event, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        camel_case(f.name): json_value(getattr(event, f.name))
        for f in attrs.fields(type(event))
        if f.name not in skip
    }


def _result(message: ToolResultMessage) -> dict[str, Any]:
    """A tool result as pi's ``AgentToolResult``: ``content`` and ``details``."""
    return {"content": encode_message(message)["content"], "details": message.details}


class EventEncoder:
    """Turns events into JSON objects (see the module docstring for the shape).

    One encoder per event stream: it remembers each running tool call's arguments and output
    so far, which pi's ``tool_execution_update`` carries (``args``, ``partialResult``) and our
    event does not (a tool's text updates are the new output only). ``encode(event, sender)``
    may look the compaction entry up in ``sender.session`` (the harness that sent it) for
    ``compaction_end``'s ``result``.

    Example (``examples/log_events.py``)::

        encoder = EventEncoder()
        harness.connect("message_end", lambda sender, e: print(encoder.encode(e, sender)))
    """

    def __init__(self) -> None:
        self._args: dict[str, Any] = {}
        self._output: dict[str, str] = {}

    def encode(self, event: Event, sender: object = None) -> dict[str, Any]:
        """The JSON object of ``event`` (a dict of JSON values; ``type`` first).

        Raises nothing for any event of ``EVENT_CLASSES``; an unknown value inside a field
        becomes its ``repr``.
        """
        name = event.name
        out: dict[str, Any]
        if isinstance(event, MessageUpdateEvent):
            message = encode_message(event.message)
            out = {
                "message": message,
                "assistantMessageEvent": {
                    "type": f"{event.kind}_delta",
                    "contentIndex": event.content_index,
                    "delta": event.delta,
                    "partial": message,
                },
            }
        elif isinstance(event, MessageEndEvent):
            out = {"message": json_value(event.message), "entryId": event.entry_id}
        elif isinstance(event, ToolExecutionStartEvent):
            args = json_value(event.input)
            self._args[event.tool_call_id] = args
            out = {"toolCallId": event.tool_call_id, "toolName": event.tool_name, "args": args}
        elif isinstance(event, ToolExecutionUpdateEvent):
            partial = event.partial
            if isinstance(partial, str):
                # bash reports each new piece of its output; pi's partialResult holds all of
                # it so far, for a client to replace its display with.
                so_far = self._output.get(event.tool_call_id, "") + partial
                self._output[event.tool_call_id] = so_far
                partial = {"content": [{"type": "text", "text": so_far}], "details": None}
            out = {
                "toolCallId": event.tool_call_id,
                "toolName": event.tool_name,
                "args": self._args.get(event.tool_call_id),
                "partialResult": json_value(partial),
            }
        elif isinstance(event, ToolExecutionEndEvent):
            self._args.pop(event.tool_call_id, None)
            self._output.pop(event.tool_call_id, None)
            out = {
                "toolCallId": event.tool_call_id,
                "toolName": event.tool_name,
                "result": _result(event.result),
                "isError": event.is_error,
            }
        elif isinstance(event, TurnEndEvent):
            out = {
                "message": json_value(event.message),
                "toolResults": [json_value(r) for r in event.tool_results],
                "turnIndex": event.turn_index,
            }
        elif isinstance(event, AgentEndEvent):
            out = {"messages": [json_value(m) for m in event.messages]}
            if event.end_reason is not None:
                out["endReason"] = event.end_reason
        elif isinstance(event, QueueUpdateEvent):
            out = {
                "steering": list(event.steer),
                "followUp": list(event.follow_up),
                "nextTurn": list(event.next_turn),
            }
        elif isinstance(event, RetryEvent):
            name = "auto_retry_start"
            out = {
                "attempt": event.attempt,
                "maxAttempts": event.max_attempts,
                "delayMs": round(event.delay_s * 1000),
                "errorMessage": event.error_message,
                "errorType": event.error_type,
            }
        elif isinstance(event, ThinkingLevelUpdateEvent):
            name = "thinking_level_changed"
            out = _fields(event)
        elif isinstance(event, SessionBeforeCompactEvent):
            name = "compaction_start"
            out = {"reason": event.trigger, **_fields(event, skip=("trigger",))}
        elif isinstance(event, SessionCompactEvent):
            name = "compaction_end"
            out = {
                "result": _compaction(sender, event.entry_id),
                "aborted": False,
                "willRetry": False,
                **_fields(event),
            }
        else:
            out = _fields(event)
        return {"type": name, **out}


def _compaction(sender: object, entry_id: str) -> dict[str, Any] | None:
    """pi's ``CompactionResult`` of the entry ``entry_id`` in the sender's session."""
    session = getattr(sender, "session", None)
    if not isinstance(session, Session):
        return None
    try:
        entry = session.get_entry(entry_id)
    except HarnessError:  # gone from this session's view: no result to show
        return None
    if not isinstance(entry, CompactionEntry):
        return None
    return {
        "summary": entry.summary,
        "firstKeptEntryId": entry.first_kept_entry_id,
        "tokensBefore": entry.tokens_before,
        "details": json_value(entry.details),
    }
