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
import re
import shlex
import signal
import sys
import unicodedata
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

import click
import orjson

from hooks import HarnessError
from repos import (
    EntryNotFoundError,
    InvalidStoreUrlError,
    JsonlSessionRepo,
    MemorySessionRepo,
    Session,
    SessionError,
    SessionNotFoundError,
    SessionRepo,
    open_session,
    open_store,
    parse_store_url,
    validate_session_id,
)

from ._escape import echo, terminal

__all__ = [
    "MIN_PREFIX",
    "STORE_ENV",
    "AmbiguousEntryError",
    "AmbiguousSessionError",
    "HarnessCliError",
    "HarnessGroup",
    "RootNotFoundError",
    "SessionRef",
    "UnknownEntryError",
    "cli_text",
    "describe_store",
    "file_name",
    "find_ref",
    "handle_errors",
    "make_streams_safe",
    "one_line",
    "open_ref",
    "open_repo",
    "progress",
    "resolve_entry",
    "resolve_ref",
    "root_option",
    "run_async",
    "short_id",
    "shown_leaf",
    "spinner",
    "store_setting",
    "store_spec",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


APPROVAL_GUTTER = "│ "
"""Starts every line of a command shown to the person who approves it."""
# Characters a terminal shows as blank (spaces of every width, zero-width ones, the braille
# blank, Hangul fillers): bash reads the non-ASCII ones as word characters, so a run of them can
# push a command out of sight while running (``touch P;<10,000 x U+2800>echo hi``).
_BLANK = "[ \u00a0\u115f\u1160\u1680\u2000-\u200d\u202f\u205f\u2060\u2800\u3000\u3164\ufeff\uffa0]"
_BLANK_RUN = re.compile(_BLANK + "{8,}")
_ONE_BLANK = re.compile(_BLANK)


_INVISIBLE_CATEGORIES = frozenset({"Mn", "Me", "Cf", "Co", "Cn"})


def _shown(line: str) -> str:
    """``line`` with every non-ASCII invisible character (combining marks, format characters,
    private use, unassigned: U+034F, variation selectors, U+17B4) written as ``\\uXXXX``:
    one between runs of 7 blanks kept a run of thousands from being counted (review 6,
    finding 13)."""
    return "".join(
        f"\\u{ord(c):04x}"
        if ord(c) > 127
        and unicodedata.category(c) in _INVISIBLE_CATEGORIES
        and not _ONE_BLANK.match(c)  # blanks are counted in runs instead
        else c
        for c in line
    )


def gutter_lines(text: str) -> list[str]:
    """``text`` (a command a person is asked to approve) whole, one line per line, each after
    :data:`APPROVAL_GUTTER`: control characters escaped (``_escape.terminal``: a CR, an escape
    sequence or a bidi override cannot redraw or reorder it), tabs as ``\\t``, and a run of 8 or
    more blanks as a count (``echo hi⟨300 blanks⟩; touch P``) so it cannot push the rest out of
    sight. Nothing is joined or shortened: a second command after a newline is a line of its
    own."""
    return [
        APPROVAL_GUTTER
        + _BLANK_RUN.sub(
            lambda m: f"⟨{len(m.group())} blanks⟩", _shown(terminal(line)).replace("\t", "\\t")
        )
        for line in text.split("\n")
    ]


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
        message = one_line(cli_text(error)) or type(error).__name__
        hint = _WHAT_TO_TYPE.get(error.code)
        super().__init__(f"{message} ({hint})" if hint else message)
        self.code = error.code
        self.error = error

    def show(self, file: IO[Any] | None = None) -> None:
        echo(f"error[{self.code}]: {self.format_message()}", file=file, err=file is None)


def cli_text(error: HarnessError) -> str:
    """What the command line says of ``error``: its ``cli_message`` when it has one (naming
    the CLI's flags, where ``str()`` names the Python API's parameters), else ``str()``."""
    cli = getattr(error, "cli_message", None)
    return cli if isinstance(cli, str) and cli else str(error)


_WHAT_TO_TYPE = {
    "session_not_found": "`harness sessions list` shows the sessions, with --root STORE for "
    "another store",
    "root_not_found": "give --root an existing store, or run `harness run` there first to make one",
}
"""For an error the user fixes by typing something else: what to type."""


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
    """Run one coroutine to completion from a (synchronous) click command.

    SIGTERM and SIGHUP (a closed terminal, ``timeout``, a CI limit) cancel it as an abort
    does, so what runs is ended cleanly: a sandboxed command is killed and what it planted is
    set aside, the partial reply saved (review 9, finding 7). The process then exits with
    128 + the signal's number, as the signal's default action would report. A command that
    handles a signal itself (``harness rpc``: SIGTERM) replaces this handler.

    Raises:
        SystemExit: after SIGTERM or SIGHUP, once the coroutine has been cancelled.
    """
    got: list[int] = []

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop(signum: int) -> None:
            got.append(signum)
            task.cancel()

        for signum in _ENDING:
            loop.add_signal_handler(signum, stop, signum)
        try:
            return await coro
        finally:
            for signum in _ENDING:
                loop.remove_signal_handler(signum)

    try:
        result = asyncio.run(main())
    except asyncio.CancelledError:
        if got:
            raise SystemExit(128 + got[0]) from None
        raise
    if got:  # the work took the cancellation as an abort and returned
        raise SystemExit(128 + got[0])
    return result


_ENDING = (signal.SIGTERM, signal.SIGHUP)


STORE_ENV = "HARNESS_SESSIONS_DIR"
"""Environment variable naming the default store (a folder or any store URL)."""

_STORE_HELP = (
    "Where sessions are: a folder (jsonl:DIR), sqlite:PATH, postgresql://... or memory: "
    '(default: $HARNESS_SESSIONS_DIR, else "store" in the user settings, else the user data '
    "folder)."
)


def root_option(func: F) -> F:
    """Add ``--root STORE`` to a command; it receives ``root: str | None`` (a folder or a store
    URL, resolved by :func:`open_repo`). None means the default store (see :func:`store_spec`).
    """
    return click.option(
        "--root", metavar="STORE", default=None, help=_STORE_HELP, shell_complete=None
    )(func)


class RootNotFoundError(HarnessError):
    """A store given to a command that only reads does not exist (code ``root_not_found``):
    a folder or an SQLite file. Reading a missing store as an empty one would hide a typo."""

    code = "root_not_found"

    def __init__(self, root: str, why: str) -> None:
        super().__init__(f"the sessions root {root} {why}")
        self.root = root


def store_setting(path: Path | None = None) -> str | None:
    """The ``store`` key of the user settings file (``path``, default ``user_settings_path()``).

    Only the user's own file counts: a project's ``.harness/settings.json`` comes with the
    folder, and a store it named would send every session, with whatever the tools read, where
    the project chose (docs/security.md).

    Raises:
        click.UsageError: the file cannot be read, or ``store`` is not a string.
    """
    # Imported here: the permissions package is large, and a command given --root or
    # $HARNESS_SESSIONS_DIR never reads the setting.
    from .._fs import read_regular_file
    from .._permissions.folders import SETTINGS_MAX_BYTES, user_settings_path

    where = path if path is not None else user_settings_path()
    try:
        raw = read_regular_file(where, max_bytes=SETTINGS_MAX_BYTES)
        data: Any = None if raw is None else orjson.loads(raw)
    except (OSError, ValueError) as exc:
        raise click.UsageError(f"{where}: cannot read the store setting: {exc}") from None
    value = data.get("store") if isinstance(data, Mapping) else None
    if value is not None and not isinstance(value, str):
        raise click.UsageError(f"{where}: 'store' must be a string (a folder or a store URL)")
    return value


def store_spec(root: str | None) -> str | None:
    """The store a command works on: ``--root``, else ``$HARNESS_SESSIONS_DIR``, else the user
    settings' ``store``; None: the library's default folder."""
    if root is not None:
        return root
    return os.environ.get(STORE_ENV) or store_setting()


def open_repo(
    root: str | None, *, must_exist: bool = False, param_hint: str = "--root"
) -> SessionRepo:
    """The repository of a ``--root`` value (see :func:`store_spec`): every command opens its
    store here, so ``jsonl:DIR``, ``sqlite:PATH``, ``postgresql://...`` and ``memory:`` work
    everywhere and a typo is never a folder. A database's connections close with the command.

    Args:
        must_exist: the command only reads (``list``...): a folder or SQLite file that is not
            there raises :class:`RootNotFoundError` instead of looking like an empty store.

    Raises:
        click.BadParameter: an unknown scheme or a URL-looking typo (a usage error, exit 2).
        StorageError: a database that cannot be opened (the server's own message).
    """
    spec = store_spec(root)
    try:
        url = parse_store_url(spec) if spec is not None else None
    except InvalidStoreUrlError as exc:
        hint = (
            "--root" if root is not None else (STORE_ENV if os.environ.get(STORE_ENV) else "store")
        )
        raise click.BadParameter(one_line(str(exc)), param_hint=hint) from None
    if url is None:
        return JsonlSessionRepo()
    if must_exist and url.scheme in ("jsonl", "sqlite"):
        where = Path(url.location).expanduser()
        if not (where.is_dir() if url.scheme == "jsonl" else where.is_file()):
            kind = "folder" if url.scheme == "jsonl" else "file"
            raise RootNotFoundError(
                url.location if url.scheme == "jsonl" else str(url),
                f"is not a {kind}" if where.exists() else "does not exist",
            )
    repo = open_store(url)
    close = getattr(repo, "close", None)
    ctx = click.get_current_context(silent=True)
    if close is not None and ctx is not None:
        ctx.call_on_close(close)  # a database's connections (a PostgreSQL pool's threads)
    return repo


def describe_store(repo: SessionRepo) -> str:
    """Where ``repo`` keeps its sessions, for messages: a folder, ``sqlite:PATH``, a
    PostgreSQL server and database (no credentials) or ``memory:``."""
    if isinstance(repo, JsonlSessionRepo):
        return str(repo.root)
    from repos import SqliteSessionRepo  # not imported for a JSONL folder

    if isinstance(repo, SqliteSessionRepo):
        return f"sqlite:{repo.path}"
    if isinstance(repo, MemorySessionRepo):
        return "memory:"
    return str(getattr(repo, "where", repo))


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
    lists the candidates (id and file, or store)."""

    code = "ambiguous_session"

    def __init__(self, prefix: str, candidates: Mapping[str, Path | str]) -> None:
        named = [f"{sid} ({where})" for sid, where in sorted(candidates.items())[:_MAX_LISTED]]
        more = len(candidates) - len(named)
        super().__init__(
            f"session id prefix {prefix!r} matches {len(candidates)} sessions: "
            + "; ".join(named)
            + (f"; and {more} more" if more else "")
            + "; give more characters"
        )
        self.prefix = prefix
        self.candidates = dict(candidates)


def _by_name(root: Path, prefix: str) -> dict[str, Path]:
    """Session files under ``root`` whose name's id starts with ``prefix`` (already validated:
    it holds no glob character). Files are named ``<timestamp>_<id>.jsonl``."""
    found: dict[str, Path] = {}
    for path in sorted(root.glob(f"*/*_{prefix}*.jsonl")):
        session_id = path.name.partition("_")[2].removesuffix(".jsonl")
        if session_id.startswith(prefix):
            found.setdefault(session_id, path)
    return found


SessionRef = Path | str
"""A session as :func:`resolve_ref` found it: a file (``Path``) or an id in the store."""


def _session_file(repo: SessionRepo, ref: str) -> Path:
    """The file ``ref`` names as a path (it must be a regular file), whatever the store: the
    JSONL repository's rule for paths (its root plays no part in it)."""
    files = repo if isinstance(repo, JsonlSessionRepo) else JsonlSessionRepo(Path(os.devnull))
    if ref.endswith(".jsonl") or "/" in ref or os.sep in ref:
        return files.resolve(ref)
    return files.resolve(Path(ref).expanduser())


