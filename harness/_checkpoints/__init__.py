"""Workspace checkpoints tied to session entries: what each tool call changed, rewinding the
files to any entry, and forks that carry the files (docs/checkpoints.md).

``AgentHarness(checkpoints=True)`` wires it: :class:`Checkpoints` records a ``harness.checkpoint``
entry per tool call that changed the workspace, contents in a :class:`CheckpointStore`;
``rewind_files``, ``navigate_tree(with_files=True)`` and ``fork(..., workspace=...)`` use
the operations here.
"""

from __future__ import annotations

from .capture import Checkpoints
from .errors import (
    CheckpointError,
    CheckpointsOffError,
    NoCheckpointsError,
    RewindCancelledError,
    RewindRefusedError,
    WorkspaceExistsError,
    WorkspaceMismatchError,
)
from .fork import Materialized
from .operations import announce_rewind, fork_with_files, prepare_rewind, rewind_files
from .records import (
    CHECKPOINT_ENTRY,
    REWIND_ENTRY,
    Change,
    FileState,
    Missed,
    Pending,
    conversation_landing,
    has_records,
    read_records,
    referenced_blobs,
)
from .rewind import RewindResult
from .scan import DEFAULT_MAX_FILES, DEFAULT_MAX_SCAN_BYTES
from .settings import checkpoints_setting
from .store import DEFAULT_MAX_BYTES, DEFAULT_MAX_FILE_BYTES, CheckpointStore, GcReport

__all__ = [
    "CHECKPOINT_ENTRY",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_FILES",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_SCAN_BYTES",
    "REWIND_ENTRY",
    "Change",
    "CheckpointError",
    "CheckpointStore",
    "Checkpoints",
    "CheckpointsOffError",
    "FileState",
    "GcReport",
    "Materialized",
    "Missed",
    "NoCheckpointsError",
    "Pending",
    "RewindCancelledError",
    "RewindRefusedError",
    "RewindResult",
    "WorkspaceExistsError",
    "WorkspaceMismatchError",
    "announce_rewind",
    "checkpoints_setting",
    "conversation_landing",
    "fork_with_files",
    "has_records",
    "prepare_rewind",
    "read_records",
    "referenced_blobs",
    "rewind_files",
]
