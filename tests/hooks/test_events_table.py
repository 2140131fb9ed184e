"""docs/events.md lists every signal of the bus, with the right event class and kind."""

from __future__ import annotations

import re
from pathlib import Path

from hooks import EVENT_CLASSES, ToolCallEvent, ToolResultEvent
from hooks._signals import NAMESPACE

DOC = Path(__file__).parents[2] / "docs" / "events.md"
ROW = re.compile(r"^\| `(?P<name>\w+)` \| `(?P<cls>\w+)` \| (?P<kind>hook|observer) \|", re.M)


def rows() -> dict[str, tuple[str, str]]:
    return {m["name"]: (m["cls"], m["kind"]) for m in ROW.finditer(DOC.read_text())}


def test_the_table_lists_every_signal_in_the_namespace() -> None:
    assert set(rows()) == set(NAMESPACE)


def test_each_row_names_its_event_class_and_kind() -> None:
    hooks = {ToolCallEvent.name, ToolResultEvent.name}
    expected = {
        name: (cls.__name__, "hook" if name in hooks else "observer")
        for name, cls in EVENT_CLASSES.items()
    }

    assert rows() == expected
