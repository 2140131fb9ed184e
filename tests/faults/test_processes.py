"""Fault injection with real processes (DESIGN §3): several writers on one file, SIGKILL in the
middle of appends, creates and forks, threads sharing one Session, a full disk.

The children are real processes running ``tests/faults/_worker.py``; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from hooks import UserMessage
from repos import (
    JsonlSessionRepo,
    MessageEntry,
    SessionWriteError,
    open_session,
)

pytestmark = pytest.mark.faults

WORKER = Path(__file__).with_name("_worker.py")


def _run(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(proc: subprocess.Popen[str], timeout: float = 300) -> dict[str, object]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


async def _new_session(tmp_path: Path) -> Path:
    session = await JsonlSessionRepo(tmp_path / "sessions").create("/work")
    path = session.path
    session.close()
    assert path is not None
    return path


def _check_file(path: Path, *, torn_tail: bool = False) -> list[dict[str, object]]:
    """Every line is whole JSON, ids are unique, no NUL byte; returns the entries.
    ``torn_tail``: the file may end in part of a line, as a kill mid-append leaves it (the
    kernel stops a write at a page boundary on SIGKILL); the lines before it are whole."""
    data = path.read_bytes()
    assert b"\0" not in data, "NUL bytes in the session file"
    if torn_tail and not data.endswith(b"\n"):
        data = data[: data.rindex(b"\n") + 1]
    assert data.endswith(b"\n")
    lines = data.split(b"\n")[:-1]
    header, *entries = (orjson.loads(line) for line in lines)
    assert header["type"] == "session"
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)), "duplicate ids"
    known = set(ids)
    assert all(e["parentId"] is None or e["parentId"] in known for e in entries)
    return entries


@pytest.mark.parametrize(
    ("writers", "each"),
    [
        (2, 500),
        (8, 500),
        *(
            pytest.param(w, n, marks=pytest.mark.stress)
            for w, n in [(2, 5000), (4, 5000), (8, 5000), (4, 10000)]
        ),
    ],
)
async def test_several_processes_append_to_one_session(
    tmp_path: Path, writers: int, each: int
) -> None:
    path = await _new_session(tmp_path)
    procs = [_run("append", str(path), str(each), f"w{i}") for i in range(writers)]
    results = [_result(p) for p in procs]
    entries = _check_file(path)
    assert len(entries) == writers * each  # zero lost: 1 + writers * each lines in all
    written = [i for r in results for i in r["ids"]]  # type: ignore[attr-defined]
    assert sorted(written) == sorted(e["id"] for e in entries)
    # After refresh(), each process's tree holds everyone's entries. The last to finish saw all;
    # an earlier one saw at least its own and everything written before it ended.
    assert max(r["entries"] for r in results) == writers * each  # type: ignore[type-var]
    for r in results:
        assert r["entries"] >= each  # type: ignore[operator]
    assert any(len(r["tags"]) == writers for r in results)  # type: ignore[arg-type]
    with open_session(path) as reopened:
        assert len(reopened) == writers * each and reopened.diagnostics == ()


async def test_sigkill_mid_append_loses_at_most_the_line_in_flight(tmp_path: Path) -> None:
    path = await _new_session(tmp_path)
    rounds = 220
    result = _result(_run("forkserver", str(path), str(rounds), "7"), timeout=600)
    acked: list[str] = result["acked"]  # type: ignore[assignment]
    assert result["kills"] == rounds >= 200
    data = path.read_bytes()
    assert b"\0" not in data
    torn = path.with_name(path.name + ".torn")
    # The next writer set every torn fragment aside; the last one may still be at the end.
    complete = data[: data.rfind(b"\n") + 1]
    entries = [orjson.loads(line) for line in complete.split(b"\n")[1:-1]]
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids))
    assert set(acked) <= set(ids), "an acknowledged (fsynced) entry is missing"
    # Each kill may leave one line written but not acknowledged, never more.
    assert len(set(ids) - set(acked)) <= rounds
    assert len(acked) > rounds  # the children really appended between kills
    if torn.exists():
        for fragment in torn.read_bytes().splitlines():
            assert fragment.startswith(b'{"type":"message"')  # a line's start, never glued
    # The file opens cleanly and the next append lands on its own line.
    with open_session(path) as session:
        assert {e.id for e in session.entries()} == set(ids)
        session.append_message(UserMessage(content="after the kills"))
    assert orjson.loads(path.read_bytes().splitlines()[-1])["message"]["content"] == (
        "after the kills"
    )
    _check_file(path)


async def test_sigkill_during_create_and_fork_leaves_no_partial_session(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    result = _result(_run("lifecycle", str(root), "40", "11"), timeout=600)
    assert result["kills"] == 40
    time.sleep(1.1)  # temp files younger than a second may belong to a live writer
    repo = JsonlSessionRepo(root)
    infos = await repo.list()
    assert infos, "the children created nothing"
    for info in infos:
        assert info.path is not None
        with open_session(info.path) as session:  # every visible session has a valid header
            assert session.header.id == info.id
    # The next repository operation removed every temp file the killed children left.
    (await repo.create("/work")).close()
    assert list(root.glob("*/.*.tmp")) == []
    for path in root.glob("*/*.jsonl"):
        # a child killed while it appended to a session it made leaves a torn tail (read
        # past, set aside by the next append); the header and every whole line are intact
        _check_file(path, torn_tail=True)


async def test_threads_appending_to_one_session_object(tmp_path: Path) -> None:
    path = await _new_session(tmp_path)
    session = open_session(path, fsync="never")
    errors: list[BaseException] = []

    def work(tag: int) -> None:
        try:
            for i in range(1500):
                session.append_message(UserMessage(content=f"t{tag}-{i}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(session) == 8 * 1500
    entries = _check_file(path)
    assert len(entries) == 8 * 1500
    session.close()


async def test_two_session_objects_in_one_process_catch_up(tmp_path: Path) -> None:
    path = await _new_session(tmp_path)
    a, b = open_session(path), open_session(path)
    first = a.append_message(UserMessage(content="from a"))
    second = b.append_message(UserMessage(content="from b"))  # catches up with a's line first
    assert first.id in b and second.parent_id is None  # b continues its own (empty) branch
    assert a.refresh() == 1 and second.id in a
    assert a.leaf_id == second.id  # refresh: where a fresh open would put the leaf
    third = a.append_message(UserMessage(content="a again"))
    assert third.parent_id == second.id
    assert b.refresh(keep_leaf=True) == 1 and b.leaf_id == second.id
    a.close()
    b.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs, mounted for the test (root only)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full disk needs a small tmpfs: run as root (CI does)")
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        # Lazy: detaches even while a failed test still holds a file open in it.
        subprocess.run(["umount", "-l", str(mount)], check=False)


async def test_a_full_disk_is_a_clear_error_and_loses_nothing(small_disk: Path) -> None:
    mount = small_disk
    filler = mount / "filler"
    filler.write_bytes(b"f" * 64 * 1024)  # removed later, to make room again
    session = await JsonlSessionRepo(mount / "sessions").create("/work")
    big = "x" * 4000
    written: list[str] = []
    with pytest.raises(SessionWriteError) as info:
        for i in range(1000):
            written.append(session.append_message(UserMessage(content=f"{i} {big}")).id)
    assert info.value.code == "write_failed" and "bytes written" in str(info.value)
    assert session.path is not None
    data = session.path.read_bytes()
    assert data.endswith(b"\n")  # the partial line was taken back
    entries = [orjson.loads(line) for line in data.splitlines()[1:]]
    assert [e["id"] for e in entries] == written  # nothing earlier lost
    assert len(session) == len(written)
    # Space again: the next append works and sits on its own line.
    filler.unlink()
    session.append_message(UserMessage(content="short"))
    with open_session(session.path) as reopened:
        last = list(reopened.entries())[-1]
        assert isinstance(last, MessageEntry) and last.message.content == "short"  # type: ignore[union-attr]
        assert reopened.diagnostics == ()
    session.close()


def test_worker_script_is_importable_as_a_file() -> None:
    """Guards the helper itself: an unknown command fails loudly."""
    done = subprocess.run(
        [sys.executable, str(WORKER), "nonsense"], capture_output=True, text=True, check=False
    )
    assert done.returncode != 0 and "unknown command" in done.stderr
