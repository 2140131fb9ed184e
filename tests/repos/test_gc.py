"""The cyclic collector around bulk decoding (repos._gc.bulk): what opening and the first
context leave behind, and what they must not disturb."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest

from repos import open_session
from repos._gc import bulk

from ..fixtures.pi_sessions import PiSession


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


def test_a_session_and_its_first_context_are_promoted(
    pi_file: Callable[..., PiSession], collector: None
) -> None:
    gc.enable()
    record = pi_file("large-session")
    session = open_session(record.path)
    context = session.build_context()
    assert len(context.messages) >= 20
    # Without the promotion they would sit in a young generation until a full collection.
    assert _generation(context.messages[-1]) == 2
    assert _generation(session._tree.rows[session.leaf_id]) in (2, None)  # None: untracked
    session.close()


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


def test_garbage_cycles_promoted_with_the_rest_are_still_collected(collector: None) -> None:
    gc.enable()
    gc.collect()

    class Node:
        other: object

    a, b = Node(), Node()
    a.other, b.other = b, a
    del a, b
    with bulk():
        pass
    assert gc.collect() >= 2  # the full collection finds the promoted cycle
