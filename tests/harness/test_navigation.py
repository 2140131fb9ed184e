"""navigate_tree: leaf moves, re-editing, branch summaries, labels, hooks, and reopen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import (
    AgentHarness,
    BranchSummaryEntry,
    BranchSummaryMessage,
    Cancel,
    EntryNotFoundError,
    ExtractiveSummarizer,
    FauxModel,
    JsonlSessionRepo,
    MessageEntry,
    Session,
    SummaryRequest,
    SupplySummary,
    TreeOptions,
    UserMessage,
)


class Recording:
    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return "they tried approach B"


async def two_questions(tmp_path: Path, summarizer: Any = None) -> tuple[AgentHarness, Session]:
    session = await JsonlSessionRepo(tmp_path).create(str(tmp_path))
    h = AgentHarness(
        session=session,
        model=FauxModel(["answer A", "answer B"]),
        summarizer=summarizer or ExtractiveSummarizer(),
    )
    await h.prompt("question A")
    await h.prompt("question B")
    return h, session


def user_entry(session: Session, text: str) -> MessageEntry:
    return next(
        e
        for e in session.entries()
        if isinstance(e, MessageEntry)
        and isinstance(e.message, UserMessage)
        and e.message.text == text
    )


async def test_navigating_to_a_user_message_returns_it_for_re_editing(tmp_path: Path) -> None:
    h, session = await two_questions(tmp_path)
    old_leaf = session.leaf_id
    target = user_entry(session, "question B")
    seen: list[Any] = []
    h.connect("session_tree", lambda s, event: seen.append(event))
    result = await h.navigate_tree(target.id)
    assert result.editor_text == "question B"
    assert session.leaf_id == target.parent_id == result.new_leaf_id
    assert [(e.old_leaf_id, e.new_leaf_id, e.summary_entry_id) for e in seen] == [
        (old_leaf, target.parent_id, None)
    ]
    assert [getattr(m, "text", "") for m in session.build_context().messages] == [
        "question A",
        "answer A",
    ]


async def test_summarize_appends_a_branch_summary_from_the_abandoned_leaf(tmp_path: Path) -> None:
    summarizer = Recording()
    h, session = await two_questions(tmp_path, summarizer)
    old_leaf = session.leaf_id
    target = user_entry(session, "question B")
    result = await h.navigate_tree(
        target.id, summarize=True, custom_instructions="focus on B", label="fork point"
    )
    summary = session.get_entry(result.summary_entry_id or "")
    assert isinstance(summary, BranchSummaryEntry)
    assert summary.from_id == old_leaf and summary.parent_id == target.parent_id
    assert "they tried approach B" in summary.summary
    assert summarizer.requests[0].kind == "branch"
    assert summarizer.requests[0].custom_instructions == "focus on B"
    assert session.get_label(target.id) == "fork point"
    assert session.leaf_id == summary.id
    context = session.build_context().messages
    assert isinstance(context[-1], BranchSummaryMessage)

    reopened = await JsonlSessionRepo(tmp_path).open(session.id)
    assert reopened.leaf_id == session.leaf_id
    assert reopened.get_label(target.id) == "fork point"
    assert reopened.build_context() == session.build_context()


async def test_hooks_cancel_supply_and_change_instructions(tmp_path: Path) -> None:
    summarizer = Recording()
    h, session = await two_questions(tmp_path, summarizer)
    first = session.entry_ids()[0]
    leaf = session.leaf_id

    stop = h.connect("session_before_tree", lambda s, event: Cancel(reason="not now"))
    result = await h.navigate_tree(first)
    assert result.cancelled and session.leaf_id == leaf
    stop()

    stop = h.connect("session_before_tree", lambda s, event: SupplySummary(summary="hook summary"))
    result = await h.navigate_tree(first)  # a hook summary is used even without summarize=True
    summary = session.get_entry(result.summary_entry_id or "")
    assert isinstance(summary, BranchSummaryEntry)
    assert summary.summary == "hook summary" and summary.from_hook is True
    assert summarizer.requests == []
    stop()

    h.connect("session_before_tree", lambda s, event: TreeOptions(custom_instructions="hooked"))
    await h.navigate_tree(leaf, summarize=True)
    assert summarizer.requests[0].custom_instructions == "hooked"


async def test_unknown_target_and_no_op(tmp_path: Path) -> None:
    h, session = await two_questions(tmp_path)
    count = len(session)
    with pytest.raises(EntryNotFoundError):
        await h.navigate_tree("deadbeef")
    result = await h.navigate_tree(session.leaf_id)
    assert not result.cancelled and result.new_leaf_id == session.leaf_id
    assert len(session) == count  # nothing written for either


async def test_navigating_to_none_starts_over(tmp_path: Path) -> None:
    h, session = await two_questions(tmp_path)
    await h.navigate_tree(None)
    assert session.leaf_id is None and session.build_context().messages == ()
    h.model.add("fresh start")  # type: ignore[attr-defined]
    await h.prompt("new root")
    roots = session.get_children(None)
    assert len(roots) == 2  # the first question and the new root
