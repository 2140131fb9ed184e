"""One frozen class per signal: the data an event carries, and nothing else.

The emitting harness is the blinker *sender*, never a field, so a receiver scoped to one harness
(``sender=h``) needs no filtering. Each class's ``name`` is its signal's name; ``_signals`` maps
the two. Sequences are tuples; only free-form JSON (tool input, ``details``) is a mapping, which
receivers must treat as read-only (change it by returning a result, see ``_results``).

Observers see what happened; hooks (the :data:`HookEvent` classes) may change what happens next by
returning a result. ``docs/events.md`` gives the order in which they fire.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, Literal, TypeAlias

from attrs import field, frozen

from ._lazy import lazy_or_tuple
from ._messages import (
    AssistantMessage,
    JSONValue,
    Message,
    ToolResultMessage,
    UserContent,
    UserMessage,
)
from ._options import StreamOptions

__all__ = [
    "AbortEvent",
    "AfterProviderResponseEvent",
    "AgentEndEvent",
    "AgentStartEvent",
    "BeforeAgentStartEvent",
    "BeforeProviderPayloadEvent",
    "BeforeProviderRequestEvent",
    "ContextEvent",
    "Event",
    "HandlerErrorEvent",
    "HookEvent",
    "LimitReachedEvent",
    "McpServerErrorEvent",
    "McpServerStartEvent",
    "McpServerStopEvent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "ModelFallbackEvent",
    "ModelUpdateEvent",
    "NotificationEvent",
    "ObserverEvent",
    "PermissionDecisionEvent",
    "PermissionRequestEvent",
    "QueueUpdateEvent",
    "ResourcesUpdateEvent",
    "RetryEvent",
    "SavePointEvent",
    "SessionBeforeCompactEvent",
    "SessionBeforeForkEvent",
    "SessionBeforeRewindEvent",
    "SessionBeforeTreeEvent",
    "SessionCompactEvent",
    "SessionCreatedEvent",
    "SessionDeletedEvent",
    "SessionEndEvent",
    "SessionForkEvent",
    "SessionRewindEvent",
    "SessionStartEvent",
    "SessionTreeEvent",
    "SettledEvent",
    "StopEvent",
    "SubagentStopEvent",
    "SystemMessageEvent",
    "ThinkingLevelUpdateEvent",
    "ToolCallEvent",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolResultEvent",
    "ToolsUpdateEvent",
    "TurnEndEvent",
    "TurnStartEvent",
    "UserPromptSubmitEvent",
]


# Converters with concrete types: mypy's attrs support cannot solve ``converter=tuple``'s TypeVar.
def _messages(value: Iterable[Message]) -> tuple[Message, ...]:
    return tuple(value)


def _tool_results(value: Iterable[ToolResultMessage]) -> tuple[ToolResultMessage, ...]:
    return tuple(value)


def _contents(value: Iterable[UserContent]) -> tuple[UserContent, ...]:
    return tuple(value)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):  # a lone string would become a tuple of its characters
        raise TypeError(f"expected a sequence of strings, got the string {value!r}")
    return tuple(value)


# --- one prompt: start, requests ------------------------------------------------------------


@frozen(kw_only=True)
class BeforeAgentStartEvent:
    """Hook, sent before a run starts. Receivers may return ``AgentStartPatch``.

    ``prompt`` is the run's prompt messages. ``system_prompt`` is the system prompt as patched by
    the receivers before this one. Added messages are collected from every receiver.
    """

    name: ClassVar[str] = "before_agent_start"

    prompt: tuple[Message, ...] = field(converter=_messages)
    system_prompt: str


@frozen(kw_only=True)
class AgentStartEvent:
    """A run (one ``prompt()``) starts, after ``before_agent_start``."""

    name: ClassVar[str] = "agent_start"


@frozen(kw_only=True)
class AgentEndEvent:
    """A run ends; ``messages`` are the messages it added, in order.

    ``end_reason`` says why the run ended before the model was done, for the user (Claude
    Code's ``stopReason``): the reason given to ``AgentHarness.end_run`` (a command hook's
    ``continue: false``), or that the stop hooks reached their limit of continues. None when
    the model stopped on its own, or the run ended with an error or an abort.
    """

    name: ClassVar[str] = "agent_end"

    messages: tuple[Message, ...] = field(converter=_messages)
    end_reason: str | None = None


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
class ContextEvent:
    """Hook, sent before each model request. Receivers may return ``ReplaceMessages``.

    ``messages`` is the context to send, as replaced by the receivers before this one (a
    session's context builds each message when it is first read). A replacement applies to
    this request only and is never persisted.
    """

    name: ClassVar[str] = "context"

    messages: Sequence[Message] = field(converter=lazy_or_tuple)
    turn_index: int


@frozen(kw_only=True)
class BeforeProviderRequestEvent:
    """Hook, sent before each model request. Receivers may return ``StreamOptionsPatch``.

    ``options`` are the request's options as patched by the receivers before this one (see
    :meth:`StreamOptions.patched`). ``session_id`` is passed to the provider (None: no session).
    """

    name: ClassVar[str] = "before_provider_request"

    provider: str
    model_id: str
    session_id: str | None
    options: StreamOptions


@frozen(kw_only=True)
class BeforeProviderPayloadEvent:
    """Hook, sent with the provider's request body. Receivers may return ``ReplacePayload``.

    ``payload`` is the provider-specific body (for Anthropic, the Messages API JSON) as replaced
    by the receivers before this one; treat it as read-only.
    """

    name: ClassVar[str] = "before_provider_payload"

    provider: str
    model_id: str
    payload: Mapping[str, JSONValue]


@frozen(kw_only=True)
class AfterProviderResponseEvent:
    """The provider answered a request: HTTP ``status`` and response ``headers``."""

    name: ClassVar[str] = "after_provider_response"

    status: int
    headers: Mapping[str, str]


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
class PermissionRequestEvent:
    """A tool call reached the supervisor, after the ``tool_call`` hooks let it through.

    ``input`` is the input the tool would run with (read-only); ``operation_key`` is what an
    approve-always remembers and a rule matches (``bash(git status:*)``, ``write(src/a.py)``);
    ``cwd`` the working folder; ``leaves_cwd`` whether a path of the call resolves outside it;
    ``depth`` the nesting depth (0: the top-level harness, 1: a skill run by it, ...).
    """

    name: ClassVar[str] = "permission_request"

    tool_call_id: str
    tool_name: str
    input: Mapping[str, JSONValue]
    operation_key: str
    cwd: str
    leaves_cwd: bool
    session_id: str
    depth: int


@frozen(kw_only=True)
class PermissionDecisionEvent:
    """The supervisor decided a tool call: ``decision`` is ``approve``, ``deny``,
    ``approve_always`` or ``defer`` (the answer will come later, from another process maybe:
    the run stops ``awaiting_approval``); ``reason`` says why (the rule, the mode, the
    approver, a remembered approval); ``remembered`` where an approve-always was stored
    (``session`` or ``project``; None otherwise)."""

    name: ClassVar[str] = "permission_decision"

    tool_call_id: str
    tool_name: str
    operation_key: str
    decision: Literal["approve", "deny", "approve_always", "defer"]
    reason: str | None
    remembered: Literal["session", "project"] | None = None


@frozen(kw_only=True)
class ToolResultEvent:
    """Hook, sent with each tool call's result. Receivers may return ``PatchResult``.

    ``input`` is the input the tool ran with; ``content``, ``details`` and ``is_error`` are the
    result as patched by the receivers before this one. ``executed`` is False when the tool
    never ran (a hook blocked the call, permissions denied it, its input was invalid, the
    tool is unknown): the result is then the error that says why.
    """

    name: ClassVar[str] = "tool_result"

    tool_call_id: str
    tool_name: str
    input: Mapping[str, JSONValue]
    content: tuple[UserContent, ...] = field(converter=_contents)
    details: JSONValue
    is_error: bool
    turn_index: int
    executed: bool = True


# --- end of a turn, queues, end of a run ----------------------------------------------------


@frozen(kw_only=True)
class SavePointEvent:
    """Pending session writes were flushed after ``turn_end``; ``had_pending_writes`` says if
    there were any."""

    name: ClassVar[str] = "save_point"

    had_pending_writes: bool


@frozen(kw_only=True)
class QueueUpdateEvent:
    """A queue changed; each field is a snapshot of one queue's texts, in delivery order."""

    name: ClassVar[str] = "queue_update"

    steer: tuple[str, ...] = field(converter=_strings)
    follow_up: tuple[str, ...] = field(converter=_strings)
    next_turn: tuple[str, ...] = field(converter=_strings)


