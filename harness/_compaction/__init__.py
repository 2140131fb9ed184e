"""Compaction and branch summaries (pi's algorithm, reference §4; DESIGN §8).

Pure decisions (:mod:`.tokens`, :mod:`.cut`, :mod:`.files`, selection in :mod:`.branch`) are
apart from the one place a model is called (:class:`.summarize.ModelSummarizer`).
"""

from .branch import (
    BRANCH_SUMMARY_MAX_TOKENS,
    BRANCH_SUMMARY_PREFIX,
    NO_BRANCH_CONTENT,
    BranchPreparation,
    collect_branch_entries,
    prepare_branch_entries,
    summarize_branch,
)
from .cut import CompactionPreparation, prepare_compaction
from .errors import SummarizationError
from .files import DEFAULT_FILE_TOOLS, FileTools, format_file_lists
from .settings import CompactionSettings
from .summarize import (
    NO_PRIOR_HISTORY,
    SUMMARIZATION_SYSTEM_PROMPT,
    TOOL_RESULT_MAX_CHARS,
    TURN_CONTEXT_SEPARATOR,
    ExtractiveSummarizer,
    ModelSummarizer,
    Summarizer,
    SummaryKind,
    SummaryRequest,
    build_summary_prompt,
    serialize_conversation,
    strip_file_lists,
    summarize_compaction,
)
from .tokens import CONTEXT_WINDOWS, ContextSize, context_size, context_window, should_compact

__all__ = [
    "BRANCH_SUMMARY_MAX_TOKENS",
    "BRANCH_SUMMARY_PREFIX",
    "CONTEXT_WINDOWS",
    "DEFAULT_FILE_TOOLS",
    "NO_BRANCH_CONTENT",
    "NO_PRIOR_HISTORY",
    "SUMMARIZATION_SYSTEM_PROMPT",
    "TOOL_RESULT_MAX_CHARS",
    "TURN_CONTEXT_SEPARATOR",
    "BranchPreparation",
    "CompactionPreparation",
    "CompactionSettings",
    "ContextSize",
    "ExtractiveSummarizer",
    "FileTools",
    "ModelSummarizer",
    "SummarizationError",
    "Summarizer",
    "SummaryKind",
    "SummaryRequest",
    "build_summary_prompt",
    "collect_branch_entries",
    "context_size",
    "context_window",
    "format_file_lists",
    "prepare_branch_entries",
    "prepare_compaction",
    "serialize_conversation",
    "should_compact",
    "strip_file_lists",
    "summarize_branch",
    "summarize_compaction",
]
