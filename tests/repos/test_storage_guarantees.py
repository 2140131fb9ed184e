"""Storage guarantees under hostile conditions (DESIGN §3-§4): torn tails with other writers,
short and failed writes, ``.torn`` files, id and cwd validation, concurrent creates, forks at leaf
entries, header versions, file system errors, the list cache and folder durability.

Real files under ``tmp_path``; a real subprocess where another process or a file size limit is
the point. Assertions use codes and attributes, not wording."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from hooks import UserMessage
from repos import (
    CorruptSessionError,
    InvalidForkTargetError,
    InvalidSessionIdError,
    JsonlSessionRepo,
    MemorySessionRepo,
    SessionExistsError,
    SessionNotFoundError,
    SessionWriteError,
    StorageError,
    open_session,
    validate_session_id,
)
from repos._fork import fork_plan

Repo = JsonlSessionRepo | MemorySessionRepo


def user(text: str) -> UserMessage:
    return UserMessage(content=text)


def line_objs(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def torn_file(path: Path) -> Path:
    return path.with_name(path.name + ".torn")


def session_files(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.jsonl")) if root.is_dir() else []


def every_file(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []


async def make_session(tmp_path: Path, n: int = 2) -> tuple[JsonlSessionRepo, Path, list[str]]:
    repo = JsonlSessionRepo(tmp_path / "root")
    with await repo.create("/w") as s:
        ids = [s.append_message(user(f"m{i}")).id for i in range(n)]
        assert s.path is not None
        return repo, s.path, ids


@pytest.fixture(params=["jsonl", "memory"])
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> Repo:
    if request.param == "jsonl":
        return JsonlSessionRepo(tmp_path / "root")
    return MemorySessionRepo()


def run_python(script: str, *args: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, check=True, timeout=60
    )
    return json.loads(out.stdout)


# --- 1. a torn tail is set aside as the file is now, never lines appended since --------------


_APPEND_IN_ANOTHER_PROCESS = """
import json, sys
from pathlib import Path
from hooks import UserMessage
from repos import open_session
with open_session(Path(sys.argv[1])) as s:
    ids = [s.append_message(UserMessage(content=t)).id for t in sys.argv[2:]]
    print(json.dumps({"ids": ids, "codes": [d.code for d in s.diagnostics]}))
"""


async def test_setting_a_torn_tail_aside_keeps_lines_another_session_appended(
    tmp_path: Path,
) -> None:
    repo, path, ids = await make_session(tmp_path)
    whole = path.read_bytes()
    fragment = b'{"type":"mess'
    path.write_bytes(whole + fragment)
    a = await repo.open(path)
    b = await repo.open(path)
    b1 = b.append_message(user("B1")).id
    b2 = b.append_message(user("B2")).id
    b.close()
    a1 = a.append_message(user("A1")).id  # a still remembers the tear at open
    a.close()

    assert path.read_bytes().startswith(whole)
    assert [o.get("id") for o in line_objs(path)[1:]] == [*ids, b1, b2, a1]
    assert torn_file(path).read_bytes() == fragment + b"\n"  # set aside once, alone
    with open_session(path, strict=True) as again:
        assert again.entry_ids() == [*ids, b1, b2, a1]


async def test_setting_a_torn_tail_aside_keeps_lines_another_process_appended(
    tmp_path: Path,
) -> None:
    repo, path, ids = await make_session(tmp_path)
    whole = path.read_bytes()
    fragment = b'{"type":"message","id":"deadbeef","parentId":nu'
    path.write_bytes(whole + fragment)
    with await repo.open(path) as a:
        assert [d.code for d in a.diagnostics] == ["torn_tail"]
        other = run_python(_APPEND_IN_ANOTHER_PROCESS, str(path), "P1", "P2")
        assert "torn_tail_set_aside" in other["codes"]
        a1 = a.append_message(user("A1")).id
        assert "torn_tail_set_aside" not in [d.code for d in a.diagnostics]

    assert [o.get("id") for o in line_objs(path)[1:]] == [*ids, *other["ids"], a1]
    assert torn_file(path).read_bytes() == fragment + b"\n"
    with open_session(path, strict=True) as again:
        assert not again.diagnostics


# --- 2. short and failed writes ---------------------------------------------------------------


_SHORT_WRITE = """
import json, resource, signal, sys
from pathlib import Path
from hooks import UserMessage
from repos import SessionWriteError, open_session
path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
with open_session(path) as s:
    before = (len(s), s.leaf_id, path.stat().st_size)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (before[2] + 100, hard))
    try:
        s.append_message(UserMessage(content="x" * 2000))
        failure = None
    except SessionWriteError as exc:
        failure = {"code": exc.code, "written": exc.written, "expected": exc.expected,
                   "is_oserror": isinstance(exc, OSError), "path": str(exc.path)}
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    after_failure = (len(s), s.leaf_id, path.stat().st_size)
    next_id = s.append_message(UserMessage(content="after")).id
