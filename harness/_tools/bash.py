"""The built-in ``bash`` tool: a shell command run in the working directory."""

from __future__ import annotations

import asyncio
import atexit
import codecs
import contextlib
import logging
import os
import signal
import tempfile
import threading
import weakref
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO, ClassVar, Literal

from hooks import JSONValue

from .._errors import ToolError
from .._fs import BASH_LOG_PREFIX, absolute_path_variable, bash_log_folder, program_path
from .base import Tool, ToolResult, ToolRun, safe_text
from .sandbox import Identity, Sandbox, identities, sandbox_available, sandboxed, set_aside

__all__ = ["bash_tool"]

_log = logging.getLogger("harness")

_PARAMETERS: dict[str, JSONValue] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command to run with bash"},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 600,
            "description": "Seconds (at most 600)",
        },
        "dangerouslyDisableSandbox": {
            "type": "boolean",
            "description": "Run outside the sandbox, which keeps protected paths (.git/config, "
            ".git/hooks, settings) read-only; the user is asked. Only after a command failed "
            "because of it.",
        },
    },
    "required": ["command"],
    "additionalProperties": False,
}

# what would make bash run or go where the supervisor did not see
_DROPPED = ("OLDPWD", "CDPATH", "BASH_ENV", "ENV", "BASHOPTS", "SHELLOPTS", "GLOBIGNORE")
# The harness's own variables are the user's to the harness, never a command's: the sessions
# store's address may hold a database password (review 7, finding 13), `harness serve`'s token
# opens every session of every project (review 11, finding 1), others name private files.
_DROPPED_PREFIX = "HARNESS_"
_MAX_TIMEOUT_S = 600.0  # the most a model's `timeout` may ask (unless timeout_s is more)
_DRAIN_S = 0.1  # once the command is gone, how long to wait for the rest of its output
_UPDATE_EVERY_S = 0.05  # at most one update event per this many seconds
_REAP_S = 2.0  # how long to wait for a killed command to be reaped
# How often the names no mount can hold are looked at while a sandboxed command runs: one it
# makes is live to other programs (a shell prompt's `git status`) until the command is
# stopped, at most about this long (review 11, finding 10).
_WATCH_EVERY_S = 0.02
_MIN_PENDING = 64 * 1024  # output held for observers, at least; older bytes are skipped
MAX_CONCURRENT_COMMANDS = 8
"""Most commands one event loop runs at once; the calls of a reply beyond wait their turn (a
reply of 128 calls, each a sandbox and a watcher, pinned the CPU for a minute: review 13,
finding 19)."""
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


def _commands_slot() -> asyncio.Semaphore:
    """The running loop's semaphore of :data:`MAX_CONCURRENT_COMMANDS` (a semaphore belongs
    to one loop; a tool may serve several, one per thread)."""
    loop = asyncio.get_running_loop()
    slot = _slots.get(loop)
    if slot is None:
        slot = _slots[loop] = asyncio.Semaphore(MAX_CONCURRENT_COMMANDS)
    return slot


