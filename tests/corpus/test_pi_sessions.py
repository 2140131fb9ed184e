"""The real pi sessions of the corpus (``pi/before-compaction.jsonl``, ``pi/large-session.jsonl``
in ``$HARNESS_TEST_CORPUS`` or ``../shared/fixtures``): every line round-trips, reading never
writes, v1 ids are deterministic, migration, context, compaction cut, request validity, listing.

The same properties are tested on generated sessions (``tests/fixtures/pi_sessions.py``) in
``tests/repos``, ``tests/harness``; these keep proving them on files pi itself wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness import to_llm_messages
from harness._compaction import CompactionSettings, prepare_compaction
from harness._tokens import estimate_tokens
from harness._validate import request_problems
from hooks import (
    AssistantMessage,
    CompactionSummaryMessage,
    Message,
    TextContent,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from repos import (
    CompactionEntry,
    Entry,
    JsonlSessionRepo,
    MessageEntry,
    build_context,
    decode_entry,
    encode_entry,
    entry_message,
    open_session,
)

pytestmark = pytest.mark.corpus

HEX8 = re.compile(r"^[0-9a-f]{8}$")


PI_FIXTURES = ["before-compaction.jsonl", "large-session.jsonl"]


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


def file_digest(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return hashlib.sha256(path.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_size


def line_objs(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


@pytest.mark.parametrize("name", PI_FIXTURES)
def test_reading_a_fixture_never_writes(
    name: str, fixtures_dir: Path, pi_copy: Callable[[str], Path]
) -> None:
    path = pi_copy(name)
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
    assert path.read_bytes() == (fixtures_dir / "pi" / name).read_bytes()


_SUBPROCESS = """
import json, sys
from pathlib import Path
from repos import open_session
with open_session(Path(sys.argv[1])) as s:
    ids = s.entry_ids()
    print(json.dumps({"leaf": s.leaf_id, "ids": ids[:5] + ids[-5:], "n": len(ids)}))
"""


@pytest.mark.parametrize("name", PI_FIXTURES)
def test_v1_ids_are_deterministic_hex_and_chained(name: str, fixtures_dir: Path) -> None:
    path = fixtures_dir / "pi" / name
    n_lines = len(path.read_bytes().splitlines())
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


def test_v1_first_kept_entry_index_maps_to_that_lines_id(fixtures_dir: Path) -> None:
    path = fixtures_dir / "pi" / "before-compaction.jsonl"
    objs = line_objs(path)
    compactions = [i for i, o in enumerate(objs) if o["type"] == "compaction"]
    assert len(compactions) == 2
    with open_session(path) as s:
        ids = s.entry_ids()  # line i (header = 0) is ids[i - 1]
        for line in compactions:
            entry = s.get_entry(ids[line - 1])
            assert isinstance(entry, CompactionEntry)
            index = objs[line]["firstKeptEntryIndex"]
            assert entry.first_kept_entry_id == ids[index - 1]
            kept = s.get_entry(entry.first_kept_entry_id)
            assert isinstance(kept, MessageEntry)
            assert kept.message.timestamp == objs[index]["message"]["timestamp"]
            assert entry.tokens_before == objs[line]["tokensBefore"]


@pytest.mark.parametrize("name", PI_FIXTURES)
def test_first_append_migrates_v1_to_v3(
    name: str, fixtures_dir: Path, pi_copy: Callable[[str], Path]
) -> None:
    original = (fixtures_dir / "pi" / name).read_bytes()
    path = pi_copy(name)
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


@pytest.mark.parametrize("name", ["before-compaction.jsonl", "large-session.jsonl"])
def test_every_pi_fixture_line_round_trips(fixtures_dir: Path, name: str) -> None:
    lines = (fixtures_dir / "pi" / name).read_bytes().splitlines()[1:]
    for index, line in enumerate(lines, start=1):
        obj = orjson.loads(line)
        entry = decode_entry(obj, entry_id="e", parent_id=None, line_id=lambda i: f"line{i}")
        out = encode_entry(entry)
        assert out.pop("id") == "e" and out.pop("parentId") is None
        if obj["type"] == "compaction":
            assert out["firstKeptEntryId"] == f"line{obj.pop('firstKeptEntryIndex')}"
            obj["firstKeptEntryId"] = out["firstKeptEntryId"]
        assert out == obj, f"line {index} changed"


def assert_valid(messages: tuple[Message, ...]) -> None:
    """Every result right after its call's message, every call answered, nothing empty."""
    pending: list[str] = []
    for m in messages:
        if isinstance(m, ToolResultMessage):
            assert pending and pending[0] == m.tool_call_id, f"misplaced result {m.tool_call_id}"
            pending.pop(0)
            continue
        assert not pending, f"calls without results: {pending}"
        if isinstance(m, AssistantMessage):
            assert m.content, "empty assistant message"
            assert all(b.text.strip() for b in m.content if isinstance(b, TextContent)), (
                "empty text block"
            )
            pending = [c.id for c in m.tool_calls]
    assert not pending


