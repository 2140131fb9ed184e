"""The values resources are made of: skill summaries and records, diagnostics, scope tokens.

All frozen attrs classes holding tuples, so a record handed to an application cannot change
under the harness. Paths are strings (JSON-ready, as they appear in the catalog and journal).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, TypeAlias

from attrs import field, frozen

__all__ = [
    "DEFAULT_SCOPES",
    "EXTRA_SCOPE",
    "INTERNAL_SCOPE",
    "PROJECT_SCOPE",
    "USER_SCOPE",
    "DiagnosticCode",
    "ResourceDiagnostic",
    "Skill",
    "SkillRecord",
    "SkillSummary",
]

PROJECT_SCOPE = "project"
"""Skills in ``.agents/skills`` / ``.harness/skills``, from the working folder to the repo root."""
USER_SCOPE = "user"
"""Skills in the user's config folder (``platformdirs.user_config_path("harness") / "skills"``)."""
EXTRA_SCOPE = "extra"
"""Skills under the application's extra roots."""
INTERNAL_SCOPE = "internal"
"""Skills the application ships inside its package (off unless enabled)."""
DEFAULT_SCOPES: tuple[str, ...] = (PROJECT_SCOPE, USER_SCOPE, EXTRA_SCOPE, INTERNAL_SCOPE)
"""The default precedence, most specific first."""

DiagnosticCode: TypeAlias = Literal[
    "invalid_name",
    "missing_description",
    "parse_failed",
    "read_failed",
    "list_failed",
    "outside_root",
    "invalid_metadata",
    "over_budget",
    "collision",
    "root_failed",
    "provider_failed",
]


def _strings(value: Iterable[str] | str) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@frozen(kw_only=True)
class ResourceDiagnostic:
    """Something discovery found and handled; discovery never raises.

    Codes follow pi's loader (reference §6.2) plus our own: ``invalid_name``,
    ``missing_description``, ``parse_failed``, ``read_failed`` (unreadable, not UTF-8, no
    regular file, larger than the cap), ``list_failed``, ``outside_root`` (a file or folder
    that leads out of its scope's folder through a symlink or ``..``: never read),
    ``invalid_metadata``, ``over_budget`` (a context file past the total budget of context
    files), ``collision`` (``winner_path``, ``loser_path`` and ``reason`` say who
    won and why), ``root_failed`` (a root resolver raised) and ``provider_failed``.

    Attributes:
        kind: what was being loaded: ``skill``, ``template`` or ``context_file``.
        dropped: True when the resource was not loaded because of this.
    """

    code: DiagnosticCode
    message: str
    kind: Literal["skill", "template", "context_file"] = "skill"
    path: str | None = None
    name: str | None = None
    dropped: bool = False
    winner_path: str | None = None
    loser_path: str | None = None
    reason: str | None = None


@frozen(kw_only=True)
class SkillSummary:
    """One skill as a provider lists it: cheap to produce, no body.

    Attributes:
        name: unique within a scope; what the model passes to the ``skill`` tool.
        description: one line saying which task it covers (the model reads it to choose).
        scope: the scope token it is published at.
        location: where its body lives (a ``SKILL.md`` path), or None.
        aliases: other names :meth:`AgentHarness.get_skill_record` accepts.
        disable_model_invocation: left out of the model's catalog; a user may still run it.
        build: a shell command ``build_skills`` runs in the skill's folder, or None.
        digest: a fingerprint of the descriptor (changes when the file does), or None.
    """

    name: str
    description: str
    scope: str
    location: str | None = None
    aliases: tuple[str, ...] = field(default=(), converter=_strings)
    disable_model_invocation: bool = False
    build: str | None = None
    digest: str | None = None


@frozen(kw_only=True)
class Skill(SkillSummary):
    """A skill with its instructions, for :class:`StaticSkillProvider`."""

    body: str


@frozen(kw_only=True)
class SkillRecord:
    """A skill as the harness manages it: the winner of its name after scope precedence.

    Attributes:
        name, aliases, scope, description, disable_model_invocation, build: as listed.
        path: the descriptor file, or None for a skill with no file (a static provider).
        enabled: False after ``disable_skills``; a disabled skill is offered to nobody and
            cannot be run or built.
        shadows: scopes of same-named skills this one outranks, widest last (empty: none).
    """

    name: str
    aliases: tuple[str, ...] = field(converter=_strings)
    scope: str
    path: str | None
    description: str
    disable_model_invocation: bool
    enabled: bool
    shadows: tuple[str, ...] = field(default=(), converter=_strings)
    build: str | None = None
    digest: str | None = None