print(json.dumps({"before": before, "after_failure": after_failure, "failure": failure,
                  "next_id": next_id}))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
async def test_a_short_write_is_taken_back_and_raises_write_failed(tmp_path: Path) -> None:
    _, path, ids = await make_session(tmp_path)
    out = run_python(_SHORT_WRITE, str(path))
    failure = out["failure"]
    assert failure is not None
    assert failure["code"] == "write_failed" and failure["is_oserror"]
    assert failure["path"] == str(path)
    assert 0 < failure["written"] < failure["expected"]
    assert out["after_failure"] == out["before"]  # tree and file as before the failed append
    objs = line_objs(path)  # every line parses: nothing glued
    assert [o["id"] for o in objs[1:]] == [*ids, out["next_id"]]
    with open_session(path, strict=True) as again:
        assert again.entry_ids() == [*ids, out["next_id"]]
        assert again.get_entry(out["next_id"]).parent_id == ids[-1]
    assert not torn_file(path).exists()


async def test_a_failed_write_raises_write_failed_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, path, ids = await make_session(tmp_path)
    real_write = os.write

    def no_space(fd: int, data: bytes) -> int:
        if b"doomed" in data:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", no_space)
    with await repo.open(path) as s:
        before = path.read_bytes()
        with pytest.raises(SessionWriteError) as info:
            s.append_message(user("doomed"))
        err = info.value
        assert err.code == "write_failed" and isinstance(err, OSError)
        assert (err.path, err.written, err.errno) == (path, 0, errno.ENOSPC)
        assert isinstance(err.__cause__, OSError)
        assert len(s) == len(ids) and s.leaf_id == ids[-1]
        assert path.read_bytes() == before
        after = s.append_message(user("fine")).id
    with open_session(path, strict=True) as again:
        assert again.entry_ids() == [*ids, after]


async def test_a_fragment_that_could_not_be_taken_back_is_set_aside_before_the_next_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, path, ids = await make_session(tmp_path)
    real_write = os.write
    written: list[bytes] = []

    def short(fd: int, data: bytes) -> int:
        if b"doomed" in data:
            written.append(data[:40])
            return real_write(fd, data[:40])
        return real_write(fd, data)

    def cannot_truncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    with await repo.open(path) as s:
        s.append_message(user("warm up: the first append is already done"))
        with monkeypatch.context() as m:
            m.setattr(os, "write", short)
            m.setattr(os, "ftruncate", cannot_truncate)
            with pytest.raises(SessionWriteError) as info:
                s.append_message(user("doomed"))
        assert (info.value.written, info.value.code) == (40, "write_failed")
        assert not path.read_bytes().endswith(b"\n")  # the fragment stayed
        after = s.append_message(user("after"))
        assert "torn_tail_set_aside" in [d.code for d in s.diagnostics]
    assert torn_file(path).read_bytes() == written[0] + b"\n"
    objs = line_objs(path)
    assert objs[-1]["id"] == after.id
    with open_session(path, strict=True) as again:
        assert len(again.entry_ids()) == len(ids) + 2
        assert again.get_entry(after.id).parent_id == objs[-2]["id"]


async def test_an_append_never_glues_onto_a_fragment_left_after_the_first_append(
    tmp_path: Path,
) -> None:
    repo, path, ids = await make_session(tmp_path)
    with await repo.open(path) as s:
        first = s.append_message(user("one")).id
        with open(path, "ab") as f:  # another writer died mid-line
            f.write(b'{"type":"message","id":"0badf00d","parentId":"')
        second = s.append_message(user("two")).id
        assert [d.code for d in s.diagnostics] == ["torn_tail_set_aside"]
    with open_session(path, strict=True) as again:
        assert again.entry_ids() == [*ids, first, second]
        assert "0badf00d" not in again


