"""Putting the workspace back as it was at an entry: plan (what to change, what would be lost),
then apply, one file at a time, atomically.

Planning reads every path the session's records name and compares it with what the session
last left there; a file that differs was changed by something outside the session, and the
rewind refuses, naming it, unless forced. Applying writes each file to a temporary file in its
folder and renames it over the name (or unlinks it), so a kill at any moment leaves each file
either as it was or as it should be, never half-written; a temporary file a kill left is
removed by the next rewind that writes in that folder. Those files are named
``.harness-rewind.<nonce>.<tag>.tmp``, the tag made from the nonce with the store's secret
(``CheckpointStore.rewind_key``): a rewind removes only regular files whose tag it can make,
never a file (or folder) of the workspace's own, whatever its name.

A rewind writes only inside the working folder, and only in the folder the session was
recorded in: a session whose header names another folder, ``.`` or a relative path is refused
(``WorkspaceMismatchError``). Every access goes through ``harness._fs`` under its ``inside``
rule: beneath the working folder by the kernel, through no symlink at all. A recorded path
that is absolute, has a symlink on the way, or lies in git's folder, the checkpoint store or
the sessions (judged by the folders' identity) is refused, listed, before anything is written.
The session file is untrusted: its paths, modes and blob names were checked when read
(``records.py``), and a restored file never gets a set-id or world-writable bit.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import os
import re
import secrets
import stat
from typing import Final

from attrs import frozen

from repos import MessageEntry, Session

from .._fs import (
    FileRefusedError,
    Location,
    no_symlinks,
    open_dir,
    open_parent,
    open_regular,
    read_capped,
    replace_file,
)
from .errors import RewindRefusedError, WorkspaceMismatchError
from .records import (
    REWIND_ENTRY,
    Change,
    FileState,
    Missed,
    Pending,
    State,
    Timeline,
    read_records,
    resolved,
    rewind_data,
)
from .scan import Unknown, Workspace, same_file
from .store import CheckpointStore

__all__ = [
    "COMPARE_MAX_BYTES",
    "SAFE_MODE_BITS",
    "RewindPlan",
    "RewindResult",
    "apply_plan",
    "check_recorded_folder",
    "plan_rewind",
    "states_at",
]

SAFE_MODE_BITS: Final = 0o775
"""The permission bits a restored file may get from an entry (then less the umask): no
set-user-id, set-group-id, sticky or world-writable bit."""


@frozen(kw_only=True)
class RewindResult:
    """What a rewind did.

    Attributes:
        target_id: the entry whose files were restored (None: before the first entry).
        entry_id: the ``harness.rewind`` entry recording it (None: no file changed).
        restored: paths written back (created or replaced).
        removed: paths removed (created after the target).
        skipped: paths left as they are, with why (denied by the supervisor, leading out of
            the working folder, content unavailable with ``force``, not a regular file).
        problems: checkpoint changes in the session that were not read (malformed).
        missed: changes made since the target that their checkpoints could not record (over
            the store's file cap, past a scan's cap, ...): not restored, whatever the rewind
            did (``.`` with a reason for a scan that stopped at its cap).
        undo_id: with ``entry_id``, the entry a rewind to which undoes this one: the leaf it
            started from (its entries, as it started and once done, follow it).
    """

    target_id: str | None
    entry_id: str | None
    restored: tuple[str, ...]
    removed: tuple[str, ...]
    skipped: tuple[Missed, ...]
    problems: tuple[str, ...] = ()
    missed: tuple[Missed, ...] = ()
    undo_id: str | None = None
    """With ``entry_id``: the entry to rewind to that undoes it (the leaf it started from)."""


@frozen(kw_only=True)
class RewindPlan:
    """What a rewind will do: each change's ``before`` is the file as it is now (stored, so
    the rewind can be undone), its ``after`` the state at the target."""

    target_id: str | None
    changes: tuple[Change, ...]
    locations: tuple[Location, ...]
    skipped: tuple[Missed, ...]
    problems: tuple[str, ...]
    settled: tuple[Location, ...] = ()
    """Paths already as they should be: nothing to write, but a killed rewind may have left
    their temporary files."""
    missed: tuple[Missed, ...] = ()
    """Changes since the target that no checkpoint recorded: the rewind cannot undo them."""
    adopted: tuple[Change, ...] = ()
    """Paths already as at the target but not as the session last left them (a killed rewind
    wrote them): nothing to write, recorded as changed from the session's state."""
    folders: frozenset[str] = frozenset()
    """Paths where a folder stands that the rewind removes (once emptied of the recorded
    files it removes) before writing the file there."""


