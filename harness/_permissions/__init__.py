"""Tool safety: the supervisor at the tool boundary, its rules and modes, and the gate the loop
calls before every tool runs (DESIGN §7, docs/permissions.md)."""

from .decisions import (
    Approve,
    ApproveAlways,
    Approver,
    Decision,
    Deny,
    PermissionMode,
    PermissionRequest,
    Supervisor,
)
from .gate import PERMISSION_ENTRY, Gate, GateResult, remembered_approvals
from .rules import (
    OPERATION_RULES,
    PERMISSION_MODES,
    PermissionRules,
    Rule,
    add_project_rule,
    load_settings,
)
from .signing import APPROVAL_KEY_FILE, ApprovalSigner, approval_key_path
from .supervisor import MODE_STRICTNESS, PROJECT_SETTINGS, SecuritySupervisor, user_settings_path

__all__ = [
    "APPROVAL_KEY_FILE",
    "MODE_STRICTNESS",
    "OPERATION_RULES",
    "PERMISSION_ENTRY",
    "PERMISSION_MODES",
    "PROJECT_SETTINGS",
    "ApprovalSigner",
    "Approve",
    "ApproveAlways",
    "Approver",
    "Decision",
    "Deny",
    "Gate",
    "GateResult",
    "PermissionMode",
    "PermissionRequest",
    "PermissionRules",
    "Rule",
    "SecuritySupervisor",
    "Supervisor",
    "add_project_rule",
    "approval_key_path",
    "load_settings",
    "remembered_approvals",
    "user_settings_path",
]
