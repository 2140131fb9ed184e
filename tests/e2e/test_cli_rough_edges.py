"""Rough edges a new user hit (issue 22), each through the command line: a short id says why it
is not found, ``export`` on a terminal writes a file, ``tree`` of a Claude Code transcript shows
no temporary path, an empty folder to import says so, a session whose file is named otherwise
is reached by every command, and an unknown skill reads as a sentence.

``run`` and everything on a terminal start a real process; the commands that only print and
write files run in-process through the CLI's entry point (``cli_in_process``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from cli_in_process import needs_process, run_cli

from harness import SkillNotFoundError
from repos import open_session

REPO_ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPT = (
    '{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"cc-1","cwd":"/tmp",'
    '"timestamp":"2025-07-01T10:00:00Z","message":{"role":"user","content":"Hi"}}\n'
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        PYTHONIOENCODING="utf-8",
        HARNESS_SESSIONS_DIR=str(work.parent / "default-root"),
        XDG_CONFIG_HOME=str(work.parent / "config"),
    )
    return env


def harness(
    *args: str | Path, cwd: Path, process: bool = False
) -> subprocess.CompletedProcess[str]:
    # The same entry point, in-process (``cli_in_process``), unless ``process``.
    if not process and not needs_process(args):
        return run_cli(args, env=_env(cwd), cwd=cwd)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_env(cwd),
        cwd=cwd,
        timeout=120,
        check=False,
    )


def _session(work: Path, root: Path) -> str:
    out = harness("-p", "hello", "--offline", "--root", root, "--output-format", "json", cwd=work)
    assert out.returncode == 0, out.stderr
    return str(json.loads(out.stdout)["session_id"])


def test_a_short_id_says_prefixes_need_four_characters(work: Path, tmp_path: Path) -> None:
    root = tmp_path / "s"
    _session(work, root)
    proc = harness("sessions", "show", "--root", root, "490", cwd=work)
    assert proc.returncode == 1
    assert "an id prefix needs at least 4 characters" in proc.stderr
    assert "*_490.jsonl" not in proc.stderr


def test_cli_errors_say_what_to_type(work: Path, tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    _session(work, root)
    for args, code, says in [
        (("sessions", "show", "--root", root, "deadbeef"), 1, "`harness sessions list`"),
        (("run", "--offline", "--root", root, "--session", "deadbeef", "-p", "hi"), 1,
         "`harness sessions list`"),
        (("sessions", "list", "--root", tmp_path / "nope"), 1, "give --root an existing store"),
        (("sessions", "list", "--root", root / "no-such.jsonl"), 1, "does not exist"),
        (("sessions", "list", "--root", f"sqlite:{root}"), 1, "is not a file"),
        (("sessions", "list", "--root", "nosuch://x"), 2, "a store is jsonl:DIR"),
        (("import", "claude-code", tmp_path / "missing.jsonl"), 2, "does not exist"),
    ]:  # fmt: skip
        done = harness(*args, cwd=work)
        assert done.returncode == code, (args, done.stderr)
        assert says in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    (work / "file.txt").write_text("x")
    wrong_kind = harness("sessions", "list", "--root", work / "file.txt", cwd=work)
    assert "is not a folder" in wrong_kind.stderr


def test_list_commands_print_one_json_array_of_objects_with_the_same_keys(
    work: Path, tmp_path: Path
) -> None:
    root = tmp_path / "sessions"
    _session(work, root)
    _session(work, root)
    (work / ".mcp.json").write_text(json.dumps({"mcpServers": {"a": {"command": "true"}}}))
    for args in [
        ("sessions", "list", "--root", root, "--json"),
        ("models", "--json"),
        ("mcp", "list", "--json"),
    ]:
        done = harness(*args, cwd=work, process=True)  # each keeps a real-process run here
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)
        assert isinstance(rows, list) and rows, args
        assert all(isinstance(r, dict) and r.keys() == rows[0].keys() for r in rows), args


def test_export_on_a_terminal_writes_a_file(work: Path, tmp_path: Path) -> None:
    root = tmp_path / "s"
    sid = _session(work, root)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "harness.cli", "export", "--root", str(root), sid],
        env=_env(work),
        cwd=str(work),
        encoding="utf-8",
        timeout=90,
    )
    child.expect(pexpect.EOF)
    child.close()
    shown = str(child.before)
    assert child.exitstatus == 0, shown
    page = work / f"{sid}.html"
    assert page.is_file() and "<html" in page.read_text()
    assert "<html" not in shown and f"wrote {sid}.html (html," in shown
    piped = harness("export", "--root", root, sid, cwd=work)
    assert piped.stdout.startswith("<!DOCTYPE html>")  # a pipe still gets the page


def _export_on_a_terminal(work: Path, *args: str | Path) -> str:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "harness.cli", "export", *map(str, args)],
        env=_env(work),
        cwd=str(work),
        encoding="utf-8",
        timeout=90,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    return str(child.before)


@pytest.mark.parametrize("hostile_id", ["../escaped", "/tmp/harness-export-pwn", "a/../../b"])
def test_a_session_files_id_never_picks_where_export_writes(
    work: Path, tmp_path: Path, hostile_id: str
) -> None:
    # A downloaded file's header id is untrusted: on a terminal the page goes to the current
    # folder under a name of ours, never to the path the id spells (review 3, finding 13).
    root = tmp_path / "s"
    sid = _session(work, root)
    (source,) = root.rglob(f"*{sid}.jsonl")
    lines = source.read_text().splitlines()
    header = json.loads(lines[0])
    header["id"] = hostile_id
    downloaded = tmp_path / "downloaded.jsonl"
    downloaded.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    before = {p for p in tmp_path.rglob("*") if p.name.endswith(".html")}
    shown = _export_on_a_terminal(work, downloaded)
    after = {p for p in tmp_path.rglob("*") if p.name.endswith(".html")}
    assert after - before == {work / "session.html"}, shown
    assert not Path("/tmp/harness-export-pwn.html").exists()


def test_export_on_a_terminal_never_follows_a_link_at_its_default_name(
    work: Path, tmp_path: Path
) -> None:
    root = tmp_path / "s"
    sid = _session(work, root)
    target = tmp_path / "elsewhere.txt"
    target.write_text("kept")
    (work / f"{sid}.html").symlink_to(target)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "harness.cli", "export", "--root", str(root), sid],
        env=_env(work),
        cwd=str(work),
        encoding="utf-8",
        timeout=90,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert target.read_text() == "kept"  # neither followed nor replaced: a name beside it
    assert "<html" in (work / f"{sid}-2.html").read_text()
    assert f"wrote {sid}-2.html" in str(child.before)


@pytest.mark.parametrize(("hostile_id", "name"), [("index", "index.html"), ("AGENTS", "AGENTS.md")])
def test_a_session_files_id_never_replaces_a_file_at_the_default_name(
    work: Path, tmp_path: Path, hostile_id: str, name: str
) -> None:
    # Review 5, finding 21: an id `index` replaced the user's index.html, and chat's
    # `/export md` of an id `AGENTS` the AGENTS.md every later session reads as context.
    root = tmp_path / "s"
    sid = _session(work, root)
    (source,) = root.rglob(f"*{sid}.jsonl")
    lines = source.read_text().splitlines()
    header = json.loads(lines[0])
    header["id"] = hostile_id
    downloaded = tmp_path / "downloaded.jsonl"
    downloaded.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    (work / name).write_text("mine")
    fmt = name.rsplit(".", 1)[1]
    if fmt == "html":
        shown = _export_on_a_terminal(work, downloaded)
    else:
        chat = subprocess.run(
            [sys.executable, "-m", "harness.cli", "chat", "--offline", "--session", downloaded],
            input="/export md\n",
            capture_output=True,
            text=True,
            env=_env(work),
            cwd=work,
            timeout=90,
        )
        assert chat.returncode == 0, chat.stderr
        shown = chat.stdout
    assert (work / name).read_text() == "mine"
    written = work / f"{hostile_id}-2.{fmt}"
    assert written.is_file() and f"wrote {written.name}" in shown


def test_tree_of_a_claude_code_transcript_names_the_transcript(work: Path) -> None:
    transcript = work / "claude.jsonl"
    transcript.write_text(TRANSCRIPT)
    proc = harness("sessions", "tree", transcript, cwd=work)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert f"{transcript} (converted)" in first
    assert "harness-cc-" not in proc.stdout + proc.stderr and "/tmp/" not in first.replace(
        str(work), ""
    )


def test_importing_an_empty_folder_says_so_and_exits_1(work: Path, tmp_path: Path) -> None:
    empty = work / "empty"
    empty.mkdir()
    proc = harness("import", "claude-code", empty, "--root", tmp_path / "s", cwd=work)
    assert proc.returncode == 1
    assert f"nothing to import: no .jsonl file under {empty}" in proc.stderr
    assert not (tmp_path / "s").exists()


def test_a_session_file_named_otherwise_is_reached_by_every_command(
    work: Path, tmp_path: Path
) -> None:
    root = tmp_path / "s"
    sid = _session(work, root)
    [path] = root.glob("*/*.jsonl")
    odd = path.with_name("notes.jsonl")
    path.rename(odd)
    listed = json.loads(harness("sessions", "list", "--root", root, "--json", cwd=work).stdout)
    assert [r["id"] for r in listed] == [sid]
    assert harness("sessions", "show", "--root", root, sid[:6], cwd=work).returncode == 0
    assert (
        harness("-p", "more", "--offline", "--root", root, "--session", sid, cwd=work).returncode
        == 0
    )
    with open_session(odd) as session:
        assert len(session.build_context().messages) == 4
    copied = harness(
        "sessions", "copy", "--from", root, "--to", f"sqlite:{tmp_path / 'c.db'}", "--id", sid[:8],
        cwd=work,
    )  # fmt: skip
    assert copied.returncode == 0 and "1 copied" in copied.stdout, copied.stderr
    deleted = harness("sessions", "delete", "--root", root, sid, cwd=work)
    assert deleted.returncode == 0 and not odd.exists()


def test_an_unknown_skill_reads_as_a_sentence() -> None:
    assert str(SkillNotFoundError(["nope"], ["haiku", "review"])) == (
        "no skill is named 'nope'; the skills are: haiku, review"
    )
    assert str(SkillNotFoundError(["a", "b"], [])).startswith("no skills are named 'a', 'b';")