def _local_ref(repo: SessionRepo, ref: str) -> SessionRef | None:
    """Rule 1 of :func:`find_ref` (a path), the id's validation, and a JSONL store's fast
    path (a file named ``<timestamp>_<id>.jsonl``); None: look the id up in the listing."""
    if ref.endswith(".jsonl") or "/" in ref or os.sep in ref or Path(ref).expanduser().exists():
        return _session_file(repo, ref)
    validate_session_id(ref)
    if isinstance(repo, JsonlSessionRepo):
        if not repo.root.is_dir():
            raise SessionNotFoundError(ref, f"the sessions root {repo.root} does not exist")
        try:
            return repo.resolve(ref)
        except SessionNotFoundError:
            return None
    return None


async def find_ref(repo: SessionRepo, ref: str) -> SessionRef:
    """The session that ``ref``, as typed on the command line, names, in any store. Every
    command that takes a session uses this one rule:

    1. a path: ``ref`` ends in ``.jsonl``, holds a ``/``, or names something that exists
       relative to the current folder (``notes.txt``, ``adir``): that file (a folder or a missing
       file is an error, never an id), whatever the store;
    2. a whole session id in the store (one ``list`` shows, whatever its file is named);
    3. a prefix (at least :data:`MIN_PREFIX` characters, e.g. the 8 that ``list`` and ``tree``
       print) of exactly one session id.

    Returns a ``Path`` for a file, else the id (a JSONL store gives the session's file).

    Raises:
        InvalidSessionIdError: a bad id, or a path that cannot be a session file.
        SessionNotFoundError: nothing matches (the message says why: a missing root, an id
            too short to be a prefix).
        AmbiguousSessionError: the prefix starts several ids (all named).
    """
    local = await asyncio.to_thread(_local_ref, repo, ref)
    if local is not None:
        return local
    where = describe_store(repo)
    if isinstance(repo, JsonlSessionRepo) and len(ref) >= MIN_PREFIX:
        named = await asyncio.to_thread(_by_name, repo.root, ref)
        if named:  # files named after their id: no need to read every header
            return _one(ref, dict(named))
    infos = await repo.list()
    exact = [i for i in infos if i.id == ref]
    if len(exact) > 1:
        raise SessionError(
            f"session id {ref!r} is in several files: {[str(i.path) for i in exact]}"
        )
    if exact:
        return exact[0].path or exact[0].id
    if len(ref) < MIN_PREFIX:
        raise SessionNotFoundError(
            ref,
            f"no session has this id in {where}, and an id prefix needs at least {MIN_PREFIX} "
            "characters",
        )
    matches: dict[str, Path | str] = {i.id: i.path or where for i in infos if i.id.startswith(ref)}
    if not matches:
        raise SessionNotFoundError(ref, f"no session id is or starts with it in {where}")
    return _one(ref, matches)


