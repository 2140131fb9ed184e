"""The built-in read and bash tools, run directly with a real working directory."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
import tracemalloc
from pathlib import Path

import orjson
import pytest

from harness import ToolError, ToolResult, ToolRun, bash_tool, read_tool, write_tool
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
    assert result.details == {
        "exitCode": 0,
        "truncated": False,
        "timedOut": False,
        "sandboxed": False,
    }
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
    first = await write_tool().execute({"path": "a/b.txt", "content": "one"}, make_run(tmp_path))
    second = await write_tool().execute({"path": "a/b.txt", "content": "two"}, make_run(tmp_path))
    assert isinstance(first, ToolResult) and isinstance(second, ToolResult)
    assert (tmp_path / "a" / "b.txt").read_text() == "two"
    assert first.details["created"] is True and second.details["created"] is False  # type: ignore[index]
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["b.txt"]  # no temp file left
    with pytest.raises(ToolError):
        await write_tool().execute({"path": "../escape.txt", "content": "x"}, make_run(tmp_path))
    assert not (tmp_path.parent / "escape.txt").exists()


# --- bash: output pipe, timeouts, background jobs, memory -------------------------------------


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie nobody reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def _gone(pid: int, within: float = 3.0) -> bool:
    for _ in range(int(within / 0.05)):
        if not _alive(pid):
            return True
        await asyncio.sleep(0.05)
    return not _alive(pid)


def _kill_pid(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


async def _read_pid(path: Path) -> int:
    for _ in range(250):
        if path.exists() and path.read_text().endswith("\n"):
            return int(path.read_text())
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path.name} was never written")


async def test_bash_timeout_returns_while_the_command_floods_output(tmp_path: Path) -> None:
    # Python 3.11's Process.wait() waited for the stdout pipe to close; nobody read it any more.
    async with asyncio.timeout(10):
        result = await bash_tool().execute({"command": "yes", "timeout": 0.3}, make_run(tmp_path))
    assert isinstance(result, ToolResult)
    assert result.is_error and result.details["timedOut"] is True  # type: ignore[index]
    assert result.details["truncated"] is True  # type: ignore[index]
    assert result.content[0].text.endswith("y\n[command timed out after 0.3 s]")  # type: ignore[union-attr]


async def test_bash_timeout_returns_when_an_escaped_child_holds_the_output(tmp_path: Path) -> None:
    # setsid leaves the process group, so the group kill misses it and it keeps the pipe open.
    command = "setsid sleep 30 & echo $! > escaped.pid; sleep 30"
    try:
        async with asyncio.timeout(10):
            result = await bash_tool().execute(
                {"command": command, "timeout": 0.5}, make_run(tmp_path)
            )
        assert isinstance(result, ToolResult)
        assert result.details["timedOut"] is True  # type: ignore[index]
    finally:
        _kill_pid(await _read_pid(tmp_path / "escaped.pid"))


async def test_bash_returns_when_the_command_exits_even_if_a_background_job_runs_on(
    tmp_path: Path,
) -> None:
    # The background job inherits the output pipe; the result must not wait for it.
    command = "sleep 30 & echo $! > bg.pid; echo started"
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        async with asyncio.timeout(5):
            result = await bash_tool(timeout_s=20).execute({"command": command}, make_run(tmp_path))
        assert loop.time() - started < 3
        assert isinstance(result, ToolResult)
        assert not result.is_error
        assert result.details == {
            "exitCode": 0,
            "truncated": False,
            "timedOut": False,
            "sandboxed": False,
        }
        text = result.content[0].text  # type: ignore[union-attr]
        assert text.startswith("started\n") and "background jobs still running" in text
        assert _alive(await _read_pid(tmp_path / "bg.pid"))  # background jobs keep running
    finally:
        _kill_pid(await _read_pid(tmp_path / "bg.pid"))


async def test_bash_cancel_kills_the_command_and_its_children(tmp_path: Path) -> None:
    command = "sleep 30 & echo $! > child.pid; wait"

    async def call() -> ToolResult | str:
        return await bash_tool().execute({"command": command}, make_run(tmp_path))

    task = asyncio.create_task(call())
    async with asyncio.timeout(10):
        pid = await _read_pid(tmp_path / "child.pid")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    try:
        assert await _gone(pid)
    finally:
        _kill_pid(pid)


async def test_bash_keeps_only_the_tail_in_memory_and_coalesces_updates(tmp_path: Path) -> None:
    updates: list[JSONValue] = []
    command = "head -c 30000000 /dev/zero | tr '\\0' a; echo; echo end"
    tracemalloc.start()
    try:
        async with asyncio.timeout(30):
            result = await bash_tool(max_bytes=1000).execute(
                {"command": command}, make_run(tmp_path, updates)
            )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(result, ToolResult)
    assert peak < 8_000_000  # 30 MB of output went through
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("[output truncated: showing the last 1000 bytes]\n")
    assert text.endswith("a" * 100 + "\nend\n")
    full = Path(result.details.pop("fullOutputPath"))  # type: ignore[union-attr]
    assert result.details == {
        "exitCode": 0,
        "truncated": True,
        "timedOut": False,
        "sandboxed": False,
    }
    assert full.stat().st_size == 30_000_000 + len("\nend\n")  # every byte kept for the model
    assert f"full output in {full}" in text
    full.unlink()
    assert len(updates) < 1000  # coalesced, not one event per read
    assert "".join(str(u) for u in updates).endswith("a" * 100 + "\nend\n")


async def test_bash_updates_do_not_split_multibyte_characters(tmp_path: Path) -> None:
    updates: list[JSONValue] = []
    script = "import sys; sys.stdout.write('x' * 4095 + 'é' * 3000)"
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}"
    async with asyncio.timeout(10):
        result = await bash_tool().execute({"command": command}, make_run(tmp_path, updates))
    assert isinstance(result, ToolResult)
    assert result.content[0].text == "x" * 4095 + "é" * 3000  # type: ignore[union-attr]
    assert "".join(str(u) for u in updates) == "x" * 4095 + "é" * 3000


# --- read: bounded reading ----------------------------------------------------------------------


async def test_read_reads_only_as_far_as_it_returns(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    with path.open("wb") as f:
        f.write(b"first\n" * 2000)
        f.truncate(300_000_000)  # a sparse tail: NUL bytes past the first 8 KiB, no newline
    tracemalloc.start()
    try:
        async with asyncio.timeout(10):
            result = await read_tool().execute(
                {"path": "big.txt", "offset": 3, "limit": 2}, make_run(tmp_path)
            )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(result, ToolResult)
    assert result.content[0].text == "first\nfirst"  # type: ignore[union-attr]
    assert peak < 2_000_000


async def test_read_cuts_a_very_long_line_without_loading_it(tmp_path: Path) -> None:
    path = tmp_path / "long.txt"
    with path.open("wb") as f:
        f.write(b"x" * 10_000)
        f.truncate(200_000_000)
    tracemalloc.start()
    try:
        async with asyncio.timeout(10):
            result = await read_tool(max_bytes=100).execute(
                {"path": "long.txt"}, make_run(tmp_path)
            )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(result, ToolResult)
    assert peak < 2_000_000
    assert result.details["lines"] == 1  # type: ignore[index]
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("x" * 100 + "\n[") and "offset=2" in text
    assert result.details["truncated"] is True  # type: ignore[index]


async def test_read_truncation_resumes_at_the_first_line_not_shown(tmp_path: Path) -> None:
    (tmp_path / "two.txt").write_text("x" * 50 + "\n" + "y" * 50 + "\n")
    result = await read_tool(max_bytes=60).execute({"path": "two.txt"}, make_run(tmp_path))
    assert isinstance(result, ToolResult)
    text = result.content[0].text  # type: ignore[union-attr]
    assert text == "x" * 50 + "\n[output truncated: use offset=2 to read on]"
    assert result.details == {"path": str(tmp_path / "two.txt"), "lines": 1, "truncated": True}


async def test_read_handles_crlf_and_a_last_line_without_newline(tmp_path: Path) -> None:
    (tmp_path / "crlf.txt").write_bytes(b"one\r\ntwo\r\nthree")
    result = await read_tool().execute({"path": "crlf.txt", "offset": 2}, make_run(tmp_path))
    assert isinstance(result, ToolResult)
    assert result.content[0].text == "two\nthree"  # type: ignore[union-attr]
    assert result.details["lines"] == 2  # type: ignore[index]


# --- undecodable file names: results must stay valid UTF-8 --------------------------------------


def _encodable(result: ToolResult | str) -> None:
    assert isinstance(result, ToolResult)
    orjson.dumps({"content": [c.text for c in result.content], "details": result.details})  # type: ignore[union-attr]


async def test_tools_return_utf8_safe_text_for_undecodable_names(tmp_path: Path) -> None:
    cwd = Path(os.fsdecode(bytes(tmp_path) + b"/w\xffork"))
    cwd.mkdir()
    (cwd / os.fsdecode(b"bad\xffname.txt")).write_text("secret content\n")
    (cwd / "link.txt").symlink_to(os.fsdecode(b"bad\xffname.txt"))
    async with asyncio.timeout(10):
        read = await read_tool().execute({"path": "link.txt"}, make_run(cwd))
        _encodable(read)
        assert read.details["path"].endswith("bad\\xffname.txt")  # type: ignore[union-attr, index]
        written = await write_tool().execute({"path": "new.txt", "content": "x"}, make_run(cwd))
        _encodable(written)
        ran = await bash_tool().execute({"command": "pwd; ls"}, make_run(cwd))
        _encodable(ran)
        with pytest.raises(ToolError) as outside:
            await read_tool().execute({"path": "../elsewhere.txt"}, make_run(cwd))
        str(outside.value).encode()
        with pytest.raises(ToolError) as missing:
            await bash_tool().execute({"command": "true"}, make_run(cwd / "missing"))
        str(missing.value).encode()


async def test_bash_failing_observer_kills_the_command(tmp_path: Path) -> None:
    async def on_update(partial: JSONValue) -> None:
        raise RuntimeError("observer broke")

    command = "sleep 30 & echo $! > child.pid; echo hi; wait"
    run = ToolRun(tool_call_id="t1", cwd=tmp_path, on_update=on_update)
    try:
        async with asyncio.timeout(10):
            with pytest.raises(RuntimeError, match="observer broke"):
                await bash_tool().execute({"command": command}, run)
        assert await _gone(await _read_pid(tmp_path / "child.pid"))
    finally:
        _kill_pid(await _read_pid(tmp_path / "child.pid"))


@pytest.mark.parametrize("entry", ["", ".", "./bin/.."])
async def test_bash_never_runs_a_bash_the_working_folder_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    # Review 5, finding 16: with an empty or relative PATH entry, "bash" was found in the
    # working folder, which an untrusted project can ship, and ran every command instead.
    fake = tmp_path / "bash"
    fake.write_text(f"#!/bin/sh\ntouch {tmp_path / 'fake-ran'}\necho fake\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", entry + os.pathsep + os.environ["PATH"])
    result = await bash_tool().execute({"command": "echo real"}, make_run(tmp_path))
    assert isinstance(result, ToolResult) and not result.is_error
    assert result.content[0].text == "real\n"  # type: ignore[union-attr]
    assert not (tmp_path / "fake-ran").exists()


async def test_bash_never_takes_a_written_folder_for_a_git_repository(tmp_path: Path) -> None:
    # Review 6, finding 8: files a model may write (HEAD, objects/, refs/, a config with
    # core.fsmonitor) made the folder an implicit bare repository: `git status` ran the monitor.
    marker = tmp_path / "monitor-ran"
    work = tmp_path / "work"
    (work / "objects" / "info").mkdir(parents=True)
    (work / "refs" / "heads").mkdir(parents=True)
    (work / "HEAD").write_text("ref: refs/heads/main\n")
    (work / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n"
        f'\tfsmonitor = "touch {marker}; false"\n'
    )
    result = await bash_tool().execute({"command": "git status"}, make_run(work))
    assert isinstance(result, ToolResult)
    assert not marker.exists()
    assert result.is_error  # git refuses the implicit repository


async def test_the_calls_of_a_reply_run_at_most_eight_commands_at_once(tmp_path: Path) -> None:
    """Review 13, finding 19: every bash call of a reply ran at once (128 calls pinned the
    CPU for a minute; a reply may hold thousands). At most MAX_CONCURRENT_COMMANDS run; the
    rest wait their turn, and every call still gets its result."""
    from harness import (
        AgentHarness,
        FauxModel,
        FauxReply,
        FauxToolCall,
        MemorySessionRepo,
        SecuritySupervisor,
        ToolResultMessage,
    )
    from harness._tools.bash import MAX_CONCURRENT_COMMANDS

    (tmp_path / "r").mkdir()
    command = 't=$(mktemp r/XXXXXX); sleep 0.4; ls r | wc -l; rm "$t"'
    calls = [FauxToolCall(name="bash", arguments={"command": command}) for _ in range(20)]
    session = await MemorySessionRepo().create(str(tmp_path))
    harness = AgentHarness(
        session=session,
        model=FauxModel([FauxReply(tool_calls=calls), "done"]),
        tools=[bash_tool(sandbox="off")],
        supervisor=SecuritySupervisor(mode="bypass", setting_sources=()),
        cwd=tmp_path,
        resources=None,
    )
    await harness.prompt("go")
    results = [m for m in session.build_context().messages if isinstance(m, ToolResultMessage)]
    running = [int(m.text.strip()) for m in results]
    assert len(running) == 20
    assert max(running) <= MAX_CONCURRENT_COMMANDS < 20
