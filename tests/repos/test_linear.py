"""Hostile trees cost linear work (issue 18, class 12): a parent cycle made ``sessions verify``
quadratic (10k entries 54 s, 20k 200 s, and a finding naming the whole loop at every entry), and
a file of many damaged bodies made reading quadratic (a walk and a pass over the rows per
damaged line).

No timing: each case counts the Python lines the library (``repos``) executes on a file of n
entries and on one of 2n, with ``sys.settrace``, and asserts the count at most about doubles
(quadratic work quadruples it; the count is the same on every run of the same code, whatever the
machine's load). Findings and diagnostics must not grow faster than the file either. Real files.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from step_count import counting

from repos import JsonlSessionRepo, open_session
from repos._jsonl.verify import repair_file, verify_file

TS = "2025-01-01T00:00:00.000Z"
HEADER = {"type": "session", "version": 3, "id": "lin", "timestamp": TS, "cwd": "/x"}

# Linear work doubles when the input does; anything quadratic would give about 4.
MAX_RATIO = 2.3


def _id(n: int) -> str:
    return f"{n:08x}"


def user(entry_id: str, parent: str | None, content: Any = "x") -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": TS,
        "message": {"role": "user", "content": content, "timestamp": 1},
    }


def assistant(entry_id: str, parent: str | None, call: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": TS,
        "message": {
            "role": "assistant",
            "content": [{"type": "toolCall", "id": call, "name": "bash", "arguments": {}}],
            "api": "a",
            "provider": "p",
            "model": "m",
            "stopReason": "toolUse",
            "timestamp": 1,
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
            "content": [{"type": "text", "text": "r"}],
            "isError": False,
            "timestamp": 1,
        },
    }


def label(entry_id: str, parent: str | None, target: str) -> dict[str, Any]:
    return {
        "type": "label",
        "id": entry_id,
        "parentId": parent,
        "timestamp": TS,
        "targetId": target,
        "label": "l",
    }


# Each shape: n -> the entry lines of a hostile file of about n entries.
def one_cycle(n: int) -> list[dict[str, Any]]:
    """The issue's reproduction: every entry's parent is the next one, the last's the first."""
    return [user(_id(i), _id((i + 1) % n)) for i in range(n)]


def self_parents(n: int) -> list[dict[str, Any]]:
    return [user(_id(i), _id(i)) for i in range(n)]


def small_cycles(n: int) -> list[dict[str, Any]]:
    return [user(_id(i), _id(i ^ 1)) for i in range(n)]


def chain_into_a_cycle(n: int) -> list[dict[str, Any]]:
    """A long chain whose root end runs into a loop of half the entries (a rho)."""
    half = n // 2
    loop = [user(_id(i), _id((i + 1) % half)) for i in range(half)]
    return loop + [user(_id(i), _id(i - 1)) for i in range(half, n)]


def reversed_chain(n: int) -> list[dict[str, Any]]:
    """Every parent on a later line (a file written backwards): n forward parents."""
    return [user(_id(i), _id(i + 1) if i + 1 < n else None) for i in range(n)]


def many_results_for_one_call(n: int) -> list[dict[str, Any]]:
    """Calls and results all sharing one call id, interleaved in one chain, then a side branch
    of orphans: each result has many calls and each call many results to look through."""
    half = n // 2
    out = [user(_id(0), None)]
    for i in range(1, half):
        make = assistant if i % 2 else result
        out.append(make(_id(i), _id(i - 1), "same"))
    out += [result(_id(i), _id(0) if i == half else _id(i - 1), "other") for i in range(half, n)]
    return out


def labels_on_removed_results(n: int) -> list[dict[str, Any]]:
    """An orphaned result, then a chain of labels each aiming at the one before (the first at
    the result): repair removes the result, then every label, one because of the other."""
    out = [user(_id(0), None), result(_id(1), _id(0), "nobody")]
    return out + [label(_id(k), _id(1), _id(k - 1)) for k in range(2, n)]


def damaged_bodies(n: int) -> list[dict[str, Any]]:
    """A chain where every other entry's body cannot be decoded (content 5)."""
    return [user(_id(i), _id(i - 1) if i else None, 5 if i % 2 else "x") for i in range(n)]


def siblings_behind_a_damaged_leaf(n: int) -> list[dict[str, Any]]:
    """Damaged siblings in file order before the leaf's parent: each drop re-attaches the leaf
    to the next damaged one, which a walk meets next (one drop per walk would be n walks)."""
    out = [user(_id(0), None)]
    out += [user(_id(i), _id(0), 5) for i in range(1, n - 1)]
    out.append(user(_id(n - 1), _id(n - 2)))
    return out


def write(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in (HEADER, *entries)))
    return path


