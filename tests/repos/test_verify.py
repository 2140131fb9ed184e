"""``repos._jsonl.verify``: every problem class on files written by hand, line and byte offset
of each finding, repair that comes out clean and matches what reading makes of the file, and
migration of a v1 file.

Expected offsets are computed from the bytes each test writes, never from the code under test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hooks import UserMessage
from repos import SessionGoneError, open_session
from repos._jsonl.verify import (
    Analysis,
    UnrepairableSessionError,
    analyze,
    migrate_file,
    repair_file,
    verify_file,
)

TS = "2025-01-01T00:00:00.000Z"
HEADER: dict[str, Any] = {
    "type": "session",
    "version": 3,
    "id": "s1",
    "timestamp": TS,
    "cwd": "/x",
}


def user(entry_id: str, parent: str | None, text: str = "hi") -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": TS,
        "message": {"role": "user", "content": text, "timestamp": 1735689600000},
    }


def assistant(entry_id: str, parent: str | None, *calls: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": "ok"}]
    content += [{"type": "toolCall", "id": c, "name": "bash", "arguments": {}} for c in calls]
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": TS,
        "message": {
            "role": "assistant",
            "content": content,
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude",
            "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
            "stopReason": "toolUse" if calls else "stop",
            "timestamp": 1735689600000,
        },
    }


def result(entry_id: str, parent: str | None, call: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": TS,
        "message": {
            "role": "toolResult",
            "toolCallId": call,
            "toolName": "bash",
            "content": [{"type": "text", "text": "done"}],
            "isError": False,
            "timestamp": 1735689600000,
        },
    }


def leaf(entry_id: str, parent: str | None, target: str | None) -> dict[str, Any]:
    return {"type": "leaf", "id": entry_id, "parentId": parent, "timestamp": TS, "targetId": target}


def label(entry_id: str, parent: str | None, target: str, text: str) -> dict[str, Any]:
    return {
        "type": "label",
        "id": entry_id,
        "parentId": parent,
        "timestamp": TS,
        "targetId": target,
        "label": text,
    }


Line = dict[str, Any] | bytes


def write(path: Path, lines: list[Line], tail: bytes = b"") -> list[int]:
    """Write ``lines`` (dicts as compact JSON, bytes as they are), each newline-terminated,
    then ``tail``; return each line's byte offset (index 0 = line 1)."""
    offsets, data = [], b""
    for line in lines:
        offsets.append(len(data))
        raw = line if isinstance(line, bytes) else json.dumps(line, separators=(",", ":")).encode()
        data += raw + b"\n"
    offsets.append(len(data))  # where a tail starts
    path.write_bytes(data + tail)
    return offsets


def codes(report: Analysis) -> list[tuple[str, int, int]]:
    return [(f.code, f.line, f.offset) for f in report.findings]


@pytest.fixture
def file(tmp_path: Path) -> Path:
    return tmp_path / "2025-01-01T00-00-00-000Z_s1.jsonl"


def test_clean_file_has_no_findings(file: Path) -> None:
    write(file, [HEADER, user("a1", None), assistant("a2", "a1"), user("a3", "a2")])
    report = verify_file(file)
    assert report.ok and report.findings == () and report.entries == 3 and report.version == 3


def test_torn_tail(file: Path) -> None:
    offsets = write(file, [HEADER, user("a1", None)], tail=b'{"type":"mess')
    report = verify_file(file)
    assert codes(report) == [("torn_tail", 3, offsets[2])]
    assert not report.ok


def test_bad_lines(file: Path) -> None:
    lines: list[Line] = [
        HEADER,
        user("a1", None),
        b"not json at all",
        b"[1, 2]",
        b'{"type":"message"}',
        b'{"type":"message","id":"zz","parentId":7}',
        user("a2", "a1"),
    ]
    offsets = write(file, lines)
    report = verify_file(file)
    assert codes(report) == [("corrupt_line", n, offsets[n - 1]) for n in (3, 4, 5, 6)]
    assert report.entries == 2