def bash_tool(
    *,
    timeout_s: float = 120.0,
    max_bytes: int = 50_000,
    log_max_bytes: int = 32_000_000,
    logs_max_bytes: int = 128_000_000,
    sandbox: Literal["auto", "required", "off"] = "auto",
) -> Tool:
    """A ``bash`` tool whose commands start in the working directory.

    The command runs in its own process group with stdin from ``/dev/null``; stdout and stderr
    share one pipe, so they arrive interleaved. On timeout or cancellation the whole group is
    killed (SIGKILL), as it is when an observer of the updates raises. Output streams as
    ``tool_execution_update`` events, each the text that arrived since the last one: at most one
    every 50 ms, so under a flood (more than ``max(2 * max_bytes, 64 KiB)`` per 50 ms) the updates
    skip to recent output. Only the last ``max_bytes`` are kept in memory (about twice that
    while reading) and returned, with a note when the start was cut: the end of a log is what
    matters. The output also goes to a temporary file (its first ``log_max_bytes``), kept only
    when the output was cut: the note and ``details["fullOutputPath"]`` name it, so the model
    can ``read`` or ``grep`` it (pi's bash does the same); it lies outside the working folder,
    where the supervisor may ask or refuse, so the note also suggests rerunning the command
    narrowed. The files one tool keeps are bounded in total: once they pass ``logs_max_bytes``
    the oldest are removed, and every kept file is removed when the process exits (one killed
    with SIGKILL leaves its files to the system's temporary-file cleaning). A non-zero exit (or
    death by a signal) is an error result.

    The command is done when bash exits: output still in the pipe is collected for up to 100 ms,
    then reading stops. Background jobs (``server &``) keep running after that, but what they
    write later is not captured, and a write to the closed pipe raises SIGPIPE in the writer:
    redirect a background job's output to a file (``server > log 2>&1 &``). A process that left
    the group (``setsid``) survives the kill on timeout.

    The tool is controlled: the supervisor approves each command (rules such as
    ``bash(git status:*)``, see docs/permissions.md), and ``tool_call`` hooks may block it.
    A command the supervisor approved without a person seeing it (a mode, an allow rule, a
    hook, a remembered approval) runs in a **sandbox** (``ToolRun.sandbox``): a bubblewrap
    mount namespace where the protected paths are read-only and the sessions stores and the
    approvals key empty, whatever spelling reaches them (docs/security.md); a command that
    makes a protected name no mount can hold (a missing ``.mcp.json``, a first ``.git``) is
    killed within about 20 ms and the name moved aside (``details["stoppedFor"]``). It is not a
    confinement to the working folder: a command can still ``cd`` elsewhere and write there.
    The input flag ``dangerouslyDisableSandbox`` (Claude Code's) asks the user to run it
    outside.

    Args:
        timeout_s: default limit per command, in seconds (the model may pass ``timeout``, at
            most 600 s or ``timeout_s`` if that is more).
        max_bytes: most output returned.
        log_max_bytes: most bytes one full-output file holds (the output's start; the result
            holds its end).
        logs_max_bytes: most bytes of full-output files this tool keeps at once (at least
            ``log_max_bytes``).
        sandbox: ``auto`` sandboxes when bubblewrap (``bwrap``) is installed and works, and
            otherwise runs the command as is (logging a warning once); ``required`` makes such
            a command an error result instead; ``off`` never sandboxes.

    Raises:
        ValueError: ``logs_max_bytes`` is smaller than ``log_max_bytes``, or an unknown
            ``sandbox``.

    The result's ``details`` is ``{"exitCode", "truncated", "timedOut", "sandboxed"}``, plus
    ``fullOutputPath`` when the output was cut, ``setAside`` (``[path, moved to]`` pairs) and
    ``stoppedFor`` (the path) when the sandbox acted; ``exitCode`` is negative (``-signal``) when a
    signal ended bash, as after a timeout's kill.
    """

    if logs_max_bytes < log_max_bytes:
        raise ValueError(
            f"logs_max_bytes ({logs_max_bytes}) must be at least log_max_bytes ({log_max_bytes})"
        )
    if sandbox not in ("auto", "required", "off"):
        raise ValueError(f"sandbox must be 'auto', 'required' or 'off', not {sandbox!r}")
    kept = _KeptLogs(logs_max_bytes)
    warned: list[bool] = []

    async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        async with _commands_slot():
            return await _execute(input, run)

    async def _execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        # the model's own timeout is bounded (Claude Code's 10 minutes: review 5, finding 34)
        limit = min(float(input.get("timeout") or timeout_s), max(_MAX_TIMEOUT_S, timeout_s))
        command = str(input["command"])
        if "\0" in command:  # no argument of a process can hold one
            raise ToolError("the command holds a NUL byte, which no shell command can")
        # found now, not when decided: earlier calls of the reply may have changed what exists
        # (in a worker thread: finding the paths reads the file system, and the loop must go
        # on serving other calls, watchers and aborts meanwhile: review 14, finding 4)
        walls = (
            await asyncio.to_thread(run.sandbox.current)
            if run.sandbox is not None and sandbox != "off"
            else None
        )
        if walls is not None and not await asyncio.to_thread(sandbox_available):
            if sandbox == "required":
                raise ToolError(
                    "the command must run sandboxed and bubblewrap (bwrap) is not installed or "
                    "cannot make a mount namespace here; install it (Debian: apt install "
                    "bubblewrap) or ask the user to run the command"
                )
            if not warned:
                warned.append(True)
                _log.warning(
                    "bash commands run unsandboxed: bubblewrap (bwrap) is not installed or "
                    "does not work here; protected paths rest on the command check alone "
                    "(docs/security.md)"
                )
            walls = None
        watched = identities(walls.watched) if walls is not None else {}
        out = _Output(max_bytes, log_max_bytes)
        proc, pipe = await _start(command, run.cwd, out, walls)
        streamer = asyncio.create_task(_stream(out, run))
        watcher = _Watcher(proc.pid, watched) if watched else None
        timed_out = False
        try:
            try:
                async with asyncio.timeout(limit):
                    await _wait_exit(proc, streamer)
            except TimeoutError:
                timed_out = True
                _kill(proc)
                await _reap(proc)
            await out.wait_eof(_DRAIN_S)
            drained = out.eof.is_set()  # else a background job still holds the pipe
        except BaseException:  # cancelled, or an observer failed: kill the whole group
            if watcher is not None:
                watcher.stop()
            _kill(proc)
            pipe.close()
            streamer.cancel()
            out.discard()
            try:
                await _reap(proc)
            finally:
                # an aborted command's protected names are set aside too (review 8, finding 1)
                for path, where in set_aside(watched) if watched else []:
                    _log.warning(
                        "an aborted command made %s, a protected path: moved to %s",
                        path,
                        where or "(could not be moved: removed)",
                    )
            raise
        stopped_for = watcher.stop() if watcher is not None else None
        pipe.close()  # never wait on the pipe: a background job may hold it open for ever
        out.finish()
        await streamer
        text, truncated = out.result()
        full_path = out.keep_file(kept) if truncated else None
        if not truncated:
            out.discard()
        if truncated:
            # The file lies outside the working folder, where a supervisor may refuse a read:
            # the note also says how to get the rest without it.
            held = (
                f"the first {log_max_bytes} bytes of the output in"
                if out.file_cut
                else "full output in"
            )
            saved = (
                f"[{held} {safe_text(full_path)} (outside the working folder: reading it "
                "may need approval); or rerun the command narrowed, e.g. `| grep PATTERN`, "
                "`| head -n 200`, `> out.log` in the working folder]\n"
                if full_path
                else ""
            )
            text = f"[output truncated: showing the last {max_bytes} bytes]\n{saved}{text}"
        code = proc.returncode
        notes = []
        if stopped_for is not None:
            notes.append(
                "[the sandbox stopped the command when it made or replaced "
                f"{safe_text(stopped_for)}, a protected path]"
            )
        # a protected name no mount could hold (missing, or a link) that the command made
        moved = set_aside(watched) if watched else []
        for path, where in moved:
            notes.append(
                f"[the sandbox moved {safe_text(path)}, a protected path this command made or "
                f"replaced, to {safe_text(where)}: ask the user, with dangerouslyDisableSandbox]"
                if where
                else f"[the command made {safe_text(path)}, a protected path, and it could not be "
                "moved aside, so it was removed (see the log): tell the user]"
            )
        if timed_out:
            notes.append(f"[command timed out after {limit:g} s]")
        elif not drained:
            notes.append(
                "[command done; background jobs still running, their later output is lost]"
            )
        if not timed_out and code and stopped_for is None:
            notes.append(f"[exit code {code}]" if code > 0 else f"[killed by signal {-code}]")
        if notes:
            text += ("\n" if text and not text.endswith("\n") else "") + "\n".join(notes)
        return ToolResult(
            content=text if text else "(no output)",
            details={
                "exitCode": code,
                "truncated": truncated,
                "timedOut": timed_out,
                "sandboxed": walls is not None,
                **({"setAside": [[p, w] for p, w in moved]} if moved else {}),
                **({"stoppedFor": safe_text(stopped_for)} if stopped_for is not None else {}),
                **({"fullOutputPath": safe_text(full_path)} if full_path else {}),
            },
            is_error=timed_out or bool(code) or bool(moved),
        )

    return Tool(
        name="bash",
        description="Run a bash command in the working directory; returns its output.",
        parameters=_PARAMETERS,
        execute=execute,
        kind="execute",
        controlled=True,
        target="command",
    )


