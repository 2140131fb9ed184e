"""Fixtures of the bus tests: signals are global, so every test must leave them as it found them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hooks import HandlerErrorEvent, signal_for
from hooks._signals import NAMESPACE


@pytest.fixture(autouse=True)
def no_receivers_left() -> Iterator[None]:
    """Fail a test that leaves a receiver connected (other test modules may have left receivers
    tied to their own senders; only this test's additions count)."""
    before = {name: set(signal.receivers) for name, signal in NAMESPACE.items()}
    yield
    leaked = [
        name
        for name, signal in NAMESPACE.items()
        if set(signal.receivers) - before.get(name, set())
    ]
    assert not leaked, f"receivers left connected on {leaked}"


@pytest.fixture
def errors() -> Iterator[list[HandlerErrorEvent]]:
    """The handler_error events sent during the test."""
    seen: list[HandlerErrorEvent] = []

    def record(sender: object, event: HandlerErrorEvent) -> None:
        seen.append(event)

    with signal_for("handler_error").connected_to(record):
        yield seen
