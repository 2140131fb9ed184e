"""Orchestration: sub-agents (agent definitions and the ``task`` tool), run limits, structured
output, and approvals that wait (docs/agents.md). ``AgentHarness`` wires these; the logic
lives here."""

from .approvals import (
    APPROVAL_DECISION_TYPE,
    APPROVAL_PENDING_TYPE,
    APPROVAL_START_TYPE,
    AwaitingRun,
    PendingApproval,
    awaiting_run,
)
from .definitions import (
    AGENT_FOLDERS,
    MAX_AGENT_BYTES,
    MAX_AGENTS,
    AgentCatalog,
    AgentDefinition,
    AgentDiagnostic,
    AgentSource,
    load_agents,
)
from .errors import (
    AgentDefinitionError,
    ApprovalNotFoundError,
    ApprovalRefusedError,
    AwaitingApprovalError,
    NothingToResumeError,
    OutputValidationError,
    PriceUnknownError,
)
from .limits import Budget, LimitHit, RunLimits, require_price
from .output import (
    DEFAULT_OUTPUT_RETRIES,
    OUTPUT_CORRECTION_TYPE,
    RESPOND_TOOL_NAME,
    OutputCheck,
    OutputSpec,
)
from .reply import LimitStopReason, Reply, RunStopReason
from .schema import convert, schema_of
from .stops import RUN_STOP_TYPE, record_stop
from .task import AGENT_RUN_METADATA, TASK_TOOL_NAME, run_task, task_tool

__all__ = [
    "AGENT_FOLDERS",
    "AGENT_RUN_METADATA",
    "APPROVAL_DECISION_TYPE",
    "APPROVAL_PENDING_TYPE",
    "APPROVAL_START_TYPE",
    "DEFAULT_OUTPUT_RETRIES",
    "MAX_AGENTS",
    "MAX_AGENT_BYTES",
    "OUTPUT_CORRECTION_TYPE",
    "RESPOND_TOOL_NAME",
    "RUN_STOP_TYPE",
    "TASK_TOOL_NAME",
    "AgentCatalog",
    "AgentDefinition",
    "AgentDefinitionError",
    "AgentDiagnostic",
    "AgentSource",
    "ApprovalNotFoundError",
    "ApprovalRefusedError",
    "AwaitingApprovalError",
    "AwaitingRun",
    "Budget",
    "LimitHit",
    "LimitStopReason",
    "NothingToResumeError",
    "OutputCheck",
    "OutputSpec",
    "OutputValidationError",
    "PendingApproval",
    "PriceUnknownError",
    "Reply",
    "RunLimits",
    "RunStopReason",
    "awaiting_run",
    "convert",
    "load_agents",
    "record_stop",
    "require_price",
    "run_task",
    "schema_of",
    "task_tool",
]
