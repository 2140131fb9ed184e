"""The command line against hostile or awkward input, each case found by an adversarial review:
terminal escape sequences in session text, a prompt that is not UTF-8, a reader that closes the
pipe early, a Claude Code transcript given to ``run``, a label checked out. On files written
with the library; ``run`` and the closed pipe in subprocesses, the commands that only print and
write files in-process through the CLI's entry point (``cli_in_process``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import orjson
from claude_code_transcripts import SESSION, small_transcript, write
from cli_in_process import needs_process, run_cli

from hooks import UserMessage
from repos import open_session
from repos._jsonl.repo import JsonlSessionRepo

REPO_ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "a\x1b]0;TITLE\x07\x1b]52;c;aGk=\x07\x1b[2Jb"
SHOWN = "a\\x1b]0;TITLE\\x07\\x1b]52;c;aGk=\\x07\\x1b[2Jb"


def harness(
    *args: str | Path, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})}
    if not needs_process(args):
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


async def _hostile_session(root: Path) -> tuple[str, str]:
    """A session whose cwd, name, label and message hold escape sequences; (id, message id)."""
    repo = JsonlSessionRepo(root)
    with await repo.create(f"/tmp/{HOSTILE}") as session:
        entry = session.append_message(UserMessage(content=f"hello {HOSTILE}"))
        session.set_name(HOSTILE)
        session.set_label(entry.id, HOSTILE)
        session.move_to(entry.id)
        return session.id, entry.id


def test_escape_sequences_in_session_text_are_shown_escaped(tmp_path: Path) -> None:
    root = tmp_path / "root"
    sid, _ = asyncio.run(_hostile_session(root))  # outside a loop: the commands run in-process
    outputs = {
        "tree": harness("sessions", "tree", "--root", root, sid),
        "list": harness("sessions", "list", "--root", root),
        "show": harness("sessions", "show", "--root", root, sid, "--no-page"),
        "md": harness("export", "--root", root, sid, "--format", "md"),
    }
    for command, proc in outputs.items():
        assert proc.returncode == 0, (command, proc.stderr)
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout, command
    assert f"[label: {SHOWN}]" in outputs["tree"].stdout
    assert SHOWN in outputs["list"].stdout  # the cwd column
    assert f"# {SHOWN}" in outputs["md"].stdout and f"hello {SHOWN}" in outputs["md"].stdout
    # The lossless format keeps every byte.
    jsonl = harness("export", "--root", root, sid, "--format", "jsonl")
    assert jsonl.returncode == 0 and "\\u001b]0;TITLE" in jsonl.stdout


def test_template_names_with_escape_sequences_are_shown_escaped(tmp_path: Path) -> None:
    prompts = tmp_path / "proj" / ".agents" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "e\x1b[2Jv.md").write_text("---\ndescription: d\x1b]0;T\x07\n---\nBody\n")
    proc = harness("templates", "list", "--cwd", tmp_path / "proj")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "/e\\x1b[2Jv" in proc.stdout


def test_a_prompt_that_is_not_utf8_is_refused_before_a_session_is_written(tmp_path: Path) -> None:
    root = tmp_path / "root"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--root", root, "--offline", "-p", b"hi \xff"],
        capture_output=True,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert b"not valid UTF-8" in proc.stderr
    assert not list(root.glob("*/*.jsonl"))


async def _long_session(root: Path) -> str:
    with await JsonlSessionRepo(root).create("/work") as session:
        for i in range(3000):  # far more output than a pipe buffers
            session.append_message(UserMessage(content=f"message {i}"))
        return session.id


def test_a_reader_closing_the_pipe_early_ends_the_command_quietly(tmp_path: Path) -> None:
    root = tmp_path / "root"
    sid = asyncio.run(_long_session(root))
    child = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "sessions", "tree", "--root", root, sid],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.readline().startswith(b"session ")
    child.stdout.close()  # as `| head -1` does
    err = child.stderr.read()
    child.stderr.close()
    assert child.wait(timeout=120) == 141, err
    assert err == b""


def test_run_on_a_claude_code_transcript_says_to_import_it(tmp_path: Path) -> None:
    source = write(tmp_path / "cc" / f"{SESSION}.jsonl", small_transcript())
    before = source.read_bytes()
    proc = harness("run", "--root", tmp_path / "root", "--offline", "--session", source, "-p", "x")
    assert proc.returncode == 1
    assert "Claude Code transcript" in proc.stderr
    assert f"harness import claude-code {source}" in proc.stderr
    assert source.read_bytes() == before


def test_sessions_checkout_of_a_label_entry_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    sid, message_id = asyncio.run(_hostile_session(root))
    (path,) = root.glob("*/*.jsonl")
    with open_session(path) as session:
        label_id = next(i for i in session.entry_ids() if session.entry_type(i) == "label")
        leaf = session.leaf_id
    proc = harness("sessions", "checkout", "--root", root, sid, label_id)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error[invalid_navigation_target]")
    assert f"check out {message_id} instead" in proc.stderr
    with open_session(path) as session:
        assert session.leaf_id == leaf


def test_project_settings_widen_permissions_only_with_trust_project(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".harness").mkdir(parents=True)
    (work / ".harness" / "settings.json").write_text('{"permissions": {"allow": ["bash(echo:*)"]}}')
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}  # no user settings
    root = tmp_path / "root"
    untrusted = harness(
        "run", "--root", root, "--offline", "-p", "!echo hi", "--output", "json", cwd=work, env=env
    )
    trusted = harness(
        "run", "--root", root, "--offline", "-p", "!echo hi", "--output", "json",
        "--trust-project", cwd=work, env=env,
    )  # fmt: skip
    assert untrusted.returncode == 0 and trusted.returncode == 0, untrusted.stderr + trusted.stderr
    assert "bash returned: hi" not in untrusted.stdout
    assert "bash returned: hi" in trusted.stdout


def test_an_empty_prompt_is_refused_before_a_session_is_written(tmp_path: Path) -> None:
    root = tmp_path / "root"
    proc = harness("run", "--root", root, "--offline", "-p", "  ")
    assert proc.returncode == 2 and "is empty" in proc.stderr
    assert not list(root.glob("*/*.jsonl"))


def test_export_takes_the_format_from_the_file_suffix(tmp_path: Path) -> None:
    root = tmp_path / "root"
    sid, _ = asyncio.run(_hostile_session(root))
    md, jsonl = tmp_path / "out.md", tmp_path / "out.jsonl"
    assert harness("export", "--root", root, sid, "-o", md).returncode == 0
    assert harness("export", "--root", root, sid, "-o", jsonl).returncode == 0
    assert md.read_text().startswith("# ") and "<html" not in md.read_text()
    assert jsonl.read_text().startswith('{"type":"session"')
    clash = harness("export", "--root", root, sid, "-o", md, "--format", "html")
    assert clash.returncode == 2 and "does not match" in clash.stderr


def test_copy_from_a_store_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    db = tmp_path / "out.db"
    for missing in (f"jsonl:{tmp_path / 'nope'}", f"sqlite:{tmp_path / 'nope.db'}"):
        proc = harness("sessions", "copy", "--from", missing, "--to", f"sqlite:{db}")
        assert proc.returncode == 2 and "does not exist" in proc.stderr, proc.stderr
    assert not db.exists() and not (tmp_path / "nope.db").exists()


def test_import_of_one_file_that_is_not_a_transcript_exits_1(tmp_path: Path) -> None:
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"hello": "world"}\n')
    proc = harness("import", "claude-code", notes, "--root", tmp_path / "root")
    assert proc.returncode == 1 and "not a Claude Code transcript" in proc.stderr
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "notes.jsonl").write_text('{"hello": "world"}\n')
    assert harness("import", "claude-code", folder, "--root", tmp_path / "root").returncode == 0


def test_a_cost_spelt_as_nan_or_infinity_is_refused_at_read_not_a_crash(tmp_path: Path) -> None:
    """Review 16, finding 4: the strings "NaN", "inf", "1e999" read as cost figures the
    encoder refuses, so `verify` said the file was sound and `export --format jsonl` died
    with a traceback. The entry is now refused at read, as any other cost that is no number."""
    root = tmp_path / "root"
    with asyncio.run(JsonlSessionRepo(root).create(str(tmp_path))) as session:
        session.append_message(UserMessage(content="hi"))
        path, sid = session.path, session.id
    lines = path.read_bytes().splitlines()
    for spelling in ("NaN", "inf", "-Infinity", "1e999"):
        cost = {"input": 0, "output": 0, "cacheRead": spelling, "cacheWrite": 0, "total": 0}
        message = {
            "role": "assistant",
            "content": [{"type": "text", "text": "x"}],
            "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "cost": cost},
            "stopReason": "stop",
            "timestamp": 1,
        }
        entry = {
            "type": "message",
            "id": "e1e1e1e1",
            "parentId": orjson.loads(lines[-1])["id"],
            "timestamp": "2026-12-03T00:00:00.000Z",
            "message": message,
        }
        path.write_bytes(b"\n".join([*lines, orjson.dumps(entry)]) + b"\n")

        verify = harness("sessions", "verify", path)
        exported = harness("export", "--root", root, sid, "--format", "jsonl")

        assert verify.returncode != 0 and "must be a finite number" in verify.stdout + verify.stderr
        assert "Traceback" not in exported.stderr, exported.stderr
        assert exported.returncode == 0, exported.stderr
        assert spelling not in exported.stdout  # the refused entry is not written back