def states_at(
    session: Session, entry_id: str | None, store: CheckpointStore
) -> tuple[dict[str, State], dict[str, State], list[str]]:
    """The state of every recorded path as the session last left it, and when ``entry_id``
    was written (None: before the first entry), pending contents looked up in ``store`` (a
    :class:`Pending` is left where its content was never stored); and the changes not read.

    Raises:
        EntryNotFoundError: no such entry.
    """
    latest, target, problems, _, _ = _timeline_at(session, entry_id, store)
    return latest, target, problems


def _timeline_at(
    session: Session, entry_id: str | None, store: CheckpointStore
) -> tuple[dict[str, State], dict[str, State], list[str], list[Missed], dict[str, State]]:
    """:func:`states_at`, the changes missed since ``entry_id``, and the states a killed
    rewind found (:meth:`Timeline.unfinished`)."""
    records, problems = read_records(session)
    timeline = Timeline(records)
    ids = session.entry_ids()
    if entry_id is None:
        index = -1
    else:
        session.get_entry(entry_id)  # raises EntryNotFoundError
        index = ids.index(entry_id)
    latest = {path: resolved(state, store) for path, state in timeline.latest().items()}
    at = timeline.state_at(index, entry_id, _last_prompt(session, ids, index))
    target = {path: resolved(state, store) for path, state in at.items()}
    unfinished = {path: resolved(state, store) for path, state in timeline.unfinished().items()}
    return latest, target, problems, timeline.missed_after(index), unfinished


def _last_prompt(session: Session, ids: list[str], index: int) -> int:
    """The file index of the last user message at or before ``index`` (-1: none); only the
    message entries walked back over are decoded."""
    kinds = session.entry_types(ids[: index + 1])
    for at in range(index, -1, -1):
        if kinds[at] != "message":
            continue
        entry = session.get_entry(ids[at])
        if isinstance(entry, MessageEntry) and entry.message.role == "user":
            return at
    return -1


def check_recorded_folder(session: Session, workspace: Workspace) -> None:
    """Refuse to restore ``session``'s files unless it was recorded in the working folder:
    its header's ``cwd`` an absolute path naming the same folder (``.``, a relative path or
    another folder never is).

    Raises:
        WorkspaceMismatchError: it was recorded elsewhere, or names no absolute folder.
    """
    recorded = session.cwd
    if not recorded or not os.path.isabs(recorded):
        raise WorkspaceMismatchError(recorded or "(no folder)", str(workspace.root))
    if os.path.realpath(recorded) != os.path.realpath(workspace.root):
        raise WorkspaceMismatchError(recorded, str(workspace.root))


