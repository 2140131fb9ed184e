"""``Session``: one session's tree, with typed appends. Each append goes to the store first, then
into the in-memory tree, so memory never holds what the file does not (pi ``storage.ts``)."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Literal, Protocol, Self, TypeAlias, TypedDict, TypeVar

from attrs import evolve, frozen

from hooks import JSONValue, Message, UserContent

from ._codec import dumps_line, encode_entry, encode_header
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
from ._errors import EntryNotFoundError, SessionClosedError
from ._tree import Row, Tree

__all__ = ["Diagnostic", "FsyncPolicy", "Session", "SessionStore", "TreeNode", "iso_now"]

log = logging.getLogger("repos")

FsyncPolicy: TypeAlias = Literal["never", "turn", "always"]
E = TypeVar("E", bound=Entry)


class _Base(TypedDict):
    id: str
    parent_id: str | None
    timestamp: str


def iso_now() -> str:
    """Current UTC time as pi writes entry timestamps: ``2025-12-08T22:41:05.306Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@frozen(kw_only=True)
class Diagnostic:
    """Something reading or preparing a session file found and handled.

    ``code``: ``torn_tail`` (an unterminated last line, ignored), ``corrupt_line`` (skipped),
    ``orphan_reattached`` (parent missing; attached to the previous valid entry),
    ``duplicate_id`` (a later line reusing an id, skipped), ``blank_line``,
    ``leaf_target_missing`` (a ``leaf`` entry whose target is not in the file; move ignored),
    ``torn_tail_set_aside`` (moved to ``<file>.torn`` before an append), ``migrated`` (a v1/v2
    file rewritten as v3 before an append, original kept as ``<file>.v<N>.bak``).
    ``line`` is 1-based; ``offset`` is the byte offset of that line.
    """

    code: str
    message: str
    line: int | None = None
    offset: int | None = None


@frozen(kw_only=True)
class TreeNode:
    """One entry of :meth:`Session.get_tree`, its children in file order, and its label."""

    entry: Entry
    children: tuple[TreeNode, ...]
    label: str | None = None


class SessionStore(Protocol):
    """Where a session's lines live. ``JsonlStore`` writes a file; a memory store keeps lines.

    ``append`` must write one whole line atomically (one ``write`` on an ``O_APPEND``
    descriptor) or raise, leaving the stored lines unchanged (or, if a fragment could not be
    removed, ending in a fragment that the next ``set_aside_torn_tail`` moves away).
    """

    @property
    def path(self) -> Path | None: ...

    def read(self, row: Row) -> Entry: ...

    def raw(self, row: Row) -> bytes | None:
        """The row's stored line (newline-terminated) if it can be copied verbatim, else None."""
        ...

    def append(self, line: bytes) -> None: ...

    def rewrite(self, lines: Sequence[bytes], backup_suffix: str) -> None: ...

    def set_aside_torn_tail(self) -> int | None:
        """Move an unterminated fragment at the end of the stored lines, as they are now, out of
        the way; return its offset, or None if the lines end whole. Called before every append,
        so a line is never glued onto a fragment."""
        ...

    def sync(self) -> None: ...

    def close(self) -> None: ...


