"""``harness demo``: the whole product once, offline, on real files.

A scripted (faux) model asks to run ``rm -rf build``, which a ``tool_call`` hook blocks; then it
reads a file holding an API key, which a ``tool_result`` hook redacts before the model sees it;
then the session is forked just before the second prompt. Every event is printed as it fires.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attrs import frozen

from hooks import (
    EVENT_CLASSES,
    Block,
    Event,
    MessageEndEvent,
    PatchResult,
    TextContent,
    ToolCallEvent,
    ToolResultEvent,
    UserMessage,
)
from repos import JsonlSessionRepo, MessageEntry, Session

from ._harness import AgentHarness
from ._providers.faux import FauxModel, FauxReply, FauxToolCall
from ._tools.bash import bash_tool
from ._tools.read import read_tool

__all__ = ["DemoResult", "run_demo"]

SECRET = re.compile(r"sk-[A-Za-z0-9-]{6,}")


@frozen(kw_only=True)
class DemoResult:
    """What the demo made: the session, its fork, and their files."""

    session: Session
    fork: Session
    workspace: Path


def describe(event: Event) -> str:
    """One short line per event, for printing as it fires."""
    fields: dict[str, Any] = {}
    for key in ("turn_index", "tool_name", "input", "entry_id", "is_error", "kind"):
        if hasattr(event, key):
            value = getattr(event, key)
            fields[key] = dict(value) if isinstance(value, Mapping) else value  # read-only views
    if isinstance(event, MessageEndEvent):
        fields["role"] = event.message.role
    text = " ".join(f"{k}={v!r}" for k, v in fields.items())
    return f"{event.name:<22} {text}".rstrip()


async def run_demo(root: Path, echo: Callable[[str], None]) -> DemoResult:
    """Run the demo with sessions under ``root/sessions`` and a workspace in ``root/workspace``.

    Args:
        echo: prints one line (the CLI passes ``click.echo``).
    """
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.txt").write_text("deploy notes\nAPI_KEY=sk-demo-1234567890\n")
    repo = JsonlSessionRepo(root / "sessions")
    session = await repo.create(str(workspace))
    model = FauxModel(
        [
            FauxReply(
                text="I'll start by clearing the build folder.",
                tool_calls=[FauxToolCall(name="bash", arguments={"command": "rm -rf build"})],
            ),
            "Understood: I won't delete anything.",
            FauxReply(
                text="Reading the notes.",
                tool_calls=[FauxToolCall(name="read", arguments={"path": "notes.txt"})],
            ),
            lambda request: f"The notes say: {request.messages[-1].text.splitlines()[-1]}",
        ]
    )
    harness = AgentHarness(
        session=session, model=model, tools=[read_tool(), bash_tool()], cwd=workspace
    )

    @harness.on(ToolCallEvent)
    def no_rm_rf(sender: object, event: ToolCallEvent) -> Block | None:
        command = str(event.input.get("command", ""))
        if event.tool_name == "bash" and "rm -rf" in command:
            echo(f"  hook   no_rm_rf blocks {command!r}")
            return Block(reason=f"blocked by hook: {command!r} deletes files")
        return None

    @harness.on(ToolResultEvent)
    def redact(sender: object, event: ToolResultEvent) -> PatchResult | None:
        texts = [b.text for b in event.content if isinstance(b, TextContent)]
        if not any(SECRET.search(t) for t in texts):
            return None
        echo("  hook   redact replaces a secret in the tool result")
        return PatchResult(content=[TextContent(text=SECRET.sub("[REDACTED]", "\n".join(texts)))])

    for name in EVENT_CLASSES:
        if name != "message_update":
            harness.connect(
                name, lambda sender, event: echo(f"  event  {describe(event)}"), priority=-10
            )

    for prompt in ("Clean up the project, please.", "What do my deploy notes say?"):
        echo(f"\n> {prompt}")
        reply = await harness.prompt(prompt)
        echo(f"< {reply.text}")
    model.assert_consumed()

    second_prompt = next(
        e.id
        for e in reversed(list(session.entries()))
        if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage)
    )
    fork = await repo.fork(session.id, entry_id=second_prompt, position="before")
    return DemoResult(session=session, fork=fork, workspace=workspace)