class _KeptLogs:
    """The full-output files one bash tool keeps: at most ``max_total`` bytes of them, the
    oldest removed first; every kept file is removed when the process exits."""

    _everyone: ClassVar[set[str]] = set()  # the process's kept files, for atexit
    # Bash tools of several event loops (threads) share the set.
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, max_total: int) -> None:
        self._max_total = max_total
        self._files: deque[tuple[str, int]] = deque()
        self._total = 0

    def add(self, path: str, size: int) -> None:
        with self._lock:
            self._files.append((path, size))
            self._everyone.add(path)
            self._total += size
            while self._total > self._max_total and len(self._files) > 1:
                old, old_size = self._files.popleft()
                self._total -= old_size
                self._everyone.discard(old)
                with contextlib.suppress(OSError):  # the model, or a user, removed it already
                    os.unlink(old)

    @classmethod
    def remove_all(cls) -> None:
        with cls._lock:
            for path in cls._everyone:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            cls._everyone.clear()


atexit.register(_KeptLogs.remove_all)


class _Output(asyncio.Protocol):
    """Receives the command's output: keeps the tail for the result and what observers have not
    seen yet, both bounded, and the start of the output (``log_max_bytes``) in a file."""

    def __init__(self, max_bytes: int, log_max_bytes: int) -> None:
        self._keep = max(max_bytes, 0)
        self._pending_cap = max(2 * self._keep, _MIN_PENDING)
        self._tail = bytearray()
        self._total = 0
        self._pending = bytearray()
        self._skipped = False
        self.arrived = asyncio.Event()  # new output, or finish()
        self.eof = asyncio.Event()  # every writer closed the pipe (or it failed)
        self.finished = asyncio.Event()  # reading stopped; the streamer sends what is left
        self._file: BinaryIO | None = None  # the output's start, for the model to read when cut
        self._file_name = ""
        self._file_failed = False
        self._file_room = log_max_bytes
        self.file_cut = False  # the file holds only the first log_max_bytes

    def data_received(self, data: bytes) -> None:
        self._save(data)
        self._total += len(data)
        self._tail += data
        if len(self._tail) > 2 * self._keep:
            del self._tail[: len(self._tail) - self._keep]
        self._pending += data
        if len(self._pending) > self._pending_cap:
            del self._pending[: len(self._pending) - self._pending_cap // 2]
            self._skipped = True
        self.arrived.set()

    def _save(self, data: bytes) -> None:
        if self._file_failed or self.file_cut:
            return
        if len(data) > self._file_room:
            data = data[: self._file_room]
            self.file_cut = True
        self._file_room -= len(data)
        try:
            if self._file is None:
                # the process id in the name: another process's logs are private to it
                # (docs/security.md; review 6, finding 39)
                fd, name = tempfile.mkstemp(
                    prefix=f"{BASH_LOG_PREFIX}{os.getpid()}-", suffix=".log", dir=bash_log_folder()
                )
                self._file = os.fdopen(fd, "wb")
                self._file_name = name
            self._file.write(data)
        except OSError:  # a full disk loses the full copy, never the command's result
            self._file_failed = True

    def keep_file(self, kept: _KeptLogs) -> str | None:
        """Close the full-output file, hand it to ``kept`` and return its path (None if it
        could not be written)."""
        if self._file is None or self._file_failed:
            self.discard()
            return None
        size = self._file.tell()
        self._file.close()
        self._file = None
        kept.add(self._file_name, size)
        return self._file_name

    def discard(self) -> None:
        """Close and delete the full-output file."""
        if self._file is not None:
            self._file.close()
            with contextlib.suppress(OSError):
                os.unlink(self._file_name)
            self._file = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof.set()

    async def wait_eof(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.eof.wait()

    def finish(self) -> None:
        self.finished.set()
        self.arrived.set()

    def take(self) -> tuple[bytes, bool]:
        """Output not yet sent to observers, and whether older unsent output was skipped."""
        data, skipped = bytes(self._pending), self._skipped
        self._pending.clear()
        self._skipped = False
        return data, skipped

    def result(self) -> tuple[str, bool]:
        """The last ``max_bytes`` as text, and whether earlier output was cut."""
        truncated = self._total > self._keep
        data = bytes(self._tail[max(len(self._tail) - self._keep, 0) :])
        if truncated:
            data = _without_partial_char(data)
        return data.decode("utf-8", errors="replace"), truncated


def _without_partial_char(data: bytes) -> bytes:
    """Drop the UTF-8 continuation bytes a cut left at the start (at most three)."""
    start = 0
    while start < min(len(data), 3) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:]


async def _start(
    command: str, cwd: Path, out: _Output, walls: Sandbox | None
) -> tuple[asyncio.subprocess.Process, asyncio.ReadTransport]:
    """Start ``bash -c command`` writing into a pipe of our own, read into ``out``, in a
    sandbox built from ``walls`` when given.

    With asyncio's own pipes, ``Process.wait()`` (Python 3.11) returns only once the pipes reach
    EOF, which a background job or a process that escaped the group can put off for ever. Here the
    process has no asyncio pipes, so waiting for it depends on it alone.
    """
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()  # both close-on-exec: only the child's stdout/stderr get it
    try:
        reader = os.fdopen(read_fd, "rb", buffering=0)
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    try:
        pipe, _ = await loop.connect_read_pipe(lambda: out, reader)
    except BaseException:
        reader.close()
        os.close(write_fd)
        raise
    try:
        argv = [program_path("bash"), "-c", command]
        if walls is not None:
            argv = sandboxed(argv, walls, os.fspath(cwd))
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=_environment(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
        )
    except OSError as exc:
        pipe.close()
        raise ToolError(f"cannot run bash in {safe_text(cwd)}: {safe_text(str(exc))}") from exc
    except BaseException:
        pipe.close()
        raise
    finally:
        os.close(write_fd)  # the child holds its copy; ours would keep the pipe open for ever
    return proc, pipe


class _Watcher:
    """Looks at the watched names (:attr:`Sandbox.watched`: protected names no mount can hold,
    since they are missing or symlinks) every :data:`_WATCH_EVERY_S` while a sandboxed command
    runs, and kills the command's process group at the first one it made or replaced: set
    aside only when the command ended, such a name stayed live to other programs for as long
    as it ran (up to 600 s: review 11, finding 10), and a command that made it again after
    each look could keep it live. A thread, not a task: a busy event loop must not put the
    look off."""

    def __init__(self, pid: int, before: dict[str, Identity]) -> None:
        self._pid = pid
        self._before = before
        self._done = threading.Event()
        self._lock = threading.Lock()
        self.changed: str | None = None
        self._thread = threading.Thread(target=self._run, name="harness-bash-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(_WATCH_EVERY_S):
            now = identities(self._before)
            changed = next((p for p, was in self._before.items() if now[p] != was), None)
            if changed is None:
                continue
            with self._lock:
                # not once the command is done: its group's number may be free again
                if not self._done.is_set():
                    self.changed = changed
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(self._pid, signal.SIGKILL)
            return

    def stop(self) -> str | None:
        """Stop looking; the watched name the command was stopped for, if it was."""
        with self._lock:
            self._done.set()
        self._thread.join()
        return self.changed


async def _stream(out: _Output, run: ToolRun) -> None:
    """Send output to observers as it arrives, at most one update per ``_UPDATE_EVERY_S``,
    until ``out.finish()``; multi-byte characters split between reads are kept whole."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        await out.arrived.wait()
        out.arrived.clear()
        final = out.finished.is_set()
        data, skipped = out.take()
        if skipped:
            decoder.reset()
            data = _without_partial_char(data)
        text = decoder.decode(data, final=final)
        if text:
            await run.update(text)
        if final:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_UPDATE_EVERY_S):
                await out.finished.wait()


async def _wait_exit(proc: asyncio.subprocess.Process, streamer: asyncio.Task[None]) -> None:
    """Wait for bash to exit; raise at once if streaming to observers failed."""
    exited = asyncio.ensure_future(proc.wait())
    try:
        await asyncio.wait({exited, streamer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        exited.cancel()
    if streamer.done():
        streamer.result()  # the streamer only ends early by failing
    await proc.wait()


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Wait (briefly) for a killed command to be reaped, so its exit status is known."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_REAP_S):
            await proc.wait()


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _environment() -> dict[str, str]:
    """This process's environment, with git told to take a folder for a repository only when
    named (``safe.bareRepository=explicit``, git 2.38 and later, added to any
    ``GIT_CONFIG_COUNT`` pairs already there): a folder the model can write (``HEAD``,
    ``objects/``, ``refs/`` and a ``config`` with ``core.fsmonitor``) would otherwise be a git
    repository whose config runs commands at ``git status`` (review 6, finding 8)."""
    env = dict(os.environ)
    # only absolute PATH entries: an empty or relative one finds programs in the working
    # folder, where a link a project ships escapes deny rules (review 6, finding 34)
    env["PATH"] = absolute_path_variable(env.get("PATH", os.defpath))
    # what would make bash run or go where the supervisor did not see: the user's OLDPWD
    # (`cd -- -`), CDPATH, startup files and inherited shell options (review 6, finding 42)
    for name in _DROPPED:
        env.pop(name, None)
    for name in [n for n in env if n.startswith(_DROPPED_PREFIX)]:
        del env[name]
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    env[f"GIT_CONFIG_KEY_{count}"] = "safe.bareRepository"
    env[f"GIT_CONFIG_VALUE_{count}"] = "explicit"
    env["GIT_CONFIG_COUNT"] = str(count + 1)
    return env