def _one(prefix: str, matches: dict[str, Path | str]) -> SessionRef:
    if len(matches) > 1:
        raise AmbiguousSessionError(prefix, matches)
    ((session_id, found),) = matches.items()
    return found if isinstance(found, Path) else session_id


class AmbiguousEntryError(EntryNotFoundError):
    """An entry id prefix that starts several entry ids of a session (code
    ``ambiguous_entry``), or none (code ``entry_not_found``); the message lists the candidates
    (id and kind) or says where the ids are printed."""

    code = "ambiguous_entry"

    def __init__(self, prefix: str, candidates: Mapping[str, str]) -> None:
        named = [f"{eid} ({kind})" for eid, kind in list(candidates.items())[:_MAX_LISTED]]
        more = len(candidates) - len(named)
        SessionError.__init__(
            self,
            f"entry id prefix {prefix!r} matches {len(candidates)} entries: "
            + "; ".join(named)
            + (f"; and {more} more" if more else "")
            + "; give more characters",
        )
        self.entry_id, self.prefix, self.candidates = prefix, prefix, dict(candidates)


class UnknownEntryError(EntryNotFoundError):
    """No entry id of the session is or starts with what was given (code
    ``entry_not_found``); the message says where the ids are printed."""

    def __init__(self, ref: str, why: str, listed: str) -> None:
        SessionError.__init__(self, f"no entry {ref!r} in this session: {why} ({listed})")
        self.entry_id = ref


