"""The errors of workspace checkpoints, rewinds and forks that carry files.

Tree::

    HarnessError (hooks)
    └── CheckpointError                 base of this package's errors ("checkpoint_error")
        ├── RewindRefusedError          files changed outside the session, or contents missing
        │                               ("rewind_refused")
        ├── RewindCancelledError        a session_before_rewind hook cancelled ("rewind_cancelled")
        ├── CheckpointsOffError         the harness records no checkpoints ("checkpoints_off")
        ├── WorkspaceMismatchError      the session's files are in another folder
        │                               ("workspace_mismatch")
        └── WorkspaceExistsError        a fork's workspace folder exists and is not empty
                                        ("workspace_exists")
"""

from __future__ import annotations

from collections.abc import Sequence

from hooks import HarnessError

__all__ = [
    "CheckpointError",
    "CheckpointsOffError",
    "RewindCancelledError",
    "RewindRefusedError",
    "WorkspaceExistsError",
    "WorkspaceMismatchError",
]


class CheckpointError(HarnessError, RuntimeError):
    """Base of the checkpoint errors."""

    code = "checkpoint_error"


class RewindRefusedError(CheckpointError):
    """A rewind would lose work or cannot be done whole; nothing was written.

    Attributes:
        changed: paths (as recorded: relative to the working folder, or absolute) whose
            content differs from what the session last left there: something outside the
            session changed them since. ``force=True`` (``--force``) overwrites them.
        unavailable: paths whose content at the target is not in the checkpoint store (removed
            by ``gc``, or never stored: larger than the store's file cap). ``force=True``
            leaves them as they are and restores the rest.
    """

    code = "rewind_refused"

    def __init__(self, changed: Sequence[str], unavailable: Sequence[str]) -> None:
        parts = []
        if changed:
            parts.append(
                "changed outside the session since it last touched them: " + ", ".join(changed)
            )
        if unavailable:
            parts.append("content not in the checkpoint store: " + ", ".join(unavailable))
        super().__init__(
            "rewind refused, nothing written; " + "; ".join(parts) + " (force to go on anyway)"
        )
        self.changed = tuple(changed)
        self.unavailable = tuple(unavailable)


class RewindCancelledError(CheckpointError):
    """A ``session_before_rewind`` hook cancelled the rewind; ``reason`` is the hook's."""

    code = "rewind_cancelled"

    def __init__(self, reason: str) -> None:
        super().__init__(f"rewind cancelled by a hook: {reason}")
        self.reason = reason


class CheckpointsOffError(CheckpointError):
    """An operation on files needs checkpoints and this harness records none
    (``AgentHarness(checkpoints=...)`` was not given)."""

    code = "checkpoints_off"

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} needs checkpoints: make the harness with AgentHarness(checkpoints=True) "
            "(or --checkpoints)"
        )


class WorkspaceMismatchError(CheckpointError):
    """The session's files were recorded in ``recorded`` but the working folder is
    ``working``: restoring them here would write another folder's files. The session's folder
    is never adopted on its own (docs/security.md): work in it (``cwd=``, ``--cwd``)."""

    code = "workspace_mismatch"

    def __init__(self, recorded: str, working: str) -> None:
        super().__init__(
            f"this session's files are in {recorded!r}, the working folder is {working!r}; "
            f"work in {recorded!r} (--cwd) to restore them"
        )
        self.recorded, self.working = recorded, working


class WorkspaceExistsError(CheckpointError, FileExistsError):
    """A fork's workspace folder exists and is not empty; nothing was written."""

    code = "workspace_exists"

    def __init__(self, path: str) -> None:
        super().__init__(f"{path!r} exists and is not empty; a fork's workspace must be new")
        self.path = path
