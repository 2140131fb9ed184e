"""The turn loop of one run: stream a reply, run its tool calls, repeat until the model stops.

Kept short on purpose (smolagents' ``_run_stream`` is the model): one ``while`` over turns, every
message persisted as it ends, and one explicit stop condition. Model mistakes (an unknown tool,
bad arguments, a blocked call) become error tool results the model can act on; our own bugs
propagate. Per-run state lives in :class:`Run`, never on the harness.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import define, evolve, field

from hooks import (
    AgentEndEvent,
    AgentStartEvent,
    AssistantMessage,
    JSONValue,
    Message,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolCall,
    ToolCallEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolResultEvent,
    ToolResultMessage,
    TurnEndEvent,
    TurnStartEvent,
    emit_tool_call,
    emit_tool_result,
    has_receivers,
    notify,
    now_ms,
)
from repos import Session

from ._convert import to_llm_messages
from ._providers.base import (
    Model,
    ModelRequest,
    StreamDelta,
    StreamDone,
    StreamError,
    StreamStart,
    ThinkingLevel,
    ToolSpec,
)
from ._tools.base import Tool, ToolResult, ToolRun, validate_input

__all__ = ["Run", "run_agent"]

LENGTH_STOP_TEXT = (
    "Not executed: the reply hit the output token limit, so this call's arguments may be cut off."
)


@define(kw_only=True)
class Run:
    """Everything one ``prompt()`` needs, snapshotted when it starts.

    ``sender`` is the harness (the blinker sender of every event); ``tool_context`` is a value, or
    a zero-argument callable evaluated once per turn.
    """

    sender: object
    session: Session
    model: Model
    tools: Mapping[str, Tool]
    system_prompt: str
    cwd: Path
    thinking_level: ThinkingLevel = "off"
    tool_context: Any = None
    sequential: bool = False
    added: list[Message] = field(factory=list)
    turn_index: int = 0


async def run_agent(run: Run, prompt: Sequence[Message]) -> AssistantMessage:
    """Run until the model stops; return its last reply (stop reason ``stop``, ``length``,
    ``refusal``, ``error`` or, after cancellation persisted it, never: ``CancelledError``)."""
    await notify(run.sender, AgentStartEvent())
    await notify(run.sender, TurnStartEvent(turn_index=0))
    for message in prompt:
        await _emit_message(run, message)
    while True:
        context = _turn_context(run)
        reply = await _stream_reply(run)
        results: list[ToolResultMessage] = []
        terminate = False
        if reply.tool_calls and reply.stop_reason not in ("error", "aborted"):
            results, terminate = await _run_tools(run, reply, context)
        await notify(
            run.sender,
            TurnEndEvent(turn_index=run.turn_index, message=reply, tool_results=tuple(results)),
        )
        run.session.save_point()
        if not results or terminate:
            break
        run.turn_index += 1
        await notify(run.sender, TurnStartEvent(turn_index=run.turn_index))
    await notify(run.sender, AgentEndEvent(messages=tuple(run.added)))
    return reply


def _turn_context(run: Run) -> Any:
    value = run.tool_context
    return value() if callable(value) else value


async def _emit_message(run: Run, message: Message, *, started: bool = False) -> None:
    """message_start (unless the stream already sent it), persist, message_end."""
    if not started:
        await notify(run.sender, MessageStartEvent(message=message))
    entry = run.session.append_message(message)
    run.added.append(message)
    await notify(run.sender, MessageEndEvent(message=message, entry_id=entry.id))


async def _stream_reply(run: Run) -> AssistantMessage:
    request = ModelRequest(
        system_prompt=run.system_prompt,
        messages=to_llm_messages(run.session.build_context().messages),
        tools=[
            ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
            for t in run.tools.values()
        ],
        thinking_level=run.thinking_level,
        session_id=run.session.id,
    )
    partial: AssistantMessage | None = None
    final: AssistantMessage | None = None
    try:
        async for event in run.model.stream(request):
            if isinstance(event, StreamStart):
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
            elif isinstance(event, StreamDone | StreamError):
                final = event.message
    except asyncio.CancelledError:
        # Persist what arrived, in one synchronous append, then let the cancellation go on.
        base = partial or AssistantMessage(
            api=run.model.api, provider=run.model.provider, model=run.model.id
        )
        aborted = evolve(
            base, stop_reason="aborted", error_message="Request was aborted", timestamp=now_ms()
        )
        run.session.append_message(aborted)
        run.added.append(aborted)
        raise
    if final is None:
        final = evolve(
            partial
            or AssistantMessage(api=run.model.api, provider=run.model.provider, model=run.model.id),
            stop_reason="error",
            error_message="the model's stream ended without a final event",
            timestamp=now_ms(),
        )
    await _emit_message(run, final, started=partial is not None)
    return final


@define
class _Pending:
    """One tool call on its way to a result."""

    call: ToolCall
    tool: Tool | None
    input: Mapping[str, JSONValue]
    error: str | None = None
    patched: bool = False
    result: ToolResultMessage | None = None


async def _run_tools(
    run: Run, reply: AssistantMessage, context: Any
) -> tuple[list[ToolResultMessage], bool]:
    """Preflight every call in order, execute the allowed ones (in parallel unless a tool or the
    harness asks for sequential), then persist the results in call order."""
    pending: list[_Pending] = []
    for call in reply.tool_calls:
        await notify(
            run.sender,
            ToolExecutionStartEvent(
                tool_call_id=call.id, tool_name=call.name, input=call.arguments
            ),
        )
        pending.append(await _preflight(run, reply, call))

    runnable = [p for p in pending if p.error is None]
    terminate_flags: list[bool] = []
    if run.sequential or any(p.tool is not None and p.tool.sequential for p in runnable):
        for p in pending:
            terminate_flags.append(await _finish(run, p, context))
    else:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_finish(run, p, context)) for p in pending]
        terminate_flags = [t.result() for t in tasks]

    results: list[ToolResultMessage] = []
    for p in pending:
        if p.result is None:  # _finish always sets it; guards a broken invariant loudly
            raise RuntimeError(f"tool call {p.call.id} finished without a result")
        await _emit_message(run, p.result)
        results.append(p.result)
    return results, bool(terminate_flags) and all(terminate_flags)


async def _preflight(run: Run, reply: AssistantMessage, call: ToolCall) -> _Pending:
    tool = run.tools.get(call.name)
    if reply.stop_reason == "length":
        return _Pending(call, tool, call.arguments, error=LENGTH_STOP_TEXT)
    if tool is None:
        known = ", ".join(sorted(run.tools)) or "none"
        return _Pending(
            call, None, call.arguments, error=f"unknown tool {call.name!r} (tools: {known})"
        )
    invalid = validate_input(tool, call.arguments)
    if invalid is not None:
        return _Pending(call, tool, call.arguments, error=invalid)
    outcome = await emit_tool_call(
        run.sender,
        ToolCallEvent(
            tool_call_id=call.id,
            tool_name=call.name,
            input=call.arguments,
            turn_index=run.turn_index,
        ),
    )
    if outcome.blocked:
        return _Pending(call, tool, outcome.input, error=outcome.reason or "Tool call was blocked")
    patched = outcome.input != call.arguments
    invalid = validate_input(tool, outcome.input) if patched else None
    return _Pending(call, tool, outcome.input, error=invalid, patched=patched)


async def _finish(run: Run, p: _Pending, context: Any) -> bool:
    """Execute (when allowed), pass the result through ``tool_result``, emit the end event."""
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
        ),
    )
    p.result = ToolResultMessage(
        tool_call_id=p.call.id,
        tool_name=p.call.name,
        content=outcome.content,
        details=outcome.details,
        is_error=outcome.is_error,
        # The input the tool really ran with, when a hook changed it (kept as an extra field,
        # so pi still reads the entry).
        extra={"effectiveInput": dict(p.input)} if p.patched else {},
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

    try:
        value = await tool.execute(
            p.input,
            ToolRun(tool_call_id=p.call.id, cwd=run.cwd, context=context, on_update=on_update),
        )
    except Exception as exc:  # a failing tool is the model's to handle, not the run's end
        return ToolResult(content=f"{type(exc).__name__}: {exc}", is_error=True)
    return value if isinstance(value, ToolResult) else ToolResult(content=str(value))
