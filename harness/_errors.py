"""Errors raised by the harness layer.

Tree::

    HarnessError (hooks)
    ├── BusyError            another operation is running on this harness ("busy")
    ├── ProviderError        a model request failed ("provider_error"); ``retryable`` says whether
    │                        trying again may help; ``status`` is the HTTP status if there was one
    ├── ToolError            a tool could not run (bad input, path outside the cwd): "tool_error"
    └── SyncInLoopError      a ``*_sync`` method was called inside a running event loop
"""

from __future__ import annotations

from hooks import HarnessError

__all__ = ["BusyError", "ProviderError", "SyncInLoopError", "ToolError"]


class BusyError(HarnessError, RuntimeError):
    """Raised when an operation starts while another runs on the same harness."""

    code = "busy"

    def __init__(self, operation: str, running: str) -> None:
        super().__init__(
            f"cannot start {operation}: {running} is still running on this harness "
            "(await it, or call abort() first)"
        )
        self.operation, self.running = operation, running


class ProviderError(HarnessError):
    """A model request failed.

    Attributes:
        retryable: True for overloaded, rate-limit, 5xx and connection errors.
        status: HTTP status code, or None for errors without one (connection, mid-stream).
        error_type: the provider's error type (e.g. Anthropic's ``overloaded_error``), or "".
    """

    code = "provider_error"

    def __init__(
        self, message: str, *, retryable: bool, status: int | None = None, error_type: str = ""
    ) -> None:
        super().__init__(message)
        self.message, self.retryable, self.status, self.error_type = (
            message,
            retryable,
            status,
            error_type,
        )


class ToolError(HarnessError):
    """A tool refused to run or failed; the loop turns it into an ``is_error`` tool result."""

    code = "tool_error"


class SyncInLoopError(HarnessError, RuntimeError):
    """A ``*_sync`` convenience was called from inside a running event loop."""

    code = "sync_in_loop"

    def __init__(self, name: str) -> None:
        super().__init__(
            f"{name}_sync() cannot run inside a running event loop; use 'await {name}(...)'"
        )
