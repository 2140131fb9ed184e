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
from hooks import AssistantMessage, TextContent, UserMessage
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
    [b"", b"not json", b"[]", b'{"version": 99, "files": {}}', b'{"version": 2, "root": "/else"}'],
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
    assert orjson.loads(path.read_bytes())["version"] == list_cache.VERSION  # rewritten


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


async def _grown_sessions(root: Path) -> list[Path]:
    """Six sessions of ~20 KiB: messages, a name set in the middle, a reply at the end."""
    repo = JsonlSessionRepo(root)
    paths = []
    for i in range(6):
        with await repo.create("/w" if i % 2 else "/other") as s:
            for j in range(40):
                s.append_message(UserMessage(content=f"question {i}.{j:02d} " + "q" * 200))
                if j == 20:
                    s.set_name(f"name of {i}")
            s.append_message(
                AssistantMessage(content=[TextContent(text="done")], provider="p", model="m")
            )
            assert s.path is not None
            paths.append(s.path)
    return paths


def _same_size_rewrite(path: Path, old: bytes, new: bytes) -> None:
    """Replace ``old`` by ``new`` (as long) in place, keeping the inode; the mtime moves on."""
    data = path.read_bytes()
    assert len(old) == len(new) and data.count(old) == 1
    before = path.stat()
    with open(path, "r+b") as f:
        f.write(data.replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
    after = path.stat()
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)


async def test_a_warm_list_gives_what_a_cold_list_gives(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sessions"
    paths = await _grown_sessions(root)
    memory = JsonlSessionRepo(root)  # keeps what it learnt in memory and on disk
    assert len(await memory.list()) == 6
    # Appended to; replaced by another file (a new inode); deleted; rewritten in place to the
    # same size, the change more than 4 KiB from both ends; cut short; a new one; a torn tail.
    with await JsonlSessionRepo(root).open(paths[0]) as s:
        s.append_message(UserMessage(content="appended"))
    replacement = paths[1].with_name(".replacement")
    lines = paths[1].read_bytes().splitlines(keepends=True)
    replacement.write_bytes(lines[0] + b"".join(lines[1:4]))
    replacement.replace(paths[1])
    paths[2].unlink()
    _same_size_rewrite(paths[3], b'"name of 3"', b'"NAME OF 3"')
    with open(paths[4], "r+b") as f:
        f.truncate(sum(len(line) for line in paths[4].read_bytes().splitlines(True)[:11]))
    with await JsonlSessionRepo(root).create("/w") as s:
        s.append_message(UserMessage(content="new one"))
    with open(paths[5], "ab") as f:
        f.write(b'{"type":"message","id":"torn"')
    reads = _count_reads(monkeypatch)
    from_disk = await JsonlSessionRepo(root).list()  # as a new process would, cache on disk
    assert len(reads) == 6  # the files that changed, not the unchanged one
    from_memory = await memory.list()
    cold = await JsonlSessionRepo(root, list_cache=False).list()
    assert from_disk == cold and from_memory == cold
    by_path = {i.path: i for i in cold}
    assert paths[2] not in by_path and len(cold) == 6
    assert by_path[paths[0]].message_count == 42 and by_path[paths[1]].message_count == 3
    assert by_path[paths[3]].name == "NAME OF 3" and by_path[paths[4]].message_count == 10
    assert sorted(i.first_message for i in cold)[0] == "new one"
    for cwd in ("/w", "/other"):
        assert await memory.list(cwd) == [i for i in cold if i.cwd == cwd]


async def test_an_unchanged_cache_file_is_not_rewritten(tmp_path: Path, cache_dir: Path) -> None:
    root = tmp_path / "sessions"
    await _sessions(root, 3)
    first = await JsonlSessionRepo(root).list()
    path = list_cache.cache_file(root)
    before = path.stat()
    # A fresh repository object (as a new process) and a repeat call: nothing to write.
    fresh = JsonlSessionRepo(root)
    assert await fresh.list() == first and await fresh.list() == first
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


async def test_rows_of_an_older_layout_or_not_ours_are_ignored(
    tmp_path: Path, cache_dir: Path
) -> None:
    root = tmp_path / "sessions"
    await _sessions(root, 2)
    want = await JsonlSessionRepo(root, list_cache=False).list()
    path = list_cache.cache_file(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    [a, b] = sorted(str(p.relative_to(root)) for p in root.glob("*/*.jsonl"))
    st = (root / a).stat()
    good_shape = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_size, "", "x", "", "/w"]
    rows: dict[str, Any] = {
        a: [*good_shape, None, None, "many", None, "wrong"],  # a count that is not an int
        b: {"identity": [1, 2, 3]},  # the layout of version 1
    }
    body = {"version": list_cache.VERSION, "root": str(root.resolve()), "files": rows}
    path.write_bytes(orjson.dumps(body))
    assert await JsonlSessionRepo(root).list() == want
    written = orjson.loads(path.read_bytes())["files"]
    assert sorted(written) == [a, b] and all(type(row) is list for row in written.values())
    # A version 1 file (keyed by absolute path, one object per file) is not read either.
    v1 = {"version": 1, "root": str(root.resolve()), "files": {str(root / a): {}}}
    path.write_bytes(orjson.dumps(v1))
    assert await JsonlSessionRepo(root).list() == want
    assert orjson.loads(path.read_bytes())["version"] == list_cache.VERSION


async def test_a_timestamp_json_cannot_hold_leaves_only_its_own_file_uncached(
    tmp_path: Path, cache_dir: Path
) -> None:
    root = tmp_path / "sessions"
    [fine] = await _sessions(root, 1)
    with await JsonlSessionRepo(root).create("/w") as odd:
        odd_id, odd_path = odd.id, odd.path
    assert odd_path is not None
    line = {
        "type": "message",
        "id": "aaaa0001",
        "parentId": None,
        "timestamp": "2025-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": "hi", "timestamp": 1e30},
    }
    with open(odd_path, "ab") as f:
        f.write(orjson.dumps(line) + b"\n")
    for _ in range(2):  # writing the cache, then reading it in a new repository object
        repo = JsonlSessionRepo(root)
        assert [i.id for i in await repo.list()] == [fine]
        assert [p for p, _ in repo.list_problems] == [odd_path]
    [cached] = orjson.loads(list_cache.cache_file(root).read_bytes())["files"]
    assert fine in cached and odd_id not in cached


