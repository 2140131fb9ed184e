"""Which lines a fork copies (DESIGN §4). Shared by every repository; no I/O of its own."""

from __future__ import annotations

import secrets
import uuid

from ._codec import dumps_line, encode_entry, encode_header
from ._entries import LabelEntry, LeafEntry, SessionHeader, SessionInfoEntry
from ._errors import ForkCancelledError, InvalidForkTargetError
from ._jsonl.paths import absolute_cwd, validate_session_id
from ._repo import ForkPosition, ForkScope
from ._session import Session, iso_now

__all__ = ["check_fork_allowed", "fork_header", "fork_lines", "fork_plan"]


def fork_lines(
    source: Session,
    header: SessionHeader,
    *,
    entry_id: str | None,
    position: ForkPosition | None,
    scope: ForkScope,
) -> list[bytes]:
    """The lines of a new session file forked from ``source``, header first.

    Branch scope copies the root-to-target path unchanged (label entries on it included, so every
    ``parentId`` resolves). Labels of copied entries set (or cleared) elsewhere, and the session
    name, are re-created after the path, followed by a ``leaf`` entry back to the cut point, so
    the fork reopens on exactly the copied branch. Tree scope copies every line.

    Args:
        entry_id: the target; None means the source's leaf.
        position: "before" stops at the target's parent, "at" includes it. None means "at" for
            the leaf and "before" for a given entry (pi's defaults).

    Raises:
        InvalidForkTargetError: ``entry_id`` is not in the source, is a ``leaf`` entry (it
            records a move, not content: its target may not be on its path), or tree scope
            was given an entry.
    """
    ids, extra_lines = fork_plan(source, entry_id=entry_id, position=position, scope=scope)
    out = [dumps_line(encode_header(header))]
    out.extend(source.raw_lines(ids))
    out.extend(extra_lines)
    return out


def fork_plan(
    source: Session,
    *,
    entry_id: str | None,
    position: ForkPosition | None,
    scope: ForkScope,
) -> tuple[list[str], list[bytes]]:
    """What :func:`fork_lines` writes after the header: the ids of the source entries copied
    verbatim (in file order), then the new lines that follow them. A database repository
    copies the first part server-side. Raises as :func:`fork_lines`.

    A copied line that must be encoded afresh is decoded here: in recover mode a damaged one is
    dropped (as every reader does) and the plan made again over the re-attached tree."""

    def plan() -> tuple[list[str], list[bytes]]:
        ids, extra = _plan(source, entry_id=entry_id, position=position, scope=scope)
        source.decode_unstored(ids)
        return ids, extra

    return source._recovering(plan)


def _plan(
    source: Session,
    *,
    entry_id: str | None,
    position: ForkPosition | None,
    scope: ForkScope,
) -> tuple[list[str], list[bytes]]:
    if scope == "tree":
        if entry_id is not None:
            raise InvalidForkTargetError(entry_id, "a tree fork copies everything; give no entry")
        return source.entry_ids(), []

    target = entry_id if entry_id is not None else source.leaf_id
    if entry_id is not None and entry_id not in source:
        raise InvalidForkTargetError(entry_id, "no such entry in the source session")
    if target is not None and source.entry_type(target) == "leaf":
        raise InvalidForkTargetError(
            target, "a leaf entry records a move, not content; fork at its target instead"
        )
    effective = position or ("at" if entry_id is None else "before")
    if target is not None and effective == "before":
        target = source.get_entry(target).parent_id
    ids = source.path_ids(target)

    copied = set(ids)
    labels_on_path: dict[str, str] = {}
    name_on_path: str | None = None
    for i, kind in zip(ids, source.entry_types(ids), strict=True):
        if kind != "label" and kind != "session_info":
            continue
        entry = source.get_entry(i)
        if isinstance(entry, LabelEntry):
            if entry.label:
                labels_on_path[entry.target_id] = entry.label
            else:
                labels_on_path.pop(entry.target_id, None)
        elif isinstance(entry, SessionInfoEntry):
            name_on_path = (entry.name or "").strip() or None  # the latest wins, "" clears
    parent = target
    extra_lines = []
    # The fork's labels are the source's, on the copied entries: set from other branches, or
    # cleared there after the path set them.
    wanted = {t: label for t, label in source.labels.items() if t in copied}
    cleared = [t for t in labels_on_path if t in copied and t not in wanted]
    for target_id, label in [*wanted.items(), *((t, None) for t in cleared)]:
        if labels_on_path.get(target_id) != label:
            new = LabelEntry(
                id=_new_id(copied),
                parent_id=parent,
                timestamp=iso_now(),
                target_id=target_id,
                label=label,
            )
            extra_lines.append(dumps_line(encode_entry(new)))
            parent = new.id
    if source.name != name_on_path:
        info = SessionInfoEntry(
            id=_new_id(copied), parent_id=parent, timestamp=iso_now(), name=source.name or ""
        )
        extra_lines.append(dumps_line(encode_entry(info)))
        parent = info.id
    if extra_lines:
        # Parented on its target, like every leaf entry we write (DESIGN §2): pi's reader
        # takes the last line as the leaf and must land where we do.
        leaf = LeafEntry(
            id=_new_id(copied), parent_id=target, timestamp=iso_now(), target_id=target
        )
        extra_lines.append(dumps_line(encode_entry(leaf)))
    return ids, extra_lines


def _new_id(taken: set[str]) -> str:
    while True:
        candidate = secrets.token_hex(4)
        if candidate not in taken:
            taken.add(candidate)
            return candidate


async def check_fork_allowed(
    repo: object,
    source: Session,
    *,
    entry_id: str | None,
    position: ForkPosition | None,
    scope: ForkScope,
) -> None:
    """Run the ``session_before_fork`` hooks (sender: ``repo``).

    Raises:
        ForkCancelledError: a hook cancelled.
    """
    from hooks import SessionBeforeForkEvent, emit_session_before_fork  # on use: a fast start

    decision = await emit_session_before_fork(
        repo,
        SessionBeforeForkEvent(
            source_id=source.id, entry_id=entry_id, position=position, scope=scope
        ),
    )
    if decision.cancelled:
        raise ForkCancelledError(decision.reason or "no reason given")


def fork_header(
    source: Session, *, session_id: str | None, cwd: str | None, parent_session: str
) -> SessionHeader:
    """The header of a fork of ``source``: a new (validated) id, now, the source's cwd unless
    given, the source's metadata, and ``parent_session`` linking the source."""
    return SessionHeader(
        id=validate_session_id(session_id) if session_id is not None else str(uuid.uuid4()),
        timestamp=iso_now(),
        cwd=absolute_cwd(cwd) if cwd is not None else source.cwd,
        parent_session=parent_session,
        metadata=source.header.metadata,
    )
