"""A child process for the PostgreSQL fault tests (run as a script, never imported by pytest).

``append URL SESSION N TAG GO [FSYNC]``: open the session in the database at ``URL`` (the
repository's ``fsync`` policy FSYNC, default ``never``), wait for the file ``GO`` (so every
worker starts at once), append N user messages ``TAG-i``, then ``refresh()``; print one JSON
line: ids written, entries in the tree.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from hooks import UserMessage
from repos import FsyncPolicy
from repos.postgres import PostgresSessionRepo


def append(url: str, session_id: str, count: int, tag: str, go: str, fsync: FsyncPolicy) -> None:
    repo = PostgresSessionRepo(url, fsync=fsync, max_size=2)
    session = asyncio.run(repo.open(session_id))
    deadline = time.monotonic() + 60
    while not Path(go).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    ids = [session.append_message(UserMessage(content=f"{tag}-{i}")).id for i in range(count)]
    session.refresh()
    print(json.dumps({"ids": ids, "entries": len(session)}))
    session.close()
    repo.close()


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "append":
        policies: dict[str, FsyncPolicy] = {"never": "never", "turn": "turn", "always": "always"}
        fsync = args[5] if len(args) > 5 else "never"
        if fsync not in policies:
            raise SystemExit(f"unknown fsync policy {fsync!r}")
        append(args[0], args[1], int(args[2]), args[3], args[4], policies[fsync])
    else:
        raise SystemExit(f"unknown command {command!r}")
