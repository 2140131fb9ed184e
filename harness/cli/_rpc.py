"""``harness rpc``: pi's RPC protocol (``pi --mode rpc``) over stdin and stdout.

Commands come as JSON lines on stdin (``{"id"?, "type": "prompt", ...}``, pi's ``rpc-types``);
each gets one ``{"type": "response", "command", "success", "id"?, "data"? | "error"?}`` line
on stdout, and the agent's events stream there too, one JSON object per line, in the shape of
``harness.EventEncoder`` (pi's ``AgentSessionEvent``: docs/events.md). Framing is pi's: records
end with LF only (a U+2028 inside a string is no line end), a trailing CR is dropped. pi's own
``RpcClient`` (npm ``@mariozechner/pi-coding-agent``) drives it unchanged.

Approvals: a tool call the supervisor wants approved is asked with pi's extension UI request,
``{"type": "extension_ui_request", "id", "method": "select", "title", "options": ["Allow
once", "Always allow", "Deny"], "timeout", "permission": {...}}``, answered by
``{"type": "extension_ui_response", "id", "value": ...}``; anything else, no answer within
``--approval-timeout`` or ``{"cancelled": true}`` denies.

Security (docs/security.md): a line is data. A malformed line gets an error response and the
process goes on; no line picks the working folder (it is the command line's), grants a
permission (only the answer to a pending request, by its unguessable id), reaches a session
outside the store (``switch_session`` takes sessions of the store only) or writes outside the
working folder (``export_html``). The ``bash`` command is gated like a model's ``bash`` call.
stdin closing (or SIGTERM) aborts what runs, saves the session and ends the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs
import click
import orjson

from harness import (
    AgentHarness,
    Approve,
    ApproveAlways,
    AssistantMessage,
    BashExecutionMessage,
    CompactionEntry,
    Decision,
    Deny,
    EventEncoder,
    HarnessError,
    ImageContent,
    JsonlSessionRepo,
    MessageEntry,
    Model,
    PermissionRequest,
    Session,
    SessionRepo,
    TextContent,
    ToolCall,
    ToolResult,
    ToolRun,
    UserContent,
    UserMessage,
    bash_tool,
    context_size,
    encode_message,
    make_model,
)

from .._permissions import Gate, protected_path
from ._agent import AgentOptions, Agents, agent_options, pick_session, working_folder
from ._common import describe_store, find_ref, open_ref, run_async
from ._escape import echo, json_line
from ._export import session_html
from ._hooks import load_command_hooks
from ._opening import warn_diagnostics
from ._render import totals
from ._run import first_model, session_model

__all__ = ["APPROVAL_OPTIONS", "MAX_LINE_BYTES", "RPC_EVENTS", "rpc"]

MAX_LINE_BYTES = 32 << 20
"""A command line holds at most this many bytes (images travel inline as base64)."""

APPROVAL_OPTIONS = ("Allow once", "Always allow", "Deny")
"""The options of an approval request, in order; the answer is one of them."""

RPC_EVENTS = (
    "agent_start",
    "agent_end",
    "turn_start",
    "turn_end",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
    "queue_update",
    "session_before_compact",
    "session_compact",
    "retry",
    "thinking_level_update",
    "model_update",
    "tools_update",
    "permission_request",
    "permission_decision",
    "abort",
    "settled",
    "model_fallback",
    "handler_error",
    "system_message",
    "session_tree",
    "session_rewind",
    "mcp_server_start",
    "mcp_server_error",
    "mcp_server_stop",
)
"""The events streamed (pi's and ours; hook points such as ``context`` are left out)."""

_QUEUE_MODES = {"all": "all", "one-at-a-time": "one_at_a_time"}
_MAX_ID = 256  # longer ids are not echoed back
_MAX_TEXT = 1 << 12  # a session name or parent session reference


class CommandError(Exception):
    """A command that cannot be done: its message is the error response's ``error``."""


def _str(command: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = command.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise CommandError(f"{key!r} must be a string")
    return value


def _images(command: Mapping[str, Any]) -> list[ImageContent]:
    """pi's ``images``: ``[{"type": "image", "data": base64, "mimeType"}]``."""
    value = command.get("images")
    if value is None:
        return []
    if not isinstance(value, list):
        raise CommandError("'images' must be a list")
    images = []
    for image in value:
        if not (
            isinstance(image, dict)
            and isinstance(image.get("data"), str)
            and isinstance(image.get("mimeType"), str)
        ):
            raise CommandError('an image is {"type": "image", "data", "mimeType"}')
        images.append(ImageContent(data=image["data"], mime_type=image["mimeType"]))
    return images


def _model_json(harness: AgentHarness) -> dict[str, Any]:
    """pi's ``Model`` object for the harness's model (the registry's figures where known)."""
    model, info = harness.model, harness.model_info
    prices = info.prices if info is not None else None
    return {
        "id": model.id,
        "name": info.name if info is not None else model.id,
        "api": info.api if info is not None else "",
        "provider": model.provider,
        "baseUrl": (info.base_url or "") if info is not None else "",
        "reasoning": info.reasoning if info is not None else False,
        "input": list(info.input) if info is not None else ["text"],
        "contextWindow": harness.context_window,
        "maxTokens": (info.max_output_tokens or 0) if info is not None else 0,
        "cost": {
            "input": prices.input if prices is not None else 0,
            "output": prices.output if prices is not None else 0,
            "cacheRead": prices.cache_read if prices is not None else 0,
            "cacheWrite": prices.cache_write if prices is not None else 0,
        },
    }


class _Reader:
    """stdin's lines (bytes, LF-framed, at most :data:`MAX_LINE_BYTES`), read by a daemon
    thread into the loop: a read waiting for input never blocks the loop nor the exit.
    ``None`` is the end of input; a too-long line comes as ``ValueError``.

    The thread reads the file descriptor with ``os.read``, not through ``sys.stdin.buffer``:
    interpreter shutdown aborts the process ("could not acquire lock ... at interpreter
    shutdown") when a daemon thread sits in a buffered stream's read (review 9, finding 8)."""

    def __init__(self, fd: int) -> None:
        self._loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[bytes | ValueError | None] = asyncio.Queue()
        threading.Thread(target=self._read, args=(fd,), daemon=True).start()

    def _read(self, fd: int) -> None:
        line = bytearray()
        dropping = False  # the rest of a too-long line is read and dropped
        try:
            while chunk := os.read(fd, 1 << 16):
                while chunk:
                    end = chunk.find(b"\n")
                    piece, chunk = (chunk, b"") if end < 0 else (chunk[: end + 1], chunk[end + 1 :])
                    if not dropping:
                        line += piece
                        if len(line) - (end >= 0) > MAX_LINE_BYTES:  # the LF not counted
                            line.clear()
                            dropping = True
                            self._put(ValueError(f"a line longer than {MAX_LINE_BYTES} bytes"))
                    if end >= 0:
                        if not dropping:
                            self._put(bytes(line))
                        line.clear()
                        dropping = False
            if line and not dropping:
                self._put(bytes(line))  # the last line, without its LF
        except OSError:
            pass
        self._put(None)

    def _put(self, item: bytes | ValueError | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server has ended
            self._loop.call_soon_threadsafe(self.queue.put_nowait, item)


class RpcServer:
    """One ``harness rpc`` process: the session, its harness, the pending approvals."""

    def __init__(
        self,
        *,
        repo: SessionRepo,
        session: Session,
        model: Model,
        agents: Agents,
        approval_timeout_s: float,
    ) -> None:
        self.repo = repo
        self.agents = agents
        self.session = session
        self._approval_timeout_s = approval_timeout_s
        self._pending: dict[str, asyncio.Future[Mapping[str, Any]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._bash: asyncio.Task[Any] | None = None
        self._steering_mode = "one_at_a_time"
        self._follow_up_mode = "one_at_a_time"
        self._compacting = False
        self._bash_count = 0
        agents.supervisor.approver = self._approve
        self.harness = self._harness_for(session, model)

    # --- output --------------------------------------------------------------------------------

    def write(self, record: Mapping[str, Any]) -> None:
        """One JSON line on stdout, flushed. JSON escapes keep it one line and decodable."""
        with contextlib.suppress(BrokenPipeError):  # the driver went away: stdin ends too
            echo(json_line(record, default=repr))

    def _respond(
        self, id_: object, command: str, *, data: Any = None, error: str | None = None
    ) -> None:
        record: dict[str, Any] = {"type": "response", "command": command[:_MAX_ID]}
        if isinstance(id_, str) and len(id_) <= _MAX_ID:
            record["id"] = id_
        record["success"] = error is None
        if error is not None:
            record["error"] = error
        elif data is not None:
            record["data"] = data
        self.write(record)

    def _harness_for(self, session: Session, model: Model) -> AgentHarness:
        harness = self.agents.make(session, model)
        harness.set_steering_mode(self._steering_mode)  # type: ignore[arg-type]
        harness.set_follow_up_mode(self._follow_up_mode)  # type: ignore[arg-type]
        encoder = EventEncoder()

        def forward(sender: object, event: Any) -> None:
            self.write(encoder.encode(event, sender))

        for name in RPC_EVENTS:
            harness.connect(name, forward, priority=-100)
        return harness

    # --- approvals -------------------------------------------------------------------------

    async def _approve(self, request: PermissionRequest) -> Decision:
        """Ask the driver (pi's extension UI ``select``); see the module docstring."""
        request_id = str(uuid.uuid4())
        answer: asyncio.Future[Mapping[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = answer
        self.write(
            {
                "type": "extension_ui_request",
                "id": request_id,
                "method": "select",
                "title": f"Allow {request.operation_key}?"
                + (
                    f" (which is, through a symlink: {request.reaches})"
                    if request.reaches is not None
                    else ""
                )
                + (" (outside the working folder)" if request.leaves_cwd else ""),
                "options": list(APPROVAL_OPTIONS),
                "timeout": round(self._approval_timeout_s * 1000),
                "permission": {
                    "toolName": request.tool_name,
                    "toolCallId": request.tool_call_id,
                    "input": dict(request.input),
                    "operationKey": request.operation_key,
                    "leavesCwd": request.leaves_cwd,
                    "reaches": request.reaches,
                },
            }
        )
        try:
            reply = await asyncio.wait_for(answer, self._approval_timeout_s)
        except TimeoutError:
            return Deny(reason=f"no answer within {self._approval_timeout_s:g} s; denied")
        finally:
            self._pending.pop(request_id, None)
        # Only the exact option approves: a `select` is answered by its value, and pi's
        # `confirmed` (the answer to a `confirm`) is not an answer to this question.
        value = reply.get("value")
        if value == APPROVAL_OPTIONS[0]:
            return Approve(reason="approved by the RPC client")
        if value == APPROVAL_OPTIONS[1]:
            return ApproveAlways(reason="approved always by the RPC client")
        return Deny(reason=f"the RPC client declined {request.operation_key}")

    def _answer(self, line: Mapping[str, Any]) -> None:
        """An ``extension_ui_response``: the answer of a pending request (else an error)."""
        request_id = line.get("id")
        pending = self._pending.get(request_id) if isinstance(request_id, str) else None
        if pending is None or pending.done():
            # the id is echoed only as a short string: a repr of any other value may be huge
            # or nested past the recursion limit (review 9, finding 3)
            named = (
                f"{request_id!r}"
                if isinstance(request_id, str) and len(request_id) <= _MAX_ID
                else "that id"
            )
            self._respond(None, "extension_ui_response", error=f"no request is waiting for {named}")
            return
        pending.set_result(line)

    # --- the loop ----------------------------------------------------------------------------

    async def serve(self) -> None:
        """Handle stdin's lines until it ends (or SIGTERM); then shut down cleanly."""
        reader = _Reader(sys.stdin.fileno())
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        stopped = asyncio.ensure_future(stop.wait())
        try:
            while True:
                line = asyncio.ensure_future(reader.queue.get())
                done, _ = await asyncio.wait({line, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if stopped in done:
                    line.cancel()
                    break
                item = line.result()
                if item is None:
                    break
                if isinstance(item, ValueError):
                    self._respond(None, "parse", error=f"Failed to parse command: {item}")
                    continue
                try:
                    await self._line(item)
                except Exception as exc:  # one line never ends the process (review 9, 3)
                    self._respond(None, "error", error=f"the line failed: {type(exc).__name__}")
        finally:
            loop.remove_signal_handler(signal.SIGTERM)
            stopped.cancel()
            await self.close()

    async def close(self) -> None:
        """Abort what runs, then save and close the session."""
        for pending in self._pending.values():
            if not pending.done():  # nobody is left to answer: denied
                pending.set_result({"cancelled": True})
        if self._bash is not None:
            self._bash.cancel()
        await self.harness.shutdown()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.session.close()

    async def _line(self, raw: bytes) -> None:
        try:
            parsed: Any = orjson.loads(raw.rstrip(b"\r\n"))
        except orjson.JSONDecodeError as exc:
            self._respond(None, "parse", error=f"Failed to parse command: {exc}")
            return
        if not isinstance(parsed, dict) or not isinstance(parsed.get("type"), str):
            self._respond(None, "parse", error="a command is a JSON object with a 'type' string")
            return
        kind, id_ = parsed["type"], parsed.get("id")
        if kind == "extension_ui_response":
            self._answer(parsed)
            return
        handler = self._HANDLERS.get(kind)
        if handler is None:
            self._respond(id_, kind, error=f"Unknown command: {kind}")
            return
        try:
            data = await handler(self, parsed)
        except (CommandError, HarnessError, ValueError, OSError) as exc:
            self._respond(id_, kind, error=" ".join(str(exc).split()) or type(exc).__name__)
            return
        if data is not _LATER:
            self._respond(id_, kind, data=data)

    def _spawn(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _idle(self, what: str) -> None:
        if self.harness.busy or self._compacting or self._bash is not None:
            raise CommandError(f"the agent is busy; abort it before {what}")

    # --- prompting ---------------------------------------------------------------------------

    async def _prompt(self, command: Mapping[str, Any]) -> object:
        text = _str(command, "message")
        assert text is not None
        images = _images(command)
        behaviour = command.get("streamingBehavior")
        if behaviour not in (None, "steer", "followUp"):
            raise CommandError("'streamingBehavior' is 'steer' or 'followUp'")
        if self._bash is not None:
            raise CommandError("a bash command runs or waits for its approval; abort_bash it first")
        if self.harness.busy:
            if behaviour is None:
                raise CommandError(
                    "Agent is already processing. Specify streamingBehavior ('steer' or "
                    "'followUp') to queue the message."
                )
            await self._queue(behaviour, text, images)
            return None
        content: str | list[UserContent] = [TextContent(text=text), *images] if images else text
        started = asyncio.get_running_loop().create_future()

        def accepting(sender: object, event: object) -> None:
            if not started.done():
                started.set_result(None)

        harness = self.harness
        disconnect = harness.connect("agent_start", accepting)
        run = self._spawn(self._run(harness, content))
        try:
            # The response comes once the run accepts steering, or with the refusal.
            await asyncio.wait({run, started}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            disconnect()
        if not started.done() and run.done():
            refused = run.result()  # refused before it started: a hook, a busy session
            if refused is not None:
                raise refused
        return None

    async def _run(
        self, harness: AgentHarness, content: str | list[UserContent]
    ) -> HarnessError | None:
        """The prompt; its error, if any. One after the run started is persisted as the error
        reply, and the events said it (pi reports it so, not as a second response)."""
        try:
            await harness.prompt(content)
        except HarnessError as exc:
            return exc
        return None

    async def _queue(self, behaviour: str, text: str, images: list[ImageContent]) -> None:
        if images:
            raise CommandError("images cannot be queued for a running prompt")
        if behaviour == "steer":
            await self.harness.steer(text)
        else:
            await self.harness.follow_up(text)

    async def _steer(self, command: Mapping[str, Any]) -> object:
        await self._queue("steer", _str(command, "message") or "", _images(command))
        return None

    async def _follow_up(self, command: Mapping[str, Any]) -> object:
        await self._queue("followUp", _str(command, "message") or "", _images(command))
        return None

    async def _abort(self, command: Mapping[str, Any]) -> object:
        await self.harness.abort()
        return None

    # --- sessions ----------------------------------------------------------------------------

    async def _switch(self, session: Session) -> None:
        old_harness, old_session = self.harness, self.session
        self.harness = self._harness_for(session, old_harness.model)
        self.session = session
        level = old_harness.thinking_level
        await old_harness.shutdown()
        old_session.close()
        if self.harness.thinking_level != level:
            await self.harness.set_thinking_level(level)

    async def _new_session(self, command: Mapping[str, Any]) -> object:
        self._idle("a new session")
        parent = _str(command, "parentSession", optional=True)
        if parent is not None and len(parent) > _MAX_TEXT:
            raise CommandError("'parentSession' is too long")
        new = await self.repo.create(str(self.agents.cwd), parent_session=parent or None)
        await self._switch(new)
        return {"cancelled": False}

    async def _switch_session(self, command: Mapping[str, Any]) -> object:
        self._idle("switching sessions")
        ref = _str(command, "sessionPath") or ""
        found = await find_ref(self.repo, ref)
        # A path from the protocol names a session of this store, never any file.
        if isinstance(found, Path) and not (
            isinstance(self.repo, JsonlSessionRepo) and _beneath(found, self.repo.root)
        ):
            raise CommandError(
                f"{ref!r} is not a session of {describe_store(self.repo)}; "
                "switch_session reaches the store's sessions only"
            )
        session = await open_ref(self.repo, found)
        await self._switch(session)
        return {"cancelled": False}

    async def _fork(self, command: Mapping[str, Any]) -> object:
        self._idle("forking")
        entry_id = _str(command, "entryId") or ""
        try:
            entry = self.session.get_entry(entry_id)
        except HarnessError:
            raise CommandError(f"no entry {entry_id!r} in the session") from None
        if not (isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage)):
            raise CommandError(f"entry {entry_id!r} is not a user message (get_fork_messages)")
        # pi's fork: the new session ends before that message; its text comes back to edit.
        new = await self.repo.fork(
            self.session.path or self.session.id, entry_id=entry_id, position="before"
        )
        await self._switch(new)
        return {"text": entry.message.text, "cancelled": False}

    async def _clone(self, command: Mapping[str, Any]) -> object:
        self._idle("cloning")
        if self.session.leaf_id is None:
            raise CommandError("Cannot clone session: no current entry selected")
        new = await self.repo.fork(self.session.path or self.session.id)
        await self._switch(new)
        return {"cancelled": False}

    async def _get_fork_messages(self, command: Mapping[str, Any]) -> object:
        messages = [
            {"entryId": e.id, "text": e.message.text}
            for e in self.session.get_branch()
            if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage)
        ]
        return {"messages": messages}

    async def _set_session_name(self, command: Mapping[str, Any]) -> object:
        name = (_str(command, "name") or "").strip()
        if not name:
            raise CommandError("Session name cannot be empty")
        if len(name) > _MAX_TEXT:
            raise CommandError("the session name is too long")
        self.session.set_name(name)
        return None

    # --- state -------------------------------------------------------------------------------

    async def _get_state(self, command: Mapping[str, Any]) -> object:
        h, s = self.harness, self.session
        steer, follow_up, _ = h.queued
        state: dict[str, Any] = {
            "model": _model_json(h),
            "thinkingLevel": h.thinking_level,
            "isStreaming": h.busy and not self._compacting,
            "isCompacting": self._compacting,
            "steeringMode": "all" if self._steering_mode == "all" else "one-at-a-time",
            "followUpMode": "all" if self._follow_up_mode == "all" else "one-at-a-time",
            "sessionId": s.id,
            "autoCompactionEnabled": h.compaction.enabled,
            "messageCount": len(s.build_context().messages),
            "pendingMessageCount": len(steer) + len(follow_up),
        }
        if s.path is not None:
            state["sessionFile"] = str(s.path)
        if s.name:
            state["sessionName"] = s.name
        return state

    async def _get_messages(self, command: Mapping[str, Any]) -> object:
        return {"messages": [encode_message(m) for m in self.session.build_context().messages]}

    async def _get_last_assistant_text(self, command: Mapping[str, Any]) -> object:
        last = next(
            (
                m
                for m in reversed(self.session.build_context().messages)
                if isinstance(m, AssistantMessage)
            ),
            None,
        )
        return {"text": last.text if last is not None else None}

    async def _get_session_stats(self, command: Mapping[str, Any]) -> object:
        h, s = self.harness, self.session
        messages = [e.message for e in s.get_branch() if isinstance(e, MessageEntry)]
        total = totals(s.get_branch(), h.registry)
        used = context_size(s.build_context().messages).tokens
        window = h.context_window
        return {
            "sessionFile": str(s.path) if s.path is not None else None,
            "sessionId": s.id,
            "userMessages": sum(isinstance(m, UserMessage) for m in messages),
            "assistantMessages": sum(isinstance(m, AssistantMessage) for m in messages),
            "toolCalls": sum(
                len(m.tool_calls) for m in messages if isinstance(m, AssistantMessage)
            ),
            "toolResults": sum(m.role == "toolResult" for m in messages),
            "totalMessages": len(messages),
            "tokens": {
                "input": total.input,
                "output": total.output,
                "cacheRead": total.cache_read,
                "cacheWrite": total.cache_write,
                "total": total.input + total.output + total.cache_read + total.cache_write,
            },
            "cost": total.cost,
            "contextUsage": {
                "tokens": used,
                "contextWindow": window,
                "percent": round(100 * used / window, 1) if window else None,
            },
        }

    async def _get_commands(self, command: Mapping[str, Any]) -> object:
        commands: list[dict[str, Any]] = [
            {
                "name": t.name,
                "description": t.description,
                "source": "prompt",
                "sourceInfo": {"path": str(t.path) if t.path else None, "scope": t.scope},
            }
            for t in self.harness.templates
        ]
        if self.harness.resources is not None:
            for skill in await self.harness.get_skills():
                commands.append(
                    {
                        "name": f"skill:{skill.name}",
                        "description": skill.description,
                        "source": "skill",
                        "sourceInfo": {"path": skill.path, "scope": skill.scope},
                    }
                )
        return {"commands": commands}

    # --- settings ----------------------------------------------------------------------------

    async def _set_model(self, command: Mapping[str, Any]) -> object:
        provider, model_id = _str(command, "provider"), _str(command, "modelId")
        current = self.harness.model
        if (provider, model_id) == (current.provider, current.id):
            return _model_json(self.harness)
        choice = self.agents.choice
        if choice is None:
            raise CommandError(
                f"Model not found: {provider}/{model_id} (this process runs the offline model; "
                "start it without --offline)"
            )
        try:
            model = make_model(f"{provider}/{model_id}", registry=choice.registry)
        except HarnessError as exc:
            raise CommandError(f"Model not found: {provider}/{model_id}: {exc}") from None
        await self.harness.set_model(model)
        return _model_json(self.harness)

    async def _set_thinking_level(self, command: Mapping[str, Any]) -> object:
        level = _str(command, "level")
        await self.harness.set_thinking_level(level)  # type: ignore[arg-type]  # it checks
        return None

    async def _set_queue_mode(self, command: Mapping[str, Any], which: str) -> None:
        mode = _QUEUE_MODES.get(str(command.get("mode")))
        if mode is None:
            raise CommandError("'mode' is 'all' or 'one-at-a-time'")
        if which == "steering":
            self._steering_mode = mode
            self.harness.set_steering_mode(mode)  # type: ignore[arg-type]
        else:
            self._follow_up_mode = mode
            self.harness.set_follow_up_mode(mode)  # type: ignore[arg-type]

    async def _set_steering_mode(self, command: Mapping[str, Any]) -> object:
        await self._set_queue_mode(command, "steering")
        return None

    async def _set_follow_up_mode(self, command: Mapping[str, Any]) -> object:
        await self._set_queue_mode(command, "follow_up")
        return None

    async def _compact(self, command: Mapping[str, Any]) -> object:
        instructions = _str(command, "customInstructions", optional=True)
        self._idle("compacting")
        id_ = command.get("id")
        self._compacting = True

        async def compact() -> None:
            try:
                entry = await self.harness.compact(instructions or None, force=True)
            except HarnessError as exc:
                self._respond(id_, "compact", error=" ".join(str(exc).split()))
                return
            finally:
                self._compacting = False
            if entry is None:
                self._respond(id_, "compact", error="nothing to compact")
                return
            self._respond(id_, "compact", data=_compaction(entry))

        self._spawn(compact())  # abort can come meanwhile
        return _LATER

    async def _set_auto_compaction(self, command: Mapping[str, Any]) -> object:
        enabled = command.get("enabled")
        if not isinstance(enabled, bool):
            raise CommandError("'enabled' must be true or false")
        self.harness.compaction = attrs.evolve(self.harness.compaction, enabled=enabled)
        return None

    # --- bash and export ---------------------------------------------------------------------

    async def _bash_command(self, command: Mapping[str, Any]) -> object:
        text = _str(command, "command") or ""
        self._idle("running a command")
        id_ = command.get("id")
        self._bash_count += 1
        call = ToolCall(id=f"rpc_bash_{self._bash_count}", name="bash", arguments={"command": text})
        tool = bash_tool()
        gate = Gate(
            supervisor=self.agents.supervisor,
            sender=self.harness,
            session=self.session,
            cwd=self.agents.cwd,
            depth=0,
            approvals=set(self.harness.approvals),
            write=_now,
        )

        async def noop(partial: Any) -> None:
            return None

        async def bash() -> None:
            try:
                await run_it()
            finally:
                self._bash = None

        async def run_it() -> None:
            # The same gate as a model's bash call: deny rules and plan mode refuse it, the
            # mode or an allow rule lets it run, anything else is asked through the protocol.
            try:
                decided = await gate.check(call, tool, {"command": text})
            except asyncio.CancelledError:  # abort_bash while it waited for its approval
                self._respond(id_, "bash", error="aborted before it ran")
                return
            if decided.denied is not None:
                self._respond(id_, "bash", error=f"denied: {decided.denied}")
                return
            # sandboxed unless the person answered this very call (review 7, finding 4)
            run = ToolRun(
                tool_call_id=call.id, cwd=self.agents.cwd, sandbox=decided.sandbox, on_update=noop
            )
            cancelled = False
            try:
                result = await tool.execute({"command": text}, run)
            except asyncio.CancelledError:
                cancelled, result = True, ToolResult(content="(aborted)", is_error=True)
            data = _bash_result(result, cancelled)
            self.session.append_message(
                BashExecutionMessage(
                    command=text,
                    output=data["output"],
                    exit_code=data["exitCode"],
                    cancelled=cancelled,
                    truncated=data["truncated"],
                    full_output_path=data.get("fullOutputPath"),
                )
            )
            self._respond(id_, "bash", data=data)

        # busy from now on, its approval included: no prompt or session change runs beside it,
        # and its result goes to the session it was asked in (review 9, finding 14)
        self._bash = self._spawn(bash())
        return _LATER

    async def _abort_bash(self, command: Mapping[str, Any]) -> object:
        if self._bash is not None:
            self._bash.cancel()  # the tool kills the command's whole process group
        return None

    async def _export_html(self, command: Mapping[str, Any]) -> object:
        given = _str(command, "outputPath", optional=True)
        name = given or f"session-{self.session.id}.html"
        data = session_html(self.session).encode()
        path = await asyncio.to_thread(
            _export_to, self.agents.cwd, name, data, self.agents.store_folders
        )
        return {"path": str(path)}

    _HANDLERS: ClassVar[dict[str, Callable[[RpcServer, Mapping[str, Any]], Awaitable[object]]]]


def _now(append: Callable[[], object]) -> None:
    """The gate's ``write`` for the protocol's bash: the harness is idle, so at once."""
    append()


def _compaction(entry: CompactionEntry) -> dict[str, Any]:
    return {
        "summary": entry.summary,
        "firstKeptEntryId": entry.first_kept_entry_id,
        "tokensBefore": entry.tokens_before,
        "details": entry.details,
    }


def _bash_result(result: ToolResult | str, cancelled: bool) -> dict[str, Any]:
    """pi's ``BashResult`` of the bash tool's result."""
    if isinstance(result, str):
        result = ToolResult(content=result)
    details = result.details if isinstance(result.details, dict) else {}
    code = details.get("exitCode")
    out: dict[str, Any] = {
        "output": "".join(b.text for b in result.content if isinstance(b, TextContent)),
        "exitCode": code if isinstance(code, int) and not cancelled else None,
        "cancelled": cancelled,
        "truncated": bool(details.get("truncated")),
    }
    if isinstance(details.get("fullOutputPath"), str):
        out["fullOutputPath"] = details["fullOutputPath"]
    return out


def _beneath(path: Path, root: Path) -> bool:
    """Whether ``path`` (its folder's symlinks resolved) lies in ``root``."""
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))
    except (OSError, ValueError):
        return False


def _export_to(cwd: Path, name: str, data: bytes, stores: tuple[Path, ...]) -> Path:
    """Write an export at ``name`` (relative to ``cwd``): a ``.html`` file in ``cwd`` that is
    no protected path (``.git/config``, settings, a file of a store ``stores`` names: an rpc
    line is untrusted and replaced them; review 5, finding 5).

    Raises:
        CommandError: the path leads out of the working folder, does not end in ``.html``, or
            is protected.
    """
    target = Path(name).expanduser()
    target = target if target.is_absolute() else cwd / target
    if not _beneath(target.parent, cwd) or target.name in ("", ".", ".."):
        raise CommandError(f"{name!r}: export_html writes inside the working folder {cwd} only")
    if target.suffix.lower() not in (".html", ".htm"):
        raise CommandError(f"{name!r}: export_html writes a .html file")
    why = protected_path(str(target), cwd, stores)
    if why is not None:
        raise CommandError(f"{name!r}: export_html does not write there ({why})")
    _write_replacing(target, data)
    return target


def _write_replacing(target: Path, data: bytes) -> None:
    """Write ``data`` at ``target`` through a new file renamed over it: a symlink planted at
    ``target`` is replaced, never followed."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".export-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_LATER = object()
"""A handler's result when its response comes later (a background task writes it)."""

RpcServer._HANDLERS = {
    "prompt": RpcServer._prompt,
    "steer": RpcServer._steer,
    "follow_up": RpcServer._follow_up,
    "abort": RpcServer._abort,
    "new_session": RpcServer._new_session,
    "switch_session": RpcServer._switch_session,
    "fork": RpcServer._fork,
    "clone": RpcServer._clone,
    "get_fork_messages": RpcServer._get_fork_messages,
    "set_session_name": RpcServer._set_session_name,
    "get_state": RpcServer._get_state,
    "get_messages": RpcServer._get_messages,
    "get_last_assistant_text": RpcServer._get_last_assistant_text,
    "get_session_stats": RpcServer._get_session_stats,
    "get_commands": RpcServer._get_commands,
    "set_model": RpcServer._set_model,
    "set_thinking_level": RpcServer._set_thinking_level,
    "set_steering_mode": RpcServer._set_steering_mode,
    "set_follow_up_mode": RpcServer._set_follow_up_mode,
    "compact": RpcServer._compact,
    "set_auto_compaction": RpcServer._set_auto_compaction,
    "bash": RpcServer._bash_command,
    "abort_bash": RpcServer._abort_bash,
    "export_html": RpcServer._export_html,
}


async def _main(opts: AgentOptions, repo: SessionRepo, here: Path, timeout_s: float) -> None:
    choice = opts.model_choice(here)
    model, level = first_model(opts, choice, paced=True)
    command_hooks = load_command_hooks(here, trust_project=opts.trusts(here))
    session = await pick_session(opts, repo, here)
    try:
        warn_diagnostics(session)
        cwd = working_folder(session, here if opts.work_dir is not None else None)
        if model is None:
            model, level = session_model(choice, session, level)
        agents = Agents(opts, cwd, repo=repo, choice=choice, command_hooks=command_hooks)
        server = RpcServer(
            repo=repo, session=session, model=model, agents=agents, approval_timeout_s=timeout_s
        )
    except BaseException:
        session.close()
        raise
    if level:
        await server.harness.set_thinking_level(level)
    await server.serve()


@click.command()
@click.option(
    "--approval-timeout",
    "approval_timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Seconds an approval request waits for its answer before the call is denied.",
)
@agent_options
def rpc(approval_timeout_s: float, opts: AgentOptions) -> None:
    """Serve pi's RPC protocol on stdin and stdout (JSON lines; pi's RpcClient drives it).

    Commands (pi's): prompt, steer, follow_up, abort, new_session, switch_session, fork,
    clone, get_state, get_messages, get_fork_messages, get_last_assistant_text,
    get_session_stats, get_commands, set_model, set_thinking_level, set_steering_mode,
    set_follow_up_mode, compact, set_auto_compaction, set_session_name, bash, abort_bash,
    export_html. Events stream as JSON lines (docs/events.md). Approvals are asked as pi's
    extension UI requests. A malformed line gets an error response; stdin closing ends the
    process once the session is saved.
    """
    if opts.resume == "":
        raise click.UsageError("--resume needs an id here (the picker is for a terminal)")
    repo = opts.repo()
    here = Path(os.path.realpath(opts.work_dir or Path.cwd()))
    run_async(_main(opts, repo, here, approval_timeout_s))
