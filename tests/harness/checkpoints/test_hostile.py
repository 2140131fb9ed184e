"""Checkpoint entries in a session file are untrusted (docs/security.md, "Checkpoints and
rewinds"): whatever they name, a rewind never writes outside the working folder on its own,
never through a symlink leading out, and never reads a blob by a name that is not one.

Each test writes the hostile entry itself (any process, or a downloaded file, could), with
contents the store really holds, so only the path is what stops the write.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from workspaces import call, git, hostile, make_harness, seed, state, tree

from harness import (
    CHECKPOINT_ENTRY,
    REWIND_ENTRY,
    CustomEntry,
    FauxReply,
    JsonlSessionRepo,
    PermissionRequest,
    RewindRefusedError,
    SecuritySupervisor,
    Session,
    UserMessage,
)
from harness._checkpoints.records import FileState, read_records
from harness._checkpoints.rewind import states_at


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.txt").write_text("precious\n")
    return folder


def untouched(outside: Path) -> bool:
    return tree(outside) == {"victim.txt": (b"precious\n", False)}


async def test_an_absolute_path_is_refused_listed_and_never_written_even_forced(
    session: Session, ws: Path, outside: Path, tmp_path: Path
) -> None:
    asked: list[PermissionRequest] = []

    async def approver(request: PermissionRequest) -> None:
        asked.append(request)

    supervisor = SecuritySupervisor(approver=approver, setting_sources=())
    harness = make_harness(session, ws, supervisor=supervisor)
    store = harness.checkpoints
    assert store is not None
    victim = str(outside / "victim.txt")
    inside = str(ws / "abs.txt")  # absolute, even inside the working folder
    payload = state(store, b"pwned\n")
    hostile(
        session,
        [
            {"path": victim, "before": payload, "after": None},
            {"path": inside, "before": payload, "after": None},
        ],
    )

    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(None)
    assert [u.split(" (")[0] for u in refused.value.unsafe] == [victim, inside]
    assert victim in str(refused.value) and "absolute" in str(refused.value)
    result = await harness.rewind_files(None, force=True)

    assert untouched(outside) and not (ws / "abs.txt").exists()
    assert sorted(s.path for s in result.skipped) == sorted([victim, inside])
    assert asked == []  # nobody is asked: a rewind never writes there


async def test_a_path_climbing_out_or_holding_a_nul_or_a_bad_blob_name_is_not_read(
    session: Session, ws: Path, outside: Path
) -> None:
    harness = make_harness(session, ws)
    store = harness.checkpoints
    assert store is not None
    payload = state(store, b"pwned\n")
    bad_blob = {"sha256": "../../../outside/victim.txt", "mode": 0o644, "size": 1}
    hostile(
        session,
        [
            {"path": "../outside/victim.txt", "before": payload, "after": None},
            {"path": "sub/../../outside/victim.txt", "before": payload, "after": None},
            {"path": "a\0b", "before": payload, "after": None},
            {"path": "x.txt", "before": bad_blob, "after": None},
            {"path": "y.txt", "before": {**payload, "mode": "rwx"}, "after": None},
            {"path": "//etc/passwd", "before": payload, "after": None},
        ],
    )
    before = tree(ws)

    result = await harness.rewind_files(None, force=True)

    assert untouched(outside)
    assert tree(ws) == before
    assert len(result.problems) == 6 and result.entry_id is None


async def test_a_symlink_leading_out_is_never_written_through(
    session: Session, ws: Path, outside: Path
) -> None:
    (ws / "link").symlink_to(outside)  # a folder on the path
    (ws / "alias.txt").symlink_to(outside / "victim.txt")  # the name itself
    harness = make_harness(session, ws)
    store = harness.checkpoints
    assert store is not None
    payload = state(store, b"pwned\n")
    hostile(
        session,
        [
            {"path": "link/victim.txt", "before": payload, "after": None},
            {"path": "link/new.txt", "before": payload, "after": None},
            {"path": "alias.txt", "before": payload, "after": None},
        ],
    )

    result = await harness.rewind_files(None, force=True)

    assert untouched(outside)
    assert os.path.islink(ws / "alias.txt")
    assert sorted(s.path for s in result.skipped) == [
        "alias.txt",
        "link/new.txt",
        "link/victim.txt",
    ]
    assert result.restored == ()


async def test_a_rewind_refuses_a_file_it_would_overwrite_unless_forced(
    session: Session, ws: Path
) -> None:
    # A hostile entry claims the session left keep.txt with other content: the user's own
    # file must not be overwritten without --force.
    harness = make_harness(session, ws)
    store = harness.checkpoints
    assert store is not None
    hostile(
        session,
        [{"path": "keep.txt", "before": state(store, b"x\n"), "after": state(store, b"y\n")}],
    )

    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(None)
    assert refused.value.changed == ("keep.txt",)
    assert (ws / "keep.txt").read_text() == "keep\n"


async def test_the_sessions_and_the_store_inside_the_working_folder_are_never_rewound(
    tmp_path: Path,
) -> None:
    ws = seed(tmp_path / "ws", "plain")
    repo = JsonlSessionRepo(ws / "sessions")  # sessions (and the store) inside the folder
    session = await repo.create(str(ws))
    assert session.path is not None
    replies = [FauxReply(tool_calls=[call("bash", command="echo x > made.txt")]), "ok"]
    harness = make_harness(session, ws, replies)
    await harness.prompt("make a file")
    [checkpoint] = [
        e
        for e in session.entries()
        if isinstance(e, CustomEntry) and e.custom_type == CHECKPOINT_ENTRY
    ]
    assert [c["path"] for c in checkpoint.data["changes"]] == ["made.txt"]  # type: ignore[index]
    store = harness.checkpoints
    assert store is not None
    own = session.path.relative_to(ws).as_posix()
    payload = state(store, b"pwned\n")
    hostile(
        session,
        [
            {"path": own, "before": payload, "after": None},
            {"path": "sessions/.checkpoints/x", "before": payload, "after": None},
        ],
    )
    lines = session.path.read_bytes()

    result = await harness.rewind_files(None, force=True)

    assert sorted(s.path for s in result.skipped) == sorted([own, "sessions/.checkpoints/x"])
    assert session.path.read_bytes().startswith(lines)  # only appended to
    assert not (ws / "made.txt").exists()


async def test_a_bash_scan_never_runs_a_program_an_implicit_repository_names(
    tmp_path: Path, repo: JsonlSessionRepo
) -> None:
    # Review 6, finding 18: files a model may write (HEAD, refs/, objects/, a config declaring
    # a partial clone whose promisor remote names an uploadpack) made the scan's `git status`
    # a lazy fetch running that program.
    marker = tmp_path / "uploadpack-ran"
    ws = tmp_path / "plain"
    (ws / "objects" / "info").mkdir(parents=True)
    (ws / "refs" / "heads").mkdir(parents=True)
    (ws / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "refs" / "heads" / "main").write_text("12" * 20 + "\n")
    (ws / "config").write_text(
        "[core]\n\trepositoryformatversion = 1\n\tbare = false\n\tworktree = .\n"
        "[extensions]\n\tpartialClone = origin\n"
        f'[remote "origin"]\n\turl = {ws}\n\tpromisor = true\n'
        f'\tuploadpack = "touch {marker}; false"\n'
    )
    session = await repo.create(str(ws))
    harness = make_harness(session, ws, [FauxReply(tool_calls=[call("bash", command="ls")]), "ok"])
    await harness.prompt("list")
    assert not marker.exists()


async def test_a_rewind_entry_naming_no_earlier_start_is_read_as_naming_none(
    session: Session, ws: Path
) -> None:
    harness = make_harness(session, ws)
    store = harness.checkpoints
    assert store is not None
    first = session.append_message(UserMessage(content="hi")).id
    payload = state(store, b"planted\n")
    change = {"path": "keep.txt", "before": payload, "after": state(store, b"keep\n")}
    for start in (first, "ffffffff"):  # an earlier entry; one the session does not hold
        session.append_custom(
            REWIND_ENTRY,
            {"targetId": None, "fromLeafId": start, "conversation": False, "changes": [change]},
        )
    [real, made_up], _ = read_records(session)

    assert real.from_leaf_id == first and made_up.from_leaf_id is None
    # The entry a rewind started from is as it found the files; the others as they were.
    assert states_at(session, first, store)[1]["keep.txt"] == FileState.from_json(payload)
    assert states_at(session, real.entry_id, store)[1]["keep.txt"] == FileState.from_json(
        change["after"]
    )


async def test_a_scan_never_fetches_even_when_the_repository_allows_its_protocol(
    tmp_path: Path, repo: JsonlSessionRepo
) -> None:
    """Review 10, finding 3: a repository's ``protocol.file.allow=always`` wins over the
    scan's ``protocol.allow=never``, so a partial clone's missing blob was fetched lazily and
    its promisor remote's ``uploadpack`` ran, outside the sandbox."""
    marker = tmp_path / "uploadpack-ran"
    ws = seed(tmp_path / "ws", "git")
    blob = git(ws, "rev-parse", "HEAD:keep.txt").strip()
    os.unlink(ws / ".git" / "objects" / blob[:2] / blob[2:])  # a partial clone's missing blob
    config = (
        (ws / ".git" / "config")
        .read_text()
        .replace("repositoryformatversion = 0", "repositoryformatversion = 1")
    )
    config += (
        "[extensions]\n\tpartialClone = origin\n"
        f'[remote "origin"]\n\turl = file://{ws}\n\tpromisor = true\n'
        f'\tuploadpack = "touch {marker}; false"\n'
        '[protocol "file"]\n\tallow = always\n'
    )
    (ws / ".git" / "config").write_text(config)
    session = await repo.create(str(ws))
    command = "echo more >> keep.txt"
    harness = make_harness(
        session, ws, [FauxReply(tool_calls=[call("bash", command=command)]), "ok"]
    )
    await harness.prompt("go")
    assert (ws / "keep.txt").read_text() == "keep\nmore\n"
    assert not marker.exists()


