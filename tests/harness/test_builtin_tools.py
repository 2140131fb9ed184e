"""edit, ls, grep, find, read (images) and bash (full output, process groups) on real files and
real subprocesses."""

from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path

import pytest

from harness import (
    ImageContent,
    TextContent,
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


def make_run(cwd: Path, *, confined: bool = True) -> ToolRun:
    async def on_update(partial: JSONValue) -> None:
        pass

    return ToolRun(tool_call_id="t1", cwd=cwd, confined=confined, on_update=on_update)


def text(result: ToolResult | str) -> str:
    assert isinstance(result, ToolResult)
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def details(result: ToolResult | str) -> dict[str, JSONValue]:
    assert isinstance(result, ToolResult) and isinstance(result.details, dict)
    return result.details


def test_names_and_schemas_follow_pi() -> None:
    schemas = {t.name: t.parameters for t in (edit_tool(), ls_tool(), grep_tool(), find_tool())}
    assert set(schemas) == {"edit", "ls", "grep", "find"}
    assert set(schemas["edit"]["properties"]) == {"path", "edits", "oldText", "newText"}  # type: ignore[arg-type]
    assert set(schemas["grep"]["properties"]) == {  # type: ignore[arg-type]
        "pattern", "path", "glob", "ignoreCase", "literal", "context", "limit"
    }  # fmt: skip
    assert set(schemas["find"]["properties"]) == {"pattern", "path", "limit"}  # type: ignore[arg-type]
    assert set(schemas["ls"]["properties"]) == {"path", "limit"}  # type: ignore[arg-type]
    assert [t.controlled for t in (edit_tool(), write_tool(), bash_tool(), read_tool())] == [
        True, True, True, False
    ]  # fmt: skip


# --- edit ----------------------------------------------------------------------------------


async def test_edit_replaces_unique_spans_and_reports_a_diff(tmp_path: Path) -> None:
    f = tmp_path / "a.py"
    f.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    result = await edit_tool().execute(
        {
            "path": "a.py",
            "edits": [
                {"oldText": "return 1", "newText": "return 10"},
                {"oldText": "def g():", "newText": "def h():"},
            ],
        },
        make_run(tmp_path),
    )
    assert f.read_text() == "def f():\n    return 10\n\ndef h():\n    return 2\n"
    diff = str(details(result)["diff"])
    assert "-    return 1\n+    return 10\n" in diff and "+def h():" in diff
    assert details(result)["firstChangedLine"] == 2


async def test_edit_refuses_an_ambiguous_or_missing_match_and_writes_nothing(
    tmp_path: Path,
) -> None:
    f = tmp_path / "a.txt"
    f.write_text("x = 1\nx = 1\n")
    with pytest.raises(ToolError) as ambiguous:
        await edit_tool().execute(
            {"path": "a.txt", "oldText": "x = 1", "newText": "x = 2"}, make_run(tmp_path)
        )
    assert "2 places" in str(ambiguous.value)
    with pytest.raises(ToolError):
        await edit_tool().execute(
            {"path": "a.txt", "edits": [{"oldText": "y", "newText": "z"}]}, make_run(tmp_path)
        )
    with pytest.raises(ToolError):  # overlapping edits
        await edit_tool().execute(
            {
                "path": "a.txt",
                "edits": [
                    {"oldText": "x = 1\nx", "newText": "a"},
                    {"oldText": "1\nx = 1\n", "newText": "b"},
                ],
            },
            make_run(tmp_path),
        )
    assert f.read_text() == "x = 1\nx = 1\n"


async def test_edit_keeps_crlf_line_ends(tmp_path: Path) -> None:
    f = tmp_path / "w.txt"
    f.write_bytes(b"one\r\ntwo\r\n")
    await edit_tool().execute(
        {"path": "w.txt", "oldText": "one\ntwo", "newText": "1\n2"}, make_run(tmp_path)
    )
    assert f.read_bytes() == b"1\r\n2\r\n"


# --- ls, find, grep ------------------------------------------------------------------------


def tree(root: Path) -> None:
    for rel, content in {
        "src/app.py": "import os\nprint('hello')\n",
        "src/pkg/util.py": "def helper():\n    return 'Hello'\n",
        "src/pkg/data.bin": "\0\0hello",
        "build/out.py": "print('hello')\n",
        "notes.md": "hello notes\n",
        ".hidden.py": "hello = 1\n",
        "logs/keep.log": "hello log\n",
        "logs/drop.log": "hello drop\n",
        ".git/config": "hello git\n",
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    (root / ".gitignore").write_text("build/\n")
    (root / "logs" / ".gitignore").write_text("*.log\n!keep.log\n")
    (root / "link").symlink_to(root / "src")


async def test_ls_lists_entries_with_kinds_and_a_limit(tmp_path: Path) -> None:
    tree(tmp_path)
    listed = await ls_tool().execute({}, make_run(tmp_path))
    assert text(listed).splitlines() == [
        ".git/", ".gitignore", ".hidden.py", "build/", "link@", "logs/", "notes.md", "src/"
    ]  # fmt: skip
    cut = await ls_tool().execute({"path": "src", "limit": 1}, make_run(tmp_path))
    assert text(cut).splitlines()[0] == "app.py" and details(cut)["truncated"] is True
    with pytest.raises(ToolError):
        await ls_tool().execute({"path": ".."}, make_run(tmp_path))


async def test_find_globs_names_and_paths_and_respects_gitignore(tmp_path: Path) -> None:
    tree(tmp_path)
    by_name = await find_tool().execute({"pattern": "*.py"}, make_run(tmp_path))
    assert text(by_name).splitlines() == [".hidden.py", "src/app.py", "src/pkg/util.py"]
    by_path = await find_tool().execute({"pattern": "pkg/*", "path": "src"}, make_run(tmp_path))
    assert text(by_path).splitlines() == ["pkg/data.bin", "pkg/util.py"]
    logs = await find_tool().execute({"pattern": "*.log"}, make_run(tmp_path))
    assert text(logs).splitlines() == ["logs/keep.log"]  # nested .gitignore, with a negation
    capped = await find_tool().execute({"pattern": "*", "limit": 2}, make_run(tmp_path))
    assert details(capped) == {"matches": 2, "truncated": True, "hidden": 0}


async def test_grep_searches_with_regex_glob_context_and_caps(tmp_path: Path) -> None:
    tree(tmp_path)
    found = await grep_tool().execute({"pattern": "hel+o"}, make_run(tmp_path))
    assert text(found).splitlines() == [
        ".hidden.py:1: hello = 1",
        "notes.md:1: hello notes",  # a folder's files come before its subfolders
        "logs/keep.log:1: hello log",
        "src/app.py:2: print('hello')",
    ]  # build/ ignored, .git skipped, the binary file skipped, the symlink not followed
    assert details(found)["skippedFiles"] == 1
    loud = await grep_tool().execute(
        {"pattern": "HELLO", "ignoreCase": True, "glob": "*.py", "path": "src", "context": 1},
        make_run(tmp_path),
    )
    assert text(loud).splitlines() == [
        "src/app.py-1- import os",
        "src/app.py:2: print('hello')",
        "src/pkg/util.py-1- def helper():",
        "src/pkg/util.py:2:     return 'Hello'",
    ]
    literal = await grep_tool().execute({"pattern": "('", "literal": True}, make_run(tmp_path))
    assert text(literal) == "src/app.py:2: print('hello')"
    capped = await grep_tool().execute({"pattern": "hello", "limit": 2}, make_run(tmp_path))
    assert details(capped)["truncated"] is True and details(capped)["matches"] == 2
    with pytest.raises(ToolError):
        await grep_tool().execute({"pattern": "("}, make_run(tmp_path))


# --- read: images ----------------------------------------------------------------------------

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


async def test_read_returns_an_image_as_an_image_block(tmp_path: Path) -> None:
    (tmp_path / "dot.png").write_bytes(PNG)
    result = await read_tool().execute({"path": "dot.png"}, make_run(tmp_path))
    assert isinstance(result, ToolResult)
    image = result.content[1]
    assert isinstance(image, ImageContent) and image.mime_type == "image/png"
    assert base64.b64decode(image.data) == PNG


async def test_an_approved_call_outside_the_cwd_may_leave_it(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("outside\n")
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(ToolError):
        await read_tool().execute({"path": "../outside.txt"}, make_run(work))
    result = await read_tool().execute({"path": "../outside.txt"}, make_run(work, confined=False))
    assert text(result) == "outside"


async def test_write_replaces_a_symlink_at_the_name_and_never_its_target(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "target.txt").write_text("untouched")
    (work / "link.txt").symlink_to(tmp_path / "target.txt")
    await write_tool().execute({"path": "link.txt", "content": "new"}, make_run(work))
    assert (tmp_path / "target.txt").read_text() == "untouched"
    assert not (work / "link.txt").is_symlink() and (work / "link.txt").read_text() == "new"


# --- bash ----------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_bash_timeout_kills_grandchildren_that_ignore_sigterm(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # A child and a grandchild, both ignoring SIGTERM, both outliving the timeout.
    command = (
        f'bash -c \'trap "" TERM; bash -c "trap \\"\\" TERM; echo \\$\\$ >> {pids}; sleep 60" & '
        f"echo $$ >> {pids}; sleep 60' & sleep 60"
    )
    async with asyncio.timeout(20):
        result = await bash_tool().execute({"command": command, "timeout": 0.5}, make_run(tmp_path))
    assert details(result)["timedOut"] is True
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    for _ in range(50):
        if not any(_alive(p) for p in started):
            break
        await asyncio.sleep(0.05)
    assert not any(_alive(p) for p in started)


async def test_bash_keeps_the_full_output_in_a_file_it_names(tmp_path: Path) -> None:
    result = await bash_tool(max_bytes=100).execute({"command": "seq 1 10000"}, make_run(tmp_path))
    full = Path(str(details(result)["fullOutputPath"]))
    try:
        assert full.read_text() == "".join(f"{i}\n" for i in range(1, 10001))
        assert str(full) in text(result)
    finally:
        full.unlink()
    short = await bash_tool().execute({"command": "echo hi"}, make_run(tmp_path))
    assert "fullOutputPath" not in details(short)


def test_no_temporary_output_file_is_left_behind_by_a_short_command(tmp_path: Path) -> None:
    before = set(os.listdir(os.environ.get("TMPDIR", "/tmp")))
    asyncio.run(bash_tool().execute({"command": "echo hi"}, make_run(tmp_path)))
    after = set(os.listdir(os.environ.get("TMPDIR", "/tmp")))
    assert not {n for n in after - before if n.startswith("harness-bash-")}
