"""Serialisation, prompts, the model and extractive summarisers, and summarize_compaction."""

from __future__ import annotations

import asyncio

import pytest

from harness._compaction import (
    NO_PRIOR_HISTORY,
    SUMMARIZATION_SYSTEM_PROMPT,
    TURN_CONTEXT_SEPARATOR,
    CompactionPreparation,
    CompactionSettings,
    ExtractiveSummarizer,
    ModelSummarizer,
    SummarizationError,
    Summarizer,
    SummaryRequest,
    build_summary_prompt,
    prepare_compaction,
    serialize_conversation,
    summarize_compaction,
)
from harness._errors import ProviderError
from harness._providers.faux import FauxModel, FauxReply
from hooks import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    HarnessError,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from repos import MemorySessionRepo

GOAL = "Please port the theme loader to Python and keep the public API unchanged."


class Recorder:
    """A Summarizer that records every request and answers with a fixed text per kind."""

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        await asyncio.sleep(0)
        return f"<{request.kind} summary>"


def conversation() -> list[Message]:
    return [
        UserMessage(content=GOAL),
        AssistantMessage(
            content=(
                ThinkingContent(thinking="look at the loader first"),
                TextContent(text="Reading the loader."),
                ToolCall(id="c1", name="read", arguments={"path": "src/theme.ts"}),
                ToolCall(id="c2", name="bash", arguments={"command": "ls src", "timeout": 5}),
            ),
            stop_reason="toolUse",
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="read", content="x" * 2500),
        ToolResultMessage(tool_call_id="c2", tool_name="bash", content="theme.ts\n"),
        AssistantMessage(
            content=(
                ToolCall(id="c3", name="edit", arguments={"path": "src/theme.py", "oldText": "a"}),
            ),
            stop_reason="toolUse",
        ),
        ToolResultMessage(
            tool_call_id="c3", tool_name="edit", content="no match for oldText", is_error=True
        ),
        AssistantMessage(
            content=(ToolCall(id="c4", name="write", arguments={"path": "src/new.py"}),),
            stop_reason="toolUse",
        ),
    ]


# --- serialisation --------------------------------------------------------------------------


def test_serialize_conversation_labels_and_truncation() -> None:
    extra: list[Message] = [
        CustomMessage(custom_type="note", content="a custom note"),
        BashExecutionMessage(command="pytest", output="1 passed", exit_code=0),
        BranchSummaryMessage(summary="explored X", from_id="e1"),
        CompactionSummaryMessage(summary="earlier work", tokens_before=10),
        UserMessage(content=""),  # empty: left out
    ]
    text = serialize_conversation([*conversation(), *extra])
    parts = text.split("\n\n")
    assert parts[0] == f"[User]: {GOAL}"
    assert parts[1] == "[Assistant thinking]: look at the loader first"
    assert parts[2] == "[Assistant]: Reading the loader."
    assert parts[3] == (
        '[Assistant tool calls]: read(path="src/theme.ts"); bash(command="ls src", timeout=5)'
    )
    assert parts[4] == "[Tool result]: " + "x" * 2000
    assert parts[5] == "[... 500 more characters truncated]"
    assert "[Tool result]: theme.ts" in parts[6]
    assert "[User]: a custom note" in text
    assert "[User]: Ran `pytest`" in text
    assert "[Branch summary]: explored X" in text
    assert "[Compaction summary]: earlier work" in text
    assert not text.endswith("[User]: ")


def test_serialize_short_result_is_not_truncated() -> None:
    m = ToolResultMessage(tool_call_id="c", tool_name="read", content="y" * 2000)
    assert serialize_conversation([m]) == "[Tool result]: " + "y" * 2000


# --- prompts --------------------------------------------------------------------------------


def _req(kind: str, **kw: object) -> SummaryRequest:
    return SummaryRequest(kind=kind, messages=conversation(), max_tokens=2000, **kw)  # type: ignore[arg-type]


def test_history_prompt_sections() -> None:
    system, user = build_summary_prompt(_req("history"))
    assert system == SUMMARIZATION_SYSTEM_PROMPT
    assert user.startswith("<conversation>\n[User]: ")
    for heading in (
        "## Goal",
        "## Constraints & Preferences",
        "## Progress",
        "### Done",
        "### In Progress",
        "### Blocked",
        "## Key Decisions",
        "## Next Steps",
        "## Critical Context",
    ):
        assert heading in user
    assert "<previous-summary>" not in user
    assert "Additional focus" not in user