def steps(
    tmp_path: Path,
    shape: Callable[[int], list[dict[str, Any]]],
    n: int,
    work: Callable[[Path], object],
) -> int:
    path = write(tmp_path / f"{shape.__name__}-{n}.jsonl", shape(n))
    with counting() as count:
        work(path)
    return count[0]


def assert_linear(
    tmp_path: Path,
    shape: Callable[[int], list[dict[str, Any]]],
    work: Callable[[Path], object],
    n: int = 400,
) -> None:
    small = steps(tmp_path, shape, n, work)
    large = steps(tmp_path, shape, 2 * n, work)
    assert large <= MAX_RATIO * small, f"{shape.__name__}: {small} -> {large} steps"


SHAPES = [
    one_cycle,
    self_parents,
    small_cycles,
    chain_into_a_cycle,
    reversed_chain,
    many_results_for_one_call,
    labels_on_removed_results,
    damaged_bodies,
    siblings_behind_a_damaged_leaf,
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.__name__)
def test_verify_is_linear(tmp_path: Path, shape: Callable[[int], list[dict[str, Any]]]) -> None:
    assert_linear(tmp_path, shape, verify_file)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.__name__)
def test_repair_is_linear(tmp_path: Path, shape: Callable[[int], list[dict[str, Any]]]) -> None:
    assert_linear(tmp_path, shape, repair_file)


def _read_everything(path: Path) -> None:
    with open_session(path) as session:
        session.build_context()
        session.get_branch()
        session.get_tree()
        list(session.entries())
        for entry_id in session.entry_ids()[:: max(1, len(session) // 20)]:
            session.get_branch(entry_id)
            session.get_children(entry_id)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.__name__)
def test_reading_is_linear(tmp_path: Path, shape: Callable[[int], list[dict[str, Any]]]) -> None:
    assert_linear(tmp_path, shape, _read_everything)


def _fork_and_list(path: Path) -> None:
    root = path.parent / f"root-{path.stem}"
    repo = JsonlSessionRepo(root)
    with asyncio.run(repo.fork(path)) as fork:
        fork.build_context()
    asyncio.run(repo.list())


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.__name__)
def test_fork_and_list_are_linear(
    tmp_path: Path, shape: Callable[[int], list[dict[str, Any]]]
) -> None:
    assert_linear(tmp_path, shape, _fork_and_list)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.__name__)
def test_findings_grow_with_the_file_not_faster(
    tmp_path: Path, shape: Callable[[int], list[dict[str, Any]]]
) -> None:
    # The old finding for a cycle named the whole loop, at every entry on it: n findings of n
    # ids each (224 MB of output for 4,000 entries).
    sizes = []
    for n in (400, 800):
        report = verify_file(write(tmp_path / f"{n}.jsonl", shape(n)))
        sizes.append(sum(len(f.message) for f in report.findings))
    assert sizes[1] <= MAX_RATIO * sizes[0]
    assert sizes[1] < 200 * 800


# The issue's size runs under stress; 2,000 entries take the same paths (one cycle through
# every entry, all forward parents) and linearity in n is the tests' above.
@pytest.mark.parametrize("n", [2_000, pytest.param(20_000, marks=pytest.mark.stress)])
def test_the_issue_s_cycle_of_20k_entries_is_reported_once(tmp_path: Path, n: int) -> None:
    path = write(tmp_path / "cycle.jsonl", one_cycle(n))
    report = verify_file(path)
    cycles = [f for f in report.findings if f.code == "parent_cycle"]
    assert [(f.line, f.offset) for f in cycles] == [(2, len(orjson.dumps(HEADER)) + 1)]
    assert {f.code for f in report.findings} == {"parent_cycle", "forward_parent"}
    repair_file(path)
    assert verify_file(path).ok
    with open_session(path) as session:
        # As reading attaches them: each to the entry before it, the last one to the first.
        assert len(session) == n and session.diagnostics == ()
        assert [e.id for e in session.get_branch()] == [_id(0), _id(n - 1)]
        assert [e.id for e in session.get_branch(_id(n - 2))] == [_id(i) for i in range(n - 1)]


@pytest.mark.parametrize("shape", [damaged_bodies, siblings_behind_a_damaged_leaf])
def test_damaged_bodies_cost_a_bounded_number_of_walks(
    tmp_path: Path, shape: Callable[[int], list[dict[str, Any]]]
) -> None:
    # Dropping one damaged body per walk was a walk and a pass over the rows (in C: list.index,
    # del, unseen by the line count above) per damaged line: 20,000 entries took 17 s.
    walks = []
    for n in (400, 800):
        path = write(tmp_path / f"{n}.jsonl", shape(n))
        with counting("path_types") as count, open_session(path) as session:
            session.build_context()
            assert len(session.diagnostics) >= n // 2 - 1
        walks.append(count[0])
    assert walks[0] == walks[1] <= 3
