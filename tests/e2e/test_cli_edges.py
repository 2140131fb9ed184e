"""The command line's rough edges (issue 12, item 5, and a fresh-user trial), each a test, run
for real: subprocesses, real files, and a real pseudo-terminal for the pager.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import orjson
from cli_in_process import needs_process, run_cli

from harness import ToolResult, ToolRun, bash_tool
from hooks import (
    AssistantMessage,
    CompactionSummaryMessage,
    Cost,
    JSONValue,
    TextContent,
    Usage,
    UserMessage,
)
from repos import CompactionEntry, JsonlSessionRepo, open_session

REPO_ROOT = Path(__file__).resolve().parents[2]


def run(
    cwd: Path, *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "HARNESS_SESSIONS_DIR": str(cwd / "default-root"),
        "PYTHONIOENCODING": "utf-8",
        **(env or {}),
    }
    if not needs_process(args):  # the same entry point, in-process (``cli_in_process``)
        return run_cli(args, env=full, cwd=cwd)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=full,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def reply(
    text: str, tokens_in: int = 0, tokens_out: int = 0, cost: float = 0.0
) -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text=text)],
        usage=Usage(input=tokens_in, output=tokens_out, cost=Cost(total=cost)),
    )


def branched_session(root: Path) -> tuple[str, Path]:
    """u1 a1 u2 a2, then back to a1: u3 a3, with usage on every reply; returns (id, path)."""

    async def build() -> tuple[str, Path]:
        with await JsonlSessionRepo(root).create("/work/edges") as s:
            s.append_message(UserMessage(content="first"))
            a1 = s.append_message(reply("one", 100, 10, 0.25))
            s.append_message(UserMessage(content="abandoned"))
            s.append_message(reply("two", 200, 20, 0.5))
            s.move_to(a1.id)
            s.append_message(UserMessage(content="again"))
            s.append_message(reply("three", 300, 30, 1.0))
            assert s.path is not None
            return s.id, s.path

    return asyncio.run(build())


# --- delete -----------------------------------------------------------------------------------


def test_delete_of_nothing_exits_1_and_an_emptied_folder_goes(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    first, first_path = branched_session(root)
    second, second_path = branched_session(root)
    folder = first_path.parent
    assert second_path.parent == folder

    missing = run(tmp_path, "sessions", "delete", "--root", root, "nosuchsession")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.startswith("error[session_not_found]: no session 'nosuchsession'")
    assert first_path.exists() and second_path.exists()

    ok(run(tmp_path, "sessions", "delete", "--root", root, first))
    assert not first_path.exists() and folder.is_dir()  # the other session keeps it
    ok(run(tmp_path, "sessions", "delete", "--root", root, second))
    assert not folder.exists() and root.is_dir()
    again = run(tmp_path, "sessions", "delete", "--root", root, second)
    assert again.returncode == 1 and again.stderr.startswith("error[session_not_found]")


# --- list and show agree ------------------------------------------------------------------------


def test_list_counts_what_show_says_it_counts_and_marks_forks(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    session_id, path = branched_session(root)
    in_file = sum(
        1 for line in path.read_bytes().splitlines() if orjson.loads(line)["type"] == "message"
    )
    assert in_file == 6
    fork = json.loads(
        ok(run(tmp_path, "sessions", "fork", "--root", root, session_id, "--json")).stdout
    )

    listed = {
        i["id"]: i
        for i in json.loads(ok(run(tmp_path, "sessions", "list", "--root", root, "--json")).stdout)
    }
    assert listed[session_id]["message_count"] == in_file
    shown = ok(run(tmp_path, "sessions", "show", "--root", root, session_id)).stdout
    # 6 in the file, 4 on the active branch (first, one, again, three), 4 in the context.
    assert (
        "messages: 6 in the file (as `sessions list` counts), 4 on the active branch, "
        "4 in the context" in shown
    )

    table = ok(run(tmp_path, "sessions", "list", "--root", root)).stdout.splitlines()
    head = table[0]
    assert "MSGS" in head and "FORK OF" in head
    column = head.index("FORK OF")
    rows = {line.split()[0]: line for line in table[1:]}
    assert rows[session_id[:8]][column:].startswith("- ")
    assert rows[fork["id"][:8]][column:].startswith(session_id[:8])
    assert rows[fork["id"][:8]].split()[3] == "4"  # the fork copied the active branch
    help_text = ok(run(tmp_path, "sessions", "list", "--help")).stdout
    assert "MSGS counts the message entries in the file" in " ".join(help_text.split())


def test_show_sums_tokens_and_cost_of_the_branch_and_of_the_whole_tree(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    session_id, _ = branched_session(root)
    shown = ok(run(tmp_path, "sessions", "show", "--root", root, session_id)).stdout
    assert (
        "usage (active branch): 2 replies; tokens: 400 input, 40 output, 0 cache read, "
        "0 cache write; cost $1.2500" in shown
    )
    assert (
        "usage (every branch): 3 replies; tokens: 600 input, 60 output, 0 cache read, "
        "0 cache write; cost $1.7500" in shown
    )


def test_the_pager_is_never_a_program_the_working_folder_holds(tmp_path: Path) -> None:
    """Review 12, finding 6: click looked `less` up over the whole `$PATH`, so an empty entry
    ran the working folder's own `less` (a repository can ship one), unsandboxed. The pager is
    looked up as `bash` and `git` are: absolute entries only."""
    root = tmp_path / "sessions"
    session_id, _ = branched_session(root)
    work = tmp_path / "work"
    work.mkdir()
    planted = work / "less"
    planted.write_text(f'#!/bin/sh\n: > "{tmp_path / "PLANTED_RAN"}"\n/bin/cat > /dev/null\n')
    planted.chmod(0o755)
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    paged = tmp_path / "paged.txt"
    (bin_folder / "less").write_text(f'#!/bin/sh\n/bin/cat > "{paged}"\n')
    (bin_folder / "less").chmod(0o755)

    env = {k: v for k, v in os.environ.items() if k != "PAGER"}
    env.update(PATH=f":{bin_folder}", HARNESS_SESSIONS_DIR=str(root))
    show_on_a_terminal(session_id, env, work)
    assert not (tmp_path / "PLANTED_RAN").exists()
    assert f"session: {session_id}" in paged.read_text()  # the absolute entry's `less` ran


def test_the_pager_reads_no_lesskey_and_runs_no_input_preprocessor(tmp_path: Path) -> None:
    """Review 13, finding 4: a sandboxed command can write ~/.config/lesskey, whose
    `#env LESSOPEN=|-CMD` the harness's own `less` ran, unsandboxed. The pager gets no
    lesskey file, no LESSOPEN/LESSCLOSE and less's secure mode."""
    root = tmp_path / "sessions"
    session_id, _ = branched_session(root)
    seen = tmp_path / "env.txt"
    pager = tmp_path / "pager.sh"
    pager.write_text(f'#!/bin/sh\n/usr/bin/env > "{seen}"\n/bin/cat > /dev/null\n')
    pager.chmod(0o755)
    env = {
        **os.environ,
        "PAGER": str(pager),
        "HARNESS_SESSIONS_DIR": str(root),
        "LESSOPEN": "|-touch PWNED %s",
        "LESSCLOSE": "touch PWNED",
        "LESSKEYIN": str(tmp_path / "lesskey"),
    }
    show_on_a_terminal(session_id, env, tmp_path)
    given = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert given["LESSSECURE"] == "1"
    assert given["LESSKEYIN"] == os.devnull and given["LESSKEY"] == os.devnull
    assert "LESSOPEN" not in given and "LESSCLOSE" not in given


