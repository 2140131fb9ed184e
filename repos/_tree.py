"""The in-memory tree of one session: an index of rows, no I/O.

A row knows an entry's id, parent, type and where its line is; the entry itself is decoded on
first use (DESIGN §3, performance shape), except labels, names and leaf moves, which the tree
needs at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple

from attrs import define, field

from ._codec import Slot
from ._entries import Entry, LabelEntry, LeafEntry, SessionInfoEntry
from ._errors import CorruptSessionError, EntryNotFoundError

__all__ = ["Row", "Tree"]

EAGER_TYPES = frozenset({"label", "session_info", "leaf"})

# Steps walked by probing before a long path is scanned for instead (Tree.path_types).
_SHORT_WALK = 256
# Rows decoded together by a sweep for damaged bodies (Tree._sweep): memory stays bounded.
_SWEEP_BATCH = 2048


class Row(NamedTuple):
    """Where an entry is. ``line`` is 1-based (0 when not from a file); ``span`` is (byte offset,
    length) of the line, None when the entry only lives in memory. ``derived_ids`` marks rows
    whose id/parentId are not the line's own (v1 files, re-attached orphans).

    A tuple, so the garbage collector stops tracking it after one look: a session holds one
    row per entry, and collections walking 100,000 objects would otherwise cost more than
    indexing them did. Change a row by replacing it (``_replace``).
    """

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
    load_many: Callable[[list[Row]], list[Entry | CorruptSessionError]] | None = None
    """Decodes many rows at once (a file store reads neighbouring lines together)."""
    load_bodies: Callable[[list[Row]], list[Entry | Slot | CorruptSessionError]] | None = None
    """``load_many``, giving a message entry's body that is certain to decode as a slot of its
    JSON (see :meth:`get_bodies`)."""
    on_bad_body: Callable[[str, CorruptSessionError], None] | None = None
    """Recover mode: called after a row whose body cannot be decoded was dropped (strict
    sessions leave it None, and the error propagates with the row kept)."""
    rows: dict[str, Row] = field(factory=dict)
    order: list[str] = field(factory=list)
    _children: dict[str | None, list[str]] | None = field(default=None, alias="_children")
    cache: dict[str, Entry] = field(factory=dict)
    labels: dict[str, str] = field(factory=dict)
    name: str | None = None
    leaf_id: str | None = None
    file_leaf_id: str | None = None
    """Where a fresh open of the file would put the leaf (differs from ``leaf_id`` once other
    writers' lines were caught up while this session kept its own branch)."""
    dropped: int = 0
    """Rows removed because their body could not be decoded (recover mode)."""
    _checked: int = field(default=0, alias="_checked")
    """Every row of a line up to this one (1-based) was decoded once by :meth:`_sweep`."""

    def add(
        self, row: Row, entry: Entry | None = None, *, own_leaf: bool = True
    ) -> tuple[str, str] | None:
        """Index a row (file order); apply labels, names and leaf moves; advance the leaf
        (``own_leaf=False``: only the file's leaf). Returns a (code, reason) problem to report:
        a label or leaf move whose target is not in the tree (ignored)."""
        entry_id = row.id
        self.rows[entry_id] = row
        self.order.append(entry_id)
        if self._children is not None:
            self._children.setdefault(row.parent_id, []).append(entry_id)
        if entry is not None:
            self.cache[entry_id] = entry
            if row.type not in EAGER_TYPES:
                # An entry appended here (messages, mostly): nothing to apply but the leaf.
                self.file_leaf_id = entry_id
                if own_leaf:
                    self.leaf_id = entry_id
                return None
        elif row.type in EAGER_TYPES:
            entry = self.get(row.id)
        problem: tuple[str, str] | None = None
        if isinstance(entry, LabelEntry):
            if entry.target_id not in self.rows:
                # A label copied by a fork whose target stayed behind, or on a skipped line.
                problem = (
                    "label_target_missing",
                    f"label target {entry.target_id!r} not found; label ignored",
                )
            elif entry.label:
                self.labels[entry.target_id] = entry.label
            else:
                self.labels.pop(entry.target_id, None)
        elif isinstance(entry, SessionInfoEntry) and entry.name is not None:
            # The latest session_info wins, an empty name included (it clears the name).
            self.name = entry.name.strip() or None
        target = row.id
        if isinstance(entry, LeafEntry):
            target = entry.target_id  # type: ignore[assignment]
            if target is not None and target not in self.rows:
                # Its target was on a skipped line: keep the leaf where it was, so no append
                # is parented on an id the tree does not hold.
                problem = ("leaf_target_missing", f"leaf target {target!r} not found; ignored")
                return problem
        self.file_leaf_id = target
        if own_leaf:
            self.leaf_id = target
        return problem

    def _sweep(self, found: dict[str, CorruptSessionError]) -> None:
        """Recover mode, once a body was found damaged (``found``): decode every row not checked
        yet, and drop every damaged one in one pass (:meth:`_drop_many`). Dropping them one at
        a time as walks meet them would cost a walk and a pass over the rows per damaged line:
        quadratic in a file of many. Each row is checked once; rows indexed later (another
        writer's lines) are checked by the next sweep."""
        checked = self._checked
        todo = [
            row
            for entry_id, row in self.rows.items()
            if row.line > checked and entry_id not in self.cache and entry_id not in found
        ]
        bad = dict(found)
        for start in range(0, len(todo), _SWEEP_BATCH):
            batch = todo[start : start + _SWEEP_BATCH]
            if self.load_many is not None:
                results = self.load_many(batch)
            else:
                results = [self._try_load(row) for row in batch]
            for row, result in zip(batch, results, strict=True):
                if isinstance(result, CorruptSessionError):
                    bad[row.id] = result
        self._checked = max((row.line for row in self.rows.values()), default=checked)
        self._drop_many(bad)
        if self.on_bad_body is not None:
            for entry_id, exc in sorted(bad.items(), key=lambda item: item[1].line):
                self.on_bad_body(entry_id, exc)

    def _try_load(self, row: Row) -> Entry | CorruptSessionError:
        try:
            return self.load(row)
        except CorruptSessionError as exc:
            return exc

    def _drop_many(self, bad: Mapping[str, object]) -> None:
        """Remove the rows ``bad`` names, in one pass: each one's children re-attach to the row
        before it in file order that stays (as an orphan's would), a leaf on it moves there,
        labels on it go."""
        rows, cache = self.rows, self.cache
        onto: dict[str, str | None] = {}
        kept: list[str] = []
        previous: str | None = None
        for entry_id in self.order:
            if entry_id in bad:
                onto[entry_id] = previous
            else:
                kept.append(entry_id)
                previous = entry_id
        if not onto:
            return
        self.order[:] = kept
        for entry_id in onto:
            del rows[entry_id]
            cache.pop(entry_id, None)
            self.labels.pop(entry_id, None)
        for entry_id, row in list(rows.items()):
            if row.parent_id is not None and row.parent_id in onto:
                rows[entry_id] = row._replace(parent_id=onto[row.parent_id], derived_ids=True)
                cache.pop(entry_id, None)  # decoded again, with the new parent
        self._children = None  # built again, in file order, when next asked for
        if self.leaf_id in onto:
            self.leaf_id = onto[self.leaf_id]
        if self.file_leaf_id in onto:
            self.file_leaf_id = onto[self.file_leaf_id]
        self.dropped += len(onto)

    @property
    def children(self) -> dict[str | None, list[str]]:
        """Child ids by parent id (None: the roots), in file order. Built on first use: opening
        and resuming a session never need it."""
        if self._children is None:
            children: dict[str | None, list[str]] = {}
            for row in self.rows.values():
                siblings = children.get(row.parent_id)
                if siblings is None:
                    children[row.parent_id] = [row.id]
                else:
                    siblings.append(row.id)
            self._children = children
        return self._children

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
            try:
                entry = self.load(row)
            except CorruptSessionError as exc:
                if self.on_bad_body is not None:
                    self._sweep({entry_id: exc})
                raise
            self.cache[entry_id] = entry
        return entry

    def get_many(self, entry_ids: list[str]) -> list[Entry]:
        """:meth:`get` of many entries, decoding the uncached ones together.

        Raises:
            EntryNotFoundError, CorruptSessionError: as :meth:`get` (in recover mode, after the
            damaged row was dropped).
        """
        cache = self.cache
        missing = [i for i in entry_ids if i not in cache]
        if self.load_many is not None and len(missing) > 1:
            rows = []
            for entry_id in missing:
                row = self.rows.get(entry_id)
                if row is None:
                    raise EntryNotFoundError(entry_id)
                rows.append(row)
            for row, decoded in zip(rows, self.load_many(rows), strict=True):
                if not isinstance(decoded, CorruptSessionError):
                    cache[row.id] = decoded
        # One lookup per id on a long path (each is a cache miss); the failures raise in
        # get, one by one.
        found = cache.get
        get = self.get
        return [found(i) or get(i) for i in entry_ids]

    def get_bodies(self, entry_ids: list[str]) -> list[Entry | Slot]:
        """:meth:`get_many`, but the message entries not decoded yet come as slots of their
        checked JSON (a context needs the messages, not the entries), and are not cached.
        Stores without ``load_bodies`` decode them.

        Raises:
            EntryNotFoundError, CorruptSessionError: as :meth:`get`.
        """
        if self.load_bodies is None:
            return list(self.get_many(entry_ids))
        cache = self.cache
        missing = [i for i in entry_ids if i not in cache]
        read: dict[str, Slot] = {}
        if missing:
            rows = []
            for entry_id in missing:
                row = self.rows.get(entry_id)
                if row is None:
                    raise EntryNotFoundError(entry_id)
                rows.append(row)
            for row, body in zip(rows, self.load_bodies(rows), strict=True):
                if isinstance(body, Slot):
                    read[row.id] = body
                elif not isinstance(body, CorruptSessionError):
                    cache[row.id] = body
        # The failures raise in get, one by one (recover mode drops them first).
        found, slot, get = cache.get, read.get, self.get
        return [found(i) or slot(i) or get(i) for i in entry_ids]

    def path_ids(self, leaf_id: str | None) -> list[str]:
        """Ids from the root down to ``leaf_id`` (empty for None). A cycle ends the walk."""
        return self.path_types(leaf_id)[0]

    def path_types(self, leaf_id: str | None) -> tuple[list[str], list[str]]:
        """:meth:`path_ids`, and the entries' types in the same order (one walk).

        A long path is found by scanning the rows backwards in file order instead of probing
        the dict once per step: on a long session each probe is a cache miss, and the scan
        reads memory in order (about 4 times faster at 300,000 entries, and flat per entry; see
        ``bench/README.md``). Parents come before their children in an append-only file, so
        one backward pass meets the whole path; were one not to, the walk goes on by probing.

        Raises:
            EntryNotFoundError: an id on the way has no row.
        """
        ids: list[str] = []
        kinds: list[str] = []
        add_id, add_kind, rows = ids.append, kinds.append, self.rows
        current = leaf_id
        scan_at = _SHORT_WALK
        # A path is at most as long as the tree: more steps mean a cycle, found only then (a
        # set of the ids seen would cost more than the walk itself).
        limit = len(rows)
        while current is not None:
            if len(ids) == scan_at:
                scan_at = -1
                current = self._scan_path(current, add_id, add_kind)
                continue
            row = rows.get(current)
            if row is None:
                raise EntryNotFoundError(current)
            add_id(current)
            add_kind(row.type)
            current = row.parent_id
            if len(ids) > limit:
                ids = self._acyclic_path(leaf_id)
                return ids, [rows[i].type for i in ids]
        ids.reverse()
        kinds.reverse()
        return ids, kinds

    def _scan_path(
        self, current: str, add_id: Callable[[str], None], add_kind: Callable[[str], None]
    ) -> str | None:
        """The rest of a long path from ``current`` up, found by one backward scan of the rows
        (see :meth:`path_types`); returns where it stopped: None at the root, else the id whose
        row it did not meet (then, or when scanning would cost more, probing goes on)."""
        rows = self.rows
        row = rows.get(current)
        # The scan costs about a quarter of a probe per row, all rows; probing costs one per
        # step, at most as many as the lines before this one.
        if row is None or row.line * 3 <= len(rows):
            return current
        # Over a snapshot: another thread may append while this one reads.
        found: str | None = current
        for row in reversed(list(rows.values())):
            if row.id == found:
                add_id(found)
                add_kind(row.type)
                found = row.parent_id
                if found is None:
                    break
        return found

    def _acyclic_path(self, leaf_id: str | None) -> list[str]:
        out: list[str] = []
        seen: set[str] = set()
        current = leaf_id
        while current is not None and current not in seen:
            seen.add(current)
            out.append(current)
            current = self.rows[current].parent_id
        out.reverse()
        return out

    def iter_entries(self) -> Iterator[Entry]:
        """Every entry in file order (decodes all of them; in recover mode a row whose body
        cannot be decoded is dropped and skipped)."""
        index = 0
        while index < len(self.order):
            entry_id = self.order[index]
            try:
                entry = self.get(entry_id)
            except CorruptSessionError:
                if self.on_bad_body is None or entry_id in self.rows:
                    raise
                continue  # dropped: the next row now sits at this index
            index += 1
            yield entry