def test_pi_context_after_second_compaction(fixtures_dir: Path) -> None:
    path = fixtures_dir / "pi" / "before-compaction.jsonl"
    lines = path.read_bytes().splitlines()
    second = orjson.loads(lines[628])
    kept_user = orjson.loads(lines[second["firstKeptEntryIndex"]])
    assert kept_user["message"]["role"] == "user"

    with open_session(path) as session:
        context = session.build_context()
    first = context.messages[0]
    assert isinstance(first, CompactionSummaryMessage)
    assert first.summary == second["summary"]
    assert first.tokens_before == second["tokensBefore"]
    assert isinstance(context.messages[1], UserMessage)
    assert context.messages[1].timestamp == kept_user["message"]["timestamp"]
    assert_valid(context.messages)
    # Everything after the second compaction is in the context, in order.
    after = [orjson.loads(x) for x in lines[629:]]
    after_msgs = [o["message"] for o in after if o["type"] == "message"]
    last = context.messages[-1]
    assert last.timestamp == after_msgs[-1]["timestamp"]  # type: ignore[union-attr]


def test_large_session_context_is_valid_to_send(fixtures_dir: Path) -> None:
    with open_session(fixtures_dir / "pi" / "large-session.jsonl") as session:
        context = session.build_context()
    assert_valid(context.messages)
    assert context.thinking_level in ("off", "minimal", "low", "medium", "high")
    assert context.model is not None and context.model.provider == "anthropic"


@pytest.mark.parametrize("name", ["before-compaction.jsonl", "large-session.jsonl"])
def test_no_leaf_of_a_pi_fixture_yields_an_invalid_request(fixtures_dir: Path, name: str) -> None:
    with open_session(fixtures_dir / "pi" / name) as session:
        ids = session.entry_ids()
        for leaf in ids[::3] + ids[-1:]:
            messages = to_llm_messages(build_context(session.get_branch(leaf)).messages)
            assert request_problems(messages) == [], f"leaf {leaf}"


def raw_kept(path: Sequence[Entry], first_kept: str) -> list[Message]:
    """The context after appending a compaction at the end of ``path`` with ``first_kept``,
    selected like repos.build_context but NOT normalised (so a bad cut shows up)."""
    ids = [e.id for e in path]
    start = ids.index(first_kept)
    out: list[Message] = [CompactionSummaryMessage(summary="NEW", tokens_before=0)]
    for entry in path[start:]:
        m = None if isinstance(entry, CompactionEntry) else entry_message(entry)
        if m is not None:
            out.append(m)
    return out


def pair_problems(messages: Sequence[Message]) -> list[str]:
    """Tool results without an earlier call, in the order sent."""
    seen: set[str] = set()
    problems = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            seen.update(c.id for c in m.tool_calls)
        elif isinstance(m, ToolResultMessage) and m.tool_call_id not in seen:
            problems.append(f"orphan result {m.tool_call_id}")
    return problems