@frozen(kw_only=True)
class SettledEvent:
    """The harness is idle after ``agent_end``; ``next_turn_count`` messages wait for the next
    prompt."""

    name: ClassVar[str] = "settled"

    next_turn_count: int


# --- sessions -------------------------------------------------------------------------------


@frozen(kw_only=True)
class SessionBeforeCompactEvent:
    """Hook, sent before a compaction. Receivers may return ``Cancel`` or ``SupplyCompaction``.

    ``leaf_id`` is the entry the compaction follows; ``first_kept_entry_id`` the first entry kept
    verbatim (None: none kept); ``tokens_before`` the context size being compacted; ``trigger``
    why: ``manual`` (``compact()``), ``threshold`` (the context passed window - reserve before a
    request; a ``Cancel`` then just skips it) or ``overflow`` (the provider reported the context
    too long; a ``Cancel`` then ends the run with ``ContextOverflowError``).
    """

    name: ClassVar[str] = "session_before_compact"

    session_id: str
    leaf_id: str | None
    first_kept_entry_id: str | None
    tokens_before: int
    custom_instructions: str | None
    trigger: Literal["manual", "threshold", "overflow"] = "manual"


@frozen(kw_only=True)
class SessionCompactEvent:
    """A compaction entry ``entry_id`` was appended; ``from_hook`` when a receiver supplied it."""

    name: ClassVar[str] = "session_compact"

    session_id: str
    entry_id: str
    from_hook: bool


