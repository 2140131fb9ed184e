"""The built-in read and bash tools, run directly with a real working directory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness import ToolError, ToolResult, ToolRun, bash_tool, read_tool
from hooks import JSONValue


def make_run(cwd: Path, updates: list[JSONValue] | None = None) -> ToolRun:
    async def on_update(partial: JSONValue) -> None:
        if updates is not None:
            updates.append(partial)

    return ToolRun(tool_call_id="t1", cwd=cwd, on_update=on_update)


async def test_read_returns_lines_and_details(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n")
    result = await read_tool().execute(
        {"path": "a.txt", "offset": 2, "limit": 1}, make_run(tmp_path)
    )
    assert isinstance(result, ToolResult)
    assert result.content[0].text == "two"  # type: ignore[union-attr]
    assert result.details == {"path": str(tmp_path / "a.txt"), "lines": 1, "truncated": False}


async def test_read_cuts_long_files_and_says_how_to_go_on(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 50 + "\n" + "y" * 50 + "\n")
    result = await read_tool(max_bytes=60).execute({"path": "big.txt"}, make_run(tmp_path))
    assert isinstance(result, ToolResult)
    assert result.details["truncated"] is True  # type: ignore[index]
    assert "offset=" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "link/outside.txt"])
async def test_read_refuses_paths_outside_the_working_directory(tmp_path: Path, path: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "outside.txt").write_text("secret")
    (work / "link").symlink_to(tmp_path)
    with pytest.raises(ToolError) as info:
        await read_tool().execute({"path": path}, make_run(work))
    assert info.value.code == "tool_error"


async def test_read_refuses_binary_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolError):
        await read_tool().execute({"path": "b.bin"}, make_run(tmp_path))
    with pytest.raises(ToolError):
        await read_tool().execute({"path": "missing.txt"}, make_run(tmp_path))


async def test_bash_runs_in_the_working_directory_and_streams_output(tmp_path: Path) -> None:
    updates: list[JSONValue] = []
    result = await bash_tool().execute({"command": "pwd; echo hi"}, make_run(tmp_path, updates))
    assert isinstance(result, ToolResult)
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.splitlines() == [str(tmp_path.resolve()), "hi"]
    assert "".join(str(u) for u in updates) == text
    assert result.details == {"exitCode": 0, "truncated": False, "timedOut": False}
    assert not result.is_error


async def test_bash_non_zero_exit_is_an_error_result(tmp_path: Path) -> None:
    result = await bash_tool().execute({"command": "echo no >&2; exit 3"}, make_run(tmp_path))
    assert isinstance(result, ToolResult)
    assert result.is_error
    assert result.details["exitCode"] == 3  # type: ignore[index]
    assert "no" in result.content[0].text  # type: ignore[union-attr]


async def test_bash_timeout_kills_the_process_group(tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    command = f"(sleep 1; touch {marker}) & sleep 5"
    result = await bash_tool().execute({"command": command, "timeout": 0.2}, make_run(tmp_path))
    assert isinstance(result, ToolResult)
    assert result.is_error and result.details["timedOut"] is True  # type: ignore[index]
    await asyncio.sleep(1.3)
    assert not marker.exists()  # the background child was killed with its group


async def test_bash_keeps_the_tail_of_long_output(tmp_path: Path) -> None:
    result = await bash_tool(max_bytes=10).execute({"command": "seq 1 100"}, make_run(tmp_path))
    assert isinstance(result, ToolResult)
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.endswith("99\n100\n") and result.details["truncated"] is True  # type: ignore[index]


async def test_write_creates_folders_and_replaces_files_inside_the_cwd(tmp_path: Path) -> None:
    from harness import write_tool

    first = await write_tool().execute({"path": "a/b.txt", "content": "one"}, make_run(tmp_path))
    second = await write_tool().execute({"path": "a/b.txt", "content": "two"}, make_run(tmp_path))
    assert isinstance(first, ToolResult) and isinstance(second, ToolResult)
    assert (tmp_path / "a" / "b.txt").read_text() == "two"
    assert first.details["created"] is True and second.details["created"] is False  # type: ignore[index]
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["b.txt"]  # no temp file left
    with pytest.raises(ToolError):
        await write_tool().execute({"path": "../escape.txt", "content": "x"}, make_run(tmp_path))
    assert not (tmp_path.parent / "escape.txt").exists()
