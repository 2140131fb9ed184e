"""The terminal side of ``harness chat``'s input: prompt_toolkit prompts (line editing, history).

Kept apart from ``_chat_input.py`` because prompt_toolkit takes a while to import: only a chat
on a terminal pays for it, not every ``harness`` command.
"""

from __future__ import annotations

import datetime
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

__all__ = ["TerminalReader"]

_HISTORY_BYTES = 8 * 1024 * 1024  # read at most the newest 8 MiB of the history file


def _open_history(path: str, flags: int) -> int | None:
    """The history file opened without following a symlink at its name, or None when it is
    missing or not a regular file: a command that planted a link there (``chat_history ->
    notes.txt``) would have every later prompt appended where the model reads it (review 9,
    finding 1), a FIFO would block the chat."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


class _History(FileHistory):
    """prompt_toolkit's file history, in its format, opened by :func:`_open_history`."""

    def load_history_strings(self) -> Iterable[str]:
        fd = _open_history(os.fsdecode(self.filename), os.O_RDONLY)
        if fd is None:
            return []
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > _HISTORY_BYTES:
                f.seek(size - _HISTORY_BYTES)
                f.readline()  # the rest of a cut line
            text = f.read(_HISTORY_BYTES).decode("utf-8", errors="replace")
        strings: list[str] = []
        lines: list[str] = []
        for line in text.splitlines(keepends=True):
            if line.startswith("+"):
                lines.append(line[1:])
            elif lines:
                strings.append("".join(lines)[:-1])
                lines = []
        if lines:
            strings.append("".join(lines)[:-1])
        return reversed(strings)

    def store_string(self, string: str) -> None:
        fd = _open_history(os.fsdecode(self.filename), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        if fd is None:
            return
        lines = [f"\n# {datetime.datetime.now()}\n", *(f"+{line}\n" for line in string.split("\n"))]
        with os.fdopen(fd, "ab") as f:
            f.write("".join(lines).encode("utf-8", errors="replace"))


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
            history=_History(str(history)), key_bindings=bindings
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
