"""``harness sessions copy --from STORE --to STORE``: move sessions between stores.

Stores are named as for every ``--root`` (``_common.open_repo``): ``jsonl:DIR`` or a folder (a
sessions root of JSONL files), ``sqlite:PATH`` (a database file) and ``postgresql://...``.
Lines are copied verbatim, so a round trip is byte-identical; a repeated copy adds nothing and
an interrupted one is finished by running it again. The work is ``repos.copy_sessions``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from repos import (
    CopyReport,
    LineStore,
    SessionNotFoundError,
    copy_sessions,
    line_store,
)

from ._common import (
    MIN_PREFIX,
    AmbiguousSessionError,
    RootNotFoundError,
    describe_store,
    one_line,
    open_repo,
    run_async,
)
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


async def _wanted(store: LineStore, given: tuple[str, ...], where: str) -> list[str]:
    """The ids ``--id`` names: whole ids or prefixes (at least 4 characters) of exactly one.

    Raises:
        SessionNotFoundError: one names no session of the source (nothing is copied).
        AmbiguousSessionError: a prefix starts several ids.
    """
    known = await store.ids()
    wanted: list[str] = []
    for ref in given:
        matches = [ref] if ref in known else [i for i in known if i.startswith(ref)]
        if not matches or (len(ref) < MIN_PREFIX and ref not in known):
            raise SessionNotFoundError(ref, f"no session id is or starts with it in {where}")
        if len(matches) > 1:
            raise AmbiguousSessionError(ref, dict.fromkeys(matches, where))
        wanted.append(matches[0])
    return list(dict.fromkeys(wanted))


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
    help="jsonl:DIR (or a folder), sqlite:PATH or postgresql://...",
)
@click.option(
    "--to",
    "destination",
    required=True,
    metavar="STORE",
    help="jsonl:DIR, sqlite:PATH or postgresql://...",
)
@click.option(
    "--id",
    "ids",
    multiple=True,
    metavar="ID",
    help="Copy only this session: its id or the start of it (repeat).",
)
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
    # A typo must not "copy 0 sessions" (nor create an empty database to read from).
    try:
        src_repo = open_repo(source, must_exist=True, param_hint="--from")
    except RootNotFoundError as exc:
        raise click.BadParameter(f"{exc.root} does not exist", param_hint="--from") from None
    dst_repo = open_repo(destination, param_hint="--to")
    src, dst = line_store(src_repo), line_store(dst_repo)
    wanted = run_async(_wanted(src, ids, describe_store(src_repo))) if ids else None
    show = sys.stdout.isatty() if progress is None else progress
    try:
        with _progress(show) as update:
            report = run_async(copy_sessions(src, dst, ids=wanted, progress=update))
    finally:
        for repo in (src_repo, dst_repo):
            close = getattr(repo, "close", None)
            if close is not None:
                close()  # a database's connections (a PostgreSQL pool's threads)
    for session_id in report.conflicts:
        echo(f"conflict: {session_id}: the destination holds other lines; left alone")
    for session_id, problem in report.problems:
        echo(f"warning: {session_id}: {one_line(problem)}", err=True)
    echo(_summary(report))
    if report.conflicts:
        ctx.exit(1)
