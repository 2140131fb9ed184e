"""Bad input gets a clear error and loses nothing: damaged files, lines pi accepts, hostile
values, and the smaller faults of the storage-trust issue, each reproduced on real files."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness import AgentHarness, BusyError, FauxModel
from hooks import AssistantMessage, TextContent, UserMessage
from repos import (
    CorruptSessionError,
    CustomEntry,
    EntryNotFoundError,
    InvalidEntryError,
    InvalidSessionIdError,
    JsonlSessionRepo,
    LeafEntry,
    MessageEntry,
    SessionGoneError,
    StorageError,
    open_session,
)

HEADER = (
    b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'
)


def message(entry_id: str, parent: str | None, text: str = "hi", role: str = "user") -> bytes:
    body: dict[str, object] = {"role": role, "content": text, "timestamp": 1}
    if role == "assistant":
        body["content"] = [{"type": "text", "text": text}]
    return orjson.dumps(
        {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": body,
        }
    )


def write(path: Path, *lines: bytes, end: bytes = b"\n") -> list[int]:
    """Write lines; returns each line's byte offset."""
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + len(end)
    path.write_bytes(b"".join(line + end for line in lines))
    return offsets


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, check=False
    )


# --- fault 3: a damaged body behind an intact head ------------------------------------------


@pytest.mark.parametrize("damage", ["cut", "utf8"])
async def test_a_damaged_body_is_skipped_and_the_session_stays_usable(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "s.jsonl"
    bad = message("aaaa0002", "aaaa0001", "broken")
    bad = bad[:-25] if damage == "cut" else bad.replace(b"broken", b"br\xff\xfeken")
    offsets = write(
        path,
        HEADER,
        message("aaaa0001", None, "one"),
        bad,
        message("aaaa0003", "aaaa0002", "three", "assistant"),
    )
    before = path.read_bytes()
    with open_session(path) as s:
        context = s.build_context()  # reads the damaged body: skipped and reported
        assert [m.text for m in context.messages] == ["one", "three"]  # type: ignore[union-attr]
        (diag,) = [d for d in s.diagnostics if d.code == "corrupt_body"]
        assert (diag.line, diag.offset) == (3, offsets[2])
        assert "aaaa0002" in diag.message
        # The tree re-attached around it, as for a bad head.
        assert s.get_entry("aaaa0003").parent_id == "aaaa0001"
        assert [n.entry.id for n in s.get_tree()] == ["aaaa0001"]
        assert [e.id for e in s.get_branch()] == ["aaaa0001", "aaaa0003"]
        with pytest.raises(EntryNotFoundError):
            s.get_entry("aaaa0002")
        harness = AgentHarness(session=s, model=FauxModel(["fine"]))
        assert (await harness.prompt("go on")).text == "fine"
    assert path.read_bytes().startswith(before)  # nothing earlier changed; the prompt appended
    for command in ("show", "tree"):
        done = cli("sessions", command, str(path))
        assert done.returncode == 0, done.stderr
    # strict mode validates every body at open
    with pytest.raises(CorruptSessionError) as info:
        open_session(path, strict=True)
    assert (info.value.line, info.value.offset) == (3, offsets[2])


def test_entries_skips_a_damaged_body_and_reports_it_once(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, HEADER, message("aaaa0001", None), message("aaaa0002", "aaaa0001")[:-5])
    with open_session(path) as s:
        assert [e.id for e in s.entries()] == ["aaaa0001"]
        assert [e.id for e in s.entries()] == ["aaaa0001"]
        assert [d.code for d in s.diagnostics].count("corrupt_body") == 1


# --- fault 4: lines pi accepts ---------------------------------------------------------------


def test_iso_timestamps_and_string_assistant_content_are_read_as_pi_reads_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    user = orjson.loads(message("aaaa0001", None))
    user["message"]["timestamp"] = "2026-01-02T03:04:05.678Z"
    assistant = orjson.loads(message("aaaa0002", "aaaa0001", role="assistant"))
    assistant["message"]["content"] = "a plain string"
    write(path, HEADER, orjson.dumps(user), orjson.dumps(assistant))
    with open_session(path, strict=True) as s:
        first, second = (e.message for e in s.entries())  # type: ignore[attr-defined]
        assert first.timestamp == 1767323045678
        assert isinstance(second, AssistantMessage)
        assert second.content == (TextContent(text="a plain string"),)
        assert [m.text for m in s.build_context().messages] == ["hi", "a plain string"]  # type: ignore[union-attr]


# --- fault 6: the smaller ones ----------------------------------------------------------------


async def test_values_passed_to_an_append_or_returned_by_a_read_are_not_shared(
    tmp_path: Path,
) -> None:
    s = await JsonlSessionRepo(tmp_path).create("/w")
    data = {"n": 1, "items": [1, 2]}
    entry = s.append_custom("note", data)
    data["n"] = 2
    data["items"].append(3)  # type: ignore[attr-defined]
    assert isinstance(entry, CustomEntry) and entry.data == {"n": 1, "items": [1, 2]}
    read = s.get_entry(entry.id)
    assert isinstance(read, CustomEntry)
    with pytest.raises(TypeError):
        read.data["n"] = 3  # type: ignore[index]
    with pytest.raises(TypeError):
        read.data["items"].append(4)  # type: ignore[index]
    assert dict(read.data) == {"n": 1, "items": [1, 2]}  # type: ignore[arg-type]
    s.close()


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), {"x": float("-inf")}, {1, 2}, b"bytes", object(), {1: "key"}],
    ids=["nan", "inf", "nested-inf", "set", "bytes", "object", "int-key"],
)
async def test_non_json_values_are_refused_and_nothing_is_stored(
    tmp_path: Path, value: object
) -> None:
    s = await JsonlSessionRepo(tmp_path).create("/w")
    s.append_custom("ok", {"fine": None})
    assert s.path is not None
    before = s.path.read_bytes()
    with pytest.raises(InvalidEntryError) as info:
        s.append_custom("bad", value)  # type: ignore[arg-type]
    assert info.value.code == "invalid_entry" and "not JSON" in str(info.value)
    assert s.path.read_bytes() == before and len(s) == 1
    s.close()