# --- 3. .torn files --------------------------------------------------------------------------


async def test_torn_files_are_private_and_keep_fragments_apart(tmp_path: Path) -> None:
    repo, path, _ = await make_session(tmp_path)
    fragments = [b'{"type":"message","id":"SECRET partial', b'{"type":"cus']
    for fragment in fragments:
        with open(path, "ab") as f:
            f.write(fragment)
        with await repo.open(path) as s:
            s.append_message(user("next"))
    torn = torn_file(path)
    assert stat.S_IMODE(torn.stat().st_mode) == 0o600
    assert torn.read_bytes().splitlines() == fragments
    assert torn.read_bytes().endswith(b"\n")


# --- 4. session ids --------------------------------------------------------------------------

REFUSED_IDS = ["a\n", "a" * 128 + "\n", "abc\n\n", "abc.jsonl", "x.y.jsonl"]


@pytest.mark.parametrize("bad", REFUSED_IDS)
async def test_ids_with_a_trailing_newline_or_a_jsonl_ending_are_refused(
    bad: str, repo: Repo
) -> None:
    with pytest.raises(InvalidSessionIdError) as info:
        validate_session_id(bad)
    assert info.value.code == "invalid_session_id"
    with pytest.raises(InvalidSessionIdError):
        await repo.create("/w", session_id=bad)
    source = await repo.create("/w")
    with pytest.raises(InvalidSessionIdError):
        await repo.fork(source.id, session_id=bad)
    assert [i.id for i in await repo.list()] == [source.id]
    assert validate_session_id("abc.jsonl.bak") == "abc.jsonl.bak"


# --- 5. concurrent creates in one process ----------------------------------------------------


async def test_concurrent_creates_and_forks_of_one_id_publish_one_file(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    source = await repo.create("/src", session_id="source")
    for i in range(15):
        sid = f"same{i}"
        results = await asyncio.gather(
            *[repo.create(f"/w{j}", session_id=sid) for j in range(4)],
            *[repo.fork("source", session_id=sid, cwd=f"/f{j}") for j in range(2)],
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException)]
        lost = [r for r in results if isinstance(r, BaseException)]
        assert len(won) == 1
        assert all(isinstance(e, SessionExistsError) and e.code == "session_exists" for e in lost)
        assert len(list((tmp_path / "root").glob(f"*/*_{sid}.jsonl"))) == 1
        with await repo.open(sid) as s:
            assert s.id == sid
        for s in won:
            s.close()
    source.close()


# --- 6. forks at leaf entries; strict forks leave nothing behind ----------------------------


@pytest.mark.parametrize("position", ["at", "before"])
async def test_fork_at_a_leaf_entry_is_refused(repo: Repo, position: str) -> None:
    s = await repo.create("/w")
    a = s.append_message(user("a"))
    b = s.append_message(user("b"))
    c = s.append_message(user("c"))
    move = s.move_to(b.id)  # parented on c; its target b is not on c's side of the path
    s.append_message(user("d"))
    files = every_file(repo.root) if isinstance(repo, JsonlSessionRepo) else []
    with pytest.raises(InvalidForkTargetError) as info:
        await repo.fork(s.id, entry_id=move.id, position=position)  # type: ignore[arg-type]
    assert info.value.code == "invalid_fork_target" and info.value.entry_id == move.id
    assert len(await repo.list()) == 1
    if isinstance(repo, JsonlSessionRepo):
        assert every_file(repo.root) == files
    # A leaf moved onto a leaf entry is refused too; its target is the content to fork at.
    s.move_to(move.id)
    with pytest.raises(InvalidForkTargetError):
        await repo.fork(s.id)
    with await repo.fork(s.id, entry_id=c.id, position="at") as fork:
        assert fork.entry_ids() == [a.id, b.id, c.id]
    s.close()


