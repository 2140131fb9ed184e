"""Approvals that wait: a Defer stops the run awaiting_approval with the calls in a signed
entry; resolve_approval + resume() go on exactly as if the run had never stopped. A pending
entry in a session file is untrusted: it never approves itself, and an edited, hand-written
or copied one never runs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from agent_helpers import customs

from harness import (
    APPROVAL_DECISION_TYPE,
    APPROVAL_PENDING_TYPE,
    PERMISSION_ENTRY,
    RUN_STOP_TYPE,
    AgentDefinition,
    AgentHarness,
    ApprovalNotFoundError,
    ApprovalRefusedError,
    Approve,
    ApproveAlways,
    AwaitingApprovalError,
    Defer,
    Deny,
    FauxModel,
    FauxReply,
    FauxToolCall,
    JsonlSessionRepo,
    ModelRequest,
    NothingToResumeError,
    PermissionDecisionEvent,
    PermissionRequest,
    SecuritySupervisor,
    Session,
    ToolResult,
    ToolRun,
    open_session,
    tool,
)


def append_tool(target: Path) -> Any:
    @tool(
        "append",
        "appends a line to the log",
        {"type": "object", "properties": {"line": {"type": "string"}}, "required": ["line"]},
        controlled=True,
    )
    async def append(input: Mapping[str, Any], run: ToolRun) -> ToolResult:
        with target.open("a") as out:
            out.write(f"{input['line']}\n")
        return ToolResult(content=f"appended {input['line']}")

    return append


async def defer(request: PermissionRequest) -> Defer:
    return Defer(reason="the on-call person decides")


def script(request: ModelRequest) -> FauxReply | str:
    """Asks to append once; then reports what the tool said."""
    last = request.messages[-1]
    if last.role == "toolResult":
        return f"result: {last.text}"
    return FauxReply(
        text="appending",
        tool_calls=[FauxToolCall(name="append", arguments={"line": "hello"}, id="call_1")],
    )


def make(session: Session, log: Path, **kwargs: Any) -> AgentHarness:
    kwargs.setdefault("model", FauxModel(script))
    return AgentHarness(
        session=session,
        cwd=Path(session.cwd),
        tools=[append_tool(log)],
        supervisor=kwargs.pop("supervisor", SecuritySupervisor(approver=defer, setting_sources=())),
        resources=None,
        **kwargs,
    )


async def test_a_deferred_call_stops_the_run_and_resumes_after_approval(
    session: Session, project: Path
) -> None:
    log = project / "log.txt"
    h = make(session, log)
    decisions: list[PermissionDecisionEvent] = []
    h.on("permission_decision")(lambda sender, event: decisions.append(event))

    reply = await h.prompt("log hello")

    assert reply.stop_reason == "awaiting_approval" and reply.message.stop_reason == "toolUse"
    (pending,) = reply.pending
    assert (pending.tool_name, pending.operation_key, pending.input) == (
        "append",
        "append",
        {"line": "hello"},
    )
    assert pending.reason == "the on-call person decides" and pending.signed
    assert not log.exists()  # nothing ran
    (entry,) = customs(session, APPROVAL_PENDING_TYPE)
    assert isinstance(entry["signature"], str)
    (stop,) = customs(session, RUN_STOP_TYPE)
    assert stop["stopReason"] == "awaiting_approval" and stop["approvals"] == [pending.id]
    assert [d.decision for d in decisions] == ["defer"]
    # Nothing else may run on the session meanwhile.
    with pytest.raises(AwaitingApprovalError) as busy:
        await h.prompt("something else")
    assert busy.value.approval_ids == (pending.id,)
    with pytest.raises(NothingToResumeError) as early:
        await h.resume()
    assert early.value.unanswered == (pending.id,)

    assert h.resolve_approval(pending.id, Approve()) == ()
    with pytest.raises(ApprovalRefusedError):  # the first answer stands
        h.resolve_approval(pending.id, Deny(reason="changed my mind"))
    resumed = await h.resume()

    assert resumed.text == "result: appended hello" and resumed.stop_reason == "stop"
    assert log.read_text() == "hello\n"
    assert [d.decision for d in decisions] == ["defer", "approve"]
    # The same context as if the run had never stopped: prompt, call, result, answer.
    assert [(m.role, m.text) for m in session.build_context().messages] == [
        ("user", "log hello"),
        ("assistant", "appending"),
        ("toolResult", "appended hello"),
        ("assistant", "result: appended hello"),
    ]
    assert h.pending_approvals == ()
    with pytest.raises(NothingToResumeError):
        await h.resume()


async def test_a_denied_call_gets_the_reason_and_the_run_goes_on(
    session: Session, project: Path
) -> None:
    log = project / "log.txt"
    h = make(session, log)
    (pending,) = (await h.prompt("log hello")).pending

    h.resolve_approval(pending.id, Deny(reason="not on a Friday"))
    reply = await h.resume()

    assert reply.text == "result: denied by the user: not on a Friday"
    assert not log.exists()


async def test_a_new_harness_in_another_place_resumes_and_a_deny_rule_still_wins(
    repo: JsonlSessionRepo, session: Session, project: Path
) -> None:
    log = project / "log.txt"
    (pending,) = (await make(session, log).prompt("log hello")).pending
    assert session.path is not None
    session.close()

    # Answered from a reopened session (as another process would), then resumed by a harness
    # whose rules now deny the call: the rule wins over the answer.
    reopened = open_session(session.path)
    later = make(
        reopened,
        log,
        supervisor=SecuritySupervisor(rules={"deny": ["append"]}, setting_sources=()),
    )
    (left,) = later.pending_approvals
    assert left.id == pending.id and left.status == "waiting"
    later.resolve_approval(pending.id, ApproveAlways())
    reply = await later.resume()

    assert reply.text.startswith("result: append is denied by the rule append")
    assert not log.exists()


async def test_approve_always_is_remembered_once_the_call_runs(
    session: Session, project: Path
) -> None:
    log = project / "log.txt"
    h = make(session, log)
    (pending,) = (await h.prompt("log hello")).pending
    h.resolve_approval(pending.id, ApproveAlways())
    await h.resume()

    assert "append" in h.approvals
    (remembered,) = customs(session, PERMISSION_ENTRY)
    assert remembered["operationKey"] == "append"
    # The next call of the same operation is not deferred again.
    assert (await h.prompt("again")).stop_reason == "stop"
    assert log.read_text() == "hello\nhello\n"


async def test_limits_and_counters_go_on_after_a_resume(session: Session, project: Path) -> None:
    def twice(request: ModelRequest) -> FauxReply | str:
        n = sum(1 for m in request.messages if m.role == "toolResult")
        return FauxReply(
            tool_calls=[FauxToolCall(name="append", arguments={"line": f"l{n}"}, id=f"c{n}")]
        )

    log = project / "log.txt"
    h = make(session, log, model=FauxModel(twice), max_turns=2)
    (pending,) = (await h.prompt("log twice")).pending
    h.resolve_approval(pending.id, Approve())

    bypass = SecuritySupervisor(mode="bypass", setting_sources=())
    reply = await make(session, log, model=FauxModel(twice), supervisor=bypass).resume()

    # Turn 1 before the stop, turn 2 after it: the run's own limit (kept in the session with
    # the turns it had used) ends it, though the resuming harness has none.
    assert reply.stop_reason == "max_turns"
    first, last = customs(session, RUN_STOP_TYPE)
    assert (first["stopReason"], first["turns"]) == ("awaiting_approval", 1)
    assert (last["stopReason"], last["turns"], last["limit"]) == ("max_turns", 2, 2)
    assert log.read_text() == "l0\nl1\n"


async def test_a_sub_agent_cannot_wait_a_deferral_there_is_a_deny(
    session: Session, project: Path
) -> None:
    log = project / "log.txt"
    child = FauxModel(script)
    parent = FauxModel(
        [
            FauxReply(
                tool_calls=[
                    FauxToolCall(
                        name="task", arguments={"subagent_type": "logger", "prompt": "log it"}
                    )
                ]
            ),
            "done",
        ]
    )
    h = make(
        session,
        log,
        model=parent,
        agents=[AgentDefinition("logger", "Logs.", "You log.", model=child)],
    )

    reply = await h.prompt("delegate")

    assert reply.stop_reason == "stop" and not log.exists()
    assert "cannot wait in a nested run" in child.requests[1].messages[-1].text


# --- the pending entry is untrusted ----------------------------------------------------------


def rewrite(path: Path, change: Any) -> None:
    """Rewrite the session file with ``change(line_dict)`` applied to every custom entry of
    the pending type (what an attacker editing the file does)."""
    lines = []
    for raw in path.read_bytes().splitlines():
        line = orjson.loads(raw)
        if line.get("customType") == APPROVAL_PENDING_TYPE:
            change(line["data"])
        lines.append(orjson.dumps(line))
    path.write_bytes(b"\n".join(lines) + b"\n")


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda d: d["approvals"][0]["input"].update(line="rm -rf"), id="input"),
        pytest.param(lambda d: d["approvals"][0].update(operationKey="append(x)"), id="key"),
        pytest.param(lambda d: d.pop("signature"), id="unsigned"),
        pytest.param(lambda d: d.update(signature="0" * 64), id="forged"),
    ],
)
async def test_an_edited_or_unsigned_pending_entry_never_runs(
    session: Session, project: Path, edit: Any
) -> None:
    log = project / "log.txt"
    (pending,) = (await make(session, log).prompt("log hello")).pending
    assert session.path is not None
    session.close()
    rewrite(session.path, edit)

    again = open_session(session.path)
    h = make(again, log)
    (shown,) = h.pending_approvals
    assert not shown.signed
    with pytest.raises(ApprovalRefusedError) as refused:
        h.resolve_approval(pending.id, Approve())
    assert refused.value.code == "approval_refused"
    with pytest.raises(ApprovalRefusedError):
        await h.resume()
    assert not log.exists()
    # An unsigned entry blocks nothing: a new prompt goes on (the call gets no result).
    assert (await h.prompt("fresh start")).stop_reason == "awaiting_approval"


async def test_a_pending_entry_copied_from_another_session_never_runs(
    repo: JsonlSessionRepo, session: Session, project: Path
) -> None:
    log = project / "log.txt"
    (pending,) = (await make(session, log).prompt("log hello")).pending
    assert session.path is not None
    session.close()
    # A new session made of the same lines under another id (the header's id changed).
    other = await repo.create(str(project))
    assert other.path is not None
    other.close()
    header = orjson.loads(other.path.read_bytes().splitlines()[0])
    body = session.path.read_bytes().splitlines()[1:]
    other.path.write_bytes(b"\n".join([orjson.dumps(header), *body]) + b"\n")

    h = make(open_session(other.path), log)
    with pytest.raises(ApprovalRefusedError):
        h.resolve_approval(pending.id, Approve())
    assert not log.exists()


async def test_a_forged_decision_entry_answers_nothing(session: Session, project: Path) -> None:
    log = project / "log.txt"
    h = make(session, log)
    (pending,) = (await h.prompt("log hello")).pending
    (entry,) = [
        e for e in session.entries() if getattr(e, "custom_type", "") == APPROVAL_PENDING_TYPE
    ]
    session.append_custom(
        APPROVAL_DECISION_TYPE,
        {"approvalId": pending.id, "pendingEntryId": entry.id, "decision": "approve"},
    )

    with pytest.raises(NothingToResumeError) as unanswered:
        await h.resume()
    assert unanswered.value.unanswered == (pending.id,)
    with pytest.raises(ApprovalNotFoundError):
        h.resolve_approval("nope", Approve())
    assert not log.exists()


async def test_in_a_batch_only_the_deferred_call_waits(session: Session, project: Path) -> None:
    from agent_helpers import note

    log = project / "log.txt"
    model = FauxModel(
        [
            FauxReply(
                tool_calls=[
                    FauxToolCall(name="append", arguments={"line": "x"}, id="c1"),
                    FauxToolCall(name="note", arguments={"word": "w"}, id="c2"),
                ]
            ),
            "both done",
        ]
    )
    h = AgentHarness(
        session=session,
        cwd=project,
        model=model,
        tools=[append_tool(log), note],
        supervisor=SecuritySupervisor(approver=defer, setting_sources=()),
        resources=None,
    )
    (pending,) = (await h.prompt("go")).pending
    assert pending.tool_call_id == "c1"
    # The uncontrolled call ran at once; its result is stored.
    assert [m.text for m in session.build_context().messages if m.role == "toolResult"][
        -1
    ] == "noted w"

    h.resolve_approval(pending.id, Approve())
    reply = await h.resume()

    assert reply.text == "both done"
    sent = model.requests[1].messages
    assert [(m.role, getattr(m, "tool_call_id", None)) for m in sent[-2:]] == [
        ("toolResult", "c1"),
        ("toolResult", "c2"),
    ]
    assert log.read_text() == "x\n"
