"""What ``run``, ``chat`` and ``rpc`` share: their options (pi's and Claude Code's names), which
session they work in, the tools, rules and system prompt they give the agent.

Options: ``--session ID|PATH`` / ``-r, --resume [ID]`` (no id: a picker on a terminal),
``-c, --continue``, ``--no-session`` (a memory store: nothing written), ``--cwd DIR``, the model
options (``_models.py``) and ``--thinking``, ``--offline``, ``--mode`` (``--permission-mode``)
and ``--trust-project``, ``--allowed-tools``/``--disallowed-tools`` (permission rules, Claude
Code's syntax), ``--tools``/``--no-tools`` (which built-in tools the model gets),
``--system-prompt``/``--append-system-prompt``, ``--checkpoints`` and ``--root``. A command
decorated with :func:`agent_options` receives them as one :class:`AgentOptions` (``opts``).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import click
from attrs import frozen

from harness import (
    DEFAULT_SYSTEM_PROMPT,
    AgentHarness,
    Approver,
    CheckpointStore,
    CommandHooks,
    CorruptSessionError,
    ExtractiveSummarizer,
    MemorySessionRepo,
    Model,
    PermissionRules,
    ResourceOptions,
    SecuritySupervisor,
    Session,
    SessionNotFoundError,
    SessionRepo,
    ThinkingLevel,
    Tool,
    bash_tool,
    edit_tool,
    find_tool,
    grep_tool,
    ls_tool,
    read_tool,
    write_tool,
)
from repos import JsonlSessionRepo, SqliteSessionRepo
from repos.claude_code import is_claude_code

from .._agents import AgentDefinition, load_agents
from .._checkpoints import has_records
from .._permissions import CLAUDE_CODE_MODES, PERMISSION_MODES, ModeName
from .._permissions.claude_code import CLAUDE_CODE_TOOLS
from .._resources import ReadCheck
from .._restore import THINKING_LEVELS
from ._checkpoints import checkpoint_option, use_checkpoints
from ._common import describe_store, find_ref, one_line, open_ref, open_repo, root_option
from ._escape import echo, terminal
from ._mcp import configured_mcp_servers
from ._models import ModelChoice, model_options
from ._otel import otel_option

__all__ = [
    "BUILTIN_TOOLS",
    "AgentOptions",
    "Agents",
    "agent_options",
    "pick_session",
    "split_rules",
    "working_folder",
]

BUILTIN_TOOLS: dict[str, Callable[[], Tool]] = {
    "read": read_tool,
    "write": write_tool,
    "edit": edit_tool,
    "bash": bash_tool,
    "ls": ls_tool,
    "grep": grep_tool,
    "find": find_tool,
}
"""The built-in tools ``run``, ``chat`` and ``rpc`` offer, by name (pi's)."""

_PICKED = 20  # sessions the --resume picker lists


def split_rules(values: Sequence[str]) -> list[str]:
    """Claude Code's ``--allowedTools`` lists: rules separated by commas or spaces outside
    parentheses (``"Bash(git log:*) Read"``, ``Bash(npm install),mcp__github``)."""
    rules: list[str] = []
    for value in values:
        depth, start = 0, 0
        for i, char in enumerate(value + " "):
            depth += (char == "(") - (char == ")")
            if depth <= 0 and (char == "," or char.isspace()):
                if value[start:i].strip():
                    rules.append(value[start:i].strip())
                start, depth = i + 1, 0
    return rules


def _tool_names(spec: str) -> list[str]:
    """``--tools a,b``: built-in tool names, ours or Claude Code's (``Bash``, ``Read``,
    ``Glob``)."""
    names = []
    for word in re.split(r"[,\s]+", spec.strip()):
        if not word:
            continue
        lowered = word.lower()
        name = CLAUDE_CODE_TOOLS.get(lowered, lowered)
        if name not in BUILTIN_TOOLS:
            raise click.BadParameter(
                f"unknown tool {word!r}; the built-in tools are {', '.join(BUILTIN_TOOLS)}",
                param_hint="--tools",
            )
        names.append(name)
    return list(dict.fromkeys(names))


@frozen(kw_only=True)
class AgentOptions:
    """The options of :func:`agent_options`, checked for usage errors on construction."""

    session_ref: str | None = None
    resume: str | None = None
    """``-r/--resume``: an id or path; ``""`` when given without one (the picker)."""
    continue_: bool = False
    work_dir: Path | None = None
    no_session: bool = False
    model_id: str | None = None
    base_url: str | None = None
    api: Literal["responses", "chat"] | None = None
    fallback_model_id: str | None = None
    thinking: ThinkingLevel | None = None
    offline: bool = False
    mode: ModeName | None = None
    trust_project: bool = False
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    tools: str | None = None
    no_tools: bool = False
    system_prompt: str | None = None
    append_system_prompt: str | None = None
    checkpoints: bool | None = None
    root: str | None = None
    otel: bool = False

    def __attrs_post_init__(self) -> None:
        picked = [
            name
            for name, given in (
                ("--session", self.session_ref is not None),
                ("--resume", self.resume is not None),
                ("--continue", self.continue_),
                ("--no-session", self.no_session),
            )
            if given
        ]
        if len(picked) > 1:
            raise click.UsageError(f"give at most one of {', '.join(picked)}")
        if self.no_session and self.root is not None:
            raise click.UsageError("--no-session keeps the session in memory; it takes no --root")
        given = (self.model_id or self.base_url or self.api or self.fallback_model_id) is not None
        if self.offline and given:
            raise click.UsageError(
                "--offline uses the scripted model; it takes no --model, --base-url, --api or "
                "--fallback-model"
            )
        if self.tools is not None and self.no_tools:
            raise click.UsageError("give at most one of --tools and --no-tools")

    def trusts(self, cwd: Path) -> bool:
        """Whether ``--trust-project`` trusts the project in ``cwd``: only the folder the
        command started in (``--cwd``, else the current folder), never one a session names
        and the user chose to work in (docs/security.md: trust is per folder; review 5,
        finding 13)."""
        if not self.trust_project:
            return False
        started = self.work_dir if self.work_dir is not None else Path.cwd()
        return os.path.realpath(cwd) == os.path.realpath(started)

    @property
    def ref(self) -> str | None:
        """The session named by ``--session`` or ``--resume ID``."""
        return self.session_ref if self.session_ref is not None else self.resume or None

    @property
    def new_session(self) -> bool:
        """Whether the command starts a new session (nothing names one to go on in)."""
        return self.ref is None and not self.continue_ and self.resume is None

    def repo(self) -> SessionRepo:
        """The store: ``--root`` (``open_repo``), or memory with ``--no-session``."""
        return MemorySessionRepo() if self.no_session else open_repo(self.root)

    def model_choice(self, cwd: Path) -> ModelChoice | None:
        """How models are named and found (None with ``--offline``)."""
        if self.offline:
            return None
        return ModelChoice(
            model_id=self.model_id,
            base_url=self.base_url,
            api=self.api,
            fallback_model_id=self.fallback_model_id,
            cwd=cwd,
            trust_project=self.trusts(cwd),
        )

    def tool_list(self) -> list[Tool]:
        """The built-in tools to offer: all, those of ``--tools``, or none (``--no-tools``)."""
        if self.no_tools:
            return []
        names = _tool_names(self.tools) if self.tools is not None else list(BUILTIN_TOOLS)
        return [BUILTIN_TOOLS[name]() for name in names]

    def rules(self) -> PermissionRules:
        """``--allowed-tools`` and ``--disallowed-tools`` as rules (Claude Code's syntax).

        Raises:
            click.BadParameter: a rule that does not parse.
        """
        try:
            return PermissionRules(
                allow=split_rules(self.allowed_tools), deny=split_rules(self.disallowed_tools)
            )
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--allowed-tools") from None

    def supervisor(
        self, cwd: Path, approver: Approver | None = None, *, store_folders: Sequence[Path] = ()
    ) -> SecuritySupervisor:
        """The supervisor of every tool call: the mode, the command line's rules, the settings
        files' (a project's may only restrict unless ``--trust-project``) and ``approver``;
        ``store_folders``: the sessions store in use and its checkpoint store (the model's
        tools may not change them unasked)."""
        return SecuritySupervisor(
            mode=self.mode,
            rules=self.rules(),
            approver=approver,
            trust_project=cwd if self.trusts(cwd) else False,
            store_folders=store_folders,
        )

    def system_prompt_text(self) -> str:
        """``--system-prompt`` (replacing the default), else the default, with
        ``--append-system-prompt`` after it; the harness appends context files and skills."""
        base = self.system_prompt if self.system_prompt is not None else DEFAULT_SYSTEM_PROMPT
        if self.append_system_prompt:
            return f"{base}\n\n{self.append_system_prompt}"
        return base

    def use_checkpoints(self) -> bool:
        return use_checkpoints(self.checkpoints)


def agent_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared options (module docstring) to a click command; it receives them as one
    ``opts: AgentOptions`` keyword argument instead."""
    fields = [f for f in AgentOptions.__attrs_attrs__ if f.name != "resume"]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {f.name: kwargs.pop(f.name) for f in fields if f.name in kwargs}
        values["resume"] = kwargs.pop("resume", None)
        values["allowed_tools"] = tuple(values.get("allowed_tools") or ())
        values["disallowed_tools"] = tuple(values.get("disallowed_tools") or ())
        return command(*args, opts=AgentOptions(**values), **kwargs)

    decorated: Callable[..., Any] = wrapper
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    decorated = model_options(decorated)
    decorated = checkpoint_option(decorated)
    decorated = otel_option(decorated)
    return root_option(decorated)


_MODES = list(dict.fromkeys([*PERMISSION_MODES, *CLAUDE_CODE_MODES]))

_OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option("--session", "session_ref", metavar="ID|PATH", help="Continue this session."),
    click.option(
        "-r",
        "--resume",
        "resume",
        metavar="[ID]",
        is_flag=False,
        flag_value="",
        default=None,
        help="Continue a session: ID|PATH, or no value for a list of this folder's recent "
        "sessions to pick from (on a terminal).",
    ),
    click.option(
        "-c",
        "--continue",
        "continue_",
        is_flag=True,
        help="Continue the most recently active session of the current folder.",
    ),
    click.option(
        "--no-session",
        is_flag=True,
        help="Keep the session in memory: nothing is written (pi's --no-session).",
    ),
    click.option(
        "--cwd",
        "work_dir",
        metavar="DIR",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=None,
        help="Work in DIR (default: the current folder; a session's recorded folder is "
        "used only when given here).",
    ),
    click.option(
        "--thinking",
        type=click.Choice(THINKING_LEVELS),
        default=None,
        help="Reasoning effort (default: the model name's :level, the session's, else off).",
    ),
    click.option(
        "--offline",
        is_flag=True,
        help="Use the scripted offline model: it echoes, `!COMMAND` asks for a bash call, "
        "`@TOOL {JSON}` for a call of TOOL, `count N` streams a long reply.",
    ),
    click.option(
        "--mode",
        "--permission-mode",
        "mode",
        type=click.Choice(_MODES),
        default=None,
        help="Permission mode for tool calls, ours or Claude Code's name (default: the "
        "settings files', else `default`).",
    ),
    click.option(
        "--trust-project",
        is_flag=True,
        help="Let the working folder's .harness/settings.json widen permissions (its allow "
        "rules and mode) and run its hooks; without it, project settings may only restrict "
        "permissions and their hooks do not run (docs/permissions.md, docs/hooks.md).",
    ),
    click.option(
        "--allowed-tools",
        "--allowedTools",
        "allowed_tools",
        metavar="RULES",
        multiple=True,
        help="Allow rules, Claude Code's syntax, separated by commas or spaces: "
        '"Bash(git log:*) Read" (repeatable).',
    ),
    click.option(
        "--disallowed-tools",
        "--disallowedTools",
        "disallowed_tools",
        metavar="RULES",
        multiple=True,
        help='Deny rules, as --allowed-tools: "Bash(rm:*),Write".',
    ),
    click.option(
        "--tools",
        metavar="A,B",
        default=None,
        help=f"Offer only these built-in tools ({', '.join(BUILTIN_TOOLS)}; Claude Code's "
        "names too).",
    ),
    click.option(
        "--no-tools",
        is_flag=True,
        help="Offer no tools at all: no built-in tool, no MCP server, no skill.",
    ),
    click.option(
        "--system-prompt",
        metavar="TEXT",
        default=None,
        help="Replace the default system prompt (context files and skills are still added).",
    ),
    click.option(
        "--append-system-prompt",
        metavar="TEXT",
        default=None,
        help="Add TEXT to the end of the system prompt.",
    ),
]


# --- which session ----------------------------------------------------------------------------


def pick_resume(repo: SessionRepo, cwd: Path) -> str:
    """``--resume`` without an id: the recent sessions of ``cwd`` with their first message,
    numbered, one picked on the terminal; returns its id or path.

    Raises:
        click.UsageError: stdin or stdout is not a terminal (give an id), or no session of
            this folder exists.
    """
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise click.UsageError(
            "--resume without an id picks from a list on a terminal; give an id "
            "(`harness sessions list` shows them)"
        )
    from ._common import run_async

    infos = run_async(repo.list(str(cwd)))[:_PICKED]
    if not infos:
        raise click.UsageError(f"no session of the folder {cwd} in {describe_store(repo)}")
    for n, info in enumerate(infos, start=1):
        first = " ".join(info.first_message.split())[:60] or "(no message)"
        when = info.modified.astimezone().strftime("%Y-%m-%d %H:%M")
        name = f" [{info.name}]" if info.name else ""
        echo(f"{n:>3}. {when}  {info.id[:8]}{terminal(name)}  {terminal(first)}")
    number = click.prompt(
        "resume which session", type=click.IntRange(1, len(infos)), err=True, default=1
    )
    picked = infos[number - 1]
    return str(picked.path) if picked.path is not None else picked.id


async def pick_session(opts: AgentOptions, repo: SessionRepo, cwd: Path) -> Session:
    """The session the command works in: the one named (``--session``/``--resume``), the most
    recent of ``cwd`` (``--continue``), else a new one for ``cwd``.

    Raises:
        SessionNotFoundError: nothing matches the name, or ``--continue`` found no session.
        CorruptSessionError: a Claude Code transcript was named (the message says how to
            import it), or a file with no valid header.
    """
    ref = opts.ref
    if ref is not None:
        found = await find_ref(repo, ref)
        try:
            return await open_ref(repo, found)
        except CorruptSessionError:
            if isinstance(found, Path) and found.is_file() and is_claude_code(found):
                raise CorruptSessionError(
                    found,
                    1,
                    0,
                    "a Claude Code transcript, not one of our sessions: "
                    f"`harness import claude-code {found}` imports it, then continue the import",
                ) from None
            raise
    if opts.continue_:
        infos = await repo.list(str(cwd))
        if not infos:
            raise SessionNotFoundError(
                "--continue", f"no session for the folder {cwd} in {describe_store(repo)}"
            )
        return await repo.open(infos[0].path or infos[0].id)
    return await repo.create(str(cwd))


def working_folder(
    session: Session, given: Path | None, *, ask: Callable[[str], bool] | None = None
) -> Path:
    """The folder tools work in: ``--cwd`` when given, else the current folder.

    A session's recorded ``cwd`` comes from its file, which is untrusted (docs/security.md):
    it is never adopted unless the user says so, by ``--cwd`` or by answering ``ask`` (chat on
    a terminal). Otherwise a recorded folder that differs is named on stderr.
    """
    if given is not None:
        return given
    here = Path.cwd()
    recorded = session.cwd
    if not recorded or "\0" in recorded:  # a NUL names no folder (review 5, finding 24)
        return here
    if os.path.realpath(recorded) == os.path.realpath(here):
        return here
    if not os.path.isdir(recorded):
        return here
    shown = terminal(repr(recorded))
    if ask is not None and ask(
        f"This session was recorded in {shown}; you are in {terminal(repr(str(here)))}. "
        "Work in the recorded folder?"
    ):
        return Path(recorded)
    echo(
        f"note: session {session.id} was recorded in {shown}; working in the current folder "
        f"(--cwd DIR to choose)",
        err=True,
    )
    return here


# --- the harness ------------------------------------------------------------------------------


class Agents:
    """Makes the harnesses of one command (``chat`` and ``rpc`` make a new one for each
    session they switch to): the same tools, supervisor, hooks, MCP servers, system prompt
    and checkpoints, from :class:`AgentOptions`.

    Args:
        cwd: the working folder (the user's choice; never a session's recorded one unasked).
        repo: the sessions store the user chose; checkpoints go to its store.
        approver: answers the supervisor's questions (None: a controlled call no rule or mode
            allows is denied).
    """

    def __init__(
        self,
        opts: AgentOptions,
        cwd: Path,
        *,
        repo: SessionRepo,
        choice: ModelChoice | None,
        command_hooks: CommandHooks | None,
        approver: Approver | None = None,
    ) -> None:
        self.opts = opts
        self.cwd = cwd
        self.choice = choice
        self.command_hooks = command_hooks
        # The store of the user's sessions store, wherever a session's file lies.
        self._store = CheckpointStore.for_repo(repo)
        stores = [self._store.root]
        if isinstance(repo, JsonlSessionRepo):
            stores.append(repo.root)
        elif isinstance(repo, SqliteSessionRepo):
            stores.append(repo.path)
        self.store_folders: tuple[Path, ...] = tuple(stores)
        self.supervisor = opts.supervisor(cwd, approver, store_folders=stores)
        self.mcp_servers = {} if opts.no_tools else configured_mcp_servers(cwd, opts.trusts(cwd))
        self.checkpoints: CheckpointStore | Literal[False] = (
            self._store if opts.use_checkpoints() else False
        )
        self.agents = agent_files(cwd, opts.trusts(cwd), self.supervisor.read_check(cwd))
        self._system_prompt = opts.system_prompt_text()

    def make(
        self, session: Session, model: Model, thinking: ThinkingLevel | None = None
    ) -> AgentHarness:
        """A harness on ``session`` with ``model``."""
        return AgentHarness(
            session=session,
            model=model,
            fallback_model=self.choice.fallback() if self.choice is not None else None,
            registry=self.choice.registry if self.choice is not None else None,
            thinking_level=thinking,
            tools=self.opts.tool_list(),
            # --no-tools: no skill tool either (no skill is offered); templates and context
            # files still work.
            resources=ResourceOptions(max_skills=0) if self.opts.no_tools else ResourceOptions(),
            system_prompt=self._system_prompt,
            supervisor=self.supervisor,
            cwd=self.cwd,
            command_hooks=self.command_hooks,
            mcp_servers=self.mcp_servers,
            # Sticky: a session recorded with checkpoints keeps them when resumed, unless
            # --no-checkpoints says otherwise (its rewinds would miss what happens next).
            # The same store as the run that recorded them: the user's sessions store's.
            checkpoints=self.checkpoints
            or (self._store if self.opts.checkpoints is None and has_records(session) else False),
            agents=self.agents,
            # Offline, compaction and branch summaries need no model either.
            summarizer=ExtractiveSummarizer() if self.choice is None else None,
        )


def agent_files(
    cwd: Path, trust_project: bool, read_check: ReadCheck | None = None
) -> tuple[AgentDefinition, ...]:
    """The agents of the user's and the project's agent files (the project's as untrusted
    unless ``trust_project``; none a ``read`` rule of ``read_check`` denies); each problem is
    one line on stderr."""
    catalog = load_agents(cwd, trust_project=trust_project, read_check=read_check)
    for problem in catalog.diagnostics:
        echo(f"warning: {one_line(problem.path)}: {one_line(problem.message)}", err=True)
    return catalog.agents
