"""The ``harness`` command line's session commands, run through its entry point in-process.

The pi sessions are generated (``tests/fixtures/pi_sessions.py``) under ``tmp_path``; everything
written goes there too (``--root`` and ``HARNESS_SESSIONS_DIR`` both point there). Assertions are
on exit codes, error codes, parsed JSON, ids and file bytes, never on wording.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_in_process import run_cli
from pi_sessions import PiSession

from hooks import AssistantMessage, TextContent, UserMessage
from repos import JsonlSessionRepo, open_session

REPO_ROOT = Path(__file__).resolve().parents[2]

Cli = Callable[..., subprocess.CompletedProcess[str]]
PiFile = Callable[..., PiSession]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The sessions root given to every command with ``--root``."""
    return tmp_path / "sessions"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """Run ``harness ARGS...`` and return the finished process (stdout/stderr as text): in-process
    (``cli_in_process``), as these commands only print and write files; other modules start the
    same commands as real processes."""
    env = {
        **os.environ,
        # Anything that ignored --root would land here, never in the user's real folder.
        "HARNESS_SESSIONS_DIR": str(tmp_path / "default-root"),
        "PYTHONIOENCODING": "utf-8",
    }

    def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return run_cli(args, env=env, cwd=REPO_ROOT)

    return run


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\n{proc.stderr}"
    return proc


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fixture_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def tree_entries(stdout: str) -> list[tuple[bool, str, str, str]]:
    """Parse ``tree`` output into (is_active_leaf, id, type, whole line) per entry line."""
    out = []
    for line in stdout.splitlines():
        if not line.startswith(("* ", "> ", "  ")):
            continue  # the header and closing summary lines
        tokens = line[2:].lstrip(" |`-").split()
        out.append((line.startswith("* "), tokens[0], tokens[1], line))
    return out


# --- tree ---------------------------------------------------------------------------------------


def test_tree_marks_both_compactions_and_one_active_leaf(cli: Cli, pi_file: PiFile) -> None:
    record = pi_file("before-compaction")
    source = record.path
    assert source is not None
    proc = ok(cli("sessions", "tree", source))
    entries = tree_entries(proc.stdout)

    with open_session(source) as session:
        ids = session.entry_ids()
        compaction_ids = [i for i in ids if session.entry_type(i) == "compaction"]
        leaf_id = session.leaf_id
    assert [e[1] for e in entries] == ids  # every entry once, in order (the file is linear)

    compactions = [e for e in entries if e[2] == "compaction"]
    assert [e[1] for e in compactions] == compaction_ids
    assert len(compactions) == 2
    assert all("[compaction]" in e[3] for e in compactions)
    assert sum("[compaction]" in e[3] for e in entries) == 2
    for shown, line in zip(compactions, record.compaction_lines, strict=True):
        assert f"tokensBefore={record.lines[line]['tokensBefore']}" in shown[3]

    active = [e for e in entries if e[0]]
    assert [e[1] for e in active] == [leaf_id]
    assert "(leaf)" in active[0][3]
    assert sum("(leaf)" in e[3] for e in entries) == 1
    # A linear file is drawn flat: no branch connectors, no indentation.
    assert all(e[3][2:].startswith(e[1]) for e in entries)


