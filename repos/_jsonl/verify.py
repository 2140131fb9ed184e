"""Checking, repairing and migrating one session file (``harness sessions verify | repair |
migrate``).

:func:`analyze` reads a file's bytes (never writing) and finds every problem reading would meet
or hide, each as a :class:`Finding` with its code, 1-based line, byte offset and message, and
plans the fix. :func:`verify_file` is that analysis under a shared lock; :func:`repair_file` and
:func:`migrate_file` rewrite a file atomically under the exclusive lock every appender takes, so
no append lands on the old inode unseen (appenders then find the file replaced and raise
``SessionGoneError``).

Rules, chosen to match what recover-mode reading (``repos._index``) makes of a file:

* A line must be a JSON object with a string ``type``, and in v2/v3 files a string ``id`` and a
  string or null ``parentId`` (``corrupt_line``); its body must decode as an entry
  (``corrupt_body``); blank lines, a second header (``misplaced_header``), a later line reusing an
  id (``duplicate_id``) and an unterminated last line (``torn_tail``) are problems. Repair drops
  them (a torn fragment stays only in the backup).
* A parent must be an earlier, kept entry. One not in the file (``dangling_parent``), on a later
  line (``forward_parent``), or closing a loop of parent links (``parent_cycle``, reported at
  the loop's first line) is re-attached to the previous kept entry in file order, as reading
  does. A child of a line dropped for its body re-attaches to the kept entry before that line
  (``parent_removed``), as reading does when it drops such a line.
* ``leaf`` and ``label`` entries must target an earlier kept entry (``leaf_target_missing``,
  ``label_target_missing``); repair removes them.
* Tool pairs: a ``toolResult`` whose ``toolCallId`` no ``toolCall`` on its path holds is a
  problem (``tool_result_orphan``): repair removes it, its children re-attached to its parent.
  A ``toolCall`` with no result below it (``tool_call_unanswered``) is **info**: pi's own files
  hold aborted turns like that, the context builder answers them with a synthetic error, and it
  does not fail verification.
* Header problems (``no_header``, ``header_not_first``, ``bad_header``,
  ``unsupported_version``) make the file unreadable; nothing is planned for them and repair
  refuses.

Entries removed by repair take their children along to a kept entry, so the repaired file has
every other line byte for byte, except the ``parentId`` of a re-attached child.
"""

from __future__ import annotations

import fcntl
import os
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import orjson
from attrs import evolve, field, frozen

from hooks import AssistantMessage, ToolCall, ToolResultMessage

from .._codec import (
    CodecError,
    decode_entry,
    decode_header,
    dumps_line,
    encode_entry,
    encode_header,
    loads_line,
    v1_entry_id,
)
from .._entries import CURRENT_VERSION, LabelEntry, LeafEntry, MessageEntry
from .._errors import SessionError, SessionGoneError, SessionNotFoundError, StorageError
from .._files import open_regular
from .._session import Diagnostic
from .._tree import EAGER_TYPES
from .atomic import publish_atomically
from .storage import open_session

__all__ = [
    "Analysis",
    "Finding",
    "MigrateResult",
    "RepairResult",
    "UnrepairableSessionError",
    "analyze",
    "migrate_file",
    "repair_file",
    "verify_file",
]

Severity = Literal["problem", "info"]
Progress = Callable[[int], None]
"""Called now and then with the number of bytes analysed so far."""

PROBLEM_CODES = frozenset(
    {
        "torn_tail",
        "blank_line",
        "corrupt_line",
        "corrupt_body",
        "misplaced_header",
        "duplicate_id",
        "dangling_parent",
        "forward_parent",
        "parent_cycle",
        "parent_removed",
        "leaf_target_missing",
        "label_target_missing",
        "tool_result_orphan",
        "no_header",
        "header_not_first",
        "bad_header",
        "unsupported_version",
    }
)
INFO_CODES = frozenset({"tool_call_unanswered"})

_HEAD = re.compile(
    rb'\{"type":"[A-Za-z0-9_]+","id":"[^"\\]{1,128}",'
    rb'"parentId":(null|"[^"\\]{1,128}")'
)
_PROGRESS_EVERY = 2000  # lines
_LOOP_SHOWN = 8  # ids of a parent loop named in its finding


class UnrepairableSessionError(SessionError):
    """The file cannot be repaired automatically (no readable header, a future version, a v1
    file whose damage would shift its line-derived ids), or a repair would not have come out
    clean; the file is left as it was."""

    code = "unrepairable"


