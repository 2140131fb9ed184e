"""A process killed with SIGKILL right after a ``write`` (whose content is hashed and stored off
the call's path) never leaves a checkpoint naming a blob that is not there: the entry's ref
either names the complete blob, or nothing, and then a rewind refuses, naming the file
(issue 26). Real processes, killed at several moments of the store's work, by
``tests/faults/_checkpoint_worker.py``."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from stress import STRESS
from workspaces import call, make_harness, store_of

from harness import (
    CHECKPOINT_ENTRY,
    AgentHarness,
    CustomEntry,
    FauxReply,
    JsonlSessionRepo,
    RewindRefusedError,
    Session,
    open_session,
)

pytestmark = pytest.mark.faults

WORKER = Path(__file__).with_name("_checkpoint_worker.py")
SIZE = 24 * 1024**2  # tens of ms to hash and store: a kill at once lands before it is done
# A kill at once, mid-write and after the write: the default run; stress adds the moments between.
DELAYS_MS = (0, 0, 3, 10, 25, 60, 1500) if STRESS else (0, 10, 1500)


def checkpoints_of(session: Session) -> list[CustomEntry]:
    return [
        e
        for e in session.entries()
        if isinstance(e, CustomEntry) and e.custom_type == CHECKPOINT_ENTRY
    ]


async def test_a_kill_right_after_a_write_never_leaves_an_entry_naming_a_missing_blob(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(ws))
    replies = [FauxReply(tool_calls=[call("write", path="big.txt", content="v0\n")]), "ok"]
    await make_harness(session, ws, replies).prompt("start")
    [first] = checkpoints_of(session)
    assert session.path is not None
    path = session.path
    store = store_of(session)
    session.close()

    outcomes = []
    for seed, delay in enumerate(DELAYS_MS):
        done = subprocess.run(
            [
                *(sys.executable, str(WORKER), str(path), str(ws), str(store.root)),
                *(str(SIZE), str(delay), f"round {seed}"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == -9, done.stderr
        written = done.stdout.strip()
        assert hashlib.sha256((ws / "big.txt").read_bytes()).hexdigest() == written

        reopened = open_session(path)
        entries = checkpoints_of(reopened)
        data: Any = entries[-1].data
        assert data["toolCallId"] == f"tround {seed}"
        # Every state any entry names is a stored blob, a ref naming a complete stored blob,
        # or a ref naming nothing: never a name whose blob is missing or cut short.
        for entry in entries:
            body: Any = entry.data
            for change in body["changes"]:
                for state in (change["before"], change["after"]):
                    if state is None:
                        continue
                    digest = store.resolve(state["ref"]) if "ref" in state else state["sha256"]
                    assert digest is None or store.get(digest) is not None
        digest = store.resolve(data["changes"][0]["after"]["ref"])

        harness = AgentHarness(session=reopened, cwd=ws, checkpoints=store, resources=None)
        if digest is None:  # killed before its content was stored: the rewind says so
            with pytest.raises(RewindRefusedError, match="never stored") as refused:
                await harness.rewind_files(first.id)
            assert refused.value.unstored == ("big.txt",)
            assert hashlib.sha256((ws / "big.txt").read_bytes()).hexdigest() == written
            outcomes.append("never stored")
        else:
            assert digest == written
            await harness.rewind_files(first.id)
            assert (ws / "big.txt").read_text() == "v0\n"
            outcomes.append("stored")
        reopened.close()

    assert "never stored" in outcomes, f"no kill landed before the store: {outcomes}"
    assert "stored" in outcomes, f"no content was ever stored: {outcomes}"
