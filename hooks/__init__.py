"""Events, hook results, the blinker bus, and the values they carry.

The bottom layer: imports nothing else of this project. Everything public is also re-exported from
``harness``.
"""

from ._errors import HarnessError
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

__all__ = [
    "AssistantContent",
    "AssistantMessage",
    "BashExecutionMessage",
    "BranchSummaryMessage",
    "CompactionSummaryMessage",
    "ContentBlock",
    "Cost",
    "CustomMessage",
    "HarnessError",
    "ImageContent",
    "JSONValue",
    "Message",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResultMessage",
    "UnknownContent",
    "UnknownMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "now_ms",
]
