"""The turn loop of one run: stream a reply, run its tool calls, repeat until the model stops.

Kept short on purpose (smolagents' ``_run_stream`` is the model): one ``while`` over turns, every
message persisted as it ends, and explicit stop conditions. Model mistakes (an unknown tool, bad
arguments, a blocked call) become error tool results the model can act on; our own bugs
propagate. Per-run state lives in :class:`Run`; what may change between turns (model, tools,
queues) is read from the :class:`RunHost` (the harness) at each turn boundary.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import orjson
from attrs import define, evolve, field

from hooks import (
    AfterProviderResponseEvent,
    AgentEndEvent,
    AgentStartEvent,
    AssistantMessage,
    BeforeProviderPayloadEvent,
    BeforeProviderRequestEvent,
    ContextEvent,
    JSONValue,
    LazyMessages,
    LimitReachedEvent,
    Message,
    MessageEndEvent,
    MessageSlot,
    MessageStartEvent,
    MessageUpdateEvent,
    ModelFallbackEvent,
    RetryEvent,
    SavePointEvent,
    StopEvent,
    StreamOptions,
    StreamOptionsPatch,
    SubagentStopEvent,
    ToolCall,
    ToolCallEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolResultEvent,
    ToolResultMessage,
    TurnEndEvent,
    TurnStartEvent,
    UnknownContent,
    UserMessage,
    emit_before_provider_payload,
    emit_before_provider_request,
    emit_context,
    emit_stop,
    emit_tool_call,
    emit_tool_result,
    has_receivers,
    notify,
    now_ms,
)
from repos import (
    MAX_NESTING,
    Session,
    decode_message,
    dumps_line,
    encode_message,
    nested_deeper,
    normalized,
    slots_of,
    without_surrogates,
)

from ._agents.approvals import DeferredCall, PendingApproval, Resolution, record_pending
from ._agents.limits import Budget
from ._agents.output import OutputCheck
from ._agents.reply import RunStopReason
from ._agents.stops import record_stop
from ._checkpoints.capture import Checkpoints
from ._convert import to_llm_messages
from ._errors import ProviderError
from ._permissions.decisions import Defer
from ._permissions.gate import Gate
from ._providers.base import (
    LlmMessage,
    Model,
    ModelRequest,
    StreamDelta,
    StreamDone,
    StreamError,
    StreamResponse,
    StreamStart,
    ThinkingLevel,
    ToolSpec,
)
from ._tools.base import Tool, ToolResult, ToolRun, validate_input
from ._tools.sandbox import Sandbox
from ._validate import check_request

_log = logging.getLogger("harness")

M = TypeVar("M", bound=Message)

__all__ = [
    "Resumed",
    "ResumedCall",
    "Run",
    "RunHost",
    "ToolCallRef",
    "TurnSettings",
    "current_tool_call",
    "run_agent",
    "valid_unicode",
]


@define(frozen=True, kw_only=True)
class ToolCallRef:
    """The tool call a piece of code runs inside: the harness running it and the call's id."""

    harness: object
    tool_call_id: str


_TOOL_CALL: ContextVar[ToolCallRef | None] = ContextVar("harness_tool_call", default=None)


def current_tool_call() -> ToolCallRef | None:
    """The tool call whose ``execute`` is running in this task (and the tasks it starts), or
    None. A sub-run a tool starts (``run_skill``, a sub-agent) runs inside it, so tracing can
    hang the sub-run's spans under that call's span (docs/observability.md)."""
    return _TOOL_CALL.get()


LENGTH_STOP_TEXT = (
    "Not executed: the reply hit the output token limit, so this call's arguments may be cut off."
)
ABORTED_TOOL_TEXT = "Tool execution was aborted."
INTERRUPTED_TEXT = (
    "Not run: this call was approved, then claimed to run by a process that stopped before "
    "its result was recorded (killed?), or by another process resuming at the same time. It "
    "may have done part or all of its work: check before calling it again."
)


@define(frozen=True, kw_only=True)
class TurnSettings:
    """What one request uses, read from the harness at the start of each turn (so a
    ``set_model`` or ``set_active_tools`` during a run applies from the next request)."""

    model: Model
    tools: Mapping[str, Tool]
    system_prompt: str
    thinking_level: ThinkingLevel
    options: StreamOptions
    sequential: bool
    tool_context: Any
    retry_base_delay_s: float
    fallback_model: Model | None = None
    """Where a turn goes once ``model``'s retries are spent on a transient failure."""


class RunHost(Protocol):
    """What the loop asks of its harness between turns."""

    def turn_settings(self) -> TurnSettings: ...

    async def prepare_turn(self) -> None: ...

    async def drain_steering(self) -> list[UserMessage]: ...

    async def drain_follow_up(self) -> list[UserMessage]: ...

    def drain_context(self) -> list[Message]: ...

    def flush_pending_writes(self) -> bool: ...

    def run_ending(self) -> None: ...

    async def compact_if_needed(self) -> None: ...

    async def compact_for_overflow(self) -> bool: ...

    def overflow_error(self) -> Exception: ...


