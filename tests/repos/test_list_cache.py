"""The persistent list cache: a new process lists without reading files that did not change,
and a stale, damaged or foreign cache never gives a wrong answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import repos._jsonl.repo as jsonl_repo_module
from hooks import UserMessage
from repos import JsonlSessionRepo
from repos._jsonl import list_cache


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(list_cache.CACHE_ENV, str(folder))
    return folder


async def _sessions(root: Path, count: int) -> list[str]:
    repo = JsonlSessionRepo(root)
    ids = []
    for i in range(count):
        s = await repo.create("/w")
        s.append_message(UserMessage(content=f"hello {i}"))
        ids.append(s.id)
        s.close()
    return ids


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads: list[int] = []
    real = jsonl_repo_module._scan_lines

    def counting(state: Any, data: bytes, end: int) -> None:
        reads.append(end)
        real(state, data, end)

    monkeypatch.setattr(jsonl_repo_module, "_scan_lines", counting)
    return reads


async def test_a_new_repository_object_reads_only_files_that_changed(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sessions"
    ids = await _sessions(root, 5)
    first = await JsonlSessionRepo(root).list()
    assert list(cache_dir.glob("list-*.json"))  # written
    reads = _count_reads(monkeypatch)
    again = await JsonlSessionRepo(root).list()  # as a new process would
    assert reads == [] and again == first
    # One session grows: only it is read, and only what was appended.
    s = await JsonlSessionRepo(root).open(ids[2])
    s.append_message(UserMessage(content="more"))
    s.close()
    grown = await JsonlSessionRepo(root).list()
    assert len(reads) == 1
    assert {i.id: i.message_count for i in grown}[ids[2]] == 2


async def test_the_cache_is_right_in_a_fresh_process(tmp_path: Path, cache_dir: Path) -> None:
    root = tmp_path / "sessions"
    await _sessions(root, 3)
    await JsonlSessionRepo(root).list()
    code = (
        "import asyncio, json, sys\n"
        "from repos import JsonlSessionRepo\n"
        "infos = asyncio.run(JsonlSessionRepo(sys.argv[1]).list())\n"
        "print(json.dumps(sorted([i.id, i.message_count, i.first_message] for i in infos)))\n"
    )
    env = {**os.environ, list_cache.CACHE_ENV: str(cache_dir)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    rows = orjson.loads(done.stdout)
    assert len(rows) == 3 and all(count == 1 for _, count, _ in rows)
    assert sorted(text for _, _, text in rows) == ["hello 0", "hello 1", "hello 2"]


@pytest.mark.parametrize(
    "damage",
    [b"", b"not json", b"[]", b'{"version": 99, "files": {}}', b'{"version": 1, "root": "/else"}'],
    ids=["empty", "garbage", "array", "future", "other-root"],
)
async def test_a_damaged_or_foreign_cache_is_ignored_and_rewritten(
    tmp_path: Path, cache_dir: Path, damage: bytes
) -> None:
    root = tmp_path / "sessions"
    await _sessions(root, 2)
    path = list_cache.cache_file(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(damage)
    infos = await JsonlSessionRepo(root).list()
    assert sorted(i.first_message for i in infos) == ["hello 0", "hello 1"]
    assert orjson.loads(path.read_bytes())["version"] == 1  # rewritten


@pytest.mark.parametrize("change", ["replaced", "rewritten-in-place"])
async def test_a_cache_entry_is_not_trusted_once_its_file_was_rewritten(
    tmp_path: Path, cache_dir: Path, change: str
) -> None:
    root = tmp_path / "sessions"
    [sid] = await _sessions(root, 1)
    await JsonlSessionRepo(root).list()
    [path] = root.glob("*/*.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    # Another file with the same name: the same header, then three other user messages.
    s = await JsonlSessionRepo(tmp_path / "scratch").create("/w")
    for text in ("x", "y", "z"):
        s.append_message(UserMessage(content=text))
    s.close()
    [scratch] = (tmp_path / "scratch").glob("*/*.jsonl")
    body = lines[0] + b"".join(scratch.read_bytes().splitlines(keepends=True)[1:])
    if change == "replaced":
        tmp = path.with_name("new.tmp")
        tmp.write_bytes(body)
        tmp.replace(path)
    else:
        with open(path, "r+b") as f:  # same inode, new bytes, longer
            f.write(body)
    [info] = await JsonlSessionRepo(root).list()
    assert info.id == sid and info.message_count == 3 and info.first_message == "x"


async def test_list_cache_false_writes_nothing(tmp_path: Path, cache_dir: Path) -> None:
    root = tmp_path / "sessions"
    await _sessions(root, 1)
    assert len(await JsonlSessionRepo(root, list_cache=False).list()) == 1
    assert not cache_dir.exists()


async def test_an_unwritable_cache_folder_does_not_break_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(list_cache.CACHE_ENV, str(blocker))
    root = tmp_path / "sessions"
    await _sessions(root, 1)
    assert len(await JsonlSessionRepo(root).list()) == 1
