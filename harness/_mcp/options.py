"""How the harness runs its MCP servers: timeouts and restarts."""

from __future__ import annotations

from attrs import field, frozen, validators

__all__ = ["McpOptions"]


@frozen(kw_only=True)
class McpOptions:
    """Timeouts and restarts of every MCP server of a harness.

    Attributes:
        start_timeout_s: seconds a server may take to start and list its tools (Claude Code's
            ``MCP_TIMEOUT`` is the same idea); also the bound on listing them again.
        call_timeout_s: seconds one tool call may take; a call past it gets an error result
            naming the server, which is then restarted at its next call.
        max_restarts: restarts tried after failures in a row (a failed start, a crash, a
            timeout); one more failure and the server stays down, its tools withdrawn. A
            call that succeeds starts the count again.
    """

    start_timeout_s: float = field(default=30.0, validator=validators.gt(0))
    call_timeout_s: float = field(default=120.0, validator=validators.gt(0))
    max_restarts: int = field(default=3, validator=validators.ge(0))