async def test_a_cyclic_value_is_refused(tmp_path: Path) -> None:
    s = await JsonlSessionRepo(tmp_path).create("/w")
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    with pytest.raises(InvalidEntryError):
        s.append_custom("bad", cyclic)
    assert len(s) == 0
    s.close()


async def test_move_to_the_current_leaf_appends_nothing(tmp_path: Path) -> None:
    s = await JsonlSessionRepo(tmp_path).create("/w")
    first = s.append_message(UserMessage(content="a"))
    moved = s.move_to(first.id)
    assert isinstance(moved, LeafEntry) and moved.target_id == first.id
    assert len(s) == 1
    s.close()


def test_a_label_to_a_missing_entry_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    label = orjson.dumps(
        {
            "type": "label",
            "id": "aaaa0002",
            "parentId": "aaaa0001",
            "timestamp": "2026-01-01T00:00:02.000Z",
            "targetId": "nowhere1",
            "label": "x",
        }
    )
    offsets = write(path, HEADER, message("aaaa0001", None), label)
    with open_session(path) as s:
        (diag,) = [d for d in s.diagnostics if d.code == "label_target_missing"]
        assert (diag.line, diag.offset) == (3, offsets[2]) and "nowhere1" in diag.message
        assert s.labels == {}


def test_many_blank_lines_make_one_diagnostic(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n" + b"\n" * 100_000 + message("aaaa0001", None) + b"\n" + b"\n\n")
    with open_session(path) as s:
        blanks = [d for d in s.diagnostics if d.code == "blank_line"]
        assert [(d.line, d.message) for d in blanks] == [
            (2, "100000 blank lines skipped (lines 2-100001)"),
            (100003, "2 blank lines skipped (lines 100003-100004)"),
        ]
        assert s.entry_ids() == ["aaaa0001"]


def test_header_not_first_says_where_the_header_is(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, message("aaaa0001", None), b"", HEADER)
    with pytest.raises(CorruptSessionError) as info:
        open_session(path)
    assert "a session header is on line 3" in str(info.value)


async def test_two_harnesses_cannot_drive_one_session_at_once(tmp_path: Path) -> None:
    s = await JsonlSessionRepo(tmp_path).create("/w")
    slow = AgentHarness(session=s, model=FauxModel(["a long reply " * 20], delay_s=0.01))
    other = AgentHarness(session=s, model=FauxModel(["x"]))
    running = asyncio.create_task(slow.prompt("one"))
    await asyncio.sleep(0.03)
    with pytest.raises(BusyError, match="another harness"):
        await other.prompt("two")
    await running
    assert (await other.prompt("now it may")).text == "x"  # released when the first ended
    users = [
        e.message.text
        for e in s.entries()
        if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage)
    ]
    assert users == ["one", "now it may"]
    s.close()


