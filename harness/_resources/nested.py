"""Running one skill directly (the seeds' ``executeSkill``): a nested run in a child session.

The child session's header links the parent (``parentSession``), and the parent gets a
``harness.skills.run`` custom entry linking the child, so the nested run can be inspected while
the parent's context stays as it was (custom entries never reach the model).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from attrs import field, frozen

from hooks import AssistantMessage, JSONValue, Message
from repos import JsonlSessionRepo, MemorySessionRepo, Session, SessionRepo

from .errors import SkillDisabledError, SkillNotFoundError
from .manager import Resources
from .providers import SkillContext
from .records import SkillRecord

__all__ = ["SkillRunResult", "default_child_repo", "run_skill", "skill_instructions"]


def _messages(value: tuple[Message, ...]) -> tuple[Message, ...]:
    return tuple(value)


@frozen(kw_only=True)
class SkillRunResult:
    """What ``run_skill`` did.

    Attributes:
        skill, scope: the skill that ran.
        reply: the nested run's last reply.
        session_id, session_path: the child session (path None when in memory); it is closed.
        messages: the child session's context after the run, in order.
    """

    skill: str
    scope: str
    reply: AssistantMessage
    session_id: str
    session_path: str | None
    messages: tuple[Message, ...] = field(converter=_messages)


class ChildRun(Protocol):
    """The part of a nested harness ``run_skill`` uses."""

    async def prompt(self, text: str) -> AssistantMessage: ...

    async def shutdown(self) -> None: ...


def skill_instructions(record: SkillRecord, body: str) -> str:
    """The nested run's system prompt: the skill's body, framed (pi's explicit invocation)."""
    location = f' location="{record.path}"' if record.path else ""
    folder = f"\nReferences are relative to {Path(record.path).parent}." if record.path else ""
    return (
        f"You are carrying out the skill {record.name!r}. Follow its instructions.{folder}\n\n"
        f'<skill name="{record.name}" scope="{record.scope}"{location}>\n{body}\n</skill>'
    )


def default_child_repo(parent: Session) -> SessionRepo:
    """Where a child session goes when ``run_skill`` is given no repo: the parent's sessions
    root for a JSONL parent (``<root>/--cwd--/file.jsonl``), else a new in-memory repo."""
    if parent.path is not None:
        return JsonlSessionRepo(parent.path.parent.parent)
    return MemorySessionRepo()


async def run_skill(
    name: str,
    prompt: str,
    *,
    resources: Resources,
    ctx: SkillContext,
    parent: Session,
    repo: SessionRepo,
    make_child: Callable[[Session, str], ChildRun],
    link: Callable[[dict[str, JSONValue]], None],
) -> SkillRunResult:
    """Resolve an enabled skill, run ``prompt`` in a child session with the skill's body as the
    instructions, link the child from the parent with ``link(data)``.

    Raises:
        SkillNotFoundError: no such skill (or its body is gone).
        SkillDisabledError: the skill is disabled.
    """
    record = await resources.record(name, ctx)
    if record is None:
        listing = await resources.listing(ctx)
        raise SkillNotFoundError([name], [r.name for r in listing.records])
    if not record.enabled:
        raise SkillDisabledError(record.name)
    body = await resources.load(record.name, record.scope, ctx)
    if body is None:
        raise SkillNotFoundError([name], [])
    parent_ref = str(parent.path) if parent.path is not None else parent.id
    child_session = await repo.create(
        parent.cwd, parent_session=parent_ref, metadata={"skill": record.name}
    )
    try:
        child = make_child(child_session, skill_instructions(record, body))
        try:
            reply = await child.prompt(prompt)
        finally:
            await child.shutdown()
        messages = tuple(child_session.build_context().messages)
    finally:
        child_session.close()
    path = None if child_session.path is None else str(child_session.path)
    link(
        {
            "skill": record.name,
            "scope": record.scope,
            "sessionId": child_session.id,
            "sessionPath": path,
            "stopReason": reply.stop_reason,
        }
    )
    return SkillRunResult(
        skill=record.name,
        scope=record.scope,
        reply=reply,
        session_id=child_session.id,
        session_path=path,
        messages=messages,
    )
