"""The ``hooks`` of a settings file, in Claude Code's shape, read into :class:`CommandHook`s.

```json
{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
    {"type": "command", "command": "python3 .harness/hooks/guard.py", "timeout": 60}]}]}}
```

Claude Code's event names map onto the bus's signals (:data:`CLAUDE_CODE_EVENTS`); the
signal names are accepted as keys too. Everything else is refused with the file and the key
(:class:`HookSettingsError`): a hook that silently does not run is a guard that is not there.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import orjson
import re2
from attrs import Factory, field, frozen

from .._fs import read_regular_file
from .._permissions.folders import SETTINGS_MAX_BYTES
from .errors import HookSettingsError

__all__ = [
    "CLAUDE_CODE_EVENTS",
    "DEFAULT_TIMEOUT_S",
    "MATCHED_BY",
    "CommandHook",
    "HookSource",
    "parse_hooks",
    "read_hooks",
]

CLAUDE_CODE_EVENTS: Mapping[str, str] = {
    "PreToolUse": "tool_call",
    "PostToolUse": "tool_result",
    "PostToolUseFailure": "tool_result",
    "UserPromptSubmit": "user_prompt_submit",
    "Stop": "stop",
    "SubagentStop": "subagent_stop",
    "PreCompact": "session_before_compact",
    "SessionStart": "session_start",
    "SessionEnd": "session_end",
    "Notification": "notification",
}
"""Claude Code's hook event name -> the signal its command hooks receive. ``PostToolUse``
and ``PostToolUseFailure`` share ``tool_result``: the first runs for a call that ran and
succeeded, the second for one that ran and failed (neither for a call that never ran)."""

# A signal's name as a key means Claude Code's first event of that signal (tool_result:
# PostToolUse).
_CLAUDE_CODE_NAME = {ours: theirs for theirs, ours in reversed(tuple(CLAUDE_CODE_EVENTS.items()))}

MATCHED_BY: Mapping[str, str | None] = {
    "tool_call": "the tool's name, Claude Code's or ours (Bash or bash)",
    "tool_result": "the tool's name, Claude Code's or ours (Bash or bash)",
    "session_before_compact": "the trigger: manual or auto",
    "session_start": "the source: startup, resume, fork or compact",
    "session_end": "the reason",
    "notification": "the notification type: permission_prompt or idle_prompt",
    "user_prompt_submit": None,
    "stop": None,
    "subagent_stop": None,
}
"""What each event's ``matcher`` is matched against (None: it has no matcher)."""

DEFAULT_TIMEOUT_S = 60.0
"""Claude Code's default timeout of a command hook, in seconds."""
_MAX_TIMEOUT_S = 24 * 3600.0

HookSource = Literal["code", "user", "project"]


@frozen(kw_only=True)
class CommandHook:
    """One command hook from settings.

    Attributes:
        event: the signal it answers (``tool_call``, ...).
        matcher: a regular expression (RE2) matched against the whole of what
            :data:`MATCHED_BY` says; None (or ``""``, ``"*"`` in the file) matches everything.
        command: run with ``/bin/sh -c`` in the harness's working folder.
        timeout_s: seconds before the hook is killed, with every process it started.
        source: ``code``, ``user`` (the user's settings) or ``project``
            (``.harness/settings.json``).
        path: the settings file (None from code).
        key: where in it, e.g. ``hooks.PreToolUse[0].hooks[0]``.
        claude_code_event: Claude Code's name of the event (default: that of :attr:`event`,
            ``PreToolUse`` for ``tool_call``; ``PostToolUseFailure`` is given).
    """

    event: str
    matcher: str | None
    command: str
    timeout_s: float
    source: HookSource
    path: str | None
    key: str
    claude_code_event: str = field(
        default=Factory(lambda hook: _CLAUDE_CODE_NAME[hook.event], takes_self=True)
    )

    def matches(self, values: Sequence[str]) -> bool:
        """Whether the matcher matches any of ``values`` whole (no matcher: always)."""
        if self.matcher is None:
            return True
        pattern = _compile(self.matcher)
        return any(pattern.fullmatch(v.encode("utf-8", "surrogateescape")) for v in values)

    def describe(self) -> str:
        """The hook for a message: its command and where it was configured."""
        where = "code" if self.path is None else self.path
        return f"command hook {self.command!r} ({where}, {self.key})"


@functools.lru_cache(maxsize=256)  # a matcher is matched on every event of its kind
def _compile(pattern: str) -> Any:
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    return re2.compile(pattern.encode("utf-8", "surrogateescape"), options)