@pytest.mark.parametrize(
    ("where", "name"),
    [("repository", "lfs"), ("user", "lfs"), ("repository", "a=b"), ("repository", "Evil")],
)
async def test_a_scan_runs_no_filter_driver(
    tmp_path: Path,
    repo: JsonlSessionRepo,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    name: str,
) -> None:
    """Review 10, finding 5: the scan's ``git status`` re-hashed a changed file through its
    filter driver: the repository's own command, or one the user's config names by bare
    name (``git-lfs``) found first in a folder a sandboxed command can write
    (``~/.local/bin``), ran outside the sandbox. Review 11, finding 4: a driver named
    ``a=b`` (git splits ``-c`` at the first ``=``) or ``Evil`` (subsections keep their case)
    was not turned off."""
    marker = tmp_path / "filter-ran"
    home = tmp_path / "home"
    planted = home / ".local" / "bin"
    planted.mkdir(parents=True)
    (planted / "git-lfs").write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    (planted / "git-lfs").chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{planted}{os.pathsep}{os.environ['PATH']}")
    ws = seed(tmp_path / "ws", "git")
    (ws / ".gitattributes").write_text(f"*.bin filter={name} -text\n")
    (ws / "data.bin").write_text("data\n")
    git(ws, "-c", f"filter.{name}.clean=cat", "add", ".")
    git(ws, "-c", f"filter.{name}.clean=cat", "commit", "-qm", "data")
    driver = (
        f'[filter "{name}"]\n\tclean = touch {marker}; cat\n\trequired = true\n'
        if where == "repository"
        else '[filter "lfs"]\n\tclean = git-lfs clean -- %f\n\tprocess = git-lfs filter-process\n'
    )
    target = ws / ".git" / "config" if where == "repository" else home / ".gitconfig"
    with target.open("a") as f:
        f.write(driver)
    session = await repo.create(str(ws))
    calls = [call("bash", command="printf 'dat9\\n' > data.bin"), call("bash", command="true")]
    harness = make_harness(
        session,
        ws,
        [FauxReply(tool_calls=[c]) for c in calls] + ["ok"],  # two scans
    )
    await harness.prompt("go")
    assert (ws / "data.bin").read_text() == "dat9\n"
    assert not marker.exists()