@frozen(kw_only=True)
class Finding:
    """One thing wrong (``severity="problem"``) or worth knowing (``"info"``) in a file.

    ``line`` is 1-based (the header is line 1); ``offset`` is that line's first byte. ``fix``
    says what :func:`repair_file` does about it (None: nothing, e.g. info or a header problem).
    """

    code: str
    message: str
    line: int
    offset: int
    severity: Severity = "problem"
    fix: str | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "code": self.code,
            "severity": self.severity,
            "line": self.line,
            "offset": self.offset,
            "message": self.message,
            "fix": self.fix,
        }


_KEEP = object()


@frozen
class _Out:
    raw: bytes
    parent: object  # _KEEP, or the new parentId (str | None)


@frozen(kw_only=True)
class Analysis:
    """What :func:`analyze` found in a file and how a repair would rewrite it."""

    path: Path
    size: int
    version: int | None
    """The header's version; None when there is no readable header."""
    entries: int
    """Entries a repaired file would hold (for a clean file: every entry)."""
    findings: tuple[Finding, ...]
    readable: bool
    """There is a valid header on line 1 (else repair refuses)."""
    header: bytes = b""
    out: tuple[_Out, ...] = field(default=(), repr=False)

    @property
    def problems(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "problem")

    @property
    def ok(self) -> bool:
        return not self.problems

    def repaired_lines(self) -> list[bytes]:
        """The repaired file, line by line (each newline-terminated)."""
        lines = [self.header + b"\n"]
        lines.extend(_with_parent(o.raw, o.parent) + b"\n" for o in self.out)
        return lines

    def as_json(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "version": self.version,
            "entries": self.entries,
            "ok": self.ok,
            "problems": len(self.problems),
            "findings": [f.as_json() for f in self.findings],
        }


@frozen(kw_only=True)
class RepairResult:
    """What :func:`repair_file` did: the findings it fixed (``changes``), the backup (None for
    a dry run or a clean file) and the findings left (info only)."""

    path: Path
    changes: tuple[Finding, ...]
    backup: Path | None
    remaining: tuple[Finding, ...]
    entries: int


@frozen(kw_only=True)
class MigrateResult:
    """What :func:`migrate_file` did: ``from_version`` (3: nothing), the backup, and what
    reading the old file handled on the way (lines it skipped, orphans it re-attached)."""

    path: Path
    from_version: int
    backup: Path | None
    entries: int
    notes: tuple[Diagnostic, ...]


# --- analysis -------------------------------------------------------------------------------


@frozen
class _Line:
    number: int
    offset: int
    raw: bytes


def _split(data: bytes, end: int) -> Iterator[_Line]:
    pos, number = 0, 1
    while pos < end:
        nl = data.index(b"\n", pos)
        yield _Line(number, pos, data[pos:nl])
        pos, number = nl + 1, number + 1


class _Node:
    """A line with a valid head, in file order."""

    __slots__ = (
        "bad_body",
        "calls",
        "children",
        "kind",
        "line",
        "parent",
        "raw_parent",
        "result_for",
        "target",
    )

    def __init__(self, line: _Line, kind: str, raw_parent: str | None) -> None:
        self.line = line
        self.kind = kind
        self.raw_parent = raw_parent
        self.parent: str | None = raw_parent  # where it ends up
        self.bad_body: str | None = None
        self.target: str | None = None  # leaf / label target
        self.calls: tuple[str, ...] = ()  # assistant toolCall ids
        self.result_for: str | None = None  # toolResult toolCallId
        self.children: list[str] = []


def analyze(path: Path, data: bytes, *, progress: Progress | None = None) -> Analysis:
    """Find every problem in ``data`` (the bytes of the file ``path``) and plan its repair.

    Pure: reads nothing but ``data`` and writes nothing.
    """
    return _Analyzer(path, data, progress).run()


