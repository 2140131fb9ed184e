"""Claude Code transcripts (``~/.claude/projects/<folder>/<session>.jsonl``) as our sessions.

A transcript is one JSON record per line: ``user``/``assistant``/``system`` records linked by
``uuid``/``parentUuid`` (a tree: a rewind starts a branch), ``isSidechain`` records (the
conversations of sub-agents, with roots of their own), ``summary`` records (a title for the leaf
``leafUuid``) and ``compact_boundary`` system records whose ``parentUuid`` is null and whose
``logicalParentUuid`` names the record before the compaction. One API response is split over
several ``assistant`` records (one content block each, same ``message.id``), chained.

Conversion (:func:`convert`):

* consecutive assistant records of one response become one assistant message;
* a ``tool_result`` block becomes a tool result message, named after its ``tool_use`` (found by
  id), ``is_error`` kept; text and images around it become a user message;
* thinking (and redacted thinking) and image blocks are kept;
* a compact boundary becomes a compaction entry under its logical parent; the summary is the
  text of the ``isCompactSummary`` user record after it (which is folded into the entry);
* the main thread goes into one session; each sidechain tree (a sub-agent run) into a session of
  its own (:attr:`Conversion.sidechains`);
* a record whose parent is missing (or a second root of the thread) is re-attached to the
  record before it in file order, and reported; a line that is not a record, a record without
  ``uuid``, a duplicate ``uuid`` and unknown record types are dropped, and reported;
* the last ``summary`` record's text names the session.

Every entry keeps its source ``uuid`` as the extra field ``claudeCodeUuid``; the header's
``metadata.importedFrom`` records the source format, session id, file and record count, so a
second import can recognise the session. Our own ids are generated, deterministically (from the
source session id and the record's uuid), so converting a transcript that has grown gives the
entries of the earlier conversion the same ids: :func:`compare` tells a transcript that grew
(its new entries are appended to the session imported before, :func:`append_lines`) from
another transcript claiming the same session id (imported as a session of its own: a file
never joins another session's history by naming its id).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from uuid import uuid4

import orjson
from attrs import evolve, field, frozen

from hooks import (
    AssistantContent,
    AssistantMessage,
    ImageContent,
    JSONValue,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    Usage,
    UserContent,
    UserMessage,
)

from .._codec import (
    MAX_NESTING,
    CodecError,
    decode_header,
    dumps_line,
    encode_entry,
    encode_header,
    loads_line,
    nested_deeper,
)
from .._entries import CompactionEntry, Entry, MessageEntry, SessionHeader, SessionInfoEntry
from .._errors import CorruptSessionError, SessionError, StorageError
from .._files import open_regular
from .._jsonl.paths import encode_cwd
from .._session import Session

__all__ = [
    "FORMAT",
    "Comparison",
    "Conversion",
    "Dropped",
    "ImportedSession",
    "Reattached",
    "append_lines",
    "compare",
    "convert",
    "imported_from",
    "is_claude_code",
    "read_records",
]

FORMAT = "claude-code"
_KNOWN = frozenset({"user", "assistant", "system", "summary"})
_STOP: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "pause_turn": "stop",
    "refusal": "stop",
}


@frozen
class Dropped:
    """A source line not imported: its line number (1-based), uuid if any, and why."""

    line: int
    uuid: str | None
    reason: str


@frozen
class Reattached:
    """A record whose parent was missing, put under the record before it in file order."""

    line: int
    uuid: str
    missing_parent: str | None
    new_parent: str | None


@frozen(kw_only=True)
class ImportedSession:
    """One session to write: the header and every line (header first); ``entry_ids`` are the
    ids of ``lines[1:]``, in order."""

    header: SessionHeader
    lines: tuple[bytes, ...]
    entry_ids: tuple[str, ...]
    entries: int
    messages: int
    source_uuids: frozenset[str]
    sidechain_root: str | None = None


@frozen(kw_only=True)
class Conversion:
    """What :func:`convert` made of one transcript."""

    source: Path
    source_session_id: str
    main: ImportedSession
    sidechains: tuple[ImportedSession, ...]
    dropped: tuple[Dropped, ...]
    reattached: tuple[Reattached, ...]
    records: int
    name: str | None = None
    compactions: int = 0
    tool_results: int = 0
    unpaired_tool_results: int = 0
    notes: tuple[str, ...] = field(default=())


# --- reading ----------------------------------------------------------------------------------


def read_records(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[Dropped]]:
    """Every JSON object line of ``path`` with its line number; other lines as dropped: not
    JSON, not an object, or nested deeper than :data:`~repos.MAX_NESTING` (the cap every
    session line keeps; a record's entries nest no deeper than the record).

    Raises:
        SessionNotFoundError: ``path`` is not a regular file (a FIFO, a device or a folder is
            refused without blocking or reading).
        OSError: it cannot be read.
    """
    records: list[tuple[int, dict[str, Any]]] = []
    dropped: list[Dropped] = []
    with os.fdopen(open_regular(path), "rb") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                obj = loads_line(raw)
            except (orjson.JSONDecodeError, CodecError):
                dropped.append(Dropped(number, None, "not JSON"))
                continue
            if not isinstance(obj, dict):
                dropped.append(Dropped(number, None, f"not a record (a JSON {type(obj).__name__})"))
                continue
            if raw.count(b"{") + raw.count(b"[") > MAX_NESTING and nested_deeper(obj):
                uuid = obj.get("uuid")
                dropped.append(
                    Dropped(
                        number,
                        uuid if isinstance(uuid, str) else None,
                        f"nested deeper than {MAX_NESTING} levels",
                    )
                )
                continue
            records.append((number, obj))
    return records, dropped


def is_claude_code(path: Path, *, probe_lines: int = 20) -> bool:
    """Whether ``path`` looks like a Claude Code transcript: among its first lines, a record
    with ``uuid`` and ``sessionId`` of type user/assistant/system, or a ``summary`` record with
    ``leafUuid``; and no pi session header on line 1."""
    try:
        # A FIFO or a device is no transcript, and is not read (it would block, or never end).
        with os.fdopen(open_regular(path), "rb") as f:
            for index, raw in enumerate(f):
                if index >= probe_lines:
                    break
                try:
                    obj = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(obj, dict):
                    continue
                if index == 0 and obj.get("type") == "session":
                    return False
                if obj.get("type") == "summary" and "leafUuid" in obj:
                    return True
                if obj.get("type") in ("user", "assistant", "system") and "uuid" in obj:
                    return "sessionId" in obj or "parentUuid" in obj
    except (OSError, SessionError):
        return False
    return False


# --- converting blocks ------------------------------------------------------------------------


def _ms(value: object, fallback: int) -> int:
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        except (ValueError, OverflowError, OSError):  # unreadable, or a year no clock has
            return fallback
    return fallback


def _shown(value: object) -> str:
    """A record's value as a report names it: a string quoted, cut; anything else by kind."""
    if isinstance(value, str):
        return repr(value[:60] + ("..." if len(value) > 60 else ""))
    return "null" if value is None else f"(a JSON {type(value).__name__})"


def _count(value: object) -> int:
    """A token count from a record: a non-negative integer a line can hold (sums too), else 0."""
    return value if type(value) is int and 0 <= value < _COUNT_LIMIT else 0


_COUNT_LIMIT = 2**53
# The cwd of a session: absolute, a few KiB at most, and able to name the folder pi's layout
# keeps the session in (one name, at most 255 bytes).
_CWD_LIMIT = 4096


def _cwd_problem(value: str) -> str | None:
    """Why ``value`` (a transcript's ``cwd``) cannot be the imported session's, or None."""
    if not value.startswith("/"):
        return "not an absolute path"
    if len(value) > _CWD_LIMIT:
        return f"longer than {_CWD_LIMIT} characters"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return "it holds control characters"
    if len(encode_cwd(value).encode("utf-8", "surrogatepass")) > 255:
        return "too long to name a sessions folder"
    return None


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="milliseconds")


