"""Command hooks as receivers on the bus: one receiver per signal, running that signal's
matching hooks in parallel and turning their answers into the signal's own results."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson

from hooks import (
    UNSET,
    AddContext,
    Allow,
    Ask,
    Block,
    Cancel,
    Continue,
    Event,
    HandlerErrorEvent,
    JSONValue,
    NotificationEvent,
    PatchInput,
    PatchResult,
    SessionBeforeCompactEvent,
    SessionEndEvent,
    SessionStartEvent,
    StopEvent,
    SubagentStopEvent,
    SystemMessageEvent,
    TextContent,
    ToolCallEvent,
    ToolResultEvent,
    UserPromptSubmitEvent,
    has_receivers,
    notify,
)
from repos import Session

from .._fs import absolute_path_variable
from .._permissions.claude_code import claude_code_mode
from .errors import CommandHookError
from .output import Answer, OutputError, read_answer
from .payload import InputAliases, claude_code_tool_name, from_claude_code, to_claude_code
from .process import run_command
from .settings import CommandHook

__all__ = ["TOP_LEVEL_ONLY", "HookHost", "HookReceiver"]

_log = logging.getLogger("harness")

TOP_LEVEL_ONLY = frozenset({"session_start", "session_end", "user_prompt_submit"})
"""Events whose command hooks a nested run (a sub-agent, a skill run) does not run: in Claude
Code a subagent starts no session and submits no prompt of the user's; its end is
``SubagentStop``."""


class HookHost(Protocol):
    """What a command hook receiver needs of the harness that sent the event."""

    @property
    def session(self) -> Session: ...

    @property
    def cwd(self) -> Path: ...

    @property
    def supervisor(self) -> object: ...

    @property
    def depth(self) -> int: ...

    def end_run(self, reason: str) -> None: ...

    def connect(
        self,
        event: str,
        receiver: Callable[..., object],
        *,
        priority: int = 0,
        timeout_s: float | None = ...,
    ) -> Callable[[], None]: ...


class HookReceiver:
    """The receiver of one signal's command hooks (connected by ``CommandHooks.connect``)."""

    def __init__(self, event: str, hooks: Sequence[CommandHook]) -> None:
        self.event = event
        self.hooks = tuple(hooks)

    def __repr__(self) -> str:
        return f"<command hooks of {self.hooks[0].claude_code_event}>"

    async def __call__(self, sender: HookHost, event: Event) -> object:
        if sender.depth > 0 and self.event in TOP_LEVEL_ONLY:
            # A sub-agent's events reach the hooks of the harness that started it.
            return None
        if isinstance(event, ToolResultEvent) and not _runs_for(
            self.hooks[0].claude_code_event, event
        ):
            return None
        chosen = self._matching(_matched_values(event))
        if not chosen:
            return None
        fields, aliases = _fields(event, sender.cwd)
        payload = {**_common(sender, self.hooks[0].claude_code_event, event.name), **fields}
        stdin = orjson.dumps(payload) + b"\n"  # one line, as line readers expect
        env = {
            **os.environ,
            # `/bin/sh -c` finds the hook's program on $PATH: never in the working folder
            # through an empty entry (review 13, finding 13), nor through an absolute one
            # (an activated .venv/bin: review 15, finding 2)
            "PATH": absolute_path_variable(outside=sender.cwd),
            "HARNESS_PROJECT_DIR": str(sender.cwd),
            "CLAUDE_PROJECT_DIR": str(sender.cwd),
        }
        answers = await asyncio.gather(*(_answer(h, stdin, sender.cwd, env) for h in chosen))
        ok: list[tuple[CommandHook, Answer]] = []
        failed: list[tuple[CommandHook, str]] = []
        for hook, answer in zip(chosen, answers, strict=True):
            if isinstance(answer, str):
                failed.append((hook, answer))
            else:
                ok.append((hook, answer))
        patches: list[dict[str, JSONValue]] = []
        if isinstance(event, ToolCallEvent) and aliases is not None:
            for hook, answer in list(ok):
                if answer.updated_input is None:
                    continue
                try:
                    patches.append(from_claude_code(answer.updated_input, event.input, aliases))
                except ValueError as exc:
                    ok.remove((hook, answer))
                    failed.append((hook, str(exc)))
        for hook, answer in ok:
            if answer.system_message:
                await _tell_user(sender, hook, event.name, answer.system_message)
            if answer.note:
                _log.info("%s said: %r", hook.describe(), answer.note)
        for hook, reason in failed:
            await _report(sender, hook, event.name, reason)
        return await _combine(sender, event, ok, failed, patches)

    def _matching(self, values: Sequence[str]) -> list[CommandHook]:
        seen: set[str] = set()
        chosen = []
        for hook in self.hooks:
            # Claude Code runs an identical command once, however often it is configured.
            if hook.command not in seen and hook.matches(values):
                seen.add(hook.command)
                chosen.append(hook)
        return chosen


