"""Compaction and tree navigation on a session, with their hooks. Used by ``AgentHarness``,
which makes them exclusive with prompts (pi #9178: a compaction prepared at one leaf must be
committed at that leaf)."""

from __future__ import annotations

from typing import Literal

from attrs import frozen

from hooks import (
    JSONValue,
    SessionBeforeCompactEvent,
    SessionBeforeTreeEvent,
    SessionCompactEvent,
    SessionTreeEvent,
    TextContent,
    UserMessage,
    emit_session_before_compact,
    emit_session_before_tree,
    notify,
)
from repos import (
    CompactionEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    Session,
)

from ._checkpoints.rewind import RewindResult
from ._compaction.branch import collect_branch_entries, summarize_branch
from ._compaction.cut import prepare_compaction
from ._compaction.settings import CompactionSettings
from ._compaction.summarize import Summarizer, summarize_compaction
from ._errors import CompactionCancelledError, CompactionError, InvalidNavigationTargetError

__all__ = ["NavigationResult", "compact_session", "navigate_session"]


@frozen(kw_only=True)
class NavigationResult:
    """What :meth:`AgentHarness.navigate_tree` did.

    Attributes:
        cancelled: a ``session_before_tree`` hook cancelled (nothing was written).
        old_leaf_id, new_leaf_id: the leaf before and after (after: the summary entry when one
            was appended).
        editor_text: the text of the user message navigated to, for re-editing (the leaf is
            put on that message's parent), else None.
        summary_entry_id: the ``branch_summary`` entry appended, if any.
        files: with ``with_files=True``, what putting the files back did (its
            ``harness.rewind`` entry then follows the new leaf), else None.
    """

    cancelled: bool
    old_leaf_id: str | None
    new_leaf_id: str | None
    editor_text: str | None = None
    summary_entry_id: str | None = None
    files: RewindResult | None = None


async def compact_session(
    sender: object,
    session: Session,
    *,
    settings: CompactionSettings,
    summarizer: Summarizer,
    custom_instructions: str | None,
    trigger: Literal["manual", "threshold", "overflow"] = "manual",
    max_output_tokens: int | None = None,
) -> CompactionEntry | None:
    """Compact the session at its current leaf (pi's algorithm, reference §4).

    ``max_output_tokens`` (the model's output limit, from the registry) caps each summary's
    ``max_tokens``, as pi's ``min(0.8 x reserveTokens, model.maxTokens)``.

    Returns:
        The appended compaction entry, or None when there is nothing to compact.

    Raises:
        CompactionError: a hook cancelled (code ``compaction_cancelled`` on the subclass
            :class:`CompactionCancelledError`), a hook supplied a first kept entry that is not on
            the branch, or the leaf moved while the summary was generated.
        SummarizationError: the summariser failed.
    """
    leaf = session.leaf_id
    path = session.get_branch()
    prep = prepare_compaction(path, settings)
    if prep is None:
        return None
    decision = await emit_session_before_compact(
        sender,
        SessionBeforeCompactEvent(
            session_id=session.id,
            leaf_id=leaf,
            first_kept_entry_id=prep.first_kept_entry_id,
            tokens_before=prep.tokens_before,
            custom_instructions=custom_instructions,
            trigger=trigger,
        ),
    )
    if decision.cancelled:
        raise CompactionCancelledError(decision.reason or "no reason given")
    details: JSONValue
    if decision.supplied is not None:
        supplied = decision.supplied
        summary = supplied.summary
        first_kept = (
            supplied.first_kept_entry_id
            if isinstance(supplied.first_kept_entry_id, str)
            else prep.first_kept_entry_id
        )
        tokens_before = (
            supplied.tokens_before
            if isinstance(supplied.tokens_before, int)
            else prep.tokens_before
        )
        details, from_hook = supplied.details, True
        if first_kept not in {e.id for e in path}:
            raise CompactionError(
                f"a session_before_compact hook supplied first_kept_entry_id {first_kept!r}, "
                "which is not on the current branch"
            )
    else:
        summary, details = await summarize_compaction(
            prep,
            summarizer,
            custom_instructions=custom_instructions,
            reserve_tokens=settings.reserve_tokens,
            max_output_tokens=max_output_tokens,
        )
        first_kept, tokens_before, from_hook = prep.first_kept_entry_id, prep.tokens_before, False
    if session.leaf_id != leaf:
        raise CompactionError(
            f"the leaf moved from {leaf!r} to {session.leaf_id!r} while compacting; not committed"
        )
    entry = session.append_compaction(
        summary, first_kept, tokens_before, details=details, from_hook=from_hook
    )
    session.save_point()
    await notify(
        sender, SessionCompactEvent(session_id=session.id, entry_id=entry.id, from_hook=from_hook)
    )
    return entry


