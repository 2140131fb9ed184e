"""Which MCP servers to start: from code, and from settings files in Claude Code's shape.

A settings file (``.mcp.json`` in a project, ``mcpServers`` in ``.harness/settings.json`` or
the user's ``settings.json``) holds::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "some-server"], "env": {"TOKEN": "${TOKEN}"}},
        "docs": {"type": "http", "url": "https://example.test/mcp",
                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}}}

as Claude Code reads it (``type`` is ``stdio`` by default, or ``http``, ``sse``). The user's
file may also hold servers for one project only (Claude Code's local scope), under
``{"projects": {"/real/path/of/folder": {"mcpServers": {...}}}}``. Values hold
``${VAR}`` and ``${VAR:-default}`` expanded from the environment in ``command``, ``args``,
``env``, ``cwd``, ``url`` and ``headers``. Starting a server is running a program, so a
project's files name servers that start only when the project is trusted (the
``--trust-project`` rule of docs/permissions.md); an untrusted project's servers are listed
as skipped, with that reason.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias

import orjson
from attrs import evolve, field, frozen

from .._fs import FileRefusedError, beneath, read_regular_file, write_file
from .._permissions.folders import user_folder
from .errors import McpConfigError

__all__ = [
    "MCP_JSON",
    "PROJECT_SETTINGS",
    "HttpServer",
    "McpConfig",
    "McpServerConfig",
    "SkippedServer",
    "SseServer",
    "StdioServer",
    "add_mcp_server",
    "check_server_name",
    "load_mcp_config",
    "mcp_server_entry",
    "parse_servers",
    "remove_mcp_server",
]

MCP_JSON = Path(".mcp.json")
"""A project's MCP servers (Claude Code's project scope), relative to its folder."""
PROJECT_SETTINGS = Path(".harness") / "settings.json"
SETTINGS_MAX_BYTES = 1_000_000
"""A settings file larger than this is refused (as for permission settings)."""

_NAME = re.compile(r"[A-Za-z0-9_-]{1,48}")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):  # a lone string would become a tuple of its characters
        raise TypeError(f"args must be a list of strings, not the string {value!r}")
    return tuple(value)


def _mapping(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return dict(value or {})


@frozen
class StdioServer:
    """A server run as a subprocess, spoken to over its stdin and stdout.

    Args:
        command: the program (looked up on ``PATH``).
        args: its arguments.
        env: variables set for it, over the SDK's safe default environment (``HOME``,
            ``PATH``, ``USER``, ...; the rest of the harness's environment is not passed).
        cwd: its working folder (default: the harness's ``cwd``; a server of the user's
            settings, when the project is not trusted: an empty private folder of the
            harness's, so the project's files never configure its launcher).
            ``HARNESS_PROJECT_DIR`` holds the harness's ``cwd`` either way.
    """

    command: str
    args: tuple[str, ...] = field(default=(), converter=_strings)
    env: Mapping[str, str] = field(factory=dict, converter=_mapping, kw_only=True)
    cwd: str | None = field(default=None, kw_only=True)

    @property
    def transport(self) -> str:
        return "stdio"

    def describe(self) -> str:
        """The command line, for messages."""
        return " ".join([self.command, *self.args])


@frozen
class HttpServer:
    """A server reached over streamable HTTP at ``url``, with ``headers`` on every request."""

    url: str
    headers: Mapping[str, str] = field(factory=dict, converter=_mapping, kw_only=True)

    @property
    def transport(self) -> str:
        return "http"

    def describe(self) -> str:
        return self.url


@frozen
class SseServer:
    """A server reached over the older HTTP+SSE transport (``GET url`` opens the stream)."""

    url: str
    headers: Mapping[str, str] = field(factory=dict, converter=_mapping, kw_only=True)

    @property
    def transport(self) -> str:
        return "sse"

    def describe(self) -> str:
        return self.url


McpServerConfig: TypeAlias = StdioServer | HttpServer | SseServer | Any
"""What ``AgentHarness(mcp_servers={name: ...})`` takes: a :class:`StdioServer`, an
:class:`HttpServer`, an :class:`SseServer`, or an in-process server object built with the
SDK's own server API (``mcp.server.mcpserver.MCPServer`` or ``mcp.server.lowlevel.Server``)."""


