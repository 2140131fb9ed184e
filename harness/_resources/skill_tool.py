"""The built-in ``skill`` tool: the body of a skill offered to this turn, and nothing else.

The catalog is the authorization boundary (adonis): a name the turn was not offered is refused
with the names that were, so a model that invents a name, or repeats one from another session,
cannot reach a body through a provider that would serve it. The tool definition carries no enum
of names: they live in the system prompt, where the journal holds them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from hooks import JSONValue
from repos import Session

from .._tools.base import Tool, ToolResult, ToolRun
from .catalog import SkillOffer
from .journal import SkillJournal
from .providers import SkillContext

__all__ = ["SKILL_TOOL_NAME", "serve_skill", "skill_tool"]

SKILL_TOOL_NAME = "skill"

_DESCRIPTION = (
    "Read one of the procedures listed in <skills>. Call it before doing a task a listed skill "
    "covers, and follow what it returns. It performs nothing and changes nothing: it only gives "
    "you instructions you do not have yet."
)
_PARAMETERS: dict[str, JSONValue] = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "A skill name from <skills>"}},
    "required": ["name"],
    "additionalProperties": False,
}

Serve = Callable[[str], Awaitable[ToolResult]]


def skill_tool(serve: Serve) -> Tool:
    """The ``skill`` tool; ``serve(name)`` produces its result (see :func:`serve_skill`)."""

    async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        return await serve(str(input["name"]))

    return Tool(
        name=SKILL_TOOL_NAME,
        description=_DESCRIPTION,
        parameters=_PARAMETERS,
        execute=execute,
        kind="read",
    )


async def serve_skill(
    name: str,
    *,
    journal: SkillJournal,
    load: Callable[[str, str, SkillContext], Awaitable[str | None]],
    ctx: SkillContext,
    session: Session,
) -> ToolResult:
    """Serve one ``skill`` call against the journal's offer.

    A body already served on this branch is served again from the journal; any other is loaded
    and journaled (``harness.skills.body``) before it is returned. ``details`` is
    ``{"name", "scope", "location", "journaled"}``.
    """
    offer = journal.offer or SkillOffer(scopes=(), entries=())
    entry = offer.entry(name)
    if entry is None:
        valid = ", ".join(e.name for e in offer.entries) or "none"
        return ToolResult(
            content=f"No skill {name!r} is offered to this turn. Valid names: {valid}.",
            is_error=True,
        )
    body = journal.body(entry.name, entry.scope)
    journaled = body is not None
    if body is None:
        body = await load(entry.name, entry.scope, ctx)
        if body is None:
            return ToolResult(
                content=f"Skill {name!r} is no longer available; carry on without it.",
                is_error=True,
            )
        journal.record_body(session, entry.name, entry.scope, entry.location, body)
    location = f' location="{entry.location}"' if entry.location else ""
    return ToolResult(
        content=f'<skill name="{entry.name}" scope="{entry.scope}"{location}>\n{body}\n</skill>',
        details={
            "name": entry.name,
            "scope": entry.scope,
            "location": entry.location,
            "journaled": journaled,
        },
    )
