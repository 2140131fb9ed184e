"""``harness run -p TEXT``: one prompt, non-interactive, for scripts and CI.

The reply is printed as text (default; terminal controls shown escaped), as one JSON object
(``--output json``: the exact reply, the session id and path), or every bus event is written as
one JSON line as it fires (``--output events``). JSON output writes the characters a terminal
would act on as escapes (``\\u009b``...), so it still decodes to exactly the values. A provider
error exits 1 with ``error[<code>]: <message>`` once the error reply is persisted. Tool calls
go to a :class:`~harness.SecuritySupervisor` with no approver: controlled calls (``bash``,
``write``, ``edit``, paths outside the cwd) are denied unless ``--mode`` or a rule in the
settings allows them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

import attrs
import click

from hooks import (
    EVENT_CLASSES,
    AssistantMessage,
    Event,
    ImageContent,
    Message,
    MessageEndEvent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
)
from repos import (
    CorruptSessionError,
    Session,
    SessionNotFoundError,
    SessionRepo,
    encode_message,
)
from repos.claude_code import is_claude_code

from .._harness import AgentHarness
from .._permissions import CLAUDE_CODE_MODES, PERMISSION_MODES, ModeName, SecuritySupervisor
from .._providers.base import Model, ModelRequest, ThinkingLevel
from .._providers.faux import FauxModel, FauxReply, FauxToolCall
from .._tools.bash import bash_tool
from .._tools.edit import edit_tool
from .._tools.find import find_tool
from .._tools.grep import grep_tool
from .._tools.ls import ls_tool
from .._tools.read import read_tool
from .._tools.write import write_tool
from ._checkpoints import checkpoint_option, use_checkpoints
from ._common import describe_store, find_ref, open_ref, open_repo, root_option, run_async
from ._escape import echo, json_line, terminal
from ._hooks import attach_hook_output, load_command_hooks
from ._mcp import configured_mcp_servers, show_mcp_errors
from ._models import DEFAULT_MODEL, ModelChoice, model_options
from ._render import cost_json, reply_totals
from ._sessions import _warn_diagnostics

__all__ = ["DEFAULT_MODEL", "event_json", "offline_model", "run"]

OFFLINE_MODEL_ID = "offline-echo"

_MESSAGE_TYPES: tuple[type, ...] = get_args(Message)
_BLOCK_TYPES = (TextContent, ThinkingContent, ToolCall, UnknownContent)


# --- the offline model ------------------------------------------------------------------------


def _offline_reply(request: ModelRequest) -> FauxReply:
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage):
        status = "failed" if last.is_error else "returned"
        first = (last.text.strip().splitlines() or ["(no output)"])[0]
        return FauxReply(text=f"(offline) {last.tool_name} {status}: {first}")
    text = str(getattr(last, "text", "")) if last is not None else ""
    if text.startswith("@") and text[1:].strip():
        return _offline_call(text[1:], f"offline_call_{len(request.messages)}")
    if text.startswith("!") and text[1:].strip():
        command = text[1:].strip()
        return FauxReply(
            text=f"(offline) Running {command!r}.",
            # FauxModel's own ids restart at faux_call_1 in every process: a session continued
            # by a second run would hold the same id twice. The branch length is unique.
            tool_calls=[
                FauxToolCall(
                    name="bash",
                    arguments={"command": command},
                    id=f"offline_call_{len(request.messages)}",
                )
            ],
        )
    return FauxReply(text=f"(offline) You said: {text}")


def _offline_call(text: str, call_id: str) -> FauxReply:
    """``TOOL {JSON}``: a call of TOOL with those arguments (none: ``{}``)."""
    name, _, given = text.strip().partition(" ")
    try:
        arguments = json.loads(given) if given.strip() else {}
    except ValueError as exc:
        return FauxReply(text=f"(offline) the arguments of {name} are not JSON: {exc}")
    if not isinstance(arguments, dict):
        return FauxReply(text=f"(offline) the arguments of {name} must be a JSON object")
    return FauxReply(
        text=f"(offline) Calling {name}.",
        tool_calls=[FauxToolCall(name=name, arguments=arguments, id=call_id)],
    )


def offline_model() -> FauxModel:
    """The scripted model of ``--offline``: it echoes the prompt; a prompt ``!COMMAND`` makes it
    call the ``bash`` tool with COMMAND, and ``@TOOL {JSON}`` calls TOOL (an MCP tool, say)
    with those arguments; then it reports the first line of the result."""
    return FauxModel(_offline_reply, model_id=OFFLINE_MODEL_ID)


# --- events as JSON -----------------------------------------------------------------------------


def _jsonable(value: object) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, _MESSAGE_TYPES):
        return encode_message(value)  # type: ignore[arg-type]
    if isinstance(value, ImageContent):
        return {"type": "image", "data": value.data, "mimeType": value.mime_type}
    if isinstance(value, _BLOCK_TYPES):
        return encode_message(AssistantMessage(content=(value,)))["content"][0]
    if isinstance(value, BaseException):
        return {"type": type(value).__name__, "message": str(value)}
    if attrs.has(type(value)):
        names = [f.name for f in attrs.fields(type(value))]  # type: ignore[arg-type]
        return {name: _jsonable(getattr(value, name)) for name in names}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return repr(value)


def event_json(event: Event) -> dict[str, Any]:
    """An event as a JSON object: ``name``, then its fields (snake_case, as the attrs class
    names them); messages are encoded as in session files (``encode_message``)."""
    out: dict[str, Any] = {"name": event.name}
    for f in attrs.fields(type(event)):
        out[f.name] = _jsonable(getattr(event, f.name))
    return out


class _EventWriter:
    """Writes each event as one JSON line on stdout, flushed (a pipe sees it at once).

    When the reader goes away (``harness run ... | head -1``) writing stops, but the run goes
    on to the end so that the session is complete; ``broken`` then says so.
    """

    def __init__(self) -> None:
        self.broken = False

    def __call__(self, sender: object, event: Event) -> None:
        if self.broken:
            return
        try:
            echo(json_line(event_json(event), default=repr))
        except BrokenPipeError:
            self.broken = True
            # Python flushes stdout again at exit: point it at /dev/null so that cannot fail.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


# --- the command ------------------------------------------------------------------------------


async def _prompt_once(harness: AgentHarness, text: str) -> AssistantMessage:
    """One prompt, then the harness shuts down in the same event loop: the MCP servers stop
    and the hooks get ``session_end``."""
    try:
        return await harness.prompt(text)
    finally:
        await harness.shutdown()


async def _pick_session(
    repo: SessionRepo, session_ref: str | None, continue_: bool, cwd: Path
) -> Session:
    if session_ref is not None:
        path = await find_ref(repo, session_ref)
        try:
            return await open_ref(repo, path)
        except CorruptSessionError:
            if isinstance(path, Path) and path.is_file() and is_claude_code(path):
                raise CorruptSessionError(
                    path,
                    1,
                    0,
                    "a Claude Code transcript, not one of our sessions: "
                    f"`harness import claude-code {path}` imports it, then continue the import",
                ) from None
            raise
    if continue_:
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
    if not recorded or os.path.realpath(recorded) == os.path.realpath(here):
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


def session_options(command: Callable[..., None]) -> Callable[..., None]:
    """``--session ID|PATH``, ``--cwd DIR``, ``-c/--continue`` and the model options
    (``_models.model_options``), shared by ``run`` and ``chat`` (passed as ``session_ref``,
    ``work_dir``, ``continue_``, ``model_id``, ``base_url``, ``api``, ``fallback_model_id``)."""
    command = model_options(command)
    command = click.option(
        "-c",
        "--continue",
        "continue_",
        is_flag=True,
        help="Continue the most recently active session of the current folder.",
    )(command)
    command = click.option(
        "--cwd",
        "work_dir",
        metavar="DIR",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=None,
        help="Work in DIR (default: the current folder; a session's recorded folder is "
        "used only when given here).",
    )(command)
    return click.option(
        "--session", "session_ref", metavar="ID|PATH", help="Continue this session."
    )(command)


def permission_options(command: Callable[..., None]) -> Callable[..., None]:
    """``--mode MODE`` and ``--trust-project``, shared by ``run`` and ``chat`` (passed as
    ``mode`` and ``trust_project``)."""
    command = click.option(
        "--trust-project",
        is_flag=True,
        help="Let the working folder's .harness/settings.json widen permissions (its allow "
        "rules and mode) and run its hooks; without it, project settings may only restrict "
        "permissions and their hooks do not run (docs/permissions.md, docs/hooks.md).",
    )(command)
    return click.option(
        "--mode",
        type=click.Choice(list(dict.fromkeys([*PERMISSION_MODES, *CLAUDE_CODE_MODES]))),
        default=None,
        help="Permission mode for tool calls, ours or Claude Code's name (default: the "
        "settings files', else `default`).",
    )(command)


@click.command()
@click.option("-p", "--prompt", "text", metavar="TEXT", required=True, help="The prompt to send.")
@session_options
@click.option(
    "--offline",
    is_flag=True,
    help="Use the scripted offline model (echoes; `!COMMAND` asks for a bash call, "
    "`@TOOL {JSON}` for a call of TOOL).",
)
@click.option(
    "--output",
    type=click.Choice(["text", "json", "events"]),
    default="text",
    show_default=True,
    help="text: the reply; json: reply and session id; events: every event as a JSON line.",
)
@permission_options
@checkpoint_option
@root_option
def run(
    text: str,
    session_ref: str | None,
    work_dir: Path | None,
    continue_: bool,
    model_id: str | None,
    base_url: str | None,
    api: Literal["responses", "chat"] | None,
    fallback_model_id: str | None,
    offline: bool,
    output: str,
    mode: ModeName | None,
    trust_project: bool,
    checkpoints: bool | None,
    root: str | None,
) -> None:
    """Send one prompt and print the reply; for scripts and CI.

    Without --session or --continue a new session is created for the current folder. There is
    no approver: tool calls that need approval are denied unless --mode or a settings rule
    allows them (a rule of the project's settings only with --trust-project). Command hooks
    of the user's settings run, and the MCP servers of the settings files are offered (a
    project's only with --trust-project; `harness hooks list`, `harness mcp list`). A provider
    error, or a prompt a hook refuses, exits 1 (the error reply is persisted first).
    """
    if session_ref is not None and continue_:
        raise click.UsageError("give at most one of --session and --continue")
    if offline and (model_id or base_url or api or fallback_model_id) is not None:
        raise click.UsageError(
            "--offline uses the scripted model; it takes no --model, --base-url, --api or "
            "--fallback-model"
        )
    if not text.strip():
        raise click.BadParameter("is empty; nothing was written", param_hint="--prompt")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes the locale could not decode (surrogate escapes)
        raise click.BadParameter(
            "is not valid UTF-8; nothing was written", param_hint="--prompt"
        ) from None
    repo = open_repo(root)
    here = Path(os.path.realpath(work_dir or Path.cwd()))  # as getcwd() names it
    choice = ModelChoice(
        model_id=model_id,
        base_url=base_url,
        api=api,
        fallback_model_id=fallback_model_id,
        cwd=here,
        trust_project=trust_project,
    )
    # A model that cannot be made (no API key, an unknown name) must fail before a new
    # session file is written.
    model: Model | None = offline_model() if offline else None
    level: ThinkingLevel | None = None
    if model is None and (choice.given or (session_ref is None and not continue_)):
        model, level = choice.model()
    fallback = None if offline else choice.fallback()
    # Broken hook settings fail before a session file is written (run works in `here`).
    command_hooks = load_command_hooks(here, trust_project=trust_project)
    with run_async(_pick_session(repo, session_ref, continue_, here)) as session:
        _warn_diagnostics(session)
        seen = len(session.diagnostics)
        cwd = working_folder(session, here if work_dir is not None else None)
        if model is None:
            model, level = choice.model(session)
        harness = AgentHarness(
            session=session,
            model=model,
            fallback_model=fallback,
            registry=choice.registry,
            thinking_level=level,
            tools=[
                read_tool(),
                write_tool(),
                edit_tool(),
                bash_tool(),
                ls_tool(),
                grep_tool(),
                find_tool(),
            ],
            supervisor=SecuritySupervisor(mode=mode, trust_project=cwd if trust_project else False),
            cwd=cwd,
            command_hooks=command_hooks,
            mcp_servers=configured_mcp_servers(cwd, trust_project),
            checkpoints=use_checkpoints(checkpoints),
        )
        attach_hook_output(harness, lambda text: echo(text, err=True))
        show_mcp_errors(harness)
        writer = _EventWriter()
        if output == "events":
            for name in EVENT_CLASSES:
                harness.connect(name, writer, priority=-100)
        added: list[Message] = []

        def persisted(sender: object, event: MessageEndEvent) -> None:
            if event.entry_id is not None:  # a failed attempt that was retried is not stored
                added.append(event.message)

        harness.connect("message_end", persisted)
        reply = run_async(_prompt_once(harness, text))
        _warn_diagnostics(session, since=seen)  # damaged bodies found while building context
        if writer.broken:
            echo(f"warning: stdout was closed; the run finished in session {session.id}", err=True)
            raise SystemExit(1)
        if output == "text":
            # Terminal controls escaped even into a pipe (a reply holding ESC]52 would write the
            # clipboard of whoever views the log); `--output json` carries the exact text.
            echo(reply.text)
        elif output == "json":
            echo(
                json_line(
                    {
                        "session_id": session.id,
                        "path": str(session.path),
                        "leaf_id": session.leaf_id,
                        "reply": reply.text,
                        "stop_reason": reply.stop_reason,
                        "model": f"{reply.provider}/{reply.model}",
                        "usage": {
                            "input": reply.usage.input,
                            "output": reply.usage.output,
                            "cache_read": reply.usage.cache_read,
                            "cache_write": reply.usage.cache_write,
                            "total_tokens": reply.usage.total_tokens,
                        },
                        # This run's replies (every turn of it), priced from the registry
                        # when a reply recorded no cost.
                        "cost": cost_json(reply_totals(added, choice.registry)),
                    },
                    indent=True,
                )
            )