@define(kw_only=True)
class Run:
    """Everything one ``prompt()`` accumulates. ``sender`` is the harness (the blinker sender of
    every event); ``system_prompt`` is the run's, after ``before_agent_start`` hooks (None: use the
    harness's at each turn)."""

    sender: object
    host: RunHost
    session: Session
    cwd: Path
    gate: Gate
    """Asks the supervisor about every call the ``tool_call`` hooks let through."""
    system_prompt: str | None = None
    model: Model | None = None
    """``prompt(model=...)``: this run's model instead of the harness's (None: the harness's)."""
    thinking_level: ThinkingLevel | None = None
    metadata: Mapping[str, JSONValue] = field(factory=dict)
    """``prompt(metadata=...)``: merged into every request's ``StreamOptions.metadata``."""
    added: list[Message] = field(factory=list)
    turn_index: int = 0
    last_reply: AssistantMessage | None = None
    provider_error: ProviderError | None = None
    """The failure that ended the run with an error reply (not retryable, or retries spent)."""
    validated: tuple[MessageSlot, ...] = ()
    """The last request's messages, all checked: the next request only checks what follows
    them when it starts with the same message slots."""
    converted: dict[int, tuple[MessageSlot, MessageSlot | None]] = field(factory=dict)
    """Provider messages made from context-only messages, by the source slot's id (the source
    is kept alive beside it), so a request's messages stay the same slots."""
    checkpoints: Checkpoints | None = None
    """Records what each tool call changes in the workspace (None: checkpoints are off)."""
    reply_entry_id: str | None = None
    """The entry of the last assistant reply persisted: the entry holding its tool calls."""
    unannounced: list[tuple[Message, str, bool]] = field(factory=list)
    """Messages persisted while being cancelled, with their entry id and whether their tool
    execution still needs its end event: the harness announces them once it has absorbed its
    own ``abort()`` (no event could be sent while cancelling)."""
    depth: int = 0
    """0 for a top-level harness: the model's stop is ``stop``; deeper, ``subagent_stop``."""
    parent_session_id: str | None = None
    """A nested run's parent session (for ``subagent_stop``)."""
    agent_type: str | None = None
    """A sub-agent's name (for ``subagent_stop``); None for a skill run or the top level."""
    max_stop_continues: int = 0
    """How many times stop hooks may continue this run (``AgentHarness(max_stop_continues)``)."""
    stop_continues: int = 0
    end_reason: str | None = None
    """Set by ``AgentHarness.end_run`` (a hook's ``continue: false``) or the stop-hook limit:
    the run ends at the next turn boundary, and ``agent_end`` says why."""
    budget: Budget | None = None
    """Counts turns, tokens and cost against the run's limits (None: no limit, no parent's)."""
    output: OutputCheck | None = None
    """``prompt(output_schema=...)``: checks the final answer, offers ``respond`` if needed."""
    stop_reason: RunStopReason | None = None
    """Why the run stopped before the model was done (a limit, ``awaiting_approval``); None:
    the last reply's own stop reason stands."""
    pending: tuple[PendingApproval, ...] = ()
    """The calls that wait for a person when the run stopped ``awaiting_approval``."""

    def overridden(self, settings: TurnSettings) -> TurnSettings:
        """``settings`` with this run's own model, thinking level and metadata (one call's
        overrides: the harness's settings are left as they are), and the ``respond`` tool of
        a structured output that needs it."""
        changes: dict[str, Any] = {}
        if self.output is not None and (extra := self.output.tools()):
            changes["tools"] = {**settings.tools, **extra}
        if self.model is not None:
            changes["model"] = self.model
        if self.thinking_level is not None:
            changes["thinking_level"] = self.thinking_level
        if self.metadata:
            changes["options"] = settings.options.patched(
                StreamOptionsPatch(metadata=dict(self.metadata))
            )
        return evolve(settings, **changes) if changes else settings

    def persist_aborted(self, message: Message, *, execution_ended: bool = True) -> None:
        """Persist ``message`` synchronously during a cancellation, to be announced later."""
        entry = self.session.append_message(message)
        self.added.append(message)
        self.unannounced.append((message, entry.id, execution_ended))
        if isinstance(message, AssistantMessage):
            self.last_reply = message


@define(frozen=True, kw_only=True)
class ResumedCall:
    """A deferred call a person answered, to run (or refuse) as its turn goes on."""

    call: ToolCall
    approval_id: str
    input: Mapping[str, JSONValue]
    """The input the supervisor was shown when it deferred (signed): what runs."""
    resolution: Resolution
    reason: str | None
    started: bool
    """It began to run in an earlier process that stopped before its result: never rerun."""


@define(frozen=True, kw_only=True)
class Resumed:
    """Where a run stopped ``awaiting_approval`` picks up: the reply whose calls waited,
    those calls answered, and how to claim one before it runs (exactly once)."""

    reply: AssistantMessage
    calls: tuple[ResumedCall, ...]
    claim: Callable[[str], bool]


