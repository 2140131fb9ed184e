"""``SecuritySupervisor``: rules, permission modes and the application's approver, evaluated in
the order of the Claude Agent SDK."""

from __future__ import annotations

import itertools
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

from attrs import evolve, frozen

from .._tools.sandbox import Sandbox
from .claude_code import ModeName, permission_mode
from .decisions import (
    Approve,
    ApproveAlways,
    Approver,
    Decision,
    Deny,
    PermissionMode,
    PermissionRequest,
    answered,
)
from .folders import user_settings_path
from .keys import rule_paths
from .protected import (
    added_folder,
    file_url_paths,
    other_bash_log,
    private_config_file,
    private_folders,
    private_path,
    protected_command,
    protected_path,
    sandbox_paths,
    user_config_folders,
)
from .rules import PermissionRules, Rule, Settings, commands_to_allow, load_settings
from .shell import parse_command
from .signing import approval_key_path

log = logging.getLogger("harness")

__all__ = [
    "MODE_STRICTNESS",
    "PROJECT_SETTINGS",
    "UNSANDBOXED",
    "SecuritySupervisor",
    "user_settings_path",
]

UNSANDBOXED = "dangerouslyDisableSandbox"
"""The bash tool's input flag (Claude Code's name) asking to run a command outside the
sandbox: such a call is always asked, so only a person lets it out."""

PROJECT_SETTINGS = Path(".harness") / "settings.json"
"""Where project rules live, relative to the working folder."""

SettingSource = Literal["user", "project"]


@frozen
class _Policy:
    """What a permission mode does, as three independent restrictions, so that two modes can
    be combined into the strictest of both (a project can only add restrictions)."""

    lift: int  # 2: approve everything (bypass); 1: approve edits inside (accept_edits); 0: none
    plan: bool  # deny edits, commands and other controlled calls inside the folder
    no_ask: bool  # what would be asked is denied (dont_ask)

    @classmethod
    def of(cls, mode: PermissionMode) -> _Policy:
        return cls(
            lift={"bypass": 2, "accept_edits": 1}.get(mode, 0),
            plan=mode == "plan",
            no_ask=mode == "dont_ask",
        )

    def __and__(self, other: _Policy) -> _Policy:
        return _Policy(
            lift=min(self.lift, other.lift),
            plan=self.plan or other.plan,
            no_ask=self.no_ask or other.no_ask,
        )

    @property
    def name(self) -> PermissionMode:
        """The mode this policy is, or the strictest one it holds (``plan`` with ``dont_ask``
        shows as ``plan``)."""
        if self.plan:
            return "plan"
        if self.no_ask:
            return "dont_ask"
        return ("default", "accept_edits", "bypass")[self.lift]


MODE_STRICTNESS: tuple[PermissionMode, ...] = (
    "bypass",
    "accept_edits",
    "default",
    "dont_ask",
    "plan",
)
"""The modes from the most permissive to the strictest. ``plan`` and ``dont_ask`` restrict
different things (``plan`` denies every edit and command even when a rule allows it;
``dont_ask`` denies whatever would be asked); when both apply, both restrictions hold."""


