"""Session storage: entries, the session tree, and repositories (JSONL files, SQLite, memory;
PostgreSQL in ``repos.postgres``), named by one string (``open_store``).

May import ``hooks``; never ``harness``. Everything public is also re-exported from ``harness``.
"""

from ._codec import (
    MAX_NESTING,
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
    "build_context",
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
    "open_line_store",
    "open_session",
    "open_store",
    "parse_store_url",
    "session_from_lines",
    "validate_session_id",
    "without_surrogates",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = __name__
del _name, _obj