class Session:
    """A session: header, entry tree, active leaf, labels and name.

    Reading never writes. Appends (``append_*``, ``set_*``, ``move_to``) each write one line,
    parented on the current leaf, which then moves to the new entry. Pure reads and appends are
    synchronous (a local append takes microseconds); the repository's lifecycle calls are async.

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
    ) -> None:
        self._header = header
        self._tree = tree
        self._store = store
        self._diagnostics = list(diagnostics)
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
        """The latest non-empty ``session_info`` name."""
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
        start = self._tree.leaf_id if from_id is None else from_id
        return [self._tree.get(i) for i in self._tree.path_ids(start)]

    def get_children(self, parent_id: str | None) -> list[Entry]:
        """Direct children of ``parent_id`` (None: the roots), in file order."""
        return [self._tree.get(i) for i in self._tree.children.get(parent_id, ())]

    def raw_line(self, entry_id: str) -> bytes:
        """The entry's line as stored (newline-terminated), or freshly encoded when the stored
        line cannot be copied as is (v1 lines, re-attached orphans, in-memory sessions)."""
        row = self._tree.rows.get(entry_id)
        if row is None:
            raise EntryNotFoundError(entry_id)
        raw = None if row.derived_ids else self._store.raw(row)
        return raw if raw is not None else dumps_line(encode_entry(self._tree.get(entry_id)))

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

    def get_tree(self) -> list[TreeNode]:
        """The roots of the entry tree, each with its subtree (children in file order)."""
        nodes: dict[str, TreeNode] = {}
        children = self._tree.children
        # Children come after their parent in an append-only file, so building in reverse file
        # order makes every child before its parent (no recursion: paths can be 100k deep).
        for entry_id in reversed(self._tree.order):
            nodes[entry_id] = TreeNode(
                entry=self._tree.get(entry_id),
                children=tuple(nodes[c] for c in children.get(entry_id, ()) if c in nodes),
                label=self._tree.labels.get(entry_id),
            )
        return [nodes[r] for r in children.get(None, ()) if r in nodes]

    def build_context(self) -> SessionContext:
        """The model's view at the leaf: messages and derived state (see ``repos.build_context``).

        Cached until the next append or leaf move (the agent loop asks for it several times per
        request), and extended rather than rebuilt when the branch only grew
        (:class:`~repos._context.ContextCache`), so a turn's cost does not grow with the session.
        """
        key = (self._tree.leaf_id, len(self._tree))
        if self._context_cache is None or self._context_cache[0] != key:
            leaf, rows = self._tree.leaf_id, self._tree.rows
            context = self._incremental.build_at(
                leaf,
                lambda entry_id: rows[entry_id].parent_id,
                lambda: self._tree.path_ids(leaf),
                self._tree.get,
            )
            self._context_cache = (key, context)
        return self._context_cache[1]

    # --- appends -----------------------------------------------------------------------------

    def append_message(self, message: Message) -> MessageEntry:
        """Append a message (user, assistant, toolResult, bashExecution, custom)."""
        return self._append(lambda b: MessageEntry(**b, message=message))

    def append_model_change(self, provider: str, model_id: str) -> ModelChangeEntry:
        return self._append(lambda b: ModelChangeEntry(**b, provider=provider, model_id=model_id))

    def append_thinking_level_change(self, thinking_level: str) -> ThinkingLevelChangeEntry:
        return self._append(lambda b: ThinkingLevelChangeEntry(**b, thinking_level=thinking_level))

    def append_active_tools_change(self, names: Sequence[str]) -> ActiveToolsChangeEntry:
        return self._append(lambda b: ActiveToolsChangeEntry(**b, active_tool_names=tuple(names)))

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
        return self._append(
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
        return self._append(
            lambda b: BranchSummaryEntry(
                **b, from_id=from_id, summary=summary, details=details, from_hook=from_hook
            )
        )

    def append_custom(self, custom_type: str, data: JSONValue = None) -> CustomEntry:
        """Append application state (never sent to the model)."""
        return self._append(lambda b: CustomEntry(**b, custom_type=custom_type, data=data))

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
        return self._append(
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
        return self._append(lambda b: LabelEntry(**b, target_id=target_id, label=label or None))

    def set_name(self, name: str) -> SessionInfoEntry:
        """Set the session's display name."""
        return self._append(lambda b: SessionInfoEntry(**b, name=name.strip()))

    def move_to(self, entry_id: str | None) -> LeafEntry:
        """Move the active leaf (pi G1's ``leaf`` entry, so the move survives a reopen).

        Args:
            entry_id: the new leaf; None puts it before the first entry.

        Raises:
            EntryNotFoundError: no such entry.
        """
        if entry_id is not None:
            self._require(entry_id)
        return self._append(lambda b: LeafEntry(**b, target_id=entry_id))

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
        """Release the file; later reads of undecoded entries and appends raise."""
        if not self._closed:
            self._closed = True
            self._store.close()

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
        for _ in range(100):
            candidate = secrets.token_hex(4)
            if candidate not in self._tree:
                return candidate
        return secrets.token_hex(16)

    def _append(self, make: Callable[[_Base], E]) -> E:
        self._check_open()
        self._set_aside_torn_tail()
        if not self._prepared:
            self._prepare()
        entry = make(
            {"id": self._new_id(), "parent_id": self._tree.leaf_id, "timestamp": iso_now()}
        )
        # Store first: if the write fails (SessionWriteError), the tree does not change.
        self._store.append(dumps_line(encode_entry(entry)))
        self._tree.add(Row(id=entry.id, parent_id=entry.parent_id, type=entry.type), entry)
        if self._fsync == "always":
            self._store.sync()
        return entry

    def _set_aside_torn_tail(self) -> None:
        """Before every append: if the file now ends in an unterminated fragment (a torn tail
        found at open, a crashed writer's, or a failed append's), move it to ``<file>.torn``."""
        offset = self._store.set_aside_torn_tail()
        if offset is not None:
            self._diagnostics.append(
                Diagnostic(
                    code="torn_tail_set_aside",
                    message=f"unterminated last line moved to {self.path}.torn",
                    offset=offset,
                )
            )

    def _prepare(self) -> None:
        """Before the first append: migrate a v1/v2 file to v3."""
        version = self._header.version
        if version < CURRENT_VERSION:
            header = evolve(self._header, version=CURRENT_VERSION)
            lines = [dumps_line(encode_header(header))]
            lines.extend(dumps_line(encode_entry(e)) for e in self._tree.iter_entries())
            backup = f".v{version}.bak"
            self._store.rewrite(lines, backup)
            self._header = header
            for row in self._tree.rows.values():
                row.span, row.derived_ids = None, False
            message = (
                f"migrated from v{version} to v3 before appending; "
                f"original kept as {self.path}{backup}"
            )
            log.warning("%s: %s", self.path, message)
            self._diagnostics.append(Diagnostic(code="migrated", message=message))
        self._prepared = True
