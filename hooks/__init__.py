"""Events, hook results, the blinker bus, and the values they carry.

The bottom layer: imports nothing else of this project. Everything public is also re-exported from
``harness``.
"""

from blinker import ANY

from ._bus import Receiver, connect, emit_tool_call, emit_tool_result, has_receivers, notify, on
from ._errors import HarnessError
from ._events import (
    AgentEndEvent,
    AgentStartEvent,
    Event,
    HandlerErrorEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ObserverEvent,
    ToolCallEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from ._messages import (
    AssistantContent,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    ContentBlock,
    Cost,
    CustomMessage,
    ImageContent,
    JSONValue,
    Message,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UnknownMessage,
    Usage,
    UserContent,
    UserMessage,
    now_ms,
)
from ._options import CacheRetention, StreamOptions, StreamOptionsPatch
from ._results import (
    UNSET,
    Block,
    PatchInput,
    PatchResult,
    ToolCallOutcome,
    ToolResultOutcome,
    Unset,
)
from ._signals import EVENT_CLASSES, signal_for

__all__ = [
    "ANY",
    "EVENT_CLASSES",
    "UNSET",
    "AgentEndEvent",
    "AgentStartEvent",
    "AssistantContent",
    "AssistantMessage",
    "BashExecutionMessage",
    "Block",
    "BranchSummaryMessage",
    "CacheRetention",
    "CompactionSummaryMessage",
    "ContentBlock",
    "Cost",
    "CustomMessage",
    "Event",
    "HandlerErrorEvent",
    "HarnessError",
    "ImageContent",
    "JSONValue",
    "Message",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "ObserverEvent",
    "PatchInput",
    "PatchResult",
    "Receiver",
    "StopReason",
    "StreamOptions",
    "StreamOptionsPatch",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolCallEvent",
    "ToolCallOutcome",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolResultEvent",
    "ToolResultMessage",
    "ToolResultOutcome",
    "TurnEndEvent",
    "TurnStartEvent",
    "UnknownContent",
    "UnknownMessage",
    "Unset",
    "Usage",
    "UserContent",
    "UserMessage",
    "connect",
    "emit_tool_call",
    "emit_tool_result",
    "has_receivers",
    "notify",
    "now_ms",
    "on",
    "signal_for",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__.startswith("hooks."):
        _obj.__module__ = __name__
del _name, _obj
