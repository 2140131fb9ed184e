"""Tool safety: the supervisor at the tool boundary, its rules and modes, and the gate the loop
calls before every tool runs (DESIGN §7, docs/permissions.md)."""

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
from .gate import PERMISSION_ENTRY, Gate, GateResult, remembered_approvals, session_files
from .protected import protected_path
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
