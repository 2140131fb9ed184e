"""Where to cut a branch for compaction, and what to summarise: pure, no model calls.

Follows pi's ``prepareCompaction``/``findCutPoint`` (coding-agent ``core/compaction/
compaction.ts``; reference §4.3 and §4.5), with these fixes:

* a cut never lies between an assistant message's tool calls and their results, nor before a
  tool result whose call is not in the range (pi #4570, #6832): the kept part never holds a tool
  result whose call was summarised away;
* calls still waiting for their results at the end of the branch stay in the kept part (only
  tool results can follow them, and those are never cut points), so a result that arrives after
  the compaction has its call (pi #6832, pinet #941);
* the split-turn test looks at the message the cut was chosen at, not at a settings entry the
  cut slid back over (pi would call a whole turn "split" then);
* when the budget is exceeded only by messages after the last valid cut point (a huge tool
  result), the cut goes to the last valid cut point before them, instead of pi's "keep
  everything" default that leaves an overflowing context unable to compact (pi #7020).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from attrs import field, frozen

from hooks import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    Message,
    ToolResultMessage,
    UserMessage,
)
from repos import (
    CompactionEntry,
    Entry,
    build_context,
    entry_message,
)

from .._tokens import estimate_tokens
from .files import DEFAULT_FILE_TOOLS, FileOps, FileTools
from .settings import CompactionSettings
from .tokens import context_size

__all__ = ["CompactionPreparation", "prepare_compaction"]


def _messages(value: Iterable[Message]) -> tuple[Message, ...]:
    return tuple(value)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@frozen(kw_only=True)
class CompactionPreparation:
    """What a compaction of one branch will summarise and keep (pi's ``CompactionPreparation``).

    Attributes:
        first_kept_entry_id: first entry kept verbatim; the compaction entry stores it.
        messages_to_summarize: context messages from the start of the range (the previous
            compaction's first kept entry, or the root) up to the cut, or up to the start of
            the split turn; compaction entries are not included (their summary is
            ``previous_summary``).
        turn_prefix_messages: for a split turn, the turn's messages before the cut (summarised
            separately); empty otherwise.
        is_split_turn: the cut falls inside a turn (at an assistant message).
        tokens_before: size of the branch's current context, in tokens (see
            :func:`~harness._compaction.tokens.context_size`).
        previous_summary: summary of the last compaction on the branch, for an iterative update.
        read_files: files read but not modified, sorted; cumulative over earlier compactions
            (unless the previous one came from a hook).
        modified_files: files written or edited, sorted; cumulative likewise.
        leaf_id: the last entry of the branch this was prepared from; append the compaction
            only while the leaf is still there (pi #9178).
    """

    first_kept_entry_id: str
    messages_to_summarize: tuple[Message, ...] = field(converter=_messages)
    turn_prefix_messages: tuple[Message, ...] = field(converter=_messages)
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    read_files: tuple[str, ...] = field(converter=_strings)
    modified_files: tuple[str, ...] = field(converter=_strings)
    leaf_id: str | None = None


_CUT_ROLES = (
    UserMessage,
    AssistantMessage,
    BashExecutionMessage,
    CustomMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
)
_TURN_START_ROLES = (
    UserMessage,
    BashExecutionMessage,
    CustomMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
)


def prepare_compaction(
    path: Sequence[Entry],
    settings: CompactionSettings,
    *,
    file_tools: FileTools = DEFAULT_FILE_TOOLS,
) -> CompactionPreparation | None:
    """Choose the cut point of a branch and collect what to summarise.

    Follows pi's ``prepareCompaction`` (reference §4.3) with the fixes listed in this module's
    docstring:

    1. The range starts at the last compaction's ``first_kept_entry_id`` (just after that
       compaction if the id is not on the path), else at the root.
    2. Valid cut points are entries whose context message is a user, assistant, user shell
       run, custom, branch-summary or compaction-summary message, never a tool result, and
       not between a tool call and its last result.
    3. Walking back from the end, estimated tokens accumulate until they reach
       ``settings.keep_recent_tokens``; the cut is the first valid cut point at or after that
       message (none: the last one before it; budget never reached: the first in range).
    4. The cut slides back over entries that add nothing to the context (model, thinking
       level, labels, custom state) so settings changes stay with the kept part.
    5. A cut at a message that does not start a turn splits the turn begun by the nearest
       earlier user, shell-run, custom or summary message; that turn's messages before the cut
       are ``turn_prefix_messages``.

    Args:
        path: the branch, root first (``session.get_branch()``).
        settings: only ``keep_recent_tokens`` is used (tokens).
        file_tools: tool names counted as reading/writing/editing their ``path`` argument.

    Returns:
        The preparation, or None when the path is empty, ends with a compaction, or nothing
        lies before the cut to summarise.
    """
    if not path or isinstance(path[-1], CompactionEntry):
        return None
    n = len(path)

    previous: CompactionEntry | None = None
    previous_index = -1
    for i in range(n - 1, -1, -1):
        entry = path[i]
        if isinstance(entry, CompactionEntry):
            previous, previous_index = entry, i
            break
    boundary = 0
    if previous is not None:
        boundary = next(
            (i for i in range(previous_index) if path[i].id == previous.first_kept_entry_id),
            previous_index + 1,
        )

    messages: list[Message | None] = [
        None if isinstance(e, CompactionEntry) else entry_message(e) for e in path
    ]
    tokens = [0 if m is None else estimate_tokens((m,)) for m in messages]
    blocked = _blocked_positions(messages, boundary)
    cut_points = [
        i
        for i in range(boundary, n)
        if isinstance(messages[i], _CUT_ROLES) and not blocked[i - boundary]
    ]
    if not cut_points:
        return None

    chosen = cut_points[0]  # the budget is never reached: keep everything in range
    kept = 0
    for i in range(n - 1, boundary - 1, -1):
        if tokens[i] == 0:
            continue
        kept += tokens[i]
        if kept >= settings.keep_recent_tokens:
            after = [c for c in cut_points if c >= i]
            chosen = after[0] if after else cut_points[-1]
            break

    cut = chosen
    while cut > boundary and messages[cut - 1] is None:
        if isinstance(path[cut - 1], CompactionEntry):
            break
        cut -= 1

    turn_start: int | None = None
    if not isinstance(messages[chosen], _TURN_START_ROLES):
        turn_start = next(
            (i for i in range(chosen - 1, boundary - 1, -1) if _starts_turn(messages[i])), None
        )
    is_split = turn_start is not None
    history_end = turn_start if turn_start is not None else cut

    to_summarize = [m for m in messages[boundary:history_end] if m is not None]
    prefix = (
        [m for m in messages[turn_start:cut] if m is not None] if turn_start is not None else []
    )
    if not to_summarize and not prefix:
        return None

    files = FileOps(file_tools)
    if previous is not None and not previous.from_hook:
        files.seed(previous.details)
    files.add_messages(to_summarize)
    files.add_messages(prefix)
    read_files, modified_files = files.lists()

    return CompactionPreparation(
        first_kept_entry_id=path[cut].id,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=prefix,
        is_split_turn=is_split,
        tokens_before=context_size(build_context(path).messages).tokens,
        previous_summary=previous.summary if previous is not None else None,
        read_files=read_files,
        modified_files=modified_files,
        leaf_id=path[-1].id,
    )


def _starts_turn(message: Message | None) -> bool:
    return isinstance(message, _TURN_START_ROLES)


def _blocked_positions(messages: Sequence[Message | None], boundary: int) -> list[bool]:
    """For each position from ``boundary`` on: would a cut there separate a tool result kept
    after the cut from its call summarised before it?

    * a result at ``k`` whose call is at ``j`` blocks ``j+1 .. k`` (the call's message itself
      stays a valid cut point: cutting there keeps call and results together);
    * a result whose call is not in the range (an orphan left by an earlier compaction) blocks
      ``boundary .. k``, so it is summarised, never kept.
    """
    n = len(messages)
    size = n - boundary
    diff = [0] * (size + 1)

    def block(start: int, stop: int) -> None:  # positions start..stop-1, absolute
        if start < stop:
            diff[start - boundary] += 1
            diff[stop - boundary] -= 1

    call_at: dict[str, int] = {}
    for i in range(boundary, n):
        m = messages[i]
        if isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                call_at.setdefault(call.id, i)
    for k in range(boundary, n):
        m = messages[k]
        if not isinstance(m, ToolResultMessage):
            continue
        j = call_at.get(m.tool_call_id)
        if j is None:
            block(boundary, k + 1)
        else:
            block(min(j, k) + 1, max(j, k) + 1)

    blocked: list[bool] = []
    depth = 0
    for i in range(size):
        depth += diff[i]
        blocked.append(depth > 0)
    return blocked