def plan_rewind(
    session: Session,
    workspace: Workspace,
    entry_id: str | None,
    *,
    force: bool = False,
) -> RewindPlan:
    """What rewinding the files to ``entry_id`` changes (see the module docstring).

    Args:
        force: overwrite files changed outside the session; leave those whose content is
            unavailable, those no longer regular files or unreadable, and the paths a rewind
            never writes, as they are.

    Raises:
        WorkspaceMismatchError: the session was not recorded in the working folder.
        RewindRefusedError: without ``force``: entries naming paths a rewind never writes
            (absolute, through a symlink, in git's folder, the store or the sessions, not
            normalised), files changed outside the session since it last touched them (into
            something a rewind cannot record, too: a symlink, a folder, a FIFO, unreadable),
            contents missing from the store, or contents never stored (the process ended
            before a tool call's content was stored); nothing was written.
        EntryNotFoundError: no such entry.
    """
    check_recorded_folder(session, workspace)
    latest, target, problems, missed, unfinished = _timeline_at(session, entry_id, workspace.store)
    workspace.refresh_exclusions()
    changes: list[Change] = []
    locations: list[Location] = []
    settled: list[Location] = []
    adopted: list[Change] = []
    skipped: list[Missed] = []
    unsafe: list[str] = list(problems)
    changed: list[str] = []
    unavailable: list[str] = []
    unstored: list[str] = []
    unrecordable: list[str] = []
    folders: set[str] = set()
    budget = _Budget(COMPARE_MAX_BYTES)
    made_git = workspace.git_folders_made(p for p, w in target.items() if w is not None)
    for path, want in target.items():
        loc = workspace.locate(path)
        if path in made_git and not isinstance(loc, str):
            loc = made_git[path]
        if isinstance(loc, str) and path.startswith("/") and _pseudo(path):
            # /proc/kmsg is a regular file whose read blocks and consumes the kernel's log
            # (issue 26 attack, finding 1): a file there is never opened, only refused.
            loc = "on a kernel file system (/proc, /sys, /dev): never read to compare"
        elif isinstance(loc, str) and _already_at(path, want, budget):
            # Outside the working folder (a write the supervisor approved there) and already
            # as at the target: the rewind would not touch it, so it neither refuses nor asks.
            continue
        if isinstance(loc, str):
            unsafe.append(f"{path} ({loc})")
            skipped.append(Missed(path, loc))
            continue
        now = workspace.capture(loc)
        if isinstance(now, Unknown) and latest[path] is None and _is_folder(loc):
            if want is None:
                continue  # no file, as at the target: the folder is not the rewind's business
            inside = _folder_files(loc)
            if inside is not None and all(target.get(f, 0) is None for f in inside):
                # A folder where the session last left no file, holding only files the rewind
                # removes (the session swapped the file for a folder): removed, once empty,
                # for the file (issue 26 trial, finding 15).
                now = None
                folders.add(path)
        if isinstance(now, Unknown):
            # The session left a regular file or none here: this one (a symlink, a folder, a
            # FIFO, unreadable) was changed outside it, and cannot be recorded, so its loss
            # could not be undone. Refused by name; forced, left as it is, never followed.
            unrecordable.append(f"{path} ({now.reason})")
            skipped.append(Missed(path, f"{now.reason}; left as it is"))
            continue
        last = latest[path]
        if isinstance(want, Pending):  # the process ended before storing it
            unstored.append(path)
            if force:
                skipped.append(Missed(path, "its content was never stored"))
            continue
        if same_file(now, want):
            settled.append(loc)
            if not same_file(now, last) and not isinstance(last, Pending):
                # Already as at the target, not as the session left it: a killed rewind wrote
                # it (or someone made it so). Recorded as this rewind's change from what the
                # session left, so its undo puts that back rather than refusing the file as
                # changed outside the session (issue 26 trial, finding 6).
                adopted.append(Change(path, last, want))
            continue
        if isinstance(last, Pending):
            # What the session last left there was never stored: a change made outside the
            # session cannot be ruled out.
            unstored.append(path)
        elif not same_file(now, last) and not (
            path in unfinished and same_file(now, unfinished[path])
        ):
            # (A file a killed rewind planned to change but never reached is as it found it.)
            changed.append(path)
        if want is not None and not workspace.store.has(want.digest):
            unavailable.append(path)
            if force:
                skipped.append(Missed(path, "its content is not in the checkpoint store"))
                continue
        changes.append(Change(path, now, want))
        locations.append(loc)
    if (unsafe or changed or unavailable or unstored or unrecordable) and not force:
        missing = [target[p] for p in unavailable] + [target[p] for p in unstored]
        missing += [latest[p] for p in unstored]
        raise RewindRefusedError(
            changed,
            unavailable,
            unsafe,
            unstored,
            unrecordable,
            store=str(workspace.store.root) if unavailable or unstored else None,
            elsewhere=holding_store(workspace.store, missing),
        )
    # Removals first: a folder the session made is emptied before a file takes its place, and
    # a file is gone before a folder takes its place.
    order = sorted(range(len(changes)), key=lambda i: changes[i].after is not None)
    return RewindPlan(
        target_id=entry_id,
        changes=tuple(changes[i] for i in order),
        locations=tuple(locations[i] for i in order),
        folders=frozenset(folders),
        skipped=tuple(skipped),
        problems=tuple(problems),
        settled=tuple(settled),
        adopted=tuple(adopted),
        missed=tuple(missed),
    )