class _Analyzer:
    def __init__(self, path: Path, data: bytes, progress: Progress | None) -> None:
        self.path = path
        self.data = data
        self.progress = progress
        self.findings: list[Finding] = []
        self.raw_parents: dict[str, str | None] = {}
        self.loops: dict[str, list[str]] = {}
        """Each loop of raw parent links, by the id on its first line (see :meth:`find_loops`)."""

    def find(
        self,
        code: str,
        line: _Line,
        message: str,
        fix: str | None = None,
        severity: Severity = "problem",
    ) -> None:
        self.findings.append(
            Finding(
                code=code,
                message=message,
                line=line.number,
                offset=line.offset,
                severity=severity,
                fix=fix,
            )
        )

    def result(
        self,
        version: int | None,
        *,
        header: bytes = b"",
        out: tuple[_Out, ...] | None = None,
    ) -> Analysis:
        self.findings.sort(key=lambda f: (f.line, f.severity == "info"))
        return Analysis(
            path=self.path,
            size=len(self.data),
            version=version,
            entries=len(out) if out is not None else 0,
            findings=tuple(self.findings),
            readable=out is not None,
            header=header,
            out=out or (),
        )

    def run(self) -> Analysis:
        data = self.data
        end = data.rfind(b"\n") + 1
        if end < len(data):
            torn = _Line(data.count(b"\n", 0, end) + 1, end, data[end:])
            self.find(
                "torn_tail",
                torn,
                f"unterminated last line ({len(data) - end} bytes); reading ignores it",
                "dropped (kept in the backup only)",
            )
        lines = _split(data, end)
        first = next(lines, None)
        header, version = self.header(first, end)
        if first is None or header is None or version is None:
            return self.result(version)
        return self.entries(first.raw, version, lines)

    def header(self, first: _Line | None, end: int) -> tuple[object | None, int | None]:
        line1 = _Line(1, 0, first.raw if first is not None else b"")
        if first is None:
            self.find("no_header", line1, "no session header (empty file or torn first line)")
            return None, None
        try:
            obj = loads_line(first.raw)
        except (orjson.JSONDecodeError, CodecError):
            obj = None
        if not isinstance(obj, dict) or obj.get("type") != "session":
            at = self.data.find(b'{"type":"session"', 0, end)
            if at > 0:
                where = self.data.count(b"\n", 0, at) + 1
                self.find(
                    "header_not_first",
                    line1,
                    f"line 1 is not a session header; one is on line {where} (byte {at})",
                )
            else:
                self.find("no_header", line1, "line 1 is not a session header")
            return None, None
        version = obj.get("version", 1)
        if type(version) is int and version > CURRENT_VERSION:
            self.find(
                "unsupported_version",
                line1,
                f"session version {version} is newer than this reader (supported: 1, 2, 3)",
            )
            return None, None
        try:
            decoded = decode_header(obj)
        except CodecError as exc:
            self.find("bad_header", line1, f"bad header: {exc}")
            return None, None
        return decoded, decoded.version

    def entries(self, header: bytes, version: int, lines: Iterator[_Line]) -> Analysis:
        v1 = version < 2
        nodes: dict[str, _Node] = {}  # every valid head, first occurrence
        order: list[str] = []  # kept entries, file order
        kept: set[str] = set()
        drop_parent: dict[str, str | None] = {}  # bad-body id -> kept entry before it
        head_line: dict[str, int] = {}
        v1_taken: set[str] = set()
        v1_ids: dict[int, str] = {}
        blank: list[_Line] = []
        previous: str | None = None
        parsed: list[tuple[_Line, dict[str, object]]] = []

        def flush_blanks() -> None:
            if blank:
                first, count = blank[0], len(blank)
                span = (
                    f"line {first.number}"
                    if count == 1
                    else (f"lines {first.number}-{first.number + count - 1}")
                )
                self.find(
                    "blank_line",
                    first,
                    f"{count} blank line{'s' if count > 1 else ''} ({span})",
                    "removed",
                )
                blank.clear()

        # Pass 1: parse every line; note every id that has a valid head (for forward parents).
        for index, line in enumerate(lines):
            if self.progress is not None and index % _PROGRESS_EVERY == 0:
                self.progress(line.offset)
            if not line.raw.strip():
                blank.append(line)
                continue
            flush_blanks()
            try:
                obj = loads_line(line.raw)
            except (orjson.JSONDecodeError, CodecError) as exc:
                why = f"not JSON ({exc})" if isinstance(exc, orjson.JSONDecodeError) else str(exc)
                self.find("corrupt_line", line, why, "removed")
                continue
            if not isinstance(obj, dict):
                self.find(
                    "corrupt_line",
                    line,
                    f"a JSON {type(obj).__name__}, not an object with 'type' and 'id'",
                    "removed",
                )
                continue
            parsed.append((line, obj))
            if (
                not v1
                and isinstance(obj.get("id"), str)
                and obj.get("type") != "session"
                and obj["id"] not in head_line
            ):
                head_line[obj["id"]] = line.number
                parent = obj.get("parentId")
                self.raw_parents[obj["id"]] = parent if isinstance(parent, str) else None
        flush_blanks()
        self.find_loops(head_line)

        # Pass 2, file order: heads, duplicates, bodies, parents, leaf and label targets.
        for line, obj in parsed:
            kind = obj.get("type")
            if v1:
                if not isinstance(kind, str):
                    self.find(
                        "corrupt_line", line, "a JSON object without a string 'type'", "removed"
                    )
                    continue
                entry_id = v1_entry_id(line.number - 1, line.raw, v1_taken)
                v1_ids[line.number - 1] = entry_id
                raw_parent: str | None = previous
            else:
                entry_id_obj, parent_obj = obj.get("id"), obj.get("parentId")
                if kind == "session":
                    self.find("misplaced_header", line, "a session header after line 1", "removed")
                    continue
                if not isinstance(kind, str) or not isinstance(entry_id_obj, str):
                    self.find(
                        "corrupt_line",
                        line,
                        "a JSON object without string 'type' and 'id'",
                        "removed",
                    )
                    continue
                if parent_obj is not None and not isinstance(parent_obj, str):
                    self.find(
                        "corrupt_line", line, "'parentId' is neither a string nor null", "removed"
                    )
                    continue
                entry_id, raw_parent = entry_id_obj, parent_obj
            if kind == "session":
                self.find("misplaced_header", line, "a session header after line 1", "removed")
                continue
            if entry_id in nodes:
                first = nodes[entry_id].line
                self.find(
                    "duplicate_id",
                    line,
                    f"id {entry_id!r} already used on line {first.number}",
                    "removed (the first line with this id is kept)",
                )
                continue
            node = _Node(line, kind, raw_parent)
            try:
                entry = decode_entry(
                    obj,
                    entry_id=entry_id if v1 else None,
                    parent_id=raw_parent if v1 else None,
                    line_id=v1_ids.get if v1 else None,
                )
            except (CodecError, TypeError, ValueError) as exc:
                node.bad_body = str(exc) or type(exc).__name__
            else:
                if isinstance(entry, LeafEntry | LabelEntry):
                    node.target = entry.target_id
                elif isinstance(entry, MessageEntry):
                    message = entry.message
                    if isinstance(message, AssistantMessage):
                        node.calls = tuple(b.id for b in message.content if isinstance(b, ToolCall))
                    elif isinstance(message, ToolResultMessage):
                        node.result_for = message.tool_call_id
            if node.bad_body is not None:
                self.find(
                    "corrupt_body",
                    line,
                    f"entry {entry_id!r}: {node.bad_body}",
                    "removed; its children re-attached to the entry before it",
                )
                if kind not in EAGER_TYPES:  # reading indexes it, then drops it when decoded
                    nodes[entry_id] = node
                    drop_parent[entry_id] = previous
                continue
            nodes[entry_id] = node
            # Where reading puts it.
            if not v1 and raw_parent is not None and raw_parent not in kept:
                node.parent = self.reattach(node, entry_id, head_line, drop_parent, previous)
            if kind in ("leaf", "label") and node.target is not None and node.target not in kept:
                where = head_line.get(node.target)
                why = (
                    "is not in the file"
                    if where is None
                    else f"is on line {where}, which is removed"
                    if where < line.number
                    else f"is on a later line ({where})"
                )
                self.find(
                    f"{kind}_target_missing",
                    line,
                    f"{kind} target {node.target!r} {why}; reading ignores the {kind}",
                    "removed",
                )
                node.bad_body = "target missing"  # removed; children go to its parent
                drop_parent[entry_id] = node.parent
                continue
            kept.add(entry_id)
            order.append(entry_id)
            previous = entry_id
        if self.progress is not None:
            self.progress(len(self.data))

        removed = self.tool_pairs(nodes, order, v1)
        out = tuple(
            _Out(n.line.raw, _KEEP if v1 or n.parent == n.raw_parent else n.parent)
            for n in (nodes[i] for i in order if i not in removed)
        )
        return self.result(version, header=header, out=out)

    def reattach(
        self,
        node: _Node,
        entry_id: str,
        head_line: dict[str, int],
        drop_parent: dict[str, str | None],
        previous: str | None,
    ) -> str | None:
        """The parent reading gives an entry whose own parent is not an earlier kept entry,
        with the finding that says so."""
        line, parent = node.line, node.raw_parent
        assert parent is not None
        onto = f"re-attached to {previous!r}" if previous is not None else "made a root"
        if parent in drop_parent:
            before = drop_parent[parent]
            self.find(
                "parent_removed",
                line,
                f"parent {parent!r} (line {head_line[parent]}) is removed",
                f"re-attached to {before!r}" if before is not None else "made a root",
            )
            return before
        where = head_line.get(parent)
        if where is None:
            self.find(
                "dangling_parent",
                line,
                f"parent {parent!r} not found; reading attaches the entry to the previous one",
                onto,
            )
        elif where < line.number:
            # Its line had a valid id but was removed (a bad parentId, a damaged leaf/label).
            self.find(
                "parent_removed",
                line,
                f"parent {parent!r} (line {where}) is removed",
                onto,
            )
        elif (loop := self.loops.get(entry_id)) is not None:
            shown = [repr(i) for i in loop[:_LOOP_SHOWN]]
            if len(loop) > _LOOP_SHOWN:
                shown.append("...")
            self.find(
                "parent_cycle",
                line,
                f"parent links loop through {len(loop)} "
                f"{'entry' if len(loop) == 1 else 'entries'}: "
                f"{' -> '.join([*shown, repr(loop[0])])}",
                onto,
            )
        else:
            self.find(
                "forward_parent",
                line,
                f"parent {parent!r} is on a later line ({where}); reading attaches the entry "
                "to the previous one",
                onto,
            )
        return previous

    def find_loops(self, head_line: dict[str, int]) -> None:
        """Every loop of raw parent links, each once, in one pass over them (each link is
        followed once: a file that is one long loop costs as much as a chain). A loop is
        reported at its first line, the only one of its entries whose parent is not earlier;
        the others on it have a parent on a later line (``forward_parent``)."""
        raw = self.raw_parents
        done: set[str] = set()
        for start in raw:
            walk: dict[str, None] = {}  # this walk's ids, in order (a set that keeps order)
            current: str | None = start
            while current is not None and current in raw and current not in done:
                if current in walk:
                    ids = list(walk)
                    loop = ids[ids.index(current) :]
                    first = min(range(len(loop)), key=lambda k: head_line[loop[k]])
                    self.loops[loop[first]] = loop[first:] + loop[:first]
                    break
                walk[current] = None
                current = raw[current]
            done.update(walk)

    def tool_pairs(self, nodes: dict[str, _Node], order: list[str], v1: bool) -> set[str]:
        """Check tool calls and results on the tree reading gives; return the ids repair
        removes here (orphaned results, then leaf/label entries targeting them).

        Linear in the entries (a bisection per tool call): one walk of the tree counts the
        call ids on the path down to each entry, so a result knows at once whether a call
        above it holds its id, and numbers the entries in walk order, so a call's subtree is
        a range in which its results are looked up."""
        for entry_id in order:
            node = nodes[entry_id]
            if node.parent is not None:
                nodes[node.parent].children.append(entry_id)
        # Euler tour: a is an ancestor of b iff enter[a] < enter[b] <= leave[a].
        enter: dict[str, int] = {}
        leave: dict[str, int] = {}
        on_path: dict[str, int] = {}  # call id -> calls holding it above the entry visited
        results_at: dict[str, list[int]] = {}  # call id -> enter times of its results, rising
        orphans: set[str] = set()
        clock = 0
        for root in (i for i in order if nodes[i].parent is None):
            stack: list[tuple[str, bool]] = [(root, False)]
            while stack:
                current, done = stack.pop()
                node = nodes[current]
                if done:
                    leave[current] = clock
                    for call in node.calls:
                        on_path[call] -= 1
                    continue
                clock += 1
                enter[current] = clock
                answers = node.result_for
                if answers is not None:
                    results_at.setdefault(answers, []).append(clock)
                    if not on_path.get(answers):
                        orphans.add(current)
                for call in node.calls:
                    on_path[call] = on_path.get(call, 0) + 1
                stack.append((current, True))
                stack.extend((c, False) for c in reversed(node.children))

        def answered(entry_id: str, call: str) -> bool:
            times = results_at.get(call, ())
            k = bisect_right(times, enter[entry_id])
            return k < len(times) and times[k] <= leave[entry_id]

        removed: set[str] = set()
        for entry_id in order:
            node = nodes[entry_id]
            for call in node.calls:
                if not answered(entry_id, call):
                    self.find(
                        "tool_call_unanswered",
                        node.line,
                        f"tool call {call!r} has no result below it (an aborted turn?); the "
                        "context gets a synthetic error result",
                        severity="info",
                    )
            if entry_id in orphans:
                self.find(
                    "tool_result_orphan",
                    node.line,
                    f"tool result for {node.result_for!r}: no tool call with this id on its "
                    "path; the context leaves it out",
                    "removed; its children re-attached to its parent",
                )
                removed.add(entry_id)
        # Leaf and label entries aiming at a removed result go too, and those aiming at them
        # (a label may aim at a leaf entry): followed target by target, each once.
        aimed: dict[str, list[str]] = {}
        for entry_id in order:
            node = nodes[entry_id]
            if node.kind in ("leaf", "label") and node.target is not None:
                aimed.setdefault(node.target, []).append(entry_id)
        pending = sorted(removed, key=lambda i: nodes[i].line.number)
        while pending:
            target = pending.pop()
            for entry_id in aimed.get(target, ()):
                if entry_id in removed:
                    continue
                node = nodes[entry_id]
                self.find(
                    f"{node.kind}_target_missing",
                    node.line,
                    f"{node.kind} target {node.target!r} is a removed tool result",
                    "removed",
                )
                removed.add(entry_id)
                pending.append(entry_id)
        if removed and not v1:
            # Parents come before their children in ``order``: each parent is settled already.
            for entry_id in order:
                node = nodes[entry_id]
                if node.parent is not None and node.parent in removed:
                    node.parent = nodes[node.parent].parent
        return removed


