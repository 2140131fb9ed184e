"""The errors of workspace checkpoints, rewinds and forks that carry files.

Tree::

    HarnessError (hooks)
    └── CheckpointError                 base of this package's errors ("checkpoint_error")
        ├── RewindRefusedError          files changed outside the session, or contents missing
        │                               ("rewind_refused")
        ├── RewindCancelledError        a session_before_rewind hook cancelled ("rewind_cancelled")
        ├── CheckpointsOffError         the harness records no checkpoints ("checkpoints_off")
        ├── NoCheckpointsError          the session holds no checkpoints ("no_checkpoints")
        ├── WorkspaceMismatchError      the session's files are in another folder
        │                               ("workspace_mismatch")
        └── WorkspaceExistsError        a fork's workspace folder exists and is not empty
                                        ("workspace_exists")
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Final

from hooks import HarnessError

__all__ = [
    "CheckpointError",
    "CheckpointsOffError",
    "NoCheckpointsError",
    "RewindCancelledError",
    "RewindRefusedError",
    "WorkspaceExistsError",
    "WorkspaceMismatchError",
]


MAX_NAMED: Final = 20
"""The most paths an error's message names of each kind; its attributes hold them all."""


def _names(paths: Sequence[str], sep: str = ", ") -> str:
    """``paths`` joined for a message: the first :data:`MAX_NAMED`, then how many more (a
    rewind of thousands of files must not print them all on one line)."""
    shown = sep.join(paths[:MAX_NAMED])
    more = len(paths) - MAX_NAMED
    return f"{shown}{sep}and {more} more" if more > 0 else shown


class CheckpointError(HarnessError, RuntimeError):
    """Base of the checkpoint errors.

    ``str()`` speaks the Python API's language (``force=True``, ``cwd=``); ``cli_message``,
    when not None, is the same message for the command line, naming its flags (``--force``,
    ``--cwd``, ``harness run --checkpoints``) instead: the CLI prints that one."""

    code = "checkpoint_error"
    cli_message: str | None = None


class RewindRefusedError(CheckpointError):
    """A rewind would lose work or cannot be done whole, or a fork's folder could not hold the
    files as they were at its entry (``fork=True``: only ``unavailable`` and ``unstored``, and
    no ``force``); nothing was written.

    Attributes:
        unsafe: recorded paths a rewind never writes, each with why: absolute, through a
            symlink, in git's folder, the store or the sessions, or not a normalised path at
            all (a ``..``, a NUL; an entry's change that could not be read). ``force=True``
            skips them; it never writes them.
        changed: paths (as recorded: relative to the working folder, or absolute) whose
            content differs from what the session last left there: something outside the
            session changed them since. ``force=True`` (``--force``) overwrites them.
        unavailable: paths whose content at the target is not in the checkpoint store (removed
            by ``gc``, or never stored: larger than the store's file cap). ``force=True``
            leaves them as they are and restores the rest.
        unstored: paths whose content at the target, or as the session last left it, was
            never stored: a ``write``/``edit`` stores its content just after the call, and
            the process ended (or the store failed) before it did. ``force=True`` leaves
            those whose content at the target is missing as they are, and overwrites the
            others.
        store: the checkpoint store looked in for the contents (when some were missing).
        elsewhere: the user data folder's store, when it holds contents missing from
            ``store`` (a session recorded with ``checkpoints=True``, rewound with another).
        unrecordable: recorded paths changed outside the session into something a rewind
            cannot record (so could not undo the loss of), each with why: no longer a
            regular file (a symlink, a folder, a FIFO), unreadable, or past the store's file
            cap. ``force=True`` leaves them as they are (a symlink is never followed).
    """

    code = "rewind_refused"

    def __init__(
        self,
        changed: Sequence[str],
        unavailable: Sequence[str],
        unsafe: Sequence[str] = (),
        unstored: Sequence[str] = (),
        unrecordable: Sequence[str] = (),
        *,
        fork: bool = False,
        store: str | None = None,
        elsewhere: str | None = None,
    ) -> None:
        parts = []
        looked = f" {store}" if store else ""
        if unsafe:
            parts.append("entries name paths a rewind never writes: " + _names(unsafe, "; "))
        if changed:
            parts.append(
                "changed outside the session since it last touched them: " + _names(changed)
            )
        if unrecordable:
            parts.append(
                "changed outside the session into what a rewind cannot record, so never "
                "replaces: " + _names(unrecordable)
            )
        if unavailable:
            parts.append(f"content not in the checkpoint store{looked}: " + _names(unavailable))
        if unstored:
            parts.append(
                f"content never stored in the checkpoint store{looked} (the process ended, or "
                "the store failed, before the checkpoint of a tool call was stored): "
                + _names(unstored)
            )
        if elsewhere:
            # Not lost: the session was recorded with another store (code's checkpoints=True
            # uses the user data folder's; the command line the one beside --root).
            parts.append(
                f"the store {elsewhere} holds them: the session was recorded with that store"
            )
        if fork:
            # A fork has no force: its folder would silently hold other contents than the
            # entry's (issue 26 trial, finding 7).
            found = "fork refused, nothing written; " + "; ".join(parts)
            again = "fork at another entry, or without {} to fork the conversation alone"
            super().__init__(f"{found} ({again.format('workspace=')})")
            self.cli_message = f"{found} ({again.format('--workspace')})"
        else:
            never = "; those paths are never written" if unsafe or unrecordable else ""
            found = "rewind refused, nothing written; " + "; ".join(parts)
            super().__init__(f"{found} (force=True to go on anyway{never})")
            self.cli_message = f"{found} (--force to go on anyway{never})"
        self.changed = tuple(changed)
        self.unavailable = tuple(unavailable)
        self.unsafe = tuple(unsafe)
        self.unstored = tuple(unstored)
        self.unrecordable = tuple(unrecordable)
        self.store, self.elsewhere = store, elsewhere


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
            f"{what} needs checkpoints: make the harness with AgentHarness(checkpoints=True)"
        )
        self.cli_message = (
            "this needs checkpoints, and they are off: start with --checkpoints (or set "
            '"checkpoints": true in the user settings)'
        )


