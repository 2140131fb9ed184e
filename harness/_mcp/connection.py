"""One MCP server's client, on the official ``mcp`` SDK, in a task of its own.

The SDK's client contexts (anyio task groups and cancel scopes) must be entered and left in
one task, while ``prompt()`` and ``shutdown()`` may come from different ones: so each server
is served by one long-lived task that enters ``mcp.Client``, lists the tools, and waits to be
told to stop. Calls are sent from the caller's task through the connected client. Every wait
is bounded: a start by ``start_timeout_s``, a call by ``call_timeout_s``, a stop by a few
seconds (the SDK closes a stdio server's stdin, then terminates and kills its process group).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import re
import select
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import MCPServer, Server
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from hooks import (
    McpServerErrorEvent,
    McpServerStartEvent,
    McpServerStopEvent,
    ObserverEvent,
    TextContent,
)

from .._fs import absolute_path_variable
from .adapter import McpResult, ToolInfo, adapt_result, adapt_tools
from .config import HttpServer, SseServer, StdioServer
from .errors import McpServerError
from .options import McpOptions

__all__ = ["McpConnection", "is_server_object"]

_log = logging.getLogger("harness.mcp")

State = Literal["stopped", "starting", "ready", "broken", "failed"]
_STOP_WAIT_S = 8.0  # the SDK's own stdio shutdown is bounded by about 6 s
_STDERR_TAIL = 2000
_LIST_PAGES = 20


def is_server_object(value: object) -> bool:
    """Whether ``value`` is an in-process server built with the SDK's server API."""
    return isinstance(value, MCPServer | Server)


class _Stderr:
    """A stdio server's stderr: read by a daemon thread, the last lines kept for messages and
    each line logged at DEBUG (a server may write without end: nothing grows unbounded)."""

    def __init__(self, server: str) -> None:
        read_fd, write_fd = os.pipe()
        self.file = os.fdopen(write_fd, "w")
        self._tail: collections.deque[str] = collections.deque(maxlen=20)
        self._server = server
        self._fd = read_fd
        self._lines = 0
        threading.Thread(target=self._drain, args=(read_fd,), daemon=True).start()

    def _drain(self, fd: int) -> None:
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            for line in pipe:
                text = line[:_STDERR_TAIL].decode("utf-8", "replace").rstrip()
                self._tail.append(text)
                self._lines += 1
                _log.debug("MCP server %r stderr: %r", self._server, text)

    def settle(self, within_s: float = 0.5) -> None:
        """Wait, at most ``within_s`` seconds, until what the server wrote before it died has
        been read: a crash's last words (its stderr) are the message's point."""
        deadline = time.monotonic() + within_s
        seen = -1
        while time.monotonic() < deadline:
            try:
                pending = select.select([self._fd], [], [], 0.02)[0]
            except (OSError, ValueError):  # the drain closed it: all was read
                return
            if not pending and seen == self._lines:
                return
            seen = self._lines

    def close(self) -> None:
        """Close our end of the pipe (the server keeps its own until it exits)."""
        with contextlib.suppress(OSError):
            self.file.close()

    def tail(self) -> str:
        text = " | ".join(line for line in self._tail if line.strip())
        return text[-_STDERR_TAIL:]


_SECRET_NAME = re.compile(r"auth|key|token|secret|pass|cookie|credential", re.I)
_MIN_SECRET_CHARS = 8  # shorter values would blank ordinary words


