"""The session tree and its file: appends, leaf moves, labels, names, reopen, reading without
writing, v1/v2 migration, torn tails, corrupt lines and deleted files (DESIGN §2, §3, §5)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from pi_sessions import PiSession

from hooks import (
    AssistantMessage,
    BranchSummaryMessage,
    CustomMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from repos import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CorruptSessionError,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    EntryNotFoundError,
    JsonlSessionRepo,
    LabelEntry,
    LeafEntry,
    MemorySessionRepo,
    MessageEntry,
    ModelChangeEntry,
    Session,
    SessionClosedError,
    SessionGoneError,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    open_session,
)

HEX8 = re.compile(r"^[0-9a-f]{8}$")
PI_KINDS = ["before-compaction", "large-session"]  # generated v1 files (pi_sessions)

Repo = JsonlSessionRepo | MemorySessionRepo


def user(text: str) -> UserMessage:
    return UserMessage(content=text)


def reply(text: str) -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text=text)],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(input=3, output=5),
    )


def texts(session: Session) -> list[str]:
    """The text of every context message at the leaf (users, assistants, summaries)."""
    out = []
    for m in session.build_context().messages:
        if isinstance(m, UserMessage | AssistantMessage):
            out.append(m.text)
        elif isinstance(m, BranchSummaryMessage):
            out.append(f"summary:{m.summary}")
        elif isinstance(m, CustomMessage):
            out.append(f"custom:{m.content}")
    return out


def file_digest(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return hashlib.sha256(path.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_size


def line_objs(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


@pytest.fixture(params=["jsonl", "memory"])
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> Repo:
    if request.param == "jsonl":
        return JsonlSessionRepo(tmp_path / "root")
    return MemorySessionRepo()


@pytest.fixture
async def session(repo: Repo) -> AsyncIterator[Session]:
    s = await repo.create("/work/project")
    yield s
    s.close()


async def reopen(repo: Repo, session: Session) -> Session:
    session.close()
    return await repo.open(session.id)


# --- appends ---------------------------------------------------------------------------------


def _append_one_of_each(s: Session) -> list[Entry]:
    first = s.append_message(user("hello"))
    out: list[Entry] = [first]
    out.append(s.append_message(reply("hi there")))
    out.append(s.append_model_change("anthropic", "claude-opus-4-5"))
    out.append(s.append_thinking_level_change("high"))
    out.append(s.append_active_tools_change(["read", "bash"]))
    out.append(s.append_compaction("summary so far", first.id, 1234, details={"readFiles": []}))
    out.append(s.append_branch_summary(first.id, "tried something", from_hook=True))
    out.append(s.append_custom("ext-state", {"n": 1}))
    out.append(s.append_custom_message("note", "remember this", display=False, details={"k": 2}))
    out.append(s.set_label(first.id, "start"))
    out.append(s.set_name("My session"))
    return out


async def test_every_append_chains_on_the_previous_leaf(session: Session) -> None:
    assert session.leaf_id is None
    seen: list[Entry] = []

    def check(entry: Entry, kind: type) -> Entry:
        assert isinstance(entry, kind)
        assert entry.parent_id == (seen[-1].id if seen else None)
        assert session.leaf_id == entry.id
        assert HEX8.match(entry.id)
        assert session.get_entry(entry.id) == entry
        seen.append(entry)
        return entry

    first = check(session.append_message(user("hello")), MessageEntry)
    check(session.append_message(reply("hi there")), MessageEntry)
    check(session.append_model_change("anthropic", "claude-opus-4-5"), ModelChangeEntry)
    check(session.append_thinking_level_change("high"), ThinkingLevelChangeEntry)
    check(session.append_active_tools_change(["read", "bash"]), ActiveToolsChangeEntry)
    check(session.append_compaction("summary", first.id, 1234), CompactionEntry)
    check(session.append_branch_summary(first.id, "tried"), BranchSummaryEntry)
    check(session.append_custom("ext-state", {"n": 1}), CustomEntry)
    check(session.append_custom_message("note", "remember"), CustomMessageEntry)
    check(session.set_label(first.id, "start"), LabelEntry)
    check(session.set_name("My session"), SessionInfoEntry)
    assert len({e.id for e in seen}) == len(seen)
    assert session.entry_ids() == [e.id for e in seen]
    assert len(session) == len(seen)

    moved = session.move_to(first.id)
    assert isinstance(moved, LeafEntry)
    # Parented on its target, so a reader that takes the last line as the leaf (pi's CLI)
    # lands on the same branch.
    assert moved.parent_id == first.id and moved.target_id == first.id
    assert session.leaf_id == first.id
    after = session.append_message(user("again"))
    assert after.parent_id == first.id
    assert session.leaf_id == after.id


async def test_every_entry_reads_back_equal_after_reopen(repo: Repo, session: Session) -> None:
    entries = _append_one_of_each(session)
    entries.append(session.move_to(entries[1].id))
    leaf = session.leaf_id
    reopened = await reopen(repo, session)
    with reopened:
        assert reopened.entry_ids() == [e.id for e in entries]
        for e in entries:
            assert reopened.get_entry(e.id) == e
        assert reopened.leaf_id == leaf == entries[1].id
        assert reopened.labels == {entries[0].id: "start"}
        assert reopened.name == "My session"


async def test_references_to_missing_entries_are_refused(session: Session) -> None:
    session.append_message(user("u"))
    before = session.entry_ids()
    for call in (
        lambda: session.set_label("deadbeef", "x"),
        lambda: session.move_to("deadbeef"),
        lambda: session.append_compaction("s", "deadbeef", 1),
        lambda: session.append_branch_summary("deadbeef", "s"),
        lambda: session.get_entry("deadbeef"),
        lambda: session.get_branch("deadbeef"),
    ):
        with pytest.raises(EntryNotFoundError) as info:
            call()
        assert info.value.code == "entry_not_found"
        assert info.value.entry_id == "deadbeef"
    assert session.entry_ids() == before


async def test_move_to_none_then_append_makes_a_new_root(repo: Repo, session: Session) -> None:
    first = session.append_message(user("one"))
    session.append_message(reply("two"))
    session.move_to(None)
    assert session.leaf_id is None
    assert session.build_context().messages == ()
    root2 = session.append_message(user("fresh start"))
    assert root2.parent_id is None
    assert [e.id for e in session.get_children(None)] == [first.id, root2.id]
    assert texts(session) == ["fresh start"]
    reopened = await reopen(repo, session)
    with reopened:
        assert reopened.leaf_id == root2.id
        assert reopened.get_entry(root2.id).parent_id is None


async def test_move_to_none_survives_reopen(repo: Repo, session: Session) -> None:
    session.append_message(user("one"))
    session.move_to(None)
    reopened = await reopen(repo, session)
    with reopened:
        assert reopened.leaf_id is None
        assert reopened.append_message(user("root")).parent_id is None


async def test_labels_set_clear_and_latest_wins(repo: Repo, session: Session) -> None:
    a = session.append_message(user("a"))
    b = session.append_message(reply("b"))
    session.set_label(a.id, "first")
    session.set_label(a.id, "second")
    session.set_label(b.id, "bee")
    assert session.labels == {a.id: "second", b.id: "bee"}
    assert session.get_label(a.id) == "second"
    session.set_label(b.id, None)
    assert session.get_label(b.id) is None
    session.set_label(b.id, "again")
    session.set_label(b.id, "")
    assert session.labels == {a.id: "second"}
    tree_labels = {n.entry.id: n.label for n in _walk(session.get_tree())}
    assert tree_labels[a.id] == "second" and tree_labels[b.id] is None
    # Labels never enter the context.
    assert texts(session) == ["a", "b"]
    reopened = await reopen(repo, session)
    with reopened:
        assert reopened.labels == {a.id: "second"}


async def test_the_latest_name_wins_and_an_empty_one_clears_it(
    repo: Repo, session: Session
) -> None:
    assert session.name is None
    session.set_name("  first  ")
    assert session.name == "first"
    session.set_name("second")
    reopened = await reopen(repo, session)
    with reopened:
        assert reopened.name == "second"
        reopened.set_name("   ")
        assert reopened.name is None  # as pi: the latest session_info wins, an empty one too
    again = await reopen(repo, reopened)
    with again:
        assert again.name is None


# --- tree ------------------------------------------------------------------------------------


def _walk(nodes: Any) -> list[Any]:
    out, stack = [], list(reversed(nodes))
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.children))
    return out


async def _branchy(s: Session) -> dict[str, Entry]:
    # u1 - a1 - u2 - a2 (- leaf m1)
    #         \ u3 - a3 (- leaf m2)
    # r2 (a second root)
    e: dict[str, Entry] = {}
    e["u1"] = s.append_message(user("u1"))
    e["a1"] = s.append_message(reply("a1"))
    e["u2"] = s.append_message(user("u2"))
    e["a2"] = s.append_message(reply("a2"))
    e["m1"] = s.move_to(e["a1"].id)
    e["u3"] = s.append_message(user("u3"))
    e["a3"] = s.append_message(reply("a3"))
    e["m2"] = s.move_to(None)
    e["r2"] = s.append_message(user("r2"))
    return e


async def test_branch_children_and_tree(repo: Repo, session: Session) -> None:
    e = await _branchy(session)
    ids = {k: v.id for k, v in e.items()}
    assert [x.id for x in session.get_branch(ids["a2"])] == [
        ids[k] for k in ("u1", "a1", "u2", "a2")
    ]
    assert [x.id for x in session.get_branch(ids["a3"])] == [
        ids[k] for k in ("u1", "a1", "u3", "a3")
    ]
    assert [x.id for x in session.get_branch()] == [ids["r2"]]
    assert [x.id for x in session.get_children(ids["a1"])] == [ids["u2"], ids["u3"]]
    assert [x.id for x in session.get_children(None)] == [ids["u1"], ids["r2"]]
    assert session.get_children(ids["r2"]) == []

    def shape(nodes: Any) -> list[Any]:
        return [(n.entry.id, shape(n.children)) for n in nodes]

    expected = [
        (
            ids["u1"],
            [
                (
                    ids["a1"],
                    [
                        # Leaf moves (m1, m2) are stepped through: bookkeeping, not content.
                        (ids["u2"], [(ids["a2"], [])]),
                        (ids["u3"], [(ids["a3"], [])]),
                    ],
                )
            ],
        ),
        (ids["r2"], []),
    ]
    assert shape(session.get_tree()) == expected
    reopened = await reopen(repo, session)
    with reopened:
        assert shape(reopened.get_tree()) == expected


async def test_build_context_follows_only_the_active_branch(repo: Repo, session: Session) -> None:
    e = await _branchy(session)
    session.move_to(e["a3"].id)
    assert texts(session) == ["u1", "a1", "u3", "a3"]
    session.move_to(e["a2"].id)
    assert texts(session) == ["u1", "a1", "u2", "a2"]
    reopened = await reopen(repo, session)
    with reopened:
        assert reopened.leaf_id == e["a2"].id
        assert texts(reopened) == ["u1", "a1", "u2", "a2"]


async def test_branch_summary_survives_reopen(repo: Repo, session: Session) -> None:
    u1 = session.append_message(user("u1"))
    a1 = session.append_message(reply("a1"))
    session.move_to(u1.id)
    summary = session.append_branch_summary(a1.id, "we tried a1", details={"modifiedFiles": ["x"]})
    assert summary.parent_id == u1.id
    assert texts(session) == ["u1", "summary:we tried a1"]
    reopened = await reopen(repo, session)
    with reopened:
        assert reopened.leaf_id == summary.id
        assert reopened.get_entry(summary.id) == summary
        assert texts(reopened) == ["u1", "summary:we tried a1"]


async def test_tool_results_round_trip_in_context(repo: Repo, session: Session) -> None:
    session.append_message(user("read it"))
    session.append_message(
        AssistantMessage(content=[ToolCall(id="c1", name="read")], stop_reason="toolUse")
    )
    session.append_message(
        ToolResultMessage(tool_call_id="c1", tool_name="read", content=[TextContent(text="r")])
    )
    reopened = await reopen(repo, session)
    with reopened:
        kinds = [m.role for m in reopened.build_context().messages]
        assert kinds == ["user", "assistant", "toolResult"]


async def test_closed_session_refuses_appends(session: Session) -> None:
    session.append_message(user("u"))
    session.close()
    assert session.closed
    with pytest.raises(SessionClosedError) as info:
        session.append_message(user("late"))
    assert info.value.code == "session_closed"


# --- reading never writes --------------------------------------------------------------------


@pytest.mark.parametrize("name", PI_KINDS)
def test_reading_a_pi_file_never_writes(name: str, pi_file: Callable[..., PiSession]) -> None:
    record = pi_file(name)
    path = record.path
    assert path is not None
    before = file_digest(path)
    folder_before = sorted(os.listdir(path.parent))
    with open_session(path) as s:
        ctx = s.build_context()
        tree = s.get_tree()
        ids = s.entry_ids()
        s.get_entry(ids[0])
        s.get_entry(ids[-1])
        list(s.entries())
        assert ctx.messages and tree
    assert file_digest(path) == before
    assert sorted(os.listdir(path.parent)) == folder_before
    assert path.read_bytes() == record.data


# --- v1 / v2 migration -----------------------------------------------------------------------

_SUBPROCESS = """
import json, sys
from pathlib import Path
from repos import open_session
with open_session(Path(sys.argv[1])) as s:
    ids = s.entry_ids()
    print(json.dumps({"leaf": s.leaf_id, "ids": ids[:5] + ids[-5:], "n": len(ids)}))