def check_server_name(name: str, source: str = "code") -> str:
    """``name`` if it can be a server's name: 1 to 48 of ``A-Z a-z 0-9 _ -``, without ``__``
    and not ending in ``_`` (tool names are ``mcp__<server>__<tool>``, and rules on
    ``mcp__<server>`` must not be ambiguous: server ``a_``'s tool ``x`` would be
    ``mcp__a___x``, the name of server ``a``'s tool ``_x``).

    Raises:
        McpConfigError: it cannot (code ``mcp_config``).
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name) or "__" in name or name.endswith("_"):
        raise McpConfigError(
            source,
            name if isinstance(name, str) else repr(name),
            "a server name is 1 to 48 letters, digits, '_' or '-', without '__' and not "
            "ending in '_'",
        )
    return name


def _expand(value: str, source: str, name: str) -> str:
    def one(match: re.Match[str]) -> str:
        found = os.environ.get(match[1])
        if found is not None:
            return found
        if match[2] is not None:
            return match[2]
        raise McpConfigError(
            source, name, f"${{{match[1]}}} is not set in the environment (and has no :-default)"
        )

    return _VAR.sub(one, value)


def _text(value: object, what: str, source: str, name: str, expand: bool = True) -> str:
    if not isinstance(value, str):
        raise McpConfigError(source, name, f"{what} must be a string")
    expanded = _expand(value, source, name) if expand else value
    if "\0" in expanded:
        raise McpConfigError(source, name, f"{what} holds a NUL byte")
    return expanded


def _table(value: object, what: str, source: str, name: str, expand: bool = True) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise McpConfigError(source, name, f"{what} must be an object of strings")
    out = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or "\0" in key:
            raise McpConfigError(source, name, f"{what} has a bad key {key!r}")
        out[key] = _text(item, f"{what}[{key!r}]", source, name, expand)
        if what == "headers" and any(c in out[key] for c in "\r\n"):
            raise McpConfigError(source, name, f"header {key!r} holds a line break")
    return out


def parse_server(
    name: str, raw: object, source: str, *, expand: bool = True
) -> StdioServer | HttpServer | SseServer:
    """One ``mcpServers`` entry (Claude Code's shape) as a server, ``${VAR}`` expanded (unless
    ``expand`` is False: checking an entry before it is written).

    Raises:
        McpConfigError: a bad name, shape or type, or an unset variable (code ``mcp_config``).
    """
    check_server_name(name, source)
    if not isinstance(raw, Mapping):
        raise McpConfigError(source, name, "an entry must be an object")
    kind = raw.get("type", "stdio")
    known = {
        "stdio": {"type", "command", "args", "env", "cwd"},
        "http": {"type", "url", "headers"},
        "sse": {"type", "url", "headers"},
    }
    if kind not in known:
        raise McpConfigError(source, name, f"type {kind!r} is not one of stdio, http, sse")
    unknown = sorted(set(raw) - known[kind])
    if unknown:  # a misspelt key must not pass for a missing one
        raise McpConfigError(source, name, f"unknown key(s) for type {kind}: {unknown}")
    if kind == "stdio":
        command = _text(raw.get("command"), "command", source, name, expand)
        if not command.strip():
            raise McpConfigError(source, name, "command is empty")
        args = raw.get("args", [])
        if not isinstance(args, list):
            raise McpConfigError(source, name, "args must be a list of strings")
        cwd = raw.get("cwd")
        return StdioServer(
            command,
            [_text(a, "an argument", source, name, expand) for a in args],
            env=_table(raw.get("env"), "env", source, name, expand),
            cwd=None if cwd is None else _text(cwd, "cwd", source, name, expand),
        )
    url = _text(raw.get("url"), "url", source, name, expand)
    if expand and not url.startswith(("http://", "https://")):
        raise McpConfigError(source, name, f"url must start with http:// or https://: {url!r}")
    headers = _table(raw.get("headers"), "headers", source, name, expand)
    return HttpServer(url, headers=headers) if kind == "http" else SseServer(url, headers=headers)


def parse_servers(
    data: object, source: str
) -> tuple[dict[str, StdioServer | HttpServer | SseServer], list[SkippedServer]]:
    """The servers of a settings document's ``mcpServers`` (missing: none), and the entries
    that cannot be used, each with its reason (one bad entry costs only itself).

    Raises:
        McpConfigError: ``mcpServers`` is not an object.
    """
    if not isinstance(data, Mapping):
        raise McpConfigError(source, None, "a settings file must hold a JSON object")
    servers = data.get("mcpServers", {})
    if not isinstance(servers, Mapping):
        raise McpConfigError(source, None, "'mcpServers' must be an object")
    found: dict[str, StdioServer | HttpServer | SseServer] = {}
    skipped: list[SkippedServer] = []
    for name, raw in servers.items():
        try:
            found[name] = parse_server(name, raw, source)
        except McpConfigError as exc:
            skipped.append(SkippedServer(name=str(name), source=source, reason=exc.reason))
    return found, skipped


@frozen(kw_only=True)
class SkippedServer:
    """A configured server that will not start, and why (``source``: the file naming it)."""

    name: str
    source: str
    reason: str


@frozen(kw_only=True)
class McpConfig:
    """The servers the settings files configure for one folder.

    Attributes:
        servers: by name, the ones to start (user settings, then the trusted project's
            ``.mcp.json``, then its ``.harness/settings.json``, then the user's servers for
            this folder only: a later entry wins).
        sources: by name, the file each server comes from (a local server's: the user's file,
            then `` (local: FOLDER)``).
        skipped: servers that will not start: an untrusted project's, or entries that cannot
            be used (a bad shape, an unset ``${VAR}``), each with the reason.
    """

    servers: Mapping[str, StdioServer | HttpServer | SseServer]
    sources: Mapping[str, str]
    skipped: tuple[SkippedServer, ...]


def _read(path: Path, root: Path | None) -> object | None:
    try:
        raw = read_regular_file(path, max_bytes=SETTINGS_MAX_BYTES, root=root)
        return None if raw is None else orjson.loads(raw)
    except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise McpConfigError(str(path), None, f"cannot be read: {exc}") from None


def load_mcp_config(
    cwd: str | os.PathLike[str],
    *,
    trust_project: bool = False,
    user_settings: Path | None = None,
    sources: Iterable[Literal["user", "project", "local"]] = ("user", "project", "local"),
) -> McpConfig:
    """Read the MCP servers the settings files configure for ``cwd``.

    Follows Claude Code's files and shape (module docstring). Files are read as permission
    settings are: regular files only, at most 1 MB, a project's beneath its folder.

    Args:
        cwd: the project folder (its ``.mcp.json`` and ``.harness/settings.json``).
        trust_project: start the project's servers too. Off by default: a cloned repository
            can name any program, and starting a server runs it (docs/security.md).
        user_settings: the user settings file (default ``user_settings_path()``).
        sources: which to read: ``user`` (the user's file), ``project`` (the project's
            files), ``local`` (the user's file's servers for ``cwd`` only).

    Returns:
        The servers to start, and those skipped with their reasons.

    Raises:
        McpConfigError: a file cannot be read, is not JSON, or ``mcpServers`` is not an
            object (code ``mcp_config``; the message names the file).
    """
    from .._permissions import user_settings_path

    folder = Path(cwd)
    servers: dict[str, StdioServer | HttpServer | SseServer] = {}
    origin: dict[str, str] = {}
    skipped: list[SkippedServer] = []
    wanted = tuple(sources)
    user_file = user_settings or user_settings_path()
    files: list[tuple[Path, Path | None, bool, str | None]] = []
    if "user" in wanted:
        files.append((user_file, None, True, None))
    if "project" in wanted:
        files.append((folder / MCP_JSON, folder, trust_project, None))
        files.append((folder / PROJECT_SETTINGS, folder, trust_project, None))
    if "local" in wanted:
        files.append((user_file, None, True, os.path.realpath(folder)))
    for path, root, trusted, project in files:
        data = _read(path, root)
        if data is None:
            continue
        if project is not None:
            data = _local(data, project, path)
        label = str(path) if project is None else f"{path} (local: {project})"
        if not trusted:
            names = data.get("mcpServers") if isinstance(data, Mapping) else None
            for name in names if isinstance(names, Mapping) else ():
                skipped.append(
                    SkippedServer(
                        name=str(name),
                        source=label,
                        reason="the project is not trusted, so its servers do not start "
                        "(--trust-project starts them)",
                    )
                )
            continue
        found, bad = parse_servers(data, label)
        skipped.extend(bad)
        for name, server in found.items():
            if root is None and not trust_project and isinstance(server, StdioServer):
                server = _outside_project(server, user_folder("state") / "mcp-servers")
            # Rules compare names without case: "Docs" would be named by a rule for "docs".
            twin = next((n for n in servers if n.lower() == name.lower() and n != name), None)
            if twin is not None:
                reason = f"its name differs from the server {twin!r} only in case"
                skipped.append(SkippedServer(name=name, source=str(path), reason=reason))
                continue
            servers[name] = server
            origin[name] = label
    return McpConfig(servers=servers, sources=origin, skipped=tuple(skipped))


def _outside_project(server: StdioServer, neutral: Path) -> StdioServer:
    """The user's stdio server, started in a new empty folder in ``neutral`` (a private
    folder of the harness's, ``mcp-servers`` in its user state folder) rather than in a
    project that is not trusted, unless its settings name a ``cwd``. Not the user's config
    folder: a file server started there read ``settings.json`` and ``approvals.key`` by their
    bare names (review 13, findings 20, 21).

    Launchers take configuration and code from their current folder (``npx`` reads a
    project's ``.npmrc``, whose ``script-shell`` it runs; ``python -m`` imports from it), so a
    cloned repository would decide what the user's own server runs (review 10, finding 2).
    ``HARNESS_PROJECT_DIR`` tells the server where the project is."""
    if server.cwd is not None:
        return server
    neutral.mkdir(mode=0o700, parents=True, exist_ok=True)
    _sweep(neutral)
    # a fresh folder at each start: what a server wrote into its folder (a file server's
    # `write_file docs_server.py`) is never where a later start of another server (`python -m
    # docs_server`) looks (review 15, finding 7)
    return evolve(server, cwd=tempfile.mkdtemp(prefix="start-", dir=neutral))


_SWEEP_AFTER_S = 86_400.0  # a start's folder older than this is no live server's, likely


def _sweep(neutral: Path) -> None:
    """Remove the empty start folders of earlier days (``rmdir``: one a server wrote into
    stays; at most 1,000 looked at)."""
    import itertools
    import time

    with contextlib.suppress(OSError), os.scandir(neutral) as entries:
        for e in itertools.islice(entries, 1_000):
            if e.name.startswith("start-") and e.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    if time.time() - e.stat(follow_symlinks=False).st_mtime > _SWEEP_AFTER_S:
                        os.rmdir(e.path)


def _local(data: object, project: str, path: Path) -> object:
    """The user file's settings for one project (``projects[project]``; none: empty)."""
    projects = data.get("projects", {}) if isinstance(data, Mapping) else {}
    if not isinstance(projects, Mapping):
        raise McpConfigError(str(path), None, "'projects' must be an object")
    return projects.get(project, {})


def mcp_server_entry(server: StdioServer | HttpServer | SseServer) -> dict[str, Any]:
    """``server`` as a settings entry (Claude Code's shape)."""
    if isinstance(server, StdioServer):
        entry: dict[str, Any] = {"command": server.command, "args": list(server.args)}
        if server.env:
            entry["env"] = dict(server.env)
        if server.cwd is not None:
            entry["cwd"] = server.cwd
        return entry
    entry = {"type": server.transport, "url": server.url}
    if server.headers:
        entry["headers"] = dict(server.headers)
    return entry


def _edit(path: Path, root: Path, change: Any, project: str | None = None) -> bool:
    """Read ``path`` (beneath ``root``), apply ``change(servers) -> bool`` to its
    ``mcpServers`` (``projects[project].mcpServers`` when ``project`` is given) and write it
    back atomically when it changed; other content is kept."""
    data = _read(path, root)
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise McpConfigError(str(path), None, "a settings file must hold a JSON object")
    holder: Any = data
    if project is not None:
        projects = data.setdefault("projects", {})
        holder = projects.setdefault(project, {}) if isinstance(projects, dict) else None
        if not isinstance(holder, dict):
            raise McpConfigError(str(path), None, f"'projects.{project}' must be an object")
    servers = holder.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise McpConfigError(str(path), None, "'mcpServers' must be an object")
    if not change(servers):
        return False
    try:
        write_file(beneath(root, path), orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    except FileRefusedError as exc:
        raise McpConfigError(str(path), None, f"{exc}; not changed") from None
    return True


def add_mcp_server(
    path: Path, name: str, entry: Mapping[str, Any], *, root: Path, project: str | None = None
) -> None:
    """Set ``mcpServers[name]`` of the settings file ``path`` (created if missing; other
    content kept), written atomically beneath ``root`` (a symlink leading out is refused).
    With ``project`` (a folder's real path), the server is that folder's only (local scope:
    ``projects[project].mcpServers`` of the user's file).

    Raises:
        McpConfigError: a bad name or entry, or a file that is not a settings object.
        OSError: the file could not be written.
    """
    parse_server(name, entry, str(path), expand=False)  # refuse what could not be read back
    _edit(path, root, lambda servers: servers.__setitem__(name, dict(entry)) or True, project)


def remove_mcp_server(path: Path, name: str, *, root: Path, project: str | None = None) -> bool:
    """Remove ``mcpServers[name]`` from the settings file ``path`` (``project``: as for
    :func:`add_mcp_server`); False if it had none.

    Raises:
        McpConfigError: a file that is not a settings object.
        OSError: the file could not be written.
    """
    if read_regular_file(path, max_bytes=SETTINGS_MAX_BYTES, root=root) is None:
        return False
    return _edit(path, root, lambda servers: servers.pop(name, None) is not None, project)
