"""Finding skills on disk, in the Agent Skills layout (pi's loader, reference §6.1).

A skill is a folder holding ``SKILL.md``, or a ``*.md`` file at the top level of a skills root.
Folders starting with ``.``, ``node_modules`` and paths matched by a ``.gitignore`` inside the
root are skipped; a folder holding ``SKILL.md`` is not descended (nested skills are ignored);
a folder or file reached twice through symbolic links counts once, across roots too, so
overlapping roots are deduplicated by the file itself (device and inode). Problems become
diagnostics, never exceptions.

Every folder and file is opened beneath its root's ``boundary`` (:mod:`harness._fs`): the
project for project skills, the user's config folder for the user's, the root itself for an
extra root. A symlink that stays inside is followed; one leading out is refused
(``outside_root``) and never read. Only regular files of at most :data:`MAX_SKILL_BYTES` are
read, so a FIFO or a link to ``/dev/zero`` is reported, not waited on.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from attrs import frozen

from .._fs import (
    FileRefusedError,
    Location,
    beneath,
    open_dir,
    open_regular,
    read_capped,
    read_regular,
)
from .._ignore import (
    MAX_IGNORE_BYTES,
    MAX_IGNORE_BYTES_PER_WALK,
    IgnoreFileError,
    compile_ignore,
)
from .._permissions.protected import private_path
from .frontmatter import (
    FrontmatterError,
    frontmatter_budget,
    new_budget,
    split_frontmatter,
)
from .records import DiagnosticCode, ResourceDiagnostic, SkillSummary

__all__ = [
    "MAX_DESCRIPTION",
    "MAX_NAME",
    "MAX_SKILL_BYTES",
    "ReadCheck",
    "SkillRoot",
    "check_opened",
    "cut_description",
    "first_paragraph",
    "is_dir_at",
    "open_resource",
    "read_body",
    "read_resource",
    "refusal_code",
    "refusal_text",
    "scan_skills",
    "shown_value",
    "valid_skill_name",
]

SKILL_FILE = "SKILL.md"
MAX_NAME = 64
"""Longest skill name, in characters (the Agent Skills specification)."""
MAX_DESCRIPTION = 1024
"""Longest description, in characters (the Agent Skills specification, Anthropic's limit);
a longer one is cut, with an ``invalid_metadata`` diagnostic."""
MAX_SKILL_BYTES = 1_048_576
"""Largest skill file read (1 MiB); a larger one is refused with a ``read_failed``
diagnostic."""
MAX_SKILL_FILES = 1_000
"""The most skill files read from one skills folder (an ``over_budget`` diagnostic says the
rest were left out)."""
MAX_SKILL_FOLDERS = 10_000
"""The most folders listed while looking for skills in one skills folder."""
_SHOWN_CHARS = 80  # a value from a file quoted in a message is cut to this many characters
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})

ReadCheck: TypeAlias = Callable[[Sequence[str]], str | None]
"""Why the file at these paths (the path it was opened by, and the one it turned out to be
once opened) may not be read, or None: the user's ``read`` rules and the harness's private
data (``SecuritySupervisor.read_check``), so a project's ``AGENTS.md`` or ``SKILL.md``
symlinked to a file a deny rule covers never reaches the model."""


@frozen
class SkillRoot:
    """A folder searched for skills, and the scope token its skills are published at.

    ``boundary`` is the folder nothing under ``path`` may lead out of (a symlink pointing
    further is refused): the project for project skills, the user's config folder for the
    user's; None means ``path`` itself. It must hold ``path``.
    """

    path: Path
    scope: str
    boundary: Path | None = None

    @property
    def top(self) -> Path:
        """The folder reads stay beneath: ``boundary``, or ``path``."""
        return self.path if self.boundary is None else self.boundary


def valid_skill_name(name: str) -> bool:
    """pi's rule: 1-64 of ``[a-z0-9-]``, no leading, trailing or doubled hyphen."""
    return len(name) <= MAX_NAME and _NAME.fullmatch(name) is not None


def cut_description(description: str, warn: Callable[[str], None]) -> str:
    """``description`` cut to :data:`MAX_DESCRIPTION` characters (the Agent Skills limit),
    calling ``warn`` with why when it was longer: a skill's or an agent file's description goes
    into every request."""
    if len(description) <= MAX_DESCRIPTION:
        return description
    warn(
        f"description is {len(description)} characters, longer than {MAX_DESCRIPTION} "
        f"(the Agent Skills limit); cut to {MAX_DESCRIPTION}"
    )
    return description[:MAX_DESCRIPTION]


def shown_value(value: object) -> str:
    """``repr(value)`` cut to a few dozen characters, for a message quoting a file's value."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


def refusal_code(exc: BaseException) -> DiagnosticCode:
    """``outside_root`` for a read refused because it leads out of its root, else
    ``read_failed``."""
    if isinstance(exc, FileRefusedError) and exc.errno in (errno.EXDEV, errno.ELOOP):
        return "outside_root"
    return "read_failed"


def refusal_text(exc: BaseException) -> str:
    """Why a read failed, without the path (the diagnostic carries it)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def scan_skills(
    roots: Sequence[SkillRoot], check: ReadCheck | None = None
) -> tuple[list[SkillSummary], list[ResourceDiagnostic], dict[str, Location]]:
    """Every skill under ``roots`` (missing roots are skipped), in root order then name order;
    a file ``check`` refuses (:func:`check_opened`) is a ``read_failed`` diagnostic.

    Several skills of one name in one scope: the first found wins and a ``collision``
    diagnostic names both paths (different scopes are resolved later, by precedence).

    Returns:
        The skills, the diagnostics, and where each skill's file is (by its ``location``), to
        read its body from later beneath the same boundary.
    """
    seen: set[tuple[int, int]] = set()
    found: list[SkillSummary] = []
    places: dict[str, Location] = {}
    diagnostics: list[ResourceDiagnostic] = []
    # the roots of a scope share a budget of YAML (review 12, finding 7): a project's many
    # roots (each folder up to the repository's) get one, and cannot spend the user's
    budgets: dict[str, list[int]] = {}
    rooms: dict[str, list[int]] = {}  # skill files and folders left to each scope
    for root in roots:
        try:
            start = beneath(root.top, root.path)
        except FileRefusedError as exc:
            diagnostics.append(_folder_failed(root.path, exc))
            continue
        with frontmatter_budget(budgets.setdefault(root.scope, new_budget())):
            room = rooms.setdefault(root.scope, [MAX_SKILL_FILES, MAX_SKILL_FOLDERS])
            for path, loc, top_level in _descriptors(root.path, start, diagnostics, room):
                skill = _load(path, loc, root.scope, top_level, diagnostics, seen, check)
                if skill is not None and skill.location is not None:
                    found.append(skill)
                    places[skill.location] = loc
    return _first_per_scope(found, diagnostics), diagnostics, places


def check_opened(fd: int, path: str, check: ReadCheck | None = None) -> None:
    """Refuse the file just opened as ``fd`` by ``path`` when it is the harness's private
    data (the approvals key, a session or checkpoint store, the cache or state, the user's
    settings: a project's ``AGENTS.md`` or ``SKILL.md`` symlinked to one would put it into
    the system prompt or a tool's output: review 8, finding 5) or ``check`` refuses it (a deny
    or ask ``read`` rule of the user's). Judged on ``path`` and on what was opened
    (``/proc/self/fd``), so a link swapped in between cannot pass. Closes ``fd`` when it
    refuses.

    Raises:
        FileRefusedError: refused (``EACCES``), saying why.
    """
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = os.path.realpath(path)  # no /proc (another system): the path resolved
    why = private_path(real, Path("/"))
    if why is None and check is not None:
        why = check((path, real))
    if why is not None:
        os.close(fd)
        raise FileRefusedError(errno.EACCES, f"is not read: {why}", path)


def open_resource(loc: Location, check: ReadCheck | None = None) -> tuple[int, os.stat_result]:
    """:func:`open_regular`, refusing (``EACCES``) a file :func:`check_opened` refuses.

    Raises:
        FileRefusedError: as :func:`open_regular`, or refused.
        OSError: the open failed.
    """
    fd, st = open_regular(loc)
    check_opened(fd, loc.path, check)
    return fd, st


def read_resource(loc: Location, cap: int, check: ReadCheck | None = None) -> bytes:
    """The bytes of the regular file at ``loc`` (at most ``cap``), as :func:`open_resource`
    allows. Raises as :func:`open_resource` and :func:`read_capped` do."""
    fd, st = open_resource(loc, check)
    try:
        return read_capped(fd, st, cap, loc.path)
    finally:
        os.close(fd)


def read_body(loc: Location, check: ReadCheck | None = None) -> str:
    """The body of a skill or template file (frontmatter removed), read as discovery reads.

    Raises:
        OSError: the file cannot be read, or is refused (``FileRefusedError``).
        UnicodeDecodeError: not UTF-8. FrontmatterError: its frontmatter is broken.
    """
    raw = read_resource(loc, MAX_SKILL_BYTES, check)
    return split_frontmatter(raw.decode("utf-8"))[1].strip()


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


def _folder_failed(folder: Path, exc: OSError) -> ResourceDiagnostic:
    code: DiagnosticCode = "outside_root" if refusal_code(exc) == "outside_root" else "list_failed"
    return ResourceDiagnostic(
        code=code,
        message=f"cannot list {folder}: {refusal_text(exc)}",
        path=str(folder),
        dropped=code == "outside_root",
    )


def is_dir_at(dir_fd: int, name: str) -> bool:
    """Whether ``name`` in ``dir_fd`` is a folder (or a symlink to one: the open that follows
    decides whether it may be entered). A stat opens nothing, so a FIFO cannot block it."""
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


if TYPE_CHECKING:
    import pathspec

_Ignores: TypeAlias = "tuple[tuple[Path, pathspec.GitIgnoreSpec], ...]"


def _descriptors(
    root: Path, start: Location, diagnostics: list[ResourceDiagnostic], room: list[int]
) -> list[tuple[Path, Location, bool]]:
    """(descriptor path, its location, at the root's top level) for every skill file under
    ``root``, depth first in name order (without recursion: a deep tree costs no stack), at
    most ``room[0]`` files from ``room[1]`` folders (both taken from ``room``, which the roots
    of one scope share)."""
    visited: set[tuple[int, int]] = set()
    out: list[tuple[Path, Location, bool]] = []
    budget = [MAX_IGNORE_BYTES_PER_WALK]  # bytes of .gitignore files left to compile
    # Each item: a folder to list (with its depth and the ignore files above it), or a file.
    stack: list[tuple[Path, Location, int, _Ignores] | tuple[Path, Location]] = [
        (root, start, 0, ())
    ]
    listed = 0
    while stack:
        if len(out) >= room[0] or listed >= room[1]:
            # each skill file is opened, checked against the read rules and parsed at every
            # start: a tree cannot make a start take minutes (review 11, finding 11), nor can
            # many roots (each folder up to the repository's: review 13, finding 15)
            diagnostics.append(
                ResourceDiagnostic(
                    code="over_budget",
                    message=f"{root}: only the first {MAX_SKILL_FILES:,} skill files (in "
                    f"{MAX_SKILL_FOLDERS:,} folders at most) of a scope are read; the rest "
                    "are left out",
                    path=str(root),
                )
            )
            break
        item = stack.pop()
        if len(item) == 2:
            out.append((item[0], item[1], True))
            continue
        folder, loc, depth, ignores = item
        listed += 1
        try:
            fd = open_dir(loc)
        except FileNotFoundError as exc:
            if depth:  # a folder gone since it was listed; a missing root is just skipped
                diagnostics.append(_folder_failed(folder, exc))
            continue
        except OSError as exc:
            diagnostics.append(_folder_failed(folder, exc))
            continue
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) in visited:  # a symbolic link loop, or reached twice
                continue
            visited.add((st.st_dev, st.st_ino))
            names = sorted(os.listdir(fd))
            if SKILL_FILE in names and not is_dir_at(fd, SKILL_FILE):
                out.append((folder / SKILL_FILE, loc.child(SKILL_FILE), False))
                continue
            if ".gitignore" in names:
                ignores = (*ignores, *_ignore_file(folder, loc, diagnostics, budget))
            children: list[tuple[Path, Location, int, _Ignores] | tuple[Path, Location]] = []
            for name in names:
                if name.startswith(".") or name == "node_modules":
                    continue
                path = folder / name
                is_dir = is_dir_at(fd, name)
                if _ignored(path, is_dir, ignores):
                    continue
                if is_dir:
                    children.append((path, loc.child(name), depth + 1, ignores))
                elif depth == 0 and name.endswith(".md"):
                    children.append((path, loc.child(name)))
        except OSError as exc:
            diagnostics.append(_folder_failed(folder, exc))
            continue
        finally:
            os.close(fd)
        stack.extend(reversed(children))
    room[0] -= len(out)
    room[1] -= listed
    return out


