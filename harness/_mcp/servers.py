"""A harness's MCP servers: started together, offered as tools, journaled, stopped together.

``AgentHarness`` holds one :class:`McpServers` when it has servers and only calls it: at a
prompt's start (:meth:`start`), before each turn (:meth:`prepare_turn`), for the offered tools
(:meth:`tools`) and at :meth:`shutdown`. The SDK is imported only here and in
``connection.py``, so the core install never needs it.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import frozen

from hooks import JSONValue, McpServerErrorEvent, ObserverEvent
from repos import CustomEntry, Entry

from .._tools.base import Tool, ToolResult, ToolRun
from .config import HttpServer, SseServer, StdioServer, check_server_name
from .errors import McpConfigError, McpNotInstalledError, McpServerError
from .options import McpOptions

__all__ = ["MCP_OFFER_TYPE", "McpServerStatus", "McpServers", "offered_servers", "require_sdk"]

MCP_OFFER_TYPE = "harness.mcp.offer"
"""``customType`` of the session entry recording the MCP tools offered, by server:
``{"servers": {"<server>": ["mcp__<server>__<tool>", ...]}}``, written at a prompt's start
when it changed."""


def require_sdk(what: str) -> None:
    """Raise :class:`McpNotInstalledError` naming the extra when the ``mcp`` SDK is missing."""
    try:
        found = importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules says "absent"
        found = False
    if not found:
        raise McpNotInstalledError(what)


def offered_servers(branch: Sequence[Entry]) -> dict[str, tuple[str, ...]]:
    """The MCP tools the latest offer entry on ``branch`` recorded, by server (a session is
    untrusted: anything but a mapping of server names to lists of strings is ignored)."""
    for entry in reversed(branch):
        if isinstance(entry, CustomEntry) and entry.custom_type == MCP_OFFER_TYPE:
            data = entry.data
            servers = data.get("servers") if isinstance(data, Mapping) else None
            if not isinstance(servers, Mapping):
                return {}
            return {
                str(name): tuple(t for t in tools if isinstance(t, str))
                for name, tools in servers.items()
                if isinstance(tools, list)
            }
    return {}


@frozen(kw_only=True)
class McpServerStatus:
    """One server as the harness sees it.

    Attributes:
        name: its configured name.
        transport: ``stdio``, ``http``, ``sse`` or ``in_process``.
        target: its command line or URL.
        state: ``stopped`` (not started yet, or shut down), ``starting``, ``ready``,
            ``broken`` (failed; restarted at its next call) or ``failed`` (down for good).
        tools: the tools it offers, by our name (``mcp__<server>__<tool>``).
        error: the last failure, naming the server's command or URL; None if none.
        notes: tools it listed that were left out, and why.
        restarts_left: restarts still tried after failures.
    """

    name: str
    transport: str
    target: str
    state: str
    tools: tuple[str, ...]
    error: str | None
    notes: tuple[str, ...]
    restarts_left: int


class McpServers:
    """The MCP servers of one harness (see the module docstring).

    Raises (on construction):
        McpNotInstalledError: the ``mcp`` extra is not installed.
        McpConfigError: a bad server name.
        TypeError: a server that is neither a config object nor an SDK server object.
    """

    def __init__(
        self,
        servers: Mapping[str, object],
        options: McpOptions,
        *,
        cwd: Path,
        emit: Callable[[ObserverEvent], Awaitable[None]],
    ) -> None:
        require_sdk("AgentHarness(mcp_servers=...)")
        from .connection import McpConnection, is_server_object

        self._emit = emit
        self._connections = {}
        lowered: set[str] = set()
        for name, config in servers.items():
            check_server_name(name)
            if name.lower() in lowered:  # rules compare names without case
                raise McpConfigError(
                    "code", name, "a server name must differ from the others in more than case"
                )
            lowered.add(name.lower())
            if not isinstance(config, StdioServer | HttpServer | SseServer) and (
                not is_server_object(config)
            ):
                raise TypeError(
                    f"MCP server {name!r}: expected StdioServer, HttpServer, SseServer or an "
                    f"mcp server object (MCPServer, Server), not {type(config).__name__}"
                )
            self._connections[name] = McpConnection(name, config, options, cwd=cwd, emit=emit)
        self._tools: dict[str, Tool] = {}
        self._build_tools()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._connections)

    async def start(self) -> None:
        """Start every server not running (in parallel) that may still be tried; a failure
        is announced (``mcp_server_error``) and costs only that server's tools."""
        waiting = [
            c.start() for c in self._connections.values() if c.state in ("stopped", "broken")
        ]
        if waiting:
            for outcome in await asyncio.gather(*waiting, return_exceptions=True):
                if isinstance(outcome, BaseException) and not isinstance(outcome, McpServerError):
                    raise outcome
        self._build_tools()

    async def prepare_turn(self) -> bool:
        """Before a turn: list the tools again of servers that said they changed
        (``tools/list_changed``); True if the offered tools changed."""
        before = self.offer()
        for connection in self._connections.values():
            await connection.refresh()
        self._build_tools()
        return self.offer() != before

    def tools(self) -> dict[str, Tool]:
        """The tools of the servers that are up (or broken, to be restarted at the call)."""
        return dict(self._tools)

    def offer(self) -> dict[str, tuple[str, ...]]:
        """Tool names offered now, by server (what the session journals)."""
        offer: dict[str, tuple[str, ...]] = {}
        for tool_name in self._tools:
            server = tool_name.split("__", 2)[1]
            offer[server] = (*offer.get(server, ()), tool_name)
        return offer

    def status(self) -> tuple[McpServerStatus, ...]:
        return tuple(
            McpServerStatus(
                name=c.name,
                transport=c.transport,
                target=c.describe(),
                state=c.state,
                tools=tuple(t.name for t in c.tools) if c.state != "failed" else (),
                error=c.error,
                notes=c.notes,
                restarts_left=c.restarts_left,
            )
            for c in self._connections.values()
        )

    async def report_gone(self, before: Mapping[str, Sequence[str]]) -> None:
        """After a start: say which servers the session offered tools of before and that are
        not configured, or not up, now (``mcp_server_error`` with ``phase="restore"``)."""
        await report_gone(before, self.offer(), set(self._connections), self._emit)

    async def shutdown(self) -> None:
        """Stop every server (in parallel, each within a bounded time)."""
        await asyncio.gather(*(c.stop() for c in self._connections.values()))

    def _build_tools(self) -> None:
        tools: dict[str, Tool] = {}
        for connection in self._connections.values():
            if connection.state == "failed":
                continue  # never offer a dead tool
            for info in connection.tools:
                hints = ["read-only" if info.read_only else None]
                if info.destructive and not info.read_only:
                    hints.append("destructive")
                shown = "; ".join(h for h in hints if h)
                note = f"\n\n[MCP server {connection.name}{'; ' + shown if shown else ''}]"
                tools[info.name] = Tool(
                    name=info.name,
                    description=info.description + note,
                    parameters=info.parameters,
                    execute=_caller(connection, info.remote_name),
                    kind="other",
                    # A read-only hint lets plan mode and the default mode run it unasked;
                    # everything else needs the supervisor's approval (docs/mcp.md).
                    controlled=not info.read_only,
                )
        self._tools = tools


async def report_gone(
    before: Mapping[str, Sequence[str]],
    now: Mapping[str, Sequence[str]],
    configured: set[str],
    emit: Callable[[ObserverEvent], Awaitable[None]],
) -> None:
    """Announce every server whose tools the session offered before and that offers none now
    (``phase="restore"``), saying whether it is not configured or not up."""
    for server, tools in before.items():
        if not tools or now.get(server):
            continue
        why = "is not configured in this harness" if server not in configured else "is not up"
        shown = ", ".join(list(tools)[:5]) + (", ..." if len(tools) > 5 else "")
        await emit(
            McpServerErrorEvent(
                server=server,
                phase="restore",
                error=f"MCP server {server!r} {why}: the session offered its tools ({shown}) "
                "before, and they are not offered now",
            )
        )


def _caller(connection: Any, remote_name: str) -> Callable[..., Awaitable[ToolResult]]:
    async def execute(arguments: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        try:
            result = await connection.call(remote_name, arguments)
        except McpServerError as exc:
            return ToolResult(content=str(exc), is_error=True)
        return ToolResult(content=result.content, details=result.details, is_error=result.is_error)

    return execute