def test_tree_draws_labels_on_their_targets_hides_leaf_moves_and_marks_the_path(
    cli: Cli, root: Path
) -> None:
    async def build() -> tuple[str, dict[str, str]]:
        repo = JsonlSessionRepo(root)
        with await repo.create("/work/demo") as s:
            u1 = s.append_message(UserMessage(content="first question"))
            a1 = s.append_message(AssistantMessage(content=[TextContent(text="first answer")]))
            u2 = s.append_message(UserMessage(content="abandoned follow-up"))
            s.move_to(a1.id)
            u3 = s.append_message(UserMessage(content="second follow-up"))
            a3 = s.append_message(AssistantMessage(content=[TextContent(text="second answer")]))
            return s.id, {"u1": u1.id, "a1": a1.id, "u2": u2.id, "u3": u3.id, "a3": a3.id}

    session_id, ids = asyncio.run(build())
    # The command writes a label entry and a leaf move back, both children of a3.
    ok(cli("sessions", "label", "--root", root, session_id, ids["u1"], "start"))
    proc = ok(cli("sessions", "tree", "--root", root, session_id))
    entries = tree_entries(proc.stdout)
    lines = {e[1]: e[3] for e in entries}

    assert [e[1] for e in entries] == [ids[k] for k in ("u1", "a1", "u2", "u3", "a3")]
    assert "[label: start]" in lines[ids["u1"]]
    # Only a1 splits: a3 has no branches, though the label and the leaf move hang under it.
    assert [i for i, line in lines.items() if "branches]" in line] == [ids["a1"]]
    assert "[2 branches]" in lines[ids["a1"]]
    assert lines[ids["u2"]].startswith(f"  |- {ids['u2']} user")
    assert lines[ids["u3"]].startswith(f"> `- {ids['u3']} user")
    assert lines[ids["a3"]].startswith(f"*    {ids['a3']} assistant")
    assert lines[ids["a3"]].endswith("(leaf)")
    # The active path: every entry from the root to the leaf, and no other.
    on_path = [e[1] for e in entries if e[3].startswith(("* ", "> "))]
    assert on_path == [ids[k] for k in ("u1", "a1", "u3", "a3")]
    assert proc.stdout.splitlines()[0].startswith(f"session {session_id[:8]} ")

    shown_all = ok(cli("sessions", "tree", "--root", root, session_id, "--all"))
    kinds = [e[2] for e in tree_entries(shown_all.stdout)]
    assert kinds.count("leaf") == 2 and kinds.count("label") == 1
    assert len(kinds) == len(entries) + 3


def test_tree_of_a_fork_names_its_parent(cli: Cli, root: Path, pi_file: PiFile) -> None:
    source = pi_file("large-session").path
    assert source is not None
    parent = json.loads(ok(cli("sessions", "fork", "--root", root, source, "--json")).stdout)
    child = json.loads(
        ok(cli("sessions", "fork", "--root", root, parent["id"][:8], "--json")).stdout
    )
    first = ok(cli("sessions", "tree", "--root", root, child["id"][:8])).stdout.splitlines()[0]
    assert first.endswith(f"(fork of {parent['id'][:8]})")


# --- show ---------------------------------------------------------------------------------------


def test_show_json_is_the_context_after_the_second_compaction(cli: Cli, pi_file: PiFile) -> None:
    source = pi_file("before-compaction").path
    assert source is not None
    lines = fixture_lines(source)
    compactions = [line for line in lines if line["type"] == "compaction"]
    assert len(compactions) == 2
    second = compactions[1]

    messages = json.loads(ok(cli("sessions", "show", source, "--json")).stdout)

    assert messages[0]["role"] == "compactionSummary"
    assert messages[0]["summary"] == second["summary"]
    assert messages[0]["tokensBefore"] == second["tokensBefore"]
    assert sum(m["role"] == "compactionSummary" for m in messages) == 1
    # The kept window starts at the line the v1 compaction points to.
    assert messages[1] == lines[second["firstKeptEntryIndex"]]["message"]

    pending: list[str] = []  # tool calls of the last assistant message still owed a result
    for m in messages:
        if m["role"] == "toolResult":
            assert pending, f"tool result {m['toolCallId']} without a call just before it"
            assert m["toolCallId"] == pending.pop(0)
            continue
        assert not pending, f"calls {pending} not answered right after their message"
        if m["role"] == "assistant":
            blocks = m["content"]
            assert blocks, "empty assistant message sent"
            assert not any(b["type"] == "text" and not b["text"].strip() for b in blocks)
            pending = [b["id"] for b in blocks if b["type"] == "toolCall"]
    assert not pending


