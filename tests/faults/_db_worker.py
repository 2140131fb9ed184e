"""Child processes for the database fault tests (run as a script, never imported by pytest).

``append DB SESSION N TAG``: open the session in the SQLite database ``DB``, wait for the file
``DB.go`` (so every worker starts at once), append N user messages ``TAG-i``, then
``refresh()``; print one JSON line: ids written, entries in the tree.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from hooks import UserMessage
from repos import SqliteSessionRepo


def append(db: str, session_id: str, count: int, tag: str) -> None:
    repo = SqliteSessionRepo(db, fsync="never")
    session = asyncio.run(repo.open(session_id))
    go = Path(db + ".go")
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    ids = [session.append_message(UserMessage(content=f"{tag}-{i}")).id for i in range(count)]
    session.refresh()
    print(json.dumps({"ids": ids, "entries": len(session)}))
    session.close()
    repo.close()


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "append":
        append(args[0], args[1], int(args[2]), args[3])
    else:
        raise SystemExit(f"unknown command {command!r}")
