"""The built-in ``bash`` tool: a shell command run in the working directory."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping

from hooks import JSONValue

from .base import Tool, ToolResult, ToolRun

__all__ = ["bash_tool"]

_PARAMETERS: dict[str, JSONValue] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The command to run with bash"},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Seconds"},
    },
    "required": ["command"],
    "additionalProperties": False,
}


def bash_tool(*, timeout_s: float = 120.0, max_bytes: int = 50_000) -> Tool:
    """A ``bash`` tool whose commands start in the working directory.

    The command runs in its own process group, killed on timeout or cancellation. Output
    (stdout and stderr, interleaved) streams as ``tool_execution_update`` events; the result keeps
    the *last* ``max_bytes`` (the end of a log is what matters). A non-zero exit is an error result.

    Starting in the working directory is not a sandbox: a command can still ``cd`` elsewhere.
    Gate commands with a ``tool_call`` hook (see the README) when that matters.

    Args:
        timeout_s: default limit per command, in seconds (the model may pass ``timeout``).
        max_bytes: most output returned.

    The result's ``details`` is ``{"exitCode", "truncated", "timedOut"}``.
    """

    async def execute(input: Mapping[str, JSONValue], run: ToolRun) -> ToolResult:
        limit = float(input.get("timeout") or timeout_s)
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            str(input["command"]),
            cwd=run.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        stdout = proc.stdout
        if stdout is None:  # cannot happen with PIPE; keeps the type checker honest
            raise RuntimeError("bash: no stdout pipe")
        output = bytearray()
        timed_out = False

        async def pump() -> None:
            while chunk := await stdout.read(4096):
                output.extend(chunk)
                await run.update(chunk.decode("utf-8", errors="replace"))

        try:
            async with asyncio.timeout(limit):
                await pump()
                await proc.wait()
        except TimeoutError:
            timed_out = True
            _kill(proc)
            await proc.wait()
        except asyncio.CancelledError:
            _kill(proc)
            raise
        truncated = len(output) > max_bytes
        text = bytes(output[-max_bytes:]).decode("utf-8", errors="replace")
        if truncated:
            text = f"[output truncated: showing the last {max_bytes} bytes]\n" + text
        if timed_out:
            text += f"\n[command timed out after {limit:g} s]"
        elif proc.returncode:
            text += f"\n[exit code {proc.returncode}]"
        return ToolResult(
            content=text if text else "(no output)",
            details={"exitCode": proc.returncode, "truncated": truncated, "timedOut": timed_out},
            is_error=timed_out or bool(proc.returncode),
        )

    return Tool(
        name="bash",
        description="Run a bash command in the working directory; returns its output.",
        parameters=_PARAMETERS,
        execute=execute,
    )


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
