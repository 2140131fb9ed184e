"""Where skills come from: providers with a cheap ``list`` and a one-body ``load``
(@adonis-agora/agent's ``SkillProvider``), and the three this package ships.

Providers only answer; precedence, shadows, the catalog and what a turn may load are decided in
one place (:mod:`.catalog`), so a provider's filter bug cannot widen what a turn is offered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from attrs import field, frozen

from hooks import JSONValue

from .._fs import Location, beneath, write_file
from .discovery import (
    SKILL_FILE,
    ReadCheck,
    SkillRoot,
    read_body,
    refusal_code,
    refusal_text,
    scan_skills,
    valid_skill_name,
)
from .errors import SkillWriteRefusedError
from .frontmatter import FrontmatterError
from .records import ResourceDiagnostic, Skill, SkillSummary
from .verdict import SkillWriteRequest, skill_write_verdict

__all__ = [
    "CompositeSkillProvider",
    "FileSystemSkillProvider",
    "RefreshableSkillProvider",
    "RootResolutionError",
    "ScopeResolver",
    "SkillContext",
    "SkillProvider",
    "StaticSkillProvider",
]


def _mapping(value: Mapping[str, JSONValue]) -> Mapping[str, JSONValue]:
    return dict(value)


@frozen(kw_only=True)
class SkillContext:
    """Whose turn is asking, so which scopes apply: the session, the working folder and the
    prompt's ``metadata`` (``prompt(..., metadata=...)``)."""

    session_id: str | None
    cwd: Path
    metadata: Mapping[str, JSONValue] = field(factory=dict, converter=_mapping)


ScopeResolver = Callable[[SkillContext], Sequence[str]]
"""The scopes a turn may draw from, most specific first; the order is the precedence. Must be a
pure function of the context: its answer is journaled with the catalog."""


class SkillProvider(Protocol):
    """A source of skills. ``list`` runs for every catalog and must stay cheap; ``load`` reads
    one body, only when the model (or ``run_skill``) asks for it."""

    async def list(self, scopes: Sequence[str], ctx: SkillContext) -> Sequence[SkillSummary]:
        """Every skill visible at ``scopes``, in any order; skills of other scopes are
        dropped by the caller, not trusted."""
        ...

    async def load(self, name: str, scope: str, ctx: SkillContext) -> str | None:
        """The body of one skill, or None when it is gone."""
        ...


@runtime_checkable
class RefreshableSkillProvider(Protocol):
    """A provider whose listing is a snapshot that ``refresh_skills`` renews (the file system)."""

    @property
    def diagnostics(self) -> tuple[ResourceDiagnostic, ...]: ...

    def refresh(self) -> None:
        """Renew the snapshot. Raises ``RootResolutionError`` (the old snapshot is kept)."""
        ...


class RootResolutionError(Exception):
    """A root resolver raised; carried to ``refresh_skills``, which keeps the catalog."""


class StaticSkillProvider:
    """A fixed list of :class:`Skill` (module config, a host's constants)."""

    def __init__(self, skills: Sequence[Skill]) -> None:
        self._skills = tuple(skills)

    async def list(self, scopes: Sequence[str], ctx: SkillContext) -> Sequence[SkillSummary]:
        return [s for s in self._skills if s.scope in scopes]

    async def load(self, name: str, scope: str, ctx: SkillContext) -> str | None:
        return next((s.body for s in self._skills if (s.name, s.scope) == (name, scope)), None)


class CompositeSkillProvider:
    """Several providers read as one. Their order is only a tie-break: when two publish the
    same name at the same scope, the earlier one wins (precedence is by scope)."""

    def __init__(self, providers: Sequence[SkillProvider]) -> None:
        self._providers = tuple(providers)

    @property
    def providers(self) -> tuple[SkillProvider, ...]:
        return self._providers

    @property
    def diagnostics(self) -> tuple[ResourceDiagnostic, ...]:
        return tuple(
            d
            for p in self._providers
            if isinstance(p, RefreshableSkillProvider)
            for d in p.diagnostics
        )

    def refresh(self) -> None:
        for provider in self._providers:
            if isinstance(provider, RefreshableSkillProvider):
                provider.refresh()

    async def list(self, scopes: Sequence[str], ctx: SkillContext) -> Sequence[SkillSummary]:
        listed = await asyncio.gather(*(p.list(scopes, ctx) for p in self._providers))
        return [s for skills in listed for s in skills]

    async def load(self, name: str, scope: str, ctx: SkillContext) -> str | None:
        for provider in self._providers:
            body = await provider.load(name, scope, ctx)
            if body is not None:
                return body
        return None


