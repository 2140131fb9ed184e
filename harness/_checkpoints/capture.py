"""Recording what a tool call changes: one ``harness.checkpoint`` entry per call that changed
the workspace, appended as the call ends (before its result, so the result's entry is written
after the change, the call's entry before it).

Which calls are recorded: a tool of kind ``edit`` with a ``target`` (``write``, ``edit``, an
MCP tool that declares a path) records that path's content before and after; a tool of kind
``execute`` (``bash``) compares the whole workspace before and after (``scan.py``).

A ``write``/``edit`` reads the contents on the call's path but hashes and stores them on a
worker thread (hashing 1 MB alone takes 0.6 ms): its entry names them by ref
(``records.Pending``), and the store maps a ref to its blob once the blob is written. Whatever
reads the store here first waits for that work (:meth:`Checkpoints.settle`: rewinds, forks,
the end of a run, shutdown); a kill before it is done leaves refs the store never got, and a
rewind that needs one refuses, naming the file (``RewindRefusedError.unstored``). Calls of
those tools run one at a time while checkpoints are on, so each change is recorded against the
call that made it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Final, TypeVar

from hooks import JSONValue
from repos import Session

from .._fs import FileRefusedError, Location, tool_location
from .._tools.base import Tool, ToolRun
from .errors import CheckpointError
from .records import (
    CHECKPOINT_ENTRY,
    Change,
    FileState,
    Missed,
    Pending,
    checkpoint_data,
    edited_paths,
)
from .scan import DEFAULT_MAX_FILES, Unknown, Workspace, same_file
from .store import CheckpointStore

__all__ = ["SETTLE_TIMEOUT_S", "Checkpoints", "recorded_path"]

SETTLE_TIMEOUT_S: Final = 60.0
"""The longest :meth:`Checkpoints.settle` waits for contents still being stored."""

_log = logging.getLogger("harness")
T = TypeVar("T")


def recorded_path(loc: Location) -> str | None:
    """How a change names the file at ``loc``: relative to the working folder beneath it (as
    resolved when the call was decided, for an ``inside`` location), the absolute path outside
    it; None for the folder itself."""
    if loc.rule in ("beneath", "inside"):
        return None if loc.rel == "." else loc.rel
    return loc.path


class Checkpoints:
    """One harness's checkpoints: where contents go, the workspace, and the entries written.

    Args:
        session: where the entries go.
        store: the content store.
        cwd: the working folder (the harness's).
        max_files: the cap of the workspace scans.
    """

    def __init__(
        self,
        session: Session,
        store: CheckpointStore,
        cwd: Path,
        *,
        max_files: int = DEFAULT_MAX_FILES,
    ) -> None:
        self.session = session
        self.store = store
        self.workspace = Workspace(
            cwd, store, exclude=_session_folders(session), max_files=max_files
        )
        self._lock = asyncio.Lock()

    async def run(
        self,
        tool: Tool,
        input: Mapping[str, JSONValue],
        run: ToolRun,
        *,
        entry_id: str | None,
        execute: Callable[[], Awaitable[T]],
    ) -> T:
        """``execute()`` the call, recording what it changes (see the module docstring).

        The state after is taken however the call ends, a cancellation included (the
        entry is appended synchronously then, as the loop persists what a cancel leaves).
        """
        target = input.get(tool.target) if tool.target is not None else None
        if tool.kind == "edit" and isinstance(target, str):
            try:
                loc = tool_location(
                    run.cwd, target, confined=run.confined, approved_path=run.approved_path
                )
            except FileRefusedError:  # the tool refuses it too: nothing will change
                return await execute()
            path = recorded_path(loc)
            if path is None:
                return await execute()
            async with self._lock:
                before = self.workspace.capture_deferred(loc)
                try:
                    return await execute()
                finally:
                    try:
                        after = self.workspace.capture_deferred(loc)
                        self._record_file(run, tool, entry_id, path, before, after)
                    finally:
                        # Only now: the worker's store never competes with the call itself.
                        self.workspace.flush()
        if tool.kind == "execute":
            async with self._lock:
                if self.workspace.watched is None:  # a resumed session's, read once
                    self.workspace.watched = edited_paths(self.session)
                snapshot = await asyncio.to_thread(self.workspace.before)
                try:
                    return await execute()
                finally:
                    changes, missed, complete = self.workspace.after(snapshot)
                    self._append(run, tool, entry_id, snapshot.kind, changes, missed, complete)
        return await execute()

    async def settle(self, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Wait until the contents of earlier ``write``/``edit`` calls are in the store (at
        once when none is pending). One that failed was logged; its checkpoint's content is
        missing, and a rewind that needs it says so. A timeout leaves the worker storing.

        Raises:
            CheckpointError: some are still being stored after ``timeout_s`` seconds.
        """
        self.workspace.flush()
        waiting = self.workspace.unfinished()
        if waiting:
            # asyncio.wait, not wait_for: a timeout must not cancel a store not begun yet.
            _, late = await asyncio.wait(
                [asyncio.wrap_future(future) for future in waiting], timeout=timeout_s
            )
            if late:
                raise CheckpointError(
                    f"{len(late)} checkpoint contents were still being stored after "
                    f"{timeout_s:g} s (store {self.store.root}); nothing that reads the store "
                    "was done"
                )
        self.workspace.forget_finished()

    def _record_file(
        self,
        run: ToolRun,
        tool: Tool,
        entry_id: str | None,
        path: str,
        before: FileState | Pending | Unknown | None,
        after: FileState | Pending | Unknown | None,
    ) -> None:
        if isinstance(before, Unknown) or isinstance(after, Unknown):
            if before != after:  # changed, but one side cannot be stored
                reason = next(s.reason for s in (after, before) if isinstance(s, Unknown))
                self._append(run, tool, entry_id, "path", [], [Missed(path, reason)], False)
        elif not same_file(before, after):
            self._append(run, tool, entry_id, "path", [Change(path, before, after)], [], True)
            if self.workspace.watched is not None and not path.startswith("/"):
                self.workspace.watched.add(path)

    def _append(
        self,
        run: ToolRun,
        tool: Tool,
        entry_id: str | None,
        scan: str,
        changes: list[Change],
        missed: list[Missed],
        complete: bool,
    ) -> None:
        if not changes and not missed and complete:
            # A scan that stopped at its cap writes its entry even when it saw no change: what
            # it could not see is shown (`checkpoints list`, a rewind past it), never silent.
            return
        for m in missed:
            _log.warning("checkpoint of %s: %r not recorded: %s", tool.name, m.path, m.reason)
        self.session.append_custom(
            CHECKPOINT_ENTRY,
            checkpoint_data(
                tool_call_id=run.tool_call_id,
                entry_id=entry_id,
                tool_name=tool.name,
                scan=scan,
                changes=changes,
                missed=missed,
                complete=complete,
            ),
        )


def _session_folders(session: Session) -> list[Path]:
    """What a scan leaves alone because the harness writes it itself: the session's own file
    (even when its folder is the working folder), its folder, and the sessions root above it
    in a JSONL layout (``<root>/--<cwd>--/``)."""
    if session.path is None:
        return []
    own = session.path.resolve()
    folder = own.parent
    layout = folder.name.startswith("--") and folder.name.endswith("--")
    return [own, folder, folder.parent] if layout else [own, folder]