def read_hooks(
    path: Path, *, source: HookSource, root: Path | None = None
) -> tuple[CommandHook, ...]:
    """The command hooks of one settings file (none when it does not exist or has no
    ``hooks``).

    Read as the permission settings are (``load_settings``): regular files only, at most
    1 MB, beneath ``root`` when given (a project's folder: a symlink leading out is refused).

    Raises:
        HookSettingsError: the file cannot be read, is not JSON, or its ``hooks`` are not in
            Claude Code's shape (the message names the file and the key).
    """
    try:
        raw = read_regular_file(path, max_bytes=SETTINGS_MAX_BYTES, root=root)
        if raw is None:
            return ()
        data: Any = orjson.loads(raw)
    except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise HookSettingsError(str(path), "(file)", f"cannot read settings: {exc}") from None
    if not isinstance(data, Mapping):
        raise HookSettingsError(str(path), "(file)", "settings must be a JSON object")
    return parse_hooks(data, source=source, path=str(path))


def parse_hooks(
    settings: Mapping[str, Any], *, source: HookSource, path: str | None = None
) -> tuple[CommandHook, ...]:
    """The command hooks of a settings object: ``{"hooks": {EVENT: [{"matcher": ...,
    "hooks": [{"type": "command", "command": ..., "timeout": ...}]}]}}`` (Claude Code's
    shape; ``timeout`` in seconds, default :data:`DEFAULT_TIMEOUT_S`). Keys beside ``hooks``
    are ignored. Hooks come out in settings order.

    Raises:
        HookSettingsError: anything else: an unknown event, a matcher that is no RE2 regular
            expression or that an event without matchers is given, a hook type other than
            ``command``, an empty command, a timeout that is not a positive number, an
            unknown key (the message names ``path``, or ``code``, and the key).
    """
    where = path or "code"
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, Mapping):
        raise HookSettingsError(where, "hooks", "must be an object of events")
    found: list[CommandHook] = []
    for name, groups in hooks.items():
        key = f"hooks.{name}"
        event = CLAUDE_CODE_EVENTS.get(name, name if name in _CLAUDE_CODE_NAME else None)
        if event is None:
            known = ", ".join(CLAUDE_CODE_EVENTS)
            raise HookSettingsError(
                where, key, f"unknown event (known: {known}; or ours: {', '.join(MATCHED_BY)})"
            )
        if not isinstance(groups, list):
            raise HookSettingsError(where, key, "must be a list of matcher groups")
        for g, group in enumerate(groups):
            theirs = name if name in CLAUDE_CODE_EVENTS else _CLAUDE_CODE_NAME[event]
            found.extend(_group(group, event, theirs, source, path, f"{key}[{g}]"))
    return tuple(found)


def _group(
    group: Any, event: str, theirs: str, source: HookSource, path: str | None, key: str
) -> list[CommandHook]:
    where = path or "code"
    if not isinstance(group, Mapping):
        raise HookSettingsError(where, key, 'must be an object: {"matcher": ..., "hooks": [...]}')
    _known_keys(group, {"matcher", "hooks"}, where, key)
    matcher = _matcher(group.get("matcher"), event, where, f"{key}.matcher")
    entries = group.get("hooks")
    if not isinstance(entries, list):
        raise HookSettingsError(where, f"{key}.hooks", "must be a list of hooks")
    out = []
    for h, entry in enumerate(entries):
        here = f"{key}.hooks[{h}]"
        if not isinstance(entry, Mapping):
            raise HookSettingsError(where, here, 'must be an object: {"type": "command", ...}')
        _known_keys(entry, {"type", "command", "timeout"}, where, here)
        if entry.get("type") != "command":
            raise HookSettingsError(
                where, f"{here}.type", f"{entry.get('type')!r} is not supported (only 'command')"
            )
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip() or "\0" in command:
            raise HookSettingsError(where, f"{here}.command", "must be a non-empty command")
        timeout = entry.get("timeout", DEFAULT_TIMEOUT_S)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or not 0 < timeout <= _MAX_TIMEOUT_S
        ):
            raise HookSettingsError(
                where, f"{here}.timeout", f"must be seconds, above 0 and at most a day: {timeout!r}"
            )
        out.append(
            CommandHook(
                event=event,
                matcher=matcher,
                command=command,
                timeout_s=float(timeout),
                source=source,
                path=path,
                key=here,
                claude_code_event=theirs,
            )
        )
    return out


def _matcher(value: Any, event: str, where: str, key: str) -> str | None:
    if value is None or value in ("", "*"):
        return None
    if not isinstance(value, str):
        raise HookSettingsError(where, key, f"must be a string, not {value!r}")
    if MATCHED_BY[event] is None:
        raise HookSettingsError(
            where, key, f"{_CLAUDE_CODE_NAME[event]} hooks have no matcher (they always run)"
        )
    try:
        _compile(value)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        shown = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise HookSettingsError(where, key, f"not a regular expression (RE2): {shown}") from None
    return value


def _known_keys(obj: Mapping[str, Any], known: set[str], where: str, key: str) -> None:
    unknown = sorted(set(obj) - known)
    if unknown:
        raise HookSettingsError(
            where,
            key,
            f"unknown key(s) {', '.join(map(repr, unknown))} (known: {', '.join(sorted(known))})",
        )
