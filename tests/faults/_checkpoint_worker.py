"""Child process for the checkpoint kill test (run as a script, never imported by pytest).

``_checkpoint_worker.py SESSION WS STORE SIZE DELAY_MS SEED``: open the session, write
``big.txt`` (SIZE bytes of text that SEED makes unique) through ``Checkpoints.run`` as the
agent loop does, print the content's SHA-256, sleep DELAY_MS and SIGKILL itself: the content
is hashed and stored on the worker thread, so the kill lands before, during or after that.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import sys
import time
from pathlib import Path

from harness import CheckpointStore, ToolRun, open_session, write_tool
from harness._checkpoints import Checkpoints
from hooks import JSONValue


async def main() -> None:
    session_path, ws, store, size, delay_ms, seed = sys.argv[1:7]
    session = open_session(Path(session_path))
    checkpoints = Checkpoints(
        session, CheckpointStore(store, max_file_bytes=2 * int(size)), Path(ws)
    )

    async def on_update(partial: JSONValue) -> None:
        pass

    tool = write_tool()
    content = (seed + "\n") + "y" * (int(size) - len(seed) - 1)
    value: dict[str, JSONValue] = {"path": "big.txt", "content": content}
    run = ToolRun(tool_call_id=f"t{seed}", cwd=Path(ws), on_update=on_update)
    await checkpoints.run(tool, value, run, entry_id=None, execute=lambda: tool.execute(value, run))
    print(hashlib.sha256(content.encode()).hexdigest(), flush=True)
    time.sleep(int(delay_ms) / 1000)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    asyncio.run(main())