@frozen(kw_only=True)
class SessionBeforeTreeEvent:
    """Hook, sent before moving the leaf to ``target_id`` (None: before the first entry).

    Receivers may return ``Cancel``, ``SupplySummary`` or ``TreeOptions``. ``summarize`` says
    whether the caller asked for a summary of the branch being left. ``custom_instructions`` and
    ``label`` are as changed by the ``TreeOptions`` of the receivers before this one.
    """

    name: ClassVar[str] = "session_before_tree"

    session_id: str
    target_id: str | None
    old_leaf_id: str | None
    summarize: bool
    custom_instructions: str | None
    label: str | None


@frozen(kw_only=True)
class SessionTreeEvent:
    """The leaf moved from ``old_leaf_id`` to ``new_leaf_id``.

    ``summary_entry_id`` is the branch summary entry written (None: none); ``from_hook`` when a
    receiver supplied that summary.
    """

    name: ClassVar[str] = "session_tree"

    session_id: str
    old_leaf_id: str | None
    new_leaf_id: str | None
    summary_entry_id: str | None
    from_hook: bool


@frozen(kw_only=True)
class SessionBeforeForkEvent:
    """Hook, sent before session ``source_id`` is forked. Receivers may return ``Cancel``.

    ``entry_id`` and ``position`` say where the fork starts (None: the whole session); ``scope``
    what it copies.
    """

    name: ClassVar[str] = "session_before_fork"

    source_id: str
    entry_id: str | None
    position: str | None
    scope: str


@frozen(kw_only=True)
class SessionForkEvent:
    """Session ``source_id`` was forked into the new session ``session_id`` (stored at ``path``,
    None in memory)."""

    name: ClassVar[str] = "session_fork"

    source_id: str
    session_id: str
    path: str | None


@frozen(kw_only=True)
class SessionBeforeRewindEvent:
    """Hook, sent before the workspace's files are put back as they were at entry
    ``target_id`` (None: before the first entry) of session ``session_id``. Receivers may
    return ``Cancel``; nothing is written then.

    ``paths`` are the files the rewind will write or remove (relative to the working folder,
    or absolute outside it); ``conversation`` whether the leaf moves too.
    """

    name: ClassVar[str] = "session_before_rewind"

    session_id: str
    target_id: str | None
    paths: tuple[str, ...] = field(converter=_strings)
    conversation: bool


@frozen(kw_only=True)
class SessionRewindEvent:
    """The workspace's files were put back as they were at ``target_id``: ``restored`` written,
    ``removed`` removed, ``skipped`` left as they were. ``entry_id`` is the ``harness.rewind``
    entry recording it (None: no file changed)."""

    name: ClassVar[str] = "session_rewind"

    session_id: str
    target_id: str | None
    entry_id: str | None
    restored: tuple[str, ...] = field(converter=_strings)
    removed: tuple[str, ...] = field(converter=_strings)
    skipped: tuple[str, ...] = field(converter=_strings)