def kept_tokens(path: Sequence[Entry], first_kept: str) -> int:
    start = [e.id for e in path].index(first_kept)
    return sum(
        estimate_tokens((m,))
        for e in path[start:]
        if not isinstance(e, CompactionEntry) and (m := entry_message(e)) is not None
    )


@pytest.mark.parametrize("name", ["large-session.jsonl", "before-compaction.jsonl"])
def test_pi_fixture(fixtures_dir: Path, name: str) -> None:
    with open_session(fixtures_dir / "pi" / name) as session:
        path = session.get_branch()
        prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=20000))
        assert prep is not None
        ids = [e.id for e in path]
        assert prep.first_kept_entry_id in ids
        kept_entry = path[ids.index(prep.first_kept_entry_id)]
        assert not (
            isinstance(kept_entry, MessageEntry)
            and isinstance(kept_entry.message, ToolResultMessage)
        )
        assert prep.tokens_before > 0
        assert prep.leaf_id == path[-1].id
        assert pair_problems(raw_kept(path, prep.first_kept_entry_id)) == []
        # about keep_recent_tokens are kept (the cut lands on a message boundary)
        assert 15_000 <= kept_tokens(path, prep.first_kept_entry_id) <= 40_000
        assert prep.messages_to_summarize or prep.turn_prefix_messages
        assert prep.modified_files  # pi's sessions edit files
        assert not set(prep.read_files) & set(prep.modified_files)
        assert list(prep.read_files) == sorted(prep.read_files)
        if name == "before-compaction.jsonl":
            assert prep.previous_summary


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
    }


@pytest.fixture
def pi_root(tmp_path: Path, fixtures_dir: Path) -> tuple[JsonlSessionRepo, dict[str, Path]]:
    """A root holding copies of both pi fixtures under `--x--`, named like pi names them."""
    root = tmp_path / "root"
    folder = root / "--x--"
    folder.mkdir(parents=True)
    paths = {}
    for name in ("before-compaction.jsonl", "large-session.jsonl"):
        data = (fixtures_dir / "pi" / name).read_bytes()
        header = orjson.loads(data.split(b"\n", 1)[0])
        stamp = header["timestamp"].replace(":", "-").replace(".", "-")
        path = folder / f"{stamp}_{header['id']}.jsonl"
        path.write_bytes(data)
        paths[name] = path
    return JsonlSessionRepo(root), paths


async def test_list_reports_pi_sessions(
    pi_root: tuple[JsonlSessionRepo, dict[str, Path]], fixtures_dir: Path
) -> None:
    repo, paths = pi_root
    infos = await repo.list()
    assert repo.list_problems == ()
    by_path = {i.path: i for i in infos}
    assert set(by_path) == set(paths.values())
    for path in paths.values():
        info, want = by_path[path], _expected_info(path)
        assert info.id == want["id"]
        assert info.cwd == want["cwd"]
        assert info.name is None
        assert info.parent_session is None
        assert info.created == want["created"]
        assert info.created.tzinfo is not None and info.modified.tzinfo is not None
        assert _ms(info.modified) == want["modified_ms"]
        assert info.message_count == want["message_count"]
        assert info.first_message == want["first_message"]
    # large-session's header was rewritten after its first entries: activity comes from the
    # messages, never from the header.
    large, want = (
        by_path[paths["large-session.jsonl"]],
        _expected_info(paths["large-session.jsonl"]),
    )
    assert want["first_ms"] < _ms(large.created)
    assert _ms(large.modified) == want["modified_ms"] != _ms(large.created)
    assert [i.modified for i in infos] == sorted((i.modified for i in infos), reverse=True)
    # Listing read, never wrote.
    for name, path in paths.items():
        assert path.read_bytes() == (fixtures_dir / "pi" / name).read_bytes()