async def _answer(
    hook: CommandHook, stdin: bytes, cwd: Path, env: Mapping[str, str]
) -> Answer | str:
    """The hook's answer, or why it failed."""
    try:
        finished = await run_command(
            hook.command, stdin=stdin, cwd=cwd, env=env, timeout_s=hook.timeout_s
        )
        return read_answer(hook.claude_code_event, finished)
    except OutputError as exc:
        return str(exc)
    except OSError as exc:
        return f"could not be started: {exc}"


def _runs_for(claude_code_event: str, event: ToolResultEvent) -> bool:
    """Claude Code's rule: PostToolUse after a call that succeeded, PostToolUseFailure after
    one that failed; neither for a call that never ran (blocked, denied, invalid)."""
    if not event.executed:
        return False
    return event.is_error == (claude_code_event == "PostToolUseFailure")


def _matched_values(event: Event) -> tuple[str, ...]:
    if isinstance(event, ToolCallEvent | ToolResultEvent):
        return (claude_code_tool_name(event.tool_name), event.tool_name)
    if isinstance(event, SessionBeforeCompactEvent):
        return ("manual" if event.trigger == "manual" else "auto",)
    if isinstance(event, SessionStartEvent):
        return (event.source,)
    if isinstance(event, SessionEndEvent):
        return (event.reason,)
    if isinstance(event, NotificationEvent):
        return (event.notification_type,)
    return ()


def _common(host: HookHost, claude_code_event: str, ours: str) -> dict[str, JSONValue]:
    """Claude Code's common input fields, and our event name."""
    path = host.session.path
    return {
        "session_id": host.session.id,
        "transcript_path": None if path is None else str(path),
        "cwd": str(host.cwd),
        "permission_mode": _mode(host),
        "hook_event_name": claude_code_event,
        "harness_event_name": ours,
    }


def _mode(host: HookHost) -> str:
    mode_for = getattr(host.supervisor, "mode_for", None)
    if not callable(mode_for):
        return "default"
    try:
        return claude_code_mode(mode_for(host.cwd))
    except ValueError:  # broken settings: every call is denied, but the hook still runs
        return "default"


def _fields(event: Event, cwd: Path) -> tuple[dict[str, JSONValue], InputAliases | None]:
    """The event's own input fields, and the tool input's added spellings."""
    if isinstance(event, ToolCallEvent | ToolResultEvent):
        shown, aliases = to_claude_code(event.tool_name, event.input, cwd)
        fields: dict[str, JSONValue] = {
            "tool_name": claude_code_tool_name(event.tool_name),
            "harness_tool_name": event.tool_name,
            "tool_input": shown,
            "tool_use_id": event.tool_call_id,
        }
        if isinstance(event, ToolResultEvent):
            text = "\n".join(b.text for b in event.content if isinstance(b, TextContent))
            fields["tool_response"] = {
                "content": text,
                "details": event.details,
                "is_error": event.is_error,
            }
            if event.is_error:  # Claude Code's PostToolUseFailure field
                fields["error"] = text
        return fields, aliases
    if isinstance(event, UserPromptSubmitEvent):
        return {"prompt": event.message.text}, None
    if isinstance(event, StopEvent):
        return {
            "stop_hook_active": event.stop_hook_active,
            "last_assistant_message": event.message.text,
        }, None
    if isinstance(event, SubagentStopEvent):
        return {
            "stop_hook_active": event.stop_hook_active,
            "last_assistant_message": event.message.text,
            "agent_type": event.agent_type,
            "parent_session_id": event.parent_session_id,
            "depth": event.depth,
        }, None
    if isinstance(event, SessionBeforeCompactEvent):
        return {
            "trigger": "manual" if event.trigger == "manual" else "auto",
            "custom_instructions": event.custom_instructions or "",
        }, None
    if isinstance(event, SessionStartEvent):
        return {"source": event.source}, None
    if isinstance(event, SessionEndEvent):
        return {"reason": event.reason}, None
    if isinstance(event, NotificationEvent):
        return {"message": event.message, "notification_type": event.notification_type}, None
    return {}, None


