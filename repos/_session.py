"""``Session``: one session's tree, with typed appends. Each append goes to the store first, then
into the in-memory tree, so memory never holds what the file does not (pi ``storage.ts``)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal, Protocol, Self, TypeAlias, TypedDict, TypeVar

from attrs import evolve, frozen

from hooks import JSONValue, Message, UserContent

from ._codec import (
    CodecError,
    dumps_line,
    encode_appended,
    encode_entry,
    encode_header,
    encode_new_message,
)
from ._context import ContextCache, SessionContext
from ._entries import (
    CURRENT_VERSION,
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
)
from ._errors import (
    CorruptSessionError,
    EntryNotFoundError,
    InvalidEntryError,
    SessionBusyError,
    SessionClosedError,
)
from ._index import Diagnostic, Indexer, RawLine
from ._tree import Row, Tree

__all__ = [
    "Diagnostic",
    "FsyncPolicy",
    "Session",
    "SessionStore",
    "TreeNode",
    "header_line",
    "iso_now",
]

log = logging.getLogger("repos")
# Seeded from the OS once per process (and again in a forked child, below).
_ids = random.Random()
# A Row without its keyword __new__ (one per append): every field given, in order.
_row = functools.partial(tuple.__new__, Row)
os.register_at_fork(after_in_child=_ids.seed)

FsyncPolicy: TypeAlias = Literal["never", "turn", "always"]
EncodedMessage: TypeAlias = tuple[bytes, MessageEntry]
E = TypeVar("E", bound=Entry)
T = TypeVar("T")
A = TypeVar("A")


class _Base(TypedDict):
    id: str
    parent_id: str | None
    timestamp: str


def iso_now() -> str:
    """Current UTC time as pi writes entry timestamps: ``2025-12-08T22:41:05.306Z``."""
    ms = time.time_ns() // 1_000_000
    cached = _second[0]
    if cached[0] != ms // 1000:
        # Formatting a datetime costs microseconds an append; the seconds change once a second.
        # One tuple, replaced whole: another thread never sees a second with another's text.
        seconds = ms // 1000
        cached = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
        _second[0] = cached
    return cached[1] + _MILLIS[ms % 1000]


_second: list[tuple[int, str]] = [(-1, "")]  # the second last formatted, and its text
_MILLIS = tuple(f".{n:03d}Z" for n in range(1000))


def header_line(header: SessionHeader) -> bytes:
    """The header line of a new session (newline-terminated).

    Raises:
        InvalidEntryError: ``metadata`` holds a value a line cannot (NaN, a set, bytes, ...),
            or nests deeper than ``MAX_NESTING``; nothing was stored.
    """
    try:
        return dumps_line(encode_header(header))
    except CodecError as exc:
        raise InvalidEntryError(f"cannot create a session with this header: {exc}") from None


def _encode_message(
    entry_id: str, parent_id: str | None, timestamp: str, message: Message
) -> EncodedMessage:
    try:
        return encode_new_message(entry_id, parent_id, timestamp, message)
    except CodecError as exc:
        raise InvalidEntryError(f"cannot append a message entry: {exc}") from None


def _encode_made(
    entry_id: str, parent_id: str | None, timestamp: str, make: Callable[[_Base], E]
) -> tuple[bytes, E]:
    entry = make({"id": entry_id, "parent_id": parent_id, "timestamp": timestamp})
    try:
        line, fresh = encode_appended(entry)
    except CodecError as exc:
        raise InvalidEntryError(f"cannot append a {entry.type} entry: {exc}") from None
    return line, fresh  # type: ignore[return-value]


@frozen(kw_only=True)
class TreeNode:
    """One entry of :meth:`Session.get_tree`, its children in file order, and its label."""

    entry: Entry
    children: tuple[TreeNode, ...]
    label: str | None = None


class CatchUpLike(Protocol):
    @property
    def lines(self) -> Sequence[RawLine]: ...

    @property
    def torn_offset(self) -> int | None: ...


class SessionStore(Protocol):
    """Where a session's lines live. ``JsonlStore`` writes a file; a memory store keeps lines.

    An append is a transaction: ``begin_append`` takes the store's lock (other processes and
    other ``Session`` objects on the same lines wait), checks the lines are still the ones this
    session read (else ``SessionGoneError``), returns the complete lines others appended since
    and sets a torn tail aside; ``write`` stores one whole line or raises leaving the lines
    unchanged; ``end_append`` releases. ``poll`` returns new lines without writing.
    """

    @property
    def path(self) -> Path | None: ...

    def read(self, row: Row) -> Entry: ...

    def raw(self, row: Row) -> bytes | None:
        """The row's stored line (newline-terminated) if it can be copied verbatim, else None."""
        ...

    def begin_append(self) -> CatchUpLike: ...

    def write(self, line: bytes) -> RawLine: ...

    def end_append(self) -> None: ...

    def poll(self) -> Sequence[RawLine]: ...

    def rewrite(self, lines: Sequence[bytes], backup_suffix: str) -> Sequence[RawLine]:
        """Replace the stored lines (migration, inside a transaction); returns the lines other
        writers appended to the new ones before the transaction went on."""
        ...

    def sync(self) -> None: ...

    def close(self) -> None: ...


