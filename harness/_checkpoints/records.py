"""Checkpoint and rewind entries: their shape, reading them back (untrusted), and the state of
the workspace they imply at any entry of the session.

A session gets one ``custom`` entry per change to the workspace (pi's reader skips custom
entries; they never reach the model):

- ``harness.checkpoint``: one tool call changed files. ``{"toolCallId", "entryId" (the entry
  holding the call), "toolName", "scan" ("path" | "git" | "stat"), "changes", "missed",
  "complete"}``.
- ``harness.rewind``: a rewind changed files. ``{"targetId", "fromLeafId", "conversation",
  "changes", "skipped"}``. A rewind writes two: one before any file, with ``"state":
  "started"`` and the changes it plans (their ``before`` contents already stored), and one
  once done, with ``"intentId"`` naming the first and the changes it made. A started entry
  that a later one names is not read; one that none names (the process was killed midway)
  counts as done, so a rewind to the entry it started from gives back what it overwrote, and
  a file it never reached, still as it found it, is not taken for a change made outside the
  session.

``changes`` is a list of ``{"path", "before", "after"}``, each state ``null`` (no file),
``{"sha256", "mode", "size"}`` (the content's blob in the store, its permission bits, its size
in bytes), or ``{"ref", "mode", "size"}`` for a content stored after the entry was written
(``write``/``edit`` store theirs off the call's path): ``ref`` is a random 64-hex name the
store maps to the blob once it is stored (``CheckpointStore.resolve``); until then, or if the
process ended first, the content is missing, and a rewind that needs it says so. ``path`` is
relative to the working folder (``/``-separated, normalised), or absolute for a file outside
it that the supervisor approved.

The state of the workspace at an entry is the state when that entry was written: for each path
some entry changed, the ``after`` of the last change written before it (in file order), or,
when there is none, the ``before`` of the first one written after it. Between two changes of a
file, from the first user message after the earlier one on, it is the later change's
``before`` instead: the file as that change found it, so an edit made outside the session
between two turns (the user's own) is the state at the next prompt and the entries after it,
while the entries before that prompt keep what the session left. A rewind is itself a
change, so rewinding to the entry before a rewind undoes it: the files at the entry a rewind
started from (its ``fromLeafId``, the leaf then) are, for each path it changed, its ``before``,
the file as the rewind found it, so undoing a forced rewind gives back what it overwrote (the
last rewind from that entry counts, in file order); a file it found already as at its target
but not as the session left it (a killed rewind wrote it) has the session's state as its
``before``, so the undo puts that back.

Session files are untrusted (docs/security.md): an entry is read only if every field has the
shape above; a path must be normalised, hold no NUL and no ``..``; a blob name must be 64 hex
characters. What does not is reported, never followed.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from attrs import frozen

from hooks import JSONValue
from repos import CustomEntry, MessageEntry, Session

from .store import CheckpointStore, is_digest

__all__ = [
    "CHECKPOINT_ENTRY",
    "MAX_CHANGES",
    "REWIND_ENTRY",
    "Change",
    "FileState",
    "Missed",
    "Pending",
    "Record",
    "Timeline",
    "checkpoint_data",
    "conversation_landing",
    "edited_paths",
    "has_records",
    "read_records",
    "referenced_blobs",
    "resolved",
    "rewind_data",
    "state_from_json",
    "valid_path",
]

CHECKPOINT_ENTRY: Final = "harness.checkpoint"
"""``customType`` of the entry a tool call's changes to the workspace write."""
REWIND_ENTRY: Final = "harness.rewind"
"""``customType`` of the entry a rewind writes."""
_MAX_PATH: Final = 4096
MAX_CHANGES: Final = 10_000
"""The most changes one entry may hold, and the most distinct paths a session's entries may
name (a scan's cap): past either, the entry is not read and says why, so a hand-made session
file cannot make a rewind judge 100,000 paths (issue 26 attack, finding 2)."""