class SecuritySupervisor:
    """The default supervisor: deny, ask and allow rules, a permission mode, an approver.

    Each call the ``tool_call`` hooks let through is decided in this order (the Claude Agent
    SDK's: hooks, deny rules, ask rules, mode, allow rules, ``can_use_tool``):

    1. a **deny** rule matches: denied;
    2. ``plan`` mode denies ``edit`` and ``execute`` tools and any other controlled call inside
       the working folder, with a reason telling the model to present a plan instead; no ask
       rule, allow rule or remembered approval lifts it;
    3. an **ask** rule matches, or possibly matches, or a deny rule possibly matches (a bash
       command whose words the rule looks at are computed, that runs code the harness cannot
       read, or that does not parse): asked (step 7), whatever the mode or allow rules say;
    3a. a call that may change a **protected path** (``.harness/settings*.json``,
       ``.harness/hooks``, ``.harness/agents``, the same under ``.claude``, ``.mcp.json``,
       anything under ``.git``, ``.gitconfig``, ``.config/git``, the user's harness settings
       folder, the harness's data (sessions, checkpoints), state and cache folders and the
       ``store_folders``; an ``edit`` tool's path or
       a bash command naming one, or running ``git config`` to write), or a ``read`` of
       ``approvals.key`` or of a sessions or checkpoint store: asked, whatever the
       mode, hooks or allow rules say (``dont_ask`` and no approver deny it); a folder walk
       (``grep``, ``find``, ``ls``) leaves those out;
    3b. a ``tool_call`` hook's ``Ask`` (``request.hook_decision``): asked; its ``Allow``:
       approved (Claude Code's order: a hook's allow skips neither deny nor ask rules);
    4. the **mode**: ``bypass`` approves; ``accept_edits`` approves ``edit`` tools whose path
       stays inside the working folder;
    5. an **allow** rule matches: approved;
    6. a call that is not controlled (a ``read``/``ls``/``grep``/``find`` inside the working
       folder, a tool not marked ``controlled``) is approved;
    7. asking: an operation key approved always before (``request.approvals``) is approved,
       except for a protected path (3a) and a path that reaches another through a symlink;
       a deferred call being resumed gets the person's answer (``request.resolution``); in
       ``dont_ask`` mode the call is denied; with no approver it is denied with a reason
       saying so; otherwise the approver's answer stands (``Defer`` included).

    Rules come from ``rules`` (code), then the user settings file, then the project's
    ``.harness/settings.json`` under the request's working folder (read at each decision, so
    edits apply at once). A settings file that does not parse denies every call, naming the
    file: a broken deny list must not open everything up.

    The **mode** is ``mode`` (code, or the user's ``--mode``), else the user settings' ``mode``,
    else ``default``; a project's ``mode`` (trusted or not) can only make it stricter: each
    restriction of either mode holds (:data:`MODE_STRICTNESS`).

    Args:
        mode: a :data:`PermissionMode`, or Claude Code's name of one (``acceptEdits``,
            ``bypassPermissions``, ``dontAsk``); None takes ``permissions.mode`` (or
            ``defaultMode``) from the user settings, else ``default``.
        rules: rules from code (:class:`PermissionRules`, or a mapping of ``allow``/``deny``/
            ``ask`` to lists of rule strings).
        approver: ``async (request) -> Approve | Deny | ApproveAlways``, asked when step 7 is
            reached; None denies those calls.
        setting_sources: which settings files to read: ``user``, ``project`` (default both);
            ``()`` for rules from code only.
        user_settings: the user settings file (default :func:`user_settings_path`).
        trust_project: let the project's ``.harness/settings.json`` add ``allow`` rules. Off by
            default: the file comes with the folder (a cloned repository can hold one), so
            untrusted it may only restrict (deny and ask rules, a stricter mode); its allow
            rules are ignored and logged. Claude Code asks the user to trust a folder for the
            same reason. ``True`` trusts the project of every request's working folder; a path
            trusts that folder only (what the CLI's ``--trust-project`` passes).
        store_folders: the sessions store in use and its checkpoint store when they are not
            the defaults (the CLI passes ``--root``'s): writing, or reading, there is asked in
            every mode (step 3a), like the user data folder and ``$HARNESS_SESSIONS_DIR``.
            The files of the request's session (``PermissionRequest.session_files``: one a
            run continues by its path, in the working folder say) are treated the same way.

    Raises:
        ValueError: an unknown mode, or a rule from code that does not parse.
    """

    def __init__(
        self,
        *,
        mode: ModeName | None = None,
        rules: PermissionRules | dict[str, Sequence[str]] | None = None,
        approver: Approver | None = None,
        setting_sources: Iterable[SettingSource] = ("user", "project"),
        user_settings: Path | None = None,
        trust_project: bool | str | os.PathLike[str] = False,
        store_folders: Iterable[str | os.PathLike[str]] = (),
    ) -> None:
        if isinstance(rules, dict):
            rules = PermissionRules(**rules)
        self._mode = None if mode is None else permission_mode(mode)
        self._rules = rules if rules is not None else PermissionRules()
        self.approver = approver
        self._sources = tuple(setting_sources)
        self._user_settings = user_settings
        self._trust_project: bool | str = (
            trust_project if isinstance(trust_project, bool) else os.path.realpath(trust_project)
        )
        self._warned: set[tuple[Path, str]] = set()
        self._stores = tuple(os.fspath(f) for f in store_folders)
        # (session id, tool call id) of calls a person approved, until sandbox() is asked
        self._person_approved: set[tuple[str, str]] = set()

    def _stores_of(self, request: PermissionRequest) -> tuple[str, ...]:
        """The store folders, and the files of the request's sessions wherever they lie
        (``--session ./s.jsonl``: review finding 12): the harness's own data."""
        return (*self._stores, *request.session_files)

    @property
    def rules(self) -> PermissionRules:
        """The rules from code (settings files are read per decision)."""
        return self._rules

    def mode_for(self, cwd: Path) -> PermissionMode:
        """The mode in force for calls in ``cwd`` (see ``mode``): when a project's mode and
        the user's both restrict, the strictest name shows (``plan`` over ``dont_ask``).

        Raises:
            ValueError: a settings file does not parse.
        """
        return self._policy(cwd, self._settings(cwd)).name

    def set_mode(self, mode: ModeName) -> None:
        """Change the mode from the next decision on (e.g. leaving ``plan``); a project's mode
        still only restricts it. Claude Code's names (``acceptEdits``, ...) are accepted.

        Raises:
            ValueError: not a :data:`PermissionMode` nor Claude Code's name of one.
        """
        self._mode = permission_mode(mode)

    def _trusts(self, cwd: Path) -> bool:
        if isinstance(self._trust_project, bool):
            return self._trust_project
        return os.path.realpath(cwd) == self._trust_project

    def _settings(self, cwd: Path) -> list[tuple[SettingSource, Settings]]:
        found: list[tuple[SettingSource, Settings]] = []
        if "user" in self._sources:
            found.append(("user", load_settings(self._user_settings or user_settings_path())))
        if "project" in self._sources:
            project = load_settings(cwd / PROJECT_SETTINGS, root=cwd)
            found.append(
                ("project", project if self._trusts(cwd) else self._restrictive(cwd, project))
            )
        return found

    def _policy(self, cwd: Path, settings: list[tuple[SettingSource, Settings]]) -> _Policy:
        base = self._mode
        if base is None:
            base = next((s.mode for src, s in settings if src == "user" and s.mode), None)
        policy = _Policy.of(base or "default")
        for source, found in settings:
            if source != "project" or found.mode is None:
                continue
            asked = _Policy.of(found.mode)
            if policy & asked != asked:  # it would lift something the user's mode restricts
                self._warn(
                    cwd,
                    "mode",
                    f"its mode {found.mode!r} only adds restrictions to the user's "
                    f"{policy.name!r} (a project can make the mode stricter, never laxer)",
                )
            policy = policy & asked
        return policy

    def _restrictive(self, cwd: Path, project: Settings) -> Settings:
        """What an untrusted project file may say: only what restricts."""
        if project.additional_directories:
            self._warn(
                cwd,
                "additionalDirectories",
                "its additionalDirectories are ignored: the project is not trusted "
                "(--trust-project lets it widen the working folder)",
            )
            project = evolve(project, additional_directories=())
        if project.allow_write:
            self._warn(
                cwd,
                "allowWrite",
                "its sandbox.filesystem.allowWrite is ignored: the project is not trusted "
                "(--trust-project lets it widen where sandboxed commands write)",
            )
            project = evolve(project, allow_write=())
        if not project.rules.allow:
            return project
        self._warn(
            cwd,
            "allow",
            "its allow rules are ignored: the project is not trusted "
            "(SecuritySupervisor(trust_project=...), --trust-project, lets it allow)",
        )
        return evolve(project, rules=evolve(project.rules, allow=()))

    def _warn(self, cwd: Path, what: str, message: str) -> None:
        path = cwd / PROJECT_SETTINGS
        if (path, what) not in self._warned:
            self._warned.add((path, what))
            log.warning("%r: %s", str(path), message)

    async def decide(self, request: PermissionRequest) -> Decision:
        """Decide one call in the documented order (see the class docstring)."""
        try:
            settings = self._settings(request.cwd)
            policy = self._policy(request.cwd, settings)
        except ValueError as exc:
            return Deny(reason=f"permission settings are broken, so no tool may run: {exc}")
        rules = self._rules
        for _source, s in settings:
            rules = rules + s.rules
        if request.leaves_cwd and _in_additional(request, settings):
            # Claude Code's additionalDirectories: decided as inside the working folder (the
            # tool still opens exactly the path decided on, as for any call outside it).
            request = evolve(request, leaves_cwd=False, controlled=request.tool_controlled)
        if rule := _first(rules.deny, request, "any"):
            return Deny(reason=f"{request.operation_key} is denied by the rule {_named(rule)}")
        if rule := _first_read(rules.deny, request, "any"):
            return Deny(
                reason=f"{request.operation_key} is denied by the rule {_named(rule)}: an edit "
                "reads the file (its errors and diff would show what it holds)"
            )
        if policy.plan and _plan_denies(request):
            return Deny(
                reason=f"{request.operation_key} is not allowed in plan mode (read-only): read "
                "and search only, then present your plan; changes run once the user leaves "
                "plan mode"
            )
        if rule := _first(rules.ask, request, "maybe") or _first_read(rules.ask, request, "any"):
            return await self._ask(request, policy, f"the rule {_named(rule)} asks for approval")
        if rule := _first(rules.deny, request, "maybe"):
            why = (
                f"it may run what the rule {_named(rule)} denies: a word the rule looks at is "
                "computed, or it runs code the harness cannot read, or it does not parse"
            )
            return await self._ask(request, policy, why)
        if (protected := _protected(request, self._stores_of(request))) is not None:
            # Never answered by an earlier "always": that was given for another input (an MCP
            # tool's bare name covers every input) or for what a path named then (review 11,
            # findings 6 and 7).
            return await self._ask(
                request,
                policy,
                f"{protected}; a protected path is always asked",
                hint=False,
                remembered=False,
            )
        if request.kind == "execute" and request.input.get(UNSANDBOXED) is True:
            return await self._ask(
                request, policy, "it asks to run outside the sandbox", hint=False
            )
        # A tool_call hook's permissionDecision (Claude Code: "allow" skips neither deny nor
        # ask rules; "ask" prompts whatever the mode and allow rules say).
        if request.hook_decision == "ask":
            return await self._ask(request, policy, _hook_said(request, "asks for approval"))
        if request.hook_decision == "allow":
            return Approve(reason=_hook_said(request, "allows it"))
        if policy.lift == 2:
            return Approve(reason="permission mode bypass")
        if policy.lift == 1 and request.kind == "edit" and not request.leaves_cwd:
            return Approve(reason="permission mode accept_edits: an edit inside the working folder")
        if rule := _allowed(rules.allow, request):
            return Approve(reason=f"allowed by the rule {_named(rule)}")
        if not request.controlled:
            return Approve(reason="not a controlled call")
        why = "it leaves the working folder" if request.leaves_cwd else "the tool is controlled"
        return await self._ask(request, policy, why)

    def sandbox(self, request: PermissionRequest) -> Sandbox | None:
        """For an approved ``execute`` call: what its command may not change or read
        (:func:`sandbox_paths`: the protected paths read-only, the stores and the approvals
        key hidden), or None when a person approved this very call (the approver's answer, or
        a deferred call's): they saw the command, as with Claude Code's sandbox, where a
        command that needs to leave it goes through the permission prompt. Every other approval
        (a mode, an allow rule, a hook, a remembered approval) runs sandboxed. Call it once per
        decided call."""
        asked = (request.session_id, request.tool_call_id)
        if asked in self._person_approved:
            self._person_approved.discard(asked)
            return None
        if request.kind != "execute":
            return None
        stores = self._stores_of(request)
        try:
            settings = self._settings(request.cwd)
        except ValueError:  # decide() denied the call already; nothing more is writable
            settings = []
        writable = [
            real
            for _source, found in settings
            for folder in (*found.additional_directories, *found.allow_write)
            if (real := _added(folder, request.cwd)) is not None
        ]
        # found when the command starts (review 10, finding 9)
        return Sandbox.when_run(lambda: sandbox_paths(request.cwd, stores, writable))

    def hidden_paths(self, request: PermissionRequest) -> Callable[[str], bool] | None:
        """For an approved call that walks a folder (``grep``, ``find``, ``ls``): whether a
        path beneath it, relative to the folder, is one a deny or ask rule for reading matches
        (``read(**/.env)``); the tools leave those out. A walk cannot stop to ask, so what an
        ask rule covers is left out too: the model can still read it by name, and be asked.
        None when no rule could hide anything.
        """
        if request.kind != "read" or not request.paths:
            return None
        private = self._private_beneath(request)
        try:
            settings = self._settings(request.cwd)
        except ValueError:  # decide() denied the call already; hide all if it ever gets here
            return lambda rel: True
        rules = self._rules
        for _source, s in settings:
            rules = rules + s.rules
        relevant = [
            r for r in (*rules.deny, *rules.ask) if r.spec is not None and r.covers_tool(request)
        ]
        if not relevant:
            return private
        starts = tuple(p.rstrip("/") for p in request.paths)

        def hidden(rel: str) -> bool:
            if private is not None and private(rel):
                return True
            paths = [rel if start in ("", ".") else f"{start}/{rel}" for start in starts]
            return _path_rule(relevant, paths, request.cwd) is not None

        return hidden

    def read_check(self, cwd: Path) -> Callable[[Sequence[str]], str | None]:
        """For the files the harness reads on its own, for no tool call (context files,
        skills and their files, prompt templates, agent files): a function saying why the file
        at the given paths (absolute or relative to ``cwd``: the path it was opened by and the
        one it turned out to be) may not be read, or None.

        A file is refused as a ``read`` call of it would be denied or asked, with nobody to
        ask, as a walk leaves it out (:meth:`hidden_paths`): a deny or ask ``read(...)`` rule
        with a path matches one of the paths as written or with symlinks resolved
        (``rule_paths``, as for a tool call), or it is the harness's private data
        (:func:`private_path`). So a project's ``AGENTS.md -> .env`` under ``read(.env)`` puts
        nothing into the prompt. The settings are read now, once: call it again for a new
        scan. Settings that do not parse refuse every file, as :meth:`decide` denies every
        call.
        """
        try:
            settings = self._settings(cwd)
        except ValueError as exc:
            broken = f"permission settings are broken, so no file is read: {exc}"
            return lambda paths: broken
        rules = self._rules
        for _source, s in settings:
            rules = rules + s.rules

        def reads(found: Iterable[Rule]) -> list[Rule]:
            return [r for r in found if r.spec is not None and r.names_operation("read")]

        deny, ask = reads(rules.deny), reads(rules.ask)
        stores = self._stores

        def refused(paths: Sequence[str]) -> str | None:
            for given in paths:
                try:
                    forms = rule_paths(given, cwd)[0]
                    private = private_path(given, cwd, stores)
                except (OSError, ValueError, RuntimeError, RecursionError) as exc:
                    return f"its path cannot be checked: {type(exc).__name__}: {exc}"
                if private is not None:
                    return private
                if (rule := _path_rule(deny, forms, cwd)) is not None:
                    return f"the rule {_named(rule)} denies reading {forms[-1]}"
                if (rule := _path_rule(ask, forms, cwd)) is not None:
                    return f"the rule {_named(rule)} asks before reading {forms[-1]}"
            return None

        return refused

    def _private_beneath(self, request: PermissionRequest) -> Callable[[str], bool] | None:
        """For a walk of a folder holding a sessions or checkpoint store, the approvals key,
        the user's settings (``grep -r`` from the home folder, or of the user config folder) or
        other harness processes' kept command output (a walk of ``/tmp``):
        those paths, which a read is asked for (:func:`private_path`), relative to the walked
        folder. None when none lies beneath."""
        starts = [
            os.path.normpath(os.path.join(os.path.abspath(request.cwd), p)) for p in request.paths
        ]
        keys = {os.path.abspath(approval_key_path()), os.path.realpath(approval_key_path())}
        stores = private_folders(self._stores_of(request))
        config = user_config_folders()
        # other harness processes' kept command output, in the temp folder (review 9, 13)
        temp = {os.path.abspath(tempfile.gettempdir()), os.path.realpath(tempfile.gettempdir())}
        if not any(
            f.startswith(s.rstrip("/") + "/")
            for s in starts
            for f in (*stores, *keys, *config, *temp)
        ) and not any(
            s == c or s.startswith(c.rstrip("/") + "/") for s in starts for c in (*config, *temp)
        ):
            return None

        def hidden(rel: str) -> bool:
            for start in starts:
                path = os.path.normpath(os.path.join(start, rel))
                if path in keys or any(path == f or path.startswith(f + "/") for f in stores):
                    return True
                if private_config_file(path) or other_bash_log(path):
                    return True
            return False

        return hidden

    async def _ask(
        self,
        request: PermissionRequest,
        policy: _Policy,
        why: str,
        *,
        hint: bool = True,
        remembered: bool = True,
    ) -> Decision:
        # A path key names the path as written: once a symlink leads elsewhere, the "always"
        # given for it does not cover where it leads now (review 11, finding 6).
        followed = len(set(request.paths)) > 1
        if remembered and not followed and request.operation_key in request.approvals:
            return Approve(reason=f"{request.operation_key} was approved always before")
        if request.resolution is not None:  # a deferred call: the person has answered
            return self._from_person(
                request, answered(request.resolution, request.resolution_reason)
            )
        if policy.no_ask:
            return Deny(
                reason=f"{request.operation_key} needs approval ({why}) and the permission mode "
                "is dont_ask: only calls allowed by a rule run; do without it or ask the user "
                f"to allow it{self._hints(request) if hint else ''}"
            )
        if self.approver is None:
            # The model reads the reason; the developer gets the fix in the log.
            log.warning(
                "denied %r: it needs approval (%s) and the supervisor has no approver; pass "
                "SecuritySupervisor(approver=...), an allow rule, or a mode that allows it "
                "(accept_edits: file edits; bypass: everything not denied; docs/permissions.md)",
                request.operation_key,
                why,
            )
            return Deny(
                reason=f"{request.operation_key} needs approval ({why}) but nobody can approve "
                "it here (no approver); do without it or ask the user to allow it"
                f"{self._hints(request) if hint else ''}"
            )
        return self._from_person(request, await self.approver(request))

    def _from_person(self, request: PermissionRequest, decision: Decision) -> Decision:
        if isinstance(decision, Approve | ApproveAlways) and request.kind == "execute":
            self._person_approved.add((request.session_id, request.tool_call_id))
        return decision

    def _hints(self, request: PermissionRequest) -> str:
        return self._untrusted_hint(request) or _rule_hint(request)

    def _untrusted_hint(self, request: PermissionRequest) -> str:
        """Why a denied call may surprise the user: an allow rule of the untrusted project's
        settings would have approved it, had the folder been trusted."""
        if "project" not in self._sources or self._trusts(request.cwd):
            return ""
        try:
            project = load_settings(request.cwd / PROJECT_SETTINGS, root=request.cwd)
        except ValueError:
            return ""
        rule = _allowed(project.rules.allow, request)
        if rule is None:
            return ""
        return (
            f" (the project's settings allow it with {rule.text!r}, but the project is not "
            "trusted: the user can trust it with --trust-project)"
        )


