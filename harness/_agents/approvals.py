"""Approvals that wait: tool calls a supervisor deferred, kept in the session until a person
answers, then run (or refused) exactly once, in whichever process resumes the run.

Three ``custom`` entries, which pi's reader keeps and leaves out of the context:

- ``harness.approvals.pending`` (after the turn whose calls wait): ``approvals``, one per call
  (``id``, ``toolCallId``, ``toolName``, ``input``, ``operationKey``, ``reason``), the entry
  of the reply holding the calls (``replyEntryId``), what the run had used and its limits
  and output schema (``run``), and ``signature``;
- ``harness.approvals.decision``: ``approvalId``, ``pendingEntryId``, ``decision``
  (``approve``, ``approve_always``, ``deny``), ``reason``, ``signature``;
- ``harness.approvals.start``: ``approvalId``, ``pendingEntryId``, written just before an
  approved call runs.

A session file is untrusted (docs/security.md): the pending and decision entries count only
when signed with this user's secret (:class:`~harness.ApprovalSigner`), over every field
and the session's id, so an entry written by hand, edited (another input, another tool) or
copied from another session is never run, and a decision cannot be forged. The input that
runs is the signed one, which is what the supervisor saw and what ``harness approve`` shows.

Exactly once: a call runs only after its ``start`` entry is written and found to be the first
for that approval (two processes resuming at once: one runs it); a call whose ``start`` entry
has no result after it was interrupted (the process was killed) and is never run again: its
result says so. So a kill between the approval and the tool's end never runs it twice.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from attrs import frozen

from hooks import AssistantMessage, JSONValue, ToolCall
from repos import CustomEntry, MessageEntry, Session

from .._permissions.signing import ApprovalSigner

__all__ = [
    "APPROVAL_DECISION_TYPE",
    "APPROVAL_PENDING_TYPE",
    "APPROVAL_START_TYPE",
    "AwaitingRun",
    "DeferredCall",
    "PendingApproval",
    "Resolution",
    "awaiting_run",
    "claim",
    "record_decision",
    "record_pending",
]

APPROVAL_PENDING_TYPE = "harness.approvals.pending"
APPROVAL_DECISION_TYPE = "harness.approvals.decision"
APPROVAL_START_TYPE = "harness.approvals.start"
_PENDING_PURPOSE = "harness-pending/1"
_DECISION_PURPOSE = "harness-decision/1"

Resolution: TypeAlias = Literal["approve", "approve_always", "deny"]
_RESOLUTIONS: tuple[Resolution, ...] = ("approve", "approve_always", "deny")

_log = logging.getLogger("harness")


@frozen(kw_only=True)
class DeferredCall:
    """A call the supervisor deferred, as the loop hands it over."""

    tool_call_id: str
    tool_name: str
    input: Mapping[str, JSONValue]
    operation_key: str
    reason: str | None


@frozen(kw_only=True)
class PendingApproval:
    """One deferred call and where it stands.

    Attributes:
        id: what a person names to answer it (``harness approve ID``).
        session_id: the session it waits in.
        tool_call_id, tool_name, input, operation_key: the call, exactly as the supervisor
            saw it (and as it will run).
        reason: why it was deferred (the supervisor's ``Defer.reason``).
        status: ``waiting``; ``approve``, ``approve_always`` or ``deny`` once answered;
            ``started`` once it began to run (and has no result yet).
        answer_reason: the reason given with the answer.
        signed: the entry is signed by this user's harness; an unsigned one can be listed
            but never answered.
    """

    id: str
    session_id: str
    tool_call_id: str
    tool_name: str
    input: Mapping[str, JSONValue]
    operation_key: str
    reason: str | None
    status: Literal["waiting", "approve", "approve_always", "deny", "started"]
    answer_reason: str | None = None
    signed: bool = True


@frozen(kw_only=True)
class AwaitingRun:
    """A run that stopped ``awaiting_approval``, read back from the session's branch."""

    pending_entry_id: str
    reply: AssistantMessage
    approvals: tuple[PendingApproval, ...]
    run: Mapping[str, JSONValue]
    signed: bool

    @property
    def waiting(self) -> tuple[PendingApproval, ...]:
        """The approvals nobody answered yet."""
        return tuple(a for a in self.approvals if a.status == "waiting")

    def calls(self) -> tuple[ToolCall, ...]:
        """The deferred calls, from the reply, in its order."""
        ids = {a.tool_call_id for a in self.approvals}
        return tuple(c for c in self.reply.tool_calls if c.id in ids)


def record_pending(
    session: Session,
    reply_entry_id: str | None,
    calls: Sequence[DeferredCall],
    run: Mapping[str, JSONValue],
    signer: ApprovalSigner,
) -> tuple[PendingApproval, ...]:
    """Append the signed pending entry for ``calls`` (at a turn boundary) and return them.

    An entry that cannot be signed (no usable secret, logged) is still written, but can never
    be answered: the calls stay unanswered, the session says why.
    """
    approvals = [
        {
            "id": secrets.token_hex(6),
            "toolCallId": c.tool_call_id,
            "toolName": c.tool_name,
            "input": dict(c.input),
            "operationKey": c.operation_key,
            "reason": c.reason,
        }
        for c in calls
    ]
    data: dict[str, JSONValue] = {
        "approvals": approvals,
        "replyEntryId": reply_entry_id,
        "run": dict(run),
    }
    try:
        signature = signer.sign_entry(_PENDING_PURPOSE, session.id, data)
    except TypeError as exc:  # an input orjson cannot write canonically (a huge integer)
        _log.warning("the deferred calls cannot be signed: %s", exc)
        signature = None
    if signature is not None:
        data["signature"] = signature
    session.append_custom(APPROVAL_PENDING_TYPE, data)
    return tuple(
        PendingApproval(
            id=str(a["id"]),
            session_id=session.id,
            tool_call_id=c.tool_call_id,
            tool_name=c.tool_name,
            input=c.input,
            operation_key=c.operation_key,
            reason=c.reason,
            status="waiting",
            signed=signature is not None,
        )
        for a, c in zip(approvals, calls, strict=True)
    )


def record_decision(
    session: Session,
    awaiting: AwaitingRun,
    approval_id: str,
    decision: Resolution,
    reason: str | None,
    signer: ApprovalSigner,
) -> None:
    """Append the signed answer to one approval.

    Raises:
        ValueError: the answer cannot be signed (no usable secret): it would not count.
    """
    data: dict[str, JSONValue] = {
        "approvalId": approval_id,
        "pendingEntryId": awaiting.pending_entry_id,
        "decision": decision,
        "reason": reason,
    }
    signature = signer.sign_entry(_DECISION_PURPOSE, session.id, data)
    if signature is None:
        raise ValueError("no approvals key can be had (see the log), so no answer can be signed")
    data["signature"] = signature
    session.append_custom(APPROVAL_DECISION_TYPE, data)


def claim(session: Session, awaiting: AwaitingRun, approval_id: str) -> bool:
    """Write the ``start`` entry of one approved call, durably, and say whether this process
    may run it: True when its entry is the first ``start`` of that approval in the file
    (another process that claimed it first runs it instead)."""
    data: dict[str, JSONValue] = {
        "approvalId": approval_id,
        "pendingEntryId": awaiting.pending_entry_id,
    }
    mine = session.append_custom(APPROVAL_START_TYPE, data)
    session.save_point()  # on disk before the tool runs: a kill from here on never reruns it
    ids = session.entry_ids()  # file order: every process's appends, caught up by ours
    for entry_id in ids[ids.index(awaiting.pending_entry_id) :]:
        if session.entry_type(entry_id) != "custom":
            continue
        if _is_start(session.get_entry(entry_id), awaiting.pending_entry_id, approval_id):
            return entry_id == mine.id
    return False


def awaiting_run(session: Session, signer: ApprovalSigner | None = None) -> AwaitingRun | None:
    """The run stopped ``awaiting_approval`` at the end of the session's branch, or None.

    Walks back from the leaf to the last pending entry; a message after it other than a
    result of one of its calls means the conversation went on without them (None). Answers
    and starts count when they follow it on the branch; answers only when signed, and the
    first signed answer of an approval wins. The approvals whose calls have a result are
    left out; None when none is left.
    """
    signer = signer or ApprovalSigner()
    after: list[Any] = []
    pending: CustomEntry | None = None
    # From the leaf up, entry by entry, stopping at the first message that is no tool result:
    # a few entries on any session, waiting or not, however long its branch.
    entry_id = session.leaf_id
    while entry_id is not None:
        entry = session.get_entry(entry_id)
        entry_id = entry.parent_id
        if isinstance(entry, CustomEntry) and entry.custom_type == APPROVAL_PENDING_TYPE:
            pending = entry
            break
        if isinstance(entry, MessageEntry) and entry.message.role != "toolResult":
            return None  # no run waits after this message
        after.append(entry)
    if pending is None or not isinstance(pending.data, Mapping):
        return None
    data = pending.data
    raw = data.get("approvals")
    reply_id = data.get("replyEntryId")
    reply_entry = session.get_entry(reply_id) if isinstance(reply_id, str) else None
    if not isinstance(raw, list) or not isinstance(reply_entry, MessageEntry):
        return None
    reply = reply_entry.message
    if not isinstance(reply, AssistantMessage):
        return None
    signed = signer.verify_entry(_PENDING_PURPOSE, session.id, data)
    calls = {c.id: c for c in reply.tool_calls}
    items = [a for a in raw if isinstance(a, Mapping) and _valid(a, calls)]
    by_call = {str(a["toolCallId"]): str(a["id"]) for a in items}
    answers: dict[str, tuple[Resolution, str | None]] = {}
    started: set[str] = set()
    done: set[str] = set()
    for entry in reversed(after):  # file order along the branch
        if isinstance(entry, MessageEntry):
            call_id = getattr(entry.message, "tool_call_id", None)
            if call_id not in by_call:
                return None  # the conversation went on without these calls
            done.add(by_call[str(call_id)])
        elif isinstance(entry, CustomEntry) and isinstance(entry.data, Mapping):
            d = entry.data
            if d.get("pendingEntryId") != pending.id:
                continue
            approval = d.get("approvalId")
            if entry.custom_type == APPROVAL_START_TYPE and isinstance(approval, str):
                started.add(approval)
            elif (
                entry.custom_type == APPROVAL_DECISION_TYPE
                and isinstance(approval, str)
                and approval not in answers
                and d.get("decision") in _RESOLUTIONS
                and signer.verify_entry(_DECISION_PURPOSE, session.id, d)
            ):
                reason = d.get("reason")
                answers[approval] = (d["decision"], reason if isinstance(reason, str) else None)
    approvals = []
    for a in items:
        approval_id = str(a["id"])
        if approval_id in done:
            continue
        answer = answers.get(approval_id)
        status: Any = "started" if approval_id in started else answer[0] if answer else "waiting"
        reason = a.get("reason")
        approvals.append(
            PendingApproval(
                id=approval_id,
                session_id=session.id,
                tool_call_id=str(a["toolCallId"]),
                tool_name=str(a["toolName"]),
                input=a["input"],
                operation_key=str(a["operationKey"]),
                reason=reason if isinstance(reason, str) else None,
                status=status,
                answer_reason=answer[1] if answer else None,
                signed=signed,
            )
        )
    if not approvals:
        return None
    run = data.get("run")
    return AwaitingRun(
        pending_entry_id=pending.id,
        reply=reply,
        approvals=tuple(approvals),
        run=run if isinstance(run, Mapping) else {},
        signed=signed,
    )


def _valid(item: Mapping[str, Any], calls: Mapping[str, ToolCall]) -> bool:
    """An approval naming a call of the reply, with the fields it must have."""
    call = calls.get(item.get("toolCallId"))  # type: ignore[arg-type]
    return (
        call is not None
        and isinstance(item.get("id"), str)
        and item.get("toolName") == call.name
        and isinstance(item.get("input"), Mapping)
        and isinstance(item.get("operationKey"), str)
    )


def _is_start(entry: object, pending_entry_id: str, approval_id: str) -> bool:
    return (
        isinstance(entry, CustomEntry)
        and entry.custom_type == APPROVAL_START_TYPE
        and isinstance(entry.data, Mapping)
        and entry.data.get("pendingEntryId") == pending_entry_id
        and entry.data.get("approvalId") == approval_id
    )
