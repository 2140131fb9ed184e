"""Session entries: one frozen class per entry type of pi's JSONL v3 format (DESIGN §2).

Entries are built by the codec (``repos._codec``) or by ``Session.append_*``, never from a raw
line dict. ``timestamp`` on entries is an ISO-8601 string (pi's convention); message timestamps
inside ``MessageEntry.message`` are Unix milliseconds. ``extra`` holds fields this version does not
know, written back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, TypeAlias

from attrs import field, frozen

from hooks import JSONValue, Message, UserContent

__all__ = [
    "ActiveToolsChangeEntry",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "Entry",
    "LabelEntry",
    "LeafEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "SessionHeader",
    "SessionInfoEntry",
    "ThinkingLevelChangeEntry",
    "UnknownEntry",
]

CURRENT_VERSION = 3


def _extra() -> Any:
    return field(factory=dict, repr=False)


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@frozen(kw_only=True)
class SessionHeader:
    """Line 1 of a session file.

    ``version`` is 1 when the file's header has none (pi's legacy linear format).
    ``parent_session`` is the path of the session this one was forked from.
    """

    id: str
    timestamp: str
    cwd: str
    version: int = CURRENT_VERSION
    parent_session: str | None = None
    metadata: Mapping[str, JSONValue] | None = None
    extra: Mapping[str, JSONValue] = _extra()


@frozen(kw_only=True)
class _EntryBase:
    id: str
    parent_id: str | None
    timestamp: str
    extra: Mapping[str, JSONValue] = _extra()


@frozen(kw_only=True)
class MessageEntry(_EntryBase):
    """A conversation message (user, assistant, toolResult, bashExecution, custom)."""

    type: ClassVar[str] = "message"
    message: Message


@frozen(kw_only=True)
class ModelChangeEntry(_EntryBase):
    """The model changed from here on (derived state, not sent to the model)."""

    type: ClassVar[str] = "model_change"
    provider: str
    model_id: str


@frozen(kw_only=True)
class ThinkingLevelChangeEntry(_EntryBase):
    """The thinking level changed (``off``, ``minimal``, ``low``, ``medium``, ``high``, ...)."""

    type: ClassVar[str] = "thinking_level_change"
    thinking_level: str


@frozen(kw_only=True)
class ActiveToolsChangeEntry(_EntryBase):
    """The set of tools offered to the model changed (pi G1); empty means no tools."""

    type: ClassVar[str] = "active_tools_change"
    active_tool_names: tuple[str, ...] = field(converter=_names)


@frozen(kw_only=True)
class CompactionEntry(_EntryBase):
    """Everything on the path before ``first_kept_entry_id`` is replaced by ``summary``.

    ``tokens_before`` is the context size (tokens) when compacted; ``details`` holds
    ``readFiles``/``modifiedFiles``; ``from_hook`` is True when a hook supplied the summary
    (None when the file did not say).
    """

    type: ClassVar[str] = "compaction"
    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: JSONValue = None
    from_hook: bool | None = None


@frozen(kw_only=True)
class BranchSummaryEntry(_EntryBase):
    """Summary of an abandoned branch; ``from_id`` is the abandoned leaf."""

    type: ClassVar[str] = "branch_summary"
    from_id: str
    summary: str
    details: JSONValue = None
    from_hook: bool | None = None


@frozen(kw_only=True)
class CustomEntry(_EntryBase):
    """Application state; never enters the model context."""

    type: ClassVar[str] = "custom"
    custom_type: str
    data: JSONValue = None


@frozen(kw_only=True)
class CustomMessageEntry(_EntryBase):
    """An application message that enters the model context as a user message."""

    type: ClassVar[str] = "custom_message"
    custom_type: str
    content: str | tuple[UserContent, ...]
    display: bool = True
    details: JSONValue = None


@frozen(kw_only=True)
class LabelEntry(_EntryBase):
    """A bookmark on ``target_id``; None or "" clears it. Latest label entry wins."""

    type: ClassVar[str] = "label"
    target_id: str
    label: str | None


@frozen(kw_only=True)
class SessionInfoEntry(_EntryBase):
    """Session-wide facts; the latest non-empty ``name`` is the session's display name."""

    type: ClassVar[str] = "session_info"
    name: str | None = None


@frozen(kw_only=True)
class LeafEntry(_EntryBase):
    """Moves the active leaf to ``target_id`` (None: before the first entry). pi G1."""

    type: ClassVar[str] = "leaf"
    target_id: str | None


@frozen(kw_only=True)
class UnknownEntry(_EntryBase):
    """An entry of a type this version does not know; ``raw`` is the whole line, kept as is."""

    entry_type: str
    raw: Mapping[str, JSONValue]

    @property
    def type(self) -> str:
        return self.entry_type


Entry: TypeAlias = (
    MessageEntry
    | ModelChangeEntry
    | ThinkingLevelChangeEntry
    | ActiveToolsChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | SessionInfoEntry
    | LeafEntry
    | UnknownEntry
)
