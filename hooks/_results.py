"""What hook receivers return, and what the bus makes of all their returns.

A receiver returns one result or None; combining them is ``_bus``'s job, never a receiver's.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, TypeAlias

import orjson
from attrs import Attribute, field, frozen, validators

from ._messages import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    JSONValue,
    Message,
    TextContent,
    ToolResultMessage,
    UnknownContent,
    UnknownMessage,
    UserContent,
    UserMessage,
)

# Results are checked when built, so a receiver returning a wrongly typed result raises inside
# itself: the bus reports that as handler_error (and a tool_call fails closed), instead of the
# bad value surfacing later, after the tool ran.


def _json(instance: object, attribute: Attribute[Any], value: Any) -> None:
    if value is UNSET:
        return
    try:
        orjson.dumps(value)
    except TypeError as exc:
        raise TypeError(f"{attribute.name} must be JSON-serialisable: {exc}") from None


_MESSAGE_TYPES = (
    UserMessage,
    AssistantMessage,
    ToolResultMessage,
    BashExecutionMessage,
    CustomMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    UnknownMessage,
)
_str = validators.instance_of(str)


def _str_or_unset(instance: object, attribute: Attribute[Any], value: Any) -> None:
    if value is not UNSET and not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a str, not {value!r}")


def _mapping(instance: object, attribute: Attribute[Any], value: Any) -> None:
    if not isinstance(value, Mapping):
        raise TypeError(f"{attribute.name} must be a mapping (a dict), not {value!r}")


__all__ = [
    "UNSET",
    "AddContext",
    "AgentStartOutcome",
    "AgentStartPatch",
    "Allow",
    "Ask",
    "BeforeCompactOutcome",
    "BeforeForkOutcome",
    "BeforeRewindOutcome",
    "BeforeTreeOutcome",
    "Block",
    "Cancel",
    "Continue",
    "PatchInput",
    "PatchResult",
    "ReplaceMessages",
    "ReplacePayload",
    "StopOutcome",
    "SupplyCompaction",
    "SupplySummary",
    "ToolCallOutcome",
    "ToolResultOutcome",
    "TreeOptions",
    "Unset",
    "UserPromptOutcome",
]


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset.UNSET
"""Marks a result field as not given (``PatchResult``, ``TreeOptions``, ...); None stays a value
you can set."""

Unset: TypeAlias = Literal[_Unset.UNSET]
"""The type of :data:`UNSET`."""


# --- tool_call ------------------------------------------------------------------------------


@frozen(kw_only=True)
class Block:
    """Returned from ``tool_call``: do not run the tool; ``reason`` becomes its error result.
    From ``user_prompt_submit``: refuse the prompt (``prompt()`` raises ``PromptBlockedError``
    with ``reason``)."""

    reason: str = field(validator=_str)


@frozen(kw_only=True)
class PatchInput:
    """Returned from ``tool_call``: run the tool with ``input`` instead (later receivers see it)."""

    input: Mapping[str, JSONValue] = field(validator=[_mapping, _json])


def _mapping_or_unset(instance: object, attribute: Attribute[Any], value: Any) -> None:
    if value is not UNSET:
        _mapping(instance, attribute, value)
        _json(instance, attribute, value)


def _optional_str(instance: object, attribute: Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{attribute.name} must be a str or None, not {value!r}")


@frozen(kw_only=True)
class Allow:
    """Returned from ``tool_call``: the supervisor approves the call unless a deny or ask rule
    (or ``plan`` mode) stops it: Claude Code's ``permissionDecision: "allow"``, which "doesn't
    skip the deny-rule and ask-rule steps". ``input``, when given, patches the input as
    :class:`PatchInput` does (Claude Code's ``updatedInput`` with ``allow``). Later receivers
    still run and may block; an ``Ask`` from any receiver wins over it."""

    reason: str | None = field(default=None, validator=_optional_str)
    input: Mapping[str, JSONValue] | Unset = field(default=UNSET, validator=_mapping_or_unset)


@frozen(kw_only=True)
class Ask:
    """Returned from ``tool_call``: the supervisor asks its approver about the call, whatever
    the mode and allow rules say (Claude Code's ``permissionDecision: "ask"``); a deny rule
    still denies it first. ``input``, when given, patches the input as :class:`PatchInput`."""

    reason: str | None = field(default=None, validator=_optional_str)
    input: Mapping[str, JSONValue] | Unset = field(default=UNSET, validator=_mapping_or_unset)


@frozen(kw_only=True)
class ToolCallOutcome:
    """The combined answer of every ``tool_call`` receiver.

    ``input`` is the final input (as patched); when ``blocked``, ``reason`` says why.
    ``permission`` is what the receivers asked of the supervisor (``ask`` over ``allow``; None:
    nothing), with the reason of the receiver that decided it.
    """

    blocked: bool
    reason: str | None
    input: Mapping[str, JSONValue]
    permission: Literal["allow", "ask"] | None = None
    permission_reason: str | None = None


# --- tool_result ----------------------------------------------------------------------------


def _tuple_or_unset(
    value: str | Iterable[UserContent] | Unset,
) -> tuple[UserContent, ...] | Unset:
    if value is UNSET:
        return value
    if isinstance(value, str):  # like ToolResult: a plain string is one text block
        return (TextContent(text=value),)
    blocks = tuple(value)
    for block in blocks:
        if not isinstance(block, TextContent | ImageContent | UnknownContent):
            raise TypeError(f"content blocks must be TextContent or ImageContent, not {block!r}")
    return blocks


def _bool_or_unset(instance: object, attribute: Attribute[Any], value: Any) -> None:
    if value is not UNSET and not isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be a bool, not {value!r}")


@frozen(kw_only=True)
class PatchResult:
    """Returned from ``tool_result``: replace the fields that are set; :data:`UNSET` keeps one.

    ``terminate=True`` asks the agent to stop after this tool batch; the last receiver that sets
    it decides.
    """

    content: tuple[UserContent, ...] | Unset = field(default=UNSET, converter=_tuple_or_unset)
    details: JSONValue | Unset = field(default=UNSET, validator=_json)
    is_error: bool | Unset = field(default=UNSET, validator=_bool_or_unset)
    terminate: bool | Unset = field(default=UNSET, validator=_bool_or_unset)


@frozen(kw_only=True)
class ToolResultOutcome:
    """The tool result after every ``tool_result`` receiver; ``terminate`` defaults to False."""

    content: tuple[UserContent, ...]
    details: JSONValue
    is_error: bool
    terminate: bool


# --- before_agent_start ---------------------------------------------------------------------


def _messages(value: Iterable[Message]) -> tuple[Message, ...]:
    messages = tuple(value)
    for m in messages:
        if not isinstance(m, _MESSAGE_TYPES):
            raise TypeError(f"expected messages (UserMessage, ...), got {m!r}")
    return messages


@frozen(kw_only=True)
class AgentStartPatch:
    """Returned from ``before_agent_start``: add messages, replace the system prompt, or both.

    ``messages`` are appended after the prompt; the messages of every receiver are kept, in
    receiver order. ``system_prompt`` replaces the system prompt (later receivers see it).
    """

    messages: tuple[Message, ...] = field(default=(), converter=_messages)
    system_prompt: str | Unset = field(default=UNSET, validator=_str_or_unset)


@frozen(kw_only=True)
class AgentStartOutcome:
    """The combined answer of every ``before_agent_start`` receiver.

    ``messages``: every receiver's added messages, in order (empty when none). ``system_prompt``:
    the system prompt as patched by the last receiver that set it, else the event's own.
    """

    messages: tuple[Message, ...] = field(converter=_messages)
    system_prompt: str


# --- context, before_provider_payload --------------------------------------------------------


@frozen(kw_only=True)
class ReplaceMessages:
    """Returned from ``context``: send these messages for this request (not persisted)."""

    messages: tuple[Message, ...] = field(converter=_messages)


@frozen(kw_only=True)
class ReplacePayload:
    """Returned from ``before_provider_payload``: send this request body instead."""

    payload: Mapping[str, JSONValue] = field(validator=[_mapping, _json])


# --- session_before_* -----------------------------------------------------------------------


@frozen(kw_only=True)
class Cancel:
    """Returned from a ``session_before_*`` hook: do not do it. The first ``Cancel`` wins."""

    reason: str = field(validator=_str)


@frozen(kw_only=True)
class SupplyCompaction:
    """Returned from ``session_before_compact``: use this summary instead of asking the model.

    Fields left :data:`UNSET` take the values the harness prepared (the event's
    ``first_kept_entry_id`` and ``tokens_before``). ``details`` is free-form data stored with the
    compaction entry. The first ``SupplyCompaction`` wins.
    """

    summary: str = field(validator=_str)
    first_kept_entry_id: str | Unset = UNSET
    tokens_before: int | Unset = UNSET
    details: JSONValue = field(default=None, validator=_json)


@frozen(kw_only=True)
class BeforeCompactOutcome:
    """The combined answer of every ``session_before_compact`` receiver.

    When ``cancelled``, ``reason`` is the first ``Cancel``'s and ``supplied`` is None; otherwise
    ``supplied`` is the first ``SupplyCompaction`` (None: summarize with the model).
    """

    cancelled: bool
    reason: str | None
    supplied: SupplyCompaction | None


@frozen(kw_only=True)
class SupplySummary:
    """Returned from ``session_before_tree``: use this branch summary instead of asking the model.

    The first ``SupplySummary`` wins.
    """

    summary: str = field(validator=_str)
    details: JSONValue = field(default=None, validator=_json)


@frozen(kw_only=True)
class TreeOptions:
    """Returned from ``session_before_tree``: change the summary instructions or the label.

    Fields left :data:`UNSET` are kept; None clears one. Later receivers see the changed values.
    """

    custom_instructions: str | Unset | None = UNSET
    label: str | Unset | None = UNSET


@frozen(kw_only=True)
class BeforeTreeOutcome:
    """The combined answer of every ``session_before_tree`` receiver.

    When ``cancelled``, ``reason`` is the first ``Cancel``'s and ``summary`` is None; otherwise
    ``summary`` is the first ``SupplySummary`` (None: the harness summarizes if asked to).
    ``custom_instructions`` and ``label`` are the event's, as changed by ``TreeOptions``.
    """

    cancelled: bool
    reason: str | None
    summary: SupplySummary | None
    custom_instructions: str | None
    label: str | None


@frozen(kw_only=True)
class BeforeForkOutcome:
    """The combined answer of every ``session_before_fork`` receiver: the first ``Cancel``."""

    cancelled: bool
    reason: str | None


# --- session_start, user_prompt_submit, stop ----------------------------------------------------


@frozen(kw_only=True)
class AddContext:
    """Returned from ``session_start`` or ``user_prompt_submit``: add ``text`` to what the model
    sees (Claude Code's ``additionalContext``), as a ``custom`` message (``customType``
    ``hook_context``) persisted with the run. Every receiver's text is kept, in order."""

    text: str = field(validator=_str)


@frozen(kw_only=True)
class UserPromptOutcome:
    """The combined answer of every ``user_prompt_submit`` receiver: when ``blocked``,
    ``reason`` is the first ``Block``'s (or the failure that refused the prompt) and nothing
    is written; ``context`` holds every ``AddContext`` text, in receiver order."""

    blocked: bool
    reason: str | None
    context: tuple[str, ...]


@frozen(kw_only=True)
class Continue:
    """Returned from ``stop`` or ``subagent_stop``: do not let the run end; ``reason`` is
    appended as a user message and the model gets another turn (Claude Code's ``decision:
    "block"`` at ``Stop``). The first ``Continue`` wins."""

    reason: str = field(validator=_str)


@frozen(kw_only=True)
class StopOutcome:
    """The combined answer of every ``stop`` (or ``subagent_stop``) receiver: ``reason`` is the
    first ``Continue``'s, None when the run may end."""

    reason: str | None


@frozen(kw_only=True)
class BeforeRewindOutcome:
    """The combined answer of every ``session_before_rewind`` receiver: the first ``Cancel``."""

    cancelled: bool
    reason: str | None