async def test_a_strict_fork_that_fails_its_read_back_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    with await JsonlSessionRepo(root).create("/w", session_id="src") as s:
        s.append_message(user("a"))

    def dangling(*args: Any, **kwargs: Any) -> tuple[list[str], list[bytes]]:
        ids, lines = fork_plan(*args, **kwargs)
        bad = {"type": "custom", "id": "0000dead", "parentId": "ffffffff", "customType": "x"}
        return ids, [*lines, orjson.dumps(bad) + b"\n"]

    monkeypatch.setattr("repos._jsonl.repo.fork_plan", dangling)
    before = sorted(root.rglob("*"))
    with pytest.raises(CorruptSessionError) as info:
        await JsonlSessionRepo(root, strict=True).fork("src", session_id="f1", cwd="/new")
    assert info.value.code == "corrupt_session"
    assert sorted(root.rglob("*")) == before  # no fork, no temp file, no new folder
    # Recover mode publishes it, re-attached, and opens it once.
    with await JsonlSessionRepo(root).fork("src", session_id="f2") as fork:
        assert "orphan_reattached" in [d.code for d in fork.diagnostics]
        assert fork.path is not None and fork.path.is_file()


# --- 7. header versions ----------------------------------------------------------------------

BAD_VERSIONS = [b'"3"', b"3.0", b"true", b"false", b"null", b"0", b"-1", b"4", b"99", b"[3]"]


@pytest.mark.parametrize("version", BAD_VERSIONS)
async def test_an_unsupported_header_version_is_corrupt_not_v1(
    tmp_path: Path, version: bytes
) -> None:
    repo, path, _ = await make_session(tmp_path)
    data = path.read_bytes()
    assert data.count(b'"version":3,') == 1
    path.write_bytes(data.replace(b'"version":3,', b'"version":' + version + b",", 1))
    before = path.read_bytes()
    for strict in (False, True):
        with pytest.raises(CorruptSessionError) as info:
            open_session(path, strict=strict)
        err = info.value
        assert (err.code, err.path, err.line, err.offset) == ("corrupt_session", path, 1, 0)
        assert version.decode() in err.reason
    with pytest.raises(CorruptSessionError):
        await repo.open(path)
    assert await repo.list() == []
    assert [p for p, _ in repo.list_problems] == [path]
    assert path.read_bytes() == before  # never rewritten
    assert not list(path.parent.glob("*.bak"))


@pytest.mark.parametrize("version", [None, 1, 2, 3])
def test_supported_header_versions_are_read(tmp_path: Path, version: int | None) -> None:
    header: dict[str, Any] = {"type": "session", "id": "s", "timestamp": "t", "cwd": "/w"}
    if version is not None:
        header["version"] = version
    path = tmp_path / "s.jsonl"
    path.write_bytes(orjson.dumps(header) + b"\n")
    with open_session(path, strict=True) as s:
        assert s.header.version == (version or 1)


# --- 8. bad input gives coded errors, not tracebacks -----------------------------------------


async def test_deleting_a_folder_by_id_or_path_is_a_coded_error(tmp_path: Path) -> None:
    root = tmp_path / "root"
    repo = JsonlSessionRepo(root)
    by_id = root / "--d--" / "2025-01-01T00-00-00-000Z_dirid.jsonl"
    by_path = root / "x.jsonl"
    by_id.mkdir(parents=True)
    by_path.mkdir()
    for ref in ("dirid", by_path, str(by_path)):
        with pytest.raises(SessionNotFoundError) as info:
            await repo.delete(ref)
        assert info.value.code == "session_not_found"
    assert by_id.is_dir() and by_path.is_dir()


