"""``harness hooks list``: the command hooks in force for a folder, where each comes from, and
whether the project is trusted; and what ``run`` and ``chat`` share about hooks (loading them,
the warning for an untrusted project's hooks, printing what hooks tell the user)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from harness import AgentEndEvent, AgentHarness, CommandHook, CommandHooks, SystemMessageEvent

from ._common import HarnessGroup, one_line
from ._escape import echo, json_line

__all__ = ["attach_hook_output", "hooks", "load_command_hooks"]


def load_command_hooks(cwd: Path, *, trust_project: bool) -> CommandHooks:
    """The hooks of the user's settings and, when ``trust_project``, of ``cwd``'s
    ``.harness/settings.json``; a one-line warning on stderr when the project defines hooks
    that are ignored because it is not trusted.

    Raises:
        HookSettingsError: a settings file's hooks do not parse (nothing has run yet).
    """
    loaded = CommandHooks.load(cwd, trust_project=cwd if trust_project else False)
    if loaded.ignored:
        count = len(loaded.ignored)
        echo(
            f"warning: {one_line(str(cwd / '.harness' / 'settings.json'))} defines {count} "
            f"hook{'s' if count > 1 else ''} that will not run: the project is not trusted "
            "(--trust-project runs them; `harness hooks list` shows them)",
            err=True,
        )
    return loaded


def attach_hook_output(harness: AgentHarness, show: Callable[[str], None]) -> None:
    """Show the user what hooks tell them (``systemMessage``, stderr of a hook that cannot
    block) and why a run ended early (``continue: false``, the stop hooks' limit)."""

    def said(sender: object, event: SystemMessageEvent) -> None:
        show(f"hook: {one_line(event.message)} [{one_line(event.hook)}]")

    def ended(sender: object, event: AgentEndEvent) -> None:
        if event.end_reason:
            show(f"the run ended early: {one_line(event.end_reason)}")

    harness.connect("system_message", said)
    harness.connect("agent_end", ended)


@click.group(cls=HarnessGroup)
def hooks() -> None:
    """The command hooks (Claude Code's shape) that run or chat would run here."""


@hooks.command("list")
@click.option(
    "--cwd",
    "cwd",
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="List for an agent working in DIR (default: the current folder).",
)
@click.option(
    "--trust-project",
    is_flag=True,
    help="As run and chat with --trust-project: the project's hooks are in force.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def list_hooks(cwd: Path | None, trust_project: bool, as_json: bool) -> None:
    """Every hook in force (event, matcher, command, timeout, the settings file and key it
    comes from), then the project's hooks that do not run because it is not trusted."""
    where = (cwd or Path.cwd()).absolute()
    loaded = CommandHooks.load(where, trust_project=where if trust_project else False)
    project = where / ".harness" / "settings.json"
    if as_json:
        echo(
            json_line(
                {
                    "cwd": str(where),
                    "project_settings": str(project),
                    "project_trusted": loaded.project_trusted,
                    "hooks": [_json(h) for h in loaded.hooks],
                    "ignored": [_json(h) for h in loaded.ignored],
                },
                indent=True,
            )
        )
        return
    trust = "trusted" if loaded.project_trusted else "not trusted (its hooks do not run)"
    echo(f"project settings: {one_line(str(project))}: {trust}")
    for hook in loaded.hooks:
        _show(hook)
    if not loaded.hooks:
        echo("no hooks in force")
    if loaded.ignored:
        echo("ignored, the project is not trusted (--trust-project runs them):")
        for hook in loaded.ignored:
            _show(hook, indent="  ")


def _show(hook: CommandHook, indent: str = "") -> None:
    matcher = f" [{one_line(hook.matcher)}]" if hook.matcher else ""
    echo(f"{indent}{hook.claude_code_event} ({hook.event}){matcher}: {one_line(hook.command)}")
    where = "code" if hook.path is None else one_line(hook.path)
    echo(f"{indent}    timeout {hook.timeout_s:g} s; {hook.source}: {where} {hook.key}")


def _json(hook: CommandHook) -> dict[str, Any]:
    return {
        "event": hook.claude_code_event,
        "harness_event": hook.event,
        "matcher": hook.matcher,
        "command": hook.command,
        "timeout_s": hook.timeout_s,
        "source": hook.source,
        "path": hook.path,
        "key": hook.key,
    }