# --- damaged and odd files --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "no session header"),
        (b"[1, 2]\n", "bad header"),
        (b'"a string"\n', "bad header"),
        (b"42\n", "bad header"),
        (b"\xef\xbb\xbf" + HEADER + b"\n", "bad header"),  # a BOM
        (HEADER[:-1].replace(b'"version":3', b'"version":9') + b"}\n", "version"),
    ],
    ids=["empty", "array", "string", "number", "bom", "future-version"],
)
def test_a_file_without_a_usable_header_is_a_clear_error(
    tmp_path: Path, content: bytes, needle: str
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(content)
    with pytest.raises(CorruptSessionError) as info:
        open_session(path)
    assert needle in str(info.value) and str(path) in str(info.value)
    assert path.read_bytes() == content  # reading never writes


def test_header_only_is_an_empty_session(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, HEADER)
    with open_session(path, strict=True) as s:
        assert len(s) == 0 and s.leaf_id is None and s.build_context().messages == ()


@pytest.mark.parametrize(
    "line",
    [b"[1, 2]", b'"text"', b"17", b"\0" * 64, b"\xff\xfe not utf8", b"{not json"],
    ids=["array", "string", "number", "nul-run", "invalid-utf8", "broken-json"],
)
def test_a_bad_interior_line_is_skipped_with_file_line_and_offset(
    tmp_path: Path, line: bytes
) -> None:
    path = tmp_path / "s.jsonl"
    offsets = write(path, HEADER, message("aaaa0001", None), line, message("aaaa0002", "aaaa0001"))
    with open_session(path) as s:
        (diag,) = [d for d in s.diagnostics if d.code == "corrupt_line"]
        assert (diag.line, diag.offset) == (3, offsets[2])
        assert s.entry_ids() == ["aaaa0001", "aaaa0002"]
    with pytest.raises(CorruptSessionError) as info:
        open_session(path, strict=True)
    assert (info.value.path, info.value.line, info.value.offset) == (path, 3, offsets[2])


def test_crlf_line_ends_are_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, HEADER, message("aaaa0001", None, "one"), end=b"\r\n")
    with open_session(path, strict=True) as s:
        assert [m.text for m in s.build_context().messages] == ["one"]  # type: ignore[union-attr]


def test_a_50_mb_line_is_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, HEADER, message("aaaa0001", None, "x" * 50_000_000))
    with open_session(path, strict=True) as s:
        (only,) = s.build_context().messages
        assert len(only.text) == 50_000_000  # type: ignore[union-attr]


