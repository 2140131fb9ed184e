"""Repositories: create, open, list, delete and fork, over JSONL files and memory (DESIGN §4)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import orjson
import pi_sessions
import pytest

import repos._jsonl.repo as jsonl_repo_module
from hooks import AssistantMessage, TextContent, UserMessage
from repos import (
    CorruptSessionError,
    InvalidForkTargetError,
    InvalidSessionIdError,
    JsonlSessionRepo,
    MemorySessionRepo,
    Session,
    SessionExistsError,
    SessionNotFoundError,
    SessionRepo,
    build_context,
    open_session,
)

Repo = JsonlSessionRepo | MemorySessionRepo
BAD_IDS = ["../x", "a/b", "", ".hidden", "x" * 129, "..", "a\\b", "a b"]


def user(text: str, ts: int | None = None) -> UserMessage:
    return UserMessage(content=text) if ts is None else UserMessage(content=text, timestamp=ts)


def reply(text: str, ts: int | None = None) -> AssistantMessage:
    content = [TextContent(text=text)]
    if ts is None:
        return AssistantMessage(content=content, provider="anthropic", model="m")
    return AssistantMessage(content=content, provider="anthropic", model="m", timestamp=ts)


def digest(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def line_objs(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def assert_parents_resolve(path: Path) -> None:
    objs = line_objs(path)
    assert objs[0]["type"] == "session"
    seen: set[str] = set()
    for o in objs[1:]:
        assert isinstance(o.get("id"), str) and "parentId" in o, o
        assert o["parentId"] is None or o["parentId"] in seen, o
        assert o["id"] not in seen
        seen.add(o["id"])


def expected_folder(cwd: str) -> str:
    """pi's encoding, written out independently of the code under test."""
    trimmed = cwd[1:] if cwd.startswith(("/", "\\")) else cwd
    for sep in "/\\:":
        trimmed = trimmed.replace(sep, "-")
    return f"--{trimmed}--"


@pytest.fixture(params=["jsonl", "memory"])
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> Repo:
    if request.param == "jsonl":
        return JsonlSessionRepo(tmp_path / "root")
    return MemorySessionRepo()


def test_both_repos_satisfy_the_protocol(tmp_path: Path) -> None:
    assert isinstance(JsonlSessionRepo(tmp_path), SessionRepo)
    assert isinstance(MemorySessionRepo(), SessionRepo)


# --- create ----------------------------------------------------------------------------------


async def test_create_refuses_a_taken_id(repo: Repo) -> None:
    first = await repo.create("/w", session_id="taken")
    first.append_message(user("keep me"))
    for cwd in ("/w", "/elsewhere"):
        with pytest.raises(SessionExistsError) as info:
            await repo.create(cwd, session_id="taken")
        assert info.value.code == "session_exists"
        assert info.value.session_id == "taken"
    with await repo.open("taken") as again:
        assert len(again) == 1


async def test_create_names_the_file_like_pi(tmp_path: Path) -> None:
    root = tmp_path / "root"
    repo = JsonlSessionRepo(root)
    cwd = "/home/user/my.project/sub"
    with await repo.create(cwd, session_id="abc-123") as s:
        path = s.path
        header = s.header
    assert path is not None
    assert path.parent.parent == root
    assert path.parent.name == expected_folder(cwd) == "--home-user-my.project-sub--"
    stamp, _, rest = path.name.partition("_")
    assert rest == "abc-123.jsonl"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z", stamp)
    assert stamp == header.timestamp.replace(":", "-").replace(".", "-")
    objs = line_objs(path)
    assert len(objs) == 1
    assert objs[0]["type"] == "session" and objs[0]["version"] == 3
    assert objs[0]["id"] == "abc-123" == header.id
    assert objs[0]["cwd"] == cwd


