"""The harness's side of the supervisor: build the request, announce it, ask, remember."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from attrs import define, frozen

from hooks import (
    JSONValue,
    PermissionDecisionEvent,
    PermissionRequestEvent,
    ToolCall,
    notify,
)
from repos import CustomEntry, Session

from .._tools.base import Tool
from .decisions import Approve, ApproveAlways, Decision, Deny, PermissionRequest, Supervisor
from .keys import describe_call
from .rules import add_project_rule

__all__ = ["PERMISSION_ENTRY", "Gate", "GateResult", "remembered_approvals"]

PERMISSION_ENTRY = "permission"
"""``customType`` of the session entry an approve-always writes:
``{"operationKey", "decision": "approve_always", "toolName", "scope", "depth"}``."""

_log = logging.getLogger("harness")


def remembered_approvals(session: Session) -> set[str]:
    """Operation keys approved always in ``session`` (every branch: an approval is a fact of the
    session, not of one conversation path)."""
    keys = set()
    for entry in session.entries():
        if isinstance(entry, CustomEntry) and entry.custom_type == PERMISSION_ENTRY:
            data = entry.data
            if isinstance(data, Mapping) and data.get("decision") == "approve_always":
                key = data.get("operationKey")
                if isinstance(key, str):
                    keys.add(key)
    return keys


@frozen
class GateResult:
    """The supervisor's answer for one call: ``denied`` is the reason (None: run it), and
    ``leaves_cwd`` whether the approved call may go outside the working folder."""

    denied: str | None
    leaves_cwd: bool


@define
class Gate:
    """One harness's view of its supervisor.

    ``approvals`` is the harness's own set (shared, so a remembered key applies to the next call
    at once); ``write`` appends a session entry when the harness can (between turns).
    """

    supervisor: Supervisor
    sender: object
    session: Session
    cwd: Path
    depth: int
    approvals: set[str]
    write: Callable[[Callable[[], object]], None]

    async def check(self, call: ToolCall, tool: Tool, input: Mapping[str, JSONValue]) -> GateResult:
        """Announce, decide and record one call that the ``tool_call`` hooks let through.

        A supervisor that raises or returns something else than a decision denies the call
        (fails closed, like a raising ``tool_call`` receiver), and the error is logged.
        """
        target = describe_call(tool, input, self.cwd)
        frozen_input = MappingProxyType(dict(input))
        request = PermissionRequest(
            tool_call_id=call.id,
            tool_name=tool.name,
            input=frozen_input,
            kind=tool.kind,
            controlled=tool.controlled or target.leaves_cwd,
            operation_key=target.operation_key,
            target=target.target,
            paths=target.paths,
            cwd=self.cwd,
            leaves_cwd=target.leaves_cwd,
            session_id=self.session.id,
            depth=self.depth,
            approvals=frozenset(self.approvals),
        )
        await notify(
            self.sender,
            PermissionRequestEvent(
                tool_call_id=call.id,
                tool_name=tool.name,
                input=frozen_input,
                operation_key=request.operation_key,
                cwd=str(self.cwd),
                leaves_cwd=request.leaves_cwd,
                session_id=request.session_id,
                depth=self.depth,
            ),
        )
        decision = await self._decide(request)
        remembered = (
            self._remember(request, decision) if isinstance(decision, ApproveAlways) else None
        )
        await notify(
            self.sender,
            PermissionDecisionEvent(
                tool_call_id=call.id,
                tool_name=tool.name,
                operation_key=request.operation_key,
                decision=_NAMES[type(decision)],
                reason=decision.reason,
                remembered=remembered,
            ),
        )
        return GateResult(
            denied=decision.reason if isinstance(decision, Deny) else None,
            leaves_cwd=request.leaves_cwd,
        )

    async def _decide(self, request: PermissionRequest) -> Decision:
        try:
            decision = await self.supervisor.decide(request)
        except Exception as exc:
            _log.error("supervisor failed on %s", request.operation_key, exc_info=exc)
            return Deny(reason=f"the supervisor failed, so the call is denied: {exc!r}")
        if not isinstance(decision, Approve | Deny | ApproveAlways):
            return Deny(
                reason=f"the supervisor returned {type(decision).__name__}, not a decision; "
                "the call is denied"
            )
        return decision

    def _remember(
        self, request: PermissionRequest, decision: ApproveAlways
    ) -> Literal["session", "project"]:
        key = request.operation_key
        self.approvals.add(key)
        data: dict[str, JSONValue] = {
            "operationKey": key,
            "decision": "approve_always",
            "toolName": request.tool_name,
            "scope": decision.scope,
            "depth": request.depth,
        }
        self.write(lambda: self.session.append_custom(PERMISSION_ENTRY, data))
        if decision.scope == "project":
            try:
                add_project_rule(self.cwd, key)
            except (OSError, ValueError) as exc:  # the session still remembers it
                _log.warning("could not add %s to the project settings: %s", key, exc)
                return "session"
        return decision.scope


_NAMES: dict[type[Decision], Literal["approve", "deny", "approve_always"]] = {
    Approve: "approve",
    Deny: "deny",
    ApproveAlways: "approve_always",
}