def _image(block: Mapping[str, Any]) -> ImageContent | None:
    source = block.get("source")
    if isinstance(source, Mapping) and isinstance(source.get("data"), str):
        return ImageContent(data=source["data"], mime_type=str(source.get("media_type", "")))
    return None


def _user_blocks(content: object) -> tuple[UserContent, ...]:
    if isinstance(content, str):
        return (TextContent(text=content),)
    out: list[UserContent] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                out.append(TextContent(text=block))
            elif isinstance(block, Mapping) and block.get("type") == "text":
                out.append(TextContent(text=str(block.get("text", ""))))
            elif isinstance(block, Mapping) and block.get("type") == "image":
                image = _image(block)
                out.append(image if image is not None else UnknownContent(raw=dict(block)))
            elif isinstance(block, Mapping):
                out.append(UnknownContent(raw=dict(block)))
    return tuple(out)


def _assistant_blocks(content: object) -> list[AssistantContent]:
    if isinstance(content, str):
        return [TextContent(text=content)]
    out: list[AssistantContent] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            out.append(TextContent(text=str(block.get("text", ""))))
        elif kind == "thinking":
            signature = block.get("signature")
            out.append(
                ThinkingContent(
                    thinking=str(block.get("thinking", "")),
                    thinking_signature=signature if isinstance(signature, str) else None,
                )
            )
        elif kind == "redacted_thinking":
            data = block.get("data")
            out.append(
                ThinkingContent(
                    thinking="",
                    thinking_signature=data if isinstance(data, str) else None,
                    redacted=True,
                )
            )
        elif kind == "tool_use":
            arguments = block.get("input")
            out.append(
                ToolCall(
                    id=str(block.get("id", "")),
                    name=str(block.get("name", "")),
                    arguments=dict(arguments) if isinstance(arguments, Mapping) else {},
                )
            )
        else:
            out.append(UnknownContent(raw=dict(block)))
    return out


