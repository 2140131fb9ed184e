"""Forks that carry the files: ``AgentHarness.fork(..., workspace=...)`` (issue 26)."""

from __future__ import annotations

from pathlib import Path

import pytest
from workspaces import SCRIPT, call, git, make_harness, record_trees, store_of, tree

from harness import (
    CHECKPOINT_ENTRY,
    Approve,
    CustomEntry,
    FauxReply,
    JsonlSessionRepo,
    MessageEntry,
    RewindRefusedError,
    SecuritySupervisor,
    Session,
    WorkspaceExistsError,
    referenced_blobs,
)


async def test_a_fork_at_an_entry_carries_that_entrys_files_and_goes_on_alone(
    tmp_path: Path, repo: JsonlSessionRepo, session: Session, ws: Path, kind: str
) -> None:
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    source_files = tree(ws)
    entries = list(trees)
    cut = entries[4]  # after the edit and the bash rm, before the bash that creates files

    fork = await harness.fork(repo, cut, position="at", workspace=tmp_path / "fork")

    assert fork.cwd == str(tmp_path / "fork")
    assert fork.header.parent_session == str(session.path)
    assert fork.leaf_id == cut
    assert tree(tmp_path / "fork") == trees[cut]
    if kind == "git":
        assert str(tmp_path / "fork") in git(ws, "worktree", "list")
    assert tree(ws) == source_files  # the source's files are untouched

    # Going on in the fork changes only the fork's folder.
    replies = [
        FauxReply(tool_calls=[call("write", path="a.txt", content="fork\n")]),
        FauxReply(tool_calls=[call("bash", command="rm keep.txt && echo f > only-fork.txt")]),
        "done",
    ]
    in_fork = make_harness(fork, Path(fork.cwd), replies)
    await in_fork.prompt("work in the fork")
    assert tree(ws) == source_files
    forked = tree(tmp_path / "fork")
    assert forked["a.txt"][0] == b"fork\n" and "keep.txt" not in forked
    assert forked["only-fork.txt"][0] == b"f\n"
    # The fork's checkpoints rewind the fork's folder, to entries it copied too.
    await in_fork.rewind_files(entries[2])
    assert tree(tmp_path / "fork") == trees[entries[2]]
    assert tree(ws) == source_files


async def test_a_fork_before_the_first_change_has_the_files_as_the_session_found_them(
    tmp_path: Path, repo: JsonlSessionRepo, session: Session, ws: Path
) -> None:
    start = tree(ws)
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")

    await harness.fork(repo, next(iter(trees)), position="before", workspace=tmp_path / "f")

    assert tree(tmp_path / "f") == start


async def test_a_fork_into_a_folder_that_is_not_empty_writes_nothing(
    tmp_path: Path, repo: JsonlSessionRepo, session: Session, ws: Path
) -> None:
    harness = make_harness(session, ws, SCRIPT)
    await harness.prompt("change the files")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("mine")
    count = len(await repo.list())

    with pytest.raises(WorkspaceExistsError) as exists:
        await harness.fork(repo, workspace=taken)

    assert exists.value.code == "workspace_exists"
    assert tree(taken) == {"mine.txt": (b"mine", False)}
    assert len(await repo.list()) == count


async def test_a_fork_never_writes_or_removes_a_protected_path(
    tmp_path: Path, repo: JsonlSessionRepo, session: Session, ws: Path, kind: str
) -> None:
    # A check after review 5 finding 27: the fork's copy of the workspace applied the entries'
    # protected paths that a rewind refuses: a session claiming it created
    # .harness/settings.json had the fork lose the project's deny rules.
    if kind != "plain":
        pytest.skip("a git fork starts from HEAD, which does not hold the settings file")
    (ws / ".harness").mkdir()
    settings = '{"permissions": {"deny": ["Bash(curl:*)"]}}\n'

    async def yes(request: object) -> Approve:
        return Approve()

    script = [
        FauxReply(tool_calls=[call("write", path="plain.txt", content="first\n")]),
        FauxReply(tool_calls=[call("write", path=".harness/settings.json", content=settings)]),
        "done",
    ]
    supervisor = SecuritySupervisor(approver=yes, setting_sources=())
    harness = make_harness(session, ws, script, supervisor=supervisor)
    trees = record_trees(harness, ws)
    await harness.prompt("write")
    first = next(iter(trees))
    await harness.fork(repo, first, position="before", workspace=tmp_path / "fork")
    assert (tmp_path / "fork" / ".harness" / "settings.json").read_text() == settings
    assert not (tmp_path / "fork" / "plain.txt").exists()  # the rest as at the entry


async def test_a_fork_whose_contents_are_gone_from_the_store_refuses_naming_them(
    tmp_path: Path, repo: JsonlSessionRepo, session: Session, ws: Path
) -> None:
    # Issue 26 trial, finding 7: after `checkpoints gc` evicted the contents, a fork with files
    # left the current folder's a.txt in the fork, silently, where the entry had another.
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    store_of(session).gc(referenced_blobs(session), max_bytes=0, min_age_s=0)
    count = len(await repo.list())

    with pytest.raises(RewindRefusedError) as refused:
        await harness.fork(repo, list(trees)[4], position="at", workspace=tmp_path / "fork")

    assert "a.txt" in refused.value.unavailable
    assert str(refused.value).startswith("fork refused, nothing written")
    assert "--workspace" in (refused.value.cli_message or "")
    assert not (tmp_path / "fork").exists()
    assert len(await repo.list()) == count  # no fork left behind


async def test_a_fork_before_the_session_swapped_a_file_for_a_folder_has_the_file(
    tmp_path: Path, repo: JsonlSessionRepo, session: Session, ws: Path
) -> None:
    replies = [
        FauxReply(tool_calls=[call("bash", command="echo file > x")]),
        FauxReply(tool_calls=[call("bash", command="rm x && mkdir x && echo in > x/y")]),
        "done",
    ]
    harness = make_harness(session, ws, replies)
    trees = record_trees(harness, ws)
    await harness.prompt("swap")
    cut = list(trees)[2]  # the call that swaps it

    await harness.fork(repo, cut, position="at", workspace=tmp_path / "fork")

    assert (tmp_path / "fork" / "x").read_text() == "file\n"


async def test_a_fork_at_a_checkpoint_entry_ends_with_its_tool_results(
    tmp_path: Path, repo: JsonlSessionRepo, session: Session, ws: Path
) -> None:
    # Issue 26 trial, finding 1: cut on the checkpoint entry itself, the fork's model saw the
    # call as interrupted ("No result was recorded") while the folder showed its effect.
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    checkpoint = next(
        e
        for e in session.entries()
        if isinstance(e, CustomEntry) and e.custom_type == CHECKPOINT_ENTRY
    )

    fork = await harness.fork(repo, checkpoint.id, position="at", workspace=tmp_path / "fork")

    leaf = fork.get_entry(fork.leaf_id or "")
    assert isinstance(leaf, MessageEntry) and leaf.message.role == "toolResult"
    assert tree(tmp_path / "fork") == trees[leaf.id]  # the files after the call, as its result
