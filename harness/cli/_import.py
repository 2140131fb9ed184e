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

from collections.abc import Mapping
from pathlib import Path

import attrs
import click

from repos import (
    JsonlSessionRepo,
    LineStore,
    Session,
    SessionError,
    SessionRepo,
    dumps_line,
    encode_header,
    line_store,
)
from repos.claude_code import (
    Comparison,
    Conversion,
    ImportedSession,
    compare,
    convert,
    imported_from,
    is_claude_code,
)

from ._common import (
    HarnessGroup,
    describe_store,
    one_line,
    open_ref,
    open_repo,
    progress,
    root_option,
    run_async,
)
from ._escape import echo

__all__ = ["import_group"]


@click.group("import", cls=HarnessGroup)
def import_group() -> None:
    """Import other agents' transcripts as sessions."""


Known = dict[tuple[str, str | None], list[str]]
"""Sessions of the store imported from Claude Code, by (source session id, sidechain root):
their ids (a JSONL store: their files); several when different transcripts claimed one id."""


class _Target:
    """The store sessions are imported into: its repository and its line view."""

    def __init__(self, repo: SessionRepo) -> None:
        self.repo = repo
        self.lines: LineStore = line_store(repo)

    def known(self) -> Known:
        """The sessions of the store imported from Claude Code (see :data:`Known`)."""
        out: Known = {}
        for ref, origin in self._origins():
            if origin.get("format") == "claude-code":
                side = origin.get("sidechainRoot")
                key = (str(origin.get("sessionId")), side if isinstance(side, str) else None)
                out.setdefault(key, []).append(ref)
        return out

    def _origins(self) -> list[tuple[str, dict[str, object]]]:
        if isinstance(self.repo, JsonlSessionRepo):
            # Files: only the header line of each is read.
            if not self.repo.root.is_dir():
                return []
            found = []
            for path in sorted(self.repo.root.glob("*/*.jsonl")):
                origin = imported_from(path)
                if origin is not None:
                    found.append((str(path), dict(origin)))
            return found
        found = []
        for info in run_async(self.repo.list()):
            try:
                with self.open(info.id) as session:
                    metadata = session.header.metadata
            except SessionError:
                continue  # unreadable: it cannot be told apart, so it is never extended
            origin = metadata.get("importedFrom") if metadata is not None else None
            if isinstance(origin, Mapping):
                found.append((info.id, dict(origin)))
        return found

    def publish(self, session: ImportedSession, parent: str | None) -> str:
        """Write ``session`` as a new session (its header naming ``parent``); its ref."""
        lines = list(session.lines)
        if parent is not None:
            header = attrs.evolve(session.header, parent_session=parent)
            lines[0] = dumps_line(encode_header(header))
        run_async(self.lines.import_lines(lines))
        if isinstance(self.repo, JsonlSessionRepo):
            return str(self.repo.resolve(session.header.id))
        return session.header.id

    def extend(self, ref: str, found: Comparison) -> int:
        """Append the new entries ``found`` holds to the session ``ref``; how many."""
        if not found.lines:
            return 0
        session_id = self._id_of(ref)
        have = run_async(self.lines.export_lines(session_id))
        run_async(self.lines.import_lines([*have, *found.lines]))
        return len(found.lines)

    def _id_of(self, ref: str) -> str:
        if isinstance(self.repo, JsonlSessionRepo):
            with self.open(ref) as session:
                return session.id
        return ref

    def open(self, ref: str) -> Session:
        return run_async(open_ref(self.repo, Path(ref) if ref.endswith(".jsonl") else ref))


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


def _match(
    target: _Target, candidates: list[str], imported: ImportedSession
) -> tuple[str, Comparison] | None:
    """The session among ``candidates`` that ``imported`` is the same transcript as (grown or
    not), with what to append; None when each came from another transcript (or cannot be
    read, so cannot be told apart)."""
    for ref in candidates:
        try:
            with target.open(ref) as existing:
                found = compare(imported, existing)
        except SessionError:
            continue
        if found.relation != "other":
            return ref, found
    return None


@import_group.command("claude-code")
@root_option
@click.argument("source", type=click.Path(exists=True, path_type=Path), metavar="FILE|DIR")
def claude_code(root: str | None, source: Path) -> None:
    """Import Claude Code transcripts (a .jsonl file, or every one under DIR), into any store.

    The main thread becomes one session; each sidechain (a sub-agent's conversation) a session
    whose parentSession is the main one. Importing again adds nothing; a transcript that has
    grown since its import extends the session it became with the new entries. Another
    transcript claiming the same Claude Code session id becomes a session of its own (a note
    says so). A FILE that is not a transcript (or not a regular file) exits 1; under a DIR such
    files are skipped and named; a DIR holding no .jsonl file at all exits 1.
    """
    paths = _transcripts(source)
    if not paths:
        echo(f"nothing to import: no .jsonl file under {source}", err=True)
        raise SystemExit(1)
    target = _Target(open_repo(root))
    known = target.known()
    imported = skipped = extended = refused = 0
    with progress("importing transcripts", len(paths)) as advance:
        for path in paths:
            outcome = _import_one(target, known, path)
            imported += outcome == "imported"
            extended += outcome == "extended"
            skipped += outcome == "unchanged"
            refused += outcome == "skipped"
            advance(1)
    echo(f"{imported} imported, {extended} extended, {skipped} already imported")
    if refused and not source.is_dir():
        raise SystemExit(1)  # the one file named is not a transcript (said above, on stderr)


def _import_one(target: _Target, known: Known, path: Path) -> str:
    """Import one transcript; returns ``imported``, ``extended``, ``unchanged`` or ``skipped``
    (not a transcript)."""
    if not is_claude_code(path):
        echo(f"skipped {path}: not a Claude Code transcript", err=True)
        return "skipped"
    conversion = convert(path)
    sid = conversion.source_session_id
    candidates = list(known.get((sid, None), ()))
    match = _match(target, candidates, conversion.main)
    if match is not None:
        previous, found = match
        added = target.extend(previous, found)
        new_sides = _sidechains(target, known, conversion, previous)
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
    main = target.publish(conversion.main, None)
    known.setdefault((sid, None), []).append(main)
    echo(
        f"imported {path} (Claude Code session {sid}) as {conversion.main.header.id}: "
        f"{conversion.main.entries} entries, {conversion.main.messages} messages"
        + (f", {conversion.compactions} compactions" if conversion.compactions else "")
        + (f", named {one_line(conversion.name)!r}" if conversion.name else "")
    )
    where = main if main.endswith(".jsonl") else describe_store(target.repo)
    echo(f"  {'file' if main.endswith('.jsonl') else 'in'}: {where}")
    if candidates:
        echo(
            f"  note: Claude Code session {sid} was imported before from another transcript "
            f"({', '.join(candidates)}): this one holds other records, so it is a "
            "session of its own, not added to that one"
        )
    _sidechains(target, known, conversion, main, fresh=bool(candidates))
    _report(conversion)
    echo(
        f"  {conversion.records} records read, {len(conversion.dropped)} dropped, "
        f"{len(conversion.reattached)} re-attached"
    )
    return "imported"


def _sidechains(
    target: _Target,
    known: Known,
    conversion: Conversion,
    main: str,
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
        match = None if fresh else _match(target, known.get(key, []), side)
        if match is not None:
            written += target.extend(*match)
            continue
        side_ref = target.publish(side, main)
        echo(f"  sidechain {side.sidechain_root} as {side.header.id}: {side.entries} entries")
        known.setdefault(key, []).append(side_ref)
        written += side.entries
    return written
