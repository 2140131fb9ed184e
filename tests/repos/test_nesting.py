"""The nesting cap (``repos.MAX_NESTING``) and decoding any JSON at all (issue 18, class 11).

A session line is untrusted: one nested 600 levels deep (orjson parses up to 1024) used to
crash every reader with ``RecursionError``. Now a line nested deeper than the cap is a damaged
line (``CodecError`` when decoded: ``corrupt_body``/``corrupt_line`` in recover mode,
``CorruptSessionError`` in strict mode), every writer refuses to write one
(``InvalidEntryError``), and a line at exactly the cap decodes and re-encodes unchanged in every
place a line can nest. Decoding random JSON in every field of every entry kind raises nothing
but ``CodecError``.

Real files under ``tmp_path``; the other stores get their lines as ``harness sessions copy``
gives them (raw lines copied from a JSONL root).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stress import examples

from repos import (
    MAX_NESTING,
    CorruptSessionError,
    InvalidEntryError,
    JsonlSessionRepo,
    MemorySessionRepo,
    SqliteSessionRepo,
    copy_sessions,
    decode_entry,
    encode_entry,
    open_line_store,
    open_session,
)
from repos._codec import (
    CodecError,
    decode_header,
    decode_message,
    dumps_line,
    encode_header,
    encode_message,
    loads_line,
    nested_deeper,
)

HEADER = {
    "type": "session",
    "version": 3,
    "id": "deadbeef-0000-4000-8000-000000000000",
    "timestamp": "2025-12-08T22:41:05.306Z",
    "cwd": "/work",
}
ROOT = {
    "type": "message",
    "id": "aaaaaaaa",
    "parentId": None,
    "timestamp": "2025-12-08T22:41:05.306Z",
    "message": {"role": "user", "content": "hi", "timestamp": 1},
}


def nest(levels: int) -> Any:
    """A JSON value ``levels`` objects and arrays deep (objects and arrays in turn, an object
    outermost); 0 levels is a number."""
    value: Any = 1
    for n in range(levels):
        value = {"k": value} if (levels - n) % 2 else [value]
    return value


def nest_bytes(levels: int) -> bytes:
    """The JSON text of ``nest(levels)``, written out by hand: encoders stop at a few hundred
    levels, and these tests need lines deeper than that."""
    out = b"1"
    for n in range(levels):
        out = b'{"k":' + out + b"}" if (levels - n) % 2 else b"[" + out + b"]"
    return out


def with_deep(make: Callable[[Any], dict[str, Any]], levels: int) -> bytes:
    """The line ``make`` builds with ``nest(levels)`` in its place."""
    return orjson.dumps(make("@deep@")).replace(b'"@deep@"', nest_bytes(levels))


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def _entry(kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "id": "bbbbbbbb",
        "parentId": "aaaaaaaa",
        "timestamp": "2025-12-08T22:41:06.000Z",
        **fields,
    }


def _assistant(**fields: Any) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "m",
        "usage": {
            "input": 1,
            "output": 2,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 3,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "stop",
        "timestamp": 2,
    }
    message.update(fields)
    return _entry("message", message=message)


# Every place a line can hold free-form JSON: (name, the line with V there, V's nesting level
# in the line when V is an object or array; the line's own object is level 1).
Place = tuple[str, Callable[[Any], dict[str, Any]], int]
PLACES: list[Place] = [
    (
        "tool call arguments",
        lambda v: _assistant(
            content=[{"type": "toolCall", "id": "t1", "name": "read", "arguments": v}]
        ),
        5,
    ),
    (
        "tool result details",
        lambda v: _entry(
            "message",
            message={
                "role": "toolResult",
                "toolCallId": "t1",
                "toolName": "read",
                "content": [{"type": "text", "text": "x"}],
                "details": v,
                "isError": False,
                "timestamp": 3,
            },
        ),
        3,
    ),
    ("custom entry data", lambda v: _entry("custom", customType="ext", data=v), 2),
    (
        "custom_message details",
        lambda v: _entry("custom_message", customType="c", content="x", display=True, details=v),
        2,
    ),
    (
        "custom_message block field",
        lambda v: _entry(
            "custom_message",
            customType="c",
            content=[{"type": "text", "text": "x", "extra": v}],
            display=True,
        ),
        4,
    ),
    (
        "compaction details",
        lambda v: _entry(
            "compaction", summary="s", firstKeptEntryId="aaaaaaaa", tokensBefore=9, details=v
        ),
        2,
    ),
    (
        "branch_summary details",
        lambda v: _entry("branch_summary", fromId="aaaaaaaa", summary="s", details=v),
        2,
    ),
    ("an entry's unknown field", lambda v: {**ROOT, "id": "bbbbbbbb", "extra": v}, 2),
    ("a message's unknown field", lambda v: _assistant(extra=v), 3),
    (
        "a text block's unknown field",
        lambda v: _assistant(content=[{"type": "text", "text": "ok", "extra": v}]),
        5,
    ),
    (
        "a user block's unknown field",
        lambda v: _entry(
            "message",
            message={
                "role": "user",
                "content": [{"type": "text", "text": "x", "extra": v}],
                "timestamp": 4,
            },
        ),
        5,
    ),
    (
        "usage's unknown field",
        lambda v: _assistant(
            usage={
                "input": 1,
                "output": 1,
                "cacheRead": 0,
                "cacheWrite": 0,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
                "extra": v,
            }
        ),
        4,
    ),
    (
        "cost's unknown field",
        lambda v: _assistant(
            usage={
                "input": 1,
                "output": 1,
                "cacheRead": 0,
                "cacheWrite": 0,
                "cost": {
                    "input": 0,
                    "output": 0,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "total": 0,
                    "extra": v,
                },
            }
        ),
        5,
    ),
    ("an unknown entry type", lambda v: _entry("future_kind", payload=v), 2),
    (
        "an unknown message role",
        lambda v: _entry("message", message={"role": "alien", "payload": v, "timestamp": 5}),
        3,
    ),
    (
        "an unknown content block",
        lambda v: _assistant(content=[{"type": "alien", "payload": v}]),
        5,
    ),
    ("a leaf entry's unknown field", lambda v: _entry("leaf", targetId="aaaaaaaa", extra=v), 2),
    (
        "a label entry's unknown field",
        lambda v: _entry("label", targetId="aaaaaaaa", label="x", extra=v),
        2,
    ),
]
PLACE_IDS = [p[0] for p in PLACES]


def _line(make: Callable[[Any], dict[str, Any]], level: int, line_depth: int) -> bytes:
    """The line ``make`` builds, nested exactly ``line_depth`` levels deep."""
    obj = make(nest(line_depth - level + 1))
    assert depth(obj) == line_depth
    return orjson.dumps(obj)


@pytest.mark.parametrize(("name", "make", "level"), PLACES, ids=PLACE_IDS)
def test_a_line_at_the_cap_decodes_and_one_level_deeper_does_not(
    name: str, make: Callable[[Any], dict[str, Any]], level: int
) -> None:
    at_cap = _line(make, level, MAX_NESTING)
    entry = decode_entry(loads_line(at_cap))
    # What was read writes back the same (and so an append of it would be read back).
    assert orjson.loads(dumps_line(encode_entry(entry))) == orjson.loads(at_cap)
    assert not nested_deeper(orjson.loads(at_cap))

    deeper = _line(make, level, MAX_NESTING + 1)
    assert nested_deeper(orjson.loads(deeper))
    with pytest.raises(CodecError):
        decode_entry(loads_line(deeper))


@pytest.mark.parametrize("levels", [MAX_NESTING + 1, 100, 600, 1000])
@pytest.mark.parametrize(("name", "make", "level"), PLACES, ids=PLACE_IDS)
def test_deep_lines_are_a_codec_error_never_a_recursion_error(
    name: str, make: Callable[[Any], dict[str, Any]], level: int, levels: int
) -> None:
    line = with_deep(make, levels - level + 1)
    with pytest.raises(CodecError):
        decode_entry(loads_line(line))


def test_a_header_at_the_cap_decodes_and_deeper_metadata_does_not() -> None:
    at_cap = {**HEADER, "metadata": nest(MAX_NESTING - 1)}
    header = decode_header(loads_line(orjson.dumps(at_cap)))
    assert orjson.loads(dumps_line(encode_header(header))) == at_cap
    for levels in (MAX_NESTING, 600, 1000):
        with pytest.raises(CodecError):
            decode_header({**HEADER, "metadata": nest(levels)})
        with pytest.raises(CodecError):
            decode_header({**HEADER, "somethingElse": nest(levels)})


@pytest.mark.parametrize(
    "field",
    ["api", "provider", "model", "stopReason", "timestamp", "usage.totalTokens", "cost.input"],
)
@pytest.mark.parametrize("levels", [1, 600])
def test_an_object_or_array_where_a_scalar_belongs_is_a_codec_error(
    field: str, levels: int
) -> None:
    # These fields are coerced (str(), bool()) when they hold another scalar, as pi does; a
    # container was coerced too (its Python repr became the model's name), unchecked.
    line = _assistant()
    message = line["message"]
    if field == "usage.totalTokens":
        message["usage"]["totalTokens"] = nest(levels)
    elif field == "cost.input":
        message["usage"]["cost"]["input"] = nest(levels)
    elif field == "timestamp":
        line["timestamp"] = nest(levels)
    else:
        message[field] = nest(levels)
    with pytest.raises(CodecError):
        decode_entry(line)


@pytest.mark.parametrize(
    ("kind", "fields", "key"),
    [
        ("message", {"message": {"role": "toolResult", "toolCallId": "t"}}, "message.isError"),
        ("message", {"message": {"role": "toolResult", "toolCallId": "t"}}, "message.toolName"),
        ("message", {"message": {"role": "bashExecution"}}, "message.command"),
        ("message", {"message": {"role": "bashExecution"}}, "message.exitCode"),
        ("message", {"message": {"role": "custom", "content": "x"}}, "message.display"),
        ("custom_message", {"customType": "c", "content": "x"}, "display"),
        ("compaction", {"summary": "s", "firstKeptEntryId": "aaaaaaaa"}, "fromHook"),
    ],
)
def test_more_scalar_fields_refuse_containers(kind: str, fields: dict[str, Any], key: str) -> None:
    line = _entry(kind, **copy.deepcopy(fields))
    target = line
    *path, last = key.split(".")
    for part in path:
        target = target[part]
    target[last] = nest(600)
    with pytest.raises(CodecError):
        decode_entry(line)


def test_a_cost_that_is_no_number_is_a_codec_error_not_a_value_error() -> None:
    line = _assistant()
    line["message"]["usage"]["cost"]["total"] = "not a number"
    with pytest.raises(CodecError):
        decode_entry(line)
    line["message"]["usage"]["cost"]["total"] = "0.25"  # a number in a string reads as pi's
    entry = decode_entry(line)
    assert entry.message.usage.cost.total == 0.25  # type: ignore[attr-defined]


def test_a_lone_surrogate_in_a_deep_line_is_a_codec_error() -> None:
    # orjson refuses the lone surrogate, so the line goes through the json module, whose
    # result was walked recursively: RecursionError past ~450 levels.
    deep = "[" * 600 + '"\\ud800"' + "]" * 600
    raw = (
        '{"type":"custom","id":"x","parentId":null,"timestamp":"t","customType":"c","data":'
        + deep
        + "}"
    ).encode()
    with pytest.raises(CodecError):
        loads_line(raw)
    at_cap = "[" * (MAX_NESTING - 1) + '"\\ud800"' + "]" * (MAX_NESTING - 1)
    raw = raw.replace(deep.encode(), at_cap.encode())
    entry = decode_entry(loads_line(raw))
    assert orjson.dumps(encode_entry(entry)).count(b"\xef\xbf\xbd") == 1  # read as U+FFFD


# --- files: what reading makes of a deep line ----------------------------------------------


def _file(path: Path, *lines: dict[str, Any] | bytes) -> Path:
    raw = [x if isinstance(x, bytes) else orjson.dumps(x) for x in (HEADER, *lines)]
    path.write_bytes(b"\n".join(raw) + b"\n")
    return path


CHILD = {
    "type": "message",
    "id": "cccccccc",
    "parentId": "bbbbbbbb",
    "timestamp": "2025-12-08T22:41:07.000Z",
    "message": {"role": "user", "content": "after", "timestamp": 6},
}


def _deep_line(levels: int = 600) -> bytes:
    # The reproduction: a tool result whose details nest 600 levels.
    return with_deep(PLACES[1][1], levels - 2)


@pytest.mark.parametrize("leaf_is_deep", [False, True])
def test_recover_mode_skips_a_deep_line_and_reports_where_it_is(
    tmp_path: Path, leaf_is_deep: bool
) -> None:
    deep = _deep_line()
    tail: list[dict[str, Any] | bytes] = [deep] if leaf_is_deep else [deep, CHILD]
    path = _file(tmp_path / "s.jsonl", ROOT, *tail)
    offset = path.read_bytes().index(deep)
    with open_session(path) as session:
        context = session.build_context()
        expected = ["hi"] if leaf_is_deep else ["hi", "after"]
        assert [m.content for m in context.messages] == expected  # type: ignore[union-attr]
        assert [e.id for e in session.entries()] == ["aaaaaaaa"] + (
            [] if leaf_is_deep else ["cccccccc"]
        )
        assert len(session.get_tree()) == 1
        found = [d for d in session.diagnostics if d.code == "corrupt_body"]
        assert [(d.line, d.offset) for d in found] == [(3, offset)]
    with pytest.raises(CorruptSessionError) as info:
        open_session(path, strict=True)
    assert (info.value.code, info.value.line, info.value.offset) == ("corrupt_session", 3, offset)


@pytest.mark.parametrize("kind", ["leaf", "label", "session_info"])
def test_a_deep_line_of_a_type_read_at_open_is_a_corrupt_line(tmp_path: Path, kind: str) -> None:
    # Labels, names and leaf moves are decoded while the file is indexed.
    fields = {"targetId": "aaaaaaaa"} if kind != "session_info" else {"name": "n"}
    deep = with_deep(lambda v: _entry(kind, **fields, extra=v), 599)
    path = _file(tmp_path / "s.jsonl", ROOT, deep)
    offset = path.read_bytes().index(deep)
    with open_session(path) as session:
        assert [(d.code, d.line, d.offset) for d in session.diagnostics] == [
            ("corrupt_line", 3, offset)
        ]
        assert session.leaf_id == "aaaaaaaa"
    with pytest.raises(CorruptSessionError) as info:
        open_session(path, strict=True)
    assert (info.value.line, info.value.offset) == (3, offset)


@pytest.mark.parametrize("levels", [MAX_NESTING + 1, 1000, 1100])
def test_a_deep_header_is_a_corrupt_session(tmp_path: Path, levels: int) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(with_deep(lambda v: {**HEADER, "metadata": v}, levels - 1) + b"\n")
    with pytest.raises(CorruptSessionError) as info:
        open_session(path)
    assert (info.value.line, info.value.offset) == (1, 0)


def _copied(tmp_path: Path, target: str, *lines: dict[str, Any] | bytes) -> None:
    root = tmp_path / "jsonl"
    folder = root / "--work--"
    folder.mkdir(parents=True)
    _file(folder / f"2025-12-08T22-41-05-306Z_{HEADER['id']}.jsonl", *lines)
    report = asyncio.run(copy_sessions(open_line_store(f"jsonl:{root}"), open_line_store(target)))
    assert report.copied == [HEADER["id"]]


def test_the_sqlite_store_applies_the_cap_to_the_lines_it_holds(tmp_path: Path) -> None:
    deep = _deep_line()
    _copied(tmp_path, f"sqlite:{tmp_path / 'db.sqlite'}", ROOT, deep, CHILD)
    repo = SqliteSessionRepo(tmp_path / "db.sqlite")
    session = asyncio.run(repo.open(str(HEADER["id"])))
    with session:
        assert [e.id for e in session.entries()] == ["aaaaaaaa", "cccccccc"]
        assert [(d.code, d.line) for d in session.diagnostics] == [("corrupt_body", 3)]
    strict = SqliteSessionRepo(tmp_path / "db.sqlite", strict=True)
    with pytest.raises(CorruptSessionError) as info:
        asyncio.run(strict.open(str(HEADER["id"])))
    assert info.value.line == 3


@pytest.mark.postgres
def test_the_postgres_store_applies_the_cap_to_the_lines_it_holds(
    tmp_path: Path, postgres_url: str
) -> None:
    from repos.postgres import PostgresSessionRepo

    _copied(tmp_path, postgres_url, ROOT, _deep_line(), CHILD)
    repo = PostgresSessionRepo(postgres_url, max_size=2)
    try:
        session = asyncio.run(repo.open(str(HEADER["id"])))
        with session:
            assert [e.id for e in session.entries()] == ["aaaaaaaa", "cccccccc"]
            assert [(d.code, d.line) for d in session.diagnostics] == [("corrupt_body", 3)]
    finally:
        repo.close()


def test_the_memory_store_applies_the_cap_to_the_lines_it_holds() -> None:
    repo = MemorySessionRepo()
    lines = [orjson.dumps(x) + b"\n" for x in (HEADER, ROOT)] + [
        _deep_line() + b"\n",
        orjson.dumps(CHILD) + b"\n",
    ]
    # The lines a copy into the memory store would give it (MemorySessionRepo has no copy
    # command; _publish is how its create and fork store lines).
    with repo._publish(decode_header(HEADER), lines):
        pass
    with asyncio.run(repo.open(str(HEADER["id"]))) as session:
        assert [e.id for e in session.entries()] == ["aaaaaaaa", "cccccccc"]
        assert [(d.code, d.line) for d in session.diagnostics] == [("corrupt_body", 3)]


# --- writing: never a line no reader accepts -------------------------------------------------


@pytest.mark.parametrize("store", ["jsonl", "memory", "sqlite"])
def test_a_header_deeper_than_the_cap_is_never_written(tmp_path: Path, store: str) -> None:
    repo = (
        JsonlSessionRepo(tmp_path / "s")
        if store == "jsonl"
        else MemorySessionRepo()
        if store == "memory"
        else SqliteSessionRepo(tmp_path / "db.sqlite")
    )
    with pytest.raises(InvalidEntryError):
        asyncio.run(repo.create(cwd="/w", metadata={"deep": nest(MAX_NESTING - 1)}))
    assert asyncio.run(repo.list()) == []
    with asyncio.run(repo.create(cwd="/w", metadata={"deep": nest(MAX_NESTING - 2)})) as made:
        again = asyncio.run(repo.open(made.id))
        assert again.header.metadata == made.header.metadata
        again.close()


def test_dumps_line_refuses_a_line_past_the_cap() -> None:
    assert orjson.loads(dumps_line({"a": nest(MAX_NESTING - 1)})) == {"a": nest(MAX_NESTING - 1)}
    for value in (nest(MAX_NESTING), nest(200), {"tuple": (nest(MAX_NESTING),)}):
        with pytest.raises(CodecError):
            dumps_line({"a": value})


# --- any JSON at all ---------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(["", "text", "toolCall", "thinking", "image", "user", "assistant", "1.5"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

TEMPLATES: list[dict[str, Any]] = [
    ROOT,
    _assistant(
        content=[
            {"type": "thinking", "thinking": "t", "thinkingSignature": "s", "redacted": False},
            {"type": "text", "text": "x"},
            {"type": "toolCall", "id": "t1", "name": "read", "arguments": {"path": "a"}},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ],
        errorMessage="e",
    ),
    PLACES[1][1]({"k": 1}),
    _entry(
        "message",
        message={
            "role": "user",
            "content": [
                {"type": "text", "text": "x"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            ],
            "timestamp": "2025-12-08T22:41:05Z",
        },
    ),
    _entry(
        "message",
        message={
            "role": "bashExecution",
            "command": "ls",
            "output": "o",
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
            "fullOutputPath": "/tmp/x",
            "excludeFromContext": True,
            "timestamp": 1,
        },
    ),
    _entry(
        "message",
        message={
            "role": "custom",
            "customType": "c",
            "content": "x",
            "display": True,
            "details": {},
            "timestamp": 1,
        },
    ),
    _entry("message", message={"role": "hookMessage", "customType": "h", "content": []}),
    _entry("model_change", provider="anthropic", modelId="m"),
    _entry("thinking_level_change", thinkingLevel="high"),
    _entry("active_tools_change", activeToolNames=["read", "bash"]),
    _entry(
        "compaction",
        summary="s",
        firstKeptEntryId="aaaaaaaa",
        tokensBefore=10,
        details={"readFiles": []},
        fromHook=True,
    ),
    _entry("branch_summary", fromId="aaaaaaaa", summary="s", details={}, fromHook=False),
    _entry("custom", customType="c", data={"n": 1}),
    _entry(
        "custom_message", customType="c", content=[{"type": "text", "text": "x"}], display=False
    ),
    _entry("label", targetId="aaaaaaaa", label="l"),
    _entry("session_info", name="n"),
    _entry("leaf", targetId=None),
    _entry("future_kind", payload={"x": 1}),
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into ``value`` (objects and arrays), ``()`` being the whole value."""
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


