"""The built-in tools against hostile files: FIFOs, devices, sockets, symlinks to them, NUL bytes
in paths, catastrophic regular expressions, symlinked write targets, unbounded output logs.

A hang is the bug, so every call runs under a hard limit: in a thread that must return within
``LIMIT_S`` (a FIFO's open blocks in the kernel, with the GIL released), or, for regular
expressions (Python's ``re`` holds the GIL while it backtracks), in a subprocess killed at the
limit. The limit is only a guard; nothing here measures time.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import (
    TextContent,
    Tool,
    ToolError,
    ToolResult,
    ToolRun,
    bash_tool,
    edit_tool,
    find_tool,
    grep_tool,
    ls_tool,
    read_tool,
    write_tool,
)
from hooks import JSONValue

LIMIT_S = 30.0


def make_run(cwd: Path, *, confined: bool = True, approved_path: str | None = None) -> ToolRun:
    async def on_update(partial: JSONValue) -> None:
        pass

    return ToolRun(
        tool_call_id="t1",
        cwd=cwd,
        confined=confined,
        approved_path=approved_path,
        on_update=on_update,
    )


def bounded(call: Callable[[], Awaitable[Any]]) -> Any:
    """``asyncio.run(call())`` in a daemon thread; the test fails if it has not returned within
    ``LIMIT_S`` (the thread is left behind, blocked: that is the bug being shown)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(call())  # type: ignore[arg-type]
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(LIMIT_S)
    if thread.is_alive():
        pytest.fail(f"still running after {LIMIT_S:g} s: it hangs")
    if "error" in box:
        raise box["error"]
    return box["value"]


def call(tool: Tool, input: dict[str, JSONValue], run: ToolRun) -> ToolResult:
    """One tool call under the hang guard; returns its result or raises its ToolError."""
    result = bounded(lambda: tool.execute(input, run))
    assert isinstance(result, ToolResult)
    return result


def text(result: ToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "ok.txt").write_text("needle here\n")
    return folder


@pytest.fixture
def unix_socket(work: Path) -> Iterator[Path]:
    path = work / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    yield path
    server.close()


# --- FIFOs, devices, sockets: refused, never waited on --------------------------------------

FIFO_CALLS: list[tuple[Tool, dict[str, JSONValue]]] = [
    (read_tool(), {"path": "fifo"}),
    (read_tool(), {"path": "link-to-fifo"}),
    (read_tool(), {"path": "sub/../fifo"}),
    (grep_tool(), {"pattern": "x", "path": "fifo"}),
    (grep_tool(), {"pattern": "x", "path": "link-to-fifo"}),
    (edit_tool(), {"path": "fifo", "oldText": "a", "newText": "b"}),
    (edit_tool(), {"path": "link-to-fifo", "oldText": "a", "newText": "b"}),
    (write_tool(), {"path": "fifo", "content": "x"}),
    (ls_tool(), {"path": "fifo"}),
    (find_tool(), {"pattern": "*", "path": "fifo"}),
]


@pytest.mark.parametrize(("tool", "input"), FIFO_CALLS, ids=lambda v: getattr(v, "name", None))
def test_a_fifo_is_refused_without_blocking(
    work: Path, tool: Tool, input: dict[str, JSONValue]
) -> None:
    os.mkfifo(work / "fifo")
    (work / "sub").mkdir()
    (work / "link-to-fifo").symlink_to("fifo")
    with pytest.raises(ToolError):
        call(tool, input, make_run(work))
    assert stat.S_ISFIFO(os.lstat(work / "fifo").st_mode)  # and nothing replaced it


@pytest.mark.parametrize("tool", [read_tool(), grep_tool(), edit_tool()], ids=lambda t: t.name)
def test_a_socket_is_refused(work: Path, unix_socket: Path, tool: Tool) -> None:
    with pytest.raises(ToolError):
        call(tool, {"path": "sock", "pattern": "x", "oldText": "a", "newText": "b"}, make_run(work))


def _only(tool: Tool, input: dict[str, JSONValue]) -> dict[str, JSONValue]:
    allowed = set(tool.parameters["properties"])  # type: ignore[arg-type]
    return {k: v for k, v in input.items() if k in allowed}


