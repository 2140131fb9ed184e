"""What every command shares: the ``--root`` option, naming a session, error reporting and
running coroutines.

Kept apart from the commands so that ``demo`` (and any later command) reuses exactly the same
behaviour: a ``HarnessError`` becomes one line ``error[<code>]: <message>`` on stderr and exit
code 1; click's usage errors keep exit code 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from hooks import HarnessError
from repos import JsonlSessionRepo, SessionError, SessionNotFoundError, validate_session_id

from ._escape import echo, terminal

__all__ = [
    "MIN_PREFIX",
    "AmbiguousSessionError",
    "HarnessCliError",
    "HarnessGroup",
    "RootNotFoundError",
    "handle_errors",
    "make_streams_safe",
    "one_line",
    "open_repo",
    "progress",
    "resolve_ref",
    "root_option",
    "run_async",
    "short_id",
    "spinner",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def one_line(text: str) -> str:
    """``text`` with whitespace runs (newlines included) collapsed to one space, and terminal
    controls shown escaped (``_escape.terminal``)."""
    return terminal(" ".join(text.split()))


class HarnessCliError(click.ClickException):
    """A ``HarnessError`` on its way out of the CLI: printed as ``error[<code>]: <message>``.

    The message is forced onto one line so that scripts can rely on one error, one line.
    """

    exit_code = 1

    def __init__(self, error: HarnessError) -> None:
        super().__init__(one_line(str(error)) or type(error).__name__)
        self.code = error.code
        self.error = error

    def show(self, file: IO[Any] | None = None) -> None:
        echo(f"error[{self.code}]: {self.format_message()}", file=file, err=file is None)


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn any ``HarnessError`` raised inside the block into a :class:`HarnessCliError`.

    A closed stdout (``BrokenPipeError``) exits 141 without a message, as ``SIGPIPE`` would.
    An ``OSError`` (a folder that cannot be made, no permission) becomes ``error[os_error]``
    naming the path. Other exceptions pass through untouched: an unexpected one is a bug and
    must keep its traceback.
    """
    try:
        yield
    except HarnessError as exc:
        raise HarnessCliError(exc) from exc
    except BrokenPipeError:
        # The reader of stdout went away (`harness sessions list | head -1`): nothing is wrong
        # that a message could fix. Exit as a process killed by SIGPIPE would (128 + 13), and
        # point stdout at /dev/null so the interpreter's final flush does not complain.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(141) from None
    except OSError as exc:
        # A folder the user named cannot be made or read: their input, not our bug.
        raise HarnessCliError(_OsError(exc)) from exc


class _OsError(HarnessError):
    code = "os_error"

    def __init__(self, exc: OSError) -> None:
        where = f"{exc.filename}: " if exc.filename else ""
        super().__init__(f"{where}{exc.strerror or exc}")