def _path_rule(rules: Iterable[Rule], paths: Iterable[str], cwd: Path) -> Rule | None:
    """The first of the deny or ask ``rules`` whose path matches one of ``paths`` (relative to
    ``cwd``, or absolute outside it): the one matching of a read rule for a walk's files and
    for the files the harness reads on its own."""
    paths = tuple(paths)
    return next((r for r in rules if any(r.matches_path(p, cwd=cwd) for p in paths)), None)


def _first(
    rules: Iterable[Rule], request: PermissionRequest, how: Literal["any", "maybe", "all"]
) -> Rule | None:
    return next((r for r in rules if r.matches(request, how=how)), None)


def _first_read(
    rules: Iterable[Rule], request: PermissionRequest, how: Literal["any", "maybe"]
) -> Rule | None:
    """For ``edit``: the deny or ask rule for *reading* its path. ``edit`` reads the file it
    changes and says whether each ``oldText`` was found (and shows a diff): without this, a
    file a ``read`` rule hides could be read back through it one guess at a time. (``write``
    reads nothing; ``write(...)`` rules are the ones that bind it.)"""
    if request.kind != "edit" or request.tool_name != "edit":
        return None
    as_read = evolve(request, kind="read")
    return _first((r for r in rules if r.names_operation("read")), as_read, how)


