"""Errors of skills and prompt templates (drawn in ``harness/_errors.py``'s tree).

Discovery never raises (it reports :class:`~harness.ResourceDiagnostic`); these are for calls an
application makes with a name that does not fit, or a write the verdict refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from hooks import HarnessError

__all__ = [
    "SkillDisabledError",
    "SkillNotFoundError",
    "SkillWriteRefusedError",
    "TemplateNotFoundError",
]


class SkillNotFoundError(HarnessError, LookupError):
    """No skill has these names (or aliases); ``names`` are the unknown ones, ``known`` the
    skills there are. A batch call raising this changed nothing."""

    code = "skill_not_found"

    def __init__(self, names: Sequence[str], known: Sequence[str]) -> None:
        named = ", ".join(map(repr, names))
        which = f"no skill is named {named}" if len(names) == 1 else f"no skills are named {named}"
        super().__init__(f"{which}; the skills are: {', '.join(sorted(known)) or 'none'}")
        self.names, self.known = tuple(names), tuple(known)


class SkillDisabledError(HarnessError, LookupError):
    """The skill exists but is disabled (``disable_skills``), so it cannot be run or built."""

    code = "skill_disabled"

    def __init__(self, name: str) -> None:
        super().__init__(f"skill {name!r} is disabled; enable_skills([{name!r}]) to run it")
        self.name = name


class TemplateNotFoundError(HarnessError, LookupError):
    """No prompt template has this name; ``known`` lists the templates there are."""

    code = "template_not_found"

    def __init__(self, name: str, known: Sequence[str]) -> None:
        super().__init__(
            f"unknown prompt template {name!r}; known: {', '.join(sorted(known)) or 'none'}"
        )
        self.name, self.known = name, tuple(known)


class SkillWriteRefusedError(HarnessError, PermissionError):
    """``skill_write_verdict`` refused the write (``reason``), or the scope has no folder to
    write into; nothing was written."""

    code = "skill_write_refused"

    def __init__(self, scope: str, reason: str) -> None:
        super().__init__(f"cannot write a skill at scope {scope!r}: {reason}")
        self.scope, self.reason = scope, reason
