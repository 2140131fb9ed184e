"""``harness import claude-code FILE|DIR``: Claude Code transcripts become our sessions.

The reader is ``repos/_importers/claude_code.py``. Importing is idempotent: a session whose
header says it was imported from the same Claude Code session (and sidechain) is not written
again; when the transcript has grown since (every entry imported before comes back unchanged,
but for the last one), the session gets the new entries (and new sidechains new sessions). A
different transcript claiming an imported session id is imported as a session of its own, and
said so: naming an id never adds to another session's history. Prints, per transcript, what was
imported, what was dropped and why, and which records were re-attached. With stdout a terminal,
a progress bar counts the transcripts.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import attrs
import click

from repos import JsonlSessionRepo, SessionError, open_session
from repos._codec import dumps_line, encode_header
from repos._importers.claude_code import (
    Comparison,
    Conversion,
    ImportedSession,
    append_lines,
    compare,
    convert,
    imported_from,
    is_claude_code,
)

from ._common import HarnessGroup, one_line, open_repo, progress, root_option, run_async
from ._escape import echo

__all__ = ["import_group"]


@click.group("import", cls=HarnessGroup)
def import_group() -> None:
    """Import other agents' transcripts as sessions."""


Known = dict[tuple[str, str | None], list[Path]]
"""Sessions under the root imported from Claude Code, by (source session id, sidechain root);
several when different transcripts claimed one session id."""


def _existing(repo: JsonlSessionRepo) -> Known:
    """The sessions under the root imported from Claude Code (see :data:`Known`)."""
    out: Known = {}
    if not repo.root.is_dir():
        return out
    for path in sorted(repo.root.glob("*/*.jsonl")):
        origin = imported_from(path)
        if origin is None or origin.get("format") != "claude-code":
            continue
        out.setdefault((str(origin.get("sessionId")), origin.get("sidechainRoot")), []).append(path)
    return out


async def _publish(repo: JsonlSessionRepo, session: ImportedSession, parent: Path | None) -> Path:
    lines = list(session.lines)
    if parent is not None:
        header = attrs.evolve(session.header, parent_session=str(parent))
        lines[0] = dumps_line(encode_header(header))
    else:
        header = session.header
    written = await asyncio.to_thread(repo._publish, header, lines)
    with written:
        assert written.path is not None
        return written.path


def _transcripts(source: Path) -> list[Path]:
    if source.is_dir():
        return sorted(p for p in source.rglob("*.jsonl") if p.is_file())
    return [source]


def _report(conversion: Conversion) -> None:
    for note in conversion.notes:
        echo(f"  note: {note}")
    for d in conversion.dropped:
        echo(f"  dropped line {d.line}{f' ({d.uuid})' if d.uuid else ''}: {d.reason}")
    for r in conversion.reattached:
        echo(
            f"  re-attached line {r.line} ({r.uuid}): parent {r.missing_parent or '(none)'} "
            f"missing; now under {r.new_parent or '(root)'}"
        )
    if conversion.unpaired_tool_results:
        echo(f"  {conversion.unpaired_tool_results} tool results without their call")


def _match(candidates: list[Path], imported: ImportedSession) -> tuple[Path, Comparison] | None:
    """The session among ``candidates`` that ``imported`` is the same transcript as (grown or
    not), with what to append; None when each came from another transcript (or cannot be
    read, so cannot be told apart)."""
    for path in candidates:
        try:
            with open_session(path) as existing:
                found = compare(imported, existing)
        except SessionError:
            continue
        if found.relation != "other":
            return path, found
    return None


def _extend(path: Path, found: Comparison) -> int:
    """Append the new entries ``found`` holds to the session at ``path``; how many."""
    if found.lines:
        append_lines(path, found.lines)
    return len(found.lines)


