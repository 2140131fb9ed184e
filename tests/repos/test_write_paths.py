"""The cheap write paths keep the storage guarantees (issue 9): an append encodes its entry and
copies it in one pass, a fork copies byte ranges and derives the new file's index, a create
publishes an unnamed file. Each is checked against the slow, obvious result: decoding the
stored line, a fresh open of the written file, the bytes on disk. No timing is asserted."""

from __future__ import annotations

import fcntl
import math
import os
import stat
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest

from hooks import (
    AssistantMessage,
    BashExecutionMessage,
    Cost,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    Usage,
    UserMessage,
)
from repos import InvalidEntryError, JsonlSessionRepo, SessionGoneError, open_session
from repos._codec import (
    FrozenDict,
    FrozenList,
    decode_entry,
    decode_message,
    dumps_line,
    encode_entry,
    encode_message,
)
from repos._jsonl import atomic


class _Str(str):
    """A str subclass: orjson writes it as a string, the decoder reads a str."""


MESSAGES: list[Any] = [
    UserMessage(content="plain", timestamp=1),
    UserMessage(
        content=(
            TextContent(text="look", extra={"cache": {"ttl": 5}}),
            ImageContent(data="aGk=", mime_type="image/png"),
        ),
        timestamp=2,
        extra={"note": None, "tags": ["a", ("b", 1.5)]},
    ),
    AssistantMessage(
        content=(
            ThinkingContent(thinking="hmm", thinking_signature="sig"),
            ThinkingContent(thinking="", redacted=True),
            TextContent(text="answer"),
            ToolCall(id="c1", name="read", arguments={"path": "/x", "opts": {"n": [1, None]}}),
        ),
        api="anthropic-messages",
        provider="anthropic",
        model="claude",
        usage=Usage(
            input=10,
            output=5,
            cache_read=1,
            cache_write=0,
            total_tokens=16,
            cost=Cost(input=0.5, output=1, cache_read=0.25, cache_write=0, total=1.75),
            extra={"service": "std"},
        ),
        stop_reason="toolUse",
        timestamp=3,
    ),
    AssistantMessage(content="", error_message="boom", stop_reason="error", timestamp=4),
    ToolResultMessage(
        tool_call_id="c1",
        tool_name="read",
        content=(TextContent(text="data"),),
        details={"lines": 3, "ratio": -0.0},
        is_error=False,
        timestamp=5,
    ),
    ToolResultMessage(tool_call_id="c2", tool_name="x", content="as text", timestamp=6),
    CustomMessage(custom_type="ext", content="hi", display=False, details=[1, 2], timestamp=7),
    # Left to the general path: a block the decoder reads as unknown, a bash execution, a known
    # key in extra, an int subclass, an unknown block.
    UserMessage(content=(ThinkingContent(thinking="odd"),), timestamp=8),
    BashExecutionMessage(command="ls", output="a", exit_code=None, timestamp=9),
    UserMessage(content="shadow", timestamp=10, extra={"role": "user"}),
    AssistantMessage(content=(TextContent(text="t"),), api=_Str("api"), timestamp=11),
    AssistantMessage(content=(UnknownContent(raw={"type": "server_tool_use"}),), timestamp=12),
]