def holding_store(store: CheckpointStore, missing: list[State]) -> str | None:
    """The user data folder's store, when it is not ``store`` and holds a content of
    ``missing`` (a blob, or a ref it resolves): the session was recorded with it."""
    states = [s for s in missing if s is not None]
    if not states:
        return None
    other = CheckpointStore.default()
    if os.path.realpath(other.root) == os.path.realpath(store.root) or not other.root.is_dir():
        return None
    for state in states:
        digest = other.resolve(state.ref) if isinstance(state, Pending) else state.digest
        if digest is not None and other.has(digest):
            return str(other.root)
    return None


def _is_folder(loc: Location) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(loc.path).st_mode)
    except OSError:
        return False


def _folder_files(loc: Location) -> list[str] | None:
    """The regular files under the folder at ``loc`` (paths as recorded), through no symlink;
    None when it is no folder or holds anything else (a symlink, a FIFO) or cannot be read."""
    try:
        fd = open_dir(loc)
    except OSError:
        return None
    found: list[str] = []
    try:
        if not _list_files(fd, loc.rel, found):
            return None
    except OSError:
        return None
    finally:
        os.close(fd)
    return found


def _list_files(fd: int, rel: str, found: list[str]) -> bool:
    for name in os.listdir(fd):
        mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        if stat.S_ISREG(mode):
            found.append(f"{rel}/{name}")
        elif stat.S_ISDIR(mode):
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            try:
                if not _list_files(sub, f"{rel}/{name}", found):
                    return False
            finally:
                os.close(sub)
        else:
            return False
    return True


def _remove_empty_folder(loc: Location) -> None:
    """Remove the folder at ``loc`` and the empty folders in it, through no symlink; a file in
    it makes this fail (``ENOTEMPTY``) and stay."""
    parent, name = os.path.split(loc.rel)
    folder = open_dir(Location(loc.root, parent or ".", loc.rule))
    try:
        _rmdir_tree(folder, name)
        os.fsync(folder)
    finally:
        os.close(folder)


def _rmdir_tree(parent: int, name: str) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    try:
        for child in os.listdir(fd):
            if stat.S_ISDIR(os.stat(child, dir_fd=fd, follow_symlinks=False).st_mode):
                _rmdir_tree(fd, child)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


COMPARE_MAX_BYTES: Final = 256 * 1024**2
"""The most bytes one rewind plan reads of files outside the working folder to compare them
(a scan's cap): past it, an outside file is refused, not read (a session file naming one
64 MiB file a thousand times read 64 GB; issue 26 attack, finding 2)."""
_PSEUDO: Final = ("/proc", "/sys", "/dev")


class _Budget:
    """Bytes a plan may still read to compare."""

    def __init__(self, left: int) -> None:
        self.left = left


def _pseudo(path: str) -> bool:
    """Whether the absolute ``path`` lies on a kernel file system: under /proc, /sys or /dev
    by name, or on the device of one of them (a bind mount elsewhere)."""
    if any(path == top or path.startswith(top + "/") for top in _PSEUDO):
        return True
    devices = set()
    for top in _PSEUDO:
        with contextlib.suppress(OSError):
            devices.add(os.lstat(top).st_dev)
    try:
        return os.lstat(path).st_dev in devices
    except OSError:
        return False


