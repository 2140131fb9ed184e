"""Holes an adversarial review of checkpoints found (docs/security.md, "Checkpoints, rewinds
and forks with files"), each attacked with a hostile session file or a hostile workspace:
where the store is, where a rewind may write, the modes it gives, the store's helper files,
exclusions by identity, and the scan's byte cap."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from workspaces import FLIPPER, call, git, hostile, make_harness, seed, state

from harness import (
    AgentHarness,
    CheckpointError,
    CheckpointStore,
    FauxReply,
    JsonlSessionRepo,
    RewindRefusedError,
    Session,
    SessionBeforeRewindEvent,
    WorkspaceMismatchError,
    open_session,
)
from harness._checkpoints.scan import Workspace

# --- 1. the store is the user's, never one beside a session file ----------------------------


async def test_a_downloaded_sessions_folder_never_supplies_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    ws = seed(tmp_path / "ws", "plain")
    downloads = tmp_path / "downloads"
    evil = await JsonlSessionRepo(downloads).create(str(ws))
    assert evil.path is not None
    # The download brings a store beside the session, holding the attacker's content.
    planted = CheckpointStore(downloads / ".checkpoints")
    hostile(evil, [{"path": "payload.sh", "before": state(planted, b"pwned\n"), "after": None}])
    evil.close()

    session = open_session(evil.path)
    harness = AgentHarness(session=session, cwd=ws, checkpoints=True, resources=None)
    assert harness.checkpoints is not None
    assert harness.checkpoints.root == tmp_path / "data" / "harness" / "checkpoints"
    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(None)

    assert refused.value.unavailable == ("payload.sh",)
    assert not (ws / "payload.sh").exists()
    session.close()


# --- 2. a rewind writes only inside the folder the session was recorded in ------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.txt").write_text("precious\n")
    return folder


async def test_paths_through_symlinks_or_into_git_are_refused_with_a_list(
    session: Session, ws: Path, outside: Path, kind: str
) -> None:
    (ws / "inner").symlink_to(ws / "sub")  # stays inside: still a second name for sub/
    (ws / "out").symlink_to(outside)
    harness = make_harness(session, ws)
    store = harness.checkpoints
    assert store is not None
    payload = state(store, b"#!/bin/sh\necho pwned\n", 0o755)
    bad = ["inner/planted.txt", "out/planted.txt", ".git/hooks/post-checkout", "x/.GIT/config"]
    hostile(
        session,
        [
            *({"path": p, "before": payload, "after": None} for p in bad),
            {"path": "../outside/victim.txt", "before": payload, "after": None},
        ],
    )

    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(None)
    listed = str(refused.value)
    for path in bad:
        assert path in listed
    assert "change 5" in listed  # the ".." one, named by its place in its entry
    result = await harness.rewind_files(None, force=True)

    assert result.restored == () and result.entry_id is None
    assert not (ws / "sub" / "planted.txt").exists() and not (outside / "planted.txt").exists()
    assert not (ws / ".git" / "hooks" / "post-checkout").exists()
    assert not (ws / "x").exists()
    assert sorted(os.listdir(outside)) == ["victim.txt"]


@pytest.mark.parametrize("recorded", [".", "ws", "", "elsewhere"])
async def test_a_session_recorded_as_dot_relative_or_elsewhere_is_never_rewound_here(
    tmp_path: Path, recorded: str
) -> None:
    ws = seed(tmp_path / "ws", "plain")
    store = CheckpointStore(tmp_path / "store")
    cwd = str(tmp_path / "elsewhere") if recorded == "elsewhere" else recorded
    evil = await JsonlSessionRepo(tmp_path / "sessions").create(str(ws))
    assert evil.path is not None
    hostile(evil, [{"path": "planted.txt", "before": state(store, b"pwned\n"), "after": None}])
    evil.close()
    # The header, written by hand (create() records an absolute folder): what a file can hold.
    header, rest = evil.path.read_bytes().split(b"\n", 1)
    evil.path.write_bytes(header.replace(str(ws).encode(), cwd.encode()) + b"\n" + rest)
    session = open_session(evil.path)
    assert session.cwd == cwd
    harness = AgentHarness(session=session, cwd=ws, checkpoints=store, resources=None)

    with pytest.raises(WorkspaceMismatchError) as mismatch:
        await harness.rewind_files(None, force=True)
    with pytest.raises(WorkspaceMismatchError):
        await harness.fork(JsonlSessionRepo(tmp_path / "sessions"), workspace=tmp_path / "fork")

    assert mismatch.value.code == "workspace_mismatch"
    assert not (ws / "planted.txt").exists() and not (tmp_path / "fork").exists()
    session.close()


# --- 3. restored files get sane modes -------------------------------------------------------


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


async def test_restored_files_respect_the_umask_and_never_get_setid_or_world_write(
    session: Session, ws: Path, umask_027: None
) -> None:
    harness = make_harness(session, ws)
    store = harness.checkpoints
    assert store is not None
    hostile(
        session,
        [
            {"path": "suid.sh", "before": state(store, b"#!/bin/sh\n", 0o6777), "after": None},
            {"path": "open.txt", "before": state(store, b"all\n", 0o666), "after": None},
        ],
    )

    result = await harness.rewind_files(None)

    assert sorted(result.restored) == ["open.txt", "suid.sh"]
    assert stat.S_IMODE(os.stat(ws / "suid.sh").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(ws / "open.txt").st_mode) == 0o640


# --- 4. the store's helper files are never followed -----------------------------------------


def test_the_stores_clock_file_is_never_followed_through_a_symlink(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    ws = seed(tmp_path / "ws", "git")
    store = CheckpointStore(tmp_path / "store")
    store.root.mkdir()
    made = tmp_path / "made-by-the-scan"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    os.utime(victim, (1_000_000, 1_000_000))
    (store.root / ".clock").symlink_to(made)  # dangling: touching it would create `made`
    workspace = Workspace(ws, store)

    snapshot = workspace.before()
    (store.root / ".clock").unlink()
    (store.root / ".clock").symlink_to(victim)
    again = workspace.before()

    assert not made.exists()
    assert victim.stat().st_mtime == 1_000_000
    # Refused, the scan falls back on the stat scan, which needs no clock.
    assert snapshot.kind == again.kind == "stat"


def test_a_symlinked_git_index_is_never_read(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    ws = seed(tmp_path / "ws", "git")
    index = ws / ".git" / "index"
    moved = tmp_path / "index-elsewhere"
    index.rename(moved)
    index.symlink_to(moved)
    workspace = Workspace(ws, CheckpointStore(tmp_path / "store"))

    assert git(ws, "status", "--porcelain")  # git itself follows it
    assert workspace.before().kind == "stat"


# --- 5. exclusions by identity --------------------------------------------------------------

_UNSHARE = shutil.which("unshare")

_MOUNTED = textwrap.dedent(
    """
    import asyncio, json, os, subprocess, sys
    from pathlib import Path
    from harness import AgentHarness, CheckpointStore, open_session
    from harness._checkpoints.scan import Workspace

    ws, store_root, session_path, mirror = map(Path, sys.argv[1:5])
    subprocess.run(["mount", "--bind", str(store_root), str(mirror)], check=True)
    store = CheckpointStore(store_root)
    snapshot = Workspace(ws, store).before()

    async def rewind() -> list[str]:
        with open_session(session_path) as session:
            harness = AgentHarness(session=session, cwd=ws, checkpoints=store, resources=None)
            try:
                await harness.rewind_files(None)
            except Exception as exc:
                return [type(exc).__name__, str(exc)]
            return ["written"]

    print(json.dumps({"seen": sorted(snapshot.seen), "rewind": asyncio.run(rewind())}))
    """
)


@pytest.mark.skipif(_UNSHARE is None, reason="unshare is not installed")
async def test_the_store_under_a_second_name_is_neither_scanned_nor_rewound(
    tmp_path: Path,
) -> None:
    ws = seed(tmp_path / "ws", "plain")
    store = CheckpointStore(tmp_path / "store")
    blob = store.put(b"a stored blob\n")
    (ws / "mirror").mkdir()  # the store is bind-mounted here: no symlink, another path
    evil = await JsonlSessionRepo(tmp_path / "sessions").create(str(ws))
    assert evil.path is not None
    inside = f"mirror/objects/{blob[:2]}/{blob[2:]}"
    hostile(evil, [{"path": inside, "before": state(store, b"overwritten\n"), "after": None}])
    evil.close()
    script = tmp_path / "mounted.py"
    script.write_text(_MOUNTED)
    probe = subprocess.run(
        [str(_UNSHARE), "-rm", "true"], capture_output=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        pytest.skip("user namespaces are not available here")

    done = subprocess.run(
        [str(_UNSHARE), "-rm", sys.executable, str(script)]
        + [str(p) for p in (ws, store.root, evil.path, ws / "mirror")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert not [p for p in out["seen"] if p.startswith("mirror/")]
    assert out["rewind"][0] == "RewindRefusedError" and inside in out["rewind"][1]
    assert store.get(blob) == b"a stored blob\n"


# --- 6. the scan's byte cap -----------------------------------------------------------------


def test_the_scan_reads_at_most_its_byte_cap_and_says_what_it_missed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(8):
        (ws / f"f{i}.bin").write_bytes(bytes([i]) * 100_000)
    store = CheckpointStore(tmp_path / "store")
    workspace = Workspace(ws, store, max_scan_bytes=250_000, git=None)

    snapshot = workspace.before()
    for i in range(8):
        (ws / f"f{i}.bin").write_bytes(b"changed")
    changes, missed, complete = workspace.after(snapshot)

    assert store.size() <= 250_000 + 8 * len(b"changed")
    assert snapshot.complete is False and complete is False
    assert len(changes) == 2 and len(missed) == 6
    assert all("byte" in m.reason for m in missed)


def test_a_git_scan_never_reads_a_blob_past_its_byte_cap(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    ws = seed(tmp_path / "ws", "git")
    (ws / "big.bin").write_bytes(b"x" * 300_000)
    git(ws, "add", "big.bin")
    git(ws, "commit", "-qm", "big")
    store = CheckpointStore(tmp_path / "store")
    workspace = Workspace(ws, store, max_scan_bytes=100_000)

    snapshot = workspace.before()
    (ws / "big.bin").unlink()
    changes, missed, complete = workspace.after(snapshot)

    assert changes == [] and [m.path for m in missed] == ["big.bin"]
    assert complete is False and store.size() < 100_000


def test_the_store_used_by_a_session_in_a_jsonl_root_is_that_roots(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "sessions")
    assert CheckpointStore.for_repo(repo).root == tmp_path / "sessions" / ".checkpoints"


# --- 7. concurrent processes ----------------------------------------------------------------


async def test_a_file_changed_while_the_rewind_hooks_run_is_never_overwritten(
    session: Session, ws: Path
) -> None:
    replies = [FauxReply(tool_calls=[call("write", path="a.txt", content="agent\n")]), "ok"]
    harness = make_harness(session, ws, replies)
    await harness.prompt("write a.txt")
    first = session.entry_ids()[0]

    def meanwhile(sender: object, event: SessionBeforeRewindEvent) -> None:
        # Another program writes the file after the rewind checked it, before it writes.
        subprocess.run(
            ["sh", "-c", "printf 'mine\\n' > a.txt && printf 'also\\n' > keep.txt"],
            cwd=ws,
            check=True,
            timeout=30,
        )

    harness.connect("session_before_rewind", meanwhile)
    result = await harness.rewind_files(first, force=True)

    assert (ws / "a.txt").read_text() == "mine\n"  # not removed: nobody saw this change
    assert (ws / "keep.txt").read_text() == "also\n"  # never part of the rewind
    assert [s.path for s in result.skipped] == ["a.txt"]
    assert result.removed == () and result.entry_id is None


def test_a_tree_of_empty_folders_or_symlinks_is_bounded_like_files(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for i in range(30):
        (ws / f"d{i:02}" / "deeper").mkdir(parents=True)
    links = tmp_path / "links"
    links.mkdir()
    for i in range(30):
        (links / f"l{i:02}").symlink_to("nowhere")
    (links / "real.txt").write_text("x")

    for folder in (ws, links):
        workspace = Workspace(folder, CheckpointStore(tmp_path / "store"), max_files=10, git=None)
        assert workspace.before().complete is False, folder


# 5,000 blobs keep gc busy long enough for the put to land while it removes (asserted below);
# the 20,000 it was found with run under stress.
@pytest.mark.parametrize("blobs", [5_000, pytest.param(20_000, marks=pytest.mark.stress)])
def test_gc_never_removes_a_blob_a_concurrent_put_reused(tmp_path: Path, blobs: int) -> None:
    store = CheckpointStore(tmp_path / "store")
    old = time.time() - 7200

    def blob(digest: str) -> Path:
        return store.root / "objects" / digest[:2] / digest[2:]

    # Enough blobs that gc takes a while. Only the reused one goes through put(): the others
    # are written straight into put's layout (a content named by its SHA-256), a tenth of
    # the time of as many puts, and gc cannot tell them apart.
    names = []
    for i in range(blobs):
        data = b"unused %d" % i
        names.append(hashlib.sha256(data).hexdigest())
        blob(names[-1]).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        blob(names[-1]).write_bytes(data)
    reused = store.put(b"a content a running session stores again\n")
    for digest in (*names, reused):
        os.utime(blob(digest), (old, old))
    sample = [blob(d) for d in random.Random(7).sample(names, 32)]
    gc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from harness import CheckpointStore; "
         "CheckpointStore(sys.argv[1]).gc(set())", str(store.root)]
    )  # fmt: skip
    try:
        # Once gc is removing blobs (it listed them all, the reused one as long unused), a
        # run in another process stores that content again, as its checkpoint will name it.
        while gc.poll() is None and all(p.exists() for p in sample):
            time.sleep(0.005)  # a poll that stats few files leaves the cores to gc
        racing = gc.poll() is None
        store.put(b"a content a running session stores again\n")
    finally:
        assert gc.wait(timeout=300) == 0

    assert racing, "gc was done before the put: the race proved nothing"
    assert not any(p.exists() for p in sample)  # gc did run
    assert store.get(reused) == b"a content a running session stores again\n"


async def test_a_fork_into_a_folder_inside_the_working_folder_is_refused_at_once(
    repo: JsonlSessionRepo, session: Session, ws: Path
) -> None:
    harness = make_harness(session, ws)
    session.append_custom("note", {})
    before = sorted(os.listdir(ws))
    sessions = len(await repo.list())

    with pytest.raises(CheckpointError) as refused:
        await harness.fork(repo, None, workspace=ws / "sub" / "fork")  # copied into itself

    assert "inside the working folder" in str(refused.value)
    assert sorted(os.listdir(ws)) == before and not (ws / "sub" / "fork").exists()
    assert len(await repo.list()) == sessions  # no fork left behind


async def test_a_session_file_in_the_working_folder_itself_is_never_rewound_over(
    tmp_path: Path,
) -> None:
    ws = seed(tmp_path / "ws", "plain")
    store = CheckpointStore(tmp_path / "store")
    made = await JsonlSessionRepo(tmp_path / "sessions").create(str(ws))
    assert made.path is not None
    made.close()
    own = ws / "evil.jsonl"  # opened by its path, lying in the working folder itself
    os.rename(made.path, own)
    session = open_session(own)
    hostile(session, [{"path": "evil.jsonl", "before": state(store, b"pwned\n"), "after": None}])
    lines = own.read_bytes()
    harness = AgentHarness(session=session, cwd=ws, checkpoints=store, resources=None)

    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(None)
    result = await harness.rewind_files(None, force=True)

    assert "evil.jsonl" in str(refused.value)
    assert result.restored == () and own.read_bytes().startswith(lines)
    assert "evil.jsonl" not in Workspace(ws, store, exclude=[own], git=None).before().seen
    session.close()


def test_the_stores_lock_file_is_never_followed_through_a_symlink(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "store")
    store.root.mkdir()
    made = tmp_path / "made-by-the-store"
    (store.root / ".lock").symlink_to(made)

    with pytest.raises(OSError, match="symlink"):
        store.put(b"content")
    (store.root / ".lock").unlink()
    os.mkfifo(store.root / ".lock")  # a FIFO would block an ordinary open
    with pytest.raises(OSError, match="regular file"):
        store.put(b"content")

    assert not made.exists()


def test_the_stores_rewind_key_is_kept_private_and_never_followed(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "store")
    key = store.rewind_key()
    assert len(key) == 32 and CheckpointStore(store.root).rewind_key() == key  # kept
    assert stat.S_IMODE(os.stat(store.root / ".rewind-key").st_mode) == 0o600
    assert sorted(os.listdir(store.root)) == [".rewind-key"]  # its first copy is gone

    other = CheckpointStore(tmp_path / "other")
    other.root.mkdir()
    made = tmp_path / "made-by-the-store"
    (other.root / ".rewind-key").symlink_to(made)
    with pytest.raises(OSError, match="symlink"):
        other.rewind_key()
    assert not made.exists()


def test_a_folder_swapped_for_a_symlink_while_rewinding_is_never_written_through(
    tmp_path: Path,
) -> None:
    # Another process keeps swapping d/ for a symlink to .git (inside the working folder)
    # while rewinds write d/f.txt: the check before and the write itself must both hold.
    ws = seed(tmp_path / "ws", "plain")
    (ws / ".git").mkdir()
    store = CheckpointStore(tmp_path / "store")
    leaked = tmp_path / "ws" / ".git" / "f.txt"

    async def rewinds() -> tuple[int, int]:
        session = await JsonlSessionRepo(tmp_path / "sessions").create(str(ws))
        payload = state(store, b"pwned\n")
        hostile(session, [{"path": "d/f.txt", "before": payload, "after": None}])
        harness = AgentHarness(session=session, cwd=ws, checkpoints=store, resources=None)
        written = escaped = 0
        for rounds in range(3000):  # at least 200, until a few wrote into the real folder
            if rounds >= 200 and written >= 3:
                break
            result = await harness.rewind_files(None, force=True)
            written += len(result.restored)
            if leaked.exists():
                escaped += 1
                leaked.unlink()
            with contextlib.suppress(OSError):
                os.unlink(ws / "d" / "f.txt")
        session.close()
        return written, escaped

    stop = tmp_path / "stop"
    flipper = subprocess.Popen(
        [sys.executable, "-c", FLIPPER, str(ws / "d"), ".git", str(stop)]  # relative: inside
    )
    try:
        written, escaped = asyncio.run(rewinds())
    finally:
        stop.touch()
        flipper.wait(timeout=60)

    assert escaped == 0
    assert written > 0, "no rewind wrote into the real folder: the race proved nothing"