def _allowed(rules: Sequence[Rule], request: PermissionRequest) -> Rule | None:
    """The allow rule approving ``request``; a compound command needs each of its simple
    commands allowed, by any allow rule (``git status && git log`` by ``bash(git status:*)``
    and ``bash(git log:*)``), and no construct the words do not show."""
    if rule := _first(rules, request, "all"):
        return rule
    if request.kind != "execute" or request.target is None:
        return None
    parsed = parse_command(request.target)
    if not parsed.allowable or len(parsed.commands) < 2:
        return None
    found = [
        next((r for r in rules if r.allows(request.tool_name, command)), None)
        for command in commands_to_allow(parsed, request.cwd)
    ]
    return found[0] if all(found) else None


def _protected(request: PermissionRequest, stores: Sequence[str]) -> str | None:
    if request.kind == "read":
        # The secret that signs approvals (whoever reads it can sign a session's approvals),
        # and every project's sessions and checkpointed files.
        return next(
            (
                why
                for p in request.paths
                if (why := private_path(p, request.cwd, stores)) is not None
            ),
            None,
        )
    if request.kind == "edit":
        return next(
            (
                why
                for p in request.paths
                if (why := protected_path(p, request.cwd, stores)) is not None
            ),
            None,
        )
    if request.kind == "execute" and request.target is not None:
        return protected_command(request.target, request.cwd, stores)
    if not request.paths and request.target is None:
        # A tool that declares no path (an MCP server's write_file): a string argument naming
        # a protected place is asked as a path would be (review 6, finding 33), a name without
        # `/` too (a project's symlink `cfg -> .git/config`), and an input with more strings
        # than are checked is asked whole (review 8, finding 8).
        strings = list(itertools.islice(_strings(request.input, 0), _MAX_STRINGS + 1))
        if len(strings) > _MAX_STRINGS:
            return f"its input holds more than {_MAX_STRINGS} values to check for protected paths"
        urls = 0
        for value in strings:
            if value == _TOO_DEEP:
                return "its input nests deeper than the values checked for protected paths"
            if 0 < len(value) <= 4096 and "\0" not in value:
                # the value as a path, and what the file: URLs in it name (any spelling:
                # percent-encoded, FILE:, localhost; review finding 8)
                named = file_url_paths(value)
                urls += len(named)
                if urls > _MAX_URL_PATHS:  # each check costs: a bound on the decision's time
                    return f"its input names more than {_MAX_URL_PATHS} file URL paths to check"
                for path in (value, *named):
                    if "\0" not in path and (why := protected_path(path, request.cwd, stores)):
                        return why
                if _CLIMBS.search(value):
                    # relative to the server's own folder, not the harness's: `../x` from
                    # where it was started may be anything (review 13, findings 20, 21)
                    return f"it names {value[:80]!r}, a path climbing out of a folder (..)"
    return None


