"""A hook that redacts secrets from tool results before the model (or the session file) sees them.

Run: .venv/bin/python examples/redact_secrets.py
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path

from harness import (
    AgentHarness,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    PatchResult,
    TextContent,
    ToolResultEvent,
    read_tool,
)

SECRET = re.compile(r"(sk-[A-Za-z0-9_-]{8,}|AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{20,})")


def redact(sender: object, event: ToolResultEvent) -> PatchResult | None:
    blocks = [
        TextContent(text=SECRET.sub("[REDACTED]", b.text)) if isinstance(b, TextContent) else b
        for b in event.content
    ]
    return PatchResult(content=blocks) if blocks != list(event.content) else None


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="harness-example-") as folder:  # removed at the end
        workdir = Path(folder)
        (workdir / ".env").write_text("OPENAI_KEY=sk-live-0123456789abcdef\nDEBUG=1\n")
        session = await JsonlSessionRepo(workdir / "sessions").create(str(workdir))
        model = FauxModel(
            [
                FauxReply(tool_calls=[FauxToolCall(name="read", arguments={"path": ".env"})]),
                lambda request: f"The file says: {request.messages[-1].text!r}",  # type: ignore[union-attr]
            ]
        )
        harness = AgentHarness(session=session, model=model, tools=[read_tool()], cwd=workdir)
        harness.connect(ToolResultEvent, redact)
        reply = await harness.prompt("What is in .env?")
        print(reply.text)
        assert session.path is not None
        print("secret in session file:", b"sk-live" in session.path.read_bytes())


if __name__ == "__main__":
    asyncio.run(main())
