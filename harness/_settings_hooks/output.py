"""What a command hook's exit code and output mean (Claude Code's rules, failing closed where
they would not).

- exit 0: go on; stdout, when it is a JSON object, is read (below). Other stdout is context
  for ``UserPromptSubmit`` and ``SessionStart`` (as in Claude Code), is refused at
  ``PreToolUse`` (a gate must answer clearly: the call is blocked), and is logged elsewhere.
- exit 2: block; stderr is the reason (what "block" means depends on the event).
- anything else, a timeout, more than 1 MiB of output, JSON that is not of the shape below:
  the hook failed (``handler_error``; a gating event is blocked).

JSON keys: ``continue`` (false ends the run, with ``stopReason``), ``stopReason``,
``suppressOutput`` (accepted; nothing of a hook's stdout is shown anyway), ``systemMessage``
(for the user), ``decision`` (``block``, or ``approve`` at ``PreToolUse``) with ``reason``,
``hookSpecificOutput`` with ``hookEventName`` and, by event, ``permissionDecision``
(``allow``, ``deny``, ``ask``), ``permissionDecisionReason`` and ``updatedInput``
(``PreToolUse``) or ``additionalContext`` (``UserPromptSubmit``, ``SessionStart``,
``PostToolUse``, ``PostToolUseFailure``). Any other key, or a value of another type, is a
failure: a misspelt ``decison`` must not let a call through.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import orjson
from attrs import frozen

from hooks import JSONValue

from .process import Finished

__all__ = ["Answer", "read_answer"]

_REASON_MAX = 64 * 1024  # characters of a reason or message kept (the model reads reasons)

_DECISIONS: Mapping[str, frozenset[str]] = {
    "PreToolUse": frozenset({"block", "approve"}),
    "PostToolUse": frozenset({"block"}),
    "PostToolUseFailure": frozenset({"block"}),
    "UserPromptSubmit": frozenset({"block"}),
    "Stop": frozenset({"block"}),
    "SubagentStop": frozenset({"block"}),
    "PreCompact": frozenset({"block"}),
}
_SPECIFIC: Mapping[str, frozenset[str]] = {
    "PreToolUse": frozenset(
        {"hookEventName", "permissionDecision", "permissionDecisionReason", "updatedInput"}
    ),
    "PostToolUse": frozenset({"hookEventName", "additionalContext"}),
    "PostToolUseFailure": frozenset({"hookEventName", "additionalContext"}),
    "UserPromptSubmit": frozenset({"hookEventName", "additionalContext"}),
    "SessionStart": frozenset({"hookEventName", "additionalContext"}),
}
_TOP = frozenset(
    {
        "continue",
        "stopReason",
        "suppressOutput",
        "systemMessage",
        "decision",
        "reason",
        "hookSpecificOutput",
    }
)
_CONTINUE_MEANS = frozenset(
    {
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
        "Stop",
        "SubagentStop",
        "PreCompact",
    }
)
_PLAIN_IS_CONTEXT = frozenset({"UserPromptSubmit", "SessionStart"})


@frozen(kw_only=True)
class Answer:
    """One hook's answer, read. ``block`` is its reason to block (exit 2, ``decision:
    "block"``, ``permissionDecision: "deny"``); ``permission`` an ``allow``/``ask``;
    ``updated_input`` a new input; ``context`` text for the model; ``stop`` the reason to end
    the run (``continue: false``); ``system_message`` text for the user; ``note`` stdout that
    is neither (logged)."""

    block: str | None = None
    permission: Literal["allow", "ask"] | None = None
    permission_reason: str | None = None
    updated_input: Mapping[str, JSONValue] | None = None
    context: str | None = None
    stop: str | None = None
    system_message: str | None = None
    note: str | None = None


class OutputError(ValueError):
    """The hook's output cannot be read (the message says why)."""


