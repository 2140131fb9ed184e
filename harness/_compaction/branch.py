"""Summaries of an abandoned branch when the leaf moves elsewhere in the tree (reference §4.7).

Follows pi's ``collectEntriesForBranchSummary``, ``prepareBranchEntries`` and
``generateBranchSummary`` (coding-agent ``core/compaction/branch-summarization.ts``). Collecting
and selecting are pure; only the summariser may call a model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from attrs import field, frozen

from hooks import CompactionSummaryMessage, Message, ToolResultMessage
from repos import BranchSummaryEntry, CompactionEntry, Entry, Session, entry_message, iso_ms

from .._tokens import estimate_tokens
from .files import DEFAULT_FILE_TOOLS, FileOps, FileTools, format_file_lists
from .summarize import Summarizer, SummaryRequest

__all__ = [
    "BRANCH_SUMMARY_MAX_TOKENS",
    "BRANCH_SUMMARY_PREFIX",
    "NO_BRANCH_CONTENT",
    "BranchPreparation",
    "collect_branch_entries",
    "prepare_branch_entries",
    "summarize_branch",
]

BRANCH_SUMMARY_PREFIX = (
    "Before coming back to this point, the user followed another branch of the conversation. "
    "What happened on that branch:\n\n"
)
"""Starts every generated branch summary (paraphrasing pi's ``BRANCH_SUMMARY_PREAMBLE``)."""

NO_BRANCH_CONTENT = "No content to summarize."
"""The summary of a branch with no messages (pi's wording)."""

BRANCH_SUMMARY_MAX_TOKENS = 2048
"""Output tokens allowed for a branch summary (pi's fixed ``maxTokens``)."""


def collect_branch_entries(
    session: Session, old_leaf_id: str | None, target_id: str | None
) -> tuple[list[Entry], str | None]:
    """The entries a move from ``old_leaf_id`` to ``target_id`` abandons.

    pi's ``collectEntriesForBranchSummary``: the deepest common ancestor is the last entry of
    the target's root path that is also on the old leaf's root path; the abandoned entries run
    from the old leaf back to, not including, that ancestor.

    Args:
        session: the session (only read).
        old_leaf_id: the leaf being left; None gives nothing.
        target_id: where the leaf goes; None (before the first entry) abandons the whole branch.

    Returns:
        ``(entries oldest first, common ancestor id or None)``.

    Raises:
        EntryNotFoundError: an id is not in the session.
    """
    if old_leaf_id is None:
        return [], None
    old_ids = session.path_ids(old_leaf_id)
    on_old = set(old_ids)
    target_ids = session.path_ids(target_id) if target_id is not None else []
    ancestor = next((i for i in reversed(target_ids) if i in on_old), None)
    start = old_ids.index(ancestor) + 1 if ancestor is not None else 0
    return [session.get_entry(i) for i in old_ids[start:]], ancestor


def _messages(value: Iterable[Message]) -> tuple[Message, ...]:
    return tuple(value)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@frozen(kw_only=True)
class BranchPreparation:
    """What a branch summary will cover.

    Attributes:
        messages: the selected context messages, oldest first (no tool results).
        total_tokens: their estimated size, in tokens.
        read_files: files read but not modified on the branch, sorted.
        modified_files: files written or edited on the branch, sorted.
    """

    messages: tuple[Message, ...] = field(converter=_messages)
    total_tokens: int
    read_files: tuple[str, ...] = field(converter=_strings)
    modified_files: tuple[str, ...] = field(converter=_strings)


def prepare_branch_entries(
    entries: Sequence[Entry],
    budget_tokens: int = 0,
    *,
    file_tools: FileTools = DEFAULT_FILE_TOOLS,
) -> BranchPreparation:
    """Select the messages of abandoned ``entries`` that fit ``budget_tokens`` (pi's
    ``prepareBranchEntries``).

    File lists are seeded from earlier ``branch_summary`` entries' details (unless they came
    from a hook) and from every assistant tool call, including messages that do not fit.
    Messages are taken newest first while the estimated total stays within the budget; a
    compaction or branch summary that does not fit is still taken while less than 90% of the
    budget is used; tool results are left out (their calls are in the assistant messages).
    Compaction entries contribute their summary.

    Args:
        entries: oldest first, as from :func:`collect_branch_entries`.
        budget_tokens: most estimated tokens of messages; 0 or less means no limit.
        file_tools: tool names counted as reading/writing/editing their ``path`` argument.
    """
    files = FileOps(file_tools)
    for entry in entries:
        if isinstance(entry, BranchSummaryEntry) and not entry.from_hook:
            files.seed(entry.details)
    selected: list[Message] = []
    total = 0
    full = False
    for entry in reversed(entries):
        message = _branch_message(entry)
        if message is None:
            continue
        files.add_message(message)
        if full:
            continue
        tokens = estimate_tokens((message,))
        if budget_tokens > 0 and total + tokens > budget_tokens:
            summary = isinstance(entry, CompactionEntry | BranchSummaryEntry)
            if summary and total < 0.9 * budget_tokens:
                selected.append(message)
                total += tokens
            full = True
            continue
        selected.append(message)
        total += tokens
    read_files, modified_files = files.lists()
    return BranchPreparation(
        messages=reversed(selected),
        total_tokens=total,
        read_files=read_files,
        modified_files=modified_files,
    )


def _branch_message(entry: Entry) -> Message | None:
    if isinstance(entry, CompactionEntry):
        return CompactionSummaryMessage(
            summary=entry.summary,
            tokens_before=entry.tokens_before,
            timestamp=iso_ms(entry.timestamp),
        )
    message = entry_message(entry)
    return None if isinstance(message, ToolResultMessage) else message


async def summarize_branch(
    entries: Sequence[Entry],
    summarizer: Summarizer,
    *,
    custom_instructions: str | None = None,
    budget_tokens: int = 0,
    file_tools: FileTools = DEFAULT_FILE_TOOLS,
) -> tuple[str, dict[str, list[str]]]:
    """Summarise an abandoned branch (pi's ``generateBranchSummary``).

    Selects messages with :func:`prepare_branch_entries`, asks ``summarizer`` for a ``branch``
    summary (``max_tokens`` :data:`BRANCH_SUMMARY_MAX_TOKENS`, custom instructions appended as
    "Additional focus"), starts it with :data:`BRANCH_SUMMARY_PREFIX` and appends the
    ``<read-files>``/``<modified-files>`` blocks.

    Args:
        entries: the abandoned entries, oldest first.
        summarizer: writes the summary.
        custom_instructions: what to focus on, or None.
        budget_tokens: most estimated tokens of messages sent (pi: the model's context window
            minus the reserve); 0 or less means no limit.

    Returns:
        ``(summary, {"readFiles": [...], "modifiedFiles": [...]})``; with no messages,
        :data:`NO_BRANCH_CONTENT` and empty lists, without asking the summariser.

    Raises:
        SummarizationError: from the summariser; cancelling leaves nothing behind.
    """
    prep = prepare_branch_entries(entries, budget_tokens, file_tools=file_tools)
    if not prep.messages:
        return NO_BRANCH_CONTENT, {"readFiles": [], "modifiedFiles": []}
    text = await summarizer.summarize(
        SummaryRequest(
            kind="branch",
            messages=prep.messages,
            custom_instructions=custom_instructions,
            max_tokens=BRANCH_SUMMARY_MAX_TOKENS,
        )
    )
    summary = BRANCH_SUMMARY_PREFIX + text + format_file_lists(prep.read_files, prep.modified_files)
    return summary, {
        "readFiles": list(prep.read_files),
        "modifiedFiles": list(prep.modified_files),
    }
