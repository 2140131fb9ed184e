"""Every code block of README.md runs as written, so the README cannot drift from the code.

Python blocks run as programs in a fresh folder with the test interpreter (offline: FauxModel,
or the local replay server standing in for the Anthropic API with a dummy key, or for a local
OpenAI-compatible server). Shell blocks run
under ``bash -euo pipefail`` in a folder whose ``.venv`` is the environment running the tests, as
in a clone after the README's first command. A block whose first
line is ``# continues the previous block`` is appended to the one before it. The README's first
block (the two install-and-run commands) is what ``.ci/run`` runs verbatim in a clean clone.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import openai_streams
import pytest
from replay_server import ReplayServer, SseReply, sse_event

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
CONTINUES = "# continues the previous block"


def readme_blocks(text: str) -> list[tuple[str, str, int]]:
    """(language, code, line number) for each fenced block; continuations joined."""
    blocks: list[tuple[str, str, int]] = []
    for match in FENCE.finditer(text):
        language, code = match.group(1), match.group(2)
        line = text.count("\n", 0, match.start()) + 1
        if code.startswith(CONTINUES):
            assert blocks, f"README line {line}: nothing to continue"
            previous_language, previous, first_line = blocks[-1]
            assert previous_language == language, f"README line {line}: continues another language"
            blocks[-1] = (language, previous + code, first_line)
        else:
            blocks.append((language, code, line))
    return blocks


BLOCKS = readme_blocks(README.read_text())


def _text_stream(text: str) -> bytes:
    message = {
        "id": "msg_readme",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    return b"".join(
        [
            sse_event("message_start", {"type": "message_start", "message": message}),
            sse_event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            sse_event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": text},
                },
            ),
            sse_event("content_block_stop", {"type": "content_block_stop", "index": 0}),
            sse_event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 3},
                },
            ),
            sse_event("message_stop", {"type": "message_stop"}),
        ]
    )


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "HARNESS_", "OPENAI_"))
    }
    env["HARNESS_SESSIONS_DIR"] = str(tmp_path / "sessions")
    env["TMPDIR"] = str(tmp_path)
    return env


def test_the_readme_has_the_blocks_this_test_runs() -> None:
    languages = [language for language, _, _ in BLOCKS]
    assert languages[0] == "bash" and "pip install" in BLOCKS[0][1]
    assert languages.count("python") >= 7 and "bash" in languages[1:]
    assert all(language in ("python", "bash") for language in languages), languages


@pytest.mark.parametrize(
    ("language", "code", "line"),
    [pytest.param(*block, id=f"line-{block[2]}") for block in BLOCKS[1:]],
)
def test_readme_block_runs_as_written(
    language: str, code: str, line: int, tmp_path: Path, replay_server: ReplayServer
) -> None:
    env = _env(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    if language == "python":
        if "AnthropicModel(" in code:
            replay_server.enqueue(SseReply(body=_text_stream("Hello")))
            env["ANTHROPIC_BASE_URL"] = replay_server.url
            env["ANTHROPIC_API_KEY"] = "sk-test-dummy"
        if "OpenAIModel(" in code:  # the replay server stands in for a local model server
            replay_server.enqueue(SseReply(body=openai_streams.local_server_text("Hello")))
            env["OPENAI_BASE_URL"] = f"{replay_server.url}/v1"
        script = work / "block.py"
        script.write_text(code)
        command = [sys.executable, str(script)]
    else:
        # Shell blocks run "from the clone": .venv is the environment running these tests.
        (work / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
        command = ["bash", "-euo", "pipefail", "-c", code]
    done = subprocess.run(
        command, cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, (
        f"README block at line {line} failed:\n{done.stdout}\n{done.stderr}"
    )
    assert done.stdout.strip(), f"README block at line {line} printed nothing"
    assert "Traceback" not in done.stderr


def test_a_broken_block_is_caught(tmp_path: Path) -> None:
    """The runner really fails on a block that does not run (the README cannot silently drift)."""
    text = "```python\nfrom harness import NoSuchThing\n```\n"
    ((language, code, _),) = readme_blocks(text)
    script = tmp_path / "block.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False
    )
    assert language == "python" and done.returncode != 0 and "ImportError" in done.stderr


def test_continuations_are_joined() -> None:
    text = "```python\nx = 1\n```\n\n```python\n# continues the previous block\nprint(x)\n```\n"
    assert readme_blocks(text) == [
        ("python", "x = 1\n# continues the previous block\nprint(x)\n", 1)
    ]


def _mypy_strict(
    folder: Path, blocks: list[tuple[str, str, int]]
) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on each Python block as a file of its own (``block_<line>.py``)."""
    files = []
    for language, code, line in blocks:
        if language == "python":
            path = folder / f"block_{line}.py"
            path.write_text(code)
            files.append(str(path))
    return subprocess.run(
        # The project's own cache: the packages the blocks import are analysed once.
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            *files,
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_readme_python_blocks_pass_mypy_strict_as_written(tmp_path: Path) -> None:
    """What users copy must type-check as they copy it (issue 22): every Python block of the
    README passes ``mypy --strict`` unchanged; a block with a type error is caught."""
    done = _mypy_strict(tmp_path, BLOCKS)
    assert done.returncode == 0, done.stdout
    assert "Success: no issues found in" in done.stdout
    broken = tmp_path / "broken"
    broken.mkdir()
    failed = _mypy_strict(broken, [("python", "from harness import Session\n\nx: int = 'no'\n", 1)])
    assert failed.returncode == 1 and "block_1.py:3: error" in failed.stdout


# --- the command lines the README names exist -------------------------------------------------

_SPAN = re.compile(r"`([^`\n]*)`")
# `harness` where a command starts: a line's (or span's) start, or after | ( ; &
_COMMAND = re.compile(r"(?:^\s*|[|(;&]\s*)harness((?:\s+[^\s#|;)`&]+)*)")
_FLAG = re.compile(r"--?[A-Za-z][\w-]*")


def _options(command: click.Command) -> set[str]:
    found = {"-h", "--help"}
    for param in command.params:
        if isinstance(param, click.Option):
            found.update(param.opts)
            found.update(param.secondary_opts)
    return found


def _command_lines(text: str) -> list[str]:
    """Every ``harness ...`` of the README: in inline code, and shell lines of its blocks."""
    lines = [span for span in _SPAN.findall(text) if "import" not in span]
    for language, code, _ in readme_blocks(text):
        if language in ("bash", "sh", ""):
            lines += code.replace("\\\n", " ").splitlines()
    return [line for line in lines if _COMMAND.search(line)]


def readme_cli_mistakes(text: str) -> list[str]:
    """Subcommands and flags the README writes after ``harness`` that the CLI does not take
    (options before a command go to ``chat`` or ``run``, as ``harness`` routes them)."""
    from harness.cli import main

    mistakes = []
    for line in _command_lines(text):
        for match in _COMMAND.finditer(line):
            words = match.group(1).split()
            command: click.Command = main
            path = ["harness"]
            while words and isinstance(command, click.Group) and words[0] in command.commands:
                command = command.commands[words[0]]
                path.append(words.pop(0))
            known = _options(command)
            if command is main:
                known |= _options(main.commands["run"]) | _options(main.commands["chat"])
            if isinstance(command, click.Group) and words and words[0][0].isalpha():
                mistakes.append(f"{' '.join(path)} has no command {words[0]!r}: {line.strip()}")
            for word in words:
                if word == "--":  # what follows is another program's command line
                    break
                if word.startswith("-") and not word[1:2].isdigit():
                    for flag in _FLAG.findall(word.split("=")[0]):
                        if flag not in known:
                            mistakes.append(f"{' '.join(path)} takes no {flag}: {line.strip()}")
    return mistakes


def test_every_command_and_flag_the_readme_names_exists() -> None:
    assert readme_cli_mistakes(README.read_text()) == []


def test_a_flag_the_cli_lacks_is_caught() -> None:
    text = "Run `harness sessions list --colour` or `harness nosuch` or `harness mcp frob`.\n"
    assert len(readme_cli_mistakes(text)) == 3
