"""Agent definitions: a named helper with its own instructions, tools and model, from code or
from Markdown files with frontmatter (Claude Code's sub-agents, ``.claude/agents/*.md``).

A file is read as Claude Code writes one::

    ---
    name: code-reviewer
    description: Reviews a change for bugs. Use after editing code.
    tools: Read, Grep, Glob        # optional: a comma-separated list or a YAML list
    model: sonnet                  # optional: sonnet, opus, haiku, inherit, or a model name
    ---
    You are a careful reviewer. ...

plus ``thinking`` (a thinking level) and ``disallowedTools``. Where files come from, first
wins on a name: the user's config folder's ``agents/`` (trusted), then the working folder's
``.harness/agents/`` and ``.claude/agents/`` (project files, untrusted unless the project is
trusted). What an untrusted file can never do is in docs/security.md: its ``model`` and
``thinking`` are ignored (they choose what a run costs), its tools are only ever a subset of
what the parent is offered, and it can never replace a trusted definition of the same name.
Claude Code's ``permissionMode``, ``hooks``, ``mcpServers`` and ``skills`` are not supported:
they are ignored and reported, from any file (a sub-agent always has its parent's supervisor).

Reading follows the skills' rules (``harness/_fs.py``): regular files only, opened beneath
their folder's root, at most :data:`MAX_AGENT_BYTES`, none the user's ``read`` rules deny
(``SecuritySupervisor.read_check``, on the path and on the file opened) nor the harness's
private data; problems become diagnostics.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

from attrs import field, frozen

from .._fs import FileRefusedError, Location, beneath, open_dir, open_regular_at, read_capped
from .._permissions.claude_code import CLAUDE_CODE_TOOLS
from .._permissions.supervisor import SecuritySupervisor
from .._providers.base import Model
from .._resources.discovery import ReadCheck, check_opened, cut_description
from .._resources.frontmatter import FrontmatterError, frontmatter_budget, split_frontmatter
from .._resources.locations import user_folder
from .errors import AgentDefinitionError

__all__ = [
    "AGENT_FOLDERS",
    "CLAUDE_CODE_MODEL_ALIASES",
    "MAX_AGENTS",
    "MAX_AGENT_BYTES",
    "MAX_AGENT_FILES",
    "AgentCatalog",
    "AgentDefinition",
    "AgentDiagnostic",
    "AgentSource",
    "check_agents",
    "load_agents",
    "tool_name",
    "valid_agent_name",
]

AgentSource: TypeAlias = Literal["code", "user", "project", "claude_code"]
"""Where a definition came from: code, the user's config folder, the project's
``.harness/agents/``, the project's ``.claude/agents/``."""

AGENT_FOLDERS: tuple[tuple[AgentSource, str], ...] = (
    ("project", ".harness/agents"),
    ("claude_code", ".claude/agents"),
)
"""The project's folders of agent files, relative to the working folder, in precedence order."""

MAX_AGENT_BYTES = 262_144
"""Largest agent file read (256 KiB); a larger one is reported and skipped."""

MAX_AGENT_FILES = 256
"""Files read from one agents folder (the first by name); the rest are reported, unread."""

MAX_AGENTS = 64
"""Agents a catalog holds, and the ``task`` tool lists (the first in precedence order): their
names and descriptions go into every request (at most about 70,000 characters)."""

MAX_NAME = 64
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_THINKING = ("off", "minimal", "low", "medium", "high", "xhigh")

CLAUDE_CODE_MODEL_ALIASES = {
    "sonnet": "anthropic/claude-sonnet-4-5",
    "opus": "anthropic/claude-opus-4-5",
    "haiku": "anthropic/claude-haiku-4-5",
}
"""Claude Code's model aliases in an agent file, as registry names (``inherit``: none)."""

_UNSUPPORTED = ("permissionMode", "hooks", "mcpServers", "skills")