def read_answer(event: str, finished: Finished) -> Answer:
    """Read how a hook answered ``event`` (Claude Code's name).

    Raises:
        OutputError: the hook failed: another exit code, a timeout, too much output, output
            that is not of the documented shape.
    """
    stderr = _text(finished.stderr).strip()
    if finished.timed_out:
        raise OutputError("timed out, and was killed with every process it started")
    if finished.overflow:
        raise OutputError("wrote more than 1 MiB of output")
    if finished.exit_code == 2:
        return Answer(block=_cut(stderr) or "blocked by a hook (exit code 2, no message)")
    if finished.exit_code != 0:
        code = finished.exit_code
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited {code}"
        raise OutputError(f"{how}{': ' + _cut(stderr, 2000) if stderr else ''}")
    stdout = _text(finished.stdout).strip()
    if not stdout:
        return Answer()
    if stdout.startswith(("{", "[")):
        try:
            data = orjson.loads(stdout)
        except orjson.JSONDecodeError as exc:
            raise OutputError(f"printed JSON that does not parse: {exc}") from None
        return _json_answer(event, data)
    if event in _PLAIN_IS_CONTEXT:
        return Answer(context=_cut(stdout))
    if event == "PreToolUse":
        raise OutputError(
            f"printed something that is not a JSON object: {_cut(stdout, 200)!r} (a PreToolUse "
            "hook answers with exit code 2 or a JSON object; its call is blocked)"
        )
    return Answer(note=_cut(stdout, 2000))


def _json_answer(event: str, data: Any) -> Answer:
    if not isinstance(data, dict):
        raise OutputError("printed JSON that is not an object")
    _only(data, _TOP, "")
    go_on = _typed(data, "continue", bool)
    stop_reason = _typed(data, "stopReason", str)
    _typed(data, "suppressOutput", bool)
    system_message = _typed(data, "systemMessage", str)
    decision = _typed(data, "decision", str)
    reason = _typed(data, "reason", str)
    block: str | None = None
    permission: Literal["allow", "ask"] | None = None
    permission_reason: str | None = None
    if decision is not None:
        if decision not in _DECISIONS.get(event, frozenset()):
            allowed = ", ".join(sorted(_DECISIONS.get(event, ()))) or "none"
            raise OutputError(
                f"'decision' {decision!r} means nothing at {event} (known: {allowed})"
            )
        if decision == "block":
            block = reason or f"blocked by a {event} hook (no reason given)"
        else:  # Claude Code's older "approve" at PreToolUse
            permission, permission_reason = "allow", reason
    specific = data.get("hookSpecificOutput")
    updated: Mapping[str, JSONValue] | None = None
    context: str | None = None
    if specific is not None:
        if not isinstance(specific, dict):
            raise OutputError("'hookSpecificOutput' must be an object")
        known = _SPECIFIC.get(event)
        if known is None:
            raise OutputError(f"'hookSpecificOutput' means nothing at {event}")
        _only(specific, known, "hookSpecificOutput.")
        named = _typed(specific, "hookEventName", str)
        if named is not None and named != event:
            raise OutputError(f"'hookSpecificOutput.hookEventName' is {named!r}, not {event!r}")
        context = _typed(specific, "additionalContext", str)
        said = _typed(specific, "permissionDecision", str)
        said_reason = _typed(specific, "permissionDecisionReason", str)
        if said == "deny":
            block = said_reason or "denied by a PreToolUse hook (no reason given)"
        elif said in ("allow", "ask"):
            # Claude Code: permissionDecision wins over the older decision field.
            permission, permission_reason = ("allow" if said == "allow" else "ask"), said_reason
        elif said is not None:
            raise OutputError(
                f"'hookSpecificOutput.permissionDecision' {said!r} is not allow, deny or ask"
            )
        updated = _typed(specific, "updatedInput", dict)
    stop = None
    if go_on is False:
        if event not in _CONTINUE_MEANS:
            raise OutputError(f"'continue': false means nothing at {event}")
        stop = stop_reason or f"a {event} hook ended the run (no stopReason given)"
    return Answer(
        block=None if block is None else _cut(block),
        permission=permission,
        permission_reason=None if permission_reason is None else _cut(permission_reason),
        updated_input=updated,
        context=None if context is None else _cut(context),
        stop=_cut(stop) if stop else None,
        system_message=None if system_message is None else _cut(system_message),
    )


def _only(obj: Mapping[str, Any], known: frozenset[str], prefix: str) -> None:
    unknown = sorted(set(obj) - known)
    if unknown:
        raise OutputError(
            f"unknown key(s) {', '.join(repr(prefix + k) for k in unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )


def _typed(obj: Mapping[str, Any], key: str, kind: type) -> Any:
    value = obj.get(key)
    if value is not None and (
        not isinstance(value, kind) or isinstance(value, bool) != (kind is bool)
    ):
        raise OutputError(f"{key!r} must be a {kind.__name__}, not {value!r}")
    return value


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _cut(text: str, limit: int = _REASON_MAX) -> str:
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more]"