def test_update_prompt_carries_previous_summary() -> None:
    _, user = build_summary_prompt(_req("history", previous_summary="OLD SUMMARY"))
    assert "<previous-summary>\nOLD SUMMARY\n</previous-summary>" in user
    assert user.index("</conversation>") < user.index("<previous-summary>")
    assert "## Critical Context" in user


def test_turn_prefix_and_branch_prompts() -> None:
    _, prefix = build_summary_prompt(_req("turn_prefix", previous_summary="IGNORED"))
    assert "## Original Request" in prefix
    assert "## Early Progress" in prefix
    assert "## Context for Suffix" in prefix
    assert "IGNORED" not in prefix
    _, branch = build_summary_prompt(_req("branch"))
    assert "## Goal" in branch and "## Next Steps" in branch
    assert "## Critical Context" not in branch


@pytest.mark.parametrize("kind", ["history", "turn_prefix", "branch"])
def test_custom_instructions_reach_every_kind(kind: str) -> None:
    _, user = build_summary_prompt(_req(kind, custom_instructions="  TRIPWIRE  "))
    assert user.endswith("\n\nAdditional focus: TRIPWIRE")


def test_summary_request_validation() -> None:
    with pytest.raises(ValueError):
        SummaryRequest(kind="history", messages=(), max_tokens=0)
    with pytest.raises(ValueError):
        SummaryRequest(kind="other", messages=(), max_tokens=10)  # type: ignore[arg-type]


# --- ModelSummarizer ------------------------------------------------------------------------


async def test_model_summarizer_returns_the_faux_text() -> None:
    model = FauxModel(["## Goal\nport the loader\n"])
    summarizer = ModelSummarizer(model, "low")
    assert isinstance(summarizer, Summarizer)
    text = await summarizer.summarize(_req("history", custom_instructions="TRIPWIRE"))
    assert text == "## Goal\nport the loader"
    (request,) = model.requests
    assert request.system_prompt == SUMMARIZATION_SYSTEM_PROMPT
    assert request.tools == ()
    assert request.max_tokens == 2000
    assert request.thinking_level == "low"
    (message,) = request.messages
    assert isinstance(message, UserMessage)
    assert message.text.startswith("<conversation>")
    assert message.text.endswith("Additional focus: TRIPWIRE")
    model.assert_consumed()


async def test_model_summarizer_raises_on_error_reply() -> None:
    model = FauxModel([FauxReply(error="overloaded", retryable=True)])
    with pytest.raises(SummarizationError) as info:
        await ModelSummarizer(model).summarize(_req("turn_prefix"))
    assert info.value.code == "summarization_failed"
    assert isinstance(info.value, HarnessError)
    assert info.value.kind == "turn_prefix"
    assert isinstance(info.value.error, ProviderError)
    assert info.value.error.message == "overloaded"


async def test_model_summarizer_raises_on_empty_reply() -> None:
    with pytest.raises(SummarizationError) as info:
        await ModelSummarizer(FauxModel(["   "])).summarize(_req("branch"))
    assert info.value.error is None
    assert info.value.kind == "branch"


# --- ExtractiveSummarizer -------------------------------------------------------------------


async def test_extractive_history_summary() -> None:
    text = await ExtractiveSummarizer().summarize(_req("history"))
    assert text.startswith("## Goal\n- " + GOAL)
    assert "keep the public API unchanged" in text.split("## Constraints & Preferences")[1]
    done = text.split("### Done")[1].split("###")[0]
    assert "- [x] read `src/theme.ts`" in done
    assert "- [x] bash: `ls src`" in done
    assert "edit `src/theme.py`" not in done  # it failed: Blocked, not Done
    in_progress = text.split("### In Progress")[1].split("###")[0]
    assert "- [ ] write `src/new.py`" in in_progress  # no result: an open call
    blocked = text.split("### Blocked")[1].split("##")[0]
    assert "no match for oldText" in blocked
    critical = text.split("## Critical Context")[1]
    assert "- Files read: `src/theme.ts`" in critical
    assert "- Files modified: `src/new.py`, `src/theme.py`" in critical
    assert "Assistant: Reading the loader." in critical
    assert text == ExtractiveSummarizer().build(_req("history"))  # deterministic


