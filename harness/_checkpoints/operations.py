"""The harness's checkpoint operations: rewinding files (with the rewind hooks) and forking a
session together with its files. ``AgentHarness`` calls these; they hold the logic."""

from __future__ import annotations

import logging
from pathlib import Path

from hooks import (
    SessionBeforeRewindEvent,
    SessionRewindEvent,
    emit_session_before_rewind,
    notify,
)
from repos import ForkPosition, Session, SessionRepo

from .capture import Checkpoints
from .errors import RewindCancelledError, RewindRefusedError
from .fork import Materialized, materialize, missing_contents, new_workspace_root
from .records import conversation_landing
from .rewind import (
    RewindPlan,
    RewindResult,
    apply_plan,
    check_recorded_folder,
    holding_store,
    plan_rewind,
    states_at,
)

__all__ = ["announce_rewind", "fork_with_files", "prepare_rewind", "rewind_files"]

_log = logging.getLogger("harness")


async def prepare_rewind(
    sender: object,
    checkpoints: Checkpoints,
    entry_id: str | None,
    *,
    force: bool,
    conversation: bool,
) -> RewindPlan:
    """Plan a rewind and ask the ``session_before_rewind`` hooks.

    Contents still being stored are waited for first.

    Raises:
        CheckpointError: contents were still being stored after ``SETTLE_TIMEOUT_S``.
        WorkspaceMismatchError: the session was not recorded in the working folder.
        RewindRefusedError: unless ``force``: paths a rewind never writes, files changed
            outside the session, or contents missing or never stored.
        RewindCancelledError: a hook cancelled.
        EntryNotFoundError: no such entry.
    """
    await checkpoints.settle()
    session = checkpoints.session
    plan = plan_rewind(session, checkpoints.workspace, entry_id, force=force)
    for problem in plan.problems:
        _log.warning("session %s: a checkpoint change was not read: %s", session.id, problem)
    outcome = await emit_session_before_rewind(
        sender,
        SessionBeforeRewindEvent(
            session_id=session.id,
            target_id=entry_id,
            paths=[c.path for c in plan.changes],
            conversation=conversation,
        ),
    )
    if outcome.cancelled:
        raise RewindCancelledError(outcome.reason or "no reason given")
    return plan


async def announce_rewind(
    sender: object,
    checkpoints: Checkpoints,
    plan: RewindPlan,
    *,
    from_leaf_id: str | None,
    conversation: bool,
) -> RewindResult:
    """Apply a prepared plan, record it, and send ``session_rewind``."""
    session = checkpoints.session
    result = apply_plan(
        session,
        checkpoints.workspace,
        plan,
        from_leaf_id=from_leaf_id,
        conversation=conversation,
    )
    await notify(
        sender,
        SessionRewindEvent(
            session_id=session.id,
            target_id=plan.target_id,
            entry_id=result.entry_id,
            restored=result.restored,
            removed=result.removed,
            skipped=[s.path for s in result.skipped],
        ),
    )
    return result


async def rewind_files(
    sender: object,
    checkpoints: Checkpoints,
    entry_id: str | None,
    *,
    force: bool,
) -> RewindResult:
    """Put every recorded file back as it was at ``entry_id``; the conversation stays.
    Raises as :func:`prepare_rewind`."""
    plan = await prepare_rewind(sender, checkpoints, entry_id, force=force, conversation=False)
    return await announce_rewind(
        sender,
        checkpoints,
        plan,
        from_leaf_id=checkpoints.session.leaf_id,
        conversation=False,
    )


async def fork_with_files(
    checkpoints: Checkpoints,
    repo: SessionRepo,
    entry_id: str | None,
    *,
    position: ForkPosition | None,
    workspace: Path,
) -> tuple[Session, Materialized]:
    """Fork ``checkpoints.session`` at ``entry_id`` (as ``repo.fork`` does; at a checkpoint
    entry, at the end of its tool batch, as :func:`conversation_landing` says) and make
    ``workspace`` hold the files as they were at the fork's last entry; the fork's header
    records the workspace as its ``cwd``.

    The session is forked first (``session_before_fork`` hooks may cancel; nothing is
    written then), then the folder is made; if that fails the fork is deleted again.

    Contents still being stored are waited for first.

    Raises:
        CheckpointError: contents were still being stored after ``SETTLE_TIMEOUT_S``.
        WorkspaceMismatchError: the session was not recorded in the working folder (the
            files it names are another folder's).
        WorkspaceExistsError: ``workspace`` exists and is not empty.
        RewindRefusedError: a content the folder needs at the entry is not in the store
            (removed by ``gc``) or was never stored (``fork=True``: names them); nothing was
            written.
        ForkCancelledError, InvalidForkTargetError, ...: as ``repo.fork``.
        OSError, subprocess.SubprocessError: the folder could not be made.
    """
    await checkpoints.settle()
    session = checkpoints.session
    check_recorded_folder(session, checkpoints.workspace)
    effective = position or ("at" if entry_id is None else "before")
    if effective == "at" and entry_id is not None:
        # At a checkpoint entry: at the end of its tool batch, as a rewind with the
        # conversation moves, so the fork's model sees the call's results (issue 26 trial).
        entry_id = conversation_landing(session, entry_id)
    cut = entry_id if entry_id is not None else session.leaf_id
    if cut is not None and effective == "before":
        cut = session.get_entry(cut).parent_id
    _, states, _ = states_at(session, cut, checkpoints.store)
    root, _ = new_workspace_root(checkpoints.workspace, workspace)
    unavailable, unstored = missing_contents(checkpoints.workspace, states)
    if unavailable or unstored:
        # As a rewind refuses: the folder would hold other contents than the entry's.
        missing = [states[p] for p in [*unavailable, *unstored]]
        raise RewindRefusedError(
            [],
            unavailable,
            unstored=unstored,
            fork=True,
            store=str(checkpoints.store.root),
            elsewhere=holding_store(checkpoints.store, missing),
        )
    fork = await repo.fork(
        session.path if session.path is not None else session.id,
        entry_id=entry_id,
        position=position,
        cwd=str(root),
    )
    try:
        made = materialize(checkpoints.workspace, workspace, states)
    except BaseException:
        fork.close()
        await repo.delete(fork.path if fork.path is not None else fork.id)
        raise
    return fork, made