def _ignore_file(
    folder: Path, loc: Location, diagnostics: list[ResourceDiagnostic], budget: list[int]
) -> tuple[tuple[Path, pathspec.GitIgnoreSpec], ...]:
    """The folder's ``.gitignore``, or nothing and a diagnostic naming it when it cannot be read
    or used (:func:`~harness._ignore.compile_ignore`), or the root's ignore files would pass
    ``budget`` (the bytes left to compile, taken from): the folder is listed without it."""
    path = folder / ".gitignore"
    try:
        data = read_regular(loc.child(".gitignore"), MAX_IGNORE_BYTES)
        if len(data) > budget[0]:
            raise IgnoreFileError(
                f"this skills folder's ignore files pass {MAX_IGNORE_BYTES_PER_WALK} bytes"
            )
        budget[0] -= len(data)
        # Patterns are rooted at the folder holding the .gitignore, as git does.
        return ((folder, compile_ignore(data.decode("utf-8"))),)
    except (OSError, UnicodeDecodeError) as exc:
        diagnostics.append(
            ResourceDiagnostic(
                code=refusal_code(exc),
                message=f"cannot read {path}: {refusal_text(exc)}",
                path=str(path),
            )
        )
    except IgnoreFileError as exc:
        diagnostics.append(
            ResourceDiagnostic(
                code="parse_failed",
                message=f"cannot use {path}: {exc}; the folder is listed without it",
                path=str(path),
            )
        )
    return ()


