"""``AgentHarness``: a session, a model, tools and the event bus, driven one operation at a time."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypeVar

from attrs import evolve, frozen

from hooks import (
    DEFAULT_HOOK_TIMEOUT_S,
    AbortEvent,
    AgentEndEvent,
    AssistantMessage,
    BeforeAgentStartEvent,
    CustomMessage,
    Event,
    JSONValue,
    Message,
    MessageEndEvent,
    MessageStartEvent,
    ModelUpdateEvent,
    QueueUpdateEvent,
    Receiver,
    ResourcesUpdateEvent,
    SessionEndEvent,
    SessionStartEvent,
    SettledEvent,
    StreamOptions,
    ThinkingLevelUpdateEvent,
    ToolExecutionEndEvent,
    ToolResultMessage,
    ToolsUpdateEvent,
    TurnEndEvent,
    UserContent,
    UserMessage,
    UserPromptSubmitEvent,
    connect,
    emit_before_agent_start,
    emit_session_start,
    emit_user_prompt_submit,
    link_sender,
    notify,
    signal_for,
)
from repos import (
    CompactionEntry,
    ForkPosition,
    Session,
    SessionBusyError,
    SessionRepo,
)

from ._agents.approvals import (
    PendingApproval,
    Resolution,
    awaiting_run,
    claim,
    record_decision,
)
from ._agents.definitions import AgentDefinition, check_agents
from ._agents.errors import (
    ApprovalNotFoundError,
    ApprovalRefusedError,
    AwaitingApprovalError,
    NothingToResumeError,
)
from ._agents.limits import Budget, RunLimits, require_price
from ._agents.output import DEFAULT_OUTPUT_RETRIES, RESPOND_TOOL_NAME, OutputCheck, OutputSpec
from ._agents.reply import Reply
from ._agents.task import (
    TASK_TOOL_NAME,
    TaskCall,
    agent_instructions,
    agent_tools,
    run_task,
    task_tool,
)
from ._checkpoints import (
    CheckpointError,
    Checkpoints,
    CheckpointsOffError,
    CheckpointStore,
    RewindResult,
    announce_rewind,
    conversation_landing,
    fork_with_files,
    prepare_rewind,
    rewind_files,
)
from ._compaction.errors import SummarizationError
from ._compaction.settings import CompactionSettings
from ._compaction.summarize import ModelSummarizer, Summarizer
from ._compaction.tokens import context_size, context_window, should_compact
from ._errors import (
    BusyError,
    CompactionCancelledError,
    ContextOverflowError,
    HarnessStateError,
    PromptBlockedError,
    SessionNotEmptyError,
    SyncInLoopError,
)
from ._loop import Resumed, ResumedCall, Run, TurnSettings, run_agent, valid_unicode
from ._mcp import (
    MCP_OFFER_TYPE,
    McpOptions,
    McpServerConfig,
    McpServers,
    McpServerStatus,
    offered_servers,
    report_gone,
)
from ._operations import NavigationResult, compact_session, navigate_session
from ._permissions import (
    PERMISSION_ENTRY,
    ApprovalSigner,
    Approve,
    ApproveAlways,
    Deny,
    Gate,
    SecuritySupervisor,
    Supervisor,
    remembered_approvals,
    session_files,
)
from ._providers.base import Model, ThinkingLevel, supports_output_schema
from ._providers.faux import FauxModel, FauxReply
from ._providers.registry import ModelInfo, ModelRegistry, load_registry
from ._providers.resolve import model_of
from ._resources import (
    SKILL_CATALOG_TYPE,
    SKILL_RUN_TYPE,
    SKILL_TOOL_NAME,
    ContextFile,
    PromptParts,
    PromptTemplate,
    ReadCheck,
    RefreshReport,
    ResourceOptions,
    Resources,
    SkillBuildResult,
    SkillContext,
    SkillJournal,
    SkillListing,
    SkillOffer,
    SkillRecord,
    SkillRunResult,
    SkillWriteRequest,
    SystemPromptBuilder,
    compose_system_prompt,
    default_child_repo,
    run_skill,
    serve_skill,
    skill_tool,
    split_command,
)
from ._restore import THINKING_LEVELS, restore_settings
from ._settings_hooks import HOOK_CONTEXT_TYPE, CommandHooks
from ._tokens import estimate_tokens
from ._tools.base import Tool, ToolResult

log = logging.getLogger("harness")


__all__ = [
    "DEFAULT_MAX_STOP_CONTINUES",
    "DEFAULT_RESOURCES",
    "DEFAULT_SYSTEM_PROMPT",
    "THINKING_LEVELS",
    "AbortResult",
    "AgentHarness",
    "QueueMode",
]

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."
DEFAULT_RESOURCES = ResourceOptions()
"""Discover skills, templates and context files from the working folder and the user's."""

DEFAULT_MAX_STOP_CONTINUES = 5
"""How many times ``stop`` hooks may continue one run unless ``AgentHarness`` says otherwise."""

QueueMode: TypeAlias = Literal["one_at_a_time", "all"]
_REPO_EVENTS = frozenset(
    {"session_created", "session_before_fork", "session_fork", "session_deleted"}
)
F = TypeVar("F", bound=Receiver)


@frozen(kw_only=True)
class AbortResult:
    """What :meth:`AgentHarness.abort` cleared from the queues (texts, in order)."""

    cleared_steer: tuple[str, ...]
    cleared_follow_up: tuple[str, ...]


def _echo(request: Any) -> FauxReply:
    last = request.messages[-1] if request.messages else None
    text = getattr(last, "text", "") if last is not None else ""
    return FauxReply(text=f"(faux model) You said: {text}")


