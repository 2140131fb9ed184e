"""Errors of command hooks from settings.

Tree::

    HarnessError (hooks)
    ├── HookSettingsError      a settings file's (or code's) ``hooks`` do not parse
    │                          ("hook_settings_invalid"); ``path``, ``key``
    └── CommandHookError       one command hook failed: an exit code other than 0 and 2, a
                               timeout, output that cannot be read ("command_hook_failed");
                               reported as ``handler_error``, never raised to the caller
"""

from __future__ import annotations

from hooks import HarnessError

__all__ = ["CommandHookError", "HookSettingsError"]


class HookSettingsError(HarnessError, ValueError):
    """The ``hooks`` of a settings file (or of code) are not in Claude Code's shape.

    Attributes:
        path: the settings file, or ``"code"``.
        key: where in it, e.g. ``hooks.PreToolUse[0].hooks[1].timeout``.
        reason: what is wrong there.
    """

    code = "hook_settings_invalid"

    def __init__(self, path: str, key: str, reason: str) -> None:
        super().__init__(f"{path}: {key}: {reason}")
        self.path, self.key, self.reason = path, key, reason


class CommandHookError(HarnessError):
    """One command hook failed (sent in a ``handler_error`` event as its ``error``).

    Attributes:
        hook: the hook, as :meth:`CommandHook.describe` names it.
        reason: what went wrong (the exit code and stderr, the timeout, the bad output).
    """

    code = "command_hook_failed"

    def __init__(self, hook: str, reason: str) -> None:
        super().__init__(f"{hook}: {reason}")
        self.hook, self.reason = hook, reason
