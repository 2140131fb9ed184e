"""``from repos.maintenance import verify_file, repair_file, migrate_file``: checking and fixing
one JSONL session file (``harness sessions verify | repair | migrate``; docs/sessions.md).

``verify_file`` reads without writing and lists every :class:`Finding`; ``repair_file`` and
``migrate_file`` rewrite the file atomically under the append lock, keeping the original
beside it.
"""

from ._jsonl.verify import (
    Analysis,
    Finding,
    MigrateResult,
    RepairResult,
    UnrepairableSessionError,
    migrate_file,
    repair_file,
    verify_file,
)

__all__ = [
    "Analysis",
    "Finding",
    "MigrateResult",
    "RepairResult",
    "UnrepairableSessionError",
    "migrate_file",
    "repair_file",
    "verify_file",
]