async def run_agent(
    run: Run, prompt: Sequence[Message], *, resumed: Resumed | None = None
) -> AssistantMessage:
    """Run until the model stops and no queued message is left; return the last reply.

    With ``resumed``, the run goes on from a turn whose calls waited for approval: those
    calls run (or get their refusal) first, then the loop continues as if it never stopped.

    Raises ``asyncio.CancelledError`` when cancelled, after persisting what was in flight (the
    partial reply as ``aborted``, in-flight tool calls as aborted error results).
    """
    await notify(run.sender, AgentStartEvent())
    await notify(run.sender, TurnStartEvent(turn_index=run.turn_index))
    for message in prompt:
        await _emit_message(run, message)
    while True:
        await run.host.prepare_turn()  # e.g. MCP servers whose tools changed are listed again
        settings = run.overridden(run.host.turn_settings())
        context = (
            settings.tool_context() if callable(settings.tool_context) else settings.tool_context
        )
        # A yield point: an abort() from inside the run (a receiver, a tool) lands here, before
        # another request starts; sync receivers alone never give the loop a chance to cancel.
        await asyncio.sleep(0)
        results: list[ToolResultMessage] = []
        terminate = False
        deferred: list[_Pending] = []
        if resumed is not None:
            reply = run.last_reply = resumed.reply
            results, terminate = await _resume_tools(run, settings, resumed, context)
            resumed = None
        else:
            # Checked before every request, between turns of one run too (pi #6879).
            await run.host.compact_if_needed()
            reply = await _request(run, settings)
            if run.budget is not None:
                run.budget.count(reply)
            if reply.tool_calls and reply.stop_reason not in ("error", "aborted"):
                results, terminate, deferred = await _run_tools(run, settings, reply, context)
        queued = await _end_turn(run, reply, results, terminate, deferred)
        if queued is None:
            break
        run.turn_index += 1
        await notify(run.sender, TurnStartEvent(turn_index=run.turn_index))
        for message in [*run.host.drain_context(), *queued]:
            await _emit_message(run, message)
    run.host.run_ending()
    await notify(run.sender, AgentEndEvent(messages=tuple(run.added), end_reason=run.end_reason))
    return reply


async def _end_turn(
    run: Run,
    reply: AssistantMessage,
    results: list[ToolResultMessage],
    terminate: bool,
    deferred: list[_Pending],
) -> list[Message] | None:
    """The turn's end events, then what the next turn starts with (None: the run ends):
    queued steering, tool results (the model goes on), follow-ups, a stop hook's ``Continue``,
    a correction of the structured output; unless calls wait for approval or a run limit is
    reached."""
    await notify(
        run.sender,
        TurnEndEvent(turn_index=run.turn_index, message=reply, tool_results=tuple(results)),
    )
    await _save_point(run)
    if deferred:
        _await_approval(run, deferred)
        return None
    if reply.stop_reason in ("error", "aborted") or terminate or run.end_reason is not None:
        return None
    if run.output is not None and run.output.after_tools(reply, results):
        # The respond tool gave the answer (or its last try failed: prompt() raises).
        run.stop_reason = "stop"
        return None
    queued: list[Message] = [*await run.host.drain_steering()]
    if not queued and not results:
        queued = [*await run.host.drain_follow_up()]
    if not queued and not results:
        queued = await _stop_hooks(run, reply)
        if not queued and run.output is not None:
            queued = run.output.on_stop(reply)
        if not queued:
            return None
    if await _limit_reached(run):
        return None
    return queued


def _await_approval(run: Run, deferred: list[_Pending]) -> None:
    """Stop the run ``awaiting_approval``: the deferred calls go into a signed pending entry,
    with what the run needs to go on (its counters, limits and output schema), then the
    stop entry."""
    state: dict[str, JSONValue] = {"turnIndex": run.turn_index}
    if run.budget is not None:
        state.update(run.budget.to_json())
        state["limits"] = run.budget.limits.to_json()
    if run.output is not None:
        state["output"] = {
            "schema": dict(run.output.spec.schema),
            "retries": run.output.spec.retries,
            "attempts": run.output.attempts,
        }
    run.pending = record_pending(
        run.session,
        run.reply_entry_id,
        [
            DeferredCall(
                tool_call_id=p.call.id,
                tool_name=p.call.name,
                input=p.input,
                operation_key=p.operation_key,
                reason=None if p.deferred is None else p.deferred.reason,
            )
            for p in deferred
        ],
        state,
        run.gate.signer,
    )
    run.stop_reason = "awaiting_approval"
    record_stop(
        run.session,
        "awaiting_approval",
        run.budget,
        extra={"approvals": [a.id for a in run.pending]},
    )


async def _limit_reached(run: Run) -> bool:
    """Before another turn: whether a run limit (this run's or a parent's) is reached; if so
    the stop is recorded and announced, and the run ends."""
    hit = None if run.budget is None else run.budget.exceeded()
    if hit is None:
        return False
    run.stop_reason = hit.stop_reason
    record_stop(run.session, hit.stop_reason, run.budget, hit=hit)
    await notify(
        run.sender,
        LimitReachedEvent(
            stop_reason=hit.stop_reason,
            limit=hit.limit,
            used=hit.used,
            session_id=run.session.id,
            depth=run.depth,
        ),
    )
    return True


async def _stop_hooks(run: Run, reply: AssistantMessage) -> list[Message]:
    """The model ended the run: ask the ``stop`` (or ``subagent_stop``) hooks. A ``Continue``
    becomes the user message of another turn, at most ``max_stop_continues`` times per run;
    past that the run ends, and ``end_reason`` says so."""
    active = run.stop_continues > 0
    event: StopEvent | SubagentStopEvent = (
        StopEvent(
            session_id=run.session.id,
            message=reply,
            stop_hook_active=active,
            continues=run.stop_continues,
        )
        if run.depth == 0
        else SubagentStopEvent(
            session_id=run.session.id,
            message=reply,
            stop_hook_active=active,
            continues=run.stop_continues,
            depth=run.depth,
            parent_session_id=run.parent_session_id,
            agent_type=run.agent_type,
        )
    )
    outcome = await emit_stop(run.sender, event)
    if outcome.reason is None or run.end_reason is not None:  # a hook's end_run() wins
        return []
    if run.stop_continues >= run.max_stop_continues:
        run.end_reason = (
            f"the {event.name} hooks asked to continue the run again after "
            f"{run.stop_continues} continues, the most AgentHarness(max_stop_continues="
            f"{run.max_stop_continues}) allows; the run ends here (last reason: "
            f"{outcome.reason})"
        )
        return []
    run.stop_continues += 1
    return [UserMessage(content=outcome.reason)]


