"""Command hooks from settings, in Claude Code's shape: a receiver kind on the bus, not a second
bus (DESIGN §1, docs/hooks.md).

A command hook is a shell command a settings file (or code) attaches to an event. It reads the
event as JSON on stdin and answers with its exit code and, optionally, a JSON object on stdout;
:class:`CommandHooks` connects one receiver per signal to a harness, which runs that signal's
matching hooks in parallel and returns the signal's own result (``Block``, ``PatchInput``,
``Allow``, ``Ask``, ``PatchResult``, ``AddContext``, ``Continue``, ``Cancel``), so command
hooks and Python hooks combine by the bus's rules.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from .._permissions.supervisor import PROJECT_SETTINGS, user_settings_path
from .errors import CommandHookError, HookSettingsError
from .payload import CLAUDE_CODE_TOOL_NAMES, FIELD_ALIASES
from .receivers import TOP_LEVEL_ONLY, HookHost, HookReceiver
from .settings import (
    CLAUDE_CODE_EVENTS,
    DEFAULT_TIMEOUT_S,
    MATCHED_BY,
    CommandHook,
    HookSource,
    parse_hooks,
    read_hooks,
)

__all__ = [
    "CLAUDE_CODE_EVENTS",
    "CLAUDE_CODE_TOOL_NAMES",
    "DEFAULT_TIMEOUT_S",
    "FIELD_ALIASES",
    "HOOK_CONTEXT_TYPE",
    "MATCHED_BY",
    "CommandHook",
    "CommandHookError",
    "CommandHooks",
    "HookSettingsError",
    "HookSource",
]

HOOK_CONTEXT_TYPE = "hook_context"
"""``customType`` of the messages that carry a hook's ``AddContext`` text to the model."""

_BACKSTOP_S = 10.0  # the bus's own timeout is this much longer than the slowest hook's


class CommandHooks:
    """The command hooks in force for one working folder, and those ignored.

    Build it with :meth:`load` (settings files, and code), :meth:`from_settings` (code only)
    or from :class:`CommandHook` values; hand it to ``AgentHarness(command_hooks=...)``, which
    connects it and passes it to nested runs. Hooks are read once, when it is built (Claude
    Code also takes a snapshot of its hooks at startup): an edit to a settings file applies
    from the next one.

    Args:
        hooks: the hooks that run, in settings order (code, user, project).
        ignored: hooks found in an untrusted project's settings, which do not run.
        project_trusted: whether the project's settings were trusted (None: not read).
    """

    def __init__(
        self,
        hooks: Iterable[CommandHook] = (),
        *,
        ignored: Iterable[CommandHook] = (),
        project_trusted: bool | None = None,
    ) -> None:
        self._hooks = tuple(hooks)
        self._ignored = tuple(ignored)
        self._project_trusted = project_trusted

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> CommandHooks:
        """Hooks from code, in a settings object's shape: ``{"hooks": {"PreToolUse": [...]}}``.

        Raises:
            HookSettingsError: not in Claude Code's shape (code ``hook_settings_invalid``).
        """
        return cls(parse_hooks(settings, source="code"))

    @classmethod
    def load(
        cls,
        cwd: str | os.PathLike[str],
        *,
        settings: Mapping[str, Any] | None = None,
        setting_sources: Iterable[HookSource] = ("user", "project"),
        user_settings: Path | None = None,
        trust_project: bool | str | os.PathLike[str] = False,
    ) -> CommandHooks:
        """The hooks of code (``settings``), the user's settings file and the project's
        ``.harness/settings.json`` under ``cwd``, in that order.

        The project's hooks run only when the project is trusted (``trust_project``: True, or
        the path of ``cwd``, as ``SecuritySupervisor(trust_project=...)`` and
        ``--trust-project``): a cloned repository must not run commands because it was
        opened. Untrusted, they are kept in :attr:`ignored`, so a front end can say so.

        Args:
            cwd: the working folder (its ``.harness/settings.json`` is the project's).
            settings: hooks from code, in a settings object's shape.
            setting_sources: which files to read (``user``, ``project``).
            user_settings: the user's settings file (default: ``settings.json`` in the user
                config folder, as the supervisor reads).
            trust_project: see above.

        Raises:
            HookSettingsError: a file cannot be read or its ``hooks`` are not in Claude Code's
                shape (the message names the file and the key); an untrusted project's too.
        """
        folder = Path(cwd)
        hooks = list(parse_hooks(settings, source="code")) if settings else []
        sources = tuple(setting_sources)
        if "user" in sources:
            hooks += read_hooks(user_settings or user_settings_path(), source="user")
        ignored: tuple[CommandHook, ...] = ()
        trusted: bool | None = None
        if "project" in sources:
            found = read_hooks(folder / PROJECT_SETTINGS, source="project", root=folder)
            trusted = (
                trust_project
                if isinstance(trust_project, bool)
                else os.path.realpath(trust_project) == os.path.realpath(folder)
            )
            if trusted:
                hooks += found
            else:
                ignored = found
        return cls(hooks, ignored=ignored, project_trusted=trusted)

    @property
    def hooks(self) -> tuple[CommandHook, ...]:
        """The hooks that run, in settings order."""
        return self._hooks

    @property
    def ignored(self) -> tuple[CommandHook, ...]:
        """Hooks of an untrusted project, which do not run."""
        return self._ignored

    @property
    def project_trusted(self) -> bool | None:
        """Whether the project's settings were trusted (None: they were not read)."""
        return self._project_trusted

    def connect(self, harness: HookHost) -> Callable[[], None]:
        """Connect one receiver per signal that has hooks to ``harness`` (through
        ``harness.connect``, so ``shutdown()`` disconnects them); returns a function that
        disconnects them. ``AgentHarness(command_hooks=...)`` calls this itself.

        A nested run (``harness.depth`` > 0) gets no ``SessionStart``, ``SessionEnd`` or
        ``UserPromptSubmit`` hooks, as a Claude Code subagent does not; its tool calls,
        compactions, notifications and ``SubagentStop`` run them as usual."""
        # One receiver per Claude Code event: PostToolUse and PostToolUseFailure share a signal
        # but not the calls they run for.
        by_event: dict[str, list[CommandHook]] = {}
        for hook in self._hooks:
            if harness.depth > 0 and hook.event in TOP_LEVEL_ONLY:
                continue
            by_event.setdefault(hook.claude_code_event, []).append(hook)
        disconnects = [
            harness.connect(
                hooks[0].event,
                HookReceiver(hooks[0].event, hooks),
                timeout_s=max(h.timeout_s for h in hooks) + _BACKSTOP_S,
            )
            for hooks in by_event.values()
        ]

        def disconnect() -> None:
            for undo in disconnects:
                undo()

        return disconnect