PATHS = [(t, p) for t in TEMPLATES for p in _paths(t)]


def _decodes_or_codec_error(
    decode: Callable[[Any], Any], encode: Callable[[Any], Any], obj: Any
) -> Any:
    """The value ``obj`` decodes to (checked as below), or None for a codec error."""
    try:
        value = decode(obj)
    except CodecError:
        return None
    # An entry read is the one the object describes (its type and id), and so is a message of
    # the three core roles (others may be read under a current name, or kept raw). Either's
    # line reads back to a value written as the same line (one trip settles the value).
    if decode is decode_entry:
        assert (value.type, value.id) == (obj["type"], obj["id"])
    elif obj.get("role") in ("user", "assistant", "toolResult"):
        assert value.role == obj["role"]
    line = dumps_line(encode(value))
    assert dumps_line(encode(decode(orjson.loads(line)))) == line
    return value


@settings(
    max_examples=examples(200, 600), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(where=st.sampled_from(PATHS), value=json_values, extra=st.booleans())
def test_random_json_in_any_field_of_any_entry_decodes_or_is_a_codec_error(
    where: tuple[dict[str, Any], tuple[Any, ...]], value: Any, extra: bool
) -> None:
    template, path = where
    obj = _replaced(template, path, value)
    if extra and isinstance(obj, dict):
        obj = {**obj, "unknownKey": value}
    entry = _decodes_or_codec_error(decode_entry, encode_entry, obj)
    # decoded, the entry is the one the object names; else the object named no valid entry
    assert entry is None or entry.id == obj["id"]
    if isinstance(obj, dict) and isinstance(obj.get("message"), dict | list):
        message = _decodes_or_codec_error(decode_message, encode_message, obj["message"])
        role = obj["message"].get("role") if isinstance(obj["message"], dict) else None
        assert message is None or role not in ("user", "assistant") or message.role == role


@settings(max_examples=examples(100, 300), deadline=None)
@given(key=st.sampled_from([*HEADER, "parentSession", "metadata", "other"]), value=json_values)
def test_random_json_in_any_header_field_decodes_or_is_a_codec_error(key: str, value: Any) -> None:
    try:
        header = decode_header({**HEADER, key: value})
    except CodecError:
        return
    assert header.id == (value if key == "id" else HEADER["id"])
    line = dumps_line(encode_header(header))
    assert dumps_line(encode_header(decode_header(orjson.loads(line)))) == line


_SKIPPED_LINE = {"corrupt_line", "corrupt_body", "duplicate_id", "blank_line", "misplaced_header"}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.sampled_from(PATHS).flatmap(
            lambda w: json_values.map(lambda v: _replaced(w[0], w[1], v))
        ),
        min_size=1,
        max_size=6,
    )
)
def test_a_file_of_random_lines_reads_with_diagnostics_never_a_crash(
    tmp_path_factory: pytest.TempPathFactory, lines: list[Any]
) -> None:
    path = tmp_path_factory.mktemp("random") / "s.jsonl"
    _file(path, ROOT, *(orjson.dumps(x) for x in lines))
    with open_session(path) as session:
        session.build_context()
        session.get_tree()
        entries = list(session.entries())
        branch = session.get_branch()
        skipped = {d.line for d in session.diagnostics if d.code in _SKIPPED_LINE}
    # Every line after the header is an entry or a line skipped with a diagnostic; the branch
    # is made of those entries.
    assert len(entries) + len(skipped) == 1 + len(lines)
    assert {e.id for e in branch} <= {e.id for e in entries}
    with contextlib.suppress(CorruptSessionError):
        open_session(path, strict=True).close()