async def _save_point(run: Run) -> None:
    had_pending = run.host.flush_pending_writes()
    run.session.save_point()
    await notify(run.sender, SavePointEvent(had_pending_writes=had_pending))


async def _emit_message(run: Run, message: M, *, started: bool = False) -> M:
    """message_start (unless the stream already sent it), persist, message_end; returns the
    message as it goes on (lone surrogates replaced, see :func:`valid_unicode`)."""
    message = valid_unicode(message)
    if not started:
        await notify(run.sender, MessageStartEvent(message=message))
    entry = run.session.append_message(message)
    run.added.append(message)
    if isinstance(message, AssistantMessage):
        run.reply_entry_id = entry.id
    await notify(run.sender, MessageEndEvent(message=message, entry_id=entry.id))
    return message


async def _request(
    run: Run, settings: TurnSettings, *, after_overflow: bool = False, fallen_back: bool = False
) -> AssistantMessage:
    """One model request with the request hooks, retried while the failure is retryable; after
    a context overflow, compacted and sent once more (``after_overflow``); once the retries of
    a transient failure are spent, sent to the fallback model (``fallen_back``), once."""
    model = settings.model
    context = run.session.build_context().messages  # normalised by build_context
    messages = await emit_context(
        run.sender, ContextEvent(messages=context, turn_index=run.turn_index)
    )
    options = await emit_before_provider_request(
        run.sender,
        BeforeProviderRequestEvent(
            provider=model.provider,
            model_id=model.id,
            session_id=run.session.id,
            options=settings.options,
        ),
    )
    # A context hook may return anything: normalise its messages again (build_context's are
    # already), then refuse to send a broken request.
    if messages is not context:
        messages = normalized(messages, reuse=context)
    llm_messages = _to_llm(run, messages)
    prefix, slots = run.validated, llm_messages.slots
    same = len(slots) >= len(prefix) and all(a is b for a, b in zip(prefix, slots, strict=False))
    check_request(llm_messages, valid_prefix=len(prefix) if same else 0)
    run.validated = slots
    system_prompt = settings.system_prompt if run.system_prompt is None else run.system_prompt
    request = ModelRequest(
        system_prompt=system_prompt,
        messages=llm_messages,
        tools=[
            ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
            for t in settings.tools.values()
        ],
        thinking_level=settings.thinking_level,
        session_id=run.session.id,
        options=options,
        output_schema=None if run.output is None else run.output.request_schema,
    )
    payload: Mapping[str, JSONValue] | None = None
    if has_receivers(BeforeProviderPayloadEvent, run.sender):  # building a body is not free
        payload = await emit_before_provider_payload(
            run.sender,
            BeforeProviderPayloadEvent(
                provider=model.provider, model_id=model.id, payload=model.build_payload(request)
            ),
        )
    max_attempts = options.max_retries + 1
    attempt = 0
    while True:
        attempt += 1
        reply, error = await _stream_once(run, model, request, payload)
        reply = _unique_call_ids(_within_nesting(reply))
        if error is not None and error.error_type == "context_overflow":
            # Compact once and retry once, never a loop (pi #7020 lost the answer here).
            await notify(run.sender, MessageEndEvent(message=reply, entry_id=None))
            if after_overflow or not await run.host.compact_for_overflow():
                raise run.host.overflow_error()
            return await _request(run, settings, after_overflow=True, fallen_back=fallen_back)
        delay = _retry_delay(error, attempt, max_attempts, options, settings.retry_base_delay_s)
        fallback = settings.fallback_model
        if (
            error is not None
            and delay is None
            and error.retryable
            and fallback is not None
            and fallback is not model
            and not fallen_back
        ):
            # The primary is down (overloaded, 5xx, unreachable) for longer than its retries
            # waited: this turn goes to the fallback; the failed attempt is not persisted.
            await notify(run.sender, MessageEndEvent(message=reply, entry_id=None))
            await notify(
                run.sender,
                ModelFallbackEvent(
                    provider=model.provider,
                    model_id=model.id,
                    fallback_provider=fallback.provider,
                    fallback_model_id=fallback.id,
                    error_message=error.message,
                    error_type=error.error_type,
                ),
            )
            return await _request(
                run,
                evolve(settings, model=fallback),
                after_overflow=after_overflow,
                fallen_back=True,
            )
        if error is None or delay is None:
            reply = await _emit_message(run, reply, started=True)
            run.last_reply = reply
            run.provider_error = error
            return reply
        # A failed attempt is not a finished turn: its partial reply is dropped, not persisted.
        await notify(run.sender, MessageEndEvent(message=reply, entry_id=None))
        await notify(
            run.sender,
            RetryEvent(
                attempt=attempt,
                max_attempts=max_attempts,
                delay_s=delay,
                error_message=error.message,
                error_type=error.error_type,
            ),
        )
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            run.persist_aborted(
                evolve(reply, stop_reason="aborted", error_message="Aborted while waiting to retry")
            )
            raise