async def test_file_system_errors_on_create_and_fork_are_storage_errors(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    long_cwd = "/" + "d" * 300  # a folder name longer than NAME_MAX
    with pytest.raises(StorageError) as info:
        await repo.create(long_cwd)
    err = info.value
    assert err.code == "storage_error" and isinstance(err, OSError)
    assert err.errno == errno.ENAMETOOLONG
    assert isinstance(err.__cause__, OSError) and not isinstance(err.__cause__, StorageError)
    with await repo.create("/w", session_id="src") as s:
        s.append_message(user("a"))
    with pytest.raises(StorageError) as info:
        await repo.fork("src", cwd=long_cwd)
    assert info.value.errno == errno.ENAMETOOLONG
    assert [i.id for i in await repo.list()] == ["src"]

    # A file where the root folder should be: a storage error, not "session exists".
    (tmp_path / "file-root").write_bytes(b"")
    with pytest.raises(StorageError) as info:
        await JsonlSessionRepo(tmp_path / "file-root").create("/w")
    assert info.value.code == "storage_error"


@pytest.mark.parametrize("cwd", ["\x00", "/a\x00b", "/lone\ud800surrogate"])
async def test_a_cwd_that_cannot_be_stored_is_a_coded_error(repo: Repo, cwd: str) -> None:
    with pytest.raises(InvalidSessionIdError) as info:
        await repo.create(cwd)
    assert info.value.code == "invalid_session_id"
    source = await repo.create("/w")
    with pytest.raises(InvalidSessionIdError):
        await repo.fork(source.id, cwd=cwd)
    assert len(await repo.list()) == 1
    source.close()


async def test_deleting_an_unresolvable_path_is_a_coded_error(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    with pytest.raises(InvalidSessionIdError):
        await repo.delete(str(tmp_path / "root" / "a\x00.jsonl"))


# --- 9. the list cache and in-place rewrites -------------------------------------------------


def _rewrite_in_place(path: Path, change: Any) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    new = [lines[0]]
    for i, raw in enumerate(lines[1:]):
        obj = orjson.loads(raw)
        change(i, obj)
        new.append(orjson.dumps(obj) + b"\n")
    inode = path.stat().st_ino
    with open(path, "r+b") as f:
        f.write(b"".join(new))
        f.truncate()
    assert path.stat().st_ino == inode


async def test_list_notices_an_in_place_rewrite_that_keeps_the_inode_and_grows(
    tmp_path: Path,
) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    with await repo.create("/w") as s:
        for i in range(3):
            s.append_message(user(f"original {i}"))
        path = s.path
    assert path is not None
    [info] = await repo.list()
    assert info.first_message == "original 0"

    def longer(i: int, obj: dict[str, Any]) -> None:
        obj["message"]["content"] = f"REWRITTEN {i} " + "z" * 50

    _rewrite_in_place(path, longer)
    [info] = await repo.list()
    assert info.first_message.startswith("REWRITTEN 0")
    assert info.message_count == 3


async def test_list_notices_a_grown_rewrite_past_the_first_4_kib(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    with await repo.create("/w") as s:
        for i in range(60):
            s.append_message(user(f"message {i:03d} " + "p" * 100))
        s.set_name("old name")
        path = s.path
    assert path is not None
    assert path.stat().st_size > 3 * 4096
    [info] = await repo.list()
    assert info.name == "old name"

    def rename(i: int, obj: dict[str, Any]) -> None:
        if obj["type"] == "session_info":
            obj["name"] = "a new, longer name"

    _rewrite_in_place(path, rename)
    [info] = await repo.list()
    assert info.name == "a new, longer name"
    assert info.message_count == 60


# --- 10. a new cwd folder is durable ---------------------------------------------------------


async def test_creating_a_cwd_folder_fsyncs_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    synced: list[tuple[int, int]] = []
    real_fsync = os.fsync

    def recording(fd: int) -> None:
        st = os.fstat(fd)
        synced.append((st.st_dev, st.st_ino))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    repo = JsonlSessionRepo(root)
    root_id = (root.stat().st_dev, root.stat().st_ino)

    with await repo.create("/new/cwd", session_id="one") as s:
        s.append_message(user("a"))
    assert root_id in synced

    synced.clear()
    with await repo.fork("one", cwd="/another", session_id="two"):
        pass
    assert root_id in synced

    synced.clear()
    with await repo.create("/new/cwd", session_id="three"):
        pass
    folder = root / "--new-cwd--"
    assert (folder.stat().st_dev, folder.stat().st_ino) in synced
    assert root_id not in synced  # the folder existed: nothing new in the root


async def test_creating_the_root_itself_fsyncs_its_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[tuple[int, int]] = []
    real_fsync = os.fsync

    def recording(fd: int) -> None:
        st = os.fstat(fd)
        synced.append((st.st_dev, st.st_ino))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    root = tmp_path / "deep" / "root"
    with await JsonlSessionRepo(root).create("/w"):
        pass
    for folder in (tmp_path, tmp_path / "deep", root):
        assert (folder.stat().st_dev, folder.stat().st_ino) in synced
