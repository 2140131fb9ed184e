"""The Claude Code importer on hostile transcripts (issue 18, classes 11 and 12): records nested
past the cap are dropped and reported, any JSON in any field of any record converts (or is
dropped) and never crashes, and the work is linear (a response split over many records, many
results for one call id). Real files; no timing (the work is counted, ``step_count``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from claude_code_transcripts import SESSION, assistant, small_transcript, user, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from step_count import counting
from stress import examples

from repos import MAX_NESTING, decode_entry
from repos._codec import decode_header, loads_line
from repos._importers.claude_code import convert

MAX_RATIO = 2.3


def nest(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"k": value}
    return value


def _deep_text(levels: int) -> str:
    return '{"k":' * levels + "1" + "}" * levels


def _lines_decode(conversion: Any) -> None:
    for imported in (conversion.main, *conversion.sidechains):
        decode_header(loads_line(imported.lines[0]))
        for line in imported.lines[1:]:
            decode_entry(loads_line(line))


@pytest.mark.parametrize("levels", [MAX_NESTING + 1, 100, 600, 1000])
def test_a_record_nested_past_the_cap_is_dropped_and_reported(tmp_path: Path, levels: int) -> None:
    records = small_transcript()
    deep = user("d1", "u1", 3, "placeholder")
    # record{message{content: ...}}: the content's own nesting comes on top of two levels.
    line = orjson.dumps(deep).replace(b'"placeholder"', _deep_text(levels - 2).encode())
    path = write(tmp_path / "t.jsonl", records)
    lines = path.read_bytes().split(b"\n")
    lines.insert(2, line)
    path.write_bytes(b"\n".join(lines))
    conversion = convert(path)
    deep_drops = [d for d in conversion.dropped if d.line == 3]
    assert len(deep_drops) == 1 and deep_drops[0].uuid == "d1"
    assert conversion.main.entries > 0
    _lines_decode(conversion)


def test_a_record_at_the_cap_is_imported_and_reads_back(tmp_path: Path) -> None:
    # record{message{content[block{input{...}}]}}: the tool input nests as deep as allowed.
    block = {"type": "tool_use", "id": "t1", "name": "Bash", "input": nest(MAX_NESTING - 4)}
    records = [user("u1", None, 1, "Hi"), assistant("a1", "u1", 2, [block], "m1", "tool_use")]
    conversion = convert(write(tmp_path / "t.jsonl", records))
    assert [d.line for d in conversion.dropped] == [3]  # the fixture's trailing non-JSON line
    assert conversion.main.entries == 2
    _lines_decode(conversion)


def test_many_results_for_one_call_id_in_one_record(tmp_path: Path) -> None:
    # Each gets an id of its own (an id per salt was tried from 0, and the 1,001st raised).
    blocks = [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": str(n)} for n in range(1500)
    ]
    records = [
        user("u1", None, 1, "Hi"),
        assistant(
            "a1",
            "u1",
            2,
            [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}],
            "m1",
            "tool_use",
        ),
        user("r1", "a1", 3, blocks),
    ]
    conversion = convert(write(tmp_path / "t.jsonl", records))
    assert conversion.main.entries == 2 + 1500
    assert len(set(conversion.main.entry_ids)) == conversion.main.entries
    again = convert(tmp_path / "t.jsonl")
    assert again.main.entry_ids == conversion.main.entry_ids  # deterministic


def _split_response(n: int) -> list[Any]:
    """One response over n records (one block each), as Claude Code writes a long reply,
    after n user and assistant records."""
    records: list[Any] = [user("u0", None, 0, "start")]
    for k in range(1, n):
        records.append(user(f"u{k}", f"u{k - 1}", 1, f"text {k}"))
    previous = f"u{n - 1}"
    for k in range(n):
        records.append(
            assistant(f"a{k}", previous, 2, [{"type": "text", "text": f"part {k}"}], "m", None)
        )
        previous = f"a{k}"
    return records


def _compactions(n: int) -> list[Any]:
    """n compact boundaries, each with its summary record, in one chain."""
    records: list[Any] = [user("u0", None, 0, "start")]
    previous = "u0"
    for k in range(n):
        records.append(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "uuid": f"c{k}",
                "parentUuid": None,
                "logicalParentUuid": previous,
                "sessionId": SESSION,
                "timestamp": "2025-07-01T10:00:09.000Z",
                "content": "Conversation compacted",
            }
        )
        records.append(user(f"s{k}", f"c{k}", 1, "summary", isCompactSummary=True))
        previous = f"s{k}"
    return records


def _many_results(n: int) -> list[Any]:
    blocks = [{"type": "tool_result", "tool_use_id": "t", "content": "r"} for _ in range(n)]
    return [user("u0", None, 0, "x"), user("r", "u0", 1, blocks)]


@pytest.mark.parametrize("shape", [_split_response, _compactions, _many_results])
def test_conversion_is_linear(tmp_path: Path, shape: Any) -> None:
    counts = []
    for n in (300, 600):
        path = write(tmp_path / f"{shape.__name__}-{n}.jsonl", shape(n))
        with counting() as count:
            conversion = convert(path)
        counts.append(count[0])
        assert conversion.main.entries > 0
    assert counts[1] <= MAX_RATIO * counts[0], counts


def test_a_split_response_is_one_message_with_every_block_in_order(tmp_path: Path) -> None:
    conversion = convert(write(tmp_path / "t.jsonl", _split_response(50)))
    last = decode_entry(loads_line(conversion.main.lines[-1]))
    texts = [b.text for b in last.message.content]  # type: ignore[attr-defined]
    assert texts == [f"part {k}" for k in range(50)]


# --- any JSON in any field of any record ---------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(
        [
            "user",
            "assistant",
            "system",
            "summary",
            "tool_use",
            "tool_result",
            "text",
            "image",
            "thinking",
            "compact_boundary",
            "u1",
            "a1",
            "m1",
            "/x",
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)

TEMPLATE = [r for r in small_transcript() if isinstance(r, dict)]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


PATHS = [(i, p) for i, r in enumerate(TEMPLATE) for p in _paths(r)]


@settings(
    max_examples=examples(50, 150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(changes=st.lists(st.tuples(st.sampled_from(PATHS), json_values), min_size=1, max_size=4))
def test_random_json_anywhere_in_a_transcript_converts_or_is_dropped(
    tmp_path_factory: pytest.TempPathFactory, changes: list[Any]
) -> None:
    records = copy.deepcopy(TEMPLATE)
    for (index, path), value in changes:
        if not path:
            records[index] = value
            continue
        target: Any = records[index]
        try:
            for part in path[:-1]:
                target = target[part]
            target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change replaced what this path ran through
    source = write(tmp_path_factory.mktemp("cc") / "t.jsonl", records)
    conversion = convert(source)
    _lines_decode(conversion)
    # The shape of what converted: every line counted, the fixture's trailing non-JSON line
    # dropped, drops point at lines of the file, entries come only from the file's records.
    assert conversion.records == len(records) + 1
    lines = {d.line for d in conversion.dropped}
    assert len(records) + 1 in lines and lines <= set(range(1, len(records) + 2))
    uuids = {r["uuid"] for r in records if isinstance(r, dict) and isinstance(r.get("uuid"), str)}
    for imported in (conversion.main, *conversion.sidechains):
        assert len(imported.lines) == imported.entries + 1 == len(imported.entry_ids) + 1
        assert imported.source_uuids <= uuids
