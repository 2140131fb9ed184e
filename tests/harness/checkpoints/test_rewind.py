"""Checkpoints and rewinds with the real tools, real files and real git (issue 26).

A scripted run writes, edits, deletes through ``bash rm`` and creates files through ``bash``;
the workspace's tree is taken as each message entry is written, and rewinding to each entry
must give that tree back, byte for byte, in a git repository and in a plain folder.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from workspaces import SCRIPT, call, git, make_harness, record_trees, seed, tree

from harness import (
    CHECKPOINT_ENTRY,
    REWIND_ENTRY,
    Approve,
    Cancel,
    CheckpointsOffError,
    CheckpointStore,
    CustomEntry,
    FauxReply,
    HandlerErrorEvent,
    JsonlSessionRepo,
    MessageEntry,
    RewindCancelledError,
    RewindRefusedError,
    SecuritySupervisor,
    Session,
    SessionBeforeRewindEvent,
    SessionRewindEvent,
    UserMessage,
)
from harness._checkpoints.rewind import _temp_name
from harness._checkpoints.scan import Workspace


def customs(session: Session, custom_type: str) -> list[CustomEntry]:
    return [
        e for e in session.entries() if isinstance(e, CustomEntry) and e.custom_type == custom_type
    ]


def entries_of(root: Path) -> dict[str, tuple[int, bytes | str | None]]:
    """Every entry under ``root`` (not in ``.git``) by its kind, without opening a FIFO or
    following a link: a file's bytes, a link's target."""
    found: dict[str, tuple[int, bytes | str | None]] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*dirs, *files]:
            path = Path(folder, name)
            kind = stat.S_IFMT(os.lstat(path).st_mode)
            content: bytes | str | None = None
            if kind == stat.S_IFREG:
                content = path.read_bytes()
            elif kind == stat.S_IFLNK:
                content = os.readlink(path)
            found[path.relative_to(root).as_posix()] = (kind, content)
    return found


async def test_rewinding_to_each_entry_gives_that_entrys_tree(
    session: Session, ws: Path, kind: str
) -> None:
    start = tree(ws)
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    final = tree(ws)
    entries = list(trees)
    # The run changed what it was asked to, and each tool call that did wrote one checkpoint.
    assert "old.txt" not in final and final["d/new.txt"] == (b"hi\n", False)
    assert final["keep.txt"] == (b"keep\nmore\n", False) and final["run.sh"][1] is False
    checkpoints = customs(session, CHECKPOINT_ENTRY)
    assert len(checkpoints) == 6
    assert {c.data["scan"] for c in checkpoints if c.data["toolName"] == "bash"} == {  # type: ignore[index]
        "git" if kind == "git" else "stat"
    }
    # Every order: backwards, forwards, then jumping about.
    order = [*reversed(entries), *entries, *entries[::3], *entries[1::2]]
    for entry_id in order:
        await harness.rewind_files(entry_id)
        assert tree(ws) == trees[entry_id], entry_id
    await harness.rewind_files(None)  # before the first entry: as the session found it
    assert tree(ws) == start
    await harness.rewind_files(entries[-1])
    assert tree(ws) == final


async def test_each_checkpoint_names_its_tool_call_and_the_entry_holding_it(
    session: Session, ws: Path
) -> None:
    harness = make_harness(session, ws, (*SCRIPT[:2], "done"))
    await harness.prompt("write then edit")
    by_call = {}
    for entry in session.entries():
        if isinstance(entry, MessageEntry) and entry.message.role == "assistant":
            for block in entry.message.tool_calls:  # type: ignore[union-attr]
                by_call[block.id] = entry.id
    [write, edit] = customs(session, CHECKPOINT_ENTRY)
    for checkpoint in (write, edit):
        data = checkpoint.data
        assert isinstance(data, dict)
        assert by_call[data["toolCallId"]] == data["entryId"]
    assert write.data["changes"][0]["before"] is None  # type: ignore[index]
    assert edit.data["changes"][0]["before"] == write.data["changes"][0]["after"]  # type: ignore[index]


async def test_a_file_changed_outside_the_session_makes_rewind_refuse_with_its_name(
    session: Session, ws: Path
) -> None:
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    (ws / "a.txt").write_text("my own edit\n")  # not through the session
    (ws / "keep.txt").write_text("theirs\n")
    (ws / "d" / "new.txt").unlink()  # as the rewind would leave it: no conflict
    before = tree(ws)
    first = next(iter(trees))

    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(first)

    assert refused.value.code == "rewind_refused"
    assert sorted(refused.value.changed) == ["a.txt", "keep.txt"]
    # The API's parameter in the exception; the CLI's flag where the CLI prints it.
    assert "force=True" in str(refused.value) and "--force" not in str(refused.value)
    assert refused.value.cli_message is not None
    assert "--force" in refused.value.cli_message and "force=True" not in refused.value.cli_message
    assert tree(ws) == before  # nothing written
    assert customs(session, REWIND_ENTRY) == []
    await harness.rewind_files(first, force=True)
    assert tree(ws) == trees[first]


async def test_a_file_swapped_for_a_symlink_folder_or_fifo_is_refused_by_name(
    session: Session, ws: Path, tmp_path: Path
) -> None:
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    first = next(iter(trees))
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"outside the workspace\n")
    (ws / "a.txt").unlink()
    (ws / "a.txt").symlink_to(victim)  # a recorded file, now a link leading out
    (ws / "keep.txt").unlink()
    (ws / "keep.txt").mkdir()  # now a folder
    (ws / "keep.txt" / "mine").write_text("mine\n")
    (ws / "d" / "new.txt").unlink()
    os.mkfifo(ws / "d" / "new.txt")  # now a FIFO
    before = entries_of(ws)

    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(first)

    named = sorted(u.split(" (")[0] for u in refused.value.unrecordable)
    assert named == ["a.txt", "d/new.txt", "keep.txt"]
    assert "a.txt (not a regular file" in str(refused.value) and "force=True" in str(refused.value)
    assert entries_of(ws) == before and customs(session, REWIND_ENTRY) == []

    forced = await harness.rewind_files(first, force=True)
    # Left as they are, said so; the link never followed; the other files rewound.
    assert sorted(s.path for s in forced.skipped) == ["a.txt", "d/new.txt", "keep.txt"]
    assert victim.read_bytes() == b"outside the workspace\n"
    assert os.readlink(ws / "a.txt") == str(victim)
    assert (ws / "keep.txt" / "mine").read_text() == "mine\n"
    assert stat.S_ISFIFO(os.lstat(ws / "d" / "new.txt").st_mode)
    assert (ws / "old.txt").read_text() == "old\n" and forced.entry_id is not None


async def test_a_rewind_removes_only_the_temporary_files_it_made(
    session: Session, ws: Path
) -> None:
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    first = next(iter(trees))
    store = harness.checkpoints
    assert store is not None
    key = store.rewind_key()
    # The user's own files and folders of the shapes temporary files have; a tag forged
    # without the store's key; and one temporary file a killed rewind left.
    (ws / ".a.txt.0123abcd.tmp").write_text("mine\n")
    (ws / ".keep.txt.89abcdef.tmp").mkdir()
    forged = f".harness-rewind.{'0' * 16}.{'f' * 32}.tmp"
    (ws / forged).write_text("mine too\n")
    (ws / "d" / _temp_name(key)).mkdir()  # a folder even with our tag: never removed
    left = ws / "sub" / _temp_name(key)
    left.write_text("half a rew")

    result = await harness.rewind_files(first)

    assert result.skipped == ()
    assert not left.exists()
    assert (ws / ".a.txt.0123abcd.tmp").read_text() == "mine\n"
    assert (ws / ".keep.txt.89abcdef.tmp").is_dir() and (ws / forged).read_text() == "mine too\n"
    assert len([n for n in os.listdir(ws / "d") if n.startswith(".harness-rewind.")]) == 1
    users = {".a.txt.0123abcd.tmp", forged}
    assert {k: v for k, v in tree(ws).items() if k not in users} == trees[first]


async def test_rewind_of_a_rewind_restores_the_later_state(session: Session, ws: Path) -> None:
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    final, leaf = tree(ws), session.leaf_id
    first = next(iter(trees))

    result = await harness.rewind_files(first)
    assert tree(ws) == trees[first]
    # One entry as it started (before any file was written), one once done, naming it.
    [started, rewind] = customs(session, REWIND_ENTRY)
    assert rewind.id == result.entry_id and started.parent_id == leaf
    assert rewind.parent_id == started.id and rewind.data["intentId"] == started.id
    assert started.data["state"] == "started"
    assert sorted(result.restored) == ["keep.txt", "old.txt", "run.sh", "sub/deep.txt"]
    assert sorted(result.removed) == ["a.txt", "d/new.txt"]

    undo = await harness.rewind_files(rewind.parent_id)  # the entry before the rewind
    assert tree(ws) == final
    again = await harness.rewind_files(rewind.id)  # and the rewind's own state once more
    assert tree(ws) == trees[first]
    assert undo.entry_id != again.entry_id


async def test_undoing_a_forced_rewind_gives_back_the_edit_it_overwrote(
    session: Session, ws: Path
) -> None:
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    first = next(iter(trees))
    mine = b"my own edit\r\n\x00\xff kept byte for byte\n"
    (ws / "a.txt").write_bytes(mine)  # not through the session
    (ws / "keep.txt").unlink()
    before = tree(ws)

    forced = await harness.rewind_files(first, force=True)
    assert tree(ws) == trees[first]
    assert forced.entry_id is not None
    parent = session.get_entry(forced.entry_id).parent_id

    await harness.rewind_files(parent)  # the undo `harness rewind` prints
    assert tree(ws) == before
    assert (ws / "a.txt").read_bytes() == mine


async def test_undoing_a_forced_rewind_with_the_conversation_gives_back_the_edit(
    session: Session, ws: Path
) -> None:
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    first = next(iter(trees))
    (ws / "a.txt").write_bytes(b"mine\n")
    before = tree(ws)

    moved = await harness.navigate_tree(first, with_files=True, force=True)
    assert tree(ws) == trees[first]

    await harness.navigate_tree(moved.old_leaf_id, with_files=True)  # the printed undo
    assert tree(ws) == before


async def test_navigate_tree_with_files_moves_files_and_conversation_together(
    session: Session, ws: Path
) -> None:
    replies = [*SCRIPT[:2], "wrote it", *SCRIPT[2:4], "deleted and created"]
    harness = make_harness(session, ws, replies)
    trees = record_trees(harness, ws)
    await harness.prompt("write then edit")
    await harness.prompt("now shell")
    users = [
        e.id
        for e in session.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage)
    ]

    result = await harness.navigate_tree(users[1], with_files=True)

    assert result.editor_text == "now shell"
    assert result.files is not None and result.files.entry_id == session.leaf_id
    assert tree(ws) == trees[users[1]]
    # The rewind's entries (as it started, once done) follow the new leaf.
    started = session.get_entry(session.leaf_id or "").parent_id
    assert session.get_entry(started or "").parent_id == result.new_leaf_id
    assert session.build_context().messages[-1].role == "assistant"  # "wrote it"


async def test_hooks_can_cancel_a_rewind_and_see_what_it_did(session: Session, ws: Path) -> None:
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    final = tree(ws)
    first = next(iter(trees))
    asked: list[SessionBeforeRewindEvent] = []
    done: list[SessionRewindEvent] = []

    def veto(sender: object, event: SessionBeforeRewindEvent) -> Cancel:
        asked.append(event)
        return Cancel(reason="not today")

    disconnect = harness.connect("session_before_rewind", veto)
    with pytest.raises(RewindCancelledError) as cancelled:
        await harness.rewind_files(first)
    assert cancelled.value.reason == "not today"
    assert tree(ws) == final
    # With the conversation too it raises (docs/checkpoints.md "Hooks"); nothing moves.
    leaf = session.leaf_id
    with pytest.raises(RewindCancelledError):
        await harness.navigate_tree(first, with_files=True)
    assert tree(ws) == final and session.leaf_id == leaf
    assert sorted(asked[-1].paths) == sorted(
        ["a.txt", "d/new.txt", "keep.txt", "old.txt", "run.sh", "sub/deep.txt"]
    )
    disconnect()

    harness.connect("session_rewind", lambda sender, event: done.append(event))
    result = await harness.rewind_files(first)
    assert [(e.entry_id, e.restored, e.removed) for e in done] == [
        (result.entry_id, result.restored, result.removed)
    ]


async def test_bash_that_moves_the_index_is_recorded(
    tmp_path: Path, repo: JsonlSessionRepo
) -> None:
    ws = seed(tmp_path / "repo", "git")
    git(ws, "checkout", "-qb", "other")
    (ws / "keep.txt").write_text("on the other branch\n")
    git(ws, "commit", "-qam", "other")
    git(ws, "checkout", "-q", "-")
    session = await repo.create(str(ws))
    replies = [
        FauxReply(tool_calls=[call("bash", command="echo staged > old.txt && git add old.txt")]),
        FauxReply(
            tool_calls=[
                call(
                    "bash",
                    command="git -c user.name=t -c user.email=t@t commit -qm x "
                    "&& git checkout -q other",
                )
            ]
        ),
        FauxReply(tool_calls=[call("bash", command="git stash -q -u || true")]),
        "done",
    ]
    harness = make_harness(session, ws, replies)
    trees = record_trees(harness, ws)
    await harness.prompt("use git")
    assert tree(ws)["keep.txt"][0] == b"on the other branch\n"
    for entry_id in [*reversed(trees), *trees]:
        await harness.rewind_files(entry_id)
        assert tree(ws) == trees[entry_id], entry_id


async def test_a_path_outside_the_working_folder_is_recorded_but_never_rewound(
    tmp_path: Path, session: Session, ws: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "notes.txt"
    replies = [FauxReply(tool_calls=[call("write", path=str(target), content="mine\n")]), "ok"]
    harness = make_harness(session, ws, replies)
    trees = record_trees(harness, ws)
    await harness.prompt("write outside")
    assert target.read_text() == "mine\n"
    [checkpoint] = customs(session, CHECKPOINT_ENTRY)
    assert checkpoint.data["changes"][0]["path"] == str(target)  # type: ignore[index]
    first = next(iter(trees))

    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(first)
    assert refused.value.unsafe[0].startswith(str(target))
    forced = await harness.rewind_files(first, force=True)

    assert target.read_text() == "mine\n"
    assert [s.path for s in forced.skipped] == [str(target)]


async def test_a_harness_without_checkpoints_cannot_rewind(session: Session, ws: Path) -> None:
    harness = make_harness(session, ws, checkpoints=False)
    with pytest.raises(CheckpointsOffError) as off:
        await harness.rewind_files(None)
    assert off.value.code == "checkpoints_off"
    assert harness.checkpoints is None


async def test_a_file_over_the_stores_cap_is_recorded_as_missed(
    tmp_path: Path, session: Session, ws: Path
) -> None:
    store = CheckpointStore(tmp_path / "store", max_file_bytes=10)
    replies = [
        FauxReply(tool_calls=[call("write", path="big.txt", content="x" * 100)]),
        FauxReply(tool_calls=[call("write", path="small.txt", content="tiny")]),
        "ok",
    ]
    harness = make_harness(session, ws, replies, checkpoints=store)
    await harness.prompt("write")
    [big, small] = customs(session, CHECKPOINT_ENTRY)
    assert big.data["changes"] == [] and big.data["complete"] is False  # type: ignore[index]
    assert big.data["missed"][0]["path"] == "big.txt"  # type: ignore[index]
    assert small.data["changes"][0]["path"] == "small.txt"  # type: ignore[index]


def test_the_stat_scan_past_its_cap_says_so(tmp_path: Path) -> None:
    ws = seed(tmp_path / "many", "plain")
    for i in range(20):
        (ws / f"f{i:02}.txt").write_text(str(i))
    workspace = Workspace(ws, CheckpointStore(tmp_path / "store"), max_files=5)
    snapshot = workspace.before()
    (ws / "zz_new.txt").write_text("new")

    changes, _, complete = workspace.after(snapshot)

    assert complete is False and snapshot.complete is False
    assert len(snapshot.seen) == 5  # only the cap's worth was read and stored
    assert "zz_new.txt" not in [c.path for c in changes]


async def test_a_rewind_never_removes_or_writes_a_protected_path(
    session: Session, ws: Path
) -> None:
    # Review 5, finding 27: a session file (untrusted) claiming it created
    # .harness/settings.json made a rewind remove the project's deny rules.
    async def yes(request: object) -> Approve:
        return Approve()

    script = [
        FauxReply(
            tool_calls=[
                call("write", path=".harness/settings.json", content='{"permissions": {}}\n'),
                call("write", path="plain.txt", content="x\n"),
            ]
        ),
        "done",
    ]
    supervisor = SecuritySupervisor(approver=yes, setting_sources=())
    harness = make_harness(session, ws, script, supervisor=supervisor)
    trees = record_trees(harness, ws)
    await harness.prompt("write")
    first = next(iter(trees))
    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(first)
    assert any(u.startswith(".harness/settings.json") for u in refused.value.unsafe)
    assert (ws / ".harness" / "settings.json").exists()
    await harness.rewind_files(first, force=True)
    assert (ws / ".harness" / "settings.json").exists()  # forced: still never removed
    assert not (ws / "plain.txt").exists()


def test_a_capped_stat_scan_never_takes_a_file_it_stopped_short_of_as_deleted(
    tmp_path: Path,
) -> None:
    # Issue 26 trial: near the cap, a file the command created sorted ahead of files the scan
    # before had seen, the scan after stopped short of them, and they were recorded as deleted
    # (a rewind then removed them).
    ws = seed(tmp_path / "many", "plain")
    for i in range(30):
        (ws / f"f{i:02}").write_text(str(i))
    workspace = Workspace(ws, CheckpointStore(tmp_path / "store"), max_files=10)
    snapshot = workspace.before()
    for i in range(200):
        (ws / f"new{i:03}").write_text("new")
    (ws / "f00").unlink()
    walked, _ = workspace._walk()
    assert set(snapshot.seen) - set(walked)  # the scan after does stop short of some

    changes, missed, complete = workspace.after(snapshot)

    assert complete is False
    gone = [c.path for c in changes if c.after is None]
    assert gone == (["f00"] if "f00" in snapshot.seen else [])
    assert all(c.path.startswith("new") for c in changes if c.after is not None)
    # A file the scan before did not see, unchanged by the command, is not reported at all.
    untouched = {f"f{i:02}" for i in range(1, 30)} - set(snapshot.seen)
    assert not untouched & {m.path for m in missed}


async def test_a_rewind_hook_that_raises_is_reported_and_does_not_cancel(
    session: Session, ws: Path
) -> None:
    # docs/checkpoints.md: `Cancel` takes its reason by keyword; a receiver that raises (as
    # `Cancel("...")` does) is sent as handler_error and the rewind goes ahead (fail open,
    # as every session_before_* hook).
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    first = next(iter(trees))
    errors: list[HandlerErrorEvent] = []

    def positional(sender: object, event: SessionBeforeRewindEvent) -> Cancel:
        return Cancel("not today")  # type: ignore[call-arg]

    harness.connect("session_before_rewind", positional)
    harness.connect("handler_error", lambda sender, event: errors.append(event))
    result = await harness.rewind_files(first)

    assert [(e.event_name, type(e.error)) for e in errors] == [("session_before_rewind", TypeError)]
    assert result.entry_id is not None and tree(ws) == trees[first]


async def test_rewinding_with_the_conversation_to_a_checkpoint_keeps_its_tool_results(
    session: Session, ws: Path
) -> None:
    # Issue 26 trial: the leaf went on the checkpoint entry, between the tool call and its
    # result, so the model would have seen the call as interrupted.
    replies = [
        FauxReply(
            tool_calls=[
                call("write", path="a.txt", content="one\n"),
                call("write", path="b.txt", content="two\n"),
            ]
        ),
        FauxReply(tool_calls=[call("write", path="a.txt", content="three\n")]),
        "done",
    ]
    harness = make_harness(session, ws, replies)
    trees = record_trees(harness, ws)
    await harness.prompt("write")
    first, _, third = customs(session, CHECKPOINT_ENTRY)

    moved = await harness.navigate_tree(first.id, with_files=True)

    messages = session.build_context().messages
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "toolResult"]
    assert not any("interrupt" in str(getattr(m, "content", "")).lower() for m in messages), (
        messages
    )
    assert moved.new_leaf_id in trees  # the batch's last result, written after both writes
    assert tree(ws) == trees[moved.new_leaf_id]
    assert (ws / "a.txt").read_text() == "one\n" and (ws / "b.txt").read_text() == "two\n"

    again = await harness.navigate_tree(third.id)
    assert session.get_entry(again.new_leaf_id or "").parent_id == third.id


async def test_a_rewind_past_a_change_it_could_not_record_says_so(
    tmp_path: Path, session: Session, ws: Path
) -> None:
    store = CheckpointStore(tmp_path / "store", max_file_bytes=10)
    replies = [FauxReply(tool_calls=[call("write", path="big.txt", content="x" * 100)]), "ok"]
    harness = make_harness(session, ws, replies, checkpoints=store)
    await harness.prompt("write")

    result = await harness.rewind_files(session.entry_ids()[0])

    assert result.entry_id is None and (ws / "big.txt").exists()
    assert [m.path for m in result.missed] == ["big.txt"]
    assert "larger than the store's file cap (10 bytes)" in result.missed[0].reason


async def test_an_outside_file_already_as_at_the_target_neither_refuses_nor_asks(
    session: Session, ws: Path, tmp_path: Path
) -> None:
    # Issue 26 trial: once a session had written a file outside the working folder (the
    # supervisor approved it), every rewind refused over that file, even one that leaves it
    # exactly as it is. Only an outside file the rewind would change refuses.
    outside = tmp_path / "outside.txt"
    asked: list[object] = []

    async def yes(request: object) -> Approve:
        asked.append(request)
        return Approve()

    script = [
        FauxReply(tool_calls=[call("write", path=str(outside), content="out\n")]),
        FauxReply(tool_calls=[call("write", path="a.txt", content="one\n")]),
        FauxReply(tool_calls=[call("write", path="a.txt", content="two\n")]),
        "done",
    ]
    supervisor = SecuritySupervisor(approver=yes, setting_sources=())
    harness = make_harness(session, ws, script, supervisor=supervisor)
    await harness.prompt("write")
    wrote_outside, one, _ = (c.id for c in customs(session, CHECKPOINT_ENTRY))
    first = customs(session, CHECKPOINT_ENTRY)[0].data
    assert isinstance(first, dict) and first["changes"][0]["path"] == str(outside)
    calls = len(asked)

    result = await harness.rewind_files(one)  # the outside file is as it was there

    assert (ws / "a.txt").read_text() == "one\n" and outside.read_text() == "out\n"
    assert result.restored == ("a.txt",) and result.skipped == ()
    assert len(asked) == calls  # nobody was asked about a file the rewind leaves alone
    result = await harness.rewind_files(wrote_outside)  # a.txt goes; outside.txt stays as is
    assert not (ws / "a.txt").exists() and result.skipped == ()

    # Before the outside write, the file would have to go: that one is refused, by name.
    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(None)
    assert [u.split(" (")[0] for u in refused.value.unsafe] == [str(outside)]
    outside.write_text("changed by hand\n")  # no longer as at `one`: refused too
    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(one)
    assert [u.split(" (")[0] for u in refused.value.unsafe] == [str(outside)]
    assert outside.read_text() == "changed by hand\n" and len(asked) == calls


async def test_the_users_own_edit_between_two_turns_can_be_rewound_to(
    session: Session, ws: Path
) -> None:
    # Issue 26 trial, finding 8: the user's edit between two turns, which the second turn
    # overwrote, was stored (the second checkpoint's "before") but no entry gave it back.
    (ws / "f.txt").write_text("base\n")
    replies = [
        FauxReply(tool_calls=[call("write", path="f.txt", content="agent1\n")]),
        "one",
        FauxReply(tool_calls=[call("write", path="f.txt", content="agent2\n")]),
        "two",
    ]
    harness = make_harness(session, ws, replies)
    await harness.prompt("first")
    [first_prompt, first_call] = [e.id for e in session.entries() if isinstance(e, MessageEntry)][
        :2
    ]
    end_of_first = session.leaf_id
    (ws / "f.txt").write_text("user-edit\n")  # not through the session
    await harness.prompt("second")
    second_prompt = next(
        e.id
        for e in session.entries()
        if isinstance(e, MessageEntry)
        and isinstance(e.message, UserMessage)
        and e.message.content == "second"
    )

    second_call = session.get_children(second_prompt)[0].id
    [first_checkpoint, _] = customs(session, CHECKPOINT_ENTRY)

    for entry_id, want in [
        (second_prompt, "user-edit\n"),  # as it was when the second prompt was written
        (second_call, "user-edit\n"),  # before the second write
        (end_of_first, "agent1\n"),  # what the first turn left stays reachable too
        (first_checkpoint.id, "agent1\n"),
        (first_call, "base\n"),  # before the first write
        (first_prompt, "base\n"),
        (None, "base\n"),
        (session.leaf_id, "agent2\n"),
    ]:
        await harness.rewind_files(entry_id)
        assert (ws / "f.txt").read_text() == want, entry_id


async def test_a_capped_scan_sees_the_shallow_files_first_and_says_what_it_missed(
    tmp_path: Path, repo: JsonlSessionRepo
) -> None:
    # Issue 26 trial, finding 16: in a plain folder with a 12,000-file .venv the scan stopped
    # inside .venv, never reached src/, and a change to src/app.py left no entry at all.
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("v1\n")
    for d in range(12):
        folder = ws / ".venv" / "lib" / f"p{d}"
        folder.mkdir(parents=True)
        for i in range(1000):
            (folder / f"m{i}.py").write_bytes(b"x")
    session = await repo.create(str(ws))
    replies = [
        FauxReply(tool_calls=[call("bash", command="echo v2 > src/app.py")]),
        FauxReply(tool_calls=[call("bash", command="true")]),
        "done",
    ]
    harness = make_harness(session, ws, replies)
    await harness.prompt("change the app")

    [changed, unchanged] = customs(session, CHECKPOINT_ENTRY)
    assert [c["path"] for c in changed.data["changes"]] == ["src/app.py"]  # type: ignore[index]
    assert changed.data["complete"] is False  # type: ignore[index]
    # A capped scan that saw no change still says it was capped.
    assert unchanged.data["changes"] == [] and unchanged.data["complete"] is False  # type: ignore[index]
    result = await harness.rewind_files(changed.id)
    assert (ws / "src" / "app.py").read_text() == "v2\n"
    assert [m.path for m in result.missed] == ["."]
    await harness.rewind_files(session.entry_ids()[0])
    assert (ws / "src" / "app.py").read_text() == "v1\n"


async def test_a_file_the_session_swapped_for_a_folder_is_restored(
    session: Session, ws: Path
) -> None:
    # Issue 26 trial, finding 15: the session replaced a file by a folder; the rewind refused
    # ("changed outside the session") and --force left the folder, empty, the file not back.
    replies = [
        FauxReply(tool_calls=[call("bash", command="echo file > x")]),
        FauxReply(
            tool_calls=[call("bash", command="rm x && mkdir -p x/deep && echo in > x/deep/y")]
        ),
        "done",
    ]
    harness = make_harness(session, ws, replies)
    await harness.prompt("swap")
    [made, swapped] = customs(session, CHECKPOINT_ENTRY)

    result = await harness.rewind_files(made.id)

    assert (ws / "x").read_text() == "file\n"
    assert "x" in result.restored and "x/deep/y" in result.removed
    assert result.entry_id is not None
    await harness.rewind_files(session.get_entry(result.entry_id).parent_id)  # the undo
    assert (ws / "x" / "deep" / "y").read_text() == "in\n"
    await harness.rewind_files(swapped.id)
    assert (ws / "x" / "deep" / "y").read_text() == "in\n"


async def test_a_folder_holding_files_the_session_did_not_record_is_never_removed(
    session: Session, ws: Path
) -> None:
    replies = [
        FauxReply(tool_calls=[call("bash", command="echo file > x")]),
        FauxReply(tool_calls=[call("bash", command="rm x && mkdir x && echo in > x/y")]),
        "done",
    ]
    harness = make_harness(session, ws, replies)
    await harness.prompt("swap")
    [made, _] = customs(session, CHECKPOINT_ENTRY)
    (ws / "x" / "mine.txt").write_text("mine\n")  # not through the session

    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(made.id)
    assert [u.split(" ")[0] for u in refused.value.unrecordable] == ["x"]
    await harness.rewind_files(made.id, force=True)
    assert (ws / "x" / "mine.txt").read_text() == "mine\n"


async def test_bash_changing_an_ignored_file_the_session_wrote_is_recorded(
    tmp_path: Path, repo: JsonlSessionRepo
) -> None:
    # Issue 26 trial, finding 17: write/edit recorded a file git ignores, the bash scan did
    # not see a later change to it, and the next rewind blamed "changed outside the session".
    ws = seed(tmp_path / "ws", "git")
    (ws / ".gitignore").write_text("*.log\n")
    git(ws, "add", ".gitignore")
    git(ws, "commit", "-qm", "ignore logs")
    session = await repo.create(str(ws))
    writes = [FauxReply(tool_calls=[call("write", path="w.log", content="x\n")]), "ok"]
    await make_harness(session, ws, writes).prompt("write")
    [write] = customs(session, CHECKPOINT_ENTRY)
    # A new harness on the same session: what the write recorded is read back from the file.
    bashes = [FauxReply(tool_calls=[call("bash", command="echo by-bash >> w.log")]), "ok"]
    harness = make_harness(session, ws, bashes)
    await harness.prompt("append")

    [_, appended] = customs(session, CHECKPOINT_ENTRY)
    assert [c["path"] for c in appended.data["changes"]] == ["w.log"]  # type: ignore[index]
    await harness.rewind_files(write.id)
    assert (ws / "w.log").read_text() == "x\n"
    await harness.rewind_files(appended.id)
    assert (ws / "w.log").read_text() == "x\nby-bash\n"


async def test_a_refusal_names_at_most_twenty_files_of_a_kind_then_how_many_more(
    session: Session, ws: Path
) -> None:
    # Issue 26 trial, finding 14: a refusal after a 400-file rewind was one 3 KB line of names.
    make = "for i in $(seq -w 1 25); do echo $i > f$i.txt; done"
    harness = make_harness(session, ws, [FauxReply(tool_calls=[call("bash", command=make)]), "ok"])
    await harness.prompt("make files")
    for i in range(1, 26):
        (ws / f"f{i:02}.txt").write_text("mine\n")  # not through the session

    with pytest.raises(RewindRefusedError) as refused:
        await harness.rewind_files(None)

    assert len(refused.value.changed) == 25  # all of them, for code
    message = str(refused.value)
    assert "f20.txt, and 5 more" in message and "f21.txt" not in message


async def test_the_undo_of_a_rewind_that_completed_a_killed_one_needs_no_force(
    session: Session, ws: Path
) -> None:
    # Issue 26 trial, finding 6: a rewind killed half way wrote some files unrecorded; the
    # re-run completed it, and then its printed undo refused those files as "changed outside
    # the session". Here the killed rewind's work is made by hand: half the files put as at the
    # target, exactly what a kill between two files leaves.
    harness = make_harness(session, ws, SCRIPT)
    trees = record_trees(harness, ws)
    await harness.prompt("change the files")
    final, first = tree(ws), next(iter(trees))
    (ws / "a.txt").unlink()  # created since: removed by the killed rewind
    (ws / "keep.txt").write_bytes(trees[first]["keep.txt"][0])  # restored by it

    again = await harness.rewind_files(first)  # no force: the rest is as the session left it
    assert tree(ws) == trees[first]
    assert again.entry_id is not None

    await harness.rewind_files(session.get_entry(again.entry_id).parent_id)  # the undo
    assert tree(ws) == final
