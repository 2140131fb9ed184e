"""Finding skills on disk, in the Agent Skills layout (pi's loader, reference §6.1).

A skill is a folder holding ``SKILL.md``, or a ``*.md`` file at the top level of a skills root.
Folders starting with ``.``, ``node_modules`` and paths matched by a ``.gitignore`` inside the
root are skipped; a folder holding ``SKILL.md`` is not descended (nested skills are ignored);
a folder or file reached twice through symbolic links counts once, across roots too, so
overlapping roots are deduplicated by descriptor path. Problems become diagnostics, never
exceptions.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pathspec
from attrs import frozen

from .frontmatter import FrontmatterError, split_frontmatter
from .records import DiagnosticCode, ResourceDiagnostic, SkillSummary

__all__ = ["SkillRoot", "first_paragraph", "read_body", "scan_skills", "valid_skill_name"]

SKILL_FILE = "SKILL.md"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


@frozen
class SkillRoot:
    """A folder searched for skills, and the scope token its skills are published at."""

    path: Path
    scope: str


def valid_skill_name(name: str) -> bool:
    """pi's rule: 1-64 of ``[a-z0-9-]``, no leading, trailing or doubled hyphen."""
    return len(name) <= MAX_NAME and _NAME.fullmatch(name) is not None


def scan_skills(
    roots: Sequence[SkillRoot],
) -> tuple[list[SkillSummary], list[ResourceDiagnostic]]:
    """Every skill under ``roots`` (missing roots are skipped), in root order then name order.

    Several skills of one name in one scope: the first found wins and a ``collision``
    diagnostic names both paths (different scopes are resolved later, by precedence).
    """
    seen: set[Path] = set()
    found: list[SkillSummary] = []
    diagnostics: list[ResourceDiagnostic] = []
    for root in roots:
        if not root.path.is_dir():
            continue
        for path, top_level in _descriptors(root.path, diagnostics):
            real = path.resolve()
            if real in seen:
                continue
            seen.add(real)
            skill = _load(path, root.scope, top_level, diagnostics)
            if skill is not None:
                found.append(skill)
    return _first_per_scope(found, diagnostics), diagnostics


def read_body(path: str | Path) -> str:
    """The body of a skill or template file (frontmatter removed).

    Raises:
        OSError: the file cannot be read. FrontmatterError: its frontmatter is broken.
    """
    return split_frontmatter(Path(path).read_text(encoding="utf-8"))[1].strip()


def first_paragraph(body: str) -> str:
    """The first paragraph of ``body``, skipping headings, HTML comments and code fences (the
    description pi's harness falls back to, for Claude Code compatibility)."""
    lines: list[str] = []
    fenced = comment = False
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            fenced = not fenced
            continue
        if comment or line.startswith("<!--"):
            comment = "-->" not in line
            continue
        if fenced or line.startswith("#"):
            if lines:
                break
            continue
        if not line:
            if lines:
                break
            continue
        lines.append(line)
    return " ".join(lines)


def _descriptors(root: Path, diagnostics: list[ResourceDiagnostic]) -> Iterator[tuple[Path, bool]]:
    """(descriptor path, at the root's top level) for every skill file under ``root``."""
    visited: set[Path] = set()

    def walk(
        folder: Path, ignores: tuple[tuple[Path, pathspec.GitIgnoreSpec], ...]
    ) -> Iterator[Path]:
        real = folder.resolve()
        if real in visited:  # a symbolic link loop, or a folder reached twice
            return
        visited.add(real)
        descriptor = folder / SKILL_FILE
        if descriptor.is_file():
            yield descriptor
            return
        ignores = (*ignores, *_ignore_file(folder, diagnostics))
        try:
            with os.scandir(folder) as listing:
                children = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            diagnostics.append(
                ResourceDiagnostic(
                    code="list_failed", message=f"cannot list {folder}: {exc}", path=str(folder)
                )
            )
            return
        for child in children:
            path = Path(child.path)
            if child.name.startswith(".") or child.name == "node_modules":
                continue
            is_dir = path.is_dir()
            if _ignored(path, is_dir, ignores):
                continue
            if is_dir:
                yield from walk(path, ignores)
            elif folder == root and child.name.endswith(".md") and path.is_file():
                yield path

    for path in walk(root, ()):
        yield path, path.name != SKILL_FILE


