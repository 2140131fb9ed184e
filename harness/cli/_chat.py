"""``harness chat`` (and ``harness`` alone): an interactive session in the terminal.

Replies and thinking stream as they arrive, tool calls show as they start, update and end
(``_chat_view.py``), the security supervisor's questions are answered y / n / always, and slash
commands work on the session (``_chat_commands.py``). Ctrl-C during a turn aborts it through
``AgentHarness.abort()`` (the partial reply is persisted as ``aborted``); Ctrl-C on an empty
prompt, Ctrl-D or ``/exit`` end the chat. On a terminal the prompt has line editing and a
history (prompt_toolkit); otherwise plain lines are read, so a script can pipe a chat in.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import click
from rich.console import Console

from harness import (
    AgentHarness,
    Approve,
    ApproveAlways,
    Decision,
    Deny,
    HarnessError,
    HarnessStateError,
    McpServerErrorEvent,
    MemorySessionRepo,
    Model,
    NotificationEvent,
    PermissionRequest,
    Session,
    SessionRepo,
    notify,
)

from ._agent import (
    AgentOptions,
    Agents,
    agent_options,
    pick_resume,
    pick_session,
    working_folder,
)
from ._chat_commands import run_command
from ._chat_input import LineReader, PipeReader, history_path
from ._chat_view import ChatView, approval_cut
from ._common import cli_text, describe_store, one_line, run_async
from ._hooks import attach_hook_output, load_command_hooks
from ._models import ModelChoice
from ._opening import warn_diagnostics
from ._otel import otel_tracing
from ._run import first_model, session_model

__all__ = ["IDLE_ENV", "Chat", "chat"]

IDLE_ENV = "HARNESS_CHAT_IDLE_S"
"""Seconds the chat waits for input before it sends ``notification`` (``idle_prompt``) to its
hooks; default 60 (Claude Code's)."""


class Chat:
    """One chat: the session and its harness, the reader, the view, the slash commands.

    :meth:`switch_to` (``/fork``, ``/new``, ``/resume``) replaces :attr:`session` and
    :attr:`harness`: the chat goes on in the other session. The supervisor, and so the approver
    and the mode, is shared by every harness of the chat (``agents``).
    """

    def __init__(
        self,
        *,
        repo: SessionRepo,
        session: Session,
        model: Model,
        agents: Agents,
        reader: LineReader,
        view: ChatView,
    ) -> None:
        self.repo = repo
        self.agents = agents
        self.choice: ModelChoice | None = agents.choice
        """How models are named and found (None: offline, no other model can be made)."""
        self.offline = self.choice is None
        self.cwd = agents.cwd
        self.exit_reason = "other"
        """``session_end``'s reason: ``prompt_input_exit`` once the user ends the chat."""
        self._idle_s = float(os.environ.get(IDLE_ENV) or 60)
        self._notifications: set[asyncio.Task[None]] = set()
        self.session = session
        self.reader = reader
        self.view = view
        agents.supervisor.approver = self._approve
        self.harness = self._harness_for(session, model)
        self.edit_text = ""
        """Pre-filled at the next prompt (a checked-out user message, to edit and resend)."""
        self._abort: asyncio.Task[object] | None = None
        self._leaving = False
        """The user ended the chat at an approval prompt: the run ends, the chat with it."""

    def _harness_for(self, session: Session, model: Model) -> AgentHarness:
        harness = self.agents.make(session, model)
        self.view.attach(harness)
        attach_hook_output(harness, self.view.note)
        harness.connect(
            McpServerErrorEvent, lambda sender, event: self.view.note(f"note: {event.error}")
        )
        return harness

    async def switch_to(self, session: Session) -> None:
        """Go on in ``session``: the old harness is shut down, its session closed."""
        old_harness, old_session = self.harness, self.session
        # The model in use goes on (the other session may name one this chat cannot make).
        self.harness = self._harness_for(session, old_harness.model)
        self.session = session
        level = old_harness.thinking_level
        await old_harness.shutdown()
        old_session.close()
        if self.harness.thinking_level != level:
            await self.harness.set_thinking_level(level)

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
        """The supervisor's question, answered y(es) / n(o) / a(lways); ``/exit`` or Ctrl-D
        denies the call and ends the chat once the run has stopped."""
        if self._leaving:  # a later call of the same batch, or of a sub-agent
            return Deny(reason="the user ended the chat")
        self.view.end_line()
        self.view.approval(request)  # the whole command, before the one-line question
        where = ", outside the working folder" if request.leaves_cwd else ""
        if approval_cut(request):
            where += ", its input CUT above (not all shown)"
        question = f"allow {one_line(request.operation_key)}{where}? [y]es / [n]o / [a]lways: "
        while True:
            try:
                answer = (await self.reader.answer(question)).strip().lower()
            except KeyboardInterrupt:
                self.interrupt()
                return Deny(reason="the user interrupted the turn")
            except EOFError:
                answer = "/exit"
            if answer == "/exit":
                return self._leave()
            if answer in ("y", "yes"):
                return Approve(reason="approved by the user")
            if answer in ("a", "always"):
                return ApproveAlways(reason="approved always by the user")
            if answer in ("n", "no"):
                return Deny(
                    reason=f"the user declined {request.operation_key}; do without it or ask "
                    "the user"
                )
            self.view.note("answer y (run it), n (do not run it), a (run it, and always) or /exit")

    def _leave(self) -> Decision:
        """Deny the call being asked about and end the run, then the chat."""
        self._leaving = True
        self.exit_reason = "prompt_input_exit"
        with contextlib.suppress(HarnessStateError):  # no run to end: nothing more is sent
            self.harness.end_run("the user ended the chat")
        return Deny(reason="the user ended the chat")

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
            self.view.error(f"error[{exc.code}]: {one_line(cli_text(exc))}")
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
            if self._leaving:
                break

    def banner(self, created: bool) -> None:
        how = "new session" if created else "session"
        try:
            mode: str = self.agents.supervisor.mode_for(self.harness.cwd)
        except ValueError as exc:  # every call is denied then; say why at once
            mode = f"unknown, so every tool call is denied ({one_line(str(exc))})"
        where = (
            str(self.session.path)
            if self.session.path is not None
            else "in memory: nothing is written"
            if isinstance(self.repo, MemorySessionRepo)
            else describe_store(self.repo)
        )
        self.view.note(
            f"{how} {self.session.id} ({where}); model "
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


async def _main(opts: AgentOptions, repo: SessionRepo, here: Path) -> None:
    terminal = sys.stdin.isatty() and sys.stdout.isatty()
    console = Console(highlight=False, soft_wrap=True, emoji=False)
    view = ChatView(console, live=terminal)
    reader: LineReader
    if terminal:
        from ._chat_terminal import TerminalReader  # prompt_toolkit is slow to import

        reader = TerminalReader(history_path())
    else:
        reader = PipeReader(sys.stdin)
    choice = opts.model_choice(here)
    # A model that cannot be made (no API key, an unknown name) fails before a session file
    # is written; so do broken hook settings.
    model, level = first_model(opts, choice, paced=True)
    command_hooks = load_command_hooks(here, trust_project=opts.trusts(here))
    session = await pick_session(opts, repo, here)
    created = opts.new_session
    warn_diagnostics(session)
    try:
        ask = _confirm if terminal else None
        cwd = working_folder(session, here if opts.work_dir is not None else None, ask=ask)
        if cwd != here:  # the session's recorded folder, chosen by the user: its hooks
            command_hooks = load_command_hooks(cwd, trust_project=opts.trusts(cwd))
        given = model is not None and choice is not None and choice.given
        if model is None:
            model, level = session_model(choice, session, level)
        agents = Agents(opts, cwd, repo=repo, choice=choice, command_hooks=command_hooks)
        chat = Chat(
            repo=repo, session=session, model=model, agents=agents, reader=reader, view=view
        )
    except BaseException:
        session.close()
        raise
    try:
        if given and not created:
            await chat.harness.set_model(model)  # the session switches to --model
        if level:
            await chat.harness.set_thinking_level(level)
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
            where = f"saved in {path}" if path is not None else "kept"
            if opts.no_session:
                where = "not saved (--no-session)"
            view.note(f"session {chat.session.id} {where}")
        else:
            view.error(f"error[{gone.code}]: session {chat.session.id} was not saved: {gone}")


def _confirm(question: str) -> bool:
    return click.confirm(question, default=False, err=True)


@click.command()
@agent_options
def chat(opts: AgentOptions) -> None:
    """Chat with an agent in the terminal (type /help for the commands).

    Without --session, --resume or --continue a new session is created for the current
    folder (--no-session: in memory, nothing written). Tool calls that need approval are
    asked: answer y, n or a (always: remembered in the session). Ctrl-C aborts a turn, keeping
    the partial reply; Ctrl-C on an empty prompt, Ctrl-D or /exit ends the chat. When stdin is
    not a terminal, plain lines are read from it (answers to approval questions too). The
    prompt history is kept in $HARNESS_CHAT_HISTORY, else in the user state folder.
    """
    repo = opts.repo()
    here = Path(os.path.realpath(opts.work_dir or Path.cwd()))  # as getcwd() names it
    if opts.resume == "":
        opts = attrs.evolve(opts, resume=pick_resume(repo, here))
    with otel_tracing(opts.otel):
        run_async(_main(opts, repo, here))