def _secrets(config: object) -> tuple[str, ...]:
    """The values configured for a server that must never be shown or stored: its
    credential-like environment variables and headers (``GITHUB_TOKEN``, ``Authorization``)
    and its URL's password (an in-process server has none)."""
    found: list[str] = []
    if isinstance(config, StdioServer):
        named = dict(config.env)
    elif isinstance(config, HttpServer | SseServer):
        named = dict(config.headers)
        found.append(urlsplit(config.url).password or "")
    else:
        named = {}
    for name, value in named.items():
        if _SECRET_NAME.search(name):
            found += [value, value.partition(" ")[2]]  # "Bearer <token>": the token alone too
    return tuple(sorted({s for s in found if len(s) >= _MIN_SECRET_CHARS}, key=len, reverse=True))


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    exc = _leaf(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}" + (f" ({exc.filename})" if exc.filename else "")
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class McpConnection:
    """The client of one configured server: start, list, call, refresh, stop.

    ``state``: ``stopped`` (not started, or stopped by ``shutdown``), ``starting``, ``ready``,
    ``broken`` (it failed; the next call or prompt restarts it) or ``failed`` (it failed
    ``max_restarts + 1`` times in a row and is not tried again).
    """

    def __init__(
        self,
        name: str,
        config: object,
        options: McpOptions,
        *,
        cwd: Path,
        emit: Callable[[ObserverEvent], Awaitable[None]],
    ) -> None:
        self.name = name
        self.config = config
        self.options = options
        self.cwd = cwd
        self._emit = emit
        self.state: State = "stopped"
        self.error: str | None = None
        self.tools: tuple[ToolInfo, ...] = ()
        self.notes: tuple[str, ...] = ()
        self.failures = 0
        self._started_once = False
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # made again for each event loop (_reset)
        self._stop: asyncio.Event | None = None
        self._halting: asyncio.Task[None] | None = None
        self._stale = False
        self._secrets = _secrets(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stderr: _Stderr | None = None

    # --- what it is ------------------------------------------------------------------------

    @property
    def transport(self) -> str:
        if isinstance(self.config, StdioServer | HttpServer | SseServer):
            return self.config.transport
        return "in_process"

    def describe(self) -> str:
        """Its command or URL (or the in-process server's name), for messages."""
        if isinstance(self.config, StdioServer | HttpServer | SseServer):
            return self.config.describe()
        return f"in-process {type(self.config).__name__}"

    @property
    def restarts_left(self) -> int:
        limit = self.options.max_restarts
        return max(0, min(limit, limit + 1 - self.failures))

    # --- starting and stopping --------------------------------------------------------------

    async def start(self) -> None:
        """Connect and list the tools, unless connected already; wait at most
        ``start_timeout_s``. A server that failed too often is not tried again.

        Raises:
            McpServerError: it could not start (the message names the command or URL and
                says why; a stdio server's last stderr lines are quoted), or failed before.
        """
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (prompt_sync): the old task is gone
            self._reset(loop)
        async with self._lock:  # parallel calls start it once
            if self._halting is not None:
                await asyncio.shield(self._halting)
            if self.state == "ready":
                return
            if self.state == "failed":
                raise McpServerError(
                    self.name,
                    f"is down: it failed {self.failures} times in a row and is not restarted "
                    f"again (last: {self.error})",
                )
            self.state = "starting"
            ready = loop.create_future()
            self._stop = stop = asyncio.Event()
            self._task = loop.create_task(self._serve(ready, stop), name=f"mcp server {self.name}")
            try:
                async with asyncio.timeout(self.options.start_timeout_s):
                    await asyncio.shield(ready)
            except TimeoutError:
                await self._failed(
                    "start",
                    f"did not start within {self.options.start_timeout_s:g} s ({self.describe()})",
                )
            except McpServerError as exc:
                await self._failed("start", exc.reason)
            restart = self._started_once
            self._started_once = True
            self.state = "ready"
        await self._emit(
            McpServerStartEvent(
                server=self.name,
                transport=self.transport,
                tool_names=[t.name for t in self.tools],
                restart=restart,
            )
        )

    async def _failed(self, phase: Literal["start", "call", "list"], reason: str) -> None:
        """Count a failure, stop what is left of the connection, announce it, raise."""
        self.failures += 1
        self.error = reason
        self.state = "failed" if self.restarts_left == 0 else "broken"
        await self._halt(None, graceful=False)
        await self._emit(
            McpServerErrorEvent(
                server=self.name,
                phase=phase,
                error=self._named(reason),
                restarts_left=self.restarts_left,
            )
        )
        raise McpServerError(self.name, reason)

    def _reset(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = asyncio.Lock()
        self._task = self._stop = self._halting = None
        self._client = None
        if self.state in ("ready", "starting"):
            self.state = "stopped"

    async def _serve(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        """The server's own task: enter the client, list the tools, wait for ``stop``."""
        try:
            async with self._client_context() as client:
                listed = await self._list(client)
                self.tools, notes = tuple(listed[0]), listed[1]
                self.notes = tuple(notes)
                for note in notes:
                    _log.warning("MCP server %r: %s", self.name, note)
                self._client = client
                ready.set_result(None)
                listener = None
                capabilities = client.server_capabilities.tools
                if (
                    client.protocol_version in MODERN_PROTOCOL_VERSIONS
                    and capabilities is not None
                    and capabilities.list_changed
                ):
                    listener = asyncio.create_task(self._listen(client))
                try:
                    await stop.wait()
                finally:
                    self._client = None
                    if listener is not None:
                        listener.cancel()
                        await asyncio.gather(listener, return_exceptions=True)
        except Exception as exc:  # the reason reaches the caller; this task only reports it
            reason = self._start_failure(exc)
            if not ready.done():
                ready.set_exception(McpServerError(self.name, reason))
            else:
                _log.info("MCP server %r ended: %s", self.name, reason)
        finally:
            self._client = None
            if self._stderr is not None:
                self._stderr.close()
            if not ready.done():  # cancelled before it was ready
                ready.set_exception(McpServerError(self.name, "was stopped while starting"))
            # Mark the outcome as seen: a starter that timed out no longer awaits it.
            if not ready.cancelled():
                ready.exception()

    def _start_failure(self, exc: BaseException) -> str:
        leaf = _leaf(exc)
        what = self.describe()
        if isinstance(leaf, OSError) and isinstance(self.config, StdioServer):
            return self._redact(f"could not start: the command {what!r} failed: {_describe(leaf)}")
        tail = self._stderr.tail() if self._stderr is not None else ""
        said = f"; its stderr ends: {tail}" if tail else ""
        return self._redact(f"could not start ({what}): {_describe(leaf)}{said}")

    @contextlib.asynccontextmanager
    async def _client_context(self) -> AsyncIterator[Client]:
        self._stderr = None
        async with contextlib.AsyncExitStack() as stack:
            client = Client(
                await self._transport(stack), cache=None, message_handler=self._on_message
            )
            try:
                async with client:
                    if self._stderr is not None:
                        self._stderr.close()  # the child holds its own end now
                    yield client
            finally:
                if self._stderr is not None:
                    self._stderr.close()

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        """What ``mcp.Client`` connects through: a transport, or the server object itself."""
        config = self.config
        if isinstance(config, StdioServer):
            self._stderr = _Stderr(self.name)
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                # where the project is, even when the server runs elsewhere (review 10, 2)
                # the server's program is found on $PATH's absolute entries only, never in
                # the working folder through an empty one (review 13, finding 13) nor
                # an absolute one (an activated .venv/bin: review 15, finding 2)
                env={
                    "PATH": absolute_path_variable(outside=self.cwd),
                    "HARNESS_PROJECT_DIR": str(self.cwd),
                    **config.env,
                },
                cwd=config.cwd or str(self.cwd),
            )
            return stdio_client(params, errlog=self._stderr.file)
        if isinstance(config, HttpServer):
            # The SDK leaves a client it is given open: ours is closed by the stack.
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=dict(config.headers)))
            return streamable_http_client(config.url, http_client=http)
        if isinstance(config, SseServer):
            return sse_client(config.url, headers=dict(config.headers))
        return config  # an in-process server object

    async def _list(self, client: Client) -> tuple[list[ToolInfo], list[str]]:
        listed: list[Mapping[str, Any]] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            listed.extend(t.model_dump(mode="json", by_alias=True) for t in page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return adapt_tools(self.name, listed)

    async def _on_message(self, message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self._stale = True

    async def _listen(self, client: Client) -> None:
        """Modern (2026-07-28) servers send list changes on a ``subscriptions/listen`` stream."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._stale = True
        except Exception as exc:  # the tools stay as listed; a refresh at a prompt still works
            _log.info("MCP server %r: listening for tool changes ended: %s", self.name, exc)

    async def _halt(
        self, reason: Literal["shutdown", "restart"] | None, *, graceful: bool = True
    ) -> None:
        """Stop the serving task, within a bounded time: told to stop (``graceful``), or
        cancelled (a start that failed); ``reason`` None: no stop event."""
        task, stop = self._task, self._stop
        self._task = None
        if task is None:
            return
        if stop is not None and graceful:
            stop.set()
        else:
            task.cancel("the MCP server failed to start")
        done, _ = await asyncio.wait({task}, timeout=_STOP_WAIT_S)
        if not done:
            task.cancel("the MCP server did not stop in time")
            await asyncio.wait({task}, timeout=2.0)
        if reason is not None:
            await self._emit(McpServerStopEvent(server=self.name, reason=reason))

    async def stop(self) -> None:
        """Stop the server (``shutdown()``); a later start starts it again."""
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            return  # its loop is gone, and the task with it
        if self._halting is not None:
            await asyncio.shield(self._halting)
        was_running = self._task is not None
        await self._halt("shutdown" if was_running else None)
        if self.state in ("ready", "starting"):
            self.state = "stopped"

    def _broken_later(self, phase: Literal["call"], reason: str) -> None:
        """After a crash or a timeout: the connection is stopped in the background (the
        caller returns its error at once) and the next call starts it again."""
        self.failures += 1
        self.error = reason
        self.state = "failed" if self.restarts_left == 0 else "broken"
        left = self.restarts_left

        async def halt() -> None:
            try:
                await self._halt("restart")
                await self._emit(
                    McpServerErrorEvent(
                        server=self.name, phase=phase, error=self._named(reason), restarts_left=left
                    )
                )
            finally:
                self._halting = None

        self._halting = asyncio.get_running_loop().create_task(halt())

    # --- using it ----------------------------------------------------------------------------

    async def call(self, remote_name: str, arguments: Mapping[str, Any]) -> McpResult:
        """Call one tool, (re)starting the server first when it is not ready.

        Raises:
            McpServerError: it could not start, crashed, or did not answer within
                ``call_timeout_s`` (it is then restarted at the next call, at most
                ``max_restarts`` times in a row).
        """
        await self.start()
        client = self._client
        if client is None:
            raise McpServerError(self.name, "is not connected")
        timeout = self.options.call_timeout_s
        try:
            async with asyncio.timeout(timeout):
                result = await client.call_tool(remote_name, dict(arguments))
        except TimeoutError:
            reason = (
                f"did not answer the call of {remote_name!r} within {timeout:g} s; it is "
                "restarted at the next call"
            )
            self._broken_later("call", reason)
            raise McpServerError(self.name, reason) from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:  # the server answered with an error
                text = f"MCP server {self.name!r} refused the call: {exc.error.message}"
                text = self._redact(text)
                return adapt_result({"content": [{"type": "text", "text": text}], "isError": True})
            reason = f"closed the connection during the call of {remote_name!r} (crashed?)"
            self._broken_later("call", self._with_stderr(reason))
            raise McpServerError(self.name, self._with_stderr(reason)) from None
        except Exception as exc:  # a broken transport or an answer that is not MCP
            reason = f"failed during the call of {remote_name!r}: {_describe(exc)}"
            self._broken_later("call", self._with_stderr(reason))
            raise McpServerError(self.name, self._with_stderr(reason)) from None
        self.failures = 0
        adapted = adapt_result(result.model_dump(mode="json", by_alias=True))
        if not adapted.is_error or not self._secrets:
            return adapted
        blocks = tuple(
            TextContent(text=self._redact(b.text)) if isinstance(b, TextContent) else b
            for b in adapted.content
        )
        return McpResult(content=blocks, details=adapted.details, is_error=True)

    def _named(self, reason: str) -> str:
        return str(McpServerError(self.name, reason))

    def _with_stderr(self, reason: str) -> str:
        if self._stderr is not None:
            self._stderr.settle()
        tail = self._stderr.tail() if self._stderr is not None else ""
        return self._redact(f"{reason}; its stderr ends: {tail}" if tail else reason)

    def _redact(self, text: str) -> str:
        """``text`` without the server's configured secrets: a server may print its
        environment when it crashes, or echo a header in an error, and these messages are
        stored in the session and shown."""
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text

    async def refresh(self) -> bool:
        """List the tools again when the server said they changed; True if it did. A
        failure keeps the old list and is announced (``phase="list"``)."""
        client = self._client
        if not self._stale or client is None or self.state != "ready":
            return False
        self._stale = False
        try:
            async with asyncio.timeout(self.options.start_timeout_s):
                tools, notes = await self._list(client)
        except Exception as exc:  # the old list stays usable
            await self._emit(
                McpServerErrorEvent(
                    server=self.name,
                    phase="list",
                    error=self._redact(
                        self._named(f"could not list its tools again: {_describe(exc)}")
                    ),
                    restarts_left=self.restarts_left,
                )
            )
            return False
        self.tools, self.notes = tuple(tools), tuple(notes)
        return True
