"""Opening the session a command names, as every command does: through ``_common.find_ref``
(an id, a prefix or a path, in any store), a Claude Code transcript converted in memory and
said so, and what reading found reported on stderr."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from repos import CorruptSessionError, Session, SessionRepo, session_from_lines

from ._common import one_line, open_ref, resolve_ref, run_async
from ._escape import echo

__all__ = ["opened", "shown_path", "warn_diagnostics"]


def warn_diagnostics(session: Session, *, since: int = 0) -> None:
    """Report what reading the file found and handled (torn tail, skipped lines...): the data
    shown may differ from the file, and the user should know why. ``since``: how many of the
    session's diagnostics were reported already."""
    for diag in session.diagnostics[since:]:
        where = str(session.path or session.id) + (f":{diag.line}" if diag.line else "")
        echo(f"warning: {where}: {one_line(diag.message)} ({diag.code})", err=True)


_TRANSCRIPTS: dict[str, Path] = {}
"""Claude Code transcripts opened converted (in memory) by :func:`_open`, by session id: what
a command names as the session's file."""


def shown_path(session: Session) -> str:
    """The session's file for messages: its path, the Claude Code transcript it was
    converted from, or ``(in the store)`` for a database's."""
    if session.path is not None:
        return str(session.path)
    transcript = _TRANSCRIPTS.get(session.id)
    return f"{transcript} (converted)" if transcript is not None else "(in the store)"


@contextmanager
def opened(repo: SessionRepo, ref: str) -> Iterator[Session]:
    """Open the session ``ref`` names (see ``_common.find_ref``); a Claude Code transcript is
    opened converted, in memory, with a note saying so. Diagnostics of reading go to stderr: those
    of opening first, then those found while the command read bodies (a damaged body is found
    when it is first decoded, and skipped)."""
    found = resolve_ref(repo, ref)
    try:
        session = run_async(open_ref(repo, found))
    except CorruptSessionError:
        from repos.claude_code import is_claude_code

        if not (isinstance(found, Path) and found.is_file() and is_claude_code(found)):
            raise
        session = _open_claude_code(found)
    warn_diagnostics(session)
    seen = len(session.diagnostics)
    try:
        with session:
            yield session
            warn_diagnostics(session, since=seen)
    finally:
        _TRANSCRIPTS.pop(session.id, None)


def _open_claude_code(path: Path) -> Session:
    """A Claude Code transcript, converted and held in memory (nothing is written)."""
    from repos.claude_code import convert

    conversion = convert(path)
    echo(
        f"note: {path} is a Claude Code transcript (session {conversion.source_session_id}, "
        f"{conversion.records} records), not one of our sessions; shown converted, read-only. "
        f"`harness import claude-code {path}` imports it.",
        err=True,
    )
    session = session_from_lines(conversion.main.lines)
    _TRANSCRIPTS[session.id] = path
    return session