def _usage(obj: object) -> Usage:
    if not isinstance(obj, Mapping):
        return Usage()

    parts = (
        _count(obj.get("input_tokens")),
        _count(obj.get("output_tokens")),
        _count(obj.get("cache_read_input_tokens")),
        _count(obj.get("cache_creation_input_tokens")),
    )
    return Usage(
        input=parts[0],
        output=parts[1],
        cache_read=parts[2],
        cache_write=parts[3],
        total_tokens=sum(parts),
    )


def _text(content: object) -> str:
    return "\n".join(b.text for b in _user_blocks(content) if isinstance(b, TextContent))


# --- the tree -----------------------------------------------------------------------------------


class _Builder:
    """Entries of one session, in file order, with ids derived from the source uuids."""

    def __init__(self, seed: str) -> None:
        self.entries: list[Entry] = []
        self.position: dict[str, int] = {}  # our entry id -> its index in entries
        self.ids: dict[str, str] = {}  # source uuid -> our entry id (of its last entry)
        self.taken: set[str] = set()
        self.uuids: set[str] = set()
        self.next_salt: dict[str, int] = {}
        self._seed = seed

    def new_id(self, key: str) -> str:
        # Deterministic (same transcript, same ids), unique in the session: the first salt
        # whose digest is free. A key used again (a record holding several results for one
        # call id) starts after the salts it used before, which are all taken: the same ids as
        # trying from 0, without trying n salts for its n-th use.
        salt = self.next_salt.get(key, 0)
        while True:
            digest = hashlib.sha256(f"{self._seed}\0{key}\0{salt}".encode()).hexdigest()[:8]
            salt += 1
            if digest not in self.taken:
                self.taken.add(digest)
                self.next_salt[key] = salt
                return digest

    def add(self, entry: Entry, uuid: str | None) -> Entry:
        self.position[entry.id] = len(self.entries)
        self.entries.append(entry)
        if uuid is not None:
            self.ids[uuid] = entry.id
            self.uuids.add(uuid)
        return entry


def _extra(uuid: str) -> dict[str, JSONValue]:
    return {"claudeCodeUuid": uuid}


