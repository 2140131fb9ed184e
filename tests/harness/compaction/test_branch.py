"""collect_branch_entries, prepare_branch_entries and summarize_branch."""

from __future__ import annotations

import asyncio

from harness._compaction import (
    BRANCH_SUMMARY_MAX_TOKENS,
    BRANCH_SUMMARY_PREFIX,
    NO_BRANCH_CONTENT,
    ExtractiveSummarizer,
    SummaryRequest,
    collect_branch_entries,
    prepare_branch_entries,
    summarize_branch,
)
from hooks import (
    AssistantMessage,
    CompactionSummaryMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from repos import MemorySessionRepo, Session


class Recorder:
    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        await asyncio.sleep(0)
        return "BRANCH BODY"


def calls(*pairs: tuple[str, str]) -> AssistantMessage:
    return AssistantMessage(
        content=tuple(
            ToolCall(id=f"{name}-{path}", name=name, arguments={"path": path})
            for name, path in pairs
        ),
        stop_reason="toolUse",
    )


async def tree() -> tuple[Session, dict[str, str]]:
    """root: u0 a1; branch A: uA aA(read x, edit y) rA rA2 fA; branch B (from a1): uB."""
    s = await MemorySessionRepo().create("/tmp")
    ids = {}
    ids["u0"] = s.append_message(UserMessage(content="start")).id
    ids["a1"] = s.append_message(AssistantMessage(content="ok")).id
    ids["uA"] = s.append_message(UserMessage(content="Try approach A on the parser.")).id
    ids["aA"] = s.append_message(calls(("read", "x.py"), ("edit", "y.py"))).id
    ids["rA"] = s.append_message(
        ToolResultMessage(tool_call_id="read-x.py", tool_name="read", content="X" * 4000)
    ).id
    ids["rA2"] = s.append_message(
        ToolResultMessage(tool_call_id="edit-y.py", tool_name="edit", content="edited")
    ).id
    ids["fA"] = s.append_message(AssistantMessage(content="Approach A works.")).id
    s.move_to(ids["a1"])
    ids["uB"] = s.append_message(UserMessage(content="Try B instead.")).id
    return s, ids


async def test_collect_entries_back_to_the_common_ancestor() -> None:
    s, ids = await tree()
    entries, ancestor = collect_branch_entries(s, ids["fA"], ids["uB"])
    assert ancestor == ids["a1"]
    assert [e.id for e in entries] == [ids[k] for k in ("uA", "aA", "rA", "rA2", "fA")]
    # moving to an ancestor of the old leaf abandons only what lies below it
    entries, ancestor = collect_branch_entries(s, ids["fA"], ids["aA"])
    assert ancestor == ids["aA"]
    assert [e.id for e in entries] == [ids["rA"], ids["rA2"], ids["fA"]]
    # no old leaf: nothing; no target (before the first entry): the whole branch
    assert collect_branch_entries(s, None, ids["uB"]) == ([], None)
    entries, ancestor = collect_branch_entries(s, ids["uB"], None)
    assert ancestor is None
    assert [e.id for e in entries] == [ids["u0"], ids["a1"], ids["uB"]]


async def test_prepare_branch_entries_excludes_results_but_counts_calls() -> None:
    s, ids = await tree()
    entries, _ = collect_branch_entries(s, ids["fA"], ids["uB"])
    prep = prepare_branch_entries(entries)
    assert [m.role for m in prep.messages] == ["user", "assistant", "assistant"]
    assert prep.read_files == ("x.py",)
    assert prep.modified_files == ("y.py",)
    # a budget keeps the newest messages; file lists still cover everything
    small = prepare_branch_entries(entries, budget_tokens=6)
    assert [m.role for m in small.messages] == ["assistant"]
    assert small.messages[0] == entries[-1].message  # type: ignore[union-attr]
    assert small.total_tokens == 5
    assert small.read_files == ("x.py",) and small.modified_files == ("y.py",)


async def test_summaries_in_the_branch_fit_while_under_90_percent_and_seed_files() -> None:
    s = await MemorySessionRepo().create("/tmp")
    first = s.append_message(UserMessage(content="u" * 40)).id
    s.append_branch_summary(
        first, "s" * 400, details={"readFiles": ["seen.py"], "modifiedFiles": ["made.py"]}
    )
    s.append_branch_summary(first, "h" * 40, details={"readFiles": ["hook.py"]}, from_hook=True)
    s.append_message(AssistantMessage(content="a" * 40))
    entries = s.get_branch()
    # budget 100: the reply (10) and the hook summary (10) fit; the 100-token summary does
    # not, but 20 < 90 so it is taken anyway; then the selection stops
    prep = prepare_branch_entries(entries, budget_tokens=100)
    assert [m.role for m in prep.messages] == ["branchSummary", "branchSummary", "assistant"]
    assert prep.total_tokens == 120
    assert prep.read_files == ("seen.py",)  # not seeded from the hook's summary
    assert prep.modified_files == ("made.py",)
    # at 90% of the budget, a summary that does not fit is not taken
    prep = prepare_branch_entries(entries, budget_tokens=22)
    assert [m.role for m in prep.messages] == ["branchSummary", "assistant"]


async def test_compaction_entries_contribute_their_summary() -> None:
    s = await MemorySessionRepo().create("/tmp")
    first = s.append_message(UserMessage(content="hi")).id
    s.append_compaction("compacted work", first, 10)
    prep = prepare_branch_entries(s.get_branch())
    assert isinstance(prep.messages[1], CompactionSummaryMessage)
    assert prep.messages[1].summary == "compacted work"


async def test_summarize_branch_prefix_tags_and_instructions() -> None:
    s, ids = await tree()
    entries, _ = collect_branch_entries(s, ids["fA"], ids["uB"])
    rec = Recorder()
    summary, details = await summarize_branch(
        entries, rec, custom_instructions="TRIPWIRE", budget_tokens=1000
    )
    assert summary == (
        BRANCH_SUMMARY_PREFIX
        + "BRANCH BODY"
        + "\n\n<read-files>\nx.py\n</read-files>\n\n<modified-files>\ny.py\n</modified-files>"
    )
    assert details == {"readFiles": ["x.py"], "modifiedFiles": ["y.py"]}
    (request,) = rec.requests
    assert request.kind == "branch"
    assert request.custom_instructions == "TRIPWIRE"
    assert request.max_tokens == BRANCH_SUMMARY_MAX_TOKENS
    assert not any(isinstance(m, ToolResultMessage) for m in request.messages)


async def test_empty_branch_gives_fixed_summary_without_asking() -> None:
    rec = Recorder()
    assert await summarize_branch([], rec) == (
        NO_BRANCH_CONTENT,
        {"readFiles": [], "modifiedFiles": []},
    )
    assert rec.requests == []


async def test_extractive_branch_summary() -> None:
    s, ids = await tree()
    entries, _ = collect_branch_entries(s, ids["fA"], ids["uB"])
    summary, _ = await summarize_branch(entries, ExtractiveSummarizer())
    body = summary.removeprefix(BRANCH_SUMMARY_PREFIX)
    assert body.startswith("## Goal\n- Try approach A on the parser.")
    assert "- [x] read `x.py`" in body and "- [x] edit `y.py`" in body
    assert "Assistant: Approach A works." in body
