"""``SecuritySupervisor``: rules, permission modes and the application's approver, evaluated in
the order of the Claude Agent SDK."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from attrs import evolve
from platformdirs import user_config_path

from .decisions import Approve, Approver, Decision, Deny, PermissionMode, PermissionRequest
from .rules import PERMISSION_MODES, PermissionRules, Rule, Settings, load_settings
from .shell import parse_command

log = logging.getLogger("harness")

__all__ = ["PROJECT_SETTINGS", "SecuritySupervisor", "user_settings_path"]

PROJECT_SETTINGS = Path(".harness") / "settings.json"
"""Where project rules live, relative to the working folder."""

SettingSource = Literal["user", "project"]


def user_settings_path() -> Path:
    """``settings.json`` in the user config folder (``platformdirs.user_config_path("harness")``,
    e.g. ``~/.config/harness/settings.json`` on Linux, honouring ``XDG_CONFIG_HOME``)."""
    return user_config_path("harness") / "settings.json"


class SecuritySupervisor:
    """The default supervisor: deny, ask and allow rules, a permission mode, an approver.

    Each call the ``tool_call`` hooks let through is decided in this order (the Claude Agent
    SDK's: hooks, deny rules, ask rules, mode, allow rules, ``can_use_tool``):

    1. a **deny** rule matches: denied;
    2. an **ask** rule matches, or possibly matches, or a deny rule possibly matches (a bash
       command whose words the rule looks at are computed, that runs code the harness cannot
       read, or that does not parse): asked (step 6), whatever the mode or allow rules say;
    3. the **mode**: ``bypass`` approves; ``plan`` denies ``edit`` and ``execute`` tools and
       any other controlled tool, with a reason telling the model to present a plan instead;
       ``accept_edits`` approves ``edit`` tools whose path stays inside the working folder;
    4. an **allow** rule matches: approved;
    5. a call that is not controlled (a ``read``/``ls``/``grep``/``find`` inside the working
       folder, a tool not marked ``controlled``) is approved;
    6. asking: an operation key approved always before (``request.approvals``) is approved;
       in ``dont_ask`` mode the call is denied; with no approver it is denied with a reason
       saying so; otherwise the approver's answer stands.

    Rules come from ``rules`` (code), then the user settings file, then the project's
    ``.harness/settings.json`` under the request's working folder (read at each decision, so
    edits apply at once). A settings file that does not parse denies every call, naming the
    file: a broken deny list must not open everything up.

    Args:
        mode: a :data:`PermissionMode`; None takes ``permissions.mode`` from the project, else
            the user settings, else ``default``.
        rules: rules from code (:class:`PermissionRules`, or a mapping of ``allow``/``deny``/
            ``ask`` to lists of rule strings).
        approver: ``async (request) -> Approve | Deny | ApproveAlways``, asked when step 6 is
            reached; None denies those calls.
        setting_sources: which settings files to read: ``user``, ``project`` (default both);
            ``()`` for rules from code only.
        user_settings: the user settings file (default :func:`user_settings_path`).
        trust_project: let the project's ``.harness/settings.json`` *widen* permissions: its
            ``allow`` rules and the modes ``accept_edits`` and ``bypass``. Off by default: the
            file comes with the folder (a cloned repository can hold one), so untrusted it may
            only restrict (deny and ask rules, the modes ``default``, ``plan``, ``dont_ask``);
            what it would widen is ignored and logged. Claude Code asks the user to trust a
            folder for the same reason.

    Raises:
        ValueError: an unknown mode, or a rule from code that does not parse.
    """

    def __init__(
        self,
        *,
        mode: PermissionMode | None = None,
        rules: PermissionRules | dict[str, Sequence[str]] | None = None,
        approver: Approver | None = None,
        setting_sources: Iterable[SettingSource] = ("user", "project"),
        user_settings: Path | None = None,
        trust_project: bool = False,
    ) -> None:
        if mode is not None and mode not in PERMISSION_MODES:
            raise ValueError(f"mode {mode!r} is not one of {', '.join(PERMISSION_MODES)}")
        if isinstance(rules, dict):
            rules = PermissionRules(**rules)
        self._mode = mode
        self._rules = rules if rules is not None else PermissionRules()
        self.approver = approver
        self._sources = tuple(setting_sources)
        self._user_settings = user_settings
        self._trust_project = trust_project
        self._warned: set[Path] = set()

    @property
    def rules(self) -> PermissionRules:
        """The rules from code (settings files are read per decision)."""
        return self._rules

    def mode_for(self, cwd: Path) -> PermissionMode:
        """The mode in force for calls in ``cwd`` (see ``mode``).

        Raises:
            ValueError: a settings file does not parse.
        """
        if self._mode is not None:
            return self._mode
        for settings in reversed(self._settings(cwd)):
            if settings.mode is not None:
                return settings.mode
        return "default"

    def set_mode(self, mode: PermissionMode) -> None:
        """Change the mode from the next decision on (e.g. leaving ``plan``).

        Raises:
            ValueError: not a :data:`PermissionMode`.
        """
        if mode not in PERMISSION_MODES:
            raise ValueError(f"mode {mode!r} is not one of {', '.join(PERMISSION_MODES)}")
        self._mode = mode

    def _settings(self, cwd: Path) -> list[Settings]:
        found = []
        if "user" in self._sources:
            found.append(load_settings(self._user_settings or user_settings_path()))
        if "project" in self._sources:
            project = load_settings(cwd / PROJECT_SETTINGS)
            found.append(project if self._trust_project else self._restrictive(cwd, project))
        return found

    def _restrictive(self, cwd: Path, project: Settings) -> Settings:
        """What an untrusted project file may say: only what restricts."""
        widening = project.rules.allow or project.mode in ("accept_edits", "bypass")
        if not widening:
            return project
        path = cwd / PROJECT_SETTINGS
        if path not in self._warned:
            self._warned.add(path)
            log.warning(
                "%s: allow rules and the mode %r are ignored: the project is not trusted "
                "(SecuritySupervisor(trust_project=True) lets it widen permissions)",
                path,
                project.mode,
            )
        mode = None if project.mode in ("accept_edits", "bypass") else project.mode
        return evolve(project, rules=evolve(project.rules, allow=()), mode=mode)

    async def decide(self, request: PermissionRequest) -> Decision:
        """Decide one call in the documented order (see the class docstring)."""
        try:
            settings = self._settings(request.cwd)
            mode = self.mode_for(request.cwd)
        except ValueError as exc:
            return Deny(reason=f"permission settings are broken, so no tool may run: {exc}")
        rules = self._rules
        for s in settings:
            rules = rules + s.rules
        if rule := _first(rules.deny, request, "any"):
            return Deny(reason=f"{request.operation_key} is denied by the rule {_named(rule)}")
        if rule := _first(rules.ask, request, "maybe"):
            return await self._ask(request, mode, f"the rule {_named(rule)} asks for approval")
        if rule := _first(rules.deny, request, "maybe"):
            why = (
                f"it may run what the rule {_named(rule)} denies: a word the rule looks at is "
                "computed, or it runs code the harness cannot read, or it does not parse"
            )
            return await self._ask(request, mode, why)
        decided = _by_mode(request, mode)
        if decided is not None:
            return decided
        if rule := _allowed(rules.allow, request):
            return Approve(reason=f"allowed by the rule {_named(rule)}")
        if not request.controlled:
            return Approve(reason="not a controlled call")
        why = "it leaves the working folder" if request.leaves_cwd else "the tool is controlled"
        return await self._ask(request, mode, why)

    async def _ask(self, request: PermissionRequest, mode: PermissionMode, why: str) -> Decision:
        if request.operation_key in request.approvals:
            return Approve(reason=f"{request.operation_key} was approved always before")
        if mode == "dont_ask":
            return Deny(
                reason=f"{request.operation_key} needs approval ({why}) and the permission mode "
                "is dont_ask: only calls allowed by a rule run; do without it or ask the user "
                "to allow it"
            )
        if self.approver is None:
            # The model reads the reason; the developer gets the fix in the log.
            log.warning(
                "denied %s: it needs approval (%s) and the supervisor has no approver; pass "
                "SecuritySupervisor(approver=...), an allow rule, or a mode that allows it "
                "(accept_edits: file edits; bypass: everything not denied; docs/permissions.md)",
                request.operation_key,
                why,
            )
            return Deny(
                reason=f"{request.operation_key} needs approval ({why}) but nobody can approve "
                "it here (no approver); do without it or ask the user to allow it"
            )
        return await self.approver(request)


def _first(
    rules: Iterable[Rule], request: PermissionRequest, how: Literal["any", "maybe", "all"]
) -> Rule | None:
    return next((r for r in rules if r.matches(request, how=how)), None)


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
        for command in parsed.commands
    ]
    return found[0] if all(found) else None


def _named(rule: Rule) -> str:
    return rule.text if rule.source == "code" else f"{rule.text} ({rule.source})"


def _by_mode(request: PermissionRequest, mode: PermissionMode) -> Decision | None:
    if mode == "bypass":
        return Approve(reason="permission mode bypass")
    if mode == "plan" and (
        request.kind in ("edit", "execute") or (request.controlled and not request.leaves_cwd)
    ):
        return Deny(
            reason=f"{request.operation_key} is not allowed in plan mode (read-only): read and "
            "search only, then present your plan; changes run once the user leaves plan mode"
        )
    if mode == "accept_edits" and request.kind == "edit" and not request.leaves_cwd:
        return Approve(reason="permission mode accept_edits: an edit inside the working folder")
    return None
