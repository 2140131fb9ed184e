"""Deep folder chains (review finding 11): a chain of 3000 folders (``a/a/a/…``, one bash
command makes it) made ``grep`` and ``find`` raise ``RecursionError``; a ``write`` to a path of
thousands of names made 2049 folders before the kernel refused the path, and left them."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import TextContent, ToolError, ToolResult, ToolRun, find_tool, grep_tool, write_tool
from hooks import JSONValue

DEPTH = 3000


def make_run(cwd: Path) -> ToolRun:
    async def on_update(partial: JSONValue) -> None:
        pass

    return ToolRun(tool_call_id="t1", cwd=cwd, confined=True, on_update=on_update)


def text(result: ToolResult | str) -> str:
    assert isinstance(result, ToolResult)
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def chain(top: Path, depth: int, leaf: str) -> None:
    """``top/a/a/…`` (``depth`` folders) with a file ``leaf`` holding ``needle`` at the
    bottom, made through descriptors (the path is longer than the kernel takes)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("a", dir_fd=fd)
            inner = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        out = os.open(leaf, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, b"needle\n")
        os.close(out)
    finally:
        os.close(fd)


def remove_tree(top: Path) -> None:
    """Remove what ``top`` holds: ``rm -rf`` walks without recursion (``shutil.rmtree``, and
    so pytest's clean-up of old temporary folders, recurses past Python's limit)."""
    names = [str(top / name) for name in os.listdir(top)]
    if names:
        subprocess.run(["rm", "-rf", "--", *names], check=True)


@pytest.fixture(autouse=True)
def clean(tmp_path: Path) -> Iterator[None]:
    yield
    remove_tree(tmp_path)


@pytest.fixture
def deep(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "top.txt").write_text("needle\n")
    chain(work, DEPTH, "bottom.txt")
    return work


async def test_grep_of_a_deep_chain_returns_a_result_with_a_note(deep: Path) -> None:
    result = await grep_tool().execute({"pattern": "needle"}, make_run(deep))
    out = text(result)
    assert "top.txt:1: needle" in out
    assert "nested more than 128 levels deep were not searched" in out
    assert isinstance(result, ToolResult) and isinstance(result.details, dict)
    assert result.details["tooDeep"] == 1
    assert result.details["matches"] == 1


async def test_find_of_a_deep_chain_returns_a_result_with_a_note(deep: Path) -> None:
    result = await find_tool().execute({"pattern": "*.txt"}, make_run(deep))
    out = text(result)
    assert out.splitlines()[0] == "top.txt"
    assert "nested more than 128 levels deep were not looked into" in out
    found = await find_tool().execute({"pattern": "a", "limit": 10000}, make_run(deep))
    assert len(text(found).splitlines()) == 129 + 1  # 129 folders met, and the note


async def test_a_walk_within_the_cap_still_finds_everything(tmp_path: Path) -> None:
    chain(tmp_path, 100, "bottom.txt")
    result = await grep_tool().execute({"pattern": "needle"}, make_run(tmp_path))
    assert text(result) == "a/" * 100 + "bottom.txt:1: needle"
    found = await find_tool().execute({"pattern": "*.txt"}, make_run(tmp_path))
    assert text(found) == "a/" * 100 + "bottom.txt"


@pytest.mark.parametrize(
    "path",
    [
        "a/" * 3000 + "f.txt",  # 6005 bytes: longer than PATH_MAX
        "a/" * 2047 + "f.txt",  # 4099 bytes
        "new/" + "n" * 256 + "/f.txt",  # a name longer than NAME_MAX
    ],
)
async def test_a_write_to_a_path_too_long_makes_no_folder(tmp_path: Path, path: str) -> None:
    with pytest.raises(ToolError) as caught:
        await write_tool().execute({"path": path, "content": "x"}, make_run(tmp_path))
    assert "too long" in str(caught.value)
    assert os.listdir(tmp_path) == []


async def test_a_write_that_fails_after_making_folders_removes_them(tmp_path: Path) -> None:
    (tmp_path / "kept").mkdir()
    # A name of 250 bytes is allowed, but its temporary file's name (.NAME.<hex>.tmp) is not.
    path = "kept/new/deeper/" + "f" * 250
    with pytest.raises(ToolError):
        await write_tool().execute({"path": path, "content": "x"}, make_run(tmp_path))
    assert os.listdir(tmp_path) == ["kept"]
    assert os.listdir(tmp_path / "kept") == []


async def test_a_long_path_within_the_limits_is_written(tmp_path: Path) -> None:
    path = "a/" * 1000 + "f.txt"
    result = await write_tool().execute({"path": path, "content": "x"}, make_run(tmp_path))
    assert "Created" in text(result)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        inner = os.open(path, os.O_RDONLY, dir_fd=fd)
        assert os.read(inner, 10) == b"x"
        os.close(inner)
    finally:
        os.close(fd)