def convert(path: Path) -> Conversion:
    """Read the transcript at ``path`` and build its sessions (nothing is written)."""
    records, dropped = read_records(path)
    total = len(records) + len(dropped)
    by_uuid: dict[str, tuple[int, dict[str, Any]]] = {}
    thread: list[tuple[int, dict[str, Any]]] = []
    name: str | None = None
    session_id: str | None = None
    cwd: str | None = None
    odd_cwd: object = None  # the first cwd that is not a string, if no string one came first
    for number, obj in records:
        kind = obj.get("type")
        if kind == "summary":
            if isinstance(obj.get("summary"), str):
                name = obj["summary"]
            continue
        uuid = obj.get("uuid")
        if not isinstance(kind, str) or kind not in _KNOWN:
            why = (
                "no record type" if kind is None else f"record type {_shown(kind)} is not imported"
            )
            dropped.append(Dropped(number, uuid if isinstance(uuid, str) else None, why))
            continue
        if not isinstance(uuid, str) or not uuid:
            dropped.append(Dropped(number, None, "no uuid"))
            continue
        if kind in ("user", "assistant") and not isinstance(obj.get("message"), Mapping):
            dropped.append(Dropped(number, uuid, "no message object"))
            continue
        if kind == "system" and obj.get("subtype") != "compact_boundary":
            dropped.append(Dropped(number, uuid, f"system record {_shown(obj.get('subtype'))}"))
            continue
        message = obj.get("message")
        if kind == "user" and isinstance(message, Mapping) and "content" not in message:
            dropped.append(Dropped(number, uuid, "user message without content"))
            continue
        if uuid in by_uuid:
            dropped.append(Dropped(number, uuid, f"duplicate uuid (line {by_uuid[uuid][0]} kept)"))
            continue
        by_uuid[uuid] = (number, obj)
        thread.append((number, obj))
        if session_id is None and isinstance(obj.get("sessionId"), str):
            session_id = obj["sessionId"]
        if cwd is None and "cwd" in obj:
            if isinstance(obj["cwd"], str):
                cwd = obj["cwd"]
            else:
                odd_cwd = obj["cwd"]
    source_id = session_id or path.stem
    cwd, notes = _session_cwd(cwd, odd_cwd, path)
    main_records = [(n, o) for n, o in thread if not o.get("isSidechain")]
    side_records = [(n, o) for n, o in thread if o.get("isSidechain")]

    reattached: list[Reattached] = []
    stats = {"compactions": 0, "tool_results": 0, "unpaired": 0}
    tool_names: dict[str, str] = {}
    for _, obj in thread:
        if obj.get("type") == "assistant":
            for block in _assistant_blocks(obj["message"].get("content")):
                if isinstance(block, ToolCall):
                    tool_names[block.id] = block.name

    def build(recs: list[tuple[int, dict[str, Any]]], seed: str) -> _Builder:
        b = _Builder(seed)
        local = {o["uuid"] for _, o in recs}
        previous: str | None = None  # source uuid of the record before, in file order
        first = True
        pending_compaction: CompactionEntry | None = None
        response: dict[str, str] = {}  # message.id -> our entry id (a split response)
        # A split response's blocks and its latest record's message, by our entry id: the
        # entry is built once, after the loop (rebuilding it per record was quadratic).
        merged: dict[str, tuple[list[AssistantContent], Mapping[str, Any]]] = {}
        for number, obj in recs:
            uuid: str = obj["uuid"]
            parent = obj.get("parentUuid")
            kind = obj["type"]
            if kind == "system":
                logical = obj.get("logicalParentUuid")
                parent = logical if isinstance(logical, str) else parent
            missing = not isinstance(parent, str) or parent not in local or parent not in b.ids
            if missing and not (first and parent is None):
                reattached.append(
                    Reattached(number, uuid, parent if isinstance(parent, str) else None, previous)
                )
                parent = previous
            first = False
            parent_id = b.ids.get(parent) if isinstance(parent, str) else None
            ts = _ms(obj.get("timestamp"), 0)
            raw_stamp = obj.get("timestamp")
            stamp: str = raw_stamp if isinstance(raw_stamp, str) else _iso(ts)
            if kind == "system":
                meta = obj.get("compactMetadata")
                tokens = meta.get("preTokens") if isinstance(meta, Mapping) else None
                entry_id = b.new_id(uuid)
                pending_compaction = CompactionEntry(
                    id=entry_id,
                    parent_id=parent_id,
                    timestamp=stamp,
                    summary=str(obj.get("content") or "Conversation compacted"),
                    first_kept_entry_id=entry_id,  # nothing before the boundary is kept
                    tokens_before=_count(tokens),
                    extra=_extra(uuid),
                )
                b.add(pending_compaction, uuid)
                stats["compactions"] += 1
                previous = uuid
                continue
            message = obj["message"]
            if kind == "user" and obj.get("isCompactSummary") and pending_compaction is not None:
                # The summary the model continued from: folded into the compaction entry.
                index = b.position[pending_compaction.id]
                folded = evolve(pending_compaction, summary=_text(message.get("content")))
                b.entries[index] = folded
                b.ids[uuid] = folded.id
                b.uuids.add(uuid)
                pending_compaction = None
                previous = uuid
                continue
            if kind == "assistant":
                blocks = _assistant_blocks(message.get("content"))
                message_id = message.get("id")
                merged_into = response.get(message_id) if isinstance(message_id, str) else None
                if merged_into is not None and parent_id == merged_into:
                    so_far = merged.get(merged_into)
                    if so_far is None:
                        old = b.entries[b.position[merged_into]]
                        assert isinstance(old, MessageEntry)
                        assert isinstance(old.message, AssistantMessage)
                        so_far = (list(old.message.content), message)
                    so_far[0].extend(blocks)
                    merged[merged_into] = (so_far[0], message)
                    b.ids[uuid] = merged_into
                    b.uuids.add(uuid)
                    previous = uuid
                    continue
                entry_id = b.new_id(uuid)
                reply = evolve(_reply(tuple(blocks), message), timestamp=ts)
                b.add(
                    MessageEntry(
                        id=entry_id,
                        parent_id=parent_id,
                        timestamp=stamp,
                        message=reply,
                        extra=_extra(uuid),
                    ),
                    uuid,
                )
                if isinstance(message_id, str):
                    response[message_id] = entry_id
                previous = uuid
                continue
            # A user record: tool results first, then any other content as one user message.
            content = message.get("content")
            rest: list[Any] = []
            for block in content if isinstance(content, list) else [content]:
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    call_id = str(block.get("tool_use_id", ""))
                    if call_id not in tool_names:
                        stats["unpaired"] += 1
                    stats["tool_results"] += 1
                    entry_id = b.new_id(f"{uuid}\0{call_id}")
                    b.add(
                        MessageEntry(
                            id=entry_id,
                            parent_id=parent_id,
                            timestamp=stamp,
                            message=ToolResultMessage(
                                tool_call_id=call_id,
                                tool_name=tool_names.get(call_id, "unknown"),
                                content=_user_blocks(block.get("content", "")),
                                is_error=bool(block.get("is_error")),
                                timestamp=ts,
                            ),
                            extra=_extra(uuid),
                        ),
                        uuid,
                    )
                    parent_id = entry_id
                else:
                    rest.append(block)
            blocks_in = _user_blocks(rest if isinstance(content, list) else content)
            if blocks_in or not isinstance(content, list):
                entry_id = b.new_id(f"{uuid}\0user")
                extra = _extra(uuid)
                if obj.get("isMeta"):
                    extra["claudeCodeIsMeta"] = True
                b.add(
                    MessageEntry(
                        id=entry_id,
                        parent_id=parent_id,
                        timestamp=stamp,
                        message=UserMessage(content=blocks_in, timestamp=ts),
                        extra=extra,
                    ),
                    uuid,
                )
            previous = uuid
        for entry_id, (blocks_so_far, latest) in merged.items():
            index = b.position[entry_id]
            old = b.entries[index]
            assert isinstance(old, MessageEntry) and isinstance(old.message, AssistantMessage)
            reply = evolve(
                _reply(tuple(blocks_so_far), latest),
                timestamp=old.message.timestamp,  # the response's first record's time
            )
            b.entries[index] = evolve(old, message=reply)
        return b

    main = build(main_records, source_id)
    if name is not None and main.entries:
        last = main.entries[-1]
        main.add(
            # Keyed by the name: a later import of the grown transcript adds a renamed entry.
            SessionInfoEntry(
                id=main.new_id(f"name\0{name}"),
                parent_id=last.id,
                timestamp=last.timestamp,
                name=name,
            ),
            None,
        )
    imported = _session(main, source_id, cwd, path, total, sidechain_root=None)

    # Sidechains: one session per tree of sidechain records (a sub-agent run).
    roots: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    root_of: dict[str, str] = {}
    side_uuids = {o["uuid"] for _, o in side_records}
    for number, obj in side_records:
        parent = obj.get("parentUuid")
        top = root_of.get(parent) if isinstance(parent, str) and parent in side_uuids else None
        top = top or obj["uuid"]
        root_of[obj["uuid"]] = top
        roots.setdefault(top, []).append((number, obj))
    sidechains = tuple(
        _session(build(recs, f"{source_id}/{top}"), source_id, cwd, path, total, sidechain_root=top)
        for top, recs in roots.items()
    )
    return Conversion(
        source=path,
        source_session_id=source_id,
        main=imported,
        sidechains=sidechains,
        dropped=tuple(sorted(dropped, key=lambda d: d.line)),
        reattached=tuple(reattached),
        records=total,
        name=name,
        compactions=stats["compactions"],
        tool_results=stats["tool_results"],
        unpaired_tool_results=stats["unpaired"],
        notes=tuple(notes),
    )


