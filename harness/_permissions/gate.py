"""The harness's side of the supervisor: build the request, announce it, ask, remember."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Literal

import orjson
from attrs import define, field, frozen

from hooks import (
    JSONValue,
    NotificationEvent,
    PermissionDecisionEvent,
    PermissionRequestEvent,
    ToolCall,
    notify,
)
from repos import CustomEntry, Session

from .._tools.base import Tool
from .._tools.sandbox import Sandbox
from .decisions import (
    Approve,
    ApproveAlways,
    Decision,
    Defer,
    Deny,
    PermissionRequest,
    Supervisor,
    answered,
)
from .keys import describe_call
from .rules import add_project_rule
from .signing import ApprovalSigner

__all__ = ["PERMISSION_ENTRY", "Gate", "GateResult", "remembered_approvals", "session_files"]

PERMISSION_ENTRY = "permission"
"""``customType`` of the session entry an approve-always writes:
``{"operationKey", "decision": "approve_always", "toolName", "scope", "depth", "signature"}``
(``signature``: see :class:`ApprovalSigner`)."""

_log = logging.getLogger("harness")


def session_files(session: Session) -> tuple[str, ...]:
    """The files ``session`` keeps on disk (a JSONL session file, which is also what its
    writers lock, and the ``.torn`` sidecar an append sets a torn tail aside in); none for a
    session in memory or in a database (the CLI names a SQLite store file as a store folder).
    Wherever they lie (``--session ./s.jsonl`` in the working folder), no tool call changes or
    reads them unasked (review finding 12)."""
    path = session.path
    if path is None:
        return ()
    named = os.fspath(path)
    return (named, named + ".torn")


def remembered_approvals(session: Session, signer: ApprovalSigner | None = None) -> set[str]:
    """Operation keys approved always in ``session`` (every branch: an approval is a fact of the
    session, not of one conversation path), counting only entries signed with this user's
    secret: a session file is untrusted, and a ``permission`` entry someone else wrote (or one
    copied from another session) grants nothing (docs/security.md). A later ``revoke`` entry of
    the same key (``AgentHarness.revoke_approval``) takes it back."""
    signer = signer or ApprovalSigner()
    keys = set()
    ids = session.entry_ids()
    # Custom entries only, found by the index's types: decoding every message here built
    # every message of a long session before its first request (issue 24, point 1).
    custom = [i for i, kind in zip(ids, session.entry_types(ids), strict=True) if kind == "custom"]
    for entry in session.get_entries(custom):
        if isinstance(entry, CustomEntry) and entry.custom_type == PERMISSION_ENTRY:
            data = entry.data
            if not isinstance(data, Mapping) or not isinstance(data.get("operationKey"), str):
                continue
            key = data["operationKey"]
            if data.get("decision") == "approve_always" and signer.verify(session.id, data):
                keys.add(key)
            elif data.get("decision") == "revoke":  # only takes away: needs no signature
                keys.discard(key)
    return keys


@frozen
class GateResult:
    """The supervisor's answer for one call: ``denied`` is the reason (None: run it),
    ``leaves_cwd`` whether the approved call may go outside the working folder, ``input`` a
    fresh copy of exactly the input the supervisor was shown (nobody else holds it: the tool
    runs with it), and ``approved_path`` the absolute path, symlinks resolved when the call was
    decided: the tool opens exactly it, through no symlink, inside the folder or outside (None
    for a call with no path)."""

    denied: str | None
    leaves_cwd: bool
    input: Mapping[str, JSONValue]
    approved_path: str | None = None
    hidden: Callable[[str], bool] | None = None
    """For a folder walk: the paths beneath it the supervisor keeps unread (``ToolRun.hidden``);
    from the supervisor's optional ``hidden_paths(request)``."""
    deferred: Defer | None = None
    """The supervisor deferred the call (it neither runs nor is denied now)."""
    operation_key: str = ""
    """The call's operation key, as the supervisor was shown it."""
    sandbox: Sandbox | None = None
    """For a command: what it may not change or read (``ToolRun.sandbox``); from the
    supervisor's optional ``sandbox(request)``."""


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
    signer: ApprovalSigner = field(factory=ApprovalSigner)
    notification_delay_s: float | None = None
    """Seconds a decision may stay pending before ``notification`` (``permission_prompt``) is
    sent: someone is being asked. None: never."""
    can_defer: bool = True
    """Whether a :class:`Defer` may stand; False for a nested run, where it is a deny."""
    outer_session_files: tuple[str, ...] = ()
    """For a nested run: the files of the sessions above it (:func:`session_files`), protected
    as its own session's are."""

    async def check(
        self,
        call: ToolCall,
        tool: Tool,
        input: Mapping[str, JSONValue],
        *,
        hook_decision: Literal["allow", "ask"] | None = None,
        hook_reason: str | None = None,
        resolution: Literal["approve", "approve_always", "deny"] | None = None,
        resolution_reason: str | None = None,
    ) -> GateResult:
        """Announce, decide and record one call that the ``tool_call`` hooks let through
        (``hook_decision``/``hook_reason``: what they asked of the supervisor, see
        :class:`PermissionRequest`; ``resolution``/``resolution_reason``: a person's answer
        to this call, deferred before and resumed now).

        A :class:`Defer` stands only where the call can wait (``can_defer``) and has no
        answer yet; with an answer, the answer is the decision; in a nested run it is a deny.

        ``input`` is serialised once; observers, the supervisor and the tool each get their
        own copy of that snapshot, so an observer or an approver that keeps a reference (to a
        nested list, say) and changes it later changes nothing the tool sees.

        A supervisor that raises or returns something else than a decision denies the call
        (fails closed, like a raising ``tool_call`` receiver), and the error is logged.

        Raises:
            TypeError: ``input`` is not JSON (the loop checks that before).
        """
        snapshot = orjson.dumps(input)
        try:
            target = describe_call(tool, orjson.loads(snapshot), self.cwd)
        except (OSError, ValueError, RuntimeError, RecursionError) as exc:
            # A NUL in a path, a symlink chain too long to follow: no decision can be made.
            return GateResult(
                denied=f"the call's target cannot be checked: {type(exc).__name__}: {exc}",
                leaves_cwd=False,
                input=orjson.loads(snapshot),
            )
        frozen_input = MappingProxyType(orjson.loads(snapshot))
        request = PermissionRequest(
            tool_call_id=call.id,
            tool_name=tool.name,
            input=frozen_input,
            kind=tool.kind,
            controlled=tool.controlled or target.leaves_cwd,
            tool_controlled=tool.controlled,
            operation_key=target.operation_key,
            target=target.target,
            paths=target.paths,
            cwd=self.cwd,
            leaves_cwd=target.leaves_cwd,
            session_id=self.session.id,
            depth=self.depth,
            approvals=frozenset(self.approvals),
            hook_decision=hook_decision,
            hook_reason=hook_reason,
            resolution=resolution,
            resolution_reason=resolution_reason,
            session_files=(*session_files(self.session), *self.outer_session_files),
        )
        await notify(
            self.sender,
            PermissionRequestEvent(
                tool_call_id=call.id,
                tool_name=tool.name,
                input=MappingProxyType(orjson.loads(snapshot)),
                operation_key=request.operation_key,
                cwd=str(self.cwd),
                leaves_cwd=request.leaves_cwd,
                session_id=request.session_id,
                depth=self.depth,
            ),
        )
        try:
            decision = self._settled(request, await self._decide(request))
        finally:
            # Asked at once, with no await between: a person's approval the supervisor noted
            # must not outlive this call, even when the run is aborted here (review 7,
            # finding 9); a supervisor that fails denies the call.
            sandbox: Sandbox | None = None
            sandbox_failed: Exception | None = None
            try:
                sandbox = self._sandbox(request)
            except Exception as exc:
                sandbox_failed = exc
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
        denied = decision.reason if isinstance(decision, Deny) else None
        if isinstance(decision, Defer):
            return GateResult(
                denied=None,
                leaves_cwd=request.leaves_cwd,
                input=orjson.loads(snapshot),
                deferred=decision,
                operation_key=request.operation_key,
            )
        hidden = None
        if denied is None:
            try:
                if sandbox_failed is not None:
                    raise sandbox_failed
                hidden = self._hidden(request)
            except Exception as exc:  # fail closed, as for a raising decide()
                _log.error("supervisor failed on %r", request.operation_key, exc_info=exc)
                denied = f"the supervisor failed, so the call is denied: {exc!r}"
        return GateResult(
            denied=denied,
            leaves_cwd=request.leaves_cwd,
            input=orjson.loads(snapshot),
            approved_path=target.resolved,
            hidden=hidden,
            operation_key=request.operation_key,
            sandbox=sandbox,
        )

    def _settled(self, request: PermissionRequest, decision: Decision) -> Decision:
        """A ``Defer`` where it cannot stand: a person's answer when there is one (a
        supervisor that defers again does not get to ask twice), else a deny in a run that
        cannot wait."""
        if not isinstance(decision, Defer):
            return decision
        if request.resolution is not None:
            return answered(request.resolution, request.resolution_reason)
        if not self.can_defer:
            why = f" ({decision.reason})" if decision.reason else ""
            return Deny(
                reason=f"{request.operation_key} needs an approval that cannot wait in a nested "
                f"run (a sub-agent or a skill run), so it is denied{why}; do without it"
            )
        return decision

    def _hidden(self, request: PermissionRequest) -> Callable[[str], bool] | None:
        hidden_paths = getattr(self.supervisor, "hidden_paths", None)
        return hidden_paths(request) if callable(hidden_paths) else None

    def _sandbox(self, request: PermissionRequest) -> Sandbox | None:
        sandbox = getattr(self.supervisor, "sandbox", None)
        return sandbox(request) if callable(sandbox) else None

    async def _decide(self, request: PermissionRequest) -> Decision:
        if self.notification_delay_s is None:
            return await self._decided(request)
        # The decision stays in this task (an abort() from the approver cancels the run as
        # before); a timer sends the notification beside it if it is still pending.
        sent: list[asyncio.Task[None]] = []
        timer = asyncio.get_running_loop().call_later(
            self.notification_delay_s,
            lambda: sent.append(asyncio.ensure_future(self._notify_pending(request))),
        )
        try:
            decision = await self._decided(request)
        except BaseException:
            for task in sent:
                task.cancel()
            raise
        finally:
            timer.cancel()
        for task in sent:
            await task  # bounded: every receiver has its timeout
        return decision

    async def _notify_pending(self, request: PermissionRequest) -> None:
        await notify(
            self.sender,
            NotificationEvent(
                session_id=self.session.id,
                message=f"The agent needs your permission to use {request.tool_name}: "
                f"{request.operation_key}",
                notification_type="permission_prompt",
            ),
        )

    async def _decided(self, request: PermissionRequest) -> Decision:
        try:
            decision = await self.supervisor.decide(request)
        except Exception as exc:
            _log.error("supervisor failed on %s", request.operation_key, exc_info=exc)
            return Deny(reason=f"the supervisor failed, so the call is denied: {exc!r}")
        if not isinstance(decision, Approve | Deny | ApproveAlways | Defer):
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
        signature = self.signer.sign(self.session.id, data)
        if signature is not None:
            data["signature"] = signature
        self.write(lambda: self.session.append_custom(PERMISSION_ENTRY, data))
        if decision.scope == "project":
            try:
                add_project_rule(self.cwd, key)
            except (OSError, ValueError) as exc:  # the session still remembers it
                _log.warning("could not add %s to the project settings: %s", key, exc)
                return "session"
        return decision.scope


_NAMES: dict[type[Decision], Literal["approve", "deny", "approve_always", "defer"]] = {
    Approve: "approve",
    Deny: "deny",
    ApproveAlways: "approve_always",
    Defer: "defer",
}
