"""``Resources``: one harness's skills, prompt templates and context files, and the state
around them (disabled intent, the last listing). ``AgentHarness`` calls into it; it knows
nothing of sessions or runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path

from attrs import field, frozen

from .._permissions.supervisor import SecuritySupervisor
from .catalog import DEFAULT_MAX_SKILLS, Resolved, SkillOffer, make_offer, resolve_precedence
from .context_files import ContextFile, scan_context_files
from .discovery import ReadCheck, SkillRoot
from .errors import SkillNotFoundError, TemplateNotFoundError
from .locations import PROJECT_FOLDERS, project_folders, user_folder
from .providers import (
    FileSystemSkillProvider,
    RefreshableSkillProvider,
    RootResolutionError,
    ScopeResolver,
    SkillContext,
    SkillProvider,
)
from .records import (
    DEFAULT_SCOPES,
    EXTRA_SCOPE,
    INTERNAL_SCOPE,
    PROJECT_SCOPE,
    USER_SCOPE,
    ResourceDiagnostic,
    SkillRecord,
    SkillSummary,
)
from .templates import PromptTemplate, scan_templates
from .verdict import SkillWriteRequest

__all__ = [
    "RefreshReport",
    "ResourceOptions",
    "Resources",
    "SkillBuildResult",
    "SkillListing",
    "default_scopes",
]

RootsOption = Sequence[str | Path] | Callable[[], Sequence[str | Path]]


def default_scopes(ctx: SkillContext) -> tuple[str, ...]:
    """The default resolver: ``project``, ``user``, ``extra``, ``internal`` for every turn."""
    return DEFAULT_SCOPES


def _roots(value: RootsOption) -> RootsOption:
    return value if callable(value) else tuple(value)


def _providers(value: Sequence[SkillProvider]) -> tuple[SkillProvider, ...]:
    return tuple(value)


@frozen(kw_only=True)
class ResourceOptions:
    """Where an ``AgentHarness`` finds skills, prompt templates and context files.

    ``AgentHarness(resources=None)`` turns all of it off (for embedding); the default,
    ``ResourceOptions()``, discovers from the working folder and the user's folder.

    Attributes:
        discover: look in the project (``.agents/`` and ``.harness/`` folders holding
            ``skills/`` and ``prompts/``, and ``AGENTS.md``/``CLAUDE.md``, from the working
            folder up to the repository root) and the user's folder
            (``platformdirs.user_config_path("harness")``: ``skills/``, ``prompts/``,
            ``AGENTS.md``). False keeps only the roots and providers given here.
        skill_roots: extra skill folders (scope ``extra``): a list, or a function returning one,
            called again on every ``refresh_skills`` (when it raises, the catalog is kept).
        template_roots: extra prompt template folders (scope ``extra``).
        internal_skill_roots: skill folders the application ships in its package (scope
            ``internal``), read only when ``internal_skills`` is True.
        internal_skills: turn the internal skills on (off by default, as in the Achilles seed).
        providers: more skill sources, consulted before the file system (an earlier provider
            wins a same-scope tie).
        scopes: the scope resolver, a pure function of the turn's :class:`SkillContext`
            returning scope tokens most specific first (default: project, user, extra,
            internal).
        max_skills: how many skills the model's catalog lists (the rest are counted).
        trust_project: let ``build_skills`` run the ``build`` commands of the project's
            skills. Off by default: a skill's frontmatter comes with the folder (a cloned
            repository), and a ``build`` line is a shell command, so an untrusted project's
            builds are reported as not run.
        build_timeout_s: how long one ``build`` may run; then its whole process group is
            killed and its result says so.
    """

    discover: bool = True
    skill_roots: RootsOption = field(default=(), converter=_roots)
    template_roots: Sequence[str | Path] = field(default=(), converter=tuple)
    internal_skill_roots: Sequence[str | Path] = field(default=(), converter=tuple)
    internal_skills: bool = False
    providers: tuple[SkillProvider, ...] = field(default=(), converter=_providers)
    scopes: ScopeResolver = default_scopes
    max_skills: int = DEFAULT_MAX_SKILLS
    trust_project: bool = False
    build_timeout_s: float = 600.0


@frozen(kw_only=True)
class SkillListing:
    """Every skill after precedence (``records``), and all diagnostics of the last scan and
    resolution (bad files, collisions with winner and loser paths, failed roots)."""

    scopes: tuple[str, ...]
    records: tuple[SkillRecord, ...]
    resolved: tuple[Resolved, ...]
    diagnostics: tuple[ResourceDiagnostic, ...]


@frozen(kw_only=True)
class RefreshReport:
    """What ``refresh_skills`` changed, by skill name; ``error`` is set (and nothing changed)
    when a root could not be resolved."""

    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    error: str | None = None


@frozen(kw_only=True)
class SkillBuildResult:
    """One skill's build: ``ok`` when the command exited 0; ``output`` is its stdout and
    stderr; ``error`` says why it could not start. A failure never stops the other builds."""

    name: str
    ok: bool
    returncode: int | None = None
    output: str = ""
    error: str | None = None


class Resources:
    """Skills, templates and context files for one working folder.

    Args:
        cwd: the working folder (project discovery starts here; builds without a folder run
            here).
        options: see :class:`ResourceOptions`.
        read_check: makes the check every file read is judged by, called anew for each scan
            and each skill body: the user's deny and ask ``read`` rules and the harness's
            private data (``SecuritySupervisor.read_check``; ``AgentHarness`` passes its
            supervisor's). A file it refuses (a project's ``AGENTS.md`` or ``SKILL.md``
            linked to a ``.env`` the rule ``read(.env)`` denies) is never read, and is a
            ``read_failed`` diagnostic. None: a default ``SecuritySupervisor``'s (the user's
            settings and the project's).
    """

    def __init__(
        self,
        cwd: Path,
        options: ResourceOptions,
        *,
        read_check: Callable[[], ReadCheck] | None = None,
    ) -> None:
        self._cwd = cwd
        self._options = options
        self._read_check = read_check or self._default_check
        self._root_failure: ResourceDiagnostic | None = None
        self._fs = FileSystemSkillProvider(self._skill_roots, read_check=self._read_check)
        self._disabled: set[str] = set()
        self._templates: tuple[PromptTemplate, ...] = ()
        self._context_files: tuple[ContextFile, ...] = ()
        self._document_diagnostics: tuple[ResourceDiagnostic, ...] = ()
        self._provider_diagnostics: tuple[ResourceDiagnostic, ...] = ()
        self._scan_documents()

    @property
    def options(self) -> ResourceOptions:
        return self._options

    @property
    def file_system(self) -> FileSystemSkillProvider:
        """The file-system provider (its ``roots`` and ``write_skill``)."""
        return self._fs

    @property
    def templates(self) -> tuple[PromptTemplate, ...]:
        return self._templates

    @property
    def context_files(self) -> tuple[ContextFile, ...]:
        return self._context_files

    @property
    def disabled(self) -> tuple[str, ...]:
        return tuple(sorted(self._disabled))

    @property
    def diagnostics(self) -> tuple[ResourceDiagnostic, ...]:
        """Diagnostics of discovery (skills, templates, context files), without collisions
        between scopes (those are in :meth:`listing`)."""
        failure = (self._root_failure,) if self._root_failure is not None else ()
        return (
            *failure,
            *self._fs.diagnostics,
            *self._provider_diagnostics,
            *self._document_diagnostics,
        )

    def template(self, name: str) -> PromptTemplate:
        """Raises :class:`TemplateNotFoundError`."""
        found = next((t for t in self._templates if t.name == name), None)
        if found is None:
            raise TemplateNotFoundError(name, [t.name for t in self._templates])
        return found

    def scopes(self, ctx: SkillContext) -> tuple[str, ...]:
        return tuple(self._options.scopes(ctx))

    async def listing(self, ctx: SkillContext) -> SkillListing:
        """List every provider at the turn's scopes and resolve precedence (a provider that
        raises is reported as ``provider_failed`` and left out)."""
        scopes = self.scopes(ctx)
        summaries: list[SkillSummary] = []
        failures: list[ResourceDiagnostic] = []
        for provider in self._sources():
            try:
                summaries += await provider.list(scopes, ctx)
            except Exception as exc:  # a host's provider must not break the turn
                failures.append(
                    ResourceDiagnostic(
                        code="provider_failed",
                        message=f"{type(provider).__name__}.list raised "
                        f"{type(exc).__name__}: {exc}",
                    )
                )
        resolved, collisions = resolve_precedence(summaries, scopes)
        records = tuple(
            SkillRecord(
                name=r.winner.name,
                aliases=r.winner.aliases,
                scope=r.winner.scope,
                path=r.winner.location,
                description=r.winner.description,
                disable_model_invocation=r.winner.disable_model_invocation,
                enabled=r.winner.name not in self._disabled,
                shadows=r.shadows,
                build=r.winner.build,
                digest=r.winner.digest,
            )
            for r in resolved
        )
        return SkillListing(
            scopes=scopes,
            records=records,
            resolved=tuple(resolved),
            diagnostics=(*self.diagnostics, *failures, *collisions),
        )

    async def offer(self, ctx: SkillContext) -> SkillOffer:
        """The model's catalog for a turn (see :func:`make_offer`)."""
        listing = await self.listing(ctx)
        return make_offer(
            listing.resolved,
            listing.scopes,
            disabled=self._disabled,
            max_skills=self._options.max_skills,
        )

    async def load(self, name: str, scope: str, ctx: SkillContext) -> str | None:
        """The body of ``name`` at ``scope`` from the first provider that has it."""
        for provider in self._sources():
            body = await provider.load(name, scope, ctx)
            if body is not None:
                return body
        return None

    async def record(self, name_or_alias: str, ctx: SkillContext) -> SkillRecord | None:
        listing = await self.listing(ctx)
        return _find(listing.records, name_or_alias)

    async def enable(self, names: Sequence[str], ctx: SkillContext) -> tuple[str, ...]:
        """Enable a batch of names or aliases; returns the canonical names whose state changed.

        Raises:
            SkillNotFoundError: some names are unknown; nothing was changed.
        """
        return await self._set_enabled(names, ctx, enabled=True)

    async def disable(self, names: Sequence[str], ctx: SkillContext) -> tuple[str, ...]:
        """Disable a batch; like :meth:`enable`."""
        return await self._set_enabled(names, ctx, enabled=False)

    async def _set_enabled(
        self, names: Sequence[str], ctx: SkillContext, *, enabled: bool
    ) -> tuple[str, ...]:
        listing = await self.listing(ctx)
        found = {n: _find(listing.records, n) for n in names}
        unknown = [n for n, r in found.items() if r is None]
        if unknown:
            raise SkillNotFoundError(unknown, [r.name for r in listing.records])
        canonical = tuple(dict.fromkeys(r.name for r in found.values() if r is not None))
        changed = tuple(n for n in canonical if (n in self._disabled) == enabled)
        if enabled:
            self._disabled.difference_update(canonical)
        else:
            self._disabled.update(canonical)
        return changed

    def keep_disabled(self, names: Sequence[str]) -> None:
        """Carry disabled intent over from another ``Resources`` (names need not exist yet)."""
        self._disabled.update(names)

    async def refresh(self, ctx: SkillContext) -> RefreshReport:
        """Scan again (re-running the roots resolver) and report what changed by name.

        Disabled intent is kept. When the roots cannot be resolved, nothing changes and the
        report's ``error`` says why (a ``root_failed`` diagnostic too).
        """
        before = {r.name: r for r in (await self.listing(ctx)).records}
        try:
            await asyncio.to_thread(self._fs.refresh)
        except RootResolutionError as exc:
            self._root_failure = _root_failed(exc)
            return RefreshReport(error=str(exc))
        self._root_failure = None
        self._refresh_providers()
        await asyncio.to_thread(self._scan_documents)
        after = {r.name: r for r in (await self.listing(ctx)).records}
        return RefreshReport(
            added=tuple(n for n in after if n not in before),
            updated=tuple(n for n in after if n in before and _changed(before[n], after[n])),
            removed=tuple(n for n in before if n not in after),
        )

    async def build(self, ctx: SkillContext) -> tuple[SkillBuildResult, ...]:
        """Run every enabled skill's ``build`` command at once, each in its skill's folder."""
        listing = await self.listing(ctx)
        builds = [r for r in listing.records if r.enabled and r.build is not None]
        return tuple(await asyncio.gather(*(self._build_one(r) for r in builds)))

    async def write_skill(
        self,
        request: SkillWriteRequest,
        *,
        name: str,
        description: str,
        body: str,
        disable_model_invocation: bool = False,
    ) -> Path:
        """``FileSystemSkillProvider.write_skill``; the caller refreshes."""
        return await self._fs.write_skill(
            request,
            name=name,
            description=description,
            body=body,
            disable_model_invocation=disable_model_invocation,
        )

    # --- internals ---------------------------------------------------------------------------

    def _sources(self) -> tuple[SkillProvider, ...]:
        return (*self._options.providers, self._fs)

    def _skill_roots(self) -> list[SkillRoot]:
        """Every skill root, in precedence order within each scope (nearest folder first)."""
        roots: list[SkillRoot] = []
        if self._options.discover:
            project = project_folders(self._cwd)
            for folder in project:
                roots += [
                    SkillRoot(folder / f / "skills", PROJECT_SCOPE, boundary=project[-1])
                    for f in PROJECT_FOLDERS
                ]
            roots.append(SkillRoot(user_folder() / "skills", USER_SCOPE, boundary=user_folder()))
        extra = self._options.skill_roots
        roots += [SkillRoot(Path(p), EXTRA_SCOPE) for p in (extra() if callable(extra) else extra)]
        if self._options.internal_skills:
            roots += [
                SkillRoot(Path(p), INTERNAL_SCOPE) for p in self._options.internal_skill_roots
            ]
        return roots

    def _scan_documents(self) -> None:
        # Each folder with the boundary its files are read beneath (see scan_templates).
        folders: list[tuple[Path, str, Path]] = []
        project: tuple[Path, ...] = ()
        if self._options.discover:
            project = project_folders(self._cwd)
            for folder in project:
                folders += [
                    (folder / f / "prompts", PROJECT_SCOPE, project[-1]) for f in PROJECT_FOLDERS
                ]
            folders.append((user_folder() / "prompts", USER_SCOPE, user_folder()))
        folders += [(Path(p), EXTRA_SCOPE, Path(p)) for p in self._options.template_roots]
        check = self._read_check()
        templates, template_diagnostics = scan_templates(folders, check)
        files, file_diagnostics = scan_context_files(
            project, user_folder() if self._options.discover else None, check
        )
        self._templates, self._context_files = tuple(templates), tuple(files)
        self._document_diagnostics = (*template_diagnostics, *file_diagnostics)

    def _default_check(self) -> ReadCheck:
        return SecuritySupervisor().read_check(self._cwd)

    def _refresh_providers(self) -> None:
        failures: list[ResourceDiagnostic] = []
        for provider in self._options.providers:
            if isinstance(provider, RefreshableSkillProvider):
                try:
                    provider.refresh()
                except Exception as exc:  # one host provider failing keeps the others
                    failures.append(_root_failed(exc))
        self._provider_diagnostics = tuple(failures)

    async def _build_one(self, record: SkillRecord) -> SkillBuildResult:
        if record.scope == PROJECT_SCOPE and not self._options.trust_project:
            return SkillBuildResult(
                name=record.name,
                ok=False,
                error="not run: its build command comes from the project's files and the "
                "project is not trusted (ResourceOptions(trust_project=True) runs it)",
            )
        folder = Path(record.path).parent if record.path is not None else self._cwd
        try:
            process = await asyncio.create_subprocess_shell(
                record.build or "",
                cwd=folder,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL,
                start_new_session=True,  # its own process group, killed whole at the end
            )
        except OSError as exc:
            return SkillBuildResult(name=record.name, ok=False, error=f"cannot start: {exc}")
        try:
            out, _ = await asyncio.wait_for(process.communicate(), self._options.build_timeout_s)
        except TimeoutError:
            await _kill_group(process)
            return SkillBuildResult(
                name=record.name,
                ok=False,
                error=f"timed out after {self._options.build_timeout_s:g} s; its processes "
                "were killed",
            )
        except asyncio.CancelledError:
            await _kill_group(process)
            raise
        finally:
            if process.returncode is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)  # children it left running
        return SkillBuildResult(
            name=record.name,
            ok=process.returncode == 0,
            returncode=process.returncode,
            output=out.decode("utf-8", "replace"),
        )


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()


def _find(records: Sequence[SkillRecord], name_or_alias: str) -> SkillRecord | None:
    exact = next((r for r in records if r.name == name_or_alias), None)
    return exact or next((r for r in records if name_or_alias in r.aliases), None)


def _changed(a: SkillRecord, b: SkillRecord) -> bool:
    keys = ("scope", "path", "description", "digest", "aliases", "disable_model_invocation")
    return any(getattr(a, k) != getattr(b, k) for k in keys)


def _root_failed(exc: Exception) -> ResourceDiagnostic:
    return ResourceDiagnostic(
        code="root_failed", message=f"skill roots could not be resolved: {exc}"
    )