async def navigate_session(
    sender: object,
    session: Session,
    target_id: str | None,
    *,
    summarize: bool,
    custom_instructions: str | None,
    label: str | None,
    summarizer: Summarizer,
    budget_tokens: int,
) -> NavigationResult:
    """Move the session's leaf to ``target_id`` (see :meth:`AgentHarness.navigate_tree`).

    Raises:
        EntryNotFoundError: ``target_id`` is not in the session.
        InvalidNavigationTargetError: ``target_id`` is a ``label`` or ``leaf`` entry.
        SummarizationError: the branch summary failed (nothing was written).
    """
    old = session.leaf_id
    if target_id is not None:
        found = session.get_entry(target_id)  # raises EntryNotFoundError before any hook runs
        if isinstance(found, LabelEntry | LeafEntry):
            raise InvalidNavigationTargetError(target_id, found.type, found.target_id)
    if target_id == old:
        return NavigationResult(cancelled=False, old_leaf_id=old, new_leaf_id=old)
    decision = await emit_session_before_tree(
        sender,
        SessionBeforeTreeEvent(
            session_id=session.id,
            target_id=target_id,
            old_leaf_id=old,
            summarize=summarize,
            custom_instructions=custom_instructions,
            label=label,
        ),
    )
    if decision.cancelled:
        return NavigationResult(cancelled=True, old_leaf_id=old, new_leaf_id=old)

    new_leaf, editor_text = target_id, None
    target = session.get_entry(target_id) if target_id is not None else None
    if isinstance(target, MessageEntry) and isinstance(target.message, UserMessage):
        new_leaf, editor_text = target.parent_id, target.message.text
    elif isinstance(target, CustomMessageEntry):
        new_leaf = target.parent_id
        editor_text = (
            target.content
            if isinstance(target.content, str)
            else "\n".join(b.text for b in target.content if isinstance(b, TextContent))
        )

    summary: str | None = None
    details: JSONValue = None
    from_hook = decision.summary is not None
    if decision.summary is not None:
        summary, details = decision.summary.summary, decision.summary.details
    elif summarize and old is not None:
        entries, _ = collect_branch_entries(session, old, new_leaf)
        summary, details = await summarize_branch(
            entries,
            summarizer,
            custom_instructions=decision.custom_instructions,
            budget_tokens=budget_tokens,
        )

    session.move_to(new_leaf)
    summary_entry_id = None
    if summary is not None and old is not None:
        entry = session.append_branch_summary(old, summary, details=details, from_hook=from_hook)
        summary_entry_id = entry.id
    if decision.label and target_id is not None:
        session.set_label(target_id, decision.label)
        session.move_to(summary_entry_id or new_leaf)  # a label entry must not become the leaf
    session.save_point()
    await notify(
        sender,
        SessionTreeEvent(
            session_id=session.id,
            old_leaf_id=old,
            new_leaf_id=session.leaf_id,
            summary_entry_id=summary_entry_id,
            from_hook=from_hook,
        ),
    )
    return NavigationResult(
        cancelled=False,
        old_leaf_id=old,
        new_leaf_id=session.leaf_id,
        editor_text=editor_text,
        summary_entry_id=summary_entry_id,
    )
