"""What every command shares: the ``--root`` option, error reporting and running coroutines.

Kept apart from the commands so that ``demo`` (and any later command) reuses exactly the same
behaviour: a ``HarnessError`` becomes one line ``error[<code>]: <message>`` on stderr and exit
code 1; click's usage errors keep exit code 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import asyncio
import io
import re
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

import click

from hooks import HarnessError
from repos import JsonlSessionRepo

__all__ = [
    "HarnessCliError",
    "HarnessGroup",
    "handle_errors",
    "make_streams_safe",
    "one_line",
    "open_repo",
    "printable",
    "root_option",
    "run_async",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with terminal control characters (ESC, BEL, ...) shown as ``\\x1b`` escapes.

    Session text is arbitrary: a tool result holding ``ESC]0;...`` would otherwise retitle or
    clear the user's terminal when shown. Newlines and tabs are kept.
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def one_line(text: str) -> str:
    """``text`` with whitespace runs (newlines included) collapsed to one space, printable."""
    return printable(" ".join(text.split()))


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
        click.echo(f"error[{self.code}]: {self.format_message()}", file=file, err=file is None)


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn any ``HarnessError`` raised inside the block into a :class:`HarnessCliError`.

    An ``OSError`` (a folder that cannot be made, no permission) becomes ``error[os_error]``
    naming the path. Other exceptions pass through untouched: an unexpected one is a bug and
    must keep its traceback.
    """
    try:
        yield
    except HarnessError as exc:
        raise HarnessCliError(exc) from exc
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


def open_repo(root: Path | None) -> JsonlSessionRepo:
    """The JSONL repository for a ``--root`` value (None: the library's default root)."""
    return JsonlSessionRepo(root)


def make_streams_safe() -> None:
    """Never crash on a character the output encoding cannot hold (e.g. a pipe in the C locale):
    session text is arbitrary, so unencodable characters are written as backslash escapes."""
    for stream in (sys.stdout, sys.stderr):
        # Only real text streams can be reconfigured; click's test runner swaps in others.
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
