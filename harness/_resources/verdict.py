"""Who may write a skill at which scope: @adonis-agora/agent's rules (seed 004).

A skill's body is instructions the model follows, so writing one at a scope edits the prompt of
everyone in that scope. Pure: no I/O, the host states who is asking.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from attrs import field, frozen

__all__ = ["SkillWriteRequest", "SkillWriteVerdict", "skill_write_verdict"]


def _tokens(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


@frozen(kw_only=True)
class SkillWriteRequest:
    """A request to publish a skill at ``scope``.

    Attributes:
        scope: the scope token the skill would be published at.
        scopes: the author's resolved scopes, most specific first (what their turns draw from);
            the first is their own.
        author: ``human`` (a person acting through a UI) or ``agent`` (a tool, a turn, a job).
            Stated by the caller: it cannot be inferred, and the rules turn on it.
        elevated: the host's own answer to "may this person administer that scope".
    """

    scope: str
    scopes: tuple[str, ...] = field(converter=_tokens)
    author: Literal["human", "agent"]
    elevated: bool = False


@frozen(kw_only=True)
class SkillWriteVerdict:
    """``allowed``, and when not, ``reason``; ``rule`` is the rule that decided (1-4)."""

    allowed: bool
    rule: Literal[1, 2, 3, 4]
    reason: str | None = None


def skill_write_verdict(request: SkillWriteRequest) -> SkillWriteVerdict:
    """May this author publish a skill at this scope?

    Follows @adonis-agora/agent's ``skillWriteVerdict``:

    1. Only into a scope you are in (``scope`` in ``scopes``): otherwise you would author
       instructions for people you have no relationship with.
    2. Your own scope (``scopes[0]``) is yours: it changes only your own prompt.
    3. Nothing but a human writes above its own scope, **whatever** ``elevated`` **says**: an
       agent that can write a shared skill lets anyone who talks to it edit everyone's prompt
       (prompt injection with persistence).
    4. A human writing above their own scope needs the host's ``elevated``.
    """
    if request.scope not in request.scopes:
        return SkillWriteVerdict(
            allowed=False,
            rule=1,
            reason=f"{request.scope!r} is not one of the author's scopes "
            f"({', '.join(request.scopes) or 'none'})",
        )
    if request.scope == request.scopes[0]:
        return SkillWriteVerdict(allowed=True, rule=2)
    if request.author != "human":
        return SkillWriteVerdict(
            allowed=False,
            rule=3,
            reason=f"only a human may write above their own scope {request.scopes[0]!r}; "
            "an agent may propose the skill for a person to publish",
        )
    if not request.elevated:
        return SkillWriteVerdict(
            allowed=False,
            rule=4,
            reason=f"writing at {request.scope!r}, above the author's own scope "
            f"{request.scopes[0]!r}, needs the host's elevated=True",
        )
    return SkillWriteVerdict(allowed=True, rule=4)
