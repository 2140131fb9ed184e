"""``AgentHarness``: a session, a model, tools and the event bus, driven one operation at a time."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from hooks import (
    AssistantMessage,
    Event,
    Receiver,
    UserContent,
    UserMessage,
    connect,
)
from repos import Session

from ._errors import BusyError, SyncInLoopError
from ._loop import Run, run_agent
from ._providers.base import Model, ThinkingLevel
from ._providers.faux import FauxModel, FauxReply
from ._tools.base import Tool

__all__ = ["DEFAULT_SYSTEM_PROMPT", "AgentHarness"]

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."

F = TypeVar("F", bound=Receiver)


def _echo(request: Any) -> FauxReply:
    last = request.messages[-1] if request.messages else None
    text = getattr(last, "text", "") if last is not None else ""
    return FauxReply(text=f"(faux model) You said: {text}")


class AgentHarness:
    """An agent: a session, a model, tools, and every step announced on the event bus.

    Each message is persisted to the session as it ends, so a crash loses at most the reply in
    flight. Events are sent with this harness as the blinker sender: subscribe with
    :meth:`on`/:meth:`connect` (this harness only) or ``hooks.connect`` (any harness).

    Args:
        session: where the conversation lives (from a ``SessionRepo``); new messages go under
            its leaf.
        model: what to stream from; default an offline :class:`FauxModel` that echoes the prompt.
        tools: tools the model may call; names must be unique.
        system_prompt: sent with every request.
        cwd: working directory for tools; default the session's cwd if it exists, else the
            process's.
        thinking_level: reasoning effort asked of models that support it.
        tool_context: application state handed to every tool as ``run.context``: a value, or a
            zero-argument callable evaluated once per turn.
        tool_execution: ``parallel`` (default; a tool marked ``sequential`` still runs alone) or
            ``sequential``.

    Raises:
        ValueError: two tools share a name.
    """

    def __init__(
        self,
        *,
        session: Session,
        model: Model | None = None,
        tools: Sequence[Tool] = (),
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        cwd: str | Path | None = None,
        thinking_level: ThinkingLevel = "off",
        tool_context: Any = None,
        tool_execution: Literal["parallel", "sequential"] = "parallel",
    ) -> None:
        names = [t.name for t in tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"tool names must be unique; repeated: {', '.join(duplicates)}")
        self._session = session
        self._model: Model = model if model is not None else FauxModel(_echo)
        self._tools = {t.name: t for t in tools}
        self._system_prompt = system_prompt
        if cwd is not None:
            self._cwd = Path(cwd)
        else:
            self._cwd = (
                Path(session.cwd) if session.cwd and os.path.isdir(session.cwd) else Path.cwd()
            )
        self._thinking_level: ThinkingLevel = thinking_level
        self._tool_context = tool_context
        self._sequential = tool_execution == "sequential"
        self._operation: str | None = None

    # --- state -------------------------------------------------------------------------------

    @property
    def session(self) -> Session:
        return self._session

    @property
    def model(self) -> Model:
        return self._model

    @property
    def tools(self) -> tuple[Tool, ...]:
        return tuple(self._tools.values())

    @property
    def system_prompt(self) -> str:
        return self._system_prompt

    @property
    def cwd(self) -> Path:
        return self._cwd

    @property
    def busy(self) -> bool:
        """True while an operation (a prompt) runs."""
        return self._operation is not None

    # --- subscribing -------------------------------------------------------------------------

    def connect(
        self, event: str | type[Event], receiver: Receiver, *, priority: int = 0
    ) -> Callable[[], None]:
        """Connect ``receiver(sender, event=...)`` to this harness's ``event``; returns a
        function that disconnects it. Higher ``priority`` runs first (see docs/events.md)."""
        return connect(event, receiver, sender=self, priority=priority)

    def on(self, event: str | type[Event], *, priority: int = 0) -> Callable[[F], F]:
        """Decorator form of :meth:`connect`: ``@harness.on("tool_call")``."""

        def register(fn: F) -> F:
            self.connect(event, fn, priority=priority)
            return fn

        return register

    # --- running -----------------------------------------------------------------------------

    async def prompt(self, text: str | Sequence[UserContent]) -> AssistantMessage:
        """Send a user message and run until the model stops.

        Event order: DESIGN §6 and docs/events.md. Every message is persisted as it ends.

        Returns:
            The model's last reply. A failed request does not raise: the reply carries
            ``stop_reason="error"`` and ``error_message``.

        Raises:
            BusyError: another operation is running on this harness (code ``busy``).

        Cancellation persists the partial reply with ``stop_reason="aborted"`` and propagates.
        """
        content = text if isinstance(text, str) else tuple(text)
        with self._exclusive("prompt"):
            run = Run(
                sender=self,
                session=self._session,
                model=self._model,
                tools=dict(self._tools),
                system_prompt=self._system_prompt,
                cwd=self._cwd,
                thinking_level=self._thinking_level,
                tool_context=self._tool_context,
                sequential=self._sequential,
            )
            return await run_agent(run, [UserMessage(content=content)])

    def prompt_sync(self, text: str | Sequence[UserContent]) -> AssistantMessage:
        """``prompt`` for scripts without an event loop.

        Raises:
            SyncInLoopError: called inside a running event loop (use ``await prompt``).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.prompt(text))
        raise SyncInLoopError("prompt")

    def _exclusive(self, operation: str) -> _Exclusive:
        if self._operation is not None:
            raise BusyError(operation, self._operation)
        return _Exclusive(self, operation)


class _Exclusive:
    """Marks the harness busy for one operation; cleared however the operation ends."""

    def __init__(self, harness: AgentHarness, operation: str) -> None:
        self._harness, self._operation = harness, operation

    def __enter__(self) -> None:
        self._harness._operation = self._operation

    def __exit__(self, *exc: object) -> None:
        self._harness._operation = None
