"""``harness mcp list|add|remove``: the MCP servers of the settings files (docs/mcp.md), and
what ``run`` and ``chat`` share to use them.

Servers come from the user's ``settings.json`` and, when the project is trusted
(``--trust-project``), its ``.mcp.json`` and ``.harness/settings.json``, in Claude Code's
shape. Everything a server says (tool names, descriptions, errors) is printed through the
terminal sink, escaped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import click

from repos import MemorySessionRepo

from .. import (
    MCP_JSON,
    AgentHarness,
    HttpServer,
    McpConfig,
    McpConfigError,
    McpNotInstalledError,
    McpServerErrorEvent,
    SseServer,
    StdioServer,
    add_mcp_server,
    load_mcp_config,
    mcp_server_entry,
    remove_mcp_server,
    user_settings_path,
)
from .._mcp.servers import require_sdk
from ._common import run_async
from ._escape import echo, json_line

__all__ = ["configured_mcp_servers", "mcp", "show_mcp_errors"]


def configured_mcp_servers(cwd: Path, trust_project: bool) -> dict[str, Any]:
    """The servers ``run`` and ``chat`` start: the settings files', each skipped one named on
    stderr with its reason (an untrusted project's servers start nothing). Without the
    ``mcp`` extra, none: one warning names the extra, and the command goes on without them
    (the core install must not fail because settings name servers)."""
    config = load_mcp_config(cwd, trust_project=trust_project)
    for skipped in config.skipped:
        echo(
            f"note: MCP server {skipped.name!r} ({skipped.source}) does not start: "
            f"{skipped.reason}",
            err=True,
        )
    if config.servers:
        try:
            require_sdk("the settings files")
        except McpNotInstalledError as exc:
            names = ", ".join(sorted(config.servers))
            echo(f"warning: MCP servers not started ({names}): {exc}", err=True)
            return {}
    return dict(config.servers)


def show_mcp_errors(harness: AgentHarness) -> None:
    """Print each ``mcp_server_error`` on stderr as it happens."""

    def note(sender: object, event: McpServerErrorEvent) -> None:
        echo(f"note: {event.error}", err=True)

    harness.connect(McpServerErrorEvent, note)


@click.group()
def mcp() -> None:
    """The MCP servers of the settings files: list, add, remove (docs/mcp.md)."""


def _cwd_option(command: Any) -> Any:
    return click.option(
        "--cwd",
        "work_dir",
        metavar="DIR",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=None,
        help="The project folder (default: the current folder).",
    )(command)


async def _statuses(servers: Mapping[str, Any], cwd: Path) -> tuple[Any, ...]:
    session = await MemorySessionRepo().create(str(cwd))
    harness = AgentHarness(session=session, mcp_servers=servers, resources=None, cwd=cwd)
    try:
        return await harness.start_mcp_servers()
    finally:
        await harness.shutdown()


@mcp.command("list")
@_cwd_option
@click.option(
    "--trust-project",
    is_flag=True,
    help="Start the project's servers too (.mcp.json, .harness/settings.json).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="A JSON array of servers, each with the same keys (skipped ones: state 'skipped').",
)
def list_servers(work_dir: Path | None, trust_project: bool, as_json: bool) -> None:
    """Configured servers, their status and tools: connects to each to list them.

    An untrusted project's servers are listed as skipped, with the reason: starting one runs
    a program the folder names (--trust-project starts them).
    """
    cwd = Path(os.path.realpath(work_dir or Path.cwd()))
    config = load_mcp_config(cwd, trust_project=trust_project)
    statuses = run_async(_statuses(config.servers, cwd)) if config.servers else ()
    if as_json:
        # One array, every row with the same keys, as `sessions list --json` prints.
        rows = [
            {
                "name": status.name,
                "source": config.sources[status.name],
                "transport": status.transport,
                "target": status.target,
                "state": status.state,
                "tools": list(status.tools),
                "error": status.error,
                "notes": list(status.notes),
                "reason": None,
            }
            for status in statuses
        ] + [
            {
                "name": skipped.name,
                "source": skipped.source,
                "transport": None,
                "target": None,
                "state": "skipped",
                "tools": [],
                "error": None,
                "notes": [],
                "reason": skipped.reason,
            }
            for skipped in config.skipped
        ]
        echo(json_line(rows, indent=True))
        return
    _show(config, statuses)


def _show(config: McpConfig, statuses: Sequence[Any]) -> None:
    if not statuses and not config.skipped:
        echo("no MCP servers configured (harness mcp add NAME -- COMMAND ARGS...)")
        return
    for status in statuses:
        state = "connected" if status.state == "ready" else "failed"
        where = f"{status.transport} {status.target}; {config.sources[status.name]}"
        echo(f"{status.name}: {state} ({where})")
        if status.error and status.state != "ready":
            echo(f"  error: {status.error}")
        for tool in status.tools:
            echo(f"  {tool}")
        for note in status.notes:
            echo(f"  note: {note}")
    for skipped in config.skipped:
        echo(f"{skipped.name}: skipped ({skipped.source}): {skipped.reason}")


def _settings_file(scope: str, cwd: Path) -> tuple[Path, Path, str | None]:
    """The file a scope's servers are written to, the folder it must stay beneath, and the
    project its entry is under (local scope: the user's file, for ``cwd`` only)."""
    if scope == "project":
        return cwd / MCP_JSON, cwd, None
    path = user_settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path, path.parent, str(cwd) if scope == "local" else None


def _scope_option(default: str | None, help: str) -> Callable[[Any], Any]:
    return click.option(
        "--scope",
        "-s",
        type=click.Choice(SCOPES),
        default=default,
        show_default=default is not None,
        help=help,
    )


Scope = Literal["local", "project", "user"]
SCOPES: tuple[Scope, ...] = ("local", "project", "user")
"""Claude Code's scopes: local (you, this folder only), project (.mcp.json), user (you,
everywhere)."""


def _pairs(values: Sequence[str], sep: str, what: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, found, item = value.partition(sep)
        if not found or not key.strip():
            raise click.BadParameter(f"{value!r} is not KEY{sep}VALUE", param_hint=what)
        out[key.strip()] = item.strip() if sep == ":" else item
    return out


@mcp.command("add", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--url", default=None, help="An HTTP server's URL (instead of a command).")
@click.option(
    "--transport",
    "-t",
    type=click.Choice(["stdio", "http", "sse"]),
    default=None,
    help="stdio for a command (default), http for a URL (default), or sse. With http or sse "
    "the URL may follow NAME, as in Claude Code.",
)
@click.option("--env", "-e", multiple=True, metavar="KEY=VALUE", help="A stdio server's env.")
@click.option("--header", "-H", multiple=True, metavar="KEY: VALUE", help="An HTTP header.")
@_scope_option(
    "user",
    "user: your settings.json; local: the same file, for this folder only; project: the "
    "folder's .mcp.json (used only when trusted).",
)
@_cwd_option
def add(
    name: str,
    command: tuple[str, ...],
    url: str | None,
    transport: str | None,
    env: tuple[str, ...],
    header: tuple[str, ...],
    scope: str,
    work_dir: Path | None,
) -> None:
    """Add server NAME: `harness mcp add NAME -- COMMAND ARGS...`, or `--url URL`, or
    `--transport http NAME URL` (Claude Code's spelling).

    Written in Claude Code's shape to the user settings or the project's .mcp.json; values
    may hold ${VAR} (expanded when the server starts), so secrets can stay in the environment.
    """
    if transport in ("http", "sse") and url is None and len(command) == 1:
        url, command = command[0], ()
    if (url is None) == (not command):
        raise click.UsageError("give either -- COMMAND ARGS... or --url URL")
    server: StdioServer | HttpServer | SseServer
    if url is not None:
        if transport == "stdio" or env:
            raise click.UsageError("--url is an HTTP server: no --transport stdio or --env")
        headers = _pairs(header, ":", "--header")
        server = (
            SseServer(url, headers=headers)
            if transport == "sse"
            else HttpServer(url, headers=headers)
        )
    else:
        if transport not in (None, "stdio") or header:
            raise click.UsageError(
                "a command is a stdio server: no --transport http/sse or --header"
            )
        server = StdioServer(command[0], command[1:], env=_pairs(env, "=", "--env"))
    cwd = Path(os.path.realpath(work_dir or Path.cwd()))
    path, root, project = _settings_file(scope, cwd)
    add_mcp_server(path, name, mcp_server_entry(server), root=root, project=project)
    shown = f"{server.transport} {server.describe()}"
    echo(f"added MCP server {name!r} ({shown}) to {_where(path, project)}")


def _where(path: Path, project: str | None) -> str:
    """As ``load_mcp_config`` names the source."""
    return f"{path} (local: {project})" if project is not None else str(path)


@mcp.command("remove")
@click.argument("name")
@_scope_option(None, "Where to remove it from (default: wherever it is, if only one place).")
@_cwd_option
def remove(name: str, scope: Scope | None, work_dir: Path | None) -> None:
    """Remove server NAME from the user settings or the project's .mcp.json."""
    cwd = Path(os.path.realpath(work_dir or Path.cwd()))
    scopes: list[Scope] = [scope] if scope is not None else list(SCOPES)
    holding = []
    looked = []
    for each in scopes:
        path, root, project = _settings_file(each, cwd)
        where = _where(path, project)
        looked.append(where)
        config = load_mcp_config(cwd, trust_project=True, sources=(each,))
        named = config.sources.get(name) == where or any(
            s.name == name and s.source == where for s in config.skipped
        )
        if named:
            holding.append((where, path, root, project))
    if not holding:
        raise McpConfigError(", ".join(looked), name, "no such server")
    if len(holding) > 1:
        raise click.UsageError(
            f"{name!r} is in both {holding[0][0]} and {holding[1][0]}: give --scope"
        )
    where, path, root, project = holding[0]
    remove_mcp_server(path, name, root=root, project=project)
    echo(f"removed MCP server {name!r} from {where}")
