"""What ``AgentHarness.prompt()`` returns: the run's last assistant message, with why the run
stopped and the structured output."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import attrs
from attrs import frozen

from hooks import AssistantMessage, StopReason

from .approvals import PendingApproval

__all__ = ["LimitStopReason", "Reply", "RunStopReason"]

LimitStopReason: TypeAlias = Literal["max_turns", "max_tokens", "max_cost"]
"""Why a run limit ended a run (Claude's ``error_max_turns``, ``error_max_budget_usd``)."""

RunStopReason: TypeAlias = StopReason | LimitStopReason | Literal["awaiting_approval"]
"""Why a run stopped: the last message's own stop reason (pi's), a run limit, or
``awaiting_approval`` (a tool call waits for a person's answer)."""

_MESSAGE_FIELDS = tuple(f for f in attrs.fields(AssistantMessage) if f.init)


@frozen(kw_only=True, eq=False)
class Reply(AssistantMessage):
    """The last assistant message of a run, as ``prompt()`` and ``resume()`` return it.

    Every field of :class:`~hooks.AssistantMessage` reads as the message's (``text``,
    ``content``, ``usage``, ``tool_calls``, ...), except:

    Attributes:
        stop_reason: why the *run* stopped: the message's stop reason, or ``max_turns``,
            ``max_tokens``, ``max_cost`` (a run limit; docs/agents.md), or
            ``awaiting_approval`` (tool calls wait: ``pending`` lists them).
        output: the parsed final answer of ``prompt(output_schema=...)`` (converted to the
            type when a type was given); None otherwise.
        message: the assistant message exactly as persisted in the session (its
            ``stop_reason`` is pi's: ``stop``, ``toolUse``, ...). Append this one, never the
            reply, if you copy it into a session: a run's stop reason is no message's.
        pending: the approvals awaited when ``stop_reason`` is ``awaiting_approval``.

    A reply equals the message it wraps (``session_entry.message == reply``), so code that
    compared ``prompt()``'s result with the persisted message keeps working.
    """

    # A run's stop reason is wider than a message's: the field is redefined on purpose.
    stop_reason: RunStopReason = "stop"  # type: ignore[assignment]
    output: Any = None
    message: AssistantMessage
    pending: tuple[PendingApproval, ...] = ()

    @classmethod
    def of(
        cls,
        message: AssistantMessage,
        *,
        stop_reason: RunStopReason | None = None,
        output: Any = None,
        pending: tuple[PendingApproval, ...] = (),
    ) -> Reply:
        """The reply for ``message``; ``stop_reason`` None keeps the message's."""
        if isinstance(message, Reply):
            message = message.message
        copied: dict[str, Any] = {str(f.alias): getattr(message, f.name) for f in _MESSAGE_FIELDS}
        copied["stop_reason"] = stop_reason or message.stop_reason
        return cls(**copied, output=output, message=message, pending=pending)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Reply):
            return (self.message, self.stop_reason, self.output, self.pending) == (
                other.message,
                other.stop_reason,
                other.output,
                other.pending,
            )
        if isinstance(other, AssistantMessage):
            return self.message == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.message)
