"""The stdio MCP server of ``bench_mcp.py``: one read-only ``echo`` tool (the mcp SDK's
``MCPServer``)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("bench")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Echo."""
    return text


if __name__ == "__main__":
    server.run()
