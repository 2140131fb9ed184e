"""Session storage: entries, the session tree, and repositories (JSONL files, SQLite, memory;
PostgreSQL in ``repos.postgres``), named by one string (``open_store``).

May import ``hooks``; never ``harness``. Everything public is also re-exported from ``harness``.

Each name is imported when it is first read (a module ``__getattr__``; issue 24, point 6), so
``harness sessions list`` does not build the SQLite store or the copier. Type checkers and IDEs
read the imports under ``TYPE_CHECKING`` below.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._codec import (
        MAX_NESTING,
        block_kind,
        content_blocks,
        decode_entry,
        decode_message,
        dumps_line,
        encode_entry,
        encode_header,
        encode_message,
        nested_deeper,
        without_surrogates,
    )
    from ._context import (
        NO_RESULT_TEXT,
        ModelRef,
        SessionContext,
        build_context,
        entry_message,
        iso_ms,
        normalize_messages,
        normalized,
        slots_of,
    )
    from ._copy import CopyReport, LineStore, copy_sessions
    from ._entries import (
        ActiveToolsChangeEntry,
        BranchSummaryEntry,
        CompactionEntry,
        CustomEntry,
        CustomMessageEntry,
        Entry,
        LabelEntry,
        LeafEntry,
        MessageEntry,
        ModelChangeEntry,
        SessionHeader,
        SessionInfoEntry,
        ThinkingLevelChangeEntry,
        UnknownEntry,
    )
    from ._errors import (
        CorruptSessionError,
        EntryNotFoundError,
        ForkCancelledError,
        InvalidEntryError,
        InvalidForkTargetError,
        InvalidSessionIdError,
        SessionBusyError,
        SessionClosedError,
        SessionError,
        SessionExistsError,
        SessionGoneError,
        SessionNotFoundError,
        SessionWriteError,
        StorageError,
    )
    from ._jsonl.paths import encode_cwd, validate_session_id
    from ._jsonl.repo import JsonlSessionRepo
    from ._jsonl.storage import open_session
    from ._memory import MemorySessionRepo
    from ._repo import ForkPosition, ForkScope, SessionInfo, SessionRepo
    from ._session import Diagnostic, FsyncPolicy, Session, TreeNode
    from ._sqlite import SqliteSessionRepo
    from ._stores import (
        STORE_SCHEMES,
        InvalidStoreUrlError,
        StoreUrl,
        line_store,
        open_line_store,
        open_store,
        parse_store_url,
        session_from_lines,
    )

__all__ = [
    "MAX_NESTING",
    "NO_RESULT_TEXT",
    "STORE_SCHEMES",
    "ActiveToolsChangeEntry",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CopyReport",
    "CorruptSessionError",
    "CustomEntry",
    "CustomMessageEntry",
    "Diagnostic",
    "Entry",
    "EntryNotFoundError",
    "ForkCancelledError",
    "ForkPosition",
    "ForkScope",
    "FsyncPolicy",
    "InvalidEntryError",
    "InvalidForkTargetError",
    "InvalidSessionIdError",
    "InvalidStoreUrlError",
    "JsonlSessionRepo",
    "LabelEntry",
    "LeafEntry",
    "LineStore",
    "MemorySessionRepo",
    "MessageEntry",
    "ModelChangeEntry",
    "ModelRef",
    "Session",
    "SessionBusyError",
    "SessionClosedError",
    "SessionContext",
    "SessionError",
    "SessionExistsError",
    "SessionGoneError",
    "SessionHeader",
    "SessionInfo",
    "SessionInfoEntry",
    "SessionNotFoundError",
    "SessionRepo",
    "SessionWriteError",
    "SqliteSessionRepo",
    "StorageError",
    "StoreUrl",
    "ThinkingLevelChangeEntry",
    "TreeNode",
    "UnknownEntry",
    "block_kind",
    "build_context",
    "content_blocks",
    "copy_sessions",
    "decode_entry",
    "decode_message",
    "dumps_line",
    "encode_cwd",
    "encode_entry",
    "encode_header",
    "encode_message",
    "entry_message",
    "iso_ms",
    "line_store",
    "nested_deeper",
    "normalize_messages",
    "normalized",
    "open_line_store",
    "open_session",
    "open_store",
    "parse_store_url",
    "session_from_lines",
    "slots_of",
    "validate_session_id",
    "without_surrogates",
]

# Where each public name is defined: the module is imported when one of its names is
# first read (issue 24, point 6).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "._codec": (
        "MAX_NESTING",
        "block_kind",
        "content_blocks",
        "decode_entry",
        "decode_message",
        "dumps_line",
        "encode_entry",
        "encode_header",
        "encode_message",
        "nested_deeper",
        "without_surrogates",
    ),
    "._context": (
        "NO_RESULT_TEXT",
        "ModelRef",
        "SessionContext",
        "build_context",
        "entry_message",
        "iso_ms",
        "normalize_messages",
        "normalized",
        "slots_of",
    ),
    "._copy": (
        "CopyReport",
        "LineStore",
        "copy_sessions",
    ),
    "._entries": (
        "ActiveToolsChangeEntry",
        "BranchSummaryEntry",
        "CompactionEntry",
        "CustomEntry",
        "CustomMessageEntry",
        "Entry",
        "LabelEntry",
        "LeafEntry",
        "MessageEntry",
        "ModelChangeEntry",
        "SessionHeader",
        "SessionInfoEntry",
        "ThinkingLevelChangeEntry",
        "UnknownEntry",
    ),
    "._errors": (
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
    ),
    "._jsonl.paths": (
        "encode_cwd",
        "validate_session_id",
    ),
    "._jsonl.repo": ("JsonlSessionRepo",),
    "._jsonl.storage": ("open_session",),
    "._memory": ("MemorySessionRepo",),
    "._repo": (
        "ForkPosition",
        "ForkScope",
        "SessionInfo",
        "SessionRepo",
    ),
    "._session": (
        "Diagnostic",
        "FsyncPolicy",
        "Session",
        "TreeNode",
    ),
    "._sqlite": ("SqliteSessionRepo",),
    "._stores": (
        "STORE_SCHEMES",
        "InvalidStoreUrlError",
        "StoreUrl",
        "line_store",
        "open_line_store",
        "open_store",
        "parse_store_url",
        "session_from_lines",
    ),
}
_LAZY = object()
_ORIGIN = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` and bind that module's public names here
    (its classes then say ``repos`` as their module, as they did when this package imported
    them eagerly)."""
    where = _ORIGIN.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(where, __name__)
    namespace = globals()
    loaded = vars(module)
    for public in _EXPORTS[where]:
        # The module's other names are bound too, but not imported if they are lazy in turn.
        obj = getattr(module, public) if public == name else loaded.get(public, _LAZY)
        if obj is _LAZY:
            continue
        if isinstance(obj, type) and obj.__module__.startswith("repos."):
            obj.__module__ = __name__
        namespace[public] = obj
    return namespace[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