def test_show_pages_through_the_pager_on_a_terminal(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    session_id, _ = branched_session(root)
    paged = tmp_path / "paged.txt"
    pager = tmp_path / "pager.sh"
    pager.write_text(f'#!/bin/sh\ncat > "{paged}"\n')
    pager.chmod(0o755)

    env = {**os.environ, "PAGER": str(pager), "HARNESS_SESSIONS_DIR": str(root)}
    screen = show_on_a_terminal(session_id, env, tmp_path)
    assert "abandoned" not in screen and "again" not in screen  # nothing went to the terminal
    text = paged.read_text()
    assert f"session: {session_id}" in text and "again" in text and "three" in text

    # Piped, the same command writes straight out; --page through a pipe does too.
    piped = ok(
        run(
            tmp_path,
            "sessions",
            "show",
            "--root",
            root,
            session_id,
            "--page",
            env={"PAGER": str(pager)},
        )
    )
    assert "three" in piped.stdout
    paged.unlink()
    ok(run(tmp_path, "sessions", "show", "--root", root, session_id))
    assert not paged.exists()


def show_on_a_terminal(session_id: str, env: dict[str, str], cwd: Path) -> str:
    """`harness sessions show ID` with a pty as its terminal (so it pages); what reached the
    terminal. It must exit 0."""
    main, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "sessions", "show", session_id],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env={**env, "TERM": "xterm"},
        cwd=cwd,
    )
    os.close(secondary)
    screen = _read_all(main)
    assert proc.wait(timeout=120) == 0
    return screen


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace")


# --- compact -----------------------------------------------------------------------------------