def _already_at(path: str, want: FileState | Pending | None, budget: _Budget) -> bool:
    """Whether the absolute ``path`` (a file outside the working folder, which a rewind never
    writes) is already in the state ``want``: no file where ``want`` is None, else a regular
    file (opened through no symlink, never a FIFO or device, read without blocking) with that
    size, content and executable bit. Read only to compare, at most ``want``'s size and what
    is left of ``budget``: nothing is stored. False for a relative path, a pending content, or
    anything that cannot be read."""
    if not path.startswith("/") or isinstance(want, Pending):
        return False
    try:
        loc = no_symlinks(path)
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return want is None
    except (OSError, ValueError):
        return False
    if want is None or want.size > budget.left:
        return False
    try:
        fd, st = open_regular(loc)
        try:
            if st.st_size != want.size:
                return False
            os.set_blocking(fd, False)  # a file whose read would wait is not compared
            budget.left -= want.size
            data = read_capped(fd, st, want.size, path)
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return False
    now = FileState(hashlib.sha256(data).hexdigest(), st.st_mode & 0o7777, len(data))
    return same_file(now, want)


def apply_plan(
    session: Session,
    workspace: Workspace,
    plan: RewindPlan,
    *,
    from_leaf_id: str | None,
    conversation: bool,
) -> RewindResult:
    """Write the plan's files, one atomic step each, then append the ``harness.rewind`` entry
    (when a file changed) recording what was done, so rewinding to the entry before it undoes
    it.

    Each file is compared with the plan's ``before`` again just before it is written: one
    changed since the plan (by another program while the ``session_before_rewind`` hooks ran,
    say) is left as it is and reported as skipped, ``force`` or not: nobody saw that change,
    and the rewind entry could not undo its loss."""
    done: list[Change] = list(plan.adopted)
    restored: list[str] = []
    removed: list[str] = []
    skipped = list(plan.skipped)
    key = workspace.store.rewind_key()
    intent_id = None
    if plan.changes:
        # Recorded before any file is written (each ``before`` is stored by the plan): a kill
        # midway leaves this entry, so what the rewind overwrote is still referenced (gc keeps
        # it) and a rewind to the entry it started from gives it back (issue 26 attack,
        # finding 3). The entry written once done names it and records what was done.
        intent_id = session.append_custom(
            REWIND_ENTRY,
            rewind_data(
                target_id=plan.target_id,
                from_leaf_id=from_leaf_id,
                conversation=conversation,
                changes=[*plan.adopted, *plan.changes],
                skipped=plan.skipped,
                started=True,
            ),
        ).id
    for loc in plan.settled:
        _sweep_at(loc, key)
    for change, loc in zip(plan.changes, plan.locations, strict=True):
        if change.path in plan.folders:
            try:
                _remove_empty_folder(loc)
            except OSError as exc:  # a file appeared in it since the plan: left as it is
                reason = exc.strerror or str(exc)
                skipped.append(Missed(change.path, f"a folder, not removed: {reason}"))
                continue
        now = workspace.capture(loc)
        if isinstance(now, Unknown) or not same_file(now, change.before):
            skipped.append(Missed(change.path, "changed since the rewind was planned; left as is"))
            continue
        try:
            if change.after is None:
                _remove(loc, key)
                removed.append(change.path)
            else:
                data = (
                    None
                    if isinstance(change.after, Pending)
                    else workspace.store.get(change.after.digest)
                )
                if data is None:
                    skipped.append(Missed(change.path, "its content is not in the store"))
                    continue
                _write(loc, data, change.after.mode, key)
                restored.append(change.path)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            skipped.append(Missed(change.path, f"not restored: {reason}"))
            continue
        done.append(change)
    entry_id = None
    if done or intent_id is not None:
        entry = session.append_custom(
            REWIND_ENTRY,
            rewind_data(
                target_id=plan.target_id,
                from_leaf_id=from_leaf_id,
                conversation=conversation,
                changes=done,
                skipped=skipped,
                intent_id=intent_id,
            ),
        )
        entry_id = entry.id if done else None
    return RewindResult(
        target_id=plan.target_id,
        entry_id=entry_id,
        restored=tuple(restored),
        removed=tuple(removed),
        skipped=tuple(skipped),
        problems=plan.problems,
        missed=plan.missed,
        undo_id=from_leaf_id if entry_id is not None else None,
    )