DEVICES = ["/dev/zero", "/dev/null", "/dev/full", "/dev/kmsg", "/dev/tty"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("tool", [read_tool(), grep_tool(), edit_tool()], ids=lambda t: t.name)
def test_an_approved_device_outside_is_refused_before_it_is_read(
    work: Path, tool: Tool, device: str
) -> None:
    if not os.path.exists(device):
        pytest.skip(f"{device} does not exist here")
    if device == "/dev/kmsg" and not os.access(device, os.R_OK):
        pytest.skip("/dev/kmsg is not readable here (the other devices still run)")
    input = _only(tool, {"path": device, "pattern": "x", "oldText": "a", "newText": "b"})
    for approved in (device, None):  # set by the supervisor, or not (a third-party one)
        with pytest.raises(ToolError):
            call(tool, input, make_run(work, confined=False, approved_path=approved))


def test_grep_over_a_folder_skips_and_counts_fifos_sockets_and_symlinks(
    work: Path, unix_socket: Path
) -> None:
    os.mkfifo(work / "fifo")
    os.mkfifo(work / ".gitignore")  # not even the ignore file may block the walk
    (work / "sub").mkdir()
    os.mkfifo(work / "sub" / "deep-fifo")
    (work / "to-zero").symlink_to("/dev/zero")
    (work / "to-ok").symlink_to("ok.txt")
    result = call(grep_tool(), {"pattern": "needle"}, make_run(work))
    assert text(result).splitlines() == ["ok.txt:1: needle here"]
    assert result.details == {
        "matches": 1,
        "files": 1,
        "truncated": False,
        "skippedFiles": 6,  # .gitignore, fifo, sock, sub/deep-fifo, to-zero, to-ok
        "hiddenFiles": 0,
        "timedOut": False,
    }
    found = call(find_tool(), {"pattern": "*fifo"}, make_run(work))
    assert text(found).splitlines() == ["fifo", "sub/deep-fifo"]  # listed, never opened


# --- NUL bytes and other impossible paths: a ToolError, never a crash ------------------------

BAD_PATHS = ["ok.txt\0.md", "\0", "sub\0/x", "ok\ud800.txt", "/abs\0olute"]


@pytest.mark.parametrize("path", BAD_PATHS, ids=ascii)
@pytest.mark.parametrize(
    "tool",
    [read_tool(), write_tool(), edit_tool(), ls_tool(), grep_tool(), find_tool()],
    ids=lambda t: t.name,
)
@pytest.mark.parametrize("confined", [True, False])
def test_an_impossible_path_is_a_tool_error(
    work: Path, tool: Tool, path: str, confined: bool
) -> None:
    input = _only(
        tool, {"path": path, "content": "x", "oldText": "n", "newText": "N", "pattern": "n"}
    )
    with pytest.raises(ToolError):
        call(tool, input, make_run(work, confined=confined))
    assert (work / "ok.txt").read_text() == "needle here\n"  # "ok.txt\0..." never became ok.txt


@pytest.mark.parametrize("command", ["echo a\0b", "\0", "ls\0 -la"], ids=ascii)
def test_a_nul_byte_in_a_command_is_a_tool_error(work: Path, command: str) -> None:
    with pytest.raises(ToolError):
        call(bash_tool(), {"command": command}, make_run(work))


# --- regular expressions: linear time, refused features named ------------------------------

_GREP_SCRIPT = """
import asyncio, sys
from pathlib import Path
from harness import ToolRun, grep_tool

async def on_update(partial):
    pass

result = asyncio.run(grep_tool().execute(
    {"pattern": sys.argv[1]}, ToolRun(tool_call_id="t", cwd=Path.cwd(), on_update=on_update)))
print(result.details["matches"], result.details["timedOut"])
"""

CATASTROPHIC = [  # (pattern, line, matches): each backtracks exponentially in Python's re
    ("(a+)+$", "a" * 64 + "b", 0),  # the issue's
    ("(a*)*$", "a" * 64 + "b", 1),  # matches the empty string at the end
    ("(a|aa)+$", "a" * 64 + "b", 0),
    ("(a|a?)+$", "a" * 64 + "b", 1),
    ("^(a+)+b", "a" * 64, 0),
    ("(x+x+)+y", "x" * 64, 0),
    (r"^(\w+\s?)+$", "word " * 30 + "!", 0),
]


@pytest.mark.parametrize(("pattern", "line", "matches"), CATASTROPHIC)
def test_a_catastrophic_pattern_returns_and_reports(
    tmp_path: Path, pattern: str, line: str, matches: int
) -> None:
    (tmp_path / "haystack.txt").write_text(line + "\n")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _GREP_SCRIPT, pattern],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=LIMIT_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"grep {pattern!r} still running after {LIMIT_S:g} s")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(matches), "False"]  # finished, not cut off


@pytest.mark.parametrize(
    "pattern", [r"(a)\1", "(?=n)", "(?!x)n", "(?<=e)e", "a++", r"x\Z", "(?P<n>e)(?P=n)"]
)
def test_a_pattern_re2_refuses_is_a_tool_error_naming_what_re2_lacks(
    work: Path, pattern: str
) -> None:
    with pytest.raises(ToolError, match="RE2"):
        call(grep_tool(), {"pattern": pattern}, make_run(work))


def test_grep_past_its_deadline_returns_what_it_found_with_a_note(work: Path) -> None:
    for i in range(5):
        (work / f"f{i}.txt").write_text("needle\n" * 3000)
    result = call(grep_tool(timeout_s=0), {"pattern": "needle"}, make_run(work))
    assert isinstance(result.details, dict) and result.details["timedOut"] is True
    assert "stopped after" in text(result)
    assert result.is_error is False
    full = call(grep_tool(), {"pattern": "needle", "limit": 100_000}, make_run(work))
    assert isinstance(full.details, dict) and full.details["matches"] == 1 + 5 * 3000


