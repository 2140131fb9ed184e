"""Indexing session lines into a :class:`~repos._tree.Tree` without decoding their bodies.

One :class:`Indexer` per session, fed the lines read at open and, later, the lines other
processes appended (catch-up), so both follow the same rules: bad lines are skipped and
reported (file, line, byte offset), orphans re-attach to the previous valid entry in file order,
duplicate ids are skipped, and in strict mode any of these raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import orjson
from attrs import frozen

from ._codec import CodecError, loads_line, v1_entry_id
from ._errors import CorruptSessionError
from ._tree import EAGER_TYPES, Row, Tree

__all__ = ["Diagnostic", "Indexer", "RawLine"]

# pi and we write `{"type":…,"id":…,"parentId":…` first; ids never hold quotes or backslashes.
_HEAD = re.compile(
    rb'\{"type":"([A-Za-z0-9_]+)","id":"([^"\\\r\n]{1,128})",'
    rb'"parentId":(?:null|"([^"\\\r\n]{1,128})")'
)
_V1_HEAD = re.compile(rb'\{"type":"([A-Za-z0-9_]+)"')
# Types the fast path leaves to the general rules: decoded at once, or not an entry.
_SLOW_TYPES = EAGER_TYPES | {"session"}
_KIND_CACHE: dict[bytes, str] = {}


@frozen(kw_only=True)
class Diagnostic:
    """Something reading or preparing a session file found and handled.

    ``code``: ``torn_tail`` (an unterminated last line, ignored), ``corrupt_line`` (skipped),
    ``orphan_reattached`` (parent missing; attached to the previous valid entry),
    ``duplicate_id`` (a later line reusing an id, skipped), ``blank_line``,
    ``leaf_target_missing`` (a ``leaf`` entry whose target is not in the file; move ignored),
    ``torn_tail_set_aside`` (moved to ``<file>.torn`` before an append), ``migrated`` (a v1/v2
    file rewritten as v3 before an append, original kept as ``<file>.v<N>.bak``),
    ``corrupt_body`` (a line whose head was read but whose body cannot be decoded, found when
    first read; skipped, children re-attached as for a bad line), ``label_target_missing``,
    ``misplaced_header`` (a session header after line 1).
    ``line`` is 1-based; ``offset`` is the byte offset of that line.
    """

    code: str
    message: str
    line: int | None = None
    offset: int | None = None


@frozen
class RawLine:
    """One complete line as stored, without its newline. ``number`` is 1-based (the header is
    line 1); ``offset`` is the byte offset of its first byte."""

    number: int
    offset: int
    raw: bytes


class Indexer:
    """Adds lines to ``tree`` in file order; see the module docstring for the rules.

    Args:
        where: the file (or a label for in-memory sessions), named in errors and diagnostics.
        v1: the file is format v1 (no ids): ids are derived from line position and bytes, and
            each line is parented on the previous one; ``v1_ids`` maps 0-based line index to id.
        strict: raise :class:`CorruptSessionError` on the first problem instead of reporting.
    """

    def __init__(
        self,
        where: Path | str,
        tree: Tree,
        diagnostics: list[Diagnostic],
        *,
        v1: bool,
        strict: bool,
    ) -> None:
        self._where = where
        self._tree = tree
        self._diagnostics = self.diagnostics = diagnostics
        self._strict = strict
        self.v1_ids: dict[int, str] | None = {} if v1 else None
        self._taken: set[str] = set()
        self._previous: str | None = None
        self._blank_run: tuple[int, int, int] | None = None  # first line, offset, count

    def feed_chunk(
        self, buf: bytes, base: int, number: int, *, own_leaf: bool = True
    ) -> tuple[int, int]:
        """Index the complete lines of ``buf`` (file bytes from offset ``base``, whose first
        line is line ``number``); a trailing partial line is left for the next chunk. Returns
        (bytes consumed, the number of the next line). Call :meth:`finish` after the last chunk.

        The common line (a v2/v3 entry of a type the tree need not decode, whose id is new and
        whose parent is known) is indexed inline from its first bytes; anything else goes
        through the general rules.
        """
        tree = self._tree
        rows, order = tree.rows, tree.order
        # Child lists are kept only once something asked for them (Tree.children).
        children = tree._children
        head = _HEAD.match if self.v1_ids is None else None
        find = buf.find
        kinds = _KIND_CACHE
        slow_types = _SLOW_TYPES
        append_order = order.append
        new_row = tuple.__new__
        pos = 0
        last: str | None = None
        # The id of the line before, as bytes: most lines are its child, whose parent is then
        # that very string (no decoding, no lookup, one string object shared).
        last_b: bytes | None = None
        fast = head if self._blank_run is None else None
        while (nl := find(b"\n", pos)) >= 0:
            m = fast(buf, pos) if fast is not None else None
            if m is not None:
                kind_b, id_b, parent_b = m.groups()
                kind = kinds.get(kind_b) or kinds.setdefault(kind_b, kind_b.decode())
                entry_id = id_b.decode()
                if parent_b is None:
                    parent_id = None
                    known = True
                elif parent_b == last_b:
                    parent_id, known = last, True
                else:
                    parent_id = parent_b.decode()
                    known = parent_id in rows
                if known and kind not in slow_types and entry_id not in rows:
                    rows[entry_id] = new_row(
                        Row, (entry_id, parent_id, kind, number, (base + pos, nl - pos), False)
                    )
                    append_order(entry_id)
                    if children is not None:
                        siblings = children.get(parent_id)
                        if siblings is None:
                            children[parent_id] = [entry_id]
                        else:
                            siblings.append(entry_id)
                    last, last_b = entry_id, id_b
                    number += 1
                    pos = nl + 1
                    continue
            last_b = None
            if last is not None:
                self._previous = last
                self._set_leaf(last, own_leaf)
                last = None
            self.feed([RawLine(number, base + pos, buf[pos:nl])], own_leaf=own_leaf, flush=False)
            fast = head if self._blank_run is None else None
            number += 1
            pos = nl + 1
        if last is not None:
            self._previous = last
            self._set_leaf(last, own_leaf)
        return pos, number

    def finish(self) -> None:
        """After the last chunk: report a blank-line run still open."""
        self._flush_blanks()

    def _set_leaf(self, entry_id: str, own_leaf: bool) -> None:
        self._tree.file_leaf_id = entry_id
        if own_leaf:
            self._tree.leaf_id = entry_id

    def feed(self, lines: Iterable[RawLine], *, own_leaf: bool = True, flush: bool = True) -> int:
        """Index ``lines``; returns how many entries were added.

        ``own_leaf=False`` (catch-up) records where the file's leaf is but leaves the tree's
        leaf alone: this session keeps continuing its own branch.
        """
        added = 0
        for line in lines:
            if not line.raw.strip():
                self._blank(line)
                continue
            self._flush_blanks()
            if self._add(line, own_leaf):
                added += 1
        if flush:
            self._flush_blanks()
        return added

    def bad(self, line: RawLine, code: str, reason: str) -> None:
        if self._strict:
            raise CorruptSessionError(self._where, line.number, line.offset, reason)
        self._diagnostics.append(
            Diagnostic(code=code, message=reason, line=line.number, offset=line.offset)
        )

    # --- internals ---------------------------------------------------------------------------

    def _blank(self, line: RawLine) -> None:
        if self._blank_run is None:
            self._blank_run = (line.number, line.offset, 1)
        else:
            first, offset, count = self._blank_run
            self._blank_run = (first, offset, count + 1)

    def _flush_blanks(self) -> None:
        # A run of blank lines is one diagnostic, not one per line (100,000 blank lines used
        # to print 100,000 warnings).
        if self._blank_run is None:
            return
        first, offset, count = self._blank_run
        self._blank_run = None
        where = f"line {first}" if count == 1 else f"lines {first}-{first + count - 1}"
        message = f"{count} blank line{'s' if count > 1 else ''} skipped ({where})"
        if self._strict:
            raise CorruptSessionError(self._where, first, offset, message)
        self._diagnostics.append(
            Diagnostic(code="blank_line", message=message, line=first, offset=offset)
        )

    def _add(self, line: RawLine, own_leaf: bool) -> bool:
        tree = self._tree
        derived = False
        if self.v1_ids is not None:
            m1 = _V1_HEAD.match(line.raw)
            kind = m1.group(1).decode() if m1 else _parsed_type(line.raw)
            if kind is None:
                self.bad(line, "corrupt_line", _not_an_entry(line.raw, "a string 'type'"))
                return False
            entry_id = v1_entry_id(line.number - 1, line.raw, self._taken)
            parent_id, derived = self._previous, True
            self.v1_ids[line.number - 1] = entry_id
        else:
            m = _HEAD.match(line.raw)
            if m is not None:
                kind, entry_id = m.group(1).decode(), m.group(2).decode()
                parent_id = m.group(3).decode() if m.group(3) is not None else None
            else:
                head = _parsed_head(line.raw)
                if isinstance(head, str):
                    self.bad(line, "corrupt_line", head)
                    return False
                kind, entry_id, parent_id = head
            if entry_id in tree:
                self.bad(line, "duplicate_id", f"id {entry_id!r} already used by an earlier line")
                return False
            if parent_id is not None and parent_id not in tree:
                self.bad(
                    line,
                    "orphan_reattached",
                    f"parent {parent_id!r} not found; attached to the previous entry "
                    f"{self._previous!r}",
                )
                parent_id, derived = self._previous, True
        if kind == "session":
            self.bad(line, "misplaced_header", "a session header after line 1; skipped")
            return False
        row = Row(
            id=entry_id,
            parent_id=parent_id,
            type=kind,
            line=line.number,
            span=(line.offset, len(line.raw)),
            derived_ids=derived,
        )
        if kind in EAGER_TYPES:
            try:
                entry = tree.load(row)
            except CorruptSessionError as exc:
                self.bad(line, "corrupt_line", exc.reason)
                return False
            problem = tree.add(row, entry, own_leaf=own_leaf)
        else:
            problem = tree.add(row, own_leaf=own_leaf)
        self._previous = entry_id
        if problem is not None:
            code, reason = problem
            self.bad(line, code, reason)
        return True


def _not_an_entry(raw: bytes, needs: str) -> str:
    try:
        obj = loads_line(raw)
    except orjson.JSONDecodeError as exc:
        return f"not JSON ({exc})"
    except CodecError as exc:
        return str(exc)
    if not isinstance(obj, dict):
        return f"a JSON {type(obj).__name__}, not an object with {needs}"
    return f"a JSON object without {needs}"


def _parsed_type(raw: bytes) -> str | None:
    try:
        obj = loads_line(raw)
    except (orjson.JSONDecodeError, CodecError):
        return None
    kind = obj.get("type") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) else None


def _parsed_head(raw: bytes) -> tuple[str, str, str | None] | str:
    """(type, id, parentId) of a line, or why it has none."""
    try:
        obj = loads_line(raw)
    except orjson.JSONDecodeError as exc:
        return f"not JSON ({exc})"
    except CodecError as exc:
        return str(exc)
    if not isinstance(obj, dict):
        return f"a JSON {type(obj).__name__}, not an object with string 'type' and 'id'"
    kind, entry_id, parent_id = obj.get("type"), obj.get("id"), obj.get("parentId")
    if not isinstance(kind, str) or not isinstance(entry_id, str):
        if kind == "session":
            return "a session header after line 1; skipped"
        return "a JSON object without string 'type' and 'id'"
    if parent_id is not None and not isinstance(parent_id, str):
        return "'parentId' is neither a string nor null"
    return kind, entry_id, parent_id