def _shape(value: Any) -> Any:
    """``value`` with the type of everything inside it, to compare more than equality."""
    if attrs.has(type(value)):
        return (
            type(value),
            tuple(_shape(getattr(value, f.name)) for f in attrs.fields(type(value))),
        )
    if isinstance(value, dict):
        return (type(value), tuple((k, _shape(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value), tuple(_shape(v) for v in value))
    if isinstance(value, float) and value == 0:
        return (float, math.copysign(1, value))
    return (type(value), value)


@pytest.mark.parametrize("message", MESSAGES, ids=[f"m{i}" for i in range(len(MESSAGES))])
async def test_an_appended_entry_is_what_decoding_its_line_gives(
    tmp_path: Path, message: Any
) -> None:
    repo = JsonlSessionRepo(tmp_path / "root", fsync="never")
    s = await repo.create("/w")
    entry = s.append_message(message)
    assert s.path is not None
    line = s.path.read_bytes().splitlines(keepends=True)[-1]
    decoded = decode_entry(orjson.loads(line))
    assert entry == decoded
    assert _shape(entry) == _shape(decoded)  # the same types all the way down
    assert line == dumps_line(encode_entry(entry))
    with open_session(s.path) as again:
        assert again.get_entry(entry.id) == entry
    s.close()


async def test_values_passed_to_a_message_append_are_copied_read_only(tmp_path: Path) -> None:
    s = await JsonlSessionRepo(tmp_path / "root", fsync="never").create("/w")
    arguments: dict[str, Any] = {"path": "/x", "items": [1, 2]}
    details: dict[str, Any] = {"n": 1}
    extra: dict[str, Any] = {"k": {"deep": [1]}}
    call = ToolCall(id="c1", name="read", arguments=arguments)
    reply = s.append_message(AssistantMessage(content=(call,), extra=extra))
    result = s.append_message(
        ToolResultMessage(tool_call_id="c1", tool_name="read", content="ok", details=details)
    )
    arguments["items"].append(3)
    details["n"] = 2
    extra["k"]["deep"].append(2)
    block = reply.message.content[0]  # type: ignore[union-attr]
    assert isinstance(block, ToolCall) and block.arguments == {"path": "/x", "items": [1, 2]}
    assert type(block.arguments) is FrozenDict and type(block.arguments["items"]) is FrozenList
    assert reply.message.extra == {"k": {"deep": [1]}}  # type: ignore[union-attr]
    assert result.message.details == {"n": 1}  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        block.arguments["items"].append(4)  # type: ignore[attr-defined]
    assert s.get_entry(reply.id) is reply  # the session keeps the copy it returned
    s.close()


@pytest.mark.parametrize(
    "arguments",
    # (a lone surrogate is stored as U+FFFD instead: tests/harness/test_lone_surrogates.py)
    [{"x": float("nan")}, {"x": [float("inf")]}, {"x": {1, 2}}, {"x": 2**70}],
    ids=["nan", "inf", "set", "65-bit-int"],
)
async def test_a_message_that_is_not_json_is_refused_and_nothing_is_stored(
    tmp_path: Path, arguments: dict[str, Any]
) -> None:
    s = await JsonlSessionRepo(tmp_path / "root", fsync="never").create("/w")
    s.append_message(UserMessage(content="first"))
    assert s.path is not None
    before = s.path.read_bytes()
    bad = AssistantMessage(content=(ToolCall(id="c", name="n", arguments=arguments),))
    with pytest.raises(InvalidEntryError) as info:
        s.append_message(bad)
    assert info.value.code == "invalid_entry" and "not JSON" in str(info.value)
    assert s.path.read_bytes() == before and len(s) == 1
    s.close()


async def _branched_source(tmp_path: Path) -> tuple[JsonlSessionRepo, Any, list[str]]:
    repo = JsonlSessionRepo(tmp_path / "root", fsync="never")
    s = await repo.create("/w")
    ids = [s.append_message(UserMessage(content=f"m{i}", timestamp=i)).id for i in range(6)]
    s.set_label(ids[1], "one")
    s.set_name("named")
    s.move_to(ids[2])
    s.append_message(UserMessage(content="branch", timestamp=9))  # a line off the main path
    s.move_to(ids[5])
    s.set_label(ids[4], "four")
    ids.append(s.append_message(UserMessage(content="last", timestamp=10)).id)
    return repo, s, ids


@pytest.mark.parametrize("scope", ["branch", "tree"])
async def test_a_fork_from_an_open_session_is_indexed_as_a_fresh_open_would(
    tmp_path: Path, scope: str
) -> None:
    repo, s, ids = await _branched_source(tmp_path)
    kwargs: dict[str, Any] = {"entry_id": ids[5], "position": "at"} if scope == "branch" else {}
    fork = await repo.fork(s, scope=scope, **kwargs)  # type: ignore[arg-type]
    assert fork.path is not None and s.path is not None
    with open_session(fork.path) as fresh:
        assert fork.entry_ids() == fresh.entry_ids()
        assert fork.leaf_id == fresh.leaf_id and fork.labels == fresh.labels
        assert fork.name == fresh.name == "named"
        assert fork.diagnostics == fresh.diagnostics == ()
        for entry_id in fresh.entry_ids():
            assert fork.get_entry(entry_id) == fresh.get_entry(entry_id)
            assert fork.raw_line(entry_id) == fresh.raw_line(entry_id)
    # The copied lines are the source's bytes.
    source_lines = set(s.path.read_bytes().splitlines()[1:])
    copied = [line for line in fork.path.read_bytes().splitlines()[1:] if line in source_lines]
    assert len(copied) >= 6
    # The fork appends where a fresh open would, and reads back.
    leaf = fork.leaf_id
    added = fork.append_message(UserMessage(content="after the fork"))
    assert added.parent_id == leaf
    with open_session(fork.path) as again:
        assert again.get_entry(added.id) == added and again.leaf_id == added.id
    fork.close()
    s.close()


async def test_create_and_fork_publish_private_files_and_leave_no_temp_file(
    tmp_path: Path,
) -> None:
    repo, s, ids = await _branched_source(tmp_path)
    fork = await repo.fork(s, entry_id=ids[3], position="at")
    assert s.path is not None and fork.path is not None
    for path in (s.path, fork.path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.stat().st_nlink == 1
    assert sorted(p.name for p in s.path.parent.iterdir()) == sorted([s.path.name, fork.path.name])
    fork.close()
    s.close()


async def test_a_created_session_whose_file_is_replaced_refuses_to_append(
    tmp_path: Path,
) -> None:
    s = await JsonlSessionRepo(tmp_path / "root", fsync="never").create("/w")
    first = s.append_message(UserMessage(content="written"))  # through the create's descriptor
    assert s.path is not None
    copy = s.path.with_name("copy.jsonl")
    copy.write_bytes(s.path.read_bytes())
    os.replace(copy, s.path)
    before = s.path.read_bytes()
    with pytest.raises(SessionGoneError) as info:
        s.append_message(UserMessage(content="into the old inode"))
    assert info.value.reason == "replaced"
    assert s.path.read_bytes() == before
    assert s.get_entry(first.id) == first  # still read from the file it wrote
    s.close()


# --- found by an adversarial review -----------------------------------------------------------


@pytest.mark.parametrize("total", [10**400, 2**64, math.nan, math.inf, -math.inf])
async def test_a_cost_json_cannot_hold_is_refused_and_nothing_is_stored(
    tmp_path: Path, total: float
) -> None:
    session = await JsonlSessionRepo(tmp_path).create("/w")
    assert session.path is not None
    before = session.path.read_bytes()
    with pytest.raises(InvalidEntryError):
        session.append_message(AssistantMessage(usage=Usage(cost=Cost(total=total))))
    assert session.path.read_bytes() == before
    session.append_message(UserMessage(content="still writable"))
    session.close()


async def test_a_negative_zero_cost_is_returned_as_it_reads_back(tmp_path: Path) -> None:
    session = await JsonlSessionRepo(tmp_path).create("/w")
    entry = session.append_message(AssistantMessage(usage=Usage(cost=Cost(total=-0.0))))
    assert session.path is not None
    with open_session(session.path) as again:
        stored = again.get_entry(entry.id)
    returned = entry.message.usage.cost.total  # type: ignore[attr-defined]
    reread = stored.message.usage.cost.total  # type: ignore[attr-defined]
    assert math.copysign(1, returned) == math.copysign(1, reread)
    session.close()


async def test_a_session_opened_by_a_relative_path_survives_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = JsonlSessionRepo(tmp_path / "root")
    created = await repo.create("/w")
    path = created.path
    assert path is not None
    created.close()
    monkeypatch.chdir(path.parent)
    session = await repo.open(path.name)
    monkeypatch.chdir(tmp_path)
    entry = session.append_message(UserMessage(content="after chdir"))
    session.close()
    with open_session(path) as again:
        assert again.leaf_id == entry.id


async def test_a_fork_skips_a_damaged_line_it_would_have_to_re_encode(tmp_path: Path) -> None:
    # Line 3 is an orphan (its parent is missing, so it is re-attached and its line must be
    # encoded afresh) whose body does not decode: readers skip it, so must a fork.
    source = tmp_path / "source.jsonl"
    lines = [
        {"type": "session", "version": 3, "id": "src", "timestamp": "2024-01-01T00:00:00Z",
         "cwd": "/x"},
        {"type": "message", "id": "aaaaaaaa", "parentId": None, "timestamp": "t",
         "message": {"role": "user", "content": "a", "timestamp": 1}},
        {"type": "message", "id": "bbbbbbbb", "parentId": "zzzzzzzz", "timestamp": "t",
         "message": {"role": "user", "content": 5, "timestamp": 1}},
        {"type": "message", "id": "cccccccc", "parentId": "bbbbbbbb", "timestamp": "t",
         "message": {"role": "user", "content": "c", "timestamp": 1}},
    ]  # fmt: skip
    source.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    before = source.read_bytes()
    repo = JsonlSessionRepo(tmp_path / "root")
    for scope in ("branch", "tree"):
        with await repo.open(source) as session:
            fork = await repo.fork(session, scope=scope)  # type: ignore[arg-type]
        with fork:
            assert [m.content for m in fork.build_context().messages] == ["a", "c"]  # type: ignore[attr-defined]
            assert fork.path is not None
            with open_session(fork.path, strict=True) as strict:  # the fork itself is clean
                assert strict.entry_ids() == fork.entry_ids()
    assert source.read_bytes() == before


# --- values already as the decoder gives them are shared, not copied -------------------------


@pytest.mark.parametrize("message", MESSAGES, ids=[f"m{i}" for i in range(len(MESSAGES))])
async def test_a_message_read_back_appends_as_what_decoding_its_line_gives(
    tmp_path: Path, message: Any
) -> None:
    # Read-only values from a session (FrozenDict/FrozenList, floats for costs) may be shared
    # by the returned entry; what it holds must still be exactly what its line decodes to.
    canonical = decode_message(encode_message(message))
    s = await JsonlSessionRepo(tmp_path / "root", fsync="never").create("/w")
    entry = s.append_message(canonical)
    assert s.path is not None
    line = s.path.read_bytes().splitlines(keepends=True)[-1]
    decoded = decode_entry(orjson.loads(line))
    assert entry == decoded
    assert _shape(entry) == _shape(decoded)
    assert line == dumps_line(encode_entry(entry))
    s.close()


async def test_a_read_only_message_is_shared_and_a_mutable_part_is_copied(tmp_path: Path) -> None:
    s = await JsonlSessionRepo(tmp_path / "root", fsync="never").create("/w")
    shared = decode_message(encode_message(MESSAGES[2]))  # thinking, text, a tool call, usage
    assert s.append_message(shared).message is shared  # frozen all the way down: not copied
    inner: list[Any] = [1, 2]
    # Read-only outside, a plain list inside: the list is copied, read-only, and the frozen
    # parts around it are new objects holding the copy.
    arguments = FrozenDict({"items": inner, "opts": FrozenDict({"n": 1})})
    call = ToolCall(id="c1", name="read", arguments=arguments, extra=FrozenDict())
    reply = s.append_message(AssistantMessage(content=(call,), extra=FrozenDict(), timestamp=1))
    inner.append(3)
    block = reply.message.content[0]  # type: ignore[union-attr]
    assert isinstance(block, ToolCall) and block is not call
    assert block.arguments == {"items": [1, 2], "opts": {"n": 1}}
    assert type(block.arguments["items"]) is FrozenList
    assert block.arguments["opts"] is arguments["opts"]  # read-only already: shared
    s.close()


async def test_blocks_that_read_back_as_they_are_are_shared_around_one_that_is_copied(
    tmp_path: Path,
) -> None:
    s = await JsonlSessionRepo(tmp_path / "root", fsync="never").create("/w")
    frozen = decode_message(encode_message(MESSAGES[2])).content  # type: ignore[union-attr]
    mutable = ToolCall(id="c9", name="run", arguments={"cmd": "ls"})  # a plain dict: copied
    message = AssistantMessage(
        content=(frozen[0], frozen[2], mutable, frozen[3]), extra=FrozenDict(), timestamp=1
    )
    stored = s.append_message(message).message.content  # type: ignore[union-attr]
    assert [stored[0], stored[1], stored[3]] == [frozen[0], frozen[2], frozen[3]]
    assert stored[0] is frozen[0] and stored[1] is frozen[2] and stored[3] is frozen[3]
    assert stored[2] is not mutable and stored[2] == mutable
    assert type(stored[2].arguments) is FrozenDict  # type: ignore[union-attr]
    s.close()


async def test_a_create_without_unnamed_files_releases_its_temp_file_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where O_TMPFILE is missing, a create writes a named temp file that it holds locked (the
    # mark of a live writer) and then keeps its descriptor for the session: the lock must not
    # stay with it, or every other writer of the session would wait for it.
    monkeypatch.setattr(atomic, "_TMPFILE", 0)
    s = await JsonlSessionRepo(tmp_path / "root", fsync="never").create("/w")
    assert s.path is not None
    other = os.open(s.path, os.O_RDONLY)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the lock were held
        fcntl.flock(other, fcntl.LOCK_UN)
    finally:
        os.close(other)
    first = s.append_message(UserMessage(content="one", timestamp=1))
    with open_session(s.path) as writer:
        second = writer.append_message(UserMessage(content="two", timestamp=2))
    third = s.append_message(UserMessage(content="three", timestamp=3))
    assert [p.name for p in s.path.parent.iterdir()] == [s.path.name]  # no temp file left
    with open_session(s.path, strict=True) as again:
        assert again.entry_ids() == [first.id, second.id, third.id]
    s.close()
