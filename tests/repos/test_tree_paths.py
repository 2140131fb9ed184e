"""``Tree.path_types`` (a short probing walk, then a backward scan of the rows for a long path)
gives exactly what following parent ids one by one gives, on random trees: long chains,
branches, leaves far from the end, rows out of file order, cycles and missing parents."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hooks import UserMessage
from repos import JsonlSessionRepo, open_session
from repos._errors import EntryNotFoundError
from repos._tree import _SHORT_WALK, Row, Tree


def _never_loaded(row: Row) -> object:
    raise AssertionError("path_types decodes nothing")


def _tree(rows: list[Row]) -> Tree:
    tree = Tree(load=_never_loaded)  # type: ignore[arg-type]
    for row in rows:
        tree.rows[row.id] = row
        tree.order.append(row.id)
    return tree


def _naive(tree: Tree, leaf: str | None) -> tuple[list[str], list[str]]:
    ids: list[str] = []
    seen: set[str] = set()
    current = leaf
    while current is not None and current not in seen:
        seen.add(current)
        ids.append(current)
        current = tree.rows[current].parent_id
    ids.reverse()
    return ids, [tree.rows[i].type for i in ids]


def _chain(n: int, *, prefix: str = "e", line_base: int = 2) -> list[Row]:
    rows = []
    parent = None
    for i in range(n):
        rid = f"{prefix}{i:06d}"
        rows.append(Row(rid, parent, "message" if i % 7 else "label", line_base + i))
        parent = rid
    return rows


# Trees grown as sessions grow: each new row's parent is an earlier row (mostly the last one,
# as an agent appends; sometimes an older one, a branch). Sizes cross _SHORT_WALK.
grown = st.lists(
    st.one_of(st.just(-1), st.integers(min_value=0, max_value=2000)),
    min_size=1,
    max_size=3 * _SHORT_WALK,
)


@settings(max_examples=200, deadline=None)
@given(grown, st.data())
def test_path_types_equals_following_parents(parents: list[int], data: st.DataObject) -> None:
    rows: list[Row] = []
    for i, p in enumerate(parents):
        parent = None if not rows else rows[-1].id if p < 0 else rows[p % len(rows)].id
        rows.append(Row(f"r{i:05d}", parent if i else None, "message", i + 2))
    tree = _tree(rows)
    leaf = data.draw(st.sampled_from([r.id for r in rows]))
    assert tree.path_types(leaf) == _naive(tree, leaf)


def test_a_long_path_whose_rows_are_out_of_file_order_is_still_followed() -> None:
    # A child stored before its parent (no writer does this; the walk must not depend on it).
    rows = _chain(3 * _SHORT_WALK)
    moved = rows.pop(10)  # e000010, the parent of e000011
    rows.append(moved)
    tree = _tree(rows)
    leaf = rows[-2].id
    assert tree.path_types(leaf) == _naive(tree, leaf)
    assert len(tree.path_types(leaf)[0]) == len(rows)


def test_a_long_branch_ending_early_in_the_file() -> None:
    trunk = _chain(2 * _SHORT_WALK)
    side = _chain(10 * _SHORT_WALK, prefix="s", line_base=len(trunk) + 2)
    side[0] = side[0]._replace(parent_id=trunk[_SHORT_WALK].id)
    tree = _tree(trunk + side)
    for leaf in (trunk[-1].id, side[-1].id, side[_SHORT_WALK + 5].id, trunk[3].id):
        assert tree.path_types(leaf) == _naive(tree, leaf)


def test_a_cycle_ends_the_walk_and_a_missing_parent_raises() -> None:
    rows = _chain(3 * _SHORT_WALK)
    rows[0] = rows[0]._replace(parent_id=rows[-1].id)  # root's parent: the last row
    tree = _tree(rows)
    ids, kinds = tree.path_types(rows[-1].id)
    assert ids == _naive(tree, rows[-1].id)[0]
    assert len(ids) == len(rows) and kinds == [r.type for r in rows]

    rows = _chain(3 * _SHORT_WALK)
    rows[5] = rows[5]._replace(parent_id="gone")
    with pytest.raises(EntryNotFoundError):
        _tree(rows).path_types(rows[-1].id)


def test_ids_equal_but_not_identical_are_followed() -> None:
    rows = _chain(3 * _SHORT_WALK)
    # Parent ids as separate string objects (decoded from their own lines), not the keys.
    rows = [r._replace(parent_id="".join(r.parent_id)) if r.parent_id else r for r in rows]
    tree = _tree(rows)
    assert tree.path_types(rows[-1].id)[0] == [r.id for r in rows]


def test_a_long_path_read_while_another_thread_appends(tmp_path: Path) -> None:
    # The scan must not iterate the live rows dict: an append in another thread changes its
    # size ("dictionary changed size during iteration").
    async def make() -> Path:
        session = await JsonlSessionRepo(tmp_path, fsync="never").create("/w")
        for i in range(3 * _SHORT_WALK):
            session.append_message(UserMessage(content=f"m{i}"))
        session.close()
        return session.path

    session = open_session(asyncio.run(make()), fsync="never")
    leaf = session.leaf_id
    expected = session.path_ids(leaf)
    errors: list[BaseException] = []
    wrong: list[int] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                if session.path_ids(leaf) != expected:
                    wrong.append(1)
            except BaseException as exc:
                errors.append(exc)
                return

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(2000):
            session.append_message(UserMessage(content=f"more {i}"))
    finally:
        stop.set()
        reader.join()
        session.close()
    assert errors == [] and wrong == []