_MAX_STRINGS = 256  # a path-less tool's string values checked for protected paths, at most
_CLIMBS = re.compile(r"(?:^|[/\\])\.\.(?:[/\\]|$)")  # a `..` component
_MAX_URL_PATHS = 64  # paths the file: URLs of a path-less tool's input name, checked at most
_TOO_DEEP = "\0 nested too deep"  # what _strings yields for a value it does not look into


def _strings(value: object, depth: int) -> Iterator[str]:
    """The strings in a tool's JSON input (its keys too), depth first; past 8 levels a value
    counts as one string that cannot be checked (its JSON)."""
    if isinstance(value, str):
        yield value
    elif depth >= 8 and isinstance(value, Mapping | list | tuple):
        yield _TOO_DEEP
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item, depth + 1)


_ignored_added: set[tuple[str, str]] = set()


def _added(folder: str, cwd: Path) -> str | None:
    """:func:`added_folder`, saying once per folder why one is ignored."""
    real = added_folder(folder, cwd)
    if real is None and (folder, str(cwd)) not in _ignored_added:
        _ignored_added.add((folder, str(cwd)))
        log.warning(
            "the added folder %r (from %s) is ignored: it is not a folder, or its name passes "
            "through a symlink (write the folder's real path)",
            folder,
            cwd,
        )
    return real