async def test_extractive_focus_and_kinds() -> None:
    s = ExtractiveSummarizer()
    text = await s.summarize(_req("history", custom_instructions="the API"))
    assert text.startswith("**Focus:** the API\n\n## Goal")
    prefix = await s.summarize(_req("turn_prefix", custom_instructions="TRIPWIRE"))
    assert prefix.startswith("**Focus:** TRIPWIRE")
    assert "## Original Request\n- " + GOAL in prefix
    assert "## Early Progress" in prefix and "## Context for Suffix" in prefix
    branch = await s.summarize(_req("branch"))
    assert "## Goal" in branch and "## Next Steps" in branch
    assert "## Critical Context" not in branch


async def test_extractive_iterative_update_keeps_previous_content() -> None:
    s = ExtractiveSummarizer()
    first = s.build(_req("history"))
    previous = first + "\n\n<read-files>\nold/read.md\n</read-files>"
    later: list[Message] = [
        UserMessage(content="Now add tests for the loader."),
        AssistantMessage(
            content=(ToolCall(id="c9", name="write", arguments={"path": "tests/test_theme.py"}),),
            stop_reason="toolUse",
        ),
        ToolResultMessage(tool_call_id="c9", tool_name="write", content="ok"),
        AssistantMessage(content="Tests written."),
    ]
    update = s.build(
        SummaryRequest(kind="history", messages=later, previous_summary=previous, max_tokens=4000)
    )
    goal = update.split("## Constraints")[0]
    assert GOAL in goal and "Now add tests for the loader." in goal
    done = update.split("### Done")[1].split("###")[0]
    assert "- [x] read `src/theme.ts`" in done  # kept from the previous summary
    assert "- [x] write `src/new.py`" in done  # was In Progress, moved to Done
    assert "- [x] write `tests/test_theme.py`" in done  # new
    in_progress = update.split("### In Progress")[1].split("###")[0]
    assert "src/new.py" not in in_progress
    critical = update.split("## Critical Context")[1]
    assert "`old/read.md`" in critical and "`src/theme.ts`" in critical
    assert "`tests/test_theme.py`" in critical
    assert "Assistant: Tests written." in critical
    assert "Reading the loader." not in critical  # old last exchanges replaced
    assert "<read-files>" not in update
    assert update.count("## Goal") == 1


async def test_extractive_update_of_a_model_written_summary() -> None:
    previous = (
        "## Goal\nShip v2\n\n## Progress\n### Done\n- [x] Wrote the parser\n\n"
        "## Open Questions\n- which license?"
        + TURN_CONTEXT_SEPARATOR
        + "## Original Request\nfix the lexer"
    )
    update = ExtractiveSummarizer().build(
        SummaryRequest(
            kind="history",
            messages=[UserMessage(content="and the docs")],
            previous_summary=previous,
            max_tokens=4000,
        )
    )
    assert "Ship v2" in update and "- [x] Wrote the parser" in update
    assert "## Open Questions\n- which license?" in update
    # The split turn's request is folded into the Goal, after the original one.
    assert update.startswith("## Goal\nShip v2\nfix the lexer\n- and the docs\n")
    assert "Turn Context" not in update and "## Original Request" not in update


def test_extractive_respects_max_tokens() -> None:
    text = ExtractiveSummarizer().build(
        _req("history").__class__(kind="history", messages=conversation() * 20, max_tokens=50)
    )
    assert len(text) <= 50 * 4 + len("\n\n[... summary truncated]")


# --- summarize_compaction -------------------------------------------------------------------


def prep_of(**kw: object) -> CompactionPreparation:
    base: dict[str, object] = {
        "first_kept_entry_id": "e9",
        "messages_to_summarize": conversation()[:2],
        "turn_prefix_messages": (),
        "is_split_turn": False,
        "tokens_before": 1234,
        "previous_summary": None,
        "read_files": ("a.py",),
        "modified_files": ("b.py", "c.py"),
    }
    base.update(kw)
    return CompactionPreparation(**base)  # type: ignore[arg-type]


async def test_summarize_compaction_history_only() -> None:
    rec = Recorder()
    summary, details = await summarize_compaction(
        prep_of(previous_summary="PREV"), rec, custom_instructions="FOCUS", reserve_tokens=10_000
    )
    assert summary == (
        "<history summary>\n\n<read-files>\na.py\n</read-files>"
        "\n\n<modified-files>\nb.py\nc.py\n</modified-files>"
    )
    assert details == {"readFiles": ["a.py"], "modifiedFiles": ["b.py", "c.py"]}
    (request,) = rec.requests
    assert request.kind == "history"
    assert request.max_tokens == 8000
    assert request.previous_summary == "PREV"
    assert request.custom_instructions == "FOCUS"


