"""Prompt templates: ``*.md`` files with optional frontmatter, expanded with arguments in one
pass (pi's templates, reference §6.4, without its double expansion).

pi substitutes ``$N``, then ``${@:N}``, then ``$ARGUMENTS``, then ``$@`` one after another on the
growing string, so an argument holding ``$ARGUMENTS`` is expanded again. Here one regular
expression visits the template once: argument text is inserted, never re-read.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from attrs import frozen

from .._fs import Location, beneath, open_dir
from .discovery import ReadCheck, is_dir_at, read_resource, refusal_code, refusal_text
from .frontmatter import FrontmatterError, frontmatter_budget, split_frontmatter
from .records import ResourceDiagnostic

__all__ = ["PromptTemplate", "expand_template", "parse_args", "scan_templates", "split_command"]

_PLACEHOLDER = re.compile(r"\$\$|\$ARGUMENTS|\$@|\$\{@:(\d+)(?::(\d+))?\}|\$(\d+)")
_COMMAND = re.compile(r"/([A-Za-z0-9][A-Za-z0-9._-]*)(?:\s+(.*))?\Z", re.DOTALL)
_DESCRIPTION_CHARS = 60
MAX_TEMPLATE_BYTES = 1_048_576
"""Largest template file read (1 MiB); a larger one is refused with a ``read_failed``
diagnostic."""
MAX_TEMPLATE_FILES = 1_000
"""Most template files read from one folder (the first by name); the rest are left out with
an ``over_budget`` diagnostic."""


@frozen(kw_only=True)
class PromptTemplate:
    """A reusable prompt.

    Attributes:
        name: the file name without ``.md``; ``/name args`` at the start of a prompt uses it.
        description: frontmatter ``description``, else the first non-empty line (60 chars).
        argument_hint: frontmatter ``argument-hint`` (a YAML list becomes ``[a] [b]``), or None.
        content: the body, with placeholders.
        path: the file, or None.
        scope: ``project``, ``user`` or ``extra``.
    """

    name: str
    description: str
    content: str
    argument_hint: str | None = None
    path: str | None = None
    scope: str = "extra"

    def expand(self, args: str | Sequence[str] = ()) -> str:
        """:func:`expand_template` of this template."""
        return expand_template(self.content, args)


def parse_args(text: str) -> list[str]:
    """Split an argument string on whitespace; single or double quotes group words (pi's
    ``parseCommandArgs``: quotes are removed, there are no escapes)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.escape = ""  # no escapes, as in pi
    lexer.commenters = ""
    try:
        args = list(lexer)
    except ValueError:  # an unclosed quote: take the rest literally
        args = text.split()
    return args


def expand_template(content: str, args: str | Sequence[str] = ()) -> str:
    """Substitute arguments into ``content``, visiting it once.

    ``$1``…``$N`` (1-based, multi-digit; missing = empty), ``$@`` and ``$ARGUMENTS`` (all,
    joined by a space), ``${@:N}`` (from the N-th on; 0 counts as 1), ``${@:N:L}`` (L from the
    N-th), ``$$`` (a literal ``$``). ``args`` is a list, or a string split by
    :func:`parse_args`. A placeholder inside an argument stays as written.
    """
    values = parse_args(args) if isinstance(args, str) else list(args)

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "$$":
            return "$"
        if token in ("$ARGUMENTS", "$@"):
            return " ".join(values)
        if match.group(3) is not None:
            index = int(match.group(3))
            return values[index - 1] if 1 <= index <= len(values) else ""
        start = max(int(match.group(1)), 1) - 1
        length = match.group(2)
        chosen = values[start:] if length is None else values[start : start + int(length)]
        return " ".join(chosen)

    return _PLACEHOLDER.sub(replace, content)


def split_command(text: str) -> tuple[str, str] | None:
    """``("name", "args")`` for a prompt starting ``/name`` (then whitespace or its end),
    else None."""
    match = _COMMAND.match(text)
    return None if match is None else (match.group(1), (match.group(2) or "").strip())


