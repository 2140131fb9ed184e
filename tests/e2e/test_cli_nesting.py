"""Every command that reads a session, on deeply nested lines (issue 18, class 11).

A line nested 600 levels deep used to crash ``sessions show``, ``tree``, ``export``, ``verify``,
``repair`` and ``run --session`` with ``RecursionError``. Now such a line is a damaged line: each
command skips it, says so (file and line), and goes on. A session whose lines nest exactly to
the cap (``repos.MAX_NESTING``) in every place a line can hold free-form JSON goes through every
command, so no renderer or encoder down the line meets a recursion limit. Real files; ``run``
in a subprocess, the commands that only read in-process through the CLI's entry point
(``cli_in_process``: under pytest's deeper stack, so a recursion limit is nearer than in a
process of their own).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_in_process import needs_process, run_cli

from hooks import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from repos import MAX_NESTING, JsonlSessionRepo
from repos.testing import nested

REPO_ROOT = Path(__file__).resolve().parents[2]


def harness(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "HARNESS_SESSIONS_DIR": str(cwd / "s")}
    if not needs_process(args):  # the same entry point, in-process (``cli_in_process``)
        return run_cli(args, env=env, cwd=cwd)
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def _crashed(proc: subprocess.CompletedProcess[str]) -> bool:
    return "Traceback" in proc.stderr or "RecursionError" in proc.stderr + proc.stdout


async def _at_the_cap(folder: Path) -> Path:
    """A session in ``folder`` (its cwd) whose lines nest exactly MAX_NESTING levels, in every
    place an append can put free-form JSON, all on the active path."""
    repo = JsonlSessionRepo(folder / "s")
    deep = MAX_NESTING
    with await repo.create(str(folder), metadata={"m": nested(deep - 2)}) as s:
        first = s.append_message(UserMessage(content="look"))
        s.append_message(
            AssistantMessage(
                content=[
                    TextContent(text="calling"),
                    ToolCall(id="c1", name="read", arguments={"a": nested(deep - 5)}),
                ],
                api="t",
                provider="t",
                model="m",
                stop_reason="toolUse",
            )
        )
        s.append_message(
            ToolResultMessage(
                tool_call_id="c1",
                tool_name="read",
                content=[TextContent(text="result")],
                details=nested(deep - 2),
            )
        )
        s.append_custom("state", nested(deep - 1))
        s.append_custom_message("note", "a note", details=nested(deep - 1))
        s.append_branch_summary(first.id, "tried", details=nested(deep - 1))
        s.append_compaction("summary", first.id, 10, details=nested(deep - 1))
        s.append_message(UserMessage(content="after"))
        assert s.path is not None
        return s.path


HEADER = {"type": "session", "version": 3, "id": "deep-1", "timestamp": "2025-01-01T00:00:00Z"}


def _deep_file(folder: Path, *, leaf_is_deep: bool) -> tuple[Path, int]:
    """The issue's reproduction: a tool result whose details nest 600 levels, in the middle of
    the path or as its leaf; the file and the deep line's byte offset."""
    header = {**HEADER, "cwd": str(folder)}
    root: dict[str, Any] = {
        "type": "message",
        "id": "aaaaaaaa",
        "parentId": None,
        "timestamp": "2025-01-01T00:00:01Z",
        "message": {"role": "user", "content": "hi", "timestamp": 1},
    }
    deep = (
        b'{"type":"message","id":"bbbbbbbb","parentId":"aaaaaaaa","timestamp":"2025-01-01T00:00:02Z",'
        b'"message":{"role":"toolResult","toolCallId":"x","toolName":"t","content":[],"details":'
        + b"[" * 598
        + b"]" * 598
        + b',"isError":false,"timestamp":2}}'
    )
    child = {
        "type": "message",
        "id": "cccccccc",
        "parentId": "bbbbbbbb",
        "timestamp": "2025-01-01T00:00:03Z",
        "message": {"role": "user", "content": "after", "timestamp": 3},
    }
    lines = [orjson.dumps(header), orjson.dumps(root), deep]
    if not leaf_is_deep:
        lines.append(orjson.dumps(child))
    path = folder / "deep.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path, path.read_bytes().index(deep)