"""


@pytest.mark.parametrize("name", PI_KINDS)
def test_v1_ids_are_deterministic_hex_and_chained(
    name: str, pi_file: Callable[..., PiSession]
) -> None:
    record = pi_file(name)
    path = record.path
    assert path is not None
    n_lines = len(record.lines)
    with open_session(path) as one, open_session(path) as two:
        ids = one.entry_ids()
        assert ids == two.entry_ids()
        assert one.leaf_id == two.leaf_id == ids[-1]
        assert one.header.version == 1
    assert len(ids) == n_lines - 1
    assert all(HEX8.match(i) for i in ids)
    assert len(set(ids)) == len(ids)
    with open_session(path) as s:
        parents = [s.get_entry(i).parent_id for i in ids]
    assert parents == [None, *ids[:-1]]

    out = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS, str(path)],
        capture_output=True,
        check=True,
        cwd=path.parent,
    )
    other = json.loads(out.stdout)
    assert other == {"leaf": ids[-1], "ids": ids[:5] + ids[-5:], "n": len(ids)}


def test_v1_first_kept_entry_index_maps_to_that_lines_id(
    pi_file: Callable[..., PiSession],
) -> None:
    record = pi_file("before-compaction")
    assert record.path is not None
    path = record.path
    objs = line_objs(path)
    compactions = [i for i, o in enumerate(objs) if o["type"] == "compaction"]
    assert compactions == record.compaction_lines and len(compactions) == 2
    # chained: the second kept window starts after the first compaction
    assert record.first_kept_lines[1] > compactions[0]
    with open_session(path) as s:
        ids = s.entry_ids()  # line i (header = 0) is ids[i - 1]
        for line in compactions:
            entry = s.get_entry(ids[line - 1])
            assert isinstance(entry, CompactionEntry)
            index = objs[line]["firstKeptEntryIndex"]
            assert index == record.first_kept_lines[compactions.index(line)]
            assert entry.first_kept_entry_id == ids[index - 1]
            kept = s.get_entry(entry.first_kept_entry_id)
            assert isinstance(kept, MessageEntry)
            assert kept.message.timestamp == objs[index]["message"]["timestamp"]
            assert entry.tokens_before == objs[line]["tokensBefore"]


@pytest.mark.parametrize("name", PI_KINDS)
def test_first_append_migrates_v1_to_v3(name: str, pi_file: Callable[..., PiSession]) -> None:
    record = pi_file(name)
    original = record.data
    path = record.path
    assert path is not None
    with open_session(path) as s:
        ids = s.entry_ids()
        leaf = s.leaf_id
        ctx = s.build_context()
        assert not [d for d in s.diagnostics if d.code == "migrated"]
        assert path.read_bytes() == original  # opening alone does not migrate
        new = s.append_message(user("after migration"))
        assert [d.code for d in s.diagnostics].count("migrated") == 1
        assert s.header.version == 3
        # A second append does not migrate again.
        s.append_message(reply("ok"))
        assert [d.code for d in s.diagnostics].count("migrated") == 1
    assert new.parent_id == leaf
    backup = path.with_name(path.name + ".v1.bak")
    assert backup.read_bytes() == original

    objs = line_objs(path)
    assert objs[0]["type"] == "session" and objs[0]["version"] == 3
    assert objs[0]["id"] == orjson.loads(original.splitlines()[0])["id"]
    assert len(objs) == len(original.splitlines()) + 2
    seen: set[str] = set()
    for o in objs[1:]:
        assert HEX8.match(o["id"])
        assert "parentId" in o
        assert o["parentId"] is None or o["parentId"] in seen
        seen.add(o["id"])
        if o["type"] == "compaction":
            assert o["firstKeptEntryId"] in seen
    assert [o["id"] for o in objs[1:-2]] == ids

    with open_session(path) as again:
        assert again.entry_ids()[:-2] == ids
        assert again.entry_ids()[-2] == new.id
        assert again.get_entry(new.id) == new
        assert not again.diagnostics
        assert again.header.version == 3
        assert again.build_context().messages[: len(ctx.messages)] == ctx.messages


def _v2_file(path: Path) -> Path:
    ts = "2025-01-01T00:00:00.000Z"
    hook = {"role": "hookMessage", "customType": "hook", "content": "injected", "timestamp": 2}
    lines = [
        {"type": "session", "version": 2, "id": "v2-session", "timestamp": ts, "cwd": "/w"},
        {
            "type": "message",
            "id": "aaaa0001",
            "parentId": None,
            "timestamp": ts,
            "message": {"role": "user", "content": "hi", "timestamp": 1},
        },
        {
            "type": "message",
            "id": "aaaa0002",
            "parentId": "aaaa0001",
            "timestamp": ts,
            "message": hook,
        },
    ]
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return path


def test_v2_hook_message_reads_as_custom_and_migrates_on_append(tmp_path: Path) -> None:
    path = _v2_file(tmp_path / "v2.jsonl")
    original = path.read_bytes()
    with open_session(path) as s:
        assert s.header.version == 2
        assert s.entry_ids() == ["aaaa0001", "aaaa0002"]
        entry = s.get_entry("aaaa0002")
        assert isinstance(entry, MessageEntry)
        assert isinstance(entry.message, CustomMessage)
        assert entry.message.custom_type == "hook"
        assert entry.message.content == "injected"
        assert any(isinstance(m, CustomMessage) for m in s.build_context().messages)
        assert path.read_bytes() == original
        s.append_message(user("more"))
        assert "migrated" in [d.code for d in s.diagnostics]
    assert path.with_name("v2.jsonl.v2.bak").read_bytes() == original
    objs = line_objs(path)
    assert objs[0]["version"] == 3
    assert objs[2]["message"]["role"] == "custom"
    assert [o["id"] for o in objs[1:3]] == ["aaaa0001", "aaaa0002"]


# --- torn tails ------------------------------------------------------------------------------


async def _file_session(tmp_path: Path, n: int = 3) -> tuple[JsonlSessionRepo, Path, list[str]]:
    repo = JsonlSessionRepo(tmp_path / "root")
    with await repo.create("/w") as s:
        ids = [s.append_message(user(f"m{i}")).id for i in range(n)]
        assert s.path is not None
        return repo, s.path, ids


async def test_torn_tail_is_ignored_then_set_aside_before_the_first_append(
    tmp_path: Path,
) -> None:
    repo, path, ids = await _file_session(tmp_path)
    whole = path.read_bytes()
    fragment = b'{"type":"message","id":"feedf00d","parentId":"' + ids[-1].encode() + b'","mes'
    path.write_bytes(whole + fragment)
    before = file_digest(path)

    s = await repo.open(path)
    torn = [d for d in s.diagnostics if d.code == "torn_tail"]
    assert len(torn) == 1
    assert torn[0].offset == len(whole)
    assert torn[0].line == len(whole.splitlines()) + 1
    assert s.entry_ids() == ids and s.leaf_id == ids[-1]
    s.build_context()
    assert file_digest(path) == before  # opening left it alone

    new = s.append_message(user("after the tear"))
    assert "torn_tail_set_aside" in [d.code for d in s.diagnostics]
    s.close()
    assert path.with_name(path.name + ".torn").read_bytes() == fragment + b"\n"
    data = path.read_bytes()
    assert data.startswith(whole) and data.endswith(b"\n")
    assert len(line_objs(path)) == len(whole.splitlines()) + 1  # every line parses
    with open_session(path, strict=True) as again:
        assert again.entry_ids() == [*ids, new.id]
        assert not again.diagnostics
        assert again.get_entry(new.id).parent_id == ids[-1]


async def test_torn_tail_on_a_v1_file_is_set_aside_and_the_file_migrated(
    pi_file: Callable[..., PiSession],
) -> None:
    path = pi_file("large-session").path
    assert path is not None
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"type":"message","timest')
    with open_session(path) as s:
        ids = s.entry_ids()
        s.append_message(user("x"))
        codes = [d.code for d in s.diagnostics]
    assert codes.index("torn_tail") < codes.index("torn_tail_set_aside") < codes.index("migrated")
    assert path.with_name(path.name + ".torn").read_bytes() == b'{"type":"message","timest\n'
    assert path.with_name(path.name + ".v1.bak").read_bytes() == whole
    with open_session(path, strict=True) as again:
        assert again.entry_ids()[:-1] == ids


def test_empty_file_and_bad_header_are_corrupt_in_both_modes(tmp_path: Path) -> None:
    good_entry = _entry("aaaa0001", None) + b"\n"
    cases = {
        "empty": b"",
        "torn-header": b'{"type":"session","id":"x"',
        "not-json": b"garbage\n" + good_entry,
        "not-a-header": good_entry + good_entry,
        "header-without-id": b'{"type":"session","cwd":"/w"}\n' + good_entry,
        "json-array": b"[1, 2]\n",
    }
    for name, data in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data)
        for strict in (False, True):
            with pytest.raises(CorruptSessionError) as info:
                open_session(path, strict=strict)
            err = info.value
            assert err.code == "corrupt_session"
            assert (err.path, err.line, err.offset) == (path, 1, 0)
        assert path.read_bytes() == data


# --- corrupt interior lines ------------------------------------------------------------------


def _write_lines(path: Path, lines: list[bytes]) -> list[int]:
    """Write lines (each newline-terminated); return each line's byte offset."""
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    return offsets