def _ignore_file(
    folder: Path, diagnostics: list[ResourceDiagnostic]
) -> tuple[tuple[Path, pathspec.GitIgnoreSpec], ...]:
    path = folder / ".gitignore"
    if not path.is_file():
        return ()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        diagnostics.append(
            ResourceDiagnostic(
                code="read_failed", message=f"cannot read {path}: {exc}", path=str(path)
            )
        )
        return ()
    # Patterns are rooted at the folder holding the .gitignore, as git does.
    return ((folder, pathspec.GitIgnoreSpec.from_lines(lines)),)


def _ignored(
    path: Path, is_dir: bool, ignores: tuple[tuple[Path, pathspec.GitIgnoreSpec], ...]
) -> bool:
    for base, spec in ignores:
        relative = path.relative_to(base).as_posix() + ("/" if is_dir else "")
        if spec.match_file(relative):
            return True
    return False


def _load(
    path: Path, scope: str, top_level: bool, diagnostics: list[ResourceDiagnostic]
) -> SkillSummary | None:
    where = str(path)

    def report(code: DiagnosticCode, message: str, name: str | None, dropped: bool) -> None:
        diagnostics.append(
            ResourceDiagnostic(
                code=code, message=f"{where}: {message}", path=where, name=name, dropped=dropped
            )
        )

    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        report("read_failed", f"cannot read: {exc}", None, True)
        return None
    try:
        meta, body = split_frontmatter(text)
    except FrontmatterError as exc:
        report("parse_failed", str(exc), None, True)
        return None
    default_name = path.stem if top_level else path.parent.name
    name = meta.get("name", default_name)
    if not isinstance(name, str) or not valid_skill_name(name):
        message = f"skill name {name!r} must be 1-{MAX_NAME} of a-z, 0-9 and single hyphens"
        report("invalid_name", message, None, True)
        return None
    if name != default_name:
        kind = "file" if top_level else "folder"
        report(
            "invalid_name", f"name {name!r} differs from its {kind} {default_name!r}", name, False
        )

    def warn(message: str) -> None:
        report("invalid_metadata", message, name, False)

    description = meta.get("description")
    if description is None:
        description = first_paragraph(body)
    if not isinstance(description, str) or not description.strip():
        report("missing_description", f"skill {name!r} has no description", name, True)
        return None
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION:
        warn(f"description longer than {MAX_DESCRIPTION} characters")
    return SkillSummary(
        name=name,
        description=description,
        scope=scope,
        location=where,
        aliases=_aliases(meta.get("aliases"), name, warn),
        disable_model_invocation=_flag(meta.get("disable-model-invocation"), warn),
        build=_build(meta.get("build"), warn),
        digest=hashlib.sha256(data).hexdigest()[:16],
    )


def _flag(value: object, warn: Callable[[str], None]) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    word = str(value).strip().lower()
    if word in _TRUE | _FALSE:
        return word in _TRUE
    warn(f"disable-model-invocation {value!r} is not a boolean; taken as false")
    return False


def _aliases(value: object, name: str, warn: Callable[[str], None]) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if isinstance(items, list) and all(isinstance(a, str) and valid_skill_name(a) for a in items):
        return tuple(a for a in items if a != name)
    warn("aliases must be a list of valid skill names; ignored")
    return ()


def _build(value: object, warn: Callable[[str], None]) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip():
        return value
    warn("build must be a shell command; ignored")
    return None


def _first_per_scope(
    found: list[SkillSummary], diagnostics: list[ResourceDiagnostic]
) -> list[SkillSummary]:
    winners: dict[tuple[str, str], SkillSummary] = {}
    for skill in found:
        key = (skill.scope, skill.name)
        winner = winners.get(key)
        if winner is None:
            winners[key] = skill
            continue
        diagnostics.append(
            ResourceDiagnostic(
                code="collision",
                message=f"skill {skill.name!r} in scope {skill.scope!r} is defined twice; "
                f"{winner.location} wins over {skill.location}",
                name=skill.name,
                path=skill.location,
                dropped=True,
                winner_path=winner.location,
                loser_path=skill.location,
                reason="found first: its root is searched earlier (nearer the working folder), "
                "or it sorts first in the same root",
            )
        )
    return list(winners.values())
