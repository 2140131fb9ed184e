"""The one base class of every error this library raises.

Tree (each package adds its own leaves in its ``_errors.py``)::

    HarnessError
    ├── repos:   SessionError and its subclasses (not found, corrupt, invalid id, ...)
    └── harness: BusyError, ProviderError, ToolError, ...

Every class carries a stable snake_case ``code``; tests and the CLI use codes, never wording.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["HarnessError"]


class HarnessError(Exception):
    """Base of all errors raised by ``harness``, ``repos`` and ``hooks``.

    Attributes:
        code: stable identifier of the failure, frozen once released.
    """

    code: ClassVar[str] = "harness_error"
