"""Messages built when first read (issue 24, point 1).

A session's context holds its message bodies as JSON, each in a slot that builds the typed
message the first time it is read. What a slot builds equals, field by field (types included,
``repr``, hashing and pickling too), what decoding the line gives, for every message kind of
generated messages, the benchmark's workload and pi's real files; normalising the JSON gives
what normalising typed values gave (the typed code as it was: ``typed_request_path``). A body
the codec cannot be sure of is decoded when it is read, so damage is reported there and never
later, when a hook reads a message.
"""

from __future__ import annotations

import copy
import importlib.util
import pickle
import sys
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import typed_request_path as typed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from message_shapes import message_objects, messages_in_a_row
from stress import examples

from hooks import LazyMessages, Message, TextContent, ToolResultMessage, UserMessage
from repos import (
    CorruptSessionError,
    Entry,
    decode_entry,
    decode_message,
    encode_message,
    normalize_messages,
    normalized,
    open_session,
)
from repos._codec import CodecError, Slot, loads_line, stored_slot
from repos._context import _raw_context

REPO_ROOT = Path(__file__).resolve().parents[2]


def assert_same(lazy: Any, eager: Any, where: str = "message") -> None:
    """``lazy`` and ``eager`` hold equal values of the same types, field by field."""
    assert type(lazy) is type(eager), where
    if attrs.has(type(eager)):
        for f in attrs.fields(type(eager)):
            assert_same(getattr(lazy, f.name), getattr(eager, f.name), f"{where}.{f.name}")
    elif isinstance(eager, dict):
        assert list(lazy) == list(eager), where
        for key in eager:
            assert_same(lazy[key], eager[key], f"{where}[{key!r}]")
    elif isinstance(eager, list | tuple):
        assert len(lazy) == len(eager), where
        for i, (a, b) in enumerate(zip(lazy, eager, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert lazy == eager, where


def assert_same_message(lazy: Message, eager: Message) -> None:
    assert_same(lazy, eager)
    assert lazy == eager and repr(lazy) == repr(eager)
    assert pickle.loads(pickle.dumps(lazy)) == eager
    try:
        expected: int | type[BaseException] = hash(eager)
    except TypeError:  # a value holding a JSON object (extra, details) is not hashable
        expected = TypeError
    if expected is TypeError:
        with pytest.raises(TypeError):
            hash(lazy)
    else:
        assert hash(lazy) == expected


def _line(message: Any, entry_id: str = "abcd0001", parent: str | None = None) -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2025-12-08T22:41:05.306Z",
        "message": message,
    }


def _decoded(obj: Any) -> Entry | None:
    try:
        return decode_entry(obj)
    except CodecError:
        return None


# --- one body ---------------------------------------------------------------------------------


@settings(max_examples=examples(300, 1000), deadline=None)
@given(message_objects)
def test_a_slot_builds_what_decoding_the_line_gives(obj: dict[str, Any]) -> None:
    line = orjson.loads(orjson.dumps(_line(obj)))  # as a file gives it
    entry = _decoded(line)
    slot = stored_slot(line)
    if slot is None:
        return  # decoded at read instead (or damaged, and reported there)
    assert entry is not None, "a slot was made of a body that does not decode"
    assert not slot.built
    assert_same_message(slot.message, entry.message)  # type: ignore[union-attr]
    assert slot.built and slot.message is slot.message  # built once, then kept


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    out = copy.deepcopy(value)
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = new
    return out


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["text", "toolCall", "thinking", "image", "user", "assistant", "toolResult"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    max_examples=examples(300, 1000), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(obj=message_objects, data=st.data(), value=JSON, deep=st.integers(0, 70))
def test_a_slot_is_never_made_of_a_damaged_body(
    obj: dict[str, Any], data: st.DataObject, value: Any, deep: int
) -> None:
    # Any JSON in any place of a line (or a value nested up to past the cap): either the line
    # decodes and its slot builds the same message, or no slot is made (decoded at read).
    line = _line(obj)
    for _ in range(deep):
        value = [value]
    line = _replaced(line, data.draw(st.sampled_from(_paths(line))), value)
    entry = _decoded(line)
    slot = stored_slot(line)
    if slot is not None:
        assert entry is not None, "a slot was made of a body that does not decode"
        assert_same_message(slot.message, entry.message)  # type: ignore[union-attr]


def test_a_slot_of_a_typed_message_holds_its_json_and_the_value_itself() -> None:
    message = UserMessage(content=[TextContent(text="hi")], timestamp=5)
    slot = Slot(value=message)
    assert slot.built and slot.message is message
    assert slot.json == encode_message(message)
    with pytest.raises(ValueError, match="needs its JSON or its value"):
        Slot()


# --- the lazy sequence --------------------------------------------------------------------------


def test_a_lazy_sequence_is_equal_hashes_and_pickles_as_the_tuple_of_its_messages() -> None:
    bodies = [
        {"role": "user", "content": "one", "timestamp": 1},
        {"role": "user", "content": [{"type": "text", "text": "two"}], "timestamp": 2},
    ]
    lazy: LazyMessages[Message] = LazyMessages(stored_slot(_line(b)) for b in bodies)  # type: ignore[misc]
    eager = tuple(decode_message(b) for b in bodies)
    assert not any(s.built for s in lazy.slots)
    assert lazy[1] == eager[1]
    assert [s.built for s in lazy.slots] == [False, True]  # only what was read is built
    assert lazy == eager and eager == lazy
    assert not (lazy != eager)  # noqa: SIM202 (__ne__ is tested here)
    assert lazy != eager[:1] and lazy != list(eager)  # as a tuple compares
    assert repr(lazy) == repr(eager)
    for value in (eager, lazy):  # hashes as the tuple does: messages holding JSON do not
        with pytest.raises(TypeError, match="unhashable"):
            hash(value)
    assert pickle.loads(pickle.dumps(lazy)) == eager
    assert type(pickle.loads(pickle.dumps(lazy))) is tuple
    assert lazy + eager == eager + eager and eager + lazy == eager + eager
    assert lazy[1:] == eager[1:] and list(reversed(lazy)) == list(reversed(eager))
    assert len(lazy) == 2 and eager[0] in lazy and lazy.index(eager[1]) == 1
    assert copy.deepcopy(lazy) is lazy


# --- normalising the JSON -----------------------------------------------------------------------


@settings(
    max_examples=examples(300, 1000), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(messages_in_a_row(), st.booleans())
def test_normalising_the_json_gives_what_normalising_typed_values_gave(
    objs: list[dict[str, Any]], stored: bool
) -> None:
    lines = [orjson.loads(orjson.dumps(_line(o, f"abcd{i:04x}"))) for i, o in enumerate(objs)]
    entries = [_decoded(line) for line in lines]
    kept = [(line, e) for line, e in zip(lines, entries, strict=True) if e is not None]
    eager = [e.message for _, e in kept]  # type: ignore[attr-defined]
    # The slots a session's context holds: the checked JSON, else the value decoded at read.
    slots = [
        (stored_slot(line) if stored else None) or Slot(value=e.message)  # type: ignore[attr-defined]
        for line, e in kept
    ]
    lazy = normalized(LazyMessages(slots))
    want = typed.normalize_messages(eager)
    assert len(lazy) == len(want)
    for got, expected in zip(lazy, want, strict=True):
        assert_same_message(got, expected)
    assert normalize_messages(eager) == want  # the public typed function, too
    # Messages normalising keeps are the same values (built only when read): a hook comparing
    # by identity sees what it saw.
    unchanged = {id(m) for m in eager}
    for slot, expected in zip(lazy.slots, want, strict=True):
        if id(expected) in unchanged:
            assert slot in slots


# --- whole sessions: the workload and pi's files -----------------------------------------------


def _gen_workload() -> Any:
    path = REPO_ROOT / "bench" / "gen_workload.py"
    spec = importlib.util.spec_from_file_location("gen_workload_lazy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def _check_session(path: Path) -> set[str]:
    """The first context of the session at ``path`` (messages as slots of their JSON) against
    its entries decoded one by one and normalised by the typed code; the roles it held."""
    with open_session(path, fsync="never") as session:
        context = session.build_context().messages
        assert isinstance(context, LazyMessages)
        stored = [s for s in context.slots if not s.built]
        entries = [session.get_entry(i) for i in session.path_ids(session.leaf_id)]
        eager = typed.normalize_messages(_raw_context(entries)[0])
        assert len(context) == len(eager)
        for got, expected in zip(context, eager, strict=True):
            assert_same_message(got, expected)
        return {s.message.role for s in stored}


def test_the_workload_s_messages_are_read_as_json_and_built_equal(tmp_path: Path) -> None:
    gen = _gen_workload()
    roles: set[str] = set()
    for seed in (1, 2, 3):
        lines, _ = gen.session(1500, seed, gen.corpus(seed, 1 << 16), 1_767_000_000_000)
        path = tmp_path / f"w{seed}.jsonl"
        path.write_bytes(b"".join(lines))
        for raw in lines[1:]:
            obj = orjson.loads(raw)
            if obj["type"] == "message":  # every body of the workload takes the JSON path
                assert stored_slot(obj) is not None, raw[:200]
        roles |= _check_session(path)
    assert roles == {"user", "assistant", "toolResult"}


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["before-compaction.jsonl", "large-session.jsonl"])
def test_pi_s_messages_are_read_as_json_and_built_equal(
    fixtures_dir: Path, tmp_path: Path, name: str
) -> None:
    # pi's files are v1 (ids made up on read, so bodies are decoded); their messages, written
    # as a v3 session, are read as JSON.
    raw = (fixtures_dir / "pi" / name).read_bytes().splitlines()
    header = orjson.loads(raw[0])
    out = [orjson.dumps({**header, "version": 3}) + b"\n"]
    parent: str | None = None
    lazy = 0
    for i, line in enumerate(raw[1:]):
        obj = orjson.loads(line)
        if obj.get("type") != "message":
            continue
        entry = _line(obj["message"], f"{i:08x}", parent)
        slot, decoded = stored_slot(entry), _decoded(entry)
        if slot is not None:
            lazy += 1
            assert decoded is not None
            assert_same_message(slot.message, decoded.message)  # type: ignore[attr-defined]
        out.append(orjson.dumps(entry) + b"\n")
        parent = entry["id"]
    assert lazy > 0.9 * (len(out) - 1)  # nearly all take the JSON path
    path = tmp_path / "v3.jsonl"
    path.write_bytes(b"".join(out))
    assert _check_session(path) >= {"user", "assistant"}


# --- damage --------------------------------------------------------------------------------------


def test_a_damaged_body_is_reported_when_the_context_is_built_not_when_a_message_is_read(
    tmp_path: Path,
) -> None:
    header = {"type": "session", "version": 3, "id": "s1", "timestamp": "t", "cwd": "/w"}
    good = {"role": "user", "content": "one", "timestamp": 1}
    # Valid JSON that cannot be a message: a usage count that is an object.
    bad = {
        "role": "assistant",
        "content": [{"type": "text", "text": "two"}],
        "usage": {"input": {"n": 1}},
        "timestamp": 2,
    }
    path = tmp_path / "s.jsonl"
    lines = [header, _line(good, "aaaa0001"), _line(bad, "aaaa0002", "aaaa0001")]
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    with open_session(path) as session:
        context = session.build_context()
        assert [d.code for d in session.diagnostics] == ["corrupt_body"]
        assert isinstance(context.messages, LazyMessages)
        assert list(context.messages) == [decode_message(good)]
    with pytest.raises(CorruptSessionError):  # strict sessions check every body at open
        open_session(path, strict=True)


def test_a_context_hook_sees_the_messages_lazily_built_and_equal(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 3, "id": "s1", "timestamp": "t", "cwd": "/w"}
    call = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"p": 1}}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "m",
        "stopReason": "toolUse",
        "timestamp": 2,
    }
    result = {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "read",
        "content": [{"type": "text", "text": ""}],
        "isError": False,
        "timestamp": 3,
    }
    bodies = [{"role": "user", "content": "go", "timestamp": 1}, call, result]
    lines = [header] + [
        _line(b, f"aaaa000{i}", None if i == 0 else f"aaaa000{i - 1}") for i, b in enumerate(bodies)
    ]
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    with open_session(path) as session:
        messages = session.build_context().messages
        assert isinstance(messages, LazyMessages)
        # The empty result was changed by normalising: built; the others are not yet.
        assert [s.built for s in messages.slots] == [False, False, True]
        assert messages[2] == ToolResultMessage(
            tool_call_id="c1", tool_name="read", content=(TextContent(text="(no output)"),),
            timestamp=3,
        )  # fmt: skip
        assert messages == typed.normalize_messages([decode_message(b) for b in bodies])


