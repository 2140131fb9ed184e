"""Why a run stopped before the model was done, recorded in the session.

pi's ``stopReason`` belongs to an assistant message and has a fixed set of values (``stop``,
``length``, ``toolUse``, ``error``, ``aborted``); a run limit or a wait for approval is no
message's. So it is written as a ``custom`` entry after the run's last message, which pi's
reader keeps and leaves out of the context:
``{"type": "custom", "customType": "harness.run.stop", "data": {"stopReason", ...}}``.
"""

from __future__ import annotations

from collections.abc import Mapping

from hooks import JSONValue
from repos import CustomEntry, Session

from .limits import Budget, LimitHit
from .reply import RunStopReason

__all__ = ["RUN_STOP_TYPE", "record_stop"]

RUN_STOP_TYPE = "harness.run.stop"
"""``customType`` of the entry saying why a run stopped early: ``data`` holds ``stopReason``
(``max_turns``, ``max_tokens``, ``max_cost``, ``awaiting_approval``), for a limit ``limit`` and
``used``, and the run's counters ``turns``, ``tokens``, ``costUsd``."""


def record_stop(
    session: Session,
    stop_reason: RunStopReason,
    budget: Budget | None,
    *,
    hit: LimitHit | None = None,
    extra: Mapping[str, JSONValue] | None = None,
) -> CustomEntry:
    """Append the stop entry (at a turn boundary: nothing else is being written)."""
    data: dict[str, JSONValue] = {"stopReason": stop_reason}
    if hit is not None:
        data["limit"] = hit.limit
        data["used"] = hit.used
    if budget is not None:
        data.update(budget.to_json())
    data.update(extra or {})
    return session.append_custom(RUN_STOP_TYPE, data)