# 10,000 deep (ten times Python's recursion limit) by default; 100,000 under stress.
@pytest.mark.parametrize("depth", [10_000, pytest.param(100_000, marks=pytest.mark.stress)])
def test_a_100000_deep_chain_is_walked_without_recursion(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "s.jsonl"
    lines = [HEADER, message("e0000000", None)]
    lines += [message(f"e{i:07d}", f"e{i - 1:07d}") for i in range(1, depth)]
    write(path, *lines)
    with open_session(path) as s:
        assert len(s.path_ids(s.leaf_id)) == depth
        assert len(s.build_context().messages) == depth
        assert len(s.get_tree()) == 1


def test_a_parent_cycle_ends_the_walk(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    # a2 claims a3 as parent before a3 exists: an orphan, re-attached to a1; no cycle can form
    # from file order, and a walk stops at a repeated id anyway.
    write(
        path,
        HEADER,
        message("aaaa0001", None),
        message("aaaa0002", "aaaa0003"),
        message("aaaa0003", "aaaa0002"),
    )
    with open_session(path) as s:
        assert s.get_entry("aaaa0002").parent_id == "aaaa0001"
        assert s.path_ids("aaaa0003") == ["aaaa0001", "aaaa0002", "aaaa0003"]
        assert [d.code for d in s.diagnostics] == ["orphan_reattached"]


def test_a_leaf_move_to_a_missing_entry_is_ignored_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    leaf = orjson.dumps(
        {
            "type": "leaf",
            "id": "aaaa0002",
            "parentId": "aaaa0001",
            "timestamp": "2026-01-01T00:00:02.000Z",
            "targetId": "missing1",
        }
    )
    write(path, HEADER, message("aaaa0001", None), leaf)
    with open_session(path) as s:
        assert s.leaf_id == "aaaa0001"
        assert [d.code for d in s.diagnostics] == ["leaf_target_missing"]


@pytest.mark.parametrize(
    "ref", ["../escape", "a/b", "", ".hidden", "x" * 200, "a\nb", "-flag", "\0"]
)
async def test_hostile_ids_are_refused_before_any_file_is_touched(tmp_path: Path, ref: str) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    with pytest.raises(InvalidSessionIdError):
        await repo.create("/w", session_id=ref)
    with pytest.raises(InvalidSessionIdError):
        await repo.open(ref)
    assert not (tmp_path / "root").exists() or list((tmp_path / "root").rglob("*")) == []


async def test_symlinked_files_and_folders_leading_out_of_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "2026-01-01T00-00-00-000Z_s1.jsonl"
    write(target, HEADER, message("aaaa0001", None))
    before = target.read_bytes()
    (root / "--w--").mkdir(parents=True)
    (root / "--w--" / "2026-01-01T00-00-00-000Z_s1.jsonl").symlink_to(target)
    (root / "--linked--").symlink_to(outside, target_is_directory=True)
    repo = JsonlSessionRepo(root)
    # By id, the repository only serves files that stay under its root.
    with pytest.raises(InvalidSessionIdError, match="outside the sessions root"):
        await repo.open("s1")
    with pytest.raises(InvalidSessionIdError):
        await repo.delete("s1")
    with pytest.raises(InvalidSessionIdError):
        await repo.delete(root / "--linked--" / target.name)
    assert target.read_bytes() == before  # nothing deleted or written through a link
    # An explicit path is opened wherever it is (pi's files live outside our root).
    with await repo.open(root / "--linked--" / target.name) as s:
        assert s.entry_ids() == ["aaaa0001"]
    assert target.read_bytes() == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file: permissions do not apply")
def test_permission_denied_is_a_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, HEADER)
    path.chmod(0)
    try:
        with pytest.raises(StorageError) as info:
            open_session(path)
        assert "Permission denied" in str(info.value)
    finally:
        path.chmod(0o600)


# --- found by an adversarial review -----------------------------------------------------------


async def test_a_created_session_keeps_reading_its_own_file_after_the_name_is_taken(
    tmp_path: Path,
) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    s = await repo.create("/w")
    for i in range(3):
        s.append_message(UserMessage(content=f"m{i}"))
    assert s.path is not None
    other = s.path.with_name("other.tmp")
    other.write_bytes(s.path.read_bytes().replace(b"m1", b"XX"))
    other.replace(s.path)  # another file now has the name (a repair would do this)
    s._tree.cache.clear()
    assert [e.message.content for e in s.entries()] == ["m0", "m1", "m2"]  # type: ignore[attr-defined]
    fork = await repo.fork(s)
    assert [e.message.content for e in fork.entries()] == ["m0", "m1", "m2"]  # type: ignore[attr-defined]
    assert fork.diagnostics == ()
    with pytest.raises(SessionGoneError):
        s.append_message(UserMessage(content="m3"))
    fork.close()
    s.close()


@pytest.mark.parametrize(
    "append",
    [
        lambda s: s.append_custom(5, {"a": 1}),
        lambda s: s.append_active_tools_change([1, 2]),
        lambda s: s.append_thinking_level_change(None),
        lambda s: s.append_model_change(None, "m"),
    ],
    ids=["custom-type", "tool-names", "thinking-level", "provider"],
)
async def test_a_field_of_the_wrong_type_is_refused_before_anything_is_written(
    tmp_path: Path, append: Any
) -> None:
    s = await JsonlSessionRepo(tmp_path).create("/w")
    s.append_message(UserMessage(content="first"))
    assert s.path is not None
    before = s.path.read_bytes()
    with pytest.raises(InvalidEntryError):
        append(s)
    assert s.path.read_bytes() == before and len(s) == 1
    with open_session(s.path, strict=True) as again:
        assert len(again) == 1
    s.close()


def test_a_first_append_migration_never_overwrites_an_older_backup(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    header = b'{"type":"session","id":"v1s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}'
    old = header + b'\n{"type":"message","message":{"role":"user","content":"old backup"}}\n'
    (tmp_path / "s.jsonl.v1.bak").write_bytes(old)
    original = header + b'\n{"type":"message","message":{"role":"user","content":"keep me"}}\n'
    path.write_bytes(original)
    with open_session(path) as s:
        s.append_message(UserMessage(content="new"))
        (migrated,) = [d for d in s.diagnostics if d.code == "migrated"]
    assert (tmp_path / "s.jsonl.v1.bak").read_bytes() == old
    assert (tmp_path / "s.jsonl.v1.bak.1").read_bytes() == original
    assert "s.jsonl.v1.bak.1" in migrated.message


@pytest.mark.parametrize("field", ["id", "parentId", "type"])
def test_a_body_that_disagrees_with_its_head_is_damaged(tmp_path: Path, field: str) -> None:
    path = tmp_path / "s.jsonl"
    body = orjson.loads(message("aaaa0002", "aaaa0001", "two"))
    other = {"id": "bbbb0002", "parentId": None, "type": "custom"}[field]
    line = message("aaaa0002", "aaaa0001", "two")[:-1] + b',"' + field.encode() + b'":'
    line += orjson.dumps(other) + b"}"
    assert orjson.loads(line)[field] == other != body[field]  # the later duplicate key wins
    offsets = write(path, HEADER, message("aaaa0001", None, "one"), line)
    with open_session(path) as s:
        assert [m.text for m in s.build_context().messages] == ["one"]  # type: ignore[union-attr]
        (diag,) = [d for d in s.diagnostics if d.code == "corrupt_body"]
        assert (diag.line, diag.offset) == (3, offsets[2])
        # A body of another type may fail to decode before the heads are compared.
        assert "disagrees" in diag.message or field == "type"
    with pytest.raises(CorruptSessionError):
        open_session(path, strict=True)


async def test_one_unsummarisable_session_does_not_break_list(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    fine = await repo.create("/a")
    fine.append_message(UserMessage(content="ok"))
    odd = await repo.create("/b")
    odd.append_message(UserMessage(content="hi", timestamp=10**17))  # the year 3,170,843
    infos = await repo.list()
    assert [i.id for i in infos] == [fine.id]
    assert [p.name for p, _ in repo.list_problems] == [odd.path.name]  # type: ignore[union-attr]
    fine.close()
    odd.close()


def test_a_dropped_session_is_freed_at_once_and_a_damaged_body_still_reported(
    tmp_path: Path,
) -> None:
    """A session holds no reference cycle (its index is freed when the last reference goes,
    without waiting for a full garbage collection), and the damaged-body report that goes
    through the tree still reaches the session."""
    import gc
    import weakref

    path = tmp_path / "s.jsonl"
    write(path, HEADER, message("aaaa0001", None), message("aaaa0002", "aaaa0001")[:-5])
    session = open_session(path)
    assert [m.content for m in session.build_context().messages] == ["hi"]
    assert [d.code for d in session.diagnostics] == ["corrupt_body"]
    session.close()
    alive, tree = weakref.ref(session), weakref.ref(session._tree)
    enabled = gc.isenabled()
    gc.disable()  # freed by reference counting alone, not by a collection
    try:
        del session
        assert alive() is None and tree() is None
    finally:
        if enabled:
            gc.enable()


def test_a_lone_surrogate_escape_as_javascript_writes_it_is_read_as_a_replacement_character(
    tmp_path: Path,
) -> None:
    # JSON.stringify (pi) writes a string cut between the halves of a pair as "\ud83d"; orjson
    # refuses it, which would drop the entry. It is read as U+FFFD, the line kept as stored.
    path = tmp_path / "cut.jsonl"
    header = (
        b'{"type":"session","version":3,"id":"cut","timestamp":"2024-01-01T00:00:00Z","cwd":"/x"}'
    )
    cut = (
        b'{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2024-01-01T00:00:01Z",'
        b'"message":{"role":"user","content":"smile \\ud83d","timestamp":1}}'
    )
    path.write_bytes(header + b"\n" + cut + b"\n")
    with open_session(path, strict=True) as session:
        (message,) = session.build_context().messages
        assert message.content == "smile \ufffd"  # type: ignore[union-attr]
        assert session.raw_line("aaaaaaaa") == cut + b"\n"
        assert session.diagnostics == ()
    with open_session(path) as session:  # NaN and friends stay errors: nothing else widened
        assert session.get_entry("aaaaaaaa").id == "aaaaaaaa"
    path.write_bytes(header + b"\n" + cut.replace(b"1}}", b"NaN}}") + b"\n")
    with pytest.raises(CorruptSessionError, match=r"cut\.jsonl:2 "):
        open_session(path, strict=True)