class NoCheckpointsError(CheckpointError):
    """The session holds no checkpoint at all (it was recorded without checkpoints, or no tool
    call of it changed a file): there is nothing to rewind its files with. ``conversation``
    says, in the CLI's words, how to move the conversation alone (``--conversation-only``)."""

    code = "no_checkpoints"

    def __init__(self, *, conversation: str = "--conversation-only") -> None:
        found = (
            "this session has no checkpoints, so its files cannot be rewound: no file change "
            "was recorded in it (it was recorded without checkpoints, or changed no file)"
        )
        super().__init__(f"{found}; record them with AgentHarness(checkpoints=True)")
        self.cli_message = (
            f"{found}; record them with `harness run --checkpoints` (or `harness chat "
            '--checkpoints`, or "checkpoints": true in the user settings); '
            f"{conversation} moves the conversation alone"
        )


class WorkspaceMismatchError(CheckpointError):
    """The session's files were recorded in ``recorded`` but the working folder is
    ``working`` (or ``recorded`` is no absolute path: ``.``, relative, empty): restoring them
    here would write another folder's files. The session's folder is never adopted on its own
    (docs/security.md): work in it (``cwd=``, ``--cwd``). ``advice`` replaces the default
    advice ("work in RECORDED (cwd=) to restore them"; ``--cwd`` in ``cli_message``) where that
    does not apply."""

    code = "workspace_mismatch"

    def __init__(self, recorded: str, working: str, *, advice: str | None = None) -> None:
        if os.path.isabs(recorded):
            found = f"this session's files are in {recorded!r}, the working folder is {working!r}"
            message = f"{found}; " + (advice or f"work in {recorded!r} (cwd=) to restore them")
            cli = f"{found}; " + (advice or f"work in {recorded!r} (--cwd) to restore them")
        else:
            message = cli = (
                f"this session records its folder as {recorded!r}, not an absolute path: its "
                f"files are not restored in {working!r} or anywhere else"
            )
        super().__init__(message)
        self.cli_message = cli
        self.recorded, self.working = recorded, working


class WorkspaceExistsError(CheckpointError, FileExistsError):
    """A fork's workspace folder exists and is not empty; nothing was written."""

    code = "workspace_exists"

    def __init__(self, path: str) -> None:
        super().__init__(f"{path!r} exists and is not empty; a fork's workspace must be new")
        self.path = path