def _retry_delay(
    error: ProviderError | None,
    attempt: int,
    max_attempts: int,
    options: StreamOptions,
    base_delay_s: float,
) -> float | None:
    """Seconds to wait before the next attempt, or None to stop (exponential backoff; a server's
    ``retry-after`` wins, and one longer than ``max_retry_delay_s`` ends the retries)."""
    if error is None or not error.retryable or attempt >= max_attempts:
        return None
    if error.retry_after_s is not None:
        return error.retry_after_s if error.retry_after_s <= options.max_retry_delay_s else None
    return min(base_delay_s * 2.0 ** (attempt - 1), options.max_retry_delay_s)


async def _stream_once(
    run: Run, model: Model, request: ModelRequest, payload: Mapping[str, JSONValue] | None
) -> tuple[AssistantMessage, ProviderError | None]:
    partial: AssistantMessage | None = None
    try:
        async for event in model.stream(request, payload=payload):
            if isinstance(event, StreamResponse):
                await notify(
                    run.sender,
                    AfterProviderResponseEvent(status=event.status, headers=event.headers),
                )
            elif isinstance(event, StreamStart):
                partial = event.partial
                await notify(run.sender, MessageStartEvent(message=partial))
            elif isinstance(event, StreamDelta):
                partial = event.partial
                if has_receivers(MessageUpdateEvent, run.sender):
                    await notify(
                        run.sender,
                        MessageUpdateEvent(
                            message=partial,
                            kind=event.kind,
                            content_index=event.content_index,
                            delta=event.delta,
                        ),
                    )
            elif isinstance(event, StreamDone):
                return event.message, None
            elif isinstance(event, StreamError):
                return event.message, event.error
    except asyncio.CancelledError:
        # Persist what arrived, in one synchronous append, then let the cancellation go on.
        run.persist_aborted(
            evolve(
                partial or _empty_reply(model),
                stop_reason="aborted",
                error_message="Request was aborted",
                timestamp=now_ms(),
            )
        )
        raise
    failed = evolve(
        partial or _empty_reply(model),
        stop_reason="error",
        error_message="the model's stream ended without a final event",
        timestamp=now_ms(),
    )
    if partial is None:
        await notify(run.sender, MessageStartEvent(message=failed))
    return failed, None


def _empty_reply(model: Model) -> AssistantMessage:
    return AssistantMessage(api=model.api, provider=model.provider, model=model.id)


@define
class _Pending:
    """One tool call on its way to a result."""

    call: ToolCall
    tool: Tool | None
    input: Mapping[str, JSONValue]
    error: str | None = None
    patched: bool = False
    confined: bool = True
    approved_path: str | None = None
    hidden: Callable[[str], bool] | None = None
    sandbox: Sandbox | None = None
    result: ToolResultMessage | None = None
    terminate: bool = False
    fatal: BaseException | None = None
    """A ``BaseException`` (``KeyboardInterrupt``, ``SystemExit``, ...) the tool raised: re-raised
    once every call of the batch has its result stored."""
    deferred: Defer | None = None
    """The supervisor deferred the call: it gets no result now, the run stops waiting."""
    operation_key: str = ""


async def _run_tools(
    run: Run, settings: TurnSettings, reply: AssistantMessage, context: Any
) -> tuple[list[ToolResultMessage], bool, list[_Pending]]:
    """Preflight every call in order, execute the allowed ones (in parallel unless a tool or the
    harness asks for sequential), then persist the results in call order. Calls the
    supervisor deferred get no result: they are returned last."""
    pending: list[_Pending] = []
    try:
        for call in reply.tool_calls:
            await notify(
                run.sender,
                ToolExecutionStartEvent(
                    tool_call_id=call.id, tool_name=call.name, input=_copy(call.arguments)
                ),
            )
            try:
                checked = await _preflight(run, settings, reply, call)
            except Exception as exc:  # one call's failure is its result, never the run's end
                _log.error("checking tool call %s failed", call.id, exc_info=exc)
                checked = _Pending(
                    call,
                    settings.tools.get(call.name),
                    call.arguments,
                    error=f"The call could not be checked, so it did not run: "
                    f"{type(exc).__name__}: {exc}",
                )
            pending.append(checked)
    except asyncio.CancelledError:
        _persist_aborted_results(run, reply.tool_calls, pending)
        raise
    deferred = [p for p in pending if p.deferred is not None]
    runnable = [p for p in pending if p.deferred is None]
    results, terminate = await _finish_batch(run, settings, reply.tool_calls, runnable, context)
    return results, terminate, deferred