_TEMP: Final = re.compile(r"\.harness-rewind\.([0-9a-f]{16})\.([0-9a-f]{32})\.tmp")
"""A rewind's temporary file: a random nonce and its tag (:func:`_tag`)."""


def _tag(key: bytes, nonce: str) -> str:
    """The tag of a temporary file's ``nonce``, made with the store's key: the workspace
    cannot make one, so a file of that shape without the right tag is never ours."""
    return hmac.new(key, nonce.encode("ascii"), hashlib.sha256).hexdigest()[:32]


def _temp_name(key: bytes) -> str:
    """A new name for a rewind's temporary file (:data:`_TEMP`)."""
    nonce = secrets.token_hex(8)
    return f".harness-rewind.{nonce}.{_tag(key, nonce)}.tmp"


def _sweep(folder: int, key: bytes) -> None:
    """Remove the temporary files a killed rewind left in ``folder``: only regular files
    whose name bears this store's tag (a user's file of any other name or tag stays, and a
    folder or symlink of that name too)."""
    for entry in os.listdir(folder):
        match = _TEMP.fullmatch(entry)
        if match is None or not hmac.compare_digest(match[2], _tag(key, match[1])):
            continue
        try:
            if not stat.S_ISREG(os.stat(entry, dir_fd=folder, follow_symlinks=False).st_mode):
                continue
            os.unlink(entry, dir_fd=folder)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            continue  # gone, or swapped for a folder since the stat: not ours to remove


def _sweep_at(loc: Location, key: bytes) -> None:
    """:func:`_sweep` for the folder of ``loc``, if it is there; a folder that cannot be
    opened holds nothing of ours to remove."""
    parent, _ = os.path.split(loc.rel)
    try:
        folder = open_dir(Location(loc.root, parent or ".", loc.rule))
    except OSError:
        return
    try:
        _sweep(folder, key)
    finally:
        os.close(folder)


def _write(loc: Location, data: bytes, mode: int, key: bytes) -> None:
    """Write a file as recorded with ``mode``: its read, write and execute bits at most, less
    the umask (the kernel's, at creation), never set-id, sticky or world-writable (an entry's
    mode is untrusted), and never wider than the file it replaces (:func:`_narrowed`)."""
    folder, name = open_parent(loc)
    try:
        _sweep(folder, key)
        replace_file(
            folder,
            name,
            data,
            create_mode=_narrowed(mode & SAFE_MODE_BITS, folder, name),
            durable=True,
            tmp=_temp_name(key),
        )
    finally:
        os.close(folder)


def _narrowed(mode: int, folder: int, name: str) -> int:
    """``mode`` never wider than the regular file ``name`` in ``folder`` has now, if there is
    one: no read or write bit it lacks (a user's ``chmod 600 secrets.env`` stays: a rewind
    made it 0644 again, readable by every local user; issue 26 attack, finding 8), and an
    execute bit only for whom may read it."""
    try:
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return mode
    if not stat.S_ISREG(st.st_mode):
        return mode
    now = stat.S_IMODE(st.st_mode)
    return (mode & now & 0o666) | (mode & 0o111 & ((now & 0o444) >> 2))


def _remove(loc: Location, key: bytes) -> None:
    parent, name = os.path.split(loc.rel)
    if name in ("", ".", ".."):
        raise FileRefusedError(errno.EISDIR, "does not name a file", loc.path)
    try:
        folder = open_dir(Location(loc.root, parent or ".", loc.rule))
    except (FileNotFoundError, NotADirectoryError):
        return  # its folder is gone: so is the file
    try:
        _sweep(folder, key)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=folder)
        os.fsync(folder)
    finally:
        os.close(folder)
