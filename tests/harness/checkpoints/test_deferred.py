"""A ``write``/``edit`` stores its contents off the call's path (issue 26, under 1 ms added per
call for files under 1 MB): its entry names them by ref, the store maps the ref to the blob
once the blob is written, and whatever reads the store waits for that first. A content that
was never stored makes a rewind refuse, naming the file."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
from pathlib import Path
from typing import Any

import pytest
from workspaces import call, make_harness, store_of, tree

from harness import (
    CHECKPOINT_ENTRY,
    CheckpointError,
    CheckpointStore,
    CompactionSettings,
    CustomEntry,
    FauxReply,
    JsonlSessionRepo,
    RewindRefusedError,
    Session,
    ToolRun,
    referenced_blobs,
    write_tool,
)
from harness._checkpoints import Checkpoints, rewind_files
from hooks import JSONValue

BIG = 16 * 1024**2  # hashing and storing it takes tens of ms: the call returns long before


def run_of(ws: Path) -> ToolRun:
    async def on_update(partial: JSONValue) -> None:
        pass

    return ToolRun(tool_call_id="t", cwd=ws, on_update=on_update)


async def write(checkpoints: Checkpoints, ws: Path, path: str, content: str) -> None:
    tool = write_tool()
    value: dict[str, JSONValue] = {"path": path, "content": content}
    run = run_of(ws)
    await checkpoints.run(tool, value, run, entry_id=None, execute=lambda: tool.execute(value, run))


def checkpoint_entries(session: Session) -> list[CustomEntry]:
    return [
        e
        for e in session.entries()
        if isinstance(e, CustomEntry) and e.custom_type == CHECKPOINT_ENTRY
    ]


def after_of(entry: CustomEntry) -> dict[str, Any]:
    data: Any = entry.data
    return dict(data["changes"][0]["after"])


@pytest.mark.parametrize("kind", ["plain"])
async def test_a_write_names_its_content_by_ref_and_the_store_gets_it_after_the_call(
    session: Session, ws: Path, tmp_path: Path
) -> None:
    store = CheckpointStore(tmp_path / "store", max_file_bytes=2 * BIG)
    checkpoints = Checkpoints(session, store, ws)
    content = "x" * BIG
    await write(checkpoints, ws, "big.txt", content)

    after = after_of(checkpoint_entries(session)[-1])
    assert set(after) == {"ref", "mode", "size"} and after["size"] == BIG
    await checkpoints.settle()
    digest = store.resolve(after["ref"])
    assert digest == hashlib.sha256(content.encode()).hexdigest()
    assert store.get(digest) == content.encode()
    assert checkpoints.workspace.pending == 0


@pytest.mark.parametrize("kind", ["plain", "git"])
async def test_a_rewind_right_after_large_writes_waits_for_their_contents(
    session: Session, ws: Path, tmp_path: Path
) -> None:
    store = CheckpointStore(tmp_path / "store", max_file_bytes=2 * BIG)
    checkpoints = Checkpoints(session, store, ws)
    first, second = "1" * BIG, "2" * BIG
    await write(checkpoints, ws, "big.txt", first)
    await write(checkpoints, ws, "big.txt", second)
    target = checkpoint_entries(session)[0].id

    # No settle here: the rewind itself must wait for both contents, or it would find them
    # missing and refuse.
    result = await rewind_files(object(), checkpoints, target, force=False)

    assert result.restored == ("big.txt",)
    assert (ws / "big.txt").read_text() == first


async def test_a_content_never_stored_makes_a_rewind_refuse_naming_the_file(
    session: Session, ws: Path
) -> None:
    harness = make_harness(session, ws)
    store = store_of(session)
    (ws / "a.txt").write_text("written by a call whose process died\n")
    lost = {"ref": secrets.token_hex(32), "mode": 0o644, "size": 38}
    kept = {"sha256": store.put(b"before\n"), "mode": 0o644, "size": 7}
    entry = session.append_custom(
        CHECKPOINT_ENTRY,
        {
            "toolCallId": "t",
            "entryId": None,
            "toolName": "write",
            "scan": "path",
            "changes": [{"path": "a.txt", "before": kept, "after": lost}],
            "missed": [],
            "complete": True,
        },
    )
    before = tree(ws)

    # What the session last left in a.txt was never stored: rewinding over it is refused.
    with pytest.raises(RewindRefusedError, match="never stored") as refused:
        await harness.rewind_files(None)
    assert refused.value.unstored == ("a.txt",)
    assert refused.value.changed == () and refused.value.unavailable == ()
    # And so is rewinding to the entry, whose content for a.txt is the one missing.
    with pytest.raises(RewindRefusedError, match=r"never stored.*: a\.txt") as refused:
        await harness.rewind_files(entry.id)
    assert refused.value.unstored == ("a.txt",)
    assert tree(ws) == before
    # Forced: the missing content is skipped, saying why; the stored one is restored.
    skipped = await harness.rewind_files(entry.id, force=True)
    assert [(s.path, s.reason) for s in skipped.skipped] == [
        ("a.txt", "its content was never stored")
    ]
    assert tree(ws) == before
    restored = await harness.rewind_files(None, force=True)
    assert restored.restored == ("a.txt",)
    assert (ws / "a.txt").read_bytes() == b"before\n"


async def test_a_store_failing_after_a_call_fails_the_next_call_before_it_runs(
    session: Session, ws: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "store"
    root.mkdir()
    (root / "objects").write_text("not a folder: every blob write fails\n")
    checkpoints = Checkpoints(session, CheckpointStore(root), ws)

    with caplog.at_level(logging.WARNING, logger="harness"):
        await write(checkpoints, ws, "a.txt", "one\n")
        await checkpoints.settle()
    assert "checkpoint content of" in caplog.text and "could not be stored" in caplog.text
    assert (ws / "a.txt").read_text() == "one\n"  # the call itself was done

    with pytest.raises(OSError):
        await write(checkpoints, ws, "a.txt", "two\n")
    assert (ws / "a.txt").read_text() == "one\n"  # not run: it could not be recorded
    # The first call's content is missing, and a rewind says so.
    assert checkpoints.store.resolve(after_of(checkpoint_entries(session)[-1])["ref"]) is None


async def test_gc_keeps_the_blob_a_referenced_ref_names(
    repo: JsonlSessionRepo, session: Session, ws: Path, tmp_path: Path
) -> None:
    store = CheckpointStore(tmp_path / "store")
    checkpoints = Checkpoints(session, store, ws)
    await write(checkpoints, ws, "a.txt", "kept\n")
    await checkpoints.settle()
    ref = after_of(checkpoint_entries(session)[-1])["ref"]
    stray = secrets.token_hex(32)
    store.put_ref(stray, store.put(b"nobody refers to this\n"))

    report = store.gc(referenced_blobs(session), min_age_s=0)

    assert report.removed == 1
    digest = store.resolve(ref)
    assert digest is not None and store.get(digest) == b"kept\n"
    assert store.resolve(stray) is None  # the stray ref went with its blob


@pytest.mark.parametrize("kind", ["plain"])
async def test_contents_read_into_reused_buffers_are_each_stored_exactly(
    session: Session, ws: Path, tmp_path: Path
) -> None:
    store = CheckpointStore(tmp_path / "store")
    checkpoints = Checkpoints(session, store, ws)
    written = []
    # Sizes up and down, no waiting between calls: a buffer handed back too early, or a
    # content read into one still being stored, would store another call's bytes.
    for n, size in enumerate([1_000_000, 10, 300_000, 1_000_000, 0, 999_999, 70_000] * 3):
        content = f"{n}:" + chr(ord("a") + n % 26) * max(size - 3, 0)
        await write(checkpoints, ws, f"f{n % 4}.txt", content)
        written.append(hashlib.sha256(content.encode()).hexdigest())
    await checkpoints.settle()

    refs = [after_of(e)["ref"] for e in checkpoint_entries(session)]
    assert [store.resolve(ref) for ref in refs] == written
    assert all(store.get(digest) is not None for digest in written)


@pytest.mark.parametrize("kind", ["plain"])
async def test_a_settle_that_times_out_says_so_and_the_store_goes_on(
    session: Session, ws: Path, tmp_path: Path
) -> None:
    store = CheckpointStore(tmp_path / "store", max_file_bytes=4 * BIG)
    checkpoints = Checkpoints(session, store, ws)
    content = "z" * (3 * BIG)  # tens of ms to hash and store
    await write(checkpoints, ws, "big.txt", content)

    with pytest.raises(CheckpointError, match=r"1 checkpoint contents were still being stored"):
        await checkpoints.settle(timeout_s=0.0001)
    await checkpoints.settle()  # not cancelled by the timeout: it completes
    ref = after_of(checkpoint_entries(session)[-1])["ref"]
    assert store.resolve(ref) == hashlib.sha256(content.encode()).hexdigest()


@pytest.mark.parametrize("kind", ["plain"])
async def test_a_run_cancelled_while_it_waits_for_its_contents_still_frees_the_harness(
    session: Session, ws: Path, tmp_path: Path
) -> None:
    store = CheckpointStore(tmp_path / "store", max_file_bytes=4 * BIG)
    big = call("write", path="big.txt", content="w" * (3 * BIG))
    # No automatic compaction: the 48 MB call is over the threshold, and its summary request
    # would take the "ok" meant for the second turn (the run then ended on an error reply).
    harness = make_harness(
        session,
        ws,
        [FauxReply(tool_calls=[big]), "ok"],
        checkpoints=store,
        compaction=CompactionSettings(enabled=False),
    )
    ended = asyncio.Event()
    harness.on("agent_end")(lambda sender, event: ended.set())

    task = asyncio.create_task(harness.prompt("write it"))
    await ended.wait()  # the run is over; its end waits for the 48 MB content
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task

    assert not harness.busy
    last: Any = session.build_context().messages[-1]
    assert last.stop_reason == "stop"  # the "ok", not an error reply
    result = await harness.rewind_files(None)  # not refused as busy; waits for the content
    assert result.removed == ("big.txt",)


@pytest.mark.parametrize("kind", ["plain"])
async def test_a_content_stored_since_is_named_by_its_digest_by_the_next_entry(
    session: Session, ws: Path, tmp_path: Path
) -> None:
    checkpoints = Checkpoints(session, CheckpointStore(tmp_path / "store"), ws)
    await write(checkpoints, ws, "a.txt", "one\n")
    await checkpoints.settle()
    await write(checkpoints, ws, "a.txt", "two\n")

    data: Any = checkpoint_entries(session)[-1].data
    before = data["changes"][0]["before"]
    mode = (ws / "a.txt").stat().st_mode & 0o7777
    assert before == {"sha256": hashlib.sha256(b"one\n").hexdigest(), "mode": mode, "size": 4}
