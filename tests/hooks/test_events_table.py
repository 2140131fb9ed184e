"""docs/events.md lists every signal of the bus, in order, with the right event class and kind."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from hooks import EVENT_CLASSES, HookEvent
from hooks._signals import NAMESPACE

DOC = Path(__file__).parents[2] / "docs" / "events.md"
ROW = re.compile(r"^\| `(?P<name>\w+)` \| `(?P<cls>\w+)` \| (?P<kind>hook|observer) \|", re.M)

# DESIGN §6, written out here so that a wrong HookEvent alias cannot hide in both code and test.
DESIGN_HOOKS = {
    "before_agent_start",
    "context",
    "before_provider_request",
    "before_provider_payload",
    "tool_call",
    "tool_result",
    "session_before_compact",
    "session_before_tree",
    "session_before_fork",
    # Claude Code's lifecycle hook points (issue 21; docs/hooks.md)
    "session_start",
    "user_prompt_submit",
    "stop",
    "subagent_stop",
    "session_before_rewind",
}
# The order in which the events first fire during one prompt (DESIGN §6).
PROMPT_ORDER = [
    "before_agent_start",
    "agent_start",
    "turn_start",
    "message_start",
    "message_end",
    "context",
    "before_provider_request",
    "before_provider_payload",
    "after_provider_response",
    "message_update",
    "tool_execution_start",
    "tool_call",
    "permission_request",
    "permission_decision",
    "tool_execution_update",
    "tool_result",
    "tool_execution_end",
    "turn_end",
    "save_point",
    "queue_update",
    "agent_end",
    "settled",
]


def rows() -> list[tuple[str, str, str]]:
    return [(m["name"], m["cls"], m["kind"]) for m in ROW.finditer(DOC.read_text())]


def test_the_table_lists_every_signal_in_the_namespace_once() -> None:
    names = [name for name, _, _ in rows()]

    assert sorted(names) == sorted(NAMESPACE)


def test_each_row_names_its_event_class_and_kind() -> None:
    expected = [
        (name, cls.__name__, "hook" if name in DESIGN_HOOKS else "observer")
        for name, cls in EVENT_CLASSES.items()
    ]

    assert rows() == expected  # same rows, same order as EVENT_CLASSES


def test_hook_events_are_the_hooks_of_the_design() -> None:
    assert {cls.name for cls in get_args(HookEvent)} == DESIGN_HOOKS


def test_event_classes_start_in_the_order_of_one_prompt() -> None:
    assert list(EVENT_CLASSES)[: len(PROMPT_ORDER)] == PROMPT_ORDER
    assert set(EVENT_CLASSES) == set(NAMESPACE)