@frozen
class FileState:
    """A regular file's content (``digest``, its blob), permission bits and size in bytes."""

    digest: str
    mode: int
    size: int

    def to_json(self) -> dict[str, JSONValue]:
        return {"sha256": self.digest, "mode": self.mode, "size": self.size}

    @classmethod
    def from_json(cls, value: object) -> FileState | None:
        """The state ``value`` describes; raises ValueError when it has another shape."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ValueError("a file state is an object or null")
        digest, mode, size = value.get("sha256"), value.get("mode"), value.get("size")
        if not isinstance(digest, str) or not is_digest(digest):
            raise ValueError("sha256 is not 64 hex characters")
        if type(mode) is not int or not 0 <= mode <= 0o7777:
            raise ValueError("mode is not permission bits")
        if type(size) is not int or size < 0:
            raise ValueError("size is not a byte count")
        return cls(digest, mode, size)


@frozen
class Pending:
    """A regular file whose content was handed to the store after its entry was written:
    ``ref`` (64 hex) names it until :meth:`CheckpointStore.resolve` gives its blob; permission
    bits and size in bytes as :class:`FileState`'s."""

    ref: str
    mode: int
    size: int

    def to_json(self) -> dict[str, JSONValue]:
        return {"ref": self.ref, "mode": self.mode, "size": self.size}


State = FileState | Pending | None
"""A path's state: a file (stored, or pending), or None for no file."""


def state_from_json(value: object) -> State:
    """The state ``value`` describes (a :class:`FileState`, a :class:`Pending` when it has a
    ``ref``, None); raises ValueError when it has another shape."""
    if isinstance(value, Mapping) and "ref" in value:
        ref, mode, size = value.get("ref"), value.get("mode"), value.get("size")
        if not isinstance(ref, str) or not is_digest(ref):
            raise ValueError("ref is not 64 hex characters")
        if type(mode) is not int or not 0 <= mode <= 0o7777:
            raise ValueError("mode is not permission bits")
        if type(size) is not int or size < 0:
            raise ValueError("size is not a byte count")
        return Pending(ref, mode, size)
    return FileState.from_json(value)


@frozen
class Change:
    """``path`` went from ``before`` to ``after``."""

    path: str
    before: State
    after: State

    def to_json(self) -> dict[str, JSONValue]:
        return {
            "path": self.path,
            "before": None if self.before is None else self.before.to_json(),
            "after": None if self.after is None else self.after.to_json(),
        }


@frozen
class Missed:
    """A change a checkpoint could not record (``reason`` says why): a rewind cannot undo it."""

    path: str
    reason: str

    def to_json(self) -> dict[str, JSONValue]:
        return {"path": self.path, "reason": self.reason}


@frozen
class Record:
    """The changes of one checkpoint or rewind entry, at ``index`` in the session's file
    order; for a rewind, ``from_leaf_id`` is the leaf it started from (an entry written before
    it; None when the entry names none, or one that is not so)."""

    index: int
    entry_id: str
    changes: tuple[Change, ...]
    from_leaf_id: str | None = None
    missed: tuple[Missed, ...] = ()
    """A checkpoint's changes it could not record (a rewind cannot undo them)."""
    complete: bool = True
    """False when a checkpoint's scan did not see everything (past its cap)."""
    started_id: str | None = None
    """A rewind's entry written before it wrote any file: a completed rewind's undo starts
    from there as from ``from_leaf_id``."""
    unfinished: bool = False
    """A rewind's started entry with no completed one after it (the process was killed): its
    changes are the planned ones, some of which may not have been written."""


def valid_path(path: object) -> bool:
    """True for a path a change may name: relative to the working folder and normalised
    (no ``.``, ``..`` or empty component), or absolute and normalised; never a NUL."""
    if not isinstance(path, str) or not path or len(path) > _MAX_PATH or "\0" in path:
        return False
    if path.startswith("/"):
        return path != "/" and not path.startswith("//") and posixpath.normpath(path) == path
    return all(part not in ("", ".", "..") for part in path.split("/"))


def checkpoint_data(
    *,
    tool_call_id: str,
    entry_id: str | None,
    tool_name: str,
    scan: str,
    changes: Sequence[Change],
    missed: Sequence[Missed],
    complete: bool,
) -> dict[str, JSONValue]:
    """The data of a ``harness.checkpoint`` entry."""
    return {
        "toolCallId": tool_call_id,
        "entryId": entry_id,
        "toolName": tool_name,
        "scan": scan,
        "changes": [c.to_json() for c in changes],
        "missed": [m.to_json() for m in missed],
        "complete": complete,
    }


