"""The ``task`` tool: the model hands a task to a named helper agent (Claude Code's ``Task``
tool and sub-agents; the OpenAI Agents SDK's agents as tools).

Each call runs a nested harness in a child session of its own. The child session's header
links the parent (``parentSession``, and in ``metadata`` the agent, the parent session's id,
the tool call's id and the entry holding it); the tool result's ``details`` link the child
(``sessionId``, ``sessionPath``). The child's last message is the tool result; a child that
fails, or stops at a run limit, gives an error result, never the parent's crash. Several
``task`` calls of one turn run at the same time (the loop runs a batch's calls in parallel).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from attrs import frozen

from hooks import AssistantMessage, JSONValue
from repos import Session, SessionRepo

from .._resources.discovery import MAX_DESCRIPTION
from .._tools.base import Tool, ToolResult, ToolRun
from .definitions import MAX_AGENTS, AgentDefinition, tool_name

__all__ = [
    "AGENT_RUN_METADATA",
    "TASK_TOOL_NAME",
    "ChildHarness",
    "TaskCall",
    "agent_instructions",
    "agent_tools",
    "run_task",
    "task_tool",
]

TASK_TOOL_NAME = "task"
"""The tool's name (Claude Code's ``Task``: its hooks' matchers and rules name it so)."""

AGENT_RUN_METADATA = "agent"
"""The key of a child session's header ``metadata`` naming its agent; beside it
``parentSessionId``, ``parentToolCallId`` and ``parentEntryId``."""

_log = logging.getLogger("harness")


class ChildHarness(Protocol):
    """The part of a nested harness :func:`run_task` uses."""

    async def prompt(self, text: str) -> AssistantMessage: ...

    async def shutdown(self) -> None: ...


@frozen(kw_only=True)
class TaskCall:
    """One ``task`` call, as the harness hands it to :func:`run_task`."""

    definition: AgentDefinition
    prompt: str
    description: str
    tool_call_id: str
    parent_entry_id: str | None
    """The parent's entry holding the call (the assistant message), when known."""


def task_tool(
    agents: Sequence[AgentDefinition], execute: Callable[[TaskCall], Awaitable[ToolResult]]
) -> Tool:
    """The ``task`` tool offering ``agents`` (by name, with their descriptions).

    Its input is Claude Code's: ``subagent_type`` (the agent's name), ``description`` (a few
    words) and ``prompt`` (the task, everything the agent needs: it sees nothing else of the
    conversation). ``execute`` runs one call; its ``parent_entry_id`` is filled in by it.

    Its description goes with every request, so it is bounded: the first :data:`MAX_AGENTS`
    agents are offered, each description cut to 1,024 characters (names are at most 64); the
    rest are counted in one line and logged, and cannot be called.
    """
    listed = list(agents[:MAX_AGENTS])
    by_name = {a.name: a for a in listed}
    lines = [f"- {a.name}: {a.description[:MAX_DESCRIPTION]}" for a in listed]
    if len(agents) > len(listed):
        more = len(agents) - len(listed)
        lines.append(f"({more} more agents are not listed.)")
        _log.warning(
            "%d agents were left out of the task tool (it offers at most %d): %s",
            more,
            MAX_AGENTS,
            ", ".join(a.name for a in agents[MAX_AGENTS:]),
        )
    listing = "\n".join(lines)

    async def run(input: Mapping[str, JSONValue], tool_run: ToolRun) -> ToolResult:
        definition = by_name[str(input["subagent_type"])]  # the schema's enum checked it
        return await execute(
            TaskCall(
                definition=definition,
                prompt=str(input["prompt"]),
                description=str(input.get("description", "")),
                tool_call_id=tool_run.tool_call_id,
                parent_entry_id=None,
            )
        )

    return Tool(
        name=TASK_TOOL_NAME,
        description=(
            "Hand a task to a helper agent, which works on it alone, with its own "
            "instructions and tools, and answers with one final message (you see nothing "
            "else of its work). Give it everything it needs in the prompt: it does not see "
            "this conversation. Several task calls in one reply run at the same time.\n\n"
            f"Agents:\n{listing}"
        ),
        parameters={
            "type": "object",
            "properties": {
                "subagent_type": {
                    "type": "string",
                    "enum": [a.name for a in listed],
                    "description": "The agent to hand the task to.",
                },
                "description": {
                    "type": "string",
                    "description": "The task in three to five words.",
                },
                "prompt": {"type": "string", "description": "The task, in full."},
            },
            "required": ["subagent_type", "prompt"],
        },
        execute=run,
        target="subagent_type",
    )


