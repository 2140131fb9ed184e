"""What a supervisor is asked and what it answers: the request, the four decisions, the
``Supervisor`` protocol and the application's ``Approver`` callback."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Literal, Protocol, TypeAlias

from attrs import field, frozen

from hooks import JSONValue

from .._tools.base import ToolKind

__all__ = [
    "Approve",
    "ApproveAlways",
    "Approver",
    "Decision",
    "Defer",
    "Deny",
    "PermissionMode",
    "PermissionRequest",
    "Supervisor",
    "answered",
]

PermissionMode: TypeAlias = Literal["default", "accept_edits", "plan", "bypass", "dont_ask"]
"""Claude Code's permission modes, in our spelling: ``default`` asks for controlled calls;
``accept_edits`` approves file edits inside the working folder; ``plan`` denies every edit and
command (read-only); ``bypass`` approves what no deny or ask rule catches; ``dont_ask`` denies
what would be asked."""


@frozen(kw_only=True)
class Approve:
    """Run the call. ``reason`` (optional) says why, for ``permission_decision``."""

    reason: str | None = None


@frozen(kw_only=True)
class Deny:
    """Do not run the call; ``reason`` becomes its error result, so say what the model can do
    instead."""

    reason: str = field(validator=lambda _i, _a, v: _text(v))


@frozen(kw_only=True)
class ApproveAlways:
    """Run the call, and approve the same operation key from now on without asking.

    ``scope``: ``session`` remembers it as a ``permission`` entry of the session (it survives a
    reopen); ``project`` also adds an allow rule to ``.harness/settings.json`` in the working
    folder.
    """

    scope: Literal["session", "project"] = "session"
    reason: str | None = None


@frozen(kw_only=True)
class Defer:
    """Decide later: the call does not run now, and the run stops with stop reason
    ``awaiting_approval`` once the rest of its turn is done. The call is kept in the session
    (a signed ``harness.approvals.pending`` entry) until a person answers it, maybe hours
    later in another process (``AgentHarness.resolve_approval`` then ``resume()``,
    ``harness approve ID``, ``harness deny ID``; LangGraph's ``interrupt``, the OpenAI Agents
    SDK's interruptions). ``reason`` is shown to that person.

    A nested run (a sub-agent, a skill run) cannot wait: there a ``Defer`` is a ``Deny``.
    """

    reason: str | None = None


Decision: TypeAlias = Approve | Deny | ApproveAlways | Defer


def answered(
    resolution: Literal["approve", "approve_always", "deny"], reason: str | None = None
) -> Decision:
    """A person's answer to a deferred call (``PermissionRequest.resolution``) as the
    decision an approver would have returned."""
    said = f": {reason}" if reason else ""
    if resolution == "deny":
        return Deny(reason=f"denied by the user{said}")
    if resolution == "approve_always":
        return ApproveAlways(reason=f"approved always by the user{said}")
    return Approve(reason=f"approved by the user{said}")


def _text(value: object) -> None:
    if not isinstance(value, str) or not value:
        raise TypeError(f"Deny(reason=...) must be a non-empty string, not {value!r}")


@frozen(kw_only=True)
class PermissionRequest:
    """One tool call, as the supervisor sees it (after the ``tool_call`` hooks).

    Attributes:
        tool_call_id, tool_name: the call.
        input: the input the tool will run with (read-only, JSON).
        kind: the tool's :data:`ToolKind` (``read``, ``edit``, ``execute``, ``other``).
        controlled: the tool is controlled, or a path of the call leaves ``cwd``.
        tool_controlled: the tool itself is controlled (``Tool.controlled``); unknown is True.
        operation_key: what an approve-always remembers and a rule matches, in rule syntax:
            ``bash(git status:*)`` (only for one simple command of literal words whose program
            runs no code from its arguments), ``bash(<the command byte for byte, * and \\
            escaped>)`` for any other command, ``write(src/a.py)`` (a path relative to
            ``cwd``, absolute outside it, glob characters escaped), or the tool name alone.
            Read back as a rule, a key matches what it was made from and nothing wider.
        target: the command, or the path as given; None for tools without a ``target``.
        paths: the path relative to ``cwd`` both as written and with symlinks resolved
            (absolute when outside), which path rules are matched against.
        cwd: the working folder.
        leaves_cwd: a path of the call resolves outside ``cwd`` (``..``, absolute, a symlink).
        session_id: the harness's session.
        depth: 0 for a top-level harness, one more for each nested skill run.
        approvals: operation keys approved always in this session (and handed down from the
            parent of a nested run).
        hook_decision: what the ``tool_call`` hooks asked for (``Allow``: ``allow``, ``Ask``:
            ``ask``; Claude Code's ``permissionDecision``), None when they said nothing;
            ``hook_reason`` is their reason. :class:`SecuritySupervisor` asks its approver for
            ``ask`` and approves ``allow`` once no deny rule, ``plan`` or ask rule stops it.
        resolution: for a call that was deferred (:class:`Defer`) and is now resumed, the
            person's answer (``approve``, ``approve_always``, ``deny``; ``resolution_reason``
            theirs): what the approver would have said. :class:`SecuritySupervisor` takes it
            where it would ask; its deny rules and ``plan`` mode still come first, so a rule
            added meanwhile still denies. None for every other call.
        session_files: the files of the session in use and of the sessions above a nested
            run (a session file and its ``.torn`` sidecar), wherever they lie (``harness run
            --session ./s.jsonl`` keeps one in the working folder): the harness's own data,
            which :class:`SecuritySupervisor` protects as it does the ``store_folders``.
    """

    tool_call_id: str
    tool_name: str
    input: Mapping[str, JSONValue]
    kind: ToolKind
    controlled: bool
    operation_key: str
    target: str | None
    paths: tuple[str, ...]
    cwd: Path
    leaves_cwd: bool
    session_id: str
    depth: int = 0
    approvals: frozenset[str] = frozenset()
    hook_decision: Literal["allow", "ask"] | None = None
    hook_reason: str | None = None
    resolution: Literal["approve", "approve_always", "deny"] | None = None
    resolution_reason: str | None = None
    tool_controlled: bool = True
    session_files: tuple[str, ...] = ()

    @property
    def reaches(self) -> str | None:
        """Where the path leads through a symlink when that is not the path as written
        (relative to ``cwd``, absolute outside it), else None: what a person approving the
        call must see besides the name (review 11, finding 3: ``build.cfg`` was
        ``.git/config``)."""
        return self.paths[-1] if len(self.paths) > 1 else None


Approver: TypeAlias = Callable[[PermissionRequest], Awaitable[Decision]]
"""``async def approver(request) -> Approve | Deny | ApproveAlways | Defer``: the application's
answer when a call needs asking (the CLI's asks y / n / always; ``Defer`` waits for a person
who is not there now)."""


class Supervisor(Protocol):
    """Decides every tool call the ``tool_call`` hooks let through. The harness's default is
    :class:`SecuritySupervisor`; pass your own with ``AgentHarness(supervisor=...)``.

    A supervisor may also define ``hidden_paths(request) -> Callable[[str], bool] | None``:
    for an approved call that walks a folder, which paths beneath it the tool leaves unread
    (see ``SecuritySupervisor.hidden_paths``); and ``sandbox(request) -> Sandbox | None``, called
    once per approved call: what a command may not change or read (``ToolRun.sandbox``; see
    ``SecuritySupervisor.sandbox``); and ``read_check(cwd) -> Callable[[Sequence[str]],
    str | None]``: why a file the harness reads on its own (a context file, a skill, a
    template) may not be read (see ``SecuritySupervisor.read_check``; without it the harness
    asks a default ``SecuritySupervisor``'s, the user's settings and the project's)."""

    async def decide(self, request: PermissionRequest) -> Decision: ...