async def test_split_turn_custom_instructions_reach_the_prefix_request() -> None:
    """#9348: /compact TRIPWIRE with a split turn and no earlier history."""
    rec = Recorder()
    prep = prep_of(
        messages_to_summarize=(),
        turn_prefix_messages=conversation()[:4],
        is_split_turn=True,
        read_files=(),
        modified_files=(),
    )
    summary, details = await summarize_compaction(
        prep, rec, custom_instructions="TRIPWIRE", reserve_tokens=16384
    )
    assert summary == NO_PRIOR_HISTORY + TURN_CONTEXT_SEPARATOR + "<turn_prefix summary>"
    assert details == {"readFiles": [], "modifiedFiles": []}
    (request,) = rec.requests
    assert request.kind == "turn_prefix"
    assert request.custom_instructions == "TRIPWIRE"
    assert request.max_tokens == 8192
    _, user = build_summary_prompt(request)
    assert user.endswith("Additional focus: TRIPWIRE")


async def test_split_turn_asks_for_both_with_instructions() -> None:
    rec = Recorder()
    prep = prep_of(turn_prefix_messages=conversation()[:3], is_split_turn=True)
    summary, _ = await summarize_compaction(
        prep, rec, custom_instructions="TRIPWIRE", reserve_tokens=1000
    )
    assert summary.startswith("<history summary>" + TURN_CONTEXT_SEPARATOR + "<turn_prefix ")
    assert sorted((r.kind, r.max_tokens, r.custom_instructions) for r in rec.requests) == [
        ("history", 800, "TRIPWIRE"),
        ("turn_prefix", 500, "TRIPWIRE"),
    ]


async def test_split_turn_without_new_history_keeps_the_previous_summary() -> None:
    rec = Recorder()
    prep = prep_of(
        messages_to_summarize=(),
        turn_prefix_messages=conversation()[:3],
        is_split_turn=True,
        previous_summary="OLD\n\n<read-files>\nx.py\n</read-files>",
    )
    summary, _ = await summarize_compaction(prep, rec, custom_instructions=None, reserve_tokens=100)
    assert summary.startswith("OLD" + TURN_CONTEXT_SEPARATOR)
    assert summary.count("<read-files>") == 1


async def test_a_failing_summary_fails_the_compaction() -> None:
    model = FauxModel([FauxReply(error="boom"), "prefix text"])
    prep = prep_of(turn_prefix_messages=conversation()[:3], is_split_turn=True)
    with pytest.raises(SummarizationError):
        await summarize_compaction(
            prep, ModelSummarizer(model), custom_instructions=None, reserve_tokens=1000
        )


async def test_end_to_end_with_a_session_and_the_extractive_summarizer() -> None:
    session = await MemorySessionRepo().create("/tmp")
    for i in range(6):
        session.append_message(UserMessage(content=f"request {i}: " + "q" * 400))
        session.append_message(
            AssistantMessage(
                content=(ToolCall(id=f"c{i}", name="read", arguments={"path": f"f{i}.py"}),),
                stop_reason="toolUse",
            )
        )
        session.append_message(
            ToolResultMessage(tool_call_id=f"c{i}", tool_name="read", content="r" * 800)
        )
        session.append_message(AssistantMessage(content=f"done {i}"))
    settings = CompactionSettings(keep_recent_tokens=500)
    prep = prepare_compaction(session.get_branch(), settings)
    assert prep is not None
    summary, details = await summarize_compaction(
        prep, ExtractiveSummarizer(), custom_instructions=None, reserve_tokens=16384
    )
    assert "request 0" in summary
    session.append_compaction(
        summary, prep.first_kept_entry_id, prep.tokens_before, details=details
    )
    context = session.build_context().messages
    assert isinstance(context[0], CompactionSummaryMessage)
    assert "<read-files>" in context[0].summary
    # a second compaction after more work updates the first summary
    for i in range(6, 9):
        session.append_message(UserMessage(content=f"request {i}: " + "q" * 400))
        session.append_message(AssistantMessage(content=f"done {i} " + "z" * 800))
    prep2 = prepare_compaction(session.get_branch(), settings)
    assert prep2 is not None
    assert prep2.previous_summary == summary
    assert set(details["readFiles"]) <= set(prep2.read_files)
    summary2, _ = await summarize_compaction(
        prep2, ExtractiveSummarizer(), custom_instructions=None, reserve_tokens=16384
    )
    assert "request 0" in summary2 and "request 6" in summary2
