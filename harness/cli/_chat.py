"""``harness chat``: an interactive session in the terminal.

Replies and thinking stream as they arrive, tool calls show as they start, update and end
(``_chat_view.py``), the security supervisor's questions are answered y / n / always, and slash
commands work on the session (``_chat_commands.py``). Ctrl-C during a turn aborts it through
``AgentHarness.abort()`` (the partial reply is persisted as ``aborted``); Ctrl-C on an empty
prompt, Ctrl-D or ``/exit`` end the chat. On a terminal the prompt has line editing and a
history (prompt_toolkit); otherwise plain lines are read, so a script can pipe a chat in.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import click
from rich.console import Console

from hooks import HarnessError, McpServerErrorEvent, NotificationEvent, notify
from repos import Session, SessionRepo

from .._compaction.summarize import ExtractiveSummarizer
from .._harness import AgentHarness
from .._permissions import (
    Approve,
    ApproveAlways,
    Decision,
    Deny,
    ModeName,
    PermissionRequest,
    SecuritySupervisor,
)
from .._providers.base import Model, ThinkingLevel
from .._restore import THINKING_LEVELS
from .._settings_hooks import CommandHooks
from .._tools.bash import bash_tool
from .._tools.edit import edit_tool
from .._tools.find import find_tool
from .._tools.grep import grep_tool
from .._tools.ls import ls_tool
from .._tools.read import read_tool
from .._tools.write import write_tool
from ._chat_commands import run_command
from ._chat_input import LineReader, PipeReader, history_path
from ._chat_offline import chat_offline_model
from ._chat_view import ChatView
from ._checkpoints import checkpoint_option, use_checkpoints
from ._common import one_line, open_repo, root_option, run_async
from ._hooks import attach_hook_output, load_command_hooks
from ._mcp import configured_mcp_servers
from ._models import ModelChoice
from ._run import (
    _pick_session,
    permission_options,
    session_options,
    working_folder,
)
from ._sessions import _warn_diagnostics

__all__ = ["IDLE_ENV", "Chat", "chat"]

IDLE_ENV = "HARNESS_CHAT_IDLE_S"
"""Seconds the chat waits for input before it sends ``notification`` (``idle_prompt``) to its
hooks; default 60 (Claude Code's)."""


class Chat:
    """One chat: the session and its harness, the reader, the view, the slash commands.

    :meth:`switch_to` (``/fork``) replaces :attr:`session` and :attr:`harness`: the chat goes on
    in the new session. The supervisor, and so the approver and the mode, is shared by every
    harness of the chat.
    """

    def __init__(
        self,
        *,
        repo: SessionRepo,
        session: Session,
        model: Model,
        offline: bool,
        mode: ModeName | None,
        reader: LineReader,
        view: ChatView,
        cwd: Path,
        trust_project: bool = False,
        choice: ModelChoice | None = None,
        command_hooks: CommandHooks | None = None,
        mcp_servers: Mapping[str, object] | None = None,
        checkpoints: bool = False,
    ) -> None:
        self.repo = repo
        self.choice = choice
        """How models are named and found (None: offline, no other model can be made)."""
        self.mcp_servers = dict(mcp_servers or {})
        self.cwd = cwd
        self.command_hooks = command_hooks
        self.exit_reason = "other"
        """``session_end``'s reason: ``prompt_input_exit`` once the user ends the chat."""
        self._idle_s = float(os.environ.get(IDLE_ENV) or 60)
        self._notifications: set[asyncio.Task[None]] = set()
        self.checkpoints = checkpoints
        self.session = session
        self.offline = offline
        self.reader = reader
        self.view = view
        self.supervisor = SecuritySupervisor(
            mode=mode, approver=self._approve, trust_project=cwd if trust_project else False
        )
        self.harness = self._harness_for(session, model)
        self.edit_text = ""
        """Pre-filled at the next prompt (a checked-out user message, to edit and resend)."""
        self._abort: asyncio.Task[object] | None = None

    def _harness_for(self, session: Session, model: Model) -> AgentHarness:
        harness = AgentHarness(
            session=session,
            model=model,
            tools=[
                read_tool(),
                write_tool(),
                edit_tool(),
                bash_tool(),
                ls_tool(),
                grep_tool(),
                find_tool(),
            ],
            supervisor=self.supervisor,
            cwd=self.cwd,
            fallback_model=self.choice.fallback() if self.choice is not None else None,
            registry=self.choice.registry if self.choice is not None else None,
            mcp_servers=self.mcp_servers,
            checkpoints=self.checkpoints,
            # Offline, compaction and branch summaries need no model either.
            summarizer=ExtractiveSummarizer() if self.offline else None,
            command_hooks=self.command_hooks,
        )
        self.view.attach(harness)
        attach_hook_output(harness, self.view.note)
        harness.connect(
            McpServerErrorEvent, lambda sender, event: self.view.note(f"note: {event.error}")
        )
        return harness

    async def switch_to(self, session: Session) -> None:
        """Go on in ``session`` (a fork): the old harness is shut down, its session closed."""
        old_harness, old_session = self.harness, self.session
        # The model in use goes on (the fork's entries may name one this chat cannot make).
        self.harness = self._harness_for(session, old_harness.model)
        self.session = session
        await old_harness.shutdown()
        old_session.close()

    async def close(self) -> None:
        for task in self._notifications:
            task.cancel()
        await self.harness.shutdown(reason=self.exit_reason)
        self.session.close()

    def _idle(self) -> None:
        """The user has not answered for a while: tell the hooks (desktop notifications)."""
        event = NotificationEvent(
            session_id=self.session.id,
            message="The agent is waiting for your input",
            notification_type="idle_prompt",
        )
        task = asyncio.get_running_loop().create_task(notify(self.harness, event))
        self._notifications.add(task)
        task.add_done_callback(self._notifications.discard)

    # --- approvals and interrupts -----------------------------------------------------------

    async def _approve(self, request: PermissionRequest) -> Decision:
        """The supervisor's question, answered y(es) / n(o) / a(lways)."""
        self.view.end_line()
        where = ", outside the working folder" if request.leaves_cwd else ""
        question = f"allow {one_line(request.operation_key)}{where}? [y]es / [n]o / [a]lways: "
        while True:
            try:
                answer = (await self.reader.answer(question)).strip().lower()
            except KeyboardInterrupt:
                self.interrupt()
                return Deny(reason="the user interrupted the turn")
            except EOFError:
                return Deny(reason="the user gave no answer (end of input)")
            if answer in ("y", "yes"):
                return Approve(reason="approved by the user")
            if answer in ("a", "always"):
                return ApproveAlways(reason="approved always by the user")
            if answer in ("n", "no"):
                return Deny(
                    reason=f"the user declined {request.operation_key}; do without it or ask "
                    "the user"
                )
            self.view.note("answer y (run it), n (do not run it) or a (run it, and always)")

    def interrupt(self) -> None:
        """Ctrl-C: abort the running operation, else interrupt the read (which ends the chat).

        Called from the SIGINT handler and from the approver (a Ctrl-C on a terminal prompt is
        a key, not a signal). A second Ctrl-C while the abort is under way changes nothing.
        """
        if self.harness.busy:
            if self._abort is None or self._abort.done():
                self._abort = asyncio.get_running_loop().create_task(self.harness.abort())
        else:
            self.reader.interrupt()

    async def settle_abort(self) -> bool:
        """Wait for an abort requested during the last operation (its errors surface here);
        True if there was one."""
        task, self._abort = self._abort, None
        if task is None:
            return False
        await task
        return True

    # --- the loop ---------------------------------------------------------------------------

    async def turn(self, text: str) -> None:
        """Send one prompt; errors are printed and the chat goes on (the reply is persisted)."""
        try:
            await self.harness.prompt(text)
        except HarnessError as exc:
            self.view.error(f"error[{exc.code}]: {one_line(str(exc))}")
        finally:
            if await self.settle_abort():
                self.view.line("[interrupted: the partial reply is saved in the session]", "yellow")

    async def run(self) -> None:
        """Read and act until ``/exit``, end of input or Ctrl-C at an empty prompt."""
        while True:
            idle = asyncio.get_running_loop().call_later(self._idle_s, self._idle)
            try:
                text = await self.reader.line("> ", default=self.edit_text)
            except (EOFError, KeyboardInterrupt):
                self.exit_reason = "prompt_input_exit"
                break
            finally:
                idle.cancel()
            self.edit_text = ""
            if not text.strip():
                continue
            if text.startswith("//"):  # an escaped slash: sent as written, one slash less
                await self.turn(text[1:])
            elif text.startswith("/"):
                if not await run_command(self, text):
                    self.exit_reason = "prompt_input_exit"
                    break
            else:
                await self.turn(text)

    def banner(self, created: bool) -> None:
        how = "new session" if created else "session"
        try:
            mode: str = self.supervisor.mode_for(self.harness.cwd)
        except ValueError as exc:  # every call is denied then; say why at once
            mode = f"unknown, so every tool call is denied ({one_line(str(exc))})"
        self.view.note(
            f"{how} {self.session.id} ({self.session.path}); model "
            f"{self.harness.model.provider}/{self.harness.model.id}; permission mode {mode}"
        )
        self.view.note("/help lists the commands; Ctrl-C aborts a turn; Ctrl-D or /exit ends")


@contextmanager
def _sigint(chat: Chat) -> Iterator[None]:
    """Route SIGINT (a Ctrl-C while the terminal is not in a prompt) to :meth:`Chat.interrupt`."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, chat.interrupt)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _main(
    repo: SessionRepo,
    session_ref: str | None,
    work_dir: Path | None,
    continue_: bool,
    model: Model | None,
    choice: ModelChoice | None,
    thinking: ThinkingLevel | None,
    mode: ModeName | None,
    trust_project: bool,
    checkpoints: bool,
) -> None:
    terminal = sys.stdin.isatty() and sys.stdout.isatty()
    console = Console(highlight=False, soft_wrap=True, emoji=False)
    view = ChatView(console, live=terminal)
    reader: LineReader
    if terminal:
        from ._chat_terminal import TerminalReader  # prompt_toolkit is slow to import

        reader = TerminalReader(history_path())
    else:
        reader = PipeReader(sys.stdin)
    here = work_dir or Path.cwd()
    # Broken hook settings fail before a session file is written.
    command_hooks = load_command_hooks(here, trust_project=trust_project)
    session = await _pick_session(repo, session_ref, continue_, here)
    created = session_ref is None and not continue_
    _warn_diagnostics(session)
    try:
        ask = _confirm if terminal else None
        cwd = working_folder(session, here if work_dir is not None else None, ask=ask)
        if cwd != here:  # the session's recorded folder, chosen by the user: its hooks
            command_hooks = load_command_hooks(cwd, trust_project=trust_project)
        named: ThinkingLevel | None = None
        if model is None and choice is not None:
            model, named = choice.model(session)
        if model is None:  # unreachable: offline gives a model, online a choice
            raise click.UsageError("no model")
        chat = Chat(
            repo=repo,
            session=session,
            model=model,
            offline=choice is None,
            choice=choice,
            mode=mode,
            trust_project=trust_project,
            reader=reader,
            view=view,
            cwd=cwd,
            command_hooks=command_hooks,
            mcp_servers=configured_mcp_servers(cwd, trust_project),
            checkpoints=checkpoints,
        )
    except BaseException:
        session.close()
        raise
    try:
        if choice is not None and choice.given and not created:
            await chat.harness.set_model(model)  # the session switches to --model
        if thinking or named:
            await chat.harness.set_thinking_level(thinking or named or "off")
        chat.banner(created)
        with _sigint(chat):
            await chat.run()
    finally:
        path = chat.session.path
        try:
            chat.session.refresh(keep_leaf=True)  # raises when the file went from under us
            gone: HarnessError | None = None
        except HarnessError as exc:
            gone = exc
        await chat.close()
        if gone is None:
            view.note(f"session {chat.session.id} saved in {path}")
        else:
            view.error(f"error[{gone.code}]: session {chat.session.id} was not saved: {gone}")


def _confirm(question: str) -> bool:
    return click.confirm(question, default=False, err=True)


@click.command()
@session_options
@click.option(
    "--offline",
    is_flag=True,
    help="Use the scripted offline model: it echoes, `!COMMAND` asks for a bash call, "
    "`count N` streams a long reply.",
)
@click.option(
    "--thinking",
    type=click.Choice(THINKING_LEVELS),
    default=None,
    help="Reasoning effort (default: the session's, else off).",
)
@permission_options
@checkpoint_option
@root_option
def chat(
    session_ref: str | None,
    work_dir: Path | None,
    continue_: bool,
    model_id: str | None,
    base_url: str | None,
    api: Literal["responses", "chat"] | None,
    fallback_model_id: str | None,
    offline: bool,
    thinking: ThinkingLevel | None,
    mode: ModeName | None,
    trust_project: bool,
    checkpoints: bool | None,
    root: str | None,
) -> None:
    """Chat with an agent in the terminal (type /help for the commands).

    Without --session or --continue a new session is created for the current folder. Tool
    calls that need approval are asked: answer y, n or a (always: remembered in the session).
    Ctrl-C aborts a turn, keeping the partial reply; Ctrl-C on an empty prompt, Ctrl-D or
    /exit ends the chat. When stdin is not a terminal, plain lines are read from it (answers
    to approval questions too). The prompt history is kept in $HARNESS_CHAT_HISTORY, else in
    the user state folder.
    """
    if session_ref is not None and continue_:
        raise click.UsageError("give at most one of --session and --continue")
    if offline and (model_id or base_url or api or fallback_model_id) is not None:
        raise click.UsageError(
            "--offline uses the scripted model; it takes no --model, --base-url, --api or "
            "--fallback-model"
        )
    repo = open_repo(root)
    if work_dir is not None:
        work_dir = Path(os.path.realpath(work_dir))  # as getcwd() names it: -c finds its sessions
    choice = (
        None
        if offline
        else ModelChoice(
            model_id=model_id,
            base_url=base_url,
            api=api,
            fallback_model_id=fallback_model_id,
            cwd=work_dir or Path.cwd(),
            trust_project=trust_project,
        )
    )
    # A model that cannot be made (no API key, an unknown name) must fail before a new session
    # file is written.
    model: Model | None = chat_offline_model() if offline else None
    if choice is not None and (choice.given or (session_ref is None and not continue_)):
        model, named = choice.model()
        thinking = thinking or named
    run_async(
        _main(
            repo,
            session_ref,
            work_dir,
            continue_,
            model,
            choice,
            thinking,
            mode,
            trust_project,
            use_checkpoints(checkpoints),
        )
    )