def test_show_prints_derived_state_then_the_summary_first(cli: Cli, pi_file: PiFile) -> None:
    record = pi_file("before-compaction")
    assert record.path is not None
    summary = record.lines[record.compaction_lines[1]]["summary"]
    out = ok(cli("sessions", "show", record.path)).stdout.splitlines()

    provider, model_id = record.final_model
    assert f"model: {provider}/{model_id}" in out
    assert f"thinking level: {record.final_thinking_level}" in out
    blocks = [i for i, line in enumerate(out) if line.startswith("[")]
    assert out[blocks[0]].startswith("[1] compactionSummary [compaction summary]")
    assert out[blocks[0] + 1].strip() == summary.splitlines()[0]
    assert out[blocks[1]].startswith("[2] user")


# --- fork, list, delete ---------------------------------------------------------------------


@pytest.fixture
def forked(cli: Cli, root: Path, pi_file: PiFile) -> dict[str, Any]:
    """A generated large v1 session forked --at its middle entry into ``root``."""
    record = pi_file("large-session")
    source = record.path
    assert source is not None
    before = sha256(source)
    with open_session(source) as session:
        entry_id = session.entry_ids()[len(record.entries) // 2]
    proc = ok(cli("sessions", "fork", "--root", root, source, "--at", entry_id, "--json"))
    return {
        **json.loads(proc.stdout),
        "entry_id": entry_id,
        "source": source,
        "source_hash": before,
        "record": record,
    }


def test_fork_writes_a_linked_v3_file_and_leaves_the_source_alone(
    forked: dict[str, Any], root: Path
) -> None:
    source: Path = forked["source"]
    path = Path(forked["path"])
    assert path.resolve().is_relative_to(root.resolve())
    assert path.name.endswith(f"_{forked['id']}.jsonl")

    header, *entries = fixture_lines(path)
    assert header["type"] == "session"
    assert header["version"] == 3
    assert header["id"] == forked["id"]
    assert header["parentSession"] == str(source.resolve())
    seen: set[str] = set()
    for entry in entries:
        assert entry["id"] not in seen
        assert entry["parentId"] is None or entry["parentId"] in seen
        seen.add(entry["id"])

    with open_session(source) as src, open_session(path) as copy:
        assert copy.leaf_id == forked["entry_id"]
        branch = src.path_ids(forked["entry_id"])
        assert copy.path_ids(copy.leaf_id) == branch
        assert [copy.get_entry(i) for i in branch] == [src.get_entry(i) for i in branch]
    assert sha256(source) == forked["source_hash"]


def test_fork_human_output_names_id_and_path(cli: Cli, root: Path, pi_file: PiFile) -> None:
    source = pi_file("large-session").path
    assert source is not None
    out = ok(cli("sessions", "fork", "--root", root, source)).stdout.splitlines()
    fields = dict(line.split(": ", 1) for line in out)
    assert Path(fields["path"]).is_file()
    assert Path(fields["path"]).name.endswith(f"_{fields['id']}.jsonl")


def test_list_then_delete(cli: Cli, root: Path, forked: dict[str, Any]) -> None:
    listed = json.loads(ok(cli("sessions", "list", "--root", root, "--json")).stdout)
    assert [s["id"] for s in listed] == [forked["id"]]
    info = listed[0]
    assert info["path"] == forked["path"]
    assert info["parent_session"] == str(forked["source"].resolve())
    assert info["message_count"] > 0
    assert info["first_message"] == forked["record"].first_user_text == "/mode"
    for key in ("created", "modified"):
        assert info[key].endswith("+00:00")  # ISO-8601, timezone-aware

    table = ok(cli("sessions", "list", "--root", root)).stdout
    assert forked["id"][:8] in table

    folder = Path(forked["path"]).parent
    ok(cli("sessions", "delete", "--root", root, forked["id"]))
    assert not Path(forked["path"]).exists()
    assert not folder.exists() and root.is_dir()  # the emptied project folder went too
    assert json.loads(ok(cli("sessions", "list", "--root", root, "--json")).stdout) == []
    again = cli("sessions", "delete", "--root", root, forked["id"])
    assert again.returncode == 1
    assert again.stderr.startswith("error[session_not_found]")


def test_list_filters_on_exact_cwd_and_reports_unreadable_files(
    cli: Cli, root: Path, pi_file: PiFile
) -> None:
    source = pi_file("large-session").path
    assert source is not None
    mine = json.loads(
        ok(cli("sessions", "fork", "--root", root, source, "--cwd", "/tmp/a-b", "--json")).stdout
    )
    # Same folder name as /tmp/a-b under pi's lossy encoding; only the header cwd tells them apart.
    ok(cli("sessions", "fork", "--root", root, source, "--cwd", "/tmp/a/b"))
    broken = root / "--tmp-x--" / "broken.jsonl"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not json\n")

    proc = ok(cli("sessions", "list", "--root", root, "--cwd", "/tmp/a-b", "--json"))
    assert [s["id"] for s in json.loads(proc.stdout)] == [mine["id"]]
    assert str(broken) in proc.stderr


def test_fork_and_list_resolve_a_relative_cwd(cli: Cli, root: Path, pi_file: PiFile) -> None:
    source = pi_file("large-session").path
    assert source is not None
    here = os.path.realpath(REPO_ROOT)  # the folder the commands run in
    mine = json.loads(
        ok(cli("sessions", "fork", "--root", root, source, "--cwd", ".", "--json")).stdout
    )
    with open_session(mine["path"]) as fork:
        assert fork.cwd == here  # never "." in a header: it would name another folder later
    listed = json.loads(ok(cli("sessions", "list", "--root", root, "--cwd", ".", "--json")).stdout)
    assert [s["id"] for s in listed] == [mine["id"]]
    # `harness fork` is `harness sessions fork`.
    again = json.loads(ok(cli("fork", "--root", root, source, "--cwd", ".", "--json")).stdout)
    with open_session(again["path"]) as fork:
        assert fork.cwd == here


# --- errors -------------------------------------------------------------------------------------

COMMANDS_ON_A_SESSION = [["show"], ["tree"], ["fork"]]


@pytest.mark.parametrize("command", [*COMMANDS_ON_A_SESSION, ["delete"]])
def test_bad_id_is_refused(cli: Cli, root: Path, command: list[str]) -> None:
    proc = cli("sessions", *command, "--root", root, "../x")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error[invalid_session_id]")
    assert len(proc.stderr.splitlines()) == 1


@pytest.mark.parametrize("command", COMMANDS_ON_A_SESSION)
@pytest.mark.parametrize("ref", ["no-such-session", "missing.jsonl"])
def test_missing_session(
    cli: Cli, root: Path, tmp_path: Path, command: list[str], ref: str
) -> None:
    target = str(tmp_path / ref) if ref.endswith(".jsonl") else ref
    proc = cli("sessions", *command, "--root", root, target)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error[session_not_found]")
    assert proc.stdout == ""


@pytest.mark.parametrize("command", COMMANDS_ON_A_SESSION)
def test_corrupt_file_names_file_and_line(
    cli: Cli, root: Path, tmp_path: Path, command: list[str]
) -> None:
    bad = tmp_path / "corrupt.jsonl"
    bad.write_bytes(b"}} this is not a header\n" + b'{"type":"message"}\n')
    proc = cli("sessions", *command, "--root", root, bad)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error[corrupt_session]")
    assert f"{bad}:1 " in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_fork_at_unknown_entry(cli: Cli, root: Path, pi_file: PiFile) -> None:
    source = pi_file("large-session").path
    assert source is not None
    proc = cli("sessions", "fork", "--root", root, source, "--at", "zz")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error[invalid_fork_target]")


def test_usage_errors_keep_exit_code_2(cli: Cli, root: Path, pi_file: PiFile) -> None:
    source = pi_file("large-session").path
    assert source is not None
    assert (
        cli("sessions", "fork", "--root", root, source, "--at", "a", "--before", "b").returncode
        == 2
    )
    assert cli("sessions", "fork", "--root", root, source, "--tree", "--at", "a").returncode == 2
    assert cli("sessions", "show").returncode == 2
    assert not root.exists()  # nothing was written


def test_version(cli: Cli) -> None:
    proc = ok(cli("--version"))
    assert proc.stdout.startswith("harness, version ")