def scanning_run(tmp_path: Path, ws: Path) -> str:
    """Python code (after ``import asyncio``) that runs one bash call through a harness with
    checkpoints on in ``ws``, so the checkpoint scan runs git there."""
    return f"""
from harness import (AgentHarness, CheckpointStore, FauxModel, FauxReply, FauxToolCall,
                     JsonlSessionRepo, SecuritySupervisor, bash_tool)
async def main():
    session = await JsonlSessionRepo({str(tmp_path / "s")!r}).create({str(ws)!r})
    model = FauxModel([FauxReply(tool_calls=[FauxToolCall(name="bash",
                       arguments={{"command": "true"}})]), "ok"])
    h = AgentHarness(session=session, model=model, tools=[bash_tool()], cwd={str(ws)!r},
                     supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
                     resources=None, checkpoints=CheckpointStore({str(tmp_path / "c")!r}))
    await h.prompt("go")
asyncio.run(main())
"""


def test_the_scans_git_never_reads_the_harnesss_stdin(tmp_path: Path) -> None:
    """Review 11, finding 5: the scan's git inherited the harness's stdin (rpc's protocol
    pipe, chat's terminal); a repository config including ``/dev/stdin`` made it swallow what
    was there."""
    ws = seed(tmp_path / "ws", "git")
    with (ws / ".git" / "config").open("a") as f:
        f.write("[include]\n\tpath = /dev/stdin\n")
    script = f"import asyncio, sys\n{scanning_run(tmp_path, ws)}"
    script += 'print("left:", sys.stdin.read().split())\n'
    done = subprocess.run(
        [sys.executable, "-c", script],
        input="LINE1\nLINE2\nLINE3\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "left: ['LINE1', 'LINE2', 'LINE3']" in done.stdout, (done.stdout, done.stderr)


def test_the_scans_git_never_reads_the_users_terminal(tmp_path: Path) -> None:
    """Review 13, finding 3: with ``stdin`` closed to it, the scan's git still opened the
    controlling terminal through a repository config including ``/dev/tty``: each scan waited
    for the user's typing (60 s a call, keystrokes swallowed). The run here has a terminal,
    and nobody types; it ends without waiting on it."""
    import os
    import pty
    import select
    import time

    ws = seed(tmp_path / "ws", "git")
    with (ws / ".git" / "config").open("a") as f:
        f.write("[include]\n\tpath = /dev/tty\n")
    script = "import asyncio, os, sys\nassert os.isatty(0) and os.ttyname(0)\n"
    script += scanning_run(tmp_path, ws) + 'print("RUN DONE")\n'
    pid, fd = pty.fork()  # the child leads a session whose controlling terminal is the pty
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", script])
    out = b""
    deadline = time.monotonic() + 45  # each read of the terminal waited 60 s before
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
        assert b"RUN DONE" in out, out.decode(errors="replace")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)