class Session:
    """A session: header, entry tree, active leaf, labels and name.

    Reading never writes. Appends (``append_*``, ``set_*``, ``move_to``) each write one line,
    parented on the current leaf, which then moves to the new entry. Pure reads and appends are
    synchronous (a local append takes microseconds); the repository's lifecycle calls are async.

    Several writers, one session (DESIGN §3): each append takes the store's lock, first reads
    the lines other processes (or other ``Session`` objects) appended since, so the tree and the
    next id see them, and continues *this* session's leaf: work that diverges becomes branches.
    :meth:`refresh` catches up without appending. Appends are safe from several threads.
    Values passed to an append are copied (the entry returned equals what decoding the stored
    line gives, and shares no mutable value with the caller's objects: a value already as the
    decoder builds it, frozen with read-only containers, is shared, not copied), and JSON
    objects read back are read-only.

    Build sessions with a repository (``JsonlSessionRepo``, ``MemorySessionRepo``), not directly.
    """

    def __init__(
        self,
        *,
        header: SessionHeader,
        tree: Tree,
        store: SessionStore,
        diagnostics: Sequence[Diagnostic] = (),
        fsync: FsyncPolicy = "turn",
        indexer: Indexer | None = None,
        strict: bool = False,
    ) -> None:
        self._header = header
        self._tree = tree
        self._store = store
        if indexer is None:
            where = store.path if store.path is not None else f"<memory session {header.id}>"
            indexer = Indexer(where, tree, list(diagnostics), v1=header.version < 2, strict=strict)
        self._indexer = indexer
        self._diagnostics = indexer.diagnostics
        self._strict = strict
        if not strict:
            # Through a weak reference: a bound method would make session and tree a cycle,
            # and a dropped session's index would wait for a full collection to be freed.
            session = weakref.ref(self)

            def bad_body(entry_id: str, exc: CorruptSessionError) -> None:
                alive = session()
                if alive is not None:
                    alive._bad_body(entry_id, exc)

            tree.on_bad_body = bad_body
        self._lock = threading.RLock()
        self._driver: tuple[object, str] | None = None
        self._fsync: FsyncPolicy = fsync
        self._prepared = False
        self._context_cache: tuple[tuple[str | None, int], SessionContext] | None = None
        self._incremental = ContextCache()
        self._closed = False

    # --- facts -------------------------------------------------------------------------------

    @property
    def header(self) -> SessionHeader:
        """The header (line 1)."""
        return self._header

    @property
    def id(self) -> str:
        return self._header.id

    @property
    def cwd(self) -> str:
        return self._header.cwd

    @property
    def path(self) -> Path | None:
        """The session file, or None for an in-memory session."""
        return self._store.path

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """What reading (and preparing to append) found and handled, in order."""
        return tuple(self._diagnostics)

    @property
    def leaf_id(self) -> str | None:
        """The active leaf: new entries are appended under it; None means before the first."""
        return self._tree.leaf_id

    @property
    def name(self) -> str | None:
        """The name of the latest ``session_info`` entry (None if it cleared the name)."""
        return self._tree.name

    @property
    def labels(self) -> dict[str, str]:
        """Current labels by target entry id (a copy)."""
        return dict(self._tree.labels)

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return len(self._tree)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._tree

    # --- reads -------------------------------------------------------------------------------

    def get_entry(self, entry_id: str) -> Entry:
        """The entry with this id.

        Raises:
            EntryNotFoundError: no such entry (code ``entry_not_found``).
            CorruptSessionError: its line cannot be decoded (names file and line).
        """
        return self._tree.get(entry_id)

    def get_label(self, entry_id: str) -> str | None:
        return self._tree.labels.get(entry_id)

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """The path from the root to ``from_id`` (default: the leaf), root first.

        Raises:
            EntryNotFoundError: ``from_id`` is not in the session.
        """

        def walk() -> list[Entry]:
            start = self._tree.leaf_id if from_id is None else from_id
            return [self._tree.get(i) for i in self._tree.path_ids(start)]

        return self._recovering(walk)

    def get_children(self, parent_id: str | None) -> list[Entry]:
        """Direct children of ``parent_id`` (None: the roots), in file order.

        ``leaf`` entries are bookkeeping, not content: they are stepped through (their own
        children, such as a message pi appended after our leaf move, count as children here).
        """
        return self._recovering(lambda: [self._tree.get(i) for i in self._visible(parent_id)])

    def _visible(self, parent_id: str | None) -> list[str]:
        rows, children = self._tree.rows, self._tree.children
        out: list[str] = []
        stack = list(reversed(children.get(parent_id, ())))
        while stack:
            child = stack.pop()
            if rows[child].type == "leaf":
                stack.extend(reversed(children.get(child, ())))
            else:
                out.append(child)
        return out

    def raw_line(self, entry_id: str) -> bytes:
        """The entry's line as stored (newline-terminated), or freshly encoded when the stored
        line cannot be copied as is (v1 lines, re-attached orphans, in-memory sessions)."""
        row = self._tree.rows.get(entry_id)
        if row is None:
            raise EntryNotFoundError(entry_id)
        raw = None if row.derived_ids else self._store.raw(row)
        return raw if raw is not None else dumps_line(encode_entry(self._tree.get(entry_id)))

    def decode_unstored(self, entry_ids: Sequence[str]) -> None:
        """Decode those of ``entry_ids`` whose line :meth:`raw_line` encodes afresh (re-attached
        orphans, v1 lines): a copy then cannot fail half-way on a damaged one.

        Raises:
            CorruptSessionError: one cannot be decoded (in recover mode it was dropped and
                reported first, so a walk made again sees the re-attached tree).
        """
        rows = self._tree.rows
        for entry_id in entry_ids:
            if rows[entry_id].derived_ids:
                self._tree.get(entry_id)

    def raw_lines(self, entry_ids: Sequence[str]) -> list[bytes]:
        """:meth:`raw_line` of many entries, read together where the store can (a fork)."""
        rows = self._tree.rows
        try:
            wanted = [rows[i] for i in entry_ids]
        except KeyError as exc:
            raise EntryNotFoundError(str(exc.args[0])) from None
        many = getattr(self._store, "raw_many", None)
        stored = many(wanted) if many is not None else [self._store.raw(r) for r in wanted]
        return [
            raw if raw is not None else dumps_line(encode_entry(self._tree.get(row.id)))
            for row, raw in zip(wanted, stored, strict=True)
        ]

    def copy_lines(self, entry_ids: Sequence[str], fd: int) -> list[tuple[Row, int]]:
        """Write the lines of ``entry_ids`` (as :meth:`raw_lines` gives them) to the file open
        as ``fd``, at its current offset; a file store copies runs of neighbouring lines inside
        the kernel (a fork of a long path). Returns each entry's row here and the length of its
        written line (without the newline), in order.

        Raises:
            EntryNotFoundError: an id is not in the session.
            OSError: writing to ``fd`` failed.
        """
        rows = self._tree.rows
        try:
            wanted = [rows[i] for i in entry_ids]
        except KeyError as exc:
            raise EntryNotFoundError(str(exc.args[0])) from None

        def encoded(row: Row) -> bytes:
            return dumps_line(encode_entry(self._tree.get(row.id)))

        copy = getattr(self._store, "copy_rows", None)
        if copy is not None:
            lengths: list[int] = copy(wanted, fd, encoded)
        else:
            lines = self.raw_lines(entry_ids)
            data = memoryview(b"".join(lines))
            while data:
                data = data[os.write(fd, data) :]
            lengths = [len(line) - 1 for line in lines]
        return list(zip(wanted, lengths, strict=True))

    def entry_types(self, entry_ids: Sequence[str]) -> list[str]:
        """:meth:`entry_type` of many entries, in order (a fork looks at every type on a path).

        Raises:
            EntryNotFoundError: an id is not in the session.
        """
        rows = self._tree.rows
        try:
            return [rows[i].type for i in entry_ids]
        except KeyError as exc:
            raise EntryNotFoundError(str(exc.args[0])) from None

    def path_ids(self, leaf_id: str | None) -> list[str]:
        """Ids from the root down to ``leaf_id`` (empty for None), without decoding entries.

        Raises:
            EntryNotFoundError: ``leaf_id`` is not in the session.
        """
        return self._tree.path_ids(leaf_id)

    def entry_type(self, entry_id: str) -> str:
        """The entry's ``type`` without decoding its body.

        Raises:
            EntryNotFoundError: no such entry.
        """
        row = self._tree.rows.get(entry_id)
        if row is None:
            raise EntryNotFoundError(entry_id)
        return row.type

    def entry_ids(self) -> list[str]:
        """Every entry id in file order."""
        return list(self._tree.order)

    def entries(self) -> Iterator[Entry]:
        """Every entry in file order."""
        return self._tree.iter_entries()

    def get_entries(self, entry_ids: Sequence[str]) -> list[Entry]:
        """The entries with these ids, in the order given, decoding no other (pick them with
        :meth:`entry_types`: a caller that reads the settings entries leaves the messages
        unbuilt). As :meth:`entries`, a recovering session drops and skips one whose body
        cannot be decoded.

        Raises:
            EntryNotFoundError: an id is not in the session.
            CorruptSessionError: a body cannot be decoded (a strict session).
        """
        entries = []
        for entry_id in entry_ids:
            try:
                entries.append(self._tree.get(entry_id))
            except CorruptSessionError:
                if entry_id in self._tree.rows:
                    raise  # strict: refused, as entries() refuses it
        return entries

    def get_tree(self, *, leaf_entries: bool = False) -> list[TreeNode]:
        """The roots of the entry tree, each with its subtree (children in file order).

        ``leaf`` entries are stepped through as in :meth:`get_children`, unless
        ``leaf_entries`` (then every entry is a node, as stored).
        """
        return self._recovering(lambda: self._get_tree(leaf_entries))

    def _get_tree(self, leaf_entries: bool) -> list[TreeNode]:
        nodes: dict[str, TreeNode] = {}
        rows = self._tree.rows
        # Children come after their parent in an append-only file, so building in reverse file
        # order makes every child before its parent (no recursion: paths can be 100k deep).
        # ``leaf`` entries are stepped through, as in get_children.
        children = self._tree.children
        for entry_id in reversed(self._tree.order):
            if rows[entry_id].type == "leaf" and not leaf_entries:
                continue
            kids = children.get(entry_id, ()) if leaf_entries else self._visible(entry_id)
            nodes[entry_id] = TreeNode(
                entry=self._tree.get(entry_id),
                children=tuple(nodes[c] for c in kids if c in nodes),
                label=self._tree.labels.get(entry_id),
            )
        roots = children.get(None, ()) if leaf_entries else self._visible(None)
        return [nodes[r] for r in roots if r in nodes]

    def build_context(self) -> SessionContext:
        """The model's view at the leaf: messages and derived state (see ``repos.build_context``).

        Cached until the next append or leaf move (the agent loop asks for it several times per
        request), and extended rather than rebuilt when the branch only grew
        (:class:`~repos._context.ContextCache`), so a turn's cost does not grow with the session.
        """
        return self._recovering(self._build_context)

    def _build_context(self) -> SessionContext:
        key = (self._tree.leaf_id, len(self._tree))
        if self._context_cache is None or self._context_cache[0] != key:
            leaf, rows = self._tree.leaf_id, self._tree.rows
            context = self._incremental.build_at(
                leaf,
                lambda entry_id: rows[entry_id].parent_id,
                lambda: self._tree.path_types(leaf),
                self._tree.get,
                self._tree.get_bodies,
            )
            self._context_cache = (key, context)
        return self._context_cache[1]

    # --- appends -----------------------------------------------------------------------------

    def append_message(self, message: Message) -> MessageEntry:
        """Append a message (user, assistant, toolResult, bashExecution, custom)."""
        return self._append(_encode_message, message)

    def append_messages(self, messages: Sequence[Message]) -> list[MessageEntry]:
        """Append several messages in a row, each parented on the one before (a tool batch's
        results): what as many :meth:`append_message` calls store, in one transaction, so the
        store's lock, its check that the lines are still this session's and the torn-tail
        check are paid once, and ``fsync="always"`` syncs once, after the last line.

        Every message is encoded before anything is written: one that cannot be stored
        (``InvalidEntryError``) leaves the session unchanged. Each line is written whole; a
        write that fails (disk full) raises with the lines before it stored, as separate
        appends would have.
        """
        return self._append_all(_encode_message, messages)

    def append_model_change(self, provider: str, model_id: str) -> ModelChangeEntry:
        return self._append_made(
            lambda b: ModelChangeEntry(**b, provider=provider, model_id=model_id)
        )

    def append_thinking_level_change(self, thinking_level: str) -> ThinkingLevelChangeEntry:
        return self._append_made(
            lambda b: ThinkingLevelChangeEntry(**b, thinking_level=thinking_level)
        )

    def append_active_tools_change(self, names: Sequence[str]) -> ActiveToolsChangeEntry:
        return self._append_made(
            lambda b: ActiveToolsChangeEntry(**b, active_tool_names=tuple(names))
        )

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str,
        tokens_before: int,
        *,
        details: JSONValue = None,
        from_hook: bool = False,
    ) -> CompactionEntry:
        """Append a compaction: the context keeps ``summary`` and the path from
        ``first_kept_entry_id`` on.

        Raises:
            EntryNotFoundError: ``first_kept_entry_id`` is not in the session.
        """
        self._require(first_kept_entry_id)
        return self._append_made(
            lambda b: CompactionEntry(
                **b,
                summary=summary,
                first_kept_entry_id=first_kept_entry_id,
                tokens_before=tokens_before,
                details=details,
                from_hook=from_hook,
            )
        )

    def append_branch_summary(
        self, from_id: str, summary: str, *, details: JSONValue = None, from_hook: bool = False
    ) -> BranchSummaryEntry:
        """Append the summary of an abandoned branch whose leaf was ``from_id``."""
        self._require(from_id)
        return self._append_made(
            lambda b: BranchSummaryEntry(
                **b, from_id=from_id, summary=summary, details=details, from_hook=from_hook
            )
        )

    def append_custom(self, custom_type: str, data: JSONValue = None) -> CustomEntry:
        """Append application state (never sent to the model)."""
        return self._append_made(lambda b: CustomEntry(**b, custom_type=custom_type, data=data))

    def append_custom_message(
        self,
        custom_type: str,
        content: str | Sequence[UserContent],
        *,
        display: bool = True,
        details: JSONValue = None,
    ) -> CustomMessageEntry:
        """Append an application message that the model sees as a user message."""
        body = content if isinstance(content, str) else tuple(content)
        return self._append_made(
            lambda b: CustomMessageEntry(
                **b, custom_type=custom_type, content=body, display=display, details=details
            )
        )

    def set_label(self, target_id: str, label: str | None) -> LabelEntry:
        """Label an entry; None or "" clears its label.

        Raises:
            EntryNotFoundError: no such target.
        """
        self._require(target_id)
        return self._append_made(
            lambda b: LabelEntry(**b, target_id=target_id, label=label or None)
        )

    def set_name(self, name: str) -> SessionInfoEntry:
        """Set the session's display name; "" clears it (the latest ``session_info`` wins, as
        in pi)."""
        return self._append_made(lambda b: SessionInfoEntry(**b, name=name.strip()))

    def move_to(self, entry_id: str | None) -> LeafEntry:
        """Move the active leaf (pi G1's ``leaf`` entry, so the move survives a reopen).

        The entry is parented on its target (not on the old leaf), so pi's reader, which takes
        the last line as the leaf and knows no ``leaf`` type, lands on the same branch. Moving to
        the current leaf appends nothing and returns the last leaf entry pointing there (or a
        synthetic one, not stored, when there is none).

        Args:
            entry_id: the new leaf; None puts it before the first entry.

        Raises:
            EntryNotFoundError: no such entry.
        """
        if entry_id is not None:
            self._require(entry_id)
        with self._lock:
            if entry_id == self._tree.leaf_id:
                return self._current_leaf_entry()
            return self._append_made(
                lambda b: LeafEntry(
                    id=b["id"], parent_id=entry_id, timestamp=b["timestamp"], target_id=entry_id
                )
            )

    def _current_leaf_entry(self) -> LeafEntry:
        for entry_id in reversed(self._tree.order):
            if self._tree.rows[entry_id].type == "leaf":
                entry = self._tree.get(entry_id)
                if isinstance(entry, LeafEntry) and entry.target_id == self._tree.leaf_id:
                    return entry
                break
        return LeafEntry(
            id="", parent_id=self._tree.leaf_id, timestamp=iso_now(), target_id=self._tree.leaf_id
        )

    def index_lines(self, lines: Iterable[RawLine]) -> None:
        """For stores: index the lines read at open (no catch-up semantics)."""
        self._indexer.feed(lines)

    def refresh(self, *, keep_leaf: bool = False) -> int:
        """Read the lines other processes appended since this session last looked.

        The leaf moves where a fresh open would put it (the file's last line), unless
        ``keep_leaf``. Appends catch up by themselves but keep this session's leaf.

        Returns:
            How many entries were added.

        Raises:
            SessionGoneError: the file was deleted, replaced or cut shorter since it was opened.
        """
        with self._lock:
            self._check_open()
            added = self._indexer.feed(self._store.poll(), own_leaf=False)
            if not keep_leaf:
                self._tree.leaf_id = self._tree.file_leaf_id
            return added

    def claim(self, holder: object, description: str) -> None:
        """Mark this session as driven by ``holder`` (a harness running an operation) until
        :meth:`release`. The same holder may claim again.

        Raises:
            SessionBusyError: another holder drives it.
        """
        with self._lock:
            if self._driver is not None and self._driver[0] is not holder:
                raise SessionBusyError(self.id, self._driver[1])
            self._driver = (holder, description)

    def release(self, holder: object) -> None:
        """End :meth:`claim` (harmless if ``holder`` holds nothing)."""
        with self._lock:
            if self._driver is not None and self._driver[0] is holder:
                self._driver = None

    # --- durability and lifecycle ------------------------------------------------------------

    def sync(self) -> None:
        """Make every appended line durable now (fsync), whatever the policy."""
        self._check_open()
        self._store.sync()

    def save_point(self) -> None:
        """A turn ended: fsync when the policy is ``turn`` (``always`` already did)."""
        if self._fsync == "turn" and self._prepared and not self._closed:
            self._store.sync()

    def close(self) -> None:
        """Release the file; later reads of undecoded entries and appends raise. Waits for an
        append running in another thread to finish."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._store.close()

    @contextlib.contextmanager
    def held(self) -> Iterator[bool]:
        """Hold off this session's appends, refreshes and close in other threads while the
        caller reads it whole (a fork of its file taken for someone else). Yields whether the
        session is open (False: it was closed; nothing to read)."""
        with self._lock:
            yield not self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Session {self.id} entries={len(self)} leaf={self.leaf_id} path={self.path}>"

    # --- internals ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError()

    def _require(self, entry_id: str) -> None:
        if entry_id not in self._tree:
            raise EntryNotFoundError(entry_id)

    def _new_id(self) -> str:
        # Called under the store's lock after catch-up: unique among every line in the file.
        # Ids need not be secret, only unique here: a seeded PRNG, not a syscall per id.
        rows = self._tree.rows
        candidate = _ids.getrandbits(32).to_bytes(4, "big").hex()
        if candidate not in rows:  # nearly always: no loop set up for it
            return candidate
        for _ in range(100):
            candidate = _ids.getrandbits(32).to_bytes(4, "big").hex()
            if candidate not in rows:
                return candidate
        return secrets.token_hex(16)

    def _bad_body(self, entry_id: str, exc: CorruptSessionError) -> None:
        message = f"entry {entry_id!r} skipped: {exc.reason}"
        log.warning("%s:%s (byte %s): %s", exc.path, exc.line, exc.offset, message)
        self._diagnostics.append(
            Diagnostic(code="corrupt_body", message=message, line=exc.line, offset=exc.offset)
        )
        self._context_cache = None
        self._incremental = ContextCache()

    def _recovering(self, read: Callable[[], T]) -> T:
        """Run a walk of the tree; in recover mode, when it met a body that cannot be decoded
        (now dropped and reported), walk again over the re-attached tree."""
        while True:
            dropped = self._tree.dropped
            try:
                return read()
            except CorruptSessionError:
                if self._strict or self._tree.dropped == dropped:
                    raise

    def _append_made(self, make: Callable[[_Base], E]) -> E:
        """:meth:`_append` of the entry ``make`` builds from its id, parent and timestamp."""
        return self._append(_encode_made, make)

    def _append(self, encode: Callable[[str, str | None, str, A], tuple[bytes, E]], arg: A) -> E:
        """Append the entry ``encode(a new id, the leaf, now, arg)`` gives: its line and the
        entry as that line reads back. Whatever ``encode`` raises (``InvalidEntryError`` for
        a value that cannot be stored) propagates with nothing written."""
        with self._lock:
            store, tree = self._begin_append(), self._tree
            try:
                # The session keeps, and returns, what the line holds (equal to decoding it back,
                # sharing nothing mutable with the caller's objects); a line that would not read
                # back (a field of the wrong type) is refused before anything is written.
                line, fresh = encode(self._new_id(), tree.leaf_id, iso_now(), arg)
                stored = store.write(line)
            finally:
                store.end_append()
            span = (stored.offset, len(line) - 1)
            tree.add(
                _row((fresh.id, fresh.parent_id, fresh.type, stored.number, span, False)), fresh
            )
            if self._fsync == "always":
                store.sync()
            return fresh

    def _append_all(
        self, encode: Callable[[str, str | None, str, A], tuple[bytes, E]], args: Sequence[A]
    ) -> list[E]:
        """:meth:`_append` of each of ``args`` in turn, in one store transaction; every entry
        is encoded before the first line is written."""
        with self._lock:
            store, tree = self._begin_append(), self._tree
            written: list[tuple[Row, E]] = []
            try:
                encoded: list[tuple[bytes, E]] = []
                parent, now = tree.leaf_id, iso_now()
                for arg in args:
                    entry_id = self._new_id()
                    while any(fresh.id == entry_id for _, fresh in encoded):  # unique in the batch
                        entry_id = self._new_id()
                    encoded.append(encode(entry_id, parent, now, arg))
                    parent = entry_id
                for line, fresh in encoded:
                    stored = store.write(line)
                    span = (stored.offset, len(line) - 1)
                    written.append(
                        (Row(fresh.id, fresh.parent_id, fresh.type, stored.number, span), fresh)
                    )
            finally:
                # Ending the transaction may fail (a database's commit): then nothing is stored
                # and nothing is indexed. Else the lines written so far are indexed, even when a
                # later write failed (its error then goes on).
                store.end_append()
                for row, fresh in written:
                    tree.add(row, fresh)
            if self._fsync == "always":
                store.sync()
            return [fresh for _, fresh in written]

    def _begin_append(self) -> SessionStore:
        """Start the store's append transaction (under ``self._lock``): take in what others
        appended, set a torn tail aside, migrate an old file; the caller ends it."""
        if self._closed:
            raise SessionClosedError()
        store = self._store
        catch_up = store.begin_append()
        try:
            if catch_up.lines or catch_up.torn_offset is not None:
                self._absorb(catch_up)
            if not self._prepared:
                self._prepare()
        except BaseException:
            store.end_append()
            raise
        return store

    def _absorb(self, catch_up: CatchUpLike) -> None:
        if catch_up.torn_offset is not None:
            self._diagnostics.append(
                Diagnostic(
                    code="torn_tail_set_aside",
                    message=f"unterminated last line moved to {self.path}.torn",
                    offset=catch_up.torn_offset,
                )
            )
        if catch_up.lines:
            self._indexer.feed(catch_up.lines, own_leaf=False)

    def _prepare(self) -> None:
        """Before the first append (under the lock): migrate a v1/v2 file to v3."""
        version = self._header.version
        if version < CURRENT_VERSION:
            header = evolve(self._header, version=CURRENT_VERSION)
            lines = [dumps_line(encode_header(header))]
            lines.extend(dumps_line(encode_entry(e)) for e in self._tree.iter_entries())
            backup = f".v{version}.bak"
            appended = self._store.rewrite(lines, backup)
            kept = getattr(self._store, "backup", None) or (
                f"{self.path}{backup}" if self.path is not None else f"the store's {backup} backup"
            )
            self._header = header
            offset = len(lines[0])
            rows = self._tree.rows
            for row, number, line in zip(
                list(rows.values()), range(2, len(lines) + 1), lines[1:], strict=True
            ):
                rows[row.id] = row._replace(
                    span=(offset, len(line) - 1), derived_ids=False, line=number
                )
                offset += len(line)
            self._indexer.v1_ids = None
            if appended:
                self._indexer.feed(appended, own_leaf=False)
            message = f"migrated from v{version} to v3 before appending; original kept as {kept}"
            log.warning("%s: %s", self.path, message)
            self._diagnostics.append(Diagnostic(code="migrated", message=message))
        self._prepared = True
