"""``harness sessions copy --from STORE --to STORE``: move sessions between stores.

Stores: ``jsonl:DIR`` (a sessions root of JSONL files), ``sqlite:PATH`` (a database file) and
``postgresql://...`` (a PostgreSQL database).
Lines are copied verbatim, so a round trip is byte-identical; a repeated copy adds nothing and
an interrupted one is finished by running it again. The work is ``repos.copy_sessions``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from repos import CopyReport, copy_sessions, open_line_store

from ._common import one_line, run_async
from ._escape import echo, terminal
from ._sessions import sessions

__all__ = ["copy"]


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[int, int, str], None] | None]:
    """A progress bar (sessions done of total) on a terminal; nothing otherwise."""
    if not enabled:
        yield None
        return
    columns = (
        TextColumn("copying"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}", markup=False),  # a session id: text, not markup
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task("", total=None)

        def update(done: int, total: int, session_id: str) -> None:
            bar.update(task, completed=done, total=total, description=terminal(session_id))

        yield update


def _summary(report: CopyReport) -> str:
    return (
        f"{len(report.copied)} copied, {len(report.resumed)} resumed, "
        f"{len(report.unchanged)} unchanged, {len(report.conflicts)} conflicts; "
        f"{report.lines} lines written"
    )


@sessions.command()
@click.option(
    "--from",
    "source",
    required=True,
    metavar="STORE",
    help="jsonl:DIR, sqlite:PATH or postgresql://...",
)
@click.option(
    "--to",
    "destination",
    required=True,
    metavar="STORE",
    help="jsonl:DIR, sqlite:PATH or postgresql://...",
)
@click.option("--id", "ids", multiple=True, metavar="ID", help="Copy only this session (repeat).")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar (default: when stdout is a terminal).",
)
@click.pass_context
def copy(
    ctx: click.Context,
    source: str,
    destination: str,
    ids: tuple[str, ...],
    progress: bool | None,
) -> None:
    """Copy sessions between stores, line for line (byte-identical on a round trip).

    A session already in the destination with the same lines is skipped; one holding only the
    first of them (an interrupted or older copy) gets the rest; one with other lines is left
    alone and reported as a conflict (exit 1).
    """
    scheme, _, where = source.partition(":")
    if scheme in ("jsonl", "sqlite") and not Path(where).expanduser().exists():
        # A typo must not "copy 0 sessions" (nor create an empty database to read from).
        raise click.BadParameter(f"{where} does not exist", param_hint="--from")
    try:
        src, dst = open_line_store(source), open_line_store(destination)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    show = sys.stdout.isatty() if progress is None else progress
    try:
        with _progress(show) as update:
            report = run_async(copy_sessions(src, dst, ids=ids or None, progress=update))
    finally:
        for store in (src, dst):
            close = getattr(store, "close", None)
            if close is not None:
                close()  # a database's connections (a PostgreSQL pool's threads)
    for session_id in report.conflicts:
        echo(f"conflict: {session_id}: the destination holds other lines; left alone")
    for session_id, problem in report.problems:
        echo(f"warning: {session_id}: {one_line(problem)}", err=True)
    echo(_summary(report))
    if report.conflicts:
        ctx.exit(1)
