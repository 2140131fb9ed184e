"""The one base class of every error this library raises.

Tree (each package adds its own leaves in its ``_errors.py``)::

    HarnessError
    ├── repos:   SessionError and its subclasses (not found, corrupt, invalid id, ...)
    └── harness: BusyError, ProviderError, ToolError, ...

Every class carries a stable snake_case ``code``; tests and the CLI use codes, never wording.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["HarnessError", "HookTimeoutError"]


class HarnessError(Exception):
    """Base of all errors raised by ``harness``, ``repos`` and ``hooks``.

    Attributes:
        code: stable identifier of the failure, frozen once released.
    """

    code: ClassVar[str] = "harness_error"


class HookTimeoutError(HarnessError, TimeoutError):
    """An async receiver did not return within its timeout (``connect(..., timeout_s=...)``).

    Reported as ``handler_error``; at ``tool_call`` it blocks the call (fails closed).

    Attributes:
        event_name: the signal whose receiver timed out.
        receiver: the receiver's ``module.qualname``.
        timeout_s: the limit it had, in seconds.
    """

    code: ClassVar[str] = "hook_timeout"

    def __init__(self, event_name: str, receiver: str, timeout_s: float) -> None:
        super().__init__(
            f"{event_name} receiver {receiver} did not return within {timeout_s:g} s "
            "(raise its timeout with connect(..., timeout_s=...), or None for no limit)"
        )
        self.event_name, self.receiver, self.timeout_s = event_name, receiver, timeout_s
