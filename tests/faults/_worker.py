"""Child processes for the fault-injection tests (run as a script, never imported by pytest).

Commands (argv[1]):

* ``append PATH N TAG``: open the session file, append N user messages ``TAG-i``, then
  ``refresh()``; print one JSON line: ids written, entries in the tree, distinct tags seen.
* ``forkserver PATH ROUNDS SEED``: import once, then ROUNDS times fork a child that opens the
  session (fsync="always") and appends until killed, writing each acknowledged id to a pipe;
  SIGKILL it after a random delay. Prints one JSON line: acknowledged ids, kills.
* ``lifecycle ROOT ROUNDS SEED``: ROUNDS times fork a child that creates and forks sessions in a
  loop; SIGKILL it after a random delay. Prints the number of kills.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

from hooks import UserMessage
from repos import JsonlSessionRepo, open_session


def append(path: str, count: int, tag: str) -> None:
    session = open_session(Path(path), fsync="never")
    ids = []
    for i in range(count):
        ids.append(session.append_message(UserMessage(content=f"{tag}-{i}")).id)
    session.refresh()
    tags = set()
    for entry in session.entries():
        content = getattr(getattr(entry, "message", None), "content", "")
        if isinstance(content, str) and "-" in content:
            tags.add(content.rsplit("-", 1)[0])
    print(json.dumps({"ids": ids, "entries": len(session), "tags": sorted(tags)}))
    session.close()


def _append_until_killed(path: str, ack: int) -> None:
    session = open_session(Path(path), fsync="always")
    i = 0
    while True:
        entry = session.append_message(UserMessage(content=f"kill-test {os.getpid()} {i}"))
        os.write(ack, (entry.id + "\n").encode())  # acknowledged: append() returned
        i += 1


def forkserver(path: str, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    acked: list[str] = []
    kills = 0
    for _ in range(rounds):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                _append_until_killed(path, write)
            finally:
                os._exit(1)
        os.close(write)
        time.sleep(rng.uniform(0.002, 0.03))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        kills += 1
        with os.fdopen(read, "rb") as pipe:
            for line in pipe.read().splitlines():
                if len(line) == 8:  # a torn id (the child died mid-write) was not acknowledged
                    acked.append(line.decode())
    print(json.dumps({"acked": acked, "kills": kills}))


def _create_and_fork_until_killed(root: str) -> None:
    async def loop() -> None:
        repo = JsonlSessionRepo(root, fsync="always")
        while True:
            session = await repo.create("/work")
            for i in range(30):
                session.append_message(UserMessage(content=f"line {i} " * 20))
            fork = await repo.fork(session.path, entry_id=session.leaf_id, position="at")
            fork.close()
            session.close()

    asyncio.run(loop())


def lifecycle(root: str, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    kills = 0
    for _ in range(rounds):
        pid = os.fork()
        if pid == 0:
            try:
                _create_and_fork_until_killed(root)
            finally:
                os._exit(1)
        time.sleep(rng.uniform(0.01, 0.08))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        kills += 1
    print(json.dumps({"kills": kills}))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "append":
        append(args[0], int(args[1]), args[2])
    elif command == "forkserver":
        forkserver(args[0], int(args[1]), int(args[2]))
    elif command == "lifecycle":
        lifecycle(args[0], int(args[1]), int(args[2]))
    else:
        raise SystemExit(f"unknown command {command!r}")
