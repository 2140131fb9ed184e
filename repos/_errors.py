"""Errors raised by session storage.

Tree::

    HarnessError (hooks)
    └── SessionError                       base of everything below ("session_error")
        ├── SessionNotFoundError           no such session id or file ("session_not_found")
        ├── SessionExistsError             create with an id already used ("session_exists")
        ├── InvalidSessionIdError          id or path fails validation ("invalid_session_id")
        ├── CorruptSessionError            a line cannot be read; names file, line, byte offset
        │                                  ("corrupt_session")
        ├── EntryNotFoundError             no entry with that id in the session ("entry_not_found")
        ├── InvalidForkTargetError         fork target missing or unusable ("invalid_fork_target")
        ├── ForkCancelledError             a session_before_fork hook cancelled ("fork_cancelled")
        ├── SessionClosedError             the session was closed ("session_closed")
        ├── SessionGoneError               the file was deleted, replaced or cut shorter since
        │                                  it was opened ("session_gone")
        ├── SessionBusyError               another harness drives this session ("session_busy")
        ├── InvalidEntryError              a value JSON cannot hold; nothing stored
        │                                  ("invalid_entry")
        ├── SessionWriteError              an append failed or was cut short; also an OSError
        │                                  ("write_failed")
        └── StorageError                   the file system refused an operation (creating,
                                           publishing, opening or deleting a file); also an
                                           OSError ("storage_error")
"""

from __future__ import annotations

from pathlib import Path

from hooks import HarnessError

__all__ = [
    "CorruptSessionError",
    "EntryNotFoundError",
    "ForkCancelledError",
    "InvalidEntryError",
    "InvalidForkTargetError",
    "InvalidSessionIdError",
    "SessionBusyError",
    "SessionClosedError",
    "SessionError",
    "SessionExistsError",
    "SessionGoneError",
    "SessionNotFoundError",
    "SessionWriteError",
    "StorageError",
]


class SessionError(HarnessError):
    """Base of the storage errors."""

    code = "session_error"


class SessionNotFoundError(SessionError, LookupError):
    """No session with this id (or no file at this path)."""

    code = "session_not_found"

    def __init__(self, ref: str, reason: str = "") -> None:
        super().__init__(f"no session {ref!r}" + (f": {reason}" if reason else ""))
        self.ref, self.reason = ref, reason


class SessionExistsError(SessionError, FileExistsError):
    """A session with this id already exists."""

    code = "session_exists"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"a session with id {session_id!r} already exists")
        self.session_id = session_id


class InvalidSessionIdError(SessionError, ValueError):
    """An id or path is not allowed: ids match ``^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`` and
    resolved paths stay under the sessions root."""

    code = "invalid_session_id"

    def __init__(self, value: str, reason: str) -> None:
        super().__init__(f"invalid session id or path {value!r}: {reason}")
        self.value, self.reason = value, reason


class CorruptSessionError(SessionError, ValueError):
    """A line of a session file cannot be read.

    Attributes:
        path: the file; line: 1-based line number; offset: byte offset of the line's start;
        reason: what is wrong with it.
    """

    code = "corrupt_session"

    def __init__(self, path: Path | str, line: int, offset: int, reason: str) -> None:
        super().__init__(f"{path}:{line} (byte {offset}): {reason}")
        self.path, self.line, self.offset, self.reason = Path(path), line, offset, reason


class EntryNotFoundError(SessionError, LookupError):
    """No entry with this id in the session."""

    code = "entry_not_found"

    def __init__(self, entry_id: str) -> None:
        super().__init__(f"no entry {entry_id!r} in this session")
        self.entry_id = entry_id


class InvalidForkTargetError(SessionError, ValueError):
    """The fork target does not exist or cannot be forked at."""

    code = "invalid_fork_target"

    def __init__(self, entry_id: str | None, reason: str) -> None:
        super().__init__(f"cannot fork at {entry_id!r}: {reason}")
        self.entry_id, self.reason = entry_id, reason


class SessionClosedError(SessionError, RuntimeError):
    """The session was closed; reopen it from its repo."""

    code = "session_closed"

    def __init__(self) -> None:
        super().__init__("this session is closed")


class ForkCancelledError(SessionError):
    """A ``session_before_fork`` hook cancelled the fork; ``reason`` is the hook's."""

    code = "fork_cancelled"

    def __init__(self, reason: str) -> None:
        super().__init__(f"fork cancelled by a hook: {reason}")
        self.reason = reason


class SessionGoneError(SessionError):
    """The session file is no longer the one this session opened: deleted, replaced by another
    file (renamed over, migrated or repaired by another process), or cut shorter than what was
    read. Appending would write into a file nobody reads, so nothing is written; reopen it.

    Attributes:
        path: the session file; reason: ``deleted``, ``replaced`` or ``truncated``.
    """

    code = "session_gone"

    def __init__(self, path: Path | str, reason: str) -> None:
        detail = {
            "deleted": "the file was deleted",
            "replaced": "another file now has its name (renamed over, migrated or repaired)",
            "truncated": "the file is shorter than what was read (rewritten underneath)",
        }.get(reason, reason)
        super().__init__(f"{path}: session file changed since it was opened: {detail}; reopen it")
        self.path, self.reason = Path(path), reason


class SessionBusyError(SessionError, RuntimeError):
    """Another harness is running an operation on this ``Session`` object; two drivers would
    interleave their turns into one chain."""

    code = "session_busy"

    def __init__(self, session_id: str, holder: str) -> None:
        super().__init__(f"session {session_id} is driven by {holder}; one harness at a time")
        self.session_id, self.holder = session_id, holder


class InvalidEntryError(SessionError, ValueError):
    """An append was given a value a session line cannot hold (NaN, a set, bytes, a cycle, an
    object of another type); nothing was stored."""

    code = "invalid_entry"


class SessionWriteError(SessionError, OSError):
    """Appending a line failed (an ``OSError`` from ``write``) or wrote only part of it (disk
    full, file size limit). The partial bytes were removed when that was still safe; otherwise
    the next append sets them aside like a torn tail. The session's tree is unchanged.

    Attributes:
        path: the session file; written: bytes of the line that reached the file; expected: the
        line's length; errno: the failing call's errno, None for a short write.
    """

    code = "write_failed"

    def __init__(
        self, path: Path | str, written: int, expected: int, errno: int | None = None
    ) -> None:
        super().__init__(f"{path}: append failed, {written} of {expected} bytes written")
        self.path, self.written, self.expected = Path(path), written, expected
        self.errno = errno


class StorageError(SessionError, OSError):
    """The file system refused an operation on a session file or folder (a name too long, no
    permission, no space, a file where a folder should be). Raised ``from`` the ``OSError``.

    Attributes:
        path: the file or folder; reason: what failed; errno: the ``OSError``'s errno.
    """

    code = "storage_error"

    def __init__(self, path: Path | str, reason: str, errno: int | None = None) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason
        self.errno = errno

    @classmethod
    def wrap(cls, path: Path | str, exc: OSError, doing: str) -> StorageError:
        """A ``StorageError`` for ``exc``, raised while ``doing`` something to ``path``."""
        return cls(path, f"{doing}: {exc.strerror or exc}", exc.errno)