async def _report(host: HookHost, hook: CommandHook, event_name: str, reason: str) -> None:
    """A failed hook, as ``handler_error`` (logged when nobody listens: never silent)."""
    error = CommandHookError(hook.describe(), reason)
    if has_receivers(HandlerErrorEvent, host):
        await notify(
            host, HandlerErrorEvent(event_name=event_name, receiver=hook.describe(), error=error)
        )
    else:
        _log.error("%s receiver failed: %s", event_name, error)


async def _tell_user(host: HookHost, hook: CommandHook, event_name: str, message: str) -> None:
    if has_receivers(SystemMessageEvent, host):
        await notify(
            host, SystemMessageEvent(message=message, hook=hook.describe(), event_name=event_name)
        )
    else:
        _log.warning("%s: %s", hook.describe(), message)


def _end_run(host: HookHost, reason: str) -> None:
    try:
        host.end_run(reason)
    except Exception:  # no run to end (a compaction outside one): nothing to stop
        _log.info("continue: false with no run going: %s", reason)


def _failures(event: str, failed: Sequence[tuple[CommandHook, str]]) -> str:
    listed = "; ".join(f"{hook.describe()} failed: {why}" for hook, why in failed)
    return f"blocked because a {event} hook failed (fails closed): {listed}"


async def _combine(
    host: HookHost,
    event: Event,
    ok: Sequence[tuple[CommandHook, Answer]],
    failed: Sequence[tuple[CommandHook, str]],
    patches: Sequence[Mapping[str, JSONValue]],
) -> object:
    """The hooks' answers as the event's result (combination rules: docs/hooks.md)."""
    answers = [a for _, a in ok]
    blocks = [a.block for a in answers if a.block]
    stops = [a.stop for a in answers if a.stop]
    contexts = [a.context for a in answers if a.context]
    name = ok[0][0].claude_code_event if ok else failed[0][0].claude_code_event
    if isinstance(event, ToolCallEvent):
        if stops:
            _end_run(host, stops[0])
        if failed:
            return Block(reason=_failures(name, failed))
        if blocks or stops:
            return Block(reason="\n".join([*blocks, *stops]))
        current = dict(event.input)
        for patch in patches:  # each hook saw the same input; their changes apply in order
            for key in set(event.input) - set(patch):
                current.pop(key, None)
            current.update({k: v for k, v in patch.items() if event.input.get(k, _NONE) != v})
        new_input: Any = current if current != dict(event.input) else UNSET
        asks = [a for a in answers if a.permission == "ask"]
        allows = [a for a in answers if a.permission == "allow"]
        if asks:
            return Ask(reason=asks[0].permission_reason, input=new_input)
        if allows:
            return Allow(reason=allows[0].permission_reason, input=new_input)
        return None if new_input is UNSET else PatchInput(input=new_input)
    if isinstance(event, UserPromptSubmitEvent):
        if failed:
            return Block(reason=_failures(name, failed))
        if blocks or stops:
            return Block(reason="\n".join([*blocks, *stops]))
        return AddContext(text="\n\n".join(contexts)) if contexts else None
    if isinstance(event, ToolResultEvent):
        if stops:
            _end_run(host, stops[0])
        said = [*blocks, *contexts]
        if not said:
            return None
        added = tuple(TextContent(text=f"{name} hook: {text}") for text in said)
        return PatchResult(content=(*event.content, *added))
    if isinstance(event, StopEvent | SubagentStopEvent):
        if stops:  # Claude Code: continue: false wins over a block
            _end_run(host, stops[0])
            return None
        return Continue(reason="\n".join(blocks)) if blocks else None
    if isinstance(event, SessionBeforeCompactEvent):
        return Cancel(reason="\n".join([*blocks, *stops])) if blocks or stops else None
    # session_start, session_end, notification: exit 2 shows stderr to the user.
    for hook, answer in ok:
        if answer.block:
            await _tell_user(host, hook, event.name, answer.block)
    if isinstance(event, SessionStartEvent) and contexts:
        return AddContext(text="\n\n".join(contexts))
    return None


_NONE = object()
