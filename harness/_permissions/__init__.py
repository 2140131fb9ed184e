"""Tool safety: the supervisor at the tool boundary, its rules and modes, and the gate the loop
calls before every tool runs (DESIGN §7, docs/permissions.md)."""

# The package's names are imported when first used: a command that only needs the user
# settings' path (``harness sessions list``) must not pay for the rules, the shell parser
# and the supervisor (issue 24, point 6).
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .claude_code import (
        CLAUDE_CODE_MODES,
        ClaudeCodeMode,
        ModeName,
        claude_code_mode,
        permission_mode,
    )
    from .decisions import (
        Approve,
        ApproveAlways,
        Approver,
        Decision,
        Defer,
        Deny,
        PermissionMode,
        PermissionRequest,
        Supervisor,
    )
    from .folders import user_settings_path
    from .gate import PERMISSION_ENTRY, Gate, GateResult, remembered_approvals, session_files
    from .protected import ProtectedPaths, protected_path
    from .rules import (
        OPERATION_RULES,
        PERMISSION_MODES,
        PermissionRules,
        Rule,
        add_project_rule,
        load_settings,
    )
    from .signing import APPROVAL_KEY_FILE, ApprovalSigner, approval_key_path
    from .supervisor import MODE_STRICTNESS, PROJECT_SETTINGS, SecuritySupervisor

__all__ = [
    "APPROVAL_KEY_FILE",
    "CLAUDE_CODE_MODES",
    "MODE_STRICTNESS",
    "OPERATION_RULES",
    "PERMISSION_ENTRY",
    "PERMISSION_MODES",
    "PROJECT_SETTINGS",
    "ApprovalSigner",
    "Approve",
    "ApproveAlways",
    "Approver",
    "ClaudeCodeMode",
    "Decision",
    "Defer",
    "Deny",
    "Gate",
    "GateResult",
    "ModeName",
    "PermissionMode",
    "PermissionRequest",
    "PermissionRules",
    "ProtectedPaths",
    "Rule",
    "SecuritySupervisor",
    "Supervisor",
    "add_project_rule",
    "approval_key_path",
    "claude_code_mode",
    "load_settings",
    "permission_mode",
    "protected_path",
    "remembered_approvals",
    "session_files",
    "user_settings_path",
]

_ORIGIN: dict[str, str] = {
    "APPROVAL_KEY_FILE": ".signing",
    "ApprovalSigner": ".signing",
    "Approve": ".decisions",
    "ApproveAlways": ".decisions",
    "Approver": ".decisions",
    "CLAUDE_CODE_MODES": ".claude_code",
    "ClaudeCodeMode": ".claude_code",
    "Decision": ".decisions",
    "Defer": ".decisions",
    "Deny": ".decisions",
    "Gate": ".gate",
    "GateResult": ".gate",
    "MODE_STRICTNESS": ".supervisor",
    "ModeName": ".claude_code",
    "OPERATION_RULES": ".rules",
    "PERMISSION_ENTRY": ".gate",
    "PERMISSION_MODES": ".rules",
    "PROJECT_SETTINGS": ".supervisor",
    "PermissionMode": ".decisions",
    "PermissionRequest": ".decisions",
    "PermissionRules": ".rules",
    "ProtectedPaths": ".protected",
    "Rule": ".rules",
    "SecuritySupervisor": ".supervisor",
    "Supervisor": ".decisions",
    "add_project_rule": ".rules",
    "approval_key_path": ".signing",
    "claude_code_mode": ".claude_code",
    "load_settings": ".rules",
    "permission_mode": ".claude_code",
    "protected_path": ".protected",
    "remembered_approvals": ".gate",
    "session_files": ".gate",
    "user_settings_path": ".folders",
}


def __getattr__(name: str) -> Any:
    """Import the submodule that defines ``name`` (PEP 562) and keep the name here."""
    where = _ORIGIN.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
