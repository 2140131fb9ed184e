"""``harness export ID|PATH --format html|md|jsonl``: a session as one file to read or share.

* ``html``: one self-contained page (styles and script inline, no network; images as ``data:``
  URIs) with the whole tree. The active branch is marked (class ``on-path``, the leaf
  ``leaf``); every other branch is a closed ``<details class="branch">``. Thinking, tool calls
  and tool results are collapsed ``<details>``; compaction and branch summaries, labels, the
  session name and token/cost totals are shown. Every entry is an element with
  ``data-entry-id``. Opening the page with ``#expand-all`` opens every block.
* ``md``: the active branch as Markdown (thinking and tool output in ``<details>``).
* ``jsonl``: the session re-written in our format (v3), entries in file order: a v1/v2 pi file
  comes out migrated, with the same ids a read gives; the source is not modified.

Every value read from the session is untrusted (docs/security.md) and is escaped by
``_escape.py`` for the format: in HTML it is text or a quoted attribute value, never a tag, an
attribute or a class name (entry types and roles map to our own class tokens, ``unknown`` for
any other); images are embedded only as PNG, JPEG, GIF or WebP with valid base64. In Markdown
it cannot become raw HTML or a script link. No format lets a terminal control through.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs
import click

from harness import (
    APPROVAL_DECISION_TYPE,
    APPROVAL_PENDING_TYPE,
    APPROVAL_START_TYPE,
    PERMISSION_ENTRY,
    ModelRegistry,
    load_registry,
)
from hooks import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserContent,
    UserMessage,
)
from repos import (
    BranchSummaryEntry,
    CompactionEntry,
    InvalidSessionIdError,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    Session,
    SessionInfoEntry,
    dumps_line,
    encode_entry,
    encode_header,
    validate_session_id,
)

from ._common import one_line, open_repo, progress, root_option
from ._escape import (
    echo,
    html_text,
    json_text,
    md_code,
    md_fence,
    md_text,
    terminal,
)
from ._opening import opened
from ._render import entry_kind, entry_text, totals

__all__ = ["export", "session_html", "session_jsonl", "session_markdown"]


def _nothing(n: int) -> None:
    """The default ``advance``: no progress shown."""


def _json_text(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _content_text(content: str | Iterable[UserContent]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[image {block.mime_type}]")
        else:
            parts.append(f"[{block.type or 'unknown'} block]")
    return "\n".join(parts)


# --- html -------------------------------------------------------------------------------------


def session_html(
    session: Session,
    advance: Callable[[int], None] = _nothing,
    registry: ModelRegistry | None = None,
) -> str:
    """The whole session as one self-contained HTML page: ``harness._html.page.export_page``
    (the renderer ``harness serve`` shares)."""
    # Imported here: the renderer imports this package's escaping, so a module-level import
    # would be circular whichever side is imported first.
    from .._html.page import export_page

    return export_page(session, advance, registry)


# --- markdown ---------------------------------------------------------------------------------


def _md_details(summary: str, body: str) -> str:
    return f"<details><summary>{html_text(one_line(summary))}</summary>\n\n{body}\n\n</details>"


def _md_inline(text: str) -> str:
    """Session text inside one of our lines (a heading, an emphasis): one line, escaped."""
    return md_text(one_line(text))


def _message_md(message: Message) -> list[str]:
    if isinstance(message, UserMessage):
        return ["## User", md_text(_content_text(message.content))]
    if isinstance(message, CustomMessage):
        return [
            f"## Custom ({_md_inline(message.custom_type)})",
            md_text(_content_text(message.content)),
        ]
    if isinstance(message, AssistantMessage):
        source = "/".join(p for p in (message.provider, message.model) if p)
        out = [f"## Assistant ({_md_inline(source)})" if source else "## Assistant"]
        for block in message.content:
            if isinstance(block, TextContent):
                out.append(md_text(block.text))
            elif isinstance(block, ThinkingContent):
                body = "(redacted)" if block.redacted else block.thinking
                out.append(_md_details("Thinking", md_fence(body)))
            elif isinstance(block, ToolCall):
                args = md_fence(_json_text(dict(block.arguments)), "json")
                out.append(f"**Tool call** {md_code(block.name)} ({md_code(block.id)})\n\n{args}")
        if message.error_message:
            out.append(f"**Error:** {md_text(message.error_message)}")
        if message.stop_reason not in ("stop", "toolUse"):
            out.append(f"*Stopped: {_md_inline(message.stop_reason)}*")
        return out
    if isinstance(message, ToolResultMessage):
        flag = " (error)" if message.is_error else ""
        title = f"Result of {message.tool_name}{flag}"
        return [_md_details(title, md_fence(_content_text(message.content)))]
    if isinstance(message, BashExecutionMessage):
        return [_md_details("Shell command", md_fence(f"$ {message.command}\n{message.output}"))]
    if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
        return ["## Summary", md_text(message.summary)]
    return [md_fence(_json_text(dict(message.raw)), "json")]


def session_markdown(
    session: Session,
    advance: Callable[[int], None] = _nothing,
    registry: ModelRegistry | None = None,
) -> str:
    """The active branch as Markdown: every message, compaction and branch summary, in order.
    Session text keeps its own Markdown but no raw HTML (``_escape.md_text``); code and tool
    output are fenced; terminal controls are shown as ``\\x1b``-style escapes.

    ``advance(1)`` is called after each entry of the branch."""
    branch = session.get_branch()
    labels = session.labels
    out = [
        f"# {_md_inline(session.name or f'Session {session.id}')}",
        f"- id: {md_code(session.id)}\n- cwd: {md_code(session.cwd)}\n"
        f"- created: {_md_inline(session.header.timestamp)}\n"
        f"- active branch: {len(branch)} of {len(session)} entries, "
        f"leaf {md_code(str(session.leaf_id))}\n"
        f"- totals (active branch): {totals(branch, registry).line()}",
    ]
    for entry in branch:
        advance(1)
        if isinstance(entry, MessageEntry):
            part = _message_md(entry.message)
        elif isinstance(entry, CompactionEntry):
            part = [
                f"## Compaction ({entry.tokens_before} tokens before)",
                md_text(entry.summary),
            ]
        elif isinstance(entry, BranchSummaryEntry):
            part = ["## Branch summary", md_text(entry.summary)]
        elif isinstance(entry, SessionInfoEntry | LabelEntry | LeafEntry):
            continue
        else:
            text = entry_text(entry)
            part = [f"*{_md_inline(entry_kind(entry) + (': ' + text if text else ''))}*"]
        label = labels.get(entry.id)
        if label and part[0].startswith("## "):
            part[0] += f" [{_md_inline(label)}]"
        out.extend(part)
    # Markdown is for reading (in a terminal too); the exact values are what `jsonl` exports.
    return terminal("\n\n".join(out) + "\n")


# --- jsonl --------------------------------------------------------------------------------------


def session_jsonl(session: Session, advance: Callable[[int], None] = _nothing) -> bytes:
    """Our format (v3): the header, then every entry in file order (v1/v2 files migrated).
    Characters a terminal acts on are written as JSON escapes (``\\u009b``): the values read
    back are exactly the session's, but for approvals' signatures, which are left out.

    ``advance(1)`` is called after each entry."""
    header = attrs.evolve(session.header, version=3)
    lines = [_safe_line(encode_header(header))]
    for entry in session.entries():
        lines.append(_safe_line(_unsigned(encode_entry(entry))))
        advance(1)
    return b"".join(lines)


# Entries the harness signs with this user's secret (permissions, waiting approvals).
_SIGNED = frozenset(
    (PERMISSION_ENTRY, APPROVAL_PENDING_TYPE, APPROVAL_DECISION_TYPE, APPROVAL_START_TYPE)
)


def _unsigned(obj: dict[str, object]) -> dict[str, object]:
    """An exported signed entry (a ``permission``, a waiting approval and its decision)
    without its signature: an export is for sharing, and a signed approval or waiting call in
    it could be replayed into a file with the same session id and answered again
    (docs/permissions.md; review 9, finding 12); the entry itself stays readable."""
    data = obj.get("data")
    if obj.get("customType") in _SIGNED and isinstance(data, dict) and "signature" in data:
        return {**obj, "data": {k: v for k, v in data.items() if k != "signature"}}
    return obj


def _safe_line(obj: dict[str, object]) -> bytes:
    return json_text(dumps_line(obj).decode()).encode()


# --- the command ------------------------------------------------------------------------------


@click.command()
@root_option
@click.argument("ref", metavar="ID|PATH")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md", "jsonl"]),
    default=None,
    help="html: the whole tree, one page; md: the active branch; jsonl: our format (v3). "
    "Default: from the -o file's suffix (.html, .md, .jsonl), else html.",
)
@click.option(
    "-o",
    "--output",
    "output",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here (default: stdout; on a terminal, html and jsonl go to ID.FORMAT in the "
    "current folder).",
)
def export(root: str | None, ref: str, fmt: str | None, output: Path | None) -> None:
    """Export a session as an HTML page, Markdown or JSONL; the source is not modified.

    Without -o the export goes to stdout, but for html and jsonl on a terminal: they are
    written to ID.html (ID.jsonl) in the current folder, said on stderr. With a file and stdout
    a terminal, a progress bar counts the entries written.
    """
    by_suffix = _SUFFIX_FORMATS.get(output.suffix.lower()) if output is not None else None
    if fmt is not None and by_suffix is not None and fmt != by_suffix:
        raise click.BadParameter(
            f"--format {fmt} does not match the file name {output}", param_hint="-o"
        )
    fmt = fmt or by_suffix or "html"
    with opened(open_repo(root), ref) as session:
        named = output is not None
        if output is None and fmt != "md" and sys.stdout.isatty():
            # A page (or JSONL) is no reading for a terminal: it goes to a file, said so.
            output = default_export_path(session, fmt)
        if output is None:
            sys.stdout.flush()
            sys.stdout.buffer.write(_render(session, fmt, _nothing))
            sys.stdout.buffer.flush()
            return
        with progress(f"exporting {fmt}", _entries_to_render(session, fmt)) as advance:
            data = _render(session, fmt, advance)
        output = write_export(output, data, new=not named)
        echo(f"wrote {output} ({fmt}, {len(data)} bytes)", err=True)


def default_export_path(session: Session, fmt: str) -> Path:
    """``<id>.<fmt>`` in the current folder, from an id that names nothing else.

    The id comes from the session file's header: untrusted. One that is not a valid session id
    (``../x``, ``/tmp/x``, a control character) is never used as a path; ``session.<fmt>`` is.
    """
    try:
        name = validate_session_id(session.id)
    except InvalidSessionIdError:
        name = "session"
    return Path(f"{name}.{fmt}")


def write_export(path: Path, data: bytes, *, new: bool = False) -> Path:
    """Write an export to ``path``, replacing a regular file there but never following a
    symlink (a link planted where the default name lands must not redirect the write). With
    ``new`` (a default name, which comes from the session file's id: untrusted), an existing
    file is never replaced: ``<stem>-2<suffix>``, ``-3``, ... is written instead (an id
    ``index`` or ``AGENTS`` replaced the user's ``index.html`` or ``AGENTS.md``: review 5,
    finding 21). Returns the path written.

    Raises:
        OSError: the path is a symlink (``ELOOP``), a folder, or not writable; with ``new``,
            100 names taken.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    candidates = [path]
    if new:
        flags |= os.O_EXCL
        candidates += [path.with_name(f"{path.stem}-{n}{path.suffix}") for n in range(2, 101)]
    else:
        flags |= os.O_TRUNC
    for candidate in candidates:
        try:
            fd = os.open(candidate, flags, 0o666)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return candidate
    raise FileExistsError(errno.EEXIST, "100 export names taken", str(path))


_SUFFIX_FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".jsonl": "jsonl"}


def _render(session: Session, fmt: str, advance: Callable[[int], None]) -> bytes:
    if fmt == "html":
        return session_html(session, advance, load_registry().registry).encode()
    if fmt == "md":
        return session_markdown(session, advance, load_registry().registry).encode()
    return session_jsonl(session, advance)


def _entries_to_render(session: Session, fmt: str) -> int:
    """How many times the renderer of ``fmt`` calls ``advance``."""
    if fmt == "md":
        return len(session.path_ids(session.leaf_id))
    if fmt == "html":
        from .._html.page import entries_drawn

        return entries_drawn(session)
    return len(session)
