"""Subscribe to every event of one harness and print each as a JSON line.

Run: .venv/bin/python examples/log_events.py   (offline: the scripted faux model answers)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

import attrs
import orjson

from harness import EVENT_CLASSES, AgentHarness, Event, FauxModel, JsonlSessionRepo


def print_json(sender: object, event: Event) -> None:
    record = {"event": event.name, **attrs.asdict(event)}
    print(orjson.dumps(record, default=repr).decode())


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