def test_grep_numbers_lines_as_read_does(work: Path) -> None:
    (work / "crlf.txt").write_bytes(b"one\r\ntwo\x0cthree\r\nneedle\r\n")
    result = call(grep_tool(), {"pattern": "needle$", "path": "crlf.txt"}, make_run(work))
    assert text(result) == "crlf.txt:3: needle"


# --- write and edit onto symlinks: the target's mode, never 0777 ----------------------------


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def _edit(path: str) -> tuple[Tool, dict[str, JSONValue]]:
    return edit_tool(), {"path": path, "oldText": "old", "newText": "new"}


def _write(path: str) -> tuple[Tool, dict[str, JSONValue]]:
    return write_tool(), {"path": path, "content": "new"}


@pytest.mark.parametrize("make", [_write, _edit], ids=["write", "edit"])
@pytest.mark.parametrize("mode", [0o600, 0o640, 0o755, 0o444])
def test_a_write_through_a_symlink_keeps_the_targets_mode(
    work: Path, umask_022: None, make: Any, mode: int
) -> None:
    target = work / "real.txt"
    target.write_text("old")
    target.chmod(mode)
    (work / "link.txt").symlink_to("real.txt")
    tool, input = make("link.txt")
    call(tool, input, make_run(work))
    assert not (work / "link.txt").is_symlink()
    assert stat.S_IMODE(os.stat(work / "link.txt").st_mode) == mode
    assert target.read_text() == "old"  # replaced, not followed


@pytest.mark.parametrize("make", [_write, _edit], ids=["write", "edit"])
def test_a_rewrite_keeps_the_files_mode_without_set_id_bits(
    work: Path, umask_022: None, make: Any
) -> None:
    target = work / "tool.sh"
    target.write_text("old")
    target.chmod(0o4750)
    tool, input = make("tool.sh")
    call(tool, input, make_run(work))
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o750


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
@pytest.mark.parametrize("link", [None, "dangling", "outside"])
def test_a_new_file_gets_the_default_mode(
    tmp_path: Path, work: Path, umask: int, link: str | None
) -> None:
    if link == "dangling":
        (work / "new.txt").symlink_to("missing.txt")
    elif link == "outside":
        (tmp_path / "out.txt").write_text("x")
        (tmp_path / "out.txt").chmod(0o600)
        (work / "new.txt").symlink_to(tmp_path / "out.txt")
    old = os.umask(umask)
    try:
        call(write_tool(), {"path": "new.txt", "content": "x"}, make_run(work))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.lstat(work / "new.txt").st_mode) == 0o666 & ~umask


# --- bash: the full-output files are bounded ------------------------------------------------


def test_a_full_output_file_holds_at_most_log_max_bytes(work: Path) -> None:
    tool = bash_tool(max_bytes=100, log_max_bytes=5000, logs_max_bytes=5000)
    result = call(tool, {"command": "seq 1 100000"}, make_run(work))
    assert isinstance(result.details, dict)
    full = Path(str(result.details["fullOutputPath"]))
    assert full.read_bytes() == "".join(f"{i}\n" for i in range(1, 100001)).encode()[:5000]
    assert text(result).endswith("100000\n")  # the tail is in the result
    assert "first 5000 bytes" in text(result)


def test_kept_output_files_are_bounded_in_total_oldest_removed_first(work: Path) -> None:
    tool = bash_tool(max_bytes=10, log_max_bytes=1000, logs_max_bytes=2500)
    paths = []
    for _ in range(5):
        result = call(tool, {"command": "seq 1 2000"}, make_run(work))
        assert isinstance(result.details, dict)
        paths.append(Path(str(result.details["fullOutputPath"])))
    assert [p.exists() for p in paths] == [False, False, False, True, True]
    assert sum(p.stat().st_size for p in paths[3:]) <= 2500


def test_kept_output_files_are_removed_when_the_process_exits(work: Path) -> None:
    script = (
        "import asyncio; from pathlib import Path; from harness import ToolRun, bash_tool\n"
        "async def up(p): pass\n"
        "r = asyncio.run(bash_tool(max_bytes=10).execute({'command': 'seq 1 1000'},"
        " ToolRun(tool_call_id='t', cwd=Path.cwd(), on_update=up)))\n"
        "p = Path(r.details['fullOutputPath']); assert p.exists(); print(p)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=work, capture_output=True, text=True, timeout=LIMIT_S
    )
    assert proc.returncode == 0, proc.stderr
    assert not Path(proc.stdout.strip()).exists()


def test_the_total_bound_must_hold_one_file() -> None:
    with pytest.raises(ValueError):
        bash_tool(log_max_bytes=1000, logs_max_bytes=999)