def test_blank_lines_are_one_finding_per_run(file: Path) -> None:
    offsets = write(file, [HEADER, user("a1", None), b"", b"  ", user("a2", "a1")])
    assert codes(verify_file(file)) == [("blank_line", 3, offsets[2])]


def test_bad_body_and_its_children(file: Path) -> None:
    bad = {"type": "model_change", "id": "b1", "parentId": "a2", "timestamp": TS}  # no provider
    lines: list[Line] = [HEADER, user("a1", None), user("a2", "a1"), bad, user("a3", "b1")]
    offsets = write(file, lines)
    report = verify_file(file)
    assert codes(report) == [("corrupt_body", 4, offsets[3]), ("parent_removed", 5, offsets[4])]
    # As reading does when it drops a bad body: the child goes to the entry before it.
    repaired = repair_file(file)
    assert repaired.backup is not None
    session = open_session(file)
    assert session.entry_ids() == ["a1", "a2", "a3"]
    assert session.get_entry("a3").parent_id == "a2"


def test_dangling_forward_and_cycle(file: Path) -> None:
    lines: list[Line] = [
        HEADER,
        user("a1", None),
        user("c1", "c2"),  # line 3: loop c1 -> c2 -> c1
        user("c2", "c1"),
        user("f1", "f2"),  # line 5: parent on a later line, no loop
        user("f2", "a1"),
        user("d1", "gone0000"),  # line 7: parent nowhere
        user("s1e", "s1e"),  # line 8: its own parent
    ]
    offsets = write(file, lines)
    report = verify_file(file)
    assert codes(report) == [
        ("parent_cycle", 3, offsets[2]),
        ("forward_parent", 5, offsets[4]),
        ("dangling_parent", 7, offsets[6]),
        ("parent_cycle", 8, offsets[7]),
    ]
    assert "'c1' -> 'c2' -> 'c1'" in report.findings[0].message


def test_duplicate_id(file: Path) -> None:
    offsets = write(file, [HEADER, user("a1", None), user("a2", "a1"), user("a2", "a1", "again")])
    assert codes(verify_file(file)) == [("duplicate_id", 4, offsets[3])]


def test_misplaced_header(file: Path) -> None:
    offsets = write(file, [HEADER, user("a1", None), {**HEADER, "id": "s2"}])
    assert codes(verify_file(file)) == [("misplaced_header", 3, offsets[2])]


def test_leaf_and_label_targets(file: Path) -> None:
    lines: list[Line] = [
        HEADER,
        user("a1", None),
        leaf("l1", "a1", "nowhere0"),
        label("b1", "a1", "nowhere1", "x"),
        leaf("l2", "a1", "a1"),
        label("b2", "a1", "a1", "fine"),
    ]
    offsets = write(file, lines)
    assert codes(verify_file(file)) == [
        ("leaf_target_missing", 3, offsets[2]),
        ("label_target_missing", 4, offsets[3]),
    ]


def test_tool_pairs(file: Path) -> None:
    lines: list[Line] = [
        HEADER,
        user("a1", None),
        assistant("a2", "a1", "call_ok", "call_dangling"),
        result("a3", "a2", "call_ok"),
        result("a4", "a3", "call_elsewhere"),  # line 5: no such call on its path
        user("a5", "a4"),
        assistant("b1", "a1", "call_elsewhere"),  # the call is on another branch
        result("b2", "b1", "call_elsewhere"),
    ]
    offsets = write(file, lines)
    report = verify_file(file)
    assert codes(report) == [
        ("tool_call_unanswered", 3, offsets[2]),
        ("tool_result_orphan", 5, offsets[4]),
    ]
    assert [f.severity for f in report.findings] == ["info", "problem"]
    repair_file(file)
    after = verify_file(file)
    assert after.ok and codes(after) == [("tool_call_unanswered", 3, offsets[2])]
    session = open_session(file)
    assert "a4" not in session and session.get_entry("a5").parent_id == "a3"


