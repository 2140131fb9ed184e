"""Where ``harness chat`` reads its lines: a terminal (``_chat_terminal.py``: prompt_toolkit,
with line editing and history) or plain lines from a pipe or a file (scripts, tests).

Both readers raise ``EOFError`` at the end of input and ``KeyboardInterrupt`` when the user
interrupts the read: Ctrl-C on an empty terminal line (Ctrl-C with text clears the line), or a
SIGINT the chat forwards with :meth:`LineReader.interrupt`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Protocol, TextIO

import platformdirs

from ._escape import terminal

__all__ = ["HISTORY_ENV", "LineReader", "PipeReader", "history_path"]

HISTORY_ENV = "HARNESS_CHAT_HISTORY"
"""Environment variable naming the chat's history file (overrides the default)."""


def history_path() -> Path:
    """The prompt history file: ``$HARNESS_CHAT_HISTORY``, else ``chat_history`` in the user
    state folder (``platformdirs.user_state_path("harness")``, e.g.
    ``~/.local/state/harness/chat_history`` on Linux, honouring ``XDG_STATE_HOME``)."""
    named = os.environ.get(HISTORY_ENV)
    if named:
        return Path(named).expanduser()
    return platformdirs.user_state_path("harness") / "chat_history"


class LineReader(Protocol):
    """Reads the user's lines (see the module docstring for the exceptions)."""

    async def line(self, prompt: str, default: str = "") -> str:
        """The next prompt line; ``default`` is pre-filled for editing (where possible)."""
        ...

    async def answer(self, question: str) -> str:
        """A short answer to ``question`` (not kept in the history)."""
        ...

    def interrupt(self) -> None:
        """Make a pending read raise ``KeyboardInterrupt`` (no-op when none is pending)."""
        ...


class _Interrupt:
    """Queued by :meth:`PipeReader.interrupt`."""


class _Failed:
    """Queued when the stream cannot be read (undecodable bytes, an I/O error)."""

    def __init__(self, error: OSError | UnicodeDecodeError) -> None:
        self.error = error


class PipeReader:
    """Lines from a stream that is not a terminal, echoed after their prompt on ``echo`` so a
    transcript reads like a session.

    A daemon thread reads ``stream`` ahead into a queue, so a read waiting for input never
    blocks the event loop nor the exit (a blocked ``readline`` in the default executor would).
    Must be made inside the running event loop. A stream that fails (bytes that do not decode,
    an I/O error) makes the read that reaches the failure raise it: ``UnicodeDecodeError`` or
    ``OSError``.
    """

    def __init__(self, stream: TextIO, echo: TextIO | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[str | _Interrupt | _Failed | None] = asyncio.Queue()
        self._echo = echo if echo is not None else sys.stdout
        self._waiting = False
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: TextIO) -> None:
        try:
            for text in stream:
                if not self._put(text.rstrip("\r\n")):
                    return
        except (OSError, UnicodeDecodeError) as exc:
            self._put(_Failed(exc))
        self._put(None)

    def _put(self, item: str | _Failed | None) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: the chat has ended
            return False
        return True

    async def _next(self, prompt: str) -> str:
        self._echo.write(terminal(prompt))  # an approval question quotes model output
        self._echo.flush()
        self._waiting = True
        try:
            item = await self._queue.get()
        except asyncio.CancelledError:  # the turn was aborted during a question
            self._echo.write("\n")
            raise
        finally:
            self._waiting = False
        if item is None:
            self._queue.put_nowait(None)  # every later read ends too
            self._echo.write("\n")
            raise EOFError
        if isinstance(item, _Failed):
            self._echo.write("\n")
            raise item.error
        if isinstance(item, _Interrupt):
            self._echo.write("^C\n")
            raise KeyboardInterrupt
        self._echo.write(terminal(item) + "\n")
        self._echo.flush()
        return item

    async def line(self, prompt: str, default: str = "") -> str:
        if default:
            self._echo.write(f"(to edit and resend: {terminal(default)})\n")
        return await self._next(prompt)

    async def answer(self, question: str) -> str:
        return await self._next(question)

    def interrupt(self) -> None:
        if self._waiting:
            self._queue.put_nowait(_Interrupt())