class HarnessGroup(click.Group):
    """A click group that reports ``HarnessError`` from any of its commands (see module doc).

    Used by ``main``, so every command registered on it, now or later, gets the same handling.
    """

    def invoke(self, ctx: click.Context) -> Any:
        with handle_errors():
            return super().invoke(ctx)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion from a (synchronous) click command."""
    return asyncio.run(coro)


def root_option(func: F) -> F:
    """Add ``--root DIR`` (the sessions root) to a command; it receives ``root: Path | None``.

    None means the library default: ``$HARNESS_SESSIONS_DIR``, else the user data folder.
    """
    return click.option(
        "--root",
        metavar="DIR",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Sessions root folder (default: $HARNESS_SESSIONS_DIR, else the user data folder).",
    )(func)


class RootNotFoundError(HarnessError):
    """A ``--root`` given to a command that only reads does not exist (code ``root_not_found``).

    Reading a missing folder as an empty one would hide a typo in the path.
    """

    code = "root_not_found"

    def __init__(self, root: Path) -> None:
        super().__init__(f"the sessions root {root} does not exist")
        self.root = root


def open_repo(root: Path | None, *, must_exist: bool = False) -> JsonlSessionRepo:
    """The JSONL repository for a ``--root`` value (None: the library's default root).

    Args:
        must_exist: the command only reads (``list``...): an explicit ``root`` that is not a
            folder raises :class:`RootNotFoundError` instead of looking like an empty root.
    """
    if must_exist and root is not None and not root.expanduser().is_dir():
        raise RootNotFoundError(root)
    return JsonlSessionRepo(root)


MIN_PREFIX = 4
"""Shortest id prefix :func:`resolve_ref` looks up (shorter ones must be whole ids)."""

_SHORT_ID = 8
_MAX_LISTED = 10  # candidates named in an ambiguity error; the rest are counted


def short_id(session_id: str) -> str:
    """The first 8 characters of a session id, as ``list`` and ``tree`` print it (a prefix
    :func:`resolve_ref` accepts)."""
    return session_id[:_SHORT_ID]


class AmbiguousSessionError(SessionError):
    """An id prefix that starts several session ids (code ``ambiguous_session``); the message
    lists the candidates (id and file)."""

    code = "ambiguous_session"

    def __init__(self, prefix: str, candidates: dict[str, Path]) -> None:
        named = [f"{sid} ({path})" for sid, path in sorted(candidates.items())[:_MAX_LISTED]]
        more = len(candidates) - len(named)
        super().__init__(
            f"session id prefix {prefix!r} matches {len(candidates)} sessions: "
            + "; ".join(named)
            + (f"; and {more} more" if more else "")
            + "; give more characters"
        )
        self.prefix = prefix
        self.candidates = dict(candidates)


def _by_prefix(root: Path, prefix: str) -> dict[str, Path]:
    """Session ids under ``root`` that start with ``prefix`` (already validated: it holds no
    glob character), with a file of each. Files are named ``<timestamp>_<id>.jsonl``."""
    found: dict[str, Path] = {}
    for path in sorted(root.glob(f"*/*_{prefix}*.jsonl")):
        session_id = path.name.partition("_")[2].removesuffix(".jsonl")
        if session_id.startswith(prefix):
            found.setdefault(session_id, path)
    return found


def resolve_ref(repo: JsonlSessionRepo, ref: str) -> Path:
    """The session file that ``ref``, as typed on the command line, names. Every command that
    takes a session uses this one rule:

    1. a path: ``ref`` ends in ``.jsonl``, holds a ``/``, or names something that exists
       relative to the current folder (``notes.txt``, ``adir``): that file (a folder or a missing
       file is an error, never an id);
    2. a whole session id under the root;
    3. a prefix (at least :data:`MIN_PREFIX` characters, e.g. the 8 that ``list`` and ``tree``
       print) of exactly one session id under the root.

    Raises:
        InvalidSessionIdError: a bad id, or a path that cannot be a session file.
        SessionNotFoundError: nothing matches (also when the root does not exist, said so).
        AmbiguousSessionError: the prefix starts several ids (all named).
    """
    path = Path(ref).expanduser()
    if ref.endswith(".jsonl") or "/" in ref or os.sep in ref:
        return repo.resolve(ref)
    if path.exists():
        return repo.resolve(path)
    validate_session_id(ref)
    if not repo.root.is_dir():
        raise SessionNotFoundError(ref, f"the sessions root {repo.root} does not exist")
    try:
        return repo.resolve(ref)
    except SessionNotFoundError:
        if len(ref) < MIN_PREFIX:
            raise
    matches = _by_prefix(repo.root, ref)
    if not matches:
        raise SessionNotFoundError(ref, f"no session id is or starts with it under {repo.root}")
    if len(matches) > 1:
        raise AmbiguousSessionError(ref, matches)
    return repo.resolve(next(iter(matches)))


@contextmanager
def progress(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar with counts (``done/total``) and elapsed time on stdout while the block
    runs, erased at the end; only when stdout is a terminal (a pipe or file gets nothing).

    Yields ``advance(n)``, which adds ``n`` to the count (a no-op without a terminal).
    """
    if not sys.stdout.isatty():
        yield lambda n: None
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(terminal(description), total=total)
        yield lambda n: bar.advance(task, n)


@contextmanager
def spinner(message: str) -> Iterator[None]:
    """A spinner with ``message`` on stdout while the block runs (a single
    step, such as a summary being written); only when stdout is a terminal."""
    if not sys.stdout.isatty():
        yield
        return
    with Console().status(escape(message)):
        yield


def make_streams_safe() -> None:
    """Never crash on a character the output encoding cannot hold (e.g. a pipe in the C locale):
    session text is arbitrary, so unencodable characters are written as backslash escapes."""
    for stream in (sys.stdout, sys.stderr):
        # Only real text streams can be reconfigured; click's test runner swaps in others.
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
