"""Settings a harness restores from a session's branch (pure: no I/O, no events sent).

pi's G1 harness declares ``source: "restore"`` but never restores (reference §5.2); we do, from
the latest ``model_change``, ``thinking_level_change`` and ``active_tools_change`` on the branch.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import frozen

from hooks import ModelUpdateEvent, ObserverEvent, ThinkingLevelUpdateEvent, ToolsUpdateEvent
from repos import ActiveToolsChangeEntry, Entry, ModelChangeEntry, ThinkingLevelChangeEntry

from ._providers.base import Model, ThinkingLevel

__all__ = ["THINKING_LEVELS", "Restored", "restore_settings"]

THINKING_LEVELS: tuple[ThinkingLevel, ...] = ("off", "minimal", "low", "medium", "high", "xhigh")


@frozen(kw_only=True)
class Restored:
    """The settings to use, and the ``*_update`` events (``source="restore"``) announcing
    each one that changed."""

    model: Model
    thinking_level: ThinkingLevel
    active_tools: tuple[str, ...]
    events: tuple[ObserverEvent, ...]


def restore_settings(
    branch: Sequence[Entry],
    *,
    model: Model,
    models: Sequence[Model],
    thinking_level: ThinkingLevel,
    active_tools: tuple[str, ...],
    tool_names: tuple[str, ...],
) -> Restored:
    """Settings from the latest entry of each kind on ``branch`` (root first).

    A model is restored only if one of ``models`` has the entry's provider and id; a thinking
    level only if it is known; active tools are filtered to ``tool_names``.
    """
    model_entry = thinking_entry = tools_entry = None
    for entry in reversed(branch):
        if model_entry is None and isinstance(entry, ModelChangeEntry):
            model_entry = entry
        elif thinking_entry is None and isinstance(entry, ThinkingLevelChangeEntry):
            thinking_entry = entry
        elif tools_entry is None and isinstance(entry, ActiveToolsChangeEntry):
            tools_entry = entry
    events: list[ObserverEvent] = []
    if model_entry is not None:
        found = next(
            (
                m
                for m in models
                if m.provider == model_entry.provider and m.id == model_entry.model_id
            ),
            None,
        )
        if found is not None and found is not model:
            events.append(
                ModelUpdateEvent(
                    provider=found.provider,
                    model_id=found.id,
                    previous_provider=model.provider,
                    previous_model_id=model.id,
                    source="restore",
                )
            )
            model = found
    if thinking_entry is not None and thinking_entry.thinking_level in THINKING_LEVELS:
        level: ThinkingLevel = thinking_entry.thinking_level
        events.append(
            ThinkingLevelUpdateEvent(level=level, previous_level=thinking_level, source="restore")
        )
        thinking_level = level
    if tools_entry is not None:
        restored = tuple(n for n in tools_entry.active_tool_names if n in tool_names)
        events.append(
            ToolsUpdateEvent(
                tool_names=tool_names,
                previous_tool_names=tool_names,
                active_tool_names=restored,
                previous_active_tool_names=active_tools,
                source="restore",
            )
        )
        active_tools = restored
    return Restored(
        model=model, thinking_level=thinking_level, active_tools=active_tools, events=tuple(events)
    )
