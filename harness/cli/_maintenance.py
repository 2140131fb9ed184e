"""``harness sessions verify | repair | migrate``: check and fix one session file.

``verify`` reads without writing and exits 1 when it finds a problem (info findings, such as a
tool call an aborted turn left unanswered, do not count). ``repair`` and ``migrate`` rewrite the
file atomically under the append lock, keeping the original beside it. The rules are in
``repos/_jsonl/verify.py``; this module only resolves the session, prints and sets exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from repos.maintenance import Finding, migrate_file, repair_file, verify_file

from ._common import describe_store, one_line, open_repo, resolve_ref, root_option
from ._escape import echo, json_line, terminal
from ._sessions import sessions

__all__ = ["migrate", "repair", "verify"]

_REF = "ID|PATH"
_BIG = 1 << 20  # bytes: smaller files are done before a bar would be drawn


@contextmanager
def _progress(path: Path, label: str) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stdout for a big file, only when stdout is a terminal."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    if size < _BIG or not sys.stdout.isatty():
        yield None
        return
    columns = (
        # The file name is data: shown as text, neither rich markup nor a format string.
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(terminal(f"{label} {path.name}"), total=size)
        yield lambda done: bar.update(task, completed=done)


def _file_of(root: str | None, ref: str) -> Path:
    """The JSONL file ``ref`` names: these commands check and rewrite files, so a session kept
    in a database is a usage error (its lines are checked as they are stored)."""
    repo = open_repo(root)
    found = resolve_ref(repo, ref)
    if not isinstance(found, Path):
        raise click.UsageError(
            f"session {found} is in {describe_store(repo)}: verify, repair and migrate work on "
            "JSONL files (`harness sessions copy --to jsonl:DIR --id ID` makes one)"
        )
    return found


def _where(finding: Finding) -> str:
    return f"line {finding.line} (byte {finding.offset})"


def _finding_line(path: Path, finding: Finding) -> str:
    return (
        f"{path}:{finding.line}: {finding.severity}: {finding.code}: "
        f"{one_line(finding.message)} (byte {finding.offset})"
    )


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as a JSON object.")
@click.pass_context
def verify(ctx: click.Context, root: str | None, ref: str, as_json: bool) -> None:
    """Check a session file for every problem, without writing to it.

    One line per finding: file:line, severity, code, message and byte offset. Exit 0 when the
    file has no problem (info findings, such as tool calls left unanswered by an aborted turn,
    are printed but do not count), 1 otherwise.
    """
    path = _file_of(root, ref)
    with _progress(path, "verifying") as progress:
        report = verify_file(path, progress=None if as_json else progress)
    if as_json:
        echo(json_line(report.as_json(), indent=True))
    else:
        for finding in report.findings:
            echo(_finding_line(path, finding))
        problems = len(report.problems)
        if problems:
            echo(
                f"{path}: {problems} problem{'s' if problems != 1 else ''} "
                f"({report.entries} entries after repair); `harness sessions repair` fixes them"
                if report.readable
                else f"{path}: {problems} problem{'s' if problems != 1 else ''}; unreadable"
            )
        else:
            echo(f"ok: {path}: {report.entries} entries, no problems")
    if report.problems:
        ctx.exit(1)


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
def repair(root: str | None, ref: str, dry_run: bool) -> None:
    """Rewrite a session file without the problems `verify` reports.

    Drops a torn last line, bad lines, bad bodies, blank lines and duplicate ids; re-attaches
    orphans to the previous valid entry in file order (as reading does) and breaks parent
    cycles; removes tool results whose call is not on their path and leaf/label entries whose
    target is missing. Every other line is kept byte for byte. The original is kept as
    <file>.bak (.bak.1, ... if taken); the new file is written atomically under the append lock.
    """
    path = _file_of(root, ref)
    with _progress(path, "repairing") as progress:
        result = repair_file(path, dry_run=dry_run, progress=progress)
    if not result.changes:
        echo(f"nothing to repair: {path}: {result.entries} entries, no problems")
        return
    for change in result.changes:
        echo(f"{_where(change)}: {change.code}: {change.fix or 'changed'}")
    count = len(result.changes)
    if dry_run:
        echo(
            f"dry run: {path}: {count} change{'s' if count != 1 else ''} would leave "
            f"{result.entries} entries; nothing written"
        )
    else:
        echo(
            f"repaired {path}: {count} change{'s' if count != 1 else ''}, {result.entries} "
            f"entries; original kept as {result.backup}"
        )


@sessions.command()
@root_option
@click.argument("ref", metavar=_REF)
def migrate(root: str | None, ref: str) -> None:
    """Rewrite a v1/v2 session file as v3, with the same entry ids a read gives.

    The original is kept as <file>.v1.bak (or .v2.bak; numbered if taken); the new file is
    written atomically under the append lock. A v3 file is left alone. Lines reading skips
    (a torn tail, a bad line) are not carried over and are named on stderr.
    """
    path = _file_of(root, ref)
    result = migrate_file(path)
    if result.backup is None:
        echo(f"already v{result.from_version}: {path}; nothing to migrate")
        return
    for note in result.notes:
        where = f"line {note.line}: " if note.line is not None else ""
        echo(f"note: {where}{one_line(note.message)} ({note.code})", err=True)
    echo(
        f"migrated {path} from v{result.from_version} to v3: {result.entries} entries; "
        f"original kept as {result.backup}"
    )