@frozen(kw_only=True)
class SessionCreatedEvent:
    """A session was created (stored at ``path``; None in memory); ``parent_session`` is its
    header's ``parentSession`` (a nested run's parent, a fork's source), None for none."""

    name: ClassVar[str] = "session_created"

    session_id: str
    path: str | None
    parent_session: str | None = None


@frozen(kw_only=True)
class SessionDeletedEvent:
    """A session was deleted (it was stored at ``path``; None in memory)."""

    name: ClassVar[str] = "session_deleted"

    session_id: str
    path: str | None


# --- settings -------------------------------------------------------------------------------


@frozen(kw_only=True)
class ModelUpdateEvent:
    """The model changed: set by the application (``set``) or read back from a session
    (``restore``). ``previous_*`` are None when there was none."""

    name: ClassVar[str] = "model_update"

    provider: str
    model_id: str
    previous_provider: str | None
    previous_model_id: str | None
    source: Literal["set", "restore"]


@frozen(kw_only=True)
class ThinkingLevelUpdateEvent:
    """The thinking level changed (``off``, ``minimal``, ... ``max``); see :class:`ModelUpdateEvent`
    for ``source``."""

    name: ClassVar[str] = "thinking_level_update"

    level: str
    previous_level: str | None
    source: Literal["set", "restore"]


@frozen(kw_only=True)
class ToolsUpdateEvent:
    """The tools changed: every known tool and the active ones, now and before, by name."""

    name: ClassVar[str] = "tools_update"

    tool_names: tuple[str, ...] = field(converter=_strings)
    previous_tool_names: tuple[str, ...] = field(converter=_strings)
    active_tool_names: tuple[str, ...] = field(converter=_strings)
    previous_active_tool_names: tuple[str, ...] = field(converter=_strings)
    source: Literal["set", "restore"]


@frozen(kw_only=True)
class ResourcesUpdateEvent:
    """The harness's skills, prompt templates or context files changed: ``refresh_skills``,
    ``enable_skills``/``disable_skills``, ``set_resources`` or ``write_skill`` (``source``).

    ``skills`` are every known skill's name after scope precedence, ``disabled`` those turned
    off; ``added``/``updated``/``removed`` are what this change did (by skill name);
    ``context_files`` are paths in system prompt order; ``diagnostics`` are the messages of
    every diagnostic discovery reported.
    """

    name: ClassVar[str] = "resources_update"

    source: Literal["refresh", "enable", "disable", "set", "write"]
    skills: tuple[str, ...] = field(converter=_strings)
    disabled: tuple[str, ...] = field(default=(), converter=_strings)
    added: tuple[str, ...] = field(default=(), converter=_strings)
    updated: tuple[str, ...] = field(default=(), converter=_strings)
    removed: tuple[str, ...] = field(default=(), converter=_strings)
    templates: tuple[str, ...] = field(default=(), converter=_strings)
    context_files: tuple[str, ...] = field(default=(), converter=_strings)
    diagnostics: tuple[str, ...] = field(default=(), converter=_strings)


# --- MCP servers ----------------------------------------------------------------------------


@frozen(kw_only=True)
class McpServerStartEvent:
    """An MCP server is connected and has listed its tools: ``server`` is its configured name,
    ``transport`` how it is reached (``stdio``, ``http``, ``sse``, ``in_process``),
    ``tool_names`` the tools offered (``mcp__<server>__<tool>``), ``restart`` whether it is
    a restart after a failure."""

    name: ClassVar[str] = "mcp_server_start"

    server: str
    transport: str
    tool_names: tuple[str, ...] = field(converter=_strings)
    restart: bool = False


@frozen(kw_only=True)
class McpServerErrorEvent:
    """An MCP server failed: ``phase`` says when (``start``: it could not start or list its
    tools; ``call``: it crashed or timed out during a tool call; ``list``: refreshing its
    tools failed; ``restore``: the session offered its tools before and it is not configured
    or not running now). ``error`` says what happened, naming the server; ``restarts_left``
    how many more restarts are tried (0: it stays down)."""

    name: ClassVar[str] = "mcp_server_error"

    server: str
    phase: Literal["start", "call", "list", "restore"]
    error: str
    restarts_left: int = 0


