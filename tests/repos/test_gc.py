"""The cyclic collector around bulk decoding (repos._gc.bulk): what opening and the first
context leave behind, and what they must not disturb."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from hooks import LazyMessages, UserMessage
from repos import JsonlSessionRepo, open_session
from repos._gc import LARGE_ENTRIES, LARGE_FILE, bulk


@pytest.fixture
def collector() -> Iterator[None]:
    """Only young collections (so only the promotion puts a new object in the oldest
    generation); afterwards, the collector as the test found it."""
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.collect()
    gc.set_threshold(thresholds[0], 1_000_000, 1_000_000)
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


def _generation(obj: object) -> int | None:
    for generation in range(3):
        if any(o is obj for o in gc.get_objects(generation)):
            return generation
    return None


def test_values_built_in_bulk_go_to_the_oldest_generation(collector: None) -> None:
    gc.enable()
    with bulk():
        assert not gc.isenabled()
        built = [[i] for i in range(1000)]
    assert gc.isenabled()
    assert _generation(built) == 2
    assert _generation(built[500]) == 2


def _session_file(folder: Path, messages: int) -> Path:
    async def write() -> Path:
        session = await JsonlSessionRepo(folder, fsync="never").create("/w")
        for i in range(messages):
            session.append_message(UserMessage(content=f"message {i} " + "x" * 500))
        session.close()
        return session.path

    return asyncio.run(write())


def test_a_large_session_and_its_first_context_are_promoted(
    tmp_path: Path, collector: None
) -> None:
    path = _session_file(tmp_path, LARGE_ENTRIES + 10)
    assert path.stat().st_size >= LARGE_FILE
    gc.enable()
    session = open_session(path)
    row = session._tree.rows[session.leaf_id]
    context = session.build_context()
    assert len(context.messages) == LARGE_ENTRIES + 10
    # Without the promotion they would sit in a young generation until a full collection.
    # What the context read is the bodies' JSON (messages are built when first read).
    assert isinstance(context.messages, LazyMessages)
    assert _generation(context.messages.slots[-1]) == 2
    assert _generation(row) in (2, None)  # None: untracked
    session.close()


def test_a_small_session_is_left_to_young_collections(tmp_path: Path, collector: None) -> None:
    path = _session_file(tmp_path, 20)
    gc.enable()
    session = open_session(path)
    context = session.build_context()
    assert _generation(context.messages[-1]) in (0, 1)
    session.close()


def test_young_garbage_made_between_bulk_decodes_is_still_collected(collector: None) -> None:
    # A process that opens sessions in a loop: promoting without collecting first would carry
    # each iteration's garbage cycles to the oldest generation, where they wait for a full
    # collection that the promotions keep postponing.
    gc.enable()

    class Node:
        other: object

    alive: list[weakref.ref[Node]] = []
    for _ in range(50):
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive.append(weakref.ref(a))
        del a, b
        with bulk():
            built = [[i] for i in range(5000)]
        del built
    assert sum(ref() is not None for ref in alive) <= 1  # at most the last one's


def test_a_collector_disabled_by_the_caller_stays_disabled_and_nothing_moves(
    collector: None,
) -> None:
    gc.disable()
    with bulk():
        built = [[i] for i in range(100)]
    assert not gc.isenabled()
    assert _generation(built) == 0


def test_a_frozen_generation_of_the_process_is_left_frozen(collector: None) -> None:
    gc.enable()
    kept = [["pre-fork state"]]
    gc.freeze()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    with bulk():
        built = [[i] for i in range(100)]
    assert gc.get_freeze_count() == frozen
    assert _generation(kept) is None  # still in the permanent generation, not unfrozen
    assert _generation(built) in (0, 1)
    assert gc.isenabled()


def test_a_garbage_cycle_made_before_a_bulk_decode_is_collected_not_promoted(
    collector: None,
) -> None:
    gc.enable()
    gc.collect()

    class Node:
        other: object

    a, b = Node(), Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    del a, b
    with bulk():
        assert ref() is None  # collected as the decode began
