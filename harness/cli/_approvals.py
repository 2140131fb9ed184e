"""``harness approvals list``, ``harness approve ID``, ``harness deny ID``: answer the tool calls
a run left waiting (``harness run --defer-approvals``, or any supervisor that returns
``Defer``), and go on with that run here (docs/agents.md, "Approvals that wait").

What is approved is shown before it runs, and what runs is exactly that: the input the
supervisor was shown, signed in the session when the call was deferred. An entry that is not
signed by this user's harness (a session file is untrusted) is listed as such and can never
be answered. Once the last waiting call of a run is answered, the run is resumed in this
process with the same tools as ``harness run`` (``--offline``, ``--model`` and the
permission options as there); the supervisor decides each call again with the answer, so a
deny rule still denies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from hooks import JSONValue
from repos import Session, SessionRepo

from .._agents import PendingApproval, Reply, awaiting_run
from .._agents.errors import ApprovalNotFoundError
from .._harness import AgentHarness
from .._permissions import Approve, ApproveAlways, Deny
from ._agent import AgentOptions, Agents, agent_options, working_folder
from ._common import (
    HarnessGroup,
    SessionRef,
    gutter_lines,
    one_line,
    open_ref,
    open_repo,
    resolve_ref,
    root_option,
    run_async,
    short_id,
)
from ._escape import echo, json_line
from ._hooks import attach_hook_output, load_command_hooks
from ._mcp import show_mcp_errors
from ._offline import offline_model
from ._render import short

__all__ = ["approvals_group", "approve", "deny"]


@click.group("approvals", cls=HarnessGroup)
def approvals_group() -> None:
    """Tool calls waiting for a person's answer (runs stopped `awaiting_approval`)."""


