"""Run one command hook: a process group of its own, the event on stdin, bounded output, a
timeout that kills the whole group, and nothing left running afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from attrs import frozen

__all__ = ["MAX_OUTPUT_BYTES", "Finished", "run_command"]

MAX_OUTPUT_BYTES = 1024 * 1024
"""Bytes kept of a hook's stdout, and of its stderr; more makes the hook fail."""
_DRAIN_S = 0.5  # after the group is killed, how long to wait for the pipes to close
_REAP_S = 2.0  # how long to wait for a killed process to be reaped
SHELL = "/bin/sh"


@frozen
class Finished:
    """How a hook process ended: ``exit_code`` (negative: killed by that signal; None: not
    reaped), its ``stdout`` and ``stderr`` (at most :data:`MAX_OUTPUT_BYTES` each),
    ``timed_out``, and ``overflow`` when it wrote more than that."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    overflow: bool


class _Collect(asyncio.Protocol):
    def __init__(self) -> None:
        self.data = bytearray()
        self.overflow = False
        self.closed = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        room = MAX_OUTPUT_BYTES - len(self.data)
        if len(data) > room:
            self.overflow = True  # keep reading: a writer blocked on a full pipe never exits
        self.data += data[: max(room, 0)]

    def eof_received(self) -> bool:
        self.closed.set()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()


async def run_command(
    command: str, *, stdin: bytes, cwd: Path, env: Mapping[str, str], timeout_s: float
) -> Finished:
    """Run ``/bin/sh -c command`` in ``cwd`` with ``env``, ``stdin`` as its input.

    The process leads a new session (its own process group). It gets its input from an
    in-memory file, so a hook that never reads it cannot block us writing. When it exits, or
    at ``timeout_s``, or when this call is cancelled, the whole group is killed (SIGKILL): a
    hook leaves no process behind, except one that left the group itself (``setsid``), whose
    hold on the output pipes is dropped after a short drain. No wait is unbounded.

    Raises:
        OSError: the shell cannot be started (no such folder, ...).
    """
    loop = asyncio.get_running_loop()
    collectors = (_Collect(), _Collect())
    transports: list[asyncio.BaseTransport] = []
    ends: list[int] = []
    try:
        for collector in collectors:
            read_fd, write_fd = os.pipe()
            ends.append(write_fd)
            reader = os.fdopen(read_fd, "rb", buffering=0)
            try:
                transport, _ = await loop.connect_read_pipe(lambda c=collector: c, reader)  # type: ignore[misc]
            except BaseException:
                reader.close()
                raise
            transports.append(transport)
        with _input_file(stdin) as input_fd:
            # Our own pipes, not asyncio's: Process.wait() then depends on the process alone,
            # never on a background child holding the output open (see the bash tool).
            proc = await asyncio.create_subprocess_exec(
                SHELL,
                "-c",
                command,
                cwd=cwd,
                env=dict(env),
                stdin=input_fd,
                stdout=ends[0],
                stderr=ends[1],
                start_new_session=True,
            )
    except BaseException:
        for opened in transports:
            opened.close()
        raise
    finally:
        for fd in ends:
            os.close(fd)  # the child holds its copies
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout_s):
                await proc.wait()
        except TimeoutError:
            timed_out = True
        _kill_group(proc.pid)  # what it left running goes too
        if timed_out:
            await _reap(proc)
        for collector in collectors:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_DRAIN_S):
                    await collector.closed.wait()
    except BaseException:  # cancelled: nothing of the hook may outlive the call
        _kill_group(proc.pid)
        await _reap(proc)
        raise
    finally:
        for opened in transports:
            opened.close()
    out, err = collectors
    return Finished(
        exit_code=None if timed_out else proc.returncode,
        stdout=bytes(out.data),
        stderr=bytes(err.data),
        timed_out=timed_out,
        overflow=out.overflow or err.overflow,
    )


@contextlib.contextmanager
def _input_file(data: bytes) -> Iterator[int]:
    """A readable descriptor holding ``data`` from its start (an in-memory file on Linux)."""
    with contextlib.ExitStack() as stack:
        try:
            fd = os.memfd_create("harness-hook-input")
            stack.callback(os.close, fd)
        except (AttributeError, OSError):  # no memfd: an unlinked temporary file
            fd = stack.enter_context(tempfile.TemporaryFile()).fileno()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def _reap(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_REAP_S):
            await proc.wait()
