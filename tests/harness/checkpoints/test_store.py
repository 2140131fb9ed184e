"""The checkpoint store: deduplicated, damage detected, bounded by ``gc``."""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
import time
from pathlib import Path

import pytest
from workspaces import SCRIPT, call, make_harness, record_trees

from harness import (
    CheckpointStore,
    FauxReply,
    JsonlSessionRepo,
    RewindRefusedError,
    Session,
    referenced_blobs,
)


def test_a_content_stored_twice_takes_the_room_of_one(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "store")
    first = store.put(b"same bytes")
    second = store.put(b"same bytes")

    assert first == second == hashlib.sha256(b"same bytes").hexdigest()
    assert len(store.blobs()) == 1 and store.size() == len(b"same bytes")
    assert store.get(first) == b"same bytes"
    # The user's files: only the user may read them.
    assert stat.S_IMODE(os.stat(store.root).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store.root / "objects" / first[:2] / first[2:]).st_mode) == 0o600


def test_a_damaged_blob_is_never_returned(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "store")
    digest = store.put(b"original")
    (store.root / "objects" / digest[:2] / digest[2:]).write_bytes(b"tampered")

    assert store.get(digest) is None
    assert store.get("../../etc/passwd") is None  # not a blob name: never read


def test_gc_keeps_what_sessions_refer_to_and_bounds_the_store(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "store", max_bytes=50_000)
    old = time.time() - 7200
    referenced = []
    for i in range(40):
        digest = store.put(f"{i:04}".encode() * 500)  # 2,000 bytes each
        os.utime(store.root / "objects" / digest[:2] / digest[2:], (old + i, old + i))
        if i % 4 == 0:
            referenced.append(digest)
    assert store.size() == 80_000

    report = store.gc(set(referenced))

    # Unreferenced contents went first; the referenced ones (20,000 bytes) fit the cap.
    assert report.removed == 30 and report.evicted == 0
    assert {d for d, _, _ in store.blobs()} == set(referenced)
    # A tighter cap evicts the least recently used referenced contents too.
    tight = store.gc(set(referenced), max_bytes=9_000)
    assert tight.evicted == 6 and store.size() <= 9_000
    assert {d for d, _, _ in store.blobs()} == set(referenced[-4:])


def test_gc_spares_new_contents_no_session_refers_to_yet(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "store")
    digest = store.put(b"a run is about to record this")

    assert store.gc(set()).removed == 0
    assert store.gc(set(), min_age_s=0).removed == 1
    assert not store.has(digest)


async def test_the_store_stays_bounded_across_many_runs(
    repo: JsonlSessionRepo, session: Session, ws: Path, tmp_path: Path
) -> None:
    store = CheckpointStore(tmp_path / "bounded", max_bytes=4_000)
    sizes = []
    for n in range(6):
        write = call("write", path=f"f{n}.txt", content=str(n) * 900)
        harness = make_harness(
            session, ws, [FauxReply(tool_calls=[write]), "ok"], checkpoints=store
        )
        await harness.prompt(f"round {n}")
        store.gc(referenced_blobs(session), min_age_s=0)
        sizes.append(store.size())
    assert max(sizes) <= 4_000
    assert sizes[-1] > 0  # the newest contents are kept


async def test_a_rewind_whose_contents_were_collected_says_which(
    session: Session, ws: Path, tmp_path: Path
) -> None:
    store = CheckpointStore(tmp_path / "store")
    harness = make_harness(session, ws, SCRIPT, checkpoints=store)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    store.gc(set(), max_bytes=0, min_age_s=0)  # everything goes
    first = next(iter(trees))

    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(first)

    assert "old.txt" in refused.value.unavailable and refused.value.changed == ()
    forced = await harness.rewind_files(first, force=True)
    assert "old.txt" in [s.path for s in forced.skipped]
    assert "a.txt" in forced.removed  # what needs no content still happens


def test_a_ref_names_its_blob_only_once_recorded(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "store")
    ref = secrets.token_hex(32)
    assert store.resolve(ref) is None  # never recorded: the content was never stored
    digest = store.put(b"stored first")
    store.put_ref(ref, digest)
    assert store.resolve(ref) == digest
    store.put_ref(ref, digest)  # the same again is fine
    with pytest.raises(FileExistsError):
        store.put_ref(ref, hashlib.sha256(b"another").hexdigest())
    with pytest.raises(ValueError):
        store.put_ref("../../x", digest)
    assert store.resolve("../../x") is None
    # A ref cut short (a writer killed mid-way) names nothing.
    cut = secrets.token_hex(32)
    (tmp_path / "store" / "refs" / cut[:2]).mkdir(exist_ok=True)
    (tmp_path / "store" / "refs" / cut[:2] / cut[2:]).write_text(digest[:10])
    assert store.resolve(cut) is None