class AgentHarness:
    """An agent: a session, a model, tools, and every step announced on the event bus.

    Each message is persisted to the session as it ends, so a crash loses at most the reply in
    flight. Events are sent with this harness as the blinker sender: subscribe with
    :meth:`on`/:meth:`connect` (this harness only) or ``hooks.connect`` (any harness); the order of
    one prompt is in docs/events.md.

    One operation at a time: a second :meth:`prompt` while one runs raises :class:`BusyError`.
    While a run is going, :meth:`steer` and :meth:`follow_up` queue messages for it, and the
    ``set_*`` methods take effect from the next request; their session entries are written at
    the next turn boundary.

    Settings persist: the model, thinking level and active tools are session entries, and a
    harness opened on an existing session restores them from its branch (the model only if it is
    ``model`` or one of ``models``). The matching ``*_update`` events, with ``source="restore"``,
    fire when the first operation starts, so receivers connected after construction see them.

    Args:
        session: where the conversation lives (from a ``SessionRepo``).
        model: what to stream from: a model, or a name resolved through ``registry``
            (``"openai/gpt-4.1"``, ``"anthropic/claude-sonnet-4-5"``, ``"claude-sonnet-4-5:high"``
            whose ``:level`` sets the thinking level unless ``thinking_level`` is given;
            docs/providers.md); default an offline :class:`FauxModel` that echoes the prompt.
        models: other models the session may name (restored by provider and id); names too.
        fallback_model: a model (or name) that answers a turn once ``model``'s retries are spent
            on a transient failure (overloaded, rate-limited, 5xx, dropped connection,
            timeout); a ``model_fallback`` event says so, and the reply names the fallback.
        registry: the models known by name, with their windows and prices; default the
            package's registry plus the ``models`` of the user settings file.
        tools: tools the model may call; names must be unique.
        active_tools: names of the tools offered to the model (default: all).
        system_prompt: sent with every request (``before_agent_start`` hooks may replace it for
            one run). A string gets the context files and the skills catalog appended; a
            function of :class:`PromptParts` builds the whole prompt (docs/resources.md).
        resources: where skills, prompt templates and context files come from
            (:class:`ResourceOptions`); the default discovers them from the working folder up
            to the repository root and from the user's config folder. ``None`` turns all of it
            off (no discovery, no catalog, no ``skill`` tool), for embedding.
        cwd: working directory for tools, resources and the supervisor; default the process's
            current folder. Never the session header's ``cwd``: a session file is untrusted
            (docs/security.md), and the folder it names is information only; pass
            ``cwd=session.cwd`` to work there once you trust it.
        thinking_level: reasoning effort (``off``, ``minimal``, ``low``, ``medium``, ``high``,
            ``xhigh``; mapped to Anthropic thinking budgets).
        stream_options: options of every request (timeout, retries, headers, caching).
        retry_base_delay_s: first retry delay in seconds; doubles at each attempt.
        tool_context: application state handed to every tool as ``run.context``: a value, or a
            zero-argument callable evaluated once per turn.
        tool_execution: ``parallel`` (default; a tool marked ``sequential`` still runs alone) or
            ``sequential``.
        steering_mode, follow_up_mode: deliver queued messages ``one_at_a_time`` (default) or
            ``all`` at each delivery point.
        compaction: when to compact automatically (``enabled``, ``reserve_tokens``,
            ``keep_recent_tokens``); checked before every request, inside a run too.
        summarizer: writes compaction and branch summaries; default: asks ``model`` (with the
            thinking level). ``ExtractiveSummarizer()`` works offline.
        context_window: the model's window in tokens; default the registry's figure for the
            model, else 200,000.
        raise_on_error: True (default): a request that fails for good (not retryable, such as
            401, 403, 404 or 400, or retries exhausted) makes :meth:`prompt` raise
            :class:`ProviderError` once the error reply is persisted. False follows pi: the
            error reply is returned and nothing raises.
        supervisor: decides every tool call the ``tool_call`` hooks let through
            (docs/permissions.md); default a :class:`SecuritySupervisor` in ``default`` mode
            with no approver, reading ``.harness/settings.json`` and the user settings: calls
            of controlled tools (``bash``, ``write``, ``edit``) and paths outside ``cwd`` are
            denied unless a rule allows them.
        depth: nesting depth (0: top level); a nested skill run passes its parent's + 1.
        approvals: operation keys already approved always (a nested run gets its parent's
            :attr:`approvals`); the session's own ``permission`` entries are added.
        command_hooks: command hooks from settings (:class:`CommandHooks`, Claude Code's
            ``hooks`` shape; docs/hooks.md), connected to this harness and handed to nested
            runs; None (default) runs none.
        max_stop_continues: how many times ``stop``/``subagent_stop`` hooks may continue one
            run (``Continue``); one more ends the run with ``agent_end.end_reason`` saying so.
        notification_delay_s: seconds a tool call's approval may stay pending before a
            ``notification`` event (``permission_prompt``) is sent; None: never.
        mcp_servers: MCP servers whose tools the model is offered, by name (docs/mcp.md):
            :class:`StdioServer`, :class:`HttpServer`, :class:`SseServer` or an in-process
            server object of the ``mcp`` SDK. Their tools are named
            ``mcp__<server>__<tool>`` and gated like any other; they start at the first
            prompt (or :meth:`start_mcp_servers`) and stop at :meth:`shutdown`. Settings
            files are read only when you ask: ``load_mcp_config(cwd).servers``.
        mcp_options: timeouts and restarts of those servers (:class:`McpOptions`).
        checkpoints: record what each tool call changes in the working folder, so the files
            can be rewound to any entry (:meth:`rewind_files`, ``navigate_tree(with_files=
            True)``) and forked with the session (:meth:`fork`). True keeps the contents in
            the user's ``CheckpointStore.default()`` (never beside the session's file); or give
            a :class:`CheckpointStore` (``CheckpointStore.for_repo(repo)``). Off by
            default (docs/checkpoints.md).
        max_turns, max_tokens, max_cost_usd: run limits for every prompt (``prompt()``'s own
            arguments override them): model requests per run; tokens per run (input, cached
            included, plus output, ``Usage.total``, summed over the replies); US dollars per
            run (each reply's recorded cost, else its tokens at the registry's prices). A
            limit reached ends the run after the current turn: the reply's ``stop_reason`` is
            ``max_turns``, ``max_tokens`` or ``max_cost``, a ``harness.run.stop`` entry records
            it, and ``limit_reached`` is sent (docs/agents.md). A sub-agent's usage counts in
            its parent's run.
        agents: helper agents the model may hand a task to through the ``task`` tool
            (offered when there is one; Claude Code's ``Task``): :class:`AgentDefinition` from
            code, or from files (``load_agents(cwd).agents``). Each call runs a nested harness
            (``depth + 1``) in a child session linked both ways to the call, with this
            harness's supervisor and approvals, its limits counting the child's usage, and
            this harness's receivers seeing its events (docs/agents.md).

    Raises:
        ValueError: two tools share a name, an active tool is unknown, a bad thinking level,
            or a tool named ``skill`` while resources are on (the name is the built-in's).
        UnknownModelError: a model name the registry does not know (code ``unknown_model``,
            with "did you mean" ``suggestions``).
        ModelSettingsError: the user settings' ``models`` has the wrong shape.
        McpNotInstalledError: ``mcp_servers`` given without the ``mcp`` extra installed
            (code ``mcp_not_installed``; the message says what to install).
        McpConfigError: a bad MCP server name (code ``mcp_config``).
        PriceUnknownError: ``max_cost_usd`` with a model (or fallback, or an agent's model)
            the registry has no price for (code ``price_unknown``).
        AgentDefinitionError: an agent with a bad or repeated name, an unknown tool or a bad
            thinking level (code ``agent_definition``); a tool of the harness named ``task``
            while there are agents is a ``ValueError``.
    """

    def __init__(
        self,
        *,
        session: Session,
        model: Model | str | None = None,
        models: Sequence[Model | str] = (),
        fallback_model: Model | str | None = None,
        registry: ModelRegistry | None = None,
        tools: Sequence[Tool] = (),
        active_tools: Sequence[str] | None = None,
        system_prompt: str | SystemPromptBuilder = DEFAULT_SYSTEM_PROMPT,
        resources: ResourceOptions | None = DEFAULT_RESOURCES,
        cwd: str | Path | None = None,
        thinking_level: ThinkingLevel | None = None,
        stream_options: StreamOptions | None = None,
        retry_base_delay_s: float = 1.0,
        tool_context: Any = None,
        tool_execution: Literal["parallel", "sequential"] = "parallel",
        steering_mode: QueueMode = "one_at_a_time",
        follow_up_mode: QueueMode = "one_at_a_time",
        compaction: CompactionSettings | None = None,
        summarizer: Summarizer | None = None,
        context_window: int | None = None,
        raise_on_error: bool = True,
        supervisor: Supervisor | None = None,
        depth: int = 0,
        approvals: Iterable[str] = (),
        command_hooks: CommandHooks | None = None,
        max_stop_continues: int = DEFAULT_MAX_STOP_CONTINUES,
        notification_delay_s: float | None = 1.0,
        mcp_servers: Mapping[str, McpServerConfig] | None = None,
        mcp_options: McpOptions | None = None,
        checkpoints: bool | CheckpointStore = False,
        max_turns: int | None = None,
        max_tokens: int | None = None,
        max_cost_usd: float | None = None,
        agents: Sequence[AgentDefinition] = (),
    ) -> None:
        if max_stop_continues < 0:
            raise ValueError(f"max_stop_continues must be 0 or more, not {max_stop_continues}")
        self._session = session
        self._raise_on_error = raise_on_error
        self._supervisor: Supervisor = (
            supervisor if supervisor is not None else SecuritySupervisor()
        )
        self._depth = depth
        self._approvals = {*approvals, *remembered_approvals(session)}
        self._registry = registry if registry is not None else load_registry().registry
        named_level: ThinkingLevel | None = None
        if model is None:
            self._model: Model = FauxModel(_echo)
        else:
            self._model, named_level = model_of(model, self._registry)
        self._models = [self._model, *(model_of(m, self._registry)[0] for m in models)]
        self._fallback = (
            None if fallback_model is None else model_of(fallback_model, self._registry)[0]
        )
        self._limits = RunLimits(
            max_turns=max_turns, max_tokens=max_tokens, max_cost_usd=max_cost_usd
        )
        if self._limits.max_cost_usd is not None:
            for priced in (self._model, self._fallback):
                if priced is not None:
                    require_price(priced, self._registry)
        self._parent_budget: Budget | None = None  # a sub-agent's: its parent run's budget
        self._tools = _tool_map(tools)
        self._active = self._checked_active(active_tools)
        self._agents, self._agent_models = self._checked_agents(agents)
        self._task_tool = task_tool(tuple(self._agents.values()), self._run_task)
        self._parent_session_id: str | None = None  # a nested run's parent session
        # a nested run's: the files of the sessions above it, protected as its own are
        self._outer_session_files: tuple[str, ...] = ()
        self._agent_type: str | None = None  # a sub-agent's name
        self._thinking: ThinkingLevel = _checked_level(thinking_level or named_level or "off")
        self._system_prompt = system_prompt
        self._cwd = Path(cwd) if cwd is not None else Path.cwd()
        if (
            cwd is None
            and session.cwd
            and Path(session.cwd) != self._cwd
            and os.path.isdir(session.cwd)
        ):
            # The header's folder is information only (docs/security.md): say where we work.
            log.warning(
                "session %s was recorded in %s; its tools work in the current folder %s "
                "(pass AgentHarness(cwd=...) to choose)",
                session.id,
                session.cwd,
                self._cwd,
            )
        self._options = stream_options if stream_options is not None else StreamOptions()
        self._retry_base_delay_s = retry_base_delay_s
        self._tool_context = tool_context
        self._sequential = tool_execution == "sequential"
        self._steering_mode: QueueMode = steering_mode
        self._follow_up_mode: QueueMode = follow_up_mode
        self._resources = (
            Resources(self._cwd, resources, read_check=self._read_check)
            if resources is not None
            else None
        )
        self._checkpoints = (
            None
            if checkpoints is False
            else Checkpoints(
                session,
                CheckpointStore.default() if checkpoints is True else checkpoints,
                self._cwd,
            )
        )
        if self._resources is not None and SKILL_TOOL_NAME in self._tools:
            raise ValueError(
                f"a tool is named {SKILL_TOOL_NAME!r}, the built-in skill tool's name; rename it "
                "or pass resources=None"
            )
        self._skill_tool = skill_tool(self._serve_skill)
        self._journal = SkillJournal()
        self._offer_stale = False
        self._metadata: Mapping[str, JSONValue] = {}  # the running prompt's, for SkillContext
        self._compaction = compaction if compaction is not None else CompactionSettings()
        self._summarizer = summarizer
        self._context_window = context_window
        self._steer: list[UserMessage] = []
        self._follow_up: list[UserMessage] = []
        self._next_turn: list[UserMessage] = []
        self._pending_writes: list[Callable[[], object]] = []
        self._operation: str | None = None
        self._task: asyncio.Task[Any] | None = None
        self._abort_requested = False
        self._accepting = False  # a run is going and will still deliver steer/follow_up
        self._aborted_queues = AbortResult(cleared_steer=(), cleared_follow_up=())
        self._idle = asyncio.Event()
        self._idle.set()
        self._disconnects: list[Callable[[], None]] = []
        self._max_stop_continues = max_stop_continues
        self._notification_delay_s = notification_delay_s
        self._run: Run | None = None
        self._started = False  # session_start was sent (so session_end will be)
        self._start_context: list[Message] = []  # session_start's texts, for the next turn
        self._command_hooks = command_hooks
        if command_hooks is not None:
            command_hooks.connect(self)
        # The settings and the skills journal live in the branch's other entries: its messages
        # are left unbuilt until a request reads them (issue 24, point 1).
        ids = session.path_ids(session.leaf_id)
        types = session.entry_types(ids)
        # (and the leaf itself: a recovering session drops a damaged leaf here, as reading
        # the whole branch did, rather than at the first prompt)
        branch = session.get_entries(
            [
                i
                for n, (i, t) in enumerate(zip(ids, types, strict=True))
                if t != "message" or n == len(ids) - 1
            ]
        )
        if self._resources is not None:
            self._journal.restore(branch)
        restored = restore_settings(
            branch,
            model=self._model,
            models=self._models,
            thinking_level=self._thinking,
            active_tools=self._active,
            tool_names=tuple(self._tools),
        )
        self._model, self._thinking, self._active = (
            restored.model,
            restored.thinking_level,
            restored.active_tools,
        )
        self._restore_events = restored.events
        self._mcp = (
            McpServers(mcp_servers, mcp_options or McpOptions(), cwd=self._cwd, emit=self._announce)
            if mcp_servers
            else None
        )
        self._mcp_offer = offered_servers(branch)  # what the session offered last
        self._mcp_checked = False

    # --- state -------------------------------------------------------------------------------

    @property
    def session(self) -> Session:
        return self._session

    @property
    def model(self) -> Model:
        return self._model

    @property
    def fallback_model(self) -> Model | None:
        """The model a turn goes to once ``model``'s retries are spent, if any."""
        return self._fallback

    @property
    def registry(self) -> ModelRegistry:
        """The models known by name (with windows and prices)."""
        return self._registry

    @property
    def model_info(self) -> ModelInfo | None:
        """What the registry knows of the current model (None: nothing)."""
        return self._registry.find(self._model.id, self._model.provider)

    @property
    def tools(self) -> tuple[Tool, ...]:
        """Every tool the harness has (active or not)."""
        return tuple(self._tools.values())

    @property
    def active_tools(self) -> tuple[str, ...]:
        """Names of the tools offered to the model."""
        return self._active

    @property
    def thinking_level(self) -> ThinkingLevel:
        return self._thinking

    @property
    def system_prompt(self) -> str:
        """The system prompt the next request gets (with context files and the catalog)."""
        return compose_system_prompt(self._system_prompt, self._prompt_parts())

    @property
    def supervisor(self) -> Supervisor:
        """The supervisor of this harness's tool calls; hand it to nested runs."""
        return self._supervisor

    @property
    def depth(self) -> int:
        """Nesting depth: 0 for a top-level harness."""
        return self._depth

    @property
    def command_hooks(self) -> CommandHooks | None:
        """The command hooks connected to this harness; hand them to nested runs."""
        return self._command_hooks

    @property
    def agents(self) -> tuple[AgentDefinition, ...]:
        """The agents the ``task`` tool offers (none: no ``task`` tool)."""
        return tuple(self._agents.values())

    @property
    def parent_session_id(self) -> str | None:
        """For a nested run (a sub-agent, a skill run): the session of the harness that
        started it; None at the top level."""
        return self._parent_session_id

    @property
    def approvals(self) -> frozenset[str]:
        """Operation keys approved always: the session's and those handed down."""
        return frozenset(self._approvals)

    @property
    def cwd(self) -> Path:
        return self._cwd

    @property
    def checkpoints(self) -> CheckpointStore | None:
        """Where checkpointed contents go (None: checkpoints are off)."""
        return None if self._checkpoints is None else self._checkpoints.store

    @property
    def stream_options(self) -> StreamOptions:
        return self._options

    @stream_options.setter
    def stream_options(self, options: StreamOptions) -> None:
        self._options = options

    @property
    def resources(self) -> ResourceOptions | None:
        """The resource options in effect (None: resources are off)."""
        return None if self._resources is None else self._resources.options

    @property
    def skill_offer(self) -> SkillOffer:
        """The catalog offered to the model: read back from the session's journal when
        reopened, resolved again at a prompt after a change to the skills."""
        return self._journal.offer or SkillOffer(scopes=(), entries=())

    @property
    def templates(self) -> tuple[PromptTemplate, ...]:
        return () if self._resources is None else self._resources.templates

    @property
    def context_files(self) -> tuple[ContextFile, ...]:
        """In system prompt order: the user's, then from the repository root down to cwd."""
        return () if self._resources is None else self._resources.context_files

    @property
    def compaction(self) -> CompactionSettings:
        return self._compaction

    @compaction.setter
    def compaction(self, settings: CompactionSettings) -> None:
        """From the next check on (pi's ``setAutoCompactionEnabled``: ``enabled=False``)."""
        self._compaction = settings

    @property
    def context_window(self) -> int:
        """Tokens the model accepts: the ``context_window`` option, else the registry's figure
        (the settings' ``models`` included), else by model id (200,000 when unknown)."""
        if self._context_window is not None:
            return self._context_window
        info = self.model_info
        if info is not None and info.context_window is not None:
            return info.context_window
        return context_window(self._model.id)

    @property
    def summarizer(self) -> Summarizer:
        """The ``summarizer`` option, else one that asks the current model."""
        if self._summarizer is not None:
            return self._summarizer
        return ModelSummarizer(self._model, self._thinking)

    @property
    def busy(self) -> bool:
        """True while an operation (a prompt) runs."""
        return self._operation is not None

    @property
    def queued(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """Texts waiting in the steering, follow-up and next-turn queues."""
        return (_texts(self._steer), _texts(self._follow_up), _texts(self._next_turn))

    # --- subscribing -------------------------------------------------------------------------

    def connect(
        self,
        event: str | type[Event],
        receiver: Receiver,
        *,
        priority: int = 0,
        timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S,
    ) -> Callable[[], None]:
        """Connect ``receiver(sender, event=...)`` to this harness's ``event``; returns a
        function that disconnects it. Higher ``priority`` runs first; an async receiver slower
        than ``timeout_s`` seconds (None: no limit) is cancelled and reported as
        ``handler_error``, and at ``tool_call`` blocks the call (see docs/events.md).

        The events a repository sends (``session_created``, ``session_before_fork``,
        ``session_fork``, ``session_deleted``; their sender is the repository) reach the
        receiver when they are about this harness's session: it is the one forked or deleted,
        or the new session's ``parentSession`` (a nested run's child, a fork). So one loop over
        ``EVENT_CLASSES`` sees everything about the harness."""
        if signal_for(event).name in _REPO_EVENTS:
            receiver = self._about_my_session(receiver)
            disconnect = connect(event, receiver, priority=priority, timeout_s=timeout_s)
            self._disconnects.append(disconnect)
            return disconnect
        disconnect = connect(event, receiver, sender=self, priority=priority, timeout_s=timeout_s)
        self._disconnects.append(disconnect)
        return disconnect

    def on(
        self,
        event: str | type[Event],
        *,
        priority: int = 0,
        timeout_s: float | None = DEFAULT_HOOK_TIMEOUT_S,
    ) -> Callable[[F], F]:
        """Decorator form of :meth:`connect`: ``@harness.on("tool_call")``."""

        def register(fn: F) -> F:
            self.connect(event, fn, priority=priority, timeout_s=timeout_s)
            return fn

        return register

    def _about_my_session(self, receiver: Receiver) -> Receiver:
        """``receiver`` called only for repository events about this harness's session."""

        def about(sender: object, event: Event) -> object:
            path = self._session.path
            mine = {self._session.id} if path is None else {self._session.id, str(path)}
            ids = (
                getattr(event, "session_id", None),
                getattr(event, "source_id", None),
                getattr(event, "parent_session", None),
            )
            if any(i is not None and i in mine for i in ids):
                return receiver(sender, event=event)
            return None

        about.__qualname__ = getattr(receiver, "__qualname__", "receiver")
        about.__module__ = getattr(receiver, "__module__", __name__)
        return about

    # --- running -----------------------------------------------------------------------------

    async def prompt(
        self,
        text: str | Sequence[UserContent],
        *,
        model: Model | None = None,
        thinking_level: ThinkingLevel | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
        initial_history: Sequence[Message] = (),
        max_turns: int | None = None,
        max_tokens: int | None = None,
        max_cost_usd: float | None = None,
        output_schema: Mapping[str, JSONValue] | type[Any] | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> Reply:
        """Send a user message and run until the model stops and no queued message is left.

        Messages queued with :meth:`next_turn` go first, then the prompt, then what
        ``before_agent_start`` hooks add. Every message is persisted as it ends. A text
        starting ``/name args``, where ``name`` is a prompt template, is sent expanded
        (:meth:`prompt_from_template`); any other ``/...`` text is sent as written.

        The skills catalog is offered at the start (docs/resources.md): the one journaled in
        the session is kept unless the skills changed since or the scopes differ.

        Args:
            model, thinking_level: for this call only (the Achilles seed's per-prompt
                overrides); the harness's settings and the session's entries are unchanged.
            metadata: merged into this call's ``StreamOptions.metadata`` (so
                ``before_provider_request`` hooks see it) and given to the scope resolver as
                ``SkillContext.metadata``.
            initial_history: messages written to a new, empty session before this prompt
                (no message events), to hydrate it from elsewhere; in one transaction, so a
                message that cannot be stored (``InvalidEntryError``) stores none of them.
            max_turns, max_tokens, max_cost_usd: this run's limits, over the harness's (see
                the constructor); None keeps the harness's.
            output_schema: the final answer must be JSON matching this JSON Schema (a dict),
                or a value of this type (an attrs class, dataclass, ``TypedDict``, or a type
                such as ``list[str]``). Through the model's own structured output when its
                provider has one (Anthropic, OpenAI), else through a ``respond`` tool. A bad
                answer gets a correction in the session and another try, ``output_retries``
                times at most (docs/agents.md).

        Returns:
            The model's last reply, as a :class:`Reply`: an ``AssistantMessage`` whose
            ``stop_reason`` is the run's (``max_turns``, ``max_tokens``, ``max_cost`` when a
            limit ended it) and whose ``output`` is the structured answer (converted to the
            type given). After :meth:`abort`, the last reply: ``stop_reason="aborted"`` if it
            was streaming (or waiting to retry), else the complete reply whose tool calls
            were aborted.

        Raises:
            ProviderError: a request failed for good (not retryable, or retries exhausted).
                The reply is persisted first, as pi does (an assistant entry with
                ``stopReason: "error"`` and ``errorMessage``), ``agent_end`` and ``settled``
                are sent, then this raises with the provider's ``status``, ``error_type`` and
                message; ``error.reply`` is the persisted reply. With
                ``AgentHarness(raise_on_error=False)`` the reply is returned instead.
            BusyError: another operation is running on this harness (code ``busy``).
            PromptBlockedError: a ``user_prompt_submit`` hook refused the prompt, or failed
                (code ``prompt_blocked``); nothing was written to the session.
            SessionNotEmptyError: ``initial_history`` given for a session that has entries
                (code ``session_not_empty``); nothing was written.
            OutputValidationError: the answer still did not match ``output_schema`` after
                ``output_retries`` corrections (code ``output_invalid``; ``errors``,
                ``reply``), raised once ``settled`` was sent.
            PriceUnknownError: ``max_cost_usd`` (this call's or the harness's) with a
                ``model`` the registry has no price for (code ``price_unknown``).
            ValueError: a bad ``thinking_level``, limit or ``output_schema``; a tool named
                ``respond`` with an ``output_schema`` that needs the built-in one.
            TypeError: an ``output_schema`` type that cannot be made a JSON Schema.
            ContextOverflowError: the context does not fit even after compacting once.
            InvalidRequestError: a ``context`` hook returned messages that cannot be sent.
            SummarizationError, CompactionError: the compaction after a context overflow
                failed. (An automatic compaction before a request that fails or is cancelled
                is skipped instead: the request still fits.)
            In these cases ``agent_end`` is not sent; ``settled`` is.

        A cancellation other than :meth:`abort` (a caller's timeout) persists the partial reply
        as ``aborted`` and propagates.
        """
        content = self._expand_command(text) if isinstance(text, str) else tuple(text)
        level = None if thinking_level is None else _checked_level(thinking_level)
        budget = self._run_budget(
            RunLimits(max_turns=max_turns, max_tokens=max_tokens, max_cost_usd=max_cost_usd),
            model,
        )
        output = (
            None
            if output_schema is None
            else self._output_check(output_schema, output_retries, model)
        )
        if initial_history:
            count = sum(1 for _ in self._session.entries())
            if count:
                raise SessionNotEmptyError(self._session.id, count)
        self._refuse_while_awaiting()

        async def start() -> tuple[Run, list[Message], Resumed | None]:
            self._metadata = dict(metadata or {})
            await self._emit_restore_events()
            if not self._started:
                await self._session_start(self._start_source())
            # Hooks see what the session will store (a lone surrogate as U+FFFD).
            prompt_message = valid_unicode(UserMessage(content=content))
            # Before anything is written: a refused prompt leaves the session as it was.
            submitted = await emit_user_prompt_submit(
                self, UserPromptSubmitEvent(session_id=self._session.id, message=prompt_message)
            )
            if submitted.blocked:
                raise PromptBlockedError(submitted.reason or "no reason given")
            if initial_history:  # one store transaction for the whole history
                self._session.append_messages(initial_history)
            await self._emit_restore_events()
            await self._start_mcp()
            await self._offer_skills()
            queued, self._next_turn = self._next_turn, []
            if queued:
                await self._queue_update()
            prompt_messages: list[Message] = [
                *queued,
                *self.drain_context(),
                prompt_message,
                *map(_hook_context, submitted.context),
            ]
            system_prompt = self.system_prompt
            started = await emit_before_agent_start(
                self,
                BeforeAgentStartEvent(prompt=tuple(prompt_messages), system_prompt=system_prompt),
            )
            run = self._new_run(
                system_prompt=started.system_prompt
                if started.system_prompt != system_prompt
                else None,
                model=model,
                thinking_level=level,
                budget=budget,
                output=output,
            )
            return run, [*prompt_messages, *started.messages], None

        return await self._operate("prompt", start)

    async def resume(
        self, *, output_schema: Mapping[str, JSONValue] | type[Any] | None = None
    ) -> Reply:
        """Go on with the run that stopped ``awaiting_approval`` (its approvals all answered,
        by :meth:`resolve_approval` or ``harness approve``/``deny``, in this process or
        another): the approved calls run, the denied ones get the reason as their result,
        and the loop goes on exactly as if it had never stopped: the same context, the run's
        limits and what it had used, its structured output. A call that had started in a
        process that stopped before its result (killed) is never run again; its result says
        so. Follows LangGraph's ``interrupt`` and resume, the OpenAI Agents SDK's
        interruptions (docs/agents.md).

        The calls run with the input the supervisor was shown when it deferred them (signed
        in the session); the supervisor decides each again with the person's answer, so a
        deny rule added meanwhile still denies.

        Args:
            output_schema: the type of a structured output the stopped run had, to get
                ``reply.output`` converted again (a JSON Schema is kept in the session; a
                type is not); its schema must be the one the run had.

        Returns:
            The run's last reply, as :meth:`prompt` returns it (``awaiting_approval`` again
            if more calls were deferred).

        Raises:
            NothingToResumeError: no run of the branch awaits approval, or some of its
                approvals are unanswered (``unanswered``; code ``nothing_to_resume``).
            ApprovalRefusedError: the pending entry is not signed by this user's harness (code
                ``approval_refused``); nothing runs.
            BusyError, ProviderError, OutputValidationError: as :meth:`prompt`.
            ValueError: ``output_schema`` is not the run's.
        """
        found = awaiting_run(self._session)
        if found is None:
            raise NothingToResumeError(
                "no run of this session's branch is awaiting approval (it was resumed "
                "already, or went on without its calls)"
            )
        if not found.signed:
            raise ApprovalRefusedError(
                found.approvals[0].id,
                "its entry is not signed by this user's harness (a session file is untrusted)",
            )
        if found.waiting:
            ids = [a.id for a in found.waiting]
            raise NothingToResumeError(
                f"approvals {', '.join(ids)} are not answered yet", unanswered=ids
            )
        state = found.run
        budget = Budget.restored(state, self._limits, self._registry)
        output = self._resumed_output(state, output_schema)
        by_call = {a.tool_call_id: a for a in found.approvals}
        calls = tuple(
            ResumedCall(
                call=call,
                approval_id=by_call[call.id].id,
                input=by_call[call.id].input,
                resolution=_resolution(by_call[call.id].status),
                reason=by_call[call.id].answer_reason,
                started=by_call[call.id].status == "started",
            )
            for call in found.calls()
        )
        turn_index = state.get("turnIndex")

        async def start() -> tuple[Run, list[Message], Resumed | None]:
            await self._emit_restore_events()
            if not self._started:
                await self._session_start(self._start_source())
            await self._start_mcp()
            run = self._new_run(budget=budget, output=output)
            run.turn_index = turn_index if isinstance(turn_index, int) else 0
            resumed = Resumed(
                reply=found.reply,
                calls=calls,
                claim=lambda approval_id: claim(self._session, found, approval_id),
            )
            return run, [], resumed

        return await self._operate("resume", start)

    def resolve_approval(
        self, approval_id: str, decision: Approve | ApproveAlways | Deny
    ) -> tuple[PendingApproval, ...]:
        """Answer one call a supervisor deferred (the run stopped ``awaiting_approval``):
        ``Approve()``, ``ApproveAlways()`` (also remembered, as a signed ``permission``
        entry, once it runs) or ``Deny(reason=...)``. The answer is a signed entry of the
        session, so any process may :meth:`resume` the run afterwards; the first answer to
        an approval is the one that counts.

        Returns:
            The approvals still unanswered (resume once there are none).

        Raises:
            ApprovalNotFoundError: no pending approval of the branch has this id.
            ApprovalRefusedError: the approval's entry is not signed by this user's harness,
                or it was answered already (code ``approval_refused``); nothing is written.
            BusyError: an operation is running.
        """
        if self._operation is not None:
            raise BusyError("resolve_approval", self._operation)
        found = awaiting_run(self._session)
        approval = (
            next((a for a in found.approvals if a.id == approval_id), None) if found else None
        )
        if found is None or approval is None:
            raise ApprovalNotFoundError(approval_id, f"session {self._session.id}")
        if not approval.signed:
            raise ApprovalRefusedError(
                approval_id,
                "its entry is not signed by this user's harness: a session file is untrusted, "
                "and an approval written by hand, edited or copied never runs",
            )
        if approval.status != "waiting":
            raise ApprovalRefusedError(approval_id, f"it was answered already ({approval.status})")
        resolution: Resolution = (
            "deny"
            if isinstance(decision, Deny)
            else "approve_always"
            if isinstance(decision, ApproveAlways)
            else "approve"
        )
        try:
            record_decision(
                self._session, found, approval_id, resolution, decision.reason, ApprovalSigner()
            )
        except ValueError as exc:
            raise ApprovalRefusedError(approval_id, str(exc)) from None
        return tuple(a for a in found.waiting if a.id != approval_id)

    @property
    def pending_approvals(self) -> tuple[PendingApproval, ...]:
        """The calls of the branch's last run that wait for an answer or to be resumed (an
        unsigned entry's show ``signed=False``: they can never be answered)."""
        found = awaiting_run(self._session)
        return () if found is None else found.approvals

    def _refuse_while_awaiting(self) -> None:
        """A new prompt would leave the deferred calls of a signed pending entry without
        results: refuse it while any waits (an unsigned entry blocks nothing)."""
        found = awaiting_run(self._session)
        if found is not None and found.signed:
            raise AwaitingApprovalError([a.id for a in found.approvals])

    def _session_files(self) -> tuple[str, ...]:
        """This session's files and those of the sessions above it: what a nested run's
        calls may not change unasked either."""
        return (*session_files(self._session), *self._outer_session_files)

    def _new_run(
        self,
        *,
        system_prompt: str | None = None,
        model: Model | None = None,
        thinking_level: ThinkingLevel | None = None,
        budget: Budget | None,
        output: OutputCheck | None,
    ) -> Run:
        return Run(
            sender=self,
            host=self,
            session=self._session,
            cwd=self._cwd,
            gate=Gate(
                supervisor=self._supervisor,
                sender=self,
                session=self._session,
                cwd=self._cwd,
                depth=self._depth,
                approvals=self._approvals,
                write=self._write,
                notification_delay_s=self._notification_delay_s,
                can_defer=self._depth == 0,
                outer_session_files=self._outer_session_files,
            ),
            system_prompt=system_prompt,
            model=model,
            thinking_level=thinking_level,
            metadata=self._metadata,
            depth=self._depth,
            max_stop_continues=self._max_stop_continues,
            checkpoints=self._checkpoints,
            budget=budget,
            output=output,
            parent_session_id=self._parent_session_id,
            agent_type=self._agent_type,
        )

    async def _operate(
        self,
        operation: str,
        start: Callable[[], Awaitable[tuple[Run, list[Message], Resumed | None]]],
    ) -> Reply:
        """One run (a prompt, a resume): claimed, started by ``start``, driven to its end,
        released; an abort absorbed; errors raised once ``settled`` is sent."""
        self._claim(operation)
        run: Run | None = None
        try:
            try:
                run, messages, resumed = await start()
                self._run = run
                self._accepting = True
                reply = await run_agent(run, messages, resumed=resumed)
            except asyncio.CancelledError:
                if not self._absorb_abort():
                    raise
                reply = await self._finish_aborted_run(run)
        finally:
            self._accepting = False
            self._run = None
            self._metadata = {}
            self.flush_pending_writes()
            try:
                await self._settle_checkpoints()
            finally:  # released even if the wait is cancelled
                self._release()
            # However the run ended: the harness is idle now.
            await notify(self, SettledEvent(next_turn_count=len(self._next_turn)))
        error = run.provider_error if run is not None else None
        if self._raise_on_error and error is not None and reply.stop_reason == "error":
            error.reply = reply
            raise error
        output = None if run is None else run.output
        if output is not None and output.error is not None:
            raise output.error
        return Reply.of(
            reply,
            stop_reason=None if run is None else run.stop_reason,
            output=None if output is None else output.value,
            pending=() if run is None else run.pending,
        )

    def _resumed_output(
        self,
        state: Mapping[str, JSONValue],
        given: Mapping[str, JSONValue] | type[Any] | None,
    ) -> OutputCheck | None:
        """The stopped run's structured output, its type given again if it had one."""
        raw = state.get("output")
        if not isinstance(raw, Mapping):
            if given is not None:
                raise ValueError("the stopped run had no output_schema")
            return None
        schema, retries, attempts = raw.get("schema"), raw.get("retries"), raw.get("attempts")
        if not isinstance(schema, Mapping) or not isinstance(retries, int):
            return None
        check = self._output_check(given if given is not None else schema, retries, None)
        if check.spec.schema != schema:
            raise ValueError("output_schema is not the schema the stopped run had")
        check.attempts = attempts if isinstance(attempts, int) else 0
        return check

    def _run_budget(self, limits: RunLimits, model: Model | None) -> Budget | None:
        """The budget of one run: this call's limits over the harness's, counted into the
        parent run's budget for a sub-agent; None when nothing limits the run.

        Raises:
            PriceUnknownError: a cost limit and a ``model`` the registry has no price for.
        """
        limits = limits.over(self._limits)
        parent = self._parent_budget
        if limits.max_cost_usd is not None or (parent is not None and parent.limited_by_cost()):
            for priced in (model or self._model, self._fallback):
                if priced is not None:
                    require_price(priced, self._registry)
        if parent is not None:
            return parent.child(limits)
        return Budget(limits=limits, registry=self._registry) if limits else None

    def _output_check(
        self,
        schema: Mapping[str, JSONValue] | type[Any],
        retries: int,
        model: Model | None,
    ) -> OutputCheck:
        spec = OutputSpec.of(schema, retries)
        if supports_output_schema(model or self._model):
            return OutputCheck(spec=spec, mode="native")
        if RESPOND_TOOL_NAME in self._offered_tools():
            raise ValueError(
                f"output_schema needs the built-in {RESPOND_TOOL_NAME!r} tool with this model "
                f"(it has no structured output of its own), and a tool of the harness has "
                "that name; rename it"
            )
        return OutputCheck(spec=spec, mode="tool")

    def prompt_sync(self, text: str | Sequence[UserContent]) -> Reply:
        """``prompt`` for scripts without an event loop.

        Raises:
            SyncInLoopError: called inside a running event loop (use ``await prompt``).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.prompt(text))
        raise SyncInLoopError("prompt")

    async def steer(self, text: str) -> None:
        """Queue a message for the running agent, delivered after the current tool batch.

        Raises:
            HarnessStateError: nothing is running (use :meth:`prompt` or :meth:`next_turn`).
        """
        self._require_running("steer")
        self._steer.append(UserMessage(content=text))
        await self._queue_update()

    async def follow_up(self, text: str) -> None:
        """Queue a message delivered when the running agent would otherwise stop.

        Raises:
            HarnessStateError: nothing is running.
        """
        self._require_running("follow_up")
        self._follow_up.append(UserMessage(content=text))
        await self._queue_update()

    async def next_turn(self, text: str) -> None:
        """Queue a message sent just before the next :meth:`prompt`'s own message."""
        self._next_turn.append(UserMessage(content=text))
        await self._queue_update()

    async def abort(self) -> AbortResult:
        """Stop the running operation and clear the steering and follow-up queues.

        The partial reply is persisted with ``stop_reason="aborted"``, tool calls in flight get
        aborted error results, running tools are cancelled (``bash`` kills its process group).
        Waits until the harness is idle, then emits ``abort``. Harmless when idle.
        """
        cleared = AbortResult(
            cleared_steer=_texts(self._steer), cleared_follow_up=_texts(self._follow_up)
        )
        self._steer.clear()
        self._follow_up.clear()
        if cleared.cleared_steer or cleared.cleared_follow_up:
            await self._queue_update()
        task = self._task
        if task is None or (task is asyncio.current_task() and not self._accepting):
            # Idle, or called while the run is already ending: nothing to cancel.
            await self._notify_abort(cleared)
            return cleared
        self._aborted_queues = AbortResult(
            cleared_steer=(*self._aborted_queues.cleared_steer, *cleared.cleared_steer),
            cleared_follow_up=(
                *self._aborted_queues.cleared_follow_up,
                *cleared.cleared_follow_up,
            ),
        )
        if not self._abort_requested:  # a second abort() must not cancel twice
            self._abort_requested = True
            task.cancel("aborted by AgentHarness.abort()")
        if task is not asyncio.current_task():
            await self._idle.wait()
        # From inside the run (a receiver or a tool), the cancellation lands at its next await;
        # the operation then emits `abort` itself.
        return cleared

    async def compact(
        self, custom_instructions: str | None = None, *, force: bool = False
    ) -> CompactionEntry | None:
        """Compact the session now: summarise what lies before the kept recent messages.

        Follows pi's algorithm (cut point, split-turn prefix, iterative update of the previous
        summary, read/modified files); custom instructions reach every summary call, the
        split-turn one included (pi #9348). ``session_before_compact`` hooks may cancel or supply
        the compaction; ``session_compact`` reports it.

        Args:
            force: keep no recent tokens verbatim (``keep_recent_tokens=0`` for this call):
                everything before the last message that can start the kept part is
                summarised, even in a session far below the threshold (chat's ``/compact``).

        Returns:
            The compaction entry, or None when there is nothing to compact.

        Raises:
            BusyError: another operation is running (a compaction is never interleaved with a
                prompt or a tree move: pi #9178).
            CompactionCancelledError, CompactionError, SummarizationError.
        """
        self._claim("compact")
        try:
            settings = evolve(self._compaction, keep_recent_tokens=0) if force else None
            return await self._compact(custom_instructions, settings=settings)
        except asyncio.CancelledError:
            if not self._absorb_abort():
                raise
            await self._notify_abort(self._aborted_queues)
            return None
        finally:
            self.flush_pending_writes()
            self._release()

    async def navigate_tree(
        self,
        target_id: str | None,
        *,
        summarize: bool = False,
        custom_instructions: str | None = None,
        label: str | None = None,
        with_files: bool = False,
        force: bool = False,
    ) -> NavigationResult:
        """Move to another point of the session tree.

        Navigating to a user message puts the leaf on its parent and returns the message's text
        as ``editor_text`` (to edit and resend); any other entry becomes the leaf; None goes
        before the first entry. With ``summarize``, the abandoned branch is summarised into a
        ``branch_summary`` entry under the new leaf, ``from_id`` = the abandoned leaf. ``label``
        labels the target. ``session_before_tree`` hooks may cancel, supply the summary, or
        change the instructions and label; ``session_tree`` reports the move. Everything is
        persisted, so a reopen lands on the same leaf.

        A ``harness.checkpoint`` entry (written between a tool call and its result) is not
        a leaf the model could go on from: the leaf goes to the end of its tool batch, the
        results included, instead (``result.new_leaf_id``).

        With ``with_files`` (checkpoints on), the working folder's files are put back as they
        were at the new leaf too, as :meth:`rewind_files` does (``force`` as there), checked
        before anything moves; ``result.files`` says what changed.

        Raises:
            BusyError: another operation is running.
            EntryNotFoundError: no such entry.
            InvalidNavigationTargetError: a ``label`` or ``leaf`` entry (navigate to its target).
            SummarizationError: the summary failed (nothing was written).
            CheckpointsOffError, RewindRefusedError, RewindCancelledError: with ``with_files``,
                as :meth:`rewind_files` (nothing was written).
        """
        self._claim("navigate_tree")
        try:
            target_id = conversation_landing(self._session, target_id)
            if with_files:
                checkpoints = self._require_checkpoints("navigate_tree(with_files=True)")
                plan = await prepare_rewind(
                    self,
                    checkpoints,
                    target_id,
                    force=force,
                    conversation=True,
                )
            old_leaf = self._session.leaf_id
            result = await navigate_session(
                self,
                self._session,
                target_id,
                summarize=summarize,
                custom_instructions=custom_instructions,
                label=label,
                summarizer=self.summarizer,
                budget_tokens=self.context_window - self._compaction.reserve_tokens,
            )
            if with_files and not result.cancelled:
                files = await announce_rewind(
                    self, checkpoints, plan, from_leaf_id=old_leaf, conversation=True
                )
                result = evolve(result, files=files)
            return result
        except asyncio.CancelledError:
            if not self._absorb_abort():
                raise
            await self._notify_abort(self._aborted_queues)
            leaf = self._session.leaf_id
            return NavigationResult(cancelled=True, old_leaf_id=leaf, new_leaf_id=leaf)
        finally:
            self.flush_pending_writes()
            self._release()

    async def rewind_files(self, entry_id: str | None, *, force: bool = False) -> RewindResult:
        """Put every file the session's checkpoints recorded back as it was when ``entry_id``
        was written (None: before the first entry); the conversation stays where it is.

        Follows Claude Code's ``rewind_files`` (its SDK's file checkpointing), for what
        ``bash`` changes too. Created files are removed, deleted ones restored, each
        atomically. A file changed since by something outside the session makes the rewind
        refuse, naming it (``force`` overwrites it). The rewind is recorded as a
        ``harness.rewind`` entry: rewinding to the entry before it undoes it. It writes only
        inside the working folder, the one the session was recorded in, through no symlink.
        ``session_before_rewind`` hooks may cancel; ``session_rewind`` reports it.

        Returns:
            What was restored, removed and skipped (with why).

        Raises:
            CheckpointsOffError: the harness records no checkpoints.
            WorkspaceMismatchError: the session was recorded in another folder, or names
                none as an absolute path (code ``workspace_mismatch``).
            RewindRefusedError: entries naming paths a rewind never writes (absolute,
                through a symlink, in git's folder...), files changed outside the session or
                contents missing, with their paths (code ``rewind_refused``); nothing was
                written.
            RewindCancelledError: a hook cancelled (code ``rewind_cancelled``).
            EntryNotFoundError: no such entry.
            BusyError: another operation is running.
        """
        checkpoints = self._require_checkpoints("rewind_files")
        self._claim("rewind_files")
        try:
            return await rewind_files(self, checkpoints, entry_id, force=force)
        finally:
            self.flush_pending_writes()
            self._release()

    async def fork(
        self,
        repo: SessionRepo,
        entry_id: str | None = None,
        *,
        position: ForkPosition | None = None,
        workspace: str | Path,
    ) -> Session:
        """Fork this session (``repo.fork``'s cut: ``entry_id``, ``position``) with its files:
        ``workspace`` (new, or an empty folder) gets the working folder as it was at the
        fork's last entry, a git worktree when the working folder is in a git repository
        (at ``HEAD``, with the uncommitted and untracked files over it), a copy otherwise.
        The fork's header records the new working folder as its ``cwd``; work there with
        ``AgentHarness(session=fork, cwd=fork.cwd, checkpoints=agent.checkpoints)`` (the same
        store).

        Returns:
            The new session, open.

        Raises:
            CheckpointsOffError: the harness records no checkpoints.
            WorkspaceExistsError: ``workspace`` exists and is not empty.
            RewindRefusedError: a content the folder needs at the entry is not in the store
                (removed by ``gc``) or was never stored: the paths in ``.unavailable`` and
                ``.unstored``; nothing was written.
            ForkCancelledError, InvalidForkTargetError: as ``repo.fork``.
            OSError: the folder could not be made (the fork is deleted again).
        """
        checkpoints = self._require_checkpoints("fork")
        fork, _ = await fork_with_files(
            checkpoints, repo, entry_id, position=position, workspace=Path(workspace)
        )
        return fork

    async def _settle_checkpoints(self) -> None:
        """Wait for the contents checkpoints still store (a run's end, shutdown), so nothing
        that reads the store later (gc in another process, say) misses them; a timeout is
        logged, not raised: the run itself is done."""
        if self._checkpoints is not None:
            try:
                await self._checkpoints.settle()
            except CheckpointError as exc:
                log.warning("session %s: %s", self._session.id, exc)

    def _require_checkpoints(self, what: str) -> Checkpoints:
        if self._checkpoints is None:
            raise CheckpointsOffError(what)
        return self._checkpoints

    def _absorb_abort(self) -> bool:
        """True when the cancellation being handled is this harness's own ``abort()`` (and no
        other cancellation, e.g. a caller's timeout, is pending)."""
        task = asyncio.current_task()
        return self._abort_requested and task is not None and task.uncancel() == 0

    async def _finish_aborted_run(self, run: Run | None) -> AssistantMessage:
        """After an absorbed abort: announce what was persisted while cancelling, end the run's
        events, emit ``abort``; return the last reply (``aborted`` if it was streaming)."""
        if run is not None:
            results: list[ToolResultMessage] = []
            for message, entry_id, execution_ended in run.unannounced:
                if isinstance(message, ToolResultMessage):
                    results.append(message)
                    if not execution_ended:
                        await notify(
                            self,
                            ToolExecutionEndEvent(
                                tool_call_id=message.tool_call_id,
                                tool_name=message.tool_name,
                                result=message,
                                is_error=message.is_error,
                            ),
                        )
                    await notify(self, MessageStartEvent(message=message))
                await notify(self, MessageEndEvent(message=message, entry_id=entry_id))
            if run.last_reply is not None:
                await notify(
                    self,
                    TurnEndEvent(
                        turn_index=run.turn_index,
                        message=run.last_reply,
                        tool_results=tuple(results),
                    ),
                )
            await notify(self, AgentEndEvent(messages=tuple(run.added)))
        await self._notify_abort(self._aborted_queues)
        if run is not None and run.last_reply is not None:
            return run.last_reply
        return AssistantMessage(stop_reason="aborted", error_message="Request was aborted")

    async def _notify_abort(self, cleared: AbortResult) -> None:
        self._aborted_queues = AbortResult(cleared_steer=(), cleared_follow_up=())
        await notify(
            self,
            AbortEvent(
                cleared_steer=cleared.cleared_steer, cleared_follow_up=cleared.cleared_follow_up
            ),
        )

    def revoke_approval(self, operation_key: str) -> bool:
        """Forget an approve-always (``harness chat``'s ``/permissions revoke KEY``): the key
        is asked again, in this harness and any opened on the session later. Writes a
        ``permission`` entry ``{"operationKey", "decision": "revoke"}`` (unsigned: it only
        takes away; ``remembered_approvals`` reads entries in file order).

        Returns:
            Whether ``operation_key`` was approved always.
        """
        if operation_key not in self._approvals:
            return False
        self._approvals.discard(operation_key)
        data: dict[str, JSONValue] = {"operationKey": operation_key, "decision": "revoke"}
        self._write(lambda: self._session.append_custom(PERMISSION_ENTRY, data))
        return True

    async def wait_for_idle(self) -> None:
        """Return once no operation is running."""
        await self._idle.wait()

    def end_run(self, reason: str) -> None:
        """End the running prompt at the next turn boundary: the current reply and tool batch
        finish and are persisted, no further request is sent, and ``agent_end`` carries
        ``reason`` as ``end_reason`` (Claude Code's ``continue: false`` with ``stopReason``).
        Unlike :meth:`abort` nothing is cancelled. The first reason given stands.

        Raises:
            HarnessStateError: no prompt is running.
        """
        run = self._run
        if run is None or not self._accepting:
            raise HarnessStateError("end_run() needs a running prompt")
        if run.end_reason is None:
            run.end_reason = reason

    async def shutdown(self, reason: str = "other") -> None:
        """Abort what runs, write pending settings, stop the MCP servers, send ``session_end``
        (with ``reason``, when ``session_start`` was sent), and disconnect every receiver
        connected through this harness. The session stays open (its owner closes it)."""
        if self.busy:
            await self.abort()
        self.flush_pending_writes()
        await self._settle_checkpoints()
        if self._mcp is not None:
            await self._mcp.shutdown()
        if self._started:
            self._started = False
            await notify(self, SessionEndEvent(session_id=self._session.id, reason=reason))
        for disconnect in self._disconnects:
            disconnect()
        self._disconnects.clear()

    # --- MCP servers (logic in _mcp/) ------------------------------------------------------

    @property
    def mcp_servers(self) -> tuple[McpServerStatus, ...]:
        """Each MCP server's name, transport, state, tools and last error (docs/mcp.md)."""
        return () if self._mcp is None else self._mcp.status()

    async def start_mcp_servers(self) -> tuple[McpServerStatus, ...]:
        """Start the MCP servers now (in parallel) instead of at the first prompt; a server
        that cannot start is reported in its status and by ``mcp_server_error``, never
        raised. Returns :attr:`mcp_servers`."""
        if self._mcp is not None:
            await self._mcp.start()
        return self.mcp_servers

    # --- settings ----------------------------------------------------------------------------

    async def set_model(self, model: Model | str) -> None:
        """Use ``model`` (or a name, see the constructor) from the next request on; persisted
        as a ``model_change`` entry. A session may change provider mid-way: messages another
        model wrote are converted as pi converts them (docs/providers.md).

        Raises:
            UnknownModelError: a name the registry does not know (code ``unknown_model``).
        """
        previous = self._model
        model, _ = model_of(model, self._registry)
        self._model = model
        if all(m is not model for m in self._models):
            self._models.append(model)
        self._write(lambda: self._session.append_model_change(model.provider, model.id))
        await notify(
            self,
            ModelUpdateEvent(
                provider=model.provider,
                model_id=model.id,
                previous_provider=previous.provider,
                previous_model_id=previous.id,
                source="set",
            ),
        )

    async def set_thinking_level(self, level: ThinkingLevel) -> None:
        """Set the reasoning effort; persisted as a ``thinking_level_change`` entry.

        Raises:
            ValueError: not one of ``off, minimal, low, medium, high, xhigh``.
        """
        previous = self._thinking
        self._thinking = _checked_level(level)
        self._write(lambda: self._session.append_thinking_level_change(level))
        await notify(
            self, ThinkingLevelUpdateEvent(level=level, previous_level=previous, source="set")
        )

    async def set_tools(self, tools: Sequence[Tool], active: Sequence[str] | None = None) -> None:
        """Replace the tool set (all active unless ``active`` names some); the active names are
        persisted as an ``active_tools_change`` entry.

        Raises:
            ValueError: duplicate names, or an active name that is not a tool.
        """
        previous_names, previous_active = tuple(self._tools), self._active
        self._tools = _tool_map(tools)
        self._active = self._checked_active(active)
        await self._tools_changed(previous_names, previous_active)

    async def set_active_tools(self, names: Sequence[str]) -> None:
        """Offer only these tools to the model; persisted as an ``active_tools_change`` entry.

        Raises:
            ValueError: a name that is not one of the harness's tools.
        """
        previous_active = self._active
        self._active = self._checked_active(names)
        await self._tools_changed(tuple(self._tools), previous_active)

    # --- resources: skills, prompt templates, context files (logic in _resources/) ----------

    async def set_resources(self, resources: ResourceOptions | None) -> None:
        """Discover again with other options (None: turn resources off); disabled skills stay
        disabled. Sends ``resources_update`` (``source="set"``).

        Raises:
            ValueError: resources turned on while a tool is named ``skill``.
        """
        if resources is not None and SKILL_TOOL_NAME in self._tools:
            raise ValueError(f"a tool is named {SKILL_TOOL_NAME!r}, the built-in skill tool's name")
        disabled = () if self._resources is None else self._resources.disabled
        fresh = None
        if resources is not None:
            fresh = await asyncio.to_thread(
                lambda: Resources(self._cwd, resources, read_check=self._read_check)
            )
            fresh.keep_disabled(disabled)
        self._resources = fresh
        await self._resources_changed("set", RefreshReport())

    async def get_skills(self) -> tuple[SkillRecord, ...]:
        """Every skill after scope precedence (disabled ones too), most specific scope first,
        then by name; each says which scopes it ``shadows``."""
        return (await self.get_skill_listing()).records

    async def get_skill_listing(self) -> SkillListing:
        """The skills and every diagnostic: bad names, missing descriptions, bad frontmatter,
        unreadable files, collisions (winner and loser paths and why), failed roots."""
        if self._resources is None:
            return SkillListing(scopes=(), records=(), resolved=(), diagnostics=())
        return await self._resources.listing(self._skill_context())

    async def get_skill_record(self, name_or_alias: str) -> SkillRecord | None:
        """The skill with this name, else the one with this alias; None when there is none."""
        if self._resources is None:
            return None
        return await self._resources.record(name_or_alias, self._skill_context())

    async def enable_skills(self, names: Sequence[str]) -> tuple[str, ...]:
        """Enable skills (names or aliases); returns the names whose state changed.

        The whole batch is checked first. A live run gets the new catalog and ``skill`` tool
        from its next request. Sends ``resources_update`` (``source="enable"``).

        Raises:
            SkillNotFoundError: a name is unknown (code ``skill_not_found``); nothing changed.
        """
        resources = self._require_resources("enable_skills")
        changed = await resources.enable(names, self._skill_context())
        await self._resources_changed("enable", RefreshReport())
        return changed

    async def disable_skills(self, names: Sequence[str]) -> tuple[str, ...]:
        """Disable skills: left out of the catalog, refused by the ``skill`` tool, not run by
        :meth:`run_skill` nor built. Like :meth:`enable_skills` otherwise."""
        resources = self._require_resources("disable_skills")
        changed = await resources.disable(names, self._skill_context())
        await self._resources_changed("disable", RefreshReport())
        return changed

    async def refresh_skills(self) -> RefreshReport:
        """Discover again (re-running a roots resolver) and report added, updated and removed
        skills by name. Disabled skills stay disabled; the next prompt is offered the new
        catalog, and bodies are served (and journaled) fresh from the files. When the roots
        cannot be resolved nothing changes and ``error`` says why. Sends ``resources_update``
        (``source="refresh"``)."""
        if self._resources is None:
            return RefreshReport()
        report = await self._resources.refresh(self._skill_context())
        self._journal.forget_bodies()
        await self._resources_changed("refresh", report)
        return report

    async def build_skills(self) -> tuple[SkillBuildResult, ...]:
        """Run every enabled skill's ``build`` command (frontmatter ``build``) in parallel, in
        its folder; each failure is reported in its own result and stops no other build."""
        if self._resources is None:
            return ()
        return await self._resources.build(self._skill_context())

    async def write_skill(
        self,
        request: SkillWriteRequest,
        *,
        name: str,
        description: str,
        body: str,
        disable_model_invocation: bool = False,
    ) -> Path:
        """Write a skill into the first folder of ``request.scope`` (atomically), after
        :func:`skill_write_verdict` allows it, then refresh. Sends ``resources_update``
        (``source="write"``).

        Raises:
            SkillWriteRefusedError: the verdict refused, or no folder serves the scope
                (code ``skill_write_refused``); nothing was written.
            HarnessStateError: resources are off.
        """
        resources = self._require_resources("write_skill")
        path = await resources.write_skill(
            request,
            name=name,
            description=description,
            body=body,
            disable_model_invocation=disable_model_invocation,
        )
        report = await resources.refresh(self._skill_context())
        self._journal.forget_bodies()
        await self._resources_changed("write", report)
        return path

    async def run_skill(
        self,
        name: str,
        prompt: str,
        *,
        model: Model | None = None,
        repo: SessionRepo | None = None,
    ) -> SkillRunResult:
        """Run one skill directly (the seeds' ``executeSkill``): a nested run whose
        instructions are the skill's body, in a child session.

        Works for skills the model is not offered (``disable_model_invocation``). The child
        harness has this one's supervisor (at ``depth + 1``), model (or ``model``), active
        tools, thinking level, stream options and ``tool_context``, and no skills of its own.
        Its session's header links this session (``parentSession``); this session gets a
        ``harness.skills.run`` custom entry linking the child (at the next turn boundary when
        called during a run), and nothing that reaches the model.

        Args:
            repo: where the child session is created; default the parent's sessions root for
                a JSONL parent, else a new in-memory repo.

        Raises:
            SkillNotFoundError: no such skill (code ``skill_not_found``).
            SkillDisabledError: the skill is disabled (code ``skill_disabled``).
            HarnessStateError: resources are off.
        """
        resources = self._require_resources("run_skill")

        def make_child(session: Session, instructions: str) -> AgentHarness:
            # The same supervisor decides the nested run's tool calls (DESIGN §7), one level
            # deeper, with the parent's approvals, so an approve-always given to the parent
            # holds for the skill too.
            child = AgentHarness(
                session=session,
                supervisor=self._supervisor,
                depth=self._depth + 1,
                approvals=self._approvals,
                model=model or self._model,
                models=self._models,
                fallback_model=self._fallback,
                registry=self._registry,
                # The parent's MCP tools go along, still served by the parent's servers.
                tools=[
                    *(self._tools[n] for n in self._active),
                    *(t for n, t in self._offered_tools().items() if n.startswith("mcp__")),
                ],
                system_prompt=instructions,
                resources=None,
                cwd=self._cwd,
                thinking_level=self._thinking,
                stream_options=self._options,
                retry_base_delay_s=self._retry_base_delay_s,
                tool_context=self._tool_context,
                tool_execution="sequential" if self._sequential else "parallel",
                compaction=self._compaction,
                summarizer=self._summarizer,
                context_window=self._context_window,
                raise_on_error=self._raise_on_error,
                command_hooks=self._command_hooks,
                max_stop_continues=self._max_stop_continues,
                notification_delay_s=self._notification_delay_s,
            )
            child._parent_session_id = self._session.id
            child._outer_session_files = self._session_files()
            return child

        return await run_skill(
            name,
            prompt,
            resources=resources,
            ctx=self._skill_context(),
            parent=self._session,
            repo=repo if repo is not None else default_child_repo(self._session),
            make_child=make_child,
            link=lambda data: self._write(
                lambda: self._session.append_custom(SKILL_RUN_TYPE, data)
            ),
        )

    def get_template(self, name: str) -> PromptTemplate:
        """Raises :class:`TemplateNotFoundError` (code ``template_not_found``)."""
        return self._require_resources("get_template").template(name)

    async def prompt_from_template(
        self, name: str, args: str | Sequence[str] = "", **options: Any
    ) -> Reply:
        """:meth:`prompt` with template ``name`` expanded with ``args`` (a string, split like
        a shell without escapes, or a list); ``options`` are :meth:`prompt`'s.

        Raises:
            TemplateNotFoundError: no template has this name; and what :meth:`prompt` raises.
        """
        return await self.prompt(self.get_template(name).expand(args), **options)

    def set_steering_mode(self, mode: QueueMode) -> None:
        self._steering_mode = mode

    def set_follow_up_mode(self, mode: QueueMode) -> None:
        self._follow_up_mode = mode

    # --- RunHost (used by the loop between turns) ---------------------------------------------

    def turn_settings(self) -> TurnSettings:
        return TurnSettings(
            model=self._model,
            tools=self._offered_tools(),
            system_prompt=self.system_prompt,
            thinking_level=self._thinking,
            options=self._options,
            sequential=self._sequential,
            tool_context=self._tool_context,
            retry_base_delay_s=self._retry_base_delay_s,
            fallback_model=self._fallback,
        )

    async def prepare_turn(self) -> None:
        """Before each turn: MCP servers that said their tools changed are listed again, so
        the turn is offered their new tools (journaled at the turn's end)."""
        if self._mcp is not None and await self._mcp.prepare_turn():
            self._journal_mcp(direct=False)

    async def drain_steering(self) -> list[UserMessage]:
        return await self._drain(self._steer, self._steering_mode)

    async def drain_follow_up(self) -> list[UserMessage]:
        return await self._drain(self._follow_up, self._follow_up_mode)

    async def compact_if_needed(self) -> None:
        """Before a request: compact when the context exceeds window - reserve_tokens.

        The request still fits (reserve_tokens are free), so a hook's ``Cancel`` or a failed
        summary skips the compaction instead of failing the run; a failed summary is logged.
        """
        if not self._compaction.enabled:
            return
        size = context_size(self._session.build_context().messages).tokens
        if not should_compact(size, self.context_window, self._compaction):
            return
        try:
            await self._compact(None, trigger="threshold")
        except CompactionCancelledError:
            return
        except SummarizationError as exc:
            log.warning("automatic compaction skipped: %s", exc)

    def drain_context(self) -> list[Message]:
        """``session_start`` hooks' texts not yet sent, as ``custom`` messages."""
        taken, self._start_context = self._start_context, []
        return taken

    async def compact_for_overflow(self) -> bool:
        """After a context-overflow error: compact once; False if nothing could be compacted
        or a hook cancelled (the run then ends with ``ContextOverflowError``)."""
        try:
            return await self._compact(None, trigger="overflow") is not None
        except CompactionCancelledError:
            return False

    def overflow_error(self) -> ContextOverflowError:
        """The error to raise when even the compacted context does not fit."""
        messages = self._session.build_context().messages
        sizes = sorted(
            ((_describe(m), estimate_tokens([m])) for m in messages), key=lambda x: -x[1]
        )
        return ContextOverflowError(context_size(messages).tokens, self.context_window, sizes[:3])

    def run_ending(self) -> None:
        """The loop is past its last delivery point: steer/follow_up are refused from now on."""
        self._accepting = False

    def flush_pending_writes(self) -> bool:
        """Write settings changes made while busy (at a turn boundary); True if there were any."""
        writes, self._pending_writes = self._pending_writes, []
        for write in writes:
            write()
        return bool(writes)

    # --- internals ---------------------------------------------------------------------------

    async def _compact(
        self,
        custom_instructions: str | None,
        trigger: Literal["manual", "threshold", "overflow"] = "manual",
        settings: CompactionSettings | None = None,
    ) -> CompactionEntry | None:
        self.flush_pending_writes()
        entry = await compact_session(
            self,
            self._session,
            settings=settings or self._compaction,
            summarizer=self.summarizer,
            custom_instructions=custom_instructions,
            trigger=trigger,
            max_output_tokens=info.max_output_tokens if (info := self.model_info) else None,
        )
        if entry is not None:
            await self._session_start("compact")
        return entry

    def _start_source(self) -> Literal["startup", "resume", "fork"]:
        if next(iter(self._session.entries()), None) is None:
            return "startup"
        return "fork" if self._session.header.parent_session else "resume"

    async def _session_start(self, source: Literal["startup", "resume", "fork", "compact"]) -> None:
        """Send ``session_start``; its texts wait in :meth:`drain_context` for the next turn."""
        self._started = True
        texts = await emit_session_start(
            self, SessionStartEvent(session_id=self._session.id, source=source)
        )
        self._start_context.extend(map(_hook_context, texts))

    def _claim(self, operation: str) -> None:
        if self._operation is not None:
            raise BusyError(operation, self._operation)
        try:
            self._session.claim(self, f"another harness's {operation}")
        except SessionBusyError as exc:
            # Two harnesses on one Session object would interleave their turns into one chain.
            raise BusyError(operation, exc.holder, where="this session") from None
        self._operation = operation
        self._task = asyncio.current_task()
        self._abort_requested = False
        self._idle.clear()

    def _release(self) -> None:
        self._session.release(self)
        self._operation = None
        self._task = None
        self._abort_requested = False
        self._idle.set()

    def _require_running(self, what: str) -> None:
        if not self._accepting:
            raise HarnessStateError(
                f"{what}() needs a running prompt that can still deliver it; "
                "use prompt() or next_turn()"
            )

    def _write(self, append: Callable[[], object]) -> None:
        if self._operation is None:
            append()
        else:
            self._pending_writes.append(append)

    async def _drain(self, queue: list[UserMessage], mode: QueueMode) -> list[UserMessage]:
        if not queue:
            return []
        count = len(queue) if mode == "all" else 1
        taken = queue[:count]
        del queue[:count]
        await self._queue_update()
        return taken

    async def _queue_update(self) -> None:
        steer, follow_up, next_turn = self.queued
        await notify(self, QueueUpdateEvent(steer=steer, follow_up=follow_up, next_turn=next_turn))

    async def _tools_changed(
        self, previous_names: tuple[str, ...], previous_active: tuple[str, ...]
    ) -> None:
        active = self._active
        self._write(lambda: self._session.append_active_tools_change(active))
        await notify(
            self,
            ToolsUpdateEvent(
                tool_names=tuple(self._tools),
                previous_tool_names=previous_names,
                active_tool_names=active,
                previous_active_tool_names=previous_active,
                source="set",
            ),
        )

    def _checked_active(self, names: Sequence[str] | None) -> tuple[str, ...]:
        if names is None:
            return tuple(self._tools)
        unknown = [n for n in names if n not in self._tools]
        if unknown:
            raise ValueError(f"unknown tools {unknown}; known: {sorted(self._tools)}")
        return tuple(dict.fromkeys(names))

    def _offered_tools(self) -> dict[str, Tool]:
        """The active tools, the built-in ``skill`` tool while a skill is offered, and the
        tools of the MCP servers that are up (a tool of the harness's own keeps its name)."""
        tools = {n: self._tools[n] for n in self._active}
        if self._journal.offer is not None and self._journal.offer.entries:
            tools[SKILL_TOOL_NAME] = self._skill_tool
        if self._agents:
            tools[TASK_TOOL_NAME] = self._task_tool
        if self._mcp is not None:
            for name, mcp_tool in self._mcp.tools().items():
                tools.setdefault(name, mcp_tool)
        return tools

    async def _announce(self, event: Event) -> None:
        await notify(self, event)  # type: ignore[arg-type]

    async def _start_mcp(self) -> None:
        """At a prompt's start: start the MCP servers not running; the first time, say which
        servers the session offered tools of and that are gone; journal a changed offer."""
        if self._mcp is not None:
            await self._mcp.start()
        if not self._mcp_checked:
            self._mcp_checked = True
            now = {} if self._mcp is None else self._mcp.offer()
            configured = set() if self._mcp is None else set(self._mcp.names)
            await report_gone(self._mcp_offer, now, configured, self._announce)
        self._journal_mcp(direct=True)

    def _journal_mcp(self, *, direct: bool) -> None:
        """Record the MCP tools offered when they changed (before the prompt's message at a
        prompt's start, ``direct``; else at the next turn boundary)."""
        now = {} if self._mcp is None else self._mcp.offer()
        if now == self._mcp_offer:
            return
        self._mcp_offer = now
        data: dict[str, JSONValue] = {"servers": {k: list(v) for k, v in now.items()}}
        if direct:
            self._session.append_custom(MCP_OFFER_TYPE, data)
        else:
            self._write(lambda: self._session.append_custom(MCP_OFFER_TYPE, data))

    def _prompt_parts(self) -> PromptParts:
        return PromptParts(
            context_files=self.context_files,
            catalog=self.skill_offer,
            templates=self.templates,
            tools=tuple(self._offered_tools()),
        )

    def _skill_context(self) -> SkillContext:
        return SkillContext(session_id=self._session.id, cwd=self._cwd, metadata=self._metadata)

    def _read_check(self) -> ReadCheck:
        """What the files the resources read are judged by (``Resources(read_check=...)``):
        the supervisor's ``read_check(cwd)``, or, for one without, a default
        ``SecuritySupervisor``'s (the user's settings and the project's rules)."""
        make = getattr(self._supervisor, "read_check", None)
        if not callable(make):
            make = SecuritySupervisor().read_check
        check: ReadCheck = make(self._cwd)
        return check

    def _require_resources(self, what: str) -> Resources:
        if self._resources is None:
            raise HarnessStateError(f"{what}() needs resources; this harness has resources=None")
        return self._resources

    def _expand_command(self, text: str) -> str:
        """``/name args`` with ``name`` a template: the expanded template; else ``text``."""
        command = split_command(text)
        if command is None or self._resources is None:
            return text
        found = next((t for t in self._resources.templates if t.name == command[0]), None)
        return text if found is None else found.expand(command[1])

    async def _offer_skills(self) -> None:
        """At a prompt's start: keep the journaled catalog unless the skills changed or the
        scopes differ; a new one is journaled before the prompt's message."""
        if self._resources is None:
            return
        ctx = self._skill_context()
        offer = self._journal.offer
        if offer is None or self._offer_stale or offer.scopes != self._resources.scopes(ctx):
            data = self._journal.set_offer(await self._resources.offer(ctx))
            if data is not None:
                self._session.append_custom(SKILL_CATALOG_TYPE, data)
            self._offer_stale = False

    async def _resources_changed(
        self, source: Literal["refresh", "enable", "disable", "set", "write"], report: RefreshReport
    ) -> None:
        """After a change: the catalog is offered again (at once during a run, so its next
        request sees it; else at the next prompt), then ``resources_update`` is sent."""
        self._offer_stale = True
        if self._accepting and self._resources is not None:
            data = self._journal.set_offer(await self._resources.offer(self._skill_context()))
            if data is not None:
                self._write(lambda: self._session.append_custom(SKILL_CATALOG_TYPE, data))
            self._offer_stale = False
        elif self._resources is None:
            self._journal.set_offer(SkillOffer(scopes=(), entries=()))
        listing = await self.get_skill_listing()
        await notify(
            self,
            ResourcesUpdateEvent(
                source=source,
                skills=[r.name for r in listing.records],
                disabled=[r.name for r in listing.records if not r.enabled],
                added=report.added,
                updated=report.updated,
                removed=report.removed,
                templates=[t.name for t in self.templates],
                context_files=[f.path for f in self.context_files],
                diagnostics=[d.message for d in listing.diagnostics],
            ),
        )

    async def _serve_skill(self, name: str) -> ToolResult:
        """The built-in ``skill`` tool (see ``_resources/skill_tool.py``)."""
        resources = self._require_resources("skill")
        return await serve_skill(
            name,
            journal=self._journal,
            load=resources.load,
            ctx=self._skill_context(),
            session=self._session,
        )

    async def _emit_restore_events(self) -> None:
        events, self._restore_events = self._restore_events, ()
        for event in events:
            await notify(self, event)

    # --- sub-agents (logic in _agents/) --------------------------------------------------------

    def _checked_agents(
        self, agents: Sequence[AgentDefinition]
    ) -> tuple[dict[str, AgentDefinition], dict[str, Model]]:
        """The agents by name (``check_agents``), and the models of those that name one in
        code (made now, so a bad name fails here); a file's model is made when the agent
        first runs. A cost limit needs each such model's price."""
        if agents and TASK_TOOL_NAME in self._tools:
            raise ValueError(
                f"a tool is named {TASK_TOOL_NAME!r}, the built-in tool of the agents; rename it"
            )
        by_name = check_agents(agents, tuple(self._tools))
        models: dict[str, Model] = {}
        for agent in by_name.values():
            if agent.model is not None and not isinstance(agent.model, str):
                models[agent.name] = agent.model
            elif isinstance(agent.model, str) and agent.source == "code":
                models[agent.name] = model_of(agent.model, self._registry)[0]
            if self._limits.max_cost_usd is not None and agent.name in models:
                require_price(models[agent.name], self._registry)
        return by_name, models

    def _agent_child(
        self, agent: AgentDefinition, session: Session, run: Run | None
    ) -> AgentHarness:
        """The nested harness of one ``task`` call: one level deeper, this harness's
        supervisor, approvals and settings, its budget linked to the running prompt's, and
        its events reaching this harness's receivers (command hooks included)."""
        model = self._agent_models.get(agent.name)
        if model is None and isinstance(agent.model, str):
            model = self._agent_models[agent.name] = model_of(agent.model, self._registry)[0]
        child = AgentHarness(
            session=session,
            supervisor=self._supervisor,
            depth=self._depth + 1,
            approvals=self._approvals,
            model=model or self._model,
            models=self._models,
            fallback_model=self._fallback if model is None else None,
            registry=self._registry,
            tools=agent_tools(
                agent, self._offered_tools(), self._tools, (TASK_TOOL_NAME, SKILL_TOOL_NAME)
            ),
            system_prompt=agent_instructions(agent),
            resources=None,
            cwd=self._cwd,
            thinking_level=_checked_level(agent.thinking) if agent.thinking else self._thinking,
            stream_options=self._options,
            retry_base_delay_s=self._retry_base_delay_s,
            tool_context=self._tool_context,
            tool_execution="sequential" if self._sequential else "parallel",
            compaction=self._compaction,
            summarizer=self._summarizer,
            context_window=self._context_window if model is None else None,
            max_stop_continues=self._max_stop_continues,
            notification_delay_s=self._notification_delay_s,
            # The child's file changes are recorded in its own session, in the same store.
            checkpoints=False if self._checkpoints is None else self._checkpoints.store,
        )
        child._parent_budget = None if run is None else run.budget
        child._parent_session_id = self._session.id
        child._outer_session_files = self._session_files()
        child._agent_type = agent.name
        child._disconnects.append(link_sender(child, self))
        return child

    async def _run_task(self, call: TaskCall) -> ToolResult:
        """The ``task`` tool: run the agent in a child session next to this one."""
        run = self._run
        call = evolve(call, parent_entry_id=None if run is None else run.reply_entry_id)
        return await run_task(
            call,
            parent=self._session,
            repo=default_child_repo(self._session),
            make_child=lambda agent, session: self._agent_child(agent, session, run),
        )


def _tool_map(tools: Sequence[Tool]) -> dict[str, Tool]:
    names = [t.name for t in tools]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"tool names must be unique; repeated: {', '.join(duplicates)}")
    return {t.name: t for t in tools}


def _checked_level(level: str) -> ThinkingLevel:
    if level not in THINKING_LEVELS:
        raise ValueError(f"thinking level {level!r} is not one of {', '.join(THINKING_LEVELS)}")
    return level


def _hook_context(text: str) -> CustomMessage:
    """A hook's ``AddContext`` text as the message the model sees (Claude Code's
    ``additionalContext``); not shown by UIs (``display`` False)."""
    return CustomMessage(custom_type=HOOK_CONTEXT_TYPE, content=text, display=False)


def _describe(message: Message) -> str:
    if isinstance(message, ToolResultMessage):
        return f"tool result of {message.tool_name} ({message.tool_call_id})"
    return f"{message.role} message"


def _resolution(status: str) -> Resolution:
    """An answered approval's status as the answer (a started call was approved)."""
    if status == "approve_always":
        return "approve_always"
    return "deny" if status == "deny" else "approve"


def _texts(queue: Sequence[UserMessage]) -> tuple[str, ...]:
    return tuple(m.text for m in queue)