def _session_cwd(claimed: str | None, odd: object, path: Path) -> tuple[str, list[str]]:
    """The cwd the imported sessions record, and notes on a claimed one not used. It is
    information only (``sessions list --cwd`` groups by it; nothing adopts it as a working
    folder), but it names the folder the session file goes in: it must be an absolute path
    that can (:func:`_cwd_problem`). Else the transcript's own folder is recorded."""
    fallback = str(path.resolve().parent)
    if _cwd_problem(fallback) is not None:
        fallback = "/"
    if claimed is None:
        if odd is None:
            return fallback, []
        kind = type(odd).__name__
        return fallback, [f"the transcript's cwd is not a string (a JSON {kind}); using {fallback}"]
    problem = _cwd_problem(claimed)
    if problem is None:
        return claimed, []
    return fallback, [
        f"the transcript's cwd {claimed[:80]!r} is not used ({problem}); using {fallback}"
    ]


def _reply(blocks: Sequence[AssistantContent], message: Mapping[str, Any]) -> AssistantMessage:
    stop = message.get("stop_reason")
    has_calls = any(isinstance(b, ToolCall) for b in blocks)
    reason: StopReason = (
        _STOP.get(stop, "stop") if isinstance(stop, str) else ("toolUse" if has_calls else "stop")
    )
    if has_calls and reason == "stop":
        reason = "toolUse"
    return AssistantMessage(
        content=tuple(blocks),
        api="anthropic-messages",
        provider="anthropic",
        model=str(message.get("model", "")),
        usage=_usage(message.get("usage")),
        stop_reason=reason,
    )


