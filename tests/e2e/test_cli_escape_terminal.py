"""No terminal control from untrusted text reaches stdout or stderr, whatever the command.

Every command that prints session text, transcript text, project files or model and tool
output runs on hostile input (``chat`` and ``run`` in a subprocess, the others in-process
through the CLI's entry point, their raw output bytes kept): a session file and a Claude Code
transcript with every terminal payload of ``hostile_sessions.PAYLOADS_TERMINAL`` (OSC 52
clipboard writes with either terminator, CSI clears, the C1 CSI U+009B, OSC as U+009D, DCS,
device status reports, bidi overrides and isolates, CR/BS overwrites, NUL, DEL...) in every
field. The raw output bytes must hold none of the characters ``_escape.terminal`` escapes;
JSON output must still decode to exactly the stored values.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_in_process import needs_process, run_cli
from hostile_sessions import PAYLOADS_TERMINAL, write_session, write_transcript

from repos import open_session

REPO_ROOT = Path(__file__).resolve().parents[2]
# Everything a terminal may act on: C0 but \t and \n, DEL, C1, the line and paragraph
# separators, the bidi embeddings, overrides and isolates, and (from undecodable bytes) lone
# surrogates.
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
P = " ".join(PAYLOADS_TERMINAL.values())
# What argv and file names can hold (no NUL, no slash).
P_ARG = P.replace("\x00", "").replace("/", "")


def harness(
    *args: str | Path,
    cwd: Path = REPO_ROOT,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    """Run the CLI; (exit code, stdout, stderr), the raw bytes decoded so that any byte that
    is not UTF-8 shows up as a lone surrogate (which :data:`UNSAFE` matches). ``chat`` and
    ``run`` start a real process; the other commands run in-process through the CLI's entry
    point, their raw bytes as written (``cli_in_process``)."""
    full = {**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})}
    data = None if stdin is None else stdin.encode()
    if not needs_process(args):
        proc = run_cli(args, env=full, cwd=cwd, input=data, text=False)
    else:
        proc = subprocess.run(
            [sys.executable, "-m", "harness.cli", *map(str, args)],
            capture_output=True,
            input=data,
            env=full,
            cwd=cwd,
            timeout=120,
            check=False,
        )
    out = proc.stdout.decode("utf-8", "surrogateescape")
    err = proc.stderr.decode("utf-8", "surrogateescape")
    return proc.returncode, out, err


def assert_clean(what: str, *texts: str) -> None:
    for text in texts:
        found = UNSAFE.search(text)
        assert found is None, (
            f"{what}: raw {found.group()!r} reached the terminal: "
            f"...{text[max(found.start() - 40, 0) : found.end() + 40]!r}..."
        )


def test_the_payloads_hold_what_they_should() -> None:
    # Each spelling would be caught raw: the test below cannot pass on a payload it misses.
    for name, payload in PAYLOADS_TERMINAL.items():
        assert UNSAFE.search(payload), name


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hostile-terminal")
    root = folder / "root"
    main = write_session(root / "project" / "2025-01-01_main.jsonl", P)
    side = write_session(folder / "side.jsonl", P, side_leaf=True)
    transcript = write_transcript(folder / "cc" / "transcript.jsonl", P_ARG)
    return {"root": root, "main": main, "side": side, "transcript": transcript, "tmp": folder}


def _sweep(files: dict[str, Path]) -> dict[str, list[str | Path]]:
    root, main, side = files["root"], files["main"], files["side"]
    return {
        "show": ["sessions", "show", main, "--no-page"],
        "show side": ["sessions", "show", side, "--no-page", "--max-chars", "0"],
        "tree": ["sessions", "tree", main],
        "tree --all": ["sessions", "tree", "--all", side],
        "list": ["-v", "sessions", "list", "--root", root],
        "verify": ["sessions", "verify", main],
        "repair --dry-run": ["sessions", "repair", "--dry-run", main],
        "export md": ["export", main, "--format", "md"],
        "export md side": ["export", side, "--format", "md"],
        "export html": ["export", main, "--format", "html"],
        "show transcript": ["sessions", "show", files["transcript"], "--no-page"],
        "tree transcript": ["sessions", "tree", "--all", files["transcript"]],
    }


def test_no_command_prints_a_terminal_control_from_a_session(files: dict[str, Path]) -> None:
    for what, args in _sweep(files).items():
        code, out, err = harness(*args)
        assert code in (0, 1), (what, code, err)
        assert out, what
        assert_clean(what, out, err)


def test_show_prints_every_spelling_as_a_visible_escape(files: dict[str, Path]) -> None:
    code, out, err = harness("sessions", "show", files["main"], "--no-page")
    assert code == 0, err
    assert_clean("show", out, err)
    # Names the issue lists: provider/model, approval keys, tool names and ids.
    assert "model: provESC" not in out
    # (An approved-always key from a file is listed only when this user's harness signed it;
    # the chat test below shows one that is.)
    for line in ("model: prov", "-> name", "toolResult name"):
        assert line in out, line
    # Each spelling arrives whole, as the escapes a reader can see (\x1b, \x9b, \u202e...).
    for name, payload in PAYLOADS_TERMINAL.items():
        shown = "".join(
            c
            if not UNSAFE.match(c)
            else (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
            for c in payload
        )
        assert shown in out, name


def test_json_output_escapes_c1_and_bidi_and_still_decodes_exactly(
    files: dict[str, Path],
) -> None:
    main = files["main"]
    with open_session(main) as session:
        name = session.name
    outputs = {
        "show --json": harness("sessions", "show", main, "--json"),
        "list --json": harness("sessions", "list", "--json", "--root", files["root"]),
        "verify --json": harness("sessions", "verify", "--json", main),
    }
    for what, (code, out, err) in outputs.items():
        assert code in (0, 1), (what, err)
        assert_clean(what, out, err)
        json.loads(out)  # still JSON
    messages = json.loads(outputs["show --json"][1])
    assert {"role": "user", "content": f"user text {P}", "timestamp": 1, f"extra{P}": P} in messages
    (info,) = json.loads(outputs["list --json"][1])
    assert info["name"] == name and info["cwd"] == f"/tmp/{P}"


def test_jsonl_export_escapes_and_reads_back_the_same_values(
    files: dict[str, Path], tmp_path: Path
) -> None:
    code, out, err = harness("export", files["main"], "--format", "jsonl")
    assert code == 0, err
    assert_clean("export jsonl", out, err)
    copy = tmp_path / "copy.jsonl"
    copy.write_text(out)
    with open_session(files["main"]) as original, open_session(copy) as exported:
        assert exported.header == original.header
        assert list(exported.entries()) == list(original.entries())
        assert exported.diagnostics == ()


def test_import_of_a_hostile_transcript_reports_escaped(files: dict[str, Path]) -> None:
    root = files["tmp"] / "import-root"
    first = harness("import", "claude-code", "--root", root, files["transcript"])
    again = harness("import", "claude-code", "--root", root, files["transcript"])
    for what, (code, out, err) in (("import", first), ("import again", again)):
        assert code == 0, (what, err)
        assert_clean(what, out, err)
    out = first[1]
    assert "dropped line" in out and "re-attached line" in out and "named 'title" in out
    assert "already imported" in again[1]


def test_checkout_prints_the_message_to_edit_escaped(files: dict[str, Path]) -> None:
    # Entry ids are arguments here: the payload without what argv cannot hold.
    copy = write_session(files["tmp"] / "checkout.jsonl", P_ARG)
    with open_session(copy) as session:
        user = next(e.id for e in session.get_branch() if e.type == "message")
    code, out, err = harness("sessions", "checkout", copy, user)
    assert code == 0, err
    assert_clean("checkout", out, err)
    assert "message to edit and resend:" in out


def test_run_prints_a_hostile_reply_escaped_in_every_output(tmp_path: Path) -> None:
    # The offline model echoes the prompt: its reply stands for hostile model output.
    root = tmp_path / "root"
    for output in ("text", "json", "events"):
        code, out, err = harness(
            "run", "--offline", "--root", root, "--output", output, "-p", P_ARG, cwd=tmp_path
        )
        assert code == 0, (output, err)
        assert_clean(f"run --output {output}", out, err)
        if output == "json":
            assert json.loads(out)["result"] == f"(offline) You said: {P_ARG}"
        if output == "events":
            assert all(json.loads(line)["type"] for line in out.splitlines())


def test_chat_shows_tool_output_and_approval_questions_escaped(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "root"
    env = {
        "HARNESS_CHAT_HISTORY": str(tmp_path / "history"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    # The command's output holds raw controls (printf writes them); the typed line holds them
    # too, so the approval question quotes them, and so does the approved-always key.
    typed = "\x1b]52;c;aGk=\x07\u202e\x9b2J [bold]B[/bold] [link=https://example.invalid]L[/link]"
    stdin = (
        f"!printf 'a\\033]52;c;aGk=\\007b\\302\\2332Jc\\342\\200\\256d'; echo '{typed}'\na\n"
        f"/name {typed}\n/tree\n/exit\n"
    )
    code, out, err = harness("chat", "--offline", "--root", root, stdin=stdin, cwd=work, env=env)
    assert code == 0, err
    assert_clean("chat", out, err)
    assert "allow bash(" in out and "| a\\x1b]52;c;aGk=\\x07b\\x9b2Jc\\u202ed" in out
    # Rich markup in session text is text, not styles or links.
    assert (
        "name: \\x1b]52;c;aGk=\\x07\\u202e\\x9b2J [bold]B[/bold] [link=https://example.invalid]L"
        in out
    )
    # The key approved always is listed by `show`, escaped.
    (session,) = root.glob("*/*.jsonl")
    code, out, err = harness("sessions", "show", session, "--no-page", cwd=work, env=env)
    assert code == 0, err
    assert_clean("show after chat", out, err)
    assert "approved always: bash(printf 'a\\\\033]52" in out  # an exact key escapes \\
    assert "echo '\\x1b]52;c;aGk=\\x07\\u202e\\x9b2J [bold]" in out


def test_project_skills_and_templates_are_listed_escaped(tmp_path: Path) -> None:
    project = tmp_path / "project"
    skill = project / ".agents" / "skills" / "evil"
    skill.mkdir(parents=True)
    # JSON strings are YAML double-quoted scalars: the escapes become the raw characters.
    (skill / "SKILL.md").write_text(
        f"---\nname: evil\ndescription: {json.dumps('d ' + P_ARG)}\n---\nbody {P}\n"
    )
    prompts = project / ".agents" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / f"t{P_ARG}.md").write_text(
        f"---\ndescription: {json.dumps(P_ARG)}\nargument-hint: {json.dumps(P_ARG)}\n---\n"
        f"Body {P} $1\n"
    )
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    for args in (
        ("skills", "list", "--cwd", project),
        ("skills", "show", "--cwd", project, "evil"),
        ("templates", "list", "--cwd", project),
        ("templates", "show", "--cwd", project, f"t{P_ARG}", P_ARG),
    ):
        code, out, err = harness(*args, env=env)
        assert code == 0, (args, err)
        assert_clean(" ".join(map(str, args[:2])), out, err)
        assert "\\x1b]52;c;aGk=" in out, args