def agent_tools(
    definition: AgentDefinition,
    offered: Mapping[str, Tool],
    own: Mapping[str, Tool],
    never: Sequence[str],
) -> list[Tool]:
    """What a sub-agent may call: the tools its definition names (all of ``offered`` when it
    names none), taken from what the parent is ``offered`` or, for a trusted definition, from
    the parent's ``own`` tools too; minus its ``disallowed_tools`` and the ``never`` ones
    (``task``, ``skill``: tools of the parent's own state)."""
    offered = {n: t for n, t in offered.items() if n not in never}
    available = {**own, **offered} if definition.trusted else offered
    wanted = list(offered) if definition.tools is None else [tool_name(n) for n in definition.tools]
    refused = {tool_name(n) for n in definition.disallowed_tools} | set(never)
    return [available[n] for n in dict.fromkeys(wanted) if n in available and n not in refused]


def agent_instructions(definition: AgentDefinition) -> str:
    """The sub-agent's system prompt: its instructions, and what its answer is for."""
    return (
        f"{definition.instructions}\n\n"
        f"You are the agent {definition.name!r}, given one task by another agent. Your last "
        "message is your answer to it: the other agent sees nothing else of your work."
    )


async def run_task(
    call: TaskCall,
    *,
    parent: Session,
    repo: SessionRepo,
    make_child: Callable[[AgentDefinition, Session], ChildHarness],
) -> ToolResult:
    """Run one ``task`` call in a new child session of ``repo`` and make its tool result.

    Cancellation (the parent's ``abort()``) goes through to the child, which persists what
    it had (its reply as ``aborted``) before the cancellation goes on.
    """
    definition = call.definition
    parent_ref = str(parent.path) if parent.path is not None else parent.id
    metadata: dict[str, JSONValue] = {
        AGENT_RUN_METADATA: definition.name,
        "parentSessionId": parent.id,
        "parentToolCallId": call.tool_call_id,
        "parentEntryId": call.parent_entry_id,
    }
    child_session = await repo.create(parent.cwd, parent_session=parent_ref, metadata=metadata)
    details: dict[str, JSONValue] = {
        "agent": definition.name,
        "sessionId": child_session.id,
        "sessionPath": None if child_session.path is None else str(child_session.path),
    }
    try:
        try:
            child = make_child(definition, child_session)
        except Exception as exc:  # a model that cannot be made: the call fails, not the run
            return _failed(definition, details, exc)
        try:
            reply = await child.prompt(call.prompt)
        except Exception as exc:
            return _failed(definition, details, exc)
        finally:
            await child.shutdown()
    finally:
        child_session.close()
    details["stopReason"] = reply.stop_reason
    text = reply.text.strip()
    if reply.stop_reason in ("error", "aborted", "refusal"):
        why = reply.error_message or reply.stop_reason
        return ToolResult(
            content=f"The agent {definition.name!r} failed: {why}",
            details=details,
            is_error=True,
        )
    if reply.stop_reason in ("max_turns", "max_tokens", "max_cost"):
        return ToolResult(
            content=f"The agent {definition.name!r} stopped at a run limit ({reply.stop_reason}) "
            f"before it finished. Its last message: {text or '(no text)'}",
            details=details,
            is_error=True,
        )
    return ToolResult(content=text or "(the agent gave no text)", details=details)


def _failed(
    definition: AgentDefinition, details: dict[str, JSONValue], exc: Exception
) -> ToolResult:
    _log.info("agent %r failed: %s: %s", definition.name, type(exc).__name__, exc)
    details["stopReason"] = "error"
    details["error"] = {"type": type(exc).__name__, "message": str(exc)}
    return ToolResult(
        content=f"The agent {definition.name!r} failed: {type(exc).__name__}: {exc}",
        details=details,
        is_error=True,
    )