def rewind_data(
    *,
    target_id: str | None,
    from_leaf_id: str | None,
    conversation: bool,
    changes: Sequence[Change],
    skipped: Sequence[Missed],
    started: bool = False,
    intent_id: str | None = None,
) -> dict[str, JSONValue]:
    """The data of a ``harness.rewind`` entry: ``started`` for the one written before any file
    (the changes planned), ``intent_id`` naming it in the one written once done."""
    data: dict[str, JSONValue] = {
        "targetId": target_id,
        "fromLeafId": from_leaf_id,
        "conversation": conversation,
        "changes": [c.to_json() for c in changes],
        "skipped": [s.to_json() for s in skipped],
    }
    if started:
        data["state"] = "started"
    if intent_id is not None:
        data["intentId"] = intent_id
    return data


def _changes(data: Any) -> tuple[list[Change], list[str]]:
    """The valid changes in an entry's data, and what was wrong with the others."""
    raw = data.get("changes") if isinstance(data, Mapping) else None
    if not isinstance(raw, list):
        return [], ["no list of changes"]
    if len(raw) > MAX_CHANGES:
        return [], [f"{len(raw)} changes, more than {MAX_CHANGES}: not read"]
    changes, problems = [], []
    for number, item in enumerate(raw, 1):
        try:
            if not isinstance(item, Mapping):
                raise ValueError("not an object")
            path = item.get("path")
            if not isinstance(path, str) or not valid_path(path):
                raise ValueError("the path is not a normalised path")
            before = state_from_json(item.get("before"))
            changes.append(Change(path, before, state_from_json(item.get("after"))))
        except ValueError as exc:
            problems.append(f"change {number}: {exc}")
    return changes, problems


_MAX_REASON: Final = 1000


def _missed(data: Any) -> tuple[list[Missed], bool]:
    """A checkpoint entry's missed changes (those of a valid shape: a path with no NUL, a
    reason, each at most so long) and whether its scan was complete (only ``false`` says it
    was not)."""
    if not isinstance(data, Mapping):
        return [], True
    raw = data.get("missed")
    found = [
        Missed(item["path"], item["reason"])
        for item in (raw if isinstance(raw, list) else [])
        if isinstance(item, Mapping)
        and isinstance(item.get("path"), str)
        and 0 < len(item["path"]) <= _MAX_PATH
        and "\0" not in item["path"]
        and isinstance(item.get("reason"), str)
        and len(item["reason"]) <= _MAX_REASON
    ]
    return found, data.get("complete") is not False


def _checkpoint_entries(session: Session) -> Iterable[tuple[int, CustomEntry]]:
    ids = session.entry_ids()
    for index, (entry_id, kind) in enumerate(zip(ids, session.entry_types(ids), strict=True)):
        if kind != "custom":
            continue
        entry = session.get_entry(entry_id)
        if isinstance(entry, CustomEntry) and entry.custom_type in (
            CHECKPOINT_ENTRY,
            REWIND_ENTRY,
        ):
            yield index, entry


def conversation_landing(session: Session, entry_id: str | None) -> str | None:
    """Where the conversation's leaf goes for ``entry_id``: the entry itself, except for a
    checkpoint entry. That one is written between its tool call and the call's result, so a
    leaf there would show the model the call without its result (an interrupted call, which
    it was not): the leaf goes instead to the end of its tool batch, the last tool result of
    the run of checkpoint entries and tool results written after it (on the branch to the
    leaf where it forks, else the latest). A checkpoint with no result after it (the process
    ended first) is its own landing.

    Raises:
        EntryNotFoundError: no such entry.
    """
    if entry_id is None:
        return None
    entry = session.get_entry(entry_id)
    if not (isinstance(entry, CustomEntry) and entry.custom_type == CHECKPOINT_ENTRY):
        return entry_id
    branch = set(session.path_ids(session.leaf_id))
    landing = at = entry_id
    while batch := [c for c in session.get_children(at) if _in_tool_batch(c)]:
        at = next((c.id for c in batch if c.id in branch), batch[-1].id)
        if not isinstance(session.get_entry(at), CustomEntry):
            landing = at
    return landing


