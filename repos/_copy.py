"""Moving sessions between stores line for line: ``harness sessions copy``.

Every store holds a session as the lines of its JSONL file (the header line, then one line per
entry, byte for byte), so a copy moves lines, never re-encodes them: a session copied from a
folder of files into a database and back is byte-identical. A copy is idempotent and
resumable: a session the destination already holds with the same lines is skipped, one whose
lines there are a prefix of the source's (an interrupted or older copy) gets only the rest, and
one holding different lines is reported as a conflict and left alone.

Stores are named as everywhere (``repos.open_store``): ``jsonl:DIR`` (a sessions root),
``sqlite:PATH`` (a database file), ``postgresql://...`` (needs the ``postgres`` extra).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import orjson
from attrs import define, field

from ._codec import CodecError, decode_header, loads_line
from ._errors import (
    CorruptSessionError,
    InvalidSessionIdError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
)
from ._files import open_regular
from ._jsonl.atomic import publish_atomically
from ._jsonl.paths import check_under_root, session_path, validate_session_id
from ._jsonl.repo import JsonlSessionRepo

__all__ = ["CopyReport", "LineStore", "copy_sessions"]


class LineStore(Protocol):
    """A store seen as sessions of lines (see the module docstring)."""

    async def ids(self) -> list[str]: ...

    async def export_lines(self, session_id: str) -> list[bytes]: ...

    async def import_lines(self, lines: Sequence[bytes]) -> int: ...


@define
class CopyReport:
    """What a copy did, session by session."""

    copied: list[str] = field(factory=list)
    """New in the destination."""
    resumed: list[str] = field(factory=list)
    """Already there in part: the missing lines were added."""
    unchanged: list[str] = field(factory=list)
    """Already there with the same lines."""
    conflicts: list[str] = field(factory=list)
    """Already there with other lines: left alone."""
    problems: list[tuple[str, str]] = field(factory=list)
    """(session id, what was wrong): a torn last line left behind, an unreadable session."""
    lines: int = 0
    """Lines written to the destination."""


class _JsonlLines:
    """A sessions root as a :class:`LineStore`."""

    def __init__(self, root: Path) -> None:
        self._repo = JsonlSessionRepo(root)
        self._root = root
        self.torn: dict[str, int] = {}

    async def ids(self) -> list[str]:
        infos = await self._repo.list()
        return sorted(i.id for i in infos)

    async def export_lines(self, session_id: str) -> list[bytes]:
        return await self._export_file(session_id, self._repo.resolve(session_id))

    async def _export_file(self, session_id: str, path: Path) -> list[bytes]:
        data = await asyncio.to_thread(_read_regular, path)
        parts = data.split(b"\n")
        if parts[-1]:
            self.torn[session_id] = len(parts[-1])
        return [p + b"\n" for p in parts[:-1]]

    async def import_lines(self, lines: Sequence[bytes]) -> int:
        return await asyncio.to_thread(self._import, lines)

    def _import(self, lines: Sequence[bytes]) -> int:
        header = _header(lines)
        data = b"".join(lines)
        try:
            path = self._repo.resolve(header[0])
        except SessionNotFoundError:
            # The header is the source's, anyone's: one folder and one name under the root.
            target = session_path(self._root, header[1], header[2], header[0])
            try:
                if target.parent.is_symlink():
                    check_under_root(self._root, target.parent)
                publish_atomically(target, [data], exclusive=True)
            except FileExistsError:
                raise SessionExistsError(header[0]) from None
            except OSError as exc:
                raise StorageError.wrap(target, exc, "writing the copied session") from exc
            return len(lines)
        fd = open_regular(path, os.O_RDWR | os.O_APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # the lock every writer of this file takes
            have = _read_all(fd)
            if have == data:
                return 0
            if not have.endswith(b"\n") or not data.startswith(have):
                raise SessionExistsError(header[0])
            rest = data[len(have) :]
            view = memoryview(rest)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            return rest.count(b"\n")
        finally:
            os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _read_regular(path: Path) -> bytes:
    """The bytes of the regular file at ``path`` (a FIFO or a device is refused unread)."""
    fd = open_regular(path)
    try:
        return _read_all(fd)
    finally:
        os.close(fd)


def _header(lines: Sequence[bytes]) -> tuple[str, str, str]:
    """(id, cwd, timestamp) of a session's line 1."""
    try:
        header = decode_header(loads_line(lines[0])) if lines else None
    except (orjson.JSONDecodeError, CodecError):
        header = None
    if header is None:
        raise CorruptSessionError("<copy>", 1, 0, "no valid session header")
    return validate_session_id(header.id), header.cwd, header.timestamp


async def copy_sessions(
    source: LineStore,
    destination: LineStore,
    *,
    ids: Sequence[str] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> CopyReport:
    """Copy every session (or those in ``ids``) from ``source`` to ``destination``.

    Each session is written whole or not at all (the database in one transaction, a file by an
    atomic rename), so a copy stopped midway is resumed by running it again.

    Args:
        progress: called after each session with (sessions done, total, session id).
    """
    report = CopyReport()
    wanted = list(ids) if ids is not None else await source.ids()
    for done, session_id in enumerate(wanted, start=1):
        try:
            lines = await source.export_lines(session_id)
            added = await destination.import_lines(lines)
        except SessionExistsError:
            report.conflicts.append(session_id)
        except (
            SessionNotFoundError,
            CorruptSessionError,
            InvalidSessionIdError,
            StorageError,
        ) as exc:
            # This session cannot be copied (a header no file can be named after, a name too
            # long for the file system): said, and the others still are.
            report.problems.append((session_id, str(exc)))
        else:
            report.lines += added
            if added == 0:
                report.unchanged.append(session_id)
            elif added == len(lines):
                report.copied.append(session_id)
            else:
                report.resumed.append(session_id)
        torn = getattr(source, "torn", {}).pop(session_id, None)
        if torn is not None:
            report.problems.append(
                (session_id, f"unterminated last line ({torn} bytes) not copied")
            )
        if progress is not None:
            progress(done, len(wanted), session_id)
    return report
