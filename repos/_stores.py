"""One string names a session store: ``jsonl:DIR``, ``sqlite:PATH``, ``postgresql://...``,
``memory:``; a plain path is ``jsonl:``. :func:`open_store` is the one resolver every command
(and any program) uses, so a typo never becomes a folder named after it.

:func:`line_store` sees any store as sessions of lines (``ids``, ``export_lines``,
``import_lines``), the view ``copy_sessions`` and the Claude Code importer work through.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, TypeAlias

from attrs import frozen

from ._codec import decode_header, loads_line
from ._copy import LineStore, _header, _JsonlLines
from ._entries import SessionHeader
from ._errors import (
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
)
from ._jsonl.repo import JsonlSessionRepo
from ._memory import MemorySessionRepo
from ._repo import SessionRepo
from ._session import FsyncPolicy, Session

__all__ = [
    "STORE_SCHEMES",
    "InvalidStoreUrlError",
    "StoreUrl",
    "line_store",
    "open_line_store",
    "open_store",
    "parse_store_url",
    "session_from_lines",
]

StoreScheme: TypeAlias = Literal["jsonl", "sqlite", "postgresql", "memory"]

STORE_SCHEMES: tuple[StoreScheme, ...] = ("jsonl", "sqlite", "postgresql", "memory")
"""The schemes :func:`parse_store_url` knows (``postgres://`` is read as ``postgresql://``,
as libpq does)."""

DEFAULT_CONNECT_TIMEOUT_S = 5.0
"""Seconds :func:`open_store` waits for a PostgreSQL server to answer its first connection."""

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_USAGE = "jsonl:DIR (or a folder), sqlite:PATH, postgresql://... or memory:"
_PASSWORD = re.compile(r"([/:][^/:@]*):[^/@]*@")


class InvalidStoreUrlError(SessionError, ValueError):
    """A store named with an unknown scheme, or a path that looks like a store URL with a typo
    (code ``invalid_store_url``); nothing was created."""

    code = "invalid_store_url"

    def __init__(self, spec: str, reason: str) -> None:
        shown = _PASSWORD.sub(r"\1:***@", spec)  # a URL's password is never printed
        super().__init__(f"store {shown!r}: {reason}; a store is {_USAGE}")
        self.spec, self.reason = shown, reason


@frozen
class StoreUrl:
    """A parsed store name: ``scheme`` and ``location`` (a folder, a database file, the whole
    PostgreSQL URL; ``""`` for ``memory:``)."""

    scheme: StoreScheme
    location: str

    def __str__(self) -> str:
        if self.scheme == "postgresql":
            return self.location
        return f"{self.scheme}:{self.location}"


def _looks_like(word: str) -> str | None:
    """The scheme ``word`` is a typo of (a close spelling), if any."""
    names = [*STORE_SCHEMES, "postgres"]
    close = difflib.get_close_matches(word.lower(), names, n=1, cutoff=0.75)
    return close[0] if close else None


def _exists(text: str) -> bool:
    """Whether ``text``, or its first path component, names something on disk: then it is a
    path whatever it looks like (``x:y``, ``sqlite/more``)."""
    first = text.split("/", 1)[0]
    return Path(text).expanduser().exists() or (bool(first) and Path(first).expanduser().exists())


def parse_store_url(spec: str | os.PathLike[str]) -> StoreUrl:
    """Parse a store name.

    ``jsonl:DIR`` (a folder of JSONL session files; a plain path means the same),
    ``sqlite:PATH`` (one SQLite file), ``postgresql://...`` or ``postgres://...`` (a libpq
    URL), ``memory:`` (nothing written; gone when the process ends). A ``Path`` is always a
    folder.

    Raises:
        InvalidStoreUrlError: an unknown scheme (``sqlit:x``, ``http://...``), a scheme with
            nothing after it, ``postgresql:`` without ``//``, or a path whose first name is a
            store scheme or a close spelling of one and that does not exist (``sqlite/x.db``,
            ``sqlite:`` mistyped as ``sqlite;``): a typo must not become a folder.
    """
    if isinstance(spec, os.PathLike):
        return StoreUrl("jsonl", os.fspath(spec))
    text = spec
    if not text.strip():
        raise InvalidStoreUrlError(text, "it is empty")
    match = _SCHEME.match(text)
    if match is not None and len(match.group(1)) > 1:
        scheme, rest = match.group(1).lower(), text[match.end() :]
        if scheme in ("postgresql", "postgres"):
            if not rest.startswith("//"):
                raise InvalidStoreUrlError(text, "a PostgreSQL URL starts postgresql://")
            return StoreUrl("postgresql", text)
        if scheme == "memory":
            if rest:
                raise InvalidStoreUrlError(text, "memory: takes nothing after the colon")
            return StoreUrl("memory", "")
        if scheme in ("jsonl", "sqlite"):
            if not rest:
                raise InvalidStoreUrlError(text, f"{scheme}: needs a path after the colon")
            return StoreUrl(scheme, rest)  # type: ignore[arg-type]
        if not _exists(text):
            typo = _looks_like(scheme)
            hint = f" (did you mean {typo}:?)" if typo else ""
            raise InvalidStoreUrlError(text, f"unknown scheme {scheme!r}{hint}")
    first = re.split(r"[/\\;,.]", text, maxsplit=1)[0]
    typo = _looks_like(first) if first and first != text else None
    if typo is not None and not _exists(text):
        raise InvalidStoreUrlError(
            text,
            f"it looks like a {typo} store URL with a typo (write {typo}:...; "
            f"./{text} for a folder of that name)",
        )
    return StoreUrl("jsonl", text)


def open_store(
    spec: str | os.PathLike[str] | StoreUrl,
    *,
    fsync: FsyncPolicy = "turn",
    strict: bool = False,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> SessionRepo:
    """The repository ``spec`` names (see :func:`parse_store_url`).

    ``jsonl:`` gives a :class:`JsonlSessionRepo` (the folder is made when a session is
    written), ``sqlite:`` a :class:`SqliteSessionRepo` (the file and its tables are made at
    once), ``postgresql://`` a ``repos.postgres.PostgresSessionRepo`` (tables made if missing),
    ``memory:`` a :class:`MemorySessionRepo`. A database repository holds connections: close it
    (``close()``) when done.

    A PostgreSQL server is tried once first, waiting at most ``connect_timeout_s`` seconds
    (libpq's ``connect_timeout``): a refused connection, a failed login or a missing database
    fails at once with the server's own message instead of behind a pool's retries.

    Raises:
        InvalidStoreUrlError: see :func:`parse_store_url`; also ``postgresql://`` without the
            ``postgres`` extra installed (the message says what to install).
        StorageError: the database cannot be opened (its message is the server's or
            SQLite's).
    """
    url = spec if isinstance(spec, StoreUrl) else parse_store_url(spec)
    if url.scheme == "jsonl":
        return JsonlSessionRepo(Path(url.location).expanduser(), fsync=fsync, strict=strict)
    if url.scheme == "sqlite":
        from ._sqlite import SqliteSessionRepo  # on use: a JSONL folder's commands need no SQL

        return SqliteSessionRepo(Path(url.location).expanduser(), fsync=fsync, strict=strict)
    if url.scheme == "memory":
        return MemorySessionRepo()
    try:
        import psycopg

        from ._postgres import PostgresSessionRepo
    except ImportError:
        raise InvalidStoreUrlError(
            url.location,
            "PostgreSQL needs the optional 'postgres' dependencies: "
            "pip install 'jsonl-harness[postgres]'",
        ) from None
    where = _display(url.location)
    try:
        # One direct attempt: the server's own words, within the timeout, with no pool warnings.
        probe = psycopg.connect(url.location, connect_timeout=max(1, round(connect_timeout_s)))
    except psycopg.Error as exc:
        raise StorageError(where, f"cannot connect: {_one_line(str(exc))}") from None
    probe.close()
    return PostgresSessionRepo(
        url.location, fsync=fsync, strict=strict, timeout=max(connect_timeout_s, 10.0)
    )


def _display(conninfo: str) -> str:
    from ._postgres.repo import _display as display

    return display(conninfo)


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --- sessions as lines --------------------------------------------------------------------------


class _JsonlStoreLines(_JsonlLines):
    """A JSONL root as a :class:`LineStore` whose ids are those ``list`` shows, so a session
    in a file named otherwise than ``<timestamp>_<id>.jsonl`` is reached too."""

    def __init__(self, repo: JsonlSessionRepo) -> None:
        super().__init__(repo.root)
        self._repo = repo
        self._paths: dict[str, Path] = {}

    async def ids(self) -> list[str]:
        infos = await self._repo.list()
        self._paths = {i.id: i.path for i in infos if i.path is not None}
        return sorted(self._paths)

    async def export_lines(self, session_id: str) -> list[bytes]:
        if session_id not in self._paths:
            await self.ids()
        path = self._paths.get(session_id) or self._repo.resolve(session_id)
        return await self._export_file(session_id, path)


class _MemoryLines:
    """A :class:`MemorySessionRepo` as a :class:`LineStore`."""

    def __init__(self, repo: MemorySessionRepo) -> None:
        self._repo = repo

    async def ids(self) -> list[str]:
        return sorted(i.id for i in await self._repo.list())

    async def export_lines(self, session_id: str) -> list[bytes]:
        record = self._repo._sessions.get(session_id)
        if record is None:
            raise SessionNotFoundError(session_id)
        with record.lock:
            return list(record.lines)

    async def import_lines(self, lines: Sequence[bytes]) -> int:
        sid = _header(lines)[0]
        record = self._repo._sessions.get(sid)
        if record is None:
            header = decode_header(loads_line(lines[0]))
            self._repo._publish(header, list(lines)).close()
            return len(lines)
        with record.lock:
            have = record.lines
            if list(lines) == have:
                return 0
            if len(have) > len(lines) or list(lines[: len(have)]) != have:
                raise SessionExistsError(sid)
            record.lines.extend(lines[len(have) :])
            return len(lines) - len(have)


def line_store(repo: SessionRepo) -> LineStore:
    """``repo`` seen as sessions of lines: ``ids()``, ``export_lines(id)`` (the header line,
    then one line per entry, byte for byte) and ``import_lines(lines)`` (a new session, or the
    missing end of one whose lines are a prefix of these; ``SessionExistsError`` when the
    store holds other lines under that id). What ``copy_sessions`` and the Claude Code import
    work through.

    Raises:
        TypeError: a repository of another kind (it has no line view).
    """
    if isinstance(repo, JsonlSessionRepo):
        return _JsonlStoreLines(repo)
    if isinstance(repo, MemorySessionRepo):
        return _MemoryLines(repo)
    if all(hasattr(repo, name) for name in ("ids", "export_lines", "import_lines")):
        return repo  # type: ignore[return-value]  # the database stores are line stores
    raise TypeError(f"{type(repo).__name__} has no line view")


def session_from_lines(lines: Sequence[bytes]) -> Session:
    """A session held in memory, read from its lines (the header line first), written
    nowhere: for showing converted or exported lines without a temporary file.

    Raises:
        CorruptSessionError: the first line is no valid session header.
        InvalidSessionIdError: the header's id cannot name a session.
    """
    _header(lines)  # a valid header whose id a session may have, or CorruptSessionError
    header: SessionHeader = decode_header(loads_line(lines[0]))
    return MemorySessionRepo()._publish(header, list(lines))


def open_line_store(spec: str) -> LineStore:
    """``line_store(open_store(spec))``: the store ``spec`` names, as lines.

    Raises:
        InvalidStoreUrlError, StorageError: as :func:`open_store`.
    """
    return line_store(open_store(spec))