def _with_parent(raw: bytes, parent: object) -> bytes:
    if parent is _KEEP:
        return raw
    value = orjson.dumps(parent)
    m = _HEAD.match(raw)
    if m is not None:
        return raw[: m.start(1)] + value + raw[m.end(1) :]
    obj = loads_line(raw)
    obj["parentId"] = parent
    return orjson.dumps(obj)


# --- files ------------------------------------------------------------------------------------


def verify_file(path: Path, *, progress: Progress | None = None) -> Analysis:
    """Analyse the file at ``path`` without writing to it (under a shared lock, so no line one
    of our writers is appending is seen half-written).

    Raises:
        SessionNotFoundError: no such file, or not a regular file (a folder, a FIFO or a
            device is refused without blocking or reading).
        StorageError: it cannot be read.
    """
    with _locked(path, fcntl.LOCK_SH) as fd:
        data = _read_all(path, fd)
    return analyze(path, data, progress=progress)


def repair_file(
    path: Path, *, dry_run: bool = False, progress: Progress | None = None
) -> RepairResult:
    """Rewrite ``path`` without its problems (see the module doc), atomically, keeping the
    original as ``<file>.bak`` (``.bak.1``, ``.bak.2`` ... if taken). A file with no problems
    (info findings aside) is left untouched. Holds the append lock throughout.

    Raises:
        UnrepairableSessionError: no readable header, a newer version, a damaged v1 file (run
            :func:`migrate_file` first), or a repair that would not verify clean.
        SessionNotFoundError, StorageError: as for :func:`verify_file`.
    """
    with _locked(path, fcntl.LOCK_EX) as fd:
        found = analyze(path, _read_all(path, fd), progress=progress)
        changes = found.problems
        info = tuple(f for f in found.findings if f.severity == "info")
        if not changes:
            return RepairResult(
                path=path, changes=(), backup=None, remaining=info, entries=found.entries
            )
        if not found.readable:
            codes = ", ".join(sorted({f.code for f in changes}))
            raise UnrepairableSessionError(
                f"{path}: cannot repair a file without a readable header ({codes})"
            )
        if (
            found.version is not None
            and found.version < 2
            and any(f.code != "torn_tail" for f in changes)
        ):
            raise UnrepairableSessionError(
                f"{path}: a v1 file's entry ids come from line positions, so removing lines "
                "would change them; run `harness sessions migrate` first, then repair"
            )
        lines = found.repaired_lines()
        if dry_run:
            return RepairResult(
                path=path, changes=changes, backup=None, remaining=info, entries=found.entries
            )
        after: list[Analysis] = []

        def check(tmp: Path) -> None:
            result = analyze(path, tmp.read_bytes())
            if result.problems:
                left = "; ".join(f"line {f.line}: {f.code}" for f in result.problems[:5])
                raise UnrepairableSessionError(f"{path}: the repaired copy still has: {left}")
            after.append(result)

        backup = _replace(path, lines, ".bak", check)
        remaining = tuple(f for f in after[0].findings if f.severity == "info")
        return RepairResult(
            path=path,
            changes=changes,
            backup=backup,
            remaining=remaining,
            entries=after[0].entries,
        )