def valid_agent_name(name: str) -> bool:
    """1-64 of ``[a-z0-9-]``, no leading, trailing or doubled hyphen (Claude Code's names:
    lower-case letters and hyphens)."""
    return len(name) <= MAX_NAME and _NAME.fullmatch(name) is not None


def _names(value: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _strings(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


@frozen
class AgentDefinition:
    """A helper agent the ``task`` tool can start (Claude Code's sub-agent).

    Attributes:
        name: how the model names it (1-64 of ``[a-z0-9-]``).
        description: when to use it; the model reads it in the ``task`` tool's description.
        instructions: the sub-agent's system prompt.
        tools: names of the tools it gets (ours or Claude Code's: ``Read``, ``Glob``, ...);
            None: every tool the parent is offered (never ``task``: a sub-agent starts no
            sub-agents of its own, as in Claude Code). Only tools the parent has are given.
        model: its model (a :class:`Model`, or a name the registry resolves, e.g.
            ``anthropic/claude-haiku-4-5``); None: the parent's.
        thinking: its thinking level; None: the parent's.
        disallowed_tools: tools it never gets, whatever ``tools`` says.
        source: where it came from (``code`` for definitions made in code).
        path: the file it was read from (None from code).
        trusted: False for a project file of an untrusted project: then it never gets a
            tool the parent is not offered (``load_agents`` already dropped its ``model`` and
            ``thinking``).
    """

    name: str
    description: str
    instructions: str
    tools: tuple[str, ...] | None = field(default=None, converter=_names, kw_only=True)
    model: Model | str | None = field(default=None, kw_only=True)
    thinking: str | None = field(default=None, kw_only=True)
    disallowed_tools: tuple[str, ...] = field(default=(), converter=_strings, kw_only=True)
    source: AgentSource = field(default="code", kw_only=True)
    path: str | None = field(default=None, kw_only=True)
    trusted: bool = field(default=True, kw_only=True)


@frozen(kw_only=True)
class AgentDiagnostic:
    """A problem with an agent file: ``path``, the agent's ``name`` if known, ``message``,
    and whether the file was ``dropped`` (else only the named field was ignored)."""

    path: str
    message: str
    name: str | None = None
    dropped: bool = False


@frozen(kw_only=True)
class AgentCatalog:
    """What :func:`load_agents` found: the definitions in precedence order, and every
    problem."""

    agents: tuple[AgentDefinition, ...]
    diagnostics: tuple[AgentDiagnostic, ...]


def tool_name(name: str) -> str:
    """A tool name of a definition as ours: Claude Code's spelling lower-cased (``Glob`` is
    ``find``, ``MultiEdit`` is ``edit``); MCP tool names are kept as they are."""
    if name.startswith("mcp__"):
        return name
    lowered = name.strip().lower()
    return CLAUDE_CODE_TOOLS.get(lowered, lowered)


def load_agents(
    cwd: str | os.PathLike[str],
    *,
    trust_project: bool = False,
    user_dir: Path | None = None,
    read_check: ReadCheck | None = None,
) -> AgentCatalog:
    """Read the agent files of the user's config folder and of the project ``cwd``.

    Args:
        cwd: the working folder; its ``.harness/agents/`` and ``.claude/agents/`` are read.
        trust_project: the project's files may choose a model and thinking level and be
            given tools the parent is not offered (``--trust-project``); off by default, as for
            its settings (docs/security.md).
        user_dir: the user's agents folder (default ``agents/`` in
            ``platformdirs.user_config_path("harness")``).
        read_check: why a file may not be read (``SecuritySupervisor(...).read_check(cwd)``:
            the user's deny and ask ``read`` rules); a file it refuses is reported, never read.
            None: a default ``SecuritySupervisor``'s (the user's settings and the project's).

    Returns:
        The definitions, first the user's then the project's, each name once (the first
        found wins; the others are reported), at most :data:`MAX_AGENTS` (the rest are
        reported), and the diagnostics. Never raises for a file. A description is cut to
        1,024 characters (as a skill's), with a diagnostic.
    """
    if read_check is None:
        read_check = SecuritySupervisor().read_check(Path(cwd))
    diagnostics: list[AgentDiagnostic] = []
    found: list[AgentDefinition] = []
    roots: list[tuple[AgentSource, Path, str, bool]] = [
        ("user", (user_dir or user_folder() / "agents"), ".", True),
    ]
    for source, rel in AGENT_FOLDERS:
        roots.append((source, Path(cwd), rel, trust_project))
    for source, root, rel, trusted in roots:
        # one folder's files share a budget of YAML (review 12, finding 7)
        with frontmatter_budget():
            for path, text in _files(root, rel, diagnostics, read_check):
                definition = _definition(path, text, source, trusted, diagnostics)
                if definition is not None:
                    found.append(definition)
    winners: dict[str, AgentDefinition] = {}
    for definition in found:
        winner = winners.get(definition.name)
        if winner is None and len(winners) >= MAX_AGENTS:
            diagnostics.append(
                AgentDiagnostic(
                    path=definition.path or "",
                    name=definition.name,
                    dropped=True,
                    message=f"more than {MAX_AGENTS} agents: {definition.name!r} was left out "
                    "(the task tool lists each in every request)",
                )
            )
            continue
        if winner is None:
            winners[definition.name] = definition
            continue
        diagnostics.append(
            AgentDiagnostic(
                path=definition.path or "",
                name=definition.name,
                dropped=True,
                message=f"agent {definition.name!r} is defined before in {winner.path}, which "
                "wins (the user's folder, then .harness/agents, then .claude/agents)",
            )
        )
    return AgentCatalog(agents=tuple(winners.values()), diagnostics=tuple(diagnostics))


def _files(
    root: Path, rel: str, diagnostics: list[AgentDiagnostic], check: ReadCheck
) -> list[tuple[str, str]]:
    """``(path, text)`` of each ``*.md`` file directly in ``root/rel``, sorted by name (a file
    ``check`` refuses is reported instead)."""
    loc = beneath(root, rel) if rel != "." else Location(os.fspath(root), ".")
    try:
        fd = open_dir(loc)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        diagnostics.append(AgentDiagnostic(path=loc.path, message=_why(exc), dropped=True))
        return []
    out: list[tuple[str, str]] = []
    try:
        names = sorted(n for n in os.listdir(fd) if n.endswith(".md") and not n.startswith("."))
        if len(names) > MAX_AGENT_FILES:
            diagnostics.append(
                AgentDiagnostic(
                    path=loc.path,
                    dropped=True,
                    message=f"{len(names) - MAX_AGENT_FILES} files after "
                    f"{names[MAX_AGENT_FILES - 1][:80]!r} were not read: a folder holds at most "
                    f"{MAX_AGENT_FILES} agent files",
                )
            )
        for name in names[:MAX_AGENT_FILES]:
            shown = os.path.join(loc.path, name)
            try:
                file_fd, st = open_regular_at(fd, name, shown)
                check_opened(file_fd, shown, check)  # closes it when it refuses
                try:
                    raw = read_capped(file_fd, st, MAX_AGENT_BYTES, shown)
                finally:
                    os.close(file_fd)
                out.append((shown, raw.decode("utf-8")))
            except (OSError, UnicodeDecodeError) as exc:
                diagnostics.append(AgentDiagnostic(path=shown, message=_why(exc), dropped=True))
    finally:
        os.close(fd)
    return out


def _why(exc: BaseException) -> str:
    if isinstance(exc, FileRefusedError | OSError) and exc.strerror:
        return f"not read: {exc.strerror}"
    return f"not read: {exc}"


def _definition(
    path: str,
    text: str,
    source: AgentSource,
    trusted: bool,
    diagnostics: list[AgentDiagnostic],
) -> AgentDefinition | None:
    def problem(message: str, *, dropped: bool = False, name: str | None = None) -> None:
        diagnostics.append(AgentDiagnostic(path=path, message=message, name=name, dropped=dropped))

    try:
        meta, body = split_frontmatter(text)
    except FrontmatterError as exc:
        problem(f"bad frontmatter: {exc}", dropped=True)
        return None
    name = meta.get("name")
    if name is None:
        name = Path(path).stem
    if not isinstance(name, str) or not valid_agent_name(name):
        problem(f"the name {str(name)[:80]!r} is not 1-64 of [a-z0-9-]", dropped=True)
        return None
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        problem("no description (the model could not know when to use it)", dropped=True, name=name)
        return None
    instructions = body.strip()
    if not instructions:
        problem("no instructions (the file's body is empty)", dropped=True, name=name)
        return None
    tools = _tool_list(meta.get("tools"), "tools", lambda m: problem(m, name=name))
    disallowed = _tool_list(
        meta.get("disallowedTools"), "disallowedTools", lambda m: problem(m, name=name)
    )
    model = _model(meta.get("model"), lambda m: problem(m, name=name))
    thinking = meta.get("thinking")
    if thinking is not None and thinking not in _THINKING:
        problem(f"thinking {str(thinking)[:40]!r} is not one of {', '.join(_THINKING)}; ignored")
        thinking = None
    if not trusted and (model is not None or thinking is not None):
        problem(
            "its model and thinking level are ignored: the project is not trusted (a project "
            "file cannot choose what a run costs; --trust-project lets it)",
            name=name,
        )
        model = thinking = None
    for key in _UNSUPPORTED:
        if key in meta:
            problem(
                f"{key} is not supported and ignored: a sub-agent has its parent's supervisor, "
                "hooks and servers",
                name=name,
            )
    return AgentDefinition(
        name,
        cut_description(description.strip(), lambda m: problem(m, name=name)),
        instructions,
        tools=tools,
        model=model,
        thinking=thinking,
        disallowed_tools=disallowed or (),
        source=source,
        path=path,
        trusted=trusted,
    )


def _tool_list(value: Any, key: str, warn: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        warn(f"{key} must be a comma-separated list of tool names; ignored")
        return None
    return tuple(dict.fromkeys(tool_name(i) for i in items if i.strip()))


def _model(value: Any, warn: Any) -> str | None:
    if value is None or value == "inherit":
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        warn("model must be a model name, or sonnet, opus, haiku, inherit; ignored")
        return None
    return CLAUDE_CODE_MODEL_ALIASES.get(value.strip(), value.strip())


def check_agents(
    agents: Sequence[AgentDefinition], tool_names: Sequence[str]
) -> dict[str, AgentDefinition]:
    """The agents by name, checked: valid and distinct names, known thinking levels, and for a
    definition from code, tools that are among ``tool_names`` (or MCP tools, known later).

    Raises:
        AgentDefinitionError: the first definition that does not fit (code
            ``agent_definition``).
    """
    by_name: dict[str, AgentDefinition] = {}
    for agent in agents:
        if not valid_agent_name(agent.name):
            raise AgentDefinitionError(agent.name, "a name is 1-64 of [a-z0-9-]")
        if agent.name in by_name:
            raise AgentDefinitionError(agent.name, "two agents have this name")
        if agent.thinking is not None and agent.thinking not in _THINKING:
            raise AgentDefinitionError(agent.name, f"bad thinking level {agent.thinking!r}")
        if agent.source == "code":
            unknown = [
                n
                for n in (*(agent.tools or ()), *agent.disallowed_tools)
                if tool_name(n) not in tool_names and not n.startswith("mcp__")
            ]
            if unknown:
                raise AgentDefinitionError(
                    agent.name, f"unknown tools {unknown}; known: {sorted(tool_names)}"
                )
        by_name[agent.name] = agent
    return by_name
