"""``harness sessions``: list, show, tree, fork and delete sessions (DESIGN §4-§5).

Every command takes ``--root DIR``. A session is named by its id (looked up under the root) or
by the path of a ``.jsonl`` file; the repository decides which, and validates ids before touching
any file. Reading never writes: ``show`` and ``tree`` leave the file as it was, and ``fork``
leaves its source byte-identical.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
import orjson

from repos import (
    CorruptSessionError,
    ForkPosition,
    JsonlSessionRepo,
    Session,
    SessionNotFoundError,
    encode_message,
    open_session,
)
from repos._importers.claude_code import convert, is_claude_code

from ._common import HarnessGroup, one_line, open_repo, root_option, run_async
from ._render import DEFAULT_MAX_CHARS, context_lines, info_json, session_table, tree_view

__all__ = ["sessions"]

_REF = "ID|PATH"


def _dump(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def _warn_diagnostics(session: Session) -> None:
    """Report what reading the file found and handled (torn tail, skipped lines...): the data
    shown may differ from the file, and the user should know why."""
    for diag in session.diagnostics:
        where = f"{session.path}:{diag.line}" if diag.line is not None else f"{session.path}"
        click.echo(f"warning: {where}: {one_line(diag.message)} ({diag.code})", err=True)


def _open(repo: JsonlSessionRepo, ref: str) -> Session:
    try:
        session = run_async(repo.open(ref))
    except CorruptSessionError:
        path = Path(ref).expanduser()
        if not (path.is_file() and is_claude_code(path)):
            raise
        session = _open_claude_code(path)
    _warn_diagnostics(session)
    return session


def _open_claude_code(path: Path) -> Session:
    """A Claude Code transcript, converted and opened read-only (nothing is written near it)."""
    conversion = convert(path)
    click.echo(
        f"note: {path} is a Claude Code transcript (session {conversion.source_session_id}, "
        f"{conversion.records} records), not one of our sessions; shown converted, read-only. "
        f"`harness import claude-code {path}` imports it.",
        err=True,
    )
    with tempfile.TemporaryDirectory(prefix="harness-cc-") as folder:
        copy = Path(folder) / f"{conversion.main.header.id}.jsonl"
        copy.write_bytes(b"".join(conversion.main.lines))
        # The session reads bodies through its open descriptor: the file may go at once.
        return open_session(copy)


@click.group(cls=HarnessGroup)
def sessions() -> None:
    """List, inspect, fork and delete sessions (pi-compatible JSONL files)."""


@sessions.command("list")
@root_option
@click.option(
    "--cwd",
    metavar="DIR",
    default=None,
    help="Only sessions whose header cwd is exactly DIR (as stored: an absolute path).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of session infos.")
def list_command(root: Path | None, cwd: str | None, as_json: bool) -> None:
    """List sessions under the root, most recent activity first.

    Files that cannot be read (no valid header) are skipped and named on stderr.
    """
    repo = open_repo(root)
    infos = run_async(repo.list(cwd))
    for path, reason in repo.list_problems:
        click.echo(f"warning: skipped {path}: {one_line(reason)}", err=True)
    if as_json:
        click.echo(_dump([info_json(i) for i in infos]))
    elif infos:
        for line in session_table(infos):
            click.echo(line)
    else:
        where = f" with cwd {cwd!r}" if cwd is not None else ""
        click.echo(f"no sessions{where} under {repo.root}", err=True)


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
@click.option("--json", "as_json", is_flag=True, help="Print the context messages as a JSON array.")
@click.option(
    "--max-chars",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_CHARS,
    show_default=True,
    help="Cut tool results to this many characters, tool-call arguments to at most 500 (0: never).",
)
def show(root: Path | None, ref: str, as_json: bool, max_chars: int) -> None:
    """Print the context the model would see at the session's active leaf.

    The last compaction's summary comes first, then the kept messages; tool results whose call
    is not in the context and empty assistant messages are left out, as they are for the model.
    """
    with _open(open_repo(root), ref) as session:
        context = session.build_context()
        if as_json:
            click.echo(_dump([encode_message(m) for m in context.messages]))
            return
        for line in context_lines(session, context, max_chars=max_chars):
            click.echo(line)


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
@click.option("--all", "show_all", is_flag=True, help="Also show `leaf` entries (leaf moves).")
def tree(root: Path | None, ref: str, show_all: bool) -> None:
    """Print every entry of the session as a tree.

    One line per entry: id, type (the role for messages) and a short text, with markers
    [compaction], [branch summary] and [label: X]; the active leaf's line starts with `* ` and
    ends with `(leaf)`. A linear path stays at one indent; branches are indented where they
    split.
    """
    with _open(open_repo(root), ref) as session:
        view = tree_view(session, show_leaf_entries=show_all)
        for line in view.lines:
            click.echo(line)
        hidden = (
            f", {view.hidden_leaf_entries} leaf "
            f"{'entry' if view.hidden_leaf_entries == 1 else 'entries'} hidden (--all shows them)"
            if view.hidden_leaf_entries
            else ""
        )
        leaf = session.leaf_id or "(before the first entry)"
        click.echo(f"({view.shown} entries shown{hidden}; active leaf: {leaf})")


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
@click.option("--at", "at_entry", metavar="ENTRY", help="Cut at ENTRY, including it.")
@click.option(
    "--before", "before_entry", metavar="ENTRY", help="Cut just before ENTRY (at its parent)."
)
@click.option(
    "--tree", "whole_tree", is_flag=True, help="Copy every entry, not only the active branch."
)
@click.option("--cwd", metavar="DIR", default=None, help="The fork's cwd (default: the source's).")
@click.option("--json", "as_json", is_flag=True, help="Print the new session as a JSON object.")
def fork(
    root: Path | None,
    ref: str,
    at_entry: str | None,
    before_entry: str | None,
    whole_tree: bool,
    cwd: str | None,
    as_json: bool,
) -> None:
    """Copy a session's branch into a new session file under the root.

    Without --at/--before the branch up to the active leaf is copied. The new header links the
    source (parentSession) and the source file is not modified. Prints the new id and path.
    """
    if at_entry is not None and before_entry is not None:
        raise click.UsageError("give at most one of --at and --before")
    if whole_tree and (at_entry is not None or before_entry is not None):
        raise click.UsageError("--tree copies every entry; it takes no --at or --before")
    entry_id = at_entry if at_entry is not None else before_entry
    position: ForkPosition | None = (
        "at" if at_entry is not None else "before" if before_entry is not None else None
    )
    repo = open_repo(root)
    new = run_async(
        repo.fork(
            ref,
            entry_id=entry_id,
            position=position,
            scope="tree" if whole_tree else "branch",
            cwd=cwd,
        )
    )
    with new:
        if as_json:
            click.echo(
                _dump(
                    {
                        "id": new.id,
                        "path": str(new.path),
                        "parent_session": new.header.parent_session,
                        "leaf_id": new.leaf_id,
                        "entries": len(new),
                    }
                )
            )
        else:
            click.echo(f"id: {new.id}")
            click.echo(f"path: {new.path}")


@sessions.command()
@root_option
@click.argument("ref", metavar="ID")
def delete(root: Path | None, ref: str) -> None:
    """Delete a session under the root. Deleting a missing session succeeds and says so."""
    repo = open_repo(root)
    try:
        path: Path | None = repo.resolve(ref)
    except SessionNotFoundError:
        path = None
    run_async(repo.delete(ref))
    click.echo(f"deleted {path}" if path is not None else f"no session {ref!r}; nothing deleted")