READERS: list[tuple[str, ...]] = [
    ("sessions", "show", "--no-page"),
    ("sessions", "show", "--no-page", "--json"),
    ("sessions", "tree"),
    ("sessions", "tree", "--all"),
    ("export", "--format", "html"),
    ("export", "--format", "md"),
    ("export", "--format", "jsonl"),
]


@pytest.mark.parametrize("leaf_is_deep", [False, True])
@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_readers_skip_a_600_level_line_and_say_where_it_is(
    tmp_path: Path, command: tuple[str, ...], leaf_is_deep: bool
) -> None:
    path, _ = _deep_file(tmp_path, leaf_is_deep=leaf_is_deep)
    before = path.read_bytes()
    proc = harness(*command, path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not _crashed(proc), proc.stderr
    assert f"{path}:3:" in proc.stderr and "corrupt_body" in proc.stderr
    assert "hi" in proc.stdout
    assert path.read_bytes() == before


def test_verify_and_repair_report_and_drop_a_600_level_line(tmp_path: Path) -> None:
    path, offset = _deep_file(tmp_path, leaf_is_deep=False)
    proc = harness("sessions", "verify", "--json", path, cwd=tmp_path)
    assert proc.returncode == 1 and not _crashed(proc), proc.stderr
    report = orjson.loads(proc.stdout)
    found = [(f["code"], f["line"], f["offset"]) for f in report["findings"]]
    # Its child is re-attached to the entry before it, as reading does.
    assert found[0] == ("corrupt_body", 3, offset)
    assert [(code, line) for code, line, _ in found[1:]] == [("parent_removed", 4)]
    proc = harness("sessions", "repair", path, cwd=tmp_path)
    assert proc.returncode == 0 and not _crashed(proc), proc.stderr
    assert harness("sessions", "verify", path, cwd=tmp_path).returncode == 0
    lines = path.read_bytes().splitlines()
    assert [orjson.loads(x)["id"] for x in lines[1:]] == ["aaaaaaaa", "cccccccc"]


def test_run_continues_a_session_holding_a_600_level_line(tmp_path: Path) -> None:
    path, _ = _deep_file(tmp_path, leaf_is_deep=True)
    proc = harness("run", "--offline", "--session", path, "-p", "hello", cwd=tmp_path)
    assert proc.returncode == 0 and not _crashed(proc), proc.stderr
    assert "hello" in proc.stdout
    last = orjson.loads(path.read_bytes().splitlines()[-1])
    assert last["message"]["role"] == "assistant"


@pytest.mark.parametrize(
    "command",
    [
        *READERS,
        ("sessions", "verify"),
        ("sessions", "verify", "--json"),
        ("sessions", "repair", "--dry-run"),
    ],
    ids=" ".join,
)
def test_every_reader_handles_lines_nested_to_the_cap(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    path = asyncio.run(_at_the_cap(tmp_path))  # outside a loop: the command runs in-process
    before = path.read_bytes()
    proc = harness(*command, path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not _crashed(proc) and "warning" not in proc.stderr, proc.stderr
    assert path.read_bytes() == before
    if command[-1] == "jsonl":
        # The export is the session, every line as deep as it was.
        exported = [orjson.loads(x) for x in proc.stdout.encode().splitlines()]
        stored = [orjson.loads(x) for x in before.splitlines()]
        assert exported[1:] == stored[1:]


async def test_run_continues_a_session_nested_to_the_cap(tmp_path: Path) -> None:
    path = await _at_the_cap(tmp_path)
    copy = tmp_path / "copy.jsonl"
    shutil.copy(path, copy)
    proc = harness("run", "--offline", "--session", copy, "-p", "hello", cwd=tmp_path)
    assert proc.returncode == 0 and not _crashed(proc), proc.stderr
    assert "warning" not in proc.stderr, proc.stderr
