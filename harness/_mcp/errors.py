"""Errors of the MCP client.

Tree::

    HarnessError (hooks)
    ├── McpNotInstalledError   MCP servers are configured but the ``mcp`` extra is not
    │                          installed ("mcp_not_installed")
    ├── McpConfigError         a server's configuration cannot be used: a bad name, shape,
    │                          or a ``${VAR}`` that is not set ("mcp_config")
    └── McpServerError         a server could not start, crashed or timed out
                               ("mcp_server_failed"); ``server``, ``reason``
"""

from __future__ import annotations

from hooks import HarnessError

__all__ = ["McpConfigError", "McpNotInstalledError", "McpServerError"]

INSTALL_HINT = "pip install 'jsonl-harness[mcp]'"


class McpNotInstalledError(HarnessError, ImportError):
    """MCP servers are configured, and the official ``mcp`` SDK (the ``mcp`` extra) is not
    installed. ``what`` says where the servers come from."""

    code = "mcp_not_installed"

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} configure MCP servers, but the 'mcp' package is not installed: {INSTALL_HINT}"
        )
        self.what = what


class McpConfigError(HarnessError, ValueError):
    """A server's configuration cannot be used; ``source`` is where it came from (``code``,
    or a settings file's path) and ``server`` its name (None: the file as a whole)."""

    code = "mcp_config"

    def __init__(self, source: str, server: str | None, reason: str) -> None:
        where = f"{source}: server {server!r}" if server is not None else source
        super().__init__(f"{where}: {reason}")
        self.source, self.server, self.reason = source, server, reason


class McpServerError(HarnessError, RuntimeError):
    """An MCP server failed: it could not start (the message names its command or URL),
    crashed, or did not answer in time. ``server`` is its configured name."""

    code = "mcp_server_failed"

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"MCP server {server!r} {reason}")
        self.server, self.reason = server, reason
