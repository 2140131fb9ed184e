"""Fork a session just before its second prompt, and keep working in the fork.

Run: .venv/bin/python examples/fork_session.py
"""

from __future__ import annotations

import asyncio
import tempfile

from harness import AgentHarness, FauxModel, JsonlSessionRepo, MessageEntry, UserMessage


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="harness-example-") as folder:  # removed at the end
        repo = JsonlSessionRepo(folder)
        session = await repo.create()
        harness = AgentHarness(session=session, model=FauxModel(["Paris.", "About 2.1 million."]))
        await harness.prompt("What is the capital of France?")
        await harness.prompt("How many people live there?")

        second = [
            e
            for e in session.entries()
            if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage)
        ][1]
        fork = await repo.fork(session.id, entry_id=second.id, position="before")
        print(f"fork {fork.id} has {len(fork)} entries; parent: {fork.header.parent_session}")

        in_fork = AgentHarness(session=fork, model=FauxModel(["Berlin."]))
        await in_fork.prompt("And of Germany?")
        for message in fork.build_context().messages:
            print(f"  {message.role}: {getattr(message, 'text', '')}")


if __name__ == "__main__":
    asyncio.run(main())