@frozen(kw_only=True)
class McpServerStopEvent:
    """An MCP server was stopped: ``reason`` is ``shutdown`` (the harness's ``shutdown()``)
    or ``restart`` (stopped after a failure, to start again at its next call)."""

    name: ClassVar[str] = "mcp_server_stop"

    server: str
    reason: Literal["shutdown", "restart"]


# --- other ----------------------------------------------------------------------------------


@frozen(kw_only=True)
class AbortEvent:
    """A run was aborted and is idle; the steering and follow-up texts it dropped, in order."""

    name: ClassVar[str] = "abort"

    cleared_steer: tuple[str, ...] = field(converter=_strings)
    cleared_follow_up: tuple[str, ...] = field(converter=_strings)


@frozen(kw_only=True)
class RetryEvent:
    """A retryable failure; attempt ``attempt`` of ``max_attempts`` starts after ``delay_s``
    seconds. ``error_type`` names the failure (an error ``code`` or class name)."""

    name: ClassVar[str] = "retry"

    attempt: int
    max_attempts: int
    delay_s: float
    error_message: str
    error_type: str


@frozen(kw_only=True)
class ModelFallbackEvent:
    """The primary model failed for good on a transient failure (overloaded, rate-limited,
    server error, dropped connection, timeout: its retries are spent), so this turn is sent
    once to the fallback model. ``error_message``/``error_type`` are the primary's last
    failure; the reply that follows names the fallback as its ``provider``/``model``."""

    name: ClassVar[str] = "model_fallback"

    provider: str
    model_id: str
    fallback_provider: str
    fallback_model_id: str
    error_message: str
    error_type: str


@frozen(kw_only=True)
class LimitReachedEvent:
    """A run limit was reached (``AgentHarness(max_turns=..., max_tokens=..., max_cost_usd=...)``
    or the same arguments of ``prompt()``): the run ends after the current turn, with
    ``stop_reason`` ``max_turns``, ``max_tokens`` or ``max_cost`` on the reply and in the
    session. ``limit`` is the limit's value (turns, tokens, or US dollars), ``used`` what the
    run had used when it was checked (a sub-agent's usage counts in its parent's); ``depth``
    the harness's nesting depth (a sub-agent stops at its parent's limit too)."""

    name: ClassVar[str] = "limit_reached"

    stop_reason: Literal["max_turns", "max_tokens", "max_cost"]
    limit: float
    used: float
    session_id: str
    depth: int = 0


@frozen(kw_only=True)
class HandlerErrorEvent:
    """A receiver of ``event_name`` raised ``error`` (or returned a result of the wrong type).

    ``receiver`` names it (``module.qualname``). Sent by the same sender as the failed event.
    """

    name: ClassVar[str] = "handler_error"

    event_name: str
    receiver: str
    error: BaseException


# --- Claude Code's lifecycle hook points -----------------------------------------------------


@frozen(kw_only=True)
class SessionStartEvent:
    """Hook, sent when a harness starts working in its session (Claude Code's ``SessionStart``).
    Receivers may return ``AddContext``; every receiver's text is collected.

    ``source``: ``startup`` (the session has no entries yet), ``resume`` (it has),
    ``fork`` (it has, and its header names a parent session), sent before the harness's first
    ``prompt()``; ``compact`` after a compaction. (``clear``, Claude Code's fifth source, is
    never sent: the harness has no clear operation.) The collected texts are added as
    ``custom`` messages (``customType`` ``hook_context``) before the next prompt's own message,
    or, after a compaction inside a run, before the next turn's.
    """

    name: ClassVar[str] = "session_start"

    session_id: str
    source: Literal["startup", "resume", "fork", "compact", "clear"]


@frozen(kw_only=True)
class UserPromptSubmitEvent:
    """Hook, sent when ``prompt()`` is given a prompt, before anything is written to the
    session (Claude Code's ``UserPromptSubmit``). Receivers may return ``Block`` (the prompt is
    refused: ``prompt()`` raises ``PromptBlockedError`` and nothing is written) or
    ``AddContext`` (text added after the prompt). Fails closed: a receiver that raises refuses
    the prompt.

    ``message`` is the prompt as it would be written (a ``/template`` already expanded).
    """

    name: ClassVar[str] = "user_prompt_submit"

    session_id: str
    message: UserMessage