def migrate_file(path: Path) -> MigrateResult:
    """Rewrite a v1/v2 file as v3 with the ids a read gives (:func:`repos.open_session`, then
    every entry re-encoded), atomically, keeping the original as ``<file>.v<N>.bak``. A v3 file
    is left untouched (``from_version == 3``). Holds the append lock throughout.

    What reading handles on the way (a skipped bad line, a re-attached orphan, a torn tail) is
    returned in ``notes``: those lines are not in the migrated file (they are in the backup).

    Raises:
        CorruptSessionError: no valid header.
        SessionNotFoundError, StorageError: as for :func:`verify_file`.
    """
    with _locked(path, fcntl.LOCK_EX):
        with open_session(path) as session:
            header = session.header
            if header.version >= CURRENT_VERSION:
                return MigrateResult(
                    path=path,
                    from_version=header.version,
                    backup=None,
                    entries=len(session),
                    notes=(),
                )
            lines = [dumps_line(encode_header(evolve(header, version=CURRENT_VERSION)))]
            lines.extend(dumps_line(encode_entry(e)) for e in session.entries())
            notes = session.diagnostics
        backup = _replace(path, lines, f".v{header.version}.bak", None)
        return MigrateResult(
            path=path,
            from_version=header.version,
            backup=backup,
            entries=len(lines) - 1,
            notes=notes,
        )