def file_name(path: str) -> str:
    """A recorded path for a listing line: newlines and tabs escaped too (``\\n``), as the
    terminal controls are, so one file stays one line."""
    return terminal(path).replace("\n", "\\n").replace("\t", "\\t")


def shown_leaf(entry_id: str | None) -> str:
    """A leaf as the commands print it: its id, or, for the leaf before the first entry
    (None), words rather than Python's ``None``."""
    return entry_id if entry_id is not None else "(before the first entry)"


def resolve_entry(
    session: Session, ref: str, *, listed: str | None = None, root: str | None = None
) -> str:
    """The entry id ``ref`` names in ``session``: a whole id, else a prefix (at least
    :data:`MIN_PREFIX` characters, e.g. the first 8 of a longer id) of exactly one, as
    :func:`find_ref` does for session ids. ``listed`` says where the ids are printed (default:
    the commands, naming the session and the ``--root`` it was found with; the chat names its
    ``/tree``).

    Raises:
        UnknownEntryError: no id is or starts with it (code ``entry_not_found``).
        AmbiguousEntryError: the prefix starts several ids (all named, with their kind).
    """
    ids = session.entry_ids()
    if ref in ids:
        return ref
    if listed is None:
        named = shlex.join([*(["--root", root] if root else []), session.id])
        listed = (
            f"`harness sessions tree {named}` and `harness checkpoints list {named}` print the "
            "entry ids"
        )
    if len(ref) < MIN_PREFIX:
        raise UnknownEntryError(
            ref,
            f"no entry has this id, and an id prefix needs at least {MIN_PREFIX} characters",
            listed,
        )
    matches = [i for i in ids if i.startswith(ref)]
    if not matches:
        raise UnknownEntryError(ref, "no entry id is or starts with it", listed)
    if len(matches) > 1:
        raise AmbiguousEntryError(
            ref, dict(zip(matches, session.entry_types(matches), strict=True))
        )
    return matches[0]