def test_unanswered_call_alone_does_not_fail(file: Path) -> None:
    # pi's real files hold aborted turns: a tool call that never got a result.
    write(file, [HEADER, user("a1", None), assistant("a2", "a1", "call_x")])
    report = verify_file(file)
    assert report.ok and [f.code for f in report.findings] == ["tool_call_unanswered"]
    assert repair_file(file).changes == ()


@pytest.mark.parametrize(
    ("lines", "code"),
    [
        ([], "no_header"),
        ([user("a1", None)], "no_header"),
        ([user("a1", None), HEADER], "header_not_first"),
        ([{**HEADER, "version": 4}], "unsupported_version"),
        ([{**HEADER, "version": "3"}], "bad_header"),
    ],
)
def test_header_problems(file: Path, lines: list[Line], code: str) -> None:
    write(file, lines)
    report = verify_file(file)
    assert codes(report) == [(code, 1, 0)]
    assert not report.readable
    before = file.read_bytes()
    with pytest.raises(UnrepairableSessionError):
        repair_file(file)
    assert file.read_bytes() == before


def test_verify_never_writes(file: Path) -> None:
    write(file, [HEADER, user("a1", None), b"junk"], tail=b'{"torn')
    os.utime(file, ns=(1_000_000_000, 1_000_000_000))
    before, stat = file.read_bytes(), file.stat()
    assert not verify_file(file).ok
    after = file.stat()
    assert file.read_bytes() == before
    assert (after.st_mtime_ns, after.st_ino, after.st_size) == (
        stat.st_mtime_ns,
        stat.st_ino,
        stat.st_size,
    )
    assert sorted(p.name for p in file.parent.iterdir()) == [file.name]


def _damaged(file: Path) -> None:
    bad = {"type": "model_change", "id": "b1", "parentId": "a3", "timestamp": TS}
    write(
        file,
        [
            HEADER,
            user("a1", None),
            assistant("a2", "a1"),
            b"{broken",
            user("a3", "lost0000"),  # orphan: re-attached to a2
            bad,
            user("a4", "b1"),  # child of a bad body: re-attached to a3
            user("a4", "a3", "duplicate"),
            user("a5", "a4"),
            b"",
            user("a6", "a9"),  # forward parent
            user("a9", "a6"),  # ... that also closes a loop
        ],
        tail=b'{"type":"message","id":"t',
    )


def test_repair_matches_recover_reading(file: Path) -> None:
    _damaged(file)
    original = file.read_bytes()
    read = open_session(file)
    entries = list(read.entries())  # decodes every body: bad ones are dropped as reading does
    expected = {e.id: e.parent_id for e in entries}
    expected_leaf = read.leaf_id
    read.close()

    result = repair_file(file)
    assert result.backup == file.with_name(file.name + ".bak")
    assert result.backup.read_bytes() == original
    assert {c.code for c in result.changes} == {
        "torn_tail",
        "corrupt_line",
        "dangling_parent",
        "corrupt_body",
        "parent_removed",
        "duplicate_id",
        "blank_line",
        "parent_cycle",
    }
    after = verify_file(file)
    assert after.findings == ()
    session = open_session(file, strict=True)
    assert {e.id: e.parent_id for e in session.entries()} == expected
    assert session.leaf_id == expected_leaf
    # Untouched lines are kept byte for byte.
    assert original.splitlines()[2] in file.read_bytes().splitlines()


def test_repair_is_idempotent_and_never_overwrites_a_backup(file: Path) -> None:
    _damaged(file)
    first = repair_file(file)
    repaired = file.read_bytes()
    again = repair_file(file)
    assert again.changes == () and again.backup is None and file.read_bytes() == repaired
    # A second repair of a damaged file takes the next free backup name.
    file.write_bytes(repaired + b"junk\n")
    second = repair_file(file)
    assert first.backup is not None and second.backup is not None
    assert second.backup.name == file.name + ".bak.1"
    assert first.backup.read_bytes() != second.backup.read_bytes()