def _session(
    b: _Builder,
    source_id: str,
    cwd: str,
    path: Path,
    records: int,
    *,
    sidechain_root: str | None,
) -> ImportedSession:
    origin: dict[str, JSONValue] = {
        "format": FORMAT,
        "sessionId": source_id,
        "file": str(path.resolve()),
        "records": records,
        "entries": len(b.entries),
    }
    if sidechain_root is not None:
        origin["sidechainRoot"] = sidechain_root
    first = b.entries[0].timestamp if b.entries else _iso(0)
    header = SessionHeader(
        id=str(uuid4()),
        timestamp=first,
        cwd=cwd,
        metadata={"importedFrom": origin},
    )
    lines = (dumps_line(encode_header(header)), *(dumps_line(encode_entry(e)) for e in b.entries))
    messages = sum(1 for e in b.entries if isinstance(e, MessageEntry))
    return ImportedSession(
        header=header,
        lines=lines,
        entry_ids=tuple(e.id for e in b.entries),
        entries=len(b.entries),
        messages=messages,
        source_uuids=frozenset(b.uuids),
        sidechain_root=sidechain_root,
    )


def imported_from(path: Path) -> Mapping[str, Any] | None:
    """The ``importedFrom`` metadata of the session file at ``path`` (None: not an import, or
    not a readable session: no regular file, no valid header within its first MiB)."""
    try:
        fd = open_regular(path)
    except (OSError, SessionError):
        return None
    head, end = b"", -1
    try:
        while end < 0 and len(head) < _HEADER_LIMIT:
            chunk = os.pread(fd, 1 << 16, len(head))
            if not chunk:
                break
            end = chunk.find(b"\n")
            end = end + len(head) if end >= 0 else -1
            head += chunk
    except OSError:
        return None
    finally:
        os.close(fd)
    if end < 0:
        return None
    try:
        header = decode_header(loads_line(head[:end]))
    except (orjson.JSONDecodeError, CodecError):
        return None
    origin = header.metadata.get("importedFrom") if header.metadata is not None else None
    return origin if isinstance(origin, Mapping) else None