async def test_a_file_name_that_is_not_utf8_is_listed_and_left_out_of_the_cache(
    tmp_path: Path, cache_dir: Path
) -> None:
    root = tmp_path / "sessions"
    await _sessions(root, 2)
    first = sorted(root.glob("*/*.jsonl"))[0]
    odd = os.fsencode(first.parent) + b"/\xff\xfe_" + os.fsencode(first.name)
    os.rename(os.fsencode(first), odd)
    listed = await JsonlSessionRepo(root).list()
    assert len(listed) == 2
    rows = orjson.loads(list_cache.cache_file(root).read_bytes())["files"]
    assert len(rows) == 1  # the other one is read again next time
    assert len(await JsonlSessionRepo(root).list()) == 2


@pytest.mark.parametrize("value", [10**18, -(10**18), "later"])
async def test_a_row_with_an_impossible_activity_time_is_not_trusted(
    tmp_path: Path, cache_dir: Path, value: object
) -> None:
    # The row keeps the file's identity, so only checking the row itself can catch it; trusted,
    # it would hide the session from every later list ("year 31690708 is out of range").
    root = tmp_path / "sessions"
    await _sessions(root, 2)
    expected = await JsonlSessionRepo(root, list_cache=False).list()
    await JsonlSessionRepo(root).list()
    path = list_cache.cache_file(root)
    data = orjson.loads(path.read_bytes())
    for row in data["files"].values():
        row[11] = value  # last_activity_ms
    path.write_bytes(orjson.dumps(data))
    repo = JsonlSessionRepo(root)
    assert await repo.list() == expected and repo.list_problems == ()
