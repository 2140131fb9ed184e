"""Errors of sub-agents, run limits, structured output and approvals that wait (drawn in
``harness/_errors.py``'s tree).

A sub-agent's failure is never one of these: it becomes the ``task`` call's error result.
"""

from __future__ import annotations

from collections.abc import Sequence

from hooks import AssistantMessage, HarnessError

__all__ = [
    "AgentDefinitionError",
    "ApprovalNotFoundError",
    "ApprovalRefusedError",
    "AwaitingApprovalError",
    "NothingToResumeError",
    "OutputValidationError",
    "PriceUnknownError",
]


class AgentDefinitionError(HarnessError, ValueError):
    """An agent definition given in code does not fit: a bad or repeated name, a tool the
    harness does not have, a bad thinking level (``problem`` says which). Definitions read
    from files never raise this: they are reported in ``AgentCatalog.diagnostics``."""

    code = "agent_definition"

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"agent {name!r}: {problem}")
        self.name, self.problem = name, problem


class PriceUnknownError(HarnessError, ValueError):
    """``max_cost_usd`` was asked for, but the registry knows no price for ``model``
    (``provider/id``), so the cost could not be counted. Raised where the limit is set
    (``AgentHarness(...)``, ``prompt(...)``), before anything runs."""

    code = "price_unknown"

    def __init__(self, model: str) -> None:
        super().__init__(
            f"max_cost_usd needs the price of {model}, and the model registry has none: add "
            "its 'cost' to the 'models' of the settings (docs/providers.md), pass a "
            "registry that has it, or limit max_tokens instead"
        )
        self.model = model


class OutputValidationError(HarnessError, ValueError):
    """``prompt(output_schema=...)``: the model's final answer did not match the schema after
    every retry. ``errors`` are the last answer's problems (one line each), ``attempts`` how
    many answers were checked, ``reply`` the last reply (persisted, like every message)."""

    code = "output_invalid"

    def __init__(self, errors: Sequence[str], attempts: int, reply: AssistantMessage) -> None:
        shown = "; ".join(errors[:5]) + (
            f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        )
        super().__init__(
            f"the final answer did not match the output schema after {attempts} "
            f"{'attempt' if attempts == 1 else 'attempts'}: {shown}"
        )
        self.errors, self.attempts, self.reply = tuple(errors), attempts, reply


class AwaitingApprovalError(HarnessError, RuntimeError):
    """The session's last run stopped ``awaiting_approval`` and ``approval_ids`` are still
    unanswered: answer them (``resolve_approval``, ``harness approve``/``deny``) and
    ``resume()``; a new prompt would leave those calls without results."""

    code = "awaiting_approval"

    def __init__(self, approval_ids: Sequence[str]) -> None:
        super().__init__(
            f"the session awaits approval of {', '.join(approval_ids)}: approve or deny "
            "(AgentHarness.resolve_approval, `harness approve ID`, `harness deny ID`), then "
            "resume()"
        )
        self.approval_ids = tuple(approval_ids)


class NothingToResumeError(HarnessError, RuntimeError):
    """``resume()`` found no run stopped ``awaiting_approval`` on the session's branch, or it
    found one whose approvals are not all answered (``unanswered`` lists them)."""

    code = "nothing_to_resume"

    def __init__(self, reason: str, unanswered: Sequence[str] = ()) -> None:
        super().__init__(reason)
        self.unanswered = tuple(unanswered)


class ApprovalNotFoundError(HarnessError, LookupError):
    """No pending approval has this id (in the session given, or in those searched)."""

    code = "approval_not_found"

    def __init__(self, approval_id: str, where: str) -> None:
        super().__init__(f"no pending approval {approval_id!r} in {where}")
        self.approval_id = approval_id


class ApprovalRefusedError(HarnessError, PermissionError):
    """An approval cannot be answered: its entry is not signed by this user's harness (a
    session file is untrusted: written by hand, edited, or copied from another session), or
    it was answered already (``reason`` says which). Nothing was written."""

    code = "approval_refused"

    def __init__(self, approval_id: str, reason: str) -> None:
        super().__init__(f"approval {approval_id!r} cannot be answered: {reason}")
        self.approval_id, self.reason = approval_id, reason