class FileSystemSkillProvider:
    """Skills in folders (the default provider): a snapshot of :func:`scan` over ``roots``.

    Args:
        roots: the folders and their scopes, searched in order; or a function returning them,
            called again on every :meth:`refresh` (a resolver that raises keeps the snapshot).

        read_check: makes the check each scan and each body read is judged by (the user's
            ``read`` rules: ``SecuritySupervisor.read_check``), called anew for each; a file
            it refuses is a ``read_failed`` diagnostic, and a body it refuses is not served.
            None: only the harness's private data is refused (``Resources`` always passes
            one).

    When the roots function raises at construction, the provider starts empty with a
    ``root_failed`` diagnostic.
    """

    def __init__(
        self,
        roots: Sequence[SkillRoot] | Callable[[], Sequence[SkillRoot]],
        *,
        read_check: Callable[[], ReadCheck] | None = None,
    ) -> None:
        self._source = roots
        self._read_check = read_check
        self._roots: tuple[SkillRoot, ...] = ()
        self._skills: tuple[SkillSummary, ...] = ()
        self._places: dict[str, Location] = {}
        self._diagnostics: tuple[ResourceDiagnostic, ...] = ()
        try:
            self.refresh()
        except RootResolutionError as exc:
            self._diagnostics = (
                ResourceDiagnostic(
                    code="root_failed", message=f"skill roots could not be resolved: {exc}"
                ),
            )

    @property
    def roots(self) -> tuple[SkillRoot, ...]:
        return self._roots

    @property
    def diagnostics(self) -> tuple[ResourceDiagnostic, ...]:
        """What the last scan found and handled (bad files, same-scope collisions)."""
        return self._diagnostics

    def refresh(self) -> None:
        """Resolve the roots and scan them again.

        Raises:
            RootResolutionError: the roots function raised; the previous snapshot is kept.
        """
        if callable(self._source):
            try:
                roots = tuple(self._source())
            except Exception as exc:
                raise RootResolutionError(f"{type(exc).__name__}: {exc}") from exc
        else:
            roots = tuple(self._source)
        skills, diagnostics, places = scan_skills(roots, self._check())
        self._roots, self._skills, self._diagnostics = roots, tuple(skills), tuple(diagnostics)
        self._places = places

    async def list(self, scopes: Sequence[str], ctx: SkillContext) -> Sequence[SkillSummary]:
        return [s for s in self._skills if s.scope in scopes]

    async def load(self, name: str, scope: str, ctx: SkillContext) -> str | None:
        """The body read from disk now, beneath the same boundary the scan kept to (None: the
        skill or its file is gone, broken, or now leads outside)."""
        skill = next((s for s in self._skills if (s.name, s.scope) == (name, scope)), None)
        place = (
            None if skill is None or skill.location is None else self._places.get(skill.location)
        )
        if place is None:
            return None
        try:
            return await asyncio.to_thread(lambda: read_body(place, self._check()))
        except (OSError, UnicodeDecodeError, FrontmatterError):
            return None

    def _check(self) -> ReadCheck | None:
        return None if self._read_check is None else self._read_check()

    async def write_skill(
        self,
        request: SkillWriteRequest,
        *,
        name: str,
        description: str,
        body: str,
        disable_model_invocation: bool = False,
    ) -> Path:
        """Write ``<first root of request.scope>/<name>/SKILL.md`` atomically.

        The listing changes at the next :meth:`refresh` (``AgentHarness.write_skill`` does it).

        The verdict (:func:`skill_write_verdict`) is enforced first. The file is written to a
        temporary file in the same folder, flushed and renamed over the old one, so a reader
        sees the old skill or the new one, never half of it. Folders are created and opened
        beneath the root's boundary (the project, the user's config folder): a symlinked
        ``<root>/<name>`` leading out of it is refused, never written through.

        Returns:
            The path written.

        Raises:
            SkillWriteRefusedError: the verdict refused, no root serves ``request.scope``,
                ``name`` is not a valid skill name, or the path leads out of the scope's folder
                (code ``skill_write_refused``).
            ValueError: an empty description.
            OSError: the file could not be written.
        """
        verdict = skill_write_verdict(request)
        if not verdict.allowed:
            raise SkillWriteRefusedError(request.scope, verdict.reason or "refused")
        if not valid_skill_name(name):
            raise SkillWriteRefusedError(request.scope, f"{name!r} is not a valid skill name")
        if not description.strip():
            raise ValueError("a skill needs a description")
        root = next((r for r in self._roots if r.scope == request.scope), None)
        if root is None:
            raise SkillWriteRefusedError(request.scope, "no skills folder serves this scope")
        meta: dict[str, object] = {"name": name, "description": " ".join(description.split())}
        if disable_model_invocation:
            meta["disable-model-invocation"] = True
        import yaml  # here: `import harness` stays fast (issue 24)

        text = f"---\n{yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)}---\n\n{body}"
        target = root.path / name / SKILL_FILE
        try:
            await asyncio.to_thread(_write_beneath, root.top, target, text.encode("utf-8"))
        except OSError as exc:
            if refusal_code(exc) != "outside_root":
                raise
            raise SkillWriteRefusedError(
                request.scope, f"{target}: {refusal_text(exc)}; nothing written"
            ) from None
        return target


def _write_beneath(boundary: Path, target: Path, data: bytes) -> None:
    """Write ``target`` beneath ``boundary``, which is made first (it is trusted: the project,
    the user's config folder); everything under it is created by :func:`write_file`."""
    boundary.mkdir(parents=True, exist_ok=True)
    write_file(beneath(boundary, target), data, durable=True)