def test_a_tool_result_s_string_content_is_written_back_only_while_it_is_the_content() -> None:
    # pi allows a string; it reads as one text block and is written back as the string. Once
    # the content changed (normalising an empty one, a hook's patch), the blocks are written:
    # before, the stale string was, and a slot's JSON disagreed with its value.
    obj = {"role": "toolResult", "toolCallId": "c1", "toolName": "r", "content": "", "timestamp": 1}
    read = decode_message(obj)
    assert encode_message(read)["content"] == ""
    changed = attrs.evolve(read, content=(TextContent(text="(no output)"),))
    assert encode_message(changed)["content"] == [{"type": "text", "text": "(no output)"}]
    assert decode_message(encode_message(changed)).content == changed.content


@pytest.mark.parametrize(
    "number", ["1e400", "-1e400", "123456789012345678901234567890", "18446744073709551616"]
)
def test_a_line_with_a_lone_surrogate_holds_no_number_orjson_refuses(number: str) -> None:
    """Issue 24 attack, F1, F4, F5: a line orjson refuses for a lone surrogate was read by
    Python's json, which takes `1e400` as infinity and any integer; a cost of infinity then
    passed the slot check and raised when the message was first built (inside a hook, at
    compaction), a huge integer in arguments crashed `run` and `show`. Such a line is refused
    as orjson refuses it, and reported at read."""
    line = (
        '{"type":"message","id":"a","parentId":null,"timestamp":"t","message":'
        '{"role":"assistant","content":[{"type":"text","text":"x\\ud800"}],'
        '"usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"cost":{"total":'
        + number
        + '}},"stopReason":"stop","timestamp":1}}'
    ).encode()
    with pytest.raises(orjson.JSONDecodeError):
        loads_line(line)
    assert loads_line(line.replace(number.encode(), b"1")) is not None  # the surrogate alone