def _ignored(path: Path, is_dir: bool, ignores: _Ignores) -> bool:
    for base, spec in ignores:
        relative = path.relative_to(base).as_posix() + ("/" if is_dir else "")
        if spec.match_file(relative):
            return True
    return False


def _load(
    path: Path,
    loc: Location,
    scope: str,
    top_level: bool,
    diagnostics: list[ResourceDiagnostic],
    seen: set[tuple[int, int]],
    check: ReadCheck | None,
) -> SkillSummary | None:
    where = str(path)

    def report(code: DiagnosticCode, message: str, name: str | None, dropped: bool) -> None:
        diagnostics.append(
            ResourceDiagnostic(
                code=code, message=f"{where}: {message}", path=where, name=name, dropped=dropped
            )
        )

    try:
        fd, st = open_resource(loc, check)
        try:
            if (st.st_dev, st.st_ino) in seen:  # the same file through another link or root
                return None
            seen.add((st.st_dev, st.st_ino))
            data = read_capped(fd, st, MAX_SKILL_BYTES, where)
        finally:
            os.close(fd)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        report(refusal_code(exc), f"not read: {refusal_text(exc)}", None, True)
        return None
    try:
        meta, body = split_frontmatter(text)
    except FrontmatterError as exc:
        report("parse_failed", str(exc), None, True)
        return None
    default_name = path.stem if top_level else path.parent.name
    name = meta.get("name", default_name)
    if not isinstance(name, str) or not valid_skill_name(name):
        message = (
            f"skill name {shown_value(name)} must be 1-{MAX_NAME} of a-z, 0-9 and single hyphens"
        )
        report("invalid_name", message, None, True)
        return None
    if name != default_name:
        kind = "file" if top_level else "folder"
        report(
            "invalid_name",
            f"name {name!r} differs from its {kind} {shown_value(default_name)}",
            name,
            False,
        )

    def warn(message: str) -> None:
        report("invalid_metadata", message, name, False)

    description = meta.get("description")
    if description is None:
        description = first_paragraph(body)
    if not isinstance(description, str) or not description.strip():
        report("missing_description", f"skill {name!r} has no description", name, True)
        return None
    description = cut_description(" ".join(description.split()), warn)
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
    warn(f"disable-model-invocation {shown_value(value)} is not a boolean; taken as false")
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
