"""The error a summariser raises.

Tree::

    HarnessError (hooks)
    └── SummarizationError   the model could not produce a summary ("summarization_failed")
"""

from __future__ import annotations

from hooks import HarnessError

from .._errors import ProviderError

__all__ = ["SummarizationError"]


class SummarizationError(HarnessError, RuntimeError):
    """A summary could not be generated: the request failed, or the reply had no text.

    pi reports these as ``summarization_failed`` (``compaction.ts``, ``branch-summarization.ts``).

    Attributes:
        kind: which summary failed: ``history``, ``turn_prefix`` or ``branch``.
        error: the provider's error when the request failed, else None (an empty or refused
            reply).
    """

    code = "summarization_failed"

    def __init__(self, kind: str, reason: str, *, error: ProviderError | None = None) -> None:
        super().__init__(f"{kind} summary failed: {reason}")
        self.kind, self.reason, self.error = kind, reason, error
