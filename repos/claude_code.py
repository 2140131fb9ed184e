"""``from repos.claude_code import convert, is_claude_code, ...``: Claude Code transcripts read
as our sessions (what ``harness import claude-code`` and ``sessions show`` of a transcript use).

:func:`convert` turns one transcript into sessions of lines (the main thread and each
sidechain), saying what it dropped and re-attached; :func:`compare` tells whether a new
conversion is the transcript an existing session was imported from, grown, or another one;
:func:`imported_from` reads a session file's ``importedFrom`` metadata. Write the lines to any
store with ``repos.line_store(repo).import_lines(...)``.
"""

from ._importers.claude_code import (
    FORMAT,
    Comparison,
    Conversion,
    Dropped,
    ImportedSession,
    Reattached,
    compare,
    convert,
    imported_from,
    is_claude_code,
    read_records,
)

__all__ = [
    "FORMAT",
    "Comparison",
    "Conversion",
    "Dropped",
    "ImportedSession",
    "Reattached",
    "compare",
    "convert",
    "imported_from",
    "is_claude_code",
    "read_records",
]