def scan_templates(
    folders: Sequence[tuple[Path, str, Path]], check: ReadCheck | None = None
) -> tuple[list[PromptTemplate], list[ResourceDiagnostic]]:
    """Templates in ``folders`` (each ``(path, scope, boundary)``, not recursive, sorted by
    name); the first of a name wins and later ones get a ``collision`` diagnostic.

    Files are read beneath ``boundary`` (the project, the user's config folder, the extra root
    itself): one leading out is refused (``outside_root``); only regular files of at most
    :data:`MAX_TEMPLATE_BYTES` are read, and none ``check`` refuses (``discovery.check_opened``:
    a ``read_failed`` diagnostic)."""
    found: dict[str, PromptTemplate] = {}
    diagnostics: list[ResourceDiagnostic] = []
    for folder, scope, boundary in folders:
        listed = _listed(folder, boundary, diagnostics)
        if len(listed) > MAX_TEMPLATE_FILES:
            # each is opened, checked and parsed at every start: 20,000 made a start take
            # 30 s (review 12, finding 7)
            diagnostics.append(
                ResourceDiagnostic(
                    code="over_budget",
                    kind="template",
                    message=f"{folder}: only the first {MAX_TEMPLATE_FILES:,} templates (by "
                    "name) are read; the rest are left out",
                    path=str(folder),
                )
            )
            listed = listed[:MAX_TEMPLATE_FILES]
        with frontmatter_budget():  # one folder's files share a budget of YAML
            loaded = [_load(path, loc, scope, diagnostics, check) for path, loc in listed]
        for path, template in zip((p for p, _ in listed), loaded, strict=True):
            if template is None:
                continue
            winner = found.get(template.name)
            if winner is None:
                found[template.name] = template
                continue
            diagnostics.append(
                ResourceDiagnostic(
                    code="collision",
                    kind="template",
                    message=f"template {template.name!r}: {winner.path} wins over {path}",
                    name=template.name,
                    path=str(path),
                    dropped=True,
                    winner_path=winner.path,
                    loser_path=str(path),
                    reason="found first: its folder is searched earlier",
                )
            )
    return list(found.values()), diagnostics


def _listed(
    folder: Path, boundary: Path, diagnostics: list[ResourceDiagnostic]
) -> list[tuple[Path, Location]]:
    """The ``*.md`` entries of ``folder`` that are no folders, by name (none when it is
    missing; a folder leading out of ``boundary`` is reported)."""
    try:
        loc = beneath(boundary, folder)
        fd = open_dir(loc)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        diagnostics.append(
            ResourceDiagnostic(
                code="outside_root" if refusal_code(exc) == "outside_root" else "list_failed",
                kind="template",
                message=f"cannot list {folder}: {refusal_text(exc)}",
                path=str(folder),
            )
        )
        return []
    try:
        names = sorted(os.listdir(fd))
        return [
            (folder / name, loc.child(name))
            for name in names
            if name.endswith(".md") and not name.startswith(".") and not is_dir_at(fd, name)
        ]
    finally:
        os.close(fd)


def _load(
    path: Path,
    loc: Location,
    scope: str,
    diagnostics: list[ResourceDiagnostic],
    check: ReadCheck | None,
) -> PromptTemplate | None:
    try:
        raw = read_resource(loc, MAX_TEMPLATE_BYTES, check)
        meta, body = split_frontmatter(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, FrontmatterError) as exc:
        broken = isinstance(exc, FrontmatterError)
        diagnostics.append(
            ResourceDiagnostic(
                code="parse_failed" if broken else refusal_code(exc),
                kind="template",
                message=f"{path}: {exc if broken else refusal_text(exc)}",
                path=str(path),
                dropped=True,
            )
        )
        return None
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        first = next((line.strip() for line in body.splitlines() if line.strip()), "")
        cut = len(first) > _DESCRIPTION_CHARS
        description = first[:_DESCRIPTION_CHARS] + ("..." if cut else "")
    hint = meta.get("argument-hint")
    if isinstance(hint, list):
        hint = " ".join(f"[{h}]" for h in hint)
    return PromptTemplate(
        name=path.stem,
        description=" ".join(description.split()),
        content=body.strip("\n"),
        argument_hint=None if hint is None else str(hint),
        path=str(path),
        scope=scope,
    )