def _replace(
    path: Path, lines: Sequence[bytes], suffix: str, check: Callable[[Path], object] | None
) -> Path:
    """Keep the current file as a new backup (a hard link: the same inode, so appenders still
    holding it see it replaced), then publish ``lines`` in its place. On failure the backup
    name is removed again and the file is untouched."""
    backup = _link_backup(path, suffix)
    try:
        publish_atomically(path, lines, exclusive=False, check=check)
    except BaseException as exc:
        backup.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, SessionError):
            raise StorageError.wrap(path, exc, "rewriting") from exc
        raise
    return backup


def _link_backup(path: Path, suffix: str) -> Path:
    """Hard-link ``path`` to ``<path><suffix>``, else ``<suffix>.1``, ``.2`` ...: never
    overwrites an existing backup."""
    for n in range(10_000):
        backup = path.with_name(path.name + suffix + (f".{n}" if n else ""))
        try:
            os.link(path, backup)
        except FileExistsError:
            continue
        except OSError as exc:
            raise StorageError.wrap(path, exc, "keeping a backup") from exc
        return backup
    raise StorageError(path, f"too many backups ({path.name}{suffix}.*)")


@contextmanager
def _locked(path: Path, how: int) -> Iterator[int]:
    """Open ``path`` and hold ``flock(how)`` on it, making sure the lock is on the file the
    name leads to now (a writer may have replaced it while we waited)."""
    for _ in range(5):
        try:
            # Never blocks: a FIFO or a device (which would read for ever) is refused.
            fd = open_regular(path)
        except (FileNotFoundError, NotADirectoryError):
            raise SessionNotFoundError(str(path)) from None
        except OSError as exc:
            raise StorageError.wrap(path, exc, "opening") from exc
        try:
            try:
                fcntl.flock(fd, how)
                opened, named = os.fstat(fd), os.stat(path)
            except FileNotFoundError:
                raise SessionGoneError(path, "deleted") from None
            except OSError as exc:
                raise StorageError.wrap(path, exc, "locking") from exc
            if (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino):
                yield fd
                return
        finally:
            os.close(fd)  # releases the lock
    raise SessionGoneError(path, "replaced again and again while waiting for its lock")


def _read_all(path: Path, fd: int) -> bytes:
    try:
        size = os.fstat(fd).st_size
        chunks: list[bytes] = []
        offset = 0
        while True:
            chunk = os.pread(fd, max(size - offset, 1 << 20), offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise StorageError.wrap(path, exc, "reading") from exc