@approvals_group.command("list")
@root_option
@click.argument("ref", metavar="[ID|PATH]", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per approval, a list.")
def list_approvals(root: str | None, ref: str | None, as_json: bool) -> None:
    """List the calls waiting in session REF, or in the sessions of the current folder.

    One line each: the approval's ID, its status (`waiting`; `approve`, `approve_always`
    or `deny` when answered and not yet resumed; `started` when it began to run and has no
    result), the session, the tool, what it touches (its operation key) and its input; under it
    the whole command (or input), every line after `│ `, as the chat's approval question shows
    it. An entry this user's harness did not sign is marked `UNSIGNED`: it never runs.
    """
    repo = open_repo(root)
    found = [a for found_ref in _sessions(repo, ref) for a in _read(repo, found_ref)]
    if as_json:
        echo(json_line([_as_json(a) for a in found], indent=True))
        return
    if not found:
        echo("no approvals are waiting")
        return
    for a in found:
        echo(_line(a))
        command = a.input.get("command")  # whole, so nothing hides past the cut above
        for line in gutter_lines(command if isinstance(command, str) else json_line(dict(a.input))):
            echo(line)


def _answer_options(command: Any) -> Any:
    """``run``'s options (``--session`` names the session the approval waits in; default:
    search the current folder's) and ``--output``."""
    command = agent_options(command)
    return click.option(
        "--output",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="text: the resumed run's reply; json: reply, stop reason and session.",
    )(command)


@click.command()
@click.argument("approval_id")
@click.option("--always", is_flag=True, help="Approve this operation from now on too.")
@_answer_options
def approve(approval_id: str, always: bool, **options: Any) -> None:
    """Approve the waiting call APPROVAL_ID; once no call of its run waits any more, the run
    goes on here. Shows the call before it runs."""
    _answer(approval_id, ApproveAlways() if always else Approve(), **options)


@click.command()
@click.argument("approval_id")
@click.option(
    "--reason",
    default=None,
    help="Why (the model gets it as the call's result, to do without it).",
)
@_answer_options
def deny(approval_id: str, reason: str | None, **options: Any) -> None:
    """Deny the waiting call APPROVAL_ID (it gets the reason as its result); once no call of
    its run waits any more, the run goes on here."""
    _answer(approval_id, Deny(reason=reason or "the user said no"), **options)


def _answer(
    approval_id: str, decision: Approve | ApproveAlways | Deny, *, opts: AgentOptions, output: str
) -> None:
    repo = opts.repo()
    session, approval = _find(repo, approval_id, opts.ref)
    with session:
        word = {Approve: "approving", ApproveAlways: "approving always", Deny: "denying"}
        echo(f"{word[type(decision)]} {_line(approval)}", err=True)
        here = Path(os.path.realpath(opts.work_dir or Path.cwd()))
        cwd = working_folder(session, here if opts.work_dir is not None else None)
        choice = opts.model_choice(cwd)
        model, level = (offline_model(), None) if choice is None else choice.model(session)
        hooks = load_command_hooks(cwd, trust_project=opts.trusts(cwd))
        harness = Agents(opts, cwd, repo=repo, choice=choice, command_hooks=hooks).make(
            session, model, level
        )
        attach_hook_output(harness, lambda text: echo(text, err=True))
        show_mcp_errors(harness)
        expected = approval.status if approval.status != "waiting" else None
        if expected is None:
            waiting = harness.resolve_approval(approval_id, decision)
        elif expected != _resolution(decision):
            raise click.ClickException(
                f"approval {approval_id} was answered already ({expected}); it cannot be "
                "answered again"
            )
        else:  # answered so before, not yet run (a process stopped): go on with the run
            waiting = tuple(a for a in harness.pending_approvals if a.status == "waiting")
        if waiting:
            echo(
                f"{len(waiting)} more {'call waits' if len(waiting) == 1 else 'calls wait'} "
                f"in this run: {', '.join(a.id for a in waiting)}; it goes on once they are "
                "answered",
                err=True,
            )
            return
        reply = run_async(_resume(harness))
        _show(reply, session, output)


async def _resume(harness: AgentHarness) -> Reply:
    try:
        return await harness.resume()
    finally:
        await harness.shutdown()


def _show(reply: Reply, session: Session, output: str) -> None:
    if output == "json":
        echo(
            json_line(
                {
                    "session_id": session.id,
                    "path": str(session.path),
                    "reply": reply.text,
                    "stop_reason": reply.stop_reason,
                    "approvals": [a.id for a in reply.pending],
                },
                indent=True,
            )
        )
        return
    echo(reply.text)
    for a in reply.pending:
        echo(f"awaiting approval: {_line(a)}", err=True)


def _resolution(decision: Approve | ApproveAlways | Deny) -> str:
    if isinstance(decision, Deny):
        return "deny"
    return "approve_always" if isinstance(decision, ApproveAlways) else "approve"


def _sessions(repo: SessionRepo, ref: str | None) -> list[SessionRef]:
    """Session REF, else those of the current folder, most recent first."""
    if ref is not None:
        return [resolve_ref(repo, ref)]
    infos = run_async(repo.list(os.path.realpath(Path.cwd())))
    return [i.path if i.path is not None else i.id for i in infos]


def _read(repo: SessionRepo, ref: SessionRef) -> tuple[PendingApproval, ...]:
    with run_async(open_ref(repo, ref)) as session:
        found = awaiting_run(session)
        return () if found is None else found.approvals


def _find(repo: SessionRepo, approval_id: str, ref: str | None) -> tuple[Session, PendingApproval]:
    """The session holding ``approval_id`` (open) and the approval.

    Raises:
        ApprovalNotFoundError: no session searched holds it.
    """
    for found_ref in _sessions(repo, ref):
        session = run_async(open_ref(repo, found_ref))
        found = awaiting_run(session)
        approval = (
            next((a for a in found.approvals if a.id == approval_id), None) if found else None
        )
        if approval is not None:
            return session, approval
        session.close()
    where = f"session {ref}" if ref else f"the sessions of {Path.cwd()} (--session to name one)"
    raise ApprovalNotFoundError(approval_id, where)


def _line(a: PendingApproval) -> str:
    unsigned = "" if a.signed else "  UNSIGNED (not written by your harness: never runs)"
    reason = f"  ({short(a.reason, 60)})" if a.reason else ""
    return (
        f"{a.id}  {a.status}  session {short_id(a.session_id)}  {one_line(a.tool_name)}  "
        # The input is shown whole (as JSON, escaped): what is approved is never cut from view.
        f"{one_line(a.operation_key)}  {json_line(dict(a.input))}{reason}{unsigned}"
    )


def _as_json(a: PendingApproval) -> dict[str, JSONValue]:
    return {
        "id": a.id,
        "status": a.status,
        "session_id": a.session_id,
        "tool_call_id": a.tool_call_id,
        "tool_name": a.tool_name,
        "operation_key": a.operation_key,
        "input": dict(a.input),
        "reason": a.reason,
        "signed": a.signed,
    }
