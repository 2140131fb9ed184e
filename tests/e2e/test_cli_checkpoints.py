"""`harness run --checkpoints`, `harness rewind`, `sessions fork --workspace`, `sessions
checkout --with-files`, `checkpoints gc` and chat's `/rewind`, as real subprocesses."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cli_in_process import needs_process, run_cli
from workspaces import call, make_harness

from harness import (
    CHECKPOINT_ENTRY,
    CheckpointStore,
    CustomEntry,
    FauxReply,
    JsonlSessionRepo,
    MessageEntry,
    open_session,
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "config"
    config.mkdir()
    return {**os.environ, "XDG_CONFIG_HOME": str(config), "COLUMNS": "200"}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "keep.txt").write_text("keep\n")
    return folder


def cli(
    env: dict[str, str], cwd: Path, *args: str | Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    if not needs_process(args):  # the same entry point, in-process (``cli_in_process``)
        return run_cli(args, env=env, cwd=cwd, input=stdin)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        input=stdin,
        timeout=120,
        check=False,
    )


def first_run(env: dict[str, str], ws: Path, root: Path, *flags: str) -> tuple[str, Path]:
    """One offline run that removes keep.txt and creates new.txt; its session id and file."""
    done = cli(
        env,
        ws,
        "run",
        "--root",
        root,
        "--offline",
        "--mode",
        "bypass",
        *flags,
        "--output",
        "json",
        "-p",
        "!echo hi > new.txt && rm keep.txt",
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    return out["session_id"], Path(out["path"])


def first_entry(path: Path) -> str:
    with open_session(path) as session:
        return next(e.id for e in session.entries() if isinstance(e, MessageEntry))


def checkpoints_in(path: Path) -> int:
    with open_session(path) as session:
        return sum(
            isinstance(e, CustomEntry) and e.custom_type == CHECKPOINT_ENTRY
            for e in session.entries()
        )


def test_rewind_restores_files_refuses_outside_changes_and_only_in_the_sessions_folder(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    first = first_entry(path)
    with open_session(path) as session:
        leaf = session.leaf_id  # the run's last entry
    assert leaf is not None and sorted(os.listdir(ws)) == ["new.txt"]

    files = cli(env, ws, "rewind", "--root", root, sid, first, "--files-only")
    assert files.returncode == 0, files.stderr
    assert "restored keep.txt" in files.stdout and "removed new.txt" in files.stdout
    assert sorted(os.listdir(ws)) == ["keep.txt"]

    (ws / "keep.txt").write_text("edited by hand\n")
    refused = cli(env, ws, "rewind", "--root", root, sid, leaf, "--files-only")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error[rewind_refused]") and "keep.txt" in refused.stderr
    assert (ws / "keep.txt").read_text() == "edited by hand\n"
    forced = cli(env, ws, "rewind", "--root", root, sid, leaf, "--files-only", "--force")
    assert forced.returncode == 0, forced.stderr
    assert sorted(os.listdir(ws)) == ["new.txt"]

    elsewhere = cli(env, tmp_path, "rewind", "--root", root, sid, first)
    assert elsewhere.returncode == 1 and elsewhere.stderr.startswith("error[workspace_mismatch]")
    both = cli(env, tmp_path, "rewind", "--root", root, sid, first, "--cwd", ws)
    assert both.returncode == 0, both.stderr
    assert "leaf: " in both.stdout and "message to edit and resend:" in both.stdout
    assert "-> (before the first entry)" in both.stdout and "None" not in both.stdout
    assert sorted(os.listdir(ws)) == ["keep.txt"]


def test_the_user_setting_turns_checkpoints_on_and_the_flag_off(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    settings = Path(env["XDG_CONFIG_HOME"]) / "harness" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"checkpoints": True}))
    _, on = first_run(env, ws, tmp_path / "sessions")
    (ws / "keep.txt").write_text("keep\n")
    _, off = first_run(env, ws, tmp_path / "sessions", "--no-checkpoints")

    assert (checkpoints_in(on), checkpoints_in(off)) == (1, 0)
    settings.write_text(json.dumps({"checkpoints": "yes"}))
    broken = cli(env, ws, "run", "--root", tmp_path / "sessions", "--offline", "-p", "hi")
    assert broken.returncode == 2 and "'checkpoints' must be true or false" in broken.stderr


def test_fork_with_a_workspace_then_checkout_with_files_in_it(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    first = first_entry(path)
    fork_dir = tmp_path / "fork"

    forked = cli(
        env, ws, "sessions", "fork", "--root", root, sid, "--at", first, "--workspace", fork_dir
    )
    assert forked.returncode == 0, forked.stderr
    assert f"workspace: {fork_dir}" in forked.stdout
    assert sorted(os.listdir(fork_dir)) == ["keep.txt"]  # as at the first entry
    assert sorted(os.listdir(ws)) == ["new.txt"]  # the source is untouched
    fork_id = forked.stdout.split("id: ", 1)[1].split()[0]

    # In the fork's folder, going on and checking out keeps files and conversation in step.
    go_on = cli(
        env, fork_dir, "run", "--root", root, "--offline", "--mode", "bypass", "--checkpoints",
        "--session", fork_id, "-p", "!echo fork > f.txt",
    )  # fmt: skip
    assert go_on.returncode == 0, go_on.stderr
    assert sorted(os.listdir(fork_dir)) == ["f.txt", "keep.txt"]
    back = cli(
        env, fork_dir, "sessions", "checkout", "--root", root, fork_id, first, "--with-files"
    )
    assert back.returncode == 0, back.stderr
    assert "removed f.txt" in back.stdout
    assert sorted(os.listdir(fork_dir)) == ["keep.txt"]
    assert sorted(os.listdir(ws)) == ["new.txt"]


def test_fork_with_a_workspace_refuses_when_gc_removed_a_content_it_needs(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    # Issue 26 trial, finding 7: the fork printed its workspace, exit 0, with keep.txt missing.
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    gc = cli(env, ws, "checkpoints", "gc", "--root", root, "--max-bytes", "0", "--min-age", "0")
    assert gc.returncode == 0, gc.stderr

    args = ["sessions", "fork", "--root", root, sid, "--at", first_entry(path)]
    forked = cli(env, ws, *args, "--workspace", tmp_path / "fork")

    assert forked.returncode == 1
    assert forked.stderr.startswith("error[rewind_refused]: fork refused, nothing written")
    assert "keep.txt" in forked.stderr and "--workspace" in forked.stderr
    assert not (tmp_path / "fork").exists()
    assert len(os.listdir(path.parent)) == 1  # no fork left behind


def test_fork_at_a_checkpoint_id_ends_at_its_tool_result(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    # Issue 26 trial, finding 1: the fork's model saw the call as interrupted.
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    with open_session(path) as session:
        [checkpoint] = [
            e.id
            for e in session.entries()
            if isinstance(e, CustomEntry) and e.custom_type == CHECKPOINT_ENTRY
        ]
    for extra in ([], ["--workspace", str(tmp_path / "fork")]):
        forked = cli(env, ws, "sessions", "fork", "--root", root, sid, "--at", checkpoint, *extra)
        assert forked.returncode == 0, forked.stderr
        with open_session(Path(forked.stdout.split("path: ", 1)[1].split("\n")[0])) as fork:
            leaf = fork.get_entry(fork.leaf_id or "")
            assert isinstance(leaf, MessageEntry) and leaf.message.role == "toolResult"


def test_checkpoints_gc_removes_what_no_session_refers_to(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    sid, _ = first_run(env, ws, root, "--checkpoints")
    kept = cli(env, ws, "checkpoints", "gc", "--root", root, "--min-age", "0")
    assert kept.returncode == 0, kept.stderr
    assert "removed 0 unreferenced" in kept.stdout and "kept 2 " in kept.stdout

    assert cli(env, ws, "sessions", "delete", "--root", root, sid).returncode == 0
    removed = cli(env, ws, "checkpoints", "gc", "--root", root, "--min-age", "0")
    assert "removed 2 unreferenced" in removed.stdout and "kept 0 " in removed.stdout


def test_chat_rewinds_with_slash_rewind(env: dict[str, str], ws: Path, tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    first = first_entry(path)
    with open_session(path) as session:
        leaf = session.leaf_id
    script = f"/rewind {first} --files-only\n/rewind\n/rewind {first} --both --files-only\n/exit\n"

    # No --checkpoints: the session was recorded with them, so they stay on.
    chat = cli(env, ws, "chat", "--root", root, "--offline", "--session", sid, stdin=script)

    assert chat.returncode == 0, chat.stderr
    assert f"to undo: /rewind {leaf} --files-only" in chat.stdout
    assert "restored keep.txt" in chat.stdout and "removed new.txt" in chat.stdout
    # `/rewind` alone explains it as help; the wrong flags are an error (issue 26 trial).
    assert chat.stdout.count("error: usage: /rewind ENTRY") == 1
    assert chat.stdout.count("usage: /rewind ENTRY") == 2
    assert sorted(os.listdir(ws)) == ["keep.txt"]


@pytest.mark.parametrize("header_cwd", ["ws", "."])
async def test_rewind_of_a_downloaded_session_neither_takes_its_store_nor_its_dot_folder(
    env: dict[str, str], ws: Path, tmp_path: Path, header_cwd: str
) -> None:
    # A downloaded session brings a store beside it holding its payload; its header names the
    # working folder ("ws"), or "." (the current folder, wherever the command runs).
    downloads = tmp_path / "downloads"
    evil = await JsonlSessionRepo(downloads).create(str(ws))
    assert evil.path is not None
    planted = CheckpointStore(downloads / ".checkpoints")
    data = b"#!/bin/sh\necho pwned\n"
    target = evil.append_custom("note", {}).id
    before = {"sha256": planted.put(data), "mode": 0o755, "size": len(data)}
    evil.append_custom(
        CHECKPOINT_ENTRY,
        {
            "toolCallId": "x",
            "entryId": None,
            "toolName": "bash",
            "scan": "stat",
            "changes": [{"path": "payload.sh", "before": before, "after": None}],
            "missed": [],
            "complete": True,
        },
    )
    evil.close()
    if header_cwd == ".":
        header, rest = evil.path.read_bytes().split(b"\n", 1)
        evil.path.write_bytes(header.replace(str(ws).encode(), b".") + b"\n" + rest)

    done = cli(env, ws, "rewind", "--root", tmp_path / "mine", evil.path, target, "--files-only")

    assert done.returncode != 0
    assert not (ws / "payload.sh").exists()
    if header_cwd == ".":
        assert "not an absolute path" in done.stderr
    else:
        assert "not in the checkpoint store" in done.stderr and "payload.sh" in done.stderr


def test_gc_of_a_database_store_never_removes_what_other_stores_sessions_need(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    # A database store's contents go to the user data folder's store, which a JSONL run with
    # AgentHarness(checkpoints=True) and every other database store use too.
    data = tmp_path / "data"
    env = {**env, "XDG_DATA_HOME": str(data)}
    shared = CheckpointStore(data / "harness" / "checkpoints")
    other = shared.put(b"another store's session needs this\n")
    blob = shared.root / "objects" / other[:2] / other[2:]
    os.utime(blob, (1_000_000, 1_000_000))  # long unused
    db = tmp_path / "mine.db"
    run = cli(env, ws, "run", "--root", f"sqlite:{db}", "--offline", "--mode", "bypass",
              "--checkpoints", "-p", "!echo hi > new.txt")  # fmt: skip
    assert run.returncode == 0, run.stderr

    done = cli(env, ws, "checkpoints", "gc", "--root", f"sqlite:{db}")

    assert done.returncode == 0, done.stderr
    assert shared.get(other) is not None
    assert "shared" in done.stderr


def test_gc_keeps_unreferenced_contents_while_a_session_file_cannot_be_read(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    first_run(env, ws, root, "--checkpoints")
    store = CheckpointStore(root / ".checkpoints")
    orphan = store.put(b"what a session with a damaged header refers to\n")
    folder = next(p for p in root.iterdir() if p.name.startswith("--"))
    (folder / "damaged.jsonl").write_text('{"type": "sess\n')  # its header cannot be read

    done = cli(env, ws, "checkpoints", "gc", "--root", root, "--min-age", "0")

    assert done.returncode == 0, done.stderr
    assert store.get(orphan) is not None
    assert "damaged.jsonl" in done.stderr and "removed 0 unreferenced" in done.stderr


def test_a_session_recorded_with_checkpoints_keeps_them_when_resumed(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    plain_sid, plain = first_run(env, ws, root)  # recorded without: stays without

    def go_on(session: str, command: str, *flags: str) -> None:
        done = cli(
            env, ws, "run", "--root", root, "--offline", "--mode", "bypass", *flags,
            "--session", session, "-p", command,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    go_on(sid, "!echo two > two.txt")
    assert checkpoints_in(path) == 2
    go_on(sid, "!echo three > three.txt", "--no-checkpoints")  # the flag still wins
    assert checkpoints_in(path) == 2
    go_on(plain_sid, "!echo four > four.txt")
    assert checkpoints_in(plain) == 0


def test_rewind_says_how_to_undo_it_and_that_command_does(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    first = first_entry(path)

    def undo_line(out: str) -> list[str]:
        [line] = [x for x in out.splitlines() if x.startswith("to undo: ")]
        words = shlex.split(line.removeprefix("to undo: "))
        assert words[:2] == ["harness", "rewind"]
        return words[1:]  # without "harness"

    files = cli(env, ws, "rewind", "--root", root, sid, first, "--files-only")
    assert files.returncode == 0, files.stderr
    assert sorted(os.listdir(ws)) == ["keep.txt"]
    undo = undo_line(files.stdout)
    assert undo[-1] == "--files-only"
    undone = cli(env, ws, *undo)
    assert undone.returncode == 0, undone.stderr
    assert sorted(os.listdir(ws)) == ["new.txt"]

    with open_session(path) as session:
        leaf = session.leaf_id
    both = cli(env, ws, "rewind", "--root", root, sid, first)
    assert both.returncode == 0, both.stderr
    assert sorted(os.listdir(ws)) == ["keep.txt"]
    undone = cli(env, ws, *undo_line(both.stdout))
    assert undone.returncode == 0, undone.stderr
    assert sorted(os.listdir(ws)) == ["new.txt"]
    with open_session(path) as session:
        assert session.leaf_id is not None
        assert leaf in [e.id for e in session.get_branch(session.leaf_id)]


def test_the_undo_of_a_forced_rewind_gives_back_the_overwritten_edit(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    first = first_entry(path)
    mine = b"edited by hand\x00\xfe\r\n"
    (ws / "new.txt").write_bytes(mine)

    refused = cli(env, ws, "rewind", "--root", root, sid, first, "--files-only")
    assert refused.returncode == 1 and "new.txt" in refused.stderr
    assert "--force" in refused.stderr  # the flag as it is typed, not the API's parameter
    assert "force=True" not in refused.stderr
    forced = cli(env, ws, "rewind", "--root", root, sid, first, "--files-only", "--force")
    assert forced.returncode == 0, forced.stderr
    assert sorted(os.listdir(ws)) == ["keep.txt"]
    [line] = [x for x in forced.stdout.splitlines() if x.startswith("to undo: ")]
    undone = cli(env, ws, *shlex.split(line.removeprefix("to undo: "))[1:])
    assert undone.returncode == 0, undone.stderr
    assert sorted(os.listdir(ws)) == ["new.txt"]
    assert (ws / "new.txt").read_bytes() == mine


def test_rewind_refuses_a_recorded_file_swapped_for_a_symlink_by_name(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    first = first_entry(path)
    victim = tmp_path / "victim.txt"
    victim.write_text("outside\n")
    (ws / "new.txt").unlink()
    (ws / "new.txt").symlink_to(victim)

    refused = cli(env, ws, "rewind", "--root", root, sid, first, "--files-only")
    assert refused.returncode == 1, refused.stdout
    assert refused.stderr.startswith("error[rewind_refused]")
    assert "new.txt (not a regular file" in refused.stderr
    assert "nothing to change" not in refused.stdout
    assert sorted(os.listdir(ws)) == ["new.txt"] and (ws / "new.txt").is_symlink()

    forced = cli(env, ws, "rewind", "--root", root, sid, first, "--files-only", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "skipped new.txt: not a regular file" in forced.stderr
    assert "restored keep.txt" in forced.stdout
    assert (ws / "new.txt").is_symlink() and victim.read_text() == "outside\n"


def test_checkpoints_list_prints_each_entry_as_json_with_the_same_keys(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    assert (
        cli(env, ws, "rewind", "--root", root, sid, first_entry(path), "--files-only").returncode
        == 0
    )
    done = cli(env, ws, "checkpoints", "list", "--root", root, sid, "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["kind"], r["tool_name"], sorted(r["paths"])) for r in rows] == [
        ("checkpoint", "bash", ["keep.txt", "new.txt"]),
        ("rewind", None, ["keep.txt", "new.txt"]),
    ]
    assert rows[0].keys() == rows[1].keys()
    text = cli(env, ws, "checkpoints", "list", "--root", root, sid)
    assert f"{rows[0]['entry_id']}  bash: " in text.stdout
    # An id listed gives the files after its change, as the help says.
    assert "after its change" in " ".join(cli(env, ws, "checkpoints", "list", "-h").stdout.split())
    assert "the files after that change" in " ".join(cli(env, ws, "rewind", "-h").stdout.split())
    after = cli(env, ws, "rewind", "--root", root, sid, rows[0]["entry_id"], "--files-only")
    assert after.returncode == 0, after.stderr
    assert sorted(os.listdir(ws)) == ["new.txt"]


def test_fork_with_a_workspace_from_another_folder_gives_advice_that_works(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    # Issue 26 trial: the refusal said "(--cwd)", which fork --workspace refuses in turn.
    root = tmp_path / "sessions"
    sid, _ = first_run(env, ws, root, "--checkpoints")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = ["sessions", "fork", "--root", root, sid, "--workspace", tmp_path / "fork"]

    refused = cli(env, elsewhere, *args)

    assert refused.returncode == 1 and refused.stderr.startswith("error[workspace_mismatch]")
    assert "--cwd" not in refused.stderr and f"run this command from '{ws}'" in refused.stderr
    followed = cli(env, ws, *args)  # what it advises
    assert followed.returncode == 0, followed.stderr
    assert sorted(os.listdir(tmp_path / "fork")) == ["new.txt"]


@pytest.mark.parametrize(
    "flags",
    [("--files-only", "--conversation-only"), ("--both", "--files-only")],
)
def test_rewind_with_conflicting_flags_is_a_usage_error(
    env: dict[str, str], ws: Path, tmp_path: Path, flags: tuple[str, str]
) -> None:
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")

    done = cli(env, ws, "rewind", "--root", root, sid, first_entry(path), *flags)

    assert done.returncode == 2 and "at most one of" in done.stderr
    assert sorted(os.listdir(ws)) == ["new.txt"]  # nothing rewound


async def test_a_change_not_recorded_is_listed_and_a_rewind_says_it_cannot_restore_it(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    # Issue 26 trial: a checkpoint that only missed changes was not listed ("no checkpoints
    # in this session") and a rewind past it said "files: nothing to change".
    root = tmp_path / "sessions"
    session = await JsonlSessionRepo(root).create(str(ws))
    target = session.append_custom("note", {}).id
    reason = "larger than 67108864 bytes, the most stored"
    session.append_custom(
        CHECKPOINT_ENTRY,
        {
            "toolCallId": "x",
            "entryId": None,
            "toolName": "bash",
            "scan": "stat",
            "changes": [],
            "missed": [{"path": "big.bin", "reason": reason}],
            "complete": False,
        },
    )
    session.close()

    listed = cli(env, ws, "checkpoints", "list", "--root", root, session.id)
    rows = json.loads(
        cli(env, ws, "checkpoints", "list", "--root", root, session.id, "--json").stdout
    )
    rewound = cli(env, ws, "rewind", "--root", root, session.id, target, "--files-only")

    assert listed.returncode == 0 and "no checkpoints" not in listed.stderr
    assert f"not recorded: big.bin: {reason}" in listed.stdout
    assert [(r["missed"], r["complete"]) for r in rows] == [
        ([{"path": "big.bin", "reason": reason}], False)
    ]
    assert rewound.returncode == 0, rewound.stderr
    assert f"not restored big.bin: its change was not recorded ({reason})" in rewound.stderr
    assert "nothing to change" not in rewound.stdout
    assert "what was not recorded cannot be restored" in rewound.stdout


def leaf_of(path: Path) -> str | None:
    with open_session(path) as session:
        return session.leaf_id


def test_a_session_recorded_without_checkpoints_says_so_and_how_to_record_them(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    # Issue 26 trial: `harness rewind` of a session run without --checkpoints printed "files:
    # nothing to change" and exited 0, as if the files were already as at the entry.
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root)
    first, leaf = first_entry(path), leaf_of(path)
    assert checkpoints_in(path) == 0 and sorted(os.listdir(ws)) == ["new.txt"]

    for flags in (["--files-only"], ["--both"], []):
        done = cli(env, ws, "rewind", "--root", root, sid, first, *flags)
        assert done.returncode == 1, (flags, done.stdout, done.stderr)
        assert done.stderr.startswith("error[no_checkpoints]: this session has no checkpoints")
        assert "harness run --checkpoints" in done.stderr and "--conversation-only" in done.stderr
        assert "nothing to change" not in done.stdout + done.stderr
        assert leaf_of(path) == leaf and sorted(os.listdir(ws)) == ["new.txt"]
    conversation = cli(env, ws, "rewind", "--root", root, sid, first, "--conversation-only")
    assert conversation.returncode == 0, conversation.stderr
    assert "leaf: " in conversation.stdout and leaf_of(path) != leaf
    checkout = cli(env, ws, "sessions", "checkout", "--root", root, sid, first, "--with-files")
    assert checkout.returncode == 1 and "error[no_checkpoints]" in checkout.stderr

    # The chat: with checkpoints on it says the session has none; with them off, it names the
    # flag that turns them on (not the Python API's AgentHarness(checkpoints=True)).
    script = f"/rewind {first} --files-only\n/rewind {first}\n/exit\n"
    on = cli(
        env, ws, "chat", "--root", root, "--offline", "--checkpoints", "--session", sid,
        stdin=script,
    )  # fmt: skip
    assert on.returncode == 0, on.stderr
    assert on.stdout.count("error[no_checkpoints]: this session has no checkpoints") == 2
    assert f"/rewind {first} --conversation-only moves the conversation alone" in on.stdout
    assert "nothing to change" not in on.stdout
    off = cli(env, ws, "chat", "--root", root, "--offline", "--session", sid, stdin=script)
    assert off.returncode == 0, off.stderr
    assert "error[checkpoints_off]" in off.stdout and "--checkpoints" in off.stdout
    assert "AgentHarness(" not in off.stdout
    assert sorted(os.listdir(ws)) == ["new.txt"]


def renamed_entries(path: Path, ids: list[str]) -> None:
    """Give the entries of the session file at ``path`` the ids ``ids``, in file order (their
    parents follow): so that two of them can share a prefix."""
    with open_session(path) as session:
        old = session.entry_ids()
    text = path.read_text()
    for before, after in zip(old, ids, strict=False):
        assert text.count(before) >= 1
        text = text.replace(f'"{before}"', f'"{after}"')
    path.write_text(text)


def test_an_entry_id_prefix_names_its_entry_and_an_ambiguous_one_lists_them(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    # Issue 26 trial: `harness rewind` took only whole entry ids, where sessions take prefixes.
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    first = first_entry(path)
    with open_session(path) as session:
        ids = session.entry_ids()
    unique = next(
        first[:n] for n in range(4, len(first)) if sum(i.startswith(first[:n]) for i in ids) == 1
    )

    files = cli(env, ws, "rewind", "--root", root, sid, unique, "--files-only")
    assert files.returncode == 0, files.stderr
    assert "restored keep.txt" in files.stdout and sorted(os.listdir(ws)) == ["keep.txt"]
    [undo] = [x for x in files.stdout.splitlines() if x.startswith("to undo: ")]
    assert cli(env, ws, *shlex.split(undo.removeprefix("to undo: "))[1:]).returncode == 0
    assert sorted(os.listdir(ws)) == ["new.txt"]
    checkout = cli(env, ws, "sessions", "checkout", "--root", root, sid, unique, "--with-files")
    assert checkout.returncode == 0, checkout.stderr
    assert sorted(os.listdir(ws)) == ["keep.txt"]

    none = cli(env, ws, "rewind", "--root", root, sid, "fffff0000", "--conversation-only")
    assert none.returncode == 1 and none.stderr.startswith("error[entry_not_found]")
    # the session named, no placeholder, with the --root it was found in (as printed, the
    # command finds the session: it did not, the issue 26 recheck found)
    listed = re.search(r"`(harness sessions tree [^`]*)`", none.stderr)
    assert listed is not None and sid in listed.group(1), none.stderr
    tree = cli(env, ws, *shlex.split(listed.group(1))[1:])
    assert tree.returncode == 0 and first in tree.stdout, tree.stderr
    short = cli(env, ws, "rewind", "--root", root, sid, first[:2], "--conversation-only")
    assert short.returncode == 1 and "at least 4 characters" in short.stderr

    renamed_entries(path, [f"abcd{n:04}" for n in range(len(ids))])
    ambiguous = cli(env, ws, "rewind", "--root", root, sid, "abcd", "--conversation-only")
    assert ambiguous.returncode == 1
    assert ambiguous.stderr.startswith("error[ambiguous_entry]: entry id prefix 'abcd' matches")
    assert "abcd0000 (message)" in ambiguous.stderr and "give more characters" in ambiguous.stderr
    picked = cli(env, ws, "rewind", "--root", root, sid, "abcd0000", "--conversation-only")
    assert picked.returncode == 0, picked.stderr


def test_checkout_with_files_says_how_to_undo_it_and_that_command_does(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    first, leaf = first_entry(path), leaf_of(path)

    back = cli(env, tmp_path, "sessions", "checkout", "--root", root, sid, first,
               "--with-files", "--cwd", ws)  # fmt: skip
    assert back.returncode == 0, back.stderr
    assert sorted(os.listdir(ws)) == ["keep.txt"]
    [line] = [x for x in back.stdout.splitlines() if x.startswith("to undo: ")]
    words = shlex.split(line.removeprefix("to undo: "))
    assert words == ["harness", "rewind", "--root", str(root), sid, "--cwd", str(ws), leaf]
    undone = cli(env, tmp_path, *words[1:])
    assert undone.returncode == 0, undone.stderr
    assert sorted(os.listdir(ws)) == ["new.txt"]
    with open_session(path) as session:  # the conversation is back on the old leaf's branch
        assert leaf in [e.id for e in session.get_branch()]


def test_chat_help_lists_rewind_and_rewind_alone_explains_it(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    chat = cli(
        env, ws, "chat", "--root", tmp_path / "sessions", "--offline", "--checkpoints",
        stdin="/help\n/rewind\n/exit\n",
    )  # fmt: skip
    assert chat.returncode == 0, chat.stderr
    [listed] = [x for x in chat.stdout.splitlines() if x.startswith("/rewind ENTRY")]
    assert "put the files and the conversation back as at ENTRY" in listed
    [usage] = [x for x in chat.stdout.splitlines() if "usage: /rewind" in x]
    # Which entries, and what each option moves.
    assert "an entry id from /tree" in usage and "unique prefix" in usage
    for flag in ("--both (the default)", "--files-only", "--conversation-only", "--force"):
        assert flag in usage, flag


def test_chat_checkout_takes_an_entry_id_prefix(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    # Issue 26 leftover: chat's /checkout took whole ids only, where /rewind takes prefixes.
    root = tmp_path / "sessions"
    sid, path = first_run(env, ws, root, "--checkpoints")
    first, leaf = first_entry(path), leaf_of(path)
    with open_session(path) as session:
        ids = session.entry_ids()
    unique = next(
        first[:n] for n in range(4, len(first)) if sum(i.startswith(first[:n]) for i in ids) == 1
    )
    chat = cli(
        env, ws, "chat", "--root", root, "--offline", "--session", sid,
        stdin=f"/checkout {unique}\n/checkout {first[:2]}\n/fork {unique} --at\n/exit\n",
    )  # fmt: skip
    assert chat.returncode == 0, chat.stderr
    # The first entry is the user's message: the leaf goes to its parent, its text offered.
    moved = f"leaf: {leaf} -> (before the first entry)"  # never Python's None (issue 26 trial)
    assert moved in chat.stdout and "(to edit and resend: !echo" in chat.stdout
    assert "at least 4 characters" in chat.stdout + chat.stderr
    # The chat names its own /tree, not a command with a placeholder.
    assert "(/tree prints the entry ids" in chat.stdout and "SESSION" not in chat.stdout
    assert "forked" in chat.stdout.split(f"/fork {unique}")[1], chat.stdout


async def test_checkpoints_list_says_why_for_a_write_over_the_cap_and_a_session_without_any(
    env: dict[str, str], ws: Path, tmp_path: Path
) -> None:
    # Issue 26 trial, findings 12, 13 and 19.
    root = tmp_path / "sessions"
    repo = JsonlSessionRepo(root)
    session = await repo.create(str(ws))
    replies = [
        FauxReply(tool_calls=[call("write", path="big.txt", content="x" * 100)]),
        FauxReply(tool_calls=[call("write", path="new\nline.txt", content="hi\n")]),
        "ok",
    ]
    store = CheckpointStore(root / ".checkpoints", max_file_bytes=10)
    await make_harness(session, ws, replies, checkpoints=store).prompt("write")
    session.close()

    listed = cli(env, ws, "checkpoints", "list", "--root", root, session.id)
    assert listed.returncode == 0, listed.stderr
    # A write scans nothing: why its file is missing, not "the scan did not see everything".
    assert "not recorded: big.txt: larger than the store's file cap (10 bytes)" in listed.stdout
    assert "the scan" not in listed.stdout
    # One file, one line: a newline in its name is escaped like the other controls.
    assert "write: new\\nline.txt" in listed.stdout
    assert len(listed.stdout.splitlines()) == 3

    empty = cli(env, ws, "run", "--root", root, "--offline", "--mode", "bypass",
                "--checkpoints", "--output", "json", "-p", "!true")  # fmt: skip
    assert empty.returncode == 0, empty.stderr
    quiet = json.loads(empty.stdout)["session_id"]
    nothing = cli(env, ws, "checkpoints", "list", "--root", root, quiet)
    assert "or no tool call of it changed a file" in nothing.stderr


async def test_a_rewind_missing_contents_names_the_store_it_looked_in_and_the_one_holding_them(
    env: dict[str, str], ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 26 trial, finding 2: a session recorded from code with checkpoints=True, rewound
    # with `--root`, was refused as "content never stored (the process ended ...)": the
    # contents were in the user data folder's store, not the one beside --root.
    data = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    env = {**env, "XDG_DATA_HOME": str(data)}
    root = tmp_path / "sessions"
    session = await JsonlSessionRepo(root).create(str(ws))
    replies = [FauxReply(tool_calls=[call("write", path="keep.txt", content="new\n")]), "ok"]
    await make_harness(session, ws, replies, checkpoints=True).prompt("write")
    first = session.entry_ids()[0]
    session.close()

    refused = cli(env, ws, "rewind", "--root", root, session.id, first, "--files-only")

    assert refused.returncode == 1
    assert f"never stored in the checkpoint store {root / '.checkpoints'}" in refused.stderr
    assert f"the store {data / 'harness' / 'checkpoints'} holds them" in refused.stderr
    assert (ws / "keep.txt").read_text() == "new\n"
