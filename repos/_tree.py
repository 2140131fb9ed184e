"""The in-memory tree of one session: an index of rows, no I/O.

A row knows an entry's id, parent, type and where its line is; the entry itself is decoded on
first use (DESIGN §3, performance shape), except labels, names and leaf moves, which the tree
needs at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from attrs import define, field

from ._entries import Entry, LabelEntry, LeafEntry, SessionInfoEntry
from ._errors import EntryNotFoundError

__all__ = ["Row", "Tree"]

EAGER_TYPES = frozenset({"label", "session_info", "leaf"})


@define(slots=True)
class Row:
    """Where an entry is. ``line`` is 1-based (0 when not from a file); ``span`` is (byte offset,
    length) of the line, None when the entry only lives in memory. ``derived_ids`` marks rows
    whose id/parentId are not the line's own (v1 files, re-attached orphans)."""

    id: str
    parent_id: str | None
    type: str
    line: int = 0
    span: tuple[int, int] | None = None
    derived_ids: bool = False


@define
class Tree:
    """Rows in file order, children by parent, labels, name and the active leaf.

    ``load`` decodes a row's entry when it is first asked for.
    """

    load: Callable[[Row], Entry]
    rows: dict[str, Row] = field(factory=dict)
    order: list[str] = field(factory=list)
    children: dict[str | None, list[str]] = field(factory=dict)
    cache: dict[str, Entry] = field(factory=dict)
    labels: dict[str, str] = field(factory=dict)
    name: str | None = None
    leaf_id: str | None = None

    def add(self, row: Row, entry: Entry | None = None) -> None:
        """Index a row (file order); apply labels, names and leaf moves; advance the leaf."""
        self.rows[row.id] = row
        self.order.append(row.id)
        self.children.setdefault(row.parent_id, []).append(row.id)
        if entry is not None:
            self.cache[row.id] = entry
        elif row.type in EAGER_TYPES:
            entry = self.get(row.id)
        if isinstance(entry, LabelEntry):
            if entry.target_id not in self.rows:
                pass  # a label copied by a fork whose target stayed behind, or on a skipped line
            elif entry.label:
                self.labels[entry.target_id] = entry.label
            else:
                self.labels.pop(entry.target_id, None)
        elif isinstance(entry, SessionInfoEntry) and entry.name and entry.name.strip():
            self.name = entry.name.strip()
        if isinstance(entry, LeafEntry):
            self.leaf_id = entry.target_id
        else:
            self.leaf_id = row.id

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self.rows

    def __len__(self) -> int:
        return len(self.order)

    def get(self, entry_id: str) -> Entry:
        """The entry with this id, decoded on first use.

        Raises:
            EntryNotFoundError: no such entry.
        """
        entry = self.cache.get(entry_id)
        if entry is None:
            row = self.rows.get(entry_id)
            if row is None:
                raise EntryNotFoundError(entry_id)
            entry = self.cache[entry_id] = self.load(row)
        return entry

    def path_ids(self, leaf_id: str | None) -> list[str]:
        """Ids from the root down to ``leaf_id`` (empty for None). A cycle ends the walk."""
        out: list[str] = []
        seen: set[str] = set()
        current = leaf_id
        while current is not None and current not in seen:
            row = self.rows.get(current)
            if row is None:
                raise EntryNotFoundError(current)
            seen.add(current)
            out.append(current)
            current = row.parent_id
        out.reverse()
        return out

    def iter_entries(self) -> Iterator[Entry]:
        """Every entry in file order (decodes all of them)."""
        for entry_id in self.order:
            yield self.get(entry_id)