_HEADER_LIMIT = 1 << 20


@frozen(kw_only=True)
class Comparison:
    """How a new conversion relates to a session an earlier import made from a transcript that
    claimed the same Claude Code session id (:func:`compare`)."""

    relation: Literal["same", "grown", "other"]
    """``same``: nothing to add (every entry is in the session already: this transcript, or an
    older copy of it, was imported);
    ``grown``: the transcript that was imported, with records added since; ``other``: a
    different transcript claiming the same id, which must not join that session's history."""
    lines: tuple[bytes, ...] = ()
    """``grown``: the lines to append, in order (their parents are in the session or earlier
    in this list)."""
    changed: int = 0
    """``grown``: entries both hold with other content (the last one imported: a reply still
    being written then, or a compaction whose summary came later), kept as first imported."""
    lost: int = 0
    """``other``: entries of the earlier import this conversion lacks or holds otherwise."""


def compare(imported: ImportedSession, existing: Session) -> Comparison:
    """Whether the transcript ``imported`` was converted from is the one ``existing`` was
    imported from, grown, or another one claiming its session id.

    A conversion holding nothing the session lacks is ``same``. Else, a transcript only grows
    at its end: every entry the earlier import took from it (those carrying ``claudeCodeUuid``)
    must come back with the same id and the same line, except the last of them (the reply being
    written, or a compaction waiting for its summary, when the transcript was imported), and the
    name entry (it moves as the transcript grows). Entries the user appended to the imported
    session since are not the transcript's and do not count. Anything else is ``other``.
    """
    have = set(existing.entry_ids())
    new: list[bytes] = []
    lines: dict[str, bytes] = {}
    for entry_id, line in zip(imported.entry_ids, imported.lines[1:], strict=True):
        lines[entry_id] = line
        if entry_id not in have:
            new.append(line)
    if not new:
        return Comparison(relation="same")
    taken = [e.id for e in existing.entries() if "claudeCodeUuid" in e.extra]
    lost = changed = 0
    for n, entry_id in enumerate(taken, start=1):
        again = lines.get(entry_id)
        if again is None:
            lost += 1
        elif existing.raw_line(entry_id) != again:
            if n == len(taken):
                changed += 1
            else:
                lost += 1
    if lost:
        return Comparison(relation="other", lost=lost)
    return Comparison(relation="grown", lines=tuple(new), changed=changed)


def append_lines(path: Path, lines: Sequence[bytes]) -> None:
    """Append complete lines to a session file, under the exclusive ``flock`` every writer of
    a session file takes, then fsync.

    Raises:
        CorruptSessionError: the file's last line is unterminated (nothing is written; ``harness
            sessions repair`` sets it aside).
        StorageError: the file system refused.
    """
    data = b"".join(lines)
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
    except OSError as exc:
        raise StorageError.wrap(path, exc, "opening the session to extend it") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            raise CorruptSessionError(path, 0, size, "the last line is unterminated; repair first")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError as exc:
        raise StorageError.wrap(path, exc, "extending the session") from exc
    finally:
        os.close(fd)
