"""The terminal side of ``harness chat``'s input: prompt_toolkit prompts (line editing, history).

Kept apart from ``_chat_input.py`` because prompt_toolkit takes a while to import: only a chat
on a terminal pays for it, not every ``harness`` command.
"""

from __future__ import annotations

from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

__all__ = ["TerminalReader"]


class TerminalReader:
    """prompt_toolkit prompts with a file history.

    Ctrl-C clears a line holding text and raises ``KeyboardInterrupt`` on an empty one; Ctrl-D
    on an empty line raises ``EOFError``. prompt_toolkit does not install its own SIGINT
    handler here: the chat's handler aborts turns.

    Raises:
        OSError: the history's folder cannot be made.
    """

    def __init__(self, history: Path) -> None:
        history.parent.mkdir(parents=True, exist_ok=True)
        bindings = KeyBindings()

        @bindings.add("c-c")
        def _interrupt(event: KeyPressEvent) -> None:
            buffer = event.app.current_buffer
            if buffer.text:
                buffer.reset()
            else:
                event.app.exit(exception=KeyboardInterrupt(), style="class:aborting")

        self._prompts: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)), key_bindings=bindings
        )
        self._answers: PromptSession[str] = PromptSession()

    async def line(self, prompt: str, default: str = "") -> str:
        return await self._prompts.prompt_async(prompt, default=default, handle_sigint=False)

    async def answer(self, question: str) -> str:
        return await self._answers.prompt_async(question, handle_sigint=False)

    def interrupt(self) -> None:
        for session in (self._prompts, self._answers):
            if session.app.is_running:
                session.app.exit(exception=KeyboardInterrupt())
