"""MCP servers as tools, on the official ``mcp`` SDK (the ``mcp`` extra). ``AgentHarness``
wires these; the logic lives here.

Modules: ``config`` (server objects, settings files, ``${VAR}`` expansion), ``adapter``
(tool lists and results as ours, with every bound on what a server may send), ``connection``
(one server's client in its own task; imports the SDK), ``servers`` (a harness's servers:
start, offer, journal, stop), ``options``, ``errors``. docs/mcp.md is the guide.
"""

from .adapter import mcp_tool_name
from .config import (
    MCP_JSON,
    HttpServer,
    McpConfig,
    McpServerConfig,
    SkippedServer,
    SseServer,
    StdioServer,
    add_mcp_server,
    load_mcp_config,
    mcp_server_entry,
    remove_mcp_server,
)
from .errors import McpConfigError, McpNotInstalledError, McpServerError
from .options import McpOptions
from .servers import (
    MCP_OFFER_TYPE,
    McpServers,
    McpServerStatus,
    offered_servers,
    report_gone,
    require_sdk,
)

__all__ = [
    "MCP_JSON",
    "MCP_OFFER_TYPE",
    "HttpServer",
    "McpConfig",
    "McpConfigError",
    "McpNotInstalledError",
    "McpOptions",
    "McpServerConfig",
    "McpServerError",
    "McpServerStatus",
    "McpServers",
    "SkippedServer",
    "SseServer",
    "StdioServer",
    "add_mcp_server",
    "load_mcp_config",
    "mcp_server_entry",
    "mcp_tool_name",
    "offered_servers",
    "remove_mcp_server",
    "report_gone",
    "require_sdk",
]