def _in_additional(
    request: PermissionRequest, settings: list[tuple[SettingSource, Settings]]
) -> bool:
    """Whether every path of the call, symlinks resolved, lies in an additional directory of
    the settings (an untrusted project's were dropped before)."""
    folders = [
        real
        for _source, found in settings
        for folder in found.additional_directories
        if (real := _added(folder, request.cwd)) is not None
    ]
    if not folders or not request.paths:
        return False
    resolved = [os.path.realpath(os.path.join(request.cwd, p)) for p in request.paths]
    return all(any(r == f or r.startswith(f.rstrip("/") + "/") for f in folders) for r in resolved)


def _hook_said(request: PermissionRequest, what: str) -> str:
    why = f": {request.hook_reason}" if request.hook_reason else ""
    return f"a tool_call hook {what}{why}"


def _rule_hint(request: PermissionRequest) -> str:
    """Which allow rule would run the call: its operation key is one (an MCP tool's name,
    ``mcp__server__tool``, or ``mcp__server`` for all of that server's tools)."""
    key = request.operation_key
    if key.startswith("mcp__"):
        server = "__".join(key.split("__", 2)[:2])
        return f" (the allow rule {key!r}, or {server!r} for every tool of its server, runs it)"
    return f" (the allow rule {key!r} runs it)"


def _named(rule: Rule) -> str:
    return rule.text if rule.source == "code" else f"{rule.text} ({rule.source})"


def _plan_denies(request: PermissionRequest) -> bool:
    return request.kind in ("edit", "execute") or (request.controlled and not request.leaves_cwd)