async def test_create_default_id_matches_its_file_name(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    with await repo.create("/w") as s:
        assert s.path is not None
        assert s.path.name.partition("_")[2] == f"{s.id}.jsonl"
        assert line_objs(s.path)[0]["id"] == s.id
    with await repo.open(s.id) as again:
        assert again.id == s.id


async def test_ids_sharing_a_suffix_do_not_shadow_each_other(repo: Repo) -> None:
    # File names are `<stamp>_<id>.jsonl` and ids may hold "_": "b" must not find "a_b".
    with await repo.create("/w", session_id="a_b") as ab:
        ab.append_message(user("in a_b"))
    with await repo.create("/w", session_id="b") as b:
        assert b.id == "b"
    with await repo.open("b") as b2:
        assert b2.id == "b" and len(b2) == 0
    with await repo.open("a_b") as ab2:
        assert ab2.id == "a_b" and len(ab2) == 1
    await repo.delete("b")
    with pytest.raises(SessionNotFoundError):
        await repo.open("b")
    with await repo.open("a_b") as ab3:
        assert len(ab3) == 1


# --- ids and paths ---------------------------------------------------------------------------


def _outside_session(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "2025-01-01T00-00-00-000Z_outside.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(
        orjson.dumps(
            {"type": "session", "version": 3, "id": "outside", "timestamp": "t", "cwd": "/o"}
        )
        + b"\n"
    )
    return path


@pytest.mark.parametrize("bad", BAD_IDS)
async def test_bad_ids_are_refused_before_any_file_is_touched(bad: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    source = _outside_session(tmp_path)
    source_before = digest(source)
    for make in (lambda: JsonlSessionRepo(root), MemorySessionRepo):
        repo = make()
        calls = [
            lambda r=repo: r.create("/w", session_id=bad),
            lambda r=repo: r.open(bad),
            lambda r=repo: r.delete(bad),
            lambda r=repo: r.fork(bad),
        ]
        if isinstance(repo, JsonlSessionRepo):
            calls.append(lambda r=repo: r.fork(source, session_id=bad))
        for call in calls:
            with pytest.raises(InvalidSessionIdError) as info:
                await call()
            assert info.value.code == "invalid_session_id"
        assert not root.exists()
    assert digest(source) == source_before


async def test_longest_valid_id_is_accepted(repo: Repo) -> None:
    sid = "A" + "b._-9" * 25 + "zz"
    assert len(sid) == 128
    with await repo.create("/w", session_id=sid) as s:
        assert s.id == sid
    with await repo.open(sid) as again:
        assert again.id == sid


async def test_delete_refuses_paths_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    repo = JsonlSessionRepo(root)
    inside = await repo.create("/w")
    inside.close()
    outside = _outside_session(tmp_path)
    before = digest(outside)
    sneaky = root / "--w--" / ".." / ".." / "outside" / outside.name
    for ref in (outside, str(outside), str(sneaky), sneaky):
        with pytest.raises(InvalidSessionIdError) as info:
            await repo.delete(ref)
        assert info.value.code == "invalid_session_id"
    assert digest(outside) == before


async def test_symlink_inside_the_root_pointing_outside_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    repo = JsonlSessionRepo(root)
    (await repo.create("/w", session_id="honest")).close()
    outside = _outside_session(tmp_path)
    before = digest(outside)
    link = root / "--w--" / "2025-01-01T00-00-00-000Z_evil.jsonl"
    link.symlink_to(outside)
    for call in (
        lambda: repo.delete(link),
        lambda: repo.delete(str(link)),
        lambda: repo.delete("evil"),
        lambda: repo.open("evil"),
    ):
        with pytest.raises(InvalidSessionIdError) as info:
            await call()
        assert info.value.code == "invalid_session_id"
    infos = await repo.list()
    assert [i.id for i in infos] == ["honest"]
    assert link in [p for p, _ in repo.list_problems]
    assert digest(outside) == before
    assert link.is_symlink()


async def test_delete_is_idempotent(repo: Repo) -> None:
    s = await repo.create("/w", session_id="doomed")
    s.close()
    await repo.delete("never-existed")
    await repo.delete("doomed")
    await repo.delete("doomed")
    with pytest.raises(SessionNotFoundError) as info:
        await repo.open("doomed")
    assert info.value.code == "session_not_found"
    assert [i.id for i in await repo.list()] == []


async def test_delete_by_path_removes_the_file(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    with await repo.create("/w") as s:
        path = s.path
    assert path is not None and path.exists()
    await repo.delete(path)
    assert not path.exists()
    await repo.delete(path)


# --- list ------------------------------------------------------------------------------------


def _ms(dt: datetime) -> int:
    return round(dt.timestamp() * 1000)


def _expected_info(path: Path) -> dict[str, Any]:
    """What list must report for a pi file, computed straight from its lines."""
    objs = line_objs(path)
    header = objs[0]
    messages = [o["message"] for o in objs[1:] if o["type"] == "message"]
    active = [m["timestamp"] for m in messages if m["role"] in ("user", "assistant")]
    first_user = next(m for m in messages if m["role"] == "user")
    content = first_user["content"]
    text = (
        content
        if isinstance(content, str)
        else "\n".join(b["text"] for b in content if b.get("type") == "text")
    )
    return {
        "id": header["id"],
        "cwd": header["cwd"],
        "created": datetime.fromisoformat(header["timestamp"].replace("Z", "+00:00")),
        "modified_ms": max(active),
        "first_ms": min(active),
        "message_count": len(messages),
        "first_message": text,
        # the last session_info entry names the session (none in v1 files)
        "name": next((o["name"] for o in reversed(objs) if o["type"] == "session_info"), None),
    }


PI_KINDS = ("before-compaction", "large-session", "v2", "v3")


@pytest.fixture
def pi_root(tmp_path: Path) -> tuple[JsonlSessionRepo, dict[str, Path]]:
    """A root holding generated pi sessions under `--x--`, named like pi names them."""
    root = tmp_path / "root"
    folder = root / "--x--"
    folder.mkdir(parents=True)
    paths = {}
    for name in PI_KINDS:
        data = pi_sessions.generate(name).data
        header = orjson.loads(data.split(b"\n", 1)[0])
        stamp = header["timestamp"].replace(":", "-").replace(".", "-")
        path = folder / f"{stamp}_{header['id']}.jsonl"
        path.write_bytes(data)
        paths[name] = path
    return JsonlSessionRepo(root), paths


async def test_list_reports_pi_sessions(pi_root: tuple[JsonlSessionRepo, dict[str, Path]]) -> None:
    repo, paths = pi_root
    infos = await repo.list()
    assert repo.list_problems == ()
    by_path = {i.path: i for i in infos}
    assert set(by_path) == set(paths.values())
    for path in paths.values():
        info, want = by_path[path], _expected_info(path)
        assert info.id == want["id"]
        assert info.cwd == want["cwd"]
        assert info.name == want["name"]
        assert info.parent_session is None
        assert info.created == want["created"]
        assert info.created.tzinfo is not None and info.modified.tzinfo is not None
        assert _ms(info.modified) == want["modified_ms"]
        assert info.message_count == want["message_count"]
        assert info.first_message == want["first_message"]
    # large-session's header was rewritten after its first entries: activity comes from the
    # messages, never from the header.
    large, want = (
        by_path[paths["large-session"]],
        _expected_info(paths["large-session"]),
    )
    assert want["first_ms"] < _ms(large.created)
    assert _ms(large.modified) == want["modified_ms"] != _ms(large.created)
    assert [i.modified for i in infos] == sorted((i.modified for i in infos), reverse=True)
    # Listing read, never wrote.
    for name, path in paths.items():
        assert path.read_bytes() == pi_sessions.generate(name).data


async def test_list_filters_on_the_exact_cwd_even_when_folders_collide(repo: Repo) -> None:
    one = await repo.create("/a/b-c", session_id="one")
    two = await repo.create("/a-b/c", session_id="two")
    if isinstance(repo, JsonlSessionRepo):
        assert one.path is not None and two.path is not None
        assert one.path.parent == two.path.parent  # pi's lossy encoding
    assert [i.id for i in await repo.list(cwd="/a/b-c")] == ["one"]
    assert [i.id for i in await repo.list(cwd="/a-b/c")] == ["two"]
    assert [i.id for i in await repo.list(cwd="/a/b")] == []
    assert sorted(i.id for i in await repo.list()) == ["one", "two"]


async def test_list_fields_follow_appends_and_deletes(repo: Repo) -> None:
    s = await repo.create("/w", session_id="s1")
    other = await repo.create("/w", session_id="s2")
    [info] = [i for i in await repo.list() if i.id == "s1"]
    assert info.message_count == 0 and info.first_message == "" and info.name is None
    assert info.modified == info.created
    assert info.cwd == "/w"

    s.append_message(user("first question", ts=1_700_000_000_000))
    s.append_message(reply("answer", ts=1_700_000_005_000))
    s.append_custom("state", {"x": 1})
    s.set_name("Named")
    [info] = [i for i in await repo.list() if i.id == "s1"]
    assert info.message_count == 2
    assert info.first_message == "first question"
    assert info.name == "Named"
    assert _ms(info.modified) == 1_700_000_005_000

    s.append_message(user("second", ts=1_700_000_009_000))
    [info] = [i for i in await repo.list() if i.id == "s1"]
    assert info.message_count == 3
    assert info.first_message == "first question"
    assert _ms(info.modified) == 1_700_000_009_000

    s.close()
    other.close()
    await repo.delete("s2")
    assert [i.id for i in await repo.list()] == ["s1"]


async def test_list_reads_only_what_was_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    s = await repo.create("/w")
    for i in range(5):
        s.append_message(user(f"m{i}"))
    seen: list[bytes] = []
    real = jsonl_repo_module._accumulate

    def counting(state: Any, raw: bytes, **kwargs: Any) -> None:
        seen.append(raw)
        real(state, raw, **kwargs)

    def contents() -> list[str]:
        return [orjson.loads(x)["message"]["content"] for x in seen]

    monkeypatch.setattr(jsonl_repo_module, "_accumulate", counting)
    [info] = await repo.list()
    # Lines are counted by byte scans; only the first user message and the last one are parsed.
    assert info.message_count == 5 and contents() == ["m0", "m4"]
    assert info.first_message == "m0"
    seen.clear()
    [info] = await repo.list()
    assert seen == []  # unchanged file: nothing read
    s.append_message(user("m5"))
    s.append_message(user("m6"))
    [info] = await repo.list()
    assert info.message_count == 7 and info.first_message == "m0"
    assert contents() == ["m6"]  # only what was appended is looked at
    s.close()


async def test_list_waits_for_a_partial_line_to_be_completed(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    with await repo.create("/w") as s:
        s.append_message(user("one"))
        path = s.path
    assert path is not None
    line = orjson.dumps(
        {
            "type": "message",
            "id": "aaaa0002",
            "parentId": None,
            "timestamp": "2025-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": "two", "timestamp": 5},
        }
    )
    with open(path, "ab") as f:
        f.write(line[:30])
    [info] = await repo.list()
    assert info.message_count == 1
    with open(path, "ab") as f:
        f.write(line[30:] + b"\n")
    [info] = await repo.list()
    assert info.message_count == 2


async def test_list_rereads_a_file_rewritten_by_migration(
    pi_root: tuple[JsonlSessionRepo, dict[str, Path]],
) -> None:
    repo, paths = pi_root
    path = paths["large-session"]
    before = {i.path: i for i in await repo.list()}[path]
    with await repo.open(path) as s:
        s.append_message(user("after migration", ts=1_900_000_000_000))
        assert "migrated" in [d.code for d in s.diagnostics]
    after = {i.path: i for i in await repo.list()}[path]
    assert after.message_count == before.message_count + 1
    assert after.first_message == before.first_message
    assert _ms(after.modified) == 1_900_000_000_000
    # The backup beside it is not a session of its own.
    assert len(await repo.list()) == len(paths)


async def test_list_skips_and_reports_files_without_a_valid_header(tmp_path: Path) -> None:
    root = tmp_path / "root"
    repo = JsonlSessionRepo(root)
    good = await repo.create("/w", session_id="good")
    good.close()
    folder = root / "--w--"
    garbage = folder / "2025-01-01T00-00-00-000Z_garbage.jsonl"
    garbage.write_bytes(b"this is not json\n")
    headless = folder / "2025-01-01T00-00-00-000Z_headless.jsonl"
    headless.write_bytes(b'{"type":"message","id":"aaaa0001","parentId":null}\n')
    torn = folder / "2025-01-01T00-00-00-000Z_torn.jsonl"
    torn.write_bytes(b'{"type":"session","id":"torn"')
    infos = await repo.list()
    assert [i.id for i in infos] == ["good"]
    assert {p for p, _ in repo.list_problems} == {garbage, headless, torn}
    assert all(reason for _, reason in repo.list_problems)
    # open agrees that they are not sessions.
    with pytest.raises(CorruptSessionError):
        await repo.open(garbage)
    garbage.unlink()
    await repo.list()
    assert {p for p, _ in repo.list_problems} == {headless, torn}


# --- fork ------------------------------------------------------------------------------------


async def _source(repo: Repo) -> tuple[Session, dict[str, str]]:
    """u1 - a1 - u2 - a2            (active, leaf a2)
              \\ u3 - a3 - label(u1, "from-side")
    plus a name set on the side branch."""
    s = await repo.create("/src", session_id="source")
    ids: dict[str, str] = {}
    ids["u1"] = s.append_message(user("u1")).id
    ids["a1"] = s.append_message(reply("a1")).id
    ids["u2"] = s.append_message(user("u2")).id
    ids["a2"] = s.append_message(reply("a2")).id
    s.move_to(ids["a1"])
    ids["u3"] = s.append_message(user("u3")).id
    ids["a3"] = s.append_message(reply("a3")).id
    s.set_label(ids["u1"], "from-side")
    s.set_name("Source name")
    s.move_to(ids["a2"])
    return s, ids


def _branch_ids(s: Session) -> list[str]:
    return [e.id for e in s.get_branch()]


async def _reopen(repo: Repo, s: Session) -> Session:
    s.close()
    return await repo.open(s.path if isinstance(repo, JsonlSessionRepo) and s.path else s.id)


def _check_fork_file(repo: Repo, fork: Session, source: Session) -> None:
    if not isinstance(repo, JsonlSessionRepo):
        assert fork.header.parent_session == source.id
        return
    assert fork.path is not None and source.path is not None
    assert fork.path.parent.parent == repo.root
    objs = line_objs(fork.path)
    assert objs[0]["version"] == 3
    assert objs[0]["id"] == fork.id
    assert fork.path.name.partition("_")[2] == f"{fork.id}.jsonl"
    assert objs[0]["parentSession"] == str(source.path.resolve())
    assert_parents_resolve(fork.path)


@pytest.mark.parametrize(
    ("kwargs", "expected_path", "expected_leaf"),
    [
        ({}, ["u1", "a1", "u2", "a2"], "a2"),  # no entry: at the leaf
        ({"entry_id": "u2"}, ["u1", "a1"], "a1"),  # entry given: before it
        ({"entry_id": "u2", "position": "before"}, ["u1", "a1"], "a1"),
        ({"entry_id": "u2", "position": "at"}, ["u1", "a1", "u2"], "u2"),
        ({"entry_id": "a3", "position": "at"}, ["u1", "a1", "u3", "a3"], "a3"),
        ({"entry_id": "u1"}, [], None),  # before the first entry
    ],
)
async def test_fork_branch_scope(
    repo: Repo, kwargs: dict[str, Any], expected_path: list[str], expected_leaf: str | None
) -> None:
    source, ids = await _source(repo)
    if "entry_id" in kwargs:
        kwargs = {**kwargs, "entry_id": ids[kwargs["entry_id"]]}
    source_bytes = digest(source.path) if source.path else None
    want_path = [ids[k] for k in expected_path]
    want_labels = {k: v for k, v in source.labels.items() if k in want_path}

    fork = await repo.fork("source", **kwargs)
    assert fork.id != source.id
    assert fork.leaf_id == (ids[expected_leaf] if expected_leaf else None)
    assert _branch_ids(fork) == want_path
    assert fork.labels == want_labels
    assert fork.name == "Source name"
    assert fork.header.cwd == "/src"
    for entry_id in want_path:
        assert fork.get_entry(entry_id) == source.get_entry(entry_id)
    # Only the chosen branch was copied.
    assert set(want_path) <= set(fork.entry_ids())
    assert not (set(ids.values()) - set(want_path)) & set(fork.entry_ids())
    _check_fork_file(repo, fork, source)
    if source_bytes is not None:
        assert source.path is not None and digest(source.path) == source_bytes

    again = await _reopen(repo, fork)
    with again:
        assert again.leaf_id == fork.leaf_id
        assert _branch_ids(again) == want_path
        assert again.labels == want_labels
        assert again.name == "Source name"
        assert again.build_context() == build_context([source.get_entry(i) for i in want_path])
        appended = again.append_message(user("continue in the fork"))
        assert appended.parent_id == fork.leaf_id
    source.close()


async def test_fork_keeps_labels_as_the_source_has_them(repo: Repo) -> None:
    s = await repo.create("/w", session_id="labels")
    u1 = s.append_message(user("u1"))
    s.set_label(u1.id, "on-path")  # a label entry on the copied path
    a1 = s.append_message(reply("a1"))
    s.move_to(u1.id)
    s.set_label(u1.id, None)  # ...cleared from another branch
    s.set_label(a1.id, "later")  # a label entry whose target is on another branch
    leaf = s.leaf_id
    assert s.labels == {a1.id: "later"}
    fork = await repo.fork("labels")
    assert fork.leaf_id == leaf
    assert u1.id in fork and a1.id not in fork
    assert fork.labels == {}
    assert all(target in fork for target in fork.labels)
    again = await _reopen(repo, fork)
    with again:
        assert again.labels == {}
        assert again.leaf_id == leaf
    s.close()


async def test_fork_tree_scope_copies_everything(repo: Repo) -> None:
    source, _ids = await _source(repo)
    fork = await repo.fork("source", scope="tree")
    assert fork.entry_ids() == source.entry_ids()
    assert fork.leaf_id == source.leaf_id
    assert fork.labels == source.labels
    assert fork.name == source.name
    assert _branch_ids(fork) == _branch_ids(source)
    for entry_id in source.entry_ids():
        assert fork.get_entry(entry_id) == source.get_entry(entry_id)
    _check_fork_file(repo, fork, source)
    fork.close()
    source.close()


async def test_fork_refuses_bad_targets(repo: Repo) -> None:
    source, ids = await _source(repo)
    before = [i.id for i in await repo.list()]
    for kwargs in (
        {"entry_id": "deadbeef"},
        {"entry_id": "deadbeef", "position": "at"},
        {"entry_id": ids["u2"], "scope": "tree"},
    ):
        with pytest.raises(InvalidForkTargetError) as info:
            await repo.fork("source", **kwargs)  # type: ignore[arg-type]
        assert info.value.code == "invalid_fork_target"
    assert [i.id for i in await repo.list()] == before
    with pytest.raises(SessionNotFoundError):
        await repo.fork("no-such-session")
    with pytest.raises(SessionExistsError):
        await repo.fork("source", session_id="source")
    source.close()


async def test_fork_of_a_new_empty_session(repo: Repo) -> None:
    (await repo.create("/w", session_id="empty")).close()
    fork = await repo.fork("empty")
    assert len(fork) == 0 and fork.leaf_id is None
    fork.append_message(user("hi"))
    assert fork.leaf_id is not None


def _fork_cases() -> list[tuple[str, int, Literal["at"] | None]]:
    """File lines to fork at, read off the generated sessions' records."""
    before = pi_sessions.generate("before-compaction")
    first, second = before.compaction_lines
    large = len(pi_sessions.generate("large-session").lines)
    return [
        ("before-compaction", (first + second) // 2, "at"),  # between the two compactions
        ("before-compaction", second + 1, "at"),  # just after the second
        ("before-compaction", len(before.lines) - 5, None),  # default: before the entry
        ("large-session", large // 2, "at"),
        ("large-session", 2, None),  # before the second line: only the first is kept
    ]


@pytest.mark.parametrize(("name", "line", "position"), _fork_cases())
async def test_fork_of_a_v1_file_at_an_entry(
    name: str,
    line: int,
    position: Literal["at"] | None,
    tmp_path: Path,
    pi_file: Callable[..., pi_sessions.PiSession],
) -> None:
    record = pi_file(name, name=f"{name}.jsonl")
    source_path = record.path
    assert source_path is not None
    original = record.data
    repo = JsonlSessionRepo(tmp_path / "root")
    with open_session(source_path) as source:
        entry_id = source.entry_ids()[line - 1]  # file line `line`, header = 0
        cut = entry_id if position == "at" else source.get_entry(entry_id).parent_id
        assert cut is not None
        want_branch = [e.id for e in source.get_branch(cut)]
        want_context = build_context(source.get_branch(cut))
    fork = await repo.fork(source_path, entry_id=entry_id, position=position)
    assert fork.path is not None
    assert _branch_ids(fork) == want_branch
    assert fork.build_context() == want_context
    fork.close()

    assert source_path.read_bytes() == original
    assert sorted(p.name for p in source_path.parent.iterdir()) == [source_path.name]
    objs = line_objs(fork.path)
    assert objs[0]["version"] == 3
    assert objs[0]["parentSession"] == str(source_path.resolve())
    assert all("firstKeptEntryIndex" not in o for o in objs[1:])
    assert_parents_resolve(fork.path)
    with open_session(fork.path, strict=True) as again:
        assert again.header.version == 3
        assert not again.diagnostics
        assert _branch_ids(again) == want_branch
        assert again.build_context() == want_context


async def test_forked_session_appends_to_its_own_file(tmp_path: Path) -> None:
    # pi #1242: after a fork, new entries went to the parent file.
    repo = JsonlSessionRepo(tmp_path / "root")
    source, _ids = await _source(repo)
    assert source.path is not None
    before = digest(source.path)
    fork = await repo.fork("source")
    assert fork.path is not None and fork.path.exists()
    n = len(line_objs(fork.path))
    fork.append_message(user("only in the fork"))
    assert len(line_objs(fork.path)) == n + 1
    assert digest(source.path) == before
    fork.close()
    source.close()


async def test_list_reports_a_forks_parent(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    source, _ids = await _source(repo)
    fork = await repo.fork("source")
    infos = {i.id: i for i in await repo.list()}
    assert source.path is not None
    assert infos[fork.id].parent_session == str(source.path.resolve())
    assert infos[fork.id].name == "Source name"
    assert infos["source"].parent_session is None
    fork.close()
    source.close()


def _summary_by_full_parse(path: Path) -> tuple[int, str, int | None, str | None]:
    """What list() reports, computed the slow way: every line parsed."""
    count, first, last, name = 0, "", None, None
    for raw in path.read_bytes().splitlines()[1:]:
        obj = orjson.loads(raw)
        if obj["type"] == "session_info":
            name = (obj.get("name") or "").strip() or None
        if obj["type"] != "message":
            continue
        count += 1
        message = obj["message"]
        if message["role"] not in ("user", "assistant"):
            continue
        last = message["timestamp"]
        content = message["content"]
        if message["role"] == "user" and not first:
            first = content if isinstance(content, str) else content[0]["text"]
    return count, first, last, name


@pytest.mark.parametrize("kind", sorted(pi_sessions.KINDS))
@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_list_by_byte_scans_agrees_with_a_full_parse(
    kind: str, seed: int, tmp_path: Path, pi_file: Callable[..., pi_sessions.PiSession]
) -> None:
    record = pi_file(kind, seed)
    assert record.path is not None
    root = tmp_path / "root"
    (root / "--w--").mkdir(parents=True)
    target = root / "--w--" / record.path.name
    target.write_bytes(record.path.read_bytes())
    [info] = await JsonlSessionRepo(root).list()
    count, first, last, name = _summary_by_full_parse(target)
    assert (info.message_count, info.first_message, info.name) == (count, first, name)
    if last is not None:
        assert int(info.modified.timestamp() * 1000) == last


@pytest.mark.parametrize("odd_line", [False, True], ids=["pi-key-order", "one-line-reordered"])
@pytest.mark.parametrize("pad", [0, 2000], ids=["short-lines", "long-lines"])
async def test_list_summarises_short_and_long_lines_alike(
    tmp_path: Path, pad: int, odd_line: bool
) -> None:
    """Short lines are counted by byte searches over the buffer, long ones line start by line
    start; a line whose keys are not in pi's order makes either parse every line."""
    root = tmp_path / "root"
    with await JsonlSessionRepo(root).create("/w") as s:
        for i in range(30):
            s.append_message(user(f"q{i} " + "x" * pad, ts=1_700_000_000_000 + 10 * i))
            s.append_custom("state", {"i": i})
            if i % 10 == 5:
                s.set_name(f"name {i}")
            s.append_message(reply(f"a{i}", ts=1_700_000_000_001 + 10 * i))
        path = s.path
    assert path is not None
    if odd_line:  # a user message with "type" after "id": not found by its head
        line = {
            "id": "zzzz0001",
            "type": "message",
            "parentId": None,
            "timestamp": "2025-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": "late", "timestamp": 1_800_000_000_000},
        }
        with open(path, "ab") as f:
            f.write(orjson.dumps(line) + b"\n")
    body = path.read_bytes().split(b"\n", 1)[1]
    assert jsonl_repo_module._long_lines(body, len(body)) is (pad > 0)  # both ways are tried
    [info] = await JsonlSessionRepo(root, list_cache=False).list()
    count, first, last, name = _summary_by_full_parse(path)
    assert (info.message_count, info.first_message, info.name) == (count, first, name)
    assert count == 60 + odd_line and name == "name 25" and first.startswith("q0 ")
    assert last is not None and _ms(info.modified) == last


@pytest.mark.parametrize("scope", ["branch", "tree"])
async def test_fork_from_an_open_session_equals_a_fork_from_its_path(
    tmp_path: Path, pi_file: Callable[..., pi_sessions.PiSession], scope: str
) -> None:
    record = pi_file("v3")
    assert record.path is not None
    repo = JsonlSessionRepo(tmp_path / "root")
    with open_session(record.path) as source:
        kwargs: dict[str, Any] = {"scope": scope}
        if scope == "branch":
            kwargs |= {"entry_id": source.get_branch()[len(source.get_branch()) // 2].id}
        by_path = await repo.fork(record.path, **kwargs)
        by_session = await repo.fork(source, **kwargs)
        assert not source.closed  # the caller's session stays open
        assert by_session.path is not None and by_path.path is not None
        if scope == "tree":  # every line copied as it is (a branch fork adds lines of its own)
            assert (
                by_session.path.read_bytes().splitlines()[1:]
                == (by_path.path.read_bytes().splitlines()[1:])
            )
        assert [e.id for e in by_session.get_branch()] == [e.id for e in by_path.get_branch()]
        assert by_session.build_context() == by_path.build_context()
        assert by_session.header.parent_session == str(record.path.resolve())
        reopened = await repo.open(by_session.path)
        assert reopened.build_context() == by_session.build_context()
        assert reopened.entry_ids() == by_session.entry_ids()
        for s in (by_path, by_session, reopened):
            s.close()
    assert record.path.read_bytes() == record.data


async def test_fork_of_an_in_memory_session_object_is_refused(tmp_path: Path) -> None:
    session = await MemorySessionRepo().create("/w")
    with pytest.raises(InvalidSessionIdError, match="in-memory"):
        await JsonlSessionRepo(tmp_path).fork(session)


# --- a fork given a path, while this process has the file open -----------------------------


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths the repository reads and indexes whole (a spy: the real open runs)."""
    reads: list[Path] = []
    real = jsonl_repo_module.open_session

    def spy(path: Path, **kwargs: Any) -> Session:
        reads.append(path)
        return real(path, **kwargs)

    monkeypatch.setattr(jsonl_repo_module, "open_session", spy)
    return reads


async def _a_session_of(repo: JsonlSessionRepo, n: int) -> Session:
    session = await repo.create("/w")
    for i in range(n):
        session.append_message(user(f"q{i}"))
        session.append_message(reply(f"a{i}"))
    session.set_label(session.entry_ids()[1], "early")
    return session


async def test_a_fork_by_path_takes_an_open_sessions_index_instead_of_reading_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    reads = _count_reads(monkeypatch)
    live = await _a_session_of(repo, 5)
    assert live.path is not None
    mid = live.entry_ids()[4]
    fast = await repo.fork(live.path, entry_id=mid, position="at")
    assert reads == []  # the open session's index was used
    live.close()
    cold = await repo.fork(live.path, entry_id=mid, position="at")
    assert reads == [live.path]  # nothing open on it any more: read and indexed
    assert fast.path is not None and cold.path is not None
    assert fast.build_context() == cold.build_context()
    assert fast.labels == cold.labels == {live.entry_ids()[1]: "early"}
    assert [e.id for e in fast.get_branch()] == [e.id for e in cold.get_branch()]
    for s in (fast, cold):
        s.close()


async def test_a_fork_by_path_reads_the_file_when_an_open_session_does_not_hold_all_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    live = await _a_session_of(repo, 3)
    assert live.path is not None
    # Another writer (pi writes without our lock) appended a line this session has not seen.
    theirs = {
        "type": "message",
        "id": "feedbeef",
        "parentId": live.leaf_id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": "from pi", "timestamp": 1},
    }
    with open(live.path, "ab") as f:
        f.write(orjson.dumps(theirs) + b"\n")
    reads = _count_reads(monkeypatch)
    fork = await repo.fork(live.path, entry_id="feedbeef", position="at")
    assert reads == [live.path]
    assert fork.get_branch()[-1].id == "feedbeef"
    fork.close()
    # A torn tail, then: the open session's index holds every complete line, but not the file.
    with open(live.path, "ab") as f:
        f.write(b'{"type":"mess')
    live.refresh()
    fork = await repo.fork(live.path, entry_id="feedbeef", position="at")
    assert reads == [live.path, live.path]
    fork.close()
    live.close()


async def test_a_fork_by_path_reads_the_file_when_the_open_session_reported_something(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    made = await _a_session_of(repo, 2)
    assert made.path is not None
    path, last = made.path, made.leaf_id
    made.close()
    with open(path, "ab") as f:
        f.write(b"not json\n")
    live = open_session(path)
    assert [d.code for d in live.diagnostics] == ["corrupt_line"]
    reads = _count_reads(monkeypatch)
    assert last is not None
    (await repo.fork(path, entry_id=last, position="at")).close()
    assert reads == [path]
    # A strict repository reads the file unless the open session was strict too (every body
    # decoded at open).
    live.close()
    path.write_bytes(path.read_bytes().replace(b"not json\n", b""))
    strict = JsonlSessionRepo(tmp_path / "root", strict=True)
    with open_session(path):
        (await strict.fork(path, entry_id=last, position="at")).close()
        assert reads == [path, path]
    with open_session(path, strict=True):
        (await strict.fork(path, entry_id=last, position="at")).close()
        assert reads == [path, path]  # the strict session's index was used


async def test_a_fork_by_path_whose_open_session_is_closed_meanwhile_reads_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hooks import connect

    repo = JsonlSessionRepo(tmp_path / "root")
    live = await _a_session_of(repo, 3)
    assert live.path is not None
    mid = live.entry_ids()[3]
    reads = _count_reads(monkeypatch)
    # Its owner closes it after the repository chose it (a hook runs in between): its
    # descriptors are gone, so the fork reads the file instead of copying through them.
    disconnect = connect("session_before_fork", lambda s, event: live.close(), sender=repo)
    try:
        fork = await repo.fork(live.path, entry_id=mid, position="at")
    finally:
        disconnect()
    assert reads == [live.path]
    assert fork.get_branch()[-1].id == mid
    assert fork.labels == {live.entry_ids()[1]: "early"}
    fork.close()
