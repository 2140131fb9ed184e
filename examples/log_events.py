"""Subscribe to every event of one harness and print each as a JSON line.

The lines have the shape ``harness run --verbose`` and ``harness rpc`` write (pi's RPC event
shape: ``type``, camelCase fields; docs/events.md), made by ``EventEncoder``.

Run: .venv/bin/python examples/log_events.py   (offline: the scripted faux model answers)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

import orjson

from harness import EVENT_CLASSES, AgentHarness, Event, EventEncoder, FauxModel, JsonlSessionRepo

encoder = EventEncoder()  # one per stream: it follows each tool call from start to end


def print_json(sender: object, event: Event) -> None:
    print(orjson.dumps(encoder.encode(event, sender)).decode())


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="harness-example-") as folder:  # removed at the end
        repo = JsonlSessionRepo(folder)
        session = await repo.create()
        harness = AgentHarness(session=session, model=FauxModel(["Hello from the faux model."]))
        for name in EVENT_CLASSES:
            harness.connect(name, print_json)
        await harness.prompt("Say hello")
        print(f"session file: {session.path}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