@frozen(kw_only=True)
class StopEvent:
    """Hook, sent when the model ends a run: its last reply asks for no tool call and no
    queued message is left (Claude Code's ``Stop``). Receivers may return ``Continue``: the
    reason is appended as a user message and the run goes on for another turn, at most
    ``AgentHarness(max_stop_continues=...)`` times per run.

    ``message`` is the reply the run would end with; ``continues`` how many times stop hooks
    continued this run so far, and ``stop_hook_active`` whether that is more than zero
    (Claude Code's field: a hook that sees it True should usually let the run stop).
    """

    name: ClassVar[str] = "stop"

    session_id: str
    message: AssistantMessage
    stop_hook_active: bool
    continues: int


@frozen(kw_only=True)
class SubagentStopEvent:
    """Hook, :class:`StopEvent` for a nested run (a harness of ``depth`` > 0: a sub-agent the
    ``task`` tool started, a skill run): Claude Code's ``SubagentStop``. The same results and
    limit apply.

    ``session_id`` is the nested run's own (child) session; ``parent_session_id`` the session
    of the harness that started it (None when unknown, e.g. a harness made with ``depth=1``
    by hand); ``agent_type`` the agent definition's name for a sub-agent (Claude Code's
    field), None for a skill run.
    """

    name: ClassVar[str] = "subagent_stop"

    session_id: str
    message: AssistantMessage
    stop_hook_active: bool
    continues: int
    depth: int
    parent_session_id: str | None = None
    agent_type: str | None = None


@frozen(kw_only=True)
class SessionEndEvent:
    """A harness stops working in its session (``AgentHarness.shutdown``; Claude Code's
    ``SessionEnd``), sent only when ``session_start`` was. ``reason``: what ended it, as the
    caller says (Claude Code's ``clear``, ``logout``, ``prompt_input_exit``, ``other``)."""

    name: ClassVar[str] = "session_end"

    session_id: str
    reason: str


@frozen(kw_only=True)
class NotificationEvent:
    """The harness waits for a person (Claude Code's ``Notification``), for desktop
    notifications: ``permission_prompt`` when a tool call's approval is still pending after
    ``AgentHarness(notification_delay_s=...)``; ``idle_prompt`` when an interactive front end
    (``harness chat``) has waited for input that long. ``message`` says it in one sentence."""

    name: ClassVar[str] = "notification"

    session_id: str
    message: str
    notification_type: Literal["permission_prompt", "idle_prompt"]


@frozen(kw_only=True)
class SystemMessageEvent:
    """A hook has something to tell the user, not the model: a command hook's
    ``systemMessage``, or what a hook whose event cannot block wrote to stderr when it exited
    with 2 (Claude Code shows both to the user). ``hook`` names the hook and where it was
    configured; ``event_name`` is the signal it answered."""

    name: ClassVar[str] = "system_message"

    message: str
    hook: str
    event_name: str


HookEvent: TypeAlias = (
    BeforeAgentStartEvent
    | ContextEvent
    | BeforeProviderRequestEvent
    | BeforeProviderPayloadEvent
    | ToolCallEvent
    | ToolResultEvent
    | SessionBeforeCompactEvent
    | SessionBeforeTreeEvent
    | SessionBeforeForkEvent
    | SessionStartEvent
    | UserPromptSubmitEvent
    | StopEvent
    | SubagentStopEvent
    | SessionBeforeRewindEvent
)
"""Events whose receivers may return a result; each has its own ``emit_*`` function."""

ObserverEvent: TypeAlias = (
    AgentStartEvent
    | AgentEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | AfterProviderResponseEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent
    | PermissionRequestEvent
    | PermissionDecisionEvent
    | SavePointEvent
    | QueueUpdateEvent
    | SettledEvent
    | SessionCompactEvent
    | SessionTreeEvent
    | SessionForkEvent
    | SessionRewindEvent
    | SessionCreatedEvent
    | SessionDeletedEvent
    | ModelUpdateEvent
    | ThinkingLevelUpdateEvent
    | ToolsUpdateEvent
    | ResourcesUpdateEvent
    | McpServerStartEvent
    | McpServerErrorEvent
    | McpServerStopEvent
    | AbortEvent
    | RetryEvent
    | ModelFallbackEvent
    | LimitReachedEvent
    | HandlerErrorEvent
    | SessionEndEvent
    | NotificationEvent
    | SystemMessageEvent
)
"""Events sent with :func:`hooks.notify`; receivers' return values are ignored."""

Event: TypeAlias = ObserverEvent | HookEvent
"""Every event class of the bus."""
