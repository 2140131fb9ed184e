"""``harness import claude-code FILE|DIR``: Claude Code transcripts become our sessions.

The reader is ``repos/_importers/claude_code.py``. Importing is idempotent: a session whose
header says it was imported from the same Claude Code session (and sidechain) is not written
again; when the transcript has grown since, the session gets the new entries (and new sidechains
new sessions). Prints, per transcript, what was imported, what was dropped and why, and which
records were re-attached. With stdout a terminal, a progress bar counts the transcripts.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import attrs
import click

from repos import JsonlSessionRepo, open_session
from repos._codec import dumps_line, encode_header
from repos._importers.claude_code import (
    Conversion,
    ImportedSession,
    append_lines,
    convert,
    imported_from,
    is_claude_code,
    missing_lines,
)

from ._common import HarnessGroup, one_line, open_repo, progress, root_option, run_async
from ._escape import echo

__all__ = ["import_group"]


@click.group("import", cls=HarnessGroup)
def import_group() -> None:
    """Import other agents' transcripts as sessions."""


def _existing(repo: JsonlSessionRepo) -> dict[tuple[str, str | None], tuple[Path, int]]:
    """Sessions under the root imported from Claude Code, by (source session id, sidechain
    root): their path and the number of records their source had."""
    out: dict[tuple[str, str | None], tuple[Path, int]] = {}
    if not repo.root.is_dir():
        return out
    for path in sorted(repo.root.glob("*/*.jsonl")):
        try:
            with path.open("rb") as f:
                first = f.readline()
        except OSError:
            continue
        origin = imported_from(first)
        if origin is None or origin.get("format") != "claude-code":
            continue
        key = (str(origin.get("sessionId")), origin.get("sidechainRoot"))
        records = origin.get("records")
        out[key] = (path, records if isinstance(records, int) else 0)
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
    for d in conversion.dropped:
        echo(f"  dropped line {d.line}{f' ({d.uuid})' if d.uuid else ''}: {d.reason}")
    for r in conversion.reattached:
        echo(
            f"  re-attached line {r.line} ({r.uuid}): parent {r.missing_parent or '(none)'} "
            f"missing; now under {r.new_parent or '(root)'}"
        )
    if conversion.unpaired_tool_results:
        echo(f"  {conversion.unpaired_tool_results} tool results without their call")


def _extend(path: Path, imported: ImportedSession) -> tuple[int, int]:
    """Append to the session at ``path`` the entries of ``imported`` it lacks: (entries added,
    entries that changed since the first import and were kept as they were)."""
    with open_session(path) as existing:
        lines, changed = missing_lines(imported, existing)
    if lines:
        append_lines(path, lines)
    return len(lines), changed


@import_group.command("claude-code")
@root_option
@click.argument("source", type=click.Path(exists=True, path_type=Path), metavar="FILE|DIR")
def claude_code(root: Path | None, source: Path) -> None:
    """Import Claude Code transcripts (a .jsonl file, or every one under DIR).

    The main thread becomes one session; each sidechain (a sub-agent's conversation) a session
    whose parentSession is the main one. Importing again adds nothing; a transcript that has
    grown since its import extends the session it became with the new entries. A FILE that is
    not a transcript exits 1; under a DIR such files are skipped and named.
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
    if refused and source.is_file():
        raise SystemExit(1)  # the one file named is not a transcript (said above, on stderr)


def _import_one(
    repo: JsonlSessionRepo, known: dict[tuple[str, str | None], tuple[Path, int]], path: Path
) -> str:
    """Import one transcript; returns ``imported``, ``extended``, ``unchanged`` or ``skipped``
    (not a transcript)."""
    if not is_claude_code(path):
        echo(f"skipped {path}: not a Claude Code transcript", err=True)
        return "skipped"
    conversion = convert(path)
    sid = conversion.source_session_id
    previous = known.get((sid, None))
    if previous is not None:
        added, changed = _extend(previous[0], conversion.main)
        new_sides = _sidechains(repo, known, conversion, previous[0])
        if not added and not new_sides:
            echo(f"already imported {path} (Claude Code session {sid}) as {previous[0]}")
            return "unchanged"
        echo(
            f"extended {previous[0]} from {path} (Claude Code session {sid}): "
            f"{added} new entries, {new_sides} new sidechain entries"
        )
        if changed:
            echo(
                f"  {changed} entries changed in the transcript since the first import; "
                "kept as first imported"
            )
        return "extended"
    main = run_async(_publish(repo, conversion.main, None))
    known[(sid, None)] = (main, conversion.records)
    echo(
        f"imported {path} (Claude Code session {sid}) as {conversion.main.header.id}: "
        f"{conversion.main.entries} entries, {conversion.main.messages} messages"
        + (f", {conversion.compactions} compactions" if conversion.compactions else "")
        + (f", named {one_line(conversion.name)!r}" if conversion.name else "")
    )
    echo(f"  file: {main}")
    _sidechains(repo, known, conversion, main)
    _report(conversion)
    echo(
        f"  {conversion.records} records read, {len(conversion.dropped)} dropped, "
        f"{len(conversion.reattached)} re-attached"
    )
    return "imported"


def _sidechains(
    repo: JsonlSessionRepo,
    known: dict[tuple[str, str | None], tuple[Path, int]],
    conversion: Conversion,
    main: Path,
) -> int:
    """Write each sidechain of ``conversion`` as a session (new) or extend the one an earlier
    import wrote; returns the entries written."""
    sid = conversion.source_session_id
    written = 0
    for side in conversion.sidechains:
        key = (sid, side.sidechain_root)
        if key in known:
            added, _ = _extend(known[key][0], side)
            written += added
            continue
        side_path = run_async(_publish(repo, side, main))
        echo(f"  sidechain {side.sidechain_root} as {side.header.id}: {side.entries} entries")
        known[key] = (side_path, conversion.records)
        written += side.entries
    return written