def _entry(eid: str, parent: str | None, text: str = "x", kind: str = "message") -> bytes:
    obj: dict[str, Any] = {
        "type": kind,
        "id": eid,
        "parentId": parent,
        "timestamp": "2025-01-01T00:00:00.000Z",
    }
    if kind == "message":
        obj["message"] = {"role": "user", "content": text, "timestamp": 1}
    return orjson.dumps(obj)


HEADER = orjson.dumps(
    {
        "type": "session",
        "version": 3,
        "id": "s1",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": "/w",
    }
)


def test_corrupt_interior_line_is_skipped_and_children_reattached(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = [
        HEADER,
        _entry("aaaa0001", None, "one"),
        _entry("aaaa0002", "aaaa0001", "two"),
        b"\x00\x00{not json at all",
        _entry("aaaa0004", "aaaa0003", "four"),  # its parent was on the broken line
        _entry("aaaa0005", "aaaa0004", "five"),
    ]
    offsets = _write_lines(path, lines)
    before = file_digest(path)
    with open_session(path) as s:
        corrupt = [d for d in s.diagnostics if d.code == "corrupt_line"]
        assert [(d.line, d.offset) for d in corrupt] == [(4, offsets[3])]
        orphans = [d for d in s.diagnostics if d.code == "orphan_reattached"]
        assert [(d.line, d.offset) for d in orphans] == [(5, offsets[4])]
        assert s.entry_ids() == ["aaaa0001", "aaaa0002", "aaaa0004", "aaaa0005"]
        assert s.get_entry("aaaa0004").parent_id == "aaaa0002"
        assert [e.id for e in s.get_branch()] == s.entry_ids()
        assert [m.text for m in s.build_context().messages] == ["one", "two", "four", "five"]  # type: ignore[union-attr]
        # A re-attached entry is copied with its new parent, so a fork of it resolves.
        assert orjson.loads(s.raw_line("aaaa0004"))["parentId"] == "aaaa0002"
    assert file_digest(path) == before

    with pytest.raises(CorruptSessionError) as info:
        open_session(path, strict=True)
    err = info.value
    assert err.code == "corrupt_session"
    assert (err.path, err.line, err.offset) == (path, 4, offsets[3])


def test_orphan_is_an_error_in_strict_mode(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    offsets = _write_lines(path, [HEADER, _entry("aaaa0001", None), _entry("aaaa0003", "aaaa0002")])
    with pytest.raises(CorruptSessionError) as info:
        open_session(path, strict=True)
    assert (info.value.line, info.value.offset) == (3, offsets[2])


def test_line_with_a_good_head_and_a_broken_body_names_its_line_when_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    broken = _entry("aaaa0002", "aaaa0001")[:-20]  # valid id/parentId prefix, cut body
    offsets = _write_lines(path, [HEADER, _entry("aaaa0001", None), broken])
    with open_session(path) as s, pytest.raises(CorruptSessionError) as info:
        s.get_entry("aaaa0002")
    assert (info.value.path, info.value.line, info.value.offset) == (path, 3, offsets[2])
    # Strict mode decodes every body at open, so it fails there.
    with pytest.raises(CorruptSessionError) as info:
        open_session(path, strict=True)
    assert (info.value.path, info.value.line, info.value.offset) == (path, 3, offsets[2])


def test_duplicate_ids(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    offsets = _write_lines(
        path,
        [
            HEADER,
            _entry("aaaa0001", None, "first"),
            _entry("aaaa0001", None, "impostor"),
            _entry("aaaa0002", "aaaa0001", "child"),
        ],
    )
    with open_session(path) as s:
        dup = [d for d in s.diagnostics if d.code == "duplicate_id"]
        assert [(d.line, d.offset) for d in dup] == [(3, offsets[2])]
        assert s.entry_ids() == ["aaaa0001", "aaaa0002"]
        first = s.get_entry("aaaa0001")
        assert isinstance(first, MessageEntry) and first.message.content == "first"  # type: ignore[union-attr]
    with pytest.raises(CorruptSessionError) as info:
        open_session(path, strict=True)
    assert (info.value.line, info.value.offset) == (3, offsets[2])


def test_blank_interior_line_is_reported_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    offsets = _write_lines(
        path, [HEADER, _entry("aaaa0001", None), b"", _entry("aaaa0002", "aaaa0001")]
    )
    with open_session(path) as s:
        assert [(d.code, d.line, d.offset) for d in s.diagnostics] == [
            ("blank_line", 3, offsets[2])
        ]
        assert s.entry_ids() == ["aaaa0001", "aaaa0002"]


def test_leaf_entry_pointing_at_a_skipped_line_does_not_break_the_session(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    leaf = orjson.dumps(
        {
            "type": "leaf",
            "id": "aaaa0009",
            "parentId": "aaaa0002",
            "timestamp": "t",
            "targetId": "aaaa0003",
        }
    )
    _write_lines(
        path,
        [HEADER, _entry("aaaa0001", None), _entry("aaaa0002", "aaaa0001"), b"{broken", leaf],
    )
    with open_session(path) as s:
        assert s.leaf_id is None or s.leaf_id in s
        s.build_context()
        new = s.append_message(user("go on"))
    with open_session(path) as again:
        parent = again.get_entry(new.id).parent_id
        assert parent is None or parent in again
    with pytest.raises(CorruptSessionError):
        open_session(path, strict=True)


# --- deleted files ---------------------------------------------------------------------------


async def test_append_to_a_deleted_file_raises_and_never_recreates_it(tmp_path: Path) -> None:
    repo, path, _ids = await _file_session(tmp_path)
    s = await repo.open(path)
    path.unlink()
    with pytest.raises(SessionGoneError) as info:
        s.append_message(user("into the void"))
    assert info.value.code == "session_gone" and info.value.reason == "deleted"
    assert not path.exists()
    s.close()


@pytest.mark.parametrize("tear", [False, True])
async def test_append_to_a_deleted_v1_file_raises_and_never_recreates_it(
    pi_file: Callable[..., PiSession], tear: bool
) -> None:
    path = pi_file("large-session").path
    assert path is not None
    if tear:
        path.write_bytes(path.read_bytes() + b'{"type":"mess')
    s = open_session(path)
    path.unlink()
    with pytest.raises(SessionGoneError) as info:
        s.append_message(user("into the void"))
    assert info.value.code == "session_gone"
    assert not path.exists()
    assert list(path.parent.iterdir()) == []
    s.close()


async def test_append_after_a_deletion_raises_and_never_recreates_the_file(
    tmp_path: Path,
) -> None:
    repo, path, _ids = await _file_session(tmp_path)
    s = await repo.open(path)
    s.append_message(user("written"))  # the write descriptor is open from here on
    path.unlink()
    with pytest.raises(SessionGoneError) as info:
        s.append_message(user("after delete"))
    assert info.value.reason == "deleted"
    assert not path.exists()
    s.close()


async def test_append_after_the_file_was_replaced_raises(tmp_path: Path) -> None:
    repo, path, _ids = await _file_session(tmp_path)
    s = await repo.open(path)
    s.append_message(user("written"))
    copy = path.with_name("copy.jsonl")
    copy.write_bytes(path.read_bytes())
    copy.replace(path)  # renamed over: same name, another inode
    before = path.read_bytes()
    with pytest.raises(SessionGoneError) as info:
        s.append_message(user("into the old inode"))
    assert info.value.reason == "replaced"
    assert path.read_bytes() == before
    s.close()


async def test_migration_keeps_the_file_permissions(pi_file: Callable[..., PiSession]) -> None:
    import stat

    from hooks import UserMessage
    from repos import open_session

    path = pi_file("large-session").path
    assert path is not None
    path.chmod(0o640)
    with open_session(path) as session:
        session.append_message(UserMessage(content="after migration"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.with_name(path.name + ".v1.bak").exists()


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
async def test_a_torn_tail_is_never_set_aside_through_a_planted_name(
    tmp_path: Path, kind: str
) -> None:
    """Review 15, finding 1: `<session>.torn` was opened with O_CREAT and no O_NOFOLLOW, so a
    downloaded session folder shipping `s.jsonl.torn -> ~/.bashrc` had its unterminated last
    line (chosen by the sender) appended to the user's `.bashrc` at the first append. A link,
    a hard link or a FIFO at that name is refused: the append fails naming it, and neither
    the target nor the session file changes."""
    repo, path, _ids = await _file_session(tmp_path)
    whole = path.read_bytes()
    path.write_bytes(whole + b"touch /tmp/PWNED # planted")
    target = tmp_path / "bashrc"
    target.write_text("# mine\n")
    torn = path.with_name(path.name + ".torn")
    if kind == "symlink":
        torn.symlink_to(target)
    elif kind == "hardlink":
        os.link(target, torn)
    else:
        os.mkfifo(torn)
    before = path.read_bytes()
    s = await repo.open(path)
    with pytest.raises(OSError, match="torn"):
        s.append_message(user("after the tear"))
    s.close()
    assert target.read_text() == "# mine\n"
    assert path.read_bytes() == before