def resolve_ref(repo: SessionRepo, ref: str) -> SessionRef:
    """:func:`find_ref` from synchronous code."""
    return run_async(find_ref(repo, ref))


async def open_ref(repo: SessionRepo, ref: SessionRef) -> Session:
    """Open what :func:`find_ref` found: an id through the store, a file as a file (any
    store: a path always names a JSONL file)."""
    if isinstance(ref, Path) and not isinstance(repo, JsonlSessionRepo):
        return await asyncio.to_thread(open_session, ref)
    return await repo.open(ref)


@contextmanager
def progress(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar with counts (``done/total``) and elapsed time on stdout while the block
    runs, erased at the end; only when stdout is a terminal (a pipe or file gets nothing).

    Yields ``advance(n)``, which adds ``n`` to the count (a no-op without a terminal).
    """
    if not sys.stdout.isatty():
        yield lambda n: None
        return
    # rich is imported where a terminal shows progress (not for `list`, or output to a pipe).
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

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
    from rich.console import Console
    from rich.markup import escape

    with Console().status(escape(message)):
        yield


def make_streams_safe() -> None:
    """Never crash on a character the output encoding cannot hold (e.g. a pipe in the C locale):
    session text is arbitrary, so unencodable characters are written as backslash escapes."""
    for stream in (sys.stdout, sys.stderr):
        # Only real text streams can be reconfigured; click's test runner swaps in others.
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