@import_group.command("claude-code")
@root_option
@click.argument("source", type=click.Path(exists=True, path_type=Path), metavar="FILE|DIR")
def claude_code(root: Path | None, source: Path) -> None:
    """Import Claude Code transcripts (a .jsonl file, or every one under DIR).

    The main thread becomes one session; each sidechain (a sub-agent's conversation) a session
    whose parentSession is the main one. Importing again adds nothing; a transcript that has
    grown since its import extends the session it became with the new entries. Another
    transcript claiming the same Claude Code session id becomes a session of its own (a note
    says so). A FILE that is not a transcript (or not a regular file) exits 1; under a DIR such
    files are skipped and named.
    """
    repo = open_repo(root)
    known = _existing(repo)
    imported = skipped = extended = refused = 0
    paths = _transcripts(source)
    with progress("importing transcripts", len(paths)) as advance:
        for path in paths:
            outcome = _import_one(repo, known, path)
            imported += outcome == "imported"
            extended += outcome == "extended"
            skipped += outcome == "unchanged"
            refused += outcome == "skipped"
            advance(1)
    echo(f"{imported} imported, {extended} extended, {skipped} already imported")
    if refused and not source.is_dir():
        raise SystemExit(1)  # the one file named is not a transcript (said above, on stderr)


def _import_one(repo: JsonlSessionRepo, known: Known, path: Path) -> str:
    """Import one transcript; returns ``imported``, ``extended``, ``unchanged`` or ``skipped``
    (not a transcript)."""
    if not is_claude_code(path):
        echo(f"skipped {path}: not a Claude Code transcript", err=True)
        return "skipped"
    conversion = convert(path)
    sid = conversion.source_session_id
    candidates = list(known.get((sid, None), ()))
    match = _match(candidates, conversion.main)
    if match is not None:
        previous, found = match
        added = _extend(previous, found)
        new_sides = _sidechains(repo, known, conversion, previous)
        if not added and not new_sides:
            echo(f"already imported {path} (Claude Code session {sid}) as {previous}")
            return "unchanged"
        echo(
            f"extended {previous} from {path} (Claude Code session {sid}): "
            f"{added} new entries, {new_sides} new sidechain entries"
        )
        if found.changed:
            echo(
                f"  {found.changed} entries changed in the transcript since the first import; "
                "kept as first imported"
            )
        return "extended"
    main = run_async(_publish(repo, conversion.main, None))
    known.setdefault((sid, None), []).append(main)
    echo(
        f"imported {path} (Claude Code session {sid}) as {conversion.main.header.id}: "
        f"{conversion.main.entries} entries, {conversion.main.messages} messages"
        + (f", {conversion.compactions} compactions" if conversion.compactions else "")
        + (f", named {one_line(conversion.name)!r}" if conversion.name else "")
    )
    echo(f"  file: {main}")
    if candidates:
        echo(
            f"  note: Claude Code session {sid} was imported before from another transcript "
            f"({', '.join(map(str, candidates))}): this one holds other records, so it is a "
            "session of its own, not added to that one"
        )
    _sidechains(repo, known, conversion, main, fresh=bool(candidates))
    _report(conversion)
    echo(
        f"  {conversion.records} records read, {len(conversion.dropped)} dropped, "
        f"{len(conversion.reattached)} re-attached"
    )
    return "imported"


def _sidechains(
    repo: JsonlSessionRepo,
    known: Known,
    conversion: Conversion,
    main: Path,
    *,
    fresh: bool = False,
) -> int:
    """Write each sidechain of ``conversion`` as a session (new) or extend the one an earlier
    import of the same transcript wrote (never with ``fresh``: the main session is new, so its
    sidechains are too); returns the entries written."""
    sid = conversion.source_session_id
    written = 0
    for side in conversion.sidechains:
        key = (sid, side.sidechain_root)
        match = None if fresh else _match(known.get(key, []), side)
        if match is not None:
            written += _extend(*match)
            continue
        side_path = run_async(_publish(repo, side, main))
        echo(f"  sidechain {side.sidechain_root} as {side.header.id}: {side.entries} entries")
        known.setdefault(key, []).append(side_path)
        written += side.entries
    return written