def _in_tool_batch(entry: object) -> bool:
    """Whether ``entry`` is one a tool batch writes after its call: a checkpoint, a result."""
    if isinstance(entry, CustomEntry):
        return entry.custom_type == CHECKPOINT_ENTRY
    return isinstance(entry, MessageEntry) and entry.message.role == "toolResult"


def has_records(session: Session) -> bool:
    """Whether ``session`` holds a checkpoint or rewind entry (it was recorded with
    checkpoints on)."""
    return next(iter(_checkpoint_entries(session)), None) is not None


def read_records(session: Session) -> tuple[list[Record], list[str]]:
    """Every checkpoint and rewind entry of ``session`` that changed or missed something
    (every branch, in file order), and a line for each change that was not read (its entry,
    its number and what was wrong)."""
    records: list[Record] = []
    problems: list[str] = []
    position: dict[str, int] | None = None
    paths: set[str] = set()
    entries = list(_checkpoint_entries(session))
    finished = _finished_intents(entries)
    for index, entry in entries:
        intent = _intent_of(entry)
        if intent is not None and entry.id in finished:
            continue  # its completed entry records what was done
        started_id = (
            entry.id
            if intent is not None
            else (entry.data.get("intentId") if isinstance(entry.data, Mapping) else None)
        )
        if not isinstance(started_id, str) or (intent is None and started_id not in finished):
            started_id = None
        changes, wrong = _changes(entry.data)
        problems.extend(f"entry {entry.id}: {p}" for p in wrong)
        new = {c.path for c in changes} - paths
        if len(paths) + len(new) > MAX_CHANGES:
            problems.append(
                f"entry {entry.id}: its paths pass the cap of {MAX_CHANGES} distinct paths a "
                "session's entries may name: not read"
            )
            continue
        paths |= new
        missed, complete = (
            _missed(entry.data) if entry.custom_type == CHECKPOINT_ENTRY else ([], True)
        )
        if not changes and not missed and complete:
            continue
        start = entry.data.get("fromLeafId") if isinstance(entry.data, Mapping) else None
        if entry.custom_type != REWIND_ENTRY or not isinstance(start, str):
            start = None
        else:
            if position is None:
                position = {entry_id: at for at, entry_id in enumerate(session.entry_ids())}
            # The leaf a rewind started from was written before it; an entry claiming a later
            # one (a hand-made file) is read as naming none.
            if position.get(start, index) >= index:
                start = None
        records.append(
            Record(
                index,
                entry.id,
                tuple(changes),
                start,
                tuple(missed),
                complete,
                started_id=started_id,
                unfinished=intent is not None,
            )
        )
    return records, problems


def _intent_of(entry: CustomEntry) -> str | None:
    """The entry's id when it is a rewind's started entry (written before any file)."""
    data = entry.data
    started = isinstance(data, Mapping) and data.get("state") == "started"
    return entry.id if entry.custom_type == REWIND_ENTRY and started else None


def _finished_intents(entries: Sequence[tuple[int, CustomEntry]]) -> set[str]:
    """The started rewind entries a later completed one names (``intentId``)."""
    started = {entry.id: index for index, entry in entries if _intent_of(entry) is not None}
    found: set[str] = set()
    for index, entry in entries:
        data = entry.data
        if entry.custom_type != REWIND_ENTRY or not isinstance(data, Mapping):
            continue
        named = data.get("intentId")
        if isinstance(named, str) and started.get(named, index) < index:
            found.add(named)
    return found


def edited_paths(session: Session) -> set[str]:
    """The paths inside the working folder that ``write``/``edit`` checkpoints of ``session``
    recorded (a ``"scan": "path"`` entry): a ``bash`` scan compares them too, even where git
    ignores them."""
    found: set[str] = set()
    for _, entry in _checkpoint_entries(session):
        data = entry.data
        if entry.custom_type != CHECKPOINT_ENTRY or not isinstance(data, Mapping):
            continue
        if data.get("scan") == "path":
            found |= {c.path for c in _changes(data)[0] if not c.path.startswith("/")}
    return found


