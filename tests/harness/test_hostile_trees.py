"""Tree building and rendering on hostile session files: deep chains, wide fan-outs, parent
cycles and duplicate ids never recurse to a ``RecursionError`` nor crash the renderers
(adversarial review after issue 18; not reproduced on this code: a guard. Linear cost is
counted in ``repos/test_linear.py``; 100k-entry files were timed by hand with ``tree``,
``show``, ``verify``, ``export`` and ``import claude-code``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import orjson
import pytest

from harness._html.page import export_page
from harness.cli._render import tree_view
from repos import open_session

N = 5_000  # five times Python's recursion limit


def message(i: int, parent: str | None) -> dict[str, object]:
    return {
        "type": "message",
        "id": f"e{i:07d}",
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": f"m{i}", "timestamp": 0},
    }


def write(path: Path, entries: Iterable[dict[str, object]]) -> Path:
    header = {
        "type": "session",
        "version": 3,
        "id": "11111111-1111-4111-8111-111111111111",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/tmp",
    }
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in (header, *entries)))
    return path


SHAPES = {
    "deep_chain": lambda: (message(i, None if i == 0 else f"e{i - 1:07d}") for i in range(N)),
    "wide_fan_out": lambda: (message(i, None if i == 0 else "e0000000") for i in range(N)),
    "parent_cycle": lambda: (message(i, f"e{(i + 1) % N:07d}") for i in range(N)),
    "reversed_chain": lambda: (
        message(i, None if i == N - 1 else f"e{i + 1:07d}") for i in range(N)
    ),
    "duplicate_ids": lambda: (
        message(0, None),
        *(message(1, "e0000000") for _ in range(N)),
    ),
    "self_parents": lambda: (message(i, f"e{i:07d}") for i in range(N)),
}


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_a_hostile_tree_is_built_and_rendered(tmp_path: Path, shape: object) -> None:
    path = write(tmp_path / "s.jsonl", shape())  # type: ignore[operator]
    session = open_session(path)
    roots = session.get_tree()
    assert roots
    view = tree_view(session, show_all=True)
    assert view is not None
    page = export_page(session)
    assert page.startswith("<!DOCTYPE html>")
    assert session.build_context() is not None


def test_a_comb_shaped_session_draws_lines_of_bounded_length(tmp_path: Path) -> None:
    """Review 12, finding 8: a chain with one extra leaf at every step added a `|  ` column
    per level to every later line, so `sessions tree` of 12,000 such steps printed 430 MB
    (O(n²)). Past 20 levels the gutter counts the levels it leaves out."""

    def comb() -> Iterable[dict[str, object]]:
        for i in range(2_000):
            parent = None if i == 0 else f"e{2 * (i - 1):07d}"
            yield message(2 * i, parent)  # the chain
            yield message(2 * i + 1, parent)  # its extra leaf

    with open_session(write(tmp_path / "comb.jsonl", comb())) as session:
        view = tree_view(session)
    assert view.shown == 4_000
    assert max(len(line) for line in view.lines) < 120
    # every entry is still drawn, with how deep it lies
    [deepest] = [line for line in view.lines if "e0003998" in line]
    cut, gutter = deepest[2:].split("] ", 1)
    drawn = gutter.split("e0003998")[0]
    assert int(cut.removeprefix("[+")) + len(drawn) // 3 == 2_000  # its depth, as counted