def test_compact_keep_recent_tokens_compacts_a_small_session(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    session_id, path = branched_session(root)
    before = path.read_bytes()
    small = ok(run(tmp_path, "sessions", "compact", "--root", root, session_id, "--offline"))
    assert small.stdout.startswith("nothing to compact: ")
    assert "--keep-recent-tokens" in small.stdout
    assert path.read_bytes() == before

    done = ok(
        run(
            tmp_path,
            *("sessions", "compact", "--root", root, session_id),
            *("--offline", "--keep-recent-tokens", "1"),
        )
    )
    assert done.stdout.startswith("compaction ")
    with open_session(path) as session:
        last = list(session.entries())[-1]
        assert isinstance(last, CompactionEntry)
        context = session.build_context().messages
        assert isinstance(context[0], CompactionSummaryMessage)
        assert [m.text for m in context[1:]] == ["three"]
    bad = run(
        tmp_path, "sessions", "compact", "--root", root, session_id, "--keep-recent-tokens", "-1"
    )
    assert bad.returncode == 2


# --- demo --------------------------------------------------------------------------------------


def test_demo_without_root_says_where_and_leaves_nothing_unless_kept(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    out = ok(run(tmp_path, "demo", env={"TMPDIR": str(temp)})).stdout.splitlines()
    assert out[0].startswith(f"Writing to {temp}{os.sep}harness-demo-")
    folder = Path(out[0].removeprefix("Writing to "))
    assert f"Removed {folder} (--keep keeps it; --root DIR writes elsewhere)." in out
    assert list(temp.iterdir()) == []

    kept = ok(run(tmp_path, "demo", "--keep", env={"TMPDIR": str(temp)})).stdout.splitlines()
    folder = Path(kept[0].removeprefix("Writing to "))
    assert folder.parent == temp
    assert len(list((folder / "sessions").glob("*/*.jsonl"))) == 2
    try_line = kept[-1]
    assert try_line.startswith(f"Try: harness sessions tree --root {folder / 'sessions'} ")
    # The line it suggests works as printed (the short id is accepted).
    ok(run(tmp_path, *try_line.removeprefix("Try: harness ").split()))


# --- skills and templates ------------------------------------------------------------------------


def test_templates_show_and_cwd_for_skills_and_templates(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    prompts = project / ".agents" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "fix.md").write_text(
        "---\ndescription: Fix an issue\nargument-hint: [n]\n---\nFix issue $1 in $2.\n"
    )
    skill = project / ".agents" / "skills" / "review" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\ndescription: Review a diff\n---\nRead every hunk.\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    shown = ok(run(elsewhere, "templates", "show", "--cwd", project, "fix", "12", "main.py"))
    lines = shown.stdout.splitlines()
    assert lines[:4] == [
        "name: fix",
        "scope: project",
        "description: Fix an issue",
        "arguments: [n]",
    ]
    assert f"path: {prompts / 'fix.md'}" in lines
    assert "Fix issue $1 in $2." in lines
    assert lines[-1] == "Fix issue 12 in main.py."
    missing = run(project, "templates", "show", "nope")
    assert missing.returncode == 1 and missing.stderr.startswith("error[template_not_found]")

    listed = ok(run(elsewhere, "templates", "list", "--cwd", project)).stdout
    assert listed.splitlines()[0] == "/fix [n]  [project]  Fix an issue"
    assert ok(run(elsewhere, "templates", "list")).stdout.splitlines()[0] == "no templates found"
    skills = ok(run(elsewhere, "skills", "list", "--cwd", project)).stdout
    assert skills.splitlines()[0] == "review  [project]  Review a diff"
    assert "review" not in ok(run(elsewhere, "skills", "list")).stdout
    bad = run(elsewhere, "skills", "list", "--cwd", tmp_path / "nope")
    assert bad.returncode == 2


# --- bash ------------------------------------------------------------------------------------


def test_bash_truncation_note_says_how_to_get_the_rest(tmp_path: Path) -> None:
    async def no_updates(partial: JSONValue) -> None:
        return None

    async def execute() -> ToolResult:
        result = await bash_tool(max_bytes=100).execute(
            {"command": "seq 1 1000"},
            ToolRun(tool_call_id="t1", cwd=tmp_path, on_update=no_updates),
        )
        assert isinstance(result, ToolResult)
        return result

    result = asyncio.run(execute())
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.details is not None
    full = Path(str(result.details["fullOutputPath"]))
    try:
        assert full.read_text() == "".join(f"{n}\n" for n in range(1, 1001))
        assert not full.is_relative_to(tmp_path)
        assert f"full output in {full} (outside the working folder" in text
        assert "rerun the command narrowed" in text
    finally:
        full.unlink()


async def _named_fork(root: Path) -> tuple[str, str]:
    repo = JsonlSessionRepo(root)
    with await repo.create("/work") as source:
        first = source.append_message(UserMessage(content="one"))
        source.append_message(UserMessage(content="two"))
        source.set_name("Named")
        fork = await repo.fork(source, entry_id=first.id, position="at")
    with fork:
        return fork.id, first.id


def test_tree_of_a_named_fork_draws_no_branch_for_the_name_it_copied(tmp_path: Path) -> None:
    # A fork writes the source's name as a line off its path (then a leaf move back): that is
    # not a branch anyone made, so it is not drawn; the name is on the first line instead.
    root = tmp_path / "root"
    fork_id, first_id = asyncio.run(_named_fork(root))
    proc = run(tmp_path, "sessions", "tree", "--root", root, fork_id)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("name: Named")
    assert "branches]" not in proc.stdout and "session_info" not in proc.stdout
    assert lines[1] == f"* {first_id} user one (leaf)"
    assert "2 label/leaf/name entries not drawn" in lines[-1]
    everything = run(tmp_path, "sessions", "tree", "--root", root, fork_id, "--all")
    assert "[2 branches]" in everything.stdout and "Named" in everything.stdout