def referenced_blobs(session: Session) -> set[str]:
    """The blob names the checkpoint and rewind entries of ``session`` refer to, and the refs
    of contents stored after their entry (``CheckpointStore.gc`` keeps the blobs those name)."""
    found: set[str] = set()
    for record in read_records(session)[0]:
        for change in record.changes:
            for s in (change.before, change.after):
                if isinstance(s, FileState):
                    found.add(s.digest)
                elif isinstance(s, Pending):
                    found.add(s.ref)
    return found


def resolved(state: State, store: CheckpointStore) -> State:
    """``state`` with a pending content's blob looked up in ``store``: a :class:`FileState`
    once the blob was stored, the :class:`Pending` itself when it never was."""
    if isinstance(state, Pending):
        digest = store.resolve(state.ref)
        if digest is not None:
            return FileState(digest, state.mode, state.size)
    return state


class Timeline:
    """The workspace's states implied by a session's records (see the module docstring)."""

    def __init__(self, records: Sequence[Record]) -> None:
        self._by_path: dict[str, list[tuple[int, State, State]]] = {}
        # What each rewind found, by the entry it started from: the last one from an entry
        # wins, as the latest time the files were seen there.
        self._found: dict[str, dict[str, State]] = {}
        # Paths a killed rewind planned to change last: as it found them (not reached yet).
        self._unfinished: dict[str, State] = {}
        self._records = sorted(records, key=lambda r: r.index)
        for record in self._records:
            for change in record.changes:
                self._by_path.setdefault(change.path, []).append(
                    (record.index, change.before, change.after)
                )
            found = {c.path: c.before for c in record.changes}
            if record.from_leaf_id is not None:
                self._found[record.from_leaf_id] = found
            if record.started_id is not None:
                # The entry written as the rewind started holds the files as it found them too
                # (a completed rewind's undo hint names it: its entry's parent).
                self._found[record.started_id] = found
            for change in record.changes:
                if record.unfinished:
                    self._unfinished[change.path] = change.before
                else:
                    self._unfinished.pop(change.path, None)

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path some record changed."""
        return tuple(self._by_path)

    def state_at(
        self, index: int, entry_id: str | None = None, prompt: int = -1
    ) -> dict[str, State]:
        """Each path's state when the entry at ``index`` (file order), ``entry_id``, was
        written; -1 is before the first entry. ``prompt`` is the index of the last user
        message at or before it (-1: none). When a rewind started from ``entry_id``, the paths
        it changed are as it found them (what undoing it puts back)."""
        states: dict[str, State] = {}
        for path, history in self._by_path.items():
            earlier = [(at, after) for at, _, after in history if at <= index]
            later = [before for at, before, _ in history if at > index]
            if later and (not earlier or earlier[-1][0] < prompt):
                # As the first later change found it: an edit made outside the session between
                # the turns (before the prompt) is part of it (issue 26 trial, finding 8).
                states[path] = later[0]
            else:
                states[path] = earlier[-1][1] if earlier else history[-1][2]
        if entry_id is not None:
            states.update(self._found.get(entry_id, {}))
        return states

    def missed_after(self, index: int) -> list[Missed]:
        """The changes checkpoints written after the entry at ``index`` (file order) could
        not record: a rewind to it cannot undo them. A scan that was not complete counts, as
        ``.``, once per entry that recorded nothing else missed."""
        found: list[Missed] = []
        for record in self._records:
            if record.index <= index:
                continue
            found.extend(record.missed)
            if not record.complete and not record.missed:
                found.append(Missed(".", f"entry {record.entry_id}: its scan stopped at its cap"))
        return found

    def unfinished(self) -> dict[str, State]:
        """For each path a killed rewind (a started entry never completed) was the last to
        change: the state it found, which the file still has if the rewind never reached it."""
        return dict(self._unfinished)

    def latest(self) -> dict[str, State]:
        """Each path's state as the session last left it (the last change's ``after``)."""
        return {path: history[-1][2] for path, history in self._by_path.items()}