async def _resume_tools(
    run: Run, settings: TurnSettings, resumed: Resumed, context: Any
) -> tuple[list[ToolResultMessage], bool]:
    """The answered calls of a resumed run: each decided again by the supervisor with the
    person's answer (deny rules still win), claimed, then run; one that started in an earlier
    process, or was claimed by another, is not run (its result says so)."""
    pending: list[_Pending] = []
    calls = [r.call for r in resumed.calls]
    try:
        for r in resumed.calls:
            await notify(
                run.sender,
                ToolExecutionStartEvent(
                    tool_call_id=r.call.id, tool_name=r.call.name, input=_copy(r.input)
                ),
            )
            tool = settings.tools.get(r.call.name)
            if r.started:
                pending.append(_Pending(r.call, tool, r.input, error=INTERRUPTED_TEXT))
                continue
            if tool is None:
                known = ", ".join(sorted(settings.tools)) or "none"
                error = f"unknown tool {r.call.name!r} (tools: {known})"
                pending.append(_Pending(r.call, None, r.input, error=error))
                continue
            verdict = await run.gate.check(
                r.call, tool, r.input, resolution=r.resolution, resolution_reason=r.reason
            )
            p = _Pending(
                r.call,
                tool,
                verdict.input,
                error=verdict.denied,
                confined=not verdict.leaves_cwd,
                approved_path=verdict.approved_path,
                hidden=verdict.hidden,
                sandbox=verdict.sandbox,
            )
            if p.error is None and not resumed.claim(r.approval_id):
                p.error = INTERRUPTED_TEXT
            pending.append(p)
    except asyncio.CancelledError:
        _persist_aborted_results(run, calls, pending)
        raise
    return await _finish_batch(run, settings, calls, pending, context)


async def _finish_batch(
    run: Run,
    settings: TurnSettings,
    calls: Sequence[ToolCall],
    pending: list[_Pending],
    context: Any,
) -> tuple[list[ToolResultMessage], bool]:
    """Execute the preflighted calls, then persist their results in order; ``calls`` are
    those that must have a result if the batch is cancelled."""
    try:
        await _execute_batch(run, settings, pending, context)
    except asyncio.CancelledError:
        _persist_aborted_results(run, calls, pending)
        raise

    results: list[ToolResultMessage] = []
    for p in pending:
        if p.result is None:  # _finish always sets it; guards a broken invariant loudly
            raise RuntimeError(f"tool call {p.call.id} finished without a result")
        results.append(p.result)
    # The results are stored together, in one transaction of the session's store (its lock
    # and checks paid once), before their events: a receiver cancelled mid-way leaves every
    # call with its result line.
    entries = run.session.append_messages(results)
    run.added.extend(results)
    for result, entry in zip(results, entries, strict=True):
        await notify(run.sender, MessageStartEvent(message=result))
        await notify(run.sender, MessageEndEvent(message=result, entry_id=entry.id))
    fatal = next((p.fatal for p in pending if p.fatal is not None), None)
    if fatal is not None:
        raise fatal  # every call has its result line now
    return results, bool(pending) and all(p.terminate for p in pending)


async def _execute_batch(
    run: Run, settings: TurnSettings, pending: list[_Pending], context: Any
) -> None:
    """Run the preflighted calls, in parallel unless a tool or the harness asks for sequential.

    A tool that raises a ``BaseException`` stops the batch: calls not started yet (sequential)
    or still running (parallel, cancelled) get an error result saying so, and the exception is
    re-raised by the caller once every result is stored.
    """
    if settings.sequential or any(p.tool is not None and p.tool.sequential for p in pending):
        for p in pending:
            if not any(q.fatal is not None for q in pending):
                p.terminate = await _finish(run, p, context)
    else:
        tasks: list[asyncio.Task[None]] = []

        async def finish(p: _Pending) -> None:
            p.terminate = await _finish(run, p, context)
            if p.fatal is not None:
                for task in tasks:
                    if task is not asyncio.current_task():
                        task.cancel("a sibling tool raised " + type(p.fatal).__name__)

        async with asyncio.TaskGroup() as group:
            tasks.extend(group.create_task(finish(p)) for p in pending)
    fatal = next((p.fatal for p in pending if p.fatal is not None), None)
    for p in pending:
        if p.result is None and fatal is not None:
            p.result = ToolResultMessage(
                tool_call_id=p.call.id,
                tool_name=p.call.name,
                content=f"Not run to the end: another tool of this batch raised "
                f"{type(fatal).__name__}.",
                is_error=True,
            )
            await notify(
                run.sender,
                ToolExecutionEndEvent(
                    tool_call_id=p.call.id, tool_name=p.call.name, result=p.result, is_error=True
                ),
            )


def _persist_aborted_results(run: Run, calls: Sequence[ToolCall], pending: list[_Pending]) -> None:
    """On cancellation before the batch's results are stored: every call of the batch (the
    reply's, or a resumed run's) gets its result persisted (what finished keeps its result,
    the rest an aborted error), synchronously, so every call in the session has its result."""
    done = {p.call.id: p.result for p in pending if p.result is not None}
    for call in calls:
        finished = done.get(call.id)
        run.persist_aborted(
            finished
            or ToolResultMessage(
                tool_call_id=call.id, tool_name=call.name, content=ABORTED_TOOL_TEXT, is_error=True
            ),
            execution_ended=finished is not None,
        )


_TOO_DEEP = "harnessArgumentsDropped"
"""The extra field a tool call gets when its arguments were too deep to store (see
:func:`_within_nesting`); the call then fails with that text."""
_ARGUMENT_NESTING = MAX_NESTING - 4  # a call's arguments sit at level 5 of its session line


def _unique_call_ids(reply: AssistantMessage) -> AssistantMessage:
    """``reply`` with each tool call's id unique: a model server that sends two calls with
    one id would have both run and only one result recorded, and every later request of the
    session refused as invalid (review 13, finding 16). A repeated id gets ``~2``, ``~3``...
    (the first free one), in the stored reply and so in its result."""
    ids = [b.id for b in reply.content if isinstance(b, ToolCall)]
    if len(ids) == len(set(ids)):
        return reply
    taken = set(ids)
    seen: set[str] = set()
    content = []
    for block in reply.content:
        if isinstance(block, ToolCall):
            if block.id in seen:
                n = 2
                while f"{block.id}~{n}" in taken:
                    n += 1
                block = evolve(block, id=f"{block.id}~{n}")
                taken.add(block.id)
            seen.add(block.id)
        content.append(block)
    return evolve(reply, content=tuple(content))