def test_dry_run_writes_nothing(file: Path) -> None:
    _damaged(file)
    before = file.read_bytes()
    result = repair_file(file, dry_run=True)
    assert result.changes and result.backup is None
    assert file.read_bytes() == before
    assert sorted(p.name for p in file.parent.iterdir()) == [file.name]


def test_repair_keeps_permissions(file: Path) -> None:
    _damaged(file)
    file.chmod(0o640)
    repair_file(file)
    assert file.stat().st_mode & 0o777 == 0o640


def test_repair_replaces_the_inode_so_appenders_notice(file: Path) -> None:
    write(file, [HEADER, user("a1", None), b"junk"])
    session = open_session(file)
    repair_file(file)
    with pytest.raises(SessionGoneError):
        session.append_message(UserMessage(content="late"))
    session.close()


def v1_file(path: Path) -> None:
    header = {"type": "session", "id": "v1sess", "timestamp": TS, "cwd": "/x"}
    lines: list[Line] = [
        header,
        {"type": "message", "timestamp": TS, "message": {"role": "user", "content": "one"}},
        {
            "type": "message",
            "timestamp": TS,
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "two"}],
                "provider": "anthropic",
                "model": "claude",
                "stopReason": "stop",
            },
        },
        {"type": "message", "timestamp": TS, "message": {"role": "user", "content": "three"}},
    ]
    write(path, lines)


def test_migrate_v1_keeps_ids_and_context(file: Path) -> None:
    v1_file(file)
    original = file.read_bytes()
    with open_session(file) as before:
        ids = before.entry_ids()
        context = before.build_context().messages
    result = migrate_file(file)
    assert result.from_version == 1 and result.entries == 3
    assert result.backup == file.with_name(file.name + ".v1.bak")
    assert result.backup.read_bytes() == original
    assert json.loads(file.read_bytes().splitlines()[0])["version"] == 3
    with open_session(file, strict=True) as after:
        assert after.header.version == 3
        assert after.entry_ids() == ids
        assert after.build_context().messages == context
    assert verify_file(file).ok
    again = migrate_file(file)
    assert again.from_version == 3 and again.backup is None


def test_damaged_v1_repair_is_refused(file: Path) -> None:
    v1_file(file)
    with file.open("ab") as f:
        f.write(b"junk\n")
    report = verify_file(file)
    assert [f.code for f in report.findings] == ["corrupt_line"] and report.version == 1
    with pytest.raises(UnrepairableSessionError, match="migrate"):
        repair_file(file)


def test_v1_torn_tail_is_repaired(file: Path) -> None:
    v1_file(file)
    with open_session(file) as before:
        ids = before.entry_ids()
    with file.open("ab") as f:
        f.write(b'{"type":"mes')
    repair_file(file)
    with open_session(file, strict=True) as after:
        assert after.header.version == 1 and after.entry_ids() == ids


def test_analyze_is_pure(tmp_path: Path) -> None:
    path = tmp_path / "not-there.jsonl"
    data = json.dumps(HEADER).encode() + b"\n" + b"junk\n"
    report = analyze(path, data)
    assert codes(report) == [("corrupt_line", 2, len(json.dumps(HEADER)) + 1)]
    assert not path.exists()


def test_repair_waits_for_the_append_lock(file: Path) -> None:
    import fcntl
    import threading
    import time

    write(file, [HEADER, user("a1", None), b"junk"])
    before = file.read_bytes()
    fd = os.open(file, os.O_RDWR | os.O_APPEND)  # what an appender holds while it writes
    fcntl.flock(fd, fcntl.LOCK_EX)
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(repair_file(file)))
    worker.start()
    try:
        time.sleep(0.3)
        assert worker.is_alive() and file.read_bytes() == before
        os.write(fd, json.dumps(user("a2", "a1")).encode() + b"\n")  # the append in flight
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    worker.join(10)
    assert done
    with open_session(file, strict=True) as session:
        assert session.entry_ids() == ["a1", "a2"]  # the append made it into the repaired file
