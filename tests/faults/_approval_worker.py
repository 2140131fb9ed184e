"""Child process of the approval kill tests (run as a script, never imported by pytest).

``_approval_worker.py MODE SESSIONS CWD LOG [ARG]``, the harness always made alike: an
``append`` tool (controlled: it needs approval) that appends a line to LOG, a scripted model
that asks for one append and then reports the result, and a supervisor that defers.

- ``prompt``: a new session under SESSIONS; prints ``{"path", "approval", "stop_reason"}``.
- ``approve-and-die PATH ID``: answers approval ID, then kills itself (SIGKILL) before
  anything else: a crash between the approval and the tool's run.
- ``approve-and-resume PATH ID``: answers and resumes; the tool appends, writes
  ``LOG.started``, then hangs until killed: a crash while the tool runs.
- ``resume PATH``: resumes; prints ``{"stop_reason", "reply", "results"}`` or
  ``{"error": code}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness import (
    AgentHarness,
    Approve,
    Defer,
    FauxModel,
    FauxReply,
    FauxToolCall,
    HarnessError,
    JsonlSessionRepo,
    ModelRequest,
    PermissionRequest,
    SecuritySupervisor,
    Session,
    ToolResult,
    ToolRun,
    open_session,
    tool,
)

HANG = False


def make(session: Session, cwd: str, log: Path) -> AgentHarness:
    @tool(
        "append",
        "appends a line to the log",
        {"type": "object", "properties": {"line": {"type": "string"}}, "required": ["line"]},
        controlled=True,
    )
    async def append(input: Mapping[str, Any], run: ToolRun) -> ToolResult:
        with log.open("a") as out:
            out.write(f"{input['line']}\n")
        if HANG:
            Path(f"{log}.started").write_text("")
            await asyncio.sleep(120)
        return ToolResult(content=f"appended {input['line']}")

    async def defer(request: PermissionRequest) -> Defer:
        return Defer(reason="a person decides")

    def script(request: ModelRequest) -> FauxReply | str:
        last = request.messages[-1]
        if last.role == "toolResult":
            return f"done: {last.text}"
        return FauxReply(
            tool_calls=[FauxToolCall(name="append", arguments={"line": "once"}, id="call_1")]
        )

    return AgentHarness(
        session=session,
        cwd=cwd,
        model=FauxModel(script),
        tools=[append],
        supervisor=SecuritySupervisor(approver=defer, setting_sources=()),
        resources=None,
    )


async def main() -> None:
    global HANG
    mode, sessions, cwd, log = sys.argv[1:5]
    rest = sys.argv[5:]
    if mode == "prompt":
        session = await JsonlSessionRepo(Path(sessions)).create(cwd)
        reply = await make(session, cwd, Path(log)).prompt("append once")
        print(
            json.dumps(
                {
                    "path": str(session.path),
                    "approval": reply.pending[0].id,
                    "stop_reason": reply.stop_reason,
                }
            )
        )
        return
    session = open_session(Path(rest[0]))
    harness = make(session, cwd, Path(log))
    if mode in ("approve-and-die", "approve-and-resume"):
        harness.resolve_approval(rest[1], Approve())
        if mode == "approve-and-die":
            os.kill(os.getpid(), signal.SIGKILL)
        HANG = True
    try:
        reply = await harness.resume()
    except HarnessError as exc:
        print(json.dumps({"error": exc.code}))
        return
    results = [m.text for m in session.build_context().messages if m.role == "toolResult"]
    print(json.dumps({"stop_reason": reply.stop_reason, "reply": reply.text, "results": results}))


if __name__ == "__main__":
    asyncio.run(main())