def _within_nesting(reply: AssistantMessage) -> AssistantMessage:
    """``reply`` with every part a session line cannot hold replaced, so it can be stored:
    model output is untrusted, and an unstorable reply must cost its calls, never the run. A
    part nested past ``repos.MAX_NESTING``, or holding a value the session's JSON cannot
    encode (an integer past 64 bits, which a provider's JSON parser keeps: review 5, finding
    19), is dropped: a tool call keeps its id and name, its arguments become ``{}`` and a
    note; an unknown block keeps only its type."""
    if not any(_unstorable(b) for b in reply.content):
        return reply
    content = []
    for block in reply.content:
        why = _unstorable(block)
        if why is not None and isinstance(block, ToolCall):
            block = evolve(block, arguments={}, extra={_TOO_DEEP: why})
        elif why is not None and isinstance(block, UnknownContent):
            block = UnknownContent(raw={"type": block.type, _TOO_DEEP: why})
        content.append(block)
    return evolve(reply, content=tuple(content))


def _unstorable(block: object) -> str | None:
    """Why a tool call's arguments or an unknown block cannot be stored, or None."""
    if isinstance(block, ToolCall):
        value: object = block.arguments
        what = "the arguments"
    elif isinstance(block, UnknownContent):
        value, what = block.raw, "the block"
    else:
        return None
    if nested_deeper(value, _ARGUMENT_NESTING):
        return f"{what} nested deeper than {_ARGUMENT_NESTING} levels and were dropped"
    try:
        dumps_line({"value": cast(JSONValue, value)})  # what the session's writer will do
    except ValueError as exc:
        return f"{what} held a value a session cannot store ({exc}) and were dropped"
    return None


async def _preflight(
    run: Run, settings: TurnSettings, reply: AssistantMessage, call: ToolCall
) -> _Pending:
    tool = settings.tools.get(call.name)
    if reply.stop_reason == "length":
        return _Pending(call, tool, call.arguments, error=LENGTH_STOP_TEXT)
    if _TOO_DEEP in call.extra:
        return _Pending(call, tool, call.arguments, error=f"Not run: {call.extra[_TOO_DEEP]}.")
    if tool is None:
        known = ", ".join(sorted(settings.tools)) or "none"
        return _Pending(
            call, None, call.arguments, error=f"unknown tool {call.name!r} (tools: {known})"
        )
    invalid = validate_input(tool, call.arguments)
    if invalid is not None:
        return _Pending(call, tool, call.arguments, error=invalid)
    # Receivers get a copy: changing it in place is then a patch like any other (validated
    # and recorded), never a silent edit of the persisted call.
    outcome = await emit_tool_call(
        run.sender,
        ToolCallEvent(
            tool_call_id=call.id,
            tool_name=call.name,
            input=_copy(call.arguments),
            turn_index=run.turn_index,
        ),
    )
    if outcome.blocked:
        return _Pending(call, tool, outcome.input, error=outcome.reason or "Tool call was blocked")
    # A receiver may have changed the input in place, or kept a reference to change it later:
    # from here on the call uses a fresh JSON copy nobody else holds, checked right before the
    # supervisor and the tool see it.
    final, invalid = _final_input(tool, outcome.input)
    patched = final != call.arguments
    if invalid is not None:
        return _Pending(call, tool, final, error=invalid, patched=patched)
    # An abort() a receiver requested lands here, before the call runs: a receiver that awaits
    # nothing real gives the task no other chance to be cancelled.
    await asyncio.sleep(0)
    verdict = await run.gate.check(
        call,
        tool,
        final,
        hook_decision=outcome.permission,
        hook_reason=outcome.permission_reason,
    )
    await asyncio.sleep(0)  # the same for an approver that aborted
    if verdict.deferred is not None:
        return _Pending(
            call,
            tool,
            verdict.input,
            patched=patched,
            deferred=verdict.deferred,
            operation_key=verdict.operation_key,
        )
    # The tool runs with the gate's own copy of exactly what the supervisor was shown.
    return _Pending(
        call,
        tool,
        verdict.input,
        error=verdict.denied,
        patched=patched,
        confined=not verdict.leaves_cwd,
        approved_path=verdict.approved_path,
        hidden=verdict.hidden,
        sandbox=verdict.sandbox,
    )


def _final_input(
    tool: Tool, value: Mapping[str, JSONValue]
) -> tuple[Mapping[str, JSONValue], str | None]:
    """A JSON copy of the input the hooks settled on, and why it cannot run (None: it can)."""
    try:
        copied: dict[str, JSONValue] = orjson.loads(orjson.dumps(value))
    except TypeError as exc:
        return dict(value), f"invalid arguments for {tool.name}: input is not JSON ({exc})"
    return copied, validate_input(tool, copied)


async def _finish(run: Run, p: _Pending, context: Any) -> bool:
    """Execute (when allowed), pass the result through ``tool_result``, emit the end event."""
    ran = p.error is None and p.tool is not None
    if p.error is not None or p.tool is None:
        raw = ToolResult(content=p.error or "tool not run", is_error=True)
    else:
        raw = await _execute(run, p, p.tool, context)
    outcome = await emit_tool_result(
        run.sender,
        ToolResultEvent(
            tool_call_id=p.call.id,
            tool_name=p.call.name,
            input=p.input,
            content=raw.content,
            details=raw.details,
            is_error=raw.is_error,
            turn_index=run.turn_index,
            executed=ran,
        ),
    )
    p.result = _storable(
        ToolResultMessage(
            tool_call_id=p.call.id,
            tool_name=p.call.name,
            content=outcome.content,
            details=outcome.details,
            is_error=outcome.is_error,
            # The input the tool really ran with, when a hook changed it (kept as an extra
            # field, so pi still reads the entry).
            extra={"effectiveInput": dict(p.input)} if p.patched else {},
        )
    )
    await notify(
        run.sender,
        ToolExecutionEndEvent(
            tool_call_id=p.call.id,
            tool_name=p.call.name,
            result=p.result,
            is_error=outcome.is_error,
        ),
    )
    return outcome.terminate


async def _execute(run: Run, p: _Pending, tool: Tool, context: Any) -> ToolResult:
    async def on_update(partial: JSONValue) -> None:
        await notify(
            run.sender,
            ToolExecutionUpdateEvent(tool_call_id=p.call.id, tool_name=tool.name, partial=partial),
        )

    run_info = ToolRun(
        tool_call_id=p.call.id,
        cwd=run.cwd,
        context=context,
        confined=p.confined,
        approved_path=p.approved_path,
        hidden=p.hidden,
        sandbox=p.sandbox,
        on_update=on_update,
    )
    running = _TOOL_CALL.set(ToolCallRef(harness=run.sender, tool_call_id=p.call.id))
    try:
        if run.checkpoints is None:
            value = await tool.execute(p.input, run_info)
        else:
            value = await run.checkpoints.run(
                tool,
                p.input,
                run_info,
                entry_id=run.reply_entry_id,
                execute=lambda: tool.execute(p.input, run_info),
            )
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the run (or this batch) is being cancelled
        # Nobody cancelled this task: the tool's own await was cancelled, which is its failure.
        return ToolResult(
            content=f"The tool failed: an operation inside it was cancelled ({exc or 'no reason'})",
            is_error=True,
        )
    except Exception as exc:  # a failing tool is the model's to handle, not the run's end
        return ToolResult(content=f"{type(exc).__name__}: {exc}", is_error=True)
    except BaseException as exc:  # KeyboardInterrupt, SystemExit, GeneratorExit, ...
        p.fatal = exc
        return ToolResult(content=f"The tool raised {type(exc).__name__}: {exc}", is_error=True)
    finally:
        _TOOL_CALL.reset(running)
    return value if isinstance(value, ToolResult) else ToolResult(content=str(value))


def _copy(value: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """A deep copy of JSON (tool input is JSON by construction)."""
    copied: dict[str, JSONValue] = orjson.loads(orjson.dumps(value))
    return copied


def valid_unicode(message: M) -> M:
    """``message``, or a copy with every lone surrogate replaced by U+FFFD when it holds one (a
    model server's ``"\\ud800"`` escape, a prompt, a file name that is not UTF-8): what the
    session stores, what the tools run with and what the next request sends are one value,
    and no JSON writer downstream meets a string it cannot encode."""
    try:
        orjson.dumps(encode_message(message))
    except (TypeError, orjson.JSONEncodeError) as exc:
        if "surrogates" not in str(exc):
            return message  # not this function's to fix: the append reports it
        try:
            fixed = decode_message(without_surrogates(encode_message(message)))
        except ValueError:  # repos' CodecError: then the append reports it
            return message
        return cast(M, fixed)
    return message


def _storable(result: ToolResultMessage) -> ToolResultMessage:
    """The result if it can be written to the session, else an error result saying why (a
    non-JSON ``details``): a tool must never break the session. Lone surrogates (a file name
    that is not UTF-8) are replaced, not refused."""
    try:
        orjson.dumps(encode_message(result))
    except TypeError as exc:  # orjson.JSONEncodeError included
        fixed = valid_unicode(result) if "surrogates" in str(exc) else result
        if fixed is not result:
            return _storable(fixed)  # whatever else it holds is checked again
        return ToolResultMessage(
            tool_call_id=result.tool_call_id,
            tool_name=result.tool_name,
            content=f"The tool's result could not be stored: {exc}",
            is_error=True,
        )
    return result


_LLM_ROLES = frozenset({"user", "assistant", "toolResult"})


def _to_llm(run: Run, messages: Sequence[Message]) -> LazyMessages[LlmMessage]:
    """``to_llm_messages`` of the messages' slots: user, assistant and tool-result messages
    pass as they are (not built), others are converted, reusing earlier conversions of the
    same slots."""
    out: list[MessageSlot] = []
    for slot in slots_of(messages):
        if slot.role in _LLM_ROLES:
            out.append(slot)
            continue
        hit = run.converted.get(id(slot))
        if hit is None or hit[0] is not slot:
            made = slots_of(to_llm_messages((slot.message,)))
            hit = run.converted[id(slot)] = (slot, made[0] if made else None)
        if hit[1] is not None:
            out.append(hit[1])
    return LazyMessages[LlmMessage](out)
